//! The Web Worker: loads and plans off the main thread, so the page stays responsive. All logic
//! is in `worker::job::Worker`; this wires it to the scope and drives a job one step per
//! task, returning to the event loop in between so that a `cancel` can arrive. When the page is
//! cross-origin isolated it also shares a stop flag (a `SharedArrayBuffer`) that a running
//! search reads, so a cancel stops it at once. Before it says it is ready it runs
//! `worker::warm_up::warm_up` once, and while it is idle after that, the rounds of
//! `worker::warm_up::WarmUp` a step at a time, so that the first load and search run at full
//! speed.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use memplan_web::error::{Message, WebError};
use memplan_web::worker::job::Worker;
use memplan_web::worker::protocol::{Request, Response};
use memplan_web::worker::warm_up::{WarmUp, warm_up};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

/// Reads `{request, bytes}`: the request as JSON text, the bytes (for a load) as an ArrayBuffer.
fn request(data: &JsValue) -> Result<(Request, Option<Vec<u8>>), WebError> {
    let get = |key: &str| js_sys::Reflect::get(data, &JsValue::from_str(key)).unwrap_or_default();
    let text = get("request")
        .as_string()
        .ok_or_else(|| WebError::Unreadable {
            what: Message::Request,
            detail: "it carries no request text".into(),
        })?;
    let request: Request = serde_json::from_str(&text).map_err(|e| WebError::Unreadable {
        what: Message::Request,
        detail: e.to_string(),
    })?;
    let bytes = get("bytes")
        .dyn_into::<js_sys::ArrayBuffer>()
        .ok()
        .map(|buffer| js_sys::Uint8Array::new(&buffer).to_vec());
    Ok((request, bytes))
}

/// Resolves on a later task, after the messages that arrived meanwhile.
async fn next_task(scope: &DedicatedWorkerGlobalScope) {
    after(scope, 0).await;
}

/// Resolves on a task at least `ms` milliseconds later.
async fn after(scope: &DedicatedWorkerGlobalScope, ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let _ = JsFuture::from(promise).await;
}

/// Runs the warm-up's steps one task each while no job runs (a job waits at most one step, a
/// few milliseconds); while one does, looks again every 50 ms.
async fn warm_up_while_idle(scope: DedicatedWorkerGlobalScope, worker: Rc<RefCell<Worker>>) {
    let mut warm = WarmUp::default();
    loop {
        if worker.borrow().busy() {
            after(&scope, 50).await;
            continue;
        }
        if !warm.step() {
            break;
        }
        next_task(&scope).await;
    }
}

fn main() {
    console_error_panic_hook::set_once();
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let worker = Rc::new(RefCell::new(Worker::default()));
    let driving = Rc::new(Cell::new(false));
    let idle = (scope.clone(), worker.clone());
    let poster = scope.clone();
    let post = move |r: Response| send(&poster, &r);
    let clock = scope.performance();
    let now = Rc::new(move || clock.as_ref().map_or(0.0, |p| p.now()));
    let driver_scope = scope.clone();
    let flag: Rc<RefCell<Option<js_sys::Int32Array>>> = Rc::default();
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let mut post = post.clone();
        // Only an isolated page sends `stop`: elsewhere `SharedArrayBuffer` is not even defined.
        let shared = js_sys::Reflect::get(&event.data(), &JsValue::from_str("stop"))
            .ok()
            .filter(|v| !v.is_undefined());
        if let Some(shared) = shared
            && flag.borrow().is_none()
        {
            *flag.borrow_mut() = Some(js_sys::Int32Array::new(&shared));
            worker.borrow_mut().hear_cancels_live();
        }
        match request(&event.data()) {
            Ok((r, bytes)) => worker.borrow_mut().handle(r, bytes, &mut post),
            Err(e) => post(Response::Error(Box::new(e))),
        }
        if worker.borrow().busy() && !driving.get() {
            driving.set(true);
            let (worker, driving, now, scope, flag) = (
                worker.clone(),
                driving.clone(),
                now.clone(),
                driver_scope.clone(),
                flag.clone(),
            );
            let stop = move || {
                flag.borrow()
                    .as_ref()
                    .is_some_and(|f| js_sys::Atomics::load(f, 0).unwrap_or(0) != 0)
            };
            wasm_bindgen_futures::spawn_local(async move {
                while worker.borrow_mut().step(&*now, &stop, &mut post) {
                    next_task(&scope).await;
                }
                driving.set(false);
            });
        }
    });
    scope.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    // The search's code, compiled before it is asked for.
    warm_up();
    send(&scope, &Response::Ready);
    wasm_bindgen_futures::spawn_local(warm_up_while_idle(idle.0, idle.1));
}

/// Posts `r` as UTF-8 JSON in an `ArrayBuffer` the page takes over (transferred, not copied
/// again): a plan's answer is about a megabyte, and a JS string would be decoded here and
/// encoded again on the page.
fn send(scope: &DedicatedWorkerGlobalScope, r: &Response) {
    let bytes = serde_json::to_vec(r).unwrap_or_else(|e| {
        let e = WebError::Unreadable {
            what: Message::Answer,
            detail: e.to_string(),
        };
        serde_json::to_vec(&Response::Error(Box::new(e))).unwrap_or_default()
    });
    let array = js_sys::Uint8Array::from(bytes.as_slice());
    let _ = scope.post_message_with_transfer(&array, &js_sys::Array::of1(&array.buffer()));
}
