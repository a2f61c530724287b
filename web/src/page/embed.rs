//! The embedding API: a page that embeds the explorer in an iframe hands it a dump without a URL,
//! by `postMessage` (as Perfetto's UI takes traces).
//!
//! Once it listens, the explorer posts `{memplan: 1, type: "ready"}` to its parent. The parent
//! then posts `{memplan: 1, type: "load", name: "model.onnx", bytes: ArrayBuffer}` (or `text:
//! "..."` instead of `bytes`); the dump loads in the worker like a dropped file. Messages without
//! `memplan: 1` are not ours and are ignored; a malformed one of ours is named in the banner.
//! Any origin may post: a dump is data, shown as text, never run.

use crate::error::WebError;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::page::state::{Origin, PageState};

/// What a message asks, once read.
#[derive(Debug)]
enum Message {
    Load {
        name: String,
        bytes: js_sys::ArrayBuffer,
    },
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
            if let Ok(buffer) = bytes.clone().dyn_into::<js_sys::ArrayBuffer>() {
                Ok(Message::Load {
                    name,
                    bytes: buffer,
                })
            } else if let Some(text) = text.as_string() {
                let array = js_sys::Uint8Array::from(text.as_bytes());
                Ok(Message::Load {
                    name,
                    bytes: array.buffer(),
                })
            } else {
                Err(WebError::PostedNoBytes { name })
            }
        }
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
                Some(Ok(Message::Load { name, bytes })) => {
                    state.forget_flips();
                    let origin = Origin {
                        file: Some(name.clone()),
                        ..Origin::default()
                    };
                    state.load(bytes, &name, origin);
                }
                Some(Err(message)) => state.error.set(Some(message)),
            },
        );
    let Some(window) = web_sys::window() else {
        return;
    };
    if let Ok(Some(parent)) = window.parent()
        && !js_sys::Object::is(&parent, &window)
    {
        let ready = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&ready, &"memplan".into(), &1.into());
        let _ = js_sys::Reflect::set(&ready, &"type".into(), &"ready".into());
        let _ = parent.post_message(&ready, "*");
    }
}
