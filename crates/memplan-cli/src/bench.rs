//! `memplan bench`: every strategy on every instance, one table (footprint, ratio to the lower
//! bound, time), all measured side by side in one run.
//!
//! Instances: the minimalloc CSV files of folders, and synthetic problems of the requested
//! sizes. The synthetic generator is fixed-seed (SplitMix64), so every run plans the same
//! problems: `n` buffers over `n` positions; each starts at a uniform position and lives
//! 1 to 64 positions, or 1 in 50 of them up to a quarter of the schedule; sizes are log-uniform
//! from 256 B to 4 MiB in 256-byte steps; one dtype, alignment 256. The all-live instances
//! (`--all-live`) are the worst case for a greedy that lists what each buffer overlaps: every
//! buffer starts in the first half of the schedule and ends in the second, so all of them are
//! live at its middle.

use std::path::PathBuf;
use std::time::Instant;

use memplan_core::{Buffer, Lifetime, LiveInterval, PlanOptions, Problem, StrategyChoice, plan};
use memplan_engine::Scenario;
use memplan_human::{BenchRow, bench_table, median};

use crate::{CliError, one_of};

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Folders of minimalloc CSV files to plan (each `.csv` in them), e.g. tests/data/minimalloc.
    #[arg(long = "csv-dir")]
    csv_dirs: Vec<PathBuf>,
    /// Sizes of synthetic instances, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000", value_parser = clap::value_parser!(u64).range(0..=MAX_SYNTHETIC))]
    synthetic: Vec<u64>,
    /// Sizes of synthetic instances whose buffers are all live at once, comma-separated (0:
    /// none).
    #[arg(long = "all-live", value_delimiter = ',', default_value = "100000", value_parser = clap::value_parser!(u64).range(0..=MAX_SYNTHETIC))]
    all_live: Vec<u64>,
    /// Time importing and planning a synthetic ONNX model of this many MB (stored weights).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_ONNX_MB))]
    onnx_mb: Option<u64>,
    /// Time importing and planning synthetic ONNX Relu chains of these many nodes,
    /// comma-separated (every intermediate a remat candidate, as imported models have).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=MAX_SYNTHETIC))]
    onnx_chain: Vec<u64>,
    /// Also write that model to this file (for the browser's measurement).
    #[arg(long, requires = "onnx_mb")]
    write_onnx: Option<PathBuf>,
    /// Dumps to time rematerialization on (one toggle, a fit, a 32-point sweep), with first-fit.
    #[arg(long = "remat")]
    remat: Vec<PathBuf>,
    /// Dumps to plan under each order (given, lpmf, bfs, dfs, best): footprint and median time
    /// of each, side by side.
    #[arg(long = "orders")]
    orders: Vec<PathBuf>,
    /// Strategies to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_parser = one_of(&StrategyChoice::ALL, StrategyChoice::name))]
    strategies: Vec<StrategyChoice>,
    /// Plan each instance this many times in a row: the table shows the median time, and every
    /// run must plan the same layout.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000), conflicts_with_all = ["remat", "onnx_mb", "orders"])]
    repeat: u32,
    /// Print the rows as JSON, each with every run's time in order (the first run of a process
    /// is the one a cold start pays for).
    #[arg(long, conflicts_with_all = ["remat", "onnx_mb", "orders"])]
    json: bool,
}

/// The most buffers of a synthetic instance: a plan of that many takes a few GB.
const MAX_SYNTHETIC: u64 = 10_000_000;

/// The largest synthetic ONNX model, MB: its weights are held in memory.
const MAX_ONNX_MB: u64 = 4096;

/// Runs `f` `runs` times: its result and each run's milliseconds, in order. A result that
/// differs from the first run's is an error: a plan must not depend on what ran before it.
fn timed<T: PartialEq>(
    what: &str,
    runs: u32,
    mut f: impl FnMut() -> Result<T, CliError>,
) -> Result<(T, Vec<f64>), CliError> {
    let mut millis = Vec::with_capacity(runs as usize);
    let mut first = None;
    for _ in 0..runs {
        let start = Instant::now();
        let result = f()?;
        millis.push(start.elapsed().as_secs_f64() * 1e3);
        match &first {
            None => first = Some(result),
            Some(first) if *first == result => {}
            Some(_) => {
                return Err(CliError::Nondeterministic {
                    what: what.to_string(),
                });
            }
        }
    }
    Ok((first.expect("at least one run"), millis))
}

struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The synthetic instance of `n` buffers described in the module docs.
pub fn synthetic(n: usize) -> Problem {
    let positions = n.max(1) as u64;
    generate(n, positions, |rng| {
        let first = rng.next() % positions;
        let length = if rng.next().is_multiple_of(50) {
            1 + rng.next() % (positions / 4).max(1)
        } else {
            1 + rng.next() % 64
        };
        (first, (first + length - 1).min(positions - 1))
    })
}

/// The all-live instance of `n` buffers described in the module docs.
pub fn all_live(n: usize) -> Problem {
    let half = (n as u64 / 2).max(1);
    generate(n, 2 * half, |rng| {
        (rng.next() % half, half + rng.next() % half)
    })
}

/// `n` buffers over `positions`, each live over `interval(rng)`, sized as the module docs say.
fn generate(
    n: usize,
    positions: u64,
    mut interval: impl FnMut(&mut SplitMix64) -> (u64, u64),
) -> Problem {
    let mut rng = SplitMix64(n as u64);
    let buffers = (0..n)
        .map(|_| {
            let (first, last) = interval(&mut rng);
            // log2 of the size, uniform in [8, 22].
            let log = 8.0 + (rng.next() % 1_000_000) as f64 / 1_000_000.0 * 14.0;
            let size = ((2f64.powf(log) as u64) / 256).max(1) * 256;
            let live = LiveInterval::new(first as u32, last as u32);
            // Aligned to 256 bytes (2^8).
            Buffer::new(0, size, 8, None, Lifetime::Live(live))
        })
        .collect();
    Problem {
        device_ids: vec!["device0".into()],
        positions: positions as u32,
        buffers,
        names: (0..n).map(|i| format!("b{i}").into()).collect(),
        position_times: Vec::new(),
    }
}

/// Times rematerialization on `file`: the baseline plan, one toggle (a plan with one candidate
/// flipped: liveness re-derived, relaid out and checked), a fit to 80% of the baseline with the
/// default candidate cap, and a 32-point sweep; all with first-fit. Each is run several times
/// (every run from scratch: a session keeps no plan between calls) and the median reported,
/// since one run on a shared machine says little.
fn remat_rows(file: &std::path::Path) -> Result<String, CliError> {
    let session = crate::open(file)?;
    let scenario = Scenario {
        strategy: memplan_core::Strategy::FirstFit.into(),
        ..Scenario::default()
    };
    let name = file
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let median_of = |runs: u32, f: &mut dyn FnMut() -> Result<String, CliError>| {
        timed(&name, runs, f).map(|(what, millis)| (what, runs, median(&millis)))
    };
    let candidates = session.candidates(&scenario)?;
    let mut rows = Vec::new();
    rows.push((
        "baseline plan",
        median_of(5, &mut || {
            Ok(format!(
                "footprint {}",
                session.plan(&scenario)?.plan.footprint_bytes()
            ))
        })?,
    ));
    if let Some(c) = candidates.first() {
        let flip = Scenario {
            flips: vec![session.graph.tensors[c.tensor].id.to_string()],
            ..scenario.clone()
        };
        rows.push((
            "one toggle",
            median_of(21, &mut || {
                Ok(format!(
                    "footprint {} with {} flipped",
                    session.plan(&flip)?.plan.footprint_bytes(),
                    flip.flips[0]
                ))
            })?,
        ));
    }
    let baseline = session.plan(&scenario)?.plan.footprint_bytes();
    let budget = baseline / 5 * 4;
    let fit = median_of(5, &mut || {
        let f = session.fit(&scenario, memplan_core::remat::Target::Bytes(budget), None)?;
        Ok(format!(
            "target {budget}: footprint {}, {} flips, {} considered, {} cut, within target: {}",
            f.final_bytes,
            f.flips.len(),
            f.considered,
            f.dropped,
            f.within_target
        ))
    })?;
    rows.push(("fit, every candidate", fit));
    let sweep = median_of(3, &mut || {
        let s = session.sweep(&scenario, 32, 20)?;
        Ok(format!(
            "{} points over {} candidates{}",
            s.points.len(),
            s.candidates,
            if s.exhaustive.is_some() {
                ", exhaustive optimum computed"
            } else {
                ""
            }
        ))
    })?;
    rows.push(("32-point sweep", sweep));
    let mut out = format!(
        "| {name} ({} tensors, {} candidates) | what | runs | median time (ms) |\n|---|---|---:|---:|\n",
        session.graph.tensors.len(),
        candidates.len()
    );
    for (task, (what, runs, ms)) in rows {
        out.push_str(&format!("| {task} | {what} | {runs} | {ms:.1} |\n"));
    }
    Ok(out)
}

/// The table of `--orders`: per dump, each order's footprint (the default strategy) and the
/// median time of five plans under it, loading excluded; `best`'s gain over the given order.
fn order_rows(files: &[PathBuf]) -> Result<String, CliError> {
    use memplan_core::order::Order;
    let mut out = String::from(
        "| dump | steps | given | lpmf | bfs | dfs | best | best / given |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for file in files {
        let session = crate::open(file)?;
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut cells = Vec::new();
        let mut footprints = Vec::new();
        for order in Order::ALL {
            let scenario = Scenario {
                order,
                ..Scenario::default()
            };
            let (footprint, millis) = timed(&name, 5, || {
                let outcome = session.plan(&scenario)?;
                if let Some(v) = outcome.plan.violations.first() {
                    return Err(CliError::CheckerRefused {
                        what: format!("{name} under order {order}"),
                        violation: v.to_string(),
                    });
                }
                Ok(outcome.plan.footprint_bytes())
            })?;
            footprints.push(footprint);
            cells.push(format!(
                "{} ({:.1} ms)",
                memplan_human::bytes(footprint),
                median(&millis)
            ));
        }
        out.push_str(&format!(
            "| {name} | {} | {} | {} |\n",
            session.graph.step_count(),
            cells.join(" | "),
            memplan_human::ratio(footprints[4], footprints[0])
        ));
    }
    Ok(out)
}

/// The table of `--onnx-chain`: per chain, the model's bytes, the load (decode, shape
/// inference, resolve, liveness) and a plan, each timed once.
fn chain_rows(lengths: &[u64]) -> Result<String, CliError> {
    let mut out = String::from(
        "| ONNX Relu chain | bytes | load (ms) | plan, best (ms) | footprint | valid |\n|---:|---:|---:|---:|---:|---|\n",
    );
    for &n in lengths {
        let bytes = memplan_formats::onnx::relu_chain(n as usize);
        let start = Instant::now();
        let session = memplan_engine::Session::load(&bytes, "chain.onnx")?;
        let load_ms = start.elapsed().as_secs_f64() * 1e3;
        let start = Instant::now();
        let outcome = session.plan(&Scenario::default())?;
        let plan_ms = start.elapsed().as_secs_f64() * 1e3;
        out.push_str(&format!(
            "| {n} nodes | {} | {load_ms:.0} | {plan_ms:.0} | {} | {} |\n",
            bytes.len(),
            outcome.plan.footprint_bytes(),
            if outcome.plan.is_valid() { "yes" } else { "NO" }
        ));
    }
    Ok(out)
}

pub fn run(args: &BenchArgs) -> Result<(), CliError> {
    if !args.onnx_chain.is_empty() {
        out!("{}", chain_rows(&args.onnx_chain)?);
        return Ok(());
    }
    if !args.orders.is_empty() {
        out!("{}", order_rows(&args.orders)?);
        return Ok(());
    }
    if let Some(mb) = args.onnx_mb {
        let bytes = memplan_formats::onnx::synthetic_model(mb);
        if let Some(path) = &args.write_onnx {
            std::fs::write(path, &bytes).map_err(|error| CliError::Io {
                path: path.display().to_string(),
                error,
            })?;
        }
        let start = Instant::now();
        let session = memplan_engine::Session::load(&bytes, "synthetic.onnx")?;
        let import_ms = start.elapsed().as_secs_f64() * 1e3;
        let start = Instant::now();
        let outcome = session.plan(&Scenario::default())?;
        let plan_ms = start.elapsed().as_secs_f64() * 1e3;
        outln!(
            "| ONNX model | bytes | nodes | import (ms) | plan, best (ms) | footprint | valid |"
        );
        outln!("|---|---:|---:|---:|---:|---:|---|");
        outln!(
            "| synthetic {mb} MB | {} | {} | {import_ms:.1} | {plan_ms:.1} | {} | {} |",
            bytes.len(),
            session.graph.step_count(),
            outcome.plan.footprint_bytes(),
            if outcome.plan.is_valid() { "yes" } else { "NO" }
        );
        return Ok(());
    }
    if !args.remat.is_empty() {
        for file in &args.remat {
            outln!("{}", remat_rows(file)?);
        }
        return Ok(());
    }
    let strategies = if args.strategies.is_empty() {
        StrategyChoice::ALL.to_vec()
    } else {
        args.strategies.clone()
    };
    let mut rows = Vec::new();
    // Files plan through the engine, exactly as `memplan plan` does; the clock is the CLI's.
    for dir in &args.csv_dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|error| CliError::Io {
                path: dir.display().to_string(),
                error,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "csv"))
            .collect();
        files.sort();
        for file in files {
            let session = crate::open(&file)?;
            let name = file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            for &strategy in &strategies {
                let scenario = Scenario {
                    strategy,
                    ..Scenario::default()
                };
                let (outcome, millis) =
                    timed(&format!("{name} with {strategy}"), args.repeat, || {
                        Ok(session.plan(&scenario)?)
                    })?;
                rows.push(BenchRow::new(
                    &name,
                    session.problem(),
                    strategy,
                    &outcome.plan,
                    millis,
                    true,
                ));
            }
        }
    }
    let generated = (args
        .synthetic
        .iter()
        .map(|&n| (format!("synthetic-{n}"), synthetic(n as usize))))
    .chain(
        args.all_live
            .iter()
            .map(|&n| (format!("all-live-{n}"), all_live(n as usize))),
    )
    .filter(|(_, problem)| !problem.buffers.is_empty());
    for (name, problem) in generated {
        for &strategy in &strategies {
            let options = PlanOptions {
                strategy,
                ..PlanOptions::default()
            };
            let (plan, millis) = timed(&format!("{name} with {strategy}"), args.repeat, || {
                plan(&problem, &options).map_err(|error| {
                    CliError::from(memplan_engine::EngineError::Plan {
                        input: name.clone(),
                        error,
                    })
                })
            })?;
            rows.push(BenchRow::new(
                &name, &problem, strategy, &plan, millis, false,
            ));
        }
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("bench rows serialize")
        );
    } else {
        out!("{}", bench_table(&rows));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_runs_each_time_and_refuses_a_result_that_changes() {
        let mut calls = 0;
        let (result, millis) = timed("same", 4, || {
            calls += 1;
            Ok(7)
        })
        .unwrap();
        assert_eq!((result, millis.len(), calls), (7, 4, 4));
        let mut n = 0;
        let changing = timed("changing", 3, || {
            n += 1;
            Ok(n / 2)
        });
        assert!(
            matches!(&changing, Err(CliError::Nondeterministic { what }) if what == "changing"),
            "{:?}",
            changing.map(|(result, _)| result)
        );
    }
}
