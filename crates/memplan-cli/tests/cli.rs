//! The `memplan` binary end to end: what it prints, its exit codes, and that its files round-trip.

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> String {
    root()
        .join("static/examples")
        .join(name)
        .display()
        .to_string()
}

fn memplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn temp(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memplan-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn validate_prints_counts() {
    let o = memplan(&["validate", &example("mlp-training.json")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("valid memplan JSON dump: 38 tensors, 23 steps, 0 loops, 1 devices, 38 buffers over 23 positions"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn validate_names_the_problem_and_exits_1() {
    let bad = temp(
        "bad.json",
        r#"{"memplan": 1, "tensors": [{"id": "a", "bytes": 1}], "steps": [{"id": "s", "writes": ["a", "b"]}]}"#,
    );
    let o = memplan(&["validate", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).ends_with("bad.json: step `s` refers to tensor `b`, which does not exist\n"),
        "{}",
        stderr(&o)
    );
    let csv = temp("bad.csv", "id,lower,upper,size\n0,5,5,10\n");
    let o = memplan(&["validate", csv.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("CSV line 2: buffer `0`: lower 5 is not below upper 5"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn plan_json_has_the_documented_fields_and_a_checked_plan() {
    let o = memplan(&[
        "plan",
        &example("transformer-decode.json"),
        "--json",
        "--strategy",
        "first-fit",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["strategy"], "first-fit");
    assert_eq!(r["valid"], true);
    assert!(r["footprint_bytes"].as_u64().unwrap() >= r["lower_bound_bytes"].as_u64().unwrap());
    assert!(r["pool_cap"].is_null(), "no cap by default: 64-bit offsets");
    let d = &r["devices"][0];
    for field in [
        "device",
        "footprint_bytes",
        "lower_bound_bytes",
        "arena_bytes",
        "always_live_bytes",
        "static_bytes",
        "pools",
    ] {
        assert!(!d[field].is_null(), "devices[0].{field}");
    }
    // Uncapped: one arena pool and one static pool.
    assert_eq!(d["pools"].as_array().unwrap().len(), 2);
    let p = &r["placements"][0];
    for field in ["tensor", "device", "offset", "size", "live"] {
        assert!(!p[field].is_null(), "placements[0].{field}");
    }
    assert_eq!(p["live"].as_array().unwrap().len(), 2);
}

#[test]
fn check_accepts_a_plan_and_rejects_a_tampered_one() {
    let dump = example("mlp-training.json");
    let o = memplan(&["plan", &dump, "--json"]);
    let report = stdout(&o);
    let good = temp("good.plan.json", &report);
    let o = memplan(&["check", &dump, "--plan", good.to_str().unwrap()]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));

    // Move the first arena buffer onto the one that conflicts with it.
    let mut r: serde_json::Value = serde_json::from_str(&report).unwrap();
    let placements = r["placements"].as_array_mut().unwrap();
    let live = |p: &serde_json::Value| {
        (
            p["live"][0].as_u64().unwrap(),
            p["live"][1].as_u64().unwrap(),
        )
    };
    let (a, b) = (0..placements.len())
        .flat_map(|a| (0..placements.len()).map(move |b| (a, b)))
        .find(|&(a, b)| {
            let (pa, pb) = (&placements[a], &placements[b]);
            a != b
                && pa["pool"] == pb["pool"]
                && pa["offset"] != pb["offset"]
                && live(pa).0 <= live(pb).1
                && live(pb).0 <= live(pa).1
        })
        .unwrap();
    placements[b]["offset"] = placements[a]["offset"].clone();
    let bad = temp("bad.plan.json", &r.to_string());
    let o = memplan(&["check", &dump, "--plan", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let said = stderr(&o);
    assert!(
        said.starts_with("memplan: ") && said.lines().next().unwrap().contains("invalid plan"),
        "{said}"
    );
    assert!(said.contains("conflict but share bytes"), "{said}");
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

#[test]
fn convert_round_trips_json_and_minimalloc() {
    let dump = example("mlp-training.json");
    let o = memplan(&["convert", &dump, "--to", "json"]);
    assert!(o.status.success());
    let again = temp("again.json", &stdout(&o));
    let o2 = memplan(&["convert", again.to_str().unwrap(), "--to", "json"]);
    assert_eq!(stdout(&o), stdout(&o2), "canonical JSON is a fixed point");

    let o = memplan(&["convert", &dump, "--to", "minimalloc", "--with-plan"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = temp("plan.csv", &stdout(&o));
    assert!(stdout(&o).starts_with("id,lower,upper,size,alignment,offset\n"));
    let o = memplan(&["check", csv.to_str().unwrap()]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn plan_prints_a_human_table() {
    let o = memplan(&["plan", &example("mlp-training.json")]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(
        text.contains("checker: valid") && text.contains("MiB") && text.contains("gpu0"),
        "{text}"
    );
}

#[test]
fn a_value_outside_a_closed_set_is_a_usage_error() {
    let dump = example("mlp-training.json");
    for (args, value) in [
        (vec!["plan", &dump, "--strategy", "magic"], "magic"),
        (
            vec!["render", &dump, "--view", "arena", "--sort", "up"],
            "up",
        ),
        (
            vec!["render", &dump, "--view", "arena", "--color-by", "red"],
            "red",
        ),
        (
            vec!["render", &dump, "--view", "arena", "--window", "5,1,0,1"],
            "5,1,0,1",
        ),
    ] {
        let o = memplan(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(value), "{}", stderr(&o));
    }
}

#[test]
fn render_draws_the_window_and_search_the_page_shows() {
    let dump = example("mlp-training.json");
    let whole = stdout(&memplan(&["render", &dump, "--view", "timeline"]));
    let o = memplan(&[
        "render",
        &dump,
        "--view",
        "timeline",
        "--search",
        "grad",
        "--sort",
        "size",
        "--color-by",
        "dtype",
        "--window",
        "0,5,0,10",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let part = stdout(&o);
    assert!(part.starts_with("<svg") && part != whole);
    let o = memplan(&["render", &dump, "--view", "arena", "--device-id", "tpu7"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no device `tpu7` (devices: gpu0)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn errors_stay_on_one_line_whatever_the_ids_hold() {
    let bad = temp(
        "newline.json",
        r#"{"memplan": 1, "tensors": [], "steps": [{"id": "s", "writes": ["a\nb\u001b[31m"]}]}"#,
    );
    let o = memplan(&["validate", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(r"`a\nb\u{1b}[31m`"), "{err}");
}

#[test]
fn a_pool_cap_falls_back_and_says_what_it_costs() {
    let file = root().join("tests/data/minimalloc/A.1048576.csv");
    let o = memplan(&[
        "plan",
        file.to_str().unwrap(),
        "--strategy",
        "first-fit",
        "--pool-cap",
        "1048576",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("bump-packed into pools"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn validate_refuses_what_plan_would_refuse() {
    let over = temp(
        "over.json",
        r#"{"memplan": 1, "pool_cap": 100, "tensors": [{"id": "a", "bytes": 101}], "steps": [{"id": "s", "writes": ["a"]}]}"#,
    );
    let o = memplan(&["validate", over.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("more than the pool cap of 100 bytes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn minimalloc_export_of_several_devices_is_refused_with_a_reason() {
    let two = temp(
        "two.json",
        r#"{"memplan": 1, "devices": [{"id": "a"}, {"id": "b"}], "tensors": [{"id": "x", "bytes": 8, "device": "b"}], "steps": [{"id": "s", "writes": ["x"], "device": "b"}]}"#,
    );
    let o = memplan(&["convert", two.to_str().unwrap(), "--to", "minimalloc"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("this dump has 2 devices"),
        "{}",
        stderr(&o)
    );
}

/// `memplan plan` of a minimalloc file of the corpus with `search`, `extra` flags and `--json`:
/// its report.
fn search_report(name: &str, extra: &[&str]) -> serde_json::Value {
    let file = root().join("tests/data/minimalloc").join(name);
    let mut args = vec![
        "plan",
        file.to_str().unwrap(),
        "--strategy",
        "search",
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = memplan(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn a_time_limit_keeps_the_best_layout_so_far() {
    let r = search_report("A.1048576.csv", &["--time-limit", "0"]);
    assert_eq!(r["valid"], true);
    assert_eq!(r["devices"][0]["stopped"], true);
}

#[test]
fn fits_answers_the_largest_batch_with_both_witnesses() {
    let dump = example("decoder-serving.json");
    let args = [
        "fits",
        &dump,
        "--device-class",
        "l4-24gb",
        "--util",
        "0.9",
        "--param",
        "B=1..512",
        "--set",
        "S=4096",
        "--json",
    ];
    let o = memplan(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let largest = r["largest"].as_u64().unwrap();
    let usable = r["usable_bytes"].as_u64().unwrap();
    assert!(r["footprint_at_largest"].as_u64().unwrap() <= usable);
    assert!(r["footprint_at_next"].as_u64().unwrap() > usable);
    for field in [
        "param",
        "util_budget_bytes",
        "usable_bytes",
        "footprint_at_largest",
        "footprint_at_next",
    ] {
        assert!(!r[field].is_null(), "{field}");
    }
    // The plan at the answer fits, with the headroom the query reported.
    let o = memplan(&[
        "plan",
        &dump,
        "--device-class",
        "l4-24gb",
        "--set",
        &format!("B={largest}"),
        "--set",
        "S=4096",
        "--json",
    ]);
    let p: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        p["devices"][0]["headroom_bytes"].as_u64().unwrap(),
        usable - r["footprint_at_largest"].as_u64().unwrap()
    );
    let text = stdout(&memplan(&args[..args.len() - 1]));
    assert!(
        text.contains(&format!("largest B that fits: {largest}")),
        "{text}"
    );
    // With no top (`B` alone, or `B=1..`), the same answer, found by doubling past any range;
    // a range that stops below it answers its top.
    for open in ["B", "B=1.."] {
        let mut a = args;
        a[7] = open;
        let o = memplan(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(r["largest"].as_u64(), Some(largest), "{open}");
        assert!(r["hi"].is_null());
    }
    let mut low = args;
    let top = format!("B=1..{}", largest / 2);
    low[7] = &top;
    let r: serde_json::Value = serde_json::from_str(&stdout(&memplan(&low))).unwrap();
    assert_eq!(r["largest"].as_u64(), Some(largest / 2));
}

#[test]
fn device_classes_and_params_are_refused_with_reasons() {
    let dump = example("decoder-serving.json");
    let o = memplan(&["plan", &dump, "--device-class", "h200"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no hardware class `h200` (bundled: h100-sxm-80gb, a100-40gb"),
        "{}",
        stderr(&o)
    );
    let o = memplan(&["plan", &dump, "--device-class", "jetson-agx-orin-64gb"]);
    assert!(
        stderr(&o).contains("util 0.9 is above the class's ceiling of 0.75"),
        "{}",
        stderr(&o)
    );
    let o = memplan(&["plan", &dump, "--set", "X=3"]);
    assert!(
        stderr(&o).contains("the dump has no param `X` (its params: B, S)"),
        "{}",
        stderr(&o)
    );
    let o = memplan(&["plan", &dump, "--set", "B=many"]);
    assert_eq!(o.status.code(), Some(2));
    let o = memplan(&[
        "fits",
        &dump,
        "--param",
        "B=9..1",
        "--device-class",
        "l4-24gb",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let bad = temp(
        "mine.toml",
        "name = \"mine\"\n[memory]\ndevice_bytes = 1000\n",
    );
    let o = memplan(&["plan", &dump, "--hardware", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("hardware class `mine`: line"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("missing field"), "{}", stderr(&o));
    let good = temp(
        "tiny.toml",
        "name = \"tiny\"\n[memory]\ndevice_bytes = 1000000000\ndriver_fixed_bytes = 0\ndriver_budget_per_mille = 0\nunified = false\nutil_ceiling = 1.0\n",
    );
    let o = memplan(&["plan", &dump, "--hardware", good.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("does NOT fit tiny"), "{}", stdout(&o));
}

#[test]
fn spaces_classify_and_a_missing_writer_is_a_diagnostic() {
    let o = memplan(&["spaces", &example("decoder-serving.json"), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["outputs"][0]["source"]["written_by"], "sample");
    assert_eq!(r["counts"]["host_output_transfers"], 1);
    let kv = r["slots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["tensor"] == "k_cache")
        .unwrap();
    assert_eq!(
        (kv["space"].as_str(), kv["transfer"].as_str()),
        (Some("device_global"), Some("host_to_device"))
    );
    let broken = temp(
        "writerless.json",
        r#"{"memplan": 1, "name": "writerless", "tensors": [{"id": "x", "bytes": 4, "kind": "input"}, {"id": "y", "bytes": 32, "kind": "output"}], "steps": [{"id": "s", "reads": ["x"], "writes": ["x"]}]}"#,
    );
    let o = memplan(&["spaces", broken.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("output #0 has no writer"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("graph `writerless` output #0 (`y`) has no kernel writer or backing alias; schedule its producer or provide an input/constant alias"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn fit_sweep_and_inline_by_hand_agree() {
    let dump = example("convnet-training.json");
    let o = memplan(&[
        "fit",
        &dump,
        "--target",
        "55MB",
        "--strategy",
        "first-fit",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fit: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for field in [
        "baseline_bytes",
        "final_bytes",
        "flips",
        "considered",
        "dropped",
        "within_target",
    ] {
        assert!(!fit[field].is_null(), "{field}");
    }
    assert_eq!(fit["within_target"], true);
    let flips: Vec<String> = fit["flips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["tensor"].as_str().unwrap().to_string())
        .collect();
    let reliefs: i64 = fit["flips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["relief_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(
        reliefs,
        fit["baseline_bytes"].as_i64().unwrap() - fit["final_bytes"].as_i64().unwrap()
    );
    let o = memplan(&[
        "plan",
        &dump,
        "--strategy",
        "first-fit",
        "--flips",
        &flips.join(","),
        "--json",
    ]);
    let plan: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(plan["footprint_bytes"], fit["final_bytes"]);
    let o = memplan(&[
        "sweep",
        &dump,
        "--points",
        "6",
        "--strategy",
        "first-fit",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sweep: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    for field in [
        "target_bytes",
        "footprint_bytes",
        "recompute_cost",
        "flips",
        "pareto",
    ] {
        assert!(!points[0][field].is_null(), "{field}");
    }
    // The candidates are few: each point has the exhaustive optimum's cost beside the greedy's.
    assert_eq!(sweep["exhaustive"], true);
    assert!(
        points.iter().all(|p| p["exhaustive_cost"].is_u64()),
        "{points:?}"
    );
    let o = memplan(&["fit", &dump, "--target", "lots"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not a byte size"), "{}", stderr(&o));
}

#[test]
fn onnx_models_plan_convert_and_take_a_fixed_input_shape() {
    let model = root().join("tests/data/onnx/light_squeezenet.onnx");
    let model = model.to_str().unwrap();
    let o = memplan(&["plan", model, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Every tensor sized, its Dropout's mask too (opset 9: a float each, as ONNX Runtime runs it).
    assert!(!stderr(&o).contains("could not be sized"), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["complete"], true);
    assert_eq!(r["lower_bound_bytes"], 11857384);
    // A batch of 4 at the input: the activations grow, the weights do not.
    let o = memplan(&[
        "plan",
        model,
        "--input-shape",
        "data_0=4x3x224x224",
        "--json",
    ]);
    let r4: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let activations = |r: &serde_json::Value| {
        r["lower_bound_bytes"].as_u64().unwrap()
            - r["devices"][0]["always_live_bytes"].as_u64().unwrap()
    };
    assert_eq!(activations(&r4), 4 * activations(&r));
    // Converted to memplan JSON, the model plans to the same figures.
    let o = memplan(&["convert", model, "--to", "json"]);
    let json = temp("squeezenet.json", &stdout(&o));
    let o = memplan(&["plan", json.to_str().unwrap(), "--json"]);
    let again: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(again["lower_bound_bytes"], r["lower_bound_bytes"]);
    let o = memplan(&["plan", model, "--input-shape", "nope=1x2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("`nope`, which is not an input"),
        "{}",
        stderr(&o)
    );
    let garbage = temp("garbage.onnx", "");
    std::fs::write(&garbage, b"\x08\x07\x12\xffnonsense").unwrap();
    let o = memplan(&["plan", garbage.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("ONNX: "), "{}", stderr(&o));
}

#[test]
fn a_torch_snapshot_plans_beside_what_the_allocator_reserved() {
    let snapshot = root().join("tests/data/torch/magma27_memory_snapshot.pickle");
    let o = memplan(&[
        "plan",
        snapshot.to_str().unwrap(),
        "--strategy",
        "first-fit",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("a static arena would need 11.99 GiB; the allocator reserved 13.21 GiB; the live peak was 11.99 GiB"),
        "{}",
        stdout(&o)
    );
    let table = stdout(&o);
    assert!(
        table.contains("by allocation site") && table.contains("forward (model.py:39)"),
        "{table}"
    );
    assert!(
        !table.contains("functional.py"),
        "an internal frame named a site: {table}"
    );
    let o = memplan(&["plan", snapshot.to_str().unwrap(), "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let device = &report["devices"][0];
    let sites = device["live_at_peak_by_site"].as_array().unwrap();
    let total: u64 = sites.iter().map(|g| g["bytes"].as_u64().unwrap()).sum();
    assert_eq!(total, device["lower_bound_bytes"].as_u64().unwrap());
    let counted: u64 = sites.iter().map(|g| g["count"].as_u64().unwrap()).sum();
    assert_eq!(
        counted as usize,
        device["live_at_peak"].as_array().unwrap().len()
    );
    let evil = temp("evil.pickle", "");
    std::fs::write(&evil, b"\x80\x02cos\nsystem\n.").unwrap();
    let o = memplan(&["plan", evil.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("refers to `os.system`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_profiler_trace_plans_per_device_gzipped_or_not() {
    let trace = root().join("tests/data/torch-trace/df_index_resolver.json.gz");
    let o = memplan(&["plan", trace.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let devices: Vec<&str> = (report["devices"].as_array().unwrap().iter())
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    assert_eq!(devices, ["cpu", "cuda:1"]);
    assert!(
        report["reserved_bytes"].as_u64().unwrap() > report["footprint_bytes"].as_u64().unwrap()
    );
    let plain = temp("trace.json", "");
    let bytes = std::fs::read(&trace).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text)
        .unwrap();
    std::fs::write(&plain, &text).unwrap();
    let again = memplan(&["plan", plain.to_str().unwrap(), "--json"]);
    assert_eq!(
        stdout(&again),
        stdout(&o),
        "the same trace unpacked plans the same"
    );
    let empty = temp(
        "empty-trace.json",
        r#"{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 0, "dur": 1}]}"#,
    );
    let o = memplan(&["plan", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("profile_memory=True"), "{}", stderr(&o));
}

#[test]
fn search_proves_optimal_and_a_capacity_below_the_live_peak_exits_1_saying_why() {
    let c = root().join("tests/data/minimalloc/C.1048576.csv");
    let c = c.to_str().unwrap();
    let o = memplan(&["plan", c, "--strategy", "search", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let summary = &report;
    assert_eq!(summary["footprint_bytes"], 1039360);
    assert_eq!(summary["proven_lower_bound_bytes"], 1039360);
    assert_eq!(summary["optimal"], true);
    assert!(summary["nodes"].as_u64().unwrap() > 0);
    assert!(summary["elapsed_ms"].is_u64());
    // When the layout was found: within the search's time.
    assert!(summary["found_ms"].as_u64().unwrap() <= summary["elapsed_ms"].as_u64().unwrap());
    assert_eq!(summary["devices"][0]["optimal"], true);

    // The table says the same in words, with the two times.
    let o = memplan(&["plan", c, "--strategy", "search"]);
    let text = stdout(&o);
    assert!(
        text.contains("device0: optimal: no layout goes below 1015.00 KiB (")
            && text.contains(" search nodes)\nsearch time ")
            && text.contains(" ms, found after "),
        "{text}"
    );

    let o = memplan(&["plan", c, "--strategy", "search", "--capacity", "1000000"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "no layout fits 1,000,000 B (976.56 KiB): the live bytes at step 9 alone are 1,039,360 B"
        ),
        "{}",
        stderr(&o)
    );
    let o = memplan(&["plan", c, "--strategy", "search", "--capacity", "1MiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Above the live peak but past what a tiny budget finds: said so, not claimed impossible.
    let o = memplan(&[
        "plan",
        c,
        "--strategy",
        "search",
        "--capacity",
        "1040000",
        "--work-limit",
        "1000",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no layout within 1,040,000 B (1015.62 KiB) found before the limit"),
        "{}",
        stderr(&o)
    );
    let o = memplan(&["plan", c, "--time-limit", "soon"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A proof over stacked precision classes holds among the layouts that keep them apart, and
/// says so: the training example's two classes, proven at 29.05 GiB, fit its 28.97 GiB live
/// peak once they may share bytes.
#[test]
fn a_proof_over_precision_classes_says_it_keeps_them_apart() {
    let example = root().join("static/examples/transformer-training.json");
    let example = example.to_str().unwrap();
    let o = memplan(&["plan", example, "--strategy", "search", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let (live_peak, proven) = (31105515776u64, 31187304704u64);
    assert_eq!(report["lower_bound_bytes"], live_peak);
    assert_eq!(report["proven_lower_bound_bytes"], proven);
    assert_eq!(report["optimal"], true);
    assert_eq!(report["arena_regions"], 2);
    assert_eq!(report["devices"][0]["arena_regions"], 2);
    let text = stdout(&memplan(&["plan", example, "--strategy", "search"]));
    assert!(
        text.contains("device0: optimal: no layout that keeps its 2 precision classes apart goes below 29.05 GiB ("),
        "{text}"
    );
    let at_peak = live_peak.to_string();
    let o = memplan(&[
        "plan",
        example,
        "--strategy",
        "search",
        "--capacity",
        &at_peak,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "device0: no layout that keeps its 2 precision classes apart fits 31,105,515,776 B \
             (28.97 GiB): the exact search proved every layout that keeps its 2 precision classes \
             apart needs at least 31,187,304,704 B (29.05 GiB)"
        ) && stderr(&o).contains("--no-precision-classes lets the classes share bytes"),
        "{}",
        stderr(&o)
    );
    // Apart no more: the proof covers every layout, and the live peak fits.
    let apart = ["--strategy", "search", "--no-precision-classes"];
    let text = stdout(&memplan(&[&["plan", example][..], &apart].concat()));
    assert!(
        text.contains("device0: optimal: no layout goes below 28.97 GiB ("),
        "{text}"
    );
    let o = memplan(&[&["plan", example, "--json"][..], &apart].concat());
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["footprint_bytes"], live_peak);
    assert_eq!(report["arena_regions"], 1);
    let o = memplan(&[&["plan", example, "--capacity", &at_peak][..], &apart].concat());
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_capacity_search_that_gives_up_reports_a_layout_no_worse_than_best() {
    // D's live peak: no layout reaches it, and this work limit proves nothing.
    let d = root().join("tests/data/minimalloc/D.1048576.csv");
    let d = d.to_str().unwrap();
    let footprint = |o: &Output| -> u64 {
        let text = stdout(o);
        let report: serde_json::Value = serde_json::from_str(&text).expect(&text);
        report["footprint_bytes"].as_u64().unwrap()
    };
    let best = memplan(&["plan", d, "--json"]);
    assert!(best.status.success(), "{}", stderr(&best));
    let lower_bound = {
        let report: serde_json::Value = serde_json::from_str(&stdout(&best)).unwrap();
        report["lower_bound_bytes"].as_u64().unwrap()
    };
    let capacity = lower_bound.to_string();
    let args = [
        "plan",
        d,
        "--strategy",
        "search",
        "--capacity",
        &capacity,
        "--json",
    ];
    let gave_up = memplan(&args);
    assert_eq!(gave_up.status.code(), Some(1));
    assert!(
        stderr(&gave_up).contains("found before the limit; the best is"),
        "{}",
        stderr(&gave_up)
    );
    assert!(footprint(&gave_up) <= footprint(&best));
    // Less work, a higher layout: what it reports is what its probes between found.
    let shorter = memplan(&[&args[..], &["--work-limit", "2500000"]].concat());
    assert_eq!(shorter.status.code(), Some(1));
    assert!(footprint(&shorter) > footprint(&gave_up));
    // Where `best` given the same work lands lower (the two spend their nodes differently), it
    // answers with `best`'s: on 400 packed buffers at a tenth of the default work, its probes
    // between find 1,086,464 B and `best` 1,063,936.
    let packed = root().join("tests/data/packed/packed-400-s5.csv");
    let packed = packed.to_str().unwrap();
    let work = ["--work-limit", "5000000"];
    let best = memplan(&[&["plan", packed, "--json"][..], &work].concat());
    assert!(best.status.success(), "{}", stderr(&best));
    let capacity = [
        "plan",
        packed,
        "--strategy",
        "search",
        "--capacity",
        "1048576",
        "--json",
    ];
    let gave_up = memplan(&[&capacity[..], &work].concat());
    assert_eq!(gave_up.status.code(), Some(1));
    assert_eq!(footprint(&gave_up), footprint(&best));
    assert_eq!(footprint(&best), 1_063_936);
}

#[test]
fn diff_names_each_change_and_fails_ci_past_the_threshold() {
    // Before: two intermediates; after: one grows, one goes, one is new.
    let dump = |extra: &str, h_bytes: u64| {
        format!(
            r#"{{"memplan": 1, "tensors": [
                {{"id": "x", "bytes": 1000, "kind": "input"}},
                {{"id": "h", "bytes": {h_bytes}}},
                {{"id": "{extra}", "bytes": 500}},
                {{"id": "y", "bytes": 100, "kind": "output"}}],
              "steps": [
                {{"id": "s0", "reads": ["x"], "writes": ["h"]}},
                {{"id": "s1", "reads": ["h"], "writes": ["{extra}"]}},
                {{"id": "s2", "reads": ["{extra}"], "writes": ["y"]}}]}}"#
        )
    };
    let before = temp("diff-before.json", &dump("g", 2000));
    let after = temp("diff-after.json", &dump("n", 3000));
    let (b, a) = (before.to_str().unwrap(), after.to_str().unwrap());
    let o = memplan(&["diff", b, a, "--strategy", "first-fit", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let d: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let change = |id: &str| {
        d["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tensor"] == id)
            .unwrap_or_else(|| panic!("{id} in {d}"))
            .clone()
    };
    assert_eq!(change("n")["change"], "new");
    assert_eq!(change("g")["change"], "gone");
    assert_eq!(change("h")["change"], "changed");
    assert_eq!(change("h")["resized"], true);
    assert_eq!(change("x")["change"], "same");
    let grew = d["footprint_change_percent"].as_f64().unwrap();
    assert!(grew > 5.0, "{grew}");

    let o = memplan(&["diff", b, a, "--fail-above", "5%"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("the footprint grew past 5%"),
        "{}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("1 new, 1 gone, 1 changed"),
        "{}",
        stdout(&o)
    );
    let o = memplan(&["diff", b, a, "--fail-above", "1000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = memplan(&["diff", b, a, "--fail-above", "lots"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A time limit stops `search` on the clock, where its default budget ends it unstopped. No
/// search proves minimalloc D optimal, so the clock stops it on any machine; that a time limit
/// alone lifts the work budget is the unit test `a_time_limit_alone_lifts_the_work_limit`.
#[test]
fn a_time_limit_stops_search_on_the_clock() {
    let run = |extra: &[&str]| search_report("D.1048576.csv", extra);
    let budgeted = run(&[]);
    assert_ne!(budgeted["devices"][0]["stopped"], true);
    let timed = run(&["--time-limit", "50ms"]);
    assert_eq!(timed["devices"][0]["stopped"], true, "stopped by the clock");
    assert!(timed["found_ms"].as_u64().unwrap() <= timed["elapsed_ms"].as_u64().unwrap());
    assert_eq!(timed["valid"], true);
    // Only a search's report has the two times.
    let first_fit = memplan(&[
        "plan",
        &example("mlp-training.json"),
        "--strategy",
        "first-fit",
        "--json",
    ]);
    let first_fit: serde_json::Value = serde_json::from_str(&stdout(&first_fit)).unwrap();
    assert!(first_fit.get("elapsed_ms").is_none() && first_fit.get("found_ms").is_none());
}

#[test]
fn search_past_its_work_limit_still_reports_what_is_proven() {
    // No work for the exact search: the greedy portfolio alone, no nodes, and the live peak as
    // the proven bound (the JSON keeps every field `search` documents).
    let r = search_report("A.1048576.csv", &["--work-limit", "0"]);
    assert_eq!(r["nodes"], 0);
    assert_eq!(r["proven_lower_bound_bytes"], 1048576);
    assert_eq!(r["devices"][0]["proven_lower_bound_bytes"], 1048576);
    let optimal = r["footprint_bytes"].as_u64().unwrap() <= 1048576;
    assert_eq!(r["optimal"], optimal);
    assert!(r["elapsed_ms"].is_u64());
}

#[test]
fn bench_repeats_each_plan_and_prints_every_run_as_json() {
    // A folder of its own: other tests write their files beside `temp`'s.
    let dir = std::env::temp_dir().join(format!("memplan-cli-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bench.csv"),
        "id,lower,upper,size\na,0,2,64\nb,1,3,32\nc,2,4,64\n",
    )
    .unwrap();
    let o = memplan(&[
        "bench",
        "--csv-dir",
        dir.to_str().unwrap(),
        "--synthetic",
        "200",
        "--all-live",
        "0",
        "--strategies",
        "first-fit,search",
        "--repeat",
        "3",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = rows.as_array().unwrap();
    let names: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["instance"].as_str().unwrap(),
                r["strategy"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(names.contains(&("bench.csv", "search")), "{names:?}");
    assert!(names.contains(&("synthetic-200", "first-fit")), "{names:?}");
    for r in rows {
        assert_eq!(r["millis"].as_array().unwrap().len(), 3, "{r}");
        assert_eq!(r["valid"], true, "{r}");
        let exact = r["strategy"] == "search";
        assert_eq!(r["proven_lower_bound_bytes"].is_u64(), exact, "{r}");
        assert_eq!(r["optimal"].is_boolean(), exact, "{r}");
    }
    // bench.csv: a and c never meet, b meets both: 96 bytes live at once, and a layout of 96.
    let search = rows
        .iter()
        .find(|r| r["instance"] == "bench.csv" && r["strategy"] == "search")
        .unwrap();
    assert_eq!(search["footprint_bytes"], 96, "{search}");
    assert_eq!(search["optimal"], true, "{search}");
    let o = memplan(&["bench", "--repeat", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The remat and ONNX timings keep their own run counts and tables.
    let o = memplan(&["bench", "--onnx-mb", "1", "--repeat", "3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

#[test]
fn a_reordered_plan_reports_its_order_checks_and_converts() {
    let mlp = example("mlp-training.json");
    let o = memplan(&["plan", &mlp, "--order", "best", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let order = &report["order"];
    assert_eq!(order["order"], "best");
    let footprint = report["footprint_bytes"].as_u64().unwrap();
    let given = order["given_footprint_bytes"].as_u64().unwrap();
    assert!(footprint < given, "{footprint} vs {given}");
    let steps: Vec<&str> = (order["steps"].as_array().unwrap().iter())
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(steps.len(), 23);
    assert!(order["moved_steps"].as_u64().unwrap() > 0);
    let table = stdout(&memplan(&["plan", &mlp, "--order", "best"]));
    assert!(table.contains("order best: "), "{table}");
    assert!(table.contains("less than the given order's"), "{table}");

    // `check` verifies the order, then the placements under it.
    let plan = temp("mlp-best.json", &stdout(&o));
    let checked = memplan(&["check", &mlp, "--plan", plan.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    let mut broken = report.clone();
    let list = broken["order"]["steps"].as_array_mut().unwrap();
    let last = list.len() - 1;
    list.swap(0, last);
    let broken = temp("mlp-broken.json", &broken.to_string());
    let checked = memplan(&["check", &mlp, "--plan", broken.to_str().unwrap()]);
    assert_eq!(checked.status.code(), Some(1));
    assert!(
        stderr(&checked).contains("runs before step"),
        "{}",
        stderr(&checked)
    );

    // The reordered dump, written out, plans as the reordered plan did.
    let converted = memplan(&["convert", &mlp, "--to", "json", "--order", "best"]);
    assert!(converted.status.success(), "{}", stderr(&converted));
    let dump = temp("mlp-reordered.json", &stdout(&converted));
    let again = memplan(&["plan", dump.to_str().unwrap(), "--json"]);
    let again: serde_json::Value = serde_json::from_str(&stdout(&again)).unwrap();
    assert_eq!(again["footprint_bytes"].as_u64(), Some(footprint));
}

#[test]
fn an_xla_dump_is_read_as_its_pair_and_xlas_plan_is_checked_and_compared() {
    let dir = root().join("tests/data/xla/mlp");
    let assignment = dir
        .join("module_0030.jit_step.cpu_after_optimizations-buffer-assignment.txt")
        .display()
        .to_string();
    let o = memplan(&["plan", &assignment]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("XLA's plan: 27.62 MiB (arena 7.01 MiB), checker valid, 0 B over the lower bound; memplan's: 27.62 MiB (arena 7.01 MiB)"),
        "{out}"
    );
    assert!(
        stderr(&o).contains(
            "thread-local values, on the stack of the thread that runs them, not planned: 21 (84 B)"
        ),
        "{}",
        stderr(&o)
    );
    // Either file of the pair names the dump; `check` checks XLA's offsets.
    let live_range = assignment.replace("-buffer-assignment.txt", "-live-range.txt");
    let o = memplan(&["check", &live_range]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("valid plan, 32 buffers"),
        "{}",
        stdout(&o)
    );
    let o = memplan(&["plan", &assignment, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["given_plan"]["planner"], "XLA");
    assert_eq!(report["given_plan"]["arena_bytes"], 7350272);
    assert_eq!(report["given_plan"]["valid"], true);
    // Alone, the buffer assignment is refused, naming the file it needs.
    let text = std::fs::read_to_string(&assignment).unwrap();
    let alone = temp("alone-buffer-assignment.txt", &text);
    let o = memplan(&["plan", alone.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("the live range (`*-live-range.txt`, beside the buffer assignment in the dump) is missing"),
        "{}",
        stderr(&o)
    );
}

/// The module's HLO text and XLA's memory usage report are what an XLA dump shows first: given
/// either, the CLI reads the pair beside it and says so; alone, each names the file to give.
#[test]
fn another_file_of_an_xla_dump_reads_the_pair_beside_it_or_names_it() {
    let stem = "module_0030.jit_step.cpu_after_optimizations";
    let dir = std::env::temp_dir().join(format!("memplan-cli-xla-{}", std::process::id()));
    let (beside, alone) = (dir.join("dump"), dir.join("alone"));
    for d in [&beside, &alone] {
        std::fs::create_dir_all(d).unwrap();
    }
    for suffix in ["-buffer-assignment.txt", "-live-range.txt"] {
        let from = root().join(format!("tests/data/xla/mlp/{stem}{suffix}"));
        std::fs::copy(from, beside.join(format!("{stem}{suffix}"))).unwrap();
    }
    let others = [
        (
            format!("{stem}.txt"),
            "HloModule jit_step, is_scheduled=true\n",
            "HLO module text",
        ),
        (
            format!("{stem}-memory-usage-report.txt"),
            "Memory Space: default (color=0)\nTotal bytes: 28963060 (27.62MiB)\n",
            "memory usage report",
        ),
    ];
    for (name, text, what) in others {
        std::fs::write(beside.join(&name), text).unwrap();
        let o = memplan(&["plan", beside.join(&name).to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o).contains("XLA's plan: 27.62 MiB"),
            "{}",
            stdout(&o)
        );
        let said = format!("XLA's {what}: reading the buffer assignment beside it");
        assert!(stderr(&o).contains(&said), "{}", stderr(&o));
        std::fs::write(alone.join(&name), text).unwrap();
        let o = memplan(&["plan", alone.join(&name).to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        let named = format!(
            "{name}: this is XLA's {what}: memplan reads `{stem}-buffer-assignment.txt` with the `*-live-range.txt` beside it"
        );
        assert!(stderr(&o).contains(&named), "{}", stderr(&o));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// XLA's plan of a while loop puts its condition's `pred` where its body's `f32` goes next:
/// valid, the bytes shared across dtypes said apart from violations (XLA has no precision
/// classes), and without precision classes memplan's plan is checked and compared like for like.
#[test]
fn xlas_plan_of_a_loop_shares_bytes_across_dtypes_and_is_valid() {
    let assignment = root()
        .join("tests/data/xla/fori/module_0008.jit_f.cpu_after_optimizations-buffer-assignment.txt")
        .display()
        .to_string();
    let o = memplan(&["plan", &assignment]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("checker valid (precision classes aside: 1 buffer pair of different dtypes in the same bytes), 64 B over the lower bound"),
        "{}",
        stdout(&o)
    );
    let o = memplan(&["check", &assignment]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("valid plan, 11 buffers, 65856 bytes (1 buffer pair of different dtypes in the same bytes, which precision classes keep apart"),
        "{}",
        stdout(&o)
    );
    let o = memplan(&["plan", &assignment, "--no-precision-classes", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["given_plan"]["valid"], true);
    assert_eq!(report["given_plan"].get("across_classes"), None);
    let o = memplan(&["check", &assignment, "--no-precision-classes"]);
    assert_eq!(stdout(&o).trim_end().rsplit_once(' ').unwrap().1, "bytes");
}

#[test]
fn a_tflite_model_written_back_carries_memplans_plan_which_check_passes() {
    let model = root()
        .join("tests/data/tflite/keyword_scrambled.tflite")
        .display()
        .to_string();
    let out = temp("planned.tflite", "");
    let out = out.to_str().unwrap();
    let o = memplan(&["convert", &model, "--to", "tflite", "-o", out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = |file: &str| -> serde_json::Value {
        serde_json::from_slice(&memplan(&["plan", file, "--json"]).stdout).unwrap()
    };
    let (before, after) = (plan(&model), plan(out));
    assert!(before["given_plan"].is_null());
    // The plan written is memplan's: the same arena, checked valid.
    let given = &after["given_plan"];
    assert_eq!(given["valid"], true);
    assert_eq!(given["arena_bytes"], before["devices"][0]["arena_bytes"]);
    let o = memplan(&["check", out]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A binary file is not written to the terminal; a dump of another format is refused.
    let o = memplan(&["convert", &model, "--to", "tflite"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("give the file to write with -o"),
        "{}",
        stderr(&o)
    );
    let o = memplan(&[
        "convert",
        &example("mlp-training.json"),
        "--to",
        "tflite",
        "-o",
        out,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("only a TFLite model can be written back"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_program_plans_whole_to_its_golden_report_and_prints_its_used_memory() {
    for name in ["serving-program", "schedule-search-program"] {
        let o = memplan(&["plan", "--json", &example(&format!("{name}.json"))]);
        assert!(o.status.success(), "{}", stderr(&o));
        let golden =
            std::fs::read_to_string(root().join(format!("tests/golden/{name}.plan.json"))).unwrap();
        assert_eq!(
            stdout(&o),
            golden,
            "{name}: regenerate with `memplan plan --json`"
        );
    }
    let o = memplan(&["plan", &example("schedule-search-program.json")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("release `candidate4` fails after 1 pool freed: a retry frees the rest"),
        "{text}"
    );
    assert!(
        text.contains(
            "+1.00 GiB: the pools of the other routines of `candidate0` and its ancestors"
        ),
        "{text}"
    );
    assert!(
        text.contains("contexts not yet released (`candidate2`)"),
        "{text}"
    );
    let o = memplan(&["validate", &example("serving-program.json")]);
    assert!(
        stdout(&o)
            .contains("valid memplan JSON program: 4 contexts, 5 routines, 15 events, 1 devices"),
        "{}",
        stdout(&o)
    );
    // A param no routine has is an error, not dropped.
    let o = memplan(&["plan", &example("serving-program.json"), "--set", "Q=3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no routine of the program has param `Q`"),
        "{}",
        stderr(&o)
    );
    // Commands of one computation say what a program is.
    let o = memplan(&[
        "render",
        "--view",
        "arena",
        &example("serving-program.json"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a program of several routines"),
        "{}",
        stderr(&o)
    );
}

/// Under a memory limit it cannot plan within, `plan` says so in one line and exits 4 (it
/// aborted with the allocator's message); the same limit leaves a small dump's plan alone.
#[cfg(target_os = "linux")]
#[test]
fn running_out_of_memory_is_one_line_and_exit_4() {
    let limited = |file: &str| {
        Command::new("sh")
            .args([
                "-c",
                "ulimit -v 60000 && exec \"$0\" plan \"$1\"",
                env!("CARGO_BIN_EXE_memplan"),
                file,
            ])
            .output()
            .unwrap()
    };
    let small = limited(&example("mlp-training.json"));
    assert!(small.status.success(), "{}", stderr(&small));
    let mut csv = String::from("id,lower,upper,size\n");
    for i in 0..200_000u64 {
        let lower = (i * 7919) % 1_000_000;
        csv.push_str(&format!(
            "{i},{lower},{},{}\n",
            lower + 1 + i % 500,
            64 + i % 4096
        ));
    }
    let large = temp("large.csv", &csv);
    let o = limited(large.to_str().unwrap());
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with("memplan: out of memory: the system refused "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A reader that stops reading (`memplan plan x --json | head`) ends the output quietly: exit 0
/// and nothing on standard error, where `print!` panicked with a stack trace.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    // The JSON is hundreds of KiB: far past what a pipe buffers.
    let mut child = Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(["plan", &example("transformer-training.json"), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 16];
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"{"));
    drop(stdout);
    let o = child.wait_with_output().unwrap();
    assert_eq!((o.status.code(), stderr(&o)), (Some(0), String::new()));
}
