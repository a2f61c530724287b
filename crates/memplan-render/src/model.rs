//! The view model: a plan as the views show it.

use memplan_core::graph::{Graph, TensorKind};
use memplan_core::{DType, Lifetime, Liveness, Plan, PoolRole, ResolvedGraph};
use serde::{Deserialize, Serialize};

/// One planned buffer, as the views show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferView {
    /// The tensor id.
    pub tensor: String,
    /// The display name (the id when the dump gives none).
    pub name: String,
    pub kind: TensorKind,
    pub dtype: Option<DType>,
    pub size: u64,
    /// Its size rounded up to its alignment: the bytes it holds.
    pub occupied: u64,
    pub device: usize,
    pub pool: usize,
    /// The offset in its pool.
    pub offset: u64,
    /// The offset in its device's memory, pools laid end to end.
    pub address: u64,
    /// Live interval `[first, last]`; always-live buffers span every position.
    pub first: u32,
    pub last: u32,
    pub always_live: bool,
    /// Steps writing it (or a view of it), and steps reading it, in schedule order.
    pub producers: Vec<String>,
    pub consumers: Vec<String>,
}

impl BufferView {
    pub fn lifetime(&self) -> u32 {
        self.last - self.first + 1
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolView {
    pub role: PoolRole,
    pub bytes: u64,
    /// Where it starts in the device's memory.
    pub base: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceView {
    pub id: String,
    pub strategy: String,
    pub pools: Vec<PoolView>,
    /// The footprint: all pools.
    pub footprint_bytes: u64,
    pub lower_bound: u64,
    pub curve: Vec<u64>,
    pub peak_position: Option<u32>,
    /// Buffer indices live at the peak position.
    pub live_at_peak: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewModel {
    pub title: String,
    pub positions: u32,
    /// What runs at each position: a step id, or a loop id.
    pub position_labels: Vec<String>,
    pub devices: Vec<DeviceView>,
    /// One per buffer of the plan, in canonical order.
    pub buffers: Vec<BufferView>,
}

impl ViewModel {
    pub fn new(graph: &Graph, resolved: &ResolvedGraph, liveness: &Liveness, plan: &Plan) -> Self {
        let problem = &liveness.problem;
        let (producers, consumers) = (&liveness.uses.producers, &liveness.uses.consumers);
        let step_ids = |steps: &[usize]| steps.iter().map(|&s| graph.steps[s].id.clone()).collect();
        let offsets = plan.device_offsets(problem);
        let buffers = problem
            .buffers
            .iter()
            .enumerate()
            .map(|(b, buffer)| {
                let t = liveness.buffer_tensor[b];
                let tensor = &graph.tensors[t];
                let span = buffer.span(problem.positions);
                BufferView {
                    tensor: tensor.id.clone(),
                    name: tensor.display_name().to_string(),
                    kind: tensor.kind,
                    dtype: buffer.dtype,
                    size: buffer.size,
                    occupied: buffer.occupied_size(),
                    device: buffer.device,
                    pool: plan.placements[b].pool,
                    offset: plan.placements[b].offset,
                    address: offsets[b],
                    first: span.first,
                    last: span.last,
                    always_live: buffer.lifetime == Lifetime::Always,
                    producers: step_ids(&producers[t]),
                    consumers: step_ids(&consumers[t]),
                }
            })
            .collect();
        let position_labels = resolved
            .positions
            .iter()
            .map(|p| match p.loop_index {
                Some(l) => format!("loop {}", graph.loops[l].id),
                None => graph.steps[p.first_step].id.clone(),
            })
            .collect();
        let devices = plan
            .devices
            .iter()
            .map(|d| DeviceView {
                id: problem.device_ids[d.device].clone(),
                strategy: d.strategy.name().to_string(),
                pools: d
                    .pools
                    .iter()
                    .scan(0u64, |base, p| {
                        let view = PoolView {
                            role: p.role,
                            bytes: p.bytes,
                            base: *base,
                        };
                        *base += p.bytes;
                        Some(view)
                    })
                    .collect(),
                footprint_bytes: d.footprint_bytes,
                lower_bound: d.usage.lower_bound,
                curve: d.usage.curve.clone(),
                peak_position: d.usage.peak_position,
                live_at_peak: d.usage.live_at_peak.clone(),
            })
            .collect();
        ViewModel {
            title: graph.name.clone(),
            positions: problem.positions,
            position_labels,
            devices,
            buffers,
        }
    }

    /// Indices of the buffers whose tensor id or name contains `query` (case-insensitive);
    /// every buffer for an empty query.
    pub fn search(&self, query: &str) -> Vec<usize> {
        let q = query.trim().to_lowercase();
        (0..self.buffers.len())
            .filter(|&b| {
                q.is_empty()
                    || self.buffers[b].tensor.to_lowercase().contains(&q)
                    || self.buffers[b].name.to_lowercase().contains(&q)
            })
            .collect()
    }

    /// The timeline's rows: the buffers of `device` matching `query`, in `order`.
    pub fn rows(&self, device: usize, query: &str, order: RowOrder) -> Vec<usize> {
        let mut rows: Vec<usize> = self
            .search(query)
            .into_iter()
            .filter(|&b| self.buffers[b].device == device)
            .collect();
        order.sort(self, &mut rows);
        rows
    }

    /// `device`, or the last device when it is out of range (a link may name any number).
    pub fn clamp_device(&self, device: usize) -> usize {
        device.min(self.devices.len().saturating_sub(1))
    }

    /// The index of the buffer of tensor `id`.
    pub fn buffer_of(&self, id: &str) -> Option<usize> {
        self.buffers.iter().position(|b| b.tensor == id)
    }
}

/// How the timeline orders its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowOrder {
    #[default]
    Start,
    Size,
    Lifetime,
}

impl RowOrder {
    pub const ALL: [RowOrder; 3] = [RowOrder::Start, RowOrder::Size, RowOrder::Lifetime];

    pub fn name(self) -> &'static str {
        match self {
            RowOrder::Start => "start",
            RowOrder::Size => "size",
            RowOrder::Lifetime => "lifetime",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Sorts buffer indices: by start, by decreasing size, or by decreasing lifetime; ties by
    /// canonical order.
    pub fn sort(self, model: &ViewModel, rows: &mut [usize]) {
        let b = &model.buffers;
        match self {
            RowOrder::Start => rows.sort_by_key(|&i| (b[i].first, b[i].last, i)),
            RowOrder::Size => rows.sort_by_key(|&i| (std::cmp::Reverse(b[i].size), i)),
            RowOrder::Lifetime => {
                rows.sort_by_key(|&i| (std::cmp::Reverse(b[i].lifetime()), b[i].first, i))
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The view model of a dump planned with the default options.
    pub(crate) fn model_of(dump: &str) -> ViewModel {
        let graph = memplan_formats::json::parse(dump).unwrap();
        let resolved = graph.resolve().unwrap();
        let liveness = memplan_core::analyze(&graph, &resolved);
        let plan =
            memplan_core::plan(&liveness.problem, &memplan_core::PlanOptions::default()).unwrap();
        ViewModel::new(&graph, &resolved, &liveness, &plan)
    }

    fn example() -> ViewModel {
        model_of(include_str!(
            "../../../static/examples/transformer-decode.json"
        ))
    }

    #[test]
    fn producers_and_consumers_go_through_views() {
        let m = example();
        let qkv = &m.buffers[m.buffer_of("qkv").unwrap()];
        assert_eq!(qkv.producers, vec!["qkv_proj"]);
        // q, k_new and v_new are views of qkv: their readers read qkv.
        assert_eq!(qkv.consumers, vec!["kv_append", "attention"]);
        assert_eq!(m.position_labels[1], "loop layers");
    }

    #[test]
    fn rows_sort_and_search() {
        let m = example();
        let mut rows = m.search("NORM");
        assert!(
            rows.iter().all(
                |&b| m.buffers[b].tensor.contains("norm") || m.buffers[b].name.contains("norm")
            )
        );
        RowOrder::Size.sort(&m, &mut rows);
        assert!(
            rows.windows(2)
                .all(|w| m.buffers[w[0]].size >= m.buffers[w[1]].size)
        );
        assert_eq!(m.search("").len(), m.buffers.len());
    }
}
