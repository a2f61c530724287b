//! The remat planner against the seed's cases, the exact ratio order, and random graphs.

use super::*;
use crate::graph::Id;
use crate::graph::testing::{self, tensor};
use crate::graph::{Step, Tensor};
use crate::layout::Strategy;
use crate::liveness::analyze_flipped;
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

#[test]
fn the_ratio_order_is_exact_on_every_small_case_signs_included() {
    for ra in -12i128..=12 {
        for rb in -12i128..=12 {
            for ca in 1u64..=12 {
                for cb in 1u64..=12 {
                    let expected = (ra * i128::from(cb)).cmp(&(rb * i128::from(ca)));
                    assert_eq!(
                        compare_relief_ratio(ra, ca, rb, cb),
                        expected,
                        "{ra}/{ca} vs {rb}/{cb}"
                    );
                }
            }
        }
    }
    // Large magnitudes, whose cross products would not fit in i128: (M-1)/M > (M-2)/(M-1).
    let m = i128::from(u64::MAX);
    assert_eq!(
        compare_relief_ratio(m - 1, u64::MAX, m - 2, u64::MAX - 1),
        Ordering::Greater
    );
    assert_eq!(
        compare_relief_ratio(-(m - 1), u64::MAX, -(m - 2), u64::MAX - 1),
        Ordering::Less
    );
    assert_eq!(compare_relief_ratio(-m, 1, -m + 1, 1), Ordering::Less);
}

fn input(id: &str, bytes: u64) -> Tensor {
    Tensor {
        kind: TensorKind::Input,
        ..tensor(id, bytes)
    }
}

fn step(id: &str, reads: &[&str], writes: &[&str], cost: u64) -> Step {
    Step {
        cost,
        ..testing::step(id, reads, writes)
    }
}

fn first_fit() -> PlanOptions {
    PlanOptions {
        strategy: Strategy::FirstFit.into(),
        ..PlanOptions::default()
    }
}

/// Fits `g` (with derived candidates) and checks the invariants every fit holds.
fn fit(g: &Graph, target: Target) -> (FitResult, Vec<String>) {
    let resolved = g.resolve().unwrap();
    let liveness = crate::analyze(g, &resolved);
    let options = first_fit();
    let r = Rematerializer::new(g, &resolved, &options, candidates(g, &resolved, &liveness));
    let result = r.fit(target, None).unwrap();
    let reliefs: i128 = result.flips.iter().map(|f| f.relief_bytes).sum();
    assert_eq!(
        reliefs,
        i128::from(result.baseline_bytes) - i128::from(result.final_bytes)
    );
    assert_eq!(
        r.score(&result.tensors()).unwrap(),
        result.final_bytes,
        "final is the flips' score"
    );
    // Round one's scores: each candidate considered, alone, in the order round two tried them.
    assert_eq!(result.solo.len(), result.considered);
    for s in &result.solo {
        let alone = r.score(&[s.tensor]).unwrap();
        assert_eq!(
            s.relief_bytes,
            i128::from(result.baseline_bytes) - i128::from(alone)
        );
    }
    assert!(result.solo.windows(2).all(|w| compare_relief_ratio(
        w[0].relief_bytes,
        w[0].recompute_cost.max(1),
        w[1].relief_bytes,
        w[1].recompute_cost.max(1)
    ) != std::cmp::Ordering::Less));
    let names = result
        .tensors()
        .iter()
        .map(|&t| g.tensors[t].id.to_string())
        .collect();
    (result, names)
}

/// Two tensors pinning the same peak: each frees nothing alone, both together free it.
fn twin_peaks() -> Graph {
    Graph {
        tensors: vec![
            input("a", 8),
            tensor("x", 1000),
            tensor("u", 10),
            tensor("y", 1000),
            tensor("v", 10),
        ],
        steps: vec![
            step("px", &["a"], &["x"], 5),
            step("cx", &["x"], &["u"], 1),
            step("py", &["a"], &["y"], 5),
            step("cy", &["y"], &["v"], 1),
        ],
        ..Graph::default()
    }
}

#[test]
fn candidates_make_the_uses_only_for_a_step_that_passes_the_other_tests() {
    let g = twin_peaks();
    let resolved = g.resolve().unwrap();
    let liveness = crate::analyze(&g, &resolved);
    let found: Vec<usize> = (candidates(&g, &resolved, &liveness).iter())
        .map(|c| c.tensor)
        .collect();
    assert_eq!(found, [1, 3]);
    assert!(liveness.uses_made());
    // A dump that lists its candidates (none), and one whose steps each write an input.
    let listed = Graph {
        remat_candidates: Some(Vec::new()),
        ..twin_peaks()
    };
    let mut inputs = twin_peaks();
    for t in &mut inputs.tensors {
        t.kind = crate::graph::TensorKind::Input;
    }
    for g in [listed, inputs] {
        let resolved = g.resolve().unwrap();
        let liveness = crate::analyze(&g, &resolved);
        assert!(candidates(&g, &resolved, &liveness).is_empty());
        assert!(!liveness.uses_made());
    }
}

#[test]
fn two_tensors_pinning_the_same_peak_commit_as_a_group() {
    let g = twin_peaks();
    let (r, flips) = fit(&g, Target::Minimize);
    assert_eq!(flips, vec!["x", "y"]);
    // The always-live input's 8 bytes stay.
    assert_eq!((r.baseline_bytes, r.final_bytes), (1018, 18));
    // The held flip carries 0, the closing flip the group's whole relief.
    assert_eq!(r.flips[0].relief_bytes, 0);
    assert_eq!(r.flips[1].relief_bytes, 1000);
    assert!(matches!(r.log[0], Event::Held { .. }));
    assert!(matches!(
        r.log[1],
        Event::GroupCommitted {
            relief_bytes: 1000,
            ..
        }
    ));
    assert_eq!((r.considered, r.dropped), (2, 0));
}

#[test]
fn a_budget_already_met_takes_no_flips() {
    let (r, flips) = fit(&twin_peaks(), Target::Bytes(5000));
    assert!(flips.is_empty() && r.within_target);
    assert_eq!((r.considered, r.final_bytes), (0, r.baseline_bytes));
    // Out of reach: an outcome, not an error.
    let (r, _) = fit(&twin_peaks(), Target::Bytes(1));
    assert!(!r.within_target);
    assert_eq!(r.final_bytes, 18);
}

#[test]
fn a_candidate_with_negative_relief_is_never_paid_for() {
    // Inlining `x` makes the 1000-byte `big` live until x's reader, at the peak of `y`. Neither
    // `big` nor `y` is a candidate (their steps write two tensors).
    let g = Graph {
        tensors: vec![
            input("a", 8),
            tensor("big", 1000),
            tensor("side", 1),
            tensor("x", 10),
            tensor("y", 1500),
            tensor("side2", 1),
            tensor("z", 1),
        ],
        steps: vec![
            step("pbig", &["a"], &["big", "side"], 1),
            step("px", &["big"], &["x"], 1),
            step("py", &["a"], &["y", "side2"], 1),
            step("cy", &["y", "x"], &["z"], 1),
        ],
        ..Graph::default()
    };
    let resolved = g.resolve().unwrap();
    let options = first_fit();
    let r = Rematerializer::new(
        &g,
        &resolved,
        &options,
        candidates(&g, &resolved, &crate::analyze(&g, &resolved)),
    );
    let x = resolved.tensor_of(&g, "x").unwrap();
    let solo = i128::from(r.score(&[]).unwrap()) - i128::from(r.score(&[x]).unwrap());
    assert!(solo < 0, "inlining x costs bytes: {solo}");
    let (result, flips) = fit(&g, Target::Minimize);
    assert!(flips.is_empty(), "{:?}", result.log);
    assert_eq!(
        result.log,
        vec![
            Event::Held { tensor: x },
            Event::UnpaidDiscarded { tensors: vec![x] }
        ]
    );
    assert_eq!(result.final_bytes, result.baseline_bytes);
}

#[test]
fn the_cut_keeps_the_cheapest_and_reports_the_rest() {
    let g = twin_peaks();
    let resolved = g.resolve().unwrap();
    let options = first_fit();
    let mut cands = candidates(&g, &resolved, &crate::analyze(&g, &resolved));
    cands[1].recompute_cost = 99;
    let r = Rematerializer::new(&g, &resolved, &options, cands);
    let result = r.fit(Target::Minimize, Some(1)).unwrap();
    assert_eq!((result.considered, result.dropped), (1, 1));
    // Alone, x frees nothing: held, then discarded unpaid.
    assert!(result.flips.is_empty());
    assert!(matches!(
        result.log.last(),
        Some(Event::UnpaidDiscarded { .. })
    ));
}

#[test]
fn inlining_moves_the_producers_inputs_to_the_uses() {
    let g = Graph {
        tensors: vec![
            tensor("a", 100),
            tensor("x", 10),
            tensor("y", 10),
            tensor("z", 10),
        ],
        steps: vec![
            step("pa", &[], &["a"], 1),
            step("px", &["a"], &["x"], 1),
            step("mid", &[], &["y"], 1),
            step("use", &["x", "y"], &["z"], 1),
        ],
        ..Graph::default()
    };
    let resolved = g.resolve().unwrap();
    let mut flags = vec![false; 4];
    flags[1] = true;
    let l = analyze_flipped(&g, &resolved, &flags);
    let named = l.named(&g);
    let spans: Vec<(Id, crate::Lifetime)> = (named.names.into_iter())
        .zip(named.buffers.iter().map(crate::problem::Buffer::lifetime))
        .collect();
    let at = |a, b| crate::Lifetime::Live(crate::LiveInterval::new(a, b));
    // `a` now lives until `use` recomputes x from it; x has no storage; px takes nothing.
    assert_eq!(
        spans,
        vec![
            ("a".into(), at(0, 3)),
            ("y".into(), at(2, 3)),
            ("z".into(), at(3, 3))
        ]
    );
    assert_eq!(l.flipped, vec![1]);
}

/// Candidates read by one final step, all live at its peak: inlining one frees its bytes and
/// costs its step's cost (their producer reads only the always-live input).
fn all_at_the_peak(candidates: &[(&str, u64, u64)]) -> Graph {
    let mut tensors = vec![input("a", 8)];
    let mut steps = Vec::new();
    for &(id, bytes, cost) in candidates {
        tensors.push(tensor(id, bytes));
        steps.push(step(&format!("p{id}"), &["a"], &[id], cost));
    }
    tensors.push(tensor("out", 10));
    let reads: Vec<&str> = candidates.iter().map(|c| c.0).collect();
    steps.push(step("use", &reads, &["out"], 1));
    Graph {
        tensors,
        steps,
        ..Graph::default()
    }
}

#[test]
fn the_budget_is_closed_by_the_cheapest_flip_that_closes_it() {
    // x relieves 1000 B for 10 (ratio 100), y 300 B for 5 (ratio 60): x ranks first, but 200 B
    // is all the budget asks, and y gives it for half the cost.
    let g = all_at_the_peak(&[("x", 1000, 10), ("y", 300, 5)]);
    let (r, flips) = fit(&g, Target::Bytes(1318 - 200));
    assert_eq!(r.baseline_bytes, 1318);
    assert_eq!(flips, vec!["y"]);
    assert_eq!(
        r.log,
        vec![
            Event::ClosedCheaper {
                tensor: 2,
                instead: vec![1],
                relief_bytes: 300
            },
            Event::TargetMet {
                footprint_bytes: 1018
            }
        ]
    );
    assert_eq!(r.recompute_cost(), 5);
    // Needing more than y frees, x closes it.
    let (_, flips) = fit(&g, Target::Bytes(1318 - 400));
    assert_eq!(flips, vec!["x"]);
}

#[test]
fn flips_the_met_budget_no_longer_needs_are_pruned() {
    // p and q rank first (ratio 100) but free 200 B together; r (ratio 20) then meets the
    // 500 B the budget asks alone, so p and q, accepted before it, are pruned.
    let g = all_at_the_peak(&[("p", 100, 1), ("q", 100, 1), ("r", 1000, 50)]);
    let (r, flips) = fit(&g, Target::Bytes(1218 - 500));
    assert_eq!(flips, vec!["r"]);
    assert_eq!((r.final_bytes, r.recompute_cost()), (218, 50));
    assert_eq!(r.flips[0].relief_bytes, 1000);
    let pruned: Vec<usize> = r
        .log
        .iter()
        .filter_map(|e| match e {
            Event::Pruned { tensor, .. } => Some(*tensor),
            _ => None,
        })
        .collect();
    // The most expensive first, then the later accepted: r cannot go, q can, then p.
    assert_eq!(pruned, vec![2, 1]);
    // Minimize takes every flip that helps and prunes none.
    let (_, flips) = fit(&g, Target::Minimize);
    assert_eq!(flips, vec!["p", "q", "r"]);
}

/// A random chain-like graph: each step reads up to two earlier tensors and writes one.
fn arb_graph() -> impl proptest::strategy::Strategy<Value = Graph> {
    prop::collection::vec(
        (
            1u64..200,
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            1u64..9,
        ),
        3..12,
    )
    .prop_map(|spec| {
        let mut tensors = vec![input("in", 16)];
        let mut steps = Vec::new();
        for (k, (bytes, r1, r2, cost)) in spec.into_iter().enumerate() {
            let id = format!("t{k}");
            let reads: Vec<Id> = [r1, r2]
                .iter()
                .map(|r| tensors[r.index(tensors.len())].id.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            tensors.push(tensor(&id, bytes * 8));
            steps.push(Step {
                id: format!("s{k}").into(),
                reads,
                writes: vec![id.into()],
                cost,
                ..Step::default()
            });
        }
        Graph {
            tensors,
            steps,
            ..Graph::default()
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn fits_keep_their_invariants_on_random_graphs(g in arb_graph(), budget in 0u64..3000) {
        for target in [Target::Minimize, Target::Bytes(budget)] {
            let (r, _) = fit(&g, target);
            prop_assert!(r.final_bytes <= r.baseline_bytes);
            if let Target::Bytes(b) = target {
                prop_assert_eq!(r.within_target, r.final_bytes <= b);
            }
            // No flip is committed with a negative marginal relief, unless pruning others
            // left it in a set whose prefixes it does not improve (its relief is its marginal
            // one in acceptance order, and needed with the flips after it).
            if !r.log.iter().any(|e| matches!(e, Event::Pruned { .. })) {
                prop_assert!(r.flips.iter().all(|f| f.relief_bytes >= 0));
            }
        }
    }

    #[test]
    fn a_met_budget_needs_every_flip_it_keeps(g in arb_graph(), budget in 0u64..3000) {
        let resolved = g.resolve().unwrap();
        let options = first_fit();
        let cands = candidates(&g, &resolved, &crate::analyze(&g, &resolved));
        let remat = Rematerializer::new(&g, &resolved, &options, cands);
        let r = remat.fit(Target::Bytes(budget), None).unwrap();
        if r.within_target {
            let tensors = r.tensors();
            for k in 0..tensors.len() {
                let mut rest = tensors.clone();
                rest.remove(k);
                prop_assert!(remat.score(&rest).unwrap() > budget, "{} is not needed", tensors[k]);
            }
        }
    }
}

/// Each point of a sweep against the fit at its budget, in a rematerializer of its own (no
/// scores shared with the sweep's): flips, footprint, cost. Returns how many of those fits
/// pruned a flip.
fn sweep_points_are_fits(g: &Graph, points: usize) -> usize {
    let resolved = g.resolve().unwrap();
    let options = first_fit();
    let liveness = crate::analyze(g, &resolved);
    let remat = || Rematerializer::new(g, &resolved, &options, candidates(g, &resolved, &liveness));
    let sweep = remat().sweep(points, None).unwrap();
    assert_eq!(sweep.len(), points);
    let mut pruned = 0;
    for p in &sweep {
        let r = remat().fit(Target::Bytes(p.target_bytes), None).unwrap();
        assert_eq!(p.flips, r.tensors(), "at {} B", p.target_bytes);
        assert_eq!(
            (p.footprint_bytes, p.recompute_cost, p.within_target),
            (r.final_bytes, r.recompute_cost(), r.within_target)
        );
        pruned += usize::from(r.log.iter().any(|e| matches!(e, Event::Pruned { .. })));
    }
    pruned
}

/// A sweep's fits leave their flips' reliefs as accepted after a prune (a point shows none):
/// each point is still the fit at its budget, here where most points prune.
#[test]
fn a_sweep_point_is_the_fit_at_its_budget() {
    let g = all_at_the_peak(&[
        ("p", 100, 1),
        ("q", 100, 1),
        ("r", 1000, 50),
        ("s", 300, 20),
    ]);
    assert!(sweep_points_are_fits(&g, 12) > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn sweep_points_are_fits_on_random_graphs(g in arb_graph(), points in 2usize..6) {
        sweep_points_are_fits(&g, points);
    }
}

/// Found by searching random graphs for the case (tensor indices count `in` as 0): `t3` adds
/// nothing on top of the accepted set and is held; with it, `t2` relieves less than alone, so the
/// group is harmful and discarded for good, and `t2` is accepted alone. Later `t0` is held and
/// commits with `t1`.
#[test]
fn a_harmful_held_group_is_discarded_and_the_candidate_stands_alone() {
    let g: Graph = serde_json::from_str(
        r#"{"tensors":[{"id":"in","bytes":16,"kind":"input"},{"id":"t0","bytes":344},{"id":"t1","bytes":304},
        {"id":"t2","bytes":728},{"id":"t3","bytes":192},{"id":"t4","bytes":936},{"id":"t5","bytes":1184},
        {"id":"t6","bytes":416}],"steps":[{"id":"s0","reads":["in"],"writes":["t0"],"cost":7},
        {"id":"s1","reads":["t0"],"writes":["t1"],"cost":8},{"id":"s2","reads":["in","t0"],"writes":["t2"],"cost":3},
        {"id":"s3","reads":["in","t2"],"writes":["t3"],"cost":2},{"id":"s4","reads":["t1","t3"],"writes":["t4"],"cost":8},
        {"id":"s5","reads":["in","t4"],"writes":["t5"],"cost":5},{"id":"s6","reads":["t1","t5"],"writes":["t6"],"cost":8}]}"#,
    )
    .unwrap();
    let (r, flips) = fit(&g, Target::Minimize);
    assert_eq!(
        r.log,
        vec![
            Event::Accepted {
                tensor: 6,
                relief_bytes: 768
            },
            Event::Accepted {
                tensor: 5,
                relief_bytes: 280
            },
            Event::Held { tensor: 4 },
            Event::GroupDiscarded {
                tensors: vec![4],
                against: 3
            },
            Event::Accepted {
                tensor: 3,
                relief_bytes: 464
            },
            Event::Held { tensor: 1 },
            Event::GroupCommitted {
                tensors: vec![1],
                closing: 2,
                relief_bytes: 304
            },
        ]
    );
    // The discarded flip is never reconsidered.
    assert!(!flips.contains(&"t3".to_string()));
    assert_eq!(flips, vec!["t5", "t4", "t2", "t0", "t1"]);
}
