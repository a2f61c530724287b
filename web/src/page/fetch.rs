//! Fetching a dump by URL: what `?src=` and `?against-src=` name.

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::error::{FetchFailure, WebError};

/// Fetches `url` (no credentials): its bytes, whatever the format.
pub async fn fetch_bytes(url: &str) -> Result<js_sys::ArrayBuffer, WebError> {
    let fail = |reason| WebError::Fetch {
        url: url.to_string(),
        reason,
    };
    let window =
        web_sys::window().ok_or(WebError::Browser(crate::error::BrowserStep::FindWindow))?;
    let init = web_sys::RequestInit::new();
    init.set_credentials(web_sys::RequestCredentials::Omit);
    init.set_mode(web_sys::RequestMode::Cors);
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init(url, &init))
        .await
        .ok()
        .and_then(|r| r.dyn_into().ok())
        .ok_or(fail(FetchFailure::Network))?;
    if !response.ok() {
        return Err(fail(FetchFailure::Status(response.status())));
    }
    let body = response
        .array_buffer()
        .map_err(|_| fail(FetchFailure::Body))?;
    JsFuture::from(body)
        .await
        .ok()
        .and_then(|b| b.dyn_into().ok())
        .ok_or(fail(FetchFailure::Body))
}
