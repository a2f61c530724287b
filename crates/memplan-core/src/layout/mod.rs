//! Layout: where each buffer lives in memory, per device.
//!
//! A device's memory is its pools. Always-live buffers conflict with everything, so they are
//! bump-packed into *static* pools in canonical order. The others share one *arena*: with
//! precision classes on, each dtype gets its own region of it (only equal dtypes share bytes),
//! laid out by the strategy and stacked in canonical class order; with them off, one region.
//! When the arena exceeds the pool cap it is not split: its buffers fall back to bump packing
//! into arena pools under the cap (as the pool allocator of the seeds does). A buffer larger than
//! the cap is an error naming it. The footprint of a device is the sum of its pools.
//!
//! Every strategy is deterministic: the same problem and options give the same plan, bytes and
//! all, natively and in wasm. Each lives in a module of its own; the shared machinery (interval
//! queries, gap choice, pool packing) lives once, here and in `greedy` and `interval_index`.

mod greedy;
mod interval_index;
mod search;
mod tlsf;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::check::{Layout, Violation, check};
use crate::dtype::DType;
use crate::graph::align_up;
use crate::lower_bound::{DeviceUsage, device_usage};
use crate::problem::{LiveInterval, Problem, ProblemError};

use greedy::{GapChoice, place_in_order, size_order};
use interval_index::IntervalIndex;

/// How the arena of each device is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strategy {
    /// Greedy by decreasing size, lowest aligned offset clear of every conflict.
    FirstFit,
    /// Greedy by decreasing size, the smallest gap among conflicts that fits.
    BestFit,
    /// Online in schedule order with a two-level segregated-fit allocator, 256-byte granules.
    Tlsf,
    /// No reuse: every buffer after the previous one.
    Bump,
    /// Local search over first-fit orders, with an evaluation budget.
    Search,
    /// Per device, the lowest of the strategies above.
    Best,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [
        Strategy::FirstFit,
        Strategy::BestFit,
        Strategy::Tlsf,
        Strategy::Bump,
        Strategy::Search,
        Strategy::Best,
    ];

    /// The strategies `best` picks from, in its tie-breaking order (simplest first).
    const CANDIDATES: [Strategy; 5] = [
        Strategy::FirstFit,
        Strategy::BestFit,
        Strategy::Tlsf,
        Strategy::Search,
        Strategy::Bump,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::FirstFit => "first-fit",
            Strategy::BestFit => "best-fit",
            Strategy::Tlsf => "tlsf",
            Strategy::Bump => "bump",
            Strategy::Search => "search",
            Strategy::Best => "best",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Serialized as its name (`"first-fit"`), as the CLI flag and the URL spell it.
impl serde::Serialize for Strategy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Strategy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// The error of parsing a strategy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{0}` (expected one of first-fit, best-fit, tlsf, bump, search, best)")]
pub struct UnknownStrategy(pub String);

impl FromStr for Strategy {
    type Err = UnknownStrategy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Strategy::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| UnknownStrategy(s.to_string()))
    }
}

/// The default per-pool cap: 4 GiB, the reach of a `u32` offset.
pub const DEFAULT_POOL_CAP: u64 = 4 << 30;

/// The default evaluation budget of `search`, spent in full only on small regions (see
/// [`PlanOptions::search_work`]).
pub const DEFAULT_SEARCH_EVALUATIONS: u32 = 4000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    pub strategy: Strategy,
    /// Only buffers of equal dtype share bytes.
    pub precision_classes: bool,
    /// The largest pool, bytes.
    pub pool_cap: u64,
    /// The most orders `search` evaluates per region.
    pub search_evaluations: u32,
    /// The most conflict visits `search` makes per region (one first-fit decode visits every
    /// buffer and its overlapping neighbours): on large regions it evaluates fewer orders, and
    /// where not even one fits it keeps first-fit's layout, so its cost stays bounded.
    pub search_work: u64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            strategy: Strategy::Best,
            precision_classes: true,
            pool_cap: DEFAULT_POOL_CAP,
            search_evaluations: DEFAULT_SEARCH_EVALUATIONS,
            search_work: 50_000_000,
        }
    }
}

/// What a pool holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolRole {
    /// Buffers with live intervals, sharing bytes over time.
    Arena,
    /// Always-live buffers, one after another.
    Static,
}

impl PoolRole {
    pub fn name(self) -> &'static str {
        match self {
            PoolRole::Arena => "arena",
            PoolRole::Static => "static",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    pub role: PoolRole,
    pub bytes: u64,
}

/// Where one buffer lives: a pool of its device and the offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub pool: usize,
    pub offset: u64,
}

/// The memory of one device under a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevicePlan {
    pub device: usize,
    /// The strategy that laid the arena out (for `best`, the one it picked).
    pub strategy: Strategy,
    /// Arena pools first, then static pools.
    pub pools: Vec<Pool>,
    pub arena_bytes: u64,
    pub always_live_bytes: u64,
    /// The footprint: every pool, arena and static.
    pub peak_bytes: u64,
    pub usage: DeviceUsage,
}

impl DevicePlan {
    pub fn lower_bound_bytes(&self) -> u64 {
        self.usage.lower_bound
    }
}

/// A layout of every buffer of a problem, with the checker's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub options: PlanOptions,
    pub devices: Vec<DevicePlan>,
    /// One per buffer, in problem order.
    pub placements: Vec<Placement>,
    /// What the independent checker found wrong; empty for every plan memplan makes.
    pub violations: Vec<Violation>,
}

impl Plan {
    /// The footprint summed over devices.
    pub fn peak_bytes(&self) -> u64 {
        self.devices.iter().map(|d| d.peak_bytes).sum()
    }

    /// The lower bound summed over devices.
    pub fn lower_bound_bytes(&self) -> u64 {
        self.devices.iter().map(|d| d.usage.lower_bound).sum()
    }

    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }

    /// Each buffer's offset in its device's memory with the device's pools laid end to end, in
    /// order: one address space per device, as a single-pool format (minimalloc) needs.
    pub fn device_offsets(&self, problem: &Problem) -> Vec<u64> {
        let bases: Vec<Vec<u64>> = self
            .devices
            .iter()
            .map(|d| {
                d.pools
                    .iter()
                    .scan(0u64, |base, pool| {
                        let start = *base;
                        *base += pool.bytes;
                        Some(start)
                    })
                    .collect()
            })
            .collect();
        problem
            .buffers
            .iter()
            .zip(&self.placements)
            .map(|(b, p)| bases[b.device][p.pool] + p.offset)
            .collect()
    }
}

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Problem(#[from] ProblemError),
    #[error("buffer `{buffer}` needs {size} bytes, more than the pool cap of {cap} bytes")]
    OverCap { buffer: String, size: u64, cap: u64 },
}

/// One buffer of a region, as a strategy sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item {
    /// The occupied size.
    pub size: u64,
    pub alignment: u64,
    pub live: LiveInterval,
}

/// A strategy's answer for one region: offsets (per item) from the region's base, and its extent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegionLayout {
    pub offsets: Vec<u64>,
    pub extent: u64,
}

/// Plans `problem` under `options` and checks the plan with the independent checker.
pub fn plan(problem: &Problem, options: &PlanOptions) -> Result<Plan, PlanError> {
    problem.validate()?;
    let usages = device_usage(problem);
    let mut placements = vec![Placement { pool: 0, offset: 0 }; problem.buffers.len()];
    let mut devices = Vec::with_capacity(problem.device_ids.len());
    for usage in usages {
        let device = usage.device;
        let buffers: Vec<usize> = problem.buffers_on(device).collect();
        let (arena, statics): (Vec<usize>, Vec<usize>) = buffers
            .iter()
            .partition(|&&b| !problem.buffers[b].is_always_live());

        let (strategy, arena_offsets, arena_extent) = match options.strategy {
            Strategy::Best => Strategy::CANDIDATES
                .into_iter()
                .map(|s| {
                    let (offsets, extent) = layout_arena(problem, &arena, s, options);
                    (s, offsets, extent)
                })
                .min_by_key(|(s, _, extent)| {
                    (*extent, Strategy::CANDIDATES.iter().position(|c| c == s))
                })
                .expect("best has candidates"),
            s => {
                let (offsets, extent) = layout_arena(problem, &arena, s, options);
                (s, offsets, extent)
            }
        };

        let mut pools = Vec::new();
        if arena_extent <= options.pool_cap {
            if !arena.is_empty() {
                pools.push(Pool {
                    role: PoolRole::Arena,
                    bytes: arena_extent,
                });
            }
            for (&b, &offset) in arena.iter().zip(&arena_offsets) {
                placements[b] = Placement { pool: 0, offset };
            }
        } else {
            bump_into_pools(
                problem,
                &arena,
                PoolRole::Arena,
                options.pool_cap,
                &mut pools,
                &mut placements,
            )?;
        }
        bump_into_pools(
            problem,
            &statics,
            PoolRole::Static,
            options.pool_cap,
            &mut pools,
            &mut placements,
        )?;

        let sum = |role| {
            pools
                .iter()
                .filter(|p| p.role == role)
                .map(|p| p.bytes)
                .sum::<u64>()
        };
        let (arena_bytes, always_live_bytes) = (sum(PoolRole::Arena), sum(PoolRole::Static));
        devices.push(DevicePlan {
            device,
            strategy,
            pools,
            arena_bytes,
            always_live_bytes,
            peak_bytes: arena_bytes + always_live_bytes,
            usage,
        });
    }
    let mut plan = Plan {
        options: *options,
        devices,
        placements,
        violations: Vec::new(),
    };
    let pools: Vec<&[Pool]> = plan.devices.iter().map(|d| d.pools.as_slice()).collect();
    let layout = Layout {
        pools: &pools,
        placements: &plan.placements,
    };
    plan.violations = check(problem, layout, options.precision_classes, options.pool_cap);
    Ok(plan)
}

/// Lays out the arena buffers `arena` of one device: one region per precision class, stacked.
/// Returns the offset of each buffer of `arena` and the arena's extent.
fn layout_arena(
    problem: &Problem,
    arena: &[usize],
    strategy: Strategy,
    options: &PlanOptions,
) -> (Vec<u64>, u64) {
    let mut classes: BTreeMap<Option<DType>, Vec<usize>> = BTreeMap::new();
    for (k, &b) in arena.iter().enumerate() {
        let class = if options.precision_classes {
            problem.buffers[b].dtype
        } else {
            None
        };
        classes.entry(class).or_default().push(k);
    }
    let mut offsets = vec![0; arena.len()];
    let mut base = 0u64;
    for members in classes.values() {
        let items: Vec<Item> = members
            .iter()
            .map(|&k| {
                let b = &problem.buffers[arena[k]];
                Item {
                    size: b.occupied_size(),
                    alignment: b.alignment,
                    live: b.span(problem.positions),
                }
            })
            .collect();
        let region = layout_region(&items, strategy, options);
        let alignment = if strategy == Strategy::Tlsf {
            tlsf::GRANULE
        } else {
            1
        };
        let alignment = items.iter().map(|i| i.alignment).fold(alignment, u64::max);
        base = align_up(base, alignment).expect("validated: extents fit in u64");
        for (&k, &offset) in members.iter().zip(&region.offsets) {
            offsets[k] = base + offset;
        }
        base += region.extent;
    }
    (offsets, base)
}

/// Lays out one region with one strategy (never `best`, which picks among these per device).
fn layout_region(items: &[Item], strategy: Strategy, options: &PlanOptions) -> RegionLayout {
    let intervals: Vec<LiveInterval> = items.iter().map(|i| i.live).collect();
    let greedy = |choice| {
        let order = size_order(items);
        let mut rank = vec![0u32; items.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        let index = IntervalIndex::new(&intervals, &rank);
        // Only the conflicts placed before an item matter to it.
        place_in_order(items, &order, choice, &mut |r, out| {
            index.overlapping(intervals[order[r] as usize], r as u32, out)
        })
    };
    match strategy {
        Strategy::FirstFit => greedy(GapChoice::Lowest),
        Strategy::BestFit => greedy(GapChoice::Smallest),
        Strategy::Tlsf => tlsf::layout(items),
        Strategy::Bump => {
            let mut offsets = Vec::with_capacity(items.len());
            let mut extent = 0;
            for item in items {
                let offset =
                    align_up(extent, item.alignment).expect("validated: extents fit in u64");
                offsets.push(offset);
                extent = offset + item.size;
            }
            RegionLayout { offsets, extent }
        }
        Strategy::Search => {
            // One decode visits every item and its neighbours; count them (cheaply, without
            // listing them) and keep first-fit's layout when not even one decode fits the budget.
            let identity: Vec<u32> = (0..items.len() as u32).collect();
            let index = IntervalIndex::new(&intervals, &identity);
            let visits = intervals
                .iter()
                .map(|&i| index.count_overlapping(i))
                .sum::<u64>();
            if visits > options.search_work {
                return greedy(GapChoice::Lowest);
            }
            let neighbours: Vec<Vec<u32>> = intervals
                .iter()
                .enumerate()
                .map(|(i, &interval)| {
                    let mut out = Vec::new();
                    index.overlapping(interval, u32::MAX, &mut out);
                    out.retain(|&j| j as usize != i);
                    out
                })
                .collect();
            let evaluations = (options.search_work / visits.max(1))
                .min(u64::from(options.search_evaluations)) as u32;
            search::layout(items, &neighbours, evaluations)
        }
        Strategy::Best => unreachable!("best picks among the other strategies per device"),
    }
}

/// Bump-packs `buffers` (in canonical order) into new pools of `role`, none over `cap`.
fn bump_into_pools(
    problem: &Problem,
    buffers: &[usize],
    role: PoolRole,
    cap: u64,
    pools: &mut Vec<Pool>,
    placements: &mut [Placement],
) -> Result<(), PlanError> {
    let items: Vec<(u64, u64)> = buffers
        .iter()
        .map(|&b| {
            (
                problem.buffers[b].occupied_size(),
                problem.buffers[b].alignment,
            )
        })
        .collect();
    let packed = pack_into_pools(&items, cap).map_err(|k| PlanError::OverCap {
        buffer: problem.buffers[buffers[k]].name.clone(),
        size: problem.buffers[buffers[k]].size,
        cap,
    })?;
    let first = pools.len();
    pools.extend(packed.pool_bytes.iter().map(|&bytes| Pool { role, bytes }));
    for (&b, &(pool, offset)) in buffers.iter().zip(&packed.placements) {
        placements[b] = Placement {
            pool: first + pool,
            offset,
        };
    }
    Ok(())
}

/// Items bump-packed into pools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedPools {
    /// (pool, offset) per item.
    pub placements: Vec<(usize, u64)>,
    pub pool_bytes: Vec<u64>,
}

/// Packs `(size, alignment)` items in order, each after the previous at its alignment, opening a
/// new pool whenever the next item would take the current one past `cap`. Returns the index of
/// the first item larger than `cap` as the error.
pub fn pack_into_pools(items: &[(u64, u64)], cap: u64) -> Result<PackedPools, usize> {
    let mut placements = Vec::with_capacity(items.len());
    let mut pool_bytes: Vec<u64> = Vec::new();
    for (k, &(size, alignment)) in items.iter().enumerate() {
        if size > cap {
            return Err(k);
        }
        let fits_at = pool_bytes.last().and_then(|&used| {
            let offset = align_up(used, alignment)?;
            (offset.checked_add(size)? <= cap).then_some(offset)
        });
        let offset = match fits_at {
            Some(offset) => offset,
            None => {
                pool_bytes.push(0);
                0
            }
        };
        let pool = pool_bytes.len() - 1;
        pool_bytes[pool] = offset + size;
        placements.push((pool, offset));
    }
    Ok(PackedPools {
        placements,
        pool_bytes,
    })
}

#[cfg(test)]
mod tests;
