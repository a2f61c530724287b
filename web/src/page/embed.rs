//! The embedding API: a page that embeds the explorer in an iframe hands it a dump without a URL,
//! by `postMessage` (as Perfetto's UI takes traces).
//!
//! Once it listens, the explorer posts `{memplan: 1, type: "ready"}` to its parent. The parent
//! then posts `{memplan: 1, type: "load", name: "model.onnx", bytes: ArrayBuffer}` (a `Blob` or
//! `File` as `bytes`, or `text: "..."`, do too); the dump loads in the worker like a dropped
//! file. Messages without
//! `memplan: 1` are not ours and are ignored; a malformed one of ours is named in the banner.
//! Any origin may post: a dump is data, shown as text, never run.
//!
//! A posted dump cannot travel in a link, so "open in memplan" hands it over: the embed keeps
//! the bytes it was posted, opens the whole explorer with `posted=NAME` (and itself as the
//! opener), and when that page says `ready` to its opener, posts it the bytes as its own host
//! did. Opened any other way, that page says plainly that the dump was posted.

use crate::error::WebError;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::page::state::{Origin, PageState};

/// What a message asks, once read.
#[derive(Debug)]
enum Message {
    Load {
        name: String,
        blob: web_sys::Blob,
    },
    /// A page this embed opened is listening.
    Ready,
}

thread_local! {
    /// The dump the host posted last, to hand to the whole explorer this embed opens.
    static POSTED: std::cell::RefCell<Option<(String, web_sys::Blob)>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether the dump shown was posted and its bytes are kept to hand over.
pub fn holds_posted() -> bool {
    POSTED.with(|p| p.borrow().is_some())
}

/// `{memplan: 1, type}` with `fields`.
fn message(kind: &str, fields: &[(&str, wasm_bindgen::JsValue)]) -> js_sys::Object {
    let m = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&m, &"memplan".into(), &1.into());
    let _ = js_sys::Reflect::set(&m, &"type".into(), &kind.into());
    for (key, value) in fields {
        let _ = js_sys::Reflect::set(&m, &(*key).into(), value);
    }
    m
}

fn field(data: &wasm_bindgen::JsValue, key: &str) -> wasm_bindgen::JsValue {
    js_sys::Reflect::get(data, &key.into()).unwrap_or(wasm_bindgen::JsValue::UNDEFINED)
}

/// Reads a message: `None` when it is not ours, `Err` when it is ours and malformed.
fn read(data: &wasm_bindgen::JsValue) -> Option<Result<Message, WebError>> {
    if !data.is_object() || field(data, "memplan").as_f64() != Some(1.0) {
        return None;
    }
    let kind = field(data, "type").as_string().unwrap_or_default();
    Some(match kind.as_str() {
        "load" => {
            let name = field(data, "name")
                .as_string()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "posted.json".into());
            let bytes = field(data, "bytes");
            let text = field(data, "text");
            let blob = if let Ok(buffer) = bytes.clone().dyn_into::<js_sys::ArrayBuffer>() {
                Some(crate::page::fetch::blob_of(
                    &js_sys::Uint8Array::new(&buffer).to_vec(),
                ))
            } else if let Ok(blob) = bytes.dyn_into::<web_sys::Blob>() {
                Some(blob)
            } else {
                text.as_string()
                    .map(|text| crate::page::fetch::blob_of(text.as_bytes()))
            };
            if let Some(blob) = blob {
                Ok(Message::Load { name, blob })
            } else {
                Err(WebError::PostedNoBytes { name })
            }
        }
        "ready" => Ok(Message::Ready),
        other => Err(WebError::PostedUnknown {
            kind: other.to_string(),
        }),
    })
}

/// Listens for the parent's messages and tells it the explorer is ready.
pub fn listen(state: PageState) {
    // Dropping the handle leaves the listener in place: it lasts as long as the page.
    let _listener =
        window_event_listener(
            leptos::ev::message,
            move |e: web_sys::MessageEvent| match read(&e.data()) {
                None => {}
                Some(Ok(Message::Load { name, blob })) => {
                    let origin = Origin {
                        posted: Some(name.clone()),
                        ..Origin::default()
                    };
                    if state.embed {
                        POSTED.with(|p| *p.borrow_mut() = Some((name.clone(), blob.clone())));
                    }
                    state.load_another(blob, &name, origin);
                }
                Some(Ok(Message::Ready)) => {
                    // Another page's window is of another realm: not `instanceof` this one's
                    // Window, so it is taken unchecked (only `postMessage` is called on it).
                    let Some(source) = e.source() else { return };
                    let target = source.unchecked_into::<web_sys::Window>();
                    POSTED.with(|p| {
                        if let Some((name, blob)) = &*p.borrow() {
                            let load =
                                message("load", &[("name", name.into()), ("bytes", blob.into())]);
                            let _ = target.post_message(&load, "*");
                        }
                    });
                }
                Some(Err(message)) => state.error.set(Some(message)),
            },
        );
    let Some(window) = web_sys::window() else {
        return;
    };
    let ready = message("ready", &[]);
    if let Ok(Some(parent)) = window.parent()
        && !js_sys::Object::is(&parent, &window)
    {
        let _ = parent.post_message(&ready, "*");
    }
    // A whole explorer an embed opened for its posted dump asks the embed for it.
    if state
        .missing_file
        .with_untracked(|m| m.as_ref().is_some_and(|m| m.posted))
        && let Ok(opener) = window.opener()
        && opener.is_object()
    {
        let opener = opener.unchecked_into::<web_sys::Window>();
        let _ = opener.post_message(&ready, "*");
    }
}
