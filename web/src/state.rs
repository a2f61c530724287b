//! The page's state: what is loaded and planned, and everything the user chose. Signals are
//! `Copy`, so views take the whole state and read what they need.

use std::sync::Arc;

use leptos::prelude::*;
use memplan_core::StrategyChoice;
use std::collections::BTreeMap;

use memplan_core::budget::DriverTerms;
use memplan_engine::{DeviceBudget, Fits, Scenario};
use memplan_render::color::ColorBy;
use memplan_render::model::RowOrder;
use memplan_render::scene::Viewport;

use crate::analysis::{
    Analysis, AnalysisCache, CompareView, ExportKind, FitLog, Local, SWEEP_EXHAUSTIVE_MOST,
    SweepView, unflipped,
};
use crate::url_state::{Panel, Tab, UrlState};
use crate::worker_client::{Client, new_client};
use crate::worker_protocol::STAGES;
use memplan_engine::SweepJob;

/// A load in progress: stage `stage` of `of`.
#[derive(Debug, Clone, PartialEq)]
pub struct Busy {
    pub stage: u32,
    pub of: u32,
    pub what: String,
    /// While a search runs: the lowest footprint so far, what no layout goes below, and the
    /// exact search's nodes.
    pub solver: Option<SolverProgress>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SolverProgress {
    pub best_bytes: u64,
    pub bound_bytes: u64,
    pub nodes: Option<u64>,
}

/// Where the dump shown came from, for the link: a bundled example, a `?src=` URL, or a file
/// from the user's disk (only its name: the file itself cannot be in a link).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Origin {
    pub example: Option<String>,
    pub src: Option<String>,
    pub file: Option<String>,
}

/// What a link asks to show once its dump is loaded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Restore {
    pub selected: Option<String>,
    pub device: Option<String>,
    pub zoom: Option<Viewport>,
    pub origin: Origin,
}

#[derive(Clone, Copy)]
pub struct PageState {
    pub analysis: RwSignal<Option<Arc<Analysis>>>,
    pub error: RwSignal<Option<String>>,
    pub strategy: RwSignal<StrategyChoice>,
    /// `search`'s budget (the CLI's `--work-limit`); `None`: the default.
    pub work_limit: RwSignal<Option<u64>>,
    pub tab: RwSignal<Tab>,
    /// The panel beside the views.
    pub panel: RwSignal<Panel>,
    /// The selected buffer (index into the view model's buffers).
    pub selected: RwSignal<Option<usize>>,
    pub device: RwSignal<usize>,
    pub sort: RwSignal<RowOrder>,
    pub color_by: RwSignal<ColorBy>,
    pub search: RwSignal<String>,
    /// The window of each view; `None` shows everything.
    pub arena_window: RwSignal<Option<Viewport>>,
    pub timeline_window: RwSignal<Option<Viewport>>,
    pub help: RwSignal<bool>,
    /// Whether the views leave the always-live buffers out; `None`: when they dwarf the arena.
    pub arena_only: RwSignal<Option<bool>>,
    /// The time axis labels step names rather than position numbers.
    pub axis_steps: RwSignal<bool>,
    /// Messages about the link (values it could not use, a file it cannot hold).
    pub notices: RwSignal<Vec<String>>,
    /// A local file the link named but cannot hold: offer to choose it again.
    pub missing_file: RwSignal<Option<String>>,
    pub embed: bool,
    /// What is being loaded, while it is.
    pub busy: RwSignal<Option<Busy>>,
    /// A plan of the worker's dump is in progress: cancel asks the worker to stop it and keep
    /// its best so far (rather than terminating it).
    pub planning: RwSignal<bool>,
    /// The plan shown is a search's best so far: a cancel ended it early.
    pub cancelled: RwSignal<bool>,
    /// Where the dump shown came from.
    pub origin: RwSignal<Origin>,
    /// The dump loaded on the main thread (bundled examples) with its plan, for re-planning and
    /// exports there; `None` when the worker holds it.
    pub local: StoredValue<Option<Arc<Local>>>,
    /// What to restore when the next analysis arrives.
    pub restore: StoredValue<Option<Restore>>,
    pub worker: Client,
    /// The tensors recomputed at their uses (the scenario's flips), by id.
    pub inline: RwSignal<Vec<String>>,
    /// The budget field of the flips panel, as typed.
    pub budget: RwSignal<String>,
    /// The last fit's answer, shown as the plan log.
    pub fit_log: RwSignal<Option<FitLog>>,
    /// The device class every device of the dump is (its name and memory terms), if chosen.
    pub hardware: RwSignal<Option<(String, DriverTerms)>>,
    /// The utilization the device runs at.
    pub util: RwSignal<f64>,
    /// Values the user gave the dump's params (the rest keep their defaults).
    pub params: RwSignal<BTreeMap<String, u64>>,
    /// The last "largest that fits" answer.
    pub fits: RwSignal<Option<Fits>>,
    /// The last budget sweep, and how many budgets the next one fits.
    pub sweep: RwSignal<Option<SweepView>>,
    pub sweep_points: RwSignal<usize>,
    /// A sweep of a main-thread dump runs (in steps, yielding between them), and whether a
    /// cancel asked it to stop.
    pub local_sweep: RwSignal<bool>,
    pub local_stop: StoredValue<bool>,
    /// The plan shown against another: its diff.
    pub comparison: RwSignal<Option<CompareView>>,
    /// The main-thread dump's plan without flips, kept across toggles.
    pub cache: StoredValue<AnalysisCache>,
}

impl PageState {
    pub fn new(url: &UrlState) -> Self {
        PageState {
            analysis: RwSignal::new(None),
            error: RwSignal::new(None),
            strategy: RwSignal::new(url.strategy),
            work_limit: RwSignal::new(url.work_limit),
            tab: RwSignal::new(url.tab),
            panel: RwSignal::new(url.panel),
            selected: RwSignal::new(None),
            device: RwSignal::new(0),
            sort: RwSignal::new(url.sort),
            color_by: RwSignal::new(url.color_by),
            search: RwSignal::new(url.search.clone()),
            arena_window: RwSignal::new(None),
            timeline_window: RwSignal::new(None),
            help: RwSignal::new(false),
            arena_only: RwSignal::new(url.arena_only),
            axis_steps: RwSignal::new(url.axis_steps),
            notices: RwSignal::new(url.warnings.clone()),
            missing_file: RwSignal::new(None),
            embed: url.embed,
            busy: RwSignal::new(None),
            planning: RwSignal::new(false),
            cancelled: RwSignal::new(false),
            origin: RwSignal::new(Origin::default()),
            local: StoredValue::new(None),
            restore: StoredValue::new(None),
            worker: new_client(),
            inline: RwSignal::new(url.inline.clone()),
            budget: RwSignal::new(url.budget.clone()),
            fit_log: RwSignal::new(None),
            hardware: RwSignal::new(
                url.hardware
                    .as_deref()
                    .and_then(memplan_formats::hardware::bundled)
                    .map(|c| (c.class, c.memory)),
            ),
            util: RwSignal::new(url.util),
            params: RwSignal::new(url.params.clone()),
            fits: RwSignal::new(None),
            sweep: RwSignal::new(None),
            sweep_points: RwSignal::new(32),
            local_sweep: RwSignal::new(false),
            local_stop: StoredValue::new(false),
            comparison: RwSignal::new(None),
            cache: StoredValue::new(AnalysisCache::default()),
        }
    }

    /// The scenario the page's controls describe.
    pub fn scenario(self) -> Scenario {
        Scenario {
            strategy: self.strategy.get_untracked(),
            work_limit: self.work_limit.get_untracked(),
            inline: self.inline.get_untracked(),
            params: self.params.get_untracked(),
            device: self
                .hardware
                .get_untracked()
                .map(|(class, terms)| DeviceBudget {
                    class,
                    terms,
                    util: self.util.get_untracked(),
                }),
            ..Scenario::default()
        }
    }

    /// Loads a small input (a bundled example) on the main thread; on success it replaces the
    /// dump shown, on failure the old one stays and the banner says why.
    pub fn load_here(self, bytes: &[u8], source: &str, origin: Origin) -> bool {
        match Local::load(bytes, source, &self.scenario()) {
            Ok(local) => {
                crate::worker_client::stop(self);
                let mut cache = AnalysisCache::default();
                let a = local.analysis_cached(&mut cache);
                self.cache.set_value(cache);
                self.local.set_value(Some(Arc::new(local)));
                self.apply(a, Some(origin));
                true
            }
            Err(e) => {
                self.error.set(Some(e.to_string()));
                false
            }
        }
    }

    /// Loads an input of any size in the worker; the page stays responsive, shows progress and
    /// can cancel. `origin` is where it came from, for the link.
    pub fn load_in_worker(self, bytes: js_sys::ArrayBuffer, source: &str, origin: Origin) {
        let what = format!("sending {source}");
        self.busy.set(Some(Busy {
            stage: 0,
            of: STAGES,
            what,
            solver: None,
        }));
        self.restore
            .update_value(|r| r.get_or_insert_with(Restore::default).origin = origin);
        crate::worker_client::load(self, source, bytes);
    }

    /// Shows a new analysis. A new dump (`origin` given, or a pending restore) resets the
    /// selection and zoom (or restores a link's); a re-plan of the same dump keeps them.
    pub fn apply(self, a: Analysis, origin: Option<Origin>) {
        let restore = self.restore.try_update_value(Option::take).flatten();
        if origin.is_some() || restore.is_some() {
            let restore = restore.unwrap_or_default();
            if origin.is_none() {
                // The worker's dump replaces a main-thread one.
                self.local.set_value(None);
            }
            let device = restore
                .device
                .as_ref()
                .and_then(|id| a.model.devices.iter().position(|d| &d.id == id))
                .unwrap_or(0);
            self.device.set(device);
            self.selected.set(
                restore
                    .selected
                    .as_deref()
                    .and_then(|id| a.model.buffer_of(id)),
            );
            self.arena_window.set(None);
            self.timeline_window.set(None);
            self.window().set(restore.zoom);
            self.origin.set(origin.unwrap_or(restore.origin));
        }
        self.analysis.set(Some(Arc::new(a)));
        self.cancelled.set(false);
        self.error.set(None);
    }

    /// Re-plans the loaded dump with another strategy, keeping selection and zoom: on the main
    /// thread when it was loaded there, else in the worker.
    pub fn set_strategy(self, strategy: StrategyChoice) {
        self.strategy.set(strategy);
        self.replan();
    }

    /// Re-plans with `search`'s budget set to `work_limit` (`None`: the default).
    pub fn set_work_limit(self, work_limit: Option<u64>) {
        self.work_limit.set(work_limit);
        self.replan();
    }

    /// A new dump starts with no flips, no fit and no param values of the last one's.
    pub fn forget_flips(self) {
        self.inline.set(Vec::new());
        self.fit_log.set(None);
        self.params.set(BTreeMap::new());
        self.fits.set(None);
        self.sweep.set(None);
        self.comparison.set(None);
    }

    /// Compares the plan shown with `after`: the dump under `scenario`, or `other` (a file's
    /// name and bytes) under it. Here for a main-thread dump, in the worker otherwise.
    pub fn compare(self, scenario: Scenario, other: Option<(String, js_sys::ArrayBuffer)>) {
        match self.local.get_value() {
            Some(local) => {
                let loaded = match &other {
                    Some((source, bytes)) => {
                        match memplan_engine::Session::load(
                            &js_sys::Uint8Array::new(bytes).to_vec(),
                            source,
                        ) {
                            Ok(session) => Some(session),
                            Err(e) => return self.error.set(Some(e.to_string())),
                        }
                    }
                    None => None,
                };
                let after = loaded.as_ref().unwrap_or(&local.session);
                match crate::analysis::compare((&local.session, &local.outcome), (after, &scenario))
                {
                    Ok(view) => self.comparison.set(Some(view)),
                    Err(e) => self.error.set(Some(e.to_string())),
                }
            }
            None if self.analysis.get_untracked().is_some() => {
                crate::worker_client::compare(self, scenario, other);
            }
            None => {}
        }
    }

    /// Fits budgets from the minimized footprint to the baseline, from no flips: in the worker
    /// for a user's dump; here, in steps that yield to the page, for a bundled example. Either
    /// way the progress bar shows the step and cancel keeps the budgets fitted so far.
    pub fn run_sweep(self) {
        let points = self.sweep_points.get_untracked();
        let scenario = unflipped(&self.scenario());
        let busy = |what: String, stage: usize, of: usize| Busy {
            stage: stage as u32,
            of: of as u32,
            what,
            solver: None,
        };
        match self.local.get_value() {
            Some(local) => {
                self.local_stop.set_value(false);
                self.local_sweep.set(true);
                leptos::task::spawn_local(async move {
                    let mut job = SweepJob::new(scenario, points, SWEEP_EXHAUSTIVE_MOST);
                    loop {
                        if self.local_stop.get_value() {
                            let partial = job.partial();
                            self.sweep
                                .set(Some(SweepView::of(&local.session, &partial, true)));
                            break;
                        }
                        match local.session.sweep_step(&mut job) {
                            Ok(Some(done)) => {
                                self.sweep
                                    .set(Some(SweepView::of(&local.session, &done, false)));
                                break;
                            }
                            Ok(None) => {
                                let (done, of) = job.progress();
                                let what = format!("sweeping budgets: step {done} of {of}");
                                self.busy.set(Some(busy(what, done, of)));
                                next_tick().await;
                            }
                            Err(e) => {
                                self.error.set(Some(e.to_string()));
                                break;
                            }
                        }
                    }
                    self.busy.set(None);
                    self.local_sweep.set(false);
                });
            }
            None if self.analysis.get_untracked().is_some() => {
                self.busy
                    .set(Some(busy("sweeping budgets".into(), 0, points + 2)));
                crate::worker_client::sweep(self, scenario, points);
            }
            None => {}
        }
    }

    /// Plans with `flips` (a sweep point's), replacing the page's.
    pub fn apply_flips(self, flips: Vec<String>) {
        self.inline.set(flips);
        self.replan();
    }

    /// Re-plans with the device class, utilization or a param changed by `change`.
    pub fn change_device(self, change: impl FnOnce()) {
        change();
        self.fits.set(None);
        self.replan();
    }

    /// Asks for the largest value of `param` in `lo..=hi` that fits the device: here for a
    /// main-thread dump, in the worker otherwise.
    pub fn find_largest(self, param: String, lo: u64, hi: u64) {
        let scenario = self.scenario();
        match self.local.get_value() {
            Some(local) => match local.session.largest_fitting(&scenario, &param, lo, hi) {
                Ok(fits) => self.fits.set(Some(fits)),
                Err(e) => self.error.set(Some(e.to_string())),
            },
            None if self.analysis.get_untracked().is_some() => {
                crate::worker_client::fits(self, scenario, param, lo, hi);
            }
            None => {}
        }
    }

    /// Recomputes `tensor` at its uses, or stops doing so, and re-plans.
    pub fn toggle_flip(self, tensor: &str) {
        self.inline
            .update(|flips| match flips.iter().position(|t| t == tensor) {
                Some(k) => {
                    flips.remove(k);
                }
                None => flips.push(tensor.to_string()),
            });
        self.replan();
    }

    /// Fits the dump to the budget field from no flips, shows the log and plans with the
    /// fit's flips: here for a main-thread dump, in the worker otherwise.
    pub fn fit(self) {
        let budget = self.budget.get_untracked();
        match self.local.get_value() {
            Some(local) => match crate::analysis::fit(&local.session, &self.scenario(), &budget) {
                Ok(log) => {
                    self.inline.set(log.inline());
                    self.fit_log.set(Some(log));
                    self.replan();
                }
                Err(e) => self.error.set(Some(e.to_string())),
            },
            None if self.analysis.get_untracked().is_some() => {
                self.busy.set(Some(Busy {
                    stage: 2,
                    of: STAGES,
                    what: format!("fitting to {budget}"),
                    solver: None,
                }));
                crate::worker_client::fit(self, self.scenario(), budget);
            }
            None => {}
        }
    }

    /// Plans the loaded dump under the page's scenario, keeping selection and zoom.
    fn replan(self) {
        let strategy = self.strategy.get_untracked();
        match self.local.get_value() {
            Some(local) => match local.replan(&self.scenario()) {
                Ok(local) => {
                    let a = self
                        .cache
                        .try_update_value(|cache| local.analysis_cached(cache))
                        .unwrap_or_else(|| local.analysis());
                    self.local.set_value(Some(Arc::new(local)));
                    self.apply(a, None);
                }
                Err(e) => self.error.set(Some(e.to_string())),
            },
            None if self.analysis.get_untracked().is_some() => {
                let what = format!("planning with {strategy}");
                self.busy.set(Some(Busy {
                    stage: 2,
                    of: STAGES,
                    what,
                    solver: None,
                }));
                crate::worker_client::plan(self, self.scenario());
            }
            None => {}
        }
    }

    /// Downloads the plan as `kind`: made here for a main-thread dump, by the worker otherwise.
    pub fn export(self, kind: ExportKind) {
        match self.local.get_value() {
            Some(local) => {
                let made = crate::analysis::export(&local.session, &local.outcome, kind)
                    .map_err(crate::error::WebError::from)
                    .and_then(|f| crate::export::download_text(&f.file_name, &f.mime, &f.text));
                if let Err(e) = made {
                    self.error.set(Some(format!("export failed: {e}")));
                }
            }
            None => crate::worker_client::export(self, kind),
        }
    }

    /// Whether the views show the arena alone now: the user's choice, else when the always-live
    /// bytes dwarf the arena of the device shown.
    pub fn arena_only_now(self) -> bool {
        self.arena_only.get().unwrap_or_else(|| {
            self.analysis.get().is_some_and(|a| {
                a.model
                    .always_live_dwarfs_arena(a.model.clamp_device(self.device.get()))
            })
        })
    }

    /// [`PageState::arena_only_now`], without tracking.
    pub fn arena_only_untracked(self) -> bool {
        untrack(|| self.arena_only_now())
    }

    /// The window of the current view.
    pub fn window(self) -> RwSignal<Option<Viewport>> {
        match self.tab.get_untracked() {
            Tab::Timeline => self.timeline_window,
            Tab::Arena => self.arena_window,
        }
    }

    /// The URL state of the screen.
    pub fn url_state(self) -> UrlState {
        let tab = self.tab.get();
        let (selected, device) = self
            .analysis
            .with(|analysis| {
                let model = &analysis.as_ref()?.model;
                let selected = (self.selected.get())
                    .and_then(|b| model.buffers.get(b).map(|x| x.tensor.to_string()));
                let device = (model.devices.len() > 1).then(|| {
                    model.devices[self.device.get().min(model.devices.len() - 1)]
                        .id
                        .clone()
                });
                Some((selected, device))
            })
            .unwrap_or_default();
        let zoom = match tab {
            Tab::Timeline => self.timeline_window.get(),
            Tab::Arena => self.arena_window.get(),
        };
        let Origin { example, src, file } = self.origin.get();
        UrlState {
            hardware: self.hardware.get().map(|(class, _)| class),
            util: self.util.get(),
            params: self.params.get(),
            tab,
            panel: self.panel.get(),
            inline: self.inline.get(),
            budget: self.budget.get(),
            strategy: self.strategy.get(),
            work_limit: self.work_limit.get(),
            selected,
            zoom,
            device,
            sort: self.sort.get(),
            color_by: self.color_by.get(),
            search: self.search.get(),
            example,
            src,
            file,
            arena_only: self.arena_only.get(),
            axis_steps: self.axis_steps.get(),
            embed: self.embed,
            warnings: Vec::new(),
        }
    }
}

/// Yields to the page's event loop (a zero-delay timeout), so a long job run in steps keeps the
/// page responsive and hears a cancel.
async fn next_tick() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}
