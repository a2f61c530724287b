"""Writes onnx/contrib/: one small model per case of ONNX Runtime's contrib ops (domain
com.microsoft, and SimplifiedLayerNormalization, which ONNX Runtime reads in the default domain),
and figures.toml, the bytes of each node output as ONNX Runtime gives them.

The outputs declare no type or shape: memplan must infer them. Each figure comes from running
the model on ONNX Runtime's CPU provider with random inputs of the declared shapes ("run"), or,
for the ops the CPU provider has no kernel for (their kernels are CUDA's), from ONNX Runtime's
own symbolic shape inference ("symbolic").

    python -m venv venv && venv/bin/pip install onnx==1.23.2 onnxruntime==1.32.0 sympy numpy
    venv/bin/python onnx_contrib.py          # in tests/data
"""

import pathlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

MS = "com.microsoft"
F, F16, I32, I64, U8, I8 = T.FLOAT, T.FLOAT16, T.INT32, T.INT64, T.UINT8, T.INT8
NUMPY = {F: np.float32, F16: np.float16, I32: np.int32, I64: np.int64, U8: np.uint8, I8: np.int8}
rng = np.random.default_rng(0)


def normal(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def scalar(v, dtype):
    return np.array(v, dtype)


def q8(prefix, zero=np.uint8):
    """A quantized operand's scale and zero point, named `{prefix}s` and `{prefix}z`."""
    return [(prefix + "s", scalar(0.1, np.float32)), (prefix + "z", scalar(0, zero))]


# name, nodes, inputs given when the model runs [(name, type, dims)], initializers, reference.
CASES = [
    ("attention", [h.make_node("Attention", ["x", "w", "b"], ["y"], domain=MS, num_heads=2)],
     [("x", F, [2, 4, 16])], [("w", normal(16, 48)), ("b", normal(48))], "run"),
    ("attention_past", [h.make_node("Attention", ["x", "w", "b", "", "past"], ["y", "present"],
                                    domain=MS, num_heads=2, unidirectional=1)],
     [("x", F, [2, 4, 16]), ("past", F, [2, 2, 2, 3, 8])], [("w", normal(16, 48)), ("b", normal(48))],
     "run"),
    ("attention_present", [h.make_node("Attention", ["x", "w", "b"], ["y", "present"], domain=MS,
                                       num_heads=2, unidirectional=1)],
     [("x", F, [2, 4, 16])], [("w", normal(16, 48)), ("b", normal(48))], "run"),
    ("attention_qkv_sizes", [h.make_node("Attention", ["x", "w", "b"], ["y"], domain=MS,
                                         num_heads=2, qkv_hidden_sizes=[16, 16, 8])],
     [("x", F, [2, 4, 16])], [("w", normal(16, 40)), ("b", normal(40))], "run"),
    ("mha", [h.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=2)],
     [("q", F, [2, 4, 16]), ("k", F, [2, 6, 16]), ("v", F, [2, 6, 8])], [], "run"),
    ("mha_past", [h.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "", "pk", "pv"],
                              ["y", "present_k", "present_v"], domain=MS, num_heads=2)],
     [("q", F, [2, 4, 16]), ("k", F, [2, 6, 16]), ("v", F, [2, 6, 16]), ("pk", F, [2, 2, 3, 8]),
      ("pv", F, [2, 2, 3, 8])], [], "run"),
    ("mha_present", [h.make_node("MultiHeadAttention", ["q", "k", "v"], ["y", "present_k", "present_v"],
                                 domain=MS, num_heads=2)],
     [("q", F, [2, 4, 16]), ("k", F, [2, 6, 16]), ("v", F, [2, 6, 16])], [], "run"),
    ("mha_cross", [h.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=2)],
     [("q", F, [2, 4, 16]), ("k", F, [2, 2, 6, 8]), ("v", F, [2, 2, 6, 8])], [], "run"),
    ("mha_packed_qkv", [h.make_node("MultiHeadAttention", ["q"], ["y"], domain=MS, num_heads=2)],
     [("q", F, [2, 4, 2, 3, 8])], [], "symbolic"),
    ("mha_packed_kv", [h.make_node("MultiHeadAttention", ["q", "k"], ["y"], domain=MS, num_heads=2)],
     [("q", F, [2, 4, 16]), ("k", F, [2, 6, 2, 2, 8])], [], "symbolic"),
    ("gqa", [h.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "lengths", "total"],
                         ["y", "present_k", "present_v"], domain=MS, num_heads=4, kv_num_heads=2)],
     [("q", F, [1, 4, 32]), ("k", F, [1, 4, 16]), ("v", F, [1, 4, 16]), ("pk", F, [1, 2, 6, 8]),
      ("pv", F, [1, 2, 6, 8])],
     [("lengths", np.array([9], np.int32)), ("total", scalar(10, np.int32))], "run"),
    ("gqa_packed", [h.make_node("GroupQueryAttention", ["q", "", "", "pk", "pv", "lengths", "total"],
                                ["y", "present_k", "present_v"], domain=MS, num_heads=4, kv_num_heads=2)],
     [("q", F, [1, 4, 64]), ("pk", F, [1, 2, 6, 8]), ("pv", F, [1, 2, 6, 8])],
     [("lengths", np.array([9], np.int32)), ("total", scalar(10, np.int32))], "run"),
    ("gqa_shared_buffer", [h.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "lengths", "total"],
                                       ["y", "present_k", "present_v"], domain=MS, num_heads=4,
                                       kv_num_heads=2)],
     [("q", F, [1, 1, 32]), ("k", F, [1, 1, 16]), ("v", F, [1, 1, 16]), ("pk", F, [1, 2, 16, 8]),
      ("pv", F, [1, 2, 16, 8])],
     [("lengths", np.array([5], np.int32)), ("total", scalar(6, np.int32))], "run"),
    ("gqa_prompt", [h.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "lengths", "total"],
                                ["y", "present_k", "present_v"], domain=MS, num_heads=4, kv_num_heads=2)],
     [("q", F, [1, 4, 32]), ("k", F, [1, 4, 16]), ("v", F, [1, 4, 16])],
     [("lengths", np.array([3], np.int32)), ("total", scalar(4, np.int32))], "run"),
    # As ONNX Runtime's model builder writes it: the total length read off the mask's shape.
    ("gqa_total_of_mask", [h.make_node("Shape", ["mask"], ["mask_shape"]),
                           h.make_node("Gather", ["mask_shape", "one"], ["total_i64"], axis=0),
                           h.make_node("Cast", ["total_i64"], ["total"], to=I32),
                           h.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "lengths", "total"],
                                       ["y", "present_k", "present_v"], domain=MS, num_heads=4,
                                       kv_num_heads=2)],
     [("q", F, [1, 4, 32]), ("k", F, [1, 4, 16]), ("v", F, [1, 4, 16]), ("pk", F, [1, 2, 6, 8]),
      ("pv", F, [1, 2, 6, 8]), ("mask", I64, [1, 10])],
     [("lengths", np.array([9], np.int32)), ("one", scalar(1, np.int64))], "run"),
    ("embed_layer_norm", [h.make_node("EmbedLayerNormalization",
                                      ["ids", "segments", "words", "positions", "segment_kinds", "g", "b", "mask"],
                                      ["y", "mask_index", "sum"], domain=MS)],
     [("ids", I32, [2, 4]), ("segments", I32, [2, 4]), ("mask", I32, [2, 4])],
     [("words", normal(10, 16)), ("positions", normal(8, 16)), ("segment_kinds", normal(4, 16)),
      ("g", np.ones(16, np.float32)), ("b", np.zeros(16, np.float32))], "run"),
    ("skip_layer_norm", [h.make_node("SkipLayerNormalization", ["x", "skip", "g", "b"],
                                     ["y", "mean", "inv_std", "sum"], domain=MS)],
     [("x", F16, [2, 4, 16]), ("skip", F16, [2, 4, 16])],
     [("g", np.ones(16, np.float16)), ("b", np.zeros(16, np.float16))], "run"),
    ("skip_simplified_layer_norm", [h.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "g"],
                                                ["y", "mean", "inv_std", "sum"], domain=MS)],
     [("x", F, [2, 4, 16]), ("skip", F, [2, 4, 16])], [("g", np.ones(16, np.float32))], "run"),
    ("simplified_layer_norm", [h.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y", "inv_std"],
                                           axis=-1)],
     [("x", F16, [2, 4, 16])], [("g", np.ones(16, np.float16))], "run"),
    ("gelu", [h.make_node("Gelu", ["x"], ["y"], domain=MS), h.make_node("FastGelu", ["y"], ["z"], domain=MS)],
     [("x", F, [2, 3])], [], "run"),
    ("rotary", [h.make_node("RotaryEmbedding", ["x", "positions", "cos", "sin"], ["y"], domain=MS)],
     [("x", F, [1, 2, 4, 8]), ("positions", I64, [1, 4])], [("cos", normal(8, 4)), ("sin", normal(8, 4))],
     "run"),
    ("matmul_n_bits", [h.make_node("MatMulNBits", ["x", "w", "s"], ["y"], domain=MS, K=16, N=8, bits=4,
                                   block_size=16)],
     [("x", F, [2, 4, 16])], [("w", rng.integers(0, 255, (8, 1, 8)).astype(np.uint8)),
                              ("s", np.ones(8, np.float32))], "run"),
    ("fused_matmul", [h.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, transA=1)],
     [("a", F, [2, 4, 3])], [("b", normal(4, 5))], "run"),
    ("dynamic_quantize_matmul", [h.make_node("DynamicQuantizeMatMul", ["a", "b", "bs", "bz"], ["y"], domain=MS)],
     [("a", F, [2, 4, 16])],
     [("b", rng.integers(-3, 3, (16, 8)).astype(np.int8)), ("bs", scalar(0.1, np.float32)),
      ("bz", scalar(0, np.int8))], "run"),
    ("matmul_integer_to_float", [h.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs"], ["y"], domain=MS)],
     [("a", U8, [2, 4, 16])],
     [("b", rng.integers(0, 3, (16, 8)).astype(np.uint8)), ("as", scalar(0.1, np.float16)),
      ("bs", scalar(0.1, np.float16))], "run"),
    ("gather_block_quantized", [h.make_node("GatherBlockQuantized", ["d", "i", "s"], ["y"], domain=MS,
                                            block_size=16, gather_axis=0, quantize_axis=1, bits=4)],
     [("i", I64, [2, 3])], [("d", rng.integers(0, 255, (10, 8)).astype(np.uint8)),
                            ("s", np.ones((10, 1), np.float32))], "run"),
    ("fused_conv", [h.make_node("FusedConv", ["x", "w"], ["y"], domain=MS, activation="Relu",
                                pads=[1, 1, 1, 1])],
     [("x", F, [1, 3, 8, 8])], [("w", normal(4, 3, 3, 3))], "run"),
    ("fused_gemm", [h.make_node("FusedGemm", ["a", "b"], ["y"], domain=MS, activation="Relu", transB=1)],
     [("a", F, [4, 6])], [("b", normal(5, 6))], "run"),
    ("qlinear_add", [h.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"], domain=MS)],
     [("a", U8, [3, 1]), ("b", U8, [2, 1, 4])], q8("a") + q8("b") + q8("c"), "run"),
    ("qlinear_mul", [h.make_node("QLinearMul", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"], domain=MS)],
     [("a", U8, [2, 3, 4]), ("b", U8, [4])], q8("a") + q8("b") + q8("c"), "run"),
    ("qlinear_leaky_relu", [h.make_node("QLinearLeakyRelu", ["a", "as", "az", "cs", "cz"], ["y"], domain=MS)],
     [("a", I8, [2, 3, 4])], q8("a", np.int8) + q8("c", np.int8), "run"),
    ("qlinear_global_average_pool", [h.make_node("QLinearGlobalAveragePool", ["a", "as", "az", "cs", "cz"],
                                                 ["y"], domain=MS, channels_last=1)],
     [("a", U8, [2, 4, 4, 3])], q8("a") + q8("c"), "run"),
    ("quantize_linear", [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS),
                         h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS)],
     [("x", F, [2, 3])], [("s", scalar(0.1, np.float32)), ("z", scalar(0, np.uint8))], "run"),
    ("gemm_fast_gelu", [h.make_node("GemmFastGelu", ["x", "w", "b"], ["y"], domain=MS)],
     [("x", F, [2, 4, 16])], [("w", normal(16, 32)), ("b", normal(32))], "symbolic"),
    ("bias_split_gelu", [h.make_node("BiasSplitGelu", ["x", "b"], ["y"], domain=MS)],
     [("x", F16, [2, 16, 64])], [("b", np.zeros(64, np.float16))], "symbolic"),
    ("group_norm", [h.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain=MS, groups=4, activation=1,
                                epsilon=1e-5),
                    h.make_node("SkipGroupNorm", ["y", "g", "b", "x"], ["z", "sum"], domain=MS, groups=4,
                                activation=0, epsilon=1e-5)],
     [("x", F16, [2, 4, 4, 32])], [("g", np.ones(32, np.float32)), ("b", np.zeros(32, np.float32))],
     "symbolic"),
]

BYTES = {F: 4, F16: 2, I32: 4, I64: 8, U8: 1, I8: 1}
DTYPE = {np.dtype(v): k for k, v in NUMPY.items()}


def model(name, nodes, inputs, initializers):
    outputs = [o for n in nodes for o in n.output if o]
    graph = h.make_graph(
        nodes, name,
        [h.make_tensor_value_info(n, t, d) for n, t, d in inputs],
        [h.make_empty_tensor_value_info(o) for o in outputs],
        [nh.from_array(a, n) for n, a in initializers])
    m = h.make_model(graph, producer_name="memplan tests/data/onnx_contrib.py",
                     opset_imports=[h.make_opsetid("", 17), h.make_opsetid(MS, 1)])
    m.ir_version = 10
    return m, outputs


def run(m, outputs, inputs):
    feed = {}
    for n, t, d in inputs:
        dtype = NUMPY[t]
        integer = np.issubdtype(dtype, np.integer)
        feed[n] = rng.integers(0, 4, d).astype(dtype) if integer else rng.standard_normal(d).astype(dtype)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    values = session.run(outputs, feed)
    return {o: int(np.prod(v.shape)) * BYTES[DTYPE[v.dtype]] for o, v in zip(outputs, values)}


def symbolic(m, outputs):
    inferred = SymbolicShapeInference.infer_shapes(m)
    infos = {v.name: v.type.tensor_type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    figures = {}
    for o in outputs:
        t = infos[o]
        dims = [d.dim_value for d in t.shape.dim]
        assert all(d.HasField("dim_value") for d in t.shape.dim), (o, t)
        figures[o] = int(np.prod(dims)) * BYTES[t.elem_type]
    return figures


def main():
    here = pathlib.Path(__file__).parent
    out = here / "onnx" / "contrib"
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# The bytes of each node output as ONNX Runtime {ort.__version__} gives them",
        "# (`reference`: running the model on its CPU provider, or its symbolic shape",
        "# inference where the CPU provider has no kernel):",
        "# `python onnx_contrib.py` in tests/data, which writes the models too.",
    ]
    for name, nodes, inputs, initializers, reference in CASES:
        m, outputs = model(name, nodes, inputs, initializers)
        figures = run(m, outputs, inputs) if reference == "run" else symbolic(m, outputs)
        onnx.save(m, out / (name + ".onnx"))
        table = ", ".join(f'"{o}" = {b}' for o, b in sorted(figures.items()))
        lines += ["[[model]]", f'path = "onnx/contrib/{name}.onnx"', f'reference = "{reference}"',
                  f"bytes = {{ {table} }}"]
    (out / "figures.toml").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
