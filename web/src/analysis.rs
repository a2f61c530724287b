//! From bytes to everything the views show, in one call. Pure: no DOM, so it runs (and is
//! tested) natively and in wasm alike.

use memplan_core::{PlanOptions, Strategy, liveness_of, plan};
use memplan_formats::report::PlanReport;
use memplan_formats::{Format, load};

/// A loaded and planned dump.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The file or example it came from.
    pub source: String,
    /// The dump's own name, if it gives one.
    pub title: String,
    pub format: Format,
    pub tensor_count: usize,
    pub step_count: usize,
    pub loop_count: usize,
    pub device_count: usize,
    pub report: PlanReport,
}

/// Loads `bytes` (any format memplan reads) and plans them with `strategy`.
/// The error is the message to show: what went wrong and where.
pub fn analyze(bytes: &[u8], source: &str, strategy: Strategy) -> Result<Analysis, String> {
    let loaded = load(bytes, source).map_err(|e| format!("{source}: {e}"))?;
    let liveness = liveness_of(&loaded.graph).map_err(|e| format!("{source}: {e}"))?;
    let options = PlanOptions {
        strategy,
        ..PlanOptions::default()
    };
    let plan = plan(&liveness.problem, &options).map_err(|e| format!("{source}: {e}"))?;
    let g = &loaded.graph;
    Ok(Analysis {
        source: source.to_string(),
        title: g.name.clone(),
        format: loaded.format,
        tensor_count: g.tensors.len(),
        step_count: g.steps.len(),
        loop_count: g.loops.len(),
        device_count: g.device_ids().len(),
        report: PlanReport::new(&liveness.problem, &plan),
    })
}

/// The plan report of a bundled example with the default options, as `memplan plan --json`
/// prints it: the bytes native and wasm builds must both produce.
pub fn example_report_json(example: &crate::examples::Example) -> String {
    let a = analyze(example.text.as_bytes(), example.name, Strategy::Best)
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
            let a = analyze(e.text.as_bytes(), e.name, Strategy::Best).unwrap();
            assert!(a.report.valid, "{}: {:?}", e.name, a.report.violations);
            assert!(a.tensor_count > 0 && a.step_count > 0);
            assert!(a.report.peak_bytes >= a.report.lower_bound_bytes);
        }
    }

    #[test]
    fn examples_plan_to_the_golden_reports() {
        for e in EXAMPLES {
            let golden = std::fs::read_to_string(format!(
                "{}/../tests/golden/{}.plan.json",
                env!("CARGO_MANIFEST_DIR"),
                e.name
            ))
            .unwrap();
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
        let e = analyze(
            b"{\"memplan\": 1, \"tensors\": [], \"steps\": [{\"id\": \"s\", \"writes\": []}]}",
            "bad.json",
            Strategy::Best,
        )
        .unwrap_err();
        assert_eq!(e, "bad.json: step `s` writes nothing");
    }
}
