# Independent figures for ONNX models, by python onnx's shape inference (not memplan's code).
# Run from tests/data with `onnx` installed (the figures here: onnx 1.23.2):
#   python onnx_figures.py onnx/*.onnx                       # unsized, always-live, lower bound
#   python onnx_figures.py --toml onnx/testdata/*/*.onnx      # the same as onnx/testdata/figures.toml
#   python onnx_figures.py --export-node                      # writes onnx/node/ from onnx's node test cases
#   python onnx_figures.py --tensors onnx/node/*.onnx         # each tensor's bytes: onnx/node/figures.toml
# As memplan documents: a symbolic dim of a graph input is 1, a tensor of strings has no size,
# 4-bit and 2-bit types are half and a quarter of a byte an element, and a Dropout's mask,
# which onnx's inference leaves unsized before opset 12, has its input's shape, a bool each
# from opset 10 and its input's element type before (as ONNX Runtime allocates it).
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, shape_inference

HALF_BYTE = (TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT4E2M1)
QUARTER_BYTE = (TensorProto.INT2, TensorProto.UINT2)


def tensor_bytes(elem_type, dims):
    """The bytes of a tensor, or None when its size is not known."""
    if elem_type in (TensorProto.UNDEFINED, TensorProto.STRING) or any(d is None for d in dims):
        return None
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if elem_type in HALF_BYTE:
        return (n + 1) // 2
    if elem_type in QUARTER_BYTE:
        return (n + 3) // 4
    return n * np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize


def inferred(path):
    """The model's graph after shape inference, with its inputs' symbolic dims 1, and the bytes
    of every tensor it declares or infers (None where unknown)."""
    m = onnx.load(path)
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1
    g = shape_inference.infer_shapes(m).graph
    sizes = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        t = vi.type.tensor_type
        known = vi.type.HasField("tensor_type") and t.HasField("shape")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        sizes[vi.name] = tensor_bytes(t.elem_type, dims) if known else None
    for init in g.initializer:
        sizes[init.name] = tensor_bytes(init.data_type, list(init.dims))
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 1)
    types = {vi.name: vi.type.tensor_type for vi in list(g.input) + list(g.value_info)}
    for node in g.node:
        if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
            x, mask = types.get(node.input[0]), node.output[1]
            if sizes.get(mask) is None and x is not None and sizes.get(node.input[0]) is not None:
                elements = sizes[node.input[0]] // np.dtype(helper.tensor_dtype_to_np_dtype(x.elem_type)).itemsize
                sizes[mask] = elements if opset >= 10 else sizes[node.input[0]]
    return g, sizes


def model_figures(path):
    """Unsized tensors, always-live bytes and the lower bound: graph inputs, outputs,
    initializers and Constant/ConstantOfShape outputs always live, the others from their
    producer to their last reader in file order."""
    g, sizes = inferred(path)
    always = {i.name for i in g.input} | {o.name for o in g.output} | {i.name for i in g.initializer}
    produced, last = {}, {}
    for k, node in enumerate(g.node):
        for x in node.input:
            if x:
                last[x] = k
        for y in node.output:
            if y:
                produced[y] = k
                if node.op_type in ("Constant", "ConstantOfShape"):
                    always.add(y)
    unsized = sorted(n for n in always | set(produced) if sizes.get(n) is None)
    always_bytes = sum(sizes[n] for n in always if sizes.get(n) is not None)
    live = [always_bytes] * max(len(g.node), 1)
    for n, k in produced.items():
        if n not in always and sizes.get(n) is not None:
            for t in range(k, max(last.get(n, k), k) + 1):
                live[t] += sizes[n]
    return len(g.node), unsized, always_bytes, max(live)


mode, paths = (sys.argv[1], sys.argv[2:]) if sys.argv[1:2] and sys.argv[1].startswith("--") else (None, sys.argv[1:])
if mode == "--export-node":
    from onnx.backend.test.case.node import collect_testcases

    for case in collect_testcases(None):
        if case.model is not None and "expanded" not in case.name:
            onnx.save(case.model, f"onnx/node/{case.name}.onnx")
elif mode == "--tensors":
    print("# Each tensor's bytes as python onnx 1.23.2's shape inference gives them:")
    print("# `python onnx_figures.py --tensors onnx/node/*.onnx` in tests/data.")
    for path in sorted(paths):
        sizes = inferred(path)[1]
        known = ", ".join(f'"{n}" = {sizes[n]}' for n in sorted(sizes) if sizes[n] is not None)
        print(f'[[model]]\npath = "{path}"\nbytes = {{ {known} }}')
else:
    for path in paths:
        nodes, unsized, always_bytes, lower_bound = model_figures(path)
        if mode == "--toml":
            print(f'  {{ path = "{path}", unsized_tensors = {len(unsized)}, always_live = {always_bytes}, lower_bound = {lower_bound} }},')
        else:
            print(f"{path.rsplit('/', 1)[-1]} nodes={nodes} unsized={len(unsized)} always_live={always_bytes} lower_bound={lower_bound} unsized_names={unsized[:5]}")
