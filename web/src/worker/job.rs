//! The worker's whole logic, pure and tested natively: it keeps the loaded session and its
//! outcome (so a re-plan or an export does not re-read the input) and runs each request as a
//! job of bounded steps. For `search`, a quick plan at a small work limit, then the scenario's
//! own, so the last step gives exactly the plan the CLI makes, and the step before it is a
//! complete, checked plan. Between steps the worker returns to its event loop, so a `cancel`
//! arrives and ends the job with the best plan so far. `src/bin/memplan-worker.rs` wires it to
//! a Web Worker's scope; `client` runs it on the page's thread where no Web Worker can start.

use std::sync::Arc;

use memplan_core::{Control, Decodes, FoundAt, Progress};
use memplan_engine::job::{Job, JobStep, PlanJob};
use memplan_engine::program::{ProgramCache, ProgramReport, ProgramSession};
use memplan_engine::query::{Ask, DiffQuery, FitsQuery};
use memplan_engine::{EngineError, Outcome, Scenario, Session, SweepJob};
use memplan_render::BufferRows;

use super::protocol::{ReadProgress, Request, Response, STAGES, failed};
use crate::analysis::{
    Analysis, AnalysisCache, Baseline, BuffersSent, LeftOut, Local, Schedule, SweepView, compare,
    export, fit, unflipped,
};
use crate::error::{Operation, WebError};

/// A dump as the worker reads it: in order from its start, and again from the start (an ONNX
/// model imported again with other shapes). In the Web Worker, a `Blob` read in chunks; on the
/// page's thread and in tests, bytes.
pub type Input = Box<dyn memplan_formats::ReadSeek>;

/// `bytes` as an [`Input`].
pub fn input_of(bytes: Vec<u8>) -> Input {
    Box::new(std::io::Cursor::new(bytes))
}

/// A load's progress messages: one per percent read, at most.
struct Reading<'p> {
    source: String,
    percent: u64,
    post: &'p mut dyn FnMut(Response),
}

impl Reading<'_> {
    fn hear(&mut self, done: u64, of: u64) {
        let percent = done.saturating_mul(100) / of.max(1);
        if percent > self.percent {
            self.percent = percent;
            (self.post)(Response::Progress {
                stage: 1,
                of: STAGES,
                what: format!("reading {}: {percent}%", self.source),
                best_bytes: None,
                bound_bytes: None,
                nodes: None,
                read: Some(ReadProgress { done, of }),
            });
        }
    }
}

/// A dump read until a cancel comes: each read first asks `stop` (the page's shared flag, read
/// once per read the importer makes, a megabyte or more a time for a large dump), and fails once
/// it is raised, so a load stops within one read of the cancel.
struct Heeding<'a> {
    input: &'a mut Input,
    stop: &'a dyn Fn() -> bool,
}

impl std::io::Read for Heeding<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if (self.stop)() {
            return Err(std::io::Error::other("cancelled"));
        }
        self.input.read(buf)
    }
}

impl std::io::Seek for Heeding<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.input.seek(to)
    }
}

/// The most buffers the page plans. A file within the page's byte limits can hold more (a
/// minimalloc CSV of 64 MiB with short ids, or a snapshot of shallow stacks), and the worker's
/// memory (wasm's 4 GiB at most) runs out somewhere past this, while it plans and builds the
/// views, which ends the worker with no message of its own: 4.71 million allocations of a
/// generated snapshot (965 MiB) peak at 1,286-1,348 MiB, set just past them, with room left for
/// denser files (`scripts/snapshot-bench.mjs` measures it: docs/benchmarks.md, "how far the page
/// goes").
pub const MAX_BUFFERS: usize = 4_750_000;

/// Reads `input` (of any length: a snapshot is read as a stream), naming it `source`; refuses a
/// dump of more than [`MAX_BUFFERS`] buffers, before it is planned. `stop` ends it between the
/// stages past the reading (the reads are `input`'s to stop: [`Heeding`]).
fn load(
    input: &mut dyn memplan_formats::ReadSeek,
    source: &str,
    import: &memplan_formats::onnx::Options,
    stop: &dyn Fn() -> bool,
    post: &mut dyn FnMut(Response),
) -> Result<Session, WebError> {
    let unreadable = |e: std::io::Error| WebError::FileUnreadable {
        name: format!("{source} ({e})"),
    };
    let len = input.seek(std::io::SeekFrom::End(0)).map_err(unreadable)?;
    input
        .seek(std::io::SeekFrom::Start(0))
        .map_err(unreadable)?;
    let mut reading = Reading {
        source: source.to_string(),
        percent: 0,
        post,
    };
    let session = Session::load_from(
        &mut *input,
        len,
        source,
        import,
        &mut |done, of| reading.hear(done, of),
        stop,
    )?;
    within(session, source, MAX_BUFFERS)
}

/// `session`, unless it has more than `most` buffers.
fn within(session: Session, source: &str, most: usize) -> Result<Session, WebError> {
    let buffers = session.problem().buffers.len();
    if buffers > most {
        return Err(WebError::TooManyBuffers {
            name: source.to_string(),
            buffers,
            most,
        });
    }
    Ok(session)
}

/// Reads a program from `input` (all of it: a program is text, within the page's limit for
/// files read whole) and opens routine `routine` (an id), else the first one its events run.
fn load_program(
    input: &mut dyn memplan_formats::ReadSeek,
    source: &str,
    routine: Option<&str>,
) -> Result<(Session, Option<Program>), WebError> {
    let unreadable = |e: std::io::Error| WebError::FileUnreadable {
        name: format!("{source} ({e})"),
    };
    let mut bytes = Vec::new();
    input
        .seek(std::io::SeekFrom::Start(0))
        .map_err(unreadable)?;
    input.read_to_end(&mut bytes).map_err(unreadable)?;
    let session = ProgramSession::load(&bytes, source)?;
    let routine = routine
        .and_then(|id| session.program.routines().position(|(_, r)| r.id == id))
        .unwrap_or_else(|| Program::first_run(&session));
    let shown = session.routines[routine].clone();
    let scenarios = vec![Scenario::default(); session.routines.len()];
    Ok((
        shown,
        Some(Program {
            session,
            scenarios,
            routine,
            report: None,
            cache: ProgramCache::default(),
        }),
    ))
}

/// The least time between two progress messages of a search, milliseconds.
const PROGRESS_EVERY_MS: f64 = 100.0;

/// A job in progress (a plan or a sweep: the engine's job in steps) with what the worker shows
/// around it.
struct Running {
    session: Session,
    job: Job,
    /// What was shown before the job: kept if a plan is cancelled before its first step, and
    /// what a sweep leaves shown.
    previous: Option<Outcome>,
    /// The time its steps spent planning, milliseconds (the worker's clock).
    planning_ms: f64,
    /// When, within `planning_ms`, the best plan's step found its layout.
    found_ms: Option<f64>,
    /// Where the job plans another dump than the one shown (a load, an import again, a routine
    /// opened): what it replaces, until its first plan is made.
    replacing: Option<Box<Replacing>>,
}

/// What a job planning another dump replaced, and what the page is told of that dump with its
/// first plan. A job ended before its first plan (cancelled, failed, or dropped for another
/// request) gives the worker back what it replaced, and the page hears nothing of the dump: the
/// worker always holds the dump the page shows, whose bytes an import again reads.
struct Replacing {
    before: Before,
    /// The new dump's program and routine, posted just before its first plan.
    news: Vec<Response>,
}

/// The worker's hold on the dump shown, before a job replaced it.
#[allow(clippy::large_enum_variant, reason = "held boxed, in `Replacing`")]
enum Before {
    /// A load's or an import's: the bytes (none where the import reads the same ones) and the
    /// program.
    Dump {
        bytes: Option<(String, Input)>,
        program: Option<Program>,
    },
    /// A routine opened: the routine shown before.
    Routine(usize),
}

/// The worker's state: the loaded session with its current outcome, or the job planning it,
/// and the bytes it was read from (to import again with other options).
#[derive(Default)]
pub struct Worker {
    local: Option<Local>,
    running: Option<Running>,
    /// What re-planning the loaded session reuses (its plan without flips, its spaces).
    cache: AnalysisCache,
    /// The params and order of the last analysis sent: a plan under the same leaves out what
    /// depends on them alone ([`LeftOut::params_parts`]), two fifths of a 2,000-tensor analysis.
    schedule_sent: Option<Schedule>,
    /// The baseline of the last analysis sent: a toggle's answer leaves it out when it is the
    /// same ([`LeftOut::baseline`]), a usage curve per device.
    baseline_sent: Option<Baseline>,
    /// The buffers of the last analysis sent (its plan's, not made): the next is sent against
    /// them.
    buffers_sent: Option<Arc<dyn BufferRows>>,
    /// The last plans' greedy decodes: a toggle's re-plan resumes from them.
    decodes: Decodes,
    bytes: Option<(String, Input)>,
    /// Whether the caller's `stop` in [`Worker::step`] turns true on a cancel while a step runs
    /// (the page shares a flag with the worker when it can), so a search stops at once.
    live_cancel: bool,
    /// The loaded program, when the dump is one: the routine shown is one of its sessions.
    program: Option<Program>,
}

/// A program loaded: its routines' scenarios (each routine keeps its own flips, strategy and
/// params), the routine shown, and its last report.
struct Program {
    session: ProgramSession,
    scenarios: Vec<Scenario>,
    routine: usize,
    report: Option<ProgramReport>,
    /// The routines' last plans: a change to one routine's scenario plans that one again.
    cache: ProgramCache,
}

impl Program {
    /// The routine a program opens on: the first one its events run.
    fn first_run(session: &ProgramSession) -> usize {
        session
            .resolved
            .events
            .iter()
            .find_map(|e| match e {
                memplan_core::program::ResolvedEvent::Run { routine } => Some(*routine),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// The id of the routine shown.
    fn routine_id(&self) -> String {
        (self.session.program.routines())
            .nth(self.routine)
            .map(|(_, r)| r.id.clone())
            .unwrap_or_default()
    }

    /// Plans the program under its routines' scenarios and posts its report.
    fn replan(&mut self, post: &mut dyn FnMut(Response)) {
        let scenarios = &self.scenarios;
        match self
            .session
            .plan_with(&|r| scenarios[r].clone(), &mut self.cache)
        {
            Ok(outcome) => {
                let report = self.session.report(&outcome);
                self.report = Some(report.clone());
                post(Response::Program(Some(Box::new(report))));
            }
            Err(e) => post(failed(e)),
        }
    }
}

fn progress(stage: u32, what: String) -> Response {
    Response::Progress {
        stage,
        of: STAGES,
        what,
        best_bytes: None,
        bound_bytes: None,
        nodes: None,
        read: None,
    }
}

impl Worker {
    /// Answers `request` (with `bytes` for a load), posting responses through `post`. A load or
    /// a plan starts a job: call [`Worker::step`] until it returns `false`, returning to the
    /// event loop in between so that a cancel can arrive. `stop` says whether a cancel came
    /// (the page's shared flag, where it has one): a load reads until it does.
    pub fn handle(
        &mut self,
        request: Request,
        bytes: Option<Input>,
        stop: &dyn Fn() -> bool,
        post: &mut dyn FnMut(Response),
    ) {
        match request {
            Request::Load {
                source,
                scenario,
                import,
                routine,
            } => {
                let Some(bytes) = bytes else {
                    return post(failed(WebError::NoBytes { input: source }));
                };
                self.abandon();
                let read = (source, bytes);
                let routine = routine.as_deref();
                self.import(read, false, &import, scenario, routine, stop, post);
            }
            Request::Reimport { scenario, import } => {
                self.abandon();
                let Some(read) = self.bytes.take() else {
                    return post(failed(WebError::NothingLoaded(Operation::ImportAgain)));
                };
                // A program opens on the routine it showed.
                let routine = self.program.as_ref().map(Program::routine_id);
                self.import(
                    read,
                    true,
                    &import,
                    scenario,
                    routine.as_deref(),
                    stop,
                    post,
                );
            }
            Request::Plan(scenario) => {
                // A dump not yet planned once is planned under the new scenario instead.
                if let Some(run) = self.running.take_if(|r| r.replacing.is_some()) {
                    let best = match run.job {
                        Job::Plan(plan) => plan.into_best(),
                        Job::Sweep(_) => None,
                    };
                    let previous = best.or(run.previous);
                    return self.start(run.session, scenario, previous, run.replacing, post);
                }
                self.abandon();
                match self.local.take() {
                    Some(Local { session, outcome }) => {
                        self.start(session, scenario, Some(outcome), None, post)
                    }
                    None => post(failed(WebError::NothingLoaded(Operation::Plan))),
                }
            }
            Request::Fit { scenario, target } => {
                self.abandon();
                let Some(Local { session, outcome }) = self.local.take() else {
                    return post(failed(WebError::NothingLoaded(Operation::Fit)));
                };
                post(progress(2, format!("fitting to {target}")));
                match fit(&session, &scenario, &target) {
                    Ok(log) => {
                        let flipped = Scenario {
                            flips: log.flip_ids(),
                            ..scenario
                        };
                        post(Response::Fitted(Box::new(log)));
                        self.start(session, flipped, Some(outcome), None, post);
                    }
                    Err(e) => {
                        self.local = Some(Local { session, outcome });
                        post(failed(e));
                    }
                }
            }
            Request::Sweep { scenario, points } => {
                self.abandon();
                let Some(Local { session, outcome }) = self.local.take() else {
                    return post(failed(WebError::NothingLoaded(Operation::Sweep)));
                };
                let sweep = SweepJob::new(
                    unflipped(&scenario),
                    points,
                    memplan_engine::DEFAULT_EXHAUSTIVE_MOST,
                );
                self.running = Some(Running {
                    session,
                    job: Job::Sweep(sweep),
                    previous: Some(outcome),
                    planning_ms: 0.0,
                    found_ms: None,
                    replacing: None,
                });
            }
            Request::Fits {
                scenario,
                param,
                lo,
                hi,
            } => {
                self.abandon();
                let Some(local) = &self.local else {
                    return post(failed(WebError::NothingLoaded(Operation::AskAbout)));
                };
                let query = FitsQuery {
                    scenario,
                    param,
                    lo,
                    hi,
                };
                // A cancel heard between its plans ends it without an answer.
                post(match query.ask_unless(&local.session, stop) {
                    Ok(Some(fits)) => Response::Fits(Box::new(fits)),
                    Ok(None) => Response::Cancelled,
                    Err(e) => failed(e),
                });
            }
            Request::Advise(scenario) => {
                self.abandon();
                let Some(local) = &self.local else {
                    return post(failed(WebError::NothingLoaded(Operation::Advise)));
                };
                post(progress(2, "planning each lever".into()));
                // A cancel heard while it plans ends it without advice.
                post(match local.session.advise_unless(&scenario, stop) {
                    Ok(Some(answer)) => Response::Advised {
                        scenario: Box::new(scenario),
                        answer: Box::new(answer),
                    },
                    Ok(None) => Response::Cancelled,
                    Err(e) => failed(e),
                });
            }
            Request::Diff { before, after } => {
                self.abandon();
                let Some(local) = &self.local else {
                    return post(failed(WebError::NothingLoaded(Operation::Compare)));
                };
                let query = DiffQuery { before, after };
                post(match query.ask(&local.session, &mut Control::default()) {
                    Ok(diff) => Response::Diffed(Box::new(diff)),
                    Err(e) => failed(e),
                });
            }
            Request::Compare { scenario, source } => {
                self.abandon();
                let Some(local) = &self.local else {
                    return post(failed(WebError::NothingLoaded(Operation::Compare)));
                };
                let other = match (source, bytes) {
                    (Some(source), Some(mut input)) => {
                        match load(
                            &mut input,
                            &source,
                            &Default::default(),
                            &|| false,
                            &mut |_| {},
                        ) {
                            Ok(session) => Some(session),
                            Err(e) => return post(failed(e)),
                        }
                    }
                    _ => None,
                };
                let after = other.as_ref().unwrap_or(&local.session);
                post(
                    match compare((&local.session, &local.outcome), (after, &scenario)) {
                        Ok(view) => Response::Compared(Box::new(view)),
                        Err(e) => failed(e),
                    },
                );
            }
            Request::Routine(index) => {
                self.abandon();
                let Some(program) = self.program.as_mut() else {
                    return post(failed(WebError::NothingLoaded(Operation::Plan)));
                };
                let Some(session) = program.session.routines.get(index).cloned() else {
                    return post(failed(WebError::NothingLoaded(Operation::Plan)));
                };
                let before = Before::Routine(std::mem::replace(&mut program.routine, index));
                let scenario = program.scenarios[index].clone();
                let news = vec![Response::Routine {
                    index,
                    id: program.routine_id(),
                    scenario: Box::new(scenario.clone()),
                }];
                let replacing = Some(Box::new(Replacing { before, news }));
                self.forget_sent();
                self.start(session, scenario, None, replacing, post);
            }
            Request::Export(crate::analysis::ExportKind::ProgramJson) => {
                let (program, bytes) = self.dump_shown();
                let report = program.and_then(|p| p.report.as_ref());
                post(match report {
                    Some(report) => Response::Exported(crate::analysis::Export {
                        file_name: crate::analysis::file_name(
                            bytes.map_or("program", |(s, _)| s.as_str()),
                            "plan.json",
                        ),
                        mime: "application/json".into(),
                        text: crate::analysis::program_report_json(report),
                    }),
                    None => failed(WebError::NothingLoaded(Operation::Export)),
                });
            }
            Request::Export(kind) => {
                // The plan shown: the loaded one, or while a job runs, the one before it.
                let shown = (self.local.as_ref().map(|l| (&l.session, &l.outcome))).or_else(|| {
                    let run = self.running.as_ref()?;
                    Some((&run.session, run.previous.as_ref()?))
                });
                let Some((session, outcome)) = shown else {
                    return post(failed(WebError::NothingLoaded(Operation::Export)));
                };
                post(match export(session, outcome, kind) {
                    Ok(file) => Response::Exported(file),
                    Err(e) => failed(e),
                });
            }
            Request::ReadHardware { class, text } => post(Response::HardwareRead(
                memplan_formats::hardware::parse(&class, &text)
                    .map(|c| (c.class, c.memory))
                    .map_err(WebError::from),
            )),
            Request::Cancel => self.cancel(post),
        }
    }

    /// Reads `read` (a file's name and bytes) and starts planning it, the worker holding the
    /// dump shown until its first plan is made (see [`Replacing`]). `again`: the bytes are the
    /// shown dump's, imported again, and stay held whatever happens. A load that `stop` stops
    /// (a cancel, while it reads or before it plans) posts nothing: the cancel's own request
    /// answers.
    #[allow(clippy::too_many_arguments)]
    fn import(
        &mut self,
        read: (String, Input),
        again: bool,
        import: &memplan_formats::onnx::Options,
        scenario: Scenario,
        routine: Option<&str>,
        stop: &dyn Fn() -> bool,
        post: &mut dyn FnMut(Response),
    ) {
        let (source, mut bytes) = read;
        post(progress(1, format!("parsing and checking {source}")));
        let mut input = Heeding {
            input: &mut bytes,
            stop,
        };
        let loaded = match load(&mut input, &source, import, stop, post) {
            Err(WebError::Engine(EngineError::Format {
                error: memplan_formats::FormatError::IsProgram,
                ..
            })) => load_program(&mut input, &source, routine),
            other => other.map(|session| (session, None)),
        };
        let stopped = stop();
        let read = Some((source, bytes));
        let (session, program) = match loaded {
            Ok(loaded) if !stopped => loaded,
            outcome => {
                if again {
                    self.bytes = read;
                }
                if let Err(e) = outcome
                    && !stopped
                {
                    post(failed(e));
                }
                return;
            }
        };
        let news = vec![match &program {
            None => Response::Program(None),
            Some(p) => Response::Routine {
                index: p.routine,
                id: p.routine_id(),
                scenario: Box::new(scenario.clone()),
            },
        }];
        let bytes = std::mem::replace(&mut self.bytes, read);
        let program = std::mem::replace(&mut self.program, program);
        let before = Before::Dump { bytes, program };
        self.forget_sent();
        let replacing = Some(Box::new(Replacing { before, news }));
        self.start(session, scenario, None, replacing, post)
    }

    /// Forgets what was sent of the last session: the next plan is of another.
    fn forget_sent(&mut self) {
        self.cache = AnalysisCache::default();
        self.schedule_sent = None;
        self.baseline_sent = None;
        self.buffers_sent = None;
        self.decodes = Decodes::default();
    }

    fn start(
        &mut self,
        session: Session,
        scenario: Scenario,
        previous: Option<Outcome>,
        replacing: Option<Box<Replacing>>,
        post: &mut dyn FnMut(Response),
    ) {
        // What the scenario holds that this dump does not know (a link written for another
        // version of it) is left out, and said.
        let (scenario, unknown) = session.known_part(&scenario);
        if !unknown.is_empty() {
            post(Response::Unknown(unknown));
        }
        // A program's routine keeps its scenario; the program is planned again with it once
        // the routine's plan is made (`finish`), which it reuses.
        if let Some(program) = self.program.as_mut() {
            let routine = program.routine;
            if program.scenarios[routine] != scenario {
                program.scenarios[routine] = scenario.clone();
                program.report = None;
            }
        }
        post(progress(2, format!("planning with {}", scenario.strategy)));
        self.running = Some(Running {
            session,
            job: Job::Plan(PlanJob::new(scenario, self.live_cancel)),
            previous,
            planning_ms: 0.0,
            found_ms: None,
            replacing,
        });
    }

    /// A new request replaces a running job: it keeps its session and its last good outcome,
    /// and posts nothing; a job planning another dump than the one shown is dropped, and the
    /// worker holds the one shown again (the page never saw the other).
    fn abandon(&mut self) {
        let Some(run) = self.running.take() else {
            return;
        };
        if let Some(replacing) = run.replacing {
            return self.give_back(replacing.before);
        }
        let outcome = match run.job {
            Job::Plan(plan) => plan.into_best().or(run.previous),
            Job::Sweep(_) => run.previous,
        };
        if let Some(outcome) = outcome {
            self.local = Some(Local {
                session: run.session,
                outcome,
            });
        }
    }

    /// The program and the bytes of the dump the page shows: while a load plans, those it
    /// replaces.
    fn dump_shown(&self) -> (Option<&Program>, Option<&(String, Input)>) {
        match self.running.as_ref().and_then(|r| r.replacing.as_deref()) {
            Some(Replacing {
                before: Before::Dump { bytes, program },
                ..
            }) => (program.as_ref(), bytes.as_ref().or(self.bytes.as_ref())),
            _ => (self.program.as_ref(), self.bytes.as_ref()),
        }
    }

    /// Holds again the dump shown before a job replaced it.
    fn give_back(&mut self, before: Before) {
        match before {
            Before::Dump { bytes, program } => {
                if bytes.is_some() {
                    self.bytes = bytes;
                }
                self.program = program;
            }
            Before::Routine(routine) => {
                if let Some(program) = self.program.as_mut() {
                    program.routine = routine;
                }
            }
        }
    }

    /// From now on, the `stop` given to [`Worker::step`] turns true when a cancel comes.
    pub fn hear_cancels_live(&mut self) {
        self.live_cancel = true;
    }

    /// Whether a job is running.
    pub fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// Runs one step of the job: one complete plan. `now` is the caller's clock (ms), used only
    /// to space progress messages; `stop` says whether a cancel came (see
    /// [`Worker::hear_cancels_live`]). Returns whether the job goes on.
    pub fn step(
        &mut self,
        now: &dyn Fn() -> f64,
        stop: &dyn Fn() -> bool,
        post: &mut dyn FnMut(Response),
    ) -> bool {
        let Some(run) = self.running.as_mut() else {
            return false;
        };
        // What a plan's step says while its search runs.
        let (done, of) = run.job.progress();
        let planning = match &run.job {
            Job::Plan(plan) => format!("planning with {}", plan.scenario().strategy),
            Job::Sweep(_) => String::new(),
        };
        let what = format!("{planning} (step {} of {of})", done + 1);
        let mut last = now();
        let started = last;
        let mut found = FoundAt::default();
        // Whether the page was shown a best plan so far of this step.
        let mut best_shown = false;
        let mut heard = |p: Progress| {
            let t = now();
            found.hear(&p, t - started);
            if t - last >= PROGRESS_EVERY_MS {
                last = t;
                best_shown = true;
                post(Response::Progress {
                    stage: 2,
                    of: STAGES,
                    what: what.clone(),
                    best_bytes: Some(p.best_bytes),
                    bound_bytes: Some(p.bound_bytes),
                    nodes: p.exact.then_some(p.evaluations),
                    read: None,
                });
            }
        };
        let live = self.live_cancel;
        let mut asked = || stop();
        // The decodes are kept for a toggle's re-plan to resume from: a dump that lists nothing
        // to recompute (a snapshot, a CSV) has no toggle, and its decodes (with their
        // occupancy, some hundreds of bytes a buffer) would only hold memory.
        let flippable = run.session.graph.may_recompute();
        let stepped = run.session.step(
            &mut run.job,
            &mut Control {
                should_stop: live.then_some(&mut asked as &mut dyn FnMut() -> bool),
                progress: Some(&mut heard),
                earlier: flippable.then_some(&mut self.decodes),
                // A load's cancel before its first layout drops it rather than waiting for it
                // (a load cancelled before the page was shown a plan of it is dropped anyway,
                // below); a plan of the dump shown keeps its first layout, as any cancel does.
                abandon_on_stop: run.replacing.is_some(),
            },
            &|| live && stop(),
        );
        let before = run.planning_ms;
        run.planning_ms += now() - started;
        match stepped {
            Ok(JobStep::Sweep(None)) => {
                let (done, of) = run.job.progress();
                post(Response::Progress {
                    stage: done as u32,
                    of: of as u32,
                    what: format!("sweeping targets: step {done} of {of}"),
                    best_bytes: None,
                    bound_bytes: None,
                    nodes: None,
                    read: None,
                });
                true
            }
            Ok(JobStep::Sweep(Some(done))) => {
                let view = SweepView::of(&run.session, &done, false);
                self.abandon();
                post(Response::Swept(Box::new(view)));
                false
            }
            Ok(JobStep::Plan(step)) => {
                if step.kept {
                    run.found_ms = found.ms().map(|ms| before + ms);
                }
                // A load (or a routine opened) cancelled before the page was shown any plan of
                // it is dropped: the page keeps what it shows at once, with none of the new
                // dump's views to make (for a gigabyte snapshot, most of its load). Once it
                // was shown a search's best so far, a cancel keeps it, as for any plan.
                if step.cancelled && done == 0 && !best_shown && run.replacing.is_some() {
                    self.abandon();
                    return false;
                }
                if step.cancelled {
                    self.finish(true, post);
                    return false;
                }
                if !step.finished {
                    let best = match &run.job {
                        Job::Plan(plan) => plan.best(),
                        Job::Sweep(_) => None,
                    };
                    post(Response::Progress {
                        stage: 2,
                        of: STAGES,
                        what: planning,
                        best_bytes: best.map(|b| b.plan.footprint_bytes()),
                        bound_bytes: Some(best.map_or(0, |b| b.plan.lower_bound_bytes())),
                        nodes: None,
                        read: None,
                    });
                    return true;
                }
                self.finish(false, post);
                false
            }
            Err(e) => {
                post(failed(e));
                self.abandon();
                false
            }
        }
    }

    /// Ends the running job: with its best plan so far, or (before any) with what was shown.
    pub fn cancel(&mut self, post: &mut dyn FnMut(Response)) {
        let Some(run) = &self.running else {
            return post(Response::Cancelled);
        };
        match &run.job {
            Job::Sweep(sweep) => {
                let view = SweepView::of(&run.session, &sweep.clone().partial(), true);
                self.abandon();
                post(Response::Swept(Box::new(view)));
            }
            Job::Plan(plan) if plan.best().is_some() => self.finish(true, post),
            Job::Plan(_) => {
                self.abandon();
                post(Response::Cancelled);
            }
        }
    }

    /// Ends the running plan with its best plan, posting it, after what the page is told of a
    /// new dump; a plan cancelled before any layout (`abandon_on_stop`) has none, and is dropped
    /// as a replaced job is: the worker holds what the page shows.
    fn finish(&mut self, cancelled: bool, post: &mut dyn FnMut(Response)) {
        if let Some(Running {
            job: Job::Plan(plan),
            ..
        }) = &self.running
            && plan.best().is_none()
        {
            return self.abandon();
        }
        let Some(run) = self.running.take() else {
            return;
        };
        let (Job::Plan(plan), planning_ms, found_ms) = (run.job, run.planning_ms, run.found_ms)
        else {
            return;
        };
        let Some(outcome) = plan.into_best() else {
            return;
        };
        post(progress(3, "preparing the views".into()));
        for news in run.replacing.into_iter().flat_map(|r| r.news) {
            post(news);
        }
        let local = Local {
            session: run.session,
            outcome,
        };
        let schedule = Schedule::of(&local.outcome);
        let mut left_out = LeftOut {
            params_parts: self.schedule_sent.as_ref() == Some(&schedule),
            baseline: false,
        };
        if !left_out.params_parts {
            self.schedule_sent = Some(schedule);
        }
        let (mut analysis, planned) = Analysis::of_cached_with(
            &local.session,
            &local.outcome,
            &mut self.cache,
            !left_out.params_parts,
        );
        // As the CLI does: how long the search took, where one ran.
        if analysis.summary.nodes.is_some() {
            analysis.summary.elapsed_ms = Some(planning_ms.round() as u64);
            analysis.summary.found_ms = found_ms.map(|ms| ms as u64);
        }
        left_out.baseline = analysis.baseline.is_some() && analysis.baseline == self.baseline_sent;
        self.baseline_sent = match left_out.baseline {
            true => analysis.baseline.take(),
            false => analysis.baseline.clone(),
        };
        // The buffers go beside the model, written from the plan: against the last plan sent
        // where there is one, else all of them.
        let planned: Arc<dyn BufferRows> = Arc::new(planned);
        let buffers = match &self.buffers_sent {
            Some(earlier) => BuffersSent::against(&**earlier, &*planned),
            None => BuffersSent::all(planned.clone()),
        };
        // The next plan's buffers are sent against these.
        self.buffers_sent = Some(planned);
        post(Response::Planned {
            analysis: Box::new(analysis),
            cancelled,
            left_out,
            buffers,
        });
        // Then the program with this routine's plan, unless a cancel cut its search short (the
        // program's figures are of whole plans, as the CLI's are): the routine's views do not
        // wait for the other routines.
        if let Some(program) = self.program.as_mut().filter(|p| p.report.is_none()) {
            if !cancelled {
                program
                    .cache
                    .offer(program.routine, &local.outcome.scenario, &local.outcome);
            }
            program.replan(post);
        }
        self.local = Some(local);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{ExportKind, Run};
    use memplan_core::Strategy;

    /// Handles `request`, then runs its job to the end, or cancels it after `cancel_after`
    /// steps.
    fn run_until(
        worker: &mut Worker,
        request: Request,
        bytes: Option<&[u8]>,
        cancel_after: Option<usize>,
    ) -> Vec<Response> {
        let mut out = Vec::new();
        let clock = std::cell::Cell::new(0.0);
        let now = || {
            clock.set(clock.get() + 50.0);
            clock.get()
        };
        worker.handle(
            request,
            bytes.map(|b| input_of(b.to_vec())),
            &|| false,
            &mut |r| out.push(r),
        );
        let mut steps = 0;
        while worker.busy() {
            if cancel_after == Some(steps) {
                worker.handle(Request::Cancel, None, &|| false, &mut |r| out.push(r));
                break;
            }
            worker.step(&now, &|| false, &mut |r| out.push(r));
            steps += 1;
        }
        out
    }

    fn run(worker: &mut Worker, request: Request, bytes: Option<&[u8]>) -> Vec<Response> {
        run_until(worker, request, bytes, None)
    }

    fn scenario(strategy: Strategy) -> Scenario {
        Scenario {
            strategy: strategy.into(),
            ..Scenario::default()
        }
    }

    /// The last plan among `out` (a program's report may follow it).
    fn planned(out: &[Response]) -> (&Analysis, bool) {
        match out
            .iter()
            .rev()
            .find(|r| matches!(r, Response::Planned { .. }))
        {
            Some(Response::Planned {
                analysis,
                cancelled,
                ..
            }) => (analysis, *cancelled),
            other => panic!("{other:?} in {out:?}"),
        }
    }

    /// Runs the worker's next step with a cancel heard at its first ask: the job is over after
    /// it. Returns how many times it asked.
    fn step_cancelled_at_once(worker: &mut Worker, out: &mut Vec<Response>) -> u32 {
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            true
        };
        assert!(!worker.step(&|| 0.0, &stop, &mut |r| out.push(r)));
        assert!(!worker.busy());
        asked.get()
    }

    const A: &[u8] = include_bytes!("../../../tests/data/minimalloc/A.1048576.csv");
    const D: &[u8] = include_bytes!("../../../tests/data/minimalloc/D.1048576.csv");

    /// A dump of more buffers than the page plans is refused after it is read and before it
    /// is planned, saying how many it has, the page's most and the CLI command that plans it.
    #[test]
    fn a_dump_past_the_buffers_the_page_plans_is_refused_with_the_cli_command() {
        let session = Session::load(A, "A.csv").unwrap();
        let buffers = session.problem().buffers.len();
        assert_eq!(buffers, 154);
        assert!(within(session.clone(), "A.csv", buffers).is_ok());
        let e = within(session, "A.csv", buffers - 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "A.csv: 154 buffers are more than the 153 this page plans (its worker's memory, 4 GiB \
             at most, holds the plan and views of about that many); the CLI plans it (`memplan \
             plan A.csv`)"
        );
    }

    /// The decodes a toggle's re-plan resumes from are kept for a dump with candidates to flip,
    /// and not for one that lists none (a CSV): there they would only hold memory.
    #[test]
    fn decodes_are_kept_only_where_a_toggle_can_resume_from_them() {
        let load = |source: &str, bytes: &[u8]| {
            let mut worker = Worker::default();
            let request = Request::Load {
                source: source.into(),
                scenario: scenario(Strategy::FirstFit),
                import: Default::default(),
                routine: None,
            };
            assert!(!planned(&run(&mut worker, request, Some(bytes))).1);
            worker.decodes
        };
        assert_eq!(load("A.csv", A), Decodes::default());
        let mlp = include_bytes!("../../../static/examples/mlp-training.json");
        assert_ne!(load("mlp-training.json", mlp), Decodes::default());
    }

    /// A cancel heard between the plans of a "largest that fits", or of advice, ends it
    /// without an answer, and the dump stays loaded: the same question asked again is answered.
    #[test]
    fn a_cancel_ends_a_largest_fitting_or_advice_without_an_answer() {
        let mut worker = Worker::default();
        let serving = include_bytes!("../../../static/examples/decoder-serving.json");
        let load = load_request("decoder-serving.json", Strategy::FirstFit);
        assert!(!planned(&run(&mut worker, load, Some(serving))).1);
        let l4 = memplan_formats::hardware::bundled("l4-24gb").unwrap();
        let fits = Request::Fits {
            scenario: Scenario {
                params: [("S".to_string(), 4096)].into(),
                device_class: Some(memplan_engine::DeviceClass {
                    class: l4.class,
                    terms: l4.memory,
                    util: 0.9,
                }),
                ..Scenario::default()
            },
            param: "B".into(),
            lo: 1,
            hi: Some(512),
        };
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 3
        };
        let mut out = Vec::new();
        worker.handle(fits.clone(), None, &stop, &mut |r| out.push(r));
        assert_eq!(out, [Response::Cancelled]);
        let out = run(&mut worker, fits, None);
        assert!(
            matches!(&out[..], [Response::Fits(f)] if f.largest.is_some()),
            "{out:?}"
        );
        // So does advice: a cancel heard in its third plan.
        let advise = Request::Advise(Scenario::default());
        asked.set(0);
        let mut out = Vec::new();
        worker.handle(advise.clone(), None, &stop, &mut |r| out.push(r));
        assert!(
            matches!(&out[..], [Response::Progress { .. }, Response::Cancelled]),
            "{out:?}"
        );
        let out = run(&mut worker, advise, None);
        assert!(
            matches!(out.last(), Some(Response::Advised { .. })),
            "{out:?}"
        );
    }

    /// Loads minimalloc A, planned with first-fit.
    fn load_a_first_fit(worker: &mut Worker) {
        run(
            worker,
            Request::Load {
                source: "A.csv".into(),
                scenario: scenario(Strategy::FirstFit),
                import: Default::default(),
                routine: None,
            },
            Some(A),
        );
    }

    /// A load cancelled live before its first layout is dropped: no plan of it, no error, and
    /// the worker holds the dump shown.
    #[test]
    fn a_load_cancelled_before_its_first_layout_is_dropped() {
        let mut worker = Worker::default();
        worker.hear_cancels_live();
        load_a_first_fit(&mut worker);
        let shown = || Request::Export(ExportKind::PlanJson);
        let first_fit = run(&mut worker, shown(), None);
        let mut out = Vec::new();
        worker.handle(
            Request::Load {
                source: "D.csv".into(),
                scenario: scenario(Strategy::FirstFit),
                import: Default::default(),
                routine: None,
            },
            Some(input_of(D.to_vec())),
            &|| false,
            &mut |r| out.push(r),
        );
        assert!(step_cancelled_at_once(&mut worker, &mut out) > 0);
        assert!(
            !out.iter()
                .any(|r| matches!(r, Response::Planned { .. } | Response::Error(_)))
        );
        worker.handle(Request::Cancel, None, &|| false, &mut |r| out.push(r));
        assert!(matches!(out.last(), Some(Response::Cancelled)));
        assert_eq!(run(&mut worker, shown(), None), first_fit);
    }

    #[test]
    fn a_load_reports_progress_then_the_plan_and_a_replan_reuses_the_session() {
        let mut worker = Worker::default();
        let out = run(
            &mut worker,
            Request::Load {
                source: "x.csv".into(),
                scenario: scenario(Strategy::Bump),
                import: Default::default(),
                routine: None,
            },
            Some(b"id,lower,upper,size\na,0,2,100\nb,1,3,50\n"),
        );
        // Progress twice, then with the plan: progress, no program (one computation), the plan.
        assert_eq!(out.len(), 5);
        assert!(matches!(&out[3], Response::Program(None)), "{out:?}");
        assert!(matches!(
            &out[0],
            Response::Progress {
                stage: 1,
                of: 3,
                ..
            }
        ));
        let (a, cancelled) = planned(&out);
        assert_eq!(
            (a.tensor_count, a.summary.footprint_bytes, cancelled),
            (2, 150, false)
        );
        let out = run(
            &mut worker,
            Request::Plan(scenario(Strategy::FirstFit)),
            None,
        );
        assert_eq!(planned(&out).0.strategy(), Strategy::FirstFit.into());
        let out = run(
            &mut worker,
            Request::Export(ExportKind::MinimallocCsv),
            None,
        );
        let Response::Exported(file) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(file.file_name, "x.plan.csv");
        assert!(
            file.text.starts_with("id,lower,upper,size,offset\n"),
            "{}",
            file.text
        );
    }

    #[test]
    fn binary_bytes_reach_the_importer_intact() {
        // Not UTF-8: the importer, not the transport, says what is wrong with them.
        let mut worker = Worker::default();
        let out = run(
            &mut worker,
            Request::Load {
                source: "model.onnx".into(),
                scenario: Scenario::default(),
                import: Default::default(),
                routine: None,
            },
            Some(&[0x08, 0x07, 0x12, 0xff, 0xfe, 0x00]),
        );
        // The bytes reach the ONNX importer intact: it, not the transport, refuses them.
        assert!(
            matches!(out.last(), Some(Response::Error(e)) if e.to_string().starts_with("model.onnx: ONNX: the protobuf does not decode")),
            "{out:?}"
        );
    }

    #[test]
    fn a_search_deepens_to_exactly_the_clis_plan_and_reports_its_best_so_far() {
        let mut worker = Worker::default();
        let load = Request::Load {
            source: "A.csv".into(),
            scenario: scenario(Strategy::Search),
            import: Default::default(),
            routine: None,
        };
        let out = run(&mut worker, load, Some(A));
        let best: Vec<u64> = out
            .iter()
            .filter_map(|r| match r {
                Response::Progress {
                    best_bytes: Some(b),
                    ..
                } => Some(*b),
                _ => None,
            })
            .collect();
        assert!(best.len() >= 3, "{out:?}");
        // The exact search's nodes come with its progress.
        assert!(out.iter().any(|r| matches!(
            r,
            Response::Progress {
                nodes: Some(n),
                ..
            } if *n > 0
        )));
        let (a, _) = planned(&out);
        let session = Session::load(A, "A.csv").unwrap();
        let cli = session.plan(&scenario(Strategy::Search)).unwrap();
        assert_eq!(a.summary.footprint_bytes, cli.plan.footprint_bytes());
        // As the CLI's report, the summary says how long the search took, by the worker's
        // clock (here one that moves 50 ms at each reading): its steps, not the views after.
        let mut summary = a.summary.clone();
        let elapsed = summary.elapsed_ms.take().expect("a search's time");
        assert!(elapsed >= 50 && elapsed % 50 == 0, "{elapsed}");
        // And when it found its layout: at a report within that time.
        let found = summary.found_ms.take().expect("when the layout was found");
        assert!(found <= elapsed && found % 50 == 0, "{found} of {elapsed}");
        assert_eq!(summary, Analysis::of(&session, &cli).summary);
        // A plan without a search has none (nor has the CLI's).
        let first_fit = run(
            &mut worker,
            Request::Plan(scenario(Strategy::FirstFit)),
            None,
        );
        assert_eq!(planned(&first_fit).0.summary.elapsed_ms, None);
    }

    #[test]
    fn a_cancel_heard_live_stops_the_search_within_its_step() {
        let mut worker = Worker::default();
        worker.hear_cancels_live();
        load_a_first_fit(&mut worker);
        let first_fit =
            match run(&mut worker, Request::Export(ExportKind::PlanJson), None).remove(0) {
                Response::Exported(f) => f.text,
                other => panic!("{other:?}"),
            };
        let mut out = Vec::new();
        worker.handle(
            Request::Plan(scenario(Strategy::Search)),
            None,
            &|| false,
            &mut |r| out.push(r),
        );
        // One step, and the job is over: the search asked, stopped, and kept its best so far
        // (a plan of the dump shown is not abandoned: its first layout is made).
        assert!(step_cancelled_at_once(&mut worker, &mut out) > 0);
        let (a, cancelled) = planned(&out);
        assert!(cancelled && a.summary.valid);
        assert!(first_fit.contains(&format!(
            "\"footprint_bytes\": {}",
            a.summary.footprint_bytes
        )));
        // Not cancelled, the same single step runs to the end: the CLI's plan (A is proven).
        let out = run(&mut worker, Request::Plan(scenario(Strategy::Search)), None);
        let (a, cancelled) = planned(&out);
        assert!(!cancelled);
        assert_eq!(a.summary.footprint_bytes, 1_048_576);
    }

    #[test]
    fn a_cancel_keeps_the_best_plan_so_far() {
        let mut worker = Worker::default();
        load_a_first_fit(&mut worker);
        let out = run_until(
            &mut worker,
            Request::Plan(scenario(Strategy::Search)),
            None,
            Some(1),
        );
        let (a, cancelled) = planned(&out);
        assert!(cancelled);
        assert!(a.summary.valid);
        assert_eq!(a.strategy(), Strategy::Search.into());
        // The worker keeps it: an export is of the plan shown.
        let out = run(&mut worker, Request::Export(ExportKind::PlanJson), None);
        assert!(
            matches!(&out[0], Response::Exported(f) if f.text.contains(&format!("\"footprint_bytes\": {}", a.summary.footprint_bytes)))
        );
        // A cancel before the first step keeps what was shown.
        let out = run_until(
            &mut worker,
            Request::Plan(scenario(Strategy::Bump)),
            None,
            Some(0),
        );
        assert_eq!(out.last(), Some(&Response::Cancelled));
        let out = run(&mut worker, Request::Export(ExportKind::PlanJson), None);
        assert!(
            matches!(&out[0], Response::Exported(f) if f.text.contains("\"strategy\": \"search\""))
        );
    }

    #[test]
    fn an_onnx_model_is_imported_again_with_a_fixed_input_shape() {
        let mut worker = Worker::default();
        let model: &[u8] = include_bytes!("../../../tests/data/onnx/light_squeezenet.onnx");
        let load = Request::Load {
            source: "squeezenet.onnx".into(),
            scenario: scenario(Strategy::FirstFit),
            import: Default::default(),
            routine: None,
        };
        let out = run(&mut worker, load, Some(model));
        let one = planned(&out).0.summary.lower_bound_bytes;
        let import = memplan_formats::onnx::parse_input_shapes("data_0=2x3x224x224").unwrap();
        let out = run(
            &mut worker,
            Request::Reimport {
                scenario: scenario(Strategy::FirstFit),
                import,
            },
            None,
        );
        let two = planned(&out).0.summary.lower_bound_bytes;
        assert!(two > one, "{two} vs {one}");
        assert!(planned(&out).0.summary.complete);
    }

    /// A fresh worker, the convnet example, and the request that loads it with first-fit.
    #[test]
    fn a_plan_leaves_out_what_the_dump_does_not_know_and_says_so() {
        let (mut worker, example, _) = convnet_worker();
        let load = Request::Load {
            source: "convnet.json".into(),
            scenario: Scenario {
                flips: vec!["nosuch".into(), "relu0".into()],
                params: [("Q".to_string(), 3)].into(),
                ..scenario(Strategy::FirstFit)
            },
            import: Default::default(),
            routine: None,
        };
        let out = run(&mut worker, load, Some(example.text.as_bytes()));
        let unknown = (out.iter())
            .find_map(|r| match r {
                Response::Unknown(u) => Some(u.clone()),
                _ => None,
            })
            .expect("what was left out is said");
        assert_eq!(unknown.len(), 2, "{unknown:?}");
        let (a, _) = planned(&out);
        assert_eq!(a.scenario.flips, vec!["relu0".to_string()]);
        assert!(a.scenario.params.is_empty());
        // A re-plan with a stale flip (Back to an older link) plans the rest too.
        let stale = Scenario {
            flips: vec!["gone".into()],
            ..scenario(Strategy::FirstFit)
        };
        let out = run(&mut worker, Request::Plan(stale), None);
        assert!(
            matches!(&out[0], Response::Unknown(u) if u.len() == 1),
            "{out:?}"
        );
        assert!(planned(&out).0.scenario.flips.is_empty());
    }

    fn convnet_worker() -> (Worker, &'static crate::page::examples::Example, Request) {
        let example = crate::page::examples::EXAMPLES
            .iter()
            .find(|e| e.name == "convnet-training")
            .unwrap();
        let load = Request::Load {
            source: "convnet.json".into(),
            scenario: scenario(Strategy::FirstFit),
            import: Default::default(),
            routine: None,
        };
        (Worker::default(), example, load)
    }

    #[test]
    fn an_answer_leaves_out_what_the_page_holds_and_the_page_rebuilds_it_whole() {
        let example = crate::page::examples::EXAMPLES
            .iter()
            .find(|e| e.name == "decoder-serving")
            .unwrap();
        let session = Session::load(example.text.as_bytes(), example.name).unwrap();
        let mut worker = Worker::default();
        let load = Request::Load {
            source: example.name.into(),
            scenario: scenario(Strategy::FirstFit),
            import: Default::default(),
            routine: None,
        };
        // The page's analysis: each answer rebuilt against the one before, as the page does.
        let mut page: Option<Analysis> = None;
        let mut receive = |out: &[Response]| match out.last() {
            Some(Response::Planned {
                analysis,
                left_out,
                buffers,
                ..
            }) => {
                let taken: u32 = (buffers.runs.iter())
                    .map(|r| match r {
                        Run::Earlier { count, .. } => *count,
                        Run::Whole { .. } => 0,
                    })
                    .sum();
                let patched = (
                    taken as usize + buffers.whole.count(),
                    buffers.whole.count(),
                );
                let received = (**analysis)
                    .clone()
                    .received(*left_out, buffers.clone(), page.as_ref())
                    .unwrap();
                page = Some(received.clone());
                (received, *left_out, patched)
            }
            other => panic!("{other:?}"),
        };
        // What the page rebuilds is the analysis of that plan, whole.
        let whole = |scenario: &Scenario| Analysis::of(&session, &session.plan(scenario).unwrap());
        let (first, left_out, patched) =
            receive(&run(&mut worker, load, Some(example.text.as_bytes())));
        // The first plan of a dump goes whole: every buffer, against nothing.
        let count = first.model.buffers.len();
        assert!(left_out.is_nothing() && first.spaces.is_some());
        assert_eq!(patched, (count, count));
        assert_eq!(first, whole(&scenario(Strategy::FirstFit)));

        let best_fit = scenario(Strategy::BestFit);
        let (again, left_out, patched) =
            receive(&run(&mut worker, Request::Plan(best_fit.clone()), None));
        assert!(left_out.params_parts);
        assert_eq!(again, whole(&best_fit));
        assert_eq!(patched.0, again.model.buffers.len());

        // A flip: one buffer fewer, and the others sent as placements, but for the few whose
        // consumers changed.
        let flipped = Scenario {
            flips: vec![first.candidates[0].tensor.clone()],
            ..best_fit.clone()
        };
        let (with_flip, left_out, patched) =
            receive(&run(&mut worker, Request::Plan(flipped.clone()), None));
        let (count, whole_count) = patched;
        assert!(left_out.params_parts && !left_out.baseline);
        assert!(count + 1 == again.model.buffers.len() && whole_count < count / 10);
        assert_eq!(with_flip, whole(&flipped));
        // Another flip: the same plan without flips, which the page holds, is left out.
        let two_flips = Scenario {
            flips: (first.candidates.iter().take(2))
                .map(|c| c.tensor.clone())
                .collect(),
            ..best_fit.clone()
        };
        let (with_two, left_out, _) =
            receive(&run(&mut worker, Request::Plan(two_flips.clone()), None));
        assert!(left_out.params_parts && left_out.baseline);
        assert_eq!(with_two, whole(&two_flips));
        let (back, _, _) = receive(&run(&mut worker, Request::Plan(best_fit.clone()), None));
        assert_eq!(back, again);

        let (param, value) = example_param(example);
        let bigger = Scenario {
            params: [(param, value * 2)].into(),
            ..best_fit
        };
        let (changed, left_out, _) =
            receive(&run(&mut worker, Request::Plan(bigger.clone()), None));
        assert!(!left_out.params_parts);
        assert_ne!(changed.spaces, again.spaces);
        assert_eq!(changed, whole(&bigger));
    }

    /// The first param of a bundled example, and its default.
    fn example_param(example: &crate::page::examples::Example) -> (String, u64) {
        let local =
            Local::load(example.text.as_bytes(), example.name, &Scenario::default()).unwrap();
        let (k, v) = local.session.graph.params.iter().next().unwrap();
        (k.clone(), *v)
    }

    #[test]
    fn a_fit_answers_its_log_then_plans_with_its_flips() {
        let (mut worker, example, load) = convnet_worker();
        let baseline = planned(&run(&mut worker, load, Some(example.text.as_bytes())))
            .0
            .summary
            .footprint_bytes;
        let fit = Request::Fit {
            scenario: scenario(Strategy::FirstFit),
            target: (baseline * 9 / 10).to_string(),
        };
        let out = run(&mut worker, fit, None);
        let log = out
            .iter()
            .find_map(|r| match r {
                Response::Fitted(log) => Some(log),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{out:?}"));
        let (a, _) = planned(&out);
        assert_eq!(a.scenario.flips, log.flip_ids());
        assert_eq!(a.summary.footprint_bytes, log.final_bytes);
        assert_eq!(
            a.baseline.as_ref().map(|b| b.footprint_bytes),
            Some(baseline)
        );
        let bad = Request::Fit {
            scenario: scenario(Strategy::FirstFit),
            target: "much".into(),
        };
        let out = run(&mut worker, bad, None);
        assert!(
            matches!(out.last(), Some(Response::Error(e)) if e.to_string().contains("not a size"))
        );
        // The session stays loaded after a refused fit.
        let out = run(&mut worker, Request::Plan(scenario(Strategy::Bump)), None);
        assert!(planned(&out).0.summary.valid);
    }

    #[test]
    fn a_sweep_runs_in_steps_and_a_cancel_keeps_the_budgets_fitted() {
        let (mut worker, example, load) = convnet_worker();
        run(&mut worker, load, Some(example.text.as_bytes()));
        let sweep = || Request::Sweep {
            scenario: scenario(Strategy::FirstFit),
            points: 6,
        };
        let out = run(&mut worker, sweep(), None);
        let steps = out
            .iter()
            .filter(
                |r| matches!(r, Response::Progress { what, .. } if what.starts_with("sweeping")),
            )
            .count();
        assert!(steps >= 6, "{out:?}");
        let Some(Response::Swept(view)) = out.last() else {
            panic!("{out:?}")
        };
        let session = Session::load(example.text.as_bytes(), "convnet.json").unwrap();
        let cli = session
            .sweep(
                &scenario(Strategy::FirstFit),
                6,
                memplan_engine::DEFAULT_EXHAUSTIVE_MOST,
            )
            .unwrap();
        assert_eq!(**view, SweepView::of(&session, &cli, false));
        assert!(view.svg().unwrap().starts_with("<svg"));

        let out = run_until(&mut worker, sweep(), None, Some(5));
        let Some(Response::Swept(view)) = out.last() else {
            panic!("{out:?}")
        };
        assert!(view.cancelled);
        assert_eq!(
            view.answer.points.len(),
            2,
            "five steps: the order, the optimum, the minimize fit, two targets"
        );
        // The session stays loaded.
        let out = run(&mut worker, Request::Plan(scenario(Strategy::Bump)), None);
        assert!(planned(&out).0.summary.valid);
    }

    #[test]
    fn a_compare_diffs_the_plan_shown_against_another_scenario_or_dump() {
        let mut worker = Worker::default();
        let load = Request::Load {
            source: "A.csv".into(),
            scenario: scenario(Strategy::FirstFit),
            import: Default::default(),
            routine: None,
        };
        run(&mut worker, load, Some(A));
        let out = run(
            &mut worker,
            Request::Compare {
                scenario: scenario(Strategy::Bump),
                source: None,
            },
            None,
        );
        let Some(Response::Compared(view)) = out.last() else {
            panic!("{out:?}")
        };
        assert_eq!(
            (view.before.as_str(), view.after.as_str()),
            ("A.csv · first-fit", "A.csv · bump")
        );
        assert!(view.diff.after.footprint_bytes > view.diff.before.footprint_bytes);
        assert!(view.diff.count(memplan_engine::diff::Change::Changed) > 0);
        // Another dump, by its bytes: one tensor fewer.
        let other = b"id,lower,upper,size\n0,0,2,100\n";
        let mut post = Vec::new();
        worker.handle(
            Request::Compare {
                scenario: scenario(Strategy::FirstFit),
                source: Some("B.csv".into()),
            },
            Some(input_of(other.to_vec())),
            &|| false,
            &mut |r| post.push(r),
        );
        let Some(Response::Compared(view)) = post.last() else {
            panic!("{post:?}")
        };
        assert_eq!(view.after, "B.csv · first-fit");
        assert!(view.diff.count(memplan_engine::diff::Change::Gone) > 100);
    }

    #[test]
    fn errors_are_answers_not_panics() {
        let mut worker = Worker::default();
        let out = run(&mut worker, Request::Plan(Scenario::default()), None);
        assert_eq!(out, vec![failed(WebError::NothingLoaded(Operation::Plan))]);
        let out = run(
            &mut worker,
            Request::Load {
                source: "bad.json".into(),
                scenario: Scenario::default(),
                import: Default::default(),
                routine: None,
            },
            Some(b"{"),
        );
        assert!(
            matches!(out.last(), Some(Response::Error(e)) if e.to_string().starts_with("bad.json: JSON line 1"))
        );
        let request = serde_json::to_string(&Request::Plan(scenario(Strategy::Tlsf))).unwrap();
        assert_eq!(
            request,
            r#"{"plan":{"strategy":"tlsf","precision_classes":true,"pool_cap":null,"work_limit":null}}"#
        );
        assert_eq!(
            serde_json::to_string(&Request::Cancel).unwrap(),
            r#""cancel""#
        );
    }

    #[test]
    fn advice_answers_for_its_scenario_and_a_diff_compares_two_plans() {
        let mut worker = Worker::default();
        let convnet = include_bytes!("../../../static/examples/convnet-training.json");
        run(
            &mut worker,
            Request::Load {
                source: "convnet.json".into(),
                scenario: Scenario::default(),
                import: Default::default(),
                routine: None,
            },
            Some(convnet),
        );
        let out = run(&mut worker, Request::Advise(Scenario::default()), None);
        let Some(Response::Advised { scenario, answer }) = out.last() else {
            panic!("{out:?}")
        };
        assert_eq!(**scenario, Scenario::default());
        let row = &answer.rows[0];
        assert!(row.saving_bytes > 0 && row.footprint_bytes < answer.footprint_bytes);
        let out = run(
            &mut worker,
            Request::Diff {
                before: Scenario::default(),
                after: row.scenario.clone(),
            },
            None,
        );
        let Some(Response::Diffed(diff)) = out.last() else {
            panic!("{out:?}")
        };
        assert_eq!(diff.before.footprint_bytes, answer.footprint_bytes);
        assert_eq!(diff.after.footprint_bytes, row.footprint_bytes);
        // The worker still holds its plan: a plan after the questions plans.
        let out = run(&mut worker, Request::Plan(row.scenario.clone()), None);
        assert_eq!(planned(&out).0.summary.footprint_bytes, row.footprint_bytes);
    }

    /// What the page receives: each response through JSON, as the Web Worker sends it.
    fn through_json(out: Vec<Response>) -> Vec<Response> {
        out.into_iter()
            .map(|r| serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap())
            .collect()
    }

    fn program_report(out: &[Response]) -> &memplan_engine::program::ProgramReport {
        out.iter()
            .rev()
            .find_map(|r| match r {
                Response::Program(Some(report)) => Some(&**report),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no program in {out:?}"))
    }

    #[test]
    fn a_program_loads_with_its_report_opens_its_first_run_and_keeps_each_routines_scenario() {
        let example = crate::page::examples::named("serving-program").unwrap();
        let mut worker = Worker::default();
        let out = through_json(run(
            &mut worker,
            Request::Load {
                source: example.name.into(),
                scenario: Scenario::default(),
                import: Default::default(),
                routine: None,
            },
            Some(example.text.as_bytes()),
        ));
        // The report the page shows is the CLI's, byte for byte.
        let report = program_report(&out);
        assert_eq!(
            crate::analysis::program_report_json(report),
            include_str!("../../../tests/golden/serving-program.plan.json")
        );
        assert!(
            out.iter()
                .any(|r| matches!(r, Response::Routine { index: 0, .. })),
            "{out:?}"
        );
        assert_eq!(
            planned(&out).0.summary.footprint_bytes,
            report.routines[0].model.footprint_bytes
        );
        // Another routine under another strategy: its plan, and the program planned with it.
        let decode = report
            .routines
            .iter()
            .position(|r| r.routine == "decode_step")
            .unwrap();
        let out = through_json(run(&mut worker, Request::Routine(decode), None));
        let (a, _) = planned(&out);
        assert_eq!(
            a.summary.footprint_bytes,
            report.routines[decode].model.footprint_bytes
        );
        // The routine shown is planned once, by the job: the program reuses its plan.
        let n = report.routines.len();
        let plans = |w: &Worker| w.program.as_ref().unwrap().cache.plans;
        assert_eq!(
            plans(&worker),
            2 * n - 1,
            "the other routines, and every own plan"
        );
        let bump = scenario(Strategy::Bump);
        let out = through_json(run(&mut worker, Request::Plan(bump.clone()), None));
        assert_eq!(plans(&worker), 2 * n, "decode_step's own plan alone");
        let bumped = program_report(&out);
        assert!(
            bumped.routines[decode].own.footprint_bytes
                > report.routines[decode].own.footprint_bytes
        );
        assert_eq!(
            bumped.routines[0], report.routines[0],
            "the other routines keep theirs"
        );
        // Back to the first: it opens under its own scenario, not the one set on decode.
        let out = through_json(run(&mut worker, Request::Routine(0), None));
        let Some(Response::Routine { scenario, .. }) =
            out.iter().find(|r| matches!(r, Response::Routine { .. }))
        else {
            panic!("{out:?}")
        };
        assert_eq!(**scenario, Scenario::default());
        // The export is the program's report.
        let out = run(&mut worker, Request::Export(ExportKind::ProgramJson), None);
        let Response::Exported(file) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(file.file_name, "serving-program.plan.json");
        assert!(file.text.contains("\"used_peak_bytes\""));
        // A dump of one computation after it: no program.
        let out = run(
            &mut worker,
            Request::Load {
                source: "x.csv".into(),
                scenario: Scenario::default(),
                import: Default::default(),
                routine: None,
            },
            Some(b"id,lower,upper,size\na,0,2,100\n"),
        );
        assert!(
            out.iter().any(|r| matches!(r, Response::Program(None))),
            "{out:?}"
        );
    }

    fn load_request(source: &str, strategy: Strategy) -> Request {
        Request::Load {
            source: source.into(),
            scenario: scenario(strategy),
            import: Default::default(),
            routine: None,
        }
    }

    /// Hands the worker a load of A under `strategy`, its job not run; what it posted.
    fn start_loading_a(
        worker: &mut Worker,
        strategy: Strategy,
        stop: &dyn Fn() -> bool,
    ) -> Vec<Response> {
        let mut out = Vec::new();
        let load = load_request("A.csv", strategy);
        worker.handle(load, Some(input_of(A.to_vec())), stop, &mut |r| out.push(r));
        out
    }

    /// The program loaded, routine 0 shown.
    fn load_program_example(worker: &mut Worker) -> ProgramReport {
        let example = crate::page::examples::named("serving-program").unwrap();
        let out = run(
            worker,
            load_request(example.name, Strategy::FirstFit),
            Some(example.text.as_bytes()),
        );
        program_report(&out).clone()
    }

    /// What the worker shows: the source and routine its plan is of, the program it holds, and
    /// the bytes an import again reads (as their source).
    fn shown(worker: &mut Worker) -> (String, Option<usize>, Option<String>) {
        let out = run(worker, Request::Plan(scenario(Strategy::Bump)), None);
        let source = planned(&out).0.source.clone();
        let routine = worker.program.as_ref().map(|p| p.routine);
        let bytes = worker.bytes.as_ref().map(|(s, _)| s.clone());
        (source, routine, bytes)
    }

    #[test]
    fn a_load_stopped_while_it_reads_posts_nothing_and_leaves_the_dump_shown() {
        let mut worker = Worker::default();
        load_program_example(&mut worker);
        let before = shown(&mut worker);
        assert!(before.0.starts_with("serving-program"), "{before:?}");
        // A cancel raises the flag after the load's first read: it stops at its second.
        let mut rows = String::from("id,lower,upper,size\n");
        for i in 0..200_000 {
            rows.push_str(&format!("b{i},{i},{},64\n", i + 2));
        }
        let reads = std::cell::Cell::new(0);
        let stop = || {
            reads.set(reads.get() + 1);
            reads.get() > 1
        };
        let mut out = Vec::new();
        let input = Some(input_of(rows.into_bytes()));
        worker.handle(
            load_request("big.csv", Strategy::FirstFit),
            input,
            &stop,
            &mut |r| out.push(r),
        );
        assert!(reads.get() >= 2, "the load asked {} times", reads.get());
        assert!(!worker.busy());
        assert!(
            out.iter()
                .all(|r| matches!(r, Response::Progress { stage: 1, .. })),
            "{out:?}"
        );
        assert_eq!(shown(&mut worker), before);
        // Stopped once read, before it plans: the same.
        let out = start_loading_a(&mut worker, Strategy::FirstFit, &|| true);
        assert!(!worker.busy(), "{out:?}");
        assert_eq!(shown(&mut worker), before);
        // The dump shown can be imported again: its bytes are still held.
        let out = run(
            &mut worker,
            Request::Reimport {
                scenario: Scenario::default(),
                import: Default::default(),
            },
            None,
        );
        assert_eq!(planned(&out).0.source, before.0);
    }

    #[test]
    fn a_load_cancelled_before_its_first_plan_gives_back_the_dump_shown_and_tells_the_page_nothing()
    {
        let mut worker = Worker::default();
        let report = load_program_example(&mut worker);
        let before = shown(&mut worker);
        let out = run_until(
            &mut worker,
            load_request("A.csv", Strategy::FirstFit),
            Some(A),
            Some(0),
        );
        assert_eq!(out.last(), Some(&Response::Cancelled), "{out:?}");
        assert!(
            !out.iter().any(|r| matches!(
                r,
                Response::Program(_) | Response::Routine { .. } | Response::Planned { .. }
            )),
            "{out:?}"
        );
        assert_eq!(shown(&mut worker), before);
        // Its program too: the report exports.
        let out = run(&mut worker, Request::Export(ExportKind::ProgramJson), None);
        assert!(matches!(&out[0], Response::Exported(_)), "{out:?}");
        // A failed load leaves it as well, the error said.
        let out = run(
            &mut worker,
            load_request("bad.csv", Strategy::FirstFit),
            Some(b"id,lower\nx,y\n"),
        );
        assert!(matches!(out.last(), Some(Response::Error(_))), "{out:?}");
        assert_eq!(shown(&mut worker), before);
        // So does a routine opened and cancelled before its plan.
        let decode = (report.routines.iter())
            .position(|r| r.routine == "decode_step")
            .unwrap();
        let out = run_until(&mut worker, Request::Routine(decode), None, Some(0));
        assert_eq!(out.last(), Some(&Response::Cancelled), "{out:?}");
        assert_eq!(shown(&mut worker), before);
        // Opened to the end, it is shown, and said.
        let out = run(&mut worker, Request::Routine(decode), None);
        assert!(
            out.iter()
                .any(|r| matches!(r, Response::Routine { index, .. } if *index == decode)),
            "{out:?}"
        );
        assert_eq!(shown(&mut worker).1, Some(decode));
    }

    #[test]
    fn a_plan_asked_while_a_load_plans_plans_the_new_dump_and_another_request_drops_it() {
        let mut worker = Worker::default();
        load_program_example(&mut worker);
        let before = shown(&mut worker);
        // A toggle while the load plans: the load goes on, under the toggle's scenario.
        let mut out = start_loading_a(&mut worker, Strategy::FirstFit, &|| false);
        out.extend(run(
            &mut worker,
            Request::Plan(scenario(Strategy::Bump)),
            None,
        ));
        let (a, _) = planned(&out);
        assert_eq!(
            (a.source.as_str(), a.strategy()),
            ("A.csv", Strategy::Bump.into())
        );
        let told = out
            .iter()
            .position(|r| matches!(r, Response::Program(None)));
        let plan = out
            .iter()
            .position(|r| matches!(r, Response::Planned { .. }));
        assert!(told.is_some() && told < plan, "{out:?}");
        assert_eq!(
            shown(&mut worker),
            ("A.csv".into(), None, Some("A.csv".into()))
        );
        // While a load plans, an export is of the dump shown, and the load goes on.
        load_program_example(&mut worker);
        start_loading_a(&mut worker, Strategy::FirstFit, &|| false);
        let mut out = Vec::new();
        let export = Request::Export(ExportKind::ProgramJson);
        worker.handle(export, None, &|| false, &mut |r| out.push(r));
        let Some(Response::Exported(file)) = out.first() else {
            panic!("{out:?}")
        };
        assert_eq!(file.file_name, "serving-program.plan.json");
        assert!(worker.busy());
        // Another question about the plan shown drops the load: it is of the dump shown.
        let out = run(
            &mut worker,
            Request::Advise(scenario(Strategy::FirstFit)),
            None,
        );
        assert!(
            matches!(out.last(), Some(Response::Advised { .. })),
            "{out:?}"
        );
        assert!(!worker.busy());
        assert_eq!(shown(&mut worker), before);
    }

    #[test]
    fn a_load_cancelled_before_the_page_saw_a_plan_of_it_is_dropped_and_after_keeps_it() {
        let mut worker = Worker::default();
        worker.hear_cancels_live();
        load_program_example(&mut worker);
        let before = shown(&mut worker);
        // No time passes: no progress, so no best so far, reaches the page.
        let mut out = start_loading_a(&mut worker, Strategy::Search, &|| false);
        assert!(!worker.step(&|| 0.0, &|| true, &mut |r| out.push(r)));
        worker.handle(Request::Cancel, None, &|| true, &mut |r| out.push(r));
        assert_eq!(out.last(), Some(&Response::Cancelled), "{out:?}");
        assert!(
            !out.iter()
                .any(|r| matches!(r, Response::Planned { .. } | Response::Program(_))),
            "{out:?}"
        );
        assert_eq!(shown(&mut worker), before);
        // The search's best so far shown, a cancel after it keeps it: A is shown, cut short.
        let clock = std::cell::Cell::new(0.0);
        let now = || {
            clock.set(clock.get() + 50.0);
            clock.get()
        };
        let mut out = start_loading_a(&mut worker, Strategy::Search, &|| false);
        let later = || clock.get() > 300.0;
        assert!(!worker.step(&now, &later, &mut |r| out.push(r)));
        assert!(
            out.iter().any(|r| matches!(
                r,
                Response::Progress {
                    best_bytes: Some(_),
                    ..
                }
            )),
            "{out:?}"
        );
        let (a, cancelled) = planned(&out);
        assert_eq!((a.source.as_str(), cancelled), ("A.csv", true));
        assert!(
            out.iter().any(|r| matches!(r, Response::Program(None))),
            "{out:?}"
        );
    }
}
