//! The program view's geometry: after each event, the pools allocated then, stacked (the
//! device's constants first, then each context's pools in declaration order), so that each
//! column's top is the program's used memory after that event. In bytes and event indices; the
//! page scales it. It computes no figure: the pools' sizes and when each is allocated and freed
//! come from the program plan.

use memplan_core::program::ProgramPlan;

use crate::color::{Rgb, series_color};

/// Who a band's pool belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The device's constants, shared by every context.
    Constants,
    /// A context, by index into the plan's contexts.
    Context(usize),
}

/// One pool allocated after one event: a rectangle from `bottom` to `top` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    pub event: usize,
    pub owner: Owner,
    /// Index into the owner's pools (the context's, or the plan's constants).
    pub pool: usize,
    pub bottom: u64,
    pub top: u64,
}

/// The chart of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramChart {
    pub bands: Vec<Band>,
    /// Per event: the used memory after it (the top of its column).
    pub used: Vec<u64>,
    /// Per event: the model of the peak of the routine it runs, if it is a run on the device.
    pub model: Vec<Option<u64>>,
    /// The bytes the chart's height stands for: the largest used memory or model, and the
    /// usable line when it is within twice that (further up, the page names it instead).
    pub top_bytes: u64,
    /// Whether `usable` is drawn within the chart.
    pub usable_in_view: bool,
}

/// The chart of `device` (an index into the plan's devices), with the device's usable bytes
/// when its class is known.
pub fn chart(plan: &ProgramPlan, device: usize, usable: Option<u64>) -> ProgramChart {
    let id = &plan.devices[device].device;
    let mut bands = Vec::new();
    let mut used = Vec::with_capacity(plan.used_bytes.len());
    for event in 0..plan.used_bytes.len() {
        let mut top = 0u64;
        let constants = plan
            .constants
            .iter()
            .enumerate()
            .map(|(k, p)| (Owner::Constants, k, p));
        let pools = plan.contexts.iter().enumerate().flat_map(|(c, ctx)| {
            ctx.pools
                .iter()
                .enumerate()
                .map(move |(k, p)| (Owner::Context(c), k, p))
        });
        for (owner, pool, p) in constants.chain(pools) {
            if &p.device != id || !p.allocated_after(event) {
                continue;
            }
            // The plan's used memory bounds the sum.
            let bottom = top;
            top = top.saturating_add(p.page_rounded_bytes);
            bands.push(Band {
                event,
                owner,
                pool,
                bottom,
                top,
            });
        }
        used.push(top);
    }
    let mut model = vec![None; used.len()];
    for run in plan.runs.iter().filter(|r| &r.device == id) {
        model[run.event] = Some(run.model_bytes);
    }
    let highest = used
        .iter()
        .copied()
        .chain(model.iter().flatten().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let usable_in_view = usable.is_some_and(|u| u <= highest.saturating_mul(2));
    let top_bytes = match usable {
        Some(u) if usable_in_view => highest.max(u),
        _ => highest,
    };
    ProgramChart {
        bands,
        used,
        model,
        top_bytes,
        usable_in_view,
    }
}

/// The color of a band's owner: a context's own, the constants gray.
pub fn owner_color(owner: Owner, contexts: usize) -> Rgb {
    match owner {
        Owner::Constants => series_color(0, 1, true),
        Owner::Context(c) => series_color(c, contexts + 1, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_core::program::{
        ContextPools, EventOutcome, ProgramPool, ProgramPoolRole, UsedPeak,
    };

    fn pool(bytes: u64, allocated_at: usize, freed_at: Option<usize>) -> ProgramPool {
        ProgramPool {
            device: "d".into(),
            role: ProgramPoolRole::Arena,
            routine: Some("r".into()),
            bytes,
            page_rounded_bytes: bytes,
            allocated_at: Some(allocated_at),
            freed_at,
        }
    }

    #[test]
    fn each_column_stacks_the_pools_allocated_after_its_event_up_to_the_used_memory() {
        let plan = ProgramPlan {
            devices: vec![UsedPeak {
                device: "d".into(),
                page_bytes: 1,
                used_peak_bytes: 70,
                used_peak_event: 1,
                model_peak_bytes: 0,
                used_at_end_bytes: 5,
            }],
            contexts: vec![
                ContextPools {
                    context: "a".into(),
                    parent: None,
                    pools: vec![pool(40, 0, Some(2)), pool(10, 0, Some(3))],
                    page_rounded_bytes: 50,
                },
                ContextPools {
                    context: "b".into(),
                    parent: None,
                    pools: vec![pool(15, 1, None)],
                    page_rounded_bytes: 15,
                },
            ],
            constants: vec![ProgramPool {
                role: ProgramPoolRole::Constants,
                routine: None,
                ..pool(5, 0, None)
            }],
            events: vec![
                EventOutcome::Create {
                    context: "a".into(),
                    allocated: vec![0, 1],
                    constants_allocated: vec![0],
                };
                4
            ],
            used_bytes: vec![vec![55], vec![70], vec![30], vec![20]],
            runs: Vec::new(),
            unreleased: Vec::new(),
        };
        let c = chart(&plan, 0, Some(100));
        assert_eq!(c.used, [55, 70, 30, 20]);
        for (e, used) in plan.used_bytes.iter().enumerate() {
            let column: Vec<&Band> = c.bands.iter().filter(|b| b.event == e).collect();
            assert_eq!(column.first().map(|b| b.owner), Some(Owner::Constants));
            for pair in column.windows(2) {
                assert_eq!(pair[0].top, pair[1].bottom, "contiguous");
            }
            assert_eq!(column.last().unwrap().top, used[0]);
        }
        // The usable line is within twice the highest column: drawn, and the scale reaches it.
        assert!(c.usable_in_view);
        assert_eq!(c.top_bytes, 100);
        let far = chart(&plan, 0, Some(1000));
        assert!(!far.usable_in_view);
        assert_eq!(far.top_bytes, 70);
    }
}
