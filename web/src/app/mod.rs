//! The page: header with the bundled examples and the file picker, loading (drop anywhere,
//! file picker, `?src=`), the banners (errors, the link's warnings, a local file the link
//! cannot hold), the summary with the strategy selector and the arena-only control, and a
//! workspace of the views (timeline and arena map, with their toolbar, keyboard and exports)
//! beside the side panels (live at the peak, the selection's details). In embed mode, the view
//! alone fills the frame, with a link to open it whole.
//!
//! The link follows the screen: a new dump, view, strategy, device or focus is a history entry
//! (Back walks them); zoom, selection, search and order replace the current one.

use leptos::ev;
use leptos::html::Input;
use leptos::prelude::*;
use leptos::task::spawn_local;
use memplan_human::bytes;
use wasm_bindgen::JsCast;

use crate::error::WebError;
use crate::page::examples::{DEFAULT_EXAMPLE, EXAMPLES, PROGRAMS};
use crate::page::state::{Busy, MissingFile, Origin, PageState, Restore};
use crate::page::url::UrlState;
use crate::views::panels::{Details, PeakTable, Unplanned};
use crate::worker::protocol::STAGES;

mod history;
mod summary;
mod views;

use history::{follow_link, history_key, write_link};
use summary::Summary;
use views::{Help, Views};

/// How long work runs before its progress bar shows.
const PROGRESS_DELAY: std::time::Duration = std::time::Duration::from_millis(150);

/// How long a plan in the worker holds the link back (see the link's effect in [`App`]).
const LINK_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// The largest input the page reads whole, bytes: past it the page says so instead of
/// freezing.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The largest PyTorch snapshot or profiler trace the page reads (as a stream, in the worker):
/// a file this size holds about as many allocations as the worker plans
/// ([`crate::worker::job::MAX_BUFFERS`], refused past it once read), with its plan and views
/// inside the worker's memory (4 GiB at most) with room to spare, as
/// `scripts/snapshot-bench.mjs` measures it (docs/benchmarks.md). A gzipped trace streams too,
/// within [`MAX_INPUT_BYTES`] (it unpacks to about twenty times its size).
pub const MAX_STREAMED_BYTES: u64 = 1 << 30;

/// Refuses `blob` (named `name`) past what the page reads of its kind: a snapshot or a trace
/// streams, any other file is read whole.
async fn check_size(blob: &web_sys::Blob, name: &str) -> Result<(), WebError> {
    let size = blob.size() as u64;
    if size <= MAX_INPUT_BYTES {
        return Ok(());
    }
    let head = match blob.slice_with_f64_and_f64(0.0, memplan_formats::STREAM_HEAD_BYTES as f64) {
        Ok(head) => crate::page::fetch::bytes_of(&head).await?,
        Err(_) => Vec::new(),
    };
    let (most, what) = match memplan_formats::streamed_format(&head) {
        Some(memplan_formats::Format::TorchSnapshot) => {
            (MAX_STREAMED_BYTES, "a PyTorch snapshot".to_string())
        }
        Some(_) => (MAX_STREAMED_BYTES, "a PyTorch profiler trace".to_string()),
        None => (
            MAX_INPUT_BYTES,
            format!(
                "a file it reads whole (PyTorch snapshots and profiler traces are read as streams, up to {})",
                memplan_human::bytes(MAX_STREAMED_BYTES)
            ),
        ),
    };
    if size <= most {
        return Ok(());
    }
    Err(WebError::TooLarge {
        name: name.to_string(),
        size,
        most,
        what,
    })
}

fn location_search() -> String {
    web_sys::window()
        .and_then(|w| w.location().search().ok())
        .unwrap_or_default()
}

/// Reads browser files (one dump, or an XLA pair), then loads them in the worker.
fn load_files(state: PageState, files: Vec<web_sys::File>) {
    let Some(name) = files.first().map(web_sys::File::name) else {
        return;
    };
    state
        .busy
        .set(Some(Busy::stage(0, STAGES, format!("reading {name}"))));
    spawn_local(async move {
        let read = crate::page::fetch::read_files(&files).await;
        let checked = match read {
            Ok(bytes) => check_size(&bytes, &name).await.map(|()| bytes),
            Err(e) => Err(e),
        };
        let bytes = match checked {
            Ok(bytes) => bytes,
            Err(e) => {
                state.busy.set(None);
                state.error.set(Some(e));
                return;
            }
        };
        let origin = Origin {
            file: Some(name.clone()),
            ..Origin::default()
        };
        state.load_another(bytes, &name, origin)
    });
}

/// A bundled example's button: loads it, forgetting the flips of the dump shown.
#[component]
fn ExampleButton(
    state: PageState,
    example: &'static crate::page::examples::Example,
) -> impl IntoView {
    view! {
        <button
            data-testid=format!("example-{}", example.name)
            on:click=move |ev: web_sys::MouseEvent| {
                let origin = Origin { example: Some(example.name.to_string()), ..Origin::default() };
                let bytes = crate::page::fetch::blob_of(example.text.as_bytes());
                state.load_another(bytes, example.name, origin);
                // A menu the button sits in folds again.
                if let Some(menu) = ev
                    .current_target()
                    .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                    .and_then(|b| b.closest("details").ok().flatten())
                {
                    let _ = menu.remove_attribute("open");
                }
            }
        >
            {example.title}
        </button>
    }
}

#[component]
pub fn App() -> impl IntoView {
    let url = UrlState::parse(&location_search());
    let state = PageState::new(&url);
    // The worker starts once the page has drawn its first frame (started with the page, it
    // delayed that frame by about 30 ms on two cores). An embedded view shows a bundled example
    // and rarely loads a file: it spares the reader's machine the worker's warm-up.
    if !url.embed {
        request_animation_frame(move || {
            set_timeout(move || state.start_worker(), std::time::Duration::ZERO)
        });
    }

    // First load: `?src=` (in the worker), else `?example=` or the default example (here); a
    // link to a local file says so and offers to choose it again. The link's selection, device
    // and zoom are restored once it is planned.
    let origin = Origin {
        example: url.example.clone(),
        src: url.src.clone(),
        file: url.file.clone(),
        posted: url.posted.clone(),
    };
    state.restore.set_value(Some(Restore {
        against: url.against.clone(),
        selected: url.selected.clone(),
        device: url.device.clone(),
        zoom: url.zoom,
        origin: origin.clone(),
        routine: url.routine.clone(),
    }));
    match (url.src.clone(), url.example.clone(), url.file.clone()) {
        (Some(src), _, _) => {
            state
                .busy
                .set(Some(Busy::stage(0, STAGES, format!("fetching {src}"))));
            spawn_local(async move {
                let fetched = crate::page::fetch::fetch_dump(&src).await;
                let checked = match fetched {
                    Ok(bytes) => check_size(&bytes, &src).await.map(|()| bytes),
                    Err(e) => Err(e),
                };
                match checked {
                    Ok(bytes) => state.load(bytes, &src, origin),
                    Err(e) => {
                        state.busy.set(None);
                        state.restore.set_value(None);
                        state.error.set(Some(e));
                    }
                }
            });
        }
        (None, None, Some(name)) => state.missing_file.set(Some(MissingFile {
            name,
            posted: false,
        })),
        (None, None, None) if url.posted.is_some() => {
            // The embed that opened this tab hands the dump over when told this page is ready.
            let name = url.posted.clone().unwrap_or_default();
            state
                .missing_file
                .set(Some(MissingFile { name, posted: true }));
        }
        (None, example, _) => {
            let example = example
                .as_deref()
                .and_then(crate::page::examples::named)
                .unwrap_or(DEFAULT_EXAMPLE);
            state.load_example(example, origin);
        }
    }

    // Work that ends quickly shows no progress: the bar appears after PROGRESS_DELAY, so a flip
    // or a slider does not push the page down and back up (two layouts, a canvas resized twice).
    let progress_due = RwSignal::new(false);
    let working = Memo::new(move |_| state.busy.with(Option::is_some));
    Effect::new(move |_| {
        if working.get() {
            set_timeout(
                move || {
                    if working.get_untracked() {
                        progress_due.set(true);
                    }
                },
                PROGRESS_DELAY,
            );
        } else {
            progress_due.set(false);
        }
    });

    // The link follows the screen; what is shown makes a history entry, the rest replaces it.
    // While the worker plans, the screen still shows the last plan, and so does the link; it is
    // written after the frame that shows the new plan: a history write costs Chromium 4 to 15 ms,
    // which before that frame would delay a flip's redraw. A plan still running after
    // LINK_WAIT (a search) no longer holds it back.
    let key = StoredValue::new(history_key(&url));
    // Plans begun, so that a wait from one plan does not write the link in the middle of the
    // next (a flip soon after another would pay for the history write it was spared).
    let plans = StoredValue::new(0u64);
    Effect::new(move |was_planning: Option<bool>| {
        // Read for what the link holds: a change re-runs this.
        state.url_state();
        if state.planning.get() {
            if was_planning != Some(true) {
                plans.update_value(|n| *n += 1);
            }
            let plan = plans.get_value();
            set_timeout(
                move || {
                    if state.planning.get_untracked() && plans.get_value() == plan {
                        write_link(state, key);
                    }
                },
                LINK_WAIT,
            );
            return true;
        }
        if was_planning == Some(true) {
            request_animation_frame(move || {
                set_timeout(move || write_link(state, key), std::time::Duration::ZERO)
            });
        } else {
            write_link(state, key);
        }
        false
    });
    // Back and Forward: the root lives as long as the page, so these listeners do too.
    let _history = window_event_listener(ev::popstate, move |_| follow_link(state, key));
    crate::page::embed::listen(state);

    let search_input = NodeRef::<Input>::new();
    let file_input = NodeRef::<Input>::new();
    let _keys = window_event_listener(ev::keydown, move |e: web_sys::KeyboardEvent| {
        let typing = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlElement>().ok())
            .is_some_and(|t| matches!(t.tag_name().as_str(), "INPUT" | "SELECT" | "TEXTAREA"));
        if e.key() == "Escape" {
            state.selected.set(None);
            state.help.set(false);
            if let Some(t) = e
                .target()
                .and_then(|t| t.dyn_into::<web_sys::HtmlElement>().ok())
            {
                let _ = t.blur();
            }
            return;
        }
        if typing || e.ctrl_key() || e.meta_key() || e.alt_key() {
            return;
        }
        let window = state.window();
        let fit = crate::views::canvas::world(state, state.tab.get_untracked());
        let Some(fit) = fit else { return };
        let current = window.get_untracked().unwrap_or(fit);
        // W/S zoom time only; A/D pan it; F fits everything.
        match e.key().as_str() {
            "w" | "W" => window.set(Some(current.zoom_x(1.5, 0.5, 1.0))),
            "s" | "S" => window.set(Some(current.zoom_x(1.0 / 1.5, 0.5, 1.0))),
            "a" | "A" => window.set(Some(current.pan(-0.2, 0.0))),
            "d" | "D" => window.set(Some(current.pan(0.2, 0.0))),
            "f" | "F" => window.set(None),
            "/" => {
                e.prevent_default();
                if let Some(input) = search_input.get_untracked() {
                    let _ = input.focus();
                }
            }
            "?" => state.help.update(|h| *h = !*h),
            _ => (),
        }
    });

    let dragging = RwSignal::new(false);
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        if let Some(list) = ev.data_transfer().and_then(|d| d.files()) {
            load_files(state, crate::page::fetch::dump_files(&list));
        }
    };
    let on_pick = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        if let Some(list) = input.files() {
            load_files(state, crate::page::fetch::dump_files(&list));
        }
        input.set_value("");
    };
    let choose_file = move |_| {
        if let Some(input) = file_input.get_untracked() {
            input.click();
        }
    };
    let loaded = move || state.analysis.with(Option::is_some);

    view! {
        // Busy while the worker works, from the first moment (the bar waits PROGRESS_DELAY):
        // assistive technology then waits for the views it is about to change.
        <div
            class="app"
            aria-busy=move || working.get().to_string()
            class:embed=state.embed
            class:dragging=move || dragging.get()
            on:dragover=move |ev: web_sys::DragEvent| {
                ev.prevent_default();
                dragging.set(true);
            }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop
        >
            <Show when=move || !state.embed>
                <header class="top">
                    <h1>"memplan"</h1>
                    <span class="tagline">"where every buffer lives, in time and in memory"</span>
                    <nav class="examples" aria-label="Examples">
                        {EXAMPLES
                            .iter()
                            .map(|e| view! { <ExampleButton state=state example=e /> })
                            .collect_view()}
                        // Programs of several routines: folded, so that the header keeps to one row.
                        <details class="programs-menu" data-testid="programs-menu">
                            <summary>"programs"</summary>
                            <div class="programs-list">
                                {PROGRAMS
                                    .iter()
                                    .map(|e| view! { <ExampleButton state=state example=e /> })
                                    .collect_view()}
                            </div>
                        </details>
                        <label class="open-file" title="memplan JSON, minimalloc CSV, ONNX, TFLite, a PyTorch memory snapshot or profiler trace, or an XLA buffer assignment with its live range (choose both, or a zip of them); or drop files anywhere">
                            "open a file…"
                            <input node_ref=file_input type="file" data-testid="file-input" multiple accept=".json,.gz,.zip,.csv,.onnx,.tflite,.pickle,.pkl,.txt,application/json,application/gzip,application/zip,text/csv,text/plain" on:change=on_pick />
                        </label>
                        <button class="help-button" on:click=move |_| state.help.update(|h| *h = !*h)>"? keys"</button>
                    </nav>
                </header>
                {move || state.missing_file.get().map(|missing| view! {
                    <div class="notice" data-testid="missing-file" role="status">
                        <span>{if missing.posted {
                            format!("“{}” was posted to an embedded explorer by the page around it: a posted dump cannot travel in a link. Open it from that page, or choose the file to see this view.", missing.name)
                        } else {
                            format!("“{}” was opened from your disk, so the link cannot hold it. Choose it again to see this view.", missing.name)
                        }}</span>
                        <button on:click=choose_file>"choose the file"</button>
                    </div>
                })}
                {move || {
                    let notices = state.notices.get();
                    (!notices.is_empty()).then(|| view! {
                        <div class="notice" data-testid="url-warning" role="status">
                            <ul>{notices.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}</ul>
                            <button class="dismiss" aria-label="Dismiss" on:click=move |_| state.notices.set(Vec::new())>"×"</button>
                        </div>
                    })
                }}
                <Show when=move || !loaded() && state.busy.with(Option::is_none) && state.missing_file.with(Option::is_none)>
                    <div class="drop-zone" on:click=choose_file>
                        "Drop a dump anywhere (memplan JSON, minimalloc CSV, ONNX, TFLite, PyTorch memory snapshot or profiler trace, XLA buffer assignment with its live range), or "
                        <span class="pick">"choose a file"</span>
                    </div>
                </Show>
            </Show>
            {move || state.busy.get().filter(|_| progress_due.get()).map(|busy| view! {
                <div class="progress" data-testid="progress" role="status"
                    data-read-done=busy.read.map(|r| r.done.to_string())
                    data-read-of=busy.read.map(|r| r.of.to_string())>
                    <progress max=busy.of value=busy.value()></progress>
                    <span class="spinner"></span>
                    <span>{busy.what}</span>
                    {busy.solver.map(|s| view! {
                        <span class="solver" data-testid="solver-progress"
                            data-best-bytes=s.best_bytes.to_string()
                            data-bound-bytes=s.bound_bytes.to_string()
                            title="the search's best layout so far, and what it has proven no layout goes below">
                            <progress max=s.best_bytes.to_string() value=s.bound_bytes.to_string()></progress>
                            {format!(
                                "best so far {} · optimal is at least {}{}",
                                bytes(s.best_bytes),
                                bytes(s.bound_bytes),
                                s.nodes.map(|n| format!(" · {n} nodes")).unwrap_or_default()
                            )}
                        </span>
                    })}
                    <button data-testid="cancel" prop:disabled=move || state.cancelling.get()
                        on:click=move |_| state.cancel()>
                        {move || if state.cancelling.get() { "cancelling…" } else { "cancel" }}
                    </button>
                </div>
            })}
            {move || state.error.get().map(|message| view! {
                <div class="error-banner" role="alert" data-testid="error">
                    <span>{memplan_human::one_line(&message.to_string())}</span>
                    <button class="dismiss" aria-label="Dismiss" on:click=move |_| state.error.set(None)>"×"</button>
                </div>
            })}
            <Show when=move || state.embed>
                // The dump's title and footprint, and a link to open it whole: a bar of its own,
                // so it covers no label of the view nor the error banner.
                <div class="embed-bar">
                    {move || state.analysis.get().map(|a| {
                        let r = &a.summary;
                        view! {
                            <span class="embed-title" data-testid="embed-title" title=a.source.clone()>
                                {if a.model.title.is_empty() { a.source.clone() } else { a.model.title.clone() }}
                            </span>
                            <span class="embed-footprint" data-testid="embed-footprint" data-bytes=r.footprint_bytes.to_string()
                                title=format!("lower bound {}", memplan_human::bytes(r.lower_bound_bytes))>
                                {format!("footprint {}", memplan_human::bytes(r.footprint_bytes))}
                            </span>
                        }
                    })}
                    // A posted dump is handed to the page this opens (its opener is this embed).
                    <a class="open-whole" data-testid="open-whole" target="_blank"
                        rel=move || if state.origin.with(|o| o.posted.is_some()) && crate::page::embed::holds_posted() { "opener" } else { "noopener" }
                        href=move || {
                            let mut u = state.url_state();
                            u.embed = false;
                            let query = u.to_query();
                            if query.is_empty() { "./".to_string() } else { format!("./?{query}") }
                        }
                    >"open in memplan ↗"</a>
                </div>
            </Show>
            <Show when=loaded>
                <Show when=move || !state.embed>
                    <crate::views::program::ProgramView state=state />
                </Show>
                {move || (!state.embed).then(|| state.analysis.get().map(|a| view! { <Summary state=state analysis=a /> }))}
                <div class="workspace" class:embed=state.embed>
                    <Views state=state search_input=search_input />
                    <Show when=move || !state.embed>
                        <aside class="side">
                            {move || (state.panel.get() == crate::page::url::Panel::Compare
                                && state.comparison.with(Option::is_some))
                                .then(|| view! { <crate::views::compare::DiffTable state=state /> })}
                            <PeakTable state=state />
                            <Details state=state />
                            <Unplanned state=state />
                        </aside>
                    </Show>
                </div>
            </Show>
            <Show when=move || state.help.get()><Help state=state /></Show>
        </div>
    }
}
