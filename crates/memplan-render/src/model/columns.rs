//! Buffers as their JSON carries them: column by column, each name once, and what most buffers
//! leave at its default listed only where it is not. The web worker sends a view model's
//! buffers to the page as JSON, hundreds of thousands of them for a large snapshot: as objects,
//! each repeated every key and its name (a snapshot's tensors share a few hundred names), 300
//! bytes a buffer; as columns, a third of that, and each name is read (and held) once.
//!
//! Use on a field of `Arc<[BufferView]>`: `#[serde(with = "crate::model::columns")]`; or write
//! buffers not made from where they are ([`write`], [`BufferRows`]). The form is the wire's,
//! not a file format: both ends are built together. Each column is written straight from the buffers (nothing is gathered first: on a
//! snapshot, a copy of every buffer while the answer is written), and read straight into them:
//! the first column (`tensor`) makes the buffers, each later one sets its field in each as its
//! values arrive (read into columns first, they were a transient copy of every buffer in the
//! page's memory, which never shrinks). Columns of integers (sizes, offsets, positions, steps,
//! stacks, allocations) and of ids are packed, each into one string (`model::packed`).

use std::collections::HashMap;
use std::sync::Arc;

use memplan_core::DType;
use memplan_core::graph::TensorKind;
use memplan_core::lists::OptionalIndex;
use memplan_core::recorded::Allocation;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::packed::{
    Packer, Stand, Unpacker, Words, packed_bytes_each, packed_each, packed_ints, packed_ints_each,
    unpack,
};
use crate::model::{
    BufferRows, BufferView, SourcePlace, SourceRecord, StepIndices, TensorLabel, ViewInto,
};

/// A column written straight from the items `0..count`, one value each: nothing is copied to
/// write it (a snapshot's columns, gathered first, were a transient copy of every buffer).
struct Column<F>(usize, F);

impl<T: Serialize, F: Fn(usize) -> T> Serialize for Column<F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((0..self.0).map(&self.1))
    }
}

/// A column of strings the items hold, written from them.
struct Strs<'a, I>(&'a [I], fn(&I) -> &str);

impl<I> Serialize for Strs<'_, I> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(self.1))
    }
}

/// `(k, value)` for each item `k` of `0..count` whose `value` is `Some`, written straight from
/// them.
struct Sparse<F>(usize, F);

impl<T: Serialize, F: Fn(usize) -> Option<T>> Serialize for Sparse<F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let values = (0..self.0).filter_map(|k| Some((k as u32, (self.1)(k)?)));
        serializer.collect_seq(values)
    }
}

/// The distinct names of the items `0..count` that are not their own ids, and per item `k + 1`
/// for `names[k]` or 0 for its id (empty when every name is its id).
fn names_of<'a>(
    count: usize,
    id: impl Fn(usize) -> &'a str,
    name: impl Fn(usize) -> &'a str,
) -> (Vec<&'a str>, Vec<u32>) {
    let mut names: Vec<&str> = Vec::new();
    let mut known: HashMap<&str, u32> = HashMap::new();
    let index: Vec<u32> = (0..count)
        .map(|k| match name(k) == id(k) {
            true => 0,
            false => *known.entry(name(k)).or_insert_with(|| {
                names.push(name(k));
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

/// The schedule's steps, column by column (`#[serde(with = "crate::model::columns::steps")]`):
/// by id (packed), name and operator, and position (packed). Steps held as events are written
/// from their parts, each id its run's prefix and its time ([`Words::pack_parts`]), with no id
/// made; they read back as listed steps (the page's bundle holds one reader).
pub mod steps {
    use super::*;
    use crate::model::steps::{ListedStep, StepParts, Steps};

    #[derive(Deserialize)]
    struct StepColumns {
        /// Packed.
        id: Words<String>,
        /// Per step, `k + 1` for `names[k]`, or 0 for its id; empty when every name is.
        #[serde(default)]
        name: Vec<u32>,
        #[serde(default)]
        names: Vec<Arc<str>>,
        /// Empty when no step names its operator.
        #[serde(default)]
        op: Vec<String>,
        /// Packed.
        position: Vec<String>,
    }

    pub fn serialize<S: Serializer>(steps: &Steps, serializer: S) -> Result<S::Ok, S::Error> {
        let positions = packed_ints(steps.positions(), |&p| p.into());
        let mut fields = serializer.serialize_struct("StepColumns", 5)?;
        match steps.parts() {
            StepParts::Listed(listed) => {
                let (names, name) = names_of(listed.len(), |k| &listed[k].id, |k| &listed[k].name);
                let no_op = !listed.iter().any(|s| !s.op.is_empty());
                fields.serialize_field("id", &Words::pack(listed.iter().map(|s| &*s.id)))?;
                field_unless!(fields, "name", name.is_empty(), name);
                field_unless!(fields, "names", names.is_empty(), names);
                field_unless!(fields, "op", no_op, Strs(listed, |s| &s.op));
            }
            StepParts::Events(runs, times) => {
                // The wire numbers a word's number plus one: an id ending in `u64::MAX` is
                // written whole.
                let whole: Vec<String> = (0..times.len())
                    .filter(|&s| times[s] == u64::MAX)
                    .filter_map(|s| Some(steps.get(s)?.id.into_owned()))
                    .collect();
                let (mut wholes, mut run) = (whole.iter(), 0);
                let parts = times.iter().enumerate().map(|(s, &time)| {
                    while runs.get(run).is_some_and(|r| r.0 as usize <= s) {
                        run += 1;
                    }
                    match time {
                        u64::MAX => (wholes.next().map_or("", String::as_str), None),
                        time => (runs.get(run).map_or("", |r| &*r.1), Some(time)),
                    }
                });
                fields.serialize_field("id", &Words::pack_parts(parts))?;
            }
        }
        fields.serialize_field("position", &positions)?;
        fields.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Steps, D::Error> {
        let c = StepColumns::deserialize(deserializer)?;
        let position = unpack(&c.position, |p| u32::try_from(p).ok())
            .map_err(|e| de::Error::custom(format!("step column `position` {e}")))?;
        listed(c.id, c.name, c.names, c.op, position).map_err(de::Error::custom)
    }

    /// Listed steps from their columns.
    fn listed(
        id: Words<String>,
        name: Vec<u32>,
        names: Vec<Arc<str>>,
        op: Vec<String>,
        position: Vec<u32>,
    ) -> Result<Steps, String> {
        let mut ids: Vec<Arc<str>> = Vec::new();
        (id.unpack(|id| {
            ids.push(id.into());
            Ok(())
        }))
        .map_err(|e| format!("step column `id` {e}"))?;
        let n = ids.len();
        let short = [("name", name.len()), ("op", op.len())]
            .into_iter()
            .filter(|(_, len)| *len > 0)
            .find(|(_, len)| *len != n);
        if let Some((column, len)) = short {
            return Err(format!(
                "step column `{column}` has {len} entries for {n} steps"
            ));
        }
        if let Some((k, &i)) = (name.iter().enumerate()).find(|&(_, &i)| i as usize > names.len()) {
            return Err(format!("step {k} names name {i} of {}", names.len()));
        }
        // Checked first, so the steps are made straight into their `Arc` (collected into a
        // vector, they were made there and then copied).
        let mut ops = op.into_iter();
        let steps = (ids.into_iter().enumerate())
            .map(|(k, id)| ListedStep {
                name: match name.get(k).copied().unwrap_or(0) {
                    0 => id.clone(),
                    i => names[i as usize - 1].clone(),
                },
                id,
                op: ops.next().unwrap_or_default(),
            })
            .collect();
        Steps::listed(steps, position)
    }
}

pub fn serialize<S: Serializer>(
    buffers: &Arc<[BufferView]>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    write(buffers, serializer)
}

/// The columns of `rows`, each read from them one buffer at a time: what [`serialize`] writes of
/// a model's buffers, from buffers that need not be made first ([`BufferRows`]).
pub fn write<S: Serializer>(rows: &dyn BufferRows, serializer: S) -> Result<S::Ok, S::Error> {
    let n = rows.count();
    let tensor = |k| rows.tensor(k);
    let buffer = |k| rows.place(k);
    let (names, name) = names_of(n, |k| tensor(k).id, |k| tensor(k).display_name());
    let mut fields = serializer.serialize_struct("Columns", 22)?;
    fields.serialize_field("count", &n)?;
    fields.serialize_field("tensor", &Words::pack((0..n).map(|k| &**tensor(k).id)))?;
    fields.serialize_field("names", &names)?;
    field_unless!(
        fields,
        "name",
        name.is_empty(),
        packed_ints(&name, |&i| i.into())
    );
    fields.serialize_field("size", &packed_bytes_each(n, |k| buffer(k).size))?;
    optional_field(&mut fields, "alignment_log2", (n, Form::Sparse), |k| {
        let b = buffer(k);
        (b.alignment_log2 != 0).then_some(b.alignment_log2)
    })?;
    fields.serialize_field("offset", &packed_bytes_each(n, |k| buffer(k).offset))?;
    fields.serialize_field("first", &packed_ints_each(n, |k| buffer(k).first.into()))?;
    fields.serialize_field("last", &packed_ints_each(n, |k| buffer(k).last.into()))?;
    fields.serialize_field("producers", &steps_column(n, |k| tensor(k).producers))?;
    fields.serialize_field("consumers", &steps_column(n, |k| tensor(k).consumers))?;
    optional_field(&mut fields, "kind", (n, Form::Sparse), |k| {
        (tensor(k).kind != TensorKind::Intermediate).then_some(tensor(k).kind)
    })?;
    optional_field(&mut fields, "dtype", (n, Form::Sparse), |k| buffer(k).dtype)?;
    optional_field(&mut fields, "device", (n, Form::Sparse), |k| {
        let b = buffer(k);
        (b.device != 0).then_some(b.device)
    })?;
    optional_field(&mut fields, "pool", (n, Form::Sparse), |k| {
        let b = buffer(k);
        (b.pool != 0).then_some(b.pool)
    })?;
    let always_live: Vec<u32> = (0..n)
        .filter(|&k| buffer(k).always_live)
        .map(|k| k as u32)
        .collect();
    field_unless!(fields, "always_live", always_live.is_empty(), always_live);
    optional_field(&mut fields, "views", (n, Form::Sparse), |k| {
        let views = tensor(k).views;
        (!views.is_empty()).then_some(views)
    })?;
    let no_stack = (0..n).all(|k| tensor(k).stack.get().is_none());
    field_unless!(
        fields,
        "stack",
        no_stack,
        packed_ints_each(n, |k| tensor(k).stack.get().map_or(0, |s| u64::from(s) + 1))
    );
    let no_allocation = (0..n).all(|k| tensor(k).allocation().is_none());
    field_unless!(
        fields,
        "allocation",
        no_allocation,
        packed_each(n, |k, p: &mut Packer<5>| push_allocation(
            p,
            tensor(k).allocation()
        ))
    );
    optional_field(&mut fields, "given_offset", (n, Form::Dense), |k| {
        tensor(k).given_offset()
    })?;
    fields.end()
}

/// Per buffer, how many steps `steps` lists and then each (field 1).
fn steps_column<'a>(
    count: usize,
    steps: impl Fn(usize) -> &'a StepIndices + 'a,
) -> impl Serialize + 'a {
    packed_each(count, move |k, p: &mut Packer<2>| {
        let steps = steps(k);
        p.push(0, steps.len() as u64);
        for &s in steps.iter() {
            p.push(1, s.into());
        }
    })
}

/// An allocation, packed: 0 for none; else 1 (not freed) or 2 (freed), its address, stream and
/// events, each in its own field.
fn push_allocation(p: &mut Packer<5>, allocation: Option<&Allocation>) {
    let Some(a) = allocation else {
        return p.push(0, 0);
    };
    p.push(0, if a.freed_at().is_some() { 2 } else { 1 });
    p.push(1, a.address);
    p.push(2, a.stream as u64);
    p.push(3, a.allocated_at.into());
    if let Some(freed_at) = a.freed_at() {
        p.push(4, freed_at.into());
    }
}

/// An allocation [`push_allocation`] packed.
fn next_allocation(u: &mut Unpacker<5>) -> Result<Option<Allocation>, String> {
    let freed = match u.next(0)? {
        0 => return Ok(None),
        1 => false,
        2 => true,
        tag => return Err(format!("holds allocation tag {tag}")),
    };
    Ok(Some(Allocation::new(
        u.next(1)?,
        u.next(2)? as i64,
        u32_of(u.next(3)?)?,
        freed.then(|| u32_of(u.next(4)?)).transpose()?,
    )))
}

/// How a column lays out its values.
#[derive(Clone, Copy)]
enum Form {
    /// `(item, value)` for the items that have one.
    Sparse,
    /// A value (or `None`) per item.
    Dense,
}

/// Writes the column `name` of `value` in `form`, or skips it where no item has a value.
fn optional_field<S: SerializeStruct, T: Serialize>(
    fields: &mut S,
    name: &'static str,
    (count, form): (usize, Form),
    value: impl Fn(usize) -> Option<T>,
) -> Result<(), S::Error> {
    if !(0..count).any(|k| value(k).is_some()) {
        return fields.skip_field(name);
    }
    match form {
        Form::Sparse => fields.serialize_field(name, &Sparse(count, value)),
        Form::Dense => fields.serialize_field(name, &Column(count, value)),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>, B: From<Arc<[BufferView]>>>(
    deserializer: D,
) -> Result<B, D::Error> {
    deserializer.deserialize_map(Buffers).map(B::from)
}

/// The buffer columns read into the buffers (see the module docs). `count` comes first: the
/// buffers are made at once, in place (grown a push at a time and then moved into their
/// `Arc`, a snapshot's were held up to three times over while they were read). Dense columns
/// hold a value per buffer (an optional one may be empty: every buffer has the default, no
/// stack, no allocation, no given offset); sparse ones list `(buffer, value)` where the value
/// is not the default. `tensor` and `names` come before `name`, as written.
struct Buffers;

impl<'de> Visitor<'de> for Buffers {
    type Value = Arc<[BufferView]>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("buffer columns")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Arc<[BufferView]>, A::Error> {
        let mut buffers: Option<Arc<[BufferView]>> = None;
        // The distinct names that are not their buffer's tensor id.
        let mut names: Vec<Arc<str>> = Vec::new();
        let mut required = [
            "tensor",
            "size",
            "offset",
            "first",
            "last",
            "producers",
            "consumers",
        ];
        // Where the source put each buffer's tensor, for the buffers (by index) it places: set
        // once all are read, each label pointing into one record.
        let mut allocated: (Vec<u32>, Vec<Allocation>) = Default::default();
        let mut given: (Vec<u32>, Vec<u64>) = Default::default();
        while let Some(column) = map.next_key::<String>()? {
            if column == "count" {
                // The columns name buffers by `u32`: a count past it is no answer of a worker's,
                // and is refused before anything is allocated for it.
                let count: u64 = map.next_value()?;
                let count = (u32::try_from(count).ok()).ok_or_else(|| {
                    de::Error::custom(format!("{count} buffers are past what columns can name"))
                })?;
                buffers = Some(blank_buffers(count as usize));
                continue;
            }
            // Only this reader holds them yet.
            let Some(out) = buffers.as_mut().and_then(Arc::get_mut) else {
                return Err(de::Error::custom(format!(
                    "buffer column `{column}` comes before `count`"
                )));
            };
            if column == "name" && required[0] == "tensor" {
                return Err(de::Error::custom(
                    "buffer column `name` comes before `tensor`",
                ));
            }
            if let Some(r) = required.iter_mut().find(|r| **r == column) {
                *r = "";
            }
            match column.as_str() {
                "tensor" => {
                    let words: Words<String> = map.next_value()?;
                    let (n, mut k) = (out.len(), 0);
                    let count = words.unpack(|id| {
                        if let Some(b) = out.get_mut(k) {
                            label(b)?.id = id.into();
                        }
                        k += 1;
                        Ok(())
                    });
                    (count.map_err(|e| format!("buffer column `tensor` {e}")))
                        .and_then(|len| counted("tensor", len as usize, n, false))
                        .map_err(de::Error::custom)?;
                }
                "names" => names = map.next_value()?,
                "name" => {
                    map.next_value_seed(optional(out, "name").unpack(|b, u: &mut Unpacker<1>| {
                        let i = u.next(0)?;
                        if i > 0 {
                            let name = (names.get(i as usize - 1).cloned())
                                .ok_or_else(|| format!("names name {i} of {}", names.len()))?;
                            label(b)?.name = Some(name);
                        }
                        Ok(())
                    }))?
                }
                "size" => {
                    map.next_value_seed(dense(out, "size").unpack(|b, u: &mut Unpacker<1>| {
                        b.size = u.next(0)?;
                        Ok(())
                    }))?
                }
                "offset" => {
                    map.next_value_seed(dense(out, "offset").unpack(|b, u: &mut Unpacker<1>| {
                        b.offset = u.next(0)?;
                        Ok(())
                    }))?
                }
                "alignment_log2" => {
                    map.next_value_seed(sparse(out, "alignment_log2").with(|b, v: u8| {
                        match v < 64 {
                            true => set(&mut b.alignment_log2, v),
                            false => Err(format!("holds alignment 2^{v}, past 64 bits")),
                        }
                    }))?
                }
                "first" => map.next_value_seed(
                    dense(out, "first")
                        .unpack(|b, u: &mut Unpacker<1>| set(&mut b.first, u32_of(u.next(0)?)?)),
                )?,
                "last" => map.next_value_seed(
                    dense(out, "last")
                        .unpack(|b, u: &mut Unpacker<1>| set(&mut b.last, u32_of(u.next(0)?)?)),
                )?,
                "producers" => map.next_value_seed(
                    dense(out, "producers")
                        .unpack(|b, u| set(&mut label(b)?.producers, next_steps(u)?)),
                )?,
                "consumers" => map.next_value_seed(
                    dense(out, "consumers")
                        .unpack(|b, u| set(&mut label(b)?.consumers, next_steps(u)?)),
                )?,
                "kind" => map.next_value_seed(
                    sparse(out, "kind").with(|b, v| set(&mut label(b)?.kind, v)),
                )?,
                "dtype" => map.next_value_seed(
                    sparse(out, "dtype").with(|b, v: DType| set(&mut b.dtype, Some(v))),
                )?,
                "device" => {
                    map.next_value_seed(sparse(out, "device").with(|b, v| set(&mut b.device, v)))?
                }
                "pool" => {
                    map.next_value_seed(sparse(out, "pool").with(|b, v| set(&mut b.pool, v)))?
                }
                "always_live" => {
                    for k in map.next_value::<Vec<u32>>()? {
                        at(out, k, "always_live")
                            .map_err(de::Error::custom)?
                            .always_live = true;
                    }
                }
                "views" => map.next_value_seed(
                    sparse(out, "views").with(|b, v| set(&mut label(b)?.views, v)),
                )?,
                "stack" => {
                    map.next_value_seed(optional(out, "stack").unpack(|b, u: &mut Unpacker<1>| {
                        let stack = match u.next(0)? {
                            0 => None,
                            s => Some(u32_of(s - 1)?),
                        };
                        set(&mut label(b)?.stack, OptionalIndex::new(stack))
                    }))?
                }
                "allocation" => {
                    let mut k = 0;
                    allocated.1.reserve_exact(out.len());
                    map.next_value_seed(optional(out, "allocation").unpack(|_, u| {
                        entry(&mut allocated, &mut k, next_allocation(u)?);
                        Ok(())
                    }))?
                }
                "given_offset" => {
                    let mut k = 0;
                    map.next_value_seed(optional(out, "given_offset").with(|_, v| {
                        entry(&mut given, &mut k, v);
                        Ok(())
                    }))?
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let mut buffers = buffers.ok_or_else(|| de::Error::missing_field("count"))?;
        if let Some(missing) = required.iter().find(|r| !r.is_empty()) {
            return Err(de::Error::missing_field(missing));
        }
        let Some(out) = Arc::get_mut(&mut buffers) else {
            return Err(de::Error::custom("the buffers are shared while read"));
        };
        // A buffer's tensor has at most one of these: each sets it where it has one.
        let (owners, mut allocations) = allocated;
        allocations.shrink_to_fit();
        point(out, owners, SourceRecord::Allocated(Arc::new(allocations)));
        point(out, given.0, SourceRecord::Given(given.1));
        Ok(buffers)
    }
}

/// Whether a dense column read `len` entries for `n` buffers, as it must (an `optional` one
/// may also be empty).
fn counted(column: &str, len: usize, n: usize, optional: bool) -> Result<(), String> {
    match len == n || (optional && len == 0) {
        true => Ok(()),
        false => Err(format!(
            "buffer column `{column}` has {len} entries for {n} buffers"
        )),
    }
}

/// A packed value that must fit a `u32` (a position, a step, a stack).
fn u32_of(value: u64) -> Result<u32, String> {
    u32::try_from(value).map_err(|_| format!("holds {value}, past a u32"))
}

/// Steps [`steps_column`] packed.
fn next_steps(u: &mut Unpacker<2>) -> Result<StepIndices, String> {
    let count = u.next(0)?;
    (0..count).map(|_| u32_of(u.next(1)?)).collect()
}

fn set<T>(field: &mut T, value: T) -> Result<(), String> {
    *field = value;
    Ok(())
}

/// Buffer `*k`'s entry in a record being read (`owners`, `entries`), if it has one; then on to
/// the next buffer.
fn entry<T>((owners, entries): &mut (Vec<u32>, Vec<T>), k: &mut u32, value: Option<T>) {
    if let Some(value) = value {
        owners.push(*k);
        entries.push(value);
    }
    *k += 1;
}

/// Points the tensor of each buffer `owners[j]` of `out` at entry `j` of `record` (`owners`
/// are buffers a column was read into, each of which alone holds its tensor).
fn point(out: &mut [BufferView], owners: Vec<u32>, record: SourceRecord) {
    let record = Arc::new(record);
    for (index, k) in (0..).zip(owners) {
        if let Some(label) = (out.get_mut(k as usize)).and_then(|b| Arc::get_mut(&mut b.tensor)) {
            label.source = Some(SourcePlace {
                record: record.clone(),
                index,
            });
        }
    }
}

/// The tensor of `b`, which only `b` holds while its columns are read.
fn label(b: &mut BufferView) -> Result<&mut TensorLabel, String> {
    Arc::get_mut(&mut b.tensor).ok_or_else(|| "shares its tensor while read".to_string())
}

/// The dense column `column` of `out`.
fn dense<'a>(out: &'a mut [BufferView], column: &'static str) -> ColumnInto<'a> {
    ColumnInto {
        out,
        column,
        form: Form::Dense,
        optional: false,
    }
}

/// The dense column `column` of `out`, which may be empty.
fn optional<'a>(out: &'a mut [BufferView], column: &'static str) -> ColumnInto<'a> {
    ColumnInto {
        optional: true,
        ..dense(out, column)
    }
}

/// The sparse column `column` of `out`.
fn sparse<'a>(out: &'a mut [BufferView], column: &'static str) -> ColumnInto<'a> {
    ColumnInto {
        form: Form::Sparse,
        ..dense(out, column)
    }
}

/// Buffer `k` of `out`, or why column `column` cannot name it.
fn at<'a>(out: &'a mut [BufferView], k: u32, column: &str) -> Result<&'a mut BufferView, String> {
    let n = out.len();
    out.get_mut(k as usize)
        .ok_or_else(|| format!("buffer column `{column}` names buffer {k} of {n}"))
}

/// `n` buffers with every field at its default until its column sets it, made in one
/// allocation, each with a tensor of its own; the empty list of views shared (an empty `Arc`
/// allocates too).
fn blank_buffers(n: usize) -> Arc<[BufferView]> {
    let no_views: Arc<[ViewInto]> = Arc::new([]);
    let blank = || BufferView {
        tensor: Arc::new(TensorLabel {
            views: no_views.clone(),
            ..TensorLabel::default()
        }),
        dtype: None,
        size: 0,
        alignment_log2: 0,
        device: 0,
        pool: 0,
        offset: 0,
        first: 0,
        last: 0,
        always_live: false,
    };
    (0..n).map(|_| blank()).collect()
}

/// A column read into the buffers: dense, value `k` into buffer `k` (an `optional` one may
/// also be empty); sparse, `(k, value)` into buffer `k`.
struct ColumnInto<'a> {
    out: &'a mut [BufferView],
    column: &'static str,
    form: Form,
    optional: bool,
}

impl<'a> ColumnInto<'a> {
    /// The column, each of whose values `set` sets into its buffer.
    fn with<T, F: FnMut(&mut BufferView, T) -> Result<(), String>>(
        self,
        set: F,
    ) -> Setting<'a, T, F> {
        Setting {
            column: self,
            set,
            value: PhantomData,
        }
    }

    /// The column, packed ([`packed`]): `set` reads each buffer's values into it.
    fn unpack<F: FnMut(&mut BufferView, &mut Unpacker<N>) -> Result<(), String>, const N: usize>(
        self,
        set: F,
    ) -> Unpacking<'a, F, N> {
        Unpacking { column: self, set }
    }
}

/// A packed column and what it sets in each buffer.
struct Unpacking<'a, F, const N: usize> {
    column: ColumnInto<'a>,
    set: F,
}

impl<'de, F: FnMut(&mut BufferView, &mut Unpacker<N>) -> Result<(), String>, const N: usize>
    DeserializeSeed<'de> for Unpacking<'_, F, N>
{
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(&mut BufferView, &mut Unpacker<N>) -> Result<(), String>, const N: usize>
    Visitor<'de> for Unpacking<'_, F, N>
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "packed buffer column `{}`", self.column.column)
    }

    /// Values past the buffers are read into a blank one, only to count them for the error.
    fn visit_seq<S: SeqAccess<'de>>(mut self, mut chunks: S) -> Result<(), S::Error> {
        let ColumnInto {
            out,
            column,
            optional,
            ..
        } = self.column;
        let n = out.len();
        let mut past = None;
        let mut len = 0;
        let mut stand = Stand::default();
        let at = |e: String| de::Error::custom(format!("buffer column `{column}`: {e}"));
        while let Some(text) = chunks.next_element::<String>()? {
            let mut values = Unpacker::resume(&text, stand).map_err(at)?;
            while !values.is_done() {
                let b = match out.get_mut(len) {
                    Some(b) => b,
                    None => past.get_or_insert_with(|| blank_buffers(1)[0].clone()),
                };
                (self.set)(b, &mut values).map_err(|e| {
                    de::Error::custom(format!("buffer column `{column}`, buffer {len}: {e}"))
                })?;
                len += 1;
            }
            stand = values.stand();
        }
        counted(column, len, n, optional).map_err(de::Error::custom)
    }
}

/// A column and what each of its values sets.
struct Setting<'a, T, F> {
    column: ColumnInto<'a>,
    set: F,
    value: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>, F: FnMut(&mut BufferView, T) -> Result<(), String>>
    DeserializeSeed<'de> for Setting<'_, T, F>
{
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>, F: FnMut(&mut BufferView, T) -> Result<(), String>> Visitor<'de>
    for Setting<'_, T, F>
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "buffer column `{}`", self.column.column)
    }

    fn visit_seq<S: SeqAccess<'de>>(mut self, mut seq: S) -> Result<(), S::Error> {
        let ColumnInto {
            out,
            column,
            form,
            optional,
        } = self.column;
        if let Form::Sparse = form {
            while let Some((k, value)) = seq.next_element::<(u32, T)>()? {
                (self.set)(at(out, k, column).map_err(de::Error::custom)?, value)
                    .map_err(de::Error::custom)?;
            }
            return Ok(());
        }
        let mut len = 0;
        while let Some(value) = seq.next_element::<T>()? {
            if let Some(b) = out.get_mut(len) {
                (self.set)(b, value).map_err(|e| de::Error::custom(format!("buffer {len} {e}")))?;
            }
            len += 1;
        }
        counted(column, len, out.len(), optional).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BufferPlace, StepIndices, ViewModel};
    use memplan_core::graph::Id;
    use proptest::prelude::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Wire(#[serde(with = "super")] Arc<[BufferView]>);

    /// Where the source put one tensor, in a record of its own.
    fn alone(record: SourceRecord) -> SourcePlace {
        Arc::new(record).place(0).unwrap()
    }

    fn round_trip(buffers: &[BufferView]) -> Vec<BufferView> {
        let json = serde_json::to_string(&Wire(buffers.into())).unwrap();
        serde_json::from_str::<Wire>(&json).unwrap().0.to_vec()
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
        // An event past the last a trace can have (`u32::MAX`) reads as never freed.
        let freed_at = prop::option::of(0..u32::MAX);
        let allocation = (any::<u64>(), -2i64..3, any::<u32>(), freed_at).prop_map(
            |(address, stream, allocated_at, freed_at)| {
                Allocation::new(address, stream, allocated_at, freed_at)
            },
        );
        (
            ("[ab]{1,2}", prop::option::of(names), kinds, dtypes),
            (any::<u64>(), 0u8..64, 0usize..3, 0usize..3),
            (any::<u64>(), 0u32..50, 0u32..50, any::<bool>()),
            (lists.clone(), lists, prop::collection::vec(view, 0..2)),
            (
                prop::option::of(0u32..4),
                prop::option::of(prop_oneof![
                    allocation.prop_map(|a| alone(SourceRecord::Allocated(Arc::new(vec![a])))),
                    any::<u64>().prop_map(|offset| alone(SourceRecord::Given(vec![offset]))),
                ]),
            ),
        )
            .prop_map(
                |(
                    (tensor, name, kind, dtype),
                    (size, alignment_log2, device, pool),
                    (offset, first, last, always_live),
                    (producers, consumers, views),
                    (stack, source),
                )| {
                    let id = Id::from(tensor);
                    let place = BufferPlace {
                        dtype,
                        size,
                        alignment_log2,
                        device,
                        pool,
                        offset,
                        first,
                        last,
                        always_live,
                    };
                    place.with_tensor(Arc::new(TensorLabel {
                        // A name that is the id is none, as labels hold it.
                        name: name.filter(|name| *name != id).map(Arc::from),
                        id,
                        kind,
                        producers: producers.into_iter().collect(),
                        consumers: consumers.into_iter().collect(),
                        views: Arc::from(views),
                        stack: OptionalIndex::new(stack),
                        source,
                    }))
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

    /// A column longer than a string's items goes on in the next string, each field stepping on
    /// from where the last left it.
    #[test]
    fn columns_past_a_string_read_back_whole() {
        let buffers: Vec<BufferView> = (0..crate::model::packed::CHUNK as u32 + 3)
            .map(|k| {
                let mut b = spanning(&format!("alloc{k}"), (k, k + 2));
                b.size = u64::from(k % 7) << 20;
                Arc::make_mut(&mut b.tensor).source =
                    Some(alone(SourceRecord::Allocated(Arc::new(vec![
                        Allocation::new(
                            0x7f00_0000_0000 + u64::from(k) * 4096,
                            i64::from(k % 3) - 1,
                            k * 3,
                            (k % 5 != 0).then_some(k * 3 + 7),
                        ),
                    ]))));
                b
            })
            .collect();
        let json = serde_json::to_string(&Wire(buffers.clone().into())).unwrap();
        let columns: serde_json::Value = serde_json::from_str(&json).unwrap();
        for column in ["size", "first", "allocation"] {
            assert_eq!(
                columns[column].as_array().map(Vec::len),
                Some(2),
                "{column}"
            );
        }
        assert_eq!(
            columns["tensor"]["packed"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(round_trip(&buffers), buffers);
    }

    #[test]
    fn names_cross_once_and_are_shared_on_arrival() {
        let buffer = |tensor: &str, name: &str| {
            let mut b = round_trip_base(tensor);
            Arc::make_mut(&mut b.tensor).name = Some(Arc::from(name));
            b
        };
        let buffers: Vec<BufferView> = (0..100)
            .map(|k| buffer(&format!("alloc{k}"), "forward (model.py:54)"))
            .collect();
        let json = serde_json::to_string(&Wire(buffers.clone().into())).unwrap();
        assert_eq!(json.matches("forward (model.py:54)").count(), 1, "{json}");
        let back = serde_json::from_str::<Wire>(&json).unwrap().0;
        assert_eq!(*back, *buffers);
        let name = |b: &BufferView| b.tensor.name.clone().unwrap();
        assert!(Arc::ptr_eq(&name(&back[0]), &name(&back[99])));
    }

    fn round_trip_base(tensor: &str) -> BufferView {
        spanning(tensor, (0, 1))
    }

    /// A buffer of `tensor` written at step `first` and read at step `last`, living between.
    fn spanning(tensor: &str, (first, last): (u32, u32)) -> BufferView {
        BufferView {
            tensor: Arc::new(TensorLabel {
                id: tensor.into(),
                name: None,
                kind: TensorKind::Intermediate,
                producers: StepIndices::One(first),
                consumers: StepIndices::One(last),
                views: Arc::from([]),
                stack: OptionalIndex::default(),
                source: None,
            }),
            dtype: None,
            size: 64,
            alignment_log2: 0,
            device: 0,
            pool: 0,
            offset: 0,
            first,
            last,
            always_live: false,
        }
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct StepWire(#[serde(with = "super::steps")] crate::model::Steps);

    /// `steps` through the wire and back.
    fn step_trip(steps: &crate::model::Steps) -> crate::model::Steps {
        let json = serde_json::to_string(&StepWire(steps.clone())).unwrap();
        serde_json::from_str::<StepWire>(&json).unwrap().0
    }

    proptest! {
        /// Steps, named or not, with operators or not, read back from their columns.
        #[test]
        fn steps_read_back_from_their_columns(
            steps in prop::collection::vec(
                ("[st]{1,2}", prop::option::of("[n]{1,2}"), "[a-b]{0,1}", 0u32..3),
                0..10,
            ),
        ) {
            let mut position = 0;
            let (listed, positions): (Vec<_>, Vec<_>) = (steps.into_iter())
                .map(|(id, name, op, step)| {
                    let id: Arc<str> = Arc::from(id);
                    position += step;
                    let name = name.map_or_else(|| id.clone(), Arc::from);
                    (crate::model::ListedStep { name, id, op }, position)
                })
                .unzip();
            let steps = crate::model::Steps::listed(listed.into(), positions).unwrap();
            prop_assert_eq!(step_trip(&steps), steps);
        }

        /// Steps recorded as events read back as events, named as before.
        #[test]
        fn event_steps_read_back_from_their_columns(
            times in prop::collection::vec((0u64..1 << 40, 0u32..2, any::<bool>()), 1..12),
        ) {
            let (mut runs, mut positions, mut position) = (Vec::new(), Vec::new(), 0);
            for (k, &(_, step, ends)) in times.iter().enumerate() {
                position += step;
                positions.push(position);
                if ends || k + 1 == times.len() {
                    runs.push(((k + 1) as u32, Arc::from(format!("cuda:{} ", runs.len()))));
                }
            }
            let times: Vec<u64> = times.iter().map(|t| t.0).collect();
            let steps = crate::model::Steps::events(runs, times, positions).unwrap();
            prop_assert!(step_trip(&steps).iter().eq(steps.iter()));
        }
    }

    #[test]
    fn an_event_at_the_last_time_there_is_reads_back_whole() {
        let runs = vec![(2, Arc::from("cuda:0 t=")), (3, Arc::from("cuda:1 t="))];
        let times = vec![7, u64::MAX, u64::MAX];
        let steps = crate::model::Steps::events(runs, times, vec![0, 1, 2]).unwrap();
        let ids: Vec<String> = step_trip(&steps)
            .iter()
            .map(|s| s.id.into_owned())
            .collect();
        assert_eq!(
            ids,
            [
                "cuda:0 t=7",
                "cuda:0 t=18446744073709551615",
                "cuda:1 t=18446744073709551615"
            ]
        );
    }

    /// `ids` as a column of strings.
    fn words(ids: &[&str]) -> String {
        serde_json::to_string(&Words::pack(ids.iter().copied())).unwrap()
    }

    /// `values` as a packed column of one field.
    fn p(values: &[u64]) -> String {
        serde_json::to_string(&packed_ints(values, |&v| v)).unwrap()
    }

    /// Each buffer's steps, as `producers` and `consumers` pack them.
    fn steps(lists: &[&[u64]]) -> String {
        let mut packer = Packer::<2>::default();
        for list in lists {
            packer.push(0, list.len() as u64);
            for &s in *list {
                packer.push(1, s);
            }
        }
        serde_json::to_string(&[packer.finish()]).unwrap()
    }

    /// The columns every buffer needs, of two buffers `a` and `b` with `size`, and then `more`.
    fn two_buffers(size: &[u64], more: &str) -> String {
        let (zeros, none) = (p(&[0, 0]), steps(&[&[], &[]]));
        format!(
            r#"{{"count":2,"tensor":{},"names":[],"size":{},"offset":{zeros},"first":{zeros},"last":{zeros},"producers":{none},"consumers":{none}{more}}}"#,
            words(&["a", "b"]),
            p(size)
        )
    }

    #[test]
    fn columns_that_do_not_fit_their_buffers_are_refused() {
        let refusal = |json: &str| serde_json::from_str::<Wire>(json).unwrap_err().to_string();
        let one = format!(
            r#"{{"count":1,"tensor":{1},"size":{0},"offset":{0},"first":{0},"last":{0},"#,
            p(&[0]),
            words(&["a"])
        );
        for (json, expected) in [
            (
                two_buffers(&[1], ""),
                "buffer column `size` has 1 entries for 2 buffers",
            ),
            (
                two_buffers(&[1, 2, 3], ""),
                "buffer column `size` has 3 entries for 2 buffers",
            ),
            (
                two_buffers(&[1, 2], r#","stack":["AA"]"#),
                "buffer column `stack` has 1 entries for 2 buffers",
            ),
            (
                two_buffers(&[1, 2], r#","stack":["Ag"]"#),
                "buffer column `stack`, buffer 0: ends inside a value",
            ),
            (
                two_buffers(&[1, 2], r#","stack":["AA,"]"#),
                "buffer column `stack`, buffer 1: holds `,`, not a digit",
            ),
            (
                two_buffers(&[1, 2], r#","first":[0,0]"#),
                "invalid type: integer `0`, expected a string",
            ),
            (
                two_buffers(&[1, 2], &format!(r#","last":{}"#, p(&[0, 1 << 32]))),
                "buffer column `last`, buffer 1: holds 4294967296, past a u32",
            ),
            (
                // No shift, then tag 3.
                two_buffers(&[1, 2], r#","allocation":["AG"]"#),
                "buffer column `allocation`, buffer 0: holds allocation tag 3",
            ),
            (
                format!(
                    r#"{one}"producers":{0},"consumers":{0},"pool":[[3,1]]}}"#,
                    steps(&[&[]])
                ),
                "buffer column `pool` names buffer 3 of 1",
            ),
            (
                format!(r#"{{"tensor":{},"count":1}}"#, words(&["a"])),
                "buffer column `tensor` comes before `count`",
            ),
            (
                format!(r#"{{"count":1,"name":["A"],"tensor":{}}}"#, words(&["a"])),
                "buffer column `name` comes before `tensor`",
            ),
            (
                format!(r#"{one}"producers":["AA"]}}"#),
                "missing field `consumers`",
            ),
            (
                format!(r#"{{"count":1,"size":["AC"],"tensor":{}}}"#, words(&["a"])),
                "missing field `offset`",
            ),
            (
                r#"{"size":["C"]}"#.into(),
                "buffer column `size` comes before `count`",
            ),
            (r#"{}"#.into(), "missing field `count`"),
            (
                r#"{"count":5000000000}"#.into(),
                "5000000000 buffers are past what columns can name",
            ),
            (
                format!(
                    r#"{{"count":2,"tensor":{},"names":["x"],"name":{}}}"#,
                    words(&["a", "b"]),
                    p(&[0, 2])
                ),
                "buffer column `name`, buffer 1: names name 2 of 1",
            ),
            (
                format!(r#"{{"count":2,"tensor":{}}}"#, words(&["a"])),
                "buffer column `tensor` has 1 entries for 2 buffers",
            ),
            (
                r#"{"count":1,"tensor":{"stems":[],"packed":["AAA"]}}"#.into(),
                "buffer column `tensor` names stem 0 of 0",
            ),
            (r#"[1]"#.into(), "expected buffer columns"),
        ] {
            let e = refusal(&json);
            assert!(e.contains(expected), "{json}: {e}");
        }
    }

    #[test]
    fn steps_that_name_a_name_past_the_names_are_refused() {
        let json = format!(
            r#"{{"id":{},"name":[0,2],"names":["x"],"position":{}}}"#,
            words(&["a", "b"]),
            p(&[0, 1])
        );
        let e = serde_json::from_str::<StepWire>(&json)
            .unwrap_err()
            .to_string();
        assert!(e.contains("step 1 names name 2 of 1"), "{e}");
        let json = format!(
            r#"{{"id":{},"name":[0,1],"names":["x"],"position":{}}}"#,
            words(&["a", "b"]),
            p(&[0])
        );
        let e = serde_json::from_str::<StepWire>(&json)
            .unwrap_err()
            .to_string();
        assert!(e.contains("positions number 1 for 2 steps"), "{e}");
    }

    #[test]
    fn columns_read_in_any_order_after_the_tensors() {
        // `alignment_log2` before the sizes it rounds; an empty optional column; a column this
        // reader does not know.
        let json = format!(
            r#"{{"count":2,"tensor":{},"alignment_log2":[[0,3]],"stack":[],"later":{{"x":1}},"size":{},"offset":{},"first":{},"last":{},"producers":{},"consumers":{}}}"#,
            words(&["a", "b"]),
            p(&[5, 6]),
            p(&[0, 5]),
            p(&[0, 1]),
            p(&[1, 2]),
            steps(&[&[0], &[1]]),
            steps(&[&[1], &[2]]),
        );
        let back = serde_json::from_str::<Wire>(&json).unwrap().0;
        let expected: [BufferView; 2] = [
            BufferView {
                size: 5,
                alignment_log2: 3,
                ..spanning("a", (0, 1))
            },
            BufferView {
                size: 6,
                offset: 5,
                ..spanning("b", (1, 2))
            },
        ];
        assert_eq!(*back, expected);
        assert_eq!((back[0].occupied(), back[1].occupied()), (8, 6));
    }
}
