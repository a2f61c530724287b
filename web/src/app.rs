//! The page: header with the bundled examples, a drop zone and file picker, the error banner and
//! the summary of the loaded dump.

use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use memplan_core::Strategy;
use memplan_formats::human::{bytes, ratio};
use wasm_bindgen_futures::JsFuture;

use crate::analysis::{Analysis, analyze};
use crate::examples::{DEFAULT_EXAMPLE, EXAMPLES};

/// What the page shows: the last dump that loaded, and the last error.
#[derive(Clone, Copy)]
struct PageState {
    analysis: RwSignal<Option<Arc<Analysis>>>,
    error: RwSignal<Option<String>>,
}

impl PageState {
    /// Analyzes `bytes`; on success replaces the dump shown, on failure keeps it and shows why.
    fn load(self, bytes: &[u8], source: &str) {
        match analyze(bytes, source, Strategy::Best) {
            Ok(a) => {
                self.analysis.set(Some(Arc::new(a)));
                self.error.set(None);
            }
            Err(message) => self.error.set(Some(message)),
        }
    }

    /// Reads a browser file, then loads it.
    fn load_file(self, file: web_sys::File) {
        let name = file.name();
        spawn_local(async move {
            match JsFuture::from(file.text()).await {
                Ok(text) => {
                    let text = text.as_string().unwrap_or_default();
                    self.load(text.as_bytes(), &name);
                }
                Err(_) => self
                    .error
                    .set(Some(format!("{name}: the browser could not read the file"))),
            }
        });
    }
}

#[component]
pub fn App() -> impl IntoView {
    let state = PageState {
        analysis: RwSignal::new(None),
        error: RwSignal::new(None),
    };
    state.load(DEFAULT_EXAMPLE.text.as_bytes(), DEFAULT_EXAMPLE.name);

    let dragging = RwSignal::new(false);
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        if let Some(file) = ev
            .data_transfer()
            .and_then(|d| d.files())
            .and_then(|f| f.get(0))
        {
            state.load_file(file);
        }
    };
    let on_pick = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        if let Some(file) = input.files().and_then(|f| f.get(0)) {
            state.load_file(file);
        }
        // Picking the same file again must load it again.
        input.set_value("");
    };

    view! {
        <div
            class="app"
            class:dragging=move || dragging.get()
            on:dragover=move |ev: web_sys::DragEvent| {
                ev.prevent_default();
                dragging.set(true);
            }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop
        >
            <header class="top">
                <h1>"memplan"</h1>
                <span class="tagline">"where every buffer lives, in time and in memory"</span>
                <nav class="examples" aria-label="Examples">
                    {EXAMPLES
                        .iter()
                        .map(|e| {
                            view! {
                                <button
                                    data-testid=format!("example-{}", e.name)
                                    on:click=move |_| state.load(e.text.as_bytes(), e.name)
                                >
                                    {e.title}
                                </button>
                            }
                        })
                        .collect_view()}
                </nav>
            </header>
            <label class="drop-zone">
                <span>"Drop a dump anywhere (memplan JSON or minimalloc CSV), or "</span>
                <span class="pick">"choose a file"</span>
                <input type="file" data-testid="file-input" accept=".json,.csv,application/json,text/csv" on:change=on_pick />
            </label>
            {move || {
                state
                    .error
                    .get()
                    .map(|message| {
                        view! {
                            <div class="error-banner" role="alert" data-testid="error">
                                <span>{message}</span>
                                <button class="dismiss" aria-label="Dismiss" on:click=move |_| state.error.set(None)>
                                    "×"
                                </button>
                            </div>
                        }
                    })
            }}
            {move || state.analysis.get().map(|a| view! { <Summary analysis=a /> })}
        </div>
    }
}

#[component]
fn Summary(analysis: Arc<Analysis>) -> impl IntoView {
    let r = &analysis.report;
    let title = if analysis.title.is_empty() {
        analysis.source.clone()
    } else {
        analysis.title.clone()
    };
    let verdict = if r.valid {
        "valid"
    } else {
        "INVALID: a bug, please report it"
    };
    let devices = r
        .devices
        .iter()
        .map(|d| {
            view! {
                <tr>
                    <td>{d.device.clone()}</td>
                    <td>{d.strategy.clone()}</td>
                    <td class="num" data-bytes=d.peak_bytes.to_string()>{bytes(d.peak_bytes)}</td>
                    <td class="num" data-bytes=d.lower_bound_bytes.to_string()>{bytes(d.lower_bound_bytes)}</td>
                    <td class="num">{ratio(d.peak_bytes, d.lower_bound_bytes)}</td>
                    <td class="num">{bytes(d.arena_bytes)}</td>
                    <td class="num">{bytes(d.always_live_bytes)}</td>
                    <td class="num">{d.pools.len()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="summary" data-testid="summary">
            <h2>{title}</h2>
            <p class="source">{format!("{} · {}", analysis.source, analysis.format.name())}</p>
            <dl class="figures">
                <div><dt>"tensors"</dt><dd data-testid="tensor-count">{analysis.tensor_count}</dd></div>
                <div><dt>"steps"</dt><dd data-testid="step-count">{analysis.step_count}</dd></div>
                <div><dt>"loops"</dt><dd>{analysis.loop_count}</dd></div>
                <div><dt>"devices"</dt><dd>{analysis.device_count}</dd></div>
                <div><dt>"peak"</dt><dd data-testid="peak-bytes" data-bytes=r.peak_bytes.to_string()>{bytes(r.peak_bytes)}</dd></div>
                <div><dt>"lower bound"</dt><dd data-testid="lower-bound" data-bytes=r.lower_bound_bytes.to_string()>{bytes(r.lower_bound_bytes)}</dd></div>
                <div><dt>"peak / LB"</dt><dd>{ratio(r.peak_bytes, r.lower_bound_bytes)}</dd></div>
                <div><dt>"checker"</dt><dd class:bad=!r.valid>{verdict}</dd></div>
            </dl>
            <table class="devices">
                <thead>
                    <tr>
                        <th>"device"</th><th>"strategy"</th><th>"peak"</th><th>"lower bound"</th>
                        <th>"peak/LB"</th><th>"arena"</th><th>"always-live"</th><th>"pools"</th>
                    </tr>
                </thead>
                <tbody>{devices}</tbody>
            </table>
        </section>
    }
}
