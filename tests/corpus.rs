//! The corpus: every real input of `../shared/data` listed in `corpus.toml`, planned with every
//! strategy, held to its published figures. The data folder is `$MEMPLAN_DATA`, or
//! `../shared/data` beside the repository.

use std::path::PathBuf;

use memplan_core::{
    Layout, Placement, PlanOptions, Pool, PoolRole, Strategy, check, liveness_of, plan,
};
use memplan_formats::load;
use serde::Deserialize;

#[derive(Deserialize)]
struct Corpus {
    minimalloc: Minimalloc,
}

#[derive(Deserialize)]
struct Minimalloc {
    best_mean_ratio_at_most: f64,
    file: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    path: String,
    buffers: usize,
    lower_bound: u64,
}

fn data_dir() -> PathBuf {
    let dir = std::env::var_os("MEMPLAN_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    assert!(
        dir.is_dir(),
        "the corpus data folder {} is missing: set MEMPLAN_DATA",
        dir.display()
    );
    dir
}

fn corpus() -> Corpus {
    toml::from_str(include_str!("corpus.toml")).expect("corpus.toml parses")
}

#[test]
fn minimalloc_files_have_their_published_lower_bounds_and_every_strategy_plans_them_validly() {
    let corpus = corpus();
    let mut best_ratios = Vec::new();
    for entry in &corpus.minimalloc.file {
        let path = data_dir().join(&entry.path);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let loaded = load(&bytes, &entry.path).unwrap();
        let problem = liveness_of(&loaded.graph).unwrap().problem;
        assert_eq!(problem.buffers.len(), entry.buffers, "{}", entry.path);
        for strategy in Strategy::ALL {
            let plan = plan(
                &problem,
                &PlanOptions {
                    strategy,
                    ..PlanOptions::default()
                },
            )
            .unwrap();
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
                plan.peak_bytes() >= entry.lower_bound,
                "{} {strategy}",
                entry.path
            );
            if strategy == Strategy::Best {
                best_ratios.push(plan.peak_bytes() as f64 / entry.lower_bound as f64);
            }
        }
    }
    let mean = best_ratios.iter().sum::<f64>() / best_ratios.len() as f64;
    assert!(
        mean <= corpus.minimalloc.best_mean_ratio_at_most,
        "best's mean peak/LB {mean:.3} over the minimalloc files exceeds {}",
        corpus.minimalloc.best_mean_ratio_at_most
    );
}

#[test]
fn minimalloc_offsets_round_trip_through_the_checker() {
    // Export `best`'s plan as minimalloc CSV with offsets, read it back, and check it.
    let entry = &corpus().minimalloc.file[0];
    let bytes = std::fs::read(data_dir().join(&entry.path)).unwrap();
    let problem = liveness_of(&load(&bytes, &entry.path).unwrap().graph)
        .unwrap()
        .problem;
    let plan = plan(&problem, &PlanOptions::default()).unwrap();
    let offsets = plan.device_offsets(&problem);
    let csv = memplan_formats::minimalloc::write(&problem, Some(&offsets));
    let again = load(csv.as_bytes(), "again.csv").unwrap();
    let read = again.offsets.expect("the offset column is read");
    assert_eq!(read, offsets);
    // The offsets, as one pool per device, pass the independent checker.
    let again = liveness_of(&again.graph).unwrap().problem;
    let placements: Vec<Placement> = read
        .iter()
        .map(|&offset| Placement { pool: 0, offset })
        .collect();
    let top = again
        .buffers
        .iter()
        .zip(&read)
        .map(|(b, &o)| o + b.occupied_size())
        .max()
        .unwrap_or(0);
    let pools = [Pool {
        role: PoolRole::Arena,
        bytes: top,
    }];
    let layout = Layout {
        pools: &[&pools],
        placements: &placements,
    };
    assert_eq!(check(&again, layout, true, u64::MAX), vec![]);
    assert_eq!(
        top,
        plan.peak_bytes(),
        "the file's own layout is as tall as the plan"
    );
    // And a buffer moved onto one it conflicts with does not.
    let span = |b: usize| again.buffers[b].span(again.positions);
    let other = (1..again.buffers.len())
        .find(|&b| span(b).overlaps(span(0)))
        .expect("a conflict with the first buffer");
    let mut broken = placements.clone();
    broken[other].offset = broken[0].offset;
    assert!(
        !check(
            &again,
            Layout {
                pools: &[&pools],
                placements: &broken
            },
            true,
            u64::MAX
        )
        .is_empty()
    );
}
