//! TensorFlow Lite (LiteRT) models: `.tflite` FlatBuffers, read with the `flatbuffers` crate
//! ([`schema`] declares the tables memplan reads).
//!
//! The mapping, as TFLite Micro's planner sees a model:
//! - The main subgraph (0) runs; its operators, in order, are the schedule. A control-flow
//!   operator runs the subgraphs its options name, in place: `WHILE` a step that copies its
//!   inputs into the cond and body subgraphs' inputs, a loop of the cond's and the body's
//!   operators whose back edge reads the body's outputs, and a step that copies them to its
//!   outputs; `IF` both branches one after the other (either may run: both are planned);
//!   `CALL_ONCE` its init subgraph. A subgraph run from two places is two copies of it.
//! - Every tensor of a subgraph that runs is a tensor with its shape and element type (quantized
//!   types are their integer types); a shape with an unknown dim, or a string, resource or
//!   variant tensor, cannot be sized (`size_unknown`, named in a warning). A tensor whose buffer
//!   holds data (in the file or outside it) is a constant: always-live, apart from the arena. A
//!   variable tensor (an RNN's state) is held across invocations: always-live. An operator's
//!   intermediates are scratch it writes.
//! - The main subgraph's inputs live from the start (a pinned step, `inputs`, writes them) and
//!   its outputs to the end (the last step reads them), as the runtime holds them.
//! - An `OfflineMemoryAllocation` metadata entry (Vela writes one) is a given plan: arena offsets
//!   for the tensors of every subgraph in order, `-1` where the runtime plans the tensor.
//!
//! Tensor ids are their names (a subgraph run from an operator prefixes them with the operator's
//! step id), made unique; steps are `op<k>` in the main subgraph.

mod ops;
mod schema;
mod write;

use std::collections::{HashMap, HashSet};

use memplan_core::graph::{Dim, Graph, Id, Loop, Step, Tensor, TensorKind};

use crate::{FormatError, GivenPlan};
pub use ops::BUILTIN_OPERATORS;
use schema::{CALL_ONCE_OPTIONS, IF_OPTIONS, Model, SubGraph, WHILE_OPTIONS};
pub use write::with_offline_plan;

/// What a TFLite model holds: the graph, and the offline plan when it carries one.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub graph: Graph,
    pub given_plan: Option<GivenPlan>,
    pub warnings: Vec<String>,
}

/// The FlatBuffers file identifier of a TFLite model, at bytes 4..8.
pub const IDENTIFIER: &[u8; 4] = b"TFL3";

/// The metadata entry of an offline memory plan.
pub const OFFLINE_PLAN: &str = "OfflineMemoryAllocation";

/// Whether `bytes` are a TFLite model (by its file identifier).
pub fn detect(bytes: &[u8]) -> bool {
    bytes.get(4..8) == Some(IDENTIFIER)
}

fn bad(message: impl Into<String>) -> FormatError {
    FormatError::Tflite(message.into())
}

/// The memplan dtype of a TFLite `TensorType`; `None`: it has no fixed size.
fn dtype(code: i8) -> Option<&'static str> {
    Some(match code {
        0 => "f32",
        1 => "f16",
        2 => "i32",
        3 => "u8",
        4 => "i64",
        6 => "bool",
        7 => "i16",
        8 => "c64",
        9 => "i8",
        10 => "f64",
        11 => "c128",
        12 => "u64",
        15 => "u32",
        16 => "u16",
        17 => "i4",
        18 => "bf16",
        19 => "i2",
        20 => "u4",
        21 => "f8e4m3",
        22 => "f8e5m2",
        // STRING, RESOURCE, VARIANT and codes newer than this reader.
        _ => return None,
    })
}

/// The name of each operator code: the builtin's, or the custom op's.
fn operator_names(model: &Model) -> Vec<String> {
    let Some(codes) = model.operator_codes() else {
        return Vec::new();
    };
    codes
        .iter()
        .map(|c| {
            // The wider field holds codes past 127; older files set only the narrow one.
            let code = c.builtin_code().max(i32::from(c.deprecated_builtin_code()));
            match usize::try_from(code)
                .ok()
                .and_then(|i| BUILTIN_OPERATORS.get(i))
            {
                Some(&"CUSTOM") => c.custom_code().unwrap_or("CUSTOM").to_string(),
                Some(name) => name.to_string(),
                None => format!("BUILTIN_{code}"),
            }
        })
        .collect()
}

/// The most subgraphs that may run within one another (each a control-flow operator's).
const MOST_NESTED: usize = 64;

/// The most subgraph runs a model may expand to: a run is a copy of its subgraph's tensors, and
/// a subgraph whose operator runs the next twice (both branches of an `IF`) doubles the runs at
/// each level.
const MOST_RUNS: usize = 10_000;

/// The graph being built while the subgraphs are walked.
struct Builder<'a> {
    model: Model<'a>,
    subgraphs: Vec<SubGraph<'a>>,
    op_names: Vec<String>,
    /// Which buffers hold data: a tensor on one is a constant.
    constant_buffers: Vec<bool>,
    tensors: Vec<Tensor>,
    steps: Vec<Step>,
    loops: Vec<Loop>,
    ids: HashSet<String>,
    /// The subgraph runs, in order.
    instances: Vec<Instance>,
    /// Subgraphs being run, to refuse recursion.
    running: Vec<usize>,
    /// The loop the steps being added belong to (an enclosing `WHILE`).
    current_loop: Option<String>,
    size_unknown: Vec<String>,
    writeless: usize,
}

/// Reads a TFLite model.
pub fn parse(bytes: &[u8]) -> Result<Imported, FormatError> {
    read(bytes).map(|(imported, _)| imported)
}

/// A subgraph run, once: its subgraph, and the ids of its tensors by index.
type Instance = (usize, Vec<Id>);

/// [`parse`], with the subgraph runs the graph's tensors come from.
fn read(bytes: &[u8]) -> Result<(Imported, Vec<Instance>), FormatError> {
    if !detect(bytes) {
        return Err(bad(
            "not a TFLite model: no `TFL3` file identifier at bytes 4..8",
        ));
    }
    let model = Model::verified(bytes).map_err(|e| {
        // The verifier's message, then its trace of where (one line each): the first line says it.
        let message = e.to_string();
        bad(format!(
            "not a valid FlatBuffer: {}",
            message.lines().next().unwrap_or_default()
        ))
    })?;
    let subgraphs: Vec<SubGraph> = model
        .subgraphs()
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    if subgraphs.is_empty() {
        return Err(bad("the model has no subgraph"));
    }
    let constant_buffers = model
        .buffers()
        .map(|v| {
            v.iter()
                .map(|b| b.data().is_some_and(|d| !d.is_empty()) || b.offset() > 1)
                .collect()
        })
        .unwrap_or_default();
    let mut b = Builder {
        model,
        op_names: operator_names(&model),
        subgraphs,
        constant_buffers,
        tensors: Vec::new(),
        steps: Vec::new(),
        loops: Vec::new(),
        ids: HashSet::new(),
        instances: Vec::new(),
        running: Vec::new(),
        current_loop: None,
        size_unknown: Vec::new(),
        writeless: 0,
    };
    let main = b.instance(0, "")?;
    let main_ids = b.instances[main].1.clone();
    let sg = b.subgraphs[0];
    let ends = |list: Option<flatbuffers::Vector<'_, i32>>| -> Vec<Id> {
        list.map(|v| {
            v.iter()
                .filter_map(|i| {
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| main_ids.get(i).cloned())
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let inputs = ends(sg.inputs());
    let outputs = ends(sg.outputs());
    b.mark(&inputs, TensorKind::Input);
    b.mark(&outputs, TensorKind::Output);
    if !inputs.is_empty() {
        b.steps.push(inputs_step(inputs));
    }
    b.run(0, main, "op")?;
    // The outputs live to the end: the last step reads those it does not write (each once;
    // a set, as a model can list many).
    if let Some(last) = b.steps.last_mut() {
        let mut used: rustc_hash::FxHashSet<&str> = last
            .writes
            .iter()
            .chain(&last.reads)
            .map(Id::as_str)
            .collect();
        let unread: Vec<Id> = (outputs.iter())
            .filter(|o| used.insert(o.as_str()))
            .cloned()
            .collect();
        last.reads.extend(unread);
    }
    let given_plan = b.offline_plan()?;
    let mut warnings = Vec::new();
    if let Some(plan) = &given_plan {
        let aliased = b.npu_views(&plan.offsets);
        if aliased > 0 {
            warnings.push(format!(
                "{aliased} operands of Ethos-U operators lie inside their scratch tensor in the offline plan: each is a view of it, as Vela plans them"
            ));
        }
    }
    if !b.size_unknown.is_empty() {
        warnings.push(format!(
            "{} tensors cannot be sized (an unknown dim, or a string, resource or variant type): {}",
            b.size_unknown.len(),
            first_few(&b.size_unknown)
        ));
    }
    if b.writeless > 0 {
        warnings.push(format!(
            "{} operators write no tensor: they are not steps",
            b.writeless
        ));
    }
    let name = b.model.description().unwrap_or_default().to_string();
    let imported = Imported {
        graph: Graph {
            name,
            tensors: b.tensors,
            steps: b.steps,
            loops: b.loops,
            remat_candidates: Some(Vec::new()),
            ..Graph::default()
        },
        given_plan,
        warnings,
    };
    Ok((imported, b.instances))
}

/// The first five of `ids`, and how many more.
fn first_few(ids: &[String]) -> String {
    let shown: Vec<String> = ids.iter().take(5).map(|i| format!("`{i}`")).collect();
    match ids.len().saturating_sub(5) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// The pinned step that writes the main subgraph's inputs before its first operator.
fn inputs_step(writes: Vec<Id>) -> Step {
    Step {
        id: "inputs".into(),
        op: "inputs".into(),
        writes,
        pinned: true,
        ..Step::default()
    }
}

impl<'a> Builder<'a> {
    /// Adds the tensors of subgraph `s` once more (ids prefixed with `prefix`): an instance.
    fn instance(&mut self, s: usize, prefix: &str) -> Result<usize, FormatError> {
        if self.instances.len() >= MOST_RUNS {
            return Err(bad(format!(
                "its control-flow operators run its subgraphs more than {MOST_RUNS} times"
            )));
        }
        let sg = self.subgraphs[s];
        let mut ids = Vec::new();
        if let Some(tensors) = sg.tensors() {
            for (i, t) in tensors.iter().enumerate() {
                let base = match t.name() {
                    Some(n) if !n.is_empty() => format!("{prefix}{n}"),
                    _ => format!("{prefix}t{i}"),
                };
                let mut id = base.clone();
                let mut k = 1;
                while !self.ids.insert(id.clone()) {
                    k += 1;
                    id = format!("{base}#{k}");
                }
                let id = Id::from(id);
                let mut tensor = Tensor {
                    id: id.clone(),
                    ..Tensor::default()
                };
                let dims: Option<Vec<u64>> = t
                    .shape()
                    .map(|v| v.iter().map(|d| u64::try_from(d).ok()).collect())
                    .unwrap_or(Some(Vec::new()));
                match (dtype(t.element_type()), dims) {
                    (Some(d), Some(dims)) => {
                        tensor.declared.dtype = Some(d.into());
                        tensor.declared.shape = Some(dims.into_iter().map(Dim::Fixed).collect());
                    }
                    _ => {
                        tensor.size_unknown = true;
                        self.size_unknown.push(id.to_string());
                    }
                }
                let constant = t.external_buffer() != 0
                    || self
                        .constant_buffers
                        .get(t.buffer() as usize)
                        .copied()
                        .unwrap_or(false);
                if constant {
                    tensor.kind = TensorKind::Constant;
                } else if t.is_variable() {
                    tensor.held = true;
                }
                self.tensors.push(tensor);
                ids.push(id);
            }
        }
        self.instances.push((s, ids));
        Ok(self.instances.len() - 1)
    }

    /// Makes the main subgraph's inputs or outputs of `kind`, planned as the runtime plans them
    /// (from the start, or to the end), not always-live.
    fn mark(&mut self, ids: &[Id], kind: TensorKind) {
        let ids: rustc_hash::FxHashSet<&str> = ids.iter().map(Id::as_str).collect();
        for t in (self.tensors.iter_mut()).filter(|t| ids.contains(t.id.as_str())) {
            if t.kind != TensorKind::Constant {
                t.kind = kind;
                t.always_live = Some(false);
            }
        }
    }

    /// The ids of the tensors at `indices` of instance `instance` (`-1`, an omitted optional
    /// input, and indices out of range are left out).
    fn ids_of(&self, instance: usize, indices: Option<flatbuffers::Vector<'_, i32>>) -> Vec<Id> {
        let ids = &self.instances[instance].1;
        indices
            .map(|v| {
                v.iter()
                    .filter_map(|i| usize::try_from(i).ok().and_then(|i| ids.get(i).cloned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Adds the steps of subgraph `s`, instance `instance`, step ids starting with `prefix`.
    fn run(&mut self, s: usize, instance: usize, prefix: &str) -> Result<(), FormatError> {
        if self.running.contains(&s) {
            return Err(bad(format!(
                "subgraph {s} runs itself (through a control-flow operator)"
            )));
        }
        if self.running.len() >= MOST_NESTED {
            return Err(bad(format!(
                "its control-flow operators run subgraphs within subgraphs more than {MOST_NESTED} deep"
            )));
        }
        self.running.push(s);
        let sg = self.subgraphs[s];
        let ops: Vec<schema::Operator> = sg
            .operators()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        for (k, op) in ops.into_iter().enumerate() {
            let id = format!("{prefix}{k}");
            let name = self
                .op_names
                .get(op.opcode_index() as usize)
                .cloned()
                .ok_or_else(|| {
                    bad(format!(
                        "operator {k} of subgraph {s}: no operator code {}",
                        op.opcode_index()
                    ))
                })?;
            let reads = self.ids_of(instance, op.inputs());
            let outputs = self.ids_of(instance, op.outputs());
            let mut writes = outputs.clone();
            writes.extend(self.ids_of(instance, op.intermediates()));
            match op
                .subgraph_indices()
                .map(|o| (op.builtin_options_type(), o))
            {
                Some((WHILE_OPTIONS, o)) => {
                    let (cond, body) = (
                        self.subgraph(o.first(), &id)?,
                        self.subgraph(o.second(), &id)?,
                    );
                    self.control_flow(&id, &name, reads, outputs, &[cond, body], true)?;
                }
                Some((IF_OPTIONS, o)) => {
                    let (then, otherwise) = (
                        self.subgraph(o.first(), &id)?,
                        self.subgraph(o.second(), &id)?,
                    );
                    self.control_flow(&id, &name, reads, outputs, &[then, otherwise], false)?;
                }
                Some((CALL_ONCE_OPTIONS, o)) => {
                    let init = self.subgraph(o.first(), &id)?;
                    self.control_flow(&id, &name, reads, outputs, &[init], false)?;
                }
                _ if writes.is_empty() => self.writeless += 1,
                _ => self.push(Step {
                    id: id.into(),
                    op: name.into(),
                    reads,
                    writes,
                    ..Step::default()
                }),
            }
        }
        self.running.pop();
        Ok(())
    }

    fn push(&mut self, mut step: Step) {
        step.loop_id = self.current_loop.clone().map(Into::into);
        self.steps.push(step);
    }

    /// The subgraph index an operator's options name, checked.
    fn subgraph(&self, index: i32, op: &str) -> Result<usize, FormatError> {
        usize::try_from(index)
            .ok()
            .filter(|&i| i < self.subgraphs.len())
            .ok_or_else(|| {
                bad(format!(
                    "operator `{op}` runs subgraph {index}, which the model does not have"
                ))
            })
    }

    /// A control-flow operator `id`: a step copying its inputs into the subgraphs' inputs, the
    /// subgraphs' steps (in a loop when `looped`, its back edge reading the last subgraph's
    /// outputs), and a step copying their outputs to its own.
    fn control_flow(
        &mut self,
        id: &str,
        name: &str,
        reads: Vec<Id>,
        outputs: Vec<Id>,
        subgraphs: &[usize],
        looped: bool,
    ) -> Result<(), FormatError> {
        let instances: Vec<usize> = subgraphs
            .iter()
            .enumerate()
            .map(|(j, &s)| self.instance(s, &format!("{id}/{j}/")))
            .collect::<Result<_, _>>()?;
        let ins: Vec<Id> = instances
            .iter()
            .flat_map(|&i| self.ids_of(i, self.subgraphs[self.instances[i].0].inputs()))
            .collect();
        let outs: Vec<Vec<Id>> = instances
            .iter()
            .map(|&i| self.ids_of(i, self.subgraphs[self.instances[i].0].outputs()))
            .collect();
        if !ins.is_empty() {
            self.push(Step {
                id: id.into(),
                op: name.into(),
                reads,
                writes: ins,
                ..Step::default()
            });
        }
        let outer = self.current_loop.clone();
        if looped && outer.is_none() {
            let loop_id = format!("{id}/loop");
            // The back edge reads the cond's verdict and the body's outputs.
            self.loops.push(Loop {
                id: loop_id.clone(),
                trip_count: None,
                back_edge_reads: outs.concat(),
            });
            self.current_loop = Some(loop_id);
        }
        for (j, (&s, &i)) in subgraphs.iter().zip(&instances).enumerate() {
            self.run(s, i, &format!("{id}/{j}/op"))?;
        }
        self.current_loop = outer;
        // A loop's outputs are its body's; a branch's, either branch's.
        let reads = match (looped, outs.split_last()) {
            (true, Some((body, _))) => body.clone(),
            _ => outs.concat(),
        };
        if !outputs.is_empty() {
            self.push(Step {
                id: format!("{id}/end").into(),
                op: name.into(),
                reads,
                writes: outputs,
                ..Step::default()
            });
        }
        Ok(())
    }

    /// Makes the non-constant operands of each Ethos-U operator (`ethos-u`: its inputs are the
    /// command stream, the weights, the scratch tensor, the fast scratch, then the feature maps)
    /// that the offline plan places inside the operator's scratch tensor views of it: Vela plans
    /// the NPU's memory inside the scratch from lifetimes within the operator, which a step
    /// cannot show. Returns how many.
    fn npu_views(&mut self, offsets: &[Option<u64>]) -> usize {
        let index: HashMap<Id, usize> = (self.tensors.iter().enumerate())
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
        let bytes = |t: &Tensor| {
            let d: memplan_core::DType = t.declared.dtype.as_deref()?.parse().ok()?;
            let elements = (t.declared.shape.as_ref()?.iter()).try_fold(1u64, |a, d| match d {
                Dim::Fixed(n) => a.checked_mul(*n),
                Dim::Param(_) => None,
            })?;
            d.bytes_for(elements)
        };
        let mut views = Vec::new();
        for step in self.steps.iter().filter(|s| &*s.op == "ethos-u") {
            let Some(&scratch) = step.reads.get(2).and_then(|id| index.get(id)) else {
                continue;
            };
            let (Some(base), Some(size)) = (offsets[scratch], bytes(&self.tensors[scratch])) else {
                continue;
            };
            let operands = step.reads.iter().skip(3).chain(&step.writes);
            for t in operands.filter_map(|id| index.get(id).copied()) {
                let tensor = &self.tensors[t];
                if t == scratch
                    || tensor.kind == TensorKind::Constant
                    || tensor.declared.view_of.is_some()
                {
                    continue;
                }
                let (Some(at), Some(len)) = (offsets[t], bytes(tensor)) else {
                    continue;
                };
                if at >= base && at.checked_add(len).is_some_and(|end| end <= base + size) {
                    views.push((t, scratch, at - base));
                }
            }
        }
        for &(t, scratch, offset) in &views {
            self.tensors[t].declared.view_of = Some(self.tensors[scratch].id.as_str().into());
            self.tensors[t].declared.view_offset = offset;
        }
        views.len()
    }

    /// The offline plan in the model's metadata, when it has one: an offset per tensor of the
    /// main subgraph's instance and the others in order.
    fn offline_plan(&self) -> Result<Option<GivenPlan>, FormatError> {
        let Some(entry) = self
            .model
            .metadata()
            .and_then(|m| m.iter().find(|m| m.name() == Some(OFFLINE_PLAN)))
        else {
            return Ok(None);
        };
        let data = self
            .model
            .buffers()
            .filter(|b| (entry.buffer() as usize) < b.len())
            .and_then(|b| b.get(entry.buffer() as usize).data())
            .ok_or_else(|| {
                bad(format!(
                    "`{OFFLINE_PLAN}`: buffer {} holds no data",
                    entry.buffer()
                ))
            })?;
        let bytes = data.bytes();
        if bytes.len() % 4 != 0 || bytes.len() < 12 {
            return Err(bad(format!(
                "`{OFFLINE_PLAN}`: {} bytes is not a list of int32 with its 3-word header",
                bytes.len()
            )));
        }
        let words: Vec<i32> = bytes
            .chunks_exact(4)
            .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let count = usize::try_from(words[2])
            .map_err(|_| bad(format!("`{OFFLINE_PLAN}`: negative count {}", words[2])))?;
        let offsets = &words[3..];
        if offsets.len() != count {
            return Err(bad(format!(
                "`{OFFLINE_PLAN}` says {count} offsets but holds {}",
                offsets.len()
            )));
        }
        // The offsets run over the subgraphs' tensors in order; each instance takes its
        // subgraph's.
        let mut first = vec![0usize; self.subgraphs.len() + 1];
        for (s, sg) in self.subgraphs.iter().enumerate() {
            first[s + 1] = first[s] + sg.tensors().map_or(0, |t| t.len());
        }
        let index: HashMap<&str, usize> = self
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), i))
            .collect();
        let mut given = vec![None; self.tensors.len()];
        for (s, ids) in &self.instances {
            for (i, id) in ids.iter().enumerate() {
                let offset = offsets.get(first[*s] + i).copied().unwrap_or(-1);
                given[index[id.as_str()]] = u64::try_from(offset).ok();
            }
        }
        // Only Vela writes Ethos-U operators; another offline planner is named by what it is.
        let vela = self.steps.iter().any(|s| &*s.op == "ethos-u");
        Ok(Some(GivenPlan {
            planner: if vela { "Vela" } else { "the offline planner" }.into(),
            offsets: given,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LSTM: &[u8] = include_bytes!("../../../../tests/data/tflite/trained_lstm.tflite");
    const VELA: &[u8] = include_bytes!("../../../../tests/data/tflite/person_detect_vela.tflite");

    #[test]
    fn the_operator_names_are_the_schemas() {
        let schema = include_str!("../../../../tests/data/tflite/schema.fbs");
        let body = schema
            .split("enum BuiltinOperator : int32 {")
            .nth(1)
            .and_then(|b| b.split('}').next())
            .unwrap();
        let names: Vec<&str> = body
            .lines()
            .map(|l| l.split("//").next().unwrap().trim())
            .filter(|l| !l.is_empty())
            .map(|l| l.split('=').next().unwrap().trim())
            .collect();
        assert_eq!(names, BUILTIN_OPERATORS);
    }

    #[test]
    fn an_lstm_reads_with_its_operators_constants_and_state() {
        let i = parse(LSTM).unwrap();
        let ops: Vec<&str> = i.graph.steps.iter().map(|s| &*s.op).collect();
        assert_eq!(ops[0], "inputs");
        assert!(ops.contains(&"UNIDIRECTIONAL_SEQUENCE_LSTM"), "{ops:?}");
        // Constants hold data in the file; the state is held across invocations.
        assert!(
            i.graph
                .tensors
                .iter()
                .any(|t| t.kind == TensorKind::Constant)
        );
        assert!(i.given_plan.is_none());
        i.graph.resolve().unwrap();
    }

    #[test]
    fn velas_offline_plan_is_a_given_plan_and_the_npu_operands_views_of_its_scratch() {
        let i = parse(VELA).unwrap();
        let plan = i.given_plan.as_ref().unwrap();
        assert_eq!(plan.planner, "Vela");
        let t = |id: &str| i.graph.tensors.iter().position(|t| t.id == id).unwrap();
        assert_eq!(plan.offsets[t("_split_1_flash")], None);
        assert_eq!(plan.offsets[t("_split_1_scratch")], Some(0));
        assert_eq!(
            i.graph.tensors[t("input")].declared.view_of.as_deref(),
            Some("_split_1_scratch")
        );
        assert!(
            i.warnings
                .iter()
                .any(|w| w.starts_with("3 operands of Ethos-U"))
        );
    }

    #[test]
    fn a_while_loop_runs_its_cond_and_body_as_a_loop() {
        let model = include_bytes!("../../../../tests/data/tflite/while_loop.tflite");
        let i = parse(model).unwrap();
        let g = &i.graph;
        assert_eq!(g.loops.len(), 1);
        let in_loop: Vec<&str> = (g.steps.iter())
            .filter(|s| s.loop_id.is_some())
            .map(|s| &*s.op)
            .collect();
        assert_eq!(in_loop, ["LESS", "ADD", "ADD"]);
        assert_eq!(
            g.loops[0].back_edge_reads,
            ["op0/0/again", "op0/1/b_counter_next", "op0/1/b_x_next"]
        );
        let end = g.steps.iter().find(|s| s.id == "op0/end").unwrap();
        assert_eq!(end.reads, ["op0/1/b_counter_next", "op0/1/b_x_next"]);
        assert_eq!(end.writes, ["counter_out", "y"]);
        g.resolve().unwrap();
    }

    #[test]
    fn an_if_runs_both_branches_between_a_step_in_and_a_step_out() {
        let model = include_bytes!("../../../../tests/data/tflite/if_branches.tflite");
        let g = parse(model).unwrap().graph;
        assert!(g.loops.is_empty());
        let steps: Vec<(&str, &str)> = (g.steps.iter()).map(|s| (s.id.as_str(), &*s.op)).collect();
        assert_eq!(
            steps,
            [
                ("inputs", "inputs"),
                ("op0", "IF"),
                ("op0/0/op0", "ADD"),
                ("op0/1/op0", "ADD"),
                ("op0/end", "IF"),
            ]
        );
        let first = &g.steps[1];
        assert_eq!(first.reads, ["flag", "x"]);
        assert_eq!(first.writes, ["op0/0/t_x", "op0/1/e_x"]);
        // Either branch's output may be the IF's.
        assert_eq!(g.steps[4].reads, ["op0/0/t_y", "op0/1/e_y"]);
        g.resolve().unwrap();
    }

    /// A model of `n` subgraphs, each of one tensor, the first `n - 1` running the next from
    /// their one operator, an `IF` whose branches are the next and, when `doubling`, the next
    /// again (`2^(n-1)` runs of the last), else the last (a chain `n - 1` deep).
    fn nested_ifs(n: i32, doubling: bool) -> Vec<u8> {
        use flatbuffers::{FlatBufferBuilder, WIPOffset};
        let slot = schema::slot;
        let mut b = FlatBufferBuilder::new();
        let mut subgraphs = Vec::new();
        for k in 0..n {
            let (name, shape) = (b.create_string("x"), b.create_vector(&[1i32]));
            let t = b.start_table();
            b.push_slot_always(slot(0), shape);
            b.push_slot_always(slot(3), name);
            let tensor = b.end_table(t);
            let mut operators = Vec::new();
            if k + 1 < n {
                let o = b.start_table();
                b.push_slot::<i32>(slot(0), k + 1, 0);
                b.push_slot::<i32>(slot(1), if doubling { k + 1 } else { n - 1 }, 0);
                let options = b.end_table(o);
                let (ins, outs) = (b.create_vector(&[0i32]), b.create_vector(&[0i32]));
                let o = b.start_table();
                b.push_slot_always(slot(1), ins);
                b.push_slot_always(slot(2), outs);
                b.push_slot::<u8>(slot(3), schema::IF_OPTIONS, 0);
                b.push_slot_always(slot(4), options);
                operators.push(b.end_table(o));
            }
            let tensors = b.create_vector(&[tensor]);
            let (ins, outs) = (b.create_vector(&[0i32]), b.create_vector(&[0i32]));
            let operators = b.create_vector(&operators);
            let g = b.start_table();
            b.push_slot_always(slot(0), tensors);
            b.push_slot_always(slot(1), ins);
            b.push_slot_always(slot(2), outs);
            b.push_slot_always(slot(3), operators);
            subgraphs.push(b.end_table(g));
        }
        let c = b.start_table();
        b.push_slot::<i32>(slot(3), 118, 0);
        let codes: Vec<WIPOffset<_>> = vec![b.end_table(c)];
        let (codes, subgraphs) = (b.create_vector(&codes), b.create_vector(&subgraphs));
        let m = b.start_table();
        b.push_slot_always(slot(1), codes);
        b.push_slot_always(slot(2), subgraphs);
        let model = b.end_table(m);
        b.finish(model, Some("TFL3"));
        b.finished_data().to_vec()
    }

    /// Control flow that runs its subgraphs exponentially many times, or nests them deeper
    /// than any model does, is refused at once: 40 levels of `IF`s running the next twice were
    /// 2^39 runs to build (a hang), and a chain of 20,000 a recursion as deep, which overflowed
    /// a test thread's stack.
    #[test]
    fn control_flow_past_the_runs_or_the_nesting_a_model_has_is_refused() {
        let (imported, _) = read(&nested_ifs(4, true)).unwrap();
        assert_eq!(imported.graph.tensors.len(), 1 + 2 + 4 + 8);
        let e = parse(&nested_ifs(40, true)).unwrap_err().to_string();
        assert!(
            e.ends_with("run its subgraphs more than 10000 times"),
            "{e}"
        );
        let deepest = MOST_NESTED as i32;
        assert!(read(&nested_ifs(deepest, false)).is_ok());
        let e = parse(&nested_ifs(deepest + 1, false))
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("within subgraphs more than 64 deep"), "{e}");
    }

    #[test]
    fn a_vector_longer_than_the_file_is_refused() {
        // The subgraphs vector's length, set past anything the file could hold.
        let model = Model::verified(LSTM).unwrap();
        let root = model.table().loc();
        let field = root + model.table().vtable().get(schema::slot(2)) as usize;
        let word = |at: usize| u32::from_le_bytes(LSTM[at..at + 4].try_into().unwrap()) as usize;
        let vector = field + word(field);
        let mut broken = LSTM.to_vec();
        broken[vector..vector + 4].copy_from_slice(&0x3fff_ffffu32.to_le_bytes());
        let e = parse(&broken).unwrap_err().to_string();
        assert!(e.starts_with("TFLite model: not a valid FlatBuffer"), "{e}");
    }

    #[test]
    fn what_is_not_a_model_is_refused_in_one_line() {
        let e = parse(b"not a model").unwrap_err().to_string();
        assert_eq!(
            e,
            "TFLite model: not a TFLite model: no `TFL3` file identifier at bytes 4..8"
        );
        let e = parse(&LSTM[..LSTM.len() / 2]).unwrap_err().to_string();
        assert!(
            e.starts_with("TFLite model: not a valid FlatBuffer: "),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        // A root offset past the end.
        let mut broken = LSTM.to_vec();
        broken[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&broken).is_err());
    }
}
