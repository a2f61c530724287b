//! Buffers as their JSON carries them: column by column, each name once, and what most buffers
//! leave at its default listed only where it is not. The web worker sends a view model's
//! buffers to the page as JSON, hundreds of thousands of them for a large snapshot: as objects,
//! each repeated every key and its name (a snapshot's tensors share a few hundred names), 300
//! bytes a buffer; as columns, a third of that, and each name is read (and held) once.
//!
//! Use on a field of type `Vec<BufferView>`: `#[serde(with = "crate::model::columns")]`. The form is
//! the wire's, not a file format: both ends are built together.

use std::collections::HashMap;
use std::sync::Arc;

use memplan_core::DType;
use memplan_core::graph::TensorKind;
use memplan_core::recorded::Allocation;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::{BufferView, ViewInto};

/// The columns. Dense ones hold a value per buffer; an empty dense column means every buffer
/// has the default (no stack, no allocation, no given offset). Sparse ones list `(buffer,
/// value)` where the value is not the default.
#[derive(Default, Serialize, Deserialize)]
struct Columns {
    tensor: Vec<Arc<str>>,
    /// The distinct names that are not their buffer's tensor id.
    names: Vec<Arc<str>>,
    /// Per buffer, `k + 1` for `names[k]`, or 0 for its tensor id; empty when every name is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    name: Vec<u32>,
    size: Vec<u64>,
    /// Where the occupied bytes are not the size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    occupied: Vec<(u32, u64)>,
    offset: Vec<u64>,
    /// Where the address is not the offset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    address: Vec<(u32, u64)>,
    first: Vec<u32>,
    last: Vec<u32>,
    producers: Vec<Arc<[u32]>>,
    consumers: Vec<Arc<[u32]>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    kind: Vec<(u32, TensorKind)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dtype: Vec<(u32, DType)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    device: Vec<(u32, usize)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pool: Vec<(u32, usize)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    always_live: Vec<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    views: Vec<(u32, Arc<[ViewInto]>)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    stack: Vec<Option<u32>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    allocation: Vec<Option<AllocationRow>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    given_offset: Vec<Option<u64>>,
}

/// An allocation as its column holds it: `(address, stream, allocated_at, freed_at)`.
type AllocationRow = (u64, i64, u64, Option<u64>);

/// `(k, value)` for each buffer whose `value` is `Some`.
fn sparse<T>(buffers: &[BufferView], value: impl Fn(&BufferView) -> Option<T>) -> Vec<(u32, T)> {
    (buffers.iter().enumerate())
        .filter_map(|(k, b)| Some((k as u32, value(b)?)))
        .collect()
}

/// A value per buffer, or none when every buffer's is `None`.
fn dense<T>(buffers: &[BufferView], value: impl Fn(&BufferView) -> Option<T>) -> Vec<Option<T>> {
    match buffers.iter().any(|b| value(b).is_some()) {
        true => buffers.iter().map(value).collect(),
        false => Vec::new(),
    }
}

impl Columns {
    fn of(buffers: &[BufferView]) -> Columns {
        let mut names: Vec<Arc<str>> = Vec::new();
        let mut known: HashMap<&str, u32> = HashMap::new();
        let name: Vec<u32> = (buffers.iter())
            .map(|b| match b.name == b.tensor {
                true => 0,
                false => *known.entry(&b.name).or_insert_with(|| {
                    names.push(b.name.clone());
                    names.len() as u32
                }),
            })
            .collect();
        let column = |f: fn(&BufferView) -> u64| buffers.iter().map(f).collect();
        Columns {
            tensor: buffers.iter().map(|b| b.tensor.clone()).collect(),
            name: if names.is_empty() { Vec::new() } else { name },
            names,
            size: column(|b| b.size),
            occupied: sparse(buffers, |b| (b.occupied != b.size).then_some(b.occupied)),
            offset: column(|b| b.offset),
            address: sparse(buffers, |b| (b.address != b.offset).then_some(b.address)),
            first: buffers.iter().map(|b| b.first).collect(),
            last: buffers.iter().map(|b| b.last).collect(),
            producers: buffers.iter().map(|b| b.producers.clone()).collect(),
            consumers: buffers.iter().map(|b| b.consumers.clone()).collect(),
            kind: sparse(buffers, |b| {
                (b.kind != TensorKind::Intermediate).then_some(b.kind)
            }),
            dtype: sparse(buffers, |b| b.dtype),
            device: sparse(buffers, |b| (b.device != 0).then_some(b.device)),
            pool: sparse(buffers, |b| (b.pool != 0).then_some(b.pool)),
            always_live: sparse(buffers, |b| b.always_live.then_some(()))
                .into_iter()
                .map(|(k, ())| k)
                .collect(),
            views: sparse(buffers, |b| (!b.views.is_empty()).then(|| b.views.clone())),
            stack: dense(buffers, |b| b.stack),
            allocation: dense(buffers, |b| {
                (b.allocation).map(|a| (a.address, a.stream, a.allocated_at, a.freed_at))
            }),
            given_offset: dense(buffers, |b| b.given_offset),
        }
    }

    /// The buffers, or why the columns do not make them.
    fn buffers(self) -> Result<Vec<BufferView>, String> {
        let n = self.tensor.len();
        let dense_lengths = [
            ("size", self.size.len()),
            ("offset", self.offset.len()),
            ("first", self.first.len()),
            ("last", self.last.len()),
            ("producers", self.producers.len()),
            ("consumers", self.consumers.len()),
        ];
        let optional_lengths = [
            ("name", self.name.len()),
            ("stack", self.stack.len()),
            ("allocation", self.allocation.len()),
            ("given_offset", self.given_offset.len()),
        ];
        let short = (dense_lengths.iter())
            .chain(optional_lengths.iter().filter(|(_, len)| *len > 0))
            .find(|(_, len)| *len != n);
        if let Some((column, len)) = short {
            return Err(format!(
                "buffer column `{column}` has {len} entries for {n} buffers"
            ));
        }
        let mut out: Vec<BufferView> = Vec::with_capacity(n);
        for k in 0..n {
            let tensor = self.tensor[k].clone();
            let name = match self.name.get(k).copied().unwrap_or(0) {
                0 => tensor.clone(),
                i => (self.names.get(i as usize - 1).cloned())
                    .ok_or_else(|| format!("buffer {k} names name {i} of {}", self.names.len()))?,
            };
            out.push(BufferView {
                tensor,
                name,
                kind: TensorKind::Intermediate,
                dtype: None,
                size: self.size[k],
                occupied: self.size[k],
                device: 0,
                pool: 0,
                offset: self.offset[k],
                address: self.offset[k],
                first: self.first[k],
                last: self.last[k],
                always_live: false,
                producers: self.producers[k].clone(),
                consumers: self.consumers[k].clone(),
                views: Arc::from([]),
                stack: self.stack.get(k).copied().flatten(),
                allocation: (self.allocation.get(k).copied().flatten()).map(
                    |(address, stream, allocated_at, freed_at)| Allocation {
                        address,
                        stream,
                        allocated_at,
                        freed_at,
                    },
                ),
                given_offset: self.given_offset.get(k).copied().flatten(),
            });
        }
        fn at<'a>(
            out: &'a mut [BufferView],
            k: u32,
            column: &str,
        ) -> Result<&'a mut BufferView, String> {
            let n = out.len();
            out.get_mut(k as usize)
                .ok_or_else(|| format!("buffer column `{column}` names buffer {k} of {n}"))
        }
        for (k, v) in self.occupied {
            at(&mut out, k, "occupied")?.occupied = v;
        }
        for (k, v) in self.address {
            at(&mut out, k, "address")?.address = v;
        }
        for (k, v) in self.kind {
            at(&mut out, k, "kind")?.kind = v;
        }
        for (k, v) in self.dtype {
            at(&mut out, k, "dtype")?.dtype = Some(v);
        }
        for (k, v) in self.device {
            at(&mut out, k, "device")?.device = v;
        }
        for (k, v) in self.pool {
            at(&mut out, k, "pool")?.pool = v;
        }
        for k in self.always_live {
            at(&mut out, k, "always_live")?.always_live = true;
        }
        for (k, v) in self.views {
            at(&mut out, k, "views")?.views = v;
        }
        Ok(out)
    }
}

/// The schedule's steps, column by column (`#[serde(with = "crate::model::columns::steps")]`): a
/// snapshot has a step per allocation event, each named by its id.
pub mod steps {
    use super::*;
    use crate::model::StepView;

    #[derive(Serialize, Deserialize)]
    struct StepColumns {
        id: Vec<String>,
        /// Per step, `k + 1` for `names[k]`, or 0 for its id; empty when every name is.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        name: Vec<u32>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        names: Vec<String>,
        /// Empty when no step names its operator.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        op: Vec<String>,
        position: Vec<u32>,
    }

    pub fn serialize<S: Serializer>(steps: &[StepView], serializer: S) -> Result<S::Ok, S::Error> {
        let mut names: Vec<String> = Vec::new();
        let mut known: HashMap<&str, u32> = HashMap::new();
        let name: Vec<u32> = (steps.iter())
            .map(|s| match s.name == s.id {
                true => 0,
                false => *known.entry(&s.name).or_insert_with(|| {
                    names.push(s.name.clone());
                    names.len() as u32
                }),
            })
            .collect();
        StepColumns {
            id: steps.iter().map(|s| s.id.clone()).collect(),
            name: if names.is_empty() { Vec::new() } else { name },
            names,
            op: match steps.iter().any(|s| !s.op.is_empty()) {
                true => steps.iter().map(|s| s.op.clone()).collect(),
                false => Vec::new(),
            },
            position: steps.iter().map(|s| s.position).collect(),
        }
        .serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<[StepView]>, D::Error> {
        let c = StepColumns::deserialize(deserializer)?;
        let n = c.id.len();
        let short = [("name", c.name.len()), ("op", c.op.len())]
            .into_iter()
            .filter(|(_, len)| *len > 0)
            .chain([("position", c.position.len())])
            .find(|(_, len)| *len != n);
        if let Some((column, len)) = short {
            return Err(serde::de::Error::custom(format!(
                "step column `{column}` has {len} entries for {n} steps"
            )));
        }
        let mut ops = c.op.into_iter();
        (c.id.into_iter().enumerate())
            .map(|(k, id)| {
                let name = match c.name.get(k).copied().unwrap_or(0) {
                    0 => id.clone(),
                    i => c.names.get(i as usize - 1).cloned().ok_or_else(|| {
                        serde::de::Error::custom(format!(
                            "step {k} names name {i} of {}",
                            c.names.len()
                        ))
                    })?,
                };
                Ok(StepView {
                    id,
                    name,
                    op: ops.next().unwrap_or_default(),
                    position: c.position[k],
                })
            })
            .collect()
    }
}

pub fn serialize<S: Serializer>(buffers: &[BufferView], serializer: S) -> Result<S::Ok, S::Error> {
    Columns::of(buffers).serialize(serializer)
}

pub fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<BufferView>, D::Error> {
    Columns::deserialize(deserializer)?
        .buffers()
        .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ViewModel;
    use proptest::prelude::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Wire(#[serde(with = "super")] Vec<BufferView>);

    fn round_trip(buffers: &[BufferView]) -> Vec<BufferView> {
        let json = serde_json::to_string(&Wire(buffers.to_vec())).unwrap();
        serde_json::from_str::<Wire>(&json).unwrap().0
    }

    fn arb_buffer() -> impl Strategy<Value = BufferView> {
        let names = prop::sample::select(vec!["a", "b", "forward (model.py:3)"]);
        let kinds = prop::sample::select(vec![
            TensorKind::Intermediate,
            TensorKind::Param,
            TensorKind::Output,
        ]);
        let dtypes = prop::option::of(prop::sample::select(DType::ALL.to_vec()));
        let lists = prop::collection::vec(0u32..9, 0..3);
        let view = ("[vw]{1,2}", 0u64..64, 1u64..64).prop_map(|(t, offset, size)| ViewInto {
            name: format!("{t}'"),
            tensor: t,
            offset,
            size,
        });
        let allocation = (any::<u64>(), -2i64..3, any::<u64>(), any::<Option<u64>>()).prop_map(
            |(address, stream, allocated_at, freed_at)| Allocation {
                address,
                stream,
                allocated_at,
                freed_at,
            },
        );
        (
            ("[ab]{1,2}", prop::option::of(names), kinds, dtypes),
            (
                any::<u64>(),
                prop::option::of(any::<u64>()),
                0usize..3,
                0usize..3,
            ),
            (
                any::<u64>(),
                prop::option::of(any::<u64>()),
                0u32..50,
                0u32..50,
                any::<bool>(),
            ),
            (lists.clone(), lists, prop::collection::vec(view, 0..2)),
            (prop::option::of(0u32..4), prop::option::of(allocation)),
            prop::option::of(any::<u64>()),
        )
            .prop_map(
                |(
                    (tensor, name, kind, dtype),
                    (size, occupied, device, pool),
                    (offset, address, first, last, always_live),
                    (producers, consumers, views),
                    (stack, allocation),
                    given_offset,
                )| {
                    let tensor: Arc<str> = Arc::from(tensor);
                    BufferView {
                        name: name.map_or_else(|| tensor.clone(), Arc::from),
                        tensor,
                        kind,
                        dtype,
                        size,
                        occupied: occupied.unwrap_or(size),
                        device,
                        pool,
                        offset,
                        address: address.unwrap_or(offset),
                        first,
                        last,
                        always_live,
                        producers: Arc::from(producers),
                        consumers: Arc::from(consumers),
                        views: Arc::from(views),
                        stack,
                        allocation,
                        given_offset,
                    }
                },
            )
    }

    proptest! {
        /// Whatever the buffers hold, their columns read back as the same buffers.
        #[test]
        fn buffers_read_back_from_their_columns(buffers in prop::collection::vec(arb_buffer(), 0..12)) {
            prop_assert_eq!(round_trip(&buffers), buffers);
        }
    }

    #[test]
    fn every_bundled_examples_view_model_reads_back_whole() {
        for dump in [
            include_str!("../../../../static/examples/transformer-training.json"),
            include_str!("../../../../static/examples/transformer-decode.json"),
            include_str!("../../../../static/examples/convnet-training.json"),
            include_str!("../../../../static/examples/mlp-training.json"),
        ] {
            let model = crate::model::tests::model_of(dump);
            let json = serde_json::to_string(&model).unwrap();
            assert_eq!(serde_json::from_str::<ViewModel>(&json).unwrap(), model);
        }
    }

    #[test]
    fn names_cross_once_and_are_shared_on_arrival() {
        let buffer = |tensor: &str, name: &str| BufferView {
            name: Arc::from(name),
            ..round_trip_base(tensor)
        };
        let buffers: Vec<BufferView> = (0..100)
            .map(|k| buffer(&format!("alloc{k}"), "forward (model.py:54)"))
            .collect();
        let json = serde_json::to_string(&Wire(buffers.clone())).unwrap();
        assert_eq!(json.matches("forward (model.py:54)").count(), 1, "{json}");
        let back = serde_json::from_str::<Wire>(&json).unwrap().0;
        assert_eq!(back, buffers);
        assert!(Arc::ptr_eq(&back[0].name, &back[99].name));
    }

    fn round_trip_base(tensor: &str) -> BufferView {
        BufferView {
            tensor: Arc::from(tensor),
            name: Arc::from(tensor),
            kind: TensorKind::Intermediate,
            dtype: None,
            size: 64,
            occupied: 64,
            device: 0,
            pool: 0,
            offset: 0,
            address: 0,
            first: 0,
            last: 1,
            always_live: false,
            producers: Arc::from([0]),
            consumers: Arc::from([1]),
            views: Arc::from([]),
            stack: None,
            allocation: None,
            given_offset: None,
        }
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct StepWire(#[serde(with = "super::steps")] Arc<[crate::model::StepView]>);

    proptest! {
        /// Steps, named or not, with operators or not, read back from their columns.
        #[test]
        fn steps_read_back_from_their_columns(
            steps in prop::collection::vec(
                ("[st]{1,2}", prop::option::of("[n]{1,2}"), "[a-b]{0,1}", 0u32..9),
                0..10,
            ),
        ) {
            let steps: Arc<[crate::model::StepView]> = (steps.into_iter())
                .map(|(id, name, op, position)| crate::model::StepView {
                    name: name.unwrap_or_else(|| id.clone()),
                    id,
                    op,
                    position,
                })
                .collect();
            let json = serde_json::to_string(&StepWire(steps.clone())).unwrap();
            prop_assert_eq!(serde_json::from_str::<StepWire>(&json).unwrap().0, steps);
        }
    }

    #[test]
    fn columns_that_do_not_fit_their_buffers_are_refused() {
        let json = r#"{"tensor":["a","b"],"names":[],"size":[1],"offset":[0,0],"first":[0,0],"last":[0,0],"producers":[[],[]],"consumers":[[],[]]}"#;
        let e = serde_json::from_str::<Wire>(json).unwrap_err().to_string();
        assert!(
            e.contains("buffer column `size` has 1 entries for 2 buffers"),
            "{e}"
        );
        let json = r#"{"tensor":["a"],"names":[],"size":[1],"offset":[0],"first":[0],"last":[0],"producers":[[]],"consumers":[[]],"pool":[[3,1]]}"#;
        let e = serde_json::from_str::<Wire>(json).unwrap_err().to_string();
        assert!(
            e.contains("buffer column `pool` names buffer 3 of 1"),
            "{e}"
        );
    }
}
