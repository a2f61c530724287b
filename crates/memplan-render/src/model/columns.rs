//! Buffers as their JSON carries them: column by column, each name once, and what most buffers
//! leave at its default listed only where it is not. The web worker sends a view model's
//! buffers to the page as JSON, hundreds of thousands of them for a large snapshot: as objects,
//! each repeated every key and its name (a snapshot's tensors share a few hundred names), 300
//! bytes a buffer; as columns, a third of that, and each name is read (and held) once.
//!
//! Use on a field of `Vec<BufferView>` or `Arc<[BufferView]>`: `#[serde(with =
//! "crate::model::columns")]`. The form is the wire's, not a file format: both ends are built
//! together. Each column is written straight from the buffers (nothing is gathered first: on a
//! snapshot, a copy of every buffer while the answer is written), and read into columns that
//! then make the buffers.

use std::collections::HashMap;
use std::sync::Arc;

use memplan_core::DType;
use memplan_core::graph::TensorKind;
use memplan_core::recorded::Allocation;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::{BufferView, ViewInto};

/// The columns, as read. Dense ones hold a value per buffer; an empty dense column means every buffer
/// has the default (no stack, no allocation, no given offset). Sparse ones list `(buffer,
/// value)` where the value is not the default.
#[derive(Deserialize)]
struct Columns {
    tensor: Vec<Arc<str>>,
    /// The distinct names that are not their buffer's tensor id.
    names: Vec<Arc<str>>,
    /// Per buffer, `k + 1` for `names[k]`, or 0 for its tensor id; empty when every name is.
    #[serde(default)]
    name: Vec<u32>,
    size: Vec<u64>,
    /// Where the occupied bytes are not the size.
    #[serde(default)]
    occupied: Vec<(u32, u64)>,
    offset: Vec<u64>,
    /// Where the address is not the offset.
    #[serde(default)]
    address: Vec<(u32, u64)>,
    first: Vec<u32>,
    last: Vec<u32>,
    producers: Vec<Arc<[u32]>>,
    consumers: Vec<Arc<[u32]>>,
    #[serde(default)]
    kind: Vec<(u32, TensorKind)>,
    #[serde(default)]
    dtype: Vec<(u32, DType)>,
    #[serde(default)]
    device: Vec<(u32, usize)>,
    #[serde(default)]
    pool: Vec<(u32, usize)>,
    #[serde(default)]
    always_live: Vec<u32>,
    #[serde(default)]
    views: Vec<(u32, Arc<[ViewInto]>)>,
    #[serde(default)]
    stack: Vec<Option<u32>>,
    #[serde(default)]
    allocation: Vec<Option<AllocationRow>>,
    #[serde(default)]
    given_offset: Vec<Option<u64>>,
}

/// An allocation as its column holds it: `(address, stream, allocated_at, freed_at)`.
type AllocationRow = (u64, i64, u64, Option<u64>);

/// A column written straight from the items, one value each: nothing is copied to write it
/// (a snapshot's columns, gathered first, were a transient copy of every buffer).
struct Column<'a, I, F>(&'a [I], F);

impl<I, T: Serialize, F: Fn(&I) -> T> Serialize for Column<'_, I, F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(&self.1))
    }
}

/// A column of strings the items hold, written from them.
struct Strs<'a, I>(&'a [I], fn(&I) -> &str);

impl<I> Serialize for Strs<'_, I> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(self.1))
    }
}

fn column<I, T, F: Fn(&I) -> T>(items: &[I], value: F) -> Column<'_, I, F> {
    Column(items, value)
}

/// `(k, value)` for each item whose `value` is `Some`, written straight from them.
struct Sparse<'a, I, F>(&'a [I], F);

impl<I, T: Serialize, F: Fn(&I) -> Option<T>> Serialize for Sparse<'_, I, F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let values = self.0.iter().enumerate();
        serializer.collect_seq(values.filter_map(|(k, item)| Some((k as u32, (self.1)(item)?))))
    }
}

/// The distinct names of `items` that are not their own ids, and per item `k + 1` for
/// `names[k]` or 0 for its id (empty when every name is its id).
fn names_of<'a, I>(
    items: &'a [I],
    id: impl Fn(&'a I) -> &'a str,
    name: impl Fn(&'a I) -> &'a str,
) -> (Vec<&'a str>, Vec<u32>) {
    let mut names: Vec<&str> = Vec::new();
    let mut known: HashMap<&str, u32> = HashMap::new();
    let index: Vec<u32> = (items.iter())
        .map(|item| match name(item) == id(item) {
            true => 0,
            false => *known.entry(name(item)).or_insert_with(|| {
                names.push(name(item));
                names.len() as u32
            }),
        })
        .collect();
    match names.is_empty() {
        true => (names, Vec::new()),
        false => (names, index),
    }
}

/// Writes `$value` as field `$name` of `$fields`, or skips the field when `$empty`.
macro_rules! field_unless {
    ($fields:ident, $name:literal, $empty:expr, $value:expr) => {
        match $empty {
            true => $fields.skip_field($name)?,
            false => $fields.serialize_field($name, &$value)?,
        }
    };
}

impl Columns {
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

    #[derive(Deserialize)]
    struct StepColumns {
        id: Vec<Arc<str>>,
        /// Per step, `k + 1` for `names[k]`, or 0 for its id; empty when every name is.
        #[serde(default)]
        name: Vec<u32>,
        #[serde(default)]
        names: Vec<Arc<str>>,
        /// Empty when no step names its operator.
        #[serde(default)]
        op: Vec<String>,
        position: Vec<u32>,
    }

    pub fn serialize<S: Serializer>(steps: &[StepView], serializer: S) -> Result<S::Ok, S::Error> {
        let (names, name) = names_of(steps, |s| &s.id, |s| &s.name);
        let no_op = !steps.iter().any(|s| !s.op.is_empty());
        let mut fields = serializer.serialize_struct("StepColumns", 5)?;
        fields.serialize_field("id", &Strs(steps, |s| &s.id))?;
        field_unless!(fields, "name", name.is_empty(), name);
        field_unless!(fields, "names", names.is_empty(), names);
        field_unless!(fields, "op", no_op, Strs(steps, |s| &s.op));
        fields.serialize_field("position", &column(steps, |s| s.position))?;
        fields.end()
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
    let b = buffers;
    let (names, name) = names_of(b, |b| &b.tensor, |b| &b.name);
    let mut fields = serializer.serialize_struct("Columns", 21)?;
    fields.serialize_field("tensor", &Strs(b, |b| &b.tensor))?;
    fields.serialize_field("names", &names)?;
    field_unless!(fields, "name", name.is_empty(), name);
    fields.serialize_field("size", &column(b, |b| b.size))?;
    optional_field(&mut fields, "occupied", (b, Form::Sparse), |b| {
        (b.occupied != b.size).then_some(b.occupied)
    })?;
    fields.serialize_field("offset", &column(b, |b| b.offset))?;
    optional_field(&mut fields, "address", (b, Form::Sparse), |b| {
        (b.address != b.offset).then_some(b.address)
    })?;
    fields.serialize_field("first", &column(b, |b| b.first))?;
    fields.serialize_field("last", &column(b, |b| b.last))?;
    fields.serialize_field("producers", &column(b, |b| b.producers.clone()))?;
    fields.serialize_field("consumers", &column(b, |b| b.consumers.clone()))?;
    optional_field(&mut fields, "kind", (b, Form::Sparse), |b| {
        (b.kind != TensorKind::Intermediate).then_some(b.kind)
    })?;
    optional_field(&mut fields, "dtype", (b, Form::Sparse), |b| b.dtype)?;
    optional_field(&mut fields, "device", (b, Form::Sparse), |b| {
        (b.device != 0).then_some(b.device)
    })?;
    optional_field(&mut fields, "pool", (b, Form::Sparse), |b| {
        (b.pool != 0).then_some(b.pool)
    })?;
    let always_live: Vec<u32> = (b.iter().enumerate())
        .filter(|(_, b)| b.always_live)
        .map(|(k, _)| k as u32)
        .collect();
    field_unless!(fields, "always_live", always_live.is_empty(), always_live);
    optional_field(&mut fields, "views", (b, Form::Sparse), |b| {
        (!b.views.is_empty()).then(|| b.views.clone())
    })?;
    optional_field(&mut fields, "stack", (b, Form::Dense), |b| b.stack)?;
    optional_field(
        &mut fields,
        "allocation",
        (b, Form::Dense),
        |b| -> Option<AllocationRow> {
            (b.allocation).map(|a| (a.address, a.stream, a.allocated_at, a.freed_at))
        },
    )?;
    optional_field(&mut fields, "given_offset", (b, Form::Dense), |b| {
        b.given_offset
    })?;
    fields.end()
}

/// How a column of optional values is written.
#[derive(Clone, Copy)]
enum Form {
    /// `(item, value)` for the items that have one.
    Sparse,
    /// A value or `None` per item.
    Dense,
}

/// Writes the column `name` of `value` in `form`, or skips it where no item has a value.
fn optional_field<S: SerializeStruct, I, T: Serialize>(
    fields: &mut S,
    name: &'static str,
    (items, form): (&[I], Form),
    value: impl Fn(&I) -> Option<T>,
) -> Result<(), S::Error> {
    if !items.iter().any(|i| value(i).is_some()) {
        return fields.skip_field(name);
    }
    match form {
        Form::Sparse => fields.serialize_field(name, &Sparse(items, value)),
        Form::Dense => fields.serialize_field(name, &Column(items, value)),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>, B: From<Vec<BufferView>>>(
    deserializer: D,
) -> Result<B, D::Error> {
    (Columns::deserialize(deserializer)?.buffers())
        .map(B::from)
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
                .map(|(id, name, op, position)| {
                    let id: Arc<str> = Arc::from(id);
                    crate::model::StepView {
                        name: name.map_or_else(|| id.clone(), Arc::from),
                        id,
                        op,
                        position,
                    }
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
