//! The engine's jobs: a plan or a sweep in bounded steps ([`Job`], stepped by
//! [`Session::step`]), for a caller that returns to its event loop between them (the page's
//! worker, which hears a cancel there). A sweep's steps are its targets ([`SweepJob`]). A plan's
//! steps are searches from scratch at rising work limits: for `search` where a cancel is heard
//! only between steps, a quick plan at a 64th of the scenario's limit (a complete, checked plan
//! to keep if a cancel comes), then the scenario's own; otherwise the scenario's alone. The last
//! step keeps exactly the plan [`Session::plan`] makes, so every caller shows the CLI's plan.

use memplan_core::{Control, Strategy, StrategyChoice};

use crate::{EngineError, Outcome, Scenario, Session, Sweep, SweepJob};

/// A job in steps: one type for every caller that steps the engine.
#[derive(Debug, Clone)]
pub enum Job {
    Plan(PlanJob),
    Sweep(SweepJob),
}

/// What one step of a [`Job`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum JobStep {
    Plan(PlanStep),
    /// `Some` with the sweep once its last target is fitted.
    Sweep(Option<Sweep>),
}

impl Job {
    /// Steps done and steps in all.
    pub fn progress(&self) -> (usize, usize) {
        match self {
            Job::Plan(plan) => plan.progress(),
            Job::Sweep(sweep) => sweep.progress(),
        }
    }
}

impl Session {
    /// Runs the next step of `job`. `control` and `stopped` are a plan step's (see
    /// [`PlanJob::step`]); a sweep's step runs its fit to the end.
    pub fn step(
        &self,
        job: &mut Job,
        control: &mut Control,
        stopped: &dyn Fn() -> bool,
    ) -> Result<JobStep, EngineError> {
        match job {
            Job::Plan(plan) => plan.step(self, control, stopped).map(JobStep::Plan),
            Job::Sweep(sweep) => self.sweep_step(sweep).map(JobStep::Sweep),
        }
    }
}

/// A plan in steps: [`PlanJob::step`] until [`PlanStep::finished`].
#[derive(Debug, Clone)]
pub struct PlanJob {
    scenario: Scenario,
    limits: Vec<Option<u64>>,
    done: usize,
    best: Option<Outcome>,
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanStep {
    /// Its plan is now the job's best.
    pub kept: bool,
    /// The caller's stop ended it: the job is over, with its best so far.
    pub cancelled: bool,
    /// The job is over (its last step ran, or a cancel came).
    pub finished: bool,
}

impl PlanJob {
    /// A job planning `scenario`. `stops_within_a_step`: the caller's stop is heard while a step
    /// runs (a flag shared with the page), so a search needs no quick step before its own.
    pub fn new(scenario: Scenario, stops_within_a_step: bool) -> PlanJob {
        let limit = scenario.work_limit_or_default();
        let search = scenario.strategy == StrategyChoice::One(Strategy::Search);
        let limits = match Some(limit / 64).filter(|&l| l > 0) {
            Some(quick) if search && !stops_within_a_step => vec![Some(quick), scenario.work_limit],
            _ => vec![scenario.work_limit],
        };
        PlanJob {
            scenario,
            limits,
            done: 0,
            best: None,
        }
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Steps done and steps in all.
    pub fn progress(&self) -> (usize, usize) {
        (self.done, self.limits.len())
    }

    /// The lowest plan of the steps so far.
    pub fn best(&self) -> Option<&Outcome> {
        self.best.as_ref()
    }

    pub fn into_best(self) -> Option<Outcome> {
        self.best
    }

    /// Runs the next step under `control`; `stopped` says, after it, whether the caller's stop
    /// ended it. A stopped step keeps its plan only where it is lower than the best so far; the
    /// last step keeps its plan even on a tie, so the answer is exactly [`Session::plan`]'s.
    pub fn step(
        &mut self,
        session: &Session,
        control: &mut Control,
        stopped: &dyn Fn() -> bool,
    ) -> Result<PlanStep, EngineError> {
        let Some(&work_limit) = self.limits.get(self.done) else {
            return Ok(PlanStep {
                kept: false,
                cancelled: false,
                finished: true,
            });
        };
        let scenario = Scenario {
            work_limit,
            ..self.scenario.clone()
        };
        // A cancel before any layout (`Control::abandon_on_stop`) ends the job with its best
        // so far, as after any cancel.
        let Some(mut outcome) = session.plan_unless_cancelled(&scenario, control)? else {
            self.done = self.limits.len();
            return Ok(PlanStep {
                kept: false,
                cancelled: true,
                finished: true,
            });
        };
        outcome.scenario = self.scenario.clone();
        let cancelled = stopped();
        self.done += 1;
        let last = self.done == self.limits.len();
        let better = (self.best.as_ref())
            .is_none_or(|b| outcome.plan.footprint_bytes() < b.plan.footprint_bytes());
        let kept = better || (last && !cancelled);
        if kept {
            self.best = Some(outcome);
        }
        Ok(PlanStep {
            kept,
            cancelled,
            finished: last || cancelled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &[u8] = include_bytes!("../../../tests/data/minimalloc/D.1048576.csv");

    fn search(work_limit: Option<u64>) -> Scenario {
        Scenario {
            strategy: Strategy::Search.into(),
            work_limit,
            ..Scenario::default()
        }
    }

    #[test]
    fn a_search_steps_up_to_exactly_the_plan_of_one_call() {
        let session = Session::load(D, "D.csv").unwrap();
        let scenario = search(Some(2_000_000));
        let mut job = PlanJob::new(scenario.clone(), false);
        assert_eq!(job.progress(), (0, 2));
        let first = job
            .step(&session, &mut Control::default(), &|| false)
            .unwrap();
        assert!(first.kept && !first.finished);
        let quick = job.best().unwrap().plan.footprint_bytes();
        let last = job
            .step(&session, &mut Control::default(), &|| false)
            .unwrap();
        assert!(last.finished && last.kept);
        let best = job.into_best().unwrap();
        assert!(best.plan.footprint_bytes() <= quick);
        assert_eq!(best, session.plan(&scenario).unwrap());
        // Heard within a step, a cancel needs no quick step: one step, the scenario's own.
        assert_eq!(PlanJob::new(scenario, true).progress(), (0, 1));
        // Any other strategy is one step.
        assert_eq!(PlanJob::new(Scenario::default(), false).progress(), (0, 1));
    }

    #[test]
    fn one_job_type_steps_a_plan_and_a_sweep() {
        let session = Session::load(D, "D.csv").unwrap();
        let mut plan = Job::Plan(PlanJob::new(search(Some(200_000)), false));
        let step = |job: &mut Job| {
            session
                .step(job, &mut Control::default(), &|| false)
                .unwrap()
        };
        assert!(matches!(step(&mut plan), JobStep::Plan(s) if !s.finished));
        assert!(matches!(step(&mut plan), JobStep::Plan(s) if s.finished));
        assert_eq!(plan.progress(), (2, 2));
        let convnet = include_str!("../../../static/examples/convnet-training.json");
        let session = Session::load(convnet.as_bytes(), "convnet.json").unwrap();
        let mut sweep = Job::Sweep(SweepJob::new(Scenario::default(), 3, 0));
        let step = |job: &mut Job| {
            session
                .step(job, &mut Control::default(), &|| false)
                .unwrap()
        };
        let mut steps = 1;
        while step(&mut sweep) == JobStep::Sweep(None) {
            steps += 1;
        }
        assert_eq!(steps, sweep.progress().1);
    }

    #[test]
    fn a_cancel_ends_the_job_with_its_best_so_far() {
        let session = Session::load(D, "D.csv").unwrap();
        let mut job = PlanJob::new(search(None), false);
        job.step(&session, &mut Control::default(), &|| false)
            .unwrap();
        let quick = job.best().cloned().unwrap();
        // The next step is stopped at once: it keeps its plan only if it is lower.
        let mut stop = || true;
        let mut control = Control {
            should_stop: Some(&mut stop),
            ..Control::default()
        };
        let step = job.step(&session, &mut control, &|| true).unwrap();
        assert!(step.cancelled && step.finished);
        let best = job.into_best().unwrap();
        assert!(best.plan.footprint_bytes() <= quick.plan.footprint_bytes());
        assert!(best.plan.is_valid());
    }

    /// A user's cancel before any layout (`abandon_on_stop`) ends the job with no plan and no
    /// error, where a stop alone still makes one.
    #[test]
    fn a_cancel_before_any_layout_ends_the_job_with_none() {
        let session = Session::load(D, "D.csv").unwrap();
        for abandon_on_stop in [true, false] {
            let mut job = PlanJob::new(Scenario::default(), true);
            let mut stop = || true;
            let mut control = Control {
                should_stop: Some(&mut stop),
                abandon_on_stop,
                ..Control::default()
            };
            let step = job.step(&session, &mut control, &|| true).unwrap();
            assert!(step.cancelled && step.finished);
            assert_eq!(step.kept, !abandon_on_stop);
            assert_eq!(job.best().is_some(), !abandon_on_stop);
        }
    }
}
