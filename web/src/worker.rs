//! The Web Worker: loads and plans off the main thread, so the page stays responsive and a load
//! can be cancelled (by terminating the worker). All logic is in `worker_protocol::handle`.

use memplan_core::Strategy;
use memplan_web::analysis::Session;
use memplan_web::worker_protocol::{Request, Response, handle};
use std::cell::RefCell;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

fn request(data: &JsValue) -> Result<Request, String> {
    let parts: js_sys::Array = data
        .clone()
        .dyn_into()
        .map_err(|_| "a request is an array")?;
    let text = |k: u32| {
        parts
            .get(k)
            .as_string()
            .ok_or_else(|| format!("request part {k} is not text"))
    };
    let strategy: Strategy = text(1)?
        .parse()
        .map_err(|e: memplan_core::layout::UnknownStrategy| e.to_string())?;
    match text(0)?.as_str() {
        "load" => Ok(Request::Load {
            source: text(2)?,
            text: text(3)?,
            strategy,
        }),
        "replan" => Ok(Request::Replan { strategy }),
        other => Err(format!("unknown request `{other}`")),
    }
}

fn main() {
    console_error_panic_hook::set_once();
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let session = RefCell::new(None::<Session>);
    let poster = scope.clone();
    let post = move |r: Response| {
        let text = serde_json::to_string(&r)
            .unwrap_or_else(|e| format!(r#"{{"error":"cannot send the answer: {e}"}}"#));
        let _ = poster.post_message(&JsValue::from_str(&text));
    };
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let mut post = post.clone();
        match request(&event.data()) {
            Ok(r) => handle(&mut session.borrow_mut(), r, &mut post),
            Err(e) => post(Response::Error(e)),
        }
    });
    scope.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    let _ = scope.post_message(&JsValue::from_str(
        &serde_json::to_string(&Response::Ready).unwrap_or_default(),
    ));
}
