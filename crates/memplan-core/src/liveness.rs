//! Liveness: from a resolved graph to the planning [`Problem`].
//!
//! A position is a top-level step, or a whole loop (which takes the buffers of each of its steps
//! and of its back edge). A step takes the tensors it reads and writes; a view is a use of its
//! root's storage; an elided tensor takes nothing. A tensor that owns storage lives on the closed
//! interval from the first position that takes it to the last, unless it is always-live.
//!
//! Owning tensors become buffers in tensor order (the canonical order). Views and elided tensors
//! own nothing and become no buffer. A tensor that owns storage, is not always-live and is never
//! taken needs no bytes: it is listed in [`Liveness::unused`], not planned.

use crate::graph::{Graph, ResolvedGraph, Storage};
use crate::problem::{Buffer, Lifetime, LiveInterval, Problem};

/// The planning problem of a graph, with the map back to its tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Liveness {
    pub problem: Problem,
    /// The tensor index of each buffer.
    pub buffer_tensor: Vec<usize>,
    /// The buffer of each tensor that owns one.
    pub tensor_buffer: Vec<Option<usize>>,
    /// Tensors that own storage but are never taken and not always-live.
    pub unused: Vec<usize>,
}

/// For each position, the storage roots it takes (sorted, each once).
pub fn taken_per_position(resolved: &ResolvedGraph) -> Vec<Vec<usize>> {
    resolved
        .positions
        .iter()
        .map(|p| {
            let steps = &resolved.steps[p.first_step..=p.last_step];
            let back_edge = p
                .loop_index
                .map(|l| resolved.back_edge_reads[l].as_slice())
                .unwrap_or_default();
            let mut roots: Vec<usize> = steps
                .iter()
                .flat_map(|s| s.reads.iter().chain(&s.writes))
                .chain(back_edge)
                .filter_map(|&t| match resolved.tensors[t].storage {
                    Storage::Owned => Some(t),
                    Storage::View { root, .. } => Some(root),
                    Storage::Elided => None,
                })
                .collect();
            roots.sort_unstable();
            roots.dedup();
            roots
        })
        .collect()
}

/// Builds the planning problem of `graph` (already resolved as `resolved`).
pub fn analyze(graph: &Graph, resolved: &ResolvedGraph) -> Liveness {
    let n = resolved.tensors.len();
    let mut span: Vec<Option<LiveInterval>> = vec![None; n];
    for (position, roots) in taken_per_position(resolved).iter().enumerate() {
        let position = position as u32;
        for &t in roots {
            let s = span[t].get_or_insert(LiveInterval::new(position, position));
            s.last = position;
        }
    }

    let mut problem = Problem {
        device_ids: resolved.device_ids.clone(),
        positions: resolved.positions.len() as u32,
        buffers: Vec::new(),
    };
    let mut buffer_tensor = Vec::new();
    let mut tensor_buffer = vec![None; n];
    let mut unused = Vec::new();
    for (t, rt) in resolved.tensors.iter().enumerate() {
        if rt.storage != Storage::Owned {
            continue;
        }
        let lifetime = match (rt.always_live, span[t]) {
            (true, _) => Lifetime::Always,
            (false, Some(interval)) => Lifetime::Live(interval),
            (false, None) => {
                unused.push(t);
                continue;
            }
        };
        tensor_buffer[t] = Some(problem.buffers.len());
        buffer_tensor.push(t);
        problem.buffers.push(Buffer {
            name: graph.tensors[t].id.clone(),
            device: rt.device,
            size: rt.bytes,
            alignment: rt.alignment,
            dtype: rt.dtype,
            lifetime,
        });
    }
    Liveness {
        problem,
        buffer_tensor,
        tensor_buffer,
        unused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Loop, Step, Tensor, TensorKind};

    fn tensor(id: &str, bytes: u64) -> Tensor {
        Tensor {
            id: id.into(),
            bytes: Some(bytes),
            ..Tensor::default()
        }
    }

    fn step(id: &str, reads: &[&str], writes: &[&str]) -> Step {
        Step {
            id: id.into(),
            reads: reads.iter().map(|s| s.to_string()).collect(),
            writes: writes.iter().map(|s| s.to_string()).collect(),
            ..Step::default()
        }
    }

    fn lifetimes(g: &Graph) -> Vec<(String, Lifetime)> {
        let l = crate::liveness_of(g).unwrap();
        l.problem
            .buffers
            .iter()
            .map(|b| (b.name.clone(), b.lifetime))
            .collect()
    }

    fn at(first: u32, last: u32) -> Lifetime {
        Lifetime::Live(LiveInterval::new(first, last))
    }

    #[test]
    fn a_loop_is_one_position_taking_its_steps_and_back_edge() {
        let mut g = Graph {
            tensors: vec![
                tensor("a", 8),
                tensor("b", 8),
                tensor("c", 8),
                tensor("flag", 1),
                tensor("d", 8),
            ],
            steps: vec![
                step("s0", &[], &["a"]),
                step("l0", &["a"], &["b"]),
                step("l1", &["b"], &["c"]),
                step("s3", &["c"], &["d"]),
            ],
            loops: vec![Loop {
                id: "L".into(),
                trip_count: Some(4),
                back_edge_reads: vec!["flag".into()],
            }],
            ..Graph::default()
        };
        g.steps[1].loop_id = Some("L".into());
        g.steps[2].loop_id = Some("L".into());
        assert_eq!(
            lifetimes(&g),
            vec![
                ("a".into(), at(0, 1)),
                ("b".into(), at(1, 1)),
                ("c".into(), at(1, 2)),
                ("flag".into(), at(1, 1)),
                ("d".into(), at(2, 2))
            ]
        );
    }

    #[test]
    fn views_are_uses_of_their_root_and_own_nothing() {
        let g = Graph {
            tensors: vec![
                tensor("base", 64),
                Tensor {
                    view_of: Some("base".into()),
                    view_offset: 32,
                    ..tensor("half", 32)
                },
                Tensor {
                    view_of: Some("half".into()),
                    ..tensor("quarter", 16)
                },
                tensor("out", 8),
            ],
            steps: vec![
                step("s0", &[], &["base"]),
                step("s1", &[], &["out"]),
                step("s2", &["quarter"], &["out"]),
            ],
            ..Graph::default()
        };
        let resolved = g.resolve().unwrap();
        assert_eq!(
            resolved.tensors[2].storage,
            crate::graph::Storage::View {
                root: 0,
                offset: 32
            }
        );
        assert_eq!(
            lifetimes(&g),
            vec![("base".into(), at(0, 2)), ("out".into(), at(1, 2))]
        );
    }

    #[test]
    fn a_long_chain_of_views_resolves_to_its_root() {
        // Each view resolves once: a chain of 100k views is linear work, not quadratic.
        let n = 100_000;
        let mut tensors = vec![tensor("v0", 1 << 20)];
        for i in 1..n {
            tensors.push(Tensor {
                view_of: Some(format!("v{}", i - 1)),
                view_offset: 1,
                ..tensor(&format!("v{i}"), 8)
            });
        }
        let g = Graph {
            tensors,
            steps: vec![step("s", &[], &[&format!("v{}", n - 1)])],
            ..Graph::default()
        };
        let resolved = g.resolve().unwrap();
        assert_eq!(
            resolved.tensors[n - 1].storage,
            crate::graph::Storage::View {
                root: 0,
                offset: n as u64 - 1
            }
        );
        assert_eq!(lifetimes(&g), vec![("v0".into(), at(0, 0))]);
    }

    #[test]
    fn elided_always_live_and_unused_tensors() {
        let g = Graph {
            tensors: vec![
                Tensor {
                    kind: TensorKind::Input,
                    ..tensor("in", 8)
                },
                Tensor {
                    elided: true,
                    ..tensor("fused", 8)
                },
                Tensor {
                    kind: TensorKind::Output,
                    always_live: Some(false),
                    ..tensor("out", 8)
                },
                tensor("never", 8),
                Tensor {
                    held: true,
                    ..tensor("cache", 8)
                },
            ],
            steps: vec![
                step("s0", &["in"], &["fused"]),
                step("s1", &["fused"], &["out"]),
            ],
            ..Graph::default()
        };
        let l = crate::liveness_of(&g).unwrap();
        assert_eq!(l.unused, vec![3]);
        assert_eq!(
            lifetimes(&g),
            vec![
                ("in".into(), Lifetime::Always),
                ("out".into(), at(1, 1)),
                ("cache".into(), Lifetime::Always)
            ]
        );
    }
}
