//! What the page draws, from the engine. Pure: no DOM, so it runs (and is tested) natively, in
//! the page and in the worker alike.
//!
//! A [`Local`] is a session the page holds itself (the bundled examples) with its current
//! outcome; dumps the user brings live in the worker, which sends the page only an [`Analysis`]:
//! the summary figures and the view model, what the page draws. Exports that need more (the
//! whole report, the CSV) are derived on demand where the session lives ([`export`]).

use memplan_core::StrategyChoice;
use memplan_engine::{EngineError, Outcome, Scenario, Session};
use memplan_formats::report::PlanSummary;
use memplan_render::ViewModel;
use serde::{Deserialize, Serialize};

/// A session planned on the page, and its current outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Local {
    pub session: Session,
    pub outcome: Outcome,
}

impl Local {
    /// Loads and plans `bytes` on the page (small inputs: the bundled examples).
    pub fn load(bytes: &[u8], source: &str, scenario: &Scenario) -> Result<Local, EngineError> {
        let session = Session::load(bytes, source)?;
        let outcome = session.plan(scenario)?;
        Ok(Local { session, outcome })
    }

    /// The same session under another scenario.
    pub fn replan(&self, scenario: &Scenario) -> Result<Local, EngineError> {
        Ok(Local {
            session: self.session.clone(),
            outcome: self.session.plan(scenario)?,
        })
    }

    pub fn analysis(&self) -> Analysis {
        Analysis::of(&self.session, &self.outcome)
    }
}

/// What the page shows of a planned session: serializable, so the worker can hand it over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub source: String,
    /// The format's name.
    pub format: String,
    pub tensor_count: usize,
    pub step_count: usize,
    pub scenario: Scenario,
    pub summary: PlanSummary,
    pub model: ViewModel,
    /// What the import could not carry over exactly.
    pub warnings: Vec<String>,
}

impl Analysis {
    pub fn of(session: &Session, outcome: &Outcome) -> Analysis {
        Analysis {
            source: session.source.clone(),
            format: session.format.name().to_string(),
            tensor_count: session.graph.tensors.len(),
            step_count: session.graph.steps.len(),
            scenario: outcome.scenario.clone(),
            summary: session.report(outcome).summary,
            model: session.view_model(outcome),
            warnings: session.warnings.clone(),
        }
    }

    pub fn strategy(&self) -> StrategyChoice {
        self.scenario.strategy
    }
}

/// What the page can download besides the drawings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportKind {
    /// The plan report, as `memplan plan --json` prints it.
    PlanJson,
    /// The plan as minimalloc CSV, as `memplan convert --to minimalloc --with-plan` writes it.
    MinimallocCsv,
}

/// A file to download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Export {
    pub file_name: String,
    pub mime: String,
    pub text: String,
}

/// Makes an export of a planned session: the same bytes the CLI writes, or its refusal.
pub fn export(
    session: &Session,
    outcome: &Outcome,
    kind: ExportKind,
) -> Result<Export, EngineError> {
    let name = |suffix: &str| crate::export::file_name(&session.source, suffix);
    Ok(match kind {
        ExportKind::PlanJson => Export {
            file_name: name("plan.json"),
            mime: "application/json".into(),
            text: report_json(session, outcome),
        },
        ExportKind::MinimallocCsv => Export {
            file_name: name("plan.csv"),
            mime: "text/csv".into(),
            text: session.minimalloc_csv(Some(outcome))?,
        },
    })
}

/// The plan report as pretty JSON, exactly as `memplan plan --json` prints it.
fn report_json(session: &Session, outcome: &Outcome) -> String {
    let mut text =
        serde_json::to_string_pretty(&session.report(outcome)).expect("reports serialize");
    text.push('\n');
    text
}

/// The plan report of a bundled example with the default scenario: the bytes native and wasm
/// builds must both produce.
pub fn example_report_json(example: &crate::examples::Example) -> String {
    let local = Local::load(example.text.as_bytes(), example.name, &Scenario::default())
        .expect("bundled examples load");
    report_json(&local.session, &local.outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::examples::EXAMPLES;
    use memplan_core::Strategy;

    #[test]
    fn every_example_loads_and_plans_validly() {
        for e in EXAMPLES {
            let a = Local::load(e.text.as_bytes(), e.name, &Scenario::default())
                .unwrap()
                .analysis();
            assert!(a.summary.valid, "{}: {:?}", e.name, a.summary.violations);
            assert!(a.summary.footprint_bytes >= a.summary.lower_bound_bytes);
        }
    }

    #[test]
    fn an_analysis_survives_the_trip_from_the_worker() {
        let scenario = Scenario {
            strategy: Strategy::Tlsf.into(),
            ..Scenario::default()
        };
        let a = Local::load(EXAMPLES[1].text.as_bytes(), "decode", &scenario)
            .unwrap()
            .analysis();
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Analysis>(&text).unwrap(), a);
    }

    #[test]
    fn examples_plan_to_the_golden_reports() {
        for e in EXAMPLES {
            let path = format!(
                "{}/../tests/golden/{}.plan.json",
                env!("CARGO_MANIFEST_DIR"),
                e.name
            );
            let golden = std::fs::read_to_string(path).unwrap();
            assert_eq!(
                example_report_json(e),
                golden,
                "{}: regenerate with `memplan plan --json`",
                e.name
            );
        }
    }

    #[test]
    fn errors_name_the_source() {
        let bad = br#"{"memplan": 1, "tensors": [], "steps": [{"id": "s", "writes": []}]}"#;
        assert_eq!(
            Local::load(bad, "bad.json", &Scenario::default())
                .unwrap_err()
                .to_string(),
            "bad.json: step `s` writes nothing"
        );
    }
}
