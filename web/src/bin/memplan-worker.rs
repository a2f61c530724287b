//! The Web Worker: loads and plans off the main thread, so the page stays responsive. All logic
//! is in `worker::job::Worker`; this wires it to the scope and drives a job one step per
//! task, returning to the event loop in between so that a `cancel` can arrive. When the page is
//! cross-origin isolated it also shares a stop flag (a `SharedArrayBuffer`) that a running
//! search reads, so a cancel stops it at once. Before it says it is ready it runs
//! `worker::warm_up::warm_up` once, and while it is idle after that, the rounds of
//! `worker::warm_up::WarmUp` a step at a time, so that the first load and search run at full
//! speed. Loaded on a page's thread instead (where no Web Worker can start), it does nothing
//! until the page makes a [`HereWorker`]: this module is the only one that links the engine.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use memplan_web::error::{Message, WebError};
use memplan_web::worker::job::{self, Input, Worker};
use memplan_web::worker::memory;
use memplan_web::worker::protocol::{self, Request, Response, read_request};
use memplan_web::worker::warm_up::{WarmUp, warm_up};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

/// The system's allocator, saying to the page what ran out before the worker ends.
#[global_allocator]
static ALLOCATOR: memory::Reporting<std::alloc::System> =
    memory::Reporting::new(std::alloc::System, out_of_memory);

/// Posts to the page the size an allocation asked for and the memory the worker holds, as a
/// `Float64Array` (no answer is one), before the worker ends; nothing of it is in the worker's
/// memory. On the page's thread there is no worker to end: the page's own handler hears it.
fn out_of_memory(requested: usize) {
    let Ok(scope) = js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>() else {
        return;
    };
    let report = js_sys::Float64Array::new_with_length(2);
    report.set_index(0, requested as f64);
    report.set_index(1, memory_bytes());
    let _ = scope.post_message(&report);
}

/// Reads `{request, bytes}`: the request as JSON text, the dump (for a load) as a `Blob`.
fn request(data: &JsValue) -> Result<(Request, Option<Input>), WebError> {
    let get = |key: &str| js_sys::Reflect::get(data, &JsValue::from_str(key)).unwrap_or_default();
    let text = get("request")
        .as_string()
        .ok_or_else(|| WebError::Unreadable {
            what: Message::Request,
            detail: "it carries no request text".into(),
        })?;
    let request = read_request(&text)?;
    let bytes = match get("bytes").dyn_into::<web_sys::Blob>() {
        Ok(blob) => Some(Box::new(BlobReader::new(blob)?) as Input),
        Err(_) => None,
    };
    Ok((request, bytes))
}

/// A `Blob` read in order, a slice at a time, with `FileReaderSync` (a worker may block): a
/// gigabyte file is never in memory whole. Each `FileReaderSync` read has a cost of its own
/// besides its bytes, so it reads [`BLOB_SLICE`] bytes at once into JS memory and hands them
/// out as asked (a snapshot's reader asks a megabyte at a time); the worker's wasm memory, which
/// never shrinks, holds only what is asked.
struct BlobReader {
    blob: web_sys::Blob,
    reader: web_sys::FileReaderSync,
    at: u64,
    /// The last slice read, and where in the blob it starts.
    slice: Option<(js_sys::Uint8Array, u64)>,
}

/// The bytes [`BlobReader`] reads from its blob at once: on a 60 MiB snapshot (read twice, as
/// the unpickler does) the page's reading took 3.5-3.9 s a megabyte a read and 2.9-3.2 s so
/// (three runs of each, alternated).
const BLOB_SLICE: u64 = 16 << 20;

impl BlobReader {
    fn new(blob: web_sys::Blob) -> Result<BlobReader, WebError> {
        let reader = web_sys::FileReaderSync::new().map_err(|e| WebError::Unreadable {
            what: Message::Request,
            detail: format!("no FileReaderSync here: {e:?}"),
        })?;
        Ok(BlobReader {
            blob,
            reader,
            at: 0,
            slice: None,
        })
    }

    fn len(&self) -> u64 {
        self.blob.size() as u64
    }
}

impl std::io::Read for BlobReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let len = self.len();
        if self.at >= len || buf.is_empty() {
            return Ok(0);
        }
        let held = |(bytes, start): &(js_sys::Uint8Array, u64)| {
            (*start..start + u64::from(bytes.length())).contains(&self.at)
        };
        if !self.slice.as_ref().is_some_and(held) {
            let end = (self.at + BLOB_SLICE.max(buf.len() as u64)).min(len);
            let failed = |e: JsValue| std::io::Error::other(format!("{e:?}"));
            let slice = (self.blob)
                .slice_with_f64_and_f64(self.at as f64, end as f64)
                .map_err(failed)?;
            let buffer = self.reader.read_as_array_buffer(&slice).map_err(failed)?;
            self.slice = Some((js_sys::Uint8Array::new(&buffer), self.at));
        }
        let (bytes, start) = self.slice.as_ref().expect("a slice holding `at`");
        let from = (self.at - start) as u32;
        let n = (bytes.length() - from).min(buf.len() as u32);
        bytes
            .subarray(from, from + n)
            .copy_to(&mut buf[..n as usize]);
        self.at += u64::from(n);
        Ok(n as usize)
    }
}

impl std::io::Seek for BlobReader {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let at = match to {
            std::io::SeekFrom::Start(at) => Some(at),
            std::io::SeekFrom::End(d) => self.len().checked_add_signed(d),
            std::io::SeekFrom::Current(d) => self.at.checked_add_signed(d),
        };
        self.at = at.ok_or_else(|| std::io::Error::other("a seek before the start"))?;
        Ok(self.at)
    }
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
    // On a page's thread the module waits for the page to make a [`HereWorker`].
    let Ok(scope) = js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>() else {
        return;
    };
    let worker = Rc::new(RefCell::new(Worker::default()));
    let driving = Rc::new(Cell::new(false));
    let idle = (scope.clone(), worker.clone());
    // The jobs asked of this worker, numbered as the page numbers them.
    let jobs: Rc<Cell<i32>> = Rc::default();
    let (poster, job) = (scope.clone(), jobs.clone());
    let post = move |r: Response| send(&poster, &r, job.get());
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
            Ok((r, bytes)) => {
                if r.is_job() {
                    jobs.set(jobs.get() + 1);
                }
                worker
                    .borrow_mut()
                    .handle(r, bytes, &stopped(&flag, &jobs), &mut post)
            }
            Err(e) => post(Response::Error(Box::new(e))),
        }
        if worker.borrow().busy() && !driving.get() {
            driving.set(true);
            let (worker, driving, now, scope, flag, jobs) = (
                worker.clone(),
                driving.clone(),
                now.clone(),
                driver_scope.clone(),
                flag.clone(),
                jobs.clone(),
            );
            let stop = move || stopped(&flag, &jobs)();
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
    send(&scope, &Response::Ready, 0);
    wasm_bindgen_futures::spawn_local(warm_up_while_idle(idle.0, idle.1));
}

/// Whether a cancel came for the job running, the last of `jobs`: the page's shared flag holds
/// the number of the last job a cancel stops. Never where the page shares no flag.
fn stopped<'a>(
    flag: &'a RefCell<Option<js_sys::Int32Array>>,
    jobs: &'a Cell<i32>,
) -> impl Fn() -> bool + 'a {
    move || {
        flag.borrow()
            .as_ref()
            .is_some_and(|f| js_sys::Atomics::load(f, 0).unwrap_or(0) >= jobs.get())
    }
}

/// The worker's linear memory, bytes (wasm memory only grows: this is its peak so far). The
/// snapshot bench reads it (`scripts/snapshot-bench.mjs`) from the worker's `wasm_bindgen`.
#[wasm_bindgen]
pub fn memory_bytes() -> f64 {
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    // Read as a JS number: `ArrayBuffer::byte_length` is a u32, which 4 GiB passes.
    js_sys::Reflect::get(&memory.buffer(), &JsValue::from_str("byteLength"))
        .ok()
        .and_then(|n| n.as_f64())
        .unwrap_or(0.0)
}

/// Posts `r` as UTF-8 JSON in an `ArrayBuffer` the page takes over (transferred, not copied
/// again): a plan's answer is about a megabyte, a large snapshot's hundreds, and a JS string
/// would be decoded here and encoded again on the page. The JSON leaves the worker's memory in
/// chunks as it is written ([`ChunksOut`]), so the answer never sits in it whole beside the
/// analysis it is made of (wasm memory, once grown, stays grown).
/// With it, as `{answer, job, replaceable}`, the number of the last job the worker was asked
/// when it answered (the job a question's answer answers: questions are answered as they are
/// asked), and whether a later job supersedes it ([`Response::superseded_by_later_jobs`]): the
/// page checks both before it reads the answer.
fn send(scope: &DedicatedWorkerGlobalScope, r: &Response, job: i32) {
    let array = encode(r);
    let message = js_sys::Object::new();
    let set = |key: &str, value: &JsValue| js_sys::Reflect::set(&message, &key.into(), value);
    let _ = set("answer", &array);
    let _ = set("job", &job.into());
    if r.superseded_by_later_jobs() {
        let _ = set("replaceable", &JsValue::TRUE);
    }
    let _ = scope.post_message_with_transfer(&message, &js_sys::Array::of1(&array.buffer()));
}

/// `r` as UTF-8 JSON, in JS memory.
fn encode(r: &Response) -> js_sys::Uint8Array {
    let mut out = ChunksOut::default();
    match protocol::write_answer(r, &mut out) {
        Ok(()) => out.finish(),
        Err(e) => {
            let e = WebError::Unreadable {
                what: Message::Answer,
                detail: e.to_string(),
            };
            let mut bytes = Vec::new();
            let _ = protocol::write_answer(&Response::Error(Box::new(e)), &mut bytes);
            js_sys::Uint8Array::from(bytes.as_slice())
        }
    }
}

/// The worker on a page's thread, for a page where no Web Worker can start: the page loads
/// this module beside its own and drives it through these methods (the page's
/// `worker::client`), so the page itself never links the engine. Answers are what a Web Worker
/// posts: each is handed to `answer` as UTF-8 JSON in a `Uint8Array`.
#[wasm_bindgen]
pub struct HereWorker {
    worker: Worker,
}

#[wasm_bindgen]
impl HereWorker {
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> HereWorker {
        HereWorker {
            worker: Worker::default(),
        }
    }

    /// Hands it `request` (JSON text) with the dump's `bytes` for a load.
    pub fn handle(&mut self, request: &str, bytes: Option<Vec<u8>>, answer: &js_sys::Function) {
        let mut post = to_page(answer);
        match read_request(request) {
            Ok(r) => (self.worker).handle(r, bytes.map(job::input_of), &|| false, &mut post),
            Err(e) => post(Response::Error(Box::new(e))),
        }
    }

    /// Runs one step of its job; whether the job goes on.
    pub fn step(&mut self, answer: &js_sys::Function) -> bool {
        let mut post = to_page(answer);
        let clock = web_sys::window().and_then(|w| w.performance());
        let now = move || clock.as_ref().map_or(0.0, |p| p.now());
        self.worker.step(&now, &|| false, &mut post)
    }

    /// Whether a job runs.
    pub fn busy(&self) -> bool {
        self.worker.busy()
    }
}

/// Hands each answer to the page's `answer` as a Web Worker would post it.
fn to_page(answer: &js_sys::Function) -> impl FnMut(Response) + '_ {
    move |r| {
        let _ = answer.call1(&JsValue::NULL, &encode(&r));
    }
}

/// Bytes written to JS memory a chunk at a time.
#[derive(Default)]
struct ChunksOut {
    buffer: Vec<u8>,
    chunks: Vec<js_sys::Uint8Array>,
    len: u32,
}

/// The bytes [`ChunksOut`] gathers before it copies them out.
const CHUNK: usize = 1 << 20;

impl ChunksOut {
    fn flush_chunk(&mut self) {
        if !self.buffer.is_empty() {
            self.len += self.buffer.len() as u32;
            self.chunks
                .push(js_sys::Uint8Array::from(self.buffer.as_slice()));
            self.buffer.clear();
        }
    }

    /// The bytes, in one array.
    fn finish(mut self) -> js_sys::Uint8Array {
        self.flush_chunk();
        if let [one] = &self.chunks[..] {
            return one.clone();
        }
        let whole = js_sys::Uint8Array::new_with_length(self.len);
        let mut at = 0;
        for chunk in &self.chunks {
            whole.set(chunk, at);
            at += chunk.length();
        }
        whole
    }
}

impl std::io::Write for ChunksOut {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK {
            self.flush_chunk();
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
