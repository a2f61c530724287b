//! ONNX models (`.onnx`): the protobuf read with prost (the messages memplan needs are declared
//! in `proto` with their field numbers from onnx.proto, so nothing runs `protoc`), shapes
//! inferred (`infer`), and the graph turned into a dump (here).
//!
//! Nodes in file order become steps, but `Constant` nodes, which hold data as initializers do.
//! Tensors come from the graph's inputs, initializers and node outputs. Initializers, and the outputs of `Constant` and `ConstantOfShape`, are constants; a
//! graph input that is also an initializer is a constant; graph inputs and outputs are
//! always-live (their kinds say so). Sizes come from shapes: inference for the common
//! operators (below), else a fully known `value_info` shape. A dim is `k` times at most one symbolic
//! param (`N`, `batch`...), so a symbolic batch passes through convolutions, pools and
//! flattens; symbolic dims become params of the dump (1 unless bound: `--set`, or a fixed
//! `--input-shape`; the engine warns of each param a scenario leaves at 1). A shape computed
//! from symbolic dims (an exporter's `Shape`, `Gather`, `Concat`, `Reshape` of them) is no
//! constant, so where inference leaves tensors unsized it runs again at three sample values of
//! the dims: a dim equal in all three is that number, one that follows a single dim `k` times
//! in all three is `k` times that param (the third sample checks what two suggest), and one
//! that follows none (a product of two dims, a sum) leaves the tensor unsized, said so.
//! A tensor whose size cannot be inferred owns no bytes and is listed in a
//! warning naming the op that stopped inference; it is never silently zeroed. A node with
//! subgraphs (If, Loop, Scan) is one step: it reads its inputs and what its subgraphs read of
//! the graph around it (they name outer values without listing them as inputs), and writes its
//! outputs and an unsized tensor that stands for what its subgraphs take while it runs, which
//! memplan does not plan: a plan of the model says it is incomplete, and why.
//!
//! Inferred: elementwise unary and binary ops (multidirectional broadcasting), Conv,
//! ConvTranspose, DeformConv, ConvInteger, QLinearConv, the pools (global ones too), Gemm,
//! MatMul, QLinearMatMul, BatchNormalization and the other normalizations, Softmax, Dropout,
//! LRN, Concat, Split, Reshape, Flatten, Transpose, Squeeze/Unsqueeze, Pad, Resize/Upsample
//! (constant scales or sizes), the reductions, Expand, Where, Einsum, Attention, LSTM/GRU/RNN,
//! the quantizations, GatherElements/GatherND and the scatters, OneHot,
//! DepthToSpace/SpaceToDepth, GridSample, RoiAlign, the losses, and
//! Shape/Gather/Slice/Cast/Range/Concat/Unsqueeze and integer arithmetic over values that fold
//! to constants; ONNX Runtime's contrib ops by their own definitions (`infer::contrib`).
//!
//! Remat candidates: each single-output elementwise op's intermediate output, at a cost of its
//! element count times a per-op weight.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use memplan_core::LiveInterval;
use memplan_core::graph::{Declaration, Dim, Graph, Id, RematCandidate, Step, Tensor, TensorKind};
use memplan_core::lower_bound::peak_live;
use prost::Message;

use crate::FormatError;

mod infer;
mod proto;
mod synthetic;

use infer::*;
pub use synthetic::{relu_chain, synthetic_model};

/// How to import: fixed shapes for inputs (by name), replacing their symbolic dims.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Options {
    pub input_shapes: BTreeMap<String, Vec<u64>>,
}

/// An input shape written `NAME=1x3x640x640` that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("`{0}` is not NAME=DxDx.. (e.g. images=1x3x640x640)")]
pub struct BadInputShape(pub String);

/// Reads one `NAME=1x3x640x640` (dims split by `x` or `,`).
pub fn parse_input_shape(text: &str) -> Result<(String, Vec<u64>), BadInputShape> {
    let bad = || BadInputShape(text.to_string());
    let (name, dims) = text.rsplit_once('=').ok_or_else(bad)?;
    let dims = dims
        .split(['x', 'X', ','])
        .map(|d| d.trim().parse::<u64>().map_err(|_| bad()))
        .collect::<Result<Vec<_>, _>>()?;
    if name.trim().is_empty() || dims.is_empty() {
        return Err(bad());
    }
    Ok((name.trim().to_string(), dims))
}

/// Reads shapes separated by `;` or spaces, as the explorer's field takes them.
pub fn parse_input_shapes(text: &str) -> Result<Options, BadInputShape> {
    let input_shapes = text
        .split([';', ' ', '\n'])
        .filter(|s| !s.trim().is_empty())
        .map(parse_input_shape)
        .collect::<Result<_, _>>()?;
    Ok(Options { input_shapes })
}

/// A model read into a graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub graph: Graph,
    pub warnings: Vec<String>,
}

/// The most nodes a model may have.
pub const MAX_NODES: usize = 1_000_000;
/// The largest integer tensor folded to values (shapes, indices).
const MAX_FOLDED: u64 = 4096;

/// Reads an ONNX model.
pub fn parse(bytes: &[u8], options: &Options) -> Result<Imported, FormatError> {
    let bad = |m: String| FormatError::Onnx(m);
    let model = proto::ModelProto::decode(bytes)
        .map_err(|e| bad(format!("the protobuf does not decode: {e}")))?;
    let g = model
        .graph
        .ok_or_else(|| bad("the model has no graph".into()))?;
    if g.node.len() > MAX_NODES {
        return Err(bad(format!(
            "{} nodes, more than the {MAX_NODES} memplan reads",
            g.node.len()
        )));
    }
    // The default operator set's version (the latest where the model names none).
    let opset = (model.opset_import.iter())
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(i64::MAX, |o| o.version);
    let mut warnings = Vec::new();
    let mut vals: HashMap<String, Val> = HashMap::default();
    let mut params: BTreeMap<String, u64> = BTreeMap::new();
    let initializers: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    // The tensors whose size could not be known, with why.
    let mut stopped: Vec<(String, String)> = Vec::new();
    for t in &g.initializer {
        let val = Val::of_tensor(t);
        vals.insert(t.name.clone(), unsized_elements(&t.name, val, &mut stopped));
    }
    let info_shape = |vi: &proto::ValueInfoProto,
                      params: &mut BTreeMap<String, u64>|
     -> (Option<Shape>, Option<&'static str>) {
        let Some(tt) = vi.r#type.as_ref().and_then(|t| t.tensor_type.as_ref()) else {
            return (None, None);
        };
        let shape = tt.shape.as_ref().map(|s| {
            s.dim
                .iter()
                .enumerate()
                .map(|(k, d)| match (&d.dim_value, &d.dim_param) {
                    (Some(v), _) if *v >= 0 => D::n(*v as u64),
                    (_, Some(p)) if !p.is_empty() => {
                        params.entry(p.clone()).or_insert(1);
                        D::param(1, p.clone())
                    }
                    _ => {
                        let p = format!("{}_dim{k}", vi.name);
                        params.entry(p.clone()).or_insert(1);
                        D::param(1, p)
                    }
                })
                .collect()
        });
        (shape, dtype_name(tt.elem_type))
    };
    for vi in &g.input {
        if initializers.contains(vi.name.as_str()) {
            continue;
        }
        // A fixed input's symbolic dims are no params of the dump: nothing is left to bind.
        let (shape, dtype) = match options.input_shapes.get(&vi.name) {
            Some(fixed) => {
                let (_, dtype) = info_shape(vi, &mut BTreeMap::new());
                (Some(fixed.iter().map(|&v| D::n(v)).collect()), dtype)
            }
            None => info_shape(vi, &mut params),
        };
        let val = Val {
            shape,
            dtype: dtype.or(Some("f32")),
            ..Val::default()
        };
        vals.insert(
            vi.name.clone(),
            unsized_elements(&vi.name, val, &mut stopped),
        );
    }
    for name in options.input_shapes.keys() {
        if !g.input.iter().any(|vi| &vi.name == name) {
            let inputs: Vec<&str> = (g.input.iter())
                .filter(|vi| !initializers.contains(vi.name.as_str()))
                .map(|vi| vi.name.as_str())
                .collect();
            return Err(bad(format!(
                "the input shape names `{name}`, which is not an input of the model (its inputs: {})",
                inputs.join(", ")
            )));
        }
    }
    // Params no input uses any more (every input they appeared in was fixed) are dropped.
    let mut value_info: HashMap<&str, (Option<Shape>, Option<&'static str>)> = HashMap::default();
    let mut scratch_params = BTreeMap::new();
    for vi in g.value_info.iter().chain(&g.output) {
        value_info.insert(vi.name.as_str(), info_shape(vi, &mut scratch_params));
    }
    // Shapes, node by node: symbolic dims as they are, and where that leaves tensors unsized
    // (shapes computed from symbolic dims), by the shapes at sample values of the dims.
    let given = vals.clone();
    infer_nodes(&g.node, opset, &value_info, &mut vals, &mut stopped);
    if stopped.iter().any(|(t, _)| vals.contains_key(t)) && !params.is_empty() {
        let samples = SAMPLES.map(|s| {
            let mut vals = sample_inputs(&given, &params, s);
            infer_nodes(&g.node, opset, &value_info, &mut vals, &mut Vec::new());
            vals
        });
        let mut read = 0;
        stopped.retain_mut(|(t, why)| match sampled(t, &params, &samples) {
            Ok(val) => {
                vals.insert(t.clone(), val);
                read += 1;
                false
            }
            Err(Some(not_one)) => {
                *why = not_one.into();
                true
            }
            Err(None) => true,
        });
        if read > 0 {
            warnings.push(format!(
                "tensors whose shapes were read at three sample values of the symbolic dims (each dim a number times a product of symbolic dims): {read}; exact while the model keeps them so (a clamp past the samples, as at a window, goes unseen)"
            ));
        }
    }
    let at_most: Vec<String> = (g.node.iter())
        .flat_map(|n| {
            let sized = |o: &&String| {
                vals.get(o.as_str())
                    .is_some_and(|v| v.at_most && v.shape.is_some())
            };
            (n.output.iter().filter(sized)).map(|o| format!("`{o}` ({})", n.op_type))
        })
        .collect();
    if !at_most.is_empty() {
        let (n, more) = (at_most.len(), if at_most.len() > 20 { ", ..." } else { "" });
        warnings.push(format!(
            "{n} {} on the values the model reads {} planned at the most {} can be, as a static plan must hold {} (a NonZero's count at every element): {}{more}",
            if n == 1 { "tensor whose size depends" } else { "tensors whose sizes depend" },
            if n == 1 { "is" } else { "are" },
            if n == 1 { "it" } else { "they" },
            if n == 1 { "it" } else { "them" },
            at_most[..n.min(20)].join(", ")
        ));
    }
    if !stopped.is_empty() {
        let list: Vec<String> = stopped
            .iter()
            .take(20)
            .map(|(t, why)| format!("`{t}` ({why})"))
            .collect();
        let (n, more) = (stopped.len(), if stopped.len() > 20 { ", ..." } else { "" });
        let (tensors, own) = if n == 1 {
            ("tensor", "owns")
        } else {
            ("tensors", "own")
        };
        warnings.push(format!(
            "{n} {tensors} could not be sized and {own} no bytes in the plan: {}{more}",
            list.join(", "),
        ));
    }

    // The dump: tensors in order of appearance, a step per node.
    let outputs: HashSet<&str> = g.output.iter().map(|o| o.name.as_str()).collect();
    let constant_outputs: HashSet<&str> = g
        .node
        .iter()
        .filter(|n| matches!(n.op_type.as_str(), "Constant" | "ConstantOfShape"))
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    let mut tensors: Vec<Tensor> = Vec::new();
    let mut seen: HashSet<String> = HashSet::default();
    let add =
        |name: &str, kind: TensorKind, tensors: &mut Vec<Tensor>, seen: &mut HashSet<String>| {
            if name.is_empty() || !seen.insert(name.to_string()) {
                return;
            }
            let v = vals.get(name).cloned().unwrap_or_default();
            let kind = if outputs.contains(name) {
                TensorKind::Output
            } else {
                kind
            };
            let tensor = match (&v.shape, v.dtype) {
                (Some(shape), Some(dtype)) => Tensor {
                    id: name.into(),
                    declared: Declaration {
                        shape: Some(
                            shape
                                .iter()
                                .flat_map(|d| {
                                    // `k` times the params, a dim each: the same bytes.
                                    let k = (d.k != 1 || d.p.is_empty()).then_some(Dim::Fixed(d.k));
                                    k.into_iter().chain(d.p.iter().cloned().map(Dim::Param))
                                })
                                .collect(),
                        ),
                        dtype: Some(dtype.into()),
                        ..Declaration::default()
                    }
                    .into(),
                    kind,
                    ..Tensor::default()
                },
                _ => Tensor {
                    id: name.into(),
                    bytes: Some(0),
                    size_unknown: true,
                    kind,
                    ..Tensor::default()
                },
            };
            tensors.push(tensor);
        };
    for vi in &g.input {
        let kind = if initializers.contains(vi.name.as_str()) {
            TensorKind::Constant
        } else {
            TensorKind::Input
        };
        add(&vi.name, kind, &mut tensors, &mut seen);
    }
    for t in &g.initializer {
        add(&t.name, TensorKind::Constant, &mut tensors, &mut seen);
    }
    let mut steps = Vec::with_capacity(g.node.len());
    let mut step_ids: HashSet<String> = HashSet::default();
    let mut candidates = Vec::new();
    for (i, node) in g.node.iter().enumerate() {
        for input in &node.input {
            if !input.is_empty() && !seen.contains(input) {
                warnings.push(format!("`{input}` is read by node {i} ({}) but no input, initializer or node defines it", node.op_type));
                add(input, TensorKind::Input, &mut tensors, &mut seen);
            }
        }
        for out in &node.output {
            let kind = if constant_outputs.contains(out.as_str()) {
                TensorKind::Constant
            } else {
                TensorKind::Intermediate
            };
            add(out, kind, &mut tensors, &mut seen);
        }
        // A Constant node holds data, as an initializer does: its output is an always-live
        // constant, and the node takes no place on the time axis.
        if node.op_type == "Constant" {
            continue;
        }
        let mut writes: Vec<Id> = (node.output.iter())
            .filter(|o| !o.is_empty())
            .map(|o| Id::from(o.as_str()))
            .collect();
        if writes.is_empty() {
            warnings.push(format!(
                "node {i} ({}) writes nothing and is left out",
                node.op_type
            ));
            continue;
        }
        let mut reads: Vec<Id> = (node.input.iter())
            .filter(|i| !i.is_empty())
            .map(|i| Id::from(i.as_str()))
            .collect();
        if subgraphs(node).next().is_some() {
            // What its subgraphs read of the graph around them, it reads; what they take
            // while it runs, an unsized tensor it writes stands for.
            let outer = outer_reads(node).into_iter();
            let outer =
                outer.filter(|name| seen.contains(*name) && !reads.iter().any(|r| r == name));
            reads.extend(outer.map(Id::from).collect::<Vec<_>>());
            let body = subgraphs_tensor(i, node);
            add(&body, TensorKind::Intermediate, &mut tensors, &mut seen);
            writes.push(body.as_str().into());
        }
        let mut id = if node.name.is_empty() {
            format!("{}_{i}", node.op_type)
        } else {
            node.name.clone()
        };
        if !step_ids.insert(id.clone()) {
            id = format!("{id}#{i}");
            step_ids.insert(id.clone());
        }
        let elements = vals
            .get(writes[0].as_str())
            .and_then(|v| v.shape.as_ref())
            .and_then(|s| product(s))
            .and_then(|d| d.known());
        if let (Some(w), Some(n), [out]) = (
            elementwise_weight(&node.op_type),
            elements,
            writes.as_slice(),
        ) && !outputs.contains(out.as_str())
            && vals.get(out.as_str()).is_some_and(|v| v.shape.is_some())
        {
            candidates.push(RematCandidate {
                tensor: out.to_string(),
                recompute_cost: n.saturating_mul(w),
            });
        }
        steps.push(Step {
            id: id.into(),
            op: node.op_type.as_str().into(),
            reads,
            writes,
            cost: elements.unwrap_or(0),
            ..Step::default()
        });
    }
    for o in &g.output {
        if !seen.contains(&o.name) {
            warnings.push(format!("output `{}` is produced by no node", o.name));
            add(&o.name, TensorKind::Output, &mut tensors, &mut seen);
        }
    }
    let name = if g.name.is_empty() {
        model.producer_name.clone()
    } else {
        g.name.clone()
    };
    Ok(Imported {
        graph: Graph {
            name,
            params,
            tensors,
            steps,
            remat_candidates: Some(candidates),
            ..Graph::default()
        },
        warnings,
    })
}

/// Infers every node's outputs in order into `vals`, which holds the graph's inputs and
/// initializers: each from the node's inputs, else from a fully known declared shape; what
/// neither sizes is pushed to `stopped`, with why.
fn infer_nodes(
    nodes: &[proto::NodeProto],
    opset: i64,
    value_info: &HashMap<&str, (Option<Shape>, Option<&'static str>)>,
    vals: &mut HashMap<String, Val>,
    stopped: &mut Vec<(String, String)>,
) {
    for (i, node) in nodes.iter().enumerate() {
        let inputs: Vec<Val> = node
            .input
            .iter()
            .filter(|i| !i.is_empty())
            .map(|i| vals.get(i).cloned().unwrap_or_default())
            .collect();
        let taken = branch_taken(node, &inputs, opset, value_info, vals);
        if subgraphs(node).next().is_some() {
            let body = subgraphs_tensor(i, node);
            match &taken {
                Some((_, peak)) => {
                    vals.insert(body, Val::sized(vec![D::n(*peak)], Some("u8")));
                }
                None => {
                    let why = format!("{}: what its subgraphs take while it runs", node.op_type);
                    stopped.push((body, why));
                }
            }
        }
        let inferred = match taken {
            Some((outputs, _)) => Ok(outputs),
            None => infer(node, &inputs, opset),
        };
        for (k, out) in node
            .output
            .iter()
            .enumerate()
            .filter(|(_, o)| !o.is_empty())
        {
            let given = value_info
                .get(out.as_str())
                .filter(|(s, _)| s.as_ref().is_some_and(|s| s.iter().all(|d| d.p.is_empty())));
            // A size the values decide is the most it can be, unless the file declares it.
            let at_most = matches!(&inferred, Ok(v) if v.get(k).is_some_and(|v| v.at_most))
                && (DATA_DEPENDENT.contains(&node.op_type.as_str()) || node.op_type == "If");
            let val = match (&inferred, given) {
                (Ok(v), _)
                    if v.get(k).is_some_and(|v| v.shape.is_some())
                        && !(at_most && given.is_some()) =>
                {
                    Val {
                        at_most,
                        ..v[k].clone()
                    }
                }
                (_, Some((shape, dtype))) => Val {
                    shape: shape.clone(),
                    dtype: *dtype,
                    ..Val::default()
                },
                (Ok(v), None) => {
                    let why = match v.get(k).and_then(|v| v.why) {
                        Some(why) => why.to_string(),
                        None => format!("no shape for output {k}"),
                    };
                    stopped.push((out.clone(), format!("{}: {why}", node.op_type)));
                    Val::default()
                }
                (Err(why), None) => {
                    stopped.push((out.clone(), format!("{}: {why}", node.op_type)));
                    Val::default()
                }
            };
            let val = Val {
                dtype: val
                    .dtype
                    .or(inputs.first().and_then(|v| v.dtype))
                    .or(Some("f32")),
                ..val
            };
            vals.insert(out.clone(), unsized_elements(out, val, stopped));
        }
    }
}

/// The sample values of the symbolic dims, for param `i` (in name order) in sample `s`:
/// distinct primes for up to ten params (past them they repeat, and a dim two params could
/// explain is left unsized), none 1 (a dim of 1 broadcasts) and none a power of two (as most
/// constant dims are), small enough to stay inside a model's own bounds (its positions): the
/// first five params' are under 60.
const SAMPLES: [usize; 3] = [0, 1, 2];
const PRIMES: [u64; 30] = [
    5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101,
    103, 107, 109, 113, 127, 131,
];

fn sample_value(i: usize, s: usize) -> u64 {
    PRIMES[(3 * i + s) % PRIMES.len()]
}

/// `given` (the graph's inputs and initializers) with every symbolic dim at its value in
/// sample `s`.
fn sample_inputs(
    given: &HashMap<String, Val>,
    params: &BTreeMap<String, u64>,
    s: usize,
) -> HashMap<String, Val> {
    let value = |p: &str| {
        params
            .keys()
            .position(|q| q == p)
            .map(|i| sample_value(i, s))
    };
    (given.iter())
        .map(|(name, v)| {
            let shape = (v.shape.as_ref()).map(|shape| {
                (shape.iter())
                    .map(|d| {
                        let values: Option<Vec<u64>> = d.p.iter().map(|p| value(p)).collect();
                        match values {
                            Some(values) => {
                                D::n(values.iter().fold(d.k, |a, &x| a.saturating_mul(x)))
                            }
                            None => d.clone(),
                        }
                    })
                    .collect()
            });
            (name.clone(), Val { shape, ..v.clone() })
        })
        .collect()
}

/// Tensor `t`'s shape from its shapes in the three samples: each dim the same in all three is
/// that number, and one that changes is `k` times the one product of symbolic dims it follows
/// in all three ([`monomial`]). `Err(None)` where a sample did not size it; `Err(why)` where a
/// dim follows no such product (a sum, a clamp).
fn sampled(
    t: &str,
    params: &BTreeMap<String, u64>,
    samples: &[HashMap<String, Val>; 3],
) -> Result<Val, Option<&'static str>> {
    let vals: Vec<&Val> = (samples.iter().map(|s| s.get(t)))
        .collect::<Option<_>>()
        .ok_or(None)?;
    let shapes: Vec<&Shape> = (vals.iter().map(|v| v.shape.as_ref()))
        .collect::<Option<_>>()
        .ok_or(None)?;
    let rank = shapes[0].len();
    let not_one =
        Some("a dim of it is no number times a product of symbolic dims: a sum, or a clamp");
    if shapes.iter().any(|s| s.len() != rank) {
        return Err(not_one);
    }
    let values: Vec<[u64; 3]> = (0..params.len())
        .map(|i| SAMPLES.map(|s| sample_value(i, s)))
        .collect();
    let shape = (0..rank)
        .map(|k| {
            let dims: Vec<u64> = shapes.iter().map(|s| s[k].known()).collect::<Option<_>>()?;
            let dims = [dims[0], dims[1], dims[2]];
            if dims.iter().all(|&d| d == dims[0]) {
                return Some(D::n(dims[0]));
            }
            let (k, powers) = monomial(dims, &values)?;
            let p = (params.keys().zip(powers))
                .flat_map(|(p, e)| std::iter::repeat_n(p.clone(), e as usize))
                .collect();
            Some(D { k, p })
        })
        .collect::<Option<Shape>>()
        .ok_or(not_one)?;
    Ok(Val::sized(shape, vals[0].dtype))
}

/// The one `k` and powers `e` with `dims[s] == k * prod(values[i][s]^e[i])` in every sample `s`;
/// `None` where none fits, or more than one (params whose samples repeat), or the powers to
/// try pass 512 (a product of nine params: each dim of each tensor so read tries them, so a
/// hostile model cannot make the import slow). Each power is at most the times its value
/// divides the dim in every sample; with distinct primes for every param and sample, one fit
/// at most exists.
fn monomial(dims: [u64; 3], values: &[[u64; 3]]) -> Option<(u64, Vec<u32>)> {
    const MOST_TRIED: u64 = 512;
    let divides = |mut d: u64, v: u64| {
        let mut n = 0u32;
        while d != 0 && d.is_multiple_of(v) && n < 16 {
            (d, n) = (d / v, n + 1);
        }
        n
    };
    let most: Vec<u32> = (values.iter())
        .map(|v| (0..3).map(|s| divides(dims[s], v[s])).min().unwrap_or(0))
        .collect();
    let tried = (most.iter()).try_fold(1u64, |a, &m| a.checked_mul(u64::from(m) + 1));
    if tried.is_none_or(|n| n > MOST_TRIED) {
        return None;
    }
    let mut found = None;
    let mut powers = vec![0u32; values.len()];
    loop {
        let k = SAMPLES.map(|s| {
            let by = (values.iter().zip(&powers))
                .try_fold(1u64, |a, (v, &e)| a.checked_mul(v[s].checked_pow(e)?))?;
            dims[s].is_multiple_of(by).then(|| dims[s] / by)
        });
        if let [Some(a), Some(b), Some(c)] = k
            && a == b
            && b == c
            && a > 0
        {
            if found.is_some() {
                return None;
            }
            found = Some((a, powers.clone()));
        }
        // The next powers, as an odometer.
        let Some(i) = (0..powers.len()).find(|&i| powers[i] < most[i]) else {
            return found;
        };
        powers[i] += 1;
        powers[..i].fill(0);
    }
}

/// An `If` whose condition is a constant runs one branch: its outputs, inferred in the scope
/// around it, and the most bytes its own values hold at once (each from the node that writes
/// it to the last that reads it, in order; its outputs are the `If`'s). `None` where the
/// condition is not known, or the branch leaves a value unsized (or holds control flow of its
/// own, which it sizes as none).
fn branch_taken(
    node: &proto::NodeProto,
    inputs: &[Val],
    opset: i64,
    value_info: &HashMap<&str, (Option<Shape>, Option<&'static str>)>,
    vals: &mut HashMap<String, Val>,
) -> Option<(Vec<Val>, u64)> {
    if node.op_type != "If" || !matches!(node.domain.as_str(), "" | "ai.onnx") {
        return None;
    }
    let condition = *inputs.first()?.konst.as_ref()?.first()?;
    let name = if condition != 0 {
        "then_branch"
    } else {
        "else_branch"
    };
    let branch = node
        .attribute
        .iter()
        .find(|a| a.name == name)?
        .g
        .as_deref()?;
    if branch.node.iter().any(|n| subgraphs(n).next().is_some()) {
        return None;
    }
    // The branch's values join the scope around it while it is read, then leave it: no copy
    // of the scope (a model of many such `If`s would copy it each time). A name the scope
    // already holds (which ONNX forbids a subgraph to shadow) keeps the branch's value.
    let fresh: Vec<&str> = (branch.node.iter().flat_map(|n| &n.output))
        .filter(|o| !o.is_empty() && !vals.contains_key(o.as_str()))
        .map(String::as_str)
        .collect();
    let mut stopped = Vec::new();
    infer_nodes(&branch.node, opset, value_info, vals, &mut stopped);
    let taken = (stopped.is_empty())
        .then(|| branch_figures(branch, vals))
        .flatten();
    for name in fresh {
        vals.remove(name);
    }
    taken
}

/// A branch's outputs, inferred in `scope`, and the most bytes its own values hold at once.
fn branch_figures(
    branch: &proto::GraphProto,
    scope: &HashMap<String, Val>,
) -> Option<(Vec<Val>, u64)> {
    // Where a size the values decide is in the branch, its outputs are at their most too.
    let at_most = (branch.node.iter().flat_map(|n| &n.output))
        .any(|o| scope.get(o).is_some_and(|v| v.at_most));
    let outputs: Vec<Val> = (branch.output.iter())
        .map(|o| {
            Some(Val {
                at_most,
                ..scope.get(&o.name)?.clone()
            })
        })
        .collect::<Option<_>>()?;
    // Each of its own values: its bytes, and the first and last node that touch it.
    let own: HashSet<&str> = (branch.output.iter().map(|o| o.name.as_str())).collect();
    let mut spans: HashMap<&str, (u32, u32, u64)> = HashMap::default();
    for (k, n) in branch.node.iter().enumerate() {
        let k = u32::try_from(k).ok()?;
        for name in &n.input {
            if let Some(span) = spans.get_mut(name.as_str()) {
                span.1 = k;
            }
        }
        for out in n
            .output
            .iter()
            .filter(|o| !o.is_empty() && !own.contains(o.as_str()))
        {
            let v = scope.get(out)?;
            let elements = product(v.shape.as_ref()?)?.known()?;
            let bytes = v
                .dtype?
                .parse::<memplan_core::DType>()
                .ok()?
                .bytes_for(elements)?;
            spans.insert(out.as_str(), (k, k, bytes));
        }
    }
    // The most bytes live at any node, where all of them together fit 64 bits.
    (spans.values()).try_fold(0u64, |all, s| all.checked_add(s.2))?;
    let spans =
        (spans.values()).map(|&(first, last, bytes)| (LiveInterval::new(first, last), bytes));
    Some((outputs, peak_live(branch.node.len(), spans)))
}

/// The subgraphs of a node: an `If`'s branches, a `Loop`'s or `Scan`'s body.
fn subgraphs(node: &proto::NodeProto) -> impl Iterator<Item = &proto::GraphProto> {
    (node.attribute.iter()).flat_map(|a| a.g.as_deref().into_iter().chain(&a.graphs))
}

/// The unsized tensor that node `i` writes for what its subgraphs take while it runs, so that
/// a plan of the model says it is incomplete.
fn subgraphs_tensor(i: usize, node: &proto::NodeProto) -> String {
    format!("{}#{i} subgraphs", node.op_type)
}

/// The values `node`'s subgraphs read from the graph around the node: those they use (as a
/// node's input or a subgraph's output) and do not define (as an input, an initializer or a
/// node's output of theirs or of a subgraph enclosing them), in order of first use. It recurses
/// once per level of subgraphs, which the protobuf's decoding bounds (100 levels of messages).
fn outer_reads(node: &proto::NodeProto) -> Vec<&str> {
    fn read<'a>(
        name: &'a str,
        scopes: &[HashSet<&'a str>],
        listed: &mut HashSet<&'a str>,
        out: &mut Vec<&'a str>,
    ) {
        if !scopes.iter().any(|s| s.contains(name)) && listed.insert(name) {
            out.push(name);
        }
    }
    fn walk<'a>(
        g: &'a proto::GraphProto,
        scopes: &mut Vec<HashSet<&'a str>>,
        listed: &mut HashSet<&'a str>,
        out: &mut Vec<&'a str>,
    ) {
        let inputs = g.input.iter().map(|v| v.name.as_str());
        scopes.push(
            inputs
                .chain(g.initializer.iter().map(|t| t.name.as_str()))
                .collect(),
        );
        for n in &g.node {
            for name in n.input.iter().filter(|i| !i.is_empty()) {
                read(name, scopes, listed, out);
            }
            for sub in subgraphs(n) {
                walk(sub, scopes, listed, out);
            }
            if let Some(here) = scopes.last_mut() {
                here.extend(n.output.iter().map(String::as_str));
            }
        }
        for o in &g.output {
            read(&o.name, scopes, listed, out);
        }
        scopes.pop();
    }
    let (mut scopes, mut listed, mut out) = (Vec::new(), HashSet::default(), Vec::new());
    for sub in subgraphs(node) {
        walk(sub, &mut scopes, &mut listed, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_model_reads_back_with_every_shape_inferred() {
        let bytes = synthetic_model(5);
        assert!(bytes.len() > 5_000_000);
        let imported = parse(&bytes, &Options::default()).unwrap();
        assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
        let g = imported.graph;
        assert!(g.tensors.iter().all(|t| !t.elided));
        let resolved = g.resolve().unwrap();
        let relu = resolved.tensor_of(&g, "relu0").unwrap();
        assert_eq!(resolved.tensors[relu].bytes, 256 * 56 * 56 * 4);
        // Relu outputs are remat candidates; the Conv outputs (not elementwise) are not.
        let candidates = g.remat_candidates.unwrap();
        assert!(candidates.iter().any(|c| c.tensor == "relu0"));
        assert!(candidates.iter().all(|c| !c.tensor.starts_with("conv")));
    }

    #[test]
    fn input_shapes_read_as_written() {
        assert_eq!(
            parse_input_shape("images=1x3x640x640"),
            Ok(("images".into(), vec![1, 3, 640, 640]))
        );
        assert_eq!(parse_input_shape("a:b=2,3"), Ok(("a:b".into(), vec![2, 3])));
        assert!(parse_input_shape("images").is_err());
        assert!(parse_input_shape("images=1xx3").is_err());
        let o = parse_input_shapes("x=1x3; y=4 ").unwrap();
        assert_eq!(o.input_shapes.len(), 2);
        assert_eq!(parse_input_shapes("").unwrap(), Options::default());
    }

    /// Four-bit weights are half a byte an element (two-bit ones a quarter) (an int4-quantized model sized as f32 would
    /// be eight times too large); strings and element types this reader does not know stay
    /// unsized, and the warning says why, rather than being guessed at four bytes.
    #[test]
    fn element_types_size_as_onnx_defines_them_or_are_named_unsized() {
        let input = |name: &str, elem_type: i32| proto::ValueInfoProto {
            name: name.into(),
            r#type: Some(proto::TypeProto {
                tensor_type: Some(proto::TensorTypeProto {
                    elem_type,
                    shape: Some(proto::TensorShapeProto {
                        dim: vec![proto::Dimension {
                            dim_value: Some(7),
                            dim_param: None,
                        }],
                    }),
                }),
            }),
        };
        let weights = |name: &str, data_type: i32| proto::TensorProto {
            name: name.into(),
            dims: vec![7],
            data_type,
            ..proto::TensorProto::default()
        };
        let model = proto::ModelProto {
            graph: Some(proto::GraphProto {
                input: vec![input("text", 8), input("future", 99), input("x", 1)],
                initializer: vec![
                    weights("w_i2", 26),
                    weights("w_i4", 22),
                    weights("w_u4", 21),
                    weights("w_f4", 23),
                    weights("scale", 24),
                ],
                node: vec![proto::NodeProto {
                    op_type: "Identity".into(),
                    input: vec!["text".into()],
                    output: vec!["copy".into()],
                    ..proto::NodeProto::default()
                }],
                output: vec![input("copy", 8)],
                ..proto::GraphProto::default()
            }),
            ..proto::ModelProto::default()
        };
        let imported = parse(&model.encode_to_vec(), &Options::default()).unwrap();
        let resolved = imported.graph.resolve().unwrap();
        let bytes =
            |name: &str| resolved.tensors[resolved.tensor_of(&imported.graph, name).unwrap()].bytes;
        assert_eq!(
            [
                bytes("w_i2"),
                bytes("w_i4"),
                bytes("w_u4"),
                bytes("w_f4"),
                bytes("scale"),
                bytes("x")
            ],
            [2, 4, 4, 4, 7, 28]
        );
        let elided: Vec<&str> = (imported.graph.tensors.iter())
            .filter(|t| t.size_unknown)
            .map(|t| t.id.as_str())
            .collect();
        assert_eq!(elided, ["text", "future", "copy"]);
        let warning = &imported.warnings[0];
        assert!(
            warning.contains("`text` (strings have no fixed size an element)"),
            "{warning}"
        );
        assert!(
            warning.contains(
                "`future` (an element type this reader does not know: no size an element)"
            ),
            "{warning}"
        );
    }

    /// A Constant node holds data: its output is a constant and the node no step; an input
    /// shape for a name the model lacks is refused, naming the inputs it has.
    #[test]
    fn constant_nodes_are_data_and_an_unknown_input_names_the_real_ones() {
        let x = proto::ValueInfoProto {
            name: "x".into(),
            r#type: Some(proto::TypeProto {
                tensor_type: Some(proto::TensorTypeProto {
                    elem_type: 1,
                    shape: Some(proto::TensorShapeProto {
                        dim: vec![proto::Dimension {
                            dim_value: None,
                            dim_param: Some("N".into()),
                        }],
                    }),
                }),
            }),
        };
        let node = |op: &str, input: &[&str], output: &str| proto::NodeProto {
            op_type: op.into(),
            input: input.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            attribute: if op == "Constant" {
                vec![proto::AttributeProto {
                    name: "value".into(),
                    t: Some(proto::TensorProto {
                        dims: vec![1],
                        data_type: 1,
                        float_data: vec![2.0],
                        ..proto::TensorProto::default()
                    }),
                    ..proto::AttributeProto::default()
                }]
            } else {
                Vec::new()
            },
            ..proto::NodeProto::default()
        };
        let model = proto::ModelProto {
            graph: Some(proto::GraphProto {
                input: vec![x.clone()],
                node: vec![
                    node("Constant", &[], "two"),
                    node("Mul", &["x", "two"], "y"),
                ],
                output: vec![proto::ValueInfoProto {
                    name: "y".into(),
                    ..x
                }],
                ..proto::GraphProto::default()
            }),
            ..proto::ModelProto::default()
        };
        let bytes = model.encode_to_vec();
        let g = parse(&bytes, &Options::default()).unwrap().graph;
        let ops: Vec<&str> = g.steps.iter().map(|s| &*s.op).collect();
        assert_eq!(ops, ["Mul"]);
        let two = g.tensors.iter().find(|t| t.id == "two").unwrap();
        assert_eq!(two.kind, TensorKind::Constant);
        assert!(g.resolve().is_ok());
        let wrong = parse_input_shapes("data=1x3").unwrap();
        let e = parse(&bytes, &wrong).unwrap_err().to_string();
        assert!(e.contains("`data`") && e.contains("its inputs: x"), "{e}");
    }

    /// An `f32` graph input of fixed `dims`.
    fn input(name: &str, dims: &[i64]) -> proto::ValueInfoProto {
        let dim = (dims.iter())
            .map(|&d| proto::Dimension {
                dim_value: Some(d),
                dim_param: None,
            })
            .collect();
        proto::ValueInfoProto {
            name: name.into(),
            r#type: Some(proto::TypeProto {
                tensor_type: Some(proto::TensorTypeProto {
                    elem_type: 1,
                    shape: Some(proto::TensorShapeProto { dim }),
                }),
            }),
        }
    }

    /// A one-dimensional `i64` (`floats`: `f32`) initializer.
    fn constant(name: &str, ints: &[i64], floats: &[f32]) -> proto::TensorProto {
        proto::TensorProto {
            name: name.into(),
            dims: vec![(ints.len() + floats.len()) as i64],
            data_type: if floats.is_empty() { 7 } else { 1 },
            int64_data: ints.to_vec(),
            float_data: floats.to_vec(),
            ..proto::TensorProto::default()
        }
    }

    /// A model of `nodes` over `inputs` and `initializers` whose output `y` has no declared
    /// shape, imported.
    fn imported(
        inputs: Vec<proto::ValueInfoProto>,
        initializers: Vec<proto::TensorProto>,
        nodes: Vec<proto::NodeProto>,
    ) -> Imported {
        let model = proto::ModelProto {
            graph: Some(proto::GraphProto {
                input: inputs,
                initializer: initializers,
                node: nodes,
                output: vec![proto::ValueInfoProto {
                    name: "y".into(),
                    r#type: None,
                }],
                ..proto::GraphProto::default()
            }),
            ..proto::ModelProto::default()
        };
        parse(&model.encode_to_vec(), &Options::default()).unwrap()
    }

    /// The bytes inference gives tensor `name` of `graph`; `None` when it leaves it unsized.
    fn bytes_of(graph: &Graph, name: &str) -> Option<u64> {
        let resolved = graph.resolve().unwrap();
        let t = resolved.tensor_of(graph, name).unwrap();
        (!graph.tensors[t].size_unknown).then_some(resolved.tensors[t].bytes)
    }

    /// The bytes inference gives output `y` of a model of one `node`.
    fn inferred_bytes(
        inputs: Vec<proto::ValueInfoProto>,
        initializers: Vec<proto::TensorProto>,
        node: proto::NodeProto,
    ) -> Option<u64> {
        bytes_of(&imported(inputs, initializers, vec![node]).graph, "y")
    }

    fn node(op: &str, inputs: &[&str], attribute: Vec<proto::AttributeProto>) -> proto::NodeProto {
        proto::NodeProto {
            op_type: op.into(),
            input: inputs.iter().map(|&i| i.into()).collect(),
            output: vec!["y".into()],
            attribute,
            ..proto::NodeProto::default()
        }
    }

    /// Shape arithmetic on floats folds as the float type computes it: torchvision's detection
    /// models size their input's resize from the shorter side's reciprocal times 320, floored.
    /// At 100 by 107 the `f32` product is 319.99997 (ONNX Runtime 1.32.0 resizes to 319, where
    /// `f64` gives 320); at 103 by 110 it is 320.00003 (320, where `f64` gives 319).
    #[test]
    fn float_shape_arithmetic_folds_in_the_float_type() {
        let to = |op: &str, inputs: &[&str], output: &str| proto::NodeProto {
            output: vec![output.into()],
            ..node(op, inputs, Vec::new())
        };
        for (hw, expected) in [([100, 107], [319, 342]), ([103, 110], [320, 341])] {
            let mut min = to("ReduceMin", &["c"], "lo");
            min.attribute = vec![int_attribute("keepdims", 0)];
            let cast = |input: &str, output: &str, to_type: i64| proto::NodeProto {
                attribute: vec![int_attribute("to", to_type)],
                ..to("Cast", &[input], output)
            };
            let mut concat = to("Concat", &["nc", "ints"], "target");
            concat.attribute = vec![int_attribute("axis", 0)];
            let nodes = vec![
                min,
                cast("lo", "f", 1),
                to("Reciprocal", &["f"], "r"),
                to("Mul", &["r", "k"], "s"),
                cast("c", "hw", 1),
                to("Mul", &["hw", "s"], "scaled"),
                to("Floor", &["scaled"], "fl"),
                cast("fl", "ints", 7),
                concat,
                to("ConstantOfShape", &["target"], "y"),
            ];
            let constants = vec![
                constant("c", &hw, &[]),
                constant("k", &[], &[320.0]),
                constant("nc", &[1, 3], &[]),
            ];
            let imported = imported(Vec::new(), constants, nodes);
            let y = imported.graph.tensors.iter().find(|t| t.id == "y").unwrap();
            let dims = [1, 3, expected[0], expected[1]].map(Dim::Fixed);
            assert_eq!(y.declared.shape, Some(dims.to_vec()), "{hw:?}");
        }
    }

    /// An `If` whose condition is a constant runs the branch it picks: its outputs are that
    /// branch's, and what its subgraphs take while it runs is the most bytes the branch's own
    /// values hold at once (then: `a` and `b`, 24 bytes each, live together).
    #[test]
    fn an_if_of_a_constant_condition_is_sized_by_the_branch_it_runs() {
        let to = |op: &str, inputs: &[&str], output: &str| proto::NodeProto {
            output: vec![output.into()],
            ..node(op, inputs, Vec::new())
        };
        let branch = |nodes: Vec<proto::NodeProto>, output: &str| {
            let graph = proto::GraphProto {
                node: nodes,
                output: vec![proto::ValueInfoProto {
                    name: output.into(),
                    r#type: None,
                }],
                ..proto::GraphProto::default()
            };
            Some(Box::new(graph))
        };
        let then = branch(
            vec![
                to("Relu", &["x"], "a"),
                to("Add", &["a", "a"], "b"),
                to("Mul", &["b", "x"], "t"),
            ],
            "t",
        );
        let mut concat = to("Concat", &["x", "x"], "e");
        concat.attribute = vec![int_attribute("axis", 0)];
        let otherwise = branch(vec![concat], "e");
        for (condition, y, body) in [(1, 2 * 3 * 4, 48), (0, 4 * 3 * 4, 0)] {
            let attribute = |name: &str, g| proto::AttributeProto {
                name: name.into(),
                g,
                ..proto::AttributeProto::default()
            };
            let node = proto::NodeProto {
                attribute: vec![
                    attribute("then_branch", then.clone()),
                    attribute("else_branch", otherwise.clone()),
                ],
                ..node("If", &["condition"], Vec::new())
            };
            let constants = vec![constant("condition", &[condition], &[])];
            let imported = imported(vec![input("x", &[2, 3])], constants, vec![node]);
            assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
            assert_eq!(bytes_of(&imported.graph, "y"), Some(y), "{condition}");
            assert_eq!(
                bytes_of(&imported.graph, "If#0 subgraphs"),
                Some(body),
                "{condition}"
            );
        }
    }

    /// An output whose size the values decide is sized at the most it can be, as a static plan
    /// must hold it, and the warning names it; where the file declares its shape, the
    /// declaration stands.
    #[test]
    fn sizes_the_values_decide_are_planned_at_their_most() {
        let to = |op: &str, inputs: &[&str], outputs: &[&str]| proto::NodeProto {
            output: outputs.iter().map(|&o| o.into()).collect(),
            ..node(op, inputs, Vec::new())
        };
        let mut condition = input("condition", &[2]);
        condition
            .r#type
            .as_mut()
            .unwrap()
            .tensor_type
            .as_mut()
            .unwrap()
            .elem_type = 9;
        let inputs = vec![
            input("x", &[2, 3]),
            input("boxes", &[1, 5, 4]),
            input("scores", &[1, 2, 5]),
            input("k", &[1]),
            condition,
        ];
        let mut compress = to("Compress", &["x", "condition"], &["compressed"]);
        compress.attribute = vec![int_attribute("axis", 0)];
        let nodes = vec![
            to("NonZero", &["x"], &["y"]),
            to("Unique", &["x"], &["u", "first", "inverse", "counts"]),
            to("NonMaxSuppression", &["boxes", "scores", "three"], &["nms"]),
            to("NonMaxSuppression", &["boxes", "scores", "k"], &["nms_any"]),
            to("TopK", &["x", "k"], &["top", "top_indices"]),
            compress,
            to("Compress", &["x", "condition"], &["compressed_flat"]),
        ];
        let imported = imported(inputs, vec![constant("three", &[3], &[])], nodes);
        let bytes = |name: &str| bytes_of(&imported.graph, name);
        assert_eq!(bytes("y"), Some(2 * 6 * 8));
        let unique = ["u", "first", "inverse", "counts"].map(bytes);
        assert_eq!(unique, [6 * 4, 6 * 8, 6 * 8, 6 * 8].map(Some));
        // Three a class of each of the 2 classes, of 1 batch; any of the 5 boxes where the
        // most is no constant.
        assert_eq!(bytes("nms"), Some(2 * 3 * 3 * 8));
        assert_eq!(bytes("nms_any"), Some(2 * 5 * 3 * 8));
        assert_eq!(bytes("top"), Some(2 * 3 * 4));
        // The condition's 2 slices of the 2, and 2 of the 6 elements flattened.
        assert_eq!(bytes("compressed"), Some(2 * 3 * 4));
        assert_eq!(bytes("compressed_flat"), Some(2 * 4));
        let warnings = imported.warnings.join("\n");
        assert!(
            warnings.contains(
                "10 tensors whose sizes depend on the values the model reads are planned at the most they can be, as a static plan must hold them (a NonZero's count at every element): `y` (NonZero), `u` (Unique), `first` (Unique), `counts` (Unique), `nms` (NonMaxSuppression)"
            ),
            "{warnings}"
        );
        // A declared shape stands.
        let mut x = input("y", &[2, 1]);
        x.r#type
            .as_mut()
            .unwrap()
            .tensor_type
            .as_mut()
            .unwrap()
            .elem_type = 7;
        let model = proto::ModelProto {
            graph: Some(proto::GraphProto {
                input: vec![input("x", &[2, 3])],
                node: vec![to("NonZero", &["x"], &["y"])],
                output: vec![x],
                ..proto::GraphProto::default()
            }),
            ..proto::ModelProto::default()
        };
        let declared = parse(&model.encode_to_vec(), &Options::default()).unwrap();
        assert_eq!(bytes_of(&declared.graph, "y"), Some(2 * 8));
        assert!(declared.warnings.is_empty(), "{:?}", declared.warnings);
    }

    /// A Dropout's mask has its input's shape, in its input's element type before opset 10 and a
    /// bool each from 10, as ONNX Runtime 1.32.0 allocates it (where onnx's own inference
    /// leaves it unsized before 12).
    #[test]
    fn a_dropouts_mask_is_sized_as_onnx_runtime_allocates_it() {
        for (opset, mask) in [(7, 2 * 3 * 4), (9, 2 * 3 * 4), (10, 2 * 3), (12, 2 * 3)] {
            let dropout = proto::NodeProto {
                output: vec!["y".into(), "mask".into()],
                ..node("Dropout", &["x"], Vec::new())
            };
            let model = proto::ModelProto {
                opset_import: vec![proto::OperatorSetIdProto {
                    domain: String::new(),
                    version: opset,
                }],
                graph: Some(proto::GraphProto {
                    input: vec![input("x", &[2, 3])],
                    node: vec![dropout],
                    ..proto::GraphProto::default()
                }),
                ..proto::ModelProto::default()
            };
            let imported = parse(&model.encode_to_vec(), &Options::default()).unwrap();
            assert!(
                imported.warnings.is_empty(),
                "{opset}: {:?}",
                imported.warnings
            );
            assert_eq!(
                bytes_of(&imported.graph, "mask"),
                Some(mask),
                "opset {opset}"
            );
        }
    }

    /// A convolution whose weights have too few dims for what it reads of them (found by
    /// fuzzing: the channel count indexed an empty shape) leaves its output unsized, as any
    /// inference that stops does, where it panicked.
    #[test]
    fn a_convolution_with_weights_of_too_few_dims_is_unsized_not_a_panic() {
        // With `kernel_shape` the weights give only the channels; without, their spatial dims.
        for (kernel_shape, weights) in [(Some(vec![3, 3]), &[][..]), (None, &[4][..])] {
            let attribute = (kernel_shape.into_iter())
                .map(|ints| proto::AttributeProto {
                    name: "kernel_shape".into(),
                    ints,
                    ..proto::AttributeProto::default()
                })
                .collect();
            let inputs = vec![input("x", &[1, 3, 8, 8]), input("w", weights)];
            let conv = node("Conv", &["x", "w"], attribute);
            assert_eq!(
                inferred_bytes(inputs, Vec::new(), conv),
                None,
                "{weights:?}"
            );
        }
    }

    /// `Einsum`'s labels, explicit and implicit (the ellipsis first, then the labels used
    /// once, in order), and an equation of labels that are not letters, which stops inference.
    #[test]
    fn einsum_reads_its_equation_and_stops_at_one_it_cannot_read() {
        type Case<'a> = (&'a str, &'a [i64], &'a [i64], Option<u64>);
        let cases: [Case; 3] = [
            (
                "bij, bjk -> bik",
                &[2, 3, 4],
                &[2, 4, 5],
                Some(2 * 3 * 5 * 4),
            ),
            ("...ij,...jk", &[7, 2, 3], &[1, 3, 4], Some(7 * 2 * 4 * 4)),
            ("\u{e9}i,\u{e9}i->i", &[2, 3], &[2, 3], None),
        ];
        for (equation, a, b, bytes) in cases {
            let equation_attr = proto::AttributeProto {
                name: "equation".into(),
                s: equation.as_bytes().to_vec(),
                ..proto::AttributeProto::default()
            };
            let einsum = node("Einsum", &["a", "b"], vec![equation_attr]);
            let inputs = vec![input("a", a), input("b", b)];
            assert_eq!(
                inferred_bytes(inputs, Vec::new(), einsum),
                bytes,
                "{equation}"
            );
        }
    }

    /// Optional inputs are read by their position, an empty name for one left out: `Slice`'s
    /// steps without its axes, `Resize`'s scales or sizes without its roi, and `Pad`'s axes
    /// (where a symbolic or unpadded dim keeps its size).
    #[test]
    fn optional_inputs_left_out_leave_the_others_at_their_positions() {
        let x = || vec![input("x", &[1, 3, 8, 8])];
        let ints = |name: &str, v: &[i64]| constant(name, v, &[]);
        // Every other column of the last axis: 1x3x8x4, f32.
        let slice = node("Slice", &["x", "s", "e", "", "st"], Vec::new());
        let (starts, ends) = (ints("s", &[0, 0, 0, 0]), ints("e", &[1, 3, 8, 8]));
        let bounds = vec![starts, ends, ints("st", &[1, 1, 1, 2])];
        assert_eq!(inferred_bytes(x(), bounds, slice), Some(3 * 8 * 4 * 4));
        // Doubled, by scales then by sizes.
        let scales = vec![constant("sc", &[], &[1.0, 1.0, 2.0, 2.0])];
        let resize = node("Resize", &["x", "", "sc"], Vec::new());
        assert_eq!(inferred_bytes(x(), scales, resize), Some(3 * 16 * 16 * 4));
        let sizes = vec![ints("sz", &[1, 3, 16, 16])];
        let resize = node("Resize", &["x", "", "", "sz"], Vec::new());
        assert_eq!(inferred_bytes(x(), sizes, resize), Some(3 * 16 * 16 * 4));
        // Two more rows, of the last two axes only.
        let pads = vec![ints("p", &[1, 0, 1, 0]), ints("a", &[2, 3])];
        let pad = node("Pad", &["x", "p", "", "a"], Vec::new());
        assert_eq!(inferred_bytes(x(), pads, pad), Some(3 * 10 * 8 * 4));
    }

    /// Shapes computed from symbolic dims are read from three sample values of them: a
    /// reshape to `[N, 2, 2]` (its target from `x`'s own shape) has `N` as its first dim, one to
    /// `[N * M]` the product (as two dims, the same bytes), and one to `[N + M]` is no product:
    /// unsized, and said so.
    #[test]
    fn shapes_computed_from_symbolic_dims_follow_them() {
        let dim = |d: &str| match d.parse::<i64>() {
            Ok(v) => proto::Dimension {
                dim_value: Some(v),
                dim_param: None,
            },
            Err(_) => proto::Dimension {
                dim_value: None,
                dim_param: Some(d.into()),
            },
        };
        let mut x = input("x", &[]);
        let tensor_type = x.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
        tensor_type.shape.as_mut().unwrap().dim = vec![dim("N"), dim("M")];
        let to = |output: &str, op: &str, inputs: &[&str]| proto::NodeProto {
            output: vec![output.into()],
            ..node(op, inputs, Vec::new())
        };
        let ints = |name: &str, v: &[i64]| constant(name, v, &[]);
        let mut zero = ints("zero", &[0]);
        zero.dims.clear();
        let mut one = ints("one", &[1]);
        one.dims.clear();
        let nodes = vec![
            to("shape", "Shape", &["x"]),
            to("n", "Gather", &["shape", "zero"]),
            to("m", "Gather", &["shape", "one"]),
            to("n1", "Unsqueeze", &["n", "axes"]),
            to("target", "Concat", &["n1", "twos"]),
            to("y", "Reshape", &["x", "target"]),
            to("nm", "Mul", &["n", "m"]),
            to("nm1", "Unsqueeze", &["nm", "axes"]),
            to("flat", "Reshape", &["x", "nm1"]),
            to("sum", "Add", &["n", "m"]),
            to("sum1", "Unsqueeze", &["sum", "axes"]),
            to("summed", "Reshape", &["x", "sum1"]),
        ];
        let mut concat = nodes;
        concat[4].attribute = vec![int_attribute("axis", 0)];
        let constants = vec![zero, one, ints("axes", &[0]), ints("twos", &[2, 2])];
        let imported = imported(vec![x], constants, concat);
        let y = imported.graph.tensors.iter().find(|t| t.id == "y").unwrap();
        let n = Dim::Param("N".into());
        assert_eq!(
            y.declared.shape,
            Some(vec![n, Dim::Fixed(2), Dim::Fixed(2)])
        );
        let flat = imported
            .graph
            .tensors
            .iter()
            .find(|t| t.id == "flat")
            .unwrap();
        let m = Dim::Param("M".into());
        assert_eq!(flat.declared.shape, Some(vec![m, Dim::Param("N".into())]));
        assert_eq!(bytes_of(&imported.graph, "summed"), None);
        let warnings = imported.warnings.join("\n");
        assert!(
            warnings
                .contains("`summed` (a dim of it is no number times a product of symbolic dims"),
            "{warnings}"
        );
    }

    /// A dim read at three samples is the one number times a product of params that gives it in
    /// all three: a number that holds a param's prime stays the number's, a param may appear
    /// squared, and where two params share their samples (past ten) neither is chosen.
    #[test]
    fn a_sampled_dim_is_one_number_times_one_product_of_params() {
        let values: Vec<[u64; 3]> = (0..11)
            .map(|i| SAMPLES.map(|s| sample_value(i, s)))
            .collect();
        let at = |k: u64, powers: &[u32]| {
            SAMPLES.map(|s| (values.iter().zip(powers)).fold(k, |a, (v, &e)| a * v[s].pow(e)))
        };
        let cases: [(u64, &[u32]); 4] =
            [(7, &[1]), (768, &[1, 1]), (12, &[2, 1]), (35, &[0, 0, 3])];
        for (k, powers) in cases {
            let mut all = powers.to_vec();
            all.resize(10, 0);
            assert_eq!(
                monomial(at(k, &all), &values[..10]),
                Some((k, all)),
                "{k} {powers:?}"
            );
        }
        // Param 10 samples as param 0 does: either explains the dim.
        let mut first = vec![0; 11];
        first[0] = 1;
        assert_eq!(values[10], values[0]);
        assert_eq!(monomial(at(3, &first), &values), None);
        // A sum is no product.
        assert_eq!(
            monomial(SAMPLES.map(|s| values[0][s] + values[1][s]), &values),
            None
        );
    }

    /// Integer arithmetic on constants folds, broadcasting, so a shape computed from others is
    /// a constant: `Mod` as Python's unless `fmod`; a division by zero does not fold, and a
    /// shape is integers: a float target (which folds) is no shape.
    #[test]
    fn shape_arithmetic_on_integer_constants_folds() {
        let x = || vec![input("x", &[1, 3])];
        let ints = |name: &str, v: &[i64]| constant(name, v, &[]);
        let expanded = |op: &str, a: &[i64], b: &[i64]| {
            let nodes = vec![
                proto::NodeProto {
                    output: vec!["target".into()],
                    ..node(op, &["a", "b"], Vec::new())
                },
                node("Expand", &["x", "target"], Vec::new()),
            ];
            let constants = vec![ints("a", a), ints("b", b)];
            bytes_of(&imported(x(), constants, nodes).graph, "y")
        };
        assert_eq!(expanded("Add", &[2, 2], &[1]), Some(3 * 3 * 4));
        assert_eq!(expanded("Mod", &[-1, 7], &[4]), Some(3 * 3 * 4));
        assert_eq!(expanded("Where", &[1, 0], &[3]), None, "three inputs");
        assert_eq!(expanded("Div", &[3, 3], &[0, 1]), None);
        // The ones an exporter compares with: `ConstantOfShape` of an integer fill.
        let fill = proto::AttributeProto {
            name: "value".into(),
            t: Some(ints("", &[3])),
            ..proto::AttributeProto::default()
        };
        let nodes = vec![
            proto::NodeProto {
                output: vec!["target".into()],
                ..node("ConstantOfShape", &["two"], vec![fill])
            },
            node("Expand", &["x", "target"], Vec::new()),
        ];
        let graph = imported(x(), vec![ints("two", &[2])], nodes).graph;
        assert_eq!(bytes_of(&graph, "y"), Some(3 * 3 * 4));
        // A float target is no shape, even of integral values.
        let float = proto::NodeProto {
            output: vec!["f".into()],
            ..node("Cast", &["a"], vec![int_attribute("to", 1)])
        };
        let nodes = vec![
            float,
            proto::NodeProto {
                output: vec!["target".into()],
                ..node("Add", &["f", "f"], Vec::new())
            },
            node("Expand", &["x", "target"], Vec::new()),
        ];
        let graph = imported(x(), vec![ints("a", &[1, 1])], nodes).graph;
        assert_eq!(bytes_of(&graph, "y"), None);
    }

    /// ONNX Runtime's contrib ops, one model per case, their outputs declared with no type or
    /// shape: inference sizes every output with the bytes ONNX Runtime gives it when it runs
    /// the model (or, for the ops its CPU provider has no kernel for, its own inference).
    #[test]
    fn contrib_ops_have_the_sizes_onnx_runtime_gives_them() {
        #[derive(serde::Deserialize)]
        struct Figures {
            model: Vec<Model>,
        }
        #[derive(serde::Deserialize)]
        struct Model {
            path: String,
            bytes: BTreeMap<String, u64>,
        }
        let figures: Figures = toml::from_str(include_str!(
            "../../../../tests/data/onnx/contrib/figures.toml"
        ))
        .unwrap();
        assert_eq!(figures.model.len(), 36);
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
        for model in &figures.model {
            let bytes = std::fs::read(data.join(&model.path)).unwrap();
            let imported = parse(&bytes, &Options::default())
                .unwrap_or_else(|e| panic!("{}: {e}", model.path));
            assert!(
                imported.warnings.is_empty(),
                "{}: {:?}",
                model.path,
                imported.warnings
            );
            for (name, &want) in &model.bytes {
                assert_eq!(
                    bytes_of(&imported.graph, name),
                    Some(want),
                    "{} `{name}`",
                    model.path
                );
            }
        }
    }

    /// A node is read by its domain's definition: ONNX Runtime's `Attention` (input, weights,
    /// bias) is not ONNX's (queries, keys, values), and an op of a domain inference does not
    /// know stays unsized, whatever its name.
    #[test]
    fn ops_are_read_by_their_domain() {
        let in_domain = |op: &str, domain: &str, inputs: &[&str]| proto::NodeProto {
            domain: domain.into(),
            ..node(op, inputs, vec![int_attribute("num_heads", 2)])
        };
        let weights = || {
            let mut w = constant("w", &[], &[0.0; 16 * 48]);
            w.dims = vec![16, 48];
            vec![w, constant("b", &[], &[0.0; 48])]
        };
        let x = || vec![input("x", &[2, 4, 16])];
        let projected = in_domain("Attention", "com.microsoft", &["x", "w", "b"]);
        assert_eq!(
            inferred_bytes(x(), weights(), projected),
            Some(2 * 4 * 16 * 4)
        );
        let as_onnx = in_domain("Attention", "", &["x", "w", "b"]);
        assert_eq!(inferred_bytes(x(), weights(), as_onnx), None);
        let elsewhere = in_domain("Relu", "org.example", &["x"]);
        assert_eq!(inferred_bytes(x(), Vec::new(), elsewhere), None);
    }

    /// Grouped-query attention whose total sequence length is given only when the model runs:
    /// its output is sized, its present keys and values are not, and the warning names them.
    #[test]
    fn grouped_query_attention_without_a_constant_total_leaves_the_present_unsized() {
        let inputs = vec![
            input("q", &[1, 4, 32]),
            input("k", &[1, 4, 16]),
            input("v", &[1, 4, 16]),
            input("total", &[]),
        ];
        let gqa = proto::NodeProto {
            op_type: "GroupQueryAttention".into(),
            domain: "com.microsoft".into(),
            input: ["q", "k", "v", "", "", "lengths", "total"]
                .map(String::from)
                .to_vec(),
            output: ["y", "present_k", "present_v"].map(String::from).to_vec(),
            attribute: vec![
                int_attribute("num_heads", 4),
                int_attribute("kv_num_heads", 2),
            ],
            ..proto::NodeProto::default()
        };
        let imported = imported(inputs, Vec::new(), vec![gqa]);
        assert_eq!(bytes_of(&imported.graph, "y"), Some(4 * 32 * 4));
        assert_eq!(bytes_of(&imported.graph, "present_k"), None);
        let warnings = imported.warnings.join("\n");
        assert!(
            warnings.contains(
                "`present_k` (GroupQueryAttention: the total sequence length is not a constant)"
            ),
            "{warnings}"
        );
    }

    fn int_attribute(name: &str, i: i64) -> proto::AttributeProto {
        proto::AttributeProto {
            name: name.into(),
            i,
            ..proto::AttributeProto::default()
        }
    }

    /// A graph attribute named `name`.
    fn graph_attribute(name: &str, g: proto::GraphProto) -> proto::AttributeProto {
        proto::AttributeProto {
            name: name.into(),
            g: Some(Box::new(g)),
            ..proto::AttributeProto::default()
        }
    }

    /// A subgraph of one `node`, its output declared `f32[2, 3]` (or `None`: undeclared).
    fn branch(node: proto::NodeProto, declared: bool) -> proto::GraphProto {
        let out = node.output[0].clone();
        let mut output = input(&out, &[2, 3]);
        if !declared {
            output.r#type = None;
        }
        proto::GraphProto {
            node: vec![node],
            output: vec![output],
            ..proto::GraphProto::default()
        }
    }

    /// Control flow is one step: it reads its inputs and what its subgraphs read of the graph
    /// around it (a nested subgraph's reads too), and writes its outputs, sized as its
    /// subgraphs declare them (an `If`'s where both branches agree, what a `Loop` carries as it
    /// starts), and an unsized tensor for what its subgraphs take while it runs: the plan says
    /// it is incomplete, and why.
    #[test]
    fn control_flow_is_one_step_reading_what_its_subgraphs_read() {
        let relu = |x: &str, y: &str| proto::NodeProto {
            op_type: "Relu".into(),
            input: vec![x.into()],
            output: vec![y.into()],
            ..proto::NodeProto::default()
        };
        // `If`: each branch reads an outer value by name only.
        let if_node = |else_declared: bool| {
            let then = graph_attribute("then_branch", branch(relu("w", "t"), true));
            let other = graph_attribute("else_branch", branch(relu("v", "e"), else_declared));
            node("If", &["c"], vec![then, other])
        };
        let inputs = || vec![input("c", &[]), input("w", &[2, 3]), input("v", &[2, 3])];
        assert_eq!(
            inferred_bytes(inputs(), Vec::new(), if_node(true)),
            Some(24)
        );
        assert_eq!(inferred_bytes(inputs(), Vec::new(), if_node(false)), None);
        // `Loop`: its body holds an `If` whose branch reads `u`; it carries `x`.
        let inner = node(
            "If",
            &["cond_in"],
            vec![
                graph_attribute("then_branch", branch(relu("u", "a"), true)),
                graph_attribute("else_branch", branch(relu("x_in", "b"), true)),
            ],
        );
        let body = proto::GraphProto {
            input: vec![
                input("i", &[]),
                input("cond_in", &[]),
                input("x_in", &[2, 3]),
            ],
            node: vec![proto::NodeProto {
                output: vec!["x_out".into()],
                ..inner
            }],
            output: vec![
                input("cond_in", &[]),
                proto::ValueInfoProto {
                    name: "x_out".into(),
                    r#type: None,
                },
            ],
            ..proto::GraphProto::default()
        };
        let loop_node = node("Loop", &["", "c", "x"], vec![graph_attribute("body", body)]);
        let inputs = vec![input("c", &[]), input("x", &[2, 3]), input("u", &[2, 3])];
        let model = imported(inputs, Vec::new(), vec![loop_node]);
        let step = &model.graph.steps[0];
        assert_eq!(step.reads, ["c", "x", "u"]);
        assert_eq!(step.writes, ["y", "Loop#0 subgraphs"]);
        assert_eq!(bytes_of(&model.graph, "y"), Some(24));
        assert_eq!(bytes_of(&model.graph, "Loop#0 subgraphs"), None);
        let warnings = model.warnings.join("\n");
        assert!(
            warnings.contains("`Loop#0 subgraphs` (Loop: what its subgraphs take while it runs)"),
            "{warnings}"
        );
    }

    /// onnx's node test models with every declared shape taken out (the outputs' types and
    /// the `value_info`), so only the graph inputs' shapes are given: each tensor that
    /// inference sizes has the bytes python onnx's shape inference gives it, and inference
    /// sizes at least as many of them as it did when the count was last raised.
    #[test]
    fn inference_alone_sizes_onnx_node_tests_as_onnx_does() {
        #[derive(serde::Deserialize)]
        struct Figures {
            model: Vec<Model>,
        }
        #[derive(serde::Deserialize)]
        struct Model {
            path: String,
            bytes: BTreeMap<String, u64>,
        }
        let figures: Figures = toml::from_str(include_str!(
            "../../../../tests/data/onnx/node/figures.toml"
        ))
        .unwrap();
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
        let (mut sized, mut inferred) = (0, 0);
        for model in &figures.model {
            let bytes = std::fs::read(data.join(&model.path)).unwrap();
            let mut m = proto::ModelProto::decode(&bytes[..]).unwrap();
            let g = m.graph.as_mut().unwrap();
            g.value_info.clear();
            g.output.iter_mut().for_each(|o| o.r#type = None);
            let given: HashSet<String> = (g.input.iter().map(|i| i.name.clone()))
                .chain(g.initializer.iter().map(|i| i.name.clone()))
                .collect();
            // What the values decide (a `NonZero`'s count) is sized at its most.
            let at_most: HashSet<String> = (g.node.iter())
                .filter(|n| DATA_DEPENDENT.contains(&n.op_type.as_str()))
                .flat_map(|n| n.output.iter().cloned())
                .collect();
            let imported = parse(&m.encode_to_vec(), &Options::default()).unwrap();
            let graph = imported.graph;
            let resolved = graph.resolve().unwrap();
            for (name, &bytes) in model.bytes.iter().filter(|(n, _)| !given.contains(*n)) {
                sized += 1;
                let t = resolved.tensor_of(&graph, name).unwrap();
                if graph.tensors[t].size_unknown {
                    continue;
                }
                match at_most.contains(name) {
                    true => assert!(
                        resolved.tensors[t].bytes >= bytes,
                        "{} `{name}`",
                        model.path
                    ),
                    false => {
                        assert_eq!(resolved.tensors[t].bytes, bytes, "{} `{name}`", model.path)
                    }
                }
                inferred += 1;
            }
        }
        // The rest: ops whose outputs depend on values given only when the model runs (axes,
        // sizes and bounds as graph inputs), and ops not inferred.
        assert!(
            inferred >= 1213,
            "inference alone sizes {inferred} of {sized}"
        );
    }
}
