//! From bytes to everything the views show. Pure: no DOM, so it runs (and is tested) natively,
//! in the page and in the worker alike.
//!
//! Loading ([`Session::load`]) is separate from planning ([`Session::plan`]): changing the
//! strategy re-plans without re-reading the input. An [`Analysis`] holds only what the page
//! shows and exports, and is serializable, so the worker can hand it to the page.

use memplan_core::graph::ResolvedGraph;
use memplan_core::{Graph, Liveness, PlanOptions, Strategy, analyze, plan};
use memplan_formats::report::PlanReport;
use memplan_formats::{Format, load, minimalloc};
use memplan_render::ViewModel;
use serde::{Deserialize, Serialize};

/// A loaded dump, ready to plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The file, URL or example it came from.
    pub source: String,
    pub format: Format,
    pub graph: Graph,
    pub resolved: ResolvedGraph,
    pub liveness: Liveness,
}

/// A session planned with one strategy: what the page shows and exports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub source: String,
    /// The format's name.
    pub format: String,
    pub tensor_count: usize,
    pub step_count: usize,
    pub strategy: Strategy,
    pub report: PlanReport,
    pub model: ViewModel,
    /// The plan as minimalloc CSV (offsets in each device's memory).
    pub minimalloc_csv: String,
}

impl Session {
    /// Reads `bytes` (any format memplan reads). The error is the message to show: what went
    /// wrong and where.
    pub fn load(bytes: &[u8], source: &str) -> Result<Session, String> {
        let loaded = load(bytes, source).map_err(|e| format!("{source}: {e}"))?;
        let resolved = loaded
            .graph
            .resolve()
            .map_err(|e| format!("{source}: {e}"))?;
        let liveness = analyze(&loaded.graph, &resolved);
        Ok(Session {
            source: source.to_string(),
            format: loaded.format,
            graph: loaded.graph,
            resolved,
            liveness,
        })
    }

    /// Plans the session with `strategy` (default options otherwise).
    pub fn plan(&self, strategy: Strategy) -> Result<Analysis, String> {
        let options = PlanOptions {
            strategy,
            ..PlanOptions::default()
        };
        let problem = &self.liveness.problem;
        let plan = plan(problem, &options).map_err(|e| format!("{}: {e}", self.source))?;
        Ok(Analysis {
            source: self.source.clone(),
            format: self.format.name().to_string(),
            tensor_count: self.graph.tensors.len(),
            step_count: self.graph.steps.len(),
            strategy,
            report: PlanReport::new(problem, &plan),
            model: ViewModel::new(&self.graph, &self.resolved, &self.liveness, &plan),
            minimalloc_csv: minimalloc::write(problem, Some(&plan.device_offsets(problem))),
        })
    }
}

/// Loads and plans in one call.
pub fn analyze_bytes(bytes: &[u8], source: &str, strategy: Strategy) -> Result<Analysis, String> {
    Session::load(bytes, source)?.plan(strategy)
}

/// The plan report of a bundled example with the default options, as `memplan plan --json`
/// prints it: the bytes native and wasm builds must both produce.
pub fn example_report_json(example: &crate::examples::Example) -> String {
    let a = analyze_bytes(example.text.as_bytes(), example.name, Strategy::Best)
        .expect("bundled examples load");
    let mut text = serde_json::to_string_pretty(&a.report).expect("reports serialize");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::examples::EXAMPLES;

    #[test]
    fn every_example_loads_and_plans_validly() {
        for e in EXAMPLES {
            let a = analyze_bytes(e.text.as_bytes(), e.name, Strategy::Best).unwrap();
            assert!(a.report.valid, "{}: {:?}", e.name, a.report.violations);
            assert!(a.report.peak_bytes >= a.report.lower_bound_bytes);
            assert_eq!(a.model.buffers.len(), a.report.placements.len());
        }
    }

    #[test]
    fn an_analysis_survives_the_trip_from_the_worker() {
        let a = analyze_bytes(EXAMPLES[1].text.as_bytes(), "decode", Strategy::Tlsf).unwrap();
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
            analyze_bytes(bad, "bad.json", Strategy::Best).unwrap_err(),
            "bad.json: step `s` writes nothing"
        );
    }
}
