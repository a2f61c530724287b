//! One typed question about a loaded dump, and its typed answer: what the CLI's commands ask
//! and what the page's worker asks, answered the same way for both. Each question is a type
//! that knows its answer's type ([`Ask`]: the CLI asks `FitQuery` and gets a `FitAnswer`);
//! [`Query`] is any of them, for a caller that sends questions as data, and
//! [`Session::answer`] answers it with the [`Answer`] of the same name. A plan or a sweep the
//! page asks for runs as a job in steps instead ([`crate::job::Job`]); its last step is the
//! answer given here.

use memplan_core::remat::Target;
use memplan_core::{Control, Violation};
use memplan_formats::report::PlanReport;
use serde::{Deserialize, Serialize};

use crate::advise::AdviceAnswer;
use crate::answers::{FitAnswer, FitsAnswer, SpacesAnswer, SweepAnswer};
use crate::diff::{PlanDiff, diff};
use crate::{EngineError, Scenario, Session};

/// A question with the type of its answer.
pub trait Ask {
    type Answer;

    /// The answer for `session`. `control` is lent to the plan a question makes (a stop
    /// condition, progress, earlier decodes); questions that plan many times run to their end.
    fn ask(&self, session: &Session, control: &mut Control) -> Result<Self::Answer, EngineError>;
}

/// The dump's plan under a scenario: the report `memplan plan --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanQuery(pub Scenario);

/// Flips chosen so the footprint fits `target`, scoring at most `max_candidates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitQuery {
    pub scenario: Scenario,
    pub target: Target,
    pub max_candidates: Option<usize>,
}

/// `fit` at `points` targets from the least footprint to the baseline, with the exhaustive
/// optimum where there are at most `exhaustive_most` candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepQuery {
    pub scenario: Scenario,
    pub points: usize,
    pub exhaustive_most: usize,
}

/// The largest value of `param` in `lo..=hi` whose plan fits the scenario's device class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitsQuery {
    pub scenario: Scenario,
    pub param: String,
    pub lo: u64,
    /// `None`: the param's whole range from `lo` (doubling until a value does not fit).
    pub hi: Option<u64>,
}

/// The levers of a scenario ranked by how much each lowers its footprint, each planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdviseQuery(pub Scenario);

/// Each slot's memory space, access and host transfer, and each output's source; with `most`,
/// of the slots a table of that many rows lists ([`crate::answers::listed`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpacesQuery {
    pub scenario: Scenario,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub most: Option<usize>,
}

/// Whether a plan from outside holds: `plan` (a report, named by its source), or without one
/// the offsets the dump gives itself (a minimalloc CSV's), under the scenario's precision
/// classes and pool cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckQuery {
    pub scenario: Scenario,
    pub plan: Option<(String, Box<PlanReport>)>,
}

/// The dump written as another format: memplan JSON (under `ordered`'s params and order, when
/// given: `--order best` writes the reordered dump), or minimalloc CSV with the plan's offsets
/// under `with_plan`'s scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvertQuery {
    pub to: Written,
    pub with_plan: Option<Scenario>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordered: Option<Scenario>,
}

/// The dump's plan under `before` against its plan under `after`, tensor by tensor (two dumps
/// are compared by [`crate::diff::diff`] over their reports).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffQuery {
    pub before: Scenario,
    pub after: Scenario,
}

/// A format a dump is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Written {
    Json,
    Minimalloc,
}

/// A check's answer: how many buffers it placed, the footprint it claims, and every broken
/// promise the independent checker found (none: the plan is valid).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckAnswer {
    pub buffers: usize,
    pub footprint_bytes: u64,
    pub violations: Vec<String>,
    /// Checking the plan the dump comes with, under precision classes: its pairs of buffers of
    /// different dtypes in the same bytes. Its planner had no such rule, so they are counted
    /// here, not listed as violations.
    #[serde(default)]
    pub across_classes: usize,
}

impl Ask for PlanQuery {
    type Answer = PlanReport;
    fn ask(&self, session: &Session, control: &mut Control) -> Result<PlanReport, EngineError> {
        Ok(session.report(&session.plan_with(&self.0, control)?))
    }
}

impl Ask for FitQuery {
    type Answer = FitAnswer;
    fn ask(&self, session: &Session, _: &mut Control) -> Result<FitAnswer, EngineError> {
        let fit = session.fit(&self.scenario, self.target, self.max_candidates)?;
        Ok(FitAnswer::of(session, self.target, &fit))
    }
}

impl Ask for SweepQuery {
    type Answer = SweepAnswer;
    fn ask(&self, session: &Session, _: &mut Control) -> Result<SweepAnswer, EngineError> {
        let sweep = session.sweep(&self.scenario, self.points, self.exhaustive_most)?;
        Ok(SweepAnswer::of(session, &sweep))
    }
}

impl Ask for FitsQuery {
    type Answer = FitsAnswer;
    fn ask(&self, session: &Session, _: &mut Control) -> Result<FitsAnswer, EngineError> {
        let fits = session.largest_fitting(&self.scenario, &self.param, self.lo, self.hi)?;
        Ok(self.answer(&fits))
    }
}

impl FitsQuery {
    /// [`Ask::ask`], asking `stopped` after each plan: `None` once it says so (a cancel), as
    /// [`Session::largest_fitting_unless`].
    pub fn ask_unless(
        &self,
        session: &Session,
        stopped: &dyn Fn() -> bool,
    ) -> Result<Option<FitsAnswer>, EngineError> {
        let (scenario, param) = (&self.scenario, &self.param);
        let fits = session.largest_fitting_unless(scenario, param, self.lo, self.hi, stopped)?;
        Ok(fits.map(|fits| self.answer(&fits)))
    }

    fn answer(&self, fits: &crate::Fits) -> FitsAnswer {
        let class = (self.scenario.device_class.as_ref()).map_or("", |d| d.class.as_str());
        FitsAnswer::of(class, (self.lo, self.hi), fits)
    }
}

impl Ask for AdviseQuery {
    type Answer = AdviceAnswer;
    fn ask(&self, session: &Session, _: &mut Control) -> Result<AdviceAnswer, EngineError> {
        session.advise(&self.0)
    }
}

impl Ask for SpacesQuery {
    type Answer = SpacesAnswer;
    fn ask(&self, session: &Session, _: &mut Control) -> Result<SpacesAnswer, EngineError> {
        Ok(SpacesAnswer::of(
            session,
            &session.spaces(&self.scenario)?,
            self.most,
        ))
    }
}

impl Ask for CheckQuery {
    type Answer = CheckAnswer;
    fn ask(&self, session: &Session, _: &mut Control) -> Result<CheckAnswer, EngineError> {
        let (mut checked, given) = match &self.plan {
            Some((source, report)) => {
                let checked = (session.check_report(report, &self.scenario)).map_err(|error| {
                    EngineError::Format {
                        input: source.clone(),
                        error,
                    }
                })?;
                (checked, false)
            }
            None => (session.check_given(&self.scenario)?, true),
        };
        let across = (checked.violations).extract_if(.., |v| {
            given && matches!(v, Violation::AcrossClasses { .. })
        });
        let across_classes = across.count();
        Ok(CheckAnswer {
            buffers: checked.buffers,
            footprint_bytes: checked.footprint_bytes,
            violations: checked.violations.iter().map(ToString::to_string).collect(),
            across_classes,
        })
    }
}

impl Ask for ConvertQuery {
    type Answer = String;
    fn ask(&self, session: &Session, control: &mut Control) -> Result<String, EngineError> {
        Ok(match self.to {
            Written::Json => match &self.ordered {
                Some(scenario) => match session.ordered(scenario, control)? {
                    Some(bound) => memplan_formats::json::write(&bound.graph),
                    None => memplan_formats::json::write(&session.graph),
                },
                None => memplan_formats::json::write(&session.graph),
            },
            Written::Minimalloc => {
                let outcome = (self.with_plan.as_ref().map(|s| session.plan(s))).transpose()?;
                session.minimalloc_csv(outcome.as_ref())?
            }
        })
    }
}

impl Ask for DiffQuery {
    type Answer = PlanDiff;
    fn ask(&self, session: &Session, _: &mut Control) -> Result<PlanDiff, EngineError> {
        let report = |s: &Scenario| session.plan(s).map(|o| session.report(&o));
        Ok(diff(&report(&self.before)?, &report(&self.after)?))
    }
}

/// Makes the one enum of the questions and the one of their answers, each variant named for
/// its question, and `Session::answer` between them.
macro_rules! questions {
    ($($name:ident($query:ty) -> $answer:ty),* $(,)?) => {
        /// Any question about the loaded dump, as data.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Query {
            $($name($query)),*
        }

        /// The answer to a [`Query`], of the same name.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum Answer {
            $($name(Box<$answer>)),*
        }

        impl Session {
            /// Answers `query` with the answer of its name (see [`Ask::ask`]).
            pub fn answer(&self, query: &Query, control: &mut Control) -> Result<Answer, EngineError> {
                Ok(match query {
                    $(Query::$name(q) => Answer::$name(Box::new(q.ask(self, control)?))),*
                })
            }
        }
    };
}

questions! {
    Plan(PlanQuery) -> PlanReport,
    Fit(FitQuery) -> FitAnswer,
    Sweep(SweepQuery) -> SweepAnswer,
    Fits(FitsQuery) -> FitsAnswer,
    Advise(AdviseQuery) -> AdviceAnswer,
    Spaces(SpacesQuery) -> SpacesAnswer,
    Check(CheckQuery) -> CheckAnswer,
    Convert(ConvertQuery) -> String,
    Diff(DiffQuery) -> PlanDiff,
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONVNET: &str = include_str!("../../../static/examples/convnet-training.json");

    #[test]
    fn each_query_gets_the_answer_of_its_name_and_reads_back_from_json() {
        let s = Session::load(CONVNET.as_bytes(), "convnet.json").unwrap();
        let outcome = s.plan(&Scenario::default()).unwrap();
        let queries = [
            Query::Plan(PlanQuery(Scenario::default())),
            Query::Fit(FitQuery {
                scenario: Scenario::default(),
                target: Target::Minimize,
                max_candidates: None,
            }),
            Query::Sweep(SweepQuery {
                scenario: Scenario::default(),
                points: 4,
                exhaustive_most: 0,
            }),
            Query::Advise(AdviseQuery(Scenario::default())),
            Query::Spaces(SpacesQuery {
                scenario: Scenario::default(),
                most: None,
            }),
            Query::Check(CheckQuery {
                scenario: Scenario::default(),
                plan: Some(("plan.json".into(), Box::new(s.report(&outcome)))),
            }),
            Query::Convert(ConvertQuery {
                ordered: None,
                to: Written::Minimalloc,
                with_plan: Some(Scenario::default()),
            }),
            Query::Diff(DiffQuery {
                before: Scenario::default(),
                after: Scenario {
                    strategy: memplan_core::Strategy::Bump.into(),
                    ..Scenario::default()
                },
            }),
        ];
        for query in queries {
            let text = serde_json::to_string(&query).unwrap();
            assert_eq!(serde_json::from_str::<Query>(&text).unwrap(), query);
            let answer = s.answer(&query, &mut Control::default()).unwrap();
            let named = matches!(
                (&query, &answer),
                (Query::Plan(_), Answer::Plan(_))
                    | (Query::Fit(_), Answer::Fit(_))
                    | (Query::Sweep(_), Answer::Sweep(_))
                    | (Query::Advise(_), Answer::Advise(_))
                    | (Query::Spaces(_), Answer::Spaces(_))
                    | (Query::Check(_), Answer::Check(_))
                    | (Query::Convert(_), Answer::Convert(_))
                    | (Query::Diff(_), Answer::Diff(_))
            );
            assert!(named, "{query:?} -> {answer:?}");
        }
        // A plan is the plan of one call; the enum and the typed question agree.
        let plan = PlanQuery(Scenario::default());
        let report = plan.ask(&s, &mut Control::default()).unwrap();
        assert_eq!(report, s.report(&outcome));
        let asked = s
            .answer(&Query::Plan(plan), &mut Control::default())
            .unwrap();
        assert_eq!(asked, Answer::Plan(Box::new(report)));
        // A fits question needs a device class.
        let fits = FitsQuery {
            scenario: Scenario::default(),
            param: "B".into(),
            lo: 1,
            hi: Some(8),
        };
        assert!(fits.ask(&s, &mut Control::default()).is_err());
        // A plan of the dump checks; a dump with no offsets of its own has none to check.
        let check = |plan| CheckQuery {
            scenario: Scenario::default(),
            plan,
        };
        let plan = ("plan.json".to_string(), Box::new(s.report(&outcome)));
        let checked = check(Some(plan)).ask(&s, &mut Control::default()).unwrap();
        assert!(checked.violations.is_empty());
        assert!(check(None).ask(&s, &mut Control::default()).is_err());
    }
}
