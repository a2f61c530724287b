# Independent figures for an ONNX model (onnx shape inference; not memplan's code):
# unsized tensors, always-live bytes, and the lower bound (most bytes live at one step).
import sys, onnx
from onnx import shape_inference, helper, TensorProto
import numpy as np

def size_of(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    n = 1
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            n *= d.dim_value
        else:
            return None
    return n * np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)).itemsize

for path in sys.argv[1:]:
    m = shape_inference.infer_shapes(onnx.load(path))
    g = m.graph
    info = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        info[vi.name] = size_of(vi)
    for init in g.initializer:
        info[init.name] = int(np.prod(init.dims)) * np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type)).itemsize
    always = set(i.name for i in g.input) | set(o.name for o in g.output) | set(i.name for i in g.initializer)
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
    names = set(always) | set(produced)
    unsized = sorted(n for n in names if info.get(n) is None)
    always_bytes = sum(info[n] for n in always if info.get(n) is not None)
    steps = len(g.node)
    live = [always_bytes] * max(steps, 1)
    for n, k in produced.items():
        if n in always or info.get(n) is None:
            continue
        end = last.get(n, k)
        for t in range(k, max(end, k) + 1):
            live[t] += info[n]
    print(f"{path.rsplit('/',1)[-1]} nodes={steps} unsized={len(unsized)} always_live={always_bytes} lower_bound={max(live)} unsized_names={unsized[:5]}")
