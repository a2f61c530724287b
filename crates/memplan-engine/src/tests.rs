//! The engine end to end: bytes in, every derived view out, and the refusals the CLI and the
//! page share.

use super::*;
use memplan_core::Strategy;
use memplan_formats::report::PlanReport;

const MLP: &str = include_str!("../../../static/examples/mlp-training.json");
const DECODE: &str = include_str!("../../../static/examples/transformer-decode.json");

fn session(text: &str) -> Session {
    Session::load(text.as_bytes(), "test").unwrap()
}

#[test]
fn the_examples_plan_validly_and_every_view_agrees_with_the_plan() {
    for text in [MLP, DECODE] {
        let s = session(text);
        let outcome = s.plan(&Scenario::default()).unwrap();
        let report = s.report(&outcome);
        assert!(report.summary.valid, "{:?}", report.summary.violations);
        assert!(report.summary.footprint_bytes >= report.summary.lower_bound_bytes);
        let model = s.view_model(&outcome);
        assert_eq!(model.buffers.len(), report.placements.len());
        assert_eq!(
            model.devices.iter().map(|d| d.footprint_bytes).sum::<u64>(),
            report.summary.footprint_bytes
        );
    }
}

#[test]
fn a_scenario_is_typed_json_with_defaults() {
    let s: Scenario = serde_json::from_str(r#"{"strategy": "tlsf"}"#).unwrap();
    assert_eq!(
        s,
        Scenario {
            strategy: Strategy::Tlsf.into(),
            ..Scenario::default()
        }
    );
    let text = serde_json::to_string(&Scenario::default()).unwrap();
    assert_eq!(
        text,
        r#"{"strategy":"best","precision_classes":true,"pool_cap":null,"work_limit":null}"#
    );
    assert!(serde_json::from_str::<Scenario>(r#"{"strategy": "magic"}"#).is_err());
    assert!(serde_json::from_str::<Scenario>(r#"{"flips": []}"#).is_err());
}

#[test]
fn pools_are_uncapped_by_default_and_a_cap_falls_back_and_says_what_it_cost() {
    let s = session(DECODE);
    let free = s.plan(&Scenario::default()).unwrap();
    assert!(free.plan.devices.iter().all(|d| d.cap_fallback.is_none()));
    let capped = s
        .plan(&Scenario {
            pool_cap: Some(memplan_core::U32_OFFSET_POOL_CAP),
            ..Scenario::default()
        })
        .unwrap();
    assert!(capped.plan.is_valid());
    let report = s.report(&capped);
    let s = &report.summary;
    assert!(
        s.devices
            .iter()
            .all(|d| d.pools.iter().all(|p| p.bytes <= 4 << 30))
    );
    assert_eq!(s.pool_cap, Some(4 << 30));
}

#[test]
fn the_minimalloc_export_of_a_plan_passes_its_own_check() {
    // Regression: pools laid end to end used to pass the 4 GiB cap and fail `check`.
    let s = session(DECODE);
    let outcome = s.plan(&Scenario::default()).unwrap();
    let csv = s.minimalloc_csv(Some(&outcome)).unwrap();
    let again = Session::load(csv.as_bytes(), "decode.csv").unwrap();
    let checked = again.check_given(&Scenario::default()).unwrap();
    assert!(checked.violations.is_empty(), "{:?}", checked.violations);
    assert_eq!(checked.footprint_bytes, outcome.plan.footprint_bytes());
}

#[test]
fn minimalloc_csv_of_several_devices_is_refused() {
    let text = r#"{"memplan": 1, "devices": [{"id": "a"}, {"id": "b"}],
        "tensors": [{"id": "x", "bytes": 8, "device": "a"}, {"id": "y", "bytes": 8, "device": "b"}],
        "steps": [{"id": "s", "writes": ["x"], "device": "a"}, {"id": "t", "writes": ["y"], "device": "b"}]}"#;
    let s = session(text);
    let e = s.minimalloc_csv(None).unwrap_err();
    assert!(
        matches!(e, EngineError::MultiDevice { devices: 2, .. }),
        "{e}"
    );
}

#[test]
fn a_dump_whose_buffer_passes_its_own_pool_cap_does_not_load() {
    let text = r#"{"memplan": 1, "pool_cap": 1000,
        "tensors": [{"id": "big", "bytes": 1001}], "steps": [{"id": "s", "writes": ["big"]}]}"#;
    let e = Session::load(text.as_bytes(), "capped.json").unwrap_err();
    assert_eq!(
        e.to_string(),
        "capped.json: buffer `big` occupies 1001 bytes, more than the pool cap of 1000 bytes"
    );
}

#[test]
fn sizes_that_add_up_past_64_bits_do_not_load() {
    let text = r#"{"memplan": 1, "devices": [{"id": "a"}, {"id": "b"}],
        "tensors": [{"id": "x", "bytes": 9223372036854775808, "device": "a"},
                    {"id": "y", "bytes": 9223372036854775808, "device": "b"}],
        "steps": [{"id": "s", "writes": ["x"], "device": "a"}, {"id": "t", "writes": ["y"], "device": "b"}]}"#;
    let e = Session::load(text.as_bytes(), "huge.json").unwrap_err();
    assert!(e.to_string().contains("more than 2^64 bytes"), "{e}");
}

/// The example's report, after `edit`, checked against the example.
fn check_tampered(edit: impl FnOnce(&mut PlanReport)) -> Result<Checked, FormatError> {
    let s = session(MLP);
    let mut report = s.report(&s.plan(&Scenario::default()).unwrap());
    edit(&mut report);
    s.check_report(&report, &Scenario::default())
}

#[test]
fn check_refuses_a_tampered_report() {
    assert!(check_tampered(|_| ()).unwrap().violations.is_empty());
    let refused = |edit: fn(&mut PlanReport), expect: &str| {
        let e = check_tampered(edit).unwrap_err().to_string();
        assert!(e.contains(expect), "{e} does not say {expect}");
    };
    refused(
        |r| {
            let twice = r.placements[0].clone();
            r.placements.push(twice);
        },
        "is placed twice",
    );
    refused(
        |r| r.placements[0].tensor = "nope".into(),
        "tensor `nope` has no buffer",
    );
    refused(|r| r.placements[1].device = "gpu9".into(), "not `gpu9`");
    refused(|r| r.placements[2].size += 1, "bytes, not");
    refused(|r| r.placements[3].live[1] += 1, "lives on");
    refused(
        |r| {
            r.placements.remove(0);
        },
        "has no placement",
    );
}

#[test]
fn a_work_limit_is_deterministic() {
    let s = Session::load(
        include_bytes!("../../../tests/data/minimalloc/A.1048576.csv"),
        "A.csv",
    )
    .unwrap();
    let scenario = Scenario {
        strategy: Strategy::Search.into(),
        work_limit: Some(200_000),
        ..Scenario::default()
    };
    let a = s.plan(&scenario).unwrap();
    let b = s.plan(&scenario).unwrap();
    assert_eq!(a, b);
    let more = s
        .plan(&Scenario {
            work_limit: Some(20_000_000),
            ..scenario.clone()
        })
        .unwrap();
    assert!(more.plan.footprint_bytes() <= a.plan.footprint_bytes());
}
