//! Two plans side by side, matched by tensor id: what moved, was resized, is new, is gone, or
//! lives over another interval. Pure over [`PlanReport`]s, so it compares any two plans: one dump
//! under two strategies or flip sets, or a dump before and after a change. `memplan diff` prints
//! it (and fails CI past a growth threshold); the explorer's compare view sorts it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use memplan_formats::report::{PlacementReport, PlanReport};

/// What changed for one tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Only in the second plan.
    New,
    /// Only in the first plan.
    Gone,
    /// In both, with a different size, offset (or pool, or device) or live interval.
    Changed,
    Same,
}

/// One tensor of either plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorDiff {
    pub tensor: String,
    pub change: Change,
    /// Its offset, pool or device differs.
    pub moved: bool,
    pub resized: bool,
    pub interval_changed: bool,
    pub before: Option<PlacementReport>,
    pub after: Option<PlacementReport>,
}

impl TensorDiff {
    /// Its bytes after minus before (a gone tensor counts negative, a new one positive).
    pub fn size_delta(&self) -> i128 {
        let size = |p: &Option<PlacementReport>| p.as_ref().map_or(0, |p| i128::from(p.size));
        size(&self.after) - size(&self.before)
    }
}

/// Each plan's headline figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    pub footprint_bytes: u64,
    pub lower_bound_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanDiff {
    pub before: Side,
    pub after: Side,
    /// The footprint's growth over the first plan's, in percent (negative: it shrank); `None`
    /// when the first plan has no footprint.
    pub footprint_change_percent: Option<f64>,
    /// Every tensor of either plan, changes first (new, gone, changed), then by id.
    pub tensors: Vec<TensorDiff>,
}

impl PlanDiff {
    /// Whether the footprint grew by more than `percent` (from nothing, any growth counts).
    pub fn grew_past(&self, percent: f64) -> bool {
        match self.footprint_change_percent {
            Some(change) => change > percent,
            None => self.after.footprint_bytes > 0,
        }
    }

    /// The number of tensors with each kind of change.
    pub fn count(&self, change: Change) -> usize {
        self.tensors.iter().filter(|t| t.change == change).count()
    }
}

/// The diff of plan `after` against plan `before`.
pub fn diff(before: &PlanReport, after: &PlanReport) -> PlanDiff {
    let index = |r: &PlanReport| -> BTreeMap<String, PlacementReport> {
        r.placements
            .iter()
            .map(|p| (p.tensor.clone(), p.clone()))
            .collect()
    };
    let (mut a, mut b) = (index(before), index(after));
    let ids: std::collections::BTreeSet<String> = a.keys().chain(b.keys()).cloned().collect();
    let mut tensors: Vec<TensorDiff> = ids
        .into_iter()
        .map(|id| {
            let (x, y) = (a.remove(&id), b.remove(&id));
            let (moved, resized, interval_changed) = match (&x, &y) {
                (Some(x), Some(y)) => (
                    (x.device.as_str(), x.pool, x.offset) != (y.device.as_str(), y.pool, y.offset),
                    x.size != y.size,
                    x.live != y.live,
                ),
                _ => (false, false, false),
            };
            let change = match (&x, &y) {
                (None, _) => Change::New,
                (_, None) => Change::Gone,
                _ if moved || resized || interval_changed => Change::Changed,
                _ => Change::Same,
            };
            TensorDiff {
                tensor: id,
                change,
                moved,
                resized,
                interval_changed,
                before: x,
                after: y,
            }
        })
        .collect();
    tensors.sort_by(|x, y| (x.change, &x.tensor).cmp(&(y.change, &y.tensor)));
    let side = |r: &PlanReport| Side {
        footprint_bytes: r.summary.footprint_bytes,
        lower_bound_bytes: r.summary.lower_bound_bytes,
    };
    let (from, to) = (
        before.summary.footprint_bytes,
        after.summary.footprint_bytes,
    );
    PlanDiff {
        before: side(before),
        after: side(after),
        footprint_change_percent: (from > 0)
            .then(|| (to as f64 - from as f64) / from as f64 * 100.0),
        tensors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_formats::report::PlanSummary;

    fn placement(tensor: &str, offset: u64, size: u64, live: [u32; 2]) -> PlacementReport {
        PlacementReport {
            tensor: tensor.into(),
            device: "d".into(),
            pool: 0,
            offset,
            size,
            live,
            always_live: false,
        }
    }

    fn report(footprint: u64, placements: Vec<PlacementReport>) -> PlanReport {
        let mut summary: PlanSummary = serde_json::from_value(serde_json::json!({
            "strategy": "first-fit", "precision_classes": true, "pool_cap": null,
            "footprint_bytes": 0, "lower_bound_bytes": 0, "valid": true, "violations": [],
            "positions": 4, "devices": []
        }))
        .unwrap();
        summary.footprint_bytes = footprint;
        PlanReport {
            summary,
            placements,
        }
    }

    #[test]
    fn every_kind_of_change_is_named_and_changes_come_first() {
        let before = report(
            100,
            vec![
                placement("same", 0, 10, [0, 1]),
                placement("moved", 10, 10, [0, 1]),
                placement("resized", 20, 10, [0, 1]),
                placement("later", 30, 10, [0, 1]),
                placement("gone", 40, 10, [0, 1]),
            ],
        );
        let after = report(
            110,
            vec![
                placement("same", 0, 10, [0, 1]),
                placement("moved", 50, 10, [0, 1]),
                placement("resized", 20, 12, [0, 1]),
                placement("later", 30, 10, [1, 3]),
                placement("new", 60, 10, [2, 3]),
            ],
        );
        let d = diff(&before, &after);
        let rows: Vec<(&str, Change, bool, bool, bool)> = d
            .tensors
            .iter()
            .map(|t| {
                (
                    t.tensor.as_str(),
                    t.change,
                    t.moved,
                    t.resized,
                    t.interval_changed,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("new", Change::New, false, false, false),
                ("gone", Change::Gone, false, false, false),
                ("later", Change::Changed, false, false, true),
                ("moved", Change::Changed, true, false, false),
                ("resized", Change::Changed, false, true, false),
                ("same", Change::Same, false, false, false),
            ]
        );
        assert_eq!(d.tensors[1].size_delta(), -10);
        assert_eq!(d.footprint_change_percent, Some(10.0));
        assert!(d.grew_past(5.0) && !d.grew_past(10.0));
        assert!(!diff(&after, &before).grew_past(0.0));
        assert!(diff(&report(0, vec![]), &after).grew_past(1000.0));
        assert_eq!(diff(&before, &before).count(Change::Same), 5);
    }
}
