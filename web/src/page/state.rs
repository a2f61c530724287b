//! The page's state: what is loaded and planned, and everything the user chose. Signals are
//! `Copy`, so views take the whole state and read what they need.

use std::sync::Arc;

use leptos::prelude::*;
use memplan_core::StrategyChoice;
use memplan_core::order::Order;
use std::collections::BTreeMap;

use memplan_core::budget::DriverTerms;
use memplan_engine::answers::FitsAnswer;
use memplan_engine::{DeviceClass, Scenario};
use memplan_render::color::ColorBy;
use memplan_render::model::RowOrder;
use memplan_render::scene::Viewport;

use crate::analysis::{Analysis, CompareView, ExportKind, SweepView, unflipped};
use crate::error::WebError;
use crate::page::examples::Example;
use crate::page::url::{Against, Panel, Tab, UrlState};
use crate::worker::client::{Link, LinkEvent};
use crate::worker::protocol::{Request, Response, STAGES};
use memplan_engine::answers::FitAnswer;

/// A search asked for with more work: that work limit, and the footprint before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongerSearch {
    pub work: u64,
    pub before_bytes: u64,
}

/// A load in progress: stage `stage` of `of`.
#[derive(Debug, Clone, PartialEq)]
pub struct Busy {
    pub stage: u32,
    pub of: u32,
    pub what: String,
    /// While a search runs: the lowest footprint so far, what no layout goes below, and the
    /// exact search's nodes.
    pub solver: Option<SolverProgress>,
    /// While a dump is read as a stream: how far, within the stage.
    pub read: Option<crate::worker::protocol::ReadProgress>,
}

impl Busy {
    /// Stage `stage` of `of`, doing `what`, with no search running.
    pub fn stage(stage: u32, of: u32, what: impl Into<String>) -> Busy {
        Busy {
            stage,
            of,
            what: what.into(),
            solver: None,
            read: None,
        }
    }

    /// How far the work is, in stages (a stream's reading counts as part of its stage).
    pub fn value(&self) -> f64 {
        let within = self
            .read
            .map_or(0.0, |r| r.done as f64 / r.of.max(1) as f64);
        f64::from(self.stage) + within.min(1.0)
    }
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
    /// Posted by the host page of an embed (`postMessage`): its name.
    pub posted: Option<String>,
}

/// A dump a link names but cannot hold.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingFile {
    pub name: String,
    /// Posted by an embed's host page (else opened from the user's disk).
    pub posted: bool,
}

/// What a load of another dump forgets of the one shown (its flips, and the answers about it),
/// given back if the load ends without a plan (cancelled or failed): the controls stay those of
/// the plan still shown.
#[derive(Clone)]
struct Forgotten {
    flips: Vec<String>,
    fit_log: Option<FitAnswer>,
    params: BTreeMap<String, u64>,
    fits: Option<FitsAnswer>,
    sweep: Option<SweepView>,
    comparison: Option<CompareView>,
    against: Option<Against>,
    missing_file: Option<MissingFile>,
}

/// A dump as the page sent it to the worker.
#[derive(Clone)]
struct Dump {
    bytes: web_sys::Blob,
    source: String,
    import: memplan_formats::onnx::Options,
}

/// The dump the worker plans: the one shown, and the one being loaded until its first plan
/// comes. A worker terminated by a cancel (the last resort, where the page cannot share a stop
/// flag with it) is sent the one shown again, so that it holds what the page shows.
#[derive(Clone, Default)]
struct Dumps {
    shown: Option<Dump>,
    loading: Option<Dump>,
    /// The one loading is the one shown, sent again: its plan leaves the error that ended the
    /// last worker on screen.
    again: bool,
    /// The worker ended working on the dump shown and holds nothing: the next plan asked of it
    /// sends it the dump again, under that plan's scenario.
    lost: bool,
}

/// What a link asks to show once its dump is loaded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Restore {
    /// The comparison to run once the dump is planned.
    pub against: Option<Against>,
    pub selected: Option<String>,
    pub device: Option<String>,
    pub zoom: Option<Viewport>,
    pub origin: Origin,
    /// The routine of a program to open (its id).
    pub routine: Option<String>,
}

#[derive(Clone, Copy)]
pub struct PageState {
    pub analysis: RwSignal<Option<Arc<Analysis>>>,
    pub error: RwSignal<Option<WebError>>,
    pub strategy: RwSignal<StrategyChoice>,
    /// A search asked for with more work ("search 4x longer"): its work limit and the footprint
    /// before it, so the summary says what the longer search gained.
    pub longer: RwSignal<Option<LongerSearch>>,
    /// `search`'s work limit (the CLI's `--work-limit`); `None`: the default.
    pub work_limit: RwSignal<Option<u64>>,
    /// Only tensors of equal dtype share bytes.
    pub precision_classes: RwSignal<bool>,
    /// The largest pool; `None`: the dump's own cap, `Some(u64::MAX)`: none.
    pub pool_cap: RwSignal<Option<u64>>,
    /// The order the steps run in.
    pub order: RwSignal<Order>,
    /// The advisor's last answer, with the scenario it was asked about.
    pub advice: RwSignal<Option<AdviceView>>,
    /// The advice row last applied, and the diff of the plan before it against the plan after.
    pub applied: RwSignal<Option<Applied>>,
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
    /// The arena map shows the source allocator's layout (real addresses) instead of the plan's.
    pub source_layout: RwSignal<bool>,
    /// The comparison shown, as a link carries it (`None` also for one against a local file).
    pub against: RwSignal<Option<Against>>,
    /// Messages about the link (values it could not use, a file it cannot hold).
    pub notices: RwSignal<Vec<String>>,
    /// A dump the link named but cannot hold (a local file, or one an embed's host posted):
    /// offer to choose it again.
    pub missing_file: RwSignal<Option<MissingFile>>,
    pub embed: bool,
    /// What is being loaded, while it is.
    pub busy: RwSignal<Option<Busy>>,
    /// A plan of the worker's dump is in progress: cancel asks the worker to stop it and keep
    /// its best so far.
    pub planning: RwSignal<bool>,
    /// A cancel was asked of the worker, which has not answered yet (a step it cannot stop
    /// ends first: a greedy layout of millions of buffers).
    pub cancelling: RwSignal<bool>,
    /// The plan shown is a search's best so far: a cancel ended it early.
    pub cancelled: RwSignal<bool>,
    /// Where the dump shown came from.
    pub origin: RwSignal<Origin>,
    /// What to restore when the next analysis arrives.
    pub restore: StoredValue<Option<Restore>>,
    /// The link to the engine, set once in [`PageState::new`].
    link: StoredValue<Option<Link>, LocalStorage>,
    /// The dump shown and the one loading, as sent to the worker.
    dumps: StoredValue<Dumps, LocalStorage>,
    /// While another dump loads: what it forgot of the one shown.
    forgotten: StoredValue<Option<Forgotten>, LocalStorage>,
    /// The tensors recomputed at their uses (the scenario's flips), by id.
    pub flips: RwSignal<Vec<String>>,
    /// The target field of the flips panel, as typed.
    pub target: RwSignal<String>,
    /// The last fit's answer, shown as the plan log.
    pub fit_log: RwSignal<Option<FitAnswer>>,
    /// The device class every device of the dump is (its name and memory terms), if chosen.
    pub device_class: RwSignal<Option<(String, DriverTerms)>>,
    /// The utilization the device runs at.
    pub util: RwSignal<f64>,
    /// Values the user gave the dump's params (the rest keep their defaults).
    pub params: RwSignal<BTreeMap<String, u64>>,
    /// The last "largest that fits" answer.
    pub fits: RwSignal<Option<FitsAnswer>>,
    /// How often the "largest that fits" answer was cleared (the scenario, the routine or the
    /// dump changed: [`PageState::forget_fits`]), now and when it was last asked: an answer
    /// asked before it was cleared names the largest value for what changed, and is not shown.
    fits_cleared: StoredValue<(u32, u32)>,
    /// The last sweep, and how many targets the next one fits.
    pub sweep: RwSignal<Option<SweepView>>,
    pub sweep_points: RwSignal<usize>,
    /// The plan shown against another: its diff.
    pub comparison: RwSignal<Option<CompareView>>,
    /// The loaded program's report, when the dump is a program of several routines.
    pub program: RwSignal<Option<Arc<memplan_engine::program::ProgramReport>>>,
    /// The routine of the program shown (index into its routines).
    pub routine: RwSignal<usize>,
}

/// The advisor's answer and the scenario it answers for: a plan shown under another scenario
/// makes it stale.
#[derive(Debug, Clone, PartialEq)]
pub struct AdviceView {
    /// The dump it is about.
    pub source: String,
    pub scenario: Scenario,
    pub answer: memplan_engine::advise::AdviceAnswer,
}

/// An advice row applied: what it changed, what it claimed, and (once the worker answers) the
/// diff of the plan before against the plan after.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub row: usize,
    pub lever: String,
    pub cost: String,
    pub footprint_bytes: u64,
    pub diff: Option<memplan_engine::diff::PlanDiff>,
}

impl PageState {
    pub fn new(url: &UrlState) -> Self {
        let state = PageState {
            analysis: RwSignal::new(None),
            error: RwSignal::new(None),
            strategy: RwSignal::new(url.strategy),
            work_limit: RwSignal::new(url.work_limit),
            precision_classes: RwSignal::new(url.precision_classes),
            pool_cap: RwSignal::new(url.pool_cap),
            order: RwSignal::new(url.order),
            advice: RwSignal::new(None),
            applied: RwSignal::new(None),
            longer: RwSignal::new(None),
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
            source_layout: RwSignal::new(false),
            against: RwSignal::new(None),
            notices: RwSignal::new(url.warnings.clone()),
            missing_file: RwSignal::new(None),
            embed: url.embed,
            busy: RwSignal::new(None),
            planning: RwSignal::new(false),
            cancelling: RwSignal::new(false),
            cancelled: RwSignal::new(false),
            origin: RwSignal::new(Origin::default()),
            restore: StoredValue::new(None),
            link: StoredValue::new_local(None),
            dumps: StoredValue::new_local(Dumps::default()),
            forgotten: StoredValue::new_local(None),
            flips: RwSignal::new(url.flips.clone()),
            target: RwSignal::new(url.target.clone()),
            fit_log: RwSignal::new(None),
            device_class: RwSignal::new(
                url.device_class
                    .as_deref()
                    .and_then(memplan_formats::hardware::bundled)
                    .map(|c| (c.class, c.memory)),
            ),
            util: RwSignal::new(url.util),
            params: RwSignal::new(url.params.clone()),
            fits: RwSignal::new(None),
            fits_cleared: StoredValue::new((0, 0)),
            sweep: RwSignal::new(None),
            sweep_points: RwSignal::new(memplan_engine::DEFAULT_SWEEP_POINTS),
            comparison: RwSignal::new(None),
            program: RwSignal::new(None),
            routine: RwSignal::new(0),
        };
        state
            .link
            .set_value(Some(Link::new(move |event| state.hear(event))));
        state
    }

    /// The scenario the page's controls describe.
    pub fn scenario(self) -> Scenario {
        Scenario {
            strategy: self.strategy.get_untracked(),
            work_limit: self.work_limit.get_untracked(),
            precision_classes: self.precision_classes.get_untracked(),
            pool_cap: self.pool_cap.get_untracked(),
            order: self.order.get_untracked(),
            flips: self.flips.get_untracked(),
            params: self.params.get_untracked(),
            device_class: self
                .device_class
                .get_untracked()
                .map(|(class, terms)| DeviceClass {
                    class,
                    terms,
                    util: self.util.get_untracked(),
                }),
            ..Scenario::default()
        }
    }

    /// Loads a dump of any size in the worker; the page stays responsive, shows progress and
    /// can cancel. `origin` is where it came from, for the link. On failure the dump shown
    /// stays and the banner says why.
    pub fn load(self, bytes: web_sys::Blob, source: &str, origin: Origin) {
        let what = format!("sending {source}");
        self.busy.set(Some(Busy::stage(0, STAGES, what)));
        self.restore
            .update_value(|r| r.get_or_insert_with(Restore::default).origin = origin);
        let routine = self
            .restore
            .with_value(|r| r.as_ref().and_then(|r| r.routine.clone()));
        let dump = Dump {
            bytes,
            source: source.to_string(),
            import: Default::default(),
        };
        self.send_dump(dump, routine);
    }

    /// Sends `dump` to the worker to load, opening `routine` if it is a program.
    fn send_dump(self, dump: Dump, routine: Option<String>) {
        let request = Request::Load {
            source: dump.source.clone(),
            scenario: self.scenario(),
            import: dump.import.clone(),
            routine,
        };
        let bytes = dump.bytes.clone();
        self.dumps.update_value(|d| {
            d.loading = Some(dump);
            d.again = false;
            d.lost = false;
        });
        self.send(request, Some(bytes));
    }

    /// Loads another dump than the one shown, forgetting the flips and answers of that one
    /// (given back if the load ends without a plan).
    pub fn load_another(self, bytes: web_sys::Blob, source: &str, origin: Origin) {
        if self.forgotten.with_value(Option::is_none) {
            self.forgotten.set_value(Some(Forgotten {
                flips: self.flips.get_untracked(),
                fit_log: self.fit_log.get_untracked(),
                params: self.params.get_untracked(),
                fits: self.fits.get_untracked(),
                sweep: self.sweep.get_untracked(),
                comparison: self.comparison.get_untracked(),
                against: self.against.get_untracked(),
                missing_file: self.missing_file.get_untracked(),
            }));
        }
        self.missing_file.set(None);
        self.flips.set(Vec::new());
        self.fit_log.set(None);
        self.params.set(BTreeMap::new());
        self.forget_fits();
        self.sweep.set(None);
        self.comparison.set(None);
        self.against.set(None);
        self.load(bytes, source, origin);
    }

    /// A load ended without a plan: what it forgot of the dump shown comes back.
    fn give_back(self) {
        self.dumps.update_value(|d| {
            d.loading = None;
            d.again = false;
        });
        let Some(f) = self.forgotten.try_update_value(Option::take).flatten() else {
            return;
        };
        self.flips.set(f.flips);
        self.fit_log.set(f.fit_log);
        self.params.set(f.params);
        self.fits.set(f.fits);
        self.sweep.set(f.sweep);
        self.comparison.set(f.comparison);
        self.against.set(f.against);
        self.missing_file.set(f.missing_file);
    }

    /// Imports the loaded bytes again with `import` (an ONNX model's fixed input shapes).
    pub fn reimport(self, import: memplan_formats::onnx::Options) {
        self.busy
            .set(Some(Busy::stage(1, STAGES, "importing again")));
        self.dumps.update_value(|d| {
            d.loading = (d.shown.clone()).map(|shown| Dump {
                import: import.clone(),
                ..shown
            });
            d.again = false;
        });
        let scenario = self.scenario();
        self.send(Request::Reimport { scenario, import }, None);
    }

    /// Starts the worker before anything is asked of it, so that its code is warm by the time
    /// a file comes.
    pub fn start_worker(self) {
        self.link.with_value(|l| l.as_ref().map(Link::start_early));
    }

    /// Has the worker read a hardware class file the user chose; the class applies when it
    /// answers.
    pub fn read_hardware(self, class: String, text: String) {
        self.send(Request::ReadHardware { class, text }, None);
    }

    fn send(self, request: Request, bytes: Option<web_sys::Blob>) {
        let link = self.link.with_value(Clone::clone);
        if let Some(link) = link {
            link.send(request, bytes);
        }
    }

    /// What the link says: an answer becomes page state.
    fn hear(self, event: LinkEvent) {
        match event {
            LinkEvent::Answer(response) => self.receive(response, false),
            LinkEvent::EarlierAnswer(response) => self.receive(response, true),
            LinkEvent::PlanningHere(why) => self.notices.update(|n| {
                n.push(format!(
                    "{why}; planning on this page instead, which pauses while it works"
                ))
            }),
            LinkEvent::Failed(e) => self.worker_ended(e),
            LinkEvent::OutOfMemory { requested, held } => {
                let name = self.dumps.with_value(|d| {
                    (d.loading.as_ref().or(d.shown.as_ref())).map(|d| d.source.clone())
                });
                self.worker_ended(WebError::OutOfMemory {
                    name: name.unwrap_or_default(),
                    requested,
                    held,
                })
            }
        }
    }

    /// The Web Worker ended with `e`, holding nothing any more. Where it was loading another
    /// dump, the page shows the one before, and a fresh worker is sent that one; where it was
    /// working on the dump shown, that is sent again only with the next plan asked (the same
    /// one would end the same way).
    fn worker_ended(self, e: WebError) {
        self.done();
        self.restore.set_value(None);
        let another = self.forgotten.with_value(Option::is_some);
        self.give_back();
        self.error.set(Some(e));
        match another {
            true => self.load_shown_again("the worker ended", true),
            false => self.dumps.update_value(|d| d.lost = true),
        }
    }

    /// Turns an answer of the worker into page state; `earlier`: it answers what was asked
    /// before the job the worker works on now, which keeps the page busy.
    fn receive(self, response: Response, earlier: bool) {
        let answered = || {
            if !earlier {
                self.done()
            }
        };
        match response {
            Response::Ready => {}
            Response::Progress {
                stage,
                of,
                what,
                best_bytes,
                bound_bytes,
                nodes,
                read,
            } => {
                let solver = match (best_bytes, bound_bytes) {
                    (Some(best_bytes), Some(bound_bytes)) => Some(SolverProgress {
                        best_bytes,
                        bound_bytes,
                        nodes,
                    }),
                    _ => None,
                };
                self.busy.set(Some(Busy {
                    stage,
                    of,
                    what,
                    solver,
                    read,
                }))
            }
            Response::Exported(file) => {
                let made =
                    crate::views::export::download_text(&file.file_name, &file.mime, &file.text);
                if let Err(e) = made {
                    self.error.set(Some(WebError::Export(Box::new(e))));
                }
            }
            Response::Planned {
                analysis,
                cancelled,
                left_out,
                buffers,
            } => {
                self.done();
                self.forgotten.set_value(None);
                let again = self.dumps.try_update_value(|d| {
                    if let Some(loaded) = d.loading.take() {
                        d.shown = Some(loaded);
                    }
                    std::mem::take(&mut d.again)
                });
                let kept = again.unwrap_or(false).then(|| self.error.get_untracked());
                let earlier = self.analysis.get_untracked();
                match Analysis::received(*analysis, left_out, buffers, earlier.as_deref()) {
                    Ok(analysis) => {
                        self.apply(analysis);
                        self.cancelled.set(cancelled);
                        if let Some(error) = kept {
                            self.error.set(error);
                        }
                    }
                    Err(e) => self.error.set(Some(WebError::Answer(e))),
                }
            }
            Response::Compared(view) => {
                answered();
                self.comparison.set(Some(*view));
            }
            Response::Swept(sweep) => {
                answered();
                self.sweep.set(Some(*sweep));
            }
            Response::Fits(fits) => {
                answered();
                if self.fits_cleared.with_value(|(now, asked)| now == asked) {
                    self.fits.set(Some(*fits));
                }
            }
            Response::Advised { scenario, answer } => {
                answered();
                let source = (self
                    .analysis
                    .with_untracked(|a| a.as_ref().map(|a| a.source.clone())))
                .unwrap_or_default();
                self.advice.set(Some(AdviceView {
                    source,
                    scenario: *scenario,
                    answer: *answer,
                }));
            }
            // The plan after it follows: the page stays busy until it comes.
            Response::Diffed(diff) => self.applied.update(|a| {
                if let Some(a) = a {
                    a.diff = Some(*diff);
                }
            }),
            Response::Fitted(log) => {
                self.flips.set(log.flip_ids());
                self.fit_log.set(Some(*log));
            }
            // Nothing new is shown: a load cancelled before its first plan gives back what it
            // forgot.
            Response::Cancelled => {
                self.done();
                self.restore.set_value(None);
                self.give_back();
            }
            Response::Program(report) => self.program.set(report.map(|r| Arc::new(*r))),
            Response::Routine {
                index,
                id,
                scenario,
            } => {
                // A link's routine this program does not have is said, not dropped silently.
                let wanted = self
                    .restore
                    .try_update_value(|r| r.as_mut().and_then(|r| r.routine.take()))
                    .flatten();
                if let Some(wanted) = wanted.filter(|w| *w != id) {
                    self.notices.update(|n| {
                        n.push(memplan_human::one_line(&format!(
                            "the link's routine={wanted} names no routine of this program; showing `{id}`, the first one run"
                        )))
                    });
                }
                self.routine.set(index);
                self.set_choices(&scenario);
            }
            Response::HardwareRead(Ok((class, memory))) => {
                self.change_device(|| self.device_class.set(Some((class, memory))))
            }
            Response::HardwareRead(Err(e)) => self.error.set(Some(e)),
            Response::Unknown(unknown) => {
                for u in &unknown {
                    match u {
                        memplan_engine::Unknown::Flip { tensor, .. } => {
                            self.flips.update(|f| f.retain(|t| t != tensor))
                        }
                        memplan_engine::Unknown::Param { name, .. } => self.params.update(|p| {
                            p.remove(name);
                        }),
                    }
                }
                self.notices.update(|n| {
                    n.extend(
                        unknown
                            .iter()
                            .map(|u| memplan_human::one_line(&format!("the link's {u}; left out"))),
                    )
                });
            }
            Response::Error(e) => {
                self.done();
                self.restore.set_value(None);
                self.give_back();
                self.error.set(Some(*e));
            }
        }
    }

    /// The worker has answered (or stopped): nothing is in progress.
    fn done(self) {
        self.busy.set(None);
        self.planning.set(false);
        self.cancelling.set(false);
    }

    /// The cancel button. The worker is asked to stop: a plan, a fit or a sweep answers with
    /// its best so far (or, before it has one, the page keeps what it shows), a "largest that
    /// fits" or the advisor ends at its next plan without an answer; a load keeps its
    /// plan only once the page was shown its search's best so far, else it is dropped and the
    /// page keeps what it shows. Where the page shares a stop flag with the worker, a load hears
    /// it at its next read, or at its plan; elsewhere a load cannot listen until its plan is
    /// made, so it is stopped by terminating the worker (the last resort), and a fresh one is
    /// sent the dump shown.
    pub fn cancel(self) {
        let heard = self.link.with_value(|l| {
            l.as_ref()
                .is_some_and(|l| l.is_here() || l.shares_stop_flag())
        });
        let searching = self
            .busy
            .with_untracked(|b| b.as_ref().is_some_and(|b| b.solver.is_some()));
        if self.planning.get_untracked() || searching || heard {
            self.cancelling.set(true);
            return self.send(Request::Cancel, None);
        }
        self.link.with_value(|l| l.as_ref().map(Link::stop));
        self.done();
        self.restore.set_value(None);
        self.give_back();
        self.load_shown_again("the cancel stopped the worker", false);
    }

    /// Sends a fresh worker the dump shown (`why`: why the last one ended), under the page's
    /// scenario and routine; the views keep their selection and zoom when it answers, and the
    /// error on screen stays where `keep_error`.
    fn load_shown_again(self, why: &str, keep_error: bool) {
        let Some(shown) = self.dumps.with_value(|d| d.shown.clone()) else {
            return;
        };
        let routine = self.program.with_untracked(|p| {
            let routine = p.as_ref()?.routines.get(self.routine.get_untracked())?;
            Some(routine.routine.clone())
        });
        let what = format!("reading {} again ({why})", shown.source);
        self.busy.set(Some(Busy::stage(0, STAGES, what)));
        self.send_dump(shown, routine);
        self.dumps.update_value(|d| d.again = keep_error);
    }

    /// Opens routine `index` of the loaded program in the views, under its own scenario; the
    /// selection and zoom start afresh (it is another computation), or as `restore` says (a
    /// link followed).
    pub fn open_routine(self, index: usize, restore: Option<Restore>) {
        if self.routine.get_untracked() == index && self.analysis.with_untracked(Option::is_some) {
            return;
        }
        let origin = self.origin.get_untracked();
        self.restore.set_value(Some(restore.unwrap_or(Restore {
            origin,
            ..Restore::default()
        })));
        self.fit_log.set(None);
        self.advice.set(None);
        self.applied.set(None);
        self.comparison.set(None);
        self.sweep.set(None);
        self.forget_fits();
        self.busy
            .set(Some(Busy::stage(2, STAGES, "opening the routine")));
        self.planning.set(true);
        self.send(Request::Routine(index), None);
    }

    /// Loads a bundled example, as any other dump: in the worker.
    pub fn load_example(self, example: &Example, origin: Origin) {
        let bytes = crate::page::fetch::blob_of(example.text.as_bytes());
        self.load(bytes, example.name, origin);
    }

    /// Shows a new analysis. A new dump (a pending restore) resets the selection and zoom (or
    /// restores a link's); a re-plan of the same dump keeps them.
    pub fn apply(self, a: Analysis) {
        let mut against = None;
        if let Some(restore) = self.restore.try_update_value(Option::take).flatten() {
            against = restore.against.clone();
            self.longer.set(None);
            let device = a.model.device_or_main(restore.device.as_deref());
            self.device.set(device);
            let selected = restore.selected.as_deref();
            self.selected
                .set(selected.and_then(|id| a.model.buffer_of(id)));
            // A link's selection or device this dump does not have is said, not dropped silently.
            let missing = |key: &str, id: &str| {
                memplan_human::one_line(&format!(
                    "the link's {key}={id} names nothing in this dump; left out"
                ))
            };
            if let Some(id) = selected.filter(|id| a.model.buffer_of(id).is_none()) {
                self.notices.update(|n| n.push(missing("sel", id)));
            }
            if let Some(id) = (restore.device.as_deref())
                .filter(|id| !a.model.devices.iter().any(|d| d.id == *id))
            {
                self.notices.update(|n| n.push(missing("device", id)));
            }
            self.arena_window.set(None);
            self.timeline_window.set(None);
            self.window().set(restore.zoom);
            self.origin.set(restore.origin);
        }
        self.analysis.set(Some(Arc::new(a)));
        self.cancelled.set(false);
        self.error.set(None);
        if let Some(against) = against {
            self.compare_against(against);
        }
    }

    /// Runs the comparison a link carries: the dump shown under another strategy, or another
    /// dump at a URL.
    pub fn compare_against(self, against: Against) {
        let mut scenario = self.scenario();
        scenario.strategy = against.strategy;
        scenario.order = against.order;
        if !against.flips || against.src.is_some() {
            scenario.flips.clear();
        }
        self.against.set(Some(against.clone()));
        match against.src {
            None => self.compare(scenario, None),
            Some(src) => leptos::task::spawn_local(async move {
                match crate::page::fetch::fetch_dump(&src).await {
                    Ok(bytes) => self.compare(scenario, Some((src, bytes))),
                    Err(e) => self.error.set(Some(e)),
                }
            }),
        }
    }

    /// Re-plans the loaded dump with another strategy, keeping selection and zoom.
    pub fn set_strategy(self, strategy: StrategyChoice) {
        self.strategy.set(strategy);
        self.longer.set(None);
        self.replan();
    }

    /// Searches again with `work_limit`, remembering the footprint before it (`before_bytes`).
    pub fn search_longer(self, work_limit: u64, before_bytes: u64) {
        self.longer.set(Some(LongerSearch {
            work: work_limit,
            before_bytes,
        }));
        self.set_work_limit(Some(work_limit));
    }

    /// Re-plans with `search`'s work limit set to `work_limit` (`None`: the default).
    pub fn set_work_limit(self, work_limit: Option<u64>) {
        self.work_limit.set(work_limit);
        self.replan();
    }

    /// Compares the plan shown with the dump under `scenario`, or with `other` (a file's name
    /// and bytes) under it.
    pub fn compare(self, scenario: Scenario, other: Option<(String, web_sys::Blob)>) {
        if self.analysis.get_untracked().is_some() {
            let (source, bytes) = other.unzip();
            self.send(Request::Compare { scenario, source }, bytes);
        }
    }

    /// Fits targets from the minimized footprint to the baseline, from no flips, in the
    /// worker: the progress bar shows the step and cancel keeps the targets fitted so far.
    pub fn run_sweep(self) {
        if self.analysis.get_untracked().is_none() {
            return;
        }
        let points = self.sweep_points.get_untracked();
        let scenario = unflipped(&self.scenario());
        let steps = memplan_engine::SweepJob::steps(&scenario, points);
        self.busy
            .set(Some(Busy::stage(0, steps as u32, "sweeping targets")));
        self.planning.set(true);
        self.send(Request::Sweep { scenario, points }, None);
    }

    /// Sets the page's plan choices to `s`'s (strategy, work limit, precision classes, pool cap,
    /// order, params, flips); the device class stays.
    pub fn set_choices(self, s: &Scenario) {
        self.order.set(s.order);
        self.strategy.set(s.strategy);
        self.work_limit.set(s.work_limit);
        self.precision_classes.set(s.precision_classes);
        self.pool_cap.set(s.pool_cap);
        self.params.set(s.params.clone());
        self.flips.set(s.flips.clone());
    }

    /// Asks the advisor for the levers of the plan shown, each planned.
    pub fn advise(self) {
        if self.analysis.get_untracked().is_none() {
            return;
        }
        self.busy
            .set(Some(Busy::stage(2, STAGES, "planning each lever")));
        self.send(Request::Advise(self.scenario()), None);
    }

    /// Applies advice row `k`: its whole scenario becomes the page's, and the diff of the plan
    /// before against the plan after is asked for beside the plan.
    pub fn apply_advice(self, k: usize) {
        let Some((row, cost_unit)) = self.advice.with_untracked(|a| {
            a.as_ref()
                .and_then(|a| Some((a.answer.rows.get(k)?.clone(), a.answer.cost_unit.clone())))
        }) else {
            return;
        };
        let before = self.scenario();
        let s = row.scenario.clone();
        self.set_choices(&s);
        self.longer.set(None);
        self.applied.set(Some(Applied {
            row: k,
            lever: memplan_human::lever_text(&row.lever),
            cost: memplan_human::lever_cost_text(&row.lever, &row.cost, cost_unit.as_deref()),
            footprint_bytes: row.footprint_bytes,
            diff: None,
        }));
        self.send(Request::Diff { before, after: s }, None);
        self.replan();
    }

    /// Plans with `flips` (a sweep point's), replacing the page's.
    pub fn apply_flips(self, flips: Vec<String>) {
        self.flips.set(flips);
        self.replan();
    }

    /// Re-plans with the device class, utilization or a param changed by `change`.
    pub fn change_device(self, change: impl FnOnce()) {
        change();
        self.replan();
    }

    /// Clears the "largest that fits" answer: the scenario (the device, a param, a flip, the
    /// strategy, ...), the routine or the dump changed, and the answer, shown or still to come,
    /// names the largest value under the ones before.
    pub fn forget_fits(self) {
        self.fits.set(None);
        self.fits_cleared
            .update_value(|(now, _)| *now = now.wrapping_add(1));
    }

    /// Asks for the largest value of `param` in `lo..=hi` that fits the device.
    pub fn find_largest(self, param: String, lo: u64, hi: Option<u64>) {
        if self.analysis.get_untracked().is_some() {
            let scenario = self.scenario();
            self.fits_cleared.update_value(|(now, asked)| *asked = *now);
            let request = Request::Fits {
                scenario,
                param,
                lo,
                hi,
            };
            self.send(request, None);
        }
    }

    /// Recomputes `tensor` at its uses, or stops doing so, and re-plans.
    pub fn toggle_flip(self, tensor: &str) {
        self.flips
            .update(|flips| match flips.iter().position(|t| t == tensor) {
                Some(k) => {
                    flips.remove(k);
                }
                None => flips.push(tensor.to_string()),
            });
        self.replan();
    }

    /// Fits the dump to the target field from no flips, shows the log and plans with the
    /// fit's flips.
    pub fn fit(self) {
        if self.analysis.get_untracked().is_none() {
            return;
        }
        let target = self.target.get_untracked();
        self.busy
            .set(Some(Busy::stage(2, STAGES, format!("fitting to {target}"))));
        self.planning.set(true);
        self.forget_fits();
        let scenario = self.scenario();
        self.send(Request::Fit { scenario, target }, None);
    }

    /// Plans the loaded dump under the page's scenario, keeping selection and zoom.
    fn replan(self) {
        if self.analysis.get_untracked().is_none() {
            return;
        }
        if self.dumps.with_value(|d| d.lost) {
            return self.load_shown_again("the last worker ended", false);
        }
        let what = format!("planning with {}", self.strategy.get_untracked());
        self.busy.set(Some(Busy::stage(2, STAGES, what)));
        self.planning.set(true);
        self.forget_fits();
        self.send(Request::Plan(self.scenario()), None);
    }

    /// Downloads the plan as `kind`, made by the worker.
    pub fn export(self, kind: ExportKind) {
        self.send(Request::Export(kind), None);
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
                    .and_then(|b| model.buffers.get(b).map(|x| x.tensor.id.to_string()));
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
        let Origin {
            example,
            src,
            file,
            posted,
        } = self.origin.get();
        UrlState {
            device_class: self.device_class.get().map(|(class, _)| class),
            util: self.util.get(),
            params: self.params.get(),
            tab,
            panel: self.panel.get(),
            flips: self.flips.get(),
            target: self.target.get(),
            strategy: self.strategy.get(),
            work_limit: self.work_limit.get(),
            precision_classes: self.precision_classes.get(),
            pool_cap: self.pool_cap.get(),
            order: self.order.get(),
            selected,
            zoom,
            device,
            sort: self.sort.get(),
            color_by: self.color_by.get(),
            search: self.search.get(),
            example,
            routine: self.program.with(|p| {
                let p = p.as_ref()?;
                Some(p.routines.get(self.routine.get())?.routine.clone())
            }),
            src,
            file,
            posted,
            arena_only: self.arena_only.get(),
            axis_steps: self.axis_steps.get(),
            against: self.against.get(),
            embed: self.embed,
            warnings: Vec::new(),
        }
    }
}
