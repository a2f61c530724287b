//! The answers of the engine's queries as `--json` prints them: typed, serde, with tensors and
//! steps named by id. The CLI prints these and builds no JSON of its own; a field's name is the
//! glossary's (ARCHITECTURE.md), and a renamed one is listed in docs/changes.md.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use memplan_core::budget::Budget;
use memplan_core::graph::MemorySpace;
use memplan_core::remat::{Event, FitResult, Flip, SweepPoint, Target};
use memplan_core::spaces::{Access, OutputSource, SpaceCounts, Spaces, Transfer};
use memplan_core::units::{bytes, grouped, signed_bytes};
use serde::{Deserialize, Serialize};

/// Bytes in units and, for a boundary a byte decides, exactly.
fn exact(b: u64) -> String {
    format!("{} ({} B)", bytes(b), grouped(b))
}

use crate::{Fits, Session, Sweep};

/// `memplan fit --json`, and the page's plan log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitAnswer {
    /// The target: a byte size, or `minimize`.
    pub target: TargetAnswer,
    pub baseline_bytes: u64,
    pub final_bytes: u64,
    /// The accepted flips, in acceptance order.
    pub flips: Vec<FlipAnswer>,
    pub recompute_cost: u64,
    /// The unit of recompute costs (the dump's `cost_unit`), if it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_unit: Option<String>,
    pub considered: usize,
    pub dropped: usize,
    pub within_target: bool,
    /// What became of each candidate and held group, in the fit's words ([`event_text`]).
    pub log: Vec<String>,
    /// Round one: each candidate scored alone, in the order round two tries them.
    pub solo: Vec<FlipAnswer>,
}

/// A fit's target as JSON: the bytes, or `"minimize"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetAnswer {
    Bytes(u64),
    Minimize(Minimize),
}

/// The word `minimize`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Minimize {
    Minimize,
}

/// A flip with its tensor named: what it relieves and what it costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlipAnswer {
    pub tensor: String,
    pub relief_bytes: i128,
    pub recompute_cost: u64,
}

impl FitAnswer {
    pub fn of(session: &Session, target: Target, fit: &FitResult) -> FitAnswer {
        let id = |t: usize| session.graph.tensors[t].id.to_string();
        let named = |flips: &[Flip]| {
            (flips.iter())
                .map(|f| FlipAnswer {
                    tensor: id(f.tensor),
                    relief_bytes: f.relief_bytes,
                    recompute_cost: f.recompute_cost,
                })
                .collect()
        };
        FitAnswer {
            target: match target {
                Target::Bytes(b) => TargetAnswer::Bytes(b),
                Target::Minimize => TargetAnswer::Minimize(Minimize::Minimize),
            },
            baseline_bytes: fit.baseline_bytes,
            final_bytes: fit.final_bytes,
            flips: named(&fit.flips),
            recompute_cost: fit.recompute_cost(),
            cost_unit: session.graph.cost_unit.clone(),
            considered: fit.considered,
            dropped: fit.dropped,
            within_target: fit.within_target,
            log: (fit.log.iter()).map(|e| event_text(e, &id)).collect(),
            solo: named(&fit.solo),
        }
    }

    /// The tensors the fit recomputes, in acceptance order: the scenario's flips.
    pub fn flip_ids(&self) -> Vec<String> {
        self.flips.iter().map(|f| f.tensor.clone()).collect()
    }
}

/// A fit's log entry in words.
pub fn event_text(e: &Event, id: &dyn Fn(usize) -> String) -> String {
    let ids = |ts: &[usize]| ts.iter().map(|&t| id(t)).collect::<Vec<_>>().join(", ");
    match e {
        Event::Accepted {
            tensor,
            relief_bytes,
        } => {
            format!(
                "accepted {}: relieves {}",
                id(*tensor),
                signed_bytes(*relief_bytes)
            )
        }
        Event::Held { tensor } => format!(
            "held {}: frees nothing on top of the accepted flips",
            id(*tensor)
        ),
        Event::GroupCommitted {
            tensors,
            closing,
            relief_bytes,
        } => format!(
            "committed held {} with {}: together they relieve {}",
            ids(tensors),
            id(*closing),
            signed_bytes(*relief_bytes)
        ),
        Event::GroupDiscarded { tensors, against } => format!(
            "discarded held {} for good: harmful to {}",
            ids(tensors),
            id(*against)
        ),
        Event::GroupKept { tensors, against } => {
            format!("kept {} held: neutral to {}", ids(tensors), id(*against))
        }
        Event::UnpaidDiscarded { tensors } => {
            format!("discarded held {}: never paid for", ids(tensors))
        }
        Event::ClosedCheaper {
            tensor,
            instead,
            relief_bytes,
        } => format!(
            "closed the target with {} instead of {}: cheaper, relieves {}",
            id(*tensor),
            ids(instead),
            signed_bytes(*relief_bytes)
        ),
        Event::Pruned {
            tensor,
            footprint_bytes,
        } => format!(
            "pruned {}: the target is met without it, at {}",
            id(*tensor),
            exact(*footprint_bytes)
        ),
        Event::TargetMet { footprint_bytes } => {
            format!("target met at {}", exact(*footprint_bytes))
        }
    }
}

/// `memplan sweep --json`, and the page's sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepAnswer {
    /// The unit of recompute costs (the dump's `cost_unit`), if it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_unit: Option<String>,
    pub candidates: usize,
    /// The exhaustive optimum was computed (the candidates are few): each point says its cost.
    pub exhaustive: bool,
    pub points: Vec<SweepPointAnswer>,
    /// Under another order than the given one: the same sweep under the given order, so the
    /// two fronts can be compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_order: Option<Vec<SweepPointAnswer>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPointAnswer {
    pub target_bytes: u64,
    pub footprint_bytes: u64,
    pub recompute_cost: u64,
    pub flips: Vec<String>,
    /// The footprint is at most the target; a point that misses it is never `pareto`.
    pub within_target: bool,
    pub pareto: bool,
    /// The least recompute cost of any subset of the candidates that fits the target, where
    /// the exhaustive optimum was computed and some subset fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhaustive_cost: Option<u64>,
}

impl SweepAnswer {
    pub fn of(session: &Session, sweep: &Sweep) -> SweepAnswer {
        let id = |t: usize| session.graph.tensors[t].id.to_string();
        let answers = |points: &[SweepPoint]| {
            (points.iter())
                .map(|p| SweepPointAnswer {
                    target_bytes: p.target_bytes,
                    footprint_bytes: p.footprint_bytes,
                    recompute_cost: p.recompute_cost,
                    flips: p.flips.iter().map(|&t| id(t)).collect(),
                    within_target: p.within_target,
                    pareto: p.pareto,
                    exhaustive_cost: p.exhaustive_cost,
                })
                .collect()
        };
        SweepAnswer {
            cost_unit: session.graph.cost_unit.clone(),
            candidates: sweep.candidates,
            exhaustive: sweep.exhaustive.is_some(),
            points: answers(&sweep.points),
            given_order: sweep.given_order.as_deref().map(answers),
        }
    }
}

/// `memplan fits --json`, and the page's: the answer with the range asked and the device's
/// budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitsAnswer {
    pub param: String,
    /// The range searched, as asked; `hi` `None`: no top.
    pub lo: u64,
    pub hi: Option<u64>,
    pub largest: Option<u64>,
    pub device_class: String,
    /// The device's usable bytes and how they are made.
    #[serde(flatten)]
    pub budget: Budget,
    pub footprint_at_largest: Option<u64>,
    pub footprint_at_next: Option<u64>,
    pub probes: u32,
}

impl FitsAnswer {
    pub fn of(device_class: &str, (lo, hi): (u64, Option<u64>), fits: &Fits) -> FitsAnswer {
        FitsAnswer {
            param: fits.param.clone(),
            lo,
            hi,
            largest: fits.largest,
            device_class: device_class.to_string(),
            budget: fits.budget,
            footprint_at_largest: fits.footprint_at_largest,
            footprint_at_next: fits.footprint_at_next,
            probes: fits.probes,
        }
    }
}

/// `memplan spaces --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpacesAnswer {
    /// Every slot, or the slots a question with `most` lists ([`listed`]), in tensor order of
    /// their roots.
    pub slots: Vec<SlotAnswer>,
    /// The slots left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlisted: usize,
    pub outputs: Vec<OutputAnswer>,
    pub counts: SpaceCounts,
    pub diagnostics: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotAnswer {
    pub tensor: String,
    pub space: MemorySpace,
    pub access: Access,
    pub transfer: Transfer,
    pub bytes: u64,
    pub dynamic: bool,
    /// The views into this slot's root.
    pub views: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputAnswer {
    pub index: usize,
    pub tensor: String,
    /// The root tensor of the slot it lives in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    pub source: Option<SourceAnswer>,
}

/// What an output comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceAnswer {
    WrittenBy(String),
    AliasOf(String),
}

impl SpacesAnswer {
    /// The answer of every slot, or with `most` of the slots [`listed`] lists: every output,
    /// the counts and the diagnostics either way.
    pub fn of(session: &Session, spaces: &Spaces, most: Option<usize>) -> SpacesAnswer {
        let g = &session.graph;
        let which = match most {
            Some(most) => listed(spaces, most),
            None => (0..spaces.slots.len()).collect(),
        };
        // The views of each slot answered, found once: one pass over the tensors.
        let mut views: Vec<Vec<String>> = vec![Vec::new(); which.len()];
        for t in 0..spaces.slot_of.len() {
            if let Some(k) = spaces.slot(t)
                && spaces.slots[k].tensor != t
                && let Ok(at) = which.binary_search(&k)
            {
                views[at].push(g.tensors[t].id.to_string());
            }
        }
        SpacesAnswer {
            unlisted: spaces.slots.len() - which.len(),
            slots: (which.iter().zip(views))
                .map(|(&k, views)| (&spaces.slots[k], views))
                .map(|(s, views)| SlotAnswer {
                    tensor: g.tensors[s.tensor].id.to_string(),
                    space: s.space,
                    access: s.access,
                    transfer: s.transfer,
                    bytes: s.bytes,
                    dynamic: s.dynamic,
                    views,
                })
                .collect(),
            outputs: (spaces.outputs.iter())
                .map(|o| OutputAnswer {
                    index: o.index,
                    tensor: g.tensors[o.tensor].id.to_string(),
                    slot: (spaces.slot(o.tensor))
                        .map(|k| g.tensors[spaces.slots[k].tensor].id.to_string()),
                    source: o.source.map(|s| match s {
                        OutputSource::Written { step } => {
                            SourceAnswer::WrittenBy(g.step(step).id.to_string())
                        }
                        OutputSource::Alias { tensor } => {
                            SourceAnswer::AliasOf(g.tensors[tensor].id.to_string())
                        }
                    }),
                })
                .collect(),
            counts: spaces.counts,
            diagnostics: spaces.diagnostics.iter().map(ToString::to_string).collect(),
        }
    }
}

/// The slots a table of `most` rows lists (indices into `spaces.slots`, in order): the `most`
/// largest, ties to the earlier, and every slot that holds an output. A page shows a table,
/// not a snapshot's million slots, and makes (and sends) only these.
pub fn listed(spaces: &Spaces, most: usize) -> Vec<usize> {
    let slots = &spaces.slots;
    // The `most` largest, ties to the earlier: a total order, so the slots kept are the same
    // however they are found. Kept in a heap of `most`, the smallest on top: a snapshot's
    // millions of slots are read once, never sorted or copied.
    let rank = |k: usize| Reverse((slots[k].bytes, Reverse(k)));
    let mut largest = BinaryHeap::with_capacity(most.min(slots.len()));
    for k in 0..slots.len() {
        if largest.len() < most {
            largest.push(rank(k));
        } else if let Some(mut smallest) = largest.peek_mut()
            && rank(k) < *smallest
        {
            *smallest = rank(k);
        }
    }
    let mut kept: Vec<usize> = (largest.into_iter().map(|Reverse((_, Reverse(k)))| k))
        .chain(spaces.outputs.iter().filter_map(|o| spaces.slot(o.tensor)))
        .collect();
    kept.sort_unstable();
    kept.dedup();
    kept
}
