//! The corpus: the real inputs vendored under `tests/data` (listed in `corpus.toml`), checked
//! against their checksums, planned through the engine with every strategy, and held to their
//! published figures. Nothing outside the repository is read.

use std::path::PathBuf;

use memplan_core::{Strategy, StrategyChoice};
use memplan_engine::{Scenario, Session};
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Deserialize)]
struct Corpus {
    minimalloc: Minimalloc,
    large: Files,
    packed: Files,
    onnx: Onnx,
    torch: Torch,
    torch_trace: TorchTrace,
    torch_generated: TorchGenerated,
    found: Vec<Found>,
    xla: Xla,
    tflite: Tflite,
}

/// TFLite models, with figures from `tests/data/tflite_figures.py`.
#[derive(Deserialize)]
struct Tflite {
    file: Vec<TfliteEntry>,
}

#[derive(Deserialize)]
struct TfliteEntry {
    path: String,
    tensors: usize,
    constants: usize,
    operators: usize,
    arena_lower_bound: u64,
    always_live_bytes: u64,
    /// Tensors an `OfflineMemoryAllocation` plan places.
    #[serde(default)]
    offline_offsets: Option<usize>,
}
/// XLA dumps, with figures from `tests/data/xla_figures.py`.
#[derive(Deserialize)]
struct Xla {
    file: Vec<XlaEntry>,
}

#[derive(Deserialize)]
struct XlaEntry {
    /// The buffer assignment; its live range is beside it.
    path: String,
    values: usize,
    values_bytes: u64,
    temp_values: usize,
    temp_bytes: u64,
    temp_lower_bound: u64,
    allocations_bytes: u64,
}

/// A layout `search` found (minimalloc CSV with an `offset` column) for the buffers of `input`.
#[derive(Deserialize)]
struct Found {
    path: String,
    input: String,
    footprint: u64,
}

#[derive(Deserialize)]
struct Onnx {
    file: Vec<OnnxEntry>,
}

#[derive(Deserialize)]
struct OnnxEntry {
    path: String,
    /// `unsized_tensors` in the figures python onnx_figures.py writes.
    #[serde(alias = "unsized_tensors")]
    size_unknown_tensors: usize,
    always_live: u64,
    lower_bound: u64,
}

#[derive(Deserialize)]
struct Torch {
    file: Vec<TorchEntry>,
}

#[derive(Deserialize)]
struct TorchEntry {
    path: String,
    allocations: usize,
    live_peak: u64,
    reserved: u64,
}

/// Snapshots written by scripts/gen-snapshot.py, one per pickle protocol, with its figures.
#[derive(Deserialize)]
struct TorchGenerated {
    file: Vec<GeneratedEntry>,
}

#[derive(Deserialize)]
struct GeneratedEntry {
    path: String,
    device: Vec<GeneratedDevice>,
}

#[derive(Deserialize)]
struct GeneratedDevice {
    device: String,
    allocations: usize,
    live_peak: u64,
    reserved: u64,
    reserved_peak: u64,
}

/// PyTorch profiler traces, with figures from `tests/data/torch_trace_figures.py`.
#[derive(Deserialize)]
struct TorchTrace {
    file: Vec<TorchTraceEntry>,
}

#[derive(Deserialize)]
struct TorchTraceEntry {
    path: String,
    device: Vec<TraceDevice>,
}

#[derive(Deserialize)]
struct TraceDevice {
    device: String,
    allocations: usize,
    live_peak: u64,
    /// Whether the trace's totals count the device's reservations.
    reserved_counted: bool,
}

#[derive(Deserialize)]
struct Minimalloc {
    best_mean_ratio_at_most: f64,
    file: Vec<Entry>,
}

#[derive(Deserialize)]
struct Files {
    file: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    path: String,
    buffers: usize,
    lower_bound: u64,
    /// The least footprint, when known (else at most `best_known`).
    #[serde(default)]
    optimum: Option<u64>,
    #[serde(default)]
    best_known: Option<u64>,
    #[serde(default)]
    search_proves_optimum: bool,
    /// `best` (a page load) solves it and says so: its exact search's small budget suffices.
    #[serde(default)]
    best_proves_optimum: bool,
    #[serde(default)]
    search_fits: Option<u64>,
    /// A footprint `search` reaches given this much work (more than its default).
    #[serde(default)]
    search_given_work: Option<GivenWork>,
}

#[derive(Deserialize)]
struct GivenWork {
    work: u64,
    reaches: u64,
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data")
}

fn corpus() -> Corpus {
    toml::from_str(include_str!("corpus.toml")).expect("corpus.toml parses")
}

/// The onnx wheel's single-op and small test models, with their figures.
fn onnx_testdata() -> Onnx {
    toml::from_str(include_str!("data/onnx/testdata/figures.toml")).expect("figures.toml parses")
}

#[derive(Deserialize)]
struct NodeFigures {
    model: Vec<NodeModel>,
}

/// One of onnx's node test models, with the bytes of each tensor python's shape inference sizes.
#[derive(Deserialize)]
struct NodeModel {
    path: String,
    bytes: std::collections::BTreeMap<String, u64>,
}

/// onnx's node test models.
fn onnx_node_models() -> Vec<NodeModel> {
    let figures: NodeFigures =
        toml::from_str(include_str!("data/onnx/node/figures.toml")).expect("figures.toml parses");
    figures.model
}

/// Models of ONNX Runtime's contrib ops, with the bytes ONNX Runtime gives each output.
fn onnx_contrib_models() -> Vec<NodeModel> {
    let figures: NodeFigures = toml::from_str(include_str!("data/onnx/contrib/figures.toml"))
        .expect("figures.toml parses");
    figures.model
}

fn session(entry: &Entry) -> Session {
    let path = data_dir().join(&entry.path);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Session::load(&bytes, &entry.path).unwrap()
}

#[test]
fn the_vendored_files_are_the_ones_their_readme_describes() {
    let sums = std::fs::read_to_string(data_dir().join("SHA256SUMS")).unwrap();
    let mut checked = 0;
    for line in sums.lines() {
        let (sum, path) = line.split_once("  ").expect("`sum  path` lines");
        let bytes = std::fs::read(data_dir().join(path)).unwrap();
        let actual: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(actual, sum, "{path}");
        checked += 1;
    }
    let c = corpus();
    assert_eq!(
        checked,
        c.minimalloc.file.len()
            + c.large.file.len()
            + c.packed.file.len()
            + c.onnx.file.len()
            + onnx_testdata().file.len()
            + onnx_node_models().len()
            + onnx_contrib_models().len()
            + onnx_exported_models().len()
            + 1 // onnx/torchvision
            + c.torch.file.len()
            + c.torch_trace.file.len()
            + c.torch_generated.file.len()
            + c.found.len()
            + 2 * c.xla.file.len()
            + c.tflite.file.len()
            + 3 // tflite/schema.fbs, while_loop.tflite, if_branches.tflite
    );
}

/// Plans `entry` with every strategy: each plan valid, the lower bound exact. Returns `best`'s
/// footprint / LB.
fn plan_every_strategy(entry: &Entry) -> f64 {
    let s = session(entry);
    assert_eq!(s.problem().buffers.len(), entry.buffers, "{}", entry.path);
    let mut best_ratio = f64::NAN;
    for strategy in StrategyChoice::ALL {
        let outcome = s
            .plan(&Scenario {
                strategy,
                ..Scenario::default()
            })
            .unwrap();
        let plan = &outcome.plan;
        assert!(
            plan.is_valid(),
            "{} {strategy}: {:?}",
            entry.path,
            plan.violations
        );
        assert_eq!(
            plan.lower_bound_bytes(),
            entry.lower_bound,
            "{} lower bound",
            entry.path
        );
        assert!(
            plan.footprint_bytes() >= entry.lower_bound,
            "{} {strategy}",
            entry.path
        );
        assert!(
            plan.devices.iter().all(|d| d.cap_fallback.is_none()),
            "{}",
            entry.path
        );
        if strategy == StrategyChoice::Best {
            best_ratio = plan.footprint_bytes() as f64 / entry.lower_bound as f64;
            let proven = plan.devices[0].exact.is_some_and(|e| e.optimal);
            assert_eq!(proven, entry.best_proves_optimum, "{} best", entry.path);
            if proven {
                assert_eq!(
                    Some(plan.footprint_bytes()),
                    entry.optimum,
                    "{}",
                    entry.path
                );
            }
        }
    }
    best_ratio
}

#[test]
fn minimalloc_files_have_their_published_lower_bounds_and_every_strategy_plans_them_validly() {
    let corpus = corpus();
    let ratios: Vec<f64> = corpus
        .minimalloc
        .file
        .iter()
        .map(plan_every_strategy)
        .collect();
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    assert!(
        mean <= corpus.minimalloc.best_mean_ratio_at_most,
        "best's mean footprint/LB {mean:.3} over the minimalloc files exceeds {}",
        corpus.minimalloc.best_mean_ratio_at_most
    );
}

#[test]
fn search_proves_only_true_bounds_and_solves_what_it_claims() {
    let corpus = corpus();
    let files = (corpus.minimalloc.file.iter())
        .chain(&corpus.large.file)
        .chain(&corpus.packed.file);
    for entry in files {
        let s = session(entry);
        let search = Scenario {
            strategy: StrategyChoice::One(Strategy::Search),
            ..Scenario::default()
        };
        let plan = s.plan(&search).unwrap().plan;
        assert!(plan.is_valid(), "{}: {:?}", entry.path, plan.violations);
        let exact = plan.devices[0]
            .exact
            .expect("search reports what it proved");
        // Sound: never above the known optimum, nor above a known layout.
        let known = entry
            .optimum
            .or(entry.best_known)
            .unwrap_or(entry.lower_bound);
        assert!(
            exact.proven_lower_bound_bytes <= known,
            "{}: proved {} but {known} is reachable",
            entry.path,
            exact.proven_lower_bound_bytes
        );
        if let Some(optimum) = entry.optimum {
            assert!(plan.footprint_bytes() >= optimum, "{}", entry.path);
        }
        assert_eq!(
            exact.optimal,
            plan.footprint_bytes() == exact.proven_lower_bound_bytes
        );
        if entry.search_proves_optimum {
            assert!(
                exact.optimal,
                "{}: {} not proven",
                entry.path,
                plan.footprint_bytes()
            );
            assert_eq!(
                Some(plan.footprint_bytes()),
                entry.optimum.or(Some(entry.lower_bound)),
                "{}",
                entry.path
            );
        }
        // A capacity: met where the optimum is known to fit it; refused below the live peak.
        if entry.search_proves_optimum {
            let at = s
                .plan(&Scenario {
                    capacity: Some(plan.footprint_bytes()),
                    ..search.clone()
                })
                .unwrap()
                .plan;
            assert!(
                at.footprint_bytes() <= plan.footprint_bytes(),
                "{}",
                entry.path
            );
        }
        if let Some(capacity) = entry.search_fits {
            let within = s
                .plan(&Scenario {
                    capacity: Some(capacity),
                    ..search.clone()
                })
                .unwrap()
                .plan;
            assert!(within.is_valid(), "{}", entry.path);
            assert!(
                within.footprint_bytes() <= capacity,
                "{}: {} does not fit {capacity}",
                entry.path,
                within.footprint_bytes()
            );
        }
        let below = s
            .plan(&Scenario {
                capacity: Some(entry.lower_bound - 1),
                ..search.clone()
            })
            .unwrap()
            .plan;
        assert!(below.devices[0].exact.unwrap().proven_lower_bound_bytes >= entry.lower_bound);
    }
}

#[test]
fn large_real_problems_plan_in_one_arena_past_4_gib_of_reach() {
    // Regression: with a 4 GiB cap by default, problems like these fell back to bump pools.
    for entry in &corpus().large.file {
        let ratio = plan_every_strategy(entry);
        assert!(
            ratio < 1.05,
            "{}: best at {ratio:.4} x the lower bound",
            entry.path
        );
    }
}

#[test]
fn found_layouts_place_their_inputs_buffers_validly_at_their_footprint() {
    let corpus = corpus();
    assert!(!corpus.found.is_empty());
    for found in &corpus.found {
        let read = |path: &str| std::fs::read_to_string(data_dir().join(path)).unwrap();
        let (layout, input) = (read(&found.path), read(&found.input));
        // The same buffers, row for row: the input's columns, then the offset.
        let header = layout.lines().next().unwrap();
        assert_eq!(header, format!("{},offset", input.lines().next().unwrap()));
        let buffers: Vec<&str> = (layout.lines().skip(1))
            .map(|row| row.rsplit_once(',').unwrap().0)
            .collect();
        assert_eq!(
            buffers,
            input.lines().skip(1).collect::<Vec<_>>(),
            "{}",
            found.path
        );
        let s = Session::load(layout.as_bytes(), &found.path).unwrap();
        let checked = s.check_given(&Scenario::default()).unwrap();
        assert_eq!(checked.violations, vec![], "{}", found.path);
        assert_eq!(checked.footprint_bytes, found.footprint, "{}", found.path);
        // Recorded as the file's best known, so every proven bound is held to it.
        let entry = (corpus.minimalloc.file.iter())
            .find(|e| e.path == found.input)
            .expect("a minimalloc file");
        assert_eq!(entry.best_known, Some(found.footprint), "{}", found.path);
    }
}

#[test]
fn minimalloc_offsets_round_trip_through_the_checker() {
    // Export `best`'s plan as minimalloc CSV with offsets, read it back, and check it.
    let entry = &corpus().minimalloc.file[0];
    let s = session(entry);
    let outcome = s.plan(&Scenario::default()).unwrap();
    let csv = s.minimalloc_csv(Some(&outcome)).unwrap();
    let again = Session::load(csv.as_bytes(), "again.csv").unwrap();
    assert_eq!(
        again.given_plan().map(|g| g.offsets.clone()),
        Some(
            (outcome.plan.device_offsets(s.problem()).into_iter())
                .map(Some)
                .collect()
        )
    );
    let checked = again.check_given(&Scenario::default()).unwrap();
    assert_eq!(checked.violations, vec![]);
    assert_eq!(
        checked.footprint_bytes,
        outcome.plan.footprint_bytes(),
        "the file's own layout is as tall as the plan"
    );
    // A buffer moved onto one it conflicts with fails the check.
    let p = again.problem();
    let span = |b: usize| p.buffers[b].span(p.positions);
    let other = (1..p.buffers.len())
        .find(|&b| span(b).overlaps(span(0)))
        .expect("a conflict with the first buffer");
    assert!(again.given_plan_report(true).unwrap().valid);
    let mut plan = again.given_plan().unwrap().clone();
    let t = |b: usize| again.liveness.buffer_tensor[b] as usize;
    plan.offsets[t(other)] = plan.offsets[t(0)];
    // A clone made after the report was cached: its new plan gets a report of its own.
    let moved = again.clone().with_given_plan(Some(plan));
    assert!(
        !moved
            .check_given(&Scenario::default())
            .unwrap()
            .violations
            .is_empty()
    );
    assert!(!moved.given_plan_report(true).unwrap().valid);
}

fn load(path: &str) -> Session {
    let bytes = std::fs::read(data_dir().join(path)).unwrap();
    Session::load(&bytes, path).unwrap()
}

#[test]
fn onnx_models_have_the_figures_of_onnx_shape_inference() {
    let (models, ops) = (corpus().onnx.file, onnx_testdata().file);
    assert_eq!((models.len(), ops.len()), (9, 140));
    for entry in models.iter().chain(&ops) {
        let s = load(&entry.path);
        let size_unknown_tensors = s.graph.tensors.iter().filter(|t| t.size_unknown).count();
        assert_eq!(
            size_unknown_tensors, entry.size_unknown_tensors,
            "{}",
            entry.path
        );
        // A plan with tensors left unsized says it is incomplete, in the report and the table.
        let summary = s.summary(&s.plan(&Scenario::default()).unwrap());
        assert_eq!(
            summary.complete,
            entry.size_unknown_tensors == 0,
            "{}",
            entry.path
        );
        assert_eq!(
            summary.size_unknown_tensors, entry.size_unknown_tensors,
            "{}",
            entry.path
        );
        assert_eq!(
            memplan_human::plan_table(&summary).starts_with("INCOMPLETE"),
            !summary.complete,
            "{}",
            entry.path
        );
        if entry.size_unknown_tensors > 0 {
            assert!(
                s.warnings[0].contains("could not be sized"),
                "{:?}",
                s.warnings
            );
        }
        for strategy in StrategyChoice::ALL {
            let outcome = s
                .plan(&Scenario {
                    strategy,
                    ..Scenario::default()
                })
                .unwrap();
            assert!(outcome.plan.is_valid(), "{} {strategy}", entry.path);
            let d = &outcome.plan.devices[0];
            assert_eq!(
                d.usage.always_live_bytes, entry.always_live,
                "{}",
                entry.path
            );
            assert_eq!(d.usage.lower_bound, entry.lower_bound, "{}", entry.path);
            // Real models pack at their lower bound, and `search` proves it (a model whose
            // tensors are all always-live leaves it no arena to search).
            if strategy == StrategyChoice::One(Strategy::Search) {
                assert_eq!(d.footprint_bytes, entry.lower_bound, "{}", entry.path);
                assert!(d.exact.is_none_or(|e| e.optimal), "{}", entry.path);
            }
        }
    }
}

/// The shapes memplan infers, tensor by tensor, on onnx's node tests (every op's, but control
/// flow's): each model loads and plans, and every tensor python onnx's shape inference sizes,
/// memplan sizes too, with the same bytes.
#[test]
fn onnx_node_tests_have_the_tensor_sizes_of_onnx_shape_inference() {
    let models = onnx_node_models();
    assert_eq!(models.len(), 1404);
    let mut tensors = 0;
    for model in &models {
        let s = load_onnx(&model.path).unwrap_or_else(|e| panic!("{}: {e}", model.path));
        let plan = s.plan(&Scenario::default()).unwrap().plan;
        assert!(plan.is_valid(), "{}", model.path);
        let resolved = s.graph.resolve().unwrap();
        for (name, &bytes) in &model.bytes {
            let tensor = (s.graph.tensors.iter())
                .find(|t| t.id == name)
                .unwrap_or_else(|| panic!("{}: no tensor `{name}`", model.path));
            assert!(!tensor.elided, "{}: `{name}` unsized", model.path);
            let index = resolved.tensor_of(&s.graph, name).unwrap();
            assert_eq!(
                resolved.tensors[index].bytes, bytes,
                "{} {name}",
                model.path
            );
            tensors += 1;
        }
    }
    assert!(tensors > 4000, "{tensors} tensors");
}

/// Hugging Face models exported by PyTorch's TorchScript exporter, with their inputs' shapes
/// fixed.
#[derive(Deserialize)]
struct ExportedFigures {
    model: Vec<ExportedModel>,
}

#[derive(Deserialize)]
struct ExportedModel {
    path: String,
    input_shapes: std::collections::BTreeMap<String, Vec<u64>>,
    /// The symbolic dims at those shapes.
    params: std::collections::BTreeMap<String, u64>,
    bytes: std::collections::BTreeMap<String, u64>,
}

/// The exported models and ONNX Runtime GenAI's LLM.
fn onnx_exported_models() -> Vec<ExportedModel> {
    let files = [
        include_str!("data/onnx/exported/figures.toml"),
        include_str!("data/onnx/genai/figures.toml"),
    ];
    (files.iter())
        .flat_map(|text| {
            let figures: ExportedFigures = toml::from_str(text).expect("figures.toml parses");
            figures.model
        })
        .collect()
}

/// BERT, GPT-2 and LLaMA as PyTorch exports them, and as ONNX Runtime's optimizer fuses them,
/// load complete once their inputs' shapes are fixed (their shape arithmetic on constants folds: an `expand`'s target is `Where(Equal(s,
/// -1), ones, s)`), with every tensor ONNX Runtime's bytes and no symbolic dim left to bind; so
/// does a 4-bit LLaMA as ONNX Runtime GenAI's builder writes it, its grouped-query attention's
/// present keys and values sized from the mask's length.
#[test]
fn exported_transformers_with_fixed_inputs_load_complete_with_onnx_runtimes_sizes() {
    let models = onnx_exported_models();
    assert_eq!(models.len(), 10);
    for model in models {
        let bytes = std::fs::read(data_dir().join(&model.path)).unwrap();
        let options = memplan_formats::onnx::Options {
            input_shapes: model.input_shapes.clone(),
        };
        let s = Session::load_with(&bytes, &model.path, &options)
            .unwrap_or_else(|e| panic!("{}: {e}", model.path));
        let scenario = Scenario::default();
        assert_eq!(
            s.warnings_for(&scenario),
            Vec::<String>::new(),
            "{}",
            model.path
        );
        let outcome = s.plan(&scenario).unwrap();
        assert!(outcome.plan.is_valid(), "{}", model.path);
        assert!(s.report(&outcome).summary.complete, "{}", model.path);
        for (name, &bytes) in &model.bytes {
            let index = s.resolved.tensor_of(&s.graph, name).unwrap();
            assert_eq!(
                s.resolved.tensors[index].bytes, bytes,
                "{} {name}",
                model.path
            );
        }
        assert!(model.bytes.len() >= 19, "{}", model.path);
    }
}

/// The same models with their dims symbolic: the shapes they compute from those dims are read
/// from three sample values of them, so each plans complete with its dims as params, and bound
/// to the figures' shapes every tensor has ONNX Runtime's bytes, GPT-2's projections too, which
/// flatten batch times sequence. torch.export names GPT-2's two inputs' dims apart (`s72`, `s70`
/// and `s43`, `s53`), though the model runs only where they agree: its attention mask's reshape
/// to the ids' batch divides by it, which no sample of dims apart does, so what follows it stays
/// unsized (the warning says why) until the inputs' shapes are fixed.
#[test]
fn exported_transformers_with_symbolic_inputs_plan_with_their_dims_as_params() {
    for model in onnx_exported_models() {
        let bytes = std::fs::read(data_dir().join(&model.path)).unwrap();
        let s = Session::load(&bytes, &model.path).unwrap();
        assert_eq!(
            s.graph.params.keys().collect::<Vec<_>>(),
            model.params.keys().collect::<Vec<_>>(),
            "{}",
            model.path
        );
        let scenario = Scenario {
            params: model.params.clone(),
            ..Scenario::default()
        };
        let outcome = s.plan(&scenario).unwrap();
        assert!(outcome.plan.is_valid(), "{}", model.path);
        let (graph, resolved) = match s.bind(&scenario.params).unwrap() {
            Some(bound) => (bound.graph, bound.resolved),
            None => panic!("{}: params to bind", model.path),
        };
        let apart = model.path.ends_with("gpt2_dynamo.onnx");
        let mut unsized_tensors = 0;
        for (name, &bytes) in &model.bytes {
            let index = resolved.tensor_of(&graph, name).unwrap();
            match graph.tensors[index].size_unknown {
                true => unsized_tensors += 1,
                false => assert_eq!(
                    resolved.tensors[index].bytes, bytes,
                    "{} {name}",
                    model.path
                ),
            }
        }
        let complete = s.report(&outcome).summary.complete;
        assert_eq!(complete, !apart, "{}: {:?}", model.path, s.warnings);
        assert_eq!(unsized_tensors > 0, apart, "{}", model.path);
        if apart {
            let warnings = s.warnings.join("\n");
            assert!(
                warnings.contains("`view_1` (Reshape: the target shape is not a constant)"),
                "{warnings}"
            );
        }
        let read = s
            .warnings
            .iter()
            .any(|w| w.starts_with("tensors whose shapes were read at three sample values"));
        assert!(read, "{}: {:?}", model.path, s.warnings);
    }
}

/// torchvision's Faster R-CNN as PyTorch's TorchScript exporter writes it, its weights in a
/// file not kept: its input's resize (float shape arithmetic) and pad (reversed, transposed
/// pads) fold, the `If` of its non-maximum suppression runs the branch its constant condition
/// picks, and what the values decide (`NonZero`, `TopK`, the suppression) is sized at its
/// most: the plan is complete, every tensor holds at least the bytes ONNX Runtime gives it,
/// and each one no such size reaches holds exactly those.
#[test]
fn torchvisions_detection_model_plans_complete_at_its_most() {
    let figures: ExportedFigures =
        toml::from_str(include_str!("data/onnx/torchvision/figures.toml")).unwrap();
    let model = &figures.model[0];
    let s = load_onnx(&model.path).unwrap();
    let outcome = s.plan(&Scenario::default()).unwrap();
    assert!(outcome.plan.is_valid());
    assert!(s.report(&outcome).summary.complete, "{:?}", s.warnings);
    // What a size the values decide reaches: written by such a step, or by one that reads it.
    let mut reached: std::collections::HashSet<&str> = Default::default();
    for step in &s.graph.steps {
        let decided = ["NonZero", "NonMaxSuppression", "TopK", "Unique", "Compress"];
        if decided.contains(&&*step.op) || step.reads.iter().any(|r| reached.contains(r.as_str())) {
            reached.extend(step.writes.iter().map(|w| w.as_str()));
        }
    }
    let mut exact = 0;
    for (name, &bytes) in &model.bytes {
        let index = s.resolved.tensor_of(&s.graph, name).unwrap();
        let planned = s.resolved.tensors[index].bytes;
        match reached.contains(name.as_str()) {
            true => assert!(planned >= bytes, "{name}: {planned} < {bytes}"),
            false => assert_eq!(planned, bytes, "{name}"),
        }
        exact += usize::from(planned == bytes);
    }
    assert!(exact >= 1502, "{exact} of {} exact", model.bytes.len());
    // The warning names what is at its most: the suppression's `If` among them.
    let warnings = s.warnings.join("\n");
    assert!(
        warnings.contains("8 tensors whose sizes depend on the values the model reads are planned at the most they can be")
            && warnings.contains("`onnx::Slice_1495` (If)"),
        "{warnings}"
    );
}

/// Models of ONNX Runtime's contrib ops load complete, each output with ONNX Runtime's bytes,
/// and plan valid.
#[test]
fn onnx_runtime_contrib_ops_load_complete() {
    for model in onnx_contrib_models() {
        let s = load_onnx(&model.path).unwrap_or_else(|e| panic!("{}: {e}", model.path));
        let outcome = s.plan(&Scenario::default()).unwrap();
        assert!(outcome.plan.is_valid(), "{}", model.path);
        assert!(s.report(&outcome).summary.complete, "{}", model.path);
        let resolved = s.graph.resolve().unwrap();
        for (name, &bytes) in &model.bytes {
            let index = resolved.tensor_of(&s.graph, name).unwrap();
            assert_eq!(
                resolved.tensors[index].bytes, bytes,
                "{} {name}",
                model.path
            );
        }
    }
}

fn load_onnx(path: &str) -> Result<Session, String> {
    let bytes = std::fs::read(data_dir().join(path)).unwrap();
    Session::load(&bytes, path).map_err(|e| e.to_string())
}

#[test]
fn a_torch_snapshot_has_the_figures_of_pythons_pickle() {
    for entry in &corpus().torch.file {
        let s = load(&entry.path);
        assert_eq!(s.problem().buffers.len(), entry.allocations);
        let outcome = s.plan(&Scenario::default()).unwrap();
        assert!(outcome.plan.is_valid());
        assert_eq!(outcome.plan.lower_bound_bytes(), entry.live_peak);
        let report = s.report(&outcome);
        assert_eq!(report.summary.reserved_bytes, Some(entry.reserved));
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("2 frees of memory allocated before the trace")),
            "{:?}",
            s.warnings
        );
    }
}

#[test]
fn snapshots_of_every_pickle_protocol_have_the_generators_figures() {
    let mut graphs = Vec::new();
    for entry in &corpus().torch_generated.file {
        let s = load(&entry.path);
        let outcome = s.plan(&Scenario::default()).unwrap();
        assert!(outcome.plan.is_valid(), "{}", entry.path);
        let problem = s.problem();
        let recorded = s.recorded.as_ref().expect("the allocator's record");
        for want in &entry.device {
            let k = (problem.device_ids.iter())
                .position(|id| *id == want.device)
                .unwrap();
            let d = outcome.plan.devices.iter().find(|d| d.device == k).unwrap();
            assert_eq!(
                d.usage.lower_bound, want.live_peak,
                "{} {}",
                entry.path, want.device
            );
            let count = problem.buffers.iter().filter(|b| b.device() == k).count();
            assert_eq!(count, want.allocations, "{} {}", entry.path, want.device);
            let r = recorded
                .devices
                .iter()
                .find(|r| r.device == want.device)
                .unwrap();
            assert!(r.reserved_traced, "the generator writes segment events");
            assert_eq!(r.reserved_peak(), want.reserved_peak);
            assert_eq!(r.reserved.last().unwrap().1, want.reserved, "at the dump");
            assert_eq!(r.ooms.len(), 1);
            assert!(r.ooms[0].device_free.is_some());
            assert!(r.segments.iter().map(|s| s.bytes).sum::<u64>() == want.reserved);
        }
        // Named by the user's code: the native and PyTorch frames before it are skipped.
        for t in &s.graph.tensors {
            let name = t.name.as_deref().unwrap();
            assert!(
                name.contains("model.py") || name.contains("train.py"),
                "{name}"
            );
        }
        assert!(
            (recorded.allocations.iter()).any(|a| a.stream == 7),
            "a side stream"
        );
        graphs.push((*s.graph).clone());
    }
    assert!(graphs.len() == 4, "protocols 2, 3, 4 and 5");
    assert!(
        graphs.windows(2).all(|w| w[0] == w[1]),
        "every protocol reads the same"
    );
}

#[test]
fn a_profiler_trace_has_the_figures_of_an_independent_script() {
    for entry in &corpus().torch_trace.file {
        let s = load(&entry.path);
        let outcome = s.plan(&Scenario::default()).unwrap();
        assert!(outcome.plan.is_valid());
        let problem = s.problem();
        let report = s.report(&outcome);
        assert_eq!(report.summary.devices.len(), entry.device.len());
        for (d, want) in report.summary.devices.iter().zip(&entry.device) {
            assert_eq!(d.device, want.device);
            assert_eq!(d.lower_bound_bytes, want.live_peak, "{}", d.device);
            let k = problem
                .device_ids
                .iter()
                .position(|id| *id == d.device)
                .unwrap();
            let count = problem.buffers.iter().filter(|b| b.device() == k).count();
            assert_eq!(count, want.allocations, "{}", d.device);
        }
        let recorded = s.recorded.as_ref().expect("the allocator's record");
        for want in &entry.device {
            let r = (recorded.devices.iter())
                .find(|r| r.device == want.device)
                .unwrap();
            // A device whose reservations the trace does not count has no reserved record.
            assert_eq!(
                !r.reserved.is_empty(),
                want.reserved_counted,
                "{}",
                want.device
            );
        }
        // The reserved total is said where the trace counts some device's reservations.
        let counted = entry.device.iter().any(|d| d.reserved_counted);
        let reserved: u64 = recorded.devices.iter().map(|d| d.reserved_peak()).sum();
        assert_eq!(
            report.summary.reserved_bytes,
            counted.then_some(reserved),
            "{}",
            entry.path
        );
        assert!(
            report
                .summary
                .reserved_bytes
                .is_none_or(|r| r > report.summary.lower_bound_bytes)
        );
        // Every allocation is named by the operator that encloses it.
        let named = s
            .graph
            .tensors
            .iter()
            .filter(|t| !t.stack.is_empty())
            .count();
        assert_eq!(named, s.graph.tensors.len());
    }
}

#[test]
fn xla_dumps_have_the_figures_of_an_independent_script_and_xla_plans_pass_the_checker() {
    for entry in &corpus().xla.file {
        let path = data_dir().join(&entry.path);
        let companion = memplan_formats::xla::companion(&entry.path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(b'\n');
        bytes.extend(std::fs::read(data_dir().join(companion)).unwrap());
        let s = Session::load(&bytes, &entry.path).unwrap();
        // Every value is a tensor with XLA's size (the other tensors are XLA's allocations).
        let values: Vec<usize> = (0..s.graph.tensors.len())
            .filter(|&t| !s.graph.tensors[t].id.starts_with("allocation "))
            .collect();
        assert_eq!(values.len(), entry.values, "{}", entry.path);
        let bytes: u64 = values.iter().map(|&t| s.resolved.tensors[t].bytes).sum();
        assert_eq!(bytes, entry.values_bytes, "{}", entry.path);
        let temp = (s.graph.tensors.iter())
            .filter(|t| t.kind == memplan_core::graph::TensorKind::Intermediate)
            .count();
        assert_eq!(temp, entry.temp_values, "{}", entry.path);
        // The lower bound on the temp values is the script's.
        let outcome = s.plan(&Scenario::default()).unwrap();
        let report = s.report(&outcome);
        assert!(report.summary.valid);
        let [d] = &report.summary.devices[..] else {
            panic!("one memory space")
        };
        assert_eq!(
            d.lower_bound_bytes - d.always_live_bytes,
            entry.temp_lower_bound,
            "{}",
            entry.path
        );
        // XLA's plan passes the checker. XLA has no precision classes: a loop's condition and
        // body put values of other dtypes in the same bytes by turns, which the report counts
        // apart from violations, and which memplan's plan matches without precision classes,
        // its arena then no larger than XLA's temp arena.
        let given = report.summary.given_plan.as_ref().expect("XLA's plan");
        assert!(
            given.valid,
            "{}: {} violations",
            entry.path, given.violations
        );
        let without_classes = Scenario {
            precision_classes: false,
            ..Scenario::default()
        };
        assert_eq!(s.check_given(&without_classes).unwrap().violations, vec![]);
        let with_classes = s.check_given(&Scenario::default()).unwrap().violations;
        assert_eq!(with_classes.len(), given.across_classes, "{}", entry.path);
        assert!(
            (with_classes.iter())
                .all(|v| matches!(v, memplan_core::Violation::AcrossClasses { .. })),
            "{}",
            entry.path
        );
        // XLA's temp arena, its top value rounded up to the alignment (64 in these dumps), as
        // every plan's arena counts a buffer.
        let aligned_temp_bytes = entry.temp_bytes.next_multiple_of(64);
        assert_eq!(given.arena_bytes, aligned_temp_bytes, "{}", entry.path);
        let like_for_like = s.report(&s.plan(&without_classes).unwrap()).summary;
        assert!(
            like_for_like.devices[0].arena_bytes <= entry.temp_bytes,
            "{}",
            entry.path
        );
        // XLA's allocations, one after another (with alignment padding between them).
        assert!(given.footprint_bytes >= entry.allocations_bytes);
        assert!(given.footprint_bytes - entry.allocations_bytes < 64 * 64);
    }
}

#[test]
fn tflite_models_have_the_figures_of_an_independent_script_and_velas_plan_passes_the_checker() {
    use memplan_core::graph::TensorKind;
    for entry in &corpus().tflite.file {
        let s = load(&entry.path);
        let g = &s.graph;
        assert_eq!(g.tensors.len(), entry.tensors, "{}", entry.path);
        let constants = g.tensors.iter().filter(|t| t.kind == TensorKind::Constant);
        assert_eq!(constants.count(), entry.constants, "{}", entry.path);
        // Every operator is a step, after the step that writes the inputs.
        assert_eq!(g.steps.len(), entry.operators + 1, "{}", entry.path);
        let outcome = s.plan(&Scenario::default()).unwrap();
        let report = s.report(&outcome);
        assert!(report.summary.valid);
        let [d] = &report.summary.devices[..] else {
            panic!("one device")
        };
        assert_eq!(
            d.always_live_bytes, entry.always_live_bytes,
            "{}",
            entry.path
        );
        match entry.offline_offsets {
            None => {
                assert_eq!(
                    d.lower_bound_bytes - d.always_live_bytes,
                    entry.arena_lower_bound,
                    "{}",
                    entry.path
                );
                assert!(report.summary.given_plan.is_none());
            }
            Some(placed) => {
                // Vela's plan passes the checker (the operands it places inside the NPU's
                // scratch are views of it), and memplan's arena is no larger.
                let given = report.summary.given_plan.as_ref().expect("Vela's plan");
                assert_eq!(given.planner, "Vela");
                assert!(
                    given.valid,
                    "{}: {} violations",
                    entry.path, given.violations
                );
                let views = g
                    .tensors
                    .iter()
                    .filter(|t| t.declared.view_of.is_some())
                    .count();
                assert_eq!(
                    views,
                    placed - 1,
                    "all but the scratch tensor are views of it"
                );
                assert!(d.arena_bytes <= given.arena_bytes);
                assert!(d.lower_bound_bytes - d.always_live_bytes <= entry.arena_lower_bound);
            }
        }
    }
}

/// `csv`'s buffers (minimalloc rows `id,lower,upper,size`) `copies` times, each copy starting
/// halfway through the one before: a larger problem of the same kind.
fn tiled(csv: &str, copies: u64) -> String {
    let rows: Vec<[u64; 4]> = (csv.lines().skip(1))
        .map(|line| {
            let mut cells = line.split(',').map(|c| c.trim().parse::<u64>().unwrap());
            std::array::from_fn(|_| cells.next().unwrap())
        })
        .collect();
    let shift = rows.iter().map(|r| r[2]).max().unwrap() / 2;
    let mut out = String::from("id,lower,upper,size\n");
    for k in 0..copies {
        for (n, [_, lower, upper, size]) in rows.iter().enumerate() {
            let id = k * rows.len() as u64 + n as u64;
            let (lower, upper) = (lower + k * shift, upper + k * shift);
            out += &format!("{id},{lower},{upper},{size}\n");
        }
    }
    out
}

#[test]
fn search_progress_never_goes_back() {
    // Nodes only grow, the best only falls and the bound only rises, through the warm start
    // too, which runs here: the region is large enough that the nodes run out first.
    let corpus = corpus();
    let entry = (corpus.large.file.iter())
        .find(|e| e.path.ends_with("somas_tensors_resnet50.csv"))
        .unwrap();
    let csv = std::fs::read_to_string(data_dir().join(&entry.path)).unwrap();
    let s = Session::load(tiled(&csv, 8).as_bytes(), "tiled.csv").unwrap();
    let mut heard = Vec::new();
    let mut progress = |p: memplan_core::Progress| heard.push(p);
    let mut control = memplan_core::Control {
        progress: Some(&mut progress),
        ..Default::default()
    };
    let search = Scenario {
        strategy: StrategyChoice::One(Strategy::Search),
        ..Scenario::default()
    };
    s.plan_with(&search, &mut control).unwrap();
    assert!(heard.len() > 1);
    assert!(
        heard.iter().all(|p| p.exact),
        "every count is of the exact search's nodes"
    );
    for w in heard.windows(2) {
        assert!(w[1].evaluations >= w[0].evaluations, "{w:?}");
        assert!(w[1].best_bytes <= w[0].best_bytes, "{w:?}");
        assert!(w[1].bound_bytes >= w[0].bound_bytes, "{w:?}");
    }
}

#[test]
fn search_given_more_work_reaches_what_the_corpus_says() {
    let corpus = corpus();
    let given: Vec<(&Entry, &GivenWork)> = (corpus.minimalloc.file.iter())
        .chain(&corpus.large.file)
        .filter_map(|e| Some((e, e.search_given_work.as_ref()?)))
        .collect();
    assert!(!given.is_empty());
    for (entry, given) in given {
        let plan = session(entry)
            .plan(&Scenario {
                strategy: StrategyChoice::One(Strategy::Search),
                work_limit: Some(given.work),
                ..Scenario::default()
            })
            .unwrap()
            .plan;
        assert!(plan.is_valid(), "{}: {:?}", entry.path, plan.violations);
        assert!(
            plan.footprint_bytes() <= given.reaches,
            "{}: {} given {} work",
            entry.path,
            plan.footprint_bytes(),
            given.work
        );
    }
}

/// Every order of the real ONNX models is a valid reorder with a valid plan, and `best` is
/// never above the given order or a heuristic (docs/format.md, "Reordering").
#[test]
fn every_order_of_the_onnx_models_is_valid_and_best_is_the_smallest() {
    use memplan_core::order::Order;
    for entry in &corpus().onnx.file {
        let s = load(&entry.path);
        let footprint = |order: Order| {
            let outcome = s
                .plan(&Scenario {
                    order,
                    ..Scenario::default()
                })
                .unwrap();
            assert!(
                outcome.plan.is_valid(),
                "{} under {order}: {:?}",
                entry.path,
                outcome.plan.violations
            );
            outcome.plan.footprint_bytes()
        };
        let best = footprint(Order::Best);
        for order in [Order::Given, Order::Lpmf, Order::Bfs, Order::Dfs] {
            assert!(best <= footprint(order), "{} under {order}", entry.path);
        }
    }
}
