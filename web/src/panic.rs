//! A panic must not leave a dead page: the hook logs it to the console and shows it in an error
//! banner written straight into the DOM (the reactive system may be unusable after a panic).

use wasm_bindgen::JsCast;

/// The id of the banner a panic shows.
pub const PANIC_BANNER_ID: &str = "panic-banner";

pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        show_banner(&format!(
            "memplan hit a bug and stopped this action: {info}. Reload the page to continue; please report it."
        ));
    }));
}

/// Shows `message` (as text) in the panic banner, creating it on first use.
pub fn show_banner(message: &str) {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let banner = match document.get_element_by_id(PANIC_BANNER_ID) {
        Some(b) => b,
        None => {
            let Ok(b) = document.create_element("div") else {
                return;
            };
            b.set_id(PANIC_BANNER_ID);
            let _ = b.set_attribute("class", "error-banner");
            let _ = b.set_attribute("role", "alert");
            let _ = b.set_attribute("data-testid", "error");
            if let Some(body) = document.body() {
                let _ = body.prepend_with_node_1(&b);
            }
            b
        }
    };
    if let Some(b) = banner.dyn_ref::<web_sys::HtmlElement>() {
        b.set_inner_text(message);
    }
}
