//! Writing a plan back into a TFLite model, as its `OfflineMemoryAllocation` metadata, so that
//! a TFLite Micro runtime lays its arena out as memplan planned it.
//!
//! FlatBuffers are written back to front and their offsets point forward, so the model is not
//! re-encoded: its bytes are kept whole (16-aligned, as its buffers' data asks) at the end of a
//! new buffer, and a new root `Model` table in front of them points into them for every field
//! but two: `buffers` (the old ones, with the plan's buffer replacing an old plan's or added) and
//! `metadata` (the old entries, with one for the plan added when there was none). The old root
//! stays in the bytes, unreferenced. A model with fields this writer does not know, or with data
//! stored past 2 GB at offsets from the start of the file, is refused: moving it would break it.

use flatbuffers::{FlatBufferBuilder, Push, UOffsetT, WIPOffset};

use super::schema::{Model, slot};
use super::{OFFLINE_PLAN, bad, read};
use crate::FormatError;

/// The fields of the `Model` table this writer knows: the schema's ten.
const MODEL_FIELDS: usize = 10;
const BUFFERS: u16 = 4;
const METADATA: u16 = 6;
/// The scalar field (`version`); every other field is an offset.
const VERSION: u16 = 0;

/// Sixteen bytes that the builder aligns to 16: the old model is pushed as these.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Aligned([u8; 16]);

impl Push for Aligned {
    type Output = Aligned;
    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst[..16].copy_from_slice(&self.0);
    }
}

/// `bytes` (a TFLite model) with `offsets` as its offline plan: one per tensor of the graph
/// [`super::parse`] reads from `bytes`, in its order; `None` leaves the tensor to the runtime
/// (`-1`). A subgraph run from more than one place has no single offset per tensor: its
/// tensors are left to the runtime.
pub fn with_offline_plan(bytes: &[u8], offsets: &[Option<u64>]) -> Result<Vec<u8>, FormatError> {
    let (imported, instances) = read(bytes)?;
    let model = Model::verified(bytes).map_err(|e| bad(e.to_string()))?;
    if offsets.len() != imported.graph.tensors.len() {
        return Err(bad(format!(
            "the plan has {} offsets for {} tensors",
            offsets.len(),
            imported.graph.tensors.len()
        )));
    }
    let words = plan_words(&model, &imported.graph, &instances, offsets)?;
    let plan_data: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();

    let root = model.table().loc();
    let vtable = model.table().vtable();
    if vtable.num_fields() > MODEL_FIELDS {
        return Err(bad(format!(
            "the model's root has {} fields, more than the {MODEL_FIELDS} this writer knows: writing it would drop some",
            vtable.num_fields()
        )));
    }
    if model
        .buffers()
        .is_some_and(|b| b.iter().any(|b| b.offset() > 1))
    {
        return Err(bad(
            "the model keeps buffer data past 2 GB at offsets from the start of the file, which a rewrite would move",
        ));
    }
    // Where each offset field of the root points, in the old bytes.
    let target = |field: u16| -> Result<Option<usize>, FormatError> {
        let at = vtable.get(slot(field)) as usize;
        if at == 0 {
            return Ok(None);
        }
        let pos = root + at;
        let word = bytes
            .get(pos..pos + 4)
            .ok_or_else(|| bad(format!("root field {field} lies past the end")))?;
        let to = pos + u32::from_le_bytes([word[0], word[1], word[2], word[3]]) as usize;
        (to < bytes.len())
            .then_some(Some(to))
            .ok_or_else(|| bad(format!("root field {field} points past the end")))
    };

    let mut b = FlatBufferBuilder::with_capacity(bytes.len() + plan_data.len() + 1024);
    // The old model, whole: its positions map to the new buffer's by `old`.
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().div_ceil(16) * 16, 0);
    let chunks: Vec<Aligned> = padded
        .chunks_exact(16)
        .map(|c| Aligned(c.try_into().expect("16 bytes")))
        .collect();
    let blob = b.create_vector(&chunks);
    let start = blob.value() - 4;
    let old = |pos: usize| WIPOffset::<()>::new(start - pos as UOffsetT);

    // The buffers: the old ones, the plan's in place of an old plan's, or added.
    let old_buffers: Vec<usize> = match target(BUFFERS)? {
        Some(v) => vector_elements(bytes, v)?,
        None => Vec::new(),
    };
    let existing = model
        .metadata()
        .and_then(|m| m.iter().find(|m| m.name() == Some(OFFLINE_PLAN)))
        .map(|m| m.buffer() as usize)
        .filter(|&i| i < old_buffers.len());
    let data = b.create_vector(&plan_data);
    let plan_buffer = {
        let t = b.start_table();
        b.push_slot_always(slot(0), data);
        b.end_table(t)
    };
    let mut buffer_list: Vec<WIPOffset<()>> = old_buffers.iter().map(|&p| old(p)).collect();
    let plan_index = match existing {
        Some(i) => {
            buffer_list[i] = WIPOffset::new(plan_buffer.value());
            i
        }
        None => {
            // Buffer 0 is the empty sentinel every model has.
            if buffer_list.is_empty() {
                let empty = b.start_table();
                let empty = b.end_table(empty);
                buffer_list.push(WIPOffset::new(empty.value()));
            }
            buffer_list.push(WIPOffset::new(plan_buffer.value()));
            buffer_list.len() - 1
        }
    };
    let buffers = b.create_vector(&buffer_list);
    let metadata = match (existing, target(METADATA)?) {
        (Some(_), Some(v)) => old(v),
        (_, old_metadata) => {
            let name = b.create_string(OFFLINE_PLAN);
            let entry = b.start_table();
            b.push_slot_always(slot(0), name);
            b.push_slot::<u32>(slot(1), plan_index as u32, 0);
            let entry = b.end_table(entry);
            let mut list: Vec<WIPOffset<()>> = match old_metadata {
                Some(v) => vector_elements(bytes, v)?.into_iter().map(old).collect(),
                None => Vec::new(),
            };
            list.push(WIPOffset::new(entry.value()));
            WIPOffset::new(b.create_vector(&list).value())
        }
    };

    let t = b.start_table();
    for field in 0..MODEL_FIELDS as u16 {
        match field {
            VERSION => {
                let at = vtable.get(slot(VERSION)) as usize;
                if at != 0 {
                    let word = bytes
                        .get(root + at..root + at + 4)
                        .ok_or_else(|| bad("the model's version lies past the end"))?;
                    b.push_slot_always::<u32>(
                        slot(VERSION),
                        u32::from_le_bytes([word[0], word[1], word[2], word[3]]),
                    );
                }
            }
            BUFFERS => b.push_slot_always(slot(BUFFERS), buffers),
            METADATA => b.push_slot_always(slot(METADATA), metadata),
            _ => {
                if let Some(to) = target(field)? {
                    b.push_slot_always(slot(field), old(to));
                }
            }
        }
    }
    let root = b.end_table(t);
    b.finish(root, Some("TFL3"));
    Ok(b.finished_data().to_vec())
}

/// The positions the elements of the vector of offsets at `at` point to.
fn vector_elements(bytes: &[u8], at: usize) -> Result<Vec<usize>, FormatError> {
    let word = |pos: usize| {
        bytes
            .get(pos..pos + 4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize)
            .ok_or_else(|| bad("a vector of the model's root lies past the end"))
    };
    let len = word(at)?;
    (0..len)
        .map(|i| {
            let pos = at + 4 + 4 * i;
            Ok(pos + word(pos)?)
        })
        .collect()
}

/// The plan as TFLite Micro reads it: version 0, the subgraph count, the tensor count, then an
/// arena offset per tensor of every subgraph in order (`-1`: the runtime plans it).
fn plan_words(
    model: &Model,
    graph: &memplan_core::Graph,
    instances: &[(usize, Vec<memplan_core::graph::Id>)],
    offsets: &[Option<u64>],
) -> Result<Vec<i32>, FormatError> {
    let subgraphs: Vec<usize> = (model.subgraphs().into_iter().flatten())
        .map(|s| s.tensors().map_or(0, |t| t.len()))
        .collect();
    let total: usize = subgraphs.iter().sum();
    let mut first = vec![0usize; subgraphs.len() + 1];
    for (s, n) in subgraphs.iter().enumerate() {
        first[s + 1] = first[s] + n;
    }
    let index: std::collections::HashMap<&str, usize> = (graph.tensors.iter().enumerate())
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut words = vec![-1i32; total];
    for (s, ids) in instances {
        if instances.iter().filter(|(other, _)| other == s).count() > 1 {
            continue;
        }
        for (i, id) in ids.iter().enumerate() {
            if let Some(offset) = offsets[index[id.as_str()]] {
                words[first[*s] + i] = i32::try_from(offset).map_err(|_| {
                    bad(format!(
                        "tensor `{id}` is at offset {offset}, past what an offline plan can say (2^31)"
                    ))
                })?;
            }
        }
    }
    let count =
        |n: usize| i32::try_from(n).map_err(|_| bad("too many tensors for an offline plan"));
    let mut out = vec![0, count(subgraphs.len())?, count(total)?];
    out.extend(words);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    const LSTM: &[u8] = include_bytes!("../../../../tests/data/tflite/trained_lstm.tflite");
    const VELA: &[u8] = include_bytes!("../../../../tests/data/tflite/person_detect_vela.tflite");

    /// Offsets for every tensor: each at 16 times its index, constants left to the runtime.
    fn some_plan(bytes: &[u8]) -> Vec<Option<u64>> {
        let g = parse(bytes).unwrap().graph;
        (g.tensors.iter().enumerate())
            .map(|(i, t)| {
                (t.kind != memplan_core::graph::TensorKind::Constant).then_some(16 * i as u64)
            })
            .collect()
    }

    #[test]
    fn a_plan_written_into_a_model_reads_back_with_the_same_graph() {
        let plan = some_plan(LSTM);
        let written = with_offline_plan(LSTM, &plan).unwrap();
        let (before, after) = (parse(LSTM).unwrap(), parse(&written).unwrap());
        assert_eq!(before.graph, after.graph);
        let given = after.given_plan.expect("the plan written");
        assert_eq!(given.offsets, plan);
        assert_eq!(given.planner, "the offline planner");
        // Written again, the plan is replaced, not added.
        let again = with_offline_plan(&written, &some_plan(&written)).unwrap();
        let model = Model::verified(&again).unwrap();
        let plans = (model.metadata().unwrap().iter())
            .filter(|m| m.name() == Some(OFFLINE_PLAN))
            .count();
        assert_eq!(plans, 1);
        // Each rewrite keeps the model whole and adds a root, its vectors and the plan.
        assert!(
            again.len() - written.len() < 1024,
            "{} bytes added",
            again.len() - written.len()
        );
    }

    #[test]
    fn velas_plan_is_replaced_in_place_of_its_buffer() {
        let g = parse(VELA).unwrap().graph;
        let plan = vec![Some(0); g.tensors.len()];
        let written = with_offline_plan(VELA, &plan).unwrap();
        let model = Model::verified(&written).unwrap();
        let entries: Vec<_> = model.metadata().unwrap().iter().collect();
        let old = Model::verified(VELA).unwrap();
        assert_eq!(entries.len(), old.metadata().unwrap().len());
        assert_eq!(
            model.buffers().unwrap().len(),
            old.buffers().unwrap().len(),
            "the old plan's buffer holds the new plan"
        );
        let read = parse(&written).unwrap();
        assert_eq!(read.given_plan.unwrap().offsets, plan);
    }

    #[test]
    fn a_plan_of_the_wrong_length_is_refused() {
        let e = with_offline_plan(LSTM, &[Some(0)]).unwrap_err().to_string();
        assert!(e.contains("the plan has 1 offsets for 22 tensors"), "{e}");
    }
}
