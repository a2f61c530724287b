# Independent figures for an ONNX model (onnx shape inference; not memplan's code):
# unsized tensors, always-live bytes, and the lower bound (most bytes live at one step).
# As memplan documents: a symbolic dim of a graph input is 1 (it binds params to 1 unless told),
# and a tensor of strings has no size.
import sys, onnx
from onnx import shape_inference, helper, TensorProto
import numpy as np

def size_of(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape") or t.elem_type == TensorProto.STRING:
        return None
    n = 1
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            n *= d.dim_value
        else:
            return None
    return n * np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)).itemsize

# `--toml`: one inline table a model, as tests/data/onnx/testdata/figures.toml holds them (run
# from tests/data, so that the paths are relative to it).
toml = sys.argv[1:2] == ["--toml"]
for path in sys.argv[1 + toml:]:
    m = onnx.load(path)
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1
    m = shape_inference.infer_shapes(m)
    g = m.graph
    info = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        info[vi.name] = size_of(vi)
    for init in g.initializer:
        info[init.name] = None if init.data_type == TensorProto.STRING else int(np.prod(init.dims)) * np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type)).itemsize
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
    if toml:
        print(f'  {{ path = "{path}", unsized_tensors = {len(unsized)}, always_live = {always_bytes}, lower_bound = {max(live)} }},')
        continue
    print(f"{path.rsplit('/',1)[-1]} nodes={steps} unsized={len(unsized)} always_live={always_bytes} lower_bound={max(live)} unsized_names={unsized[:5]}")
