//! `memplan`: the command-line shell around memplan-engine.
//!
//! It reads files, builds a [`Scenario`] from its flags, asks the engine, and prints what comes
//! back; it computes no number of its own, so what it prints agrees to the byte with the web
//! app. Errors are one line (what, where, why; control characters escaped) with exit code 1;
//! usage errors, including a value outside a closed set, exit 2; a plan that fails the checker
//! exits 3; running out of memory exits 4, saying so in one line ([`out_of_memory`]).

#[macro_use]
mod stdout;
mod bench;
mod out_of_memory;

#[global_allocator]
static ALLOCATOR: out_of_memory::Reporting = out_of_memory::Reporting;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use memplan_core::order::Order;
use memplan_core::remat::Target;
use memplan_core::{Control, FoundAt, Progress, StrategyChoice};
use memplan_engine::program::ProgramSession;
use memplan_engine::query::{
    AdviseQuery, Ask, CheckQuery, ConvertQuery, FitQuery, FitsQuery, PlanQuery, SpacesQuery,
    SweepQuery, Written,
};
use memplan_engine::{DeviceClass, EngineError, Scenario, Session};
use memplan_formats::FormatError;
use memplan_formats::hardware::{self, HardwareError};
use memplan_formats::report::{PlanReport, PlanSummary};
use memplan_human as human;
use memplan_human::one_line;
use memplan_render::color::ColorBy;
use memplan_render::model::RowOrder;
use memplan_render::scene::Viewport;
use memplan_render::svg::{RenderError, SvgOptions, arena_svg, timeline_svg};

#[derive(Parser)]
#[command(
    name = "memplan",
    version,
    about = "Plan and check where every buffer of an ML schedule lives",
    after_help = "A dump (FILE) is memplan JSON, a minimalloc CSV, an ONNX model, a TFLite model, a PyTorch memory snapshot or profiler trace (.json or .json.gz), or an XLA buffer assignment (either file of the *-buffer-assignment.txt and *-live-range.txt pair, the other read from beside it; or the module's HLO text or memory usage report, the pair read from beside it). The format is told by content."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum ConvertTo {
    Json,
    Minimalloc,
    /// The same TFLite model with memplan's plan as its offline plan (needs `-o`).
    Tflite,
}

#[derive(Clone, Copy, ValueEnum)]
enum View {
    Timeline,
    Arena,
}

/// Whether a view leaves the always-live buffers out and scales to the arena.
#[derive(Clone, Copy, ValueEnum)]
enum ArenaOnly {
    /// When the always-live bytes dwarf the arena (the page's default).
    Auto,
    On,
    Off,
}

/// A clap parser for a closed set of named values (`ALL` and `name`), so that a value outside
/// it is a usage error (exit 2) that lists the possible ones.
fn one_of<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(all.iter().map(|&t| name(t))).map(move |s| {
        *all.iter()
            .find(|&&t| name(t) == s)
            .expect("clap accepted only these names")
    })
}

/// The flags of a [`Scenario`].
#[derive(clap::Args)]
struct ScenarioArgs {
    /// The layout strategy; `best` runs them all and keeps the lowest per device.
    #[arg(long, default_value = "best", value_parser = one_of(&StrategyChoice::ALL, StrategyChoice::name))]
    strategy: StrategyChoice,
    /// Let tensors of different dtypes share bytes.
    #[arg(long)]
    no_precision_classes: bool,
    /// The largest pool, bytes (4294967296 for 32-bit offsets). Default: the dump's own cap,
    /// else none (64-bit offsets).
    #[arg(long)]
    pool_cap: Option<u64>,
    /// `search`'s work limit per region, in conflict visits (deterministic). Default:
    /// 50,000,000, eight times that with `--capacity`.
    #[arg(long)]
    work_limit: Option<u64>,
    /// For `search`: find a layout whose footprint fits this (512MiB, 1048576), or prove none
    /// does (exit 1), instead of minimizing.
    #[arg(long, value_parser = parse_size)]
    capacity: Option<u64>,
    /// A value for a param of the dump (a symbolic dim), e.g. `--set B=8`; repeat for more.
    #[arg(long = "set", value_name = "NAME=V", value_parser = parse_binding)]
    bindings: Vec<(String, u64)>,
    /// The device class every device of the dump is: a bundled class (h100-sxm-80gb,
    /// a100-40gb, l4-24gb, rtx-4090-24gb, jetson-agx-orin-64gb) or the class of `--hardware`.
    #[arg(long)]
    device_class: Option<String>,
    /// The utilization the device runs at, in (0, its class's ceiling].
    #[arg(long, default_value_t = memplan_engine::DEFAULT_UTIL)]
    util: f64,
    /// A hardware class file of your own (its class is the file's name without `.toml`).
    #[arg(long, value_name = "FILE.toml")]
    hardware: Option<PathBuf>,
    /// Flips: remat candidates to recompute at their uses instead of storing, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "ID,ID")]
    flips: Vec<String>,
    /// The order the steps run in: the dump's own (`given`), one of PyTorch Inductor's
    /// heuristics (`lpmf`, `bfs`, `dfs`), or the smallest plan found (`best`).
    #[arg(long, default_value = "given", value_parser = one_of(&Order::ALL, Order::name))]
    order: Order,
    /// The work `--order best` may do, in storage visits (deterministic).
    #[arg(long)]
    order_work: Option<u64>,
}

fn parse_binding(s: &str) -> Result<(String, u64), BadArgument> {
    let bad = || {
        BadArgument(format!(
            "`{s}` is not NAME=VALUE with a non-negative integer value"
        ))
    };
    let (name, value) = s.split_once('=').ok_or_else(bad)?;
    let value = value.trim().parse().map_err(|_| bad())?;
    Ok((name.trim().to_string(), value))
}

/// A `--param NAME=LO..HI` range.
#[derive(Debug, Clone)]
struct ParamRange {
    name: String,
    lo: u64,
    /// `None`: no top (doubling until a value does not fit).
    hi: Option<u64>,
}

fn parse_input_shape(s: &str) -> Result<(String, Vec<u64>), memplan_formats::onnx::BadInputShape> {
    memplan_formats::onnx::parse_input_shape(s)
}

fn onnx_options(shapes: &[(String, Vec<u64>)]) -> memplan_formats::onnx::Options {
    memplan_formats::onnx::Options {
        input_shapes: shapes.iter().cloned().collect(),
    }
}

fn parse_size(s: &str) -> Result<u64, BadArgument> {
    human::parse_bytes(s)
        .ok_or_else(|| BadArgument(format!("`{s}` is not a byte size (512MiB, 1.5GB, 4096)")))
}

/// A duration in milliseconds: `1s`, `250ms`, `1.5s`, or a bare number of milliseconds.
fn parse_duration_ms(s: &str) -> Result<u64, BadArgument> {
    let t = s.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale < 1e15 => Ok((v * scale).round() as u64),
        _ => Err(BadArgument(format!(
            "`{s}` is not a duration (1s, 250ms, 1500)"
        ))),
    }
}

fn parse_target(s: &str) -> Result<Target, BadArgument> {
    human::parse_target(s).ok_or_else(|| {
        BadArgument(format!(
            "`{s}` is not a byte size (512MiB, 1.5GB, 4096) or `minimize`"
        ))
    })
}

fn parse_percent(s: &str) -> Result<f64, BadArgument> {
    human::parse_percent(s)
        .ok_or_else(|| BadArgument(format!("`{s}` is not a percentage (5% or 5)")))
}

/// `NAME=LO..HI`, `NAME=LO..` (no top) or `NAME` (from 1, no top).
fn parse_range(s: &str) -> Result<ParamRange, BadArgument> {
    let bad = || {
        BadArgument(format!(
            "`{s}` is not NAME, NAME=LO.. or NAME=LO..HI with integers LO <= HI"
        ))
    };
    let Some((name, range)) = s.split_once('=') else {
        return match s.trim() {
            "" => Err(bad()),
            name => Ok(ParamRange {
                name: name.to_string(),
                lo: 1,
                hi: None,
            }),
        };
    };
    let (lo, hi) = range.split_once("..").ok_or_else(bad)?;
    let lo: u64 = lo.trim().parse().map_err(|_| bad())?;
    let hi = match hi.trim().trim_start_matches('=') {
        "" => None,
        hi => Some(hi.parse::<u64>().map_err(|_| bad())?),
    };
    if hi.is_some_and(|hi| lo > hi) {
        return Err(bad());
    }
    Ok(ParamRange {
        name: name.trim().to_string(),
        lo,
        hi,
    })
}

impl ScenarioArgs {
    fn scenario(&self) -> Result<Scenario, CliError> {
        Ok(Scenario {
            strategy: self.strategy,
            precision_classes: !self.no_precision_classes,
            pool_cap: self.pool_cap,
            work_limit: self.work_limit,
            capacity: self.capacity,
            params: self.bindings.iter().cloned().collect::<BTreeMap<_, _>>(),
            device_class: self.device_class()?,
            flips: self.flips.clone(),
            order: self.order,
            order_work: self.order_work,
        })
    }

    /// The device class asked for: the `--hardware` file's, or a bundled one by name.
    fn device_class(&self) -> Result<Option<DeviceClass>, CliError> {
        let class = match (&self.hardware, &self.device_class) {
            (Some(path), device) => {
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                match device {
                    Some(name) if *name != stem => bundled(name)?,
                    _ => {
                        let text = String::from_utf8_lossy(&read_bytes(path)?).into_owned();
                        hardware::parse(&stem, &text).map_err(|error| CliError::Hardware {
                            path: display(path),
                            error,
                        })?
                    }
                }
            }
            (None, Some(name)) => bundled(name)?,
            (None, None) => return Ok(None),
        };
        Ok(Some(DeviceClass {
            class: class.class,
            terms: class.memory,
            util: self.util,
        }))
    }
}

fn bundled(name: &str) -> Result<hardware::HardwareClass, CliError> {
    hardware::bundled(name).ok_or_else(|| CliError::UnknownClass {
        class: name.to_string(),
        known: hardware::bundled_names().join(", "),
    })
}

#[derive(Subcommand)]
enum Command {
    /// Check a dump and print its counts.
    Validate { file: PathBuf },
    /// Plan a dump and print the plan (a table, or the report as JSON).
    Plan {
        file: PathBuf,
        /// An ONNX input's fixed shape, e.g. `images=1x3x640x640`; repeat for more.
        #[arg(long, value_name = "NAME=DxDx..", value_parser = parse_input_shape)]
        input_shape: Vec<(String, Vec<u64>)>,
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Stop `search` after this long (1s, 250ms; a bare number is milliseconds) and keep
        /// its best layout so far: it searches until then, or until it proves its layout
        /// optimal (or, with `--work-limit`, until that runs out, whichever comes first). The
        /// result then depends on the machine's speed; `--work-limit` alone does not.
        #[arg(long, value_parser = parse_duration_ms)]
        time_limit: Option<u64>,
        /// Print the plan report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a plan (a `plan --json` report, or the plan the dump gives: a minimalloc CSV's
    /// offsets, XLA's buffer assignment, a TFLite model's offline plan) against a dump.
    Check {
        file: PathBuf,
        /// The plan report to check; without it, the offsets the file itself gives.
        #[arg(long)]
        plan: Option<PathBuf>,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Convert a dump to memplan JSON or minimalloc CSV, or write a TFLite model back with
    /// memplan's plan as its offline plan.
    Convert {
        file: PathBuf,
        /// An ONNX input's fixed shape, e.g. `images=1x3x640x640`; repeat for more.
        #[arg(long, value_name = "NAME=DxDx..", value_parser = parse_input_shape)]
        input_shape: Vec<(String, Vec<u64>)>,
        #[arg(long)]
        to: ConvertTo,
        /// Also plan it and write the offsets (minimalloc only).
        #[arg(long)]
        with_plan: bool,
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// The output file; standard output when absent.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Draw a view of the plan as SVG (the same drawing the web app exports).
    Render {
        file: PathBuf,
        #[arg(long)]
        view: View,
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// The device of the dump to draw (its id; the one with the largest footprint when absent).
        #[arg(long = "device-id", value_name = "ID")]
        device_id: Option<String>,
        /// Color buffers by kind or dtype.
        #[arg(long, default_value = "kind", value_parser = one_of(&ColorBy::ALL, ColorBy::name))]
        color_by: ColorBy,
        /// Order of the timeline rows.
        #[arg(long, default_value = "start", value_parser = one_of(&RowOrder::ALL, RowOrder::name))]
        sort: RowOrder,
        /// Only the timeline rows that match this (tensor or view ids and names, step ids, names
        /// and ops), as the page's search box.
        #[arg(long, default_value = "")]
        search: String,
        /// Leave the always-live buffers out and scale to the arena.
        #[arg(long, value_enum, default_value = "auto")]
        arena_only: ArenaOnly,
        /// The zoom window, as the page's `?zoom=`: `x0,x1,y0,y1` in positions and rows
        /// (timeline) or positions and bytes (arena).
        #[arg(long, value_parser = parse_window)]
        window: Option<Viewport>,
        #[arg(long, default_value_t = 1200)]
        width: u32,
        #[arg(long, default_value_t = 700)]
        height: u32,
        /// The output file; standard output when absent.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Measure every strategy on instances and print a table (footprint, ratio, time).
    Bench(bench::BenchArgs),
    /// Compare two plans tensor by tensor (matched by id): moved, resized, new, gone, interval
    /// changed. Exit 1 when the footprint grew past `--fail-above`.
    Diff {
        /// The dump before the change.
        before: PathBuf,
        /// The dump after it.
        after: PathBuf,
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Fail (exit 1) when the footprint grew by more than this (`5%` or `5`).
        #[arg(long, value_parser = parse_percent)]
        fail_above: Option<f64>,
        #[arg(long)]
        json: bool,
    },
    /// Classify every buffer slot: memory space, access, host transfer, each output's source.
    Spaces {
        file: PathBuf,
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long)]
        json: bool,
    },
    /// Choose flips (tensors to recompute at their uses) so the footprint fits a target.
    Fit {
        file: PathBuf,
        /// The footprint to fit under (`512MiB`, `1.5GB`, bytes), or `minimize`.
        #[arg(long, value_parser = parse_target)]
        target: Target,
        /// Score at most this many candidates, the cheapest to recompute (default: all).
        #[arg(long)]
        max_candidates: Option<usize>,
        /// Each candidate is scored by a relayout, so fit defaults to the fast `first-fit`.
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long)]
        json: bool,
    },
    /// Fit at many targets from the minimized footprint up to the baseline: the trade-off curve.
    Sweep {
        file: PathBuf,
        #[arg(long, default_value_t = memplan_engine::DEFAULT_SWEEP_POINTS as u16, value_parser = clap::value_parser!(u16).range(1..=memplan_engine::MAX_SWEEP_POINTS as i64))]
        points: u16,
        /// Compute the exhaustive optimum (every subset of candidates) up to this many.
        #[arg(long, default_value_t = memplan_engine::DEFAULT_EXHAUSTIVE_MOST)]
        exhaustive_max: usize,
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long)]
        json: bool,
    },
    /// What to change to lower the footprint: every lever the dump allows (flips, the fit's
    /// flips, smaller params, precision classes, strategies, the pool cap), each planned,
    /// largest saving first.
    Advise {
        file: PathBuf,
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long)]
        json: bool,
    },
    /// The largest value of a param whose plan fits a device class (checked bisection).
    Fits {
        file: PathBuf,
        /// The param and the range to search: `--param B=1..256`, or `B=1..` and `B` for no
        /// top (doubling until a value does not fit, then bisecting).
        #[arg(long, value_parser = parse_range)]
        param: ParamRange,
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long)]
        json: bool,
    },
}

/// A flag's value that is not of its form (a usage error: exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadArgument(String);

fn parse_window(s: &str) -> Result<Viewport, BadArgument> {
    Viewport::parse(s).ok_or_else(|| {
        BadArgument(format!(
            "`{s}` is not a window `x0,x1,y0,y1` with x0 < x1 and y0 < y1"
        ))
    })
}

/// Why a command failed: one line, naming the file.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{path}: {error}")]
    Report { path: String, error: FormatError },
    #[error("{path}: no device `{device}` (devices: {known})")]
    NoDevice {
        path: String,
        device: String,
        known: String,
    },
    #[error("{path}: {error}")]
    Render { path: String, error: RenderError },
    #[error("{path}: {error}")]
    Hardware { path: String, error: HardwareError },
    #[error("no hardware class `{class}` (bundled: {known}; or pass --hardware FILE.toml)")]
    UnknownClass { class: String, known: String },
    #[error(
        "{what}: two runs planned different layouts (a plan must not depend on the runs before it)"
    )]
    Nondeterministic { what: String },
    #[error("{what}: the checker refused a plan memplan made (a bug): {violation}")]
    CheckerRefused { what: String, violation: String },
    #[error("{path}: a TFLite model is binary: give the file to write with -o")]
    BinaryToTerminal { path: String },
}

/// Why each device whose footprint passes `capacity` does: proven by the live bytes at one
/// step, proven by the exact search, or only not found within the limit.
fn capacity_misses(summary: &PlanSummary, capacity: u64) -> Vec<String> {
    let exact = |b: u64| format!("{} B ({})", human::grouped(b), human::bytes(b));
    summary
        .devices
        .iter()
        .filter(|d| d.footprint_bytes > capacity)
        .map(|d| {
            // The live bytes bind every layout; a proof over stacked precision classes, only
            // those that keep them apart.
            let scope = human::proof_scope(d.arena_regions);
            let head =
                |scope: &str| format!("{}: no layout{scope} fits {}", d.device, exact(capacity));
            match (d.peak_position, d.proven_lower_bound_bytes) {
                (Some(step), _) if d.lower_bound_bytes > capacity => format!(
                    "{}: the live bytes at step {step} alone are {}",
                    head(""),
                    exact(d.lower_bound_bytes)
                ),
                (_, Some(proven)) if proven > capacity => format!(
                    "{}: the exact search proved every layout{scope} needs at least {}{}; the \
                     best found is {}{}",
                    head(&scope),
                    exact(proven),
                    d.nodes.map(|n| format!(" ({n} nodes)")).unwrap_or_default(),
                    exact(d.footprint_bytes),
                    match scope.is_empty() {
                        true => "",
                        false => " (--no-precision-classes lets the classes share bytes)",
                    }
                ),
                (_, proven) => format!(
                    "{}: no layout within {} found before the limit; the best is {}{}",
                    d.device,
                    exact(capacity),
                    exact(d.footprint_bytes),
                    proven
                        .map(|p| format!(", and no layout{scope} goes below {}", exact(p)))
                        .unwrap_or_default()
                ),
            }
        })
        .collect()
}

/// `scenario` under a time limit: a time limit alone is the search's limit, so its work is then
/// unbounded; a work limit given too still applies.
fn timed(mut scenario: Scenario, time_limit: Option<u64>) -> Scenario {
    if time_limit.is_some() {
        scenario.work_limit = scenario.work_limit.or(Some(u64::MAX));
    }
    scenario
}

fn main() -> ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    out_of_memory::map_large_blocks();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("memplan: {}", one_line(&e.to_string()));
            ExitCode::from(1)
        }
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|error| CliError::Io {
        path: display(path),
        error,
    })
}

/// Reads the dump at `path`: with an XLA dump, both files of the pair (the buffer assignment
/// and the live range beside it, found by name), joined; else the file itself, which a
/// PyTorch snapshot reads as a stream.
fn load_dump(path: &Path, options: &memplan_formats::onnx::Options) -> Result<Session, CliError> {
    use memplan_formats::xla;
    if let Some(assignment) = xla_assignment_beside(path) {
        return load_dump(&assignment, options);
    }
    let source = display(path);
    let companion = (path.file_name().and_then(|n| n.to_str()))
        .and_then(xla::companion)
        .map(|name| path.with_file_name(name));
    if let Some(other) = companion.filter(|p| p.is_file()) {
        let joined = xla::join(&read_bytes(path)?, &read_bytes(&other)?);
        return Ok(Session::load_with(&joined, &source, options)?);
    }
    let io = |error| CliError::Io {
        path: source.clone(),
        error,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let input = std::io::BufReader::with_capacity(1 << 20, file);
    Ok(Session::load_from(
        input,
        len,
        &source,
        options,
        &mut |_, _| {},
        &|| false,
    )?)
}

/// The buffer assignment to read for another file of an XLA dump (the module's HLO text, its
/// memory usage report), where it is beside it with its live range; said on stderr.
fn xla_assignment_beside(path: &Path) -> Option<std::path::PathBuf> {
    use memplan_formats::xla;
    use std::io::Read;
    let name = path.file_name()?.to_str()?;
    let assignment = path.with_file_name(xla::assignment_beside(name)?);
    let live_range = path.with_file_name(xla::companion(assignment.file_name()?.to_str()?)?);
    if !(assignment.is_file() && live_range.is_file()) {
        return None;
    }
    let mut start = Vec::new();
    let file = std::fs::File::open(path).ok()?;
    file.take(256).read_to_end(&mut start).ok()?;
    let what = xla::other_file(&String::from_utf8_lossy(&start))?;
    eprintln!(
        "memplan: {}: XLA's {what}: reading the buffer assignment beside it, {}",
        path.display(),
        assignment.display()
    );
    Some(assignment)
}

/// Loads a dump; what the import could not carry over exactly goes to stderr as warnings.
pub(crate) fn open(path: &Path) -> Result<&'static Session, CliError> {
    open_with(path, &memplan_formats::onnx::Options::default())
}

/// [`open`] with import options. The session lives until the process exits: it is leaked, not
/// dropped, since the process ends when its command does, and freeing a million-buffer
/// session's allocations one by one took a sixth of planning it.
fn open_with(
    path: &Path,
    options: &memplan_formats::onnx::Options,
) -> Result<&'static Session, CliError> {
    let session = load_dump(path, options)?;
    // Before the scenario is read: every guessed dim is named (a `--set` binds it anyway).
    for w in &session.warnings_for(&Scenario::default()) {
        eprintln!("memplan: warning: {}: {}", path.display(), one_line(w));
    }
    Ok(Box::leak(Box::new(session)))
}

fn write_out(output: Option<&Path>, text: &str) -> Result<(), CliError> {
    match output {
        Some(path) => std::fs::write(path, text).map_err(|error| CliError::Io {
            path: display(path),
            error,
        }),
        None => {
            out!("{text}");
            Ok(())
        }
    }
}

/// `memplan plan` of a program: every routine under the same scenario.
fn plan_program(file: &Path, scenario: Scenario, json: bool) -> Result<ExitCode, CliError> {
    let session = ProgramSession::load(&read_bytes(file)?, &display(file))?;
    session.check_scenario(&scenario)?;
    for w in &session.warnings {
        eprintln!("memplan: warning: {}: {}", file.display(), one_line(w));
    }
    let outcome = session.plan(&|_| scenario.clone())?;
    let report = session.report(&outcome);
    if json {
        print_json(&report);
    } else {
        out!("{}", human::program_table(&report));
    }
    if !report.valid {
        eprintln!("memplan: BUG: a routine's plan failed the checker");
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Validate { file } => {
            let session = match open(&file) {
                Err(CliError::Engine(EngineError::Format {
                    error: FormatError::IsProgram,
                    ..
                })) => {
                    let program = ProgramSession::load(&read_bytes(&file)?, &display(&file))?;
                    outln!(
                        "{}: valid memplan JSON program: {} contexts, {} routines, {} events, {} devices",
                        file.display(),
                        program.program.contexts.len(),
                        program.routines.len(),
                        program.program.events.len(),
                        program.devices.len()
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                other => other?,
            };
            let c = session.counts();
            outln!(
                "{}: valid {} dump: {} tensors, {} steps, {} loops, {} devices, {} buffers over {} positions",
                file.display(),
                session.format.name(),
                c.tensors,
                c.steps,
                c.loops,
                c.devices,
                c.buffers,
                c.positions
            );
        }
        Command::Plan {
            file,
            input_shape,
            scenario,
            time_limit,
            json,
        } => {
            let session = match open_with(&file, &onnx_options(&input_shape)) {
                Err(CliError::Engine(EngineError::Format {
                    error: FormatError::IsProgram,
                    ..
                })) => return plan_program(&file, scenario.scenario()?, json),
                other => other?,
            };
            let started = Instant::now();
            let deadline = time_limit.map(|ms| started + Duration::from_millis(ms));
            let mut past_deadline = || deadline.is_some_and(|d| Instant::now() >= d);
            let mut found = FoundAt::default();
            let mut hear = |p: Progress| found.hear(&p, started.elapsed().as_secs_f64() * 1e3);
            let mut control = Control {
                should_stop: Some(&mut past_deadline),
                progress: Some(&mut hear),
                ..Control::default()
            };
            let scenario = timed(scenario.scenario()?, time_limit);
            // The table prints the summary alone: no placement per buffer is built for it (a
            // million-row CSV's placements are 88 MB).
            let mut report = match json {
                true => PlanQuery(scenario.clone()).ask(session, &mut control)?,
                false => PlanReport {
                    summary: session.summary(&session.plan_with(&scenario, &mut control)?),
                    placements: Vec::new(),
                },
            };
            // The fields that vary run to run: only where `search` ran, whose users ask how
            // long the proof took and how soon the answer came; every other plan prints the
            // same bytes each time.
            if report.summary.nodes.is_some() {
                report.summary.elapsed_ms = Some(started.elapsed().as_millis() as u64);
                report.summary.found_ms = found.ms().map(|ms| ms as u64);
            }
            if json {
                print_json(&report);
            } else {
                out!("{}", human::plan_table(&report.summary));
            }
            if !report.summary.valid {
                eprintln!(
                    "memplan: BUG: the plan failed the checker: {}",
                    one_line(&report.summary.violations.join("; "))
                );
                return Ok(ExitCode::from(3));
            }
            if let Some(capacity) = scenario.capacity {
                let misses = capacity_misses(&report.summary, capacity);
                for miss in &misses {
                    eprintln!("memplan: {miss}");
                }
                if !misses.is_empty() {
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Command::Check {
            file,
            plan,
            scenario,
        } => {
            let session = open(&file)?;
            let plan = match plan {
                Some(p) => {
                    let text = String::from_utf8_lossy(&read_bytes(&p)?).into_owned();
                    let report = PlanReport::parse(&text).map_err(|error| CliError::Report {
                        path: display(&p),
                        error,
                    })?;
                    Some((display(&p), Box::new(report)))
                }
                None => None,
            };
            let query = CheckQuery {
                scenario: scenario.scenario()?,
                plan,
            };
            let checked = query.ask(session, &mut Control::default())?;
            if checked.violations.is_empty() {
                let aside = match checked.across_classes {
                    0 => String::new(),
                    n => format!(
                        " ({} of different dtypes in the same bytes, which precision classes keep apart: --no-precision-classes checks without them)",
                        human::counted(n, "buffer pair")
                    ),
                };
                outln!(
                    "{}: valid plan, {} buffers, {} bytes{aside}",
                    file.display(),
                    checked.buffers,
                    checked.footprint_bytes
                );
            } else {
                // The verdict first, on one line; then each violation on a line of its own.
                let count = checked.violations.len();
                eprintln!(
                    "memplan: {}: invalid plan: {}",
                    file.display(),
                    human::counted(count, "violation")
                );
                for v in &checked.violations {
                    eprintln!("{}: {}", file.display(), one_line(v));
                }
                return Ok(ExitCode::from(1));
            }
        }
        Command::Convert {
            file,
            input_shape,
            to,
            with_plan,
            scenario,
            output,
        } => {
            let session = open_with(&file, &onnx_options(&input_shape))?;
            let to = match to {
                ConvertTo::Json => Written::Json,
                ConvertTo::Minimalloc => Written::Minimalloc,
                ConvertTo::Tflite => {
                    let out = output.ok_or_else(|| CliError::BinaryToTerminal {
                        path: display(&file),
                    })?;
                    let outcome = session.plan(&scenario.scenario()?)?;
                    let written = session.tflite_with_plan(&read_bytes(&file)?, &outcome)?;
                    std::fs::write(&out, written).map_err(|error| CliError::Io {
                        path: display(&out),
                        error,
                    })?;
                    return Ok(ExitCode::SUCCESS);
                }
            };
            let query = ConvertQuery {
                to,
                with_plan: with_plan.then(|| scenario.scenario()).transpose()?,
                ordered: Some(scenario.scenario()?),
            };
            let text = query.ask(session, &mut Control::default())?;
            write_out(output.as_deref(), &text)?;
        }
        Command::Render {
            file,
            view,
            scenario,
            device_id,
            color_by,
            sort,
            search,
            arena_only,
            window,
            width,
            height,
            output,
        } => {
            let session = open(&file)?;
            let outcome = session.plan(&scenario.scenario()?)?;
            let model = session.view_model(&outcome);
            let device = match device_id {
                None => model.main_device(),
                Some(id) => model
                    .devices
                    .iter()
                    .position(|d| d.id == id)
                    .ok_or_else(|| CliError::NoDevice {
                        path: display(&file),
                        device: id,
                        known: model
                            .devices
                            .iter()
                            .map(|d| d.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })?,
            };
            let arena_only = match arena_only {
                ArenaOnly::Auto => model.always_live_dwarfs_arena(device),
                ArenaOnly::On => true,
                ArenaOnly::Off => false,
            };
            let options = SvgOptions {
                width,
                height,
                color_by,
                arena_only,
            };
            let svg = match view {
                View::Arena => arena_svg(&model, device, window, options),
                View::Timeline => {
                    let rows = model.rows(device, &search, sort, arena_only);
                    timeline_svg(&model, device, &rows, window.map(|v| (v.x0, v.x1)), options)
                }
            }
            .map_err(|error| CliError::Render {
                path: display(&file),
                error,
            })?;
            write_out(output.as_deref(), &svg)?;
        }
        Command::Bench(args) => bench::run(&args)?,
        Command::Diff {
            before,
            after,
            scenario,
            fail_above,
            json,
        } => {
            let scenario = scenario.scenario()?;
            let report = |file: &Path| -> Result<PlanReport, CliError> {
                let session = open(file)?;
                Ok(session.report(&session.plan(&scenario)?))
            };
            let d = memplan_engine::diff::diff(&report(&before)?, &report(&after)?);
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&d).expect("diffs serialize")
                );
            } else {
                out!("{}", human::diff_text(&d));
            }
            if let Some(limit) = fail_above
                && d.grew_past(limit)
            {
                eprintln!(
                    "memplan: the footprint grew past {limit}%: {} -> {} B",
                    d.before.footprint_bytes, d.after.footprint_bytes
                );
                return Ok(ExitCode::from(1));
            }
        }
        Command::Spaces {
            file,
            scenario,
            json,
        } => {
            let session = open(&file)?;
            let query = SpacesQuery {
                scenario: scenario.scenario()?,
                most: None,
            };
            let spaces = query.ask(session, &mut Control::default())?;
            if json {
                print_json(&spaces);
            } else {
                out!(
                    "{}",
                    human::spaces_table(&human::space_rows(&spaces), &spaces.counts)
                );
            }
            for d in &spaces.diagnostics {
                eprintln!("memplan: {}: {}", file.display(), one_line(d));
            }
            if !spaces.diagnostics.is_empty() {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Fit {
            file,
            target,
            max_candidates,
            scenario,
            json,
        } => {
            let query = FitQuery {
                scenario: scenario.scenario()?,
                target,
                max_candidates,
            };
            print_answer(open(&file)?, &query, json, human::fit_text)?;
        }
        Command::Sweep {
            file,
            points,
            exhaustive_max,
            scenario,
            json,
        } => {
            let query = SweepQuery {
                scenario: scenario.scenario()?,
                points: points.into(),
                exhaustive_most: exhaustive_max,
            };
            print_answer(open(&file)?, &query, json, human::sweep_table)?;
        }
        Command::Advise {
            file,
            scenario,
            json,
        } => {
            let query = AdviseQuery(scenario.scenario()?);
            print_answer(open(&file)?, &query, json, human::advice_table)?;
        }
        Command::Fits {
            file,
            param,
            scenario,
            json,
        } => {
            let query = FitsQuery {
                scenario: scenario.scenario()?,
                param: param.name,
                lo: param.lo,
                hi: param.hi,
            };
            print_answer(open(&file)?, &query, json, human::fits_text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks `query` of `session` and prints its answer: as `--json` gives it, or as `text` words it
/// with the milliseconds it took by the CLI's clock.
fn print_answer<Q: Ask>(
    session: &Session,
    query: &Q,
    json: bool,
    text: impl Fn(&Q::Answer, f64) -> String,
) -> Result<(), CliError>
where
    Q::Answer: serde::Serialize,
{
    let started = Instant::now();
    let answer = query.ask(session, &mut Control::default())?;
    let millis = started.elapsed().as_secs_f64() * 1e3;
    if json {
        print_json(&answer);
    } else {
        out!("{}", text(&answer, millis));
    }
    Ok(())
}

/// Prints an engine's answer as `--json` gives it.
fn print_json(answer: &impl serde::Serialize) {
    outln!(
        "{}",
        serde_json::to_string_pretty(answer).expect("answers serialize")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_limit_alone_lifts_the_work_limit() {
        let given = Scenario {
            work_limit: Some(1000),
            ..Scenario::default()
        };
        assert_eq!(timed(Scenario::default(), None).work_limit, None);
        assert_eq!(
            timed(Scenario::default(), Some(50)).work_limit,
            Some(u64::MAX)
        );
        assert_eq!(timed(given.clone(), Some(50)).work_limit, Some(1000));
        assert_eq!(timed(given, None).work_limit, Some(1000));
    }
}
