//! Layout: where each buffer lives in memory, per device.
//!
//! A device's memory is its pools. Always-live buffers conflict with everything, so they are
//! bump-packed into *static* pools in canonical order. The others share one *arena*: with
//! precision classes on, each dtype gets its own region of it (only equal dtypes share bytes),
//! laid out by the strategy and stacked in canonical class order; with them off, one region.
//! Pools are uncapped by default (64-bit offsets). Under a cap (the seeds' 32-bit-offset mode,
//! or a device's offset width), an arena that exceeds it is not split: its buffers fall back to
//! bump packing into arena pools under the cap (as the pool allocator of the seeds does), and the
//! device plan records what that cost ([`CapFallback`]). A buffer larger than the cap is an error
//! naming it. The footprint of a device is the sum of its pools.
//!
//! Every strategy is deterministic: the same problem and options give the same plan, bytes and
//! all, natively and in wasm. A caller's [`Control`] may stop `search` early (it then keeps its
//! best layout so far) and hears its progress; the core never reads a clock. Each strategy lives
//! in a module of its own; the shared machinery (interval
//! queries, gap choice, pool packing) lives once, here and in `greedy` and `interval_index`.

mod exact;
mod greedy;
mod interval_index;
mod occupancy;
mod resume;
mod rng;
mod search;
mod segment_tree;
mod tlsf;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::fmt;
use std::str::FromStr;

use crate::check::{Layout, Violation, check};
use crate::dtype::DType;
use crate::graph::align_up;
use crate::lower_bound::{DeviceUsage, device_usage};
pub use crate::placement::{Placement, Pool, PoolRole};
use crate::problem::{LiveInterval, Problem, ProblemError};

use greedy::{GapChoice, size_order};
use interval_index::{IntervalIndex, total_overlaps};
use occupancy::{Decode, Redecoder, STOP_EVERY};

/// How the arena of one device is laid out: one layout algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strategy {
    /// Greedy by decreasing size, lowest aligned offset clear of every conflict.
    FirstFit,
    /// Greedy by decreasing size, the smallest gap among conflicts that fits.
    BestFit,
    /// Online in schedule order with a two-level segregated-fit allocator, 256-byte granules.
    Tlsf,
    /// Local search over first-fit orders, with a work budget and a stop condition.
    Search,
    /// No reuse: every buffer after the previous one.
    Bump,
}

impl Strategy {
    /// Every strategy, written once: `best`'s portfolio in its tie-breaking order (simplest
    /// first, bump last), and the order the CLI, the bench and the page list them in.
    pub const ALL: [Strategy; 5] = [
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
        }
    }
}

/// What the user asks for: one strategy, or `best`, the portfolio of all of them (per device,
/// the lowest arena; ties go to the earlier in [`Strategy::ALL`], so the portfolio stops at the
/// first that reaches the arena's floor: none after it could win).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum StrategyChoice {
    One(Strategy),
    #[default]
    Best,
}

impl StrategyChoice {
    /// Every choice: the strategies, then `best`.
    pub const ALL: [StrategyChoice; 6] = [
        StrategyChoice::One(Strategy::FirstFit),
        StrategyChoice::One(Strategy::BestFit),
        StrategyChoice::One(Strategy::Tlsf),
        StrategyChoice::One(Strategy::Search),
        StrategyChoice::One(Strategy::Bump),
        StrategyChoice::Best,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StrategyChoice::One(s) => s.name(),
            StrategyChoice::Best => "best",
        }
    }

    /// The strategies this choice runs on each device.
    pub fn strategies(self) -> &'static [Strategy] {
        match self {
            // The variants are declared in the order of `ALL`.
            StrategyChoice::One(s) => std::slice::from_ref(&Strategy::ALL[s as usize]),
            StrategyChoice::Best => &Strategy::ALL,
        }
    }
}

impl From<Strategy> for StrategyChoice {
    fn from(s: Strategy) -> Self {
        StrategyChoice::One(s)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for StrategyChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of parsing a strategy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{0}` (expected one of first-fit, best-fit, tlsf, search, bump, best)")]
pub struct UnknownStrategy(pub String);

impl FromStr for StrategyChoice {
    type Err = UnknownStrategy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StrategyChoice::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownStrategy(s.to_string()))
    }
}

impl FromStr for Strategy {
    type Err = UnknownStrategy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<StrategyChoice>()? {
            StrategyChoice::One(s) => Ok(s),
            StrategyChoice::Best => Err(UnknownStrategy(s.to_string())),
        }
    }
}

/// Serialized as its name (`"first-fit"`), as the CLI flag and the URL spell it.
macro_rules! serde_by_name {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = String::deserialize(deserializer)?;
                name.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_by_name!(Strategy);
serde_by_name!(StrategyChoice);

/// The cap of the seeds' 32-bit-offset mode: 4 GiB, the reach of a `u32` offset. Not a default:
/// pools are uncapped (64-bit offsets) unless a cap is asked for.
pub const U32_OFFSET_POOL_CAP: u64 = 4 << 30;

/// The default evaluation budget of `search`, spent in full only on small regions (see
/// [`PlanOptions::work_limit`]).
pub const DEFAULT_SEARCH_EVALUATIONS: u32 = 4000;

/// The default work limit of `search` per region, in conflict visits.
pub const DEFAULT_SEARCH_WORK: u64 = 50_000_000;

/// The default work limit of a capacity search (`--capacity`): eight times
/// [`DEFAULT_SEARCH_WORK`]. A capacity is a yes-or-no question, and a "no" the search only gave
/// up on is its worst answer, so it searches longer before giving one: the search stops at the
/// first layout within the capacity, so where one is found early this costs nothing, and where
/// none is found it still answers within a second on minimalloc-sized regions
/// (docs/benchmarks.md, "`search` at the capacity").
pub const CAPACITY_SEARCH_WORK: u64 = 8 * DEFAULT_SEARCH_WORK;

/// The most conflict visits a region's exact search may start with, whatever its budget (a
/// time limit alone lifts the budget): it lists every buffer's overlapping neighbours (four
/// bytes a visit), so past this (100k buffers all live at once make 10^10) only the greedy
/// portfolio runs.
pub const EXACT_MOST_VISITS: u64 = DEFAULT_SEARCH_WORK;

/// The most buffers a region may hold for `best` to decode it more than first-fit does:
/// `best-fit`'s decode and `search`'s greedy portfolio (seven first-fit orders), each
/// O(n log n) in the occupancy tree whatever the overlap, so their cost follows the buffers, not
/// the work budget (which counts overlaps). The bar for `best` on real problems of up to 100k
/// buffers is the peak of that portfolio (OmniMalloc's `greedy_by_all`), so it runs there, at a
/// second or two at 100k (less where a decode passes the best so far early, none where
/// first-fit reaches the floor). Past this first-fit stands in, with TLSF (a tenth of its
/// time, asked first for a layout at the floor: see [`choose_arena`]): past it the other
/// decodes cost more than first-fit itself for no lower layout (on a 250k-row minimalloc CSV,
/// whose overlaps the budget covers, four times first-fit's time).
/// `best-fit` and `search` asked for by name run at any size (a time limit stops `search`
/// within a decode).
pub const BEST_GREEDY_MOST_ITEMS: usize = 150_000;

/// Within `best`, `search`'s share of that budget where the local search runs: a page load
/// stays fast (on a thousand-buffer model, a few evaluations past the portfolio), and each
/// flip of a rematerialization fit re-plans in milliseconds.
pub const BEST_SEARCH_WORK: u64 = 2_500_000;

/// Within `best`, the work of the exact search, in buffer visits ([`best_node_cost`]), on the
/// regions where it runs (those whose first round [`BEST_SEARCH_WORK`] covers: up to about
/// 320 buffers). Its nodes are what moves a layout towards the floor, and past the first
/// rounds they come cheap to a small region: this buys about 70,000 nodes on 300 buffers of 33
/// neighbours each, 37,000 on minimalloc's A and 19,000 on D, the densest, each under a tenth
/// of a second natively (docs/benchmarks.md measures it on each minimalloc file), where `search` by
/// name spends more and a time limit as long as the caller gives. With a tenth of it, `best`
/// stopped 15% above the proven bound on puzzles its search solves (minimalloc's E, upstream's
/// G) and on packed instances whose optimum is the bound (scripts/gen-packed.py).
pub const BEST_EXACT_WORK: u64 = 50_000_000;

/// What a node of `best`'s exact search costs, in buffer visits, on `n` buffers that make
/// `visits` conflict visits ([`total_overlaps`]: each buffer's neighbours and itself): its
/// placement walks the placed buffer's neighbours, raising their floors and the sections under
/// them (22 a neighbour), and its entry scans the part's unplaced buffers (2 a buffer), which
/// is the cost only where a buffer meets fewer than a tenth of the others. A node's time
/// follows its neighbours: measured as the difference of two runs with four times the nodes
/// apart, on minimalloc's A and D and on the 26 packed 250- and 300-buffer instances whose
/// search ran out of nodes, 0.018 to 0.034 µs a neighbour (0.53 µs a node at 24 neighbours a
/// buffer, 3.9 at D's 119), so every region gets about the same time, three quarters of a tenth
/// of a second natively. Weighted by its buffers (8 each) where that was more, a sparse region
/// got a third of that time: on those 26 and minimalloc's A-F, 18 of 56 ended more than 3%
/// above the floor, 15 with this weight.
fn best_node_cost(n: usize, visits: u64) -> u64 {
    let n = (n as u64).max(1);
    (2 * n).max(22 * visits / n)
}

/// Whether `search` lays out a region of `n` buffers under `options`: asked for by name at any
/// size; in `best`, which a page load runs, up to [`BEST_GREEDY_MOST_ITEMS`] (past it
/// first-fit stands in).
fn search_runs(options: &PlanOptions, n: usize) -> bool {
    match options.strategy {
        StrategyChoice::One(s) => s == Strategy::Search,
        StrategyChoice::Best => n <= BEST_GREEDY_MOST_ITEMS,
    }
}

/// Whether `search`, given `work` conflict visits on a region of `n` buffers, runs its exact
/// part: asked for by name, always; within `best`, where the nodes that [`BEST_SEARCH_WORK`]
/// (or less, when `work` is less) buys cover the exact search's first round (two probes at the
/// bound, one between: up to about 320 buffers). On the minimalloc puzzles (150-300 buffers)
/// it lands lower than the local search alone given the same work on every one; on larger
/// regions its nodes would run out before it tried a capacity between the bound and the best.
fn exact_search_runs(strategy: StrategyChoice, n: usize, work: u64) -> bool {
    match strategy {
        StrategyChoice::One(s) => s == Strategy::Search,
        StrategyChoice::Best => node_limit(work.min(BEST_SEARCH_WORK), n) >= exact::first_round(n),
    }
}

/// The nodes of the exact search that `work` conflict visits buy on `n` buffers: each node
/// visits the region's unplaced buffers a few times.
fn node_limit(work: u64, n: usize) -> u64 {
    work / (4 * n as u64).max(1)
}

/// What to plan with. Plain data: the callbacks a plan may call are in [`Control`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOptions {
    pub strategy: StrategyChoice,
    /// Only buffers of equal dtype share bytes.
    pub precision_classes: bool,
    /// The largest pool, bytes; `None`: no cap (64-bit offsets).
    pub pool_cap: Option<u64>,
    /// The most orders `search` evaluates per region.
    pub search_evaluations: u32,
    /// The most conflict visits `search` makes per region (one first-fit decode visits every
    /// buffer and its overlapping neighbours): on large regions it evaluates fewer orders, and
    /// where not even one fits it keeps first-fit's layout, so its cost stays bounded.
    pub work_limit: u64,
    /// For `search`: the footprint each device must fit in. The search stops at the first
    /// layout within it, or proves that none exists, instead of minimizing.
    pub search_capacity: Option<u64>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            strategy: StrategyChoice::Best,
            precision_classes: true,
            pool_cap: None,
            search_evaluations: DEFAULT_SEARCH_EVALUATIONS,
            work_limit: DEFAULT_SEARCH_WORK,
            search_capacity: None,
        }
    }
}

/// What a long plan tells its caller as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub device: usize,
    /// Work done so far in the current region: nodes of the exact search (`exact`), else
    /// orders the local search decoded.
    pub evaluations: u64,
    pub exact: bool,
    /// The lowest extent found so far for the current region.
    pub best_bytes: u64,
    /// No layout of the region goes below this.
    pub bound_bytes: u64,
}

/// When a plan's layout was found, read from its progress: the caller's time at the last report
/// that changed a region's best extent (a region's first report counts: it carries the layout
/// the search starts from). `search` reports each better layout as it finds it, so a caller
/// with a clock learns how soon the answer came within the time it gave. The core has no
/// clock: the caller passes its own with each report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FoundAt {
    last: Option<(usize, u64)>,
    ms: Option<f64>,
}

impl FoundAt {
    /// Hears `progress`, reported at the caller's `now_ms`.
    pub fn hear(&mut self, progress: &Progress, now_ms: f64) {
        let key = (progress.device, progress.best_bytes);
        if self.last != Some(key) {
            (self.last, self.ms) = (Some(key), Some(now_ms));
        }
    }

    /// The time of the last change heard; `None` before any report.
    pub fn ms(&self) -> Option<f64> {
        self.ms
    }
}

/// The caller's hold on a plan: when to stop early, and where progress goes. The core has no
/// clock: a caller that wants a time limit checks its own clock in `should_stop` (the CLI with
/// `std::time`, the worker with `performance.now()`). A stopped plan is still complete and
/// checked: each strategy returns its best layout so far, and the first layout of each region
/// is finished first (a time limit shorter than it still gets a plan), unless
/// `abandon_on_stop`.
#[derive(Default)]
pub struct Control<'a> {
    /// Asked between units of work; `true` ends the search with what it has.
    pub should_stop: Option<&'a mut dyn FnMut() -> bool>,
    pub progress: Option<&'a mut dyn FnMut(Progress)>,
    /// Earlier decodes of a similar problem to resume from: the same plan, sooner.
    pub earlier: Option<&'a mut Decodes>,
    /// A stop is a user's cancel, who wants no answer now rather than one later: it also ends
    /// a greedy decode under way, and a stop before a region has any layout ends the plan
    /// with none (a first-fit decode of millions of buffers takes seconds). Only
    /// [`plan_unless_cancelled`] abandons a plan; every other entry leaves this unread.
    pub abandon_on_stop: bool,
}

/// The greedy decodes of earlier plans, one per region and gap choice, for the next plan of a
/// similar problem to resume from (`occupancy::Decode`). A caller that plans many variants of
/// one problem (the flips a rematerialization fit scores) keeps one and lends it to each plan
/// through [`Control::earlier`]. A plan is the same with it or without; it is only sooner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decodes(HashMap<(usize, Option<DType>, GapChoice), Decode>);

impl Control<'_> {
    pub(crate) fn stop(&mut self) -> bool {
        self.should_stop.as_mut().is_some_and(|f| f())
    }

    /// Whether a stop now abandons the plan ([`Control::abandon_on_stop`]).
    fn abandons(&mut self) -> bool {
        self.abandon_on_stop && self.stop()
    }

    /// Runs `run` with [`Control::abandon_on_stop`] off: it makes a layout whatever the stop.
    pub fn without_abandoning<R>(&mut self, run: impl FnOnce(&mut Self) -> R) -> R {
        let abandon = std::mem::take(&mut self.abandon_on_stop);
        let ran = run(self);
        self.abandon_on_stop = abandon;
        ran
    }

    pub(crate) fn report(&mut self, progress: Progress) {
        if let Some(f) = self.progress.as_mut() {
            f(progress)
        }
    }

    /// Runs `run` under this control, its progress passed through `map` first: a search that
    /// runs another as a part reports in its own terms.
    pub(crate) fn relaying<R>(
        &mut self,
        map: impl Fn(Progress) -> Progress,
        run: impl FnOnce(&mut Control<'_>) -> R,
    ) -> R {
        let Control {
            should_stop,
            progress,
            earlier,
            abandon_on_stop,
        } = self;
        let mut relay = |p: Progress| {
            if let Some(f) = progress.as_mut() {
                f(map(p))
            }
        };
        let mut inner = Control {
            should_stop: should_stop
                .as_mut()
                .map(|f| &mut **f as &mut dyn FnMut() -> bool),
            progress: Some(&mut relay),
            earlier: earlier.as_deref_mut(),
            abandon_on_stop: *abandon_on_stop,
        };
        run(&mut inner)
    }
}

/// What a pool cap cost a device: its arena, as the strategy laid it out, was over the cap, so
/// its buffers were bump-packed into pools under it instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapFallback {
    pub cap: u64,
    /// The arena the strategy laid out, over the cap.
    pub layout_bytes: u64,
    /// What the bump-packed arena pools take instead.
    pub fallback_bytes: u64,
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
    /// The bytes of the static pools: the always-live buffers' occupied sizes
    /// (`usage.always_live_bytes`) plus the alignment padding between them.
    pub static_bytes: u64,
    /// The footprint: every pool, arena and static.
    pub footprint_bytes: u64,
    pub usage: DeviceUsage,
    /// Set when a pool cap forced the arena into bump-packed pools.
    pub cap_fallback: Option<CapFallback>,
    /// Whether the caller's stop condition ended a search early on this device.
    pub stopped: bool,
    /// What the exact search proved, when `search` laid the arena out.
    pub exact: Option<ExactStats>,
}

/// What the exact search of `search` found and proved on a device's arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactStats {
    /// Search nodes visited.
    pub nodes: u64,
    /// No layout of this device goes below this footprint (its regions' proven bounds, stacked,
    /// with the static pools).
    pub proven_lower_bound_bytes: u64,
    /// Every region reached its proven bound.
    pub optimal: bool,
    /// The arena's regions, stacked: one per precision class among its buffers (with
    /// precision classes on). The proof holds among the layouts that keep those classes apart;
    /// with one region, among all layouts. The device's lower bound (its live peak) keeps no
    /// classes apart, so a footprint proven optimal over several regions can stand above it.
    pub arena_regions: u32,
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
    /// The footprint summed over devices. [`Problem::validate`] bounds the sum of every
    /// device's bytes, so this never overflows.
    pub fn footprint_bytes(&self) -> u64 {
        self.devices.iter().map(|d| d.footprint_bytes).sum()
    }

    /// The lower bound summed over devices.
    pub fn lower_bound_bytes(&self) -> u64 {
        self.devices.iter().map(|d| d.usage.lower_bound).sum()
    }

    /// The most arena regions a device's proof stacks ([`ExactStats::arena_regions`]); `None`
    /// where no device's arena was searched.
    pub fn arena_regions(&self) -> Option<u32> {
        (self.devices.iter())
            .filter_map(|d| d.exact.map(|e| e.arena_regions))
            .max()
    }

    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }

    /// What the independent checker finds wrong with this plan of `problem`: what
    /// [`Plan::violations`] holds, its buffers named as `problem` names them (a caller whose
    /// problem holds no names checks again with a named one).
    pub fn check(&self, problem: &Problem) -> Vec<Violation> {
        let pools: Vec<&[Pool]> = self.devices.iter().map(|d| d.pools.as_slice()).collect();
        let layout = Layout {
            pools: &pools,
            placements: &self.placements,
        };
        let options = &self.options;
        check(problem, layout, options.precision_classes, options.pool_cap)
    }

    /// Where each pool of each device starts with the device's pools laid end to end, in
    /// order, each base rounded up to the largest alignment of the buffers in it, so that a
    /// buffer's address is as aligned as its offset: one address space per device, as a
    /// single-pool format (minimalloc) needs. [`Problem::validate`] leaves room for that
    /// padding beside the layouts' own; a base past 2^64 (where a strategy's own rounding took
    /// more, as TLSF's granule can) saturates rather than wraps or panics.
    pub fn pool_bases(&self, problem: &Problem) -> Vec<Vec<u64>> {
        let mut alignment: Vec<Vec<u64>> = (self.devices.iter())
            .map(|d| vec![1; d.pools.len()])
            .collect();
        for (b, p) in problem.buffers.iter().zip(&self.placements) {
            let a = &mut alignment[b.device()][p.pool];
            *a = (*a).max(b.alignment());
        }
        (self.devices.iter().zip(&alignment))
            .map(|(d, alignment)| {
                let mut end = 0u64;
                (d.pools.iter().zip(alignment))
                    .map(|(pool, &a)| {
                        let base = align_up(end, a).unwrap_or(u64::MAX);
                        end = base.saturating_add(pool.bytes);
                        base
                    })
                    .collect()
            })
            .collect()
    }

    /// Each buffer's address in its device's memory: its pool's base ([`Plan::pool_bases`])
    /// plus its offset.
    pub fn device_offsets(&self, problem: &Problem) -> Vec<u64> {
        let bases = self.pool_bases(problem);
        (0..self.placements.len())
            .map(|b| self.device_offset(problem, &bases, b))
            .collect()
    }

    /// Buffer `b`'s address in its device's memory, from the pool bases already found (the
    /// views take one buffer's at a time: a list of them all was a transient copy per buffer).
    pub fn device_offset(&self, problem: &Problem, bases: &[Vec<u64>], b: usize) -> u64 {
        let p = &self.placements[b];
        bases[problem.buffers[b].device()][p.pool].saturating_add(p.offset)
    }
}

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanError {
    #[error(transparent)]
    Problem(#[from] ProblemError),
    #[error("buffer `{buffer}` occupies {occupied} bytes, more than the pool cap of {cap} bytes")]
    OverCap {
        buffer: String,
        occupied: u64,
        cap: u64,
    },
    #[error(
        "device `{device}`: {strategy} cannot lay this arena out in 64-bit offsets (its rounding \
         takes it past 2^64 bytes); choose another strategy"
    )]
    ExtentOverflow { device: String, strategy: Strategy },
    /// A plan failed the independent checker where no plan may be shown unchecked (a bug).
    #[error("BUG: a plan failed the checker: {0}")]
    Unchecked(String),
}

/// One buffer of a region, as a strategy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Item {
    /// The occupied size.
    pub size: u64,
    pub alignment: u64,
    pub live: LiveInterval,
}

/// The items' indices with their `key` position, in order of it (ties by index): a radix sort of
/// packed keys, for the sweeps over a region in time order (at a million items, a list per
/// position or a binary search per item costs a cache miss a step).
pub(crate) fn by_position(
    items: &[Item],
    key: fn(&Item) -> u32,
) -> impl Iterator<Item = (u32, usize)> + use<> {
    let mut keyed: Vec<u64> = (items.iter().enumerate())
        .map(|(i, item)| u64::from(key(item)) << 32 | i as u64)
        .collect();
    radsort::sort(&mut keyed);
    (keyed.into_iter()).map(|k| ((k >> 32) as u32, (k & u64::from(u32::MAX)) as usize))
}

/// A strategy's answer for one region: offsets (per item) from the region's base, and its extent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegionLayout {
    pub offsets: Vec<u64>,
    pub extent: u64,
}

/// One device's arena laid out by one strategy.
struct ArenaLayout {
    strategy: Strategy,
    offsets: Vec<u64>,
    extent: u64,
    stopped: bool,
    /// For `search`: what the exact search did and proved, over the arena's regions.
    exact: Option<Proof>,
}

/// The exact search's nodes, and the least extent it proved (a sum over the `regions`
/// stacked regions).
#[derive(Debug, Clone, Copy, Default)]
struct Proof {
    nodes: u64,
    lower_bound: u64,
    regions: u32,
}

/// Plans `problem` under `options` and checks the plan with the independent checker.
pub fn plan(problem: &Problem, options: &PlanOptions) -> Result<Plan, PlanError> {
    plan_with(problem, options, &mut Control::default())
}

/// [`plan`], under the caller's [`Control`]: a stop condition and a progress callback. A stop
/// ends the plan with its best layout so far; it never abandons it.
pub fn plan_with(
    problem: &Problem,
    options: &PlanOptions,
    control: &mut Control<'_>,
) -> Result<Plan, PlanError> {
    let planned =
        control.without_abandoning(|control| plan_unless_cancelled(problem, options, control))?;
    Ok(planned.expect("a plan that is not abandoned is made"))
}

/// [`plan_with`], but `None` where [`Control::abandon_on_stop`] is set and the stop comes before
/// a layout is made.
pub fn plan_unless_cancelled(
    problem: &Problem,
    options: &PlanOptions,
    control: &mut Control<'_>,
) -> Result<Option<Plan>, PlanError> {
    let Some(laid) = lay_out_up_to(problem, options, control, None)? else {
        return Ok(None);
    };
    let devices = (laid.devices.into_iter())
        .zip(device_usage(problem))
        .map(|(d, usage)| {
            let footprint_bytes = d.footprint_bytes();
            let exact = d.exact.map(|proof| {
                let proven_lower_bound_bytes =
                    (proof.lower_bound + d.static_bytes).max(usage.lower_bound);
                ExactStats {
                    nodes: proof.nodes,
                    proven_lower_bound_bytes,
                    optimal: footprint_bytes <= proven_lower_bound_bytes,
                    arena_regions: proof.regions.max(1),
                }
            });
            DevicePlan {
                device: d.device,
                strategy: d.strategy,
                pools: d.pools,
                arena_bytes: d.arena_bytes,
                static_bytes: d.static_bytes,
                footprint_bytes,
                usage,
                cap_fallback: d.cap_fallback,
                stopped: d.stopped,
                exact,
            }
        })
        .collect();
    let mut plan = Plan {
        options: options.clone(),
        devices,
        placements: laid.placements,
        violations: Vec::new(),
    };
    plan.violations = plan.check(problem);
    Ok(Some(plan))
}

/// A plan's pools and placements before its usage curves and the checker: a footprint to
/// compare, never a plan to show or hand on. A rematerialization fit lays out hundreds of
/// flipped variants to score them, and checking each (or drawing its usage) cost as much as
/// laying it out; the variant it answers with is planned whole (see
/// `remat::Rematerializer::score`).
pub(crate) struct Unchecked {
    devices: Vec<DeviceLayout>,
    pub placements: Vec<Placement>,
}

impl Unchecked {
    pub(crate) fn footprint_bytes(&self) -> u64 {
        self.devices.iter().map(DeviceLayout::footprint_bytes).sum()
    }
}

/// One device of an [`Unchecked`] layout: a [`DevicePlan`] but for its usage, and what the exact
/// search proved on its arena alone.
struct DeviceLayout {
    device: usize,
    strategy: Strategy,
    pools: Vec<Pool>,
    arena_bytes: u64,
    static_bytes: u64,
    cap_fallback: Option<CapFallback>,
    stopped: bool,
    exact: Option<Proof>,
}

impl DeviceLayout {
    /// Every pool, arena and static.
    fn footprint_bytes(&self) -> u64 {
        self.arena_bytes + self.static_bytes
    }
}

/// Lays `problem` out under `options`, unchecked.
pub(crate) fn lay_out(
    problem: &Problem,
    options: &PlanOptions,
    control: &mut Control<'_>,
) -> Result<Unchecked, PlanError> {
    let laid =
        control.without_abandoning(|control| lay_out_up_to(problem, options, control, None))?;
    Ok(laid.expect("with no bound and no cancel, there is a layout or an error"))
}

/// [`lay_out`] when its footprint is at most `most`, else `None`, found sooner: a greedy decode
/// gives up as soon as the arena passes what `most` leaves it (a rematerialization fit asks
/// hundreds of times a fit whether a set of flips meets a target, and mostly it does not).
/// A layout it answers with is the one [`lay_out`] makes: a decode that gives up would have
/// lost to one that does not (see `choose_arena`). Not with a pool cap or a capacity search,
/// whose footprints are not the arena's extent: there it is [`lay_out`], compared.
pub(crate) fn lay_out_within(
    problem: &Problem,
    options: &PlanOptions,
    control: &mut Control<'_>,
    most: u64,
) -> Result<Option<Unchecked>, PlanError> {
    let bounded = options.pool_cap.is_none() && options.search_capacity.is_none();
    let laid = match bounded {
        true => control
            .without_abandoning(|control| lay_out_up_to(problem, options, control, Some(most)))?,
        false => Some(lay_out(problem, options, control)?),
    };
    Ok(laid.filter(|p| p.footprint_bytes() <= most))
}

/// [`lay_out`], giving up (`None`) once the footprint would pass `most`, or when a cancel
/// ([`Control::abandon_on_stop`]) comes before a layout.
fn lay_out_up_to(
    problem: &Problem,
    options: &PlanOptions,
    control: &mut Control<'_>,
    most: Option<u64>,
) -> Result<Option<Unchecked>, PlanError> {
    problem.validate()?;
    // Every device's footprint holds its arena and every always-live byte of every device: an
    // arena past `most` less those bytes passes `most`.
    let always_live: u64 = (problem.buffers.iter())
        .filter(|b| b.is_always_live())
        .map(|b| b.size)
        .fold(0, u64::saturating_add);
    let arena_most = match most.map(|m| m.checked_sub(always_live)) {
        Some(None) => return Ok(None),
        Some(Some(m)) => Some(m),
        None => None,
    };
    // Made once the first arena is laid out: at a million buffers the decode's peak is the
    // process's, and they would add 16 bytes a buffer to it.
    let mut placements: Vec<Placement> = Vec::new();
    let unplaced = || vec![Placement { pool: 0, offset: 0 }; problem.buffers.len()];
    let mut devices = Vec::with_capacity(problem.device_ids.len());
    for device in 0..problem.device_ids.len() {
        let (arena, statics) = arena_and_statics(problem, device);

        // With a capacity, the arena's share: what the static pools leave.
        let arena_capacity = match options.search_capacity {
            Some(capacity) => {
                let (mut pools, mut scratch) = (Vec::new(), unplaced());
                let cap = options.pool_cap.unwrap_or(u64::MAX);
                bump_into_pools(
                    problem,
                    &statics,
                    PoolRole::Static,
                    cap,
                    &mut pools,
                    &mut scratch,
                )?;
                Some(capacity.saturating_sub(pools.iter().map(|p| p.bytes).sum()))
            }
            None => None,
        };
        let regions = arena_regions(problem, &arena, options);
        let mut known: Vec<Known> = regions.iter().map(|_| Known::default()).collect();
        let arena_of = |options: &PlanOptions,
                        capacity: Option<u64>,
                        known: &mut [Known],
                        control: &mut Control<'_>| {
            choose_arena(
                &regions,
                arena.len(),
                options,
                (capacity, arena_most),
                known,
                device,
                control,
            )
        };
        let mut chosen = arena_of(options, arena_capacity, &mut known, control);
        if arena_most.is_some() && chosen.is_none() {
            return Ok(None);
        }
        // A capacity search that misses its goal answers with the lowest layout it can: its
        // own, or `best`'s when that is lower (`best` and the search given a goal spend their
        // nodes differently). What it proved stands either way, and its nodes are counted.
        if let (Some(capacity), Some(missed)) = (arena_capacity, &chosen)
            && missed.extent > capacity
        {
            let best_options = PlanOptions {
                strategy: StrategyChoice::Best,
                search_capacity: None,
                ..options.clone()
            };
            if let Some(best) = arena_of(&best_options, None, &mut known, control)
                && best.extent < missed.extent
            {
                let nodes = |a: &ArenaLayout| a.exact.map_or(0, |p| p.nodes);
                let exact = missed.exact.map(|proof| Proof {
                    nodes: proof.nodes + nodes(&best),
                    ..proof
                });
                let stopped = missed.stopped || best.stopped;
                chosen = Some(ArenaLayout {
                    exact,
                    stopped,
                    ..best
                });
            }
        }
        let layout = match chosen {
            Some(layout) => layout,
            None if control.abandons() => return Ok(None),
            None => {
                return Err(PlanError::ExtentOverflow {
                    device: problem.device_ids[device].clone(),
                    strategy: options.strategy.strategies()[0],
                });
            }
        };

        if placements.is_empty() {
            placements = unplaced();
        }
        let mut pools = Vec::new();
        let mut cap_fallback = None;
        match options.pool_cap {
            Some(cap) if layout.extent > cap => {
                bump_into_pools(
                    problem,
                    &arena,
                    PoolRole::Arena,
                    cap,
                    &mut pools,
                    &mut placements,
                )?;
                cap_fallback = Some(CapFallback {
                    cap,
                    layout_bytes: layout.extent,
                    fallback_bytes: pools.iter().map(|p| p.bytes).sum(),
                });
            }
            _ => {
                if !arena.is_empty() {
                    pools.push(Pool {
                        role: PoolRole::Arena,
                        bytes: layout.extent,
                    });
                }
                for (&b, &offset) in arena.iter().zip(&layout.offsets) {
                    placements[b as usize] = Placement { pool: 0, offset };
                }
            }
        }
        bump_into_pools(
            problem,
            &statics,
            PoolRole::Static,
            options.pool_cap.unwrap_or(u64::MAX),
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
        devices.push(DeviceLayout {
            device,
            strategy: layout.strategy,
            arena_bytes: sum(PoolRole::Arena),
            static_bytes: sum(PoolRole::Static),
            pools,
            cap_fallback,
            stopped: layout.stopped,
            exact: layout.exact,
        });
    }
    Ok(Some(Unchecked {
        devices,
        placements,
    }))
}

/// One precision class of a device's arena: its buffers (as places in the arena's list) and
/// their items, laid out together.
struct Region {
    class: Option<DType>,
    members: Vec<u32>,
    items: Vec<Item>,
    /// Each item's lifetime in the problem's time units ([`Problem::position_times`]), where
    /// it has them; else empty.
    durations: Vec<u64>,
}

/// The buffers of `device`: those laid out in its arena and the always-live ones, each list in
/// canonical order and cut to its length (grown by doubling, a list of a million buffers held
/// up to twice its bytes through the decode's peak, which comes after).
fn arena_and_statics(problem: &Problem, device: usize) -> (Vec<u32>, Vec<u32>) {
    // Buffer indices fit `u32` (`Problem::validate`): half the bytes of a million-buffer list.
    let (mut arena, mut statics): (Vec<u32>, Vec<u32>) = (problem.buffers_on(device))
        .map(|b| b as u32)
        .partition(|&b| !problem.buffers[b as usize].is_always_live());
    arena.shrink_to_fit();
    statics.shrink_to_fit();
    (arena, statics)
}

/// The regions of the arena buffers `arena` of one device, one per precision class (one in
/// all without precision classes), in class order.
fn arena_regions(problem: &Problem, arena: &[u32], options: &PlanOptions) -> Vec<Region> {
    let mut classes: BTreeMap<Option<DType>, Vec<u32>> = BTreeMap::new();
    for (k, &b) in arena.iter().enumerate() {
        let class = if options.precision_classes {
            problem.buffers[b as usize].dtype
        } else {
            None
        };
        classes.entry(class).or_default().push(k as u32);
    }
    (classes.into_iter())
        .map(|(class, mut members)| {
            members.shrink_to_fit();
            let items: Vec<Item> = (members.iter())
                .map(|&k| {
                    let b = &problem.buffers[arena[k as usize] as usize];
                    Item {
                        size: b.occupied_size(),
                        alignment: b.alignment(),
                        live: b.span(problem.positions),
                    }
                })
                .collect();
            // Only `search` reads them.
            let durations = match search_runs(options, items.len()) {
                true => durations(problem, &items),
                false => Vec::new(),
            };
            Region {
                class,
                members,
                items,
                durations,
            }
        })
        .collect()
}

/// How long each of `items` lives in `problem`'s time units, from when its first position starts
/// to when the position after its last does; empty where the problem has no times.
fn durations(problem: &Problem, items: &[Item]) -> Vec<u64> {
    if problem.position_times.is_empty() {
        return Vec::new();
    }
    (items.iter())
        .map(|i| {
            (problem.time_after(i.live.last))
                .saturating_sub(problem.time_at(i.live.first))
                .max(1)
        })
        .collect()
}

/// What a plan learns about a region once, for every strategy that asks: first-fit's layout
/// (`search`'s portfolio and fallback start from it), how many pairs of its buffers overlap
/// (the work budget's measure) and its floor (the most bytes live at once).
#[derive(Default)]
struct Known {
    first_fit: Option<RegionLayout>,
    overlaps: Option<u64>,
    floor: Option<u64>,
}

impl Known {
    fn floor(&mut self, items: &[Item]) -> u64 {
        *self
            .floor
            .get_or_insert_with(|| search::lower_bound_hint(items))
    }
}

/// Each region's floor (what it holds live at once), known once per region.
fn floors<'a>(regions: &'a [Region], known: &'a mut [Known]) -> impl Iterator<Item = u64> + 'a {
    regions.iter().zip(known).map(|(r, k)| k.floor(&r.items))
}

/// The lowest layout of a device's arena (its `regions`, `len` buffers) among the strategies of
/// `options`, ties to the earlier; `None` when every one drops out. Each strategy lays out
/// every region, under `capacity` where given (`search` stops at the first layout within it).
/// A strategy whose layout cannot be expressed in 64 bits drops out, and so does, in `best`,
/// one past the work budget (`first-fit` never does), and `best-fit` once it passes the best
/// so far.
///
/// No layout goes below what each region holds live at once. A strategy that reaches that
/// floor cannot be beaten (ties go to the earlier), so the rest are not run: on most real
/// models first-fit reaches it, and `best` then costs what first-fit does. The floor is
/// computed only when a strategy follows (one strategy alone needs none).
///
/// Past [`BEST_GREEDY_MOST_ITEMS`] buffers, where `best` is first-fit and TLSF, TLSF is first
/// asked for a layout at the floor: it gives up as soon as it passes it, holding nothing, and
/// where it reaches it first-fit is not run. A recorded trace's allocations often let it (a
/// generated training snapshot of 1.18 million allocations: both reach the floor, and TLSF
/// takes a tenth of first-fit's time); where they do not, the probe stops at the first
/// allocation past the floor.
fn choose_arena(
    regions: &[Region],
    len: usize,
    options: &PlanOptions,
    (capacity, most): (Option<u64>, Option<u64>),
    known: &mut [Known],
    device: usize,
    control: &mut Control<'_>,
) -> Option<ArenaLayout> {
    let floor_of = |known: &mut [Known]| floors(regions, known).fold(0, u64::saturating_add);
    // No layout goes below the floor: past the bound, none is within it.
    if most.is_some_and(|m| floor_of(known) > m) {
        return None;
    }
    let strategies = options.strategy.strategies();
    if options.strategy == StrategyChoice::Best && len > BEST_GREEDY_MOST_ITEMS {
        let floor = floor_of(known);
        let at_the_floor = (capacity, Some(floor.saturating_add(1)));
        let tried = layout_arena(
            regions,
            len,
            Strategy::Tlsf,
            options,
            at_the_floor,
            known,
            device,
            control,
        );
        if let Some(layout) = tried.filter(|layout| layout.extent <= floor) {
            return Some(layout);
        }
    }
    let mut chosen: Option<ArenaLayout> = None;
    for (k, &strategy) in strategies.iter().enumerate() {
        // A cancel before the arena has a layout (an empty one needs none) drops the plan.
        if chosen.is_none() && !regions.is_empty() && control.abandons() {
            return None;
        }
        // Only a lower layout would be chosen: `best-fit`, the costliest of the greedy
        // decodes, and TLSF give up as soon as they pass the best so far (they usually lose),
        // and under a bound `most` so does `first-fit`. A decode that gives up would not have been
        // chosen, so the layout chosen is the same with a bound, where it is within it.
        let must_beat =
            (chosen.as_ref().map(|c| c.extent)).or_else(|| most.map(|m| m.saturating_add(1)));
        let Some(candidate) = layout_arena(
            regions,
            len,
            strategy,
            options,
            (capacity, must_beat),
            known,
            device,
            control,
        ) else {
            continue;
        };
        if chosen.as_ref().is_none_or(|c| candidate.extent < c.extent) {
            chosen = Some(candidate);
        }
        let last = k + 1 == strategies.len();
        if !last && chosen.as_ref().is_some_and(|c| c.extent <= floor_of(known)) {
            break;
        }
    }
    chosen
}

/// Lays out a device's arena of `len` buffers, its `regions` stacked (`known`, one per region,
/// kept from strategy to strategy). `None` when the strategy's layout would pass 2^64 bytes.
#[allow(clippy::too_many_arguments)]
fn layout_arena(
    regions: &[Region],
    len: usize,
    strategy: Strategy,
    options: &PlanOptions,
    (capacity, must_beat): (Option<u64>, Option<u64>),
    known: &mut [Known],
    device: usize,
    control: &mut Control<'_>,
) -> Option<ArenaLayout> {
    let mut offsets = vec![0; len];
    let mut base = 0u64;
    let mut stopped = false;
    // `search` asked for by name reports its proof on every device, one with no region too.
    let by_name = options.strategy == StrategyChoice::One(Strategy::Search);
    let mut exact: Option<Proof> = by_name.then(Proof::default);
    // A layout to beat binds each region: stacked, one gives up once it alone leaves the
    // others' floors no room below it (the arena is at least its extent and their floors).
    let beat: Vec<Option<u64>> = match must_beat {
        Some(beat) if regions.len() > 1 => {
            let floors: Vec<u64> = floors(regions, known).collect();
            let all = floors.iter().fold(0, |a: u64, &f| a.saturating_add(f));
            (floors.iter())
                .map(|&f| Some(beat.saturating_sub(all - f)))
                .collect()
        }
        _ => vec![must_beat; regions.len()],
    };
    for (
        (
            Region {
                class,
                members,
                items,
                durations,
            },
            known,
        ),
        beat,
    ) in regions.iter().zip(known).zip(beat)
    {
        // A capacity binds a lone region; stacked regions are each minimized.
        let lone = |bytes: Option<u64>| bytes.filter(|_| regions.len() == 1);
        let region = layout_region(
            (items, durations),
            strategy,
            options,
            (lone(capacity), beat),
            known,
            (device, *class),
            control,
        )?;
        stopped |= region.stopped;
        if let Some(proof) = region.exact {
            let sum = exact.get_or_insert_default();
            sum.nodes += proof.nodes;
            sum.lower_bound += proof.lower_bound;
        }
        let granule = if strategy == Strategy::Tlsf {
            tlsf::GRANULE
        } else {
            1
        };
        let alignment = items.iter().map(|i| i.alignment).fold(granule, u64::max);
        base = align_up(base, alignment)?;
        for (&k, &offset) in members.iter().zip(&region.layout.offsets) {
            offsets[k as usize] = base.checked_add(offset)?;
        }
        base = base.checked_add(region.layout.extent)?;
    }
    Some(ArenaLayout {
        strategy,
        offsets,
        extent: base,
        stopped,
        exact: exact.map(|proof| Proof {
            regions: u32::try_from(regions.len()).unwrap_or(u32::MAX),
            ..proof
        }),
    })
}

/// A region's layout, whether the caller stopped the strategy early, and for `search` what
/// the exact search proved.
struct RegionOutcome {
    layout: RegionLayout,
    stopped: bool,
    exact: Option<Proof>,
}

/// Lays out one region with one strategy; `None` when its layout would pass 2^64 bytes (only
/// TLSF, which rounds every item up to the region's largest alignment, can), when `best`
/// drops the strategy for passing the work budget, or when `best-fit`'s decode or TLSF's arena
/// passes `must_beat` (`best` already has a layout that low: see [`plan_with`]).
fn layout_region(
    (items, durations): (&[Item], &[u64]),
    strategy: Strategy,
    options: &PlanOptions,
    (goal, must_beat): (Option<u64>, Option<u64>),
    known: &mut Known,
    (device, class): (usize, Option<DType>),
    control: &mut Control<'_>,
) -> Option<RegionOutcome> {
    let intervals = || -> Vec<LiveInterval> { items.iter().map(|i| i.live).collect() };
    // Every item's overlapping buffers, counted without listing them: what `best-fit`'s lists
    // and one decode of `search` cost.
    let mut overlaps = || {
        *known
            .overlaps
            .get_or_insert_with(|| total_overlaps(&intervals()))
    };
    // A greedy decode; `None` past `extent_limit`, or when a stop abandons it.
    let within = |choice, extent_limit, control: &mut Control<'_>| {
        // Held apart while the decode runs, which asks the control whether to abandon.
        let mut decodes = control.earlier.take();
        let earlier = (decodes.as_deref_mut())
            .map(|decodes| decodes.0.entry((device, class, choice)).or_default());
        let order = size_order(items);
        let placed = occupancy::place(items, &order, choice, earlier, extent_limit, &mut || {
            control.abandons()
        });
        control.earlier = decodes;
        placed
    };
    // `None` only when a stop abandons it.
    let mut first_fit = |control: &mut Control<'_>| {
        if known.first_fit.is_none() {
            known.first_fit = within(GapChoice::Lowest, u64::MAX, control);
        }
        known.first_fit.clone()
    };
    let done = |layout| {
        Some(RegionOutcome {
            layout,
            stopped: false,
            exact: None,
        })
    };
    // In `best`, a strategy past the work budget drops out: `first-fit` stands in.
    let in_best = options.strategy == StrategyChoice::Best;
    match strategy {
        Strategy::FirstFit => match must_beat {
            Some(extent) => done(within(
                GapChoice::Lowest,
                extent.saturating_sub(1),
                control,
            )?),
            None => done(first_fit(control)?),
        },
        Strategy::BestFit
            if in_best
                && (items.len() > BEST_GREEDY_MOST_ITEMS || overlaps() > options.work_limit) =>
        {
            None
        }
        Strategy::BestFit => {
            let below = must_beat.map_or(u64::MAX, |extent| extent.saturating_sub(1));
            done(within(GapChoice::Smallest, below, control)?)
        }
        Strategy::Tlsf => {
            let below = must_beat.map_or(u64::MAX, |extent| extent.saturating_sub(1));
            done(tlsf::layout(items, below)?)
        }
        Strategy::Bump => {
            let mut offsets = Vec::with_capacity(items.len());
            let mut extent = 0;
            for item in items {
                let offset =
                    align_up(extent, item.alignment).expect("validated: extents fit in u64");
                offsets.push(offset);
                extent = offset + item.size;
            }
            done(RegionLayout { offsets, extent })
        }
        Strategy::Search => {
            // Past the work budget neither the local search nor the exact part runs: the
            // portfolio alone, seven decodes the caller may stop at any point (the first is
            // first-fit's).
            if !search_runs(options, items.len()) {
                return None;
            }
            let visits = overlaps();
            let over_budget = visits > options.work_limit.min(EXACT_MOST_VISITS);
            let work = match (over_budget, in_best) {
                (true, _) => 0,
                (false, true) => options.work_limit.min(BEST_SEARCH_WORK),
                (false, false) => options.work_limit,
            };
            let evaluations_of = |work: u64| {
                (work / visits.max(1)).min(u64::from(options.search_evaluations)) as u32
            };
            let evaluations = evaluations_of(work);
            let fallback = first_fit(control)?;
            let floor = known.floor(items);
            // What is proven before any node: the live peak.
            let nothing_searched = Proof {
                nodes: 0,
                lower_bound: floor,
                regions: 1,
            };
            let mut redecoder = Redecoder::new(items);
            if over_budget || !exact_search_runs(options.strategy, items.len(), work) {
                let (layout, stopped) = search::layout(
                    items,
                    &mut redecoder,
                    (fallback, floor),
                    evaluations,
                    device,
                    control,
                );
                // `search` asked for by name reports what is proven even where its exact part
                // did not run: the live peak, with no nodes.
                return Some(RegionOutcome {
                    layout,
                    stopped,
                    exact: (!in_best).then_some(nothing_searched),
                });
            }
            // The exact search starts from the greedy portfolio's best, heard as its own
            // progress (no nodes yet): a lower start than first-fit's, and on a region whose
            // nodes are costly (thousands of buffers) and a time limit that ends the search
            // before its first round, the answer (the local search, its warm start, runs only
            // after that round).
            let (order, start, halted) = control.relaying(
                |p| Progress {
                    evaluations: 0,
                    exact: true,
                    ..p
                },
                |control| {
                    search::portfolio_best(
                        items,
                        &mut redecoder,
                        (fallback, floor),
                        device,
                        control,
                    )
                },
            );
            // Stopped in the portfolio: its best so far, before the neighbour lists (at 100k
            // buffers their index alone takes tens of milliseconds past the caller's limit).
            if halted {
                return Some(RegionOutcome {
                    layout: start,
                    stopped: true,
                    exact: Some(nothing_searched),
                });
            }
            // With a goal the warm start is only what the search answers if it gives up: it
            // gets `best`'s budget, so a capacity the exact search meets is not kept waiting.
            let warm_evaluations = match goal {
                Some(_) => {
                    evaluations.min(evaluations_of(options.work_limit.min(BEST_SEARCH_WORK)))
                }
                None => evaluations,
            };
            let mut warm = |control: &mut Control<'_>| {
                search::improve(
                    items,
                    &mut redecoder,
                    (order.clone(), start.clone()),
                    floor,
                    warm_evaluations,
                    device,
                    control,
                )
            };
            // Every buffer's neighbours, listed (a stop is heard every `STOP_EVERY` buffers:
            // at tens of thousands of buffers the lists take a good part of a second).
            let intervals = intervals();
            let index =
                IntervalIndex::new(&intervals, &(0..items.len() as u32).collect::<Vec<_>>());
            let mut neighbours: Vec<Vec<u32>> = Vec::with_capacity(items.len());
            for (i, &interval) in intervals.iter().enumerate() {
                if i % STOP_EVERY == STOP_EVERY - 1 && control.stop() {
                    return Some(RegionOutcome {
                        layout: start,
                        stopped: true,
                        exact: Some(nothing_searched),
                    });
                }
                let mut out = Vec::new();
                index.overlapping(interval, u32::MAX, &mut out);
                out.retain(|&j| j as usize != i);
                neighbours.push(out);
            }
            // The portfolio's layout to fall back on, the local search as a warm start only
            // when the first round does not settle it, and a node budget of the same work.
            let limit = match in_best {
                true => {
                    options.work_limit.min(BEST_EXACT_WORK) / best_node_cost(items.len(), visits)
                }
                false => node_limit(work, items.len()),
            };
            let m = exact::minimize(
                (items, durations),
                &neighbours,
                start.clone(),
                &mut warm,
                floor,
                goal,
                limit,
                device,
                control,
            );
            Some(RegionOutcome {
                stopped: m.stopped,
                exact: Some(Proof {
                    nodes: m.nodes,
                    lower_bound: m.proven_lower_bound,
                    regions: 1,
                }),
                layout: m.layout,
            })
        }
    }
}

/// Bump-packs `buffers` (in canonical order) into new pools of `role`, none over `cap`.
fn bump_into_pools(
    problem: &Problem,
    buffers: &[u32],
    role: PoolRole,
    cap: u64,
    pools: &mut Vec<Pool>,
    placements: &mut [Placement],
) -> Result<(), PlanError> {
    let items: Vec<(u64, u64)> = (buffers.iter())
        .map(|&b| &problem.buffers[b as usize])
        .map(|b| (b.occupied_size(), b.alignment()))
        .collect();
    let packed = pack_into_pools(&items, cap).map_err(|k| PlanError::OverCap {
        buffer: problem.buffer_name(buffers[k] as usize),
        occupied: items[k].0,
        cap,
    })?;
    let first = pools.len();
    pools.extend(packed.pool_bytes.iter().map(|&bytes| Pool { role, bytes }));
    for (&b, &(pool, offset)) in buffers.iter().zip(&packed.placements) {
        placements[b as usize] = Placement {
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
