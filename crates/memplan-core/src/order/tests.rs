//! Orders against the independent checker, the live peak against liveness, and `best` against
//! every order it starts from.

use super::*;
use crate::check::{Violation, check_order};
use crate::graph::testing::{step, tensor};
use crate::graph::{Declaration, Id, Loop, Step, Tensor, TensorKind};
use crate::layout::Strategy;
use crate::liveness::analyze;
use crate::problem::Lifetime;
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

fn graph(tensors: Vec<Tensor>, steps: Vec<Step>) -> Graph {
    Graph {
        tensors,
        steps,
        ..Graph::default()
    }
}

/// A step order from step ids.
fn ids(g: &Graph, order: &[usize]) -> Vec<String> {
    order.iter().map(|&s| g.steps[s].id.to_string()).collect()
}

#[test]
fn reads_follow_writes_and_writes_follow_reads_through_views() {
    let mut v = tensor("v", 4);
    v.declared.view_of = Some("b".into());
    let g = graph(
        vec![tensor("a", 8), tensor("b", 8), v, tensor("c", 8)],
        vec![
            step("wa", &[], &["a"]),
            step("wb", &["a"], &["b"]),
            step("rv", &["v"], &["c"]),
            step("wb2", &[], &["b"]),
            step("ra", &["a"], &["c"]),
        ],
    );
    let r = g.resolve().unwrap();
    let deps = dependencies(&g, &r);
    // wb reads a (after wa); rv reads b through its view (after wb); wb2 writes b after the
    // read of its view and after wb's write; ra reads a (after wa) and writes c after rv's
    // write of c.
    assert_eq!(
        deps.preds,
        vec![vec![], vec![0], vec![1], vec![1, 2], vec![0, 2]]
    );
    assert_eq!(deps.succs[2], vec![3, 4]);
}

#[test]
fn pinned_steps_keep_their_order_and_loops_move_whole() {
    let mut g = graph(
        vec![
            tensor("a", 8),
            tensor("b", 8),
            tensor("c", 8),
            tensor("d", 8),
        ],
        vec![
            step("p1", &[], &["a"]),
            step("x", &[], &["b"]),
            step("l1", &[], &["c"]),
            step("l2", &["c"], &["c"]),
            step("p2", &[], &["d"]),
        ],
    );
    g.steps[0].pinned = true;
    g.steps[4].pinned = true;
    g.steps[2].loop_id = Some("L".into());
    g.steps[3].loop_id = Some("L".into());
    g.loops = vec![Loop {
        id: "L".into(),
        ..Loop::default()
    }];
    let r = g.resolve().unwrap();
    let deps = dependencies(&g, &r);
    assert_eq!(deps.preds.len(), 4, "the loop is one unit");
    assert_eq!(deps.preds[3], vec![0], "p2 after p1");
    // Running the loop first is valid; p2 before p1 is not, nor is a split loop.
    let ok = steps_in(&r, &[2, 0, 1, 3]);
    assert_eq!(ids(&g, &ok), ["l1", "l2", "p1", "x", "p2"]);
    assert_eq!(check_order(&g, &r, &ok), vec![]);
    let swapped = [4, 1, 2, 3, 0];
    assert_eq!(
        check_order(&g, &r, &swapped),
        vec![Violation::Dependency {
            storage: None,
            before: "p1".into(),
            after: "p2".into()
        }]
    );
    let split = [2, 0, 1, 3, 4];
    assert!(matches!(
        check_order(&g, &r, &split)[..],
        [Violation::LoopSplit { .. }, ..]
    ));
    assert_eq!(
        check_order(&g, &r, &[0, 1, 2]),
        vec![Violation::NotAReorder { steps: 3, given: 5 }]
    );
    assert_eq!(
        check_order(&g, &r, &[0, 0, 1, 2, 3]),
        vec![Violation::NotAReorder { steps: 5, given: 5 }]
    );
}

#[test]
fn the_checker_catches_a_read_moved_past_a_write() {
    let g = graph(
        vec![tensor("a", 8), tensor("b", 8)],
        vec![
            step("w", &[], &["a"]),
            step("r", &["a"], &["b"]),
            step("w2", &[], &["a"]),
        ],
    );
    let r = g.resolve().unwrap();
    assert_eq!(check_order(&g, &r, &[0, 1, 2]), vec![]);
    for broken in [[1, 0, 2], [0, 2, 1], [2, 0, 1]] {
        let v = check_order(&g, &r, &broken);
        assert!(
            matches!(&v[..], [Violation::Dependency { storage: Some(s), .. }] if s == "a"),
            "{broken:?}: {v:?}"
        );
    }
}

/// Two independent branches, a big one (x -> y) and a small one (p -> q), interleaved so that
/// both are live together.
fn two_branches() -> Graph {
    graph(
        vec![
            tensor("x", 100),
            tensor("y", 8),
            tensor("p", 100),
            tensor("q", 8),
        ],
        vec![
            step("x", &[], &["x"]),
            step("p", &[], &["p"]),
            step("y", &["x"], &["y"]),
            step("q", &["p"], &["q"]),
        ],
    )
}

#[test]
fn lpmf_runs_the_branch_that_frees_first() {
    // lpmf finishes one branch before it starts the other.
    let g = two_branches();
    let r = g.resolve().unwrap();
    let deps = dependencies(&g, &r);
    let takes = Takes::of(&r);
    assert_eq!(takes.peaks(&given(4)).0, vec![208]);
    let order = heuristic(Order::Lpmf, &deps, &takes);
    assert_eq!(order, vec![0, 2, 1, 3]);
    assert_eq!(takes.peaks(&order).0, vec![108], "each branch alone");
    assert_eq!(takes.floor(), vec![108]);
}

/// A random dump: steps read earlier tensors (or views of them), write new ones, sometimes
/// overwrite an earlier one in place; some steps are pinned, one run of steps is a loop.
fn arb_graph() -> impl proptest::strategy::Strategy<Value = Graph> {
    (
        prop::collection::vec(
            (
                1u64..100,
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
                0u8..10,
            ),
            2..14,
        ),
        any::<prop::sample::Index>(),
        0usize..4,
    )
        .prop_map(|(spec, loop_at, loop_len)| {
            let mut tensors = vec![Tensor {
                kind: TensorKind::Input,
                ..tensor("in", 16)
            }];
            let mut steps = Vec::new();
            for (k, (bytes, r1, r2, kind)) in spec.into_iter().enumerate() {
                let mut reads: Vec<Id> = [r1, r2]
                    .iter()
                    .map(|r| tensors[r.index(tensors.len())].id.clone())
                    .collect();
                reads.sort();
                reads.dedup();
                let written = match kind {
                    // Overwrite an earlier intermediate in place.
                    0 if tensors.len() > 1 => tensors[1 + r2.index(tensors.len() - 1)].id.clone(),
                    // A view of an earlier intermediate.
                    1 if tensors.len() > 1 => {
                        let base = &tensors[1 + r1.index(tensors.len() - 1)];
                        let view = Tensor {
                            declared: Declaration {
                                view_of: Some(base.id.as_str().into()),
                                ..Declaration::default()
                            }
                            .into(),
                            bytes: Some(base.bytes.unwrap_or(1).min(bytes)),
                            ..tensor(&format!("v{k}"), 0)
                        };
                        tensors.push(view);
                        format!("v{k}").into()
                    }
                    _ => {
                        tensors.push(tensor(&format!("t{k}"), bytes * 8));
                        format!("t{k}").into()
                    }
                };
                steps.push(Step {
                    pinned: kind == 9,
                    ..step(
                        &format!("s{k}"),
                        &reads.iter().map(Id::as_str).collect::<Vec<_>>(),
                        &[&written],
                    )
                });
            }
            let mut g = graph(tensors, steps);
            let start = loop_at.index(g.steps.len());
            let end = (start + loop_len).min(g.steps.len());
            if end > start + 1 {
                for s in &mut g.steps[start..end] {
                    s.loop_id = Some("L".into());
                }
                g.loops = vec![Loop {
                    id: "L".into(),
                    ..Loop::default()
                }];
            }
            g
        })
}

/// Whether `units` respects every dependency.
fn topological(deps: &Dependencies, units: &[u32]) -> bool {
    let mut at = vec![usize::MAX; deps.preds.len()];
    for (i, &u) in units.iter().enumerate() {
        at[u as usize] = i;
    }
    units.len() == deps.preds.len()
        && at.iter().all(|&a| a != usize::MAX)
        && (0..deps.preds.len()).all(|u| deps.preds[u].iter().all(|&v| at[v as usize] < at[u]))
}

/// The most bytes live at once on each device, from the liveness of the reordered graph: the
/// obviously correct reference for [`Takes::peaks`].
fn reference_peaks(g: &Graph, r: &ResolvedGraph, units: &[u32]) -> Vec<u64> {
    let (g2, r2) = reordered(g, r, units);
    let problem = analyze(&g2, &r2).problem;
    let mut peaks = vec![0; problem.device_ids.len()];
    for p in 0..problem.positions {
        for (d, peak) in peaks.iter_mut().enumerate() {
            let live: u64 = (problem.buffers.iter())
                .filter(|b| b.device() == d)
                .filter(
                    |b| matches!(b.lifetime(), Lifetime::Live(i) if i.first <= p && p <= i.last),
                )
                .map(|b| b.occupied_size())
                .sum();
            *peak = (*peak).max(live);
        }
    }
    peaks
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_order_is_a_valid_reorder_and_the_checker_agrees(
        g in arb_graph(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 16),
    ) {
        let r = g.resolve().unwrap();
        let deps = dependencies(&g, &r);
        let takes = Takes::of(&r);
        for order in [Order::Given, Order::Lpmf, Order::Bfs, Order::Dfs] {
            let units = heuristic(order, &deps, &takes);
            prop_assert!(topological(&deps, &units), "{order}: {units:?}");
            prop_assert_eq!(check_order(&g, &r, &steps_in(&r, &units)), vec![], "{}", order);
            let (better, _) = improve(&units, &deps, &takes, 1_000_000, &mut || false);
            prop_assert!(topological(&deps, &better));
            prop_assert!(score(&takes, &better) <= score(&takes, &units));
            prop_assert_eq!(takes.peaks(&units).0, reference_peaks(&g, &r, &units));
        }
        // Any permutation of the units: the checker accepts it exactly when it keeps every
        // dependency (the two are written apart; they must agree).
        let mut units = given(deps.preds.len());
        for (i, pick) in picks.iter().enumerate() {
            if units.len() > 1 {
                let (a, b) = (i % units.len(), pick.index(units.len()));
                units.swap(a, b);
            }
            let steps = steps_in(&r, &units);
            prop_assert_eq!(
                check_order(&g, &r, &steps).is_empty(),
                topological(&deps, &units),
                "{:?}", ids(&g, &steps)
            );
        }
    }

    #[test]
    fn best_is_never_above_the_given_order_or_a_heuristic(g in arb_graph()) {
        let r = g.resolve().unwrap();
        let options = PlanOptions {
            strategy: Strategy::FirstFit.into(),
            ..PlanOptions::default()
        };
        let search = best(&g, &r, &options, 1_000_000, &mut Control::default()).unwrap();
        let chosen = search.chosen();
        prop_assert_eq!(search.tried[0].order, Order::Given);
        prop_assert!(!search.tried[0].improved);
        for p in &search.tried {
            prop_assert!(p.plan.is_valid());
            prop_assert!(topological(&dependencies(&g, &r), &p.units));
        }
        // The bound the search reports holds every plan, always-live bytes included.
        let floor: u64 = Takes::of(&r).floor().iter().sum();
        for p in &search.tried {
            prop_assert!(chosen.plan.footprint_bytes() <= p.plan.footprint_bytes());
            prop_assert!(p.plan.footprint_bytes() >= floor);
        }
        // Deterministic.
        let again = best(&g, &r, &options, 1_000_000, &mut Control::default()).unwrap();
        prop_assert_eq!(again, search);
    }
}

#[test]
fn a_stopped_search_keeps_the_given_order_and_says_it_is_partial() {
    let g = two_branches();
    let r = g.resolve().unwrap();
    let options = PlanOptions::default();
    let mut asked = 0;
    let mut stop = || {
        asked += 1;
        true
    };
    let mut control = Control {
        should_stop: Some(&mut stop),
        ..Control::default()
    };
    let search = best(&g, &r, &options, DEFAULT_ORDER_WORK, &mut control).unwrap();
    assert!(search.partial);
    assert_eq!(search.tried.len(), 1);
    assert_eq!(search.chosen().order, Order::Given);
    assert!(asked > 0);
    // Unstopped, it finds the order that runs one branch after the other.
    let whole = best(
        &g,
        &r,
        &options,
        DEFAULT_ORDER_WORK,
        &mut Control::default(),
    )
    .unwrap();
    assert!(!whole.partial);
    assert!(whole.chosen().plan.footprint_bytes() < search.chosen().plan.footprint_bytes());
}
