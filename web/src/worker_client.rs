//! The page's side of the worker: starts it after the page's first frame (so that it has
//! compiled and warmed up its code by the time a file is dropped), waits for its `ready`, sends
//! typed requests (a load's bytes transferred, not copied), turns its answers into page state, and
//! cancels: a plan by asking the worker (at once through the shared stop flag on an isolated
//! page, else between its steps), a load still parsing by terminating it (the next request
//! starts a fresh one, in about 50 ms).

use std::cell::RefCell;
use std::rc::Rc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker};

use memplan_engine::Scenario;

use crate::analysis::{Analysis, ExportKind};
use crate::error::WebError;
use crate::state::{Busy, PageState, SolverProgress};
use crate::worker_protocol::{Request, Response};

/// The worker's loader, which trunk writes next to the page.
const WORKER_URL: &str = "./memplan-worker_loader.js";

/// The worker's message and error handlers, kept alive while it runs.
type Handlers = (
    Closure<dyn FnMut(MessageEvent)>,
    Closure<dyn FnMut(ErrorEvent)>,
);

#[derive(Default)]
pub struct WorkerClient {
    worker: Option<Worker>,
    ready: bool,
    /// Whether the worker has been sent a request: one that has not owes no answer, and
    /// [`stop`] keeps it, warm.
    asked: bool,
    /// A message sent before the worker was ready, with what it transfers.
    pending: Option<(js_sys::Object, js_sys::Array)>,
    handlers: Option<Handlers>,
    /// The stop flag shared with the worker (a cancel raises it, a new request lowers it): only
    /// on a cross-origin isolated page, where `SharedArrayBuffer` exists.
    stop: Option<js_sys::Int32Array>,
}

/// A stop flag to share with the worker, when the page may share memory.
fn shared_stop() -> Option<js_sys::Int32Array> {
    let isolated = js_sys::Reflect::get(&js_sys::global(), &"crossOriginIsolated".into()).ok()?;
    isolated
        .as_bool()?
        .then(|| js_sys::Int32Array::new(&js_sys::SharedArrayBuffer::new(4)))
}

/// The client, kept in the reactive owner (a `Worker` is not `Send`).
pub type Client = StoredValue<Rc<RefCell<WorkerClient>>, LocalStorage>;

pub fn new_client() -> Client {
    StoredValue::new_local(Rc::new(RefCell::new(WorkerClient::default())))
}

/// Loads `bytes` in the worker (transferred: the page's buffer is detached).
pub fn load(state: PageState, source: &str, bytes: js_sys::ArrayBuffer) {
    let request = Request::Load {
        source: source.to_string(),
        scenario: state.scenario(),
        import: Default::default(),
    };
    send(state, &request, Some(bytes));
}

/// Imports the worker's last bytes again with `import` (an ONNX model's fixed input shapes).
pub fn reimport(state: PageState, import: memplan_formats::onnx::Options) {
    state.busy.set(Some(Busy {
        stage: 1,
        of: crate::worker_protocol::STAGES,
        what: "importing again".into(),
        solver: None,
    }));
    send(
        state,
        &Request::Reimport {
            scenario: state.scenario(),
            import,
        },
        None,
    );
}

/// Re-plans the worker's loaded dump under `scenario`.
pub fn plan(state: PageState, scenario: Scenario) {
    state.planning.set(true);
    send(state, &Request::Plan(scenario), None);
}

/// Asks the worker for a file of its current plan; it arrives as `exported`.
pub fn fit(state: PageState, scenario: Scenario, budget: String) {
    state.planning.set(true);
    send(state, &Request::Fit { scenario, budget }, None);
}

pub fn compare(state: PageState, scenario: Scenario, other: Option<(String, js_sys::ArrayBuffer)>) {
    let (source, bytes) = other.unzip();
    send(state, &Request::Compare { scenario, source }, bytes);
}

pub fn sweep(state: PageState, scenario: Scenario, points: usize) {
    state.planning.set(true);
    send(state, &Request::Sweep { scenario, points }, None);
}

pub fn fits(state: PageState, scenario: Scenario, param: String, lo: u64, hi: u64) {
    send(
        state,
        &Request::Fits {
            scenario,
            param,
            lo,
            hi,
        },
        None,
    );
}

pub fn export(state: PageState, kind: ExportKind) {
    send(state, &Request::Export(kind), None);
}

fn send(state: PageState, request: &Request, bytes: Option<js_sys::ArrayBuffer>) {
    let message = js_sys::Object::new();
    let text = serde_json::to_string(request).expect("requests serialize");
    let _ = js_sys::Reflect::set(&message, &"request".into(), &text.into());
    let transfer = js_sys::Array::new();
    if let Some(bytes) = bytes {
        let _ = js_sys::Reflect::set(&message, &"bytes".into(), &bytes);
        transfer.push(&bytes);
    }
    let client = state.worker.get_value();
    let mut c = client.borrow_mut();
    if c.worker.is_none()
        && let Err(e) = start(state, &mut c)
    {
        drop(c);
        done(state);
        state.error.set(Some(e.to_string()));
        return;
    }
    c.asked = true;
    if let Some(flag) = &c.stop {
        let _ = js_sys::Reflect::set(&message, &"stop".into(), &flag.buffer());
        let raised = matches!(request, Request::Cancel);
        let _ = js_sys::Atomics::store(flag, 0, i32::from(raised));
    }
    if c.ready {
        if let Some(w) = &c.worker {
            let _ = w.post_message_with_transfer(&message, &transfer);
        }
    } else {
        c.pending = Some((message, transfer));
    }
}

/// Starts the worker before anything is asked of it: it compiles its code and warms it up
/// while the user looks at the page, so that the first file loads and is searched at full
/// speed (measured in Chromium: see `worker_protocol::WarmUp`). One that fails says so (at the
/// latest when first asked), and the next request starts another.
pub fn start_early(state: PageState) {
    let client = state.worker.get_value();
    let mut c = client.borrow_mut();
    if c.worker.is_none() {
        let _ = start(state, &mut c);
    }
}

fn start(state: PageState, c: &mut WorkerClient) -> Result<(), WebError> {
    let worker = Worker::new(WORKER_URL).map_err(|e| WebError::WorkerStart(format!("{e:?}")))?;
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let bytes = (event.data().dyn_into::<js_sys::Uint8Array>())
            .map_or_else(|_| Vec::new(), |a| a.to_vec());
        match serde_json::from_slice::<Response>(&bytes) {
            Ok(Response::Ready) => {
                let client = state.worker.get_value();
                let mut c = client.borrow_mut();
                c.ready = true;
                let pending = c.pending.take();
                if let (Some(w), Some((message, transfer))) = (&c.worker, pending) {
                    let _ = w.post_message_with_transfer(&message, &transfer);
                }
            }
            Ok(Response::Progress {
                stage,
                of,
                what,
                best_bytes,
                bound_bytes,
                nodes,
            }) => {
                let solver = match (best_bytes, bound_bytes) {
                    (Some(best_bytes), Some(bound_bytes)) => Some(SolverProgress {
                        best_bytes,
                        bound_bytes,
                        nodes,
                    }),
                    _ => None,
                };
                state.busy.set(Some(Busy {
                    stage,
                    of,
                    what,
                    solver,
                }))
            }
            Ok(Response::Exported(file)) => {
                if let Err(e) =
                    crate::export::download_text(&file.file_name, &file.mime, &file.text)
                {
                    state.error.set(Some(format!("export failed: {e}")));
                }
            }
            Ok(Response::Planned {
                analysis,
                cancelled,
                left_out,
                buffers,
            }) => {
                done(state);
                let earlier = state.analysis.get_untracked();
                let analysis =
                    match Analysis::received(*analysis, left_out, buffers, earlier.as_deref()) {
                        Ok(analysis) => analysis,
                        Err(e) => {
                            return state
                                .error
                                .set(Some(format!("the worker's answer cannot be read: {e}")));
                        }
                    };
                state.apply(analysis, None);
                state.cancelled.set(cancelled);
            }
            Ok(Response::Compared(view)) => {
                done(state);
                state.comparison.set(Some(*view));
            }
            Ok(Response::Swept(sweep)) => {
                done(state);
                state.sweep.set(Some(*sweep));
            }
            Ok(Response::Fits(fits)) => {
                done(state);
                state.fits.set(Some(*fits));
            }
            Ok(Response::Fitted(log)) => {
                state.inline.set(log.inline());
                state.fit_log.set(Some(*log));
            }
            Ok(Response::Cancelled) => done(state),
            Ok(Response::Error(message)) => {
                done(state);
                state.error.set(Some(message));
            }
            Err(e) => {
                done(state);
                state.error.set(Some(format!(
                    "the background worker sent an unreadable answer: {e}"
                )));
            }
        }
    });
    let onerror = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
        done(state);
        state.error.set(Some(format!(
            "the background worker failed: {}",
            event.message()
        )));
        // Asked anything or not (one started early may fail to load): the next request
        // starts a fresh one.
        if let Ok(mut c) = state.worker.get_value().try_borrow_mut() {
            terminate(&mut c);
        }
        state.restore.set_value(None);
    });
    worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    worker.set_onerror(Some(onerror.as_ref().unchecked_ref()));
    c.worker = Some(worker);
    c.stop = shared_stop();
    c.ready = false;
    c.asked = false;
    c.handlers = Some((onmessage, onerror));
    Ok(())
}

/// The worker has answered (or stopped): nothing is in progress.
fn done(state: PageState) {
    state.busy.set(None);
    state.planning.set(false);
}

/// The cancel button. A plan of the loaded dump is asked to stop: the worker answers with its
/// best plan so far (or, before it has one, keeps what the page shows). A load still parsing
/// cannot listen, so it is stopped by terminating the worker (the last resort), and the page
/// keeps what it shows.
pub fn cancel(state: PageState) {
    if state.local_sweep.get_untracked() {
        state.local_stop.set_value(true);
        return;
    }
    if state.planning.get_untracked() {
        send(state, &Request::Cancel, None);
        return;
    }
    stop(state);
    state.restore.set_value(None);
}

/// Stops whatever the worker is doing: a worker that has been asked anything is terminated
/// (the next request starts a fresh one); one never asked owes no answer and is kept, warm.
pub fn stop(state: PageState) {
    let client = state.worker.get_value();
    let Ok(mut c) = client.try_borrow_mut() else {
        return;
    };
    if c.asked {
        terminate(&mut c);
    }
    done(state);
}

/// Ends the worker and forgets it.
fn terminate(c: &mut WorkerClient) {
    if let Some(w) = c.worker.take() {
        w.set_onmessage(None);
        w.set_onerror(None);
        w.terminate();
    }
    c.ready = false;
    c.pending = None;
    c.handlers = None;
}
