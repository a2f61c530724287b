//! ONNX models (`.onnx`): the protobuf read with prost (the messages memplan needs are declared
//! here with their field numbers from onnx.proto, so nothing runs `protoc`), the graph turned
//! into a dump.
//!
//! Nodes in file order become steps. Tensors come from the graph's inputs, initializers and node
//! outputs. Initializers, and the outputs of `Constant` and `ConstantOfShape`, are constants; a
//! graph input that is also an initializer is a constant; graph inputs and outputs are
//! always-live (their kinds say so). Sizes come from shapes: a fully known `value_info` shape,
//! else inference for the common operators (below). A dim is `k` times at most one symbolic
//! param (`N`, `batch`...), so a symbolic batch passes through convolutions, pools and
//! flattens; symbolic dims become params of the dump (1 unless bound: `--set`, or a fixed
//! `--input-shape`). A tensor whose size cannot be inferred owns no bytes and is listed in a
//! warning naming the op that stopped inference; it is never silently zeroed. Control flow (If,
//! Loop, Scan) is refused with a clear error: memplan reads straight-line graphs.
//!
//! Inferred: elementwise unary and binary ops (multidirectional broadcasting), Conv,
//! ConvTranspose, the pools (global ones too), Gemm, MatMul, BatchNormalization and the other
//! normalizations, Softmax, Dropout, LRN, Concat, Split, Reshape, Flatten, Transpose,
//! Squeeze/Unsqueeze, Pad, Resize/Upsample (constant scales or sizes), the reductions, Expand,
//! Where, and Shape/Gather/Slice/Cast/Range/Concat/Unsqueeze over values that fold to constants.
//!
//! Remat candidates: each single-output elementwise op's intermediate output, at a cost of its
//! element count times a per-op weight.

use std::collections::{BTreeMap, HashMap, HashSet};

use memplan_core::DType;
use memplan_core::graph::{Dim, Graph, RematCandidate, Step, Tensor, TensorKind};
use prost::Message;

use crate::FormatError;

/// The messages of onnx.proto that memplan reads (field numbers as there; the rest skipped).
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelProto {
        #[prost(int64, tag = "1")]
        pub ir_version: i64,
        #[prost(string, tag = "2")]
        pub producer_name: String,
        #[prost(message, optional, tag = "7")]
        pub graph: Option<GraphProto>,
        #[prost(message, repeated, tag = "8")]
        pub opset_import: Vec<OperatorSetIdProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OperatorSetIdProto {
        #[prost(string, tag = "1")]
        pub domain: String,
        #[prost(int64, tag = "2")]
        pub version: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GraphProto {
        #[prost(message, repeated, tag = "1")]
        pub node: Vec<NodeProto>,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, repeated, tag = "5")]
        pub initializer: Vec<TensorProto>,
        #[prost(message, repeated, tag = "11")]
        pub input: Vec<ValueInfoProto>,
        #[prost(message, repeated, tag = "12")]
        pub output: Vec<ValueInfoProto>,
        #[prost(message, repeated, tag = "13")]
        pub value_info: Vec<ValueInfoProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeProto {
        #[prost(string, repeated, tag = "1")]
        pub input: Vec<String>,
        #[prost(string, repeated, tag = "2")]
        pub output: Vec<String>,
        #[prost(string, tag = "3")]
        pub name: String,
        #[prost(string, tag = "4")]
        pub op_type: String,
        #[prost(message, repeated, tag = "5")]
        pub attribute: Vec<AttributeProto>,
        #[prost(string, tag = "7")]
        pub domain: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AttributeProto {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(float, tag = "2")]
        pub f: f32,
        #[prost(int64, tag = "3")]
        pub i: i64,
        #[prost(bytes = "vec", tag = "4")]
        pub s: Vec<u8>,
        #[prost(message, optional, tag = "5")]
        pub t: Option<TensorProto>,
        #[prost(float, repeated, tag = "7")]
        pub floats: Vec<f32>,
        #[prost(int64, repeated, tag = "8")]
        pub ints: Vec<i64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorProto {
        #[prost(int64, repeated, tag = "1")]
        pub dims: Vec<i64>,
        #[prost(int32, tag = "2")]
        pub data_type: i32,
        #[prost(float, repeated, tag = "4")]
        pub float_data: Vec<f32>,
        #[prost(int32, repeated, tag = "5")]
        pub int32_data: Vec<i32>,
        #[prost(int64, repeated, tag = "7")]
        pub int64_data: Vec<i64>,
        #[prost(string, tag = "8")]
        pub name: String,
        #[prost(bytes = "vec", tag = "9")]
        pub raw_data: Vec<u8>,
        #[prost(double, repeated, tag = "10")]
        pub double_data: Vec<f64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueInfoProto {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub r#type: Option<TypeProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeProto {
        #[prost(message, optional, tag = "1")]
        pub tensor_type: Option<TensorTypeProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorTypeProto {
        #[prost(int32, tag = "1")]
        pub elem_type: i32,
        #[prost(message, optional, tag = "2")]
        pub shape: Option<TensorShapeProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorShapeProto {
        #[prost(message, repeated, tag = "1")]
        pub dim: Vec<Dimension>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dimension {
        #[prost(int64, optional, tag = "1")]
        pub dim_value: Option<i64>,
        #[prost(string, optional, tag = "2")]
        pub dim_param: Option<String>,
    }
}

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

/// A dim: `k` times at most one symbolic param.
#[derive(Debug, Clone, PartialEq, Eq)]
struct D {
    k: u64,
    p: Option<String>,
}

impl D {
    fn n(k: u64) -> D {
        D { k, p: None }
    }

    fn known(&self) -> Option<u64> {
        self.p.is_none().then_some(self.k)
    }

    fn mul(&self, o: &D) -> Option<D> {
        let p = match (&self.p, &o.p) {
            (Some(_), Some(_)) => return None,
            (p, None) | (None, p) => p.clone(),
        };
        Some(D {
            k: self.k.checked_mul(o.k)?,
            p,
        })
    }
}

fn product(dims: &[D]) -> Option<D> {
    dims.iter().try_fold(D::n(1), |acc, d| acc.mul(d))
}

type Shape = Vec<D>;

/// What is known of a value.
#[derive(Debug, Clone, Default)]
struct Val {
    shape: Option<Shape>,
    dtype: Option<&'static str>,
    /// Its integer contents, when small and known (shapes, axes, indices).
    konst: Option<Vec<i64>>,
    /// Its float contents, when small and known (Resize scales).
    floats: Option<Vec<f64>>,
}

/// The dtype of an ONNX element type; `None` where the file leaves it undefined. Strings, and
/// types newer than this reader, get a name that is no [`DType`]: their tensors stay unsized
/// ([`unsized_elements`]), where guessing four bytes an element would be wrong by any factor.
fn dtype_name(t: i32) -> Option<&'static str> {
    Some(match t {
        0 => return None,
        1 => "f32",
        2 => "u8",
        3 => "i8",
        4 => "u16",
        5 => "i16",
        6 => "i32",
        7 => "i64",
        9 => "bool",
        10 => "f16",
        11 => "f64",
        12 => "u32",
        13 => "u64",
        14 => "c64",
        15 => "c128",
        16 => "bf16",
        17 | 18 => "f8e4m3",
        19 | 20 => "f8e5m2",
        8 => STRING,
        21 => "u4",
        22 => "i4",
        23 => "f4e2m1",
        24 => "f8e8m0",
        25 => "u2",
        26 => "i2",
        _ => UNKNOWN_ELEMENTS,
    })
}

const STRING: &str = "string";
const UNKNOWN_ELEMENTS: &str = "an element type this reader does not know";

/// `val` as the plan may size it: a tensor of strings (or of an element type this reader does not
/// know) has no fixed bytes an element, so it loses its shape, and `stopped` says why.
fn unsized_elements(name: &str, val: Val, stopped: &mut Vec<(String, String)>) -> Val {
    match val.dtype {
        Some(d) if val.shape.is_some() && d.parse::<DType>().is_err() => {
            let why = match d {
                STRING => "strings have no fixed size an element".to_string(),
                _ => format!("{d}: no size an element"),
            };
            stopped.push((name.to_string(), why));
            Val { shape: None, ..val }
        }
        _ => val,
    }
}

fn attr<'a>(node: &'a proto::NodeProto, name: &str) -> Option<&'a proto::AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

fn attr_i(node: &proto::NodeProto, name: &str, default: i64) -> i64 {
    attr(node, name).map_or(default, |a| a.i)
}

fn attr_ints(node: &proto::NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(node, name).map(|a| a.ints.clone())
}

/// The integer contents of a small integer tensor.
fn tensor_ints(t: &proto::TensorProto) -> Option<Vec<i64>> {
    let n = t
        .dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))?;
    if n > MAX_FOLDED {
        return None;
    }
    let values: Vec<i64> = match t.data_type {
        7 if !t.int64_data.is_empty() => t.int64_data.clone(),
        6 | 2 | 3 | 4 | 5 | 9 if !t.int32_data.is_empty() => {
            t.int32_data.iter().map(|&v| i64::from(v)).collect()
        }
        7 => t
            .raw_data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
        6 => t
            .raw_data
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4 bytes"))))
            .collect(),
        _ => return None,
    };
    (values.len() as u64 == n).then_some(values)
}

/// The float contents of a small float tensor (Resize scales).
fn tensor_floats(t: &proto::TensorProto) -> Option<Vec<f64>> {
    if t.data_type != 1 {
        return tensor_ints(t).map(|v| v.into_iter().map(|x| x as f64).collect());
    }
    if t.raw_data.len() / 4 > MAX_FOLDED as usize || t.float_data.len() > MAX_FOLDED as usize {
        return None;
    }
    if !t.float_data.is_empty() {
        return Some(t.float_data.iter().map(|&f| f64::from(f)).collect());
    }
    Some(
        t.raw_data
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))))
            .collect(),
    )
}

fn known_shape(dims: &[i64]) -> Option<Shape> {
    dims.iter()
        .map(|&d| u64::try_from(d).ok().map(D::n))
        .collect()
}

/// Multidirectional (numpy) broadcasting.
fn broadcast(shapes: &[&Shape]) -> Option<Shape> {
    let rank = shapes.iter().map(|s| s.len()).max()?;
    (0..rank)
        .map(|i| {
            let mut out = D::n(1);
            for s in shapes {
                let Some(d) = (i + s.len()).checked_sub(rank).map(|j| &s[j]) else {
                    continue;
                };
                if *d == D::n(1) {
                    continue;
                }
                if out == D::n(1) || out == *d {
                    out = d.clone();
                } else {
                    return None;
                }
            }
            Some(out)
        })
        .collect()
}

fn axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

/// Output spatial dims of a convolution or pool.
fn window(node: &proto::NodeProto, x: &Shape, kernel: &[u64], transposed: bool) -> Option<Vec<D>> {
    let spatial = x.len().checked_sub(2)?;
    if kernel.len() != spatial {
        return None;
    }
    let strides = attr_ints(node, "strides").unwrap_or_else(|| vec![1; spatial]);
    let dilations = attr_ints(node, "dilations").unwrap_or_else(|| vec![1; spatial]);
    let pads = attr_ints(node, "pads").unwrap_or_else(|| vec![0; 2 * spatial]);
    let auto_pad = attr(node, "auto_pad")
        .map(|a| String::from_utf8_lossy(&a.s).into_owned())
        .unwrap_or_default();
    let ceil_mode = attr_i(node, "ceil_mode", 0) == 1;
    let output_padding = attr_ints(node, "output_padding").unwrap_or_else(|| vec![0; spatial]);
    // A transposed convolution's `output_shape` gives its spatial dims outright.
    let output_shape = attr_ints(node, "output_shape").filter(|s| transposed && s.len() == spatial);
    (0..spatial)
        .map(|i| {
            // Checked throughout: the attributes come from the file.
            let input = i64::try_from(x[2 + i].known()?).ok()?;
            let (s, d) = (*strides.get(i)?, *dilations.get(i)?);
            if s <= 0 || d <= 0 {
                return None;
            }
            let k = i64::try_from(kernel[i]).ok()?;
            let effective = d.checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
            let out = if let Some(shape) = &output_shape {
                shape[i]
            } else if transposed && auto_pad.starts_with("SAME") {
                input.checked_mul(s)?
            } else if transposed {
                let pad = pads.get(i)?.checked_add(*pads.get(i + spatial)?)?;
                s.checked_mul(input.checked_sub(1)?)?
                    .checked_add(output_padding.get(i).copied().unwrap_or(0))?
                    .checked_add(effective)?
                    .checked_sub(pad)?
            } else if auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" {
                input.checked_add(s - 1)? / s
            } else {
                let pad = if auto_pad == "VALID" {
                    0
                } else {
                    pads.get(i)?.checked_add(*pads.get(i + spatial)?)?
                };
                let span = input.checked_add(pad)?.checked_sub(effective)?;
                if span < 0 {
                    return None;
                }
                if ceil_mode {
                    // The last window must start inside the input or its left padding.
                    let out = span.checked_add(s - 1)? / s + 1;
                    let left = *pads.get(i)?;
                    if (out - 1).checked_mul(s)? >= input.checked_add(left)? {
                        out - 1
                    } else {
                        out
                    }
                } else {
                    span / s + 1
                }
            };
            u64::try_from(out).ok().map(D::n)
        })
        .collect()
}

/// The op's elementwise weight, when it is an elementwise op (for remat costs).
fn elementwise_weight(op: &str) -> Option<u64> {
    Some(match op {
        "Relu" | "LeakyRelu" | "Abs" | "Neg" | "Identity" | "Clip" | "Add" | "Sub" | "Mul"
        | "Max" | "Min" | "Sign" | "Ceil" | "Floor" | "Round" | "Not" | "PRelu" | "Sum" => 1,
        "Div" | "Reciprocal" | "Sqrt" | "HardSigmoid" | "HardSwish" | "Mean" => 2,
        "Sigmoid" | "Tanh" | "Exp" | "Log" | "Elu" | "Selu" | "Softplus" | "Softsign" | "Gelu"
        | "Erf" | "Sin" | "Cos" | "Pow" | "Mish" | "Swish" => 4,
        _ => return None,
    })
}

const UNARY: &[&str] = &[
    "Relu",
    "LeakyRelu",
    "Sigmoid",
    "Tanh",
    "Elu",
    "Selu",
    "Softplus",
    "Softsign",
    "HardSigmoid",
    "HardSwish",
    "Gelu",
    "Erf",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Neg",
    "Abs",
    "Ceil",
    "Floor",
    "Round",
    "Sign",
    "Sin",
    "Cos",
    "Not",
    "Identity",
    "Clip",
    "Softmax",
    "LogSoftmax",
    "LRN",
    "InstanceNormalization",
    "LayerNormalization",
    "BatchNormalization",
    "Mish",
    "Swish",
    "PRelu",
    "ThresholdedRelu",
    "Celu",
    "Shrink",
    "GroupNormalization",
    "CumSum",
];

const BINARY: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Where",
    "Mod",
    "BitShift",
];

/// What stopped shape inference at a node (the import says it as a warning, naming the node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum InferStop {
    #[error("the shape of input {0} is unknown")]
    UnknownInput(usize),
    #[error("shape inference does not know this op")]
    UnknownOp,
    /// What in the node's inputs or attributes the inference cannot follow.
    #[error("{0}")]
    Cannot(&'static str),
}

impl From<&'static str> for InferStop {
    fn from(why: &'static str) -> Self {
        InferStop::Cannot(why)
    }
}

/// Infers the outputs of one node from what is known of its inputs: `Err` says what stopped it.
fn infer(node: &proto::NodeProto, inputs: &[Val]) -> Result<Vec<Val>, InferStop> {
    let op = node.op_type.as_str();
    let shape = |k: usize| -> Result<&Shape, InferStop> {
        inputs
            .get(k)
            .and_then(|v| v.shape.as_ref())
            .ok_or(InferStop::UnknownInput(k))
    };
    let konst = |k: usize| inputs.get(k).and_then(|v| v.konst.clone());
    let dtype0 = inputs.first().and_then(|v| v.dtype);
    let one = |shape: Shape, dtype: Option<&'static str>| {
        Ok(vec![Val {
            shape: Some(shape),
            dtype,
            konst: None,
            floats: None,
        }])
    };
    let fail = |why: &'static str| Err(InferStop::Cannot(why));
    match op {
        _ if UNARY.contains(&op) => {
            let s = shape(0)?.clone();
            let mut out = vec![Val {
                shape: Some(s),
                dtype: dtype0,
                konst: None,
                floats: None,
            }];
            if op == "BatchNormalization" {
                // Training-mode outputs: the running mean and variance, per channel.
                let c = shape(0)?.get(1).cloned().unwrap_or(D::n(1));
                for _ in 1..node.output.len() {
                    out.push(Val {
                        shape: Some(vec![c.clone()]),
                        dtype: dtype0,
                        konst: None,
                        floats: None,
                    });
                }
            }
            Ok(out)
        }
        "Dropout" => {
            // The mask output is left unsized, as onnx's own shape inference leaves it.
            Ok(vec![Val {
                shape: Some(shape(0)?.clone()),
                dtype: dtype0,
                konst: None,
                floats: None,
            }])
        }
        "Cast" => {
            let to = dtype_name(attr_i(node, "to", 1) as i32);
            Ok(vec![Val {
                shape: Some(shape(0)?.clone()),
                dtype: to,
                konst: konst(0),
                floats: None,
            }])
        }
        _ if BINARY.contains(&op) => {
            let shapes: Vec<&Shape> = (0..inputs.len()).map(shape).collect::<Result<_, _>>()?;
            let out = broadcast(&shapes).ok_or("the shapes do not broadcast")?;
            let dtype = match op {
                "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or"
                | "Xor" => Some("bool"),
                "Where" => inputs.get(1).and_then(|v| v.dtype),
                _ => dtype0,
            };
            one(out, dtype)
        }
        "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" | "LpPool" => {
            let x = shape(0)?;
            let kernel: Vec<u64> = match attr_ints(node, "kernel_shape") {
                Some(k) => k.iter().map(|&v| u64::try_from(v).unwrap_or(0)).collect(),
                None if op.ends_with("Pool") => return fail("a pool without kernel_shape"),
                None => shape(1)?[2..]
                    .iter()
                    .map(|d| d.known())
                    .collect::<Option<_>>()
                    .ok_or("the weights' spatial dims are unknown")?,
            };
            let spatial = window(node, x, &kernel, op == "ConvTranspose")
                .ok_or("the spatial dims cannot be computed")?;
            let channels = match op {
                "Conv" => shape(1)?[0].clone(),
                "ConvTranspose" => {
                    let group = attr_i(node, "group", 1).max(1) as u64;
                    shape(1)?
                        .get(1)
                        .and_then(|d| d.known())
                        .map(|c| D::n(c * group))
                        .ok_or("the weights' channels are unknown")?
                }
                _ => x[1].clone(),
            };
            let mut out = vec![x[0].clone(), channels];
            out.extend(spatial);
            let mut vals = vec![Val {
                shape: Some(out.clone()),
                dtype: dtype0,
                konst: None,
                floats: None,
            }];
            if node.output.len() > 1 {
                vals.push(Val {
                    shape: Some(out),
                    dtype: Some("i64"),
                    konst: None,
                    floats: None,
                });
            }
            Ok(vals)
        }
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
            let x = shape(0)?;
            let mut out = x[..2.min(x.len())].to_vec();
            out.extend(std::iter::repeat_n(D::n(1), x.len().saturating_sub(2)));
            one(out, dtype0)
        }
        "Gemm" => {
            let (a, b) = (shape(0)?, shape(1)?);
            if a.len() != 2 || b.len() != 2 {
                return fail("Gemm's inputs are not matrices");
            }
            let m = if attr_i(node, "transA", 0) == 1 {
                &a[1]
            } else {
                &a[0]
            };
            let n = if attr_i(node, "transB", 0) == 1 {
                &b[0]
            } else {
                &b[1]
            };
            one(vec![m.clone(), n.clone()], dtype0)
        }
        "MatMul" | "MatMulInteger" => {
            let (a, b) = (shape(0)?.clone(), shape(1)?.clone());
            let (a2, b2) = (
                if a.len() == 1 {
                    vec![D::n(1), a[0].clone()]
                } else {
                    a.clone()
                },
                if b.len() == 1 {
                    vec![b[0].clone(), D::n(1)]
                } else {
                    b.clone()
                },
            );
            if a2.len() < 2 || b2.len() < 2 {
                return fail("MatMul of a scalar");
            }
            let batch = broadcast(&[&a2[..a2.len() - 2].to_vec(), &b2[..b2.len() - 2].to_vec()])
                .ok_or("the batch dims do not broadcast")?;
            let mut out = batch;
            if a.len() > 1 {
                out.push(a2[a2.len() - 2].clone());
            }
            if b.len() > 1 {
                out.push(b2[b2.len() - 1].clone());
            }
            one(
                out,
                if op == "MatMulInteger" {
                    Some("i32")
                } else {
                    dtype0
                },
            )
        }
        "Concat" => {
            let shapes: Vec<&Shape> = (0..inputs.len()).map(shape).collect::<Result<_, _>>()?;
            let first = shapes.first().ok_or("no inputs")?;
            let a = axis(attr_i(node, "axis", 0), first.len()).ok_or("the axis is out of range")?;
            let mut out = (*first).clone();
            let mut total = D::n(0);
            for s in &shapes {
                let d = s.get(a).ok_or("the ranks differ")?;
                total = match (total.p.clone(), d.p.clone()) {
                    (None, None) => D::n(total.k + d.k),
                    (None, Some(_)) if total.k == 0 => d.clone(),
                    _ => return fail("concatenating symbolic dims"),
                };
            }
            out[a] = total;
            let folded = (0..inputs.len())
                .map(konst)
                .collect::<Option<Vec<_>>>()
                .map(|v| v.concat());
            Ok(vec![Val {
                shape: Some(out),
                dtype: dtype0,
                konst: folded,
                floats: None,
            }])
        }
        "Split" => {
            let x = shape(0)?;
            let a = axis(attr_i(node, "axis", 0), x.len()).ok_or("the axis is out of range")?;
            let n = node.output.len().max(1) as u64;
            // The sizes, from the attribute (before opset 13) or the second input; else equal
            // parts, the last smaller when they do not divide (opset 18's `num_outputs`).
            let sizes = match (attr_ints(node, "split"), inputs.len() > 1) {
                (Some(p), _) => Some(p),
                (None, true) => Some(konst(1).ok_or("the split sizes are not a constant")?),
                (None, false) => None,
            };
            let parts: Vec<u64> = match sizes {
                Some(p) => p.iter().map(|&v| u64::try_from(v).unwrap_or(0)).collect(),
                None => {
                    let whole = x[a].known().ok_or("splitting a symbolic dim")?;
                    let part = whole.div_ceil(n);
                    (0..n)
                        .map(|k| part.min(whole.saturating_sub(k * part)))
                        .collect()
                }
            };
            Ok(parts
                .iter()
                .map(|&p| {
                    let mut s = x.clone();
                    s[a] = D::n(p);
                    Val {
                        shape: Some(s),
                        dtype: dtype0,
                        konst: None,
                        floats: None,
                    }
                })
                .collect())
        }
        "Reshape" => {
            let x = shape(0)?;
            let target = konst(1).ok_or("the target shape is not a constant")?;
            let allow_zero = attr_i(node, "allowzero", 0) == 1;
            let mut out: Vec<Option<D>> = target
                .iter()
                .enumerate()
                .map(|(i, &v)| match v {
                    0 if !allow_zero => x.get(i).cloned(),
                    -1 => None,
                    v => u64::try_from(v).ok().map(D::n),
                })
                .collect();
            if let Some(hole) = target.iter().position(|&v| v == -1) {
                let total = product(x).ok_or("more than one symbolic dim")?;
                let rest = product(&out.iter().flatten().cloned().collect::<Vec<_>>())
                    .ok_or("more than one symbolic dim")?;
                let k = if rest.k == 0 {
                    0
                } else if total.k % rest.k == 0 {
                    total.k / rest.k
                } else {
                    return fail("the sizes do not divide");
                };
                let p = match (&total.p, &rest.p) {
                    (p, None) => p.clone(),
                    (Some(a), Some(b)) if a == b => None,
                    _ => return fail("a symbolic dim does not divide"),
                };
                out[hole] = Some(D { k, p });
            }
            one(
                out.into_iter()
                    .collect::<Option<_>>()
                    .ok_or("a dim of the target is invalid")?,
                dtype0,
            )
        }
        "Flatten" => {
            let x = shape(0)?;
            let a = attr_i(node, "axis", 1);
            let a = if a < 0 { a + x.len() as i64 } else { a }.clamp(0, x.len() as i64) as usize;
            let outer = product(&x[..a]).ok_or("more than one symbolic dim")?;
            let inner = product(&x[a..]).ok_or("more than one symbolic dim")?;
            one(vec![outer, inner], dtype0)
        }
        "Transpose" => {
            let x = shape(0)?;
            let perm =
                attr_ints(node, "perm").unwrap_or_else(|| (0..x.len() as i64).rev().collect());
            one(
                perm.iter()
                    .map(|&p| x.get(p as usize).cloned())
                    .collect::<Option<_>>()
                    .ok_or("the permutation is out of range")?,
                dtype0,
            )
        }
        "Squeeze" | "Unsqueeze" => {
            let x = shape(0)?;
            let axes = attr_ints(node, "axes").or_else(|| konst(1));
            let mut out = x.clone();
            if op == "Squeeze" {
                match axes {
                    Some(axes) => {
                        let mut drop: Vec<usize> = axes
                            .iter()
                            .map(|&a| axis(a, x.len()))
                            .collect::<Option<_>>()
                            .ok_or("an axis is out of range")?;
                        drop.sort_unstable();
                        for a in drop.into_iter().rev() {
                            out.remove(a);
                        }
                    }
                    None => out.retain(|d| *d != D::n(1)),
                }
            } else {
                let axes = axes.ok_or("Unsqueeze without axes")?;
                let rank = x.len() + axes.len();
                let mut at: Vec<usize> = axes
                    .iter()
                    .map(|&a| axis(a, rank))
                    .collect::<Option<_>>()
                    .ok_or("an axis is out of range")?;
                at.sort_unstable();
                for a in at {
                    if a > out.len() {
                        return fail("an axis is out of range");
                    }
                    out.insert(a, D::n(1));
                }
            }
            Ok(vec![Val {
                shape: Some(out),
                dtype: dtype0,
                konst: konst(0),
                floats: None,
            }])
        }
        "Pad" => {
            let x = shape(0)?;
            let pads = attr_ints(node, "pads")
                .or_else(|| konst(1))
                .ok_or("the pads are not constant")?;
            if pads.len() != 2 * x.len() {
                return fail("the pads do not match the rank");
            }
            let out = x
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let v = i64::try_from(d.known()?)
                        .ok()?
                        .checked_add(pads[i])?
                        .checked_add(pads[i + x.len()])?;
                    u64::try_from(v).ok().map(D::n)
                })
                .collect::<Option<_>>()
                .ok_or("padding a symbolic dim")?;
            one(out, dtype0)
        }
        "Resize" | "Upsample" => {
            let x = shape(0)?;
            // Resize: (X, roi, scales, sizes); Upsample: (X, scales).
            let sizes = if op == "Resize" { konst(3) } else { None };
            if let Some(sizes) = sizes.filter(|s| s.len() == x.len()) {
                return one(
                    sizes.iter().map(|&v| D::n(v.max(0) as u64)).collect(),
                    dtype0,
                );
            }
            let scale_input = if op == "Resize" { 2 } else { 1 };
            let scales = inputs
                .get(scale_input)
                .and_then(|v| v.floats.clone())
                .or_else(|| {
                    attr(node, "scales").map(|a| a.floats.iter().map(|&f| f64::from(f)).collect())
                })
                .filter(|s| s.len() == x.len())
                .ok_or("the scales are not constant")?;
            let out = x
                .iter()
                .zip(&scales)
                .map(|(d, &s)| d.known().map(|v| D::n((v as f64 * s).floor() as u64)))
                .collect::<Option<_>>()
                .ok_or("scaling a symbolic dim")?;
            one(out, dtype0)
        }
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL2"
        | "ReduceL1" | "ReduceLogSumExp" | "ReduceSumSquare" | "ArgMax" | "ArgMin" => {
            let x = shape(0)?;
            let keep = attr_i(node, "keepdims", 1) == 1;
            // The axes, from the attribute or (opset 13 and later) the second input; none means
            // all of them, or none at all with `noop_with_empty_axes`.
            let axes: Vec<i64> = match (op.starts_with("Arg"), attr_ints(node, "axes")) {
                (true, _) => vec![attr_i(node, "axis", 0)],
                (false, Some(axes)) => axes,
                (false, None) if inputs.len() > 1 => {
                    konst(1).ok_or("the axes are not a constant")?
                }
                (false, None) => Vec::new(),
            };
            let axes = match axes.is_empty() && !op.starts_with("Arg") {
                true if attr_i(node, "noop_with_empty_axes", 0) == 1 => Vec::new(),
                true => (0..x.len() as i64).collect(),
                false => axes,
            };
            let axes: HashSet<usize> = axes
                .iter()
                .map(|&a| axis(a, x.len()))
                .collect::<Option<_>>()
                .ok_or("an axis is out of range")?;
            let out: Shape = x
                .iter()
                .enumerate()
                .filter_map(|(i, d)| match (axes.contains(&i), keep) {
                    (true, true) => Some(D::n(1)),
                    (true, false) => None,
                    (false, _) => Some(d.clone()),
                })
                .collect();
            one(
                out,
                if op.starts_with("Arg") {
                    Some("i64")
                } else {
                    dtype0
                },
            )
        }
        "Expand" => {
            let x = shape(0)?;
            let target: Shape = konst(1)
                .ok_or("the target shape is not a constant")?
                .iter()
                .map(|&v| D::n(v.max(0) as u64))
                .collect();
            one(
                broadcast(&[x, &target]).ok_or("the shapes do not broadcast")?,
                dtype0,
            )
        }
        "Shape" => {
            // Dims `start..end` (opset 15), each counted from the back when negative and
            // clamped to the rank.
            let x = shape(0)?;
            let rank = x.len() as i64;
            let bound = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
            let (start, end) = (
                bound(attr_i(node, "start", 0)),
                bound(attr_i(node, "end", rank)),
            );
            let x = &x[start..end.max(start)];
            let values: Option<Vec<i64>> = x.iter().map(|d| d.known().map(|v| v as i64)).collect();
            Ok(vec![Val {
                shape: Some(vec![D::n(x.len() as u64)]),
                dtype: Some("i64"),
                konst: values,
                floats: None,
            }])
        }
        "Size" => Ok(vec![Val {
            shape: Some(vec![]),
            dtype: Some("i64"),
            konst: product(shape(0)?)
                .and_then(|d| d.known())
                .map(|v| vec![v as i64]),
            floats: None,
        }]),
        "Gather" => {
            let (x, idx) = (shape(0)?, shape(1)?);
            let a = axis(attr_i(node, "axis", 0), x.len()).ok_or("the axis is out of range")?;
            let mut out = x[..a].to_vec();
            out.extend(idx.iter().cloned());
            out.extend(x[a + 1..].iter().cloned());
            let folded = match (konst(0), konst(1)) {
                (Some(data), Some(ix)) if x.len() == 1 => ix
                    .iter()
                    .map(|&i| {
                        let i = if i < 0 { i + data.len() as i64 } else { i };
                        data.get(i as usize).copied()
                    })
                    .collect(),
                _ => None,
            };
            Ok(vec![Val {
                shape: Some(out),
                dtype: dtype0,
                konst: folded,
                floats: None,
            }])
        }
        "Slice" => {
            let x = shape(0)?;
            let (starts, ends) = match (
                attr_ints(node, "starts").or_else(|| konst(1)),
                attr_ints(node, "ends").or_else(|| konst(2)),
            ) {
                (Some(s), Some(e)) => (s, e),
                _ => return fail("the slice bounds are not constant"),
            };
            let axes = attr_ints(node, "axes")
                .or_else(|| konst(3))
                .unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = konst(4).unwrap_or_else(|| vec![1; starts.len()]);
            let mut out = x.clone();
            let mut folded = konst(0);
            for (j, &a) in axes.iter().enumerate() {
                let a = axis(a, x.len()).ok_or("an axis is out of range")?;
                let n = x[a].known().ok_or("slicing a symbolic dim")? as i64;
                let step = *steps.get(j).ok_or("steps are missing")?;
                if step == 0 || step == i64::MIN || n > i64::MAX / 4 {
                    return fail("a step of 0, or sizes past reach");
                }
                let clamp = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
                let norm = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
                let (s, e) = (
                    *starts.get(j).ok_or("starts are missing")?,
                    *ends.get(j).ok_or("ends are missing")?,
                );
                let (s, e) = if step > 0 {
                    (clamp(norm(s), 0, n), clamp(norm(e), 0, n))
                } else {
                    (clamp(norm(s), -1, n - 1), clamp(norm(e), -1, n - 1))
                };
                let len = if step > 0 {
                    (e - s + step - 1).max(0) / step
                } else {
                    (s - e - step - 1).max(0) / -step
                };
                out[a] = D::n(len as u64);
                if let (Some(v), true) = (&folded, x.len() == 1) {
                    folded = Some((0..len).map(|k| v[(s + k * step) as usize]).collect());
                }
            }
            if x.len() != 1 {
                folded = None;
            }
            Ok(vec![Val {
                shape: Some(out),
                dtype: dtype0,
                konst: folded,
                floats: None,
            }])
        }
        "Range" => {
            let (s, l, d) = match (konst(0), konst(1), konst(2)) {
                (Some(s), Some(l), Some(d))
                    if !s.is_empty() && !l.is_empty() && !d.is_empty() && d[0] != 0 =>
                {
                    (s[0], l[0], d[0])
                }
                _ => return fail("the range's bounds are not constant"),
            };
            let n = ((l as f64 - s as f64) / d as f64).ceil().max(0.0) as u64;
            let values = (n <= MAX_FOLDED)
                .then(|| {
                    (0..n as i64)
                        .map(|k| k.checked_mul(d).and_then(|v| v.checked_add(s)))
                        .collect::<Option<Vec<_>>>()
                })
                .flatten();
            Ok(vec![Val {
                shape: Some(vec![D::n(n)]),
                dtype: dtype0,
                konst: values,
                floats: None,
            }])
        }
        "ConstantOfShape" => {
            let dims = konst(0).ok_or("the shape is not a constant")?;
            let dtype = attr(node, "value")
                .and_then(|a| a.t.as_ref())
                .and_then(|t| dtype_name(t.data_type))
                .or(Some("f32"));
            one(dims.iter().map(|&v| D::n(v.max(0) as u64)).collect(), dtype)
        }
        "Constant" => {
            let a = node.attribute.first().ok_or("a Constant without a value")?;
            match (a.name.as_str(), &a.t) {
                ("value", Some(t)) => Ok(vec![Val {
                    shape: known_shape(&t.dims),
                    dtype: dtype_name(t.data_type),
                    konst: tensor_ints(t),
                    floats: tensor_floats(t),
                }]),
                ("value_int", _) => Ok(vec![Val {
                    shape: Some(vec![]),
                    dtype: Some("i64"),
                    konst: Some(vec![a.i]),
                    floats: None,
                }]),
                ("value_ints", _) => Ok(vec![Val {
                    shape: Some(vec![D::n(a.ints.len() as u64)]),
                    dtype: Some("i64"),
                    konst: Some(a.ints.clone()),
                    floats: None,
                }]),
                ("value_float", _) => Ok(vec![Val {
                    shape: Some(vec![]),
                    dtype: Some("f32"),
                    konst: None,
                    floats: None,
                }]),
                ("value_floats", _) => Ok(vec![Val {
                    shape: Some(vec![D::n(a.floats.len() as u64)]),
                    dtype: Some("f32"),
                    konst: None,
                    floats: Some(a.floats.iter().map(|&f| f64::from(f)).collect()),
                }]),
                _ => fail("a Constant of a kind not read"),
            }
        }
        "TopK" => {
            let x = shape(0)?;
            let k = konst(1)
                .and_then(|v| v.first().copied())
                .ok_or("k is not a constant")?;
            let a = axis(attr_i(node, "axis", -1), x.len()).ok_or("the axis is out of range")?;
            let mut out = x.clone();
            out[a] = D::n(k.max(0) as u64);
            Ok(vec![
                Val {
                    shape: Some(out.clone()),
                    dtype: dtype0,
                    konst: None,
                    floats: None,
                },
                Val {
                    shape: Some(out),
                    dtype: Some("i64"),
                    konst: None,
                    floats: None,
                },
            ])
        }
        "Tile" => {
            let x = shape(0)?;
            let reps = konst(1).ok_or("the repeats are not constant")?;
            let out = x
                .iter()
                .zip(&reps)
                .map(|(d, &r)| d.mul(&D::n(r.max(0) as u64)))
                .collect::<Option<_>>()
                .ok_or("tiling overflows")?;
            one(out, dtype0)
        }
        _ => Err(InferStop::UnknownOp),
    }
}

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
    if let Some(n) = g
        .node
        .iter()
        .find(|n| matches!(n.op_type.as_str(), "If" | "Loop" | "Scan"))
    {
        return Err(bad(format!(
            "node `{}` is {}: control flow is not imported (memplan reads straight-line graphs; export the model with its loops unrolled)",
            if n.name.is_empty() { "?" } else { &n.name },
            n.op_type
        )));
    }
    let mut warnings = Vec::new();
    let mut vals: HashMap<String, Val> = HashMap::new();
    let mut params: BTreeMap<String, u64> = BTreeMap::new();
    let initializers: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    // The tensors whose size could not be known, with why.
    let mut stopped: Vec<(String, String)> = Vec::new();
    for t in &g.initializer {
        let val = Val {
            shape: known_shape(&t.dims),
            dtype: dtype_name(t.data_type),
            konst: tensor_ints(t),
            floats: tensor_floats(t),
        };
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
                        D {
                            k: 1,
                            p: Some(p.clone()),
                        }
                    }
                    _ => {
                        let p = format!("{}_dim{k}", vi.name);
                        params.entry(p.clone()).or_insert(1);
                        D { k: 1, p: Some(p) }
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
        let (mut shape, dtype) = info_shape(vi, &mut params);
        if let Some(fixed) = options.input_shapes.get(&vi.name) {
            shape = Some(fixed.iter().map(|&v| D::n(v)).collect());
        }
        let val = Val {
            shape,
            dtype: dtype.or(Some("f32")),
            konst: None,
            floats: None,
        };
        vals.insert(
            vi.name.clone(),
            unsized_elements(&vi.name, val, &mut stopped),
        );
    }
    for name in options.input_shapes.keys() {
        if !g.input.iter().any(|vi| &vi.name == name) {
            return Err(bad(format!(
                "--input-shape names `{name}`, which is not an input of the model"
            )));
        }
    }
    // Params no input uses any more (every input they appeared in was fixed) are dropped.
    let mut value_info: HashMap<&str, (Option<Shape>, Option<&'static str>)> = HashMap::new();
    let mut scratch_params = BTreeMap::new();
    for vi in g.value_info.iter().chain(&g.output) {
        value_info.insert(vi.name.as_str(), info_shape(vi, &mut scratch_params));
    }
    // Shapes, node by node.
    for node in &g.node {
        let inputs: Vec<Val> = node
            .input
            .iter()
            .filter(|i| !i.is_empty())
            .map(|i| vals.get(i).cloned().unwrap_or_default())
            .collect();
        let inferred = infer(node, &inputs);
        for (k, out) in node
            .output
            .iter()
            .enumerate()
            .filter(|(_, o)| !o.is_empty())
        {
            let given = value_info
                .get(out.as_str())
                .filter(|(s, _)| s.as_ref().is_some_and(|s| s.iter().all(|d| d.p.is_none())));
            let val = match (&inferred, given) {
                (Ok(v), _) if v.get(k).is_some_and(|v| v.shape.is_some()) => v[k].clone(),
                (_, Some((shape, dtype))) => Val {
                    shape: shape.clone(),
                    dtype: *dtype,
                    konst: None,
                    floats: None,
                },
                (Ok(_), None) => {
                    stopped.push((
                        out.clone(),
                        format!("{}: no shape for output {k}", node.op_type),
                    ));
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
            vals.insert(out.clone(), unsized_elements(out, val, &mut stopped));
        }
    }
    if !stopped.is_empty() {
        let list: Vec<String> = stopped
            .iter()
            .take(20)
            .map(|(t, why)| format!("`{t}` ({why})"))
            .collect();
        warnings.push(format!(
            "{} tensors could not be sized and own no bytes in the plan: {}{}",
            stopped.len(),
            list.join(", "),
            if stopped.len() > 20 { ", ..." } else { "" }
        ));
    }
    for p in params.keys() {
        warnings.push(format!("the symbolic dim `{p}` is a param, 1 unless bound (`--set {p}=N`, or a fixed `--input-shape`)"));
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
    let mut seen: HashSet<String> = HashSet::new();
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
                    id: name.to_string(),
                    shape: Some(
                        shape
                            .iter()
                            .flat_map(|d| match &d.p {
                                None => vec![Dim::Fixed(d.k)],
                                Some(p) if d.k == 1 => vec![Dim::Param(p.clone())],
                                Some(p) => vec![Dim::Fixed(d.k), Dim::Param(p.clone())],
                            })
                            .collect(),
                    ),
                    dtype: Some(dtype.to_string()),
                    kind,
                    ..Tensor::default()
                },
                _ => Tensor {
                    id: name.to_string(),
                    bytes: Some(0),
                    elided: true,
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
    let mut step_ids: HashSet<String> = HashSet::new();
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
        let writes: Vec<String> = node
            .output
            .iter()
            .filter(|o| !o.is_empty())
            .cloned()
            .collect();
        if writes.is_empty() {
            warnings.push(format!(
                "node {i} ({}) writes nothing and is left out",
                node.op_type
            ));
            continue;
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
            .get(&writes[0])
            .and_then(|v| v.shape.as_ref())
            .and_then(|s| product(s))
            .and_then(|d| d.known());
        if let (Some(w), Some(n), [out]) = (
            elementwise_weight(&node.op_type),
            elements,
            writes.as_slice(),
        ) && !outputs.contains(out.as_str())
            && vals.get(out).is_some_and(|v| v.shape.is_some())
        {
            candidates.push(RematCandidate {
                tensor: out.clone(),
                recompute_cost: n.saturating_mul(w),
            });
        }
        steps.push(Step {
            id,
            op: node.op_type.clone(),
            reads: node
                .input
                .iter()
                .filter(|i| !i.is_empty())
                .cloned()
                .collect(),
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

/// A model of about `megabytes` MB for benchmarks: conv-relu blocks of 256 channels at 56x56,
/// each with its weights stored in the file (2.4 MB a block), written with the same messages the
/// reader decodes.
pub fn synthetic_model(megabytes: u64) -> Vec<u8> {
    use proto::*;
    let c = 256i64;
    let weights = (c * c * 9 * 4) as u64;
    let blocks = (megabytes * 1_000_000).div_ceil(weights).max(1) as usize;
    let value = |name: &str, dims: &[i64]| ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: 1,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d),
                            dim_param: None,
                        })
                        .collect(),
                }),
            }),
        }),
    };
    let ints = |name: &str, v: Vec<i64>| AttributeProto {
        name: name.into(),
        ints: v,
        ..AttributeProto::default()
    };
    let mut graph = GraphProto {
        name: format!("synthetic {megabytes} MB"),
        input: vec![value("x", &[1, c, 56, 56])],
        ..GraphProto::default()
    };
    let mut x = "x".to_string();
    for i in 0..blocks {
        let (w, b, conv, relu) = (
            format!("w{i}"),
            format!("b{i}"),
            format!("conv{i}"),
            format!("relu{i}"),
        );
        graph.initializer.push(TensorProto {
            dims: vec![c, c, 3, 3],
            data_type: 1,
            name: w.clone(),
            raw_data: vec![0; weights as usize],
            ..TensorProto::default()
        });
        graph.initializer.push(TensorProto {
            dims: vec![c],
            data_type: 1,
            name: b.clone(),
            raw_data: vec![0; c as usize * 4],
            ..TensorProto::default()
        });
        graph.node.push(NodeProto {
            input: vec![x.clone(), w, b],
            output: vec![conv.clone()],
            name: conv.clone(),
            op_type: "Conv".into(),
            attribute: vec![
                ints("kernel_shape", vec![3, 3]),
                ints("pads", vec![1, 1, 1, 1]),
            ],
            ..NodeProto::default()
        });
        graph.node.push(NodeProto {
            input: vec![conv],
            output: vec![relu.clone()],
            name: relu.clone(),
            op_type: "Relu".into(),
            ..NodeProto::default()
        });
        x = relu;
    }
    graph.output.push(value(&x, &[1, c, 56, 56]));
    ModelProto {
        ir_version: 8,
        producer_name: "memplan bench".into(),
        graph: Some(graph),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
    }
    .encode_to_vec()
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
        let relu = resolved.tensor_index["relu0"];
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
        let bytes = |name: &str| resolved.tensors[resolved.tensor_index[name]].bytes;
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
            .filter(|t| t.elided)
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

    #[test]
    fn control_flow_is_refused_with_a_reason() {
        let model = proto::ModelProto {
            graph: Some(proto::GraphProto {
                node: vec![proto::NodeProto {
                    name: "loop".into(),
                    op_type: "Loop".into(),
                    output: vec!["y".into()],
                    ..proto::NodeProto::default()
                }],
                ..proto::GraphProto::default()
            }),
            ..proto::ModelProto::default()
        };
        let e = parse(&model.encode_to_vec(), &Options::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("node `loop` is Loop: control flow is not imported"),
            "{e}"
        );
    }
}
