//! The page's side of the engine: every request the page makes (load, plan, fit, sweep, fits,
//! compare, export) goes through [`send`] to one [`Worker`](crate::worker_protocol::Worker),
//! and every answer comes back through [`receive`], so the page's thread only draws.
//!
//! The worker normally runs in a Web Worker, started after the page's first frame (so that it
//! has compiled and warmed up its code by the time a file is dropped): it waits for its
//! `ready`, is sent typed requests (a load's bytes transferred, not copied), and cancels: a plan
//! by asking the worker (at once through the shared stop flag on an isolated page, else between
//! its steps), a load still parsing by terminating it (the next request starts a fresh one, in
//! about 50 ms). Where no Web Worker can start (it cannot be created, or its script fails to
//! load), the same worker runs on the page's thread, one request or one job step per task,
//! and the page says so: the answers are the same, only the page pauses during each step.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent};

use memplan_engine::Scenario;

use crate::analysis::{Analysis, ExportKind};
use crate::error::WebError;
use crate::state::{Busy, PageState, SolverProgress};
use crate::worker_protocol::{Request, Response, Worker};

/// The worker's loader, which trunk writes next to the page.
const WORKER_URL: &str = "./memplan-worker_loader.js";

/// The Web Worker's message and error handlers, kept alive while it runs.
type Handlers = (
    Closure<dyn FnMut(MessageEvent)>,
    Closure<dyn FnMut(ErrorEvent)>,
);

/// A request with what it transfers: the message for a Web Worker, and the request itself
/// with its bytes for the worker on the page's thread.
struct Pending {
    message: js_sys::Object,
    transfer: js_sys::Array,
    request: Request,
    bytes: Option<js_sys::ArrayBuffer>,
}

/// The Web Worker.
struct Thread {
    worker: web_sys::Worker,
    ready: bool,
    /// A request sent before the worker was ready (to send once it is, or to the page's
    /// worker if it never becomes ready).
    pending: Option<Pending>,
    handlers: Option<Handlers>,
}

/// The worker on the page's thread: its steps run one per task while `alive`.
#[derive(Clone)]
struct Here {
    worker: Rc<RefCell<Worker>>,
    alive: Rc<Cell<bool>>,
    driving: Rc<Cell<bool>>,
}

#[derive(Default)]
pub struct WorkerClient {
    thread: Option<Thread>,
    /// Set once a Web Worker could not start: from then on the page plans here.
    here: Option<Here>,
    /// Whether the worker has been sent a request: one that has not owes no answer, and
    /// [`stop`] keeps it, warm.
    asked: bool,
    /// The stop flag shared with the Web Worker (a cancel raises it, a new request lowers
    /// it): only on a cross-origin isolated page, where `SharedArrayBuffer` exists.
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

/// Loads `bytes` (transferred to a Web Worker: the page's buffer is detached).
pub fn load(state: PageState, source: &str, bytes: js_sys::ArrayBuffer) {
    let request = Request::Load {
        source: source.to_string(),
        scenario: state.scenario(),
        import: Default::default(),
    };
    send(state, request, Some(bytes));
}

/// Imports the worker's last bytes again with `import` (an ONNX model's fixed input shapes).
pub fn reimport(state: PageState, import: memplan_formats::onnx::Options) {
    state.busy.set(Some(Busy {
        stage: 1,
        of: crate::worker_protocol::STAGES,
        what: "importing again".into(),
        solver: None,
    }));
    let scenario = state.scenario();
    send(state, Request::Reimport { scenario, import }, None);
}

/// Re-plans the loaded dump under `scenario`.
pub fn plan(state: PageState, scenario: Scenario) {
    state.planning.set(true);
    send(state, Request::Plan(scenario), None);
}

/// Fits the loaded dump to `budget` from no flips; the log arrives, then the plan.
pub fn fit(state: PageState, scenario: Scenario, budget: String) {
    state.planning.set(true);
    send(state, Request::Fit { scenario, budget }, None);
}

pub fn compare(state: PageState, scenario: Scenario, other: Option<(String, js_sys::ArrayBuffer)>) {
    let (source, bytes) = other.unzip();
    send(state, Request::Compare { scenario, source }, bytes);
}

pub fn sweep(state: PageState, scenario: Scenario, points: usize) {
    state.planning.set(true);
    send(state, Request::Sweep { scenario, points }, None);
}

pub fn fits(state: PageState, scenario: Scenario, param: String, lo: u64, hi: u64) {
    let request = Request::Fits {
        scenario,
        param,
        lo,
        hi,
    };
    send(state, request, None);
}

/// Asks for a file of the current plan; it arrives as `exported` and is downloaded.
pub fn export(state: PageState, kind: ExportKind) {
    send(state, Request::Export(kind), None);
}

fn send(state: PageState, request: Request, bytes: Option<js_sys::ArrayBuffer>) {
    let client = state.worker.get_value();
    let mut c = client.borrow_mut();
    c.asked = true;
    if c.here.is_none() && c.thread.is_none() {
        start(state, &mut c);
    }
    if let Some(here) = c.here.clone() {
        drop(c);
        return run_here(state, here, request, bytes);
    }
    let message = js_sys::Object::new();
    let text = serde_json::to_string(&request).expect("requests serialize");
    let _ = js_sys::Reflect::set(&message, &"request".into(), &text.into());
    let transfer = js_sys::Array::new();
    if let Some(bytes) = &bytes {
        let _ = js_sys::Reflect::set(&message, &"bytes".into(), bytes);
        transfer.push(bytes);
    }
    if let Some(flag) = &c.stop {
        let _ = js_sys::Reflect::set(&message, &"stop".into(), &flag.buffer());
        let raised = matches!(request, Request::Cancel);
        let _ = js_sys::Atomics::store(flag, 0, i32::from(raised));
    }
    let Some(thread) = c.thread.as_mut() else {
        return;
    };
    if thread.ready {
        let _ = thread
            .worker
            .post_message_with_transfer(&message, &transfer);
    } else {
        thread.pending = Some(Pending {
            message,
            transfer,
            request,
            bytes,
        });
    }
}

/// Starts the worker before anything is asked of it: it compiles its code and warms it up
/// while the user looks at the page, so that the first file loads and is searched at full
/// speed (measured in Chromium: see `worker_protocol::WarmUp`).
pub fn start_early(state: PageState) {
    let client = state.worker.get_value();
    let mut c = client.borrow_mut();
    if c.here.is_none() && c.thread.is_none() {
        start(state, &mut c);
    }
}

/// Starts a Web Worker, or, where none can be created, the worker on the page's thread.
fn start(state: PageState, c: &mut WorkerClient) {
    match web_sys::Worker::new(WORKER_URL) {
        Ok(worker) => {
            let handlers = listen(state, &worker);
            c.thread = Some(Thread {
                worker,
                ready: false,
                pending: None,
                handlers: Some(handlers),
            });
            c.stop = shared_stop();
            c.asked = false;
        }
        Err(e) => {
            let detail = format!("{e:?}");
            plan_here(state, c, WebError::WorkerStart { detail })
        }
    }
}

/// From now on the page plans on its own thread, and says why.
fn plan_here(state: PageState, c: &mut WorkerClient, why: WebError) {
    c.here = Some(Here {
        worker: Rc::new(RefCell::new(Worker::default())),
        alive: Rc::new(Cell::new(true)),
        driving: Rc::new(Cell::new(false)),
    });
    state.notices.update(|n| {
        n.push(format!(
            "{why}; planning on this page instead, which pauses while it works"
        ))
    });
}

fn listen(state: PageState, worker: &web_sys::Worker) -> Handlers {
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let bytes = (event.data().dyn_into::<js_sys::Uint8Array>())
            .map_or_else(|_| Vec::new(), |a| a.to_vec());
        match serde_json::from_slice::<Response>(&bytes) {
            Ok(Response::Ready) => {
                let client = state.worker.get_value();
                let mut c = client.borrow_mut();
                if let Some(thread) = c.thread.as_mut() {
                    thread.ready = true;
                    if let Some(p) = thread.pending.take() {
                        let _ = thread
                            .worker
                            .post_message_with_transfer(&p.message, &p.transfer);
                    }
                }
            }
            Ok(response) => receive(state, response),
            Err(e) => {
                done(state);
                state.error.set(Some(WebError::Unreadable {
                    what: crate::error::Message::Answer,
                    detail: e.to_string(),
                }));
            }
        }
    });
    let onerror = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
        let client = state.worker.get_value();
        let Ok(mut c) = client.try_borrow_mut() else {
            return;
        };
        let ready = c.thread.as_ref().is_some_and(|t| t.ready);
        let pending = c.thread.as_mut().and_then(|t| t.pending.take());
        terminate(&mut c);
        if ready {
            // It failed while working: say so; the next request starts a fresh one.
            drop(c);
            done(state);
            state.restore.set_value(None);
            state.error.set(Some(WebError::WorkerFailed {
                detail: event.message(),
            }));
            return;
        }
        // It never became ready (its script failed to load): plan here, starting with what it
        // was asked.
        let detail = event.message();
        plan_here(state, &mut c, WebError::WorkerStart { detail });
        let here = c.here.clone();
        drop(c);
        if let (Some(here), Some(p)) = (here, pending) {
            run_here(state, here, p.request, p.bytes);
        }
    });
    worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    worker.set_onerror(Some(onerror.as_ref().unchecked_ref()));
    (onmessage, onerror)
}

/// Hands `request` to the worker on the page's thread, then steps its job one step per task,
/// delivering each answer once the worker is no longer borrowed.
fn run_here(state: PageState, here: Here, request: Request, bytes: Option<js_sys::ArrayBuffer>) {
    let Here {
        worker,
        alive,
        driving,
    } = here;
    let mut answers = Vec::new();
    let bytes = bytes.map(|b| js_sys::Uint8Array::new(&b).to_vec());
    worker
        .borrow_mut()
        .handle(request, bytes, &mut |r| answers.push(r));
    answers.into_iter().for_each(|r| receive(state, r));
    if driving.get() || !worker.borrow().busy() {
        return;
    }
    driving.set(true);
    leptos::task::spawn_local(async move {
        let now = || {
            web_sys::window()
                .and_then(|w| w.performance())
                .map_or(0.0, |p| p.now())
        };
        loop {
            crate::state::next_tick().await;
            if !alive.get() {
                break;
            }
            let mut answers = Vec::new();
            let more = worker
                .borrow_mut()
                .step(&now, &|| false, &mut |r| answers.push(r));
            answers.into_iter().for_each(|r| receive(state, r));
            if !more {
                break;
            }
        }
        driving.set(false);
    });
}

/// Turns an answer of the worker into page state.
fn receive(state: PageState, response: Response) {
    match response {
        Response::Ready => {}
        Response::Progress {
            stage,
            of,
            what,
            best_bytes,
            bound_bytes,
            nodes,
        } => {
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
        Response::Exported(file) => {
            if let Err(e) = crate::export::download_text(&file.file_name, &file.mime, &file.text) {
                state.error.set(Some(WebError::Export(Box::new(e))));
            }
        }
        Response::Planned {
            analysis,
            cancelled,
            left_out,
            buffers,
        } => {
            done(state);
            let earlier = state.analysis.get_untracked();
            let analysis =
                match Analysis::received(*analysis, left_out, buffers, earlier.as_deref()) {
                    Ok(analysis) => analysis,
                    Err(e) => return state.error.set(Some(WebError::Answer(e))),
                };
            state.apply(analysis);
            state.cancelled.set(cancelled);
        }
        Response::Compared(view) => {
            done(state);
            state.comparison.set(Some(*view));
        }
        Response::Swept(sweep) => {
            done(state);
            state.sweep.set(Some(*sweep));
        }
        Response::Fits(fits) => {
            done(state);
            state.fits.set(Some(*fits));
        }
        Response::Fitted(log) => {
            state.inline.set(log.inline());
            state.fit_log.set(Some(*log));
        }
        Response::Cancelled => done(state),
        Response::Error(e) => {
            done(state);
            state.restore.set_value(None);
            state.error.set(Some(*e));
        }
    }
}

/// The worker has answered (or stopped): nothing is in progress.
fn done(state: PageState) {
    state.busy.set(None);
    state.planning.set(false);
}

/// The cancel button. A job of the loaded dump (a plan, a fit, a sweep) is asked to stop: the
/// worker answers with its best so far (or, before it has one, keeps what the page shows). A
/// load still parsing in a Web Worker cannot listen, so it is stopped by terminating the worker
/// (the last resort), and the page keeps what it shows.
pub fn cancel(state: PageState) {
    let here = state.worker.get_value().borrow().here.is_some();
    if state.planning.get_untracked() || here {
        send(state, Request::Cancel, None);
        return;
    }
    stop(state);
    state.restore.set_value(None);
}

/// Stops whatever the worker is doing: a Web Worker that has been asked anything is terminated
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

/// Ends the Web Worker and forgets it.
fn terminate(c: &mut WorkerClient) {
    if let Some(t) = c.thread.take() {
        t.worker.set_onmessage(None);
        t.worker.set_onerror(None);
        t.worker.terminate();
        drop(t.handlers);
    }
}
