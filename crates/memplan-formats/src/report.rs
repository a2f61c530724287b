//! The plan report: one JSON object with everything a plan says, for scripts, the web app and
//! `memplan check`.
//!
//! Field names are the product's names (`peak_bytes`, `lower_bound_bytes`, `arena_bytes`,
//! `live`), the same in the CLI, the JSON and the UI. Building a report from a plan computes
//! nothing new: every number comes from `memplan-core`, so the CLI and the web app agree to the
//! byte.

use std::collections::HashMap;

use memplan_core::{Lifetime, Placement, Plan, Pool, PoolRole, Problem};
use serde::{Deserialize, Serialize};

use crate::FormatError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanReport {
    pub strategy: String,
    pub precision_classes: bool,
    pub pool_cap: u64,
    /// The footprint summed over devices.
    pub peak_bytes: u64,
    pub lower_bound_bytes: u64,
    /// The independent checker's verdict.
    pub valid: bool,
    pub violations: Vec<String>,
    pub positions: u32,
    pub devices: Vec<DeviceReport>,
    pub placements: Vec<PlacementReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceReport {
    pub device: String,
    /// The strategy that laid this device's arena out (for `best`, the one it picked).
    pub strategy: String,
    pub peak_bytes: u64,
    pub lower_bound_bytes: u64,
    pub arena_bytes: u64,
    pub always_live_bytes: u64,
    /// The first position where the live bytes reach the lower bound.
    pub peak_position: Option<u32>,
    /// The tensors live there.
    pub live_at_peak: Vec<String>,
    pub pools: Vec<PoolReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolReport {
    pub role: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementReport {
    pub tensor: String,
    pub device: String,
    pub pool: usize,
    pub offset: u64,
    pub size: u64,
    /// `[first, last]` positions; always-live tensors span them all.
    pub live: [u32; 2],
    pub always_live: bool,
}

impl PlanReport {
    pub fn new(problem: &Problem, plan: &Plan) -> Self {
        let device = |d: usize| problem.device_ids[d].clone();
        PlanReport {
            strategy: plan.options.strategy.name().to_string(),
            precision_classes: plan.options.precision_classes,
            pool_cap: plan.options.pool_cap,
            peak_bytes: plan.peak_bytes(),
            lower_bound_bytes: plan.lower_bound_bytes(),
            valid: plan.is_valid(),
            violations: plan.violations.iter().map(ToString::to_string).collect(),
            positions: problem.positions,
            devices: plan
                .devices
                .iter()
                .map(|d| DeviceReport {
                    device: device(d.device),
                    strategy: d.strategy.name().to_string(),
                    peak_bytes: d.peak_bytes,
                    lower_bound_bytes: d.usage.lower_bound,
                    arena_bytes: d.arena_bytes,
                    always_live_bytes: d.always_live_bytes,
                    peak_position: d.usage.peak_position,
                    live_at_peak: d
                        .usage
                        .live_at_peak
                        .iter()
                        .map(|&b| problem.buffers[b].name.clone())
                        .collect(),
                    pools: d
                        .pools
                        .iter()
                        .map(|p| PoolReport {
                            role: p.role.name().to_string(),
                            bytes: p.bytes,
                        })
                        .collect(),
                })
                .collect(),
            placements: problem
                .buffers
                .iter()
                .zip(&plan.placements)
                .map(|(b, p)| {
                    let span = b.span(problem.positions);
                    PlacementReport {
                        tensor: b.name.clone(),
                        device: device(b.device),
                        pool: p.pool,
                        offset: p.offset,
                        size: b.size,
                        live: [span.first, span.last],
                        always_live: b.lifetime == Lifetime::Always,
                    }
                })
                .collect(),
        }
    }

    /// Parses a report (the output of `memplan plan --json`).
    pub fn parse(text: &str) -> Result<Self, FormatError> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let inner = e.inner();
            if inner.is_syntax() || inner.is_eof() {
                FormatError::JsonSyntax {
                    line: inner.line(),
                    column: inner.column(),
                    message: inner.to_string(),
                }
            } else {
                FormatError::JsonStructure {
                    path: e.path().to_string(),
                    message: inner.to_string(),
                }
            }
        })
    }

    /// The pools (per device of `problem`) and placements (per buffer) this report gives, for the
    /// checker. A tensor of the problem that the report does not place is an error naming it.
    pub fn layout_for(
        &self,
        problem: &Problem,
    ) -> Result<(Vec<Vec<Pool>>, Vec<Placement>), FormatError> {
        let structure =
            |path: String, message: String| FormatError::JsonStructure { path, message };
        let mut pools = vec![Vec::new(); problem.device_ids.len()];
        for (k, d) in self.devices.iter().enumerate() {
            let Some(index) = problem.device_ids.iter().position(|id| *id == d.device) else {
                return Err(structure(
                    format!("devices[{k}].device"),
                    format!("no device `{}` in the dump", d.device),
                ));
            };
            pools[index] = d
                .pools
                .iter()
                .enumerate()
                .map(|(j, p)| {
                    let role = match p.role.as_str() {
                        "arena" => PoolRole::Arena,
                        "static" => PoolRole::Static,
                        other => {
                            return Err(structure(
                                format!("devices[{k}].pools[{j}].role"),
                                format!("unknown role `{other}`"),
                            ));
                        }
                    };
                    Ok(Pool {
                        role,
                        bytes: p.bytes,
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        let by_tensor: HashMap<&str, &PlacementReport> = self
            .placements
            .iter()
            .map(|p| (p.tensor.as_str(), p))
            .collect();
        let placements = problem
            .buffers
            .iter()
            .map(|b| {
                by_tensor
                    .get(b.name.as_str())
                    .map(|p| Placement {
                        pool: p.pool,
                        offset: p.offset,
                    })
                    .ok_or_else(|| {
                        structure(
                            "placements".into(),
                            format!("tensor `{}` has no placement", b.name),
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok((pools, placements))
    }
}
