//! A dump's bytes: fetched by URL (what `?src=` and `?against-src=` name), or read from the
//! files a reader chose or dropped. An XLA dump is a pair of files, joined here.

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::error::{FetchFailure, WebError};

/// Fetches the dump at `url`: its bytes, with an XLA buffer assignment's live range (the file
/// beside it, by name) after them, as `memplan_formats::xla` reads the pair.
pub async fn fetch_dump(url: &str) -> Result<js_sys::ArrayBuffer, WebError> {
    let bytes = fetch_bytes(url).await?;
    let (path, query) = url
        .split_once('?')
        .map_or((url, None), |(p, q)| (p, Some(q)));
    let Some(companion) = memplan_formats::xla::companion(path) else {
        return Ok(bytes);
    };
    let companion = match query {
        Some(q) => format!("{companion}?{q}"),
        None => companion,
    };
    let other = fetch_bytes(&companion).await?;
    Ok(joined(&bytes, &other))
}

/// The files to read of those chosen or dropped together: an XLA buffer assignment with its live
/// range (the pair `memplan_formats::xla` reads), else the first.
pub fn dump_files(list: &web_sys::FileList) -> Vec<web_sys::File> {
    let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
    let names: Vec<String> = files.iter().map(web_sys::File::name).collect();
    match memplan_formats::xla::pairs(&names).first() {
        Some(&(a, l)) => vec![files[a].clone(), files[l].clone()],
        None => files.into_iter().take(1).collect(),
    }
}

/// The bytes of `files` (one dump, or an XLA pair), joined.
pub async fn read_files(files: &[web_sys::File]) -> Result<js_sys::ArrayBuffer, WebError> {
    let mut parts = Vec::with_capacity(files.len());
    for file in files {
        let buffer = JsFuture::from(file.array_buffer())
            .await
            .map_err(|_| WebError::FileUnreadable { name: file.name() })?;
        parts.push(buffer.unchecked_into::<js_sys::ArrayBuffer>());
    }
    Ok(match &parts[..] {
        [assignment, live_range] => joined(assignment, live_range),
        [one, ..] => one.clone(),
        [] => js_sys::ArrayBuffer::new(0),
    })
}

/// An XLA pair as `memplan_formats::xla` reads it (the buffer assignment first).
fn joined(
    assignment: &js_sys::ArrayBuffer,
    live_range: &js_sys::ArrayBuffer,
) -> js_sys::ArrayBuffer {
    let bytes = |b: &js_sys::ArrayBuffer| js_sys::Uint8Array::new(b).to_vec();
    let text = memplan_formats::xla::join(&bytes(assignment), &bytes(live_range));
    js_sys::Uint8Array::from(&text[..]).buffer()
}

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
