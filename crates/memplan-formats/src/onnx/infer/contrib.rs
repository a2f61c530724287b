//! Shape inference of ONNX Runtime's contrib ops (domain `com.microsoft`): what its transformer
//! optimizer, quantizers and model builder write into the models it runs (BERT-style fused
//! attention, LLMs' grouped-query attention and 4-bit matmuls, Stable Diffusion's group norms).
//!
//! A contrib op is read by its own definition, never by the ONNX op of the same name
//! (`Attention` is one of each, with other inputs): the caller dispatches on the domain first.
//! Each rule is held to the shapes ONNX Runtime gives when it runs the op
//! (tests/data/onnx/contrib). Where an output's size depends on a value known only when the
//! model runs (grouped-query attention's total length, when it is not a constant), that output
//! stays unsized, named in the import's warning, and the others are sized all the same.

use super::{
    D, InferStop, Inputs, Shape, Val, add, attr, attr_i, broadcast, convolutions_and_pools, div,
    fail, gemm, matmul, one, quantization, unary,
};

/// Infers a `com.microsoft` node's outputs.
pub(super) fn infer(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    match n.op {
        "Attention" => attention(n),
        "MultiHeadAttention" => multi_head_attention(n),
        "GroupQueryAttention" => group_query_attention(n),
        "EmbedLayerNormalization" => embed_layer_normalization(n),
        "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization" => skip_normalization(n),
        "MatMulNBits" => matmul_n_bits(n),
        "FusedMatMul" | "GemmFastGelu" | "DynamicQuantizeMatMul" => matmul(n),
        "MatMulIntegerToFloat" => {
            // In the element type of the first matrix's scale.
            let mut out = matmul(n)?;
            out[0].dtype = n.at(2).and_then(|v| v.dtype);
            Ok(out)
        }
        "GatherBlockQuantized" => gather_block_quantized(n),
        "BiasSplitGelu" => {
            let mut x = n.shape(0)?.clone();
            let last = x.last_mut().ok_or("an input of no dims")?;
            *last = div(last, 2).ok_or("the last dim is odd")?;
            one(x, n.dtype0)
        }
        "SkipGroupNorm" => Ok(vec![Val::sized(n.shape(0)?.clone(), n.dtype0); 2]),
        "QLinearAdd" | "QLinearMul" => {
            // The two quantized operands are the first and the fourth inputs.
            let out =
                broadcast(&[n.shape(0)?, n.shape_at(3)?]).ok_or("the shapes do not broadcast")?;
            one(out, n.dtype0)
        }
        "QLinearGlobalAveragePool" => {
            let x = n.shape(0)?;
            let keep = match attr_i(n.node, "channels_last", 0) {
                0 => [0, 1],
                _ => [0, x.len().saturating_sub(1)],
            };
            let out = (0..x.len())
                .map(|i| match keep.contains(&i) {
                    true => x[i].clone(),
                    false => D::n(1),
                })
                .collect();
            one(out, n.dtype0)
        }
        "FusedConv" => convolutions_and_pools(n),
        "FusedGemm" => gemm(n),
        "QuantizeLinear" | "DequantizeLinear" => quantization(n),
        // Of their first input's shape and type.
        "FastGelu"
        | "BiasGelu"
        | "QuickGelu"
        | "BiasAdd"
        | "Gelu"
        | "RotaryEmbedding"
        | "QLinearSigmoid"
        | "QLinearLeakyRelu"
        | "GroupNorm"
        | "SimplifiedLayerNormalization" => unary(n),
        _ => Err(InferStop::UnknownOp),
    }
}

/// A present output: its shape, or unsized where it cannot be known, with why.
fn present(present: Result<Shape, InferStop>, dtype: Option<&'static str>) -> Val {
    match present {
        Ok(shape) => Val::sized(shape, dtype),
        Err(why) => Val {
            why: Some(why),
            ..Val::default()
        },
    }
}

/// One row's statistic of a normalization over the last axis: the input's shape with a 1 for
/// its last dim, in `f32`.
fn per_row(x: &Shape) -> Val {
    let mut rows = x.clone();
    if let Some(last) = rows.last_mut() {
        *last = D::n(1);
    }
    Val::sized(rows, Some("f32"))
}

/// `SkipLayerNormalization`, `SkipSimplifiedLayerNormalization`: the normalized sum, the
/// mean and inverse standard deviation of each row, and the sum itself.
fn skip_normalization(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let x = n.shape(0)?;
    let sum = Val::sized(x.clone(), n.dtype0);
    Ok(vec![sum.clone(), per_row(x), per_row(x), sum])
}

/// `MatMulNBits`: the input times `N` quantized columns (its weights packed
/// `[N, blocks, bytes]`): the input's shape with `N` for its last dim.
fn matmul_n_bits(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let mut out = n.shape(0)?.clone();
    let columns = match attr(n.node, "N") {
        Some(a) => u64::try_from(a.i).ok().map(D::n),
        None => n.shape_at(1)?.first().cloned(),
    };
    let (Some(last), Some(columns)) = (out.last_mut(), columns) else {
        return fail("no columns, or an input of no dims");
    };
    *last = columns;
    one(out, n.dtype0)
}

/// The heads attribute `name`, at least one.
fn heads(n: &Inputs, name: &str) -> Result<u64, InferStop> {
    (attr(n.node, name).and_then(|a| u64::try_from(a.i).ok()))
        .filter(|&h| h > 0)
        .ok_or(InferStop::Cannot("the number of heads is not given"))
}

/// `Attention` (BERT's, fused with its projection): the input `[batch, sequence, width]` times
/// weights `[width, q + k + v]` (the three widths `qkv_hidden_sizes`, or a third each) gives
/// `[batch, sequence, v]`; the present keys and values `[2, batch, heads, past + sequence,
/// k / heads]`, or the past's shape where the two share a buffer.
fn attention(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (x, weights) = (n.shape(0)?, n.shape_at(1)?);
    let ([batch, sequence, _], [_, width]) = (&x[..], &weights[..]) else {
        return fail("the input is not 3-D or the weights not 2-D");
    };
    let (k, v) = match attr(n.node, "qkv_hidden_sizes").map(|a| a.ints.as_slice()) {
        Some(&[_, k, v]) => (
            D::n(u64::try_from(k).map_err(|_| "a negative width")?),
            D::n(u64::try_from(v).map_err(|_| "a negative width")?),
        ),
        Some(_) => return fail("qkv_hidden_sizes is not three widths"),
        None => {
            let third = div(width, 3).ok_or("the weights' width is not three equal widths")?;
            (third.clone(), third)
        }
    };
    let mut out = vec![Val::sized(
        vec![batch.clone(), sequence.clone(), v],
        n.dtype0,
    )];
    if n.node.output.len() > 1 {
        let keys = || -> Result<Shape, InferStop> {
            let heads = heads(n, "num_heads")?;
            let head = div(&k, heads).ok_or("the keys' width is not a multiple of the heads")?;
            Ok(match n.shape_at(4) {
                Ok(past) if attr_i(n.node, "past_present_share_buffer", 0) != 0 => past.clone(),
                Ok(past) => {
                    let [two, b, h, length, s] = &past[..] else {
                        return Err("the past is not 5-D".into());
                    };
                    let total = add(length, sequence).ok_or("adding symbolic lengths")?;
                    vec![two.clone(), b.clone(), h.clone(), total, s.clone()]
                }
                Err(_) => vec![D::n(2), batch.clone(), D::n(heads), sequence.clone(), head],
            })
        };
        out.push(present(keys(), n.dtype0));
    }
    Ok(out)
}

/// `MultiHeadAttention`: queries `[batch, sequence, width]` (or packed with the keys and
/// values, `[batch, sequence, heads, 3, head]`), keys and values `[batch, length, width]` (or
/// `[batch, heads, length, head]`, or packed `[batch, length, heads, 2, head]`). The output is
/// `[batch, sequence, v width]`; the present keys and values `[batch, heads, past + length,
/// head]`, or the past's shapes where the two share a buffer.
fn multi_head_attention(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let q = n.shape(0)?;
    let (batch, sequence) = match &q[..] {
        [b, s, _] | [b, s, _, _, _] => (b, s),
        _ => return fail("the queries are not 3-D or 5-D"),
    };
    let (key, value) = (n.shape_at(1).ok(), n.shape_at(2).ok());
    let output = match (&q[..], value.map(|v| &v[..])) {
        ([_, _, h, _, s], _) => h.mul(s).ok_or("the output's width overflows")?,
        (_, Some([_, _, width])) => width.clone(),
        (_, Some([_, h, _, s])) => h.mul(s).ok_or("the output's width overflows")?,
        (_, Some(_)) => return fail("the values are not 3-D or 4-D"),
        ([_, _, width], None) if key.is_some_and(|k| k.len() == 5) => width.clone(),
        _ => return fail("the values are not given"),
    };
    let mut out = vec![Val::sized(
        vec![batch.clone(), sequence.clone(), output],
        n.dtype0,
    )];
    if n.node.output.len() > 2 {
        let shared = attr_i(n.node, "past_present_share_buffer", 0) != 0;
        for (input, of) in [(6, key), (7, value)] {
            let keys_or_values = || -> Result<Shape, InferStop> {
                let past = n.shape_at(input).ok();
                if let (Some(past), true) = (past, shared) {
                    return Ok(past.clone());
                }
                let Some([_, length, width]) = of.map(|s| &s[..]) else {
                    return Err("the present of packed or 4-D keys and values".into());
                };
                let heads = heads(n, "num_heads")?;
                let head = div(width, heads).ok_or("a width is not a multiple of the heads")?;
                let total = match past.map(|p| &p[..]) {
                    Some([_, _, p, _]) => add(p, length).ok_or("adding symbolic lengths")?,
                    Some(_) => return Err("a past is not 4-D".into()),
                    None => length.clone(),
                };
                Ok(vec![batch.clone(), D::n(heads), total, head])
            };
            out.push(present(keys_or_values(), n.dtype0));
        }
    }
    Ok(out)
}

/// `GroupQueryAttention`: queries `[batch, sequence, heads * head]` (or packed with the keys
/// and values, `[batch, sequence, (heads + 2 kv_heads) * head]`) give the output `[batch,
/// sequence, heads * head]`. The present keys and values are `[batch, kv_heads, length, head]`
/// in the past's type, `length` the larger of the past's (a buffer the two may share) and the
/// total sequence length, the seventh input, which must be a constant here.
fn group_query_attention(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let q = n.shape(0)?;
    let [batch, sequence, width] = &q[..] else {
        return fail("the queries are not 3-D");
    };
    let (q_heads, kv_heads) = (heads(n, "num_heads")?, heads(n, "kv_num_heads")?);
    let packed = n.at(2).is_none();
    let all_heads = match packed {
        true => (kv_heads.checked_mul(2)).and_then(|kv| kv.checked_add(q_heads)),
        false => Some(q_heads),
    };
    let head = (all_heads.and_then(|h| div(width, h)))
        .ok_or("the queries' width is not a multiple of the heads")?;
    let output = head
        .mul(&D::n(q_heads))
        .ok_or("the output's width overflows")?;
    let mut out = vec![Val::sized(
        vec![batch.clone(), sequence.clone(), output],
        n.dtype0,
    )];
    if n.node.output.len() > 2 {
        let total = (n.konst_at(6).as_deref()).and_then(|t| t.first().copied());
        for input in [3, 4] {
            let past = n.at(input);
            let keys_or_values = || -> Result<Shape, InferStop> {
                let total = total.and_then(|t| u64::try_from(t).ok());
                let total = total.ok_or("the total sequence length is not a constant")?;
                let length = match past.map(|p| p.shape.as_deref()) {
                    Some(Some([_, _, p, _])) => {
                        p.known().ok_or("the past's length is symbolic")?.max(total)
                    }
                    Some(Some(_)) => return Err("a past is not 4-D".into()),
                    Some(None) => return Err(InferStop::UnknownInput(input)),
                    None => total,
                };
                Ok(vec![
                    batch.clone(),
                    D::n(kv_heads),
                    D::n(length),
                    head.clone(),
                ])
            };
            out.push(present(
                keys_or_values(),
                past.map_or(n.dtype0, |p| p.dtype),
            ));
        }
    }
    Ok(out)
}

/// `EmbedLayerNormalization`: token ids `[batch, sequence]` looked up in embeddings
/// `[vocabulary, width]` give `[batch, sequence, width]` (and the sum before normalization,
/// its third output); the mask index is one `i32` per batch.
fn embed_layer_normalization(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let ids = n.shape(0)?;
    let embeddings = n.shape_at(2)?;
    let ([batch, sequence], [_, width]) = (&ids[..], &embeddings[..]) else {
        return fail("the ids are not 2-D or the embeddings not 2-D");
    };
    let dtype = n.at(2).and_then(|v| v.dtype);
    let embedded = Val::sized(vec![batch.clone(), sequence.clone(), width.clone()], dtype);
    let mask_index = Val::sized(vec![batch.clone()], Some("i32"));
    Ok(vec![embedded.clone(), mask_index, embedded])
}

/// `GatherBlockQuantized`: `data` gathered at `indices` along `gather_axis`, in the scales'
/// type; `u8` data packs `8 / bits` values a byte along `quantize_axis`, which unpack.
fn gather_block_quantized(n: &Inputs) -> Result<Vec<Val>, InferStop> {
    let (data, indices) = (n.shape(0)?, n.shape(1)?);
    let along = super::axis(attr_i(n.node, "gather_axis", 0), data.len())
        .ok_or("the gather axis is out of range")?;
    let mut unpacked = data.clone();
    if n.dtype0 == Some("u8") {
        let bits = attr_i(n.node, "bits", 4);
        let per_byte = match bits {
            2 | 4 | 8 => 8 / bits as u64,
            _ => return fail("bits is not 2, 4 or 8"),
        };
        let quantized = super::axis(attr_i(n.node, "quantize_axis", 1), data.len())
            .ok_or("the quantize axis is out of range")?;
        unpacked[quantized] =
            (unpacked[quantized].mul(&D::n(per_byte))).ok_or("the unpacked dim overflows")?;
    }
    let mut out = unpacked[..along].to_vec();
    out.extend(indices.iter().cloned());
    out.extend(unpacked[along + 1..].iter().cloned());
    one(out, n.at(2).and_then(|v| v.dtype))
}
