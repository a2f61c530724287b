//! Shape inference: what the outputs of a node are, from what is known of its inputs (shapes
//! with symbolic dims, and values that fold to constants). `infer` says what stopped it when it
//! cannot, and the import warns with that, naming the node.

use std::collections::HashSet;

use memplan_core::DType;

use super::{MAX_FOLDED, proto};

mod contrib;

/// A dim: `k` times a product of symbolic params (`p`, sorted, a param once per power; empty
/// for a number). A flattened batch and sequence is `1 * [batch, sequence]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct D {
    pub(super) k: u64,
    pub(super) p: Vec<String>,
}

impl D {
    pub(super) fn n(k: u64) -> D {
        D { k, p: Vec::new() }
    }

    /// `k` times the one param `p`.
    pub(super) fn param(k: u64, p: String) -> D {
        D { k, p: vec![p] }
    }

    pub(super) fn known(&self) -> Option<u64> {
        self.p.is_empty().then_some(self.k)
    }

    pub(super) fn mul(&self, o: &D) -> Option<D> {
        // Both sorted: each of `o`'s goes after the ones not above it.
        let mut p = self.p.clone();
        for q in &o.p {
            let at = p.partition_point(|x| x <= q);
            p.insert(at, q.clone());
        }
        Some(D {
            k: self.k.checked_mul(o.k)?,
            p,
        })
    }

    /// `self / by`, where `by`'s number and params divide it.
    fn div(&self, by: &D) -> Option<D> {
        if by.k == 0 || !self.k.is_multiple_of(by.k) {
            return None;
        }
        let mut p = self.p.clone();
        for q in &by.p {
            let at = p.iter().position(|x| x == q)?;
            p.remove(at);
        }
        Some(D {
            k: self.k / by.k,
            p,
        })
    }
}

pub(super) fn product(dims: &[D]) -> Option<D> {
    dims.iter().try_fold(D::n(1), |acc, d| acc.mul(d))
}

pub(super) type Shape = Vec<D>;

/// What is known of a value.
#[derive(Debug, Clone, Default)]
pub(super) struct Val {
    pub(super) shape: Option<Shape>,
    pub(super) dtype: Option<&'static str>,
    /// Its integer contents, when small and known (shapes, axes, indices).
    pub(super) konst: Option<Vec<i64>>,
    /// Its float contents, when small and known (Resize scales).
    pub(super) floats: Option<Vec<f64>>,
    /// Why its shape is not known, where the node's other outputs are (the import's warning
    /// says it).
    pub(super) why: Option<InferStop>,
    /// Its size depends on the values the node reads (a `NonZero`'s count): its shape is the
    /// most it can be, as a static plan must hold (the import's warning names it).
    pub(super) at_most: bool,
}

impl Val {
    /// A value of `shape` and `dtype` whose contents are not known.
    pub(super) fn sized(shape: Shape, dtype: Option<&'static str>) -> Val {
        Val {
            shape: Some(shape),
            dtype,
            ..Val::default()
        }
    }

    /// A tensor the file holds (an initializer, a `Constant`'s value): its shape, type and,
    /// where it stores them, its values.
    pub(super) fn of_tensor(t: &proto::TensorProto) -> Val {
        Val {
            shape: known_shape(&t.dims),
            dtype: dtype_name(t.data_type),
            konst: tensor_ints(t),
            floats: tensor_floats(t),
            ..Val::default()
        }
    }
}

/// The dtype of an ONNX element type; `None` where the file leaves it undefined. Strings, and
/// types newer than this reader, get a name that is no [`DType`]: their tensors stay unsized
/// ([`unsized_elements`]), where guessing four bytes an element would be wrong by any factor.
pub(super) fn dtype_name(t: i32) -> Option<&'static str> {
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

pub(super) const STRING: &str = "string";
pub(super) const UNKNOWN_ELEMENTS: &str = "an element type this reader does not know";

/// `val` as the plan may size it: a tensor of strings (or of an element type this reader does not
/// know) has no fixed bytes an element, so it loses its shape, and `stopped` says why.
pub(super) fn unsized_elements(name: &str, val: Val, stopped: &mut Vec<(String, String)>) -> Val {
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

pub(super) fn attr<'a>(
    node: &'a proto::NodeProto,
    name: &str,
) -> Option<&'a proto::AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

pub(super) fn attr_i(node: &proto::NodeProto, name: &str, default: i64) -> i64 {
    attr(node, name).map_or(default, |a| a.i)
}

pub(super) fn attr_ints(node: &proto::NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(node, name).map(|a| a.ints.clone())
}

/// The integer contents of a small integer tensor.
pub(super) fn tensor_ints(t: &proto::TensorProto) -> Option<Vec<i64>> {
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
pub(super) fn tensor_floats(t: &proto::TensorProto) -> Option<Vec<f64>> {
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

pub(super) fn known_shape(dims: &[i64]) -> Option<Shape> {
    dims.iter()
        .map(|&d| u64::try_from(d).ok().map(D::n))
        .collect()
}

/// Multidirectional (numpy) broadcasting.
pub(super) fn broadcast(shapes: &[&Shape]) -> Option<Shape> {
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

pub(super) fn axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

/// Output spatial dims of a convolution or pool.
pub(super) fn window(
    node: &proto::NodeProto,
    x: &Shape,
    kernel: &[u64],
    transposed: bool,
) -> Option<Vec<D>> {
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
pub(super) fn elementwise_weight(op: &str) -> Option<u64> {
    Some(match op {
        "Relu" | "LeakyRelu" | "Abs" | "Neg" | "Identity" | "Clip" | "Add" | "Sub" | "Mul"
        | "Max" | "Min" | "Sign" | "Ceil" | "Floor" | "Round" | "Not" | "PRelu" | "Sum" => 1,
        "Div" | "Reciprocal" | "Sqrt" | "HardSigmoid" | "HardSwish" | "Mean" => 2,
        "Sigmoid" | "Tanh" | "Exp" | "Log" | "Elu" | "Selu" | "Softplus" | "Softsign" | "Gelu"
        | "Erf" | "Sin" | "Cos" | "Pow" | "Mish" | "Swish" => 4,
        _ => return None,
    })
}

pub(super) const UNARY: &[&str] = &[
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
    "CumProd",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Hardmax",
    "LpNormalization",
    "MeanVarianceNormalization",
    "RMSNormalization",
    "RotaryEmbedding",
    "Trilu",
    "BitwiseNot",
    "ReverseSequence",
    "ScatterND",
    "ScatterElements",
    "Scatter",
    // ONNX Runtime's, which it reads in this domain as well as its own.
    "SimplifiedLayerNormalization",
];

pub(super) const BINARY: &[&str] = &[
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
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
];

/// What stopped shape inference at a node (the import says it as a warning, naming the node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum InferStop {
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

/// A node and what is known of its inputs, as each op family's inference reads them.
pub(super) struct Inputs<'a> {
    node: &'a proto::NodeProto,
    inputs: &'a [Val],
    op: &'a str,
    /// The first input's element type, which most ops keep.
    dtype0: Option<&'static str>,
    /// The version of the default operator set the model imports: a few ops changed shape.
    opset: i64,
}

impl Inputs<'_> {
    fn shape(&self, k: usize) -> Result<&Shape, InferStop> {
        (self.inputs.get(k))
            .and_then(|v| v.shape.as_ref())
            .ok_or(InferStop::UnknownInput(k))
    }

    fn konst(&self, k: usize) -> Option<Vec<i64>> {
        self.inputs.get(k).and_then(|v| v.konst.clone())
    }

    /// The input at position `k` of the node's own list, where an optional input left out is
    /// an empty name (`inputs` holds only those given); `None` when it is left out.
    fn at(&self, k: usize) -> Option<&Val> {
        let names = &self.node.input;
        if names.get(k).is_none_or(|name| name.is_empty()) {
            return None;
        }
        let given = names[..k].iter().filter(|name| !name.is_empty()).count();
        self.inputs.get(given)
    }

    /// The integer contents of the input at position `k` of the node's own list.
    fn konst_at(&self, k: usize) -> Option<Vec<i64>> {
        self.at(k).and_then(|v| v.konst.clone())
    }

    /// The shape of the input at position `k` of the node's own list ([`Inputs::at`]).
    fn shape_at(&self, k: usize) -> Result<&Shape, InferStop> {
        (self.at(k).and_then(|v| v.shape.as_ref())).ok_or(InferStop::UnknownInput(k))
    }
}

/// One output of `shape` and `dtype`.
fn one(shape: Shape, dtype: Option<&'static str>) -> Result<Vec<Val>, InferStop> {
    Ok(vec![Val::sized(shape, dtype)])
}

fn fail(why: &'static str) -> Result<Vec<Val>, InferStop> {
    Err(InferStop::Cannot(why))
}

/// Infers the outputs of one node from what is known of its inputs: `Err` says what stopped it.
/// One function per op family.
pub(super) fn infer(
    node: &proto::NodeProto,
    inputs: &[Val],
    opset: i64,
) -> Result<Vec<Val>, InferStop> {
    let op = node.op_type.as_str();
    let n = Inputs {
        node,
        inputs,
        op,
        dtype0: inputs.first().and_then(|v| v.dtype),
        opset,
    };
    match node.domain.as_str() {
        "" | "ai.onnx" => onnx(&n),
        "com.microsoft" => contrib::infer(&n),
        _ => Err(InferStop::UnknownOp),
    }
}

/// Infers the outputs of a node of the default domain, ONNX's own ops.
fn onnx(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let op = n.op;
    match op {
        _ if UNARY.contains(&op) => unary(n),
        "Dropout" => dropout(n),
        "Cast" => cast(n),
        _ if BINARY.contains(&op) => binary(n),
        "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" | "LpPool" | "DeformConv"
        | "ConvInteger" | "QLinearConv" => convolutions_and_pools(n),
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => global_pools(n),
        "Gemm" => gemm(n),
        "MatMul" | "MatMulInteger" | "QLinearMatMul" => matmul(n),
        "Concat" => concat(n),
        "Split" => split(n),
        "Reshape" => reshape(n),
        "Flatten" => flatten(n),
        "Transpose" => transpose(n),
        "Squeeze" | "Unsqueeze" => squeeze(n),
        "Pad" => pad(n),
        "Resize" | "Upsample" => resize(n),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL2"
        | "ReduceL1" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" | "ArgMax"
        | "ArgMin" => reductions(n),
        "Expand" => expand(n),
        "Shape" => shape_op(n),
        "Size" => size(n),
        "Gather" => gather(n),
        "Slice" => slice(n),
        "Range" => range(n),
        "ConstantOfShape" => constant_of_shape(n),
        "Constant" => constant(n),
        "TopK" => top_k(n),
        "NonZero" => non_zero(n),
        "NonMaxSuppression" => non_max_suppression(n),
        "Compress" => compress(n),
        "Unique" => unique(n),
        "Tile" => tile(n),
        "IsNaN" | "IsInf" => one(n.shape(0)?.clone(), Some("bool")),
        "CastLike" => cast(n),
        "EyeLike" | "RandomNormalLike" | "RandomUniformLike" | "Bernoulli" => like(n),
        "GatherElements" => one(n.shape(1)?.clone(), n.dtype0),
        "GatherND" => gather_nd(n),
        "OneHot" => one_hot(n),
        "DepthToSpace" | "SpaceToDepth" => depth_and_space(n),
        "Det" => determinant(n),
        "QuantizeLinear" | "DequantizeLinear" | "DynamicQuantizeLinear" => quantization(n),
        "Einsum" => einsum(n),
        "LSTM" | "GRU" | "RNN" => recurrent(n),
        "Attention" => attention(n),
        "SoftmaxCrossEntropyLoss" | "NegativeLogLikelihoodLoss" => losses(n),
        "GridSample" => grid_sample(n),
        "RoiAlign" => roi_align(n),
        "If" | "Loop" | "Scan" => control_flow(n),
        _ => Err(InferStop::UnknownOp),
    }
}

/// The elementwise unary ops.
fn unary(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, op, dtype0) = (n.node, n.op, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let s = shape(0)?.clone();
    let mut out = vec![Val::sized(s, dtype0)];
    let floats = n.inputs.first().and_then(|v| v.floats.as_ref());
    if let Some(values) = floats.filter(|_| !integral(dtype0)) {
        out[0].floats = (values.iter())
            .map(|&v| {
                let y = match op {
                    "Identity" => v,
                    "Neg" => -v,
                    "Abs" => v.abs(),
                    "Floor" => v.floor(),
                    "Ceil" => v.ceil(),
                    "Round" => v.round_ties_even(),
                    "Sqrt" => v.sqrt(),
                    "Reciprocal" => 1.0 / v,
                    _ => return None,
                };
                rounded(y, dtype0)
            })
            .collect();
    }
    if integral(dtype0) {
        out[0].konst = (n.konst(0)).and_then(|values| {
            (values.iter())
                .map(|&v| match op {
                    "Identity" => Some(v),
                    "Neg" => v.checked_neg(),
                    "Abs" => v.checked_abs(),
                    "Sign" => Some(v.signum()),
                    "Not" => Some(i64::from(v == 0)),
                    _ => None,
                })
                .collect()
        });
    }
    if matches!(op, "LayerNormalization" | "SimplifiedLayerNormalization") && node.output.len() > 1
    {
        // The mean and inverse standard deviation: one per normalized group, in `stash_type`.
        let x = shape(0)?;
        let a = axis(attr_i(node, "axis", -1), x.len()).ok_or("the axis is out of range")?;
        let mut per_group = x[..a].to_vec();
        per_group.resize(x.len(), D::n(1));
        let stash = dtype_name(attr_i(node, "stash_type", 1) as i32);
        for _ in 1..node.output.len() {
            out.push(Val::sized(per_group.clone(), stash));
        }
    }
    if op == "BatchNormalization" {
        // Training-mode outputs: the running mean and variance, per channel.
        let c = shape(0)?.get(1).cloned().unwrap_or(D::n(1));
        for _ in 1..node.output.len() {
            out.push(Val::sized(vec![c.clone()], dtype0));
        }
    }
    Ok(out)
}

/// `Dropout`.
fn dropout(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let dtype0 = n.dtype0;
    let shape = |k: usize| n.shape(k);
    let x = shape(0)?;
    // The mask of what it kept, of the input's shape: a bool each from opset 10, the input's
    // element type before (Dropout-7). ONNX Runtime allocates it so, where onnx's own shape
    // inference leaves it unsized before opset 12.
    let mask = if n.opset >= 10 { Some("bool") } else { dtype0 };
    Ok(vec![
        Val::sized(x.clone(), dtype0),
        Val::sized(x.clone(), mask),
    ])
}

/// `Cast`, `CastLike`.
fn cast(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let node = n.node;
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
    let to = match n.op {
        "CastLike" => n.inputs.get(1).and_then(|v| v.dtype),
        _ => dtype_name(attr_i(node, "to", 1) as i32),
    };
    let x = n.inputs.first().ok_or(InferStop::UnknownInput(0))?;
    // Floats to integers truncate (as C++'s cast does, in range); integers to floats round.
    let (konst, floats) = match (&x.floats, integral(to)) {
        (Some(floats), true) => {
            let int = |f: f64| (f.is_finite() && f.abs() < 9.2e18).then(|| f.trunc() as i64);
            let ints: Option<Vec<i64>> = floats.iter().map(|&f| int(f)).collect();
            (
                ints.map(|v| match to {
                    Some("bool") => v.iter().map(|&i| i64::from(i != 0)).collect(),
                    _ => v,
                }),
                None,
            )
        }
        (_, true) => (konst(0), None),
        (_, false) => {
            let floats = float_values(x).and_then(|v| v.iter().map(|&f| rounded(f, to)).collect());
            (konst(0), floats)
        }
    };
    Ok(vec![Val {
        konst,
        floats,
        ..Val::sized(shape(0)?.clone(), to)
    }])
}

/// The elementwise binary ops (broadcasting).
fn binary(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (inputs, op, dtype0) = (n.inputs, n.op, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let shapes: Vec<&Shape> = (0..inputs.len()).map(shape).collect::<Result<_, _>>()?;
    let out = broadcast(&shapes).ok_or("the shapes do not broadcast")?;
    let dtype = match op {
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor" => {
            Some("bool")
        }
        "Where" => inputs.get(1).and_then(|v| v.dtype),
        _ => dtype0,
    };
    // Shape arithmetic on constants folds (an exporter's `expand` target is `Where(Equal(s,
    // -1), ones, s)`), on floats as the float type computes it (a resize's size from a scale).
    let python_mod = attr_i(n.node, "fmod", 0) == 0;
    let (konst, floats) = match inputs.iter().all(|v| integral(v.dtype)) {
        true => {
            let operands = int_operands(inputs);
            let folded = operands
                .and_then(|o| fold_elementwise(&o, &out, &|a| integer_op(op, python_mod, a)));
            (folded, None)
        }
        false => fold_floats(n, &out, dtype),
    };
    Ok(vec![Val {
        konst,
        floats,
        ..Val::sized(out, dtype)
    }])
}

/// Elementwise op `op` on integers (booleans 0 and 1), its operands `a` in order; `None` where
/// it has no value (an op not folded, an overflow, a division by zero, a malformed node's
/// missing operand).
fn integer_op(op: &str, python_mod: bool, a: &[i64]) -> Option<i64> {
    let (x, y) = (*a.first()?, a.get(1).copied());
    let truth = |b: bool| Some(i64::from(b));
    match op {
        "Add" | "Sum" => a.iter().try_fold(0i64, |x, &y| x.checked_add(y)),
        "Max" => a.iter().copied().max(),
        "Min" => a.iter().copied().min(),
        "Where" => Some(if x != 0 { y? } else { *a.get(2)? }),
        "Sub" => x.checked_sub(y?),
        "Mul" => x.checked_mul(y?),
        "Div" => x.checked_div(y?),
        // Python's sign, the divisor's, unless `fmod`.
        "Mod" if python_mod => {
            let (y, r) = (y?, x.checked_rem_euclid(y?)?);
            Some(if y < 0 && r != 0 { r + y } else { r })
        }
        "Mod" => x.checked_rem(y?),
        "Equal" => truth(x == y?),
        "Less" => truth(x < y?),
        "Greater" => truth(x > y?),
        "LessOrEqual" => truth(x <= y?),
        "GreaterOrEqual" => truth(x >= y?),
        "And" => truth(x != 0 && y? != 0),
        "Or" => truth(x != 0 || y? != 0),
        "Xor" => truth((x != 0) != (y? != 0)),
        _ => None,
    }
}

/// An integer or boolean element type: one whose constants [`Val::konst`] holds exactly.
fn integral(dtype: Option<&'static str>) -> bool {
    matches!(
        dtype,
        Some("i64" | "i32" | "i16" | "i8" | "u64" | "u32" | "u16" | "u8" | "bool")
    )
}

/// The values of an elementwise op `f` over `operands` (each a shape and its values)
/// broadcast to `out`, where every operand's values and every dim are known and the output is
/// small; `None` where `f` is (an overflow, a division by zero).
fn fold_elementwise<T: Copy + Default>(
    operands: &[(&Shape, &[T])],
    out: &Shape,
    f: &dyn Fn(&[T]) -> Option<T>,
) -> Option<Vec<T>> {
    let known = |shape: &Shape| shape.iter().map(D::known).collect::<Option<Vec<u64>>>();
    let dims = known(out)?;
    let count = product(out)?.known().filter(|&c| c <= MAX_FOLDED)?;
    let operands: Vec<(Vec<u64>, &[T])> = (operands.iter())
        .map(|&(shape, values)| {
            let elements = product(shape)?.known()?;
            (values.len() as u64 == elements && shape.len() <= out.len())
                .then(|| Some((known(shape)?, values)))?
        })
        .collect::<Option<_>>()?;
    let mut args = vec![T::default(); operands.len()];
    (0..count)
        .map(|flat| {
            for ((own, values), arg) in operands.iter().zip(&mut args) {
                // Each dim of the output from the last, read where the operand has it (a dim
                // of 1 broadcasts: index 0).
                let (mut rest, mut index, mut stride) = (flat, 0, 1);
                for (k, &d) in dims.iter().enumerate().rev() {
                    let at = rest % d.max(1);
                    rest /= d.max(1);
                    let Some(&o) = (k + own.len()).checked_sub(dims.len()).map(|j| &own[j]) else {
                        continue;
                    };
                    index += if o == 1 { 0 } else { at } * stride;
                    stride *= o;
                }
                *arg = values[index as usize];
            }
            f(&args)
        })
        .collect()
}

/// The integer values of `inputs`, each with its shape, where all are known.
fn int_operands(inputs: &[Val]) -> Option<Vec<(&Shape, &[i64])>> {
    (inputs.iter())
        .map(|v| Some((v.shape.as_ref()?, v.konst.as_deref()?)))
        .collect()
}

/// `x` as an element of `dtype` holds it: `f32` rounds (an `f32` sum, difference, product,
/// quotient or square root computed in `f64` and rounded is the `f32` one, bit for bit);
/// `None` for the float types folding does not model (`f16`, `bf16`, ...).
fn rounded(x: f64, dtype: Option<&str>) -> Option<f64> {
    match dtype {
        Some("f32") => Some(f64::from(x as f32)),
        Some("f64") => Some(x),
        _ => None,
    }
}

/// The values of `v` as floats: its float values, or its integers (exact below 2^53).
fn float_values(v: &Val) -> Option<Vec<f64>> {
    match (&v.floats, &v.konst) {
        (Some(floats), _) => Some(floats.clone()),
        (None, Some(ints)) => (ints.iter())
            .map(|&i| (i.unsigned_abs() < 1 << 53).then_some(i as f64))
            .collect(),
        _ => None,
    }
}

/// Elementwise op `op` on floats, its operands `a` in order (a comparison's truth as 0 or 1);
/// `None` where it has no value here (an op not folded, a malformed node's missing operand).
fn float_op(op: &str, a: &[f64]) -> Option<f64> {
    let (x, y) = (*a.first()?, a.get(1).copied());
    let truth = |b: bool| Some(f64::from(u8::from(b)));
    match op {
        // More than two would round after each sum, as the float type adds them.
        "Add" | "Sum" if a.len() <= 2 => Some(a.iter().sum()),
        "Max" => a.iter().copied().reduce(f64::max),
        "Min" => a.iter().copied().reduce(f64::min),
        "Where" => Some(if x != 0.0 { y? } else { *a.get(2)? }),
        "Sub" => Some(x - y?),
        "Mul" => Some(x * y?),
        "Div" => Some(x / y?),
        "Equal" => truth(x == y?),
        "Less" => truth(x < y?),
        "Greater" => truth(x > y?),
        "LessOrEqual" => truth(x <= y?),
        "GreaterOrEqual" => truth(x >= y?),
        _ => None,
    }
}

/// `binary`'s values where an input is a float: folded where every input's values are known
/// and the output is a float type folding models (floats) or a comparison (booleans).
fn fold_floats(
    n: &Inputs,
    out: &Shape,
    dtype: Option<&'static str>,
) -> (Option<Vec<i64>>, Option<Vec<f64>>) {
    let values: Option<Vec<Vec<f64>>> = n.inputs.iter().map(float_values).collect();
    let Some(values) = values else {
        return (None, None);
    };
    let Some(operands) = (n.inputs.iter().zip(&values))
        .map(|(v, values)| Some((v.shape.as_ref()?, values.as_slice())))
        .collect::<Option<Vec<_>>>()
    else {
        return (None, None);
    };
    // The operands' own type rounds a comparison's; the output's, the rest.
    let rounding = match dtype {
        Some("bool") => n
            .inputs
            .iter()
            .rev()
            .find_map(|v| v.dtype)
            .filter(|d| !integral(Some(d))),
        _ => dtype,
    };
    let folded = fold_elementwise(&operands, out, &|a| rounded(float_op(n.op, a)?, rounding));
    match dtype {
        Some("bool") => (folded.map(|v| v.iter().map(|&b| b as i64).collect()), None),
        _ => (None, folded),
    }
}

/// `Conv`, `ConvTranspose`, `MaxPool`, `AveragePool`, `LpPool`, and the convolutions of
/// other inputs or element types: `DeformConv`, `ConvInteger`, `QLinearConv`.
fn convolutions_and_pools(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, op) = (n.node, n.op);
    let x = n.shape(0)?;
    // The weights: after the input's scale and zero point in `QLinearConv`.
    let weights = || n.shape_at(if op == "QLinearConv" { 3 } else { 1 });
    let dtype = match op {
        "ConvInteger" => Some("i32"),
        "QLinearConv" => n.at(7).and_then(|v| v.dtype),
        _ => n.dtype0,
    };
    let kernel: Vec<u64> = match attr_ints(node, "kernel_shape") {
        Some(k) => k.iter().map(|&v| u64::try_from(v).unwrap_or(0)).collect(),
        None if op.ends_with("Pool") => return fail("a pool without kernel_shape"),
        None => (weights()?.get(2..))
            .and_then(|dims| dims.iter().map(|d| d.known()).collect::<Option<_>>())
            .ok_or("the weights' spatial dims are unknown")?,
    };
    let spatial = window(node, x, &kernel, op == "ConvTranspose")
        .ok_or("the spatial dims cannot be computed")?;
    let channels = match op {
        "ConvTranspose" => {
            let group = attr_i(node, "group", 1).max(1) as u64;
            weights()?
                .get(1)
                .and_then(|d| d.known())
                .map(|c| D::n(c * group))
                .ok_or("the weights' channels are unknown")?
        }
        _ if op.ends_with("Pool") => x[1].clone(),
        _ => (weights()?.first().cloned()).ok_or("the weights' channels are unknown")?,
    };
    let mut out = vec![x[0].clone(), channels];
    out.extend(spatial);
    let mut vals = vec![Val::sized(out.clone(), dtype)];
    if node.output.len() > 1 {
        vals.push(Val::sized(out, Some("i64")));
    }
    Ok(vals)
}

/// `GlobalAveragePool`, `GlobalMaxPool`, `GlobalLpPool`.
fn global_pools(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let dtype0 = n.dtype0;
    let shape = |k: usize| n.shape(k);
    let x = shape(0)?;
    let mut out = x[..2.min(x.len())].to_vec();
    out.extend(std::iter::repeat_n(D::n(1), x.len().saturating_sub(2)));
    one(out, dtype0)
}

/// `Gemm`.
fn gemm(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, dtype0) = (n.node, n.dtype0);
    let shape = |k: usize| n.shape(k);
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

/// `MatMul`, `MatMulInteger`, `QLinearMatMul`, and ONNX Runtime's `FusedMatMul`.
fn matmul(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let op = n.op;
    // `QLinearMatMul`'s second matrix follows the first's scale and zero point.
    let b = if op == "QLinearMatMul" { 3 } else { 1 };
    let (mut a, mut b) = (n.shape(0)?.clone(), n.shape_at(b)?.clone());
    if op == "FusedMatMul" {
        // ONNX Runtime's: each matrix's last two dims swapped where `transA`/`transB` say.
        if attr_i(n.node, "transBatchA", 0) != 0 || attr_i(n.node, "transBatchB", 0) != 0 {
            return fail("a FusedMatMul transposing its batch dims is not inferred");
        }
        for (m, name) in [(&mut a, "transA"), (&mut b, "transB")] {
            if attr_i(n.node, name, 0) != 0 && m.len() >= 2 {
                let last = m.len() - 1;
                m.swap(last - 1, last);
            }
        }
    }
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
    let dtype = match op {
        "MatMulInteger" => Some("i32"),
        "QLinearMatMul" => n.at(7).and_then(|v| v.dtype),
        _ => n.dtype0,
    };
    one(out, dtype)
}

/// `Concat`.
fn concat(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, inputs, dtype0) = (n.node, n.inputs, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
    let shapes: Vec<&Shape> = (0..inputs.len()).map(shape).collect::<Result<_, _>>()?;
    let first = shapes.first().ok_or("no inputs")?;
    let a = axis(attr_i(node, "axis", 0), first.len()).ok_or("the axis is out of range")?;
    let mut out = (*first).clone();
    let mut total = D::n(0);
    for s in &shapes {
        let d = s.get(a).ok_or("the ranks differ")?;
        total = add(&total, d).ok_or("concatenating symbolic dims")?;
    }
    out[a] = total;
    let folded = (0..inputs.len())
        .map(konst)
        .collect::<Option<Vec<_>>>()
        .map(|v| v.concat());
    let floats = (inputs.iter().map(|v| v.floats.clone()))
        .collect::<Option<Vec<_>>>()
        .map(|v| v.concat());
    Ok(vec![Val {
        konst: folded,
        floats,
        ..Val::sized(out, dtype0)
    }])
}

/// `Split`.
fn split(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, inputs, dtype0) = (n.node, n.inputs, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
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
            Val::sized(s, dtype0)
        })
        .collect())
}

/// `Reshape`.
fn reshape(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, dtype0) = (n.node, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
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
        out[hole] = Some(match rest.k {
            0 => D::n(0),
            _ => total.div(&rest).ok_or("the sizes do not divide")?,
        });
    }
    let out = (out.into_iter().collect::<Option<_>>()).ok_or("a dim of the target is invalid")?;
    // The same values in the same order: a constant stays one.
    Ok(vec![Val {
        konst: konst(0),
        floats: n.inputs.first().and_then(|v| v.floats.clone()),
        ..Val::sized(out, dtype0)
    }])
}

/// `Flatten`.
fn flatten(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, dtype0) = (n.node, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let x = shape(0)?;
    let a = attr_i(node, "axis", 1);
    let a = if a < 0 { a + x.len() as i64 } else { a }.clamp(0, x.len() as i64) as usize;
    let outer = product(&x[..a]).ok_or("more than one symbolic dim")?;
    let inner = product(&x[a..]).ok_or("more than one symbolic dim")?;
    one(vec![outer, inner], dtype0)
}

/// `Transpose`.
fn transpose(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, dtype0) = (n.node, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let x = shape(0)?;
    let perm = attr_ints(node, "perm").unwrap_or_else(|| (0..x.len() as i64).rev().collect());
    let out: Shape = (perm.iter())
        .map(|&p| x.get(usize::try_from(p).ok()?).cloned())
        .collect::<Option<_>>()
        .ok_or("the permutation is out of range")?;
    // Known values move with their axes.
    let v = n.inputs.first();
    let axes = v.and_then(dims_of).map(|dims| {
        let strides = strides(&dims);
        (perm.iter().map(|&p| p as usize))
            .map(|p| ((0..dims[p]).collect(), strides[p]))
            .collect::<Vec<_>>()
    });
    Ok(vec![strided_val(v, axes.as_deref(), out, dtype0)])
}

/// `Squeeze`, `Unsqueeze`.
fn squeeze(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, op, dtype0) = (n.node, n.op, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
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
    // The same values in the same order.
    Ok(vec![Val {
        konst: konst(0),
        floats: n.inputs.first().and_then(|v| v.floats.clone()),
        ..Val::sized(out, dtype0)
    }])
}

/// `Pad`: the pads (before, then after) of each axis listed (opset 18's `axes`), or of every
/// axis; an axis padded by nothing keeps its dim, symbolic or not.
fn pad(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let pads = attr_ints(n.node, "pads")
        .or_else(|| n.konst(1))
        .ok_or("the pads are not constant")?;
    let axes: Vec<usize> = match n.konst_at(3) {
        Some(axes) => (axes.iter().map(|&a| axis(a, x.len())))
            .collect::<Option<_>>()
            .ok_or("an axis is out of range")?,
        None => (0..x.len()).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return fail("the pads do not match the axes");
    }
    let mut out = x.clone();
    for (k, &a) in axes.iter().enumerate() {
        let pad = pads[k]
            .checked_add(pads[k + axes.len()])
            .ok_or("the pads overflow")?;
        if pad == 0 {
            continue;
        }
        let padded = (x[a].known())
            .and_then(|d| i64::try_from(d).ok())
            .and_then(|d| d.checked_add(pad))
            .ok_or("padding a symbolic dim")?;
        out[a] = D::n(u64::try_from(padded).map_err(|_| "the pads remove more than the dim")?);
    }
    one(out, n.dtype0)
}

/// `Resize`, `Upsample`.
fn resize(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, op, dtype0) = (n.node, n.op, n.dtype0);
    let x = n.shape(0)?;
    // Resize: (X, roi, scales, sizes), by position (the roi, and the scales where the sizes
    // are given, are often left out: an empty name); Upsample: (X, scales).
    let sizes = if op == "Resize" { n.konst_at(3) } else { None };
    if let Some(sizes) = sizes.filter(|s| s.len() == x.len()) {
        return one(
            sizes.iter().map(|&v| D::n(v.max(0) as u64)).collect(),
            dtype0,
        );
    }
    let scale_input = if op == "Resize" { 2 } else { 1 };
    let scales = (n.at(scale_input))
        .and_then(|v| v.floats.clone())
        .or_else(|| attr(node, "scales").map(|a| a.floats.iter().map(|&f| f64::from(f)).collect()))
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

/// `ReduceMean`, `ReduceSum`, `ReduceMax`, `ReduceMin`, `ReduceProd`, `ReduceL2`, `ReduceL1`, `ReduceLogSumExp`, `ReduceSumSquare`, `ArgMax`, `ArgMin`.
fn reductions(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, inputs, op, dtype0) = (n.node, n.inputs, n.op, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
    let x = shape(0)?;
    let keep = attr_i(node, "keepdims", 1) == 1;
    // The axes, from the attribute or (opset 13 and later) the second input; none means
    // all of them, or none at all with `noop_with_empty_axes`.
    let axes: Vec<i64> = match (op.starts_with("Arg"), attr_ints(node, "axes")) {
        (true, _) => vec![attr_i(node, "axis", 0)],
        (false, Some(axes)) => axes,
        (false, None) if inputs.len() > 1 => konst(1).ok_or("the axes are not a constant")?,
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
    if op.starts_with("Arg") {
        return one(out, Some("i64"));
    }
    // A reduction of known values over every axis (shape arithmetic's smaller side) folds.
    let x = n.inputs.first().filter(|_| axes.len() == x.len());
    let ints = x
        .and_then(|x| x.konst.as_deref())
        .filter(|_| integral(dtype0));
    let konst = ints.and_then(|v| match op {
        "ReduceMin" => v.iter().copied().min(),
        "ReduceMax" => v.iter().copied().max(),
        "ReduceSum" => v.iter().try_fold(0i64, |a, &b| a.checked_add(b)),
        "ReduceProd" => v.iter().try_fold(1i64, |a, &b| a.checked_mul(b)),
        _ => None,
    });
    let floats = x.and_then(|x| x.floats.as_deref()).and_then(|v| match op {
        "ReduceMin" => v.iter().copied().reduce(f64::min),
        "ReduceMax" => v.iter().copied().reduce(f64::max),
        _ => None,
    });
    Ok(vec![Val {
        konst: konst.map(|k| vec![k]),
        floats: floats.map(|f| vec![f]),
        ..Val::sized(out, dtype0)
    }])
}

/// `Expand`.
fn expand(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let dtype0 = n.dtype0;
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
    let x = shape(0)?;
    let target: Shape = konst(1)
        .ok_or("the target shape is not a constant")?
        .iter()
        .map(|&v| D::n(v.max(0) as u64))
        .collect();
    let out = broadcast(&[x, &target]).ok_or("the shapes do not broadcast")?;
    let konst = int_operands(&n.inputs[..1])
        .and_then(|o| fold_elementwise(&o, &out, &|a| a.first().copied()));
    Ok(vec![Val {
        konst,
        ..Val::sized(out, dtype0)
    }])
}

/// `Shape`.
fn shape_op(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let node = n.node;
    let shape = |k: usize| n.shape(k);
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
        konst: values,
        ..Val::sized(vec![D::n(x.len() as u64)], Some("i64"))
    }])
}

/// `Size`.
fn size(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let shape = |k: usize| n.shape(k);
    Ok(vec![Val {
        konst: product(shape(0)?)
            .and_then(|d| d.known())
            .map(|v| vec![v as i64]),
        ..Val::sized(vec![], Some("i64"))
    }])
}

/// `Gather`.
fn gather(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, dtype0) = (n.node, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
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
        konst: folded,
        ..Val::sized(out, dtype0)
    }])
}

/// `Slice`.
fn slice(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, dtype0) = (n.node, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
    let x = shape(0)?;
    let (starts, ends) = match (
        attr_ints(node, "starts").or_else(|| konst(1)),
        attr_ints(node, "ends").or_else(|| konst(2)),
    ) {
        (Some(s), Some(e)) => (s, e),
        _ => return fail("the slice bounds are not constant"),
    };
    // By position: the axes may be left out (an empty name) where the steps are given.
    let axes = attr_ints(node, "axes")
        .or_else(|| n.konst_at(3))
        .unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = n.konst_at(4).unwrap_or_else(|| vec![1; starts.len()]);
    let mut out = x.clone();
    // The indices each axis keeps, where every dim is known (to fold known values).
    let mut picks: Option<Vec<Vec<u64>>> = (x.iter())
        .map(|d| Some((0..d.known()?).collect()))
        .collect();
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
        if let Some(picks) = picks.as_mut() {
            picks[a] = (0..len).map(|k| (s + k * step) as u64).collect();
        }
    }
    let x = n.inputs.first();
    let strided = |p: &[Vec<u64>]| {
        let strides = strides(&dims_of(x?)?);
        Some(p.iter().cloned().zip(strides).collect::<Vec<_>>())
    };
    let axes = picks.as_deref().and_then(strided);
    Ok(vec![strided_val(x, axes.as_deref(), out, dtype0)])
}

/// A value of `shape` and `dtype` whose known values (integers or floats) are those of `v`
/// that `axes` pick ([`gather_strided`]), where `v`'s are known.
fn strided_val(
    v: Option<&Val>,
    axes: Option<&[(Vec<u64>, u64)]>,
    shape: Shape,
    dtype: Option<&'static str>,
) -> Val {
    Val {
        konst: axes.and_then(|a| gather_strided(v?.konst.as_deref()?, a)),
        floats: axes.and_then(|a| gather_strided(v?.floats.as_deref()?, a)),
        ..Val::sized(shape, dtype)
    }
}

/// The known dims of `v`'s shape.
fn dims_of(v: &Val) -> Option<Vec<u64>> {
    v.shape.as_ref()?.iter().map(D::known).collect()
}

/// Row-major strides of `dims`: how far apart in the values consecutive indices of each axis
/// are.
fn strides(dims: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1].saturating_mul(dims[k + 1]);
    }
    strides
}

/// Of `values`, the elements that `axes` (each its indices kept, in order, and the stride of
/// the input axis they index) pick, row-major over the axes: a slice or a transpose of known
/// values, where the output is small.
fn gather_strided<T: Copy>(values: &[T], axes: &[(Vec<u64>, u64)]) -> Option<Vec<T>> {
    let count = (axes.iter()).try_fold(1u64, |a, (p, _)| a.checked_mul(p.len() as u64))?;
    if count > MAX_FOLDED {
        return None;
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut at = vec![0usize; axes.len()];
    for _ in 0..count {
        let offset = (axes.iter().zip(&at))
            .map(|((p, stride), &i)| p[i] * stride)
            .sum::<u64>();
        out.push(*values.get(usize::try_from(offset).ok()?)?);
        // The next index, the last axis fastest.
        for k in (0..axes.len()).rev() {
            at[k] += 1;
            if at[k] < axes[k].0.len() {
                break;
            }
            at[k] = 0;
        }
    }
    Some(out)
}

/// `Range`.
fn range(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let dtype0 = n.dtype0;
    let konst = |k: usize| n.konst(k);
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
        konst: values,
        ..Val::sized(vec![D::n(n)], dtype0)
    }])
}

/// `ConstantOfShape`.
fn constant_of_shape(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let node = n.node;
    let konst = |k: usize| n.konst(k);
    let dims = konst(0).ok_or("the shape is not a constant")?;
    let value = attr(node, "value").and_then(|a| a.t.as_ref());
    let dtype = value.and_then(|t| dtype_name(t.data_type)).or(Some("f32"));
    let shape: Shape = dims.iter().map(|&v| D::n(v.max(0) as u64)).collect();
    // An integer fill of a small shape is a constant (the ones an exporter compares with).
    let count = product(&shape)
        .and_then(|c| c.known())
        .filter(|&c| c <= MAX_FOLDED);
    let fill = (value.and_then(tensor_ints).as_deref()).and_then(|v| v.first().copied());
    let konst = count.zip(fill).map(|(c, v)| vec![v; c as usize]);
    Ok(vec![Val {
        konst,
        ..Val::sized(shape, dtype)
    }])
}

/// `Constant`.
fn constant(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let node = n.node;
    let a = node.attribute.first().ok_or("a Constant without a value")?;
    match (a.name.as_str(), &a.t) {
        ("value", Some(t)) => Ok(vec![Val::of_tensor(t)]),
        ("value_int", _) => Ok(vec![Val {
            konst: Some(vec![a.i]),
            ..Val::sized(vec![], Some("i64"))
        }]),
        ("value_ints", _) => Ok(vec![Val {
            konst: Some(a.ints.clone()),
            ..Val::sized(vec![D::n(a.ints.len() as u64)], Some("i64"))
        }]),
        ("value_float", _) => Ok(vec![Val::sized(vec![], Some("f32"))]),
        ("value_floats", _) => Ok(vec![Val {
            floats: Some(a.floats.iter().map(|&f| f64::from(f)).collect()),
            ..Val::sized(vec![D::n(a.floats.len() as u64)], Some("f32"))
        }]),
        _ => fail("a Constant of a kind not read"),
    }
}

/// `TopK`.
fn top_k(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, dtype0) = (n.node, n.dtype0);
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
    let x = shape(0)?;
    let a = axis(attr_i(node, "axis", -1), x.len()).ok_or("the axis is out of range")?;
    let mut out = x.clone();
    // A `k` computed as it runs is at most the axis.
    let k = konst(1).and_then(|v| v.first().copied());
    if let Some(k) = k {
        out[a] = D::n(k.max(0) as u64);
    }
    Ok(vec![
        at_most(Val::sized(out.clone(), dtype0), k.is_none()),
        at_most(Val::sized(out, Some("i64")), k.is_none()),
    ])
}

/// The ops whose outputs' sizes depend on the values they read, sized at the most they can be
/// ([`Val::at_most`]).
pub(super) const DATA_DEPENDENT: [&str; 5] =
    ["NonZero", "NonMaxSuppression", "Compress", "Unique", "TopK"];

/// `val`, marked as the most its size can be where `most` (see [`Val::at_most`]).
fn at_most(val: Val, most: bool) -> Val {
    Val {
        at_most: most,
        ..val
    }
}

/// `NonZero`: the indices of the input's non-zero elements, `[rank, count]`, the count at most
/// every element.
fn non_zero(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let count = product(x).ok_or("the element count overflows")?;
    let shape = vec![D::n(x.len() as u64), count];
    Ok(vec![at_most(Val::sized(shape, Some("i64")), true)])
}

/// `NonMaxSuppression`: `[selected, 3]` indices (batch, class, box) of boxes `[B, N, 4]` and
/// scores `[B, C, N]`: at most `max_output_boxes_per_class` (where a constant; none when left
/// out) or every box, of every class of every batch.
fn non_max_suppression(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let scores = n.shape(1)?;
    let [batches, classes, boxes] = scores.as_slice() else {
        return fail("the scores are not three-dimensional");
    };
    let per_class = match n.at(2) {
        None => D::n(0),
        Some(v) => match v.konst.as_deref() {
            Some([most, ..]) => {
                let most = u64::try_from(*most).unwrap_or(0);
                D::n(boxes.known().map_or(most, |b| b.min(most)))
            }
            _ => boxes.clone(),
        },
    };
    let selected =
        product(&[batches.clone(), classes.clone(), per_class]).ok_or("the count overflows")?;
    let shape = vec![selected, D::n(3)];
    Ok(vec![at_most(Val::sized(shape, Some("i64")), true)])
}

/// `Compress`: the slices along `axis` (the flattened input without one) its condition keeps,
/// at most the fewer of the condition's length and the slices.
fn compress(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let condition = n.shape(1)?.first().and_then(D::known);
    let fewer = |d: D| match (d.known(), condition) {
        (Some(d), Some(c)) => D::n(d.min(c)),
        (None, Some(c)) => D::n(c),
        _ => d,
    };
    let shape = match attr(n.node, "axis") {
        None => vec![fewer(product(x).ok_or("the element count overflows")?)],
        Some(a) => {
            let a = axis(a.i, x.len()).ok_or("the axis is out of range")?;
            let mut out = x.clone();
            out[a] = fewer(x[a].clone());
            out
        }
    };
    Ok(vec![at_most(Val::sized(shape, n.dtype0), true)])
}

/// `Unique`: the distinct elements (or slices along `axis`), their first indices, each
/// element's index among them, and their counts: at most every element (or slice); the
/// inverse indices, one per element (or slice), exactly.
fn unique(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let (y, each) = match attr(n.node, "axis") {
        None => {
            let all = product(x).ok_or("the element count overflows")?;
            (vec![all.clone()], all)
        }
        Some(a) => {
            let a = axis(a.i, x.len()).ok_or("the axis is out of range")?;
            (x.clone(), x[a].clone())
        }
    };
    let indices = Val::sized(vec![each.clone()], Some("i64"));
    Ok(vec![
        at_most(Val::sized(y, n.dtype0), true),
        at_most(indices.clone(), true),
        indices.clone(),
        at_most(indices, true),
    ])
}

/// `Tile`.
fn tile(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let dtype0 = n.dtype0;
    let shape = |k: usize| n.shape(k);
    let konst = |k: usize| n.konst(k);
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

/// `a + b`, where both are known, or multiples of the same params.
fn add(a: &D, b: &D) -> Option<D> {
    match (a.known(), b.known()) {
        _ if a.p == b.p => Some(D {
            k: a.k.checked_add(b.k)?,
            p: a.p.clone(),
        }),
        (_, Some(0)) => Some(a.clone()),
        (Some(0), _) => Some(b.clone()),
        _ => None,
    }
}

/// `d / by`, where `by` divides its multiple.
fn div(d: &D, by: u64) -> Option<D> {
    d.div(&D::n(by))
}

/// `EyeLike`, `RandomNormalLike`, `RandomUniformLike`, `Bernoulli`: the input's shape, in the
/// element type `dtype` names (the input's when absent).
fn like(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let dtype = match attr(n.node, "dtype") {
        Some(a) => dtype_name(a.i as i32),
        None => n.dtype0,
    };
    one(n.shape(0)?.clone(), dtype)
}

/// `GatherND`: the indices' shape but its last dim, which indexes that many dims of the data
/// after the batch dims; the rest of the data's dims follow.
fn gather_nd(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (data, indices) = (n.shape(0)?, n.shape(1)?);
    let batch =
        usize::try_from(attr_i(n.node, "batch_dims", 0)).map_err(|_| "negative batch_dims")?;
    let (last, outer) = indices.split_last().ok_or("the indices are a scalar")?;
    let depth = (last.known())
        .and_then(|m| usize::try_from(m).ok())
        .ok_or("the indices' last dim is symbolic")?;
    let rest = (batch.checked_add(depth))
        .and_then(|from| data.get(from..))
        .ok_or("the indices reach past the data's rank")?;
    let mut out = outer.to_vec();
    out.extend_from_slice(rest);
    one(out, n.dtype0)
}

/// `OneHot`: the indices' shape with the depth inserted at `axis`, in the values' element type.
fn one_hot(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let indices = n.shape(0)?;
    let depth = (n.konst(1).and_then(|d| d.first().copied()))
        .and_then(|d| u64::try_from(d).ok())
        .ok_or("the depth is not a constant")?;
    let at =
        axis(attr_i(n.node, "axis", -1), indices.len() + 1).ok_or("the axis is out of range")?;
    let mut out = indices.clone();
    out.insert(at, D::n(depth));
    one(out, n.inputs.get(2).and_then(|v| v.dtype))
}

/// `DepthToSpace`, `SpaceToDepth`: channels traded for height and width, `blocksize` each.
fn depth_and_space(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let b = u64::try_from(attr_i(n.node, "blocksize", 0))
        .ok()
        .filter(|&b| b > 0)
        .ok_or("no blocksize")?;
    let [batch, c, h, w] = &x[..] else {
        return fail("the input is not 4-D");
    };
    let square = b.checked_mul(b).ok_or("the blocksize overflows")?;
    let grown = |d: &D| d.mul(&D::n(b));
    let out = match n.op {
        "DepthToSpace" => [Some(batch.clone()), div(c, square), grown(h), grown(w)],
        _ => [
            Some(batch.clone()),
            c.mul(&D::n(square)),
            div(h, b),
            div(w, b),
        ],
    };
    let out: Option<Shape> = out.into_iter().collect();
    one(out.ok_or("the blocks do not divide the dims")?, n.dtype0)
}

/// `Det`: one value per matrix of the batch.
fn determinant(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let batch = x.len().checked_sub(2).ok_or("the input is not a matrix")?;
    one(x[..batch].to_vec(), n.dtype0)
}

/// `QuantizeLinear`, `DequantizeLinear`, `DynamicQuantizeLinear`: the input's shape, in the
/// element type of the zero point (`QuantizeLinear`, 8-bit unsigned without one) or of the
/// scale (`DequantizeLinear`), unless `output_dtype` names one; `DynamicQuantizeLinear` also
/// gives its scale and zero point, scalars.
fn quantization(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?.clone();
    let named = (attr(n.node, "output_dtype").filter(|a| a.i != 0)).map(|a| dtype_name(a.i as i32));
    let dtype_at = |k: usize| n.at(k).and_then(|v| v.dtype);
    match n.op {
        "QuantizeLinear" => one(x, named.unwrap_or_else(|| dtype_at(2).or(Some("u8")))),
        "DequantizeLinear" => one(x, named.unwrap_or_else(|| dtype_at(1))),
        _ => Ok(vec![
            Val::sized(x, Some("u8")),
            Val::sized(Vec::new(), Some("f32")),
            Val::sized(Vec::new(), Some("u8")),
        ]),
    }
}

/// `Einsum`: each output label's dim, read where the label labels an input's dim; the
/// ellipsis's dims broadcast across the inputs. Without `->`, the output is the ellipsis and
/// then the labels used once, in alphabetical order.
fn einsum(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let equation = attr(n.node, "equation").ok_or("no equation")?;
    let equation: String = String::from_utf8_lossy(&equation.s)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation.as_str(), None),
    };
    // Labels are ASCII letters: a term's bytes are its labels and the ellipsis.
    if !equation.is_ascii() {
        return fail("a label is not a letter");
    }
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != n.inputs.len() {
        return fail("the equation's terms are not the inputs");
    }
    // Per label (by its ASCII code, so in alphabetical order): its dim and how many use it.
    let mut labels: Vec<Option<(D, usize)>> = vec![None; 128];
    let mut ellipses: Vec<Shape> = Vec::new();
    for (k, term) in terms.iter().enumerate() {
        let shape = n.shape(k)?;
        let (before, after) = match term.split_once("...") {
            Some((b, a)) => (b, Some(a)),
            None => (*term, None),
        };
        let named = before.chars().count() + after.map_or(0, |a| a.chars().count());
        let elided = shape
            .len()
            .checked_sub(named)
            .ok_or("a term has more labels than dims")?;
        if after.is_none() && elided != 0 {
            return fail("a term has fewer labels than dims");
        }
        let tail = before.len() + elided;
        ellipses.push(shape[before.len()..tail].to_vec());
        let labelled = before.chars().zip(&shape[..before.len()]);
        let labelled = labelled.chain(after.unwrap_or("").chars().zip(&shape[tail..]));
        for (label, d) in labelled {
            if !label.is_ascii_alphabetic() {
                return fail("a label is not a letter");
            }
            let (kept, uses) = labels[label as usize].get_or_insert_with(|| (d.clone(), 0));
            *uses += 1;
            if *kept == D::n(1) {
                *kept = d.clone();
            } else if *d != D::n(1) && d != kept {
                return fail("a label labels dims of different sizes");
            }
        }
    }
    let ellipsis =
        broadcast(&ellipses.iter().collect::<Vec<_>>()).ok_or("the ellipses do not broadcast")?;
    let out = match rhs {
        Some(rhs) => {
            let (before, after) = match rhs.split_once("...") {
                Some((b, a)) => (b, Some(a)),
                None => (rhs, None),
            };
            let label = |c: char| {
                (labels.get(c as usize).and_then(Option::as_ref))
                    .map(|(d, _)| d.clone())
                    .ok_or("an output label labels no input")
            };
            let mut out: Shape = before.chars().map(label).collect::<Result<_, _>>()?;
            if let Some(after) = after {
                out.extend(ellipsis);
                out.extend(after.chars().map(label).collect::<Result<Vec<_>, _>>()?);
            }
            out
        }
        None => {
            let once = (labels.iter().flatten())
                .filter(|(_, uses)| *uses == 1)
                .map(|(d, _)| d.clone());
            ellipsis.into_iter().chain(once).collect()
        }
    };
    one(out, n.dtype0)
}

/// `LSTM`, `GRU`, `RNN`: the sequence of hidden states and the last one (and `LSTM`'s last
/// cell state), one per direction, `hidden_size` wide (else as the recurrence weights say).
fn recurrent(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let [a, b, _] = &x[..] else {
        return fail("the input is not 3-D");
    };
    let batch_first = attr_i(n.node, "layout", 0) == 1;
    let (sequence, batch) = if batch_first { (b, a) } else { (a, b) };
    let hidden = match attr(n.node, "hidden_size") {
        Some(h) => u64::try_from(h.i).ok().map(D::n),
        None => n.shape_at(2).ok().and_then(|r| r.get(2).cloned()),
    };
    let hidden = hidden.ok_or("no hidden_size")?;
    let directions = match attr(n.node, "direction").map(|a| a.s.as_slice()) {
        Some(b"bidirectional") => D::n(2),
        _ => D::n(1),
    };
    let (all, last) = if batch_first {
        (
            vec![
                batch.clone(),
                sequence.clone(),
                directions.clone(),
                hidden.clone(),
            ],
            vec![batch.clone(), directions, hidden],
        )
    } else {
        (
            vec![
                sequence.clone(),
                directions.clone(),
                batch.clone(),
                hidden.clone(),
            ],
            vec![directions, batch.clone(), hidden],
        )
    };
    let outputs = if n.op == "LSTM" { 3 } else { 2 };
    Ok((0..outputs)
        .map(|k| Val::sized(if k == 0 { all.clone() } else { last.clone() }, n.dtype0))
        .collect())
}

/// `Attention`: queries, keys and values as `[batch, heads, sequence, head size]`, or
/// `[batch, sequence, heads * head size]` with the heads as attributes; a past key and value
/// lengthen the keys' sequence. Gives the output, the present key and value, and the
/// query-key products.
fn attention(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (q, k, v) = (n.shape(0)?, n.shape(1)?, n.shape(2)?);
    let heads = |name: &str| {
        attr(n.node, name)
            .and_then(|a| u64::try_from(a.i).ok())
            .filter(|&h| h > 0)
            .ok_or("the heads of a 3-D input are not given")
    };
    let (batch, q_heads, q_sequence, kv_heads, kv_sequence, head, v_head) =
        match (&q[..], &k[..], &v[..]) {
            ([b, qh, qs, _], [_, kh, ks, hs], [_, _, _, vs]) => {
                (b, qh.clone(), qs, kh.clone(), ks, hs.clone(), vs.clone())
            }
            ([b, qs, _], [_, ks, kw], [_, _, vw]) => {
                let (qh, kh) = (heads("q_num_heads")?, heads("kv_num_heads")?);
                let head = div(kw, kh).ok_or("the keys' width is not a multiple of the heads")?;
                let v_head =
                    div(vw, kh).ok_or("the values' width is not a multiple of the heads")?;
                (b, D::n(qh), qs, D::n(kh), ks, head, v_head)
            }
            _ => return fail("the queries, keys and values are not all 3-D or all 4-D"),
        };
    let total = match n.shape_at(4).ok().and_then(|p| p.get(2)) {
        Some(past) => add(past, kv_sequence).ok_or("adding symbolic sequence lengths")?,
        None => kv_sequence.clone(),
    };
    let output = match q.len() {
        4 => vec![
            batch.clone(),
            q_heads.clone(),
            q_sequence.clone(),
            v_head.clone(),
        ],
        _ => {
            let width = q_heads.mul(&v_head).ok_or("the output's width overflows")?;
            vec![batch.clone(), q_sequence.clone(), width]
        }
    };
    let shapes = [
        output,
        vec![batch.clone(), kv_heads.clone(), total.clone(), head],
        vec![batch.clone(), kv_heads, total.clone(), v_head],
        vec![batch.clone(), q_heads, q_sequence.clone(), total],
    ];
    Ok((shapes.into_iter())
        .map(|shape| Val::sized(shape, n.dtype0))
        .collect())
}

/// `SoftmaxCrossEntropyLoss`, `NegativeLogLikelihoodLoss`: a scalar, or the labels' shape
/// with `reduction` `none`; `SoftmaxCrossEntropyLoss`'s log probabilities are the scores'.
fn losses(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (scores, labels) = (n.shape(0)?, n.shape(1)?);
    let loss = match attr(n.node, "reduction").map(|a| a.s.as_slice()) {
        Some(b"none") => labels.clone(),
        _ => Vec::new(),
    };
    Ok([loss, scores.clone()]
        .into_iter()
        .map(|shape| Val::sized(shape, n.dtype0))
        .collect())
}

/// `GridSample`: the input's batch and channels at the grid's points.
fn grid_sample(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (x, grid) = (n.shape(0)?, n.shape(1)?);
    let points = grid
        .get(1..grid.len().saturating_sub(1))
        .ok_or("the grid has too few dims")?;
    let mut out = x.get(..2).ok_or("the input has too few dims")?.to_vec();
    out.extend_from_slice(points);
    one(out, n.dtype0)
}

/// `RoiAlign`: per region, the input's channels at `output_height` by `output_width`.
fn roi_align(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (x, rois) = (n.shape(0)?, n.shape(1)?);
    let (Some(regions), Some(channels)) = (rois.first(), x.get(1)) else {
        return fail("the input or the regions have too few dims");
    };
    let side = |name: &str| u64::try_from(attr_i(n.node, name, 1)).map(D::n);
    let (h, w) = (side("output_height"), side("output_width"));
    let (Ok(h), Ok(w)) = (h, w) else {
        return fail("a negative output size");
    };
    one(vec![regions.clone(), channels.clone(), h, w], n.dtype0)
}

/// Output `k` of subgraph `g` as it declares it, where its dims are all fixed.
fn declared(g: &proto::GraphProto, k: usize) -> Option<Val> {
    let tensor = g.output.get(k)?.r#type.as_ref()?.tensor_type.as_ref()?;
    let dims = &tensor.shape.as_ref()?.dim;
    let shape = (dims.iter())
        .map(|d| d.dim_value.and_then(|v| u64::try_from(v).ok()).map(D::n))
        .collect::<Option<Shape>>()?;
    Some(Val::sized(shape, dtype_name(tensor.elem_type)))
}

/// The subgraph attribute `name` of `node`.
fn subgraph<'a>(node: &'a proto::NodeProto, name: &str) -> Option<&'a proto::GraphProto> {
    attr(node, name).and_then(|a| a.g.as_deref())
}

/// `v`'s shape and element type, not its contents: what a loop carries may change them.
fn shape_only(v: &Val) -> Val {
    Val {
        shape: v.shape.clone(),
        dtype: v.dtype,
        ..Val::default()
    }
}

/// `If`, `Loop`, `Scan`: the outputs their subgraphs declare (with fixed dims; an `If`'s where
/// both branches agree); what a loop carries, as it starts where its body does not say; a
/// `Scan`'s scan outputs one per element of the scanned sequence. A `Loop`'s scan outputs grow
/// with its iterations, which only a run knows: unsized.
fn control_flow(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (node, outputs) = (n.node, n.node.output.len());
    let unknown = Val::default;
    match n.op {
        "If" => {
            let then = subgraph(node, "then_branch").ok_or("a branch is missing")?;
            let other = subgraph(node, "else_branch").ok_or("a branch is missing")?;
            Ok((0..outputs)
                .map(|k| match (declared(then, k), declared(other, k)) {
                    (Some(a), Some(b)) if a.shape == b.shape && a.dtype == b.dtype => a,
                    _ => unknown(),
                })
                .collect())
        }
        "Loop" => {
            let body = subgraph(node, "body").ok_or("the body is missing")?;
            // Inputs: the trip count, the condition, then what the loop carries.
            let carried = node.input.len().saturating_sub(2);
            Ok((0..outputs)
                .map(|k| match k < carried {
                    true => (declared(body, 1 + k))
                        .or_else(|| n.at(2 + k).map(shape_only))
                        .unwrap_or_default(),
                    false => unknown(),
                })
                .collect())
        }
        _ => {
            if n.opset < 9 {
                return fail("a Scan before opset 9 (with its batch axis) is not inferred");
            }
            let body = subgraph(node, "body").ok_or("the body is missing")?;
            let scanned = usize::try_from(attr_i(node, "num_scan_inputs", 0))
                .map_err(|_| "a negative count of scan inputs")?;
            let states = (n.inputs.len().checked_sub(scanned)).ok_or("too few inputs")?;
            let first = n.shape(states)?;
            let at = attr_ints(node, "scan_input_axes").and_then(|a| a.first().copied());
            let along =
                axis(at.unwrap_or(0), first.len()).ok_or("the scan axis is out of range")?;
            let length = first[along].clone();
            let output_axes = attr_ints(node, "scan_output_axes").unwrap_or_default();
            let scan_output = |k: usize| {
                let mut v = declared(body, k)?;
                let shape = v.shape.as_mut()?;
                let at = output_axes.get(k - states).copied().unwrap_or(0);
                shape.insert(axis(at, shape.len() + 1)?, length.clone());
                Some(v)
            };
            Ok((0..outputs)
                .map(|k| match k < states {
                    true => (declared(body, k))
                        .or_else(|| n.inputs.get(k).map(shape_only))
                        .unwrap_or_default(),
                    false => scan_output(k).unwrap_or_default(),
                })
                .collect())
        }
    }
}
