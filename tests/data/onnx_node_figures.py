# Independent per-tensor sizes for the onnx node test models in onnx/node (python onnx's shape
# inference; not memplan's code). Run from tests/data with `onnx` installed:
#   python onnx_node_figures.py export   # writes the models from onnx's own node test cases
#   python onnx_node_figures.py          # prints onnx/node/figures.toml
# As memplan documents: a symbolic dim of a graph input is 1, and strings have no size.
import glob, os, re, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, shape_inference


if sys.argv[1:] == ["export"]:
    from onnx.backend.test.case.node import collect_testcases
    for case in collect_testcases(None):
        if case.model is not None and "expanded" not in case.name:
            onnx.save(case.model, f"onnx/node/{case.name}.onnx")
    sys.exit()

def nbytes(elem_type, dims):
    if elem_type in (0, TensorProto.STRING) or any(d is None for d in dims):
        return None
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    bits = {TensorProto.INT4: 4, TensorProto.UINT4: 4, TensorProto.FLOAT4E2M1: 4}.get(elem_type)
    if bits:
        return (n * bits + 7) // 8
    return n * np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize

print("# Each tensor's bytes as python onnx 1.23.2's shape inference gives them:")
print("# `python onnx_node_figures.py` in tests/data.")
for path in sorted(glob.glob("onnx/node/*.onnx")):
    m = onnx.load(path)
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1
    m = shape_inference.infer_shapes(m)
    sizes = {}
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        t = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            sizes[vi.name] = nbytes(t.elem_type, dims)
    for init in m.graph.initializer:
        sizes[init.name] = nbytes(init.data_type, list(init.dims))
    known = ", ".join(f'"{n}" = {sizes[n]}' for n in sorted(sizes) if sizes[n] is not None)
    print(f'[[model]]\npath = "{path}"\nbytes = {{ {known} }}')
