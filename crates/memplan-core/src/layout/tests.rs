//! Property tests of every strategy against the independent checker, and the seeds' cases.

use proptest::prelude::{Strategy as _, *};

use super::Strategy;
use super::*;
use crate::check::{Layout, Violation, check};
use crate::graph::Id;
use crate::problem::{Buffer, Lifetime};

/// A buffer of device 0, with its name.
fn buffer(name: &str, size: u64, alignment: u64, lifetime: Lifetime) -> (Id, Buffer) {
    let buffer = Buffer::new(0, size, alignment.trailing_zeros() as u8, None, lifetime);
    (name.into(), buffer)
}

/// `p` planned with `strategy` and the default options.
fn planned(p: &Problem, strategy: Strategy) -> Plan {
    plan(
        p,
        &PlanOptions {
            strategy: strategy.into(),
            ..PlanOptions::default()
        },
    )
    .unwrap()
}

fn live(first: u32, last: u32) -> Lifetime {
    Lifetime::Live(LiveInterval::new(first, last))
}

fn problem(positions: u32, buffers: Vec<(Id, Buffer)>) -> Problem {
    let (names, buffers) = buffers.into_iter().unzip();
    Problem {
        device_ids: vec!["d0".into(), "d1".into()],
        positions,
        buffers,
        names,
        position_times: Vec::new(),
    }
}

fn arb_problem() -> impl proptest::strategy::Strategy<Value = Problem> {
    (1u32..16).prop_flat_map(|positions| {
        let buffer = (
            0u64..5000,
            prop::sample::select(vec![1u64, 2, 8, 32, 256]),
            prop::option::of(prop::sample::select(vec![DType::F32, DType::F16])),
            0u32..2,
            prop::option::weighted(0.9, (0..positions, 0..positions)),
        )
            .prop_map(|(size, alignment, dtype, device, span)| {
                let lifetime = match span {
                    None => Lifetime::Always,
                    Some((a, b)) => live(a.min(b), a.max(b)),
                };
                Buffer::new(
                    device,
                    size,
                    alignment.trailing_zeros() as u8,
                    dtype,
                    lifetime,
                )
            });
        prop::collection::vec(buffer, 0..40).prop_map(move |buffers| {
            let named = buffers.into_iter().enumerate();
            problem(
                positions,
                named.map(|(i, b)| (format!("b{i}").into(), b)).collect(),
            )
        })
    })
}

fn layout_of(plan: &Plan) -> (Vec<&[Pool]>, &[Placement]) {
    (
        plan.devices.iter().map(|d| d.pools.as_slice()).collect(),
        &plan.placements,
    )
}

/// The bytes live at `position` on `device`, counted the slow way.
fn live_bytes(p: &Problem, device: usize, position: u32) -> u64 {
    p.buffers
        .iter()
        .filter(|b| {
            b.device() == device
                && b.span(p.positions).first <= position
                && position <= b.span(p.positions).last
        })
        .map(Buffer::occupied_size)
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_strategy_plans_validly_above_the_lower_bound_and_deterministically(
        p in arb_problem(),
        classes in any::<bool>(),
    ) {
        for strategy in StrategyChoice::ALL {
            let options = PlanOptions { strategy, precision_classes: classes, search_evaluations: 50, ..PlanOptions::default() };
            let plan = plan(&p, &options).unwrap();
            prop_assert!(plan.is_valid(), "{strategy}: {:?}", plan.violations);
            for d in &plan.devices {
                prop_assert!(d.footprint_bytes >= d.usage.lower_bound, "{strategy}: peak below LB");
                let slow = (0..p.positions).map(|q| live_bytes(&p, d.device, q)).max().unwrap_or(0);
                prop_assert_eq!(d.usage.lower_bound, slow);
            }
            prop_assert_eq!(&plan, &super::plan(&p, &options).unwrap(), "{} is not deterministic", strategy);
        }
    }

    /// A layout under a bound is the layout without one where that is within the bound, and
    /// gives up only where it is not: whatever the strategy, stacked precision classes, several
    /// devices, a bound anywhere from below the lower bound to above the plan, and decodes
    /// resumed from earlier bounded ones.
    #[test]
    fn a_layout_within_a_bound_is_the_plan_or_says_it_passes(
        p in arb_problem(),
        classes in any::<bool>(),
        offsets in prop::collection::vec(-3000i64..3000, 1..4),
    ) {
        for strategy in [Strategy::FirstFit.into(), Strategy::BestFit.into(), StrategyChoice::Best] {
            let options = PlanOptions { strategy, precision_classes: classes, search_evaluations: 50, ..PlanOptions::default() };
            let whole = plan(&p, &options).unwrap();
            let footprint = whole.footprint_bytes();
            let mut earlier = Decodes::default();
            for &offset in [0, -1, 1].iter().chain(&offsets) {
                let most = footprint.saturating_add_signed(offset);
                let mut control = Control { earlier: Some(&mut earlier), ..Control::default() };
                let within = lay_out_within(&p, &options, &mut control, most).unwrap();
                match within {
                    Some(plan) => {
                        prop_assert!(footprint <= most);
                        prop_assert_eq!(&plan.placements, &whole.placements, "{}", strategy);
                        prop_assert_eq!(plan.footprint_bytes(), footprint);
                    }
                    None => prop_assert!(footprint > most, "{strategy}: {footprint} <= {most} given up"),
                }
            }
        }
    }

    /// `best` runs every strategy, `search` without its exact part (that is what `search` alone
    /// adds), so it is never worse than any other, and the exact search never worse than it.
    #[test]
    fn best_is_never_worse_than_any_heuristic_and_search_never_worse_than_best(p in arb_problem()) {
        let footprint = |strategy| plan(&p, &PlanOptions { strategy, search_evaluations: 50, ..PlanOptions::default() }).unwrap().footprint_bytes();
        let best = footprint(StrategyChoice::Best);
        for s in Strategy::ALL.into_iter().filter(|&s| s != Strategy::Search) {
            prop_assert!(best <= footprint(s.into()), "best {best} > {s} {}", footprint(s.into()));
        }
        let search = footprint(Strategy::Search.into());
        prop_assert!(search <= best, "search {search} > best {best}");
    }

    /// `best` stops at the first strategy whose arena reaches what the arena holds live at
    /// once: `best-fit` (the next after first-fit) runs exactly when first-fit stays above it.
    /// Its decode, kept for the next plan, says whether it ran.
    #[test]
    fn best_stops_once_first_fit_reaches_the_arena_floor(p in arb_problem()) {
        let mut decodes = Decodes::default();
        let options = |strategy| PlanOptions { strategy, precision_classes: false, ..PlanOptions::default() };
        plan_with(&p, &options(StrategyChoice::Best), &mut Control { earlier: Some(&mut decodes), ..Control::default() }).unwrap();
        let first_fit = plan(&p, &options(Strategy::FirstFit.into())).unwrap();
        for (d, device) in first_fit.devices.iter().enumerate() {
            let floor = (0..p.positions)
                .map(|q| p.buffers.iter()
                    .filter(|b| b.device() == d && !b.is_always_live() && { let s = b.span(p.positions); s.first <= q && q <= s.last })
                    .map(Buffer::occupied_size)
                    .sum::<u64>())
                .max()
                .unwrap_or(0);
            let ran = decodes.0.contains_key(&(d, None, GapChoice::Smallest));
            prop_assert_eq!(ran, device.arena_bytes > floor, "device {}: first-fit {} floor {}", d, device.arena_bytes, floor);
        }
    }

    /// Past the work budget (here: any work at all), `best` does without `best-fit`, and `search`
    /// is its greedy portfolio alone (the region is small): `best` is the best of the rest.
    #[test]
    fn best_drops_the_costly_strategies_past_the_work_budget(p in arb_problem()) {
        let options = |strategy| PlanOptions { strategy, work_limit: 0, ..PlanOptions::default() };
        let best = plan(&p, &options(StrategyChoice::Best)).unwrap();
        for device in &best.devices {
            prop_assert!(device.strategy != Strategy::BestFit || device.arena_bytes == 0);
        }
        let cheap: Vec<Plan> = [Strategy::FirstFit, Strategy::Tlsf, Strategy::Search, Strategy::Bump]
            .into_iter()
            .filter_map(|s| plan(&p, &options(s.into())).ok())
            .collect();
        for plan in &cheap {
            prop_assert!(plan.devices.iter().all(|d| d.exact.is_none_or(|e| e.nodes == 0)), "no exact search past the budget");
            // `search` reports what is proven on every device all the same.
            let search = plan.devices[0].strategy == Strategy::Search;
            prop_assert!(!search || plan.devices.iter().all(|d| d.exact.is_some()));
        }
        for (d, device) in best.devices.iter().enumerate() {
            let least = cheap.iter().map(|plan| plan.devices[d].arena_bytes).min();
            prop_assert_eq!(Some(device.arena_bytes), least);
        }
    }

    #[test]
    fn a_small_cap_splits_into_pools_or_names_the_oversized_buffer(p in arb_problem(), cap in 1u64..20_000) {
        let options = PlanOptions { strategy: Strategy::FirstFit.into(), pool_cap: Some(cap), ..PlanOptions::default() };
        match plan(&p, &options) {
            Ok(plan) => {
                prop_assert!(plan.is_valid(), "{:?}", plan.violations);
                prop_assert!(plan.devices.iter().flat_map(|d| &d.pools).all(|pool| pool.bytes <= cap));
                for d in &plan.devices {
                    if let Some(f) = d.cap_fallback {
                        prop_assert!(f.layout_bytes > cap);
                        prop_assert_eq!(f.fallback_bytes, d.arena_bytes);
                    }
                }
            }
            Err(PlanError::OverCap { buffer, occupied, cap: c }) => {
                prop_assert_eq!(c, cap);
                let b = &p.buffers[p.names.iter().position(|n| *n == buffer).unwrap()];
                prop_assert!(b.occupied_size() > cap && b.occupied_size() == occupied);
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn the_checker_catches_a_moved_buffer(p in arb_problem(), pick in any::<prop::sample::Index>()) {
        let plan = planned(&p, Strategy::FirstFit);
        // Conflicting pairs with bytes in the same pool: put the second on top of the first.
        let pairs: Vec<(usize, usize)> = (0..p.buffers.len())
            .flat_map(|a| (0..p.buffers.len()).map(move |b| (a, b)))
            .filter(|&(a, b)| a < b)
            .filter(|&(a, b)| {
                let (x, y) = (&p.buffers[a], &p.buffers[b]);
                x.device() == y.device()
                    && plan.placements[a].pool == plan.placements[b].pool
                    && x.occupied_size() > 0 && y.occupied_size() > 0
                    && x.span(p.positions).overlaps(y.span(p.positions))
                    && plan.placements[a].offset.is_multiple_of(y.alignment())
            })
            .collect();
        prop_assume!(!pairs.is_empty());
        let (a, b) = pairs[pick.index(pairs.len())];
        let mut placements = plan.placements.clone();
        placements[b].offset = placements[a].offset;
        let (pools, _) = layout_of(&plan);
        let violations = check(&p, Layout { pools: &pools, placements: &placements }, false, plan.options.pool_cap);
        prop_assert!(violations.iter().any(|v| matches!(v, Violation::Overlap { .. } | Violation::OutsidePool { .. })), "{violations:?}");
    }

    /// Against the slow way (every pair): with buffers thrown anywhere in one pool per device,
    /// the checker finds an overlap exactly when two buffers live at once share a byte.
    #[test]
    fn the_checker_finds_an_overlap_exactly_when_two_live_buffers_share_a_byte(
        p in arb_problem(),
        offsets in prop::collection::vec(0u64..64, 64),
    ) {
        let placements: Vec<Placement> = (p.buffers.iter().zip(&offsets))
            .map(|(b, &slot)| Placement { pool: 0, offset: slot * b.alignment() * 64 })
            .collect();
        let pool = [Pool { role: PoolRole::Arena, bytes: u64::MAX / 2 }];
        let pools: Vec<&[Pool]> = vec![&pool; p.device_ids.len()];
        let range = |b: usize| (placements[b].offset, placements[b].offset + p.buffers[b].occupied_size());
        let shared = (0..p.buffers.len()).any(|a| {
            (a + 1..p.buffers.len()).any(|b| {
                let (x, y) = (&p.buffers[a], &p.buffers[b]);
                let ((s, e), (t, f)) = (range(a), range(b));
                // Both hold a byte (an empty buffer inside another's range shares none).
                x.device() == y.device()
                    && x.span(p.positions).overlaps(y.span(p.positions))
                    && s < e && t < f
                    && s < f && t < e
            })
        });
        let violations = check(&p, Layout { pools: &pools, placements: &placements }, false, None);
        let found = violations.iter().any(|v| matches!(v, Violation::Overlap { .. }));
        prop_assert_eq!(found, shared, "{:?}", violations);
    }
}

/// A perfect packing cut at random (as `scripts/gen-packed.py` makes them): pieces of a
/// `capacity` by `positions` rectangle, each cut from one already there, in time or in bytes at
/// a multiple of 8. They tile it, so every position holds `capacity` live bytes: the lower
/// bound is `capacity`, and the cuts' own layout reaches it.
fn arb_packed() -> impl proptest::strategy::Strategy<Value = (Problem, u64)> {
    let cut = (any::<prop::sample::Index>(), any::<bool>(), 1u32..1000);
    (1u32..12, 1u64..32, prop::collection::vec(cut, 0..24)).prop_map(|(positions, units, cuts)| {
        let capacity = 8 * units;
        // (first position, end position, low byte, high byte)
        let mut pieces = vec![(0u32, positions, 0u64, capacity)];
        for (pick, in_time, at) in cuts {
            let i = pick.index(pieces.len());
            let (start, end, low, high) = pieces[i];
            if in_time && end - start >= 2 {
                let cut = start + 1 + at % (end - start - 1);
                pieces[i] = (start, cut, low, high);
                pieces.push((cut, end, low, high));
            } else if (high - low) >= 16 {
                let cut = low + 8 * (1 + u64::from(at) % ((high - low) / 8 - 1));
                pieces[i] = (start, end, low, cut);
                pieces.push((start, end, cut, high));
            }
        }
        let buffers = (pieces.iter().enumerate())
            .map(|(i, &(start, end, low, high))| {
                buffer(&format!("b{i}"), high - low, 8, live(start, end - 1))
            })
            .collect();
        (problem(positions, buffers), capacity)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// On a packed instance a layout at the lower bound exists: `search` finds it and proves it
    /// optimal, and `best` (whose exact search has its own budget on so small a region) too.
    #[test]
    fn search_and_best_reach_the_bound_of_a_packed_instance((p, capacity) in arb_packed()) {
        for strategy in [StrategyChoice::One(Strategy::Search), StrategyChoice::Best] {
            let plan = plan(&p, &PlanOptions { strategy, ..PlanOptions::default() }).unwrap();
            prop_assert!(plan.is_valid(), "{strategy}: {:?}", plan.violations);
            let device = &plan.devices[0];
            prop_assert_eq!(device.usage.lower_bound, capacity);
            prop_assert_eq!(device.footprint_bytes, capacity, "{}", strategy);
            if strategy == StrategyChoice::One(Strategy::Search) {
                prop_assert!(device.exact.is_some_and(|e| e.optimal));
            }
        }
    }
}

#[test]
fn the_checker_catches_misalignment_and_classes_sharing_bytes() {
    let mut p = problem(
        2,
        vec![buffer("a", 8, 8, live(0, 0)), buffer("b", 8, 8, live(1, 1))],
    );
    p.buffers[1].dtype = Some(DType::F16);
    let pools = [Pool {
        role: PoolRole::Arena,
        bytes: 16,
    }];
    let pools: Vec<&[Pool]> = vec![&pools, &[]];
    let shared = [
        Placement { pool: 0, offset: 0 },
        Placement { pool: 0, offset: 0 },
    ];
    // Disjoint in time, so they may share bytes, unless precision classes are on.
    assert!(
        check(
            &p,
            Layout {
                pools: &pools,
                placements: &shared
            },
            false,
            None
        )
        .is_empty()
    );
    let v = check(
        &p,
        Layout {
            pools: &pools,
            placements: &shared,
        },
        true,
        None,
    );
    assert_eq!(
        v,
        vec![Violation::AcrossClasses {
            first: "a".into(),
            second: "b".into(),
            pool: 0
        }]
    );
    let misaligned = [
        Placement { pool: 0, offset: 4 },
        Placement { pool: 0, offset: 0 },
    ];
    let v = check(
        &p,
        Layout {
            pools: &pools,
            placements: &misaligned,
        },
        false,
        None,
    );
    assert!(
        v.contains(&Violation::Misaligned {
            buffer: "a".into(),
            offset: 4,
            alignment: 8
        }),
        "{v:?}"
    );
    let v = check(
        &p,
        Layout {
            pools: &pools,
            placements: &shared,
        },
        false,
        Some(8),
    );
    assert!(
        matches!(
            v[0],
            Violation::OverCap {
                bytes: 16,
                cap: 8,
                ..
            }
        ),
        "{v:?}"
    );
}

// The seeds' cases (pool-and-arena-layout).

#[test]
fn pool_cap_1000_600_then_600_gives_two_pools() {
    let packed = pack_into_pools(&[(600, 1), (600, 1)], 1000).unwrap();
    assert_eq!(packed.placements, vec![(0, 0), (1, 0)]);
    assert_eq!(packed.pool_bytes, vec![600, 600]);
}

#[test]
fn pool_cap_1000_1000_then_1_gives_two_pools() {
    let packed = pack_into_pools(&[(1000, 1), (1, 1)], 1000).unwrap();
    assert_eq!(packed.placements, vec![(0, 0), (1, 0)]);
    assert_eq!(packed.pool_bytes, vec![1000, 1]);
}

#[test]
fn an_item_over_the_cap_is_an_error_naming_it() {
    assert_eq!(pack_into_pools(&[(10, 1), (1001, 1)], 1000), Err(1));
    // The error gives the occupied size (999 bytes at alignment 8 occupy 1000).
    let p = problem(
        1,
        vec![
            buffer("small", 10, 1, live(0, 0)),
            buffer("huge", 999, 8, live(0, 0)),
        ],
    );
    let e = plan(
        &p,
        &PlanOptions {
            pool_cap: Some(996),
            ..PlanOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "buffer `huge` occupies 1000 bytes, more than the pool cap of 996 bytes"
    );
}

#[test]
fn five_then_eight_at_alignment_8_puts_the_second_at_8() {
    let packed = pack_into_pools(&[(5, 8), (8, 8)], 1000).unwrap();
    assert_eq!(packed.placements, vec![(0, 0), (0, 8)]);
    // The arena layout agrees: two always-conflicting buffers, bump order.
    let p = problem(
        1,
        vec![buffer("a", 5, 8, live(0, 0)), buffer("b", 8, 8, live(0, 0))],
    );
    let plan = planned(&p, Strategy::Bump);
    assert_eq!(plan.placements[1].offset, 8);
}

#[test]
fn sizes_4_then_64_at_alignment_32_vs_the_reverse_order() {
    let forward = pack_into_pools(&[(4, 32), (64, 32)], 1000).unwrap();
    assert_eq!(forward.placements, vec![(0, 0), (0, 32)]);
    assert_eq!(forward.pool_bytes, vec![96]);
    let reverse = pack_into_pools(&[(64, 32), (4, 32)], 1000).unwrap();
    assert_eq!(reverse.placements, vec![(0, 0), (0, 64)]);
    assert_eq!(reverse.pool_bytes, vec![68]);
    // Greedy by decreasing size puts the 64 first whatever the input order.
    let p = problem(
        1,
        vec![
            buffer("small", 4, 32, live(0, 0)),
            buffer("big", 64, 32, live(0, 0)),
        ],
    );
    let plan = planned(&p, Strategy::FirstFit);
    assert_eq!(
        (plan.placements[1].offset, plan.placements[0].offset),
        (0, 64)
    );
}

#[test]
fn an_arena_over_the_cap_falls_back_to_bump_pools() {
    let p = problem(
        2,
        vec![
            buffer("a", 600, 1, live(0, 0)),
            buffer("b", 600, 1, live(0, 1)),
            buffer("c", 300, 1, live(1, 1)),
        ],
    );
    let plan = plan(
        &p,
        &PlanOptions {
            strategy: Strategy::FirstFit.into(),
            pool_cap: Some(1000),
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert!(plan.is_valid());
    let pools: Vec<u64> = plan.devices[0].pools.iter().map(|p| p.bytes).collect();
    assert_eq!(pools, vec![600, 900]);
    // The plan says what the cap cost: the layout took 1200, the fallback 1500.
    assert_eq!(
        plan.devices[0].cap_fallback,
        Some(CapFallback {
            cap: 1000,
            layout_bytes: 1200,
            fallback_bytes: 1500
        })
    );
    // Without a cap (the default: 64-bit offsets) the same arena is one pool.
    assert_eq!(planned(&p, Strategy::FirstFit).devices[0].pools.len(), 1);
}

#[test]
fn disjoint_lifetimes_share_bytes_and_always_live_ones_do_not() {
    let p = problem(
        3,
        vec![
            buffer("x", 100, 1, live(0, 0)),
            buffer("y", 100, 1, live(1, 2)),
            buffer("w", 50, 1, Lifetime::Always),
        ],
    );
    let plan = planned(&p, Strategy::FirstFit);
    let d = &plan.devices[0];
    assert_eq!(
        (
            d.arena_bytes,
            d.static_bytes,
            d.footprint_bytes,
            d.usage.lower_bound
        ),
        (100, 50, 150, 150)
    );
    assert_eq!(d.usage.live_at_peak, vec![0, 2]);
    assert_eq!(d.usage.peak_position, Some(0));
}

#[test]
fn tlsf_rounds_to_256_and_frees_before_it_allocates() {
    // `a` ends at 0 and `b` starts at 1: b reuses a's block; `c` overlaps both.
    let p = problem(
        2,
        vec![
            buffer("a", 100, 1, live(0, 0)),
            buffer("b", 200, 1, live(1, 1)),
            buffer("c", 10, 1, live(0, 1)),
        ],
    );
    let plan = planned(&p, Strategy::Tlsf);
    assert!(plan.is_valid());
    let offsets: Vec<u64> = plan.placements.iter().map(|p| p.offset).collect();
    assert_eq!(offsets, vec![0, 0, 256]);
    assert_eq!(plan.devices[0].arena_bytes, 512);
}

#[test]
fn every_strategy_is_listed_once_in_the_order_of_its_variants() {
    for (i, s) in Strategy::ALL.into_iter().enumerate() {
        assert_eq!(s as usize, i);
        assert_eq!(StrategyChoice::from(s).strategies(), &[s]);
        assert_eq!(s.name().parse::<Strategy>(), Ok(s));
    }
    assert_eq!("best".parse::<StrategyChoice>(), Ok(StrategyChoice::Best));
    assert!("best".parse::<Strategy>().is_err());
    assert_eq!(StrategyChoice::Best.strategies(), &Strategy::ALL);
}

#[test]
fn tlsf_refuses_a_layout_past_64_bits_and_best_does_without_it() {
    // TLSF rounds every item up to the largest alignment of the region: 4 x 2^62 = 2^64.
    let p = problem(
        1,
        vec![
            buffer("huge-align", 1, 1 << 62, live(0, 0)),
            buffer("a", 8, 1, live(0, 0)),
            buffer("b", 8, 1, live(0, 0)),
            buffer("c", 8, 1, live(0, 0)),
        ],
    );
    let e = plan(
        &p,
        &PlanOptions {
            strategy: Strategy::Tlsf.into(),
            ..PlanOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            PlanError::ExtentOverflow {
                strategy: Strategy::Tlsf,
                ..
            }
        ),
        "{e}"
    );
    let best = plan(&p, &PlanOptions::default()).unwrap();
    assert!(best.is_valid());
    assert_ne!(best.devices[0].strategy, Strategy::Tlsf);
}

/// `n` small buffers `b0`, `b1`, ... of `least` bytes and up to 299 more, buffer `i` live over
/// `length + 1` positions from `i % cycle`: each overlaps many others.
fn overlapping(n: u64, least: u64, cycle: u32, length: u32) -> Problem {
    let buffers = (0..n)
        .map(|i| {
            let first = i as u32 % cycle;
            let size = least + (i * 37) % 300;
            buffer(&format!("b{i}"), size, 1, live(first, first + length))
        })
        .collect();
    problem(cycle + length, buffers)
}

#[test]
fn a_stop_condition_ends_search_with_its_best_so_far_and_progress_is_heard() {
    // Many small, overlapping buffers: the exact search places one buffer a node and asks the
    // stop condition every 1,024 nodes, so it asks before it is done.
    let p = overlapping(2000, 100, 50, 3);
    let options = PlanOptions {
        strategy: Strategy::Search.into(),
        ..PlanOptions::default()
    };
    let full = plan(&p, &options).unwrap();
    let mut asked = 0;
    let mut stop = || {
        asked += 1;
        true
    };
    let mut heard = Vec::new();
    let mut progress = |p: Progress| heard.push(p);
    let stopped = plan_with(
        &p,
        &options,
        &mut Control {
            should_stop: Some(&mut stop),
            progress: Some(&mut progress),
            ..Control::default()
        },
    )
    .unwrap();
    assert!(stopped.is_valid());
    assert!(stopped.devices[0].stopped && !full.devices[0].stopped);
    assert!(asked > 0);
    assert!(!heard.is_empty());
    assert!(heard.iter().all(|h| h.best_bytes >= h.bound_bytes));
    // Stopped early, it is still no worse than first-fit.
    assert!(stopped.footprint_bytes() <= planned(&p, Strategy::FirstFit).footprint_bytes());
    assert!(stopped.footprint_bytes() >= full.footprint_bytes());
}

/// A user's cancel (`abandon_on_stop`) ends first-fit's decode under way and
/// `plan_unless_cancelled` with no plan, where a time limit's stop (and `plan_with`, cancel or
/// not) lets the first layout finish; once a region has a layout, a cancel keeps the best so far
/// as a stop does.
#[test]
fn a_cancel_abandons_the_first_layout_where_a_stop_finishes_it() {
    // More buffers than a decode places between two asks, so it is asked while it runs.
    let p = overlapping(5000, 64, 900, 5);
    for strategy in [
        StrategyChoice::Best,
        Strategy::FirstFit.into(),
        Strategy::Search.into(),
    ] {
        let options = PlanOptions {
            strategy,
            ..PlanOptions::default()
        };
        // Asked once before the first strategy, then within first-fit's decode: the stop comes
        // at the second ask, mid-decode (a decode that ran on would have made a layout, which
        // a cancel keeps).
        let mut asked = 0;
        let mut stop = || {
            asked += 1;
            asked > 1
        };
        let cancelled = plan_unless_cancelled(
            &p,
            &options,
            &mut Control {
                should_stop: Some(&mut stop),
                abandon_on_stop: true,
                ..Control::default()
            },
        );
        assert_eq!(cancelled, Ok(None), "{strategy:?}");
        // A stop from the start, not abandoning, or through `plan_with`: the first layout is
        // made, whole and checked.
        for abandon_on_stop in [false, true] {
            let mut always = || true;
            let mut control = Control {
                should_stop: Some(&mut always),
                abandon_on_stop,
                ..Control::default()
            };
            let stopped = match abandon_on_stop {
                false => plan_unless_cancelled(&p, &options, &mut control)
                    .unwrap()
                    .unwrap(),
                true => plan_with(&p, &options, &mut control).unwrap(),
            };
            assert!(stopped.is_valid(), "{strategy:?}");
            assert_eq!(
                stopped.footprint_bytes(),
                planned(&p, Strategy::FirstFit).footprint_bytes(),
                "{strategy:?}"
            );
            assert!(control.abandon_on_stop == abandon_on_stop);
        }
    }
    // A cancel once first-fit's layout is made keeps it: the plan is whole, as a stop's. The
    // asks first-fit alone takes, counted; the cancel comes at the next.
    let mut asks = 0;
    let mut count = || {
        asks += 1;
        false
    };
    let first_fit = PlanOptions {
        strategy: Strategy::FirstFit.into(),
        ..PlanOptions::default()
    };
    plan_unless_cancelled(
        &p,
        &first_fit,
        &mut Control {
            should_stop: Some(&mut count),
            abandon_on_stop: true,
            ..Control::default()
        },
    )
    .unwrap()
    .unwrap();
    let mut asked = 0;
    let mut stop = || {
        asked += 1;
        asked > asks
    };
    let best = PlanOptions {
        strategy: StrategyChoice::Best,
        ..PlanOptions::default()
    };
    let kept = plan_unless_cancelled(
        &p,
        &best,
        &mut Control {
            should_stop: Some(&mut stop),
            abandon_on_stop: true,
            ..Control::default()
        },
    )
    .unwrap()
    .expect("first-fit's layout, kept");
    assert!(kept.is_valid());
    assert!(kept.footprint_bytes() <= planned(&p, Strategy::FirstFit).footprint_bytes());
}

#[test]
fn device_totals_never_wrap() {
    // Two devices of 2^63 bytes each: their sum does not fit in 64 bits, so the problem is
    // refused rather than reported with a wrapped footprint.
    let mut p = problem(
        1,
        vec![
            buffer("a", 1 << 63, 1, live(0, 0)),
            buffer("b", 1 << 63, 1, live(0, 0)),
        ],
    );
    p.buffers[1] = Buffer::new(1, 1 << 63, 0, None, live(0, 0));
    let e = plan(&p, &PlanOptions::default()).unwrap_err();
    assert!(e.to_string().contains("more than 2^64 bytes"), "{e}");
}

/// `n` buffers over `positions`, each of 64 B to 64 KiB (a multiple of 64) and live from a
/// random position for up to `longest` more (a fixed-seed SplitMix64).
fn random_problem(n: usize, positions: u64, longest: u64) -> Problem {
    use super::rng::SplitMix64;
    let draw = |i: usize, k: u64| SplitMix64::mix((i as u64) << 2 | k);
    let buffers = (0..n)
        .map(|i| {
            let first = draw(i, 0) % positions;
            let last = (first + draw(i, 1) % longest).min(positions - 1);
            let size = 64 * (1 + draw(i, 2) % 1024);
            buffer(&i.to_string(), size, 64, live(first as u32, last as u32))
        })
        .collect();
    problem(positions as u32, buffers)
}

/// Past `BEST_GREEDY_MOST_ITEMS` buffers, within the work budget as well as past it, `best` (a
/// page load) leaves `best-fit` and `search` out and first-fit stands in, while `search` asked
/// for by name still runs its seven decodes: the first is first-fit's, and here another packs
/// lower.
#[test]
fn search_by_name_runs_its_portfolio_past_the_size_best_stops_at() {
    let n = BEST_GREEDY_MOST_ITEMS + 1;
    // Each buffer overlaps about 260 others: within the work budget.
    let p = random_problem(n, n as u64 / 2, 128);
    let options = |strategy, work_limit| PlanOptions {
        strategy,
        work_limit,
        ..PlanOptions::default()
    };
    let footprint = |s: Strategy| {
        let plan = plan(&p, &options(s.into(), DEFAULT_SEARCH_WORK)).unwrap();
        plan.footprint_bytes()
    };
    for work_limit in [DEFAULT_SEARCH_WORK, 0] {
        let best = plan(&p, &options(StrategyChoice::Best, work_limit)).unwrap();
        assert!(
            (best.devices.iter())
                .all(|d| [Strategy::FirstFit, Strategy::Tlsf].contains(&d.strategy)),
            "{:?}",
            best.devices.iter().map(|d| d.strategy).collect::<Vec<_>>()
        );
        let greedy = footprint(Strategy::FirstFit).min(footprint(Strategy::Tlsf));
        assert_eq!(best.footprint_bytes(), greedy);
    }
    // Each decode takes a while at this size: the caller hears the best so far after each.
    let mut heard = Vec::new();
    let mut progress = |p: Progress| heard.push(p);
    let mut control = Control {
        progress: Some(&mut progress),
        ..Control::default()
    };
    let search = plan_with(&p, &options(Strategy::Search.into(), 0), &mut control).unwrap();
    assert!(search.footprint_bytes() < footprint(Strategy::FirstFit));
    assert_eq!(
        heard.len(),
        6,
        "after each of the seven decodes but the last"
    );
    assert!(heard.iter().all(|p| !p.exact), "orders decoded, not nodes");
    assert!(heard.windows(2).all(|w| w[1].best_bytes <= w[0].best_bytes));
}

/// Past `BEST_GREEDY_MOST_ITEMS` buffers, `best` first asks TLSF for a layout at the floor:
/// where it gets one, first-fit (which reaches the floor too, and would take the tie) is not
/// run; where it does not, the layout is the lower of the two as before.
#[test]
fn past_the_portfolio_best_takes_tlsf_at_the_floor_without_first_fit() {
    let n = BEST_GREEDY_MOST_ITEMS + 1;
    // Each buffer (of TLSF's granule) lives two positions, beside its neighbours: two are
    // live at a time.
    let chain = problem(
        n as u32 + 1,
        (0..n)
            .map(|i| buffer("b", 256, 256, live(i as u32, i as u32 + 1)))
            .collect(),
    );
    let first_fit = planned(&chain, Strategy::FirstFit);
    assert_eq!(first_fit.footprint_bytes(), 512);
    assert_eq!(first_fit.lower_bound_bytes(), 512);
    let best = plan(&chain, &PlanOptions::default()).unwrap();
    assert_eq!(best.devices[0].strategy, Strategy::Tlsf);
    assert_eq!(best.footprint_bytes(), 512);
    // Random lifetimes: TLSF misses the floor, first-fit runs and is lower.
    let p = random_problem(n, n as u64 / 2, 128);
    let tlsf = planned(&p, Strategy::Tlsf);
    let first_fit = planned(&p, Strategy::FirstFit).footprint_bytes();
    assert!(first_fit < tlsf.footprint_bytes());
    assert!(tlsf.footprint_bytes() > tlsf.lower_bound_bytes());
    let best = plan(&p, &PlanOptions::default()).unwrap();
    assert_eq!(best.devices[0].strategy, Strategy::FirstFit);
    assert_eq!(best.footprint_bytes(), first_fit);
}

/// A stop heard while a portfolio decode runs ends it there (a decode of a hundred thousand
/// buffers takes a good part of a second): the search keeps first-fit's layout, stopped.
#[test]
fn a_stop_ends_the_portfolio_within_a_decode() {
    let p = random_problem(5000, 1000, 64);
    let options = |strategy: Strategy| PlanOptions {
        strategy: strategy.into(),
        work_limit: 0,
        ..PlanOptions::default()
    };
    let first_fit = plan(&p, &options(Strategy::FirstFit)).unwrap();
    // Asked first before the second order's decode, then within it.
    let mut asked = 0;
    let mut stop = || {
        asked += 1;
        asked >= 2
    };
    let mut control = Control {
        should_stop: Some(&mut stop),
        ..Control::default()
    };
    let stopped = plan_with(&p, &options(Strategy::Search), &mut control).unwrap();
    assert!(stopped.is_valid() && stopped.devices[0].stopped);
    assert_eq!(stopped.footprint_bytes(), first_fit.footprint_bytes());
}

/// `search` asked for by name always runs its exact part; within `best`, only where the work
/// budget buys the nodes of its first round (two probes at the bound, one between).
#[test]
fn best_runs_the_exact_search_where_its_budget_covers_a_round() {
    let runs = |strategy, n| exact_search_runs(strategy, n, BEST_SEARCH_WORK);
    let largest = (1..5000)
        .take_while(|&n| runs(StrategyChoice::Best, n))
        .last()
        .expect("small regions run it");
    assert!((300..350).contains(&largest), "{largest}");
    assert!(node_limit(BEST_SEARCH_WORK, largest) >= exact::first_round(largest));
    assert!(!runs(StrategyChoice::Best, largest + 1));
    assert!(!runs(StrategyChoice::Best, 100_000));
    let by_name = StrategyChoice::One(Strategy::Search);
    assert!(runs(by_name, largest + 1) && runs(by_name, 100_000));
}

/// Within `best`, a node of the exact search costs its walk over the placed buffer's
/// neighbours, or its scan of the region's buffers where that is more: a region gets nodes in
/// inverse proportion to its neighbours, and a very sparse one the nodes its buffer count buys.
#[test]
fn best_budgets_a_region_by_its_neighbours() {
    let n = 200;
    // Per buffer, the conflict visits its neighbours and itself make.
    let nodes = |visits: u64| BEST_EXACT_WORK / best_node_cost(n, n as u64 * visits);
    // Very sparse: the buffers set it (125,000 nodes on 200 buffers).
    assert_eq!(nodes(3), BEST_EXACT_WORK / (2 * n as u64));
    assert_eq!(nodes(3), nodes(15));
    // Past a tenth of the others: twice the neighbours, half the nodes.
    assert!(nodes(40) < nodes(15));
    for visits in [40, 120] {
        let (once, twice) = (nodes(visits), nodes(2 * visits));
        assert!(once.abs_diff(twice * 2) <= 1, "{once} {twice}");
    }
}

/// The exact search starts from the greedy portfolio's best: stopped by its caller before its
/// first round ends (a time limit on a region of thousands of buffers, where nodes are costly),
/// it keeps that, not first-fit's layout (its local search runs only after the first round).
#[test]
fn a_search_stopped_in_its_first_round_keeps_the_portfolios_best() {
    use std::cell::Cell;
    let p = random_problem(3000, 600, 40);
    let options = |strategy: Strategy, work_limit| PlanOptions {
        strategy: strategy.into(),
        work_limit,
        ..PlanOptions::default()
    };
    let first_fit = plan(&p, &options(Strategy::FirstFit, DEFAULT_SEARCH_WORK)).unwrap();
    // Past the work budget, the portfolio alone.
    let portfolio = plan(&p, &options(Strategy::Search, 0)).unwrap();
    assert!(portfolio.footprint_bytes() < first_fit.footprint_bytes());
    let counting = Cell::new(false);
    let mut progress = |p: Progress| counting.set(counting.get() || p.exact && p.evaluations > 0);
    let mut stop = || counting.get();
    let mut control = Control {
        should_stop: Some(&mut stop),
        progress: Some(&mut progress),
        ..Control::default()
    };
    let stopped = plan_with(&p, &options(Strategy::Search, u64::MAX / 2), &mut control).unwrap();
    assert!(stopped.devices[0].stopped);
    assert!(stopped.is_valid());
    assert!(stopped.footprint_bytes() <= portfolio.footprint_bytes());
}

/// However large its budget (a time limit alone lifts it), the exact search does not start on
/// a region past `EXACT_MOST_VISITS`: it would list every buffer's neighbours (here 10^8).
#[test]
fn the_exact_search_does_not_list_neighbours_past_its_most_visits() {
    let buffers = (0..10_001)
        .map(|i| buffer(&i.to_string(), 64 * (1 + i as u64 % 7), 64, live(0, 9)))
        .collect();
    let p = problem(10, buffers);
    let search = plan(
        &p,
        &PlanOptions {
            strategy: Strategy::Search.into(),
            work_limit: u64::MAX,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert!(search.is_valid());
    // The portfolio alone, no nodes; what it reports proven is the live peak, as elsewhere.
    let lower_bound = search.devices[0].usage.lower_bound;
    let proof = ExactStats {
        nodes: 0,
        proven_lower_bound_bytes: lower_bound,
        optimal: search.footprint_bytes() <= lower_bound,
        arena_regions: 1,
    };
    assert_eq!(search.devices[0].exact, Some(proof));
    // `best` reports no search where its exact part did not run.
    let best = plan(&p, &PlanOptions::default()).unwrap();
    assert_eq!(best.devices[0].exact, None);
}

/// A stop heard in the greedy portfolio ends the search there, with the portfolio's best so far:
/// nothing more is built (at 100k buffers, the neighbour lists' index alone took tens of
/// milliseconds past a time limit) and the caller is not asked again.
#[test]
fn a_search_stopped_in_its_portfolio_returns_at_once() {
    use std::cell::Cell;
    let p = random_problem(3000, 600, 40);
    let options = |strategy: Strategy| PlanOptions {
        strategy: strategy.into(),
        work_limit: u64::MAX / 2,
        ..PlanOptions::default()
    };
    let first_fit = plan(&p, &options(Strategy::FirstFit)).unwrap();
    let asked = Cell::new(0u32);
    let mut stop = || {
        asked.set(asked.get() + 1);
        true
    };
    let mut control = Control {
        should_stop: Some(&mut stop),
        ..Control::default()
    };
    let stopped = plan_with(&p, &options(Strategy::Search), &mut control).unwrap();
    assert_eq!(asked.get(), 1, "asked once, stopped at once");
    let device = &stopped.devices[0];
    assert!(device.stopped && stopped.is_valid());
    assert!(stopped.footprint_bytes() <= first_fit.footprint_bytes());
    assert_eq!(device.exact.map(|e| e.nodes), Some(0));
}

/// A region's durations are its items' lifetimes in the problem's time units: from their first
/// position's start to the start of the position after their last (the last lasting one unit);
/// none without times; times that go backwards (which liveness never makes) count one unit
/// rather than panic.
#[test]
fn durations_measure_lifetimes_in_the_problems_time() {
    let item = |first, last| Item {
        size: 1,
        alignment: 1,
        live: LiveInterval::new(first, last),
    };
    let items = [item(0, 0), item(0, 1), item(1, 2), item(2, 2)];
    let mut p = problem(3, Vec::new());
    assert!(durations(&p, &items).is_empty());
    p.position_times = vec![0, 5, 10];
    assert_eq!(durations(&p, &items), [5, 10, 6, 1]);
    p.position_times = vec![10, 5, 0];
    assert_eq!(durations(&p, &items), [1, 1, 1, 1]);
}

/// A region's durations are computed only where `search` lays it out: by name at any size, in
/// `best` up to `BEST_GREEDY_MOST_ITEMS` buffers, never for another strategy; and every region
/// of a device's arena gets its buffers in canonical order, whatever its class.
#[test]
fn regions_carry_durations_only_where_search_reads_them() {
    let mut p = random_problem(40, 12, 9);
    p.position_times = (0..p.positions).map(|t| u64::from(t) * 3).collect();
    for (b, buffer) in p.buffers.iter_mut().enumerate() {
        buffer.dtype = [
            None,
            Some(crate::dtype::DType::F32),
            Some(crate::dtype::DType::F16),
        ][b % 3];
    }
    let b = p.buffers[0];
    p.buffers[0] = Buffer::new(
        0,
        b.size,
        b.alignment().trailing_zeros() as u8,
        b.dtype,
        Lifetime::Always,
    );
    let arena: Vec<u32> = (0..p.buffers.len() as u32)
        .filter(|&b| !p.buffers[b as usize].is_always_live())
        .collect();
    let regions = |strategy: StrategyChoice, precision_classes| {
        let options = PlanOptions {
            strategy,
            precision_classes,
            ..PlanOptions::default()
        };
        arena_regions(&p, &arena, &options)
    };
    for (strategy, timed) in [
        (StrategyChoice::Best, true),
        (Strategy::Search.into(), true),
        (Strategy::FirstFit.into(), false),
        (Strategy::Tlsf.into(), false),
    ] {
        for classes in [false, true] {
            let regions = regions(strategy, classes);
            assert_eq!(regions.len(), if classes { 3 } else { 1 });
            let mut members: Vec<usize> = Vec::new();
            for r in &regions {
                assert!(r.members.is_sorted());
                members.extend(r.members.iter().map(|&k| k as usize));
                let expected = match timed {
                    true => durations(&p, &r.items),
                    false => Vec::new(),
                };
                assert_eq!(r.durations, expected, "{strategy:?}");
                assert_eq!(r.durations.len(), if timed { r.items.len() } else { 0 });
            }
            members.sort_unstable();
            assert_eq!(members, (0..arena.len()).collect::<Vec<_>>());
        }
    }
    assert!(search_runs(&PlanOptions::default(), BEST_GREEDY_MOST_ITEMS));
    assert!(!search_runs(
        &PlanOptions::default(),
        BEST_GREEDY_MOST_ITEMS + 1
    ));
    let by_name = PlanOptions {
        strategy: Strategy::Search.into(),
        ..PlanOptions::default()
    };
    assert!(search_runs(&by_name, BEST_GREEDY_MOST_ITEMS + 1));
}

/// `search` minimizing reports the layout it starts from before any node, never a worse one
/// after, and last the layout it returns, so a caller's clock at the first report of it
/// (`FoundAt`) is when the answer came. (That each better layout is reported as it is found,
/// not at the turn's end, no outside observation tells apart: the reports do not change the
/// search's path.)
#[test]
fn search_reports_the_layout_it_starts_from_and_ends_on_its_answer() {
    let p = random_problem(60, 40, 12);
    let options = PlanOptions {
        strategy: Strategy::Search.into(),
        ..PlanOptions::default()
    };
    let mut heard = Vec::new();
    let mut progress = |p: Progress| heard.push(p);
    let mut control = Control {
        progress: Some(&mut progress),
        ..Control::default()
    };
    let searched = plan_with(&p, &options, &mut control).unwrap();
    let exact: Vec<Progress> = heard.into_iter().filter(|h| h.exact).collect();
    let first = exact.first().expect("the exact search reports");
    assert_eq!(first.evaluations, 0, "{first:?}");
    assert!(exact.windows(2).all(|w| w[1].best_bytes <= w[0].best_bytes));
    let last = exact.last().unwrap();
    assert_eq!(last.best_bytes, searched.footprint_bytes());
    assert!(
        first.best_bytes > last.best_bytes,
        "the search improves on its start here: {first:?} {last:?}"
    );
    // With the report's index as the clock: found at the first report of the final extent.
    let mut found = FoundAt::default();
    for (i, h) in exact.iter().enumerate() {
        found.hear(h, i as f64);
    }
    let at = exact.iter().position(|h| h.best_bytes == last.best_bytes);
    assert_eq!(found.ms(), at.map(|i| i as f64));
}

#[test]
fn found_at_is_the_last_change_of_a_region_best() {
    let heard = |device, best_bytes| Progress {
        device,
        evaluations: 0,
        exact: true,
        best_bytes,
        bound_bytes: 0,
    };
    let mut found = FoundAt::default();
    assert_eq!(found.ms(), None);
    found.hear(&heard(0, 100), 1.0);
    found.hear(&heard(0, 100), 2.0);
    assert_eq!(found.ms(), Some(1.0), "the same best again is no find");
    found.hear(&heard(0, 90), 3.0);
    found.hear(&heard(0, 90), 4.0);
    assert_eq!(found.ms(), Some(3.0));
    // Another device's first report starts its region: its layout is found then.
    found.hear(&heard(1, 90), 5.0);
    assert_eq!(found.ms(), Some(5.0));
}

/// A proof over stacked precision classes says so: two buffers of different dtypes at different
/// times are proven optimal only among the layouts that keep them apart (16 bytes, above the
/// 8-byte live peak); without precision classes the proof covers every layout and meets the
/// peak.
#[test]
fn a_proof_over_stacked_classes_counts_its_regions() {
    let mut p = problem(
        2,
        vec![buffer("a", 8, 8, live(0, 0)), buffer("b", 8, 8, live(1, 1))],
    );
    p.buffers[1].dtype = Some(DType::F16);
    let searched = |precision_classes| {
        let options = PlanOptions {
            strategy: Strategy::Search.into(),
            precision_classes,
            ..PlanOptions::default()
        };
        let plan = plan(&p, &options).unwrap();
        (plan.footprint_bytes(), plan.devices[0].exact.unwrap())
    };
    let (footprint, proof) = searched(true);
    assert_eq!((footprint, proof.arena_regions), (16, 2));
    assert!(proof.optimal && proof.proven_lower_bound_bytes == 16);
    let (footprint, proof) = searched(false);
    assert_eq!((footprint, proof.arena_regions), (8, 1));
    assert!(proof.optimal && proof.proven_lower_bound_bytes == 8);
}
