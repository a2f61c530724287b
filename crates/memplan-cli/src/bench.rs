//! `memplan bench`: every strategy on every instance, one table (peak, peak/LB, time).
//!
//! Instances: the minimalloc CSV files of a folder, and synthetic problems of the requested
//! sizes. The synthetic generator is fixed-seed (SplitMix64), so every run plans the same
//! problems: `n` buffers over `n` positions; each starts at a uniform position and lives
//! 1 to 64 positions, or 1 in 50 of them up to a quarter of the schedule; sizes are log-uniform
//! from 256 B to 4 MiB in 256-byte steps; one dtype, alignment 256.

use std::path::PathBuf;
use std::time::Instant;

use memplan_core::{Buffer, Lifetime, LiveInterval, PlanOptions, Problem, Strategy, plan};

use memplan_formats::human::ratio;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// A folder of minimalloc CSV files to plan.
    #[arg(long)]
    minimalloc: Option<PathBuf>,
    /// Sizes of synthetic instances, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    synthetic: Vec<usize>,
    /// Strategies to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_parser = crate::parse_strategy)]
    strategies: Vec<Strategy>,
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
    let mut rng = SplitMix64(n as u64);
    let positions = n.max(1) as u64;
    let buffers = (0..n)
        .map(|i| {
            let first = rng.next() % positions;
            let length = if rng.next().is_multiple_of(50) {
                1 + rng.next() % (positions / 4).max(1)
            } else {
                1 + rng.next() % 64
            };
            let last = (first + length - 1).min(positions - 1);
            // log2 of the size, uniform in [8, 22].
            let log = 8.0 + (rng.next() % 1_000_000) as f64 / 1_000_000.0 * 14.0;
            let size = ((2f64.powf(log) as u64) / 256).max(1) * 256;
            Buffer {
                name: format!("b{i}"),
                device: 0,
                size,
                alignment: 256,
                dtype: None,
                lifetime: Lifetime::Live(LiveInterval::new(first as u32, last as u32)),
            }
        })
        .collect();
    Problem {
        device_ids: vec!["device0".into()],
        positions: positions as u32,
        buffers,
    }
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    let mut instances: Vec<(String, Problem)> = Vec::new();
    if let Some(dir) = &args.minimalloc {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "csv"))
            .collect();
        files.sort();
        for file in files {
            let loaded = crate::read(&file)?;
            let name = file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            instances.push((name, crate::problem_of(&loaded, &file)?));
        }
    }
    for &n in &args.synthetic {
        instances.push((format!("synthetic-{n}"), synthetic(n)));
    }
    let strategies = if args.strategies.is_empty() {
        Strategy::ALL.to_vec()
    } else {
        args.strategies.clone()
    };

    println!(
        "| instance | buffers | strategy | peak | lower bound | peak/LB | time (ms) | valid |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---|");
    let mut ratios: Vec<(Strategy, f64)> = Vec::new();
    for (name, problem) in &instances {
        for &strategy in &strategies {
            let options = PlanOptions {
                strategy,
                ..PlanOptions::default()
            };
            let start = Instant::now();
            let plan = plan(problem, &options).map_err(|e| format!("{name}: {e}"))?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let (peak, lb) = (plan.peak_bytes(), plan.lower_bound_bytes());
            if name.ends_with(".csv") && lb > 0 {
                ratios.push((strategy, peak as f64 / lb as f64));
            }
            println!(
                "| {name} | {} | {strategy} | {peak} | {lb} | {} | {ms:.1} | {} |",
                problem.buffers.len(),
                ratio(peak, lb),
                if plan.is_valid() { "yes" } else { "NO" }
            );
        }
    }
    if !ratios.is_empty() {
        println!();
        println!("| strategy | mean peak/LB over the minimalloc files |");
        println!("|---|---:|");
        for &strategy in &strategies {
            let mine: Vec<f64> = ratios
                .iter()
                .filter(|(s, _)| *s == strategy)
                .map(|(_, r)| *r)
                .collect();
            println!(
                "| {strategy} | {:.3} |",
                mine.iter().sum::<f64>() / mine.len() as f64
            );
        }
    }
    Ok(())
}
