//! Exports: the current view as SVG (memplan-render, the drawing `memplan render` makes) or PNG
//! (the canvas), the plan as JSON (the `memplan plan --json` report) or minimalloc CSV.

use memplan_render::ViewModel;
use memplan_render::color::ColorBy;
use memplan_render::scene::Viewport;
use memplan_render::svg::{SvgOptions, arena_svg, timeline_svg};
use wasm_bindgen::JsCast;

use crate::analysis::Analysis;
use crate::error::{BrowserStep, WebError};
use crate::page::url::Tab;

/// The SVG of a view of `model`: `window` and `rows` as the screen shows them, at the size
/// `memplan render` draws.
pub fn view_svg(
    model: &ViewModel,
    tab: Tab,
    device: usize,
    rows: &[usize],
    window: Option<Viewport>,
    color_by: ColorBy,
    arena_only: bool,
) -> Result<String, WebError> {
    let options = SvgOptions {
        color_by,
        arena_only,
        ..SvgOptions::default()
    };
    match tab {
        Tab::Arena => arena_svg(model, device, window, options),
        Tab::Timeline => timeline_svg(model, device, rows, window.map(|v| (v.x0, v.x1)), options),
    }
    .map_err(WebError::from)
}

/// `text` broken at spaces into lines no wider than `width` by `measure` (a word wider than a
/// line alone keeps its own line: a title is never cut mid-word).
pub fn wrap_words(text: &str, width: f64, measure: impl Fn(&str) -> f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if !line.is_empty() && measure(&candidate) > width {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        } else {
            line = candidate;
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// What the PNG's footer says: the scenario the plan was made under (strategy, order, flips,
/// params), so a picture in a review says how to make it again.
fn footer_text(a: &Analysis) -> String {
    let s = &a.scenario;
    let flips = match s.flips.len() {
        0 => "no flips".to_string(),
        n => format!("{n} flips: {}", s.flips.join(", ")),
    };
    let params = if a.params.is_empty() {
        String::new()
    } else {
        let values: Vec<String> = a.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(" · params {}", values.join(", "))
    };
    let classes = if s.precision_classes {
        ""
    } else {
        " · precision classes off"
    };
    let order = if s.order.is_given() {
        String::new()
    } else {
        format!(" · order {}", s.order)
    };
    format!(
        "strategy {}{order} · {flips}{params}{classes} · {} · memplan",
        s.strategy, a.source
    )
}

/// The view's canvas as a PNG data URL at the canvas's resolution (the device pixel ratio's),
/// with a title band above the drawing (the dump's title whole, wrapped; the device, view,
/// footprint and lower bound; the color legend) and a footer naming the strategy, flips and
/// params the plan was made under.
pub fn view_png(
    a: &Analysis,
    tab: Tab,
    color_by: ColorBy,
    device: usize,
) -> Result<String, WebError> {
    const MARGIN: f64 = 10.0;
    const TITLE_LINE: f64 = 18.0;
    const LINE: f64 = 16.0;
    const TITLE_FONT: &str = "bold 14px system-ui, sans-serif";
    const FONT: &str = "12px system-ui, sans-serif";
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or(WebError::Browser(BrowserStep::FindDocument))?;
    let view: web_sys::HtmlCanvasElement = document
        .query_selector(&format!("[data-testid={}-canvas]", tab.name()))
        .ok()
        .flatten()
        .and_then(|e| e.dyn_into().ok())
        .ok_or(WebError::Browser(BrowserStep::FindCanvas))?;
    let out: web_sys::HtmlCanvasElement = document
        .create_element("canvas")
        .ok()
        .and_then(|e| e.dyn_into().ok())
        .ok_or(WebError::Browser(BrowserStep::MakeCanvas))?;
    let context =
        |c: &web_sys::HtmlCanvasElement| -> Result<web_sys::CanvasRenderingContext2d, WebError> {
            c.get_context("2d")
                .ok()
                .flatten()
                .and_then(|c| c.dyn_into().ok())
                .ok_or(WebError::Browser(BrowserStep::Draw))
        };
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
    let (w, h) = (f64::from(view.width()), f64::from(view.height()));
    let width = w / dpr;
    let m = &a.model;
    let d = &m.devices[m.clamp_device(device)];
    let title = if m.title.is_empty() {
        &a.source
    } else {
        &m.title
    };
    let view_name = match tab {
        Tab::Arena => "arena map",
        Tab::Timeline => "live spans",
    };
    let figures = format!(
        "{} · {view_name} · footprint {} · lower bound {}",
        d.id,
        memplan_human::bytes(d.footprint_bytes),
        memplan_human::bytes(d.lower_bound),
    );

    // Measure first: sizing the canvas resets its context.
    let ctx = context(&out)?;
    let measure = |font: &str| {
        ctx.set_font(font);
        let ctx = ctx.clone();
        move |t: &str| {
            ctx.measure_text(t)
                .map_or(t.len() as f64 * 8.0, |m| m.width())
        }
    };
    let title_lines = wrap_words(title, width - 2.0 * MARGIN, measure(TITLE_FONT));
    let figure_lines = wrap_words(&figures, width - 2.0 * MARGIN, measure(FONT));
    let footer_lines = wrap_words(&footer_text(a), width - 2.0 * MARGIN, measure(FONT));
    let legend_entries = memplan_render::color::legend(m, color_by);
    let mut legend_rows = 1.0;
    let mut placed = Vec::with_capacity(legend_entries.len());
    let mut x = MARGIN;
    {
        let text_width = measure(FONT);
        for (label, color) in &legend_entries {
            let entry = 26.0 + text_width(label);
            if x > MARGIN && x + entry > width - MARGIN {
                legend_rows += 1.0;
                x = MARGIN;
            }
            placed.push((x, legend_rows - 1.0, label.clone(), color.css()));
            x += entry;
        }
    }
    let head = 8.0
        + TITLE_LINE * title_lines.len() as f64
        + LINE * figure_lines.len() as f64
        + LINE * legend_rows
        + 6.0;
    let foot = 6.0 + LINE * footer_lines.len() as f64 + 4.0;
    out.set_width(view.width());
    out.set_height((h + (head + foot) * dpr).round() as u32);
    let ctx = context(&out)?;
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, 0.0, w, h + (head + foot) * dpr);
    let _ = ctx.scale(dpr, dpr);
    ctx.set_text_baseline("top");
    let mut y = 8.0;
    ctx.set_fill_style_str("#1b1f24");
    ctx.set_font(TITLE_FONT);
    for line in &title_lines {
        let _ = ctx.fill_text(line, MARGIN, y);
        y += TITLE_LINE;
    }
    ctx.set_font(FONT);
    ctx.set_fill_style_str("#3b4450");
    for line in &figure_lines {
        let _ = ctx.fill_text(line, MARGIN, y);
        y += LINE;
    }
    for (x, row, label, css) in &placed {
        let top = y + row * LINE;
        ctx.set_fill_style_str(css);
        ctx.fill_rect(*x, top + 1.0, 12.0, 12.0);
        ctx.set_fill_style_str("#5b6470");
        let _ = ctx.fill_text(label, x + 16.0, top);
    }
    let mut y = head + h / dpr + 6.0;
    ctx.set_fill_style_str("#3b4450");
    for line in &footer_lines {
        let _ = ctx.fill_text(line, MARGIN, y);
        y += LINE;
    }
    let _ = ctx.set_transform(1.0, 0.0, 0.0, 1.0, 0.0, 0.0);
    ctx.draw_image_with_html_canvas_element(&view, 0.0, (head * dpr).round())
        .map_err(|_| WebError::Browser(BrowserStep::CopyView))?;
    out.to_data_url_with_type("image/png")
        .map_err(|_| WebError::Browser(BrowserStep::ReadPng))
}

/// Makes the browser download `text` as `name`.
pub fn download_text(name: &str, mime: &str, text: &str) -> Result<(), WebError> {
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|_| WebError::Browser(BrowserStep::MakeBlob))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|_| WebError::Browser(BrowserStep::MakeUrl))?;
    let result = download_url(name, &url);
    let _ = web_sys::Url::revoke_object_url(&url);
    result
}

/// Makes the browser download `url` (a blob or data URL) as `name`.
pub fn download_url(name: &str, url: &str) -> Result<(), WebError> {
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or(WebError::Browser(BrowserStep::FindDocument))?;
    let a: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .ok()
        .and_then(|e| e.dyn_into().ok())
        .ok_or(WebError::Browser(BrowserStep::MakeLink))?;
    a.set_href(url);
    a.set_download(name);
    a.click();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::wrap_words;

    #[test]
    fn words_wrap_at_spaces_and_a_long_word_keeps_a_line_of_its_own() {
        let chars = |t: &str| t.chars().count() as f64;
        assert_eq!(
            wrap_words("Transformer training step (32 blocks)", 20.0, chars),
            vec!["Transformer training", "step (32 blocks)"]
        );
        assert_eq!(
            wrap_words("a averyveryverylongword b", 5.0, chars),
            vec!["a", "averyveryverylongword", "b"]
        );
        assert_eq!(wrap_words("  ", 10.0, chars), Vec::<String>::new());
        let whole = "one two three four five six seven";
        let lines = wrap_words(whole, 9.0, chars);
        assert_eq!(lines.join(" "), whole);
        assert!(lines.iter().all(|l| chars(l) <= 9.0), "{lines:?}");
    }
}
