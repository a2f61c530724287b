//! The Web Worker: loads and plans off the main thread, so the page stays responsive and a load
//! can be cancelled (by terminating the worker). All logic is in `worker_protocol::Worker`.

use std::cell::RefCell;

use memplan_web::worker_protocol::{Request, Response, Worker};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

/// Reads `{request, bytes}`: the request as JSON text, the bytes (for a load) as an ArrayBuffer.
fn request(data: &JsValue) -> Result<(Request, Option<Vec<u8>>), String> {
    let get = |key: &str| js_sys::Reflect::get(data, &JsValue::from_str(key)).unwrap_or_default();
    let text = get("request")
        .as_string()
        .ok_or("a message to the worker carries its request as text")?;
    let request: Request =
        serde_json::from_str(&text).map_err(|e| format!("an unreadable request: {e}"))?;
    let bytes = get("bytes")
        .dyn_into::<js_sys::ArrayBuffer>()
        .ok()
        .map(|buffer| js_sys::Uint8Array::new(&buffer).to_vec());
    Ok((request, bytes))
}

fn main() {
    console_error_panic_hook::set_once();
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let worker = RefCell::new(Worker::default());
    let poster = scope.clone();
    let post = move |r: Response| {
        let text = serde_json::to_string(&r)
            .unwrap_or_else(|e| format!(r#"{{"error":"cannot send the answer: {e}"}}"#));
        let _ = poster.post_message(&JsValue::from_str(&text));
    };
    let clock = scope.performance();
    let now = move || clock.as_ref().map_or(0.0, |p| p.now());
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let mut post = post.clone();
        match request(&event.data()) {
            Ok((r, bytes)) => worker.borrow_mut().handle(r, bytes, &now, &mut post),
            Err(e) => post(Response::Error(e)),
        }
    });
    scope.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    let _ = scope.post_message(&JsValue::from_str(
        &serde_json::to_string(&Response::Ready).unwrap_or_default(),
    ));
}
