//! Exports: the current view as SVG (memplan-render, the drawing `memplan render` makes) or PNG
//! (the canvas), the plan as JSON (the `memplan plan --json` report) or minimalloc CSV.

use memplan_render::color::ColorBy;
use memplan_render::scene::Viewport;
use memplan_render::svg::{SvgOptions, arena_svg, timeline_svg};
use wasm_bindgen::JsCast;

use crate::analysis::Analysis;
use crate::error::WebError;
use crate::url_state::Tab;

/// The SVG of a view: `window` and `rows` as the screen shows them.
pub fn view_svg(
    a: &Analysis,
    tab: Tab,
    device: usize,
    rows: &[usize],
    window: Option<Viewport>,
    color_by: ColorBy,
) -> Result<String, WebError> {
    let options = SvgOptions {
        color_by,
        ..SvgOptions::default()
    };
    match tab {
        Tab::Arena => arena_svg(&a.model, device, window, options),
        Tab::Timeline => timeline_svg(
            &a.model,
            device,
            rows,
            window.map(|v| (v.x0, v.x1)),
            options,
        ),
    }
    .map_err(WebError::from)
}

/// A file name from the source: `model.json` -> `model.<suffix>`.
pub fn file_name(source: &str, suffix: &str) -> String {
    let base = source.rsplit(['/', '\\']).next().unwrap_or(source);
    let stem = base.split('?').next().unwrap_or(base);
    let stem = stem.rsplit_once('.').map_or(stem, |(s, _)| s);
    let stem: String = stem
        .chars()
        .filter(|c| c.is_alphanumeric() || "-_.".contains(*c))
        .collect();
    format!(
        "{}.{suffix}",
        if stem.is_empty() { "memplan" } else { &stem }
    )
}

/// Makes the browser download `text` as `name`.
pub fn download_text(name: &str, mime: &str, text: &str) -> Result<(), WebError> {
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|_| WebError::Browser("make a blob of the file"))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|_| WebError::Browser("make a URL of the file"))?;
    let result = download_url(name, &url);
    let _ = web_sys::Url::revoke_object_url(&url);
    result
}

/// Makes the browser download `url` (a blob or data URL) as `name`.
pub fn download_url(name: &str, url: &str) -> Result<(), WebError> {
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or(WebError::Browser("find the document"))?;
    let a: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .ok()
        .and_then(|e| e.dyn_into().ok())
        .ok_or(WebError::Browser("make a download link"))?;
    a.set_href(url);
    a.set_download(name);
    a.click();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_the_stem_and_drop_anything_unsafe() {
        assert_eq!(
            file_name("models/resnet.onnx.json", "svg"),
            "resnet.onnx.svg"
        );
        assert_eq!(
            file_name("https://x.org/a/b.csv?token=1", "plan.json"),
            "b.plan.json"
        );
        assert_eq!(file_name("<script>", "png"), "script.png");
        assert_eq!(file_name("", "csv"), "memplan.csv");
    }
}
