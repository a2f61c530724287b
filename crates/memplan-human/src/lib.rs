//! Human-readable text: one-line messages, ratios, and the tables and sentences the CLI prints
//! and the page shows (the plan table, the diff, the spaces, a fit's log, a sweep, the fits
//! answer, the bench table), so that both say the same strings. Sizes read and written as
//! people write them are [`memplan_core::units`], re-exported here.
//!
//! Presentation only: every number comes from memplan-core or memplan-formats' reports.

use std::fmt::Write;

use memplan_core::remat::Target;
use memplan_core::spaces::SpaceCounts;
use memplan_core::{Plan, Problem, StrategyChoice};
use memplan_engine::answers::{
    FitAnswer, FitsAnswer, SourceAnswer, SpacesAnswer, SweepAnswer, SweepPointAnswer,
};

pub use memplan_core::units::{bytes, grouped, parse_bytes, ratio, si, signed_bytes, work};
use memplan_engine::advise::{AdviceAnswer, Lever, LeverCost};
use memplan_engine::diff::{Change, PlanDiff, Side, TensorDiff};
use memplan_formats::report::{
    CapFallbackReport, GivenPlanReport, OrderReport, PlacementReport, PlanSummary, SiteReport,
};

/// The longest id a message shows whole; a longer one keeps its head and tail around "…".
const LONGEST_SHOWN_ID: usize = 80;

/// `n` and `noun`, plural unless `n` is 1: `1 pool`, `3 pools`.
pub fn counted(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// `text` as one line a terminal or a banner shows as written: control characters (a newline,
/// an escape sequence), line and paragraph separators and the bidirectional controls that
/// reorder what follows them (U+202E) are escaped, and an id between backticks longer than
/// [`LONGEST_SHOWN_ID`] characters is cut to its head and tail, so a megabyte id does not
/// make a megabyte message.
pub fn one_line(text: &str) -> String {
    let escaped = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
                    | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            )
    };
    let mut out = String::new();
    for (k, part) in text.split('`').enumerate() {
        if k > 0 {
            out.push('`');
        }
        let chars = part.chars().count();
        // Odd parts are inside backticks: ids.
        let cut = k % 2 == 1 && chars > LONGEST_SHOWN_ID;
        for (i, c) in part.chars().enumerate() {
            if cut && i == LONGEST_SHOWN_ID / 2 {
                out.push('…');
            }
            if cut && i >= LONGEST_SHOWN_ID / 2 && i < chars - LONGEST_SHOWN_ID / 4 {
                continue;
            }
            if escaped(c) {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
    }
    out
}

/// Reads a fit's budget: a byte size as [`parse_bytes`] reads it, or `minimize`.
pub fn parse_target(text: &str) -> Option<Target> {
    if text.trim().eq_ignore_ascii_case("minimize") {
        return Some(Target::Minimize);
    }
    parse_bytes(text).map(Target::Bytes)
}

/// Reads a percentage: `5%` or `5`.
pub fn parse_percent(text: &str) -> Option<f64> {
    let t = text.trim();
    let number: f64 = t.strip_suffix('%').unwrap_or(t).trim().parse().ok()?;
    number.is_finite().then_some(number)
}

/// `memplan diff`'s answer: both plans' figures, the counts of each change, and the tensors
/// that changed, one per line.
pub fn diff_text(d: &PlanDiff) -> String {
    let mut out = String::new();
    let side = |s: &Side| {
        format!(
            "footprint {} (lower bound {})",
            bytes(s.footprint_bytes),
            bytes(s.lower_bound_bytes)
        )
    };
    let _ = writeln!(out, "before: {}", side(&d.before));
    let _ = writeln!(out, "after:  {} ({})", side(&d.after), footprint_change(d));
    let _ = writeln!(out, "tensors: {}", diff_counts(d));
    for t in d.tensors.iter().filter(|t| t.change != Change::Same) {
        let _ = writeln!(
            out,
            "  {:<28} {:<28} {} -> {}",
            t.tensor,
            change_text(t),
            placement_text(&t.before),
            placement_text(&t.after)
        );
    }
    out
}

/// How much the footprint changed, signed, in percent (`from nothing` when it was 0).
pub fn footprint_change(d: &PlanDiff) -> String {
    d.footprint_change_percent
        .map_or_else(|| "from nothing".to_string(), |p| format!("{p:+.2}%"))
}

/// How many tensors of a diff are new, gone, changed and the same, in words.
pub fn diff_counts(d: &PlanDiff) -> String {
    format!(
        "{} new, {} gone, {} changed, {} the same",
        d.count(Change::New),
        d.count(Change::Gone),
        d.count(Change::Changed),
        d.count(Change::Same)
    )
}

/// What changed for one tensor, in words: `new`, `gone`, `same`, or what of its placement did.
pub fn change_text(t: &TensorDiff) -> String {
    match t.change {
        Change::New => "new".into(),
        Change::Gone => "gone".into(),
        Change::Same => "same".into(),
        Change::Changed => [
            (t.moved, "moved"),
            (t.resized, "resized"),
            (t.interval_changed, "interval changed"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect::<Vec<_>>()
        .join(", "),
    }
}

/// One side of a tensor's diff: its size, offset and live interval, or `-` where it is not.
pub fn placement_text(p: &Option<PlacementReport>) -> String {
    p.as_ref().map_or_else(
        || "-".to_string(),
        |p| {
            format!(
                "{} @ {} [{}, {}]",
                bytes(p.size),
                p.offset,
                p.live[0],
                p.live[1]
            )
        },
    )
}

pub fn plan_table(report: &PlanSummary) -> String {
    let mut out = String::new();
    if let Some(line) = incomplete_sentence(report) {
        let _ = writeln!(out, "{line}");
    }
    let verdict = verdict(report.valid, report.complete);
    let _ = writeln!(
        out,
        "strategy {}  footprint {}  lower bound {}  footprint/LB {}  checker: {verdict}",
        report.strategy,
        bytes(report.footprint_bytes),
        bytes(report.lower_bound_bytes),
        ratio(report.footprint_bytes, report.lower_bound_bytes)
    );
    let _ = writeln!(
        out,
        "{:<16} {:<10} {:>12} {:>12} {:>8} {:>12} {:>12} {:>6}",
        "device", "strategy", "footprint", "lower bound", "ratio", "arena", "static", "pools"
    );
    for d in &report.devices {
        let _ = writeln!(
            out,
            "{:<16} {:<10} {:>12} {:>12} {:>8} {:>12} {:>12} {:>6}",
            d.device,
            d.strategy,
            bytes(d.footprint_bytes),
            bytes(d.lower_bound_bytes),
            ratio(d.footprint_bytes, d.lower_bound_bytes),
            bytes(d.arena_bytes),
            bytes(d.static_bytes),
            d.pools.len()
        );
    }
    for d in &report.devices {
        if let (Some(bound), Some(optimal), Some(nodes)) =
            (d.proven_lower_bound_bytes, d.optimal, d.nodes)
        {
            let scope = proof_scope(d.arena_regions);
            let verdict = if optimal {
                format!("optimal: no layout{scope} goes below {}", bytes(bound))
            } else {
                format!("no layout{scope} goes below {}", bytes(bound))
            };
            let stopped = if d.stopped { ", stopped early" } else { "" };
            let _ = writeln!(
                out,
                "{}: {verdict} ({nodes} search nodes{stopped})",
                d.device
            );
        }
    }
    if let Some(order) = &report.order {
        let _ = writeln!(out, "{}", order_sentence(report.footprint_bytes, order));
    }
    if let Some(elapsed) = report.elapsed_ms {
        let found = (report.found_ms).map_or(String::new(), |ms| format!(", found after {ms} ms"));
        let _ = writeln!(out, "search time {elapsed} ms{found}");
    }
    if let Some(given) = given_plan_sentence(report) {
        let _ = writeln!(out, "{given}");
    }
    if let Some(reserved) = report.reserved_bytes {
        let _ = writeln!(
            out,
            "{}",
            reserved_sentence(report.footprint_bytes, reserved, report.lower_bound_bytes)
        );
    }
    for d in &report.devices {
        if let Some(sites) = &d.live_at_peak_by_site {
            out += &sites_table(&d.device, d.lower_bound_bytes, sites);
        }
    }
    if let Some(b) = &report.budget {
        for d in &report.devices {
            let _ = match (d.headroom_bytes, d.overflow_bytes) {
                (Some(h), _) => writeln!(
                    out,
                    "{}: fits {} at util {} ({} usable): headroom {}",
                    d.device,
                    b.class,
                    b.util,
                    bytes(b.usable_bytes),
                    bytes(h)
                ),
                (_, Some(o)) => writeln!(
                    out,
                    "{}: does NOT fit {} at util {} ({} usable): over by {}",
                    d.device,
                    b.class,
                    b.util,
                    bytes(b.usable_bytes),
                    bytes(o)
                ),
                _ => Ok(()),
            };
        }
    }
    for d in &report.devices {
        if let Some(f) = d.cap_fallback {
            let _ = writeln!(out, "{}", cap_fallback_sentence(&d.device, &f));
        }
        if d.stopped {
            let _ = writeln!(
                out,
                "{}: the search was stopped early; this is its best layout so far",
                d.device
            );
        }
    }
    out
}

/// Which layouts a proof of `search` covers, after "no layout" or "every layout": all of
/// them (empty), or over `arena_regions` stacked precision classes, those that keep the classes
/// apart, which the lower bound (the live peak) does not (`--no-precision-classes` lets them
/// share bytes).
pub fn proof_scope(arena_regions: Option<u32>) -> String {
    match arena_regions {
        Some(n) if n > 1 => format!(" that keeps its {n} precision classes apart"),
        _ => String::new(),
    }
}

/// The precision classes a proof keeps apart, short ("2 classes apart", as a table or a badge
/// says it beside "optimal", where the summary's row has no room for more); `None` where it
/// keeps none apart.
pub fn classes_apart(arena_regions: Option<u32>) -> Option<String> {
    arena_regions
        .filter(|&n| n > 1)
        .map(|n| format!("{n} classes apart"))
}

/// What a reordered plan says beside its figures: the order, how many steps moved, and the
/// given order's footprint against this one.
pub fn order_sentence(footprint: u64, order: &OrderReport) -> String {
    let given = order.given_footprint_bytes;
    let change = match footprint.cmp(&given) {
        std::cmp::Ordering::Less => format!(
            "{} less than the given order's {}",
            bytes_against(given - footprint, 0),
            bytes(given)
        ),
        std::cmp::Ordering::Equal => format!("the same as the given order's {}", bytes(given)),
        std::cmp::Ordering::Greater => format!(
            "{} MORE than the given order's {}",
            bytes(footprint - given),
            bytes(given)
        ),
    };
    let partial = if order.partial {
        " (stopped before it tried every order)"
    } else {
        ""
    };
    format!(
        "order {}: {} of {} steps moved; footprint {}{partial}",
        order.order,
        order.moved_steps,
        order.steps.len(),
        change
    )
}

/// The most allocation sites the CLI's table lists; `plan --json` has them all.
pub const SITE_ROWS: usize = 10;

/// The live bytes at a device's peak by allocation site, largest first, the smaller ones
/// summed in a last line.
pub fn sites_table(device: &str, live_peak: u64, sites: &[SiteReport]) -> String {
    let mut out = format!(
        "live at the peak of {device} ({}) by allocation site:\n{:>12} {:>7} {:>7}  site\n",
        bytes(live_peak),
        "bytes",
        "share",
        "count"
    );
    for g in sites.iter().take(SITE_ROWS) {
        let _ = writeln!(
            out,
            "{:>12} {:>6.1}% {:>7}  {}",
            bytes(g.bytes),
            g.share * 100.0,
            g.count,
            one_line(&g.site)
        );
    }
    if let Some(rest) = sites.get(SITE_ROWS..).filter(|r| !r.is_empty()) {
        let total: u64 = rest.iter().map(|g| g.bytes).sum();
        let _ = writeln!(out, "  and {} more sites: {}", rest.len(), bytes(total));
    }
    out
}

/// What a pool cap cost a device: its arena over the cap, bump-packed into pools instead.
pub fn cap_fallback_sentence(device: &str, f: &CapFallbackReport) -> String {
    format!(
        "{device}: the arena ({}) is over the pool cap of {}, so it was bump-packed into pools: {} ({} more)",
        bytes(f.layout_bytes),
        bytes(f.cap),
        bytes(f.fallback_bytes),
        bytes(f.fallback_bytes.saturating_sub(f.layout_bytes))
    )
}

/// The comparison a snapshot invites: what a static plan would take, what the caching
/// allocator reserved, and the live peak.
pub fn reserved_sentence(footprint: u64, reserved: u64, live_peak: u64) -> String {
    format!(
        "a static arena would need {}; the allocator reserved {}; the live peak was {}",
        bytes(footprint),
        bytes(reserved),
        bytes(live_peak)
    )
}

/// The checker's verdict on the plan a dump came with. Its planner had no precision classes,
/// so buffers of different dtypes in the same bytes are said apart from violations.
pub fn given_plan_verdict(g: &GivenPlanReport) -> String {
    let verdict = match g.valid {
        true => "checker valid".to_string(),
        false => format!("the checker finds {}", counted(g.violations, "violation")),
    };
    match g.across_classes {
        0 => verdict,
        n => format!(
            "{verdict} (precision classes aside: {} of different dtypes in the same bytes)",
            counted(n, "buffer pair")
        ),
    }
}

/// The plan a dump came with beside memplan's: both footprints, arenas and fragmentations (the
/// bytes over each plan's lower bound), the checker's verdict on the given one, and the
/// difference. `None` when the dump came with no plan.
pub fn given_plan_sentence(report: &PlanSummary) -> Option<String> {
    let g = report.given_plan.as_ref()?;
    let arena: u64 = report.devices.iter().map(|d| d.arena_bytes).sum();
    let verdict = given_plan_verdict(g);
    let change = match report.footprint_bytes.cmp(&g.footprint_bytes) {
        std::cmp::Ordering::Equal => format!("the same as {}'s", g.planner),
        std::cmp::Ordering::Less => format!(
            "{} less than {}'s",
            bytes(g.footprint_bytes - report.footprint_bytes),
            g.planner
        ),
        std::cmp::Ordering::Greater => format!(
            "{} more than {}'s",
            bytes(report.footprint_bytes - g.footprint_bytes),
            g.planner
        ),
    };
    Some(format!(
        "{}'s plan: {} (arena {}), {verdict}, {} over the lower bound; memplan's: {} (arena {}), {} over the lower bound: {change}",
        g.planner,
        bytes(g.footprint_bytes),
        bytes(g.arena_bytes),
        bytes(g.footprint_bytes.saturating_sub(g.lower_bound_bytes)),
        bytes(report.footprint_bytes),
        bytes(arena),
        bytes(
            report
                .footprint_bytes
                .saturating_sub(report.lower_bound_bytes)
        ),
    ))
}

/// One slot of `memplan spaces`' table (and of the explorer's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpaceRow {
    pub tensor: String,
    pub space: String,
    pub access: String,
    pub transfer: String,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dynamic: bool,
    /// What the outputs on this slot come from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

/// The rows of the memory spaces' table: one per slot, with what the outputs on it come from.
pub fn space_rows(spaces: &SpacesAnswer) -> Vec<SpaceRow> {
    // What each slot's outputs come from, found once: one pass over the outputs.
    let mut sources: std::collections::HashMap<&str, Vec<String>> = Default::default();
    for o in &spaces.outputs {
        let Some(slot) = o.slot.as_deref() else {
            continue;
        };
        sources.entry(slot).or_default().push(match &o.source {
            Some(SourceAnswer::WrittenBy(step)) => format!("output #{} written by {step}", o.index),
            Some(SourceAnswer::AliasOf(tensor)) => format!("output #{} is {tensor}", o.index),
            None => format!("output #{} has no writer", o.index),
        });
    }
    (spaces.slots.iter())
        .map(|s| SpaceRow {
            tensor: s.tensor.clone(),
            space: s.space.name().into(),
            access: s.access.name().into(),
            transfer: s.transfer.name().into(),
            bytes: s.bytes,
            dynamic: s.dynamic,
            source: (sources.get(s.tensor.as_str()))
                .map_or_else(String::new, |list| list.join("; ")),
        })
        .collect()
}

/// The memory spaces as a table, then the counts.
pub fn spaces_table(rows: &[SpaceRow], counts: &SpaceCounts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<16} {:<11} {:<15} {:>12}  output",
        "slot", "space", "access", "transfer", "bytes"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<28} {:<16} {:<11} {:<15} {:>12}  {}",
            r.tensor,
            r.space,
            r.access,
            r.transfer,
            r.size(),
            r.source
        );
    }
    let _ = writeln!(out, "{}", space_counts(counts));
    out
}

impl SpaceRow {
    /// The slot's size; a param-sized one at the dump's default, marked `(dyn)`.
    pub fn size(&self) -> String {
        if self.dynamic {
            format!("{} (dyn)", bytes(self.bytes))
        } else {
            bytes(self.bytes)
        }
    }
}

/// The counts line of the memory spaces. The static bytes are every fixed-size slot's bytes
/// summed, as if none shared: beside a footprint they would read as one, so the line says so.
pub fn space_counts(counts: &SpaceCounts) -> String {
    format!(
        "slots: {} device_global, {} device_constant, {} device_shared, {} host, {} unified; \
         transfers: {} in, {} out; {} dynamic, {} elided; static bytes {} (every fixed-size \
         slot's bytes, summed as if none shared)",
        counts.device_global,
        counts.device_constant,
        counts.device_shared,
        counts.host,
        counts.unified,
        counts.host_input_transfers,
        counts.host_output_transfers,
        counts.dynamic,
        counts.elided,
        bytes(counts.total_static_bytes)
    )
}

/// `value` in human units, or in exact bytes when those units would round it to what
/// `against` shows: near a device's boundary, "19.60 GiB <= 19.60 GiB" says nothing.
pub fn bytes_against(value: u64, against: u64) -> String {
    if value != against && bytes(value) == bytes(against) {
        format!("{} B", grouped(value))
    } else {
        bytes(value)
    }
}

/// The range a fits query searched: `lo..=hi`, or `lo..` with no top.
pub fn range_text(lo: u64, hi: Option<u64>) -> String {
    match hi {
        Some(hi) => format!("{lo}..={hi}"),
        None => format!("{lo}.."),
    }
}

/// `memplan fits`' answer in words, with both witnesses and what the query took.
pub fn fits_text(f: &FitsAnswer, millis: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} at util {}: {} of {} usable ({} util budget less {} for the driver, estimated)",
        f.device_class,
        f.budget.util,
        bytes(f.budget.usable_bytes),
        bytes(f.budget.device_bytes),
        bytes(f.budget.util_budget_bytes),
        bytes(f.budget.driver_bytes)
    );
    let usable = f.budget.usable_bytes;
    let shown = |footprint: u64| bytes_against(footprint, usable);
    let usable_shown = |footprint: u64| bytes_against(usable, footprint);
    let over = |footprint: u64| bytes(footprint.saturating_sub(usable));
    match f.largest {
        None => {
            let _ = writeln!(
                out,
                "no {} in {} fits: at {}={} the footprint is {}, over by {}",
                f.param,
                range_text(f.lo, f.hi),
                f.param,
                f.lo,
                f.footprint_at_next.map_or("past 2^64 bytes".into(), shown),
                f.footprint_at_next.map_or("-".into(), over)
            );
        }
        Some(x) => {
            let _ = writeln!(out, "largest {} that fits: {x}", f.param);
            if let Some(at) = f.footprint_at_largest {
                let _ = writeln!(
                    out,
                    "  {}={x}: footprint {} <= {} usable, headroom {}",
                    f.param,
                    shown(at),
                    usable_shown(at),
                    bytes_against(usable - at.min(usable), 0)
                );
            }
            match (x < f.hi.unwrap_or(u64::MAX), f.footprint_at_next) {
                (true, Some(next)) => {
                    let _ = writeln!(
                        out,
                        "  {}={}: footprint {} > {} usable, over by {}",
                        f.param,
                        x + 1,
                        shown(next),
                        usable_shown(next),
                        over(next)
                    );
                }
                (true, None) => {
                    let _ = writeln!(out, "  {}={}: its sizes pass 2^64 bytes", f.param, x + 1);
                }
                (false, _) => {
                    let _ = writeln!(out, "  (the top of the range {})", range_text(f.lo, f.hi));
                }
            }
        }
    }
    let _ = writeln!(out, "{} plans, {millis:.0} ms", f.probes);
    out
}

/// `memplan fit`'s answer: the footprints, the flips in acceptance order, and the log.
pub fn fit_text(f: &FitAnswer, millis: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "footprint {} -> {} ({} relieved) for a recompute cost of {} ({}); {}",
        bytes(f.baseline_bytes),
        bytes(f.final_bytes),
        bytes(f.baseline_bytes.saturating_sub(f.final_bytes)),
        work(f.recompute_cost, f.cost_unit.as_deref()),
        grouped(f.recompute_cost),
        if f.within_target {
            "within target"
        } else {
            "OVER target: no more flips help"
        }
    );
    let _ = writeln!(
        out,
        "{} candidates scored, {} cut; {} flips, {millis:.0} ms",
        f.considered,
        f.dropped,
        f.flips.len()
    );
    for flip in &f.flips {
        let _ = writeln!(
            out,
            "  {:<32} relieves {:>10}  cost {}",
            flip.tensor,
            signed_bytes(flip.relief_bytes),
            work(flip.recompute_cost, f.cost_unit.as_deref())
        );
    }
    if !f.log.is_empty() {
        let _ = writeln!(out, "log:");
        for line in &f.log {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// What an advice row changes, in words.
pub fn lever_text(lever: &Lever) -> String {
    match lever {
        Lever::Flip { tensor } => format!("recompute `{tensor}`"),
        Lever::FitFlips { tensors } => {
            const NAMED: usize = 3;
            let mut named = tensors[..tensors.len().min(NAMED)].join(", ");
            if tensors.len() > NAMED {
                let _ = write!(named, " and {} more", tensors.len() - NAMED);
            }
            format!("recompute the fit's {} tensors ({named})", tensors.len())
        }
        Lever::Param { name, from, to } => format!("{name} = {to} (from {from})"),
        Lever::PrecisionClasses { on: true } => "precision classes on".into(),
        Lever::PrecisionClasses { on: false } => "precision classes off".into(),
        Lever::Strategy { strategy } => format!("strategy {}", strategy.name()),
        Lever::PoolCap { cap } => format!("no pool cap (from {})", bytes(*cap)),
        Lever::Order { order } => format!("steps in the {order} order"),
    }
}

/// What an advice row (its `lever`) costs besides memory, in words; recompute work in the
/// dump's `unit`.
pub fn lever_cost_text(lever: &Lever, cost: &LeverCost, unit: Option<&str>) -> String {
    match cost {
        LeverCost::Recompute { work: w } => format!("recompute {}", work(*w, unit)),
        LeverCost::Param => match lever {
            Lever::Param { name, from, to } => format!("{name} {to} instead of {from} per run"),
            _ => "less done per run".into(),
        },
        LeverCost::MixedDtypes => "tensors of different dtypes share bytes".into(),
        LeverCost::PlanningWork => "none at run time".into(),
        LeverCost::WideOffsets => "64-bit offsets".into(),
        LeverCost::Reordered { moved_steps } => {
            format!("the same work, {moved_steps} steps moved")
        }
    }
}

/// What an incomplete plan leaves out, said first: `None` when every tensor was sized.
pub fn incomplete_sentence(report: &PlanSummary) -> Option<String> {
    (!report.complete).then(|| {
        let n = report.size_unknown_tensors;
        let (tensors, are) = if n == 1 { ("tensor", "is") } else { ("tensors", "are") };
        format!(
            "INCOMPLETE: {n} {tensors} could not be sized and {are} left out; every figure covers the sized tensors only (the warnings say why; an ONNX model's input shapes fixed, --input-shape NAME=DxD.., size what follows from them: a --set does not)"
        )
    })
}

/// `memplan advise`'s table: each lever that lowers the footprint, largest saving first.
pub fn advice_table(a: &AdviceAnswer, millis: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "footprint {}{}; {} levers planned, {} lower it",
        bytes(a.footprint_bytes),
        a.usable_bytes
            .map_or(String::new(), |u| format!(" of {} usable", bytes(u))),
        a.tried,
        a.rows.len()
    );
    if !a.rows.is_empty() {
        let _ = writeln!(out, "| lever | footprint | saving | cost |");
        let _ = writeln!(out, "|---|---:|---:|---|");
    }
    for r in &a.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            one_line(&lever_text(&r.lever)),
            bytes(r.footprint_bytes),
            bytes(r.saving_bytes),
            lever_cost_text(&r.lever, &r.cost, a.cost_unit.as_deref())
        );
    }
    for what in &a.left_out {
        let _ = writeln!(out, "not tried: {what}");
    }
    let _ = writeln!(out, "{millis:.0} ms");
    out
}

/// `memplan sweep`'s table: each budget's footprint and cost, Pareto points marked, and the
/// exhaustive optimum's cost beside the greedy's where it was computed.
pub fn sweep_table(sweep: &SweepAnswer, millis: f64) -> String {
    let (points, candidates, exhaustive) = (&sweep.points, sweep.candidates, sweep.exhaustive);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| target | footprint | recompute cost | flips | within target | pareto |{}",
        if exhaustive {
            " exhaustive optimum's cost | greedy / optimum |"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "|---:|---:|---:|---:|---|---|{}",
        if exhaustive { "---:|---:|" } else { "" }
    );
    for p in points {
        let _ = write!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            p.target_bytes,
            p.footprint_bytes,
            p.recompute_cost,
            p.flips.len(),
            if p.within_target { "yes" } else { "MISSED" },
            if p.pareto { "yes" } else { "" }
        );
        if exhaustive {
            let (best, ratio) = match p.exhaustive_cost {
                Some(0) => (
                    "0".to_string(),
                    if p.recompute_cost == 0 {
                        "1.000".into()
                    } else {
                        "-".into()
                    },
                ),
                Some(best) => (
                    best.to_string(),
                    format!("{:.3}", p.recompute_cost as f64 / best as f64),
                ),
                None => ("-".to_string(), "-".to_string()),
            };
            let _ = write!(out, " {best} | {ratio} |");
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\n{} points over {candidates} candidates{}, {millis:.0} ms",
        points.len(),
        if exhaustive {
            ", every subset scored"
        } else {
            ""
        }
    );
    if let Some(given) = &sweep.given_order {
        let _ = writeln!(out, "{}", front_sentence(points, given));
    }
    out
}

/// How a reordered sweep's front compares with the given order's: where each starts (no flips)
/// and the least footprint each reaches.
pub fn front_sentence(points: &[SweepPointAnswer], given: &[SweepPointAnswer]) -> String {
    let least = |ps: &[SweepPointAnswer]| ps.iter().map(|p| p.footprint_bytes).min();
    let without = |ps: &[SweepPointAnswer]| ps.iter().map(|p| p.footprint_bytes).max();
    match (least(points), least(given), without(points), without(given)) {
        (Some(lo), Some(given_lo), Some(hi), Some(given_hi)) => format!(
            "fronts: this order from {} without flips down to {}; the given order from {} down to {}",
            bytes(hi),
            bytes(lo),
            bytes(given_hi),
            bytes(given_lo)
        ),
        _ => "the given order's front: no points".to_string(),
    }
}

/// One measured plan of `memplan bench`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchRow {
    pub instance: String,
    pub buffers: usize,
    pub strategy: StrategyChoice,
    pub footprint_bytes: u64,
    pub lower_bound_bytes: u64,
    /// Each run's time, in order, by the caller's clock (the planner has none).
    pub millis: Vec<f64>,
    pub valid: bool,
    /// With `search`: what it proved no layout goes below (summed over devices).
    pub proven_lower_bound_bytes: Option<u64>,
    /// With `search`: whether the footprint reaches that bound on every device.
    pub optimal: Option<bool>,
    /// With `search`: the most precision classes a device's proof keeps apart
    /// ([`memplan_core::ExactStats::arena_regions`]).
    pub arena_regions: Option<u32>,
    /// Whether the row counts in the mean ratio per strategy (the real files, not synthetic).
    pub in_mean: bool,
}

impl BenchRow {
    pub fn new(
        instance: &str,
        problem: &Problem,
        strategy: StrategyChoice,
        plan: &Plan,
        millis: Vec<f64>,
        in_mean: bool,
    ) -> Self {
        let proven = plan
            .devices
            .iter()
            .map(|d| d.exact.map(|e| (e.proven_lower_bound_bytes, e.optimal)))
            .collect::<Option<Vec<(u64, bool)>>>();
        BenchRow {
            instance: instance.to_string(),
            buffers: problem.buffers.len(),
            strategy,
            footprint_bytes: plan.footprint_bytes(),
            lower_bound_bytes: plan.lower_bound_bytes(),
            millis,
            valid: plan.is_valid(),
            proven_lower_bound_bytes: proven.as_ref().map(|all| all.iter().map(|a| a.0).sum()),
            optimal: proven.as_ref().map(|all| all.iter().all(|a| a.1)),
            arena_regions: plan.arena_regions(),
            in_mean,
        }
    }

    /// The middle run's time.
    pub fn median_millis(&self) -> f64 {
        median(&self.millis)
    }
}

/// The middle of `values` (the upper one of an even count; 0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// The bench's markdown tables: every row, then the mean footprint/LB per strategy over the rows
/// `in_mean`.
pub fn bench_table(rows: &[BenchRow]) -> String {
    let mut out = String::new();
    out.push_str(
        "| instance | buffers | strategy | footprint | lower bound | footprint/LB | proven | time (ms) | valid |\n",
    );
    out.push_str("|---|---:|---|---:|---:|---:|---|---:|---|\n");
    for r in rows {
        let apart = classes_apart(r.arena_regions).map_or(String::new(), |a| format!(" ({a})"));
        let proven = match (r.proven_lower_bound_bytes, r.optimal) {
            (Some(_), Some(true)) => format!("optimal{apart}"),
            (Some(bound), _) => format!(">= {bound}{apart}"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {proven} | {:.1} | {} |",
            r.instance,
            r.buffers,
            r.strategy,
            r.footprint_bytes,
            r.lower_bound_bytes,
            ratio(r.footprint_bytes, r.lower_bound_bytes),
            r.median_millis(),
            if r.valid { "yes" } else { "NO" }
        );
    }
    let mut strategies: Vec<StrategyChoice> = Vec::new();
    for r in rows.iter().filter(|r| r.in_mean && r.lower_bound_bytes > 0) {
        if !strategies.contains(&r.strategy) {
            strategies.push(r.strategy);
        }
    }
    if !strategies.is_empty() {
        out.push_str("\n| strategy | mean footprint/LB over the files |\n|---|---:|\n");
        for s in strategies {
            let ratios: Vec<f64> = rows
                .iter()
                .filter(|r| r.in_mean && r.strategy == s && r.lower_bound_bytes > 0)
                .map(|r| r.footprint_bytes as f64 / r.lower_bound_bytes as f64)
                .collect();
            let _ = writeln!(
                out,
                "| {s} | {:.3} |",
                ratios.iter().sum::<f64>() / ratios.len() as f64
            );
        }
    }
    out
}

/// The checker's verdict in a word or three: a plan of unsized tensors is valid only for the
/// sized ones, and says so.
pub fn verdict(valid: bool, complete: bool) -> &'static str {
    match (valid, complete) {
        (true, true) => "valid",
        (true, false) => "valid for the sized tensors",
        (false, _) => "INVALID",
    }
}

/// Why a run's model of the peak and the program's used memory differ, one clause per term
/// that is not zero, largest first: what the page and the CLI say under a run.
pub fn run_differences(run: &memplan_core::program::RunComparison) -> Vec<String> {
    let mut terms: Vec<(u64, String)> = Vec::new();
    if run.skipped_bytes > 0 {
        terms.push((
            run.skipped_bytes,
            format!(
                "-{}: tensors it reads that an ancestor or an earlier routine of its context holds: in the model, allocated once by their holder",
                bytes(run.skipped_bytes)
            ),
        ));
    }
    if run.lineage_other_bytes > 0 {
        terms.push((
            run.lineage_other_bytes,
            format!(
                "+{}: the pools of the other routines of `{}` and its ancestors",
                bytes(run.lineage_other_bytes),
                run.context
            ),
        ));
    }
    let other_constants = run
        .constants_bytes
        .saturating_sub(run.constants_in_model_bytes);
    if other_constants > 0 {
        terms.push((
            other_constants,
            format!(
                "+{}: the device's constants other routines brought",
                bytes(other_constants)
            ),
        ));
    }
    if run.other_contexts_bytes > 0 {
        terms.push((
            run.other_contexts_bytes,
            format!(
                "+{}: contexts not yet released ({})",
                bytes(run.other_contexts_bytes),
                run.other_contexts
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if run.page_rounding_bytes > 0 {
        terms.push((
            run.page_rounding_bytes,
            format!(
                "+{}: each pool's base rounded up to the page",
                bytes(run.page_rounding_bytes)
            ),
        ));
    }
    if run.layout_difference_bytes != 0 {
        terms.push((
            u64::try_from(run.layout_difference_bytes.unsigned_abs()).unwrap_or(u64::MAX),
            format!(
                "{}{}: its own pools' alignment padding without the skipped tensors",
                if run.layout_difference_bytes > 0 {
                    "+"
                } else {
                    ""
                },
                signed_bytes(run.layout_difference_bytes)
            ),
        ));
    }
    terms.sort_by_key(|t| std::cmp::Reverse(t.0));
    terms.into_iter().map(|(_, t)| t).collect()
}

/// The used peak against a device class's usable bytes, in a sentence.
pub fn program_headroom(
    class: &memplan_engine::program::ProgramDeviceClass,
    used_peak_bytes: u64,
) -> String {
    let room = match class.usable_bytes.checked_sub(used_peak_bytes) {
        Some(headroom) => format!("headroom {}", bytes(headroom)),
        None => format!("OVER by {}", bytes(used_peak_bytes - class.usable_bytes)),
    };
    format!(
        "{} at util {}: usable {}, {room}",
        class.class,
        class.util,
        bytes(class.usable_bytes)
    )
}

/// What an event of a program did, in a few words.
pub fn event_label(event: &memplan_core::program::EventOutcome) -> String {
    use memplan_core::program::{EventOutcome, ReleaseResult};
    match event {
        EventOutcome::Create { context, .. } => format!("create `{context}`"),
        EventOutcome::Run { routine, context } => format!("run `{routine}` (in `{context}`)"),
        EventOutcome::Release {
            context,
            freed,
            result,
        } => match result {
            ReleaseResult::Released => {
                format!(
                    "release `{context}`: {} freed",
                    counted(freed.len(), "pool")
                )
            }
            ReleaseResult::Failed => format!(
                "release `{context}` fails after {} freed: a retry frees the rest",
                counted(freed.len(), "pool")
            ),
            ReleaseResult::AlreadyReleased => {
                format!("release `{context}`: already released, nothing freed")
            }
        },
    }
}

/// A program's plan as `memplan plan` prints it: each device's used peak beside the model of
/// the peak, the contexts' pools, the used memory after each event, and each run's model
/// beside the used memory with why they differ.
pub fn program_table(report: &memplan_engine::program::ProgramReport) -> String {
    let mut out = String::new();
    let plan = &report.plan;
    let verdict = verdict(report.valid, report.complete);
    let _ = writeln!(
        out,
        "program {}: {} contexts, {} routines, {} events  checker: {verdict}",
        if report.name.is_empty() {
            "(unnamed)"
        } else {
            &report.name
        },
        plan.contexts.len(),
        report.routines.len(),
        plan.events.len()
    );
    for d in &plan.devices {
        let _ = writeln!(
            out,
            "device {} (page {}): used peak {} after event {}  model of the peak {}  at the end {}",
            d.device,
            bytes(d.page_bytes),
            bytes(d.used_peak_bytes),
            d.used_peak_event,
            bytes(d.model_peak_bytes),
            bytes(d.used_at_end_bytes)
        );
        if let Some(c) = report.device_classes.iter().find(|c| c.device == d.device) {
            let _ = writeln!(out, "  {}", program_headroom(c, d.used_peak_bytes));
        }
    }
    let _ = writeln!(
        out,
        "\n{:<20} {:<20} {:>6} {:>12}",
        "context", "parent", "pools", "page-rounded"
    );
    for c in &plan.contexts {
        let _ = writeln!(
            out,
            "{:<20} {:<20} {:>6} {:>12}",
            one_line(&c.context),
            one_line(c.parent.as_deref().unwrap_or("-")),
            c.pools.len(),
            bytes(c.page_rounded_bytes)
        );
    }
    let _ = writeln!(
        out,
        "\n{:<20} {:<20} {:>12} {:>12} {:>9} {:>9}",
        "routine", "context", "model", "own pools", "skipped", "constants"
    );
    for r in &report.routines {
        let _ = writeln!(
            out,
            "{:<20} {:<20} {:>12} {:>12} {:>9} {:>9}",
            one_line(&r.routine),
            one_line(&r.context),
            bytes(r.model.footprint_bytes),
            bytes(r.own.footprint_bytes),
            r.skipped_tensors.len(),
            r.constant_tensors.len()
        );
    }
    let _ = write!(out, "\n{:>5}  {:<72}", "event", "what");
    for d in &plan.devices {
        let _ = write!(out, " {:>12}", format!("used {}", d.device));
    }
    let _ = writeln!(out);
    for (e, event) in plan.events.iter().enumerate() {
        let _ = write!(out, "{e:>5}  {:<72}", one_line(&event_label(event)));
        for used in &plan.used_bytes[e] {
            let _ = write!(out, " {:>12}", bytes(*used));
        }
        let _ = writeln!(out);
    }
    if !plan.runs.is_empty() {
        let _ = writeln!(out, "\nruns: the model of the peak beside the memory used");
    }
    for run in &plan.runs {
        let _ = writeln!(
            out,
            "event {} `{}` on {}: model {}, used {}",
            run.event,
            one_line(&run.routine),
            run.device,
            bytes(run.model_bytes),
            bytes(run.used_bytes)
        );
        for why in run_differences(run) {
            let _ = writeln!(out, "  - {}", one_line(&why));
        }
    }
    for u in &plan.unreleased {
        let _ = writeln!(
            out,
            "not released at the end: `{}` holds {}",
            one_line(&u.context),
            bytes(u.page_rounded_bytes)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smaller_params_cost_is_said_from_its_lever() {
        let lever = Lever::Param {
            name: "B".into(),
            from: 64,
            to: 32,
        };
        assert_eq!(
            lever_cost_text(&lever, &LeverCost::Param, None),
            "B 32 instead of 64 per run"
        );
    }

    /// A given plan's verdict counts its violations, and says its dtypes sharing bytes apart.
    #[test]
    fn a_given_plans_verdict_says_shared_dtypes_apart_from_violations() {
        let given = |violations, across_classes| GivenPlanReport {
            planner: "XLA".into(),
            footprint_bytes: 0,
            arena_bytes: 0,
            lower_bound_bytes: 0,
            valid: violations == 0,
            violations,
            across_classes,
            unplaced_buffers: 0,
        };
        assert_eq!(given_plan_verdict(&given(0, 0)), "checker valid");
        assert_eq!(
            given_plan_verdict(&given(1, 0)),
            "the checker finds 1 violation"
        );
        assert_eq!(
            given_plan_verdict(&given(0, 2)),
            "checker valid (precision classes aside: 2 buffer pairs of different dtypes in the same bytes)"
        );
    }

    #[test]
    fn counted_nouns_are_plural_unless_one() {
        assert_eq!(counted(0, "pool"), "0 pools");
        assert_eq!(counted(1, "pool"), "1 pool");
        assert_eq!(counted(2, "framework frame"), "2 framework frames");
    }

    #[test]
    fn one_line_escapes_what_reorders_or_breaks_a_line_and_cuts_long_ids() {
        assert_eq!(
            one_line("tensor `a\u{202e}b\u{2028}c\nd` is bad"),
            "tensor `a\\u{202e}b\\u{2028}c\\nd` is bad"
        );
        let id = "x".repeat(1 << 20);
        let shown = one_line(&format!("duplicate tensor id `{id}` at line 3"));
        assert!(shown.len() < 200, "{}", shown.len());
        assert!(shown.starts_with("duplicate tensor id `xxxx"), "{shown}");
        assert!(
            shown.contains('…') && shown.ends_with("x` at line 3"),
            "{shown}"
        );
        // Text outside backticks and short ids are whole.
        let short = format!("`{}` and {}", "y".repeat(80), "z".repeat(300));
        assert_eq!(one_line(&short), short);
    }
}
