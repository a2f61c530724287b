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

/// The view's canvas as a PNG data URL, with a title band (the dump, the view, the device's
/// footprint and lower bound) and the color legend above the drawing.
pub fn view_png(
    a: &Analysis,
    tab: Tab,
    color_by: ColorBy,
    device: usize,
) -> Result<String, WebError> {
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
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
    let band = 52.0;
    let (w, h) = (f64::from(view.width()), f64::from(view.height()));
    out.set_width(view.width());
    out.set_height((h + band * dpr).round() as u32);
    let ctx: web_sys::CanvasRenderingContext2d = out
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .ok_or(WebError::Browser(BrowserStep::Draw))?;
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, 0.0, w, h + band * dpr);
    let _ = ctx.scale(dpr, dpr);
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
    ctx.set_fill_style_str("#1b1f24");
    ctx.set_font("bold 14px system-ui, sans-serif");
    let _ = ctx.fill_text(
        &format!(
            "{title} · {} · {view_name} · footprint {} · lower bound {} · {}",
            d.id,
            memplan_human::bytes(d.footprint_bytes),
            memplan_human::bytes(d.lower_bound),
            a.scenario.strategy
        ),
        10.0,
        20.0,
    );
    ctx.set_font("12px system-ui, sans-serif");
    let mut x = 10.0;
    for (label, color) in memplan_render::color::legend(m, color_by) {
        ctx.set_fill_style_str(&color.css());
        ctx.fill_rect(x, 32.0, 12.0, 12.0);
        ctx.set_fill_style_str("#5b6470");
        let _ = ctx.fill_text(&label, x + 16.0, 42.0);
        x += 26.0 + ctx.measure_text(&label).map_or(60.0, |m| m.width());
    }
    let _ = ctx.set_transform(1.0, 0.0, 0.0, 1.0, 0.0, 0.0);
    ctx.draw_image_with_html_canvas_element(&view, 0.0, band * dpr)
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
