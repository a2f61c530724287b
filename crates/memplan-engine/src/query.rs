//! One typed question about a loaded dump, and its typed answer: what the CLI's commands ask
//! and what the page's worker asks, answered by [`Session::answer`] the same way for both. A
//! plan or a sweep the page asks for runs as a job in steps instead ([`crate::job::PlanJob`],
//! [`crate::SweepJob`]); their last step is the answer this gives.

use memplan_core::Control;
use memplan_core::remat::Target;
use memplan_formats::report::PlanReport;
use serde::{Deserialize, Serialize};

use crate::answers::{FitAnswer, FitsAnswer, SpacesAnswer, SweepAnswer};
use crate::diff::{PlanDiff, diff};
use crate::{EngineError, Scenario, Session};

/// A question about the loaded dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Query {
    /// Its plan under a scenario: the report `memplan plan --json` prints.
    Plan(Scenario),
    /// Flips chosen so the footprint fits `target`, scoring at most `max_candidates`.
    Fit {
        scenario: Scenario,
        target: Target,
        max_candidates: Option<usize>,
    },
    /// `fit` at `points` targets from the least footprint to the baseline, with the exhaustive
    /// optimum where there are at most `exhaustive_most` candidates.
    Sweep {
        scenario: Scenario,
        points: usize,
        exhaustive_most: usize,
    },
    /// The largest value of `param` in `lo..=hi` whose plan fits the scenario's device class.
    Fits {
        scenario: Scenario,
        param: String,
        lo: u64,
        hi: u64,
    },
    /// Each slot's memory space, access and host transfer, and each output's source.
    Spaces(Scenario),
    /// Whether a plan from outside holds: `plan` (a report, named by its source), or without
    /// one the offsets the dump gives itself (a minimalloc CSV's), under the scenario's
    /// precision classes and pool cap.
    Check {
        scenario: Scenario,
        plan: Option<(String, Box<PlanReport>)>,
    },
    /// The dump written as another format: memplan JSON, or minimalloc CSV with the plan's
    /// offsets under `with_plan`'s scenario.
    Convert {
        to: Written,
        with_plan: Option<Scenario>,
    },
    /// The dump's plan under `before` against its plan under `after`, tensor by tensor (two
    /// dumps are compared by [`crate::diff::diff`] over their reports).
    Diff { before: Scenario, after: Scenario },
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
}

/// The answer to a [`Query`], of the same name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Plan(Box<PlanReport>),
    Fit(FitAnswer),
    Sweep(SweepAnswer),
    Fits(FitsAnswer),
    Spaces(SpacesAnswer),
    Check(CheckAnswer),
    /// The dump in the format asked for.
    Text(String),
    Diff(Box<PlanDiff>),
}

impl Session {
    /// Answers `query`. `control` is lent to the plan a `Plan` query makes (a stop condition,
    /// progress, earlier decodes); the other queries plan many times and run to their end.
    pub fn answer(&self, query: &Query, control: &mut Control) -> Result<Answer, EngineError> {
        Ok(match query {
            Query::Plan(scenario) => {
                let outcome = self.plan_with(scenario, control)?;
                Answer::Plan(Box::new(self.report(&outcome)))
            }
            Query::Fit {
                scenario,
                target,
                max_candidates,
            } => {
                let fit = self.fit(scenario, *target, *max_candidates)?;
                Answer::Fit(FitAnswer::of(self, *target, &fit))
            }
            Query::Sweep {
                scenario,
                points,
                exhaustive_most,
            } => Answer::Sweep(SweepAnswer::of(
                self,
                &self.sweep(scenario, *points, *exhaustive_most)?,
            )),
            Query::Fits {
                scenario,
                param,
                lo,
                hi,
            } => {
                let fits = self.largest_fitting(scenario, param, *lo, *hi)?;
                let class = (scenario.device_class.as_ref()).map_or("", |d| d.class.as_str());
                Answer::Fits(FitsAnswer::of(class, (*lo, *hi), &fits))
            }
            Query::Spaces(scenario) => {
                Answer::Spaces(SpacesAnswer::of(self, &self.spaces(scenario)?))
            }
            Query::Check { scenario, plan } => {
                let checked = match plan {
                    Some((source, report)) => {
                        (self.check_report(report, scenario)).map_err(|error| {
                            EngineError::Format {
                                input: source.clone(),
                                error,
                            }
                        })?
                    }
                    None => self.check_given(scenario)?,
                };
                Answer::Check(CheckAnswer {
                    buffers: checked.buffers,
                    footprint_bytes: checked.footprint_bytes,
                    violations: checked.violations.iter().map(ToString::to_string).collect(),
                })
            }
            Query::Diff { before, after } => {
                let report = |s: &Scenario| self.plan(s).map(|o| self.report(&o));
                Answer::Diff(Box::new(diff(&report(before)?, &report(after)?)))
            }
            Query::Convert { to, with_plan } => Answer::Text(match to {
                Written::Json => memplan_formats::json::write(&self.graph),
                Written::Minimalloc => {
                    let outcome = with_plan.as_ref().map(|s| self.plan(s)).transpose()?;
                    self.minimalloc_csv(outcome.as_ref())?
                }
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONVNET: &str = include_str!("../../../static/examples/convnet-training.json");

    #[test]
    fn each_query_gets_the_answer_of_its_name_and_reads_back_from_json() {
        let s = Session::load(CONVNET.as_bytes(), "convnet.json").unwrap();
        let queries = [
            Query::Plan(Scenario::default()),
            Query::Fit {
                scenario: Scenario::default(),
                target: Target::Minimize,
                max_candidates: None,
            },
            Query::Sweep {
                scenario: Scenario::default(),
                points: 4,
                exhaustive_most: 0,
            },
            Query::Spaces(Scenario::default()),
            Query::Check {
                scenario: Scenario::default(),
                plan: Some((
                    "plan.json".into(),
                    Box::new(s.report(&s.plan(&Scenario::default()).unwrap())),
                )),
            },
            Query::Convert {
                to: Written::Minimalloc,
                with_plan: Some(Scenario::default()),
            },
            Query::Diff {
                before: Scenario::default(),
                after: Scenario {
                    strategy: memplan_core::Strategy::Bump.into(),
                    ..Scenario::default()
                },
            },
        ];
        for query in queries {
            let text = serde_json::to_string(&query).unwrap();
            assert_eq!(serde_json::from_str::<Query>(&text).unwrap(), query);
            let answer = s.answer(&query, &mut Control::default()).unwrap();
            let named = matches!(
                (&query, &answer),
                (Query::Plan(_), Answer::Plan(_))
                    | (Query::Fit { .. }, Answer::Fit(_))
                    | (Query::Sweep { .. }, Answer::Sweep(_))
                    | (Query::Spaces(_), Answer::Spaces(_))
                    | (Query::Check { .. }, Answer::Check(_))
                    | (Query::Convert { .. }, Answer::Text(_))
                    | (Query::Diff { .. }, Answer::Diff(_))
            );
            assert!(named, "{query:?} -> {answer:?}");
        }
        // A plan is the plan of one call, and a fits query needs a device class.
        let Answer::Plan(report) = s
            .answer(&Query::Plan(Scenario::default()), &mut Control::default())
            .unwrap()
        else {
            panic!("a plan")
        };
        let outcome = s.plan(&Scenario::default()).unwrap();
        assert_eq!(*report, s.report(&outcome));
        let fits = Query::Fits {
            scenario: Scenario::default(),
            param: "B".into(),
            lo: 1,
            hi: 8,
        };
        assert!(s.answer(&fits, &mut Control::default()).is_err());
        // A plan of the dump checks; without a plan, a dump with no offsets of its own has none
        // to check.
        let check = |plan| Query::Check {
            scenario: Scenario::default(),
            plan,
        };
        let plan = ("plan.json".to_string(), Box::new(s.report(&outcome)));
        let answer = s.answer(&check(Some(plan)), &mut Control::default());
        assert!(matches!(answer, Ok(Answer::Check(c)) if c.violations.is_empty()));
        assert!(s.answer(&check(None), &mut Control::default()).is_err());
    }
}
