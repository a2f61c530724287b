//! `memplan`: the command-line shell around memplan-core and memplan-formats.
//!
//! It reads files, calls the library and prints; it computes no number of its own, so what it
//! prints agrees to the byte with the web app. Errors are printed as one message (what, where,
//! why) with exit code 1; usage errors exit with 2.

mod bench;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use memplan_core::{Layout, Plan, PlanOptions, Problem, Strategy, check, liveness_of, plan};
use memplan_formats::report::PlanReport;
use memplan_formats::{Loaded, human, json, load, minimalloc};

#[derive(Parser)]
#[command(
    name = "memplan",
    version,
    about = "Plan and check where every buffer of an ML schedule lives"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum ConvertTo {
    Json,
    Minimalloc,
}

#[derive(Clone, Copy, ValueEnum)]
enum View {
    Timeline,
    Arena,
}

#[derive(clap::Args)]
struct PlanArgs {
    /// The layout strategy: first-fit, best-fit, tlsf, bump, search or best.
    #[arg(long, default_value = "best", value_parser = parse_strategy)]
    strategy: Strategy,
    /// Let tensors of different dtypes share bytes.
    #[arg(long)]
    no_precision_classes: bool,
    /// The largest pool, bytes.
    #[arg(long, default_value_t = memplan_core::DEFAULT_POOL_CAP)]
    pool_cap: u64,
}

impl PlanArgs {
    fn options(&self) -> PlanOptions {
        PlanOptions {
            strategy: self.strategy,
            precision_classes: !self.no_precision_classes,
            pool_cap: self.pool_cap,
            ..PlanOptions::default()
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Check a dump and print its counts.
    Validate { file: PathBuf },
    /// Plan a dump and print the plan (a table, or the report as JSON).
    Plan {
        file: PathBuf,
        #[command(flatten)]
        args: PlanArgs,
        /// Print the plan report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a plan (a `plan --json` report, or the offsets of a minimalloc CSV) against a dump.
    Check {
        file: PathBuf,
        /// The plan report to check; without it, the offsets the file itself gives.
        #[arg(long)]
        plan: Option<PathBuf>,
        /// Let tensors of different dtypes share bytes.
        #[arg(long)]
        no_precision_classes: bool,
        #[arg(long, default_value_t = memplan_core::DEFAULT_POOL_CAP)]
        pool_cap: u64,
    },
    /// Convert a dump to memplan JSON or minimalloc CSV.
    Convert {
        file: PathBuf,
        #[arg(long)]
        to: ConvertTo,
        /// Also plan it and write the offsets (minimalloc only).
        #[arg(long)]
        with_plan: bool,
        #[command(flatten)]
        args: PlanArgs,
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
        args: PlanArgs,
        /// The device to draw (an id; the first device when absent).
        #[arg(long)]
        device: Option<String>,
        /// Color buffers by `kind` or `dtype`.
        #[arg(long, default_value = "kind")]
        color_by: String,
        /// Order of the timeline rows: start, size or lifetime.
        #[arg(long, default_value = "start")]
        sort: String,
        #[arg(long, default_value_t = 1200)]
        width: u32,
        #[arg(long, default_value_t = 700)]
        height: u32,
        /// The output file; standard output when absent.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Measure every strategy on instances and print a table (peak, peak/LB, time).
    Bench(bench::BenchArgs),
}

fn parse_strategy(s: &str) -> Result<Strategy, String> {
    s.parse()
        .map_err(|e: memplan_core::layout::UnknownStrategy| e.to_string())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("memplan: {message}");
            ExitCode::from(1)
        }
    }
}

fn read(path: &Path) -> Result<Loaded, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    load(&bytes, &path.display().to_string()).map_err(|e| format!("{}: {e}", path.display()))
}

fn problem_of(loaded: &Loaded, path: &Path) -> Result<Problem, String> {
    liveness_of(&loaded.graph)
        .map(|l| l.problem)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn make_plan(problem: &Problem, options: &PlanOptions, path: &Path) -> Result<Plan, String> {
    plan(problem, options).map_err(|e| format!("{}: {e}", path.display()))
}

fn write_out(output: Option<&Path>, text: &str) -> Result<(), String> {
    match output {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Validate { file } => {
            let loaded = read(&file)?;
            let g = &loaded.graph;
            println!(
                "{}: valid {} dump: {} tensors, {} steps, {} loops, {} devices",
                file.display(),
                loaded.format.name(),
                g.tensors.len(),
                g.steps.len(),
                g.loops.len(),
                g.device_ids().len()
            );
        }
        Command::Plan { file, args, json } => {
            let loaded = read(&file)?;
            let problem = problem_of(&loaded, &file)?;
            let plan = make_plan(&problem, &args.options(), &file)?;
            let report = PlanReport::new(&problem, &plan);
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).expect("reports serialize")
                );
            } else {
                print!("{}", human::plan_table(&report));
            }
            if !report.valid {
                eprintln!(
                    "memplan: BUG: the plan failed the checker: {}",
                    report.violations.join("; ")
                );
                return Ok(ExitCode::from(3));
            }
        }
        Command::Check {
            file,
            plan: plan_file,
            no_precision_classes,
            pool_cap,
        } => {
            let loaded = read(&file)?;
            let problem = problem_of(&loaded, &file)?;
            let (pools, placements) = match plan_file {
                Some(p) => {
                    let text =
                        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                    PlanReport::parse(&text)
                        .and_then(|r| r.layout_for(&problem))
                        .map_err(|e| format!("{}: {e}", p.display()))?
                }
                None => given_layout(&loaded, &problem).ok_or_else(|| {
                    format!(
                        "{}: gives no offsets; pass --plan PLAN.json",
                        file.display()
                    )
                })?,
            };
            let pool_refs: Vec<&[memplan_core::Pool]> = pools.iter().map(Vec::as_slice).collect();
            let layout = Layout {
                pools: &pool_refs,
                placements: &placements,
            };
            let violations = check(&problem, layout, !no_precision_classes, pool_cap);
            if violations.is_empty() {
                let total: u64 = pools.iter().flatten().map(|p| p.bytes).sum();
                println!(
                    "{}: valid plan, {} buffers, {} bytes",
                    file.display(),
                    placements.len(),
                    total
                );
            } else {
                for v in &violations {
                    println!("{}: {v}", file.display());
                }
                return Ok(ExitCode::from(1));
            }
        }
        Command::Convert {
            file,
            to,
            with_plan,
            args,
            output,
        } => {
            let loaded = read(&file)?;
            let text = match to {
                ConvertTo::Json => json::write(&loaded.graph),
                ConvertTo::Minimalloc => {
                    let problem = problem_of(&loaded, &file)?;
                    if problem.device_ids.len() > 1 {
                        return Err(format!(
                            "{}: minimalloc CSV holds one device; this dump has several",
                            file.display()
                        ));
                    }
                    let plan = with_plan
                        .then(|| make_plan(&problem, &args.options(), &file))
                        .transpose()?;
                    let offsets = plan.map(|p| p.device_offsets(&problem));
                    minimalloc::write(&problem, offsets.as_deref())
                }
            };
            write_out(output.as_deref(), &text)?;
        }
        Command::Render {
            file,
            view,
            args,
            device,
            color_by,
            sort,
            width,
            height,
            output,
        } => {
            let loaded = read(&file)?;
            let at = |e: String| format!("{}: {e}", file.display());
            let resolved = loaded.graph.resolve().map_err(|e| at(e.to_string()))?;
            let liveness = memplan_core::analyze(&loaded.graph, &resolved);
            let plan = make_plan(&liveness.problem, &args.options(), &file)?;
            let model = memplan_render::ViewModel::new(&loaded.graph, &resolved, &liveness, &plan);
            let device = match device {
                None => 0,
                Some(id) => model
                    .devices
                    .iter()
                    .position(|d| d.id == id)
                    .ok_or_else(|| at(format!("no device `{id}`")))?,
            };
            let color_by = memplan_render::color::ColorBy::parse(&color_by)
                .ok_or_else(|| format!("--color-by: `{color_by}` is not kind or dtype"))?;
            let options = memplan_render::svg::SvgOptions {
                width,
                height,
                color_by,
            };
            let svg = match view {
                View::Arena => memplan_render::svg::arena_svg(&model, device, None, options),
                View::Timeline => {
                    let order = memplan_render::model::RowOrder::parse(&sort).ok_or_else(|| {
                        format!("--sort: `{sort}` is not start, size or lifetime")
                    })?;
                    let rows = model.rows(device, "", order);
                    memplan_render::svg::timeline_svg(&model, device, &rows, None, options)
                }
            }
            .map_err(|e| at(e.to_string()))?;
            write_out(output.as_deref(), &svg)?;
        }
        Command::Bench(args) => bench::run(&args)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The layout a file gives itself (minimalloc offsets): one arena pool per device, as tall as the
/// highest buffer end.
fn given_layout(
    loaded: &Loaded,
    problem: &Problem,
) -> Option<(Vec<Vec<memplan_core::Pool>>, Vec<memplan_core::Placement>)> {
    let offsets = loaded.offsets.as_ref()?;
    let live = liveness_of(&loaded.graph).ok()?;
    let placements: Vec<memplan_core::Placement> = live
        .buffer_tensor
        .iter()
        .map(|&t| memplan_core::Placement {
            pool: 0,
            offset: offsets[t],
        })
        .collect();
    let mut pools = vec![
        vec![memplan_core::Pool {
            role: memplan_core::PoolRole::Arena,
            bytes: 0
        }];
        problem.device_ids.len()
    ];
    for (b, p) in problem.buffers.iter().zip(&placements) {
        let end = p.offset.saturating_add(b.occupied_size());
        let pool = &mut pools[b.device][0];
        pool.bytes = pool.bytes.max(end);
    }
    Some((pools, placements))
}
