//! A dump's bytes, as a `Blob` the worker reads in chunks: fetched by URL (what `?src=` and
//! `?against-src=` name), or the files a reader chose or dropped (a file is a `Blob`: nothing
//! is read on the page). An XLA dump is a pair of files, joined here.

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::error::{FetchFailure, WebError};

/// Fetches the dump at `url`: its bytes, with an XLA buffer assignment's live range (the file
/// beside it, by name) after them, as `memplan_formats::xla` reads the pair.
pub async fn fetch_dump(url: &str) -> Result<web_sys::Blob, WebError> {
    let bytes = fetch_blob(url).await?;
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
    let other = fetch_blob(&companion).await?;
    joined(&[bytes, other]).await
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

/// The dump `files` hold (one dump, or an XLA pair, joined).
pub async fn read_files(files: &[web_sys::File]) -> Result<web_sys::Blob, WebError> {
    let blobs: Vec<web_sys::Blob> = files.iter().map(|f| f.clone().into()).collect();
    match &blobs[..] {
        [_, _] => joined(&blobs).await,
        [one, ..] => Ok(one.clone()),
        [] => Ok(blob_of(&[])),
    }
}

/// `bytes` as a `Blob`.
pub fn blob_of(bytes: &[u8]) -> web_sys::Blob {
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    web_sys::Blob::new_with_u8_array_sequence(&parts).expect("a Blob of bytes")
}

/// The bytes of `blob`, read whole.
pub async fn bytes_of(blob: &web_sys::Blob) -> Result<Vec<u8>, WebError> {
    let name = blob
        .dyn_ref::<web_sys::File>()
        .map_or_else(|| "the dump".to_string(), web_sys::File::name);
    let buffer = JsFuture::from(blob.array_buffer())
        .await
        .map_err(|_| WebError::FileUnreadable { name })?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

/// An XLA pair (the buffer assignment first) as `memplan_formats::xla` reads it.
async fn joined(pair: &[web_sys::Blob]) -> Result<web_sys::Blob, WebError> {
    let assignment = bytes_of(&pair[0]).await?;
    let live_range = bytes_of(&pair[1]).await?;
    Ok(blob_of(&memplan_formats::xla::join(
        &assignment,
        &live_range,
    )))
}

/// Fetches `url` (no credentials): its bytes, whatever the format (a browser may keep a large
/// one on disk).
pub async fn fetch_blob(url: &str) -> Result<web_sys::Blob, WebError> {
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
    let body = response.blob().map_err(|_| fail(FetchFailure::Body))?;
    JsFuture::from(body)
        .await
        .ok()
        .and_then(|b| b.dyn_into().ok())
        .ok_or(fail(FetchFailure::Body))
}
