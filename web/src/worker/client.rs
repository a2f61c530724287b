//! The page's link to the engine: one [`Link`] through which every request the page makes
//! (load, plan, fit, sweep, fits, compare, export) goes to one
//! [`Worker`](crate::worker::protocol::Worker), and from which every answer comes back as a
//! [`LinkEvent`] to the one callback the page gave it. The link knows nothing of the page's
//! state, so the page's thread only sends and draws.
//!
//! The worker normally runs in a Web Worker, started after the page's first frame (so that it
//! has compiled and warmed up its code by the time a file is dropped): the link waits for its
//! `ready`, sends typed requests (a load's dump as a `Blob`, which the worker reads in chunks),
//! and cancels by asking the worker, which hears it at once through the shared stop flag on an
//! isolated page (a search, or a load at its next read), else between its steps; without the
//! flag, a load still parsing cannot listen and is stopped by terminating the worker (the next
//! request starts a fresh one, in about 50 ms). The link and the worker number jobs alike: an
//! answer of a job a later one replaced is dropped unread. Where no Web Worker can start (it
//! cannot be created, or its script fails to load), the worker's own module is loaded beside the
//! page's and its `HereWorker` runs on the page's thread, one request or one job step per task,
//! and the link says so ([`LinkEvent::PlanningHere`]): the answers are the same, only the page
//! pauses during each step.
//!
//! Architecture invariant: the page's module never links the engine's planning or importing
//! (not [`super::job::Worker`], nor anything that calls it); it sends requests and draws
//! answers. The engine is in the worker's module alone, so the page's bundle carries the UI.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{ErrorEvent, MessageEvent};

use super::protocol::{Request, Response, read_answer};
use crate::error::WebError;

/// The worker's loader, which trunk writes next to the page.
const WORKER_URL: &str = "./memplan-worker_loader.js";
/// The worker's module (`no-modules`: it defines the global `wasm_bindgen`) and its wasm, which
/// the page loads on its own thread where no Web Worker starts.
const WORKER_SCRIPT_URL: &str = "./memplan-worker.js";
const WORKER_WASM_URL: &str = "./memplan-worker_bg.wasm";
/// Where the page puts the worker module's initializer once its script has run: the script
/// declares it with `let`, which no property of the global object reaches, so a one-line
/// script of the page's copies it there (or leaves it undefined where the module failed).
const WORKER_MODULE: &str = "memplanWorkerModule";

/// What the link tells the page.
pub enum LinkEvent {
    /// The worker's answer.
    Answer(Response),
    /// The worker's answer to what was asked before the last job the page posted, which the
    /// worker works on now: a question's, shown while the page stays busy with that job.
    EarlierAnswer(Response),
    /// No Web Worker could start: from now on the page plans on its own thread.
    PlanningHere(WebError),
    /// The Web Worker failed while working (the next request starts a fresh one), or sent what
    /// cannot be read.
    Failed(WebError),
    /// The Web Worker ran out of memory and ended (the next request starts a fresh one): the
    /// bytes it asked for, and those it held.
    OutOfMemory { requested: u64, held: u64 },
}

/// The Web Worker's message and error handlers, kept alive while it runs.
type Handlers = (
    Closure<dyn FnMut(MessageEvent)>,
    Closure<dyn FnMut(ErrorEvent)>,
);

/// A request sent before the Web Worker was ready: the message for it, and the request itself
/// with its dump for the worker on the page's thread.
struct Pending {
    message: js_sys::Object,
    request: Request,
    bytes: Option<web_sys::Blob>,
}

/// The Web Worker.
struct Thread {
    worker: web_sys::Worker,
    ready: bool,
    /// A request sent before the worker was ready (to send once it is, or to the page's
    /// worker if it never becomes ready).
    pending: Option<Pending>,
    _handlers: Handlers,
}

/// A request waiting for the worker on the page's thread, with its dump.
type Queued = (Request, Option<web_sys::Blob>);

/// The worker on the page's thread (the worker module's `HereWorker`, once loaded), its job
/// stepped one step per task. Requests wait in `queue` while the module loads or a dump before
/// them is read (the page reads a `Blob` asynchronously).
#[derive(Clone)]
struct Here {
    worker: Rc<RefCell<Option<Result<JsValue, WebError>>>>,
    driving: Rc<Cell<bool>>,
    queue: Rc<RefCell<std::collections::VecDeque<Queued>>>,
    reading: Rc<Cell<bool>>,
}

/// Loads the worker's module on the page's thread and makes its `HereWorker`.
async fn load_here() -> Result<JsValue, WebError> {
    let failed = |e: JsValue| WebError::ModuleLoad {
        detail: js_detail(&e),
    };
    let window = web_sys::window().ok_or_else(|| failed("no window".into()))?;
    let document = window
        .document()
        .ok_or_else(|| failed("no document".into()))?;
    // A script that throws as it runs still "loads": what it threw reaches the window alone.
    let thrown: Rc<RefCell<Option<String>>> = Rc::default();
    let heard = thrown.clone();
    let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |e: ErrorEvent| {
        if e.filename()
            .ends_with(WORKER_SCRIPT_URL.trim_start_matches('.'))
        {
            heard.borrow_mut().get_or_insert(e.message());
        }
    });
    let listen = on_error.as_ref().unchecked_ref();
    let _ = window.add_event_listener_with_callback("error", listen);
    let script = document.create_element("script").map_err(failed)?;
    script
        .set_attribute("src", WORKER_SCRIPT_URL)
        .map_err(failed)?;
    let loaded = js_sys::Promise::new(&mut |resolve, reject| {
        let _ = script.add_event_listener_with_callback("load", &resolve);
        let _ = script.add_event_listener_with_callback("error", &reject);
    });
    let body = document.body().ok_or_else(|| failed("no body".into()))?;
    body.append_child(&script).map_err(failed)?;
    let outcome = JsFuture::from(loaded).await;
    let _ = window.remove_event_listener_with_callback("error", listen);
    outcome.map_err(|_| failed(format!("{WORKER_SCRIPT_URL} did not load").into()))?;
    if let Some(message) = thrown.take() {
        return Err(failed(
            format!("{WORKER_SCRIPT_URL} failed: {message}").into(),
        ));
    }
    let copy = document.create_element("script").map_err(failed)?;
    copy.set_text_content(Some(&format!(
        "try {{ globalThis.{WORKER_MODULE} = wasm_bindgen; }} catch (_) {{}}"
    )));
    body.append_child(&copy).map_err(failed)?;
    let init: js_sys::Function = js_sys::Reflect::get(&js_sys::global(), &WORKER_MODULE.into())
        .map_err(failed)?
        .dyn_into()
        .map_err(|_| failed(format!("{WORKER_SCRIPT_URL} defines no wasm_bindgen").into()))?;
    let options = js_sys::Object::new();
    js_sys::Reflect::set(&options, &"module_or_path".into(), &WORKER_WASM_URL.into())
        .map_err(failed)?;
    JsFuture::from(js_sys::Promise::from(
        init.call1(&JsValue::NULL, &options).map_err(failed)?,
    ))
    .await
    .map_err(failed)?;
    let class: js_sys::Function = js_sys::Reflect::get(&init, &"HereWorker".into())
        .map_err(failed)?
        .dyn_into()
        .map_err(|_| failed("the module has no HereWorker".into()))?;
    js_sys::Reflect::construct(&class, &js_sys::Array::new()).map_err(failed)
}

/// A thrown JS value's message, or its debug form.
fn js_detail(e: &JsValue) -> String {
    e.as_string()
        .or_else(|| {
            e.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| format!("{e:?}"))
}

/// Calls `HereWorker.method(args..)` and gathers the answers it hands back; what it returns.
fn call_here(
    worker: &JsValue,
    method: &str,
    args: &[JsValue],
    answers: &mut Vec<Response>,
) -> Result<JsValue, WebError> {
    let failed = |e: JsValue| WebError::WorkerFailed {
        detail: js_detail(&e),
    };
    let function: js_sys::Function = js_sys::Reflect::get(worker, &method.into())
        .map_err(failed)?
        .dyn_into()
        .map_err(failed)?;
    let heard: Rc<RefCell<Vec<Response>>> = Rc::default();
    let sink = heard.clone();
    let answer = Closure::<dyn FnMut(js_sys::Uint8Array)>::new(move |bytes: js_sys::Uint8Array| {
        let answer = read_answer(&mut JsBytes::of(bytes)).unwrap_or_else(super::protocol::failed);
        sink.borrow_mut().push(answer);
    });
    let args: js_sys::Array = args.iter().chain([answer.as_ref()]).collect();
    let returned = function.apply(worker, &args).map_err(failed);
    answers.append(&mut heard.borrow_mut());
    returned
}

/// An answer's bytes in JS memory, read a chunk at a time: never copied whole into the page's
/// memory.
pub struct JsBytes {
    bytes: js_sys::Uint8Array,
    at: u32,
}

impl JsBytes {
    pub fn of(bytes: js_sys::Uint8Array) -> Self {
        JsBytes { bytes, at: 0 }
    }
}

impl std::io::Read for JsBytes {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.bytes.length() - self.at;
        let n = left.min(u32::try_from(buf.len()).unwrap_or(u32::MAX));
        (self.bytes.subarray(self.at, self.at + n)).copy_to(&mut buf[..n as usize]);
        self.at += n;
        Ok(n as usize)
    }
}

#[derive(Default)]
struct State {
    thread: Option<Thread>,
    /// Set once a Web Worker could not start: from then on the page plans here.
    here: Option<Here>,
    /// Whether the worker has been sent a request: one that has not owes no answer, and
    /// [`Link::stop`] keeps it, warm.
    asked: bool,
    /// The stop flag shared with the Web Worker: only on a cross-origin isolated page, where
    /// `SharedArrayBuffer` exists. A cancel sets it to the number of the last job posted
    /// ([`Request::is_job`], counted from 1 for each Web Worker), and the worker stops the jobs
    /// numbered up to it: not one asked after the cancel, wherever it is in the worker's queue.
    stop: Option<js_sys::Int32Array>,
    /// The jobs posted to this Web Worker: an answer it numbers with an earlier one is stale.
    jobs: i32,
}

impl State {
    /// Posts `message` to the Web Worker, counting it where it asks for a job: the worker
    /// numbers the jobs it is posted (a request replaced before the worker was ready never
    /// reaches it, and is not counted).
    fn post(&mut self, message: &js_sys::Object, job: bool) {
        if let Some(thread) = &self.thread {
            let _ = thread.worker.post_message(message);
            self.jobs += i32::from(job);
        }
    }
}

/// The page's link to the engine. Cloning it gives another handle to the same link.
#[derive(Clone)]
pub struct Link {
    state: Rc<RefCell<State>>,
    on_event: Rc<dyn Fn(LinkEvent)>,
}

/// A stop flag to share with the worker, when the page may share memory.
fn shared_stop() -> Option<js_sys::Int32Array> {
    let isolated = js_sys::Reflect::get(&js_sys::global(), &"crossOriginIsolated".into()).ok()?;
    isolated
        .as_bool()?
        .then(|| js_sys::Int32Array::new(&js_sys::SharedArrayBuffer::new(4)))
}

/// Resolves on a later task (a zero-delay timeout), after the events that arrived meanwhile.
pub async fn next_task() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

impl Link {
    /// A link that tells `on_event` what the worker says. No worker starts until
    /// [`Link::start_early`] or the first request.
    pub fn new(on_event: impl Fn(LinkEvent) + 'static) -> Link {
        Link {
            state: Rc::default(),
            on_event: Rc::new(on_event),
        }
    }

    /// Sends `request`, with `bytes` beside it (a load's dump, a compare's other).
    pub fn send(&self, request: Request, bytes: Option<web_sys::Blob>) {
        let mut s = self.state.borrow_mut();
        s.asked = true;
        if s.here.is_none() && s.thread.is_none() {
            self.start(&mut s);
        }
        if let Some(here) = s.here.clone() {
            drop(s);
            return self.queue_here(here, request, bytes);
        }
        let message = js_sys::Object::new();
        // Not `expect`: its message would format the error, and with it every `io::Error` kind.
        let Ok(text) = serde_json::to_string(&request) else {
            unreachable!("requests serialize")
        };
        let _ = js_sys::Reflect::set(&message, &"request".into(), &text.into());
        if let Some(bytes) = &bytes {
            let _ = js_sys::Reflect::set(&message, &"bytes".into(), bytes);
        }
        if let Some(flag) = &s.stop {
            let _ = js_sys::Reflect::set(&message, &"stop".into(), &flag.buffer());
            if matches!(request, Request::Cancel) {
                let _ = js_sys::Atomics::store(flag, 0, s.jobs);
            }
        }
        match s.thread.as_mut() {
            Some(thread) if thread.ready => s.post(&message, request.is_job()),
            Some(thread) => {
                thread.pending = Some(Pending {
                    message,
                    request,
                    bytes,
                })
            }
            None => {}
        }
    }

    /// Starts the worker before anything is asked of it: it compiles its code and warms it up
    /// while the user looks at the page, so that the first file loads and is searched at full
    /// speed (measured in Chromium: see `worker::warm_up::WarmUp`).
    pub fn start_early(&self) {
        let mut s = self.state.borrow_mut();
        if s.here.is_none() && s.thread.is_none() {
            self.start(&mut s);
        }
    }

    /// Whether the page shares a stop flag with its Web Worker (it is cross-origin isolated):
    /// a cancel reaches a running search, or a load as it reads, at once.
    pub fn shares_stop_flag(&self) -> bool {
        let s = self.state.borrow();
        s.thread.is_some() && s.stop.is_some()
    }

    /// Whether the worker runs on the page's thread, where a cancel is heard between steps.
    pub fn is_here(&self) -> bool {
        self.state.borrow().here.is_some()
    }

    /// Stops whatever the worker is doing: a Web Worker that has been asked anything is
    /// terminated (the next request starts a fresh one); one never asked owes no answer and is
    /// kept, warm.
    pub fn stop(&self) {
        let Ok(mut s) = self.state.try_borrow_mut() else {
            return;
        };
        if s.asked {
            terminate(&mut s);
        }
    }

    /// Starts a Web Worker, or, where none can be created, the worker on the page's thread.
    fn start(&self, s: &mut State) {
        match web_sys::Worker::new(WORKER_URL) {
            Ok(worker) => {
                let handlers = self.listen(&worker);
                s.thread = Some(Thread {
                    worker,
                    ready: false,
                    pending: None,
                    _handlers: handlers,
                });
                s.stop = shared_stop();
                s.jobs = 0;
                s.asked = false;
            }
            Err(e) => {
                let detail = format!("{e:?}");
                self.plan_here(s, WebError::WorkerStart { detail });
            }
        }
    }

    /// From now on the worker runs on the page's thread; the page is told why.
    fn plan_here(&self, s: &mut State, why: WebError) {
        s.here = Some(Here {
            worker: Rc::default(),
            driving: Rc::new(Cell::new(false)),
            queue: Rc::default(),
            reading: Rc::new(Cell::new(false)),
        });
        (self.on_event)(LinkEvent::PlanningHere(why));
    }

    /// Tells the page `event` in the next task, after what the worker said before it: an
    /// answer is shown a task after it is read, so the end of a worker that posted a progress
    /// message just before it ran out of memory must come after that message, not before (the
    /// page then showed the progress of a worker that had ended, for good). Timers run first
    /// in, first out.
    fn in_order(&self, event: LinkEvent) {
        let on_event = self.on_event.clone();
        wasm_bindgen_futures::spawn_local(async move {
            next_task().await;
            on_event(event);
        })
    }

    fn listen(&self, worker: &web_sys::Worker) -> Handlers {
        let link = self.clone();
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            // What ran out, posted by the worker's allocator as it ends: the error that ends it
            // says no more, so it is not heard.
            if let Some(report) = event.data().dyn_ref::<js_sys::Float64Array>() {
                if let Ok(mut s) = link.state.try_borrow_mut() {
                    terminate(&mut s);
                }
                let (requested, held) = (report.get_index(0) as u64, report.get_index(1) as u64);
                return link.in_order(LinkEvent::OutOfMemory { requested, held });
            }
            let data = event.data();
            let get = |key: &str| js_sys::Reflect::get(&data, &key.into()).unwrap_or_default();
            // An answer a later job supersedes (a cancelled search's best, a failed load's
            // error, a late "cancelled"): the later job's answers say what the page shows, so
            // it is not even read. Any other answer given before a later job was posted is
            // shown while that job goes on.
            let sent = link.state.try_borrow().map_or(0, |s| s.jobs);
            let earlier = get("job").as_f64().is_some_and(|job| job < f64::from(sent));
            if earlier && get("replaceable").is_truthy() {
                return;
            }
            let bytes = (get("answer").dyn_into::<js_sys::Uint8Array>())
                .unwrap_or_else(|_| js_sys::Uint8Array::new_with_length(0));
            match read_answer(&mut JsBytes::of(bytes)) {
                Ok(Response::Ready) => {
                    let mut s = link.state.borrow_mut();
                    let pending = s.thread.as_mut().and_then(|thread| {
                        thread.ready = true;
                        thread.pending.take()
                    });
                    if let Some(p) = pending {
                        s.post(&p.message, p.request.is_job());
                    }
                }
                // Read in this task, shown in the next: a large plan's answer is two tasks of
                // the page's, not one twice as long.
                Ok(response) if earlier => link.in_order(LinkEvent::EarlierAnswer(response)),
                Ok(response) => link.in_order(LinkEvent::Answer(response)),
                Err(e) => link.in_order(LinkEvent::Failed(e)),
            }
        });
        let link = self.clone();
        let onerror = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
            let Ok(mut s) = link.state.try_borrow_mut() else {
                return;
            };
            let ready = s.thread.as_ref().is_some_and(|t| t.ready);
            let pending = s.thread.as_mut().and_then(|t| t.pending.take());
            terminate(&mut s);
            let detail = event.message();
            if ready {
                // It failed while working: the next request starts a fresh one.
                drop(s);
                return link.in_order(LinkEvent::Failed(WebError::WorkerFailed { detail }));
            }
            // It never became ready (its script failed to load): plan here, starting with what
            // it was asked.
            link.plan_here(&mut s, WebError::WorkerStart { detail });
            let here = s.here.clone();
            drop(s);
            if let (Some(here), Some(p)) = (here, pending) {
                link.queue_here(here, p.request, p.bytes);
            }
        });
        worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
        worker.set_onerror(Some(onerror.as_ref().unchecked_ref()));
        (onmessage, onerror)
    }

    /// Hands `request` to the worker on the page's thread in order: at once, unless a dump is
    /// being read for an earlier one.
    fn queue_here(&self, here: Here, request: Request, bytes: Option<web_sys::Blob>) {
        let loaded = here.worker.borrow().is_some();
        if loaded && !here.reading.get() && bytes.is_none() {
            return self.run_here(here, request, None);
        }
        here.queue.borrow_mut().push_back((request, bytes));
        if here.reading.get() {
            return;
        }
        let link = self.clone();
        here.reading.set(true);
        wasm_bindgen_futures::spawn_local(async move {
            if here.worker.borrow().is_none() {
                let loaded = load_here().await;
                *here.worker.borrow_mut() = Some(loaded);
            }
            loop {
                let Some((request, blob)) = here.queue.borrow_mut().pop_front() else {
                    break;
                };
                let input = match blob {
                    Some(blob) => match crate::page::fetch::bytes_of(&blob).await {
                        Ok(bytes) => Some(bytes),
                        Err(e) => {
                            (link.on_event)(LinkEvent::Answer(super::protocol::failed(e)));
                            continue;
                        }
                    },
                    None => None,
                };
                link.run_here(here.clone(), request, input);
            }
            here.reading.set(false);
        });
    }

    /// Hands `request` to the worker on the page's thread, then steps its job one step per
    /// task, telling each answer once the worker has returned.
    fn run_here(&self, here: Here, request: Request, input: Option<Vec<u8>>) {
        let Here {
            worker, driving, ..
        } = here;
        let tell = |answers: Vec<Response>| {
            (answers.into_iter()).for_each(|r| (self.on_event)(LinkEvent::Answer(r)))
        };
        let here = match worker.borrow().as_ref() {
            Some(Ok(here)) => here.clone(),
            Some(Err(e)) => return tell(vec![super::protocol::failed(e.clone())]),
            None => return,
        };
        let mut answers = Vec::new();
        // Not `expect`: its message would format the error, and with it every `io::Error` kind.
        let Ok(text) = serde_json::to_string(&request) else {
            unreachable!("requests serialize")
        };
        let bytes = input.map_or(JsValue::UNDEFINED, |b| {
            js_sys::Uint8Array::from(b.as_slice()).into()
        });
        let handled = call_here(&here, "handle", &[text.into(), bytes], &mut answers);
        tell(answers);
        if let Err(e) = handled {
            return tell(vec![super::protocol::failed(e)]);
        }
        let busy = call_here(&here, "busy", &[], &mut Vec::new()).is_ok_and(|b| b.is_truthy());
        if driving.get() || !busy {
            return;
        }
        driving.set(true);
        let on_event = self.on_event.clone();
        wasm_bindgen_futures::spawn_local(async move {
            loop {
                next_task().await;
                let mut answers = Vec::new();
                let more = call_here(&here, "step", &[], &mut answers);
                (answers.into_iter()).for_each(|r| on_event(LinkEvent::Answer(r)));
                match more {
                    Ok(more) if more.is_truthy() => {}
                    Ok(_) => break,
                    Err(e) => {
                        on_event(LinkEvent::Answer(super::protocol::failed(e)));
                        break;
                    }
                }
            }
            driving.set(false);
        });
    }
}

/// Ends the Web Worker and forgets it.
fn terminate(s: &mut State) {
    if let Some(t) = s.thread.take() {
        t.worker.set_onmessage(None);
        t.worker.set_onerror(None);
        t.worker.terminate();
    }
}
