"""What ONNX Runtime gives every node output of a model when it runs it, the figures
onnx_exported.py and onnx_genai.py write: its graph optimizations off, so every node of the
file runs as written."""

import numpy as np
import onnx
import onnxruntime as ort


def node_output_bytes(path, feed):
    """Each node output's bytes when ONNX Runtime runs the model at `path` on `feed`."""
    m = onnx.load(str(path))
    g = m.graph
    given = {i.name for i in g.input} | {i.name for i in g.initializer}
    outputs = [o for n in g.node for o in n.output if o and o not in given]
    del g.output[:]
    g.output.extend(onnx.ValueInfoProto(name=o) for o in outputs)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return {o: int(np.asarray(v).nbytes) for o, v in zip(outputs, session.run(outputs, feed))}
