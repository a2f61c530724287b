//! Memory spaces: where each buffer slot lives, how the computation touches it, what crosses the
//! host boundary, and where each output comes from.
//!
//! A *slot* is a storage root: a tensor that owns bytes (views share their root's slot; elided
//! tensors have none and are only counted). A slot's role is the union of the kinds on it (its
//! root's and its views'): input (kind `input` or `param`: the host hands it in), constant,
//! output. From the role:
//! - space: the dump's `memory_space` on the root, else `device_constant` for a constant that is
//!   not an output, else `device_global`;
//! - access: input and output `read_write`; output `write_only`; input or constant `read_only`;
//!   otherwise (an intermediate, scratch) `read_write`;
//! - transfer: input and output `bidirectional`; input `host_to_device`; output
//!   `device_to_host`; otherwise `none`.
//!
//! Each output (each tensor of kind `output`, numbered in tensor order) has a source: the first
//! step that writes its slot, else the input or constant its slot is (an alias). An output with
//! neither is a [`MissingWriter`] diagnostic naming the graph, the output's index and the
//! tensor, never a panic: the classification of everything else still stands.
//!
//! Sizes that depend on a param (a symbolic dim) are *dynamic*: counted apart, and left out of
//! the total static bytes, which sums the slots whose size the dump fixes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::graph::{Dim, Graph, MemorySpace, ResolvedGraph, Storage, TensorKind};
use crate::lists::OptionalIndex;

/// How the computation touches a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    ReadOnly,
    WriteOnly,
    ReadWrite,
}

/// What crosses the host boundary for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transfer {
    HostToDevice,
    DeviceToHost,
    Bidirectional,
    None,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::ReadOnly => "read_only",
            Access::WriteOnly => "write_only",
            Access::ReadWrite => "read_write",
        }
    }
}

impl Transfer {
    pub fn name(self) -> &'static str {
        match self {
            Transfer::HostToDevice => "host_to_device",
            Transfer::DeviceToHost => "device_to_host",
            Transfer::Bidirectional => "bidirectional",
            Transfer::None => "none",
        }
    }

    pub fn needs_host_input(self) -> bool {
        matches!(self, Transfer::HostToDevice | Transfer::Bidirectional)
    }

    pub fn needs_host_output(self) -> bool {
        matches!(self, Transfer::DeviceToHost | Transfer::Bidirectional)
    }
}

/// Where an output's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputSource {
    /// A step writes its slot (the first in schedule order).
    Written { step: usize },
    /// Its slot is an input or constant: the output is that tensor's bytes.
    Alias { tensor: usize },
}

/// One slot's classification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotSpace {
    /// The root tensor.
    pub tensor: usize,
    pub space: MemorySpace,
    pub access: Access,
    pub transfer: Transfer,
    pub bytes: u64,
    /// Its size depends on a param.
    pub dynamic: bool,
    pub input: bool,
    pub constant: bool,
    pub output: bool,
}

/// One output of the graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// Its index among the outputs, in tensor order.
    pub index: usize,
    pub tensor: usize,
    /// `None` when it has neither a writer nor an alias (see the diagnostics).
    pub source: Option<OutputSource>,
}

/// An output with no writer and no alias.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingWriter {
    pub graph: String,
    pub output_index: usize,
    pub tensor: String,
}

impl fmt::Display for MissingWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let graph = if self.graph.is_empty() {
            "<unnamed>"
        } else {
            &self.graph
        };
        write!(
            f,
            "graph `{graph}` output #{} (`{}`) has no kernel writer or backing alias; schedule its producer or provide an input/constant alias",
            self.output_index, self.tensor
        )
    }
}

/// The counts of a classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SpaceCounts {
    pub host: usize,
    pub device_global: usize,
    pub device_constant: usize,
    pub device_shared: usize,
    pub unified: usize,
    pub host_input_transfers: usize,
    pub host_output_transfers: usize,
    /// Slots whose size depends on a param.
    pub dynamic: usize,
    /// Tensors fused away: no slot.
    pub elided: usize,
    /// The bytes of the slots whose size the dump fixes.
    pub total_static_bytes: u64,
}

/// The memory spaces of a graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spaces {
    /// One per slot, in tensor order of their roots.
    pub slots: Vec<SlotSpace>,
    /// The slot of each tensor (views: their root's), none when elided. An [`OptionalIndex`]:
    /// half an `Option<usize>`, at a snapshot's millions of tensors.
    pub slot_of: Vec<OptionalIndex>,
    pub outputs: Vec<Output>,
    pub counts: SpaceCounts,
    pub diagnostics: Vec<MissingWriter>,
}

impl Spaces {
    /// The slot of tensor `t` (a view: its root's), none when elided.
    pub fn slot(&self, t: usize) -> Option<usize> {
        self.slot_of.get(t)?.get().map(|s| s as usize)
    }
}

/// Classifies every slot of `graph` (resolved as `resolved`).
pub fn classify(graph: &Graph, resolved: &ResolvedGraph) -> Spaces {
    let owned = |rt: &&crate::graph::ResolvedTensor| rt.storage == Storage::Owned;
    let mut slots: Vec<SlotSpace> =
        Vec::with_capacity(resolved.tensors.iter().filter(owned).count());
    let mut slot_of = vec![OptionalIndex::default(); resolved.tensors.len()];
    let mut counts = SpaceCounts::default();
    for (t, rt) in resolved.tensors.iter().enumerate() {
        if rt.storage == Storage::Owned {
            slot_of[t] = OptionalIndex::new(u32::try_from(slots.len()).ok());
            let dynamic = graph.tensors[t]
                .declared
                .shape
                .as_ref()
                .is_some_and(|s| s.iter().any(|d| matches!(d, Dim::Param(_))));
            slots.push(SlotSpace {
                tensor: t,
                space: MemorySpace::DeviceGlobal,
                access: Access::ReadWrite,
                transfer: Transfer::None,
                bytes: rt.bytes,
                dynamic,
                input: false,
                constant: false,
                output: false,
            });
        }
    }
    // A view's slot is its root's, which the roots' pass set.
    for t in 0..slot_of.len() {
        if let Some(root) = resolved.root(t).filter(|&r| r != t) {
            slot_of[t] = slot_of[root];
        }
    }
    let slot = |t: usize| slot_of[t].get().map(|s| s as usize);
    // Roles: the union of the kinds on each slot.
    for (t, tensor) in graph.tensors.iter().enumerate() {
        let Some(s) = slot(t) else {
            if resolved.tensors[t].storage == Storage::Elided {
                counts.elided += 1;
            }
            continue;
        };
        let slot = &mut slots[s];
        match tensor.kind {
            TensorKind::Input | TensorKind::Param | TensorKind::OptimizerState => slot.input = true,
            TensorKind::Constant => slot.constant = true,
            TensorKind::Output => slot.output = true,
            TensorKind::Intermediate | TensorKind::Scratch => {}
        }
    }
    for slot in &mut slots {
        slot.space = graph.tensors[slot.tensor].declared.memory_space.unwrap_or(
            if slot.constant && !slot.output {
                MemorySpace::DeviceConstant
            } else {
                MemorySpace::DeviceGlobal
            },
        );
        slot.access = match (slot.input, slot.output, slot.constant) {
            (true, true, _) => Access::ReadWrite,
            (false, true, _) => Access::WriteOnly,
            (true, false, _) | (false, false, true) => Access::ReadOnly,
            (false, false, false) => Access::ReadWrite,
        };
        slot.transfer = match (slot.input, slot.output) {
            (true, true) => Transfer::Bidirectional,
            (true, false) => Transfer::HostToDevice,
            (false, true) => Transfer::DeviceToHost,
            (false, false) => Transfer::None,
        };
        match slot.space {
            MemorySpace::Host => counts.host += 1,
            MemorySpace::DeviceGlobal => counts.device_global += 1,
            MemorySpace::DeviceConstant => counts.device_constant += 1,
            MemorySpace::DeviceShared => counts.device_shared += 1,
            MemorySpace::Unified => counts.unified += 1,
        }
        counts.host_input_transfers += usize::from(slot.transfer.needs_host_input());
        counts.host_output_transfers += usize::from(slot.transfer.needs_host_output());
        if slot.dynamic {
            counts.dynamic += 1;
        } else {
            counts.total_static_bytes = counts.total_static_bytes.saturating_add(slot.bytes);
        }
    }
    // The first step writing each slot.
    let mut writer = vec![OptionalIndex::default(); slots.len()];
    for step in 0..resolved.steps.len() {
        for &t in resolved.writes(step) {
            if let Some(s) = slot(t as usize)
                && writer[s].get().is_none()
            {
                writer[s] = OptionalIndex::new(u32::try_from(step).ok());
            }
        }
    }
    let mut outputs = Vec::new();
    let mut diagnostics = Vec::new();
    for (t, tensor) in graph.tensors.iter().enumerate() {
        if tensor.kind != TensorKind::Output {
            continue;
        }
        let index = outputs.len();
        let source = slot(t).and_then(|s| match writer[s].get() {
            Some(step) => Some(OutputSource::Written {
                step: step as usize,
            }),
            None if slots[s].input || slots[s].constant => Some(OutputSource::Alias {
                tensor: slots[s].tensor,
            }),
            None => None,
        });
        // An elided output owns nothing to write; only a slot without a source is missing.
        if source.is_none() && slot(t).is_some() {
            diagnostics.push(MissingWriter {
                graph: graph.name.clone(),
                output_index: index,
                tensor: tensor.id.to_string(),
            });
        }
        outputs.push(Output {
            index,
            tensor: t,
            source,
        });
    }
    Spaces {
        slots,
        slot_of,
        outputs,
        counts,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testing::step;
    use crate::graph::{Declaration, Tensor};

    fn tensor(id: &str, kind: TensorKind) -> Tensor {
        Tensor {
            id: id.into(),
            declared: Declaration {
                shape: Some(vec![Dim::Fixed(4)]),
                dtype: Some("f32".into()),
                ..Declaration::default()
            }
            .into(),
            kind,
            ..Tensor::default()
        }
    }

    /// `t` with more declared.
    fn declaring(mut t: Tensor, declare: impl FnOnce(&mut Declaration)) -> Tensor {
        declare(&mut t.declared);
        t
    }

    fn spaces(g: &Graph) -> Spaces {
        classify(g, &g.resolve().unwrap())
    }

    #[test]
    fn an_add_of_two_inputs() {
        let g = Graph {
            name: "add4".into(),
            tensors: vec![
                tensor("x", TensorKind::Input),
                tensor("y", TensorKind::Input),
                tensor("z", TensorKind::Output),
            ],
            steps: vec![step("add", &["x", "y"], &["z"])],
            ..Graph::default()
        };
        let s = spaces(&g);
        assert_eq!(s.slots.len(), 3);
        assert_eq!(s.counts.device_global, 3);
        assert_eq!(s.counts.device_constant, 0);
        assert_eq!(s.counts.host_input_transfers, 2);
        assert_eq!(s.counts.host_output_transfers, 1);
        assert_eq!(s.counts.dynamic, 0);
        assert_eq!(s.counts.total_static_bytes, 48);
        assert_eq!(
            (s.slots[0].access, s.slots[0].transfer),
            (Access::ReadOnly, Transfer::HostToDevice)
        );
        assert_eq!(
            (s.slots[2].access, s.slots[2].transfer),
            (Access::WriteOnly, Transfer::DeviceToHost)
        );
        assert_eq!(s.outputs[0].source, Some(OutputSource::Written { step: 0 }));
        assert!(s.diagnostics.is_empty());
    }

    #[test]
    fn a_returned_input_and_a_returned_constant_are_aliases() {
        let g = Graph {
            tensors: vec![
                tensor("x", TensorKind::Input),
                tensor("c", TensorKind::Constant),
                declaring(tensor("out_x", TensorKind::Output), |d| {
                    d.view_of = Some("x".into())
                }),
                declaring(tensor("out_c", TensorKind::Output), |d| {
                    d.view_of = Some("c".into())
                }),
                tensor("t", TensorKind::Intermediate),
            ],
            steps: vec![step("touch", &["x", "c"], &["t"])],
            ..Graph::default()
        };
        let s = spaces(&g);
        assert_eq!(
            s.outputs.iter().map(|o| o.source).collect::<Vec<_>>(),
            vec![
                Some(OutputSource::Alias { tensor: 0 }),
                Some(OutputSource::Alias { tensor: 1 })
            ]
        );
        // The returned input goes both ways; the returned constant leaves constant memory.
        assert_eq!(s.slots[0].transfer, Transfer::Bidirectional);
        assert_eq!(s.slots[0].access, Access::ReadWrite);
        assert_eq!(s.slots[1].space, MemorySpace::DeviceGlobal);
        assert!(s.diagnostics.is_empty());
    }

    #[test]
    fn a_broadcast_whose_writer_was_removed_is_a_diagnostic_not_a_crash() {
        let g = Graph {
            name: "writerless".into(),
            tensors: vec![
                tensor("x", TensorKind::Input),
                declaring(tensor("x_out", TensorKind::Output), |d| {
                    d.view_of = Some("x".into())
                }),
                tensor("broadcast", TensorKind::Output),
            ],
            steps: vec![step("read", &["x"], &["x_out"])],
            ..Graph::default()
        };
        let s = spaces(&g);
        assert_eq!(s.diagnostics.len(), 1);
        assert_eq!(
            s.diagnostics[0].to_string(),
            "graph `writerless` output #1 (`broadcast`) has no kernel writer or backing alias; schedule its producer or provide an input/constant alias"
        );
        assert_eq!(s.outputs[1].source, None);
        // Everything else is still classified.
        assert_eq!(s.slots.len(), 2);
    }

    #[test]
    fn a_constant_not_returned_lives_in_constant_memory() {
        let g = Graph {
            tensors: vec![
                tensor("w", TensorKind::Constant),
                tensor("x", TensorKind::Input),
                tensor("y", TensorKind::Output),
            ],
            steps: vec![step("mul", &["w", "x"], &["y"])],
            ..Graph::default()
        };
        let s = spaces(&g);
        assert_eq!(s.slots[0].space, MemorySpace::DeviceConstant);
        assert_eq!(s.slots[0].access, Access::ReadOnly);
        assert_eq!(s.slots[0].transfer, Transfer::None);
        assert_eq!(s.counts.device_constant, 1);
    }

    #[test]
    fn a_fused_away_value_has_no_storage_and_is_counted_as_elided() {
        let g = Graph {
            params: [("B".to_string(), 2)].into(),
            tensors: vec![
                tensor("a", TensorKind::Input),
                tensor("b", TensorKind::Input),
                Tensor {
                    elided: true,
                    ..tensor("sum", TensorKind::Intermediate)
                },
                declaring(tensor("product", TensorKind::Output), |d| {
                    d.shape = Some(vec![Dim::Param("B".into()), Dim::Fixed(2)])
                }),
            ],
            steps: vec![
                step("add", &["a", "b"], &["sum"]),
                step("mul", &["sum", "b"], &["product"]),
            ],
            ..Graph::default()
        };
        let s = spaces(&g);
        assert_eq!(s.counts.elided, 1);
        assert_eq!(s.slot_of[2].get(), None);
        assert_eq!(s.slots.len(), 3);
        // `product`'s size depends on B: dynamic, out of the static total.
        assert_eq!(s.counts.dynamic, 1);
        assert_eq!(s.counts.total_static_bytes, 32);
    }

    #[test]
    fn the_dumps_memory_space_wins() {
        let g = Graph {
            tensors: vec![
                declaring(tensor("x", TensorKind::Input), |d| {
                    d.memory_space = Some(MemorySpace::Host)
                }),
                tensor("y", TensorKind::Output),
            ],
            steps: vec![step("copy", &["x"], &["y"])],
            ..Graph::default()
        };
        let s = spaces(&g);
        assert_eq!(s.slots[0].space, MemorySpace::Host);
        assert_eq!(s.counts.host, 1);
    }
}
