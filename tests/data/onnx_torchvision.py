"""Writes onnx/torchvision/: torchvision's Faster R-CNN (MobileNet v3 large, 320 FPN; random
weights from a fixed seed, 5 classes) exported by PyTorch's TorchScript ONNX exporter, as its
detection models are deployed: its input's resize and pad computed in float and integer shape
arithmetic, non-maximum suppression in an `If`. Only the graph is kept, its weights moved to a
data file that is not (memplan sizes a model from its dims); and figures.toml, the bytes of
every node output when ONNX Runtime runs the model on one 3 x 320 x 320 image (graph
optimizations off, so every node of the file runs).

    python -m venv venv && venv/bin/pip install torch==2.9.1 torchvision==0.24.1 \\
        onnx==1.23.2 onnxruntime==1.32.0 numpy
    venv/bin/python onnx_torchvision.py          # in tests/data
"""

import pathlib
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision
from onnx_run import node_output_bytes

warnings.filterwarnings("ignore")
SHAPE = [3, 320, 320]


def export(path):
    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=5).eval()
    torch.onnx.export(model, ([torch.rand(SHAPE)],), str(path), opset_version=17, dynamo=False,
                      input_names=["image"], output_names=["boxes", "labels", "scores"])


def main():
    out = pathlib.Path(__file__).parent / "onnx" / "torchvision"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        full = pathlib.Path(tmp) / "model.onnx"
        export(full)
        np.random.seed(0)
        bytes_of = node_output_bytes(full, {"image": np.random.rand(*SHAPE).astype(np.float32)})
        model = onnx.load(str(full))
        # The initializers' bytes to a file beside the graph, which is not kept.
        onnx.save(model, str(pathlib.Path(tmp) / "graph.onnx"), save_as_external_data=True,
                  all_tensors_to_one_file=True, location="weights.data", size_threshold=0)
        (out / "fasterrcnn_mobilenet_v3.onnx").write_bytes((pathlib.Path(tmp) / "graph.onnx").read_bytes())
    table = ", ".join(f'"{o}" = {b}' for o, b in sorted(bytes_of.items()))
    (out / "figures.toml").write_text("\n".join([
        f"# The bytes of every node output when ONNX Runtime {ort.__version__} runs the model on one",
        "# image: `python onnx_torchvision.py` in tests/data, which writes the model too.",
        "[[model]]", 'path = "onnx/torchvision/fasterrcnn_mobilenet_v3.onnx"',
        f'input_shapes = {{ "image" = {SHAPE} }}', "params = {}", f"bytes = {{ {table} }}"]) + "\n")


if __name__ == "__main__":
    main()
