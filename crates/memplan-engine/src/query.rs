//! One typed question about a loaded dump, and its typed answer: what the CLI's commands ask
//! and what the page's worker asks, answered by [`Session::answer`] the same way for both. A
//! plan or a sweep the page asks for runs as a job in steps instead ([`crate::job::PlanJob`],
//! [`crate::SweepJob`]); their last step is the answer this gives.

use memplan_core::Control;
use memplan_core::remat::Target;
use memplan_formats::report::PlanReport;
use serde::{Deserialize, Serialize};

use crate::answers::{FitAnswer, FitsAnswer, SpacesAnswer, SweepAnswer};
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
    }
}
