"""Writes onnx/exported/: small Hugging Face models (BERT, GPT-2, LLaMA: one layer, random
weights) exported by PyTorch's TorchScript ONNX exporter, as most ONNX models are made, with
their batch and sequence dims symbolic, each also as ONNX Runtime's transformer optimizer fuses
it (`*_optimized.onnx`) and as PyTorch 2.9's default exporter writes it (`*_dynamo.onnx`,
through torch.export: its dims named by torch, `s43`..., and its weights in a file beside it,
`*_dynamo.onnx.data`, which is not kept: memplan reads a model's dims, never its weights, as a
user who opens the model file alone); and figures.toml, the bytes of every node output when
ONNX Runtime runs each model at a batch of 2 and a sequence of 16 (graph optimizations off, so
every node of the file runs), and the symbolic dims at those shapes.

    python -m venv venv && venv/bin/pip install torch==2.9.1 transformers==4.44.2 \\
        onnx==1.23.2 onnxruntime==1.32.0 numpy
    venv/bin/python onnx_exported.py          # in tests/data
"""

import pathlib
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers as tr

from onnx_run import node_output_bytes
from onnxruntime.transformers import optimizer

warnings.filterwarnings("ignore")
SHAPES = {"input_ids": [2, 16], "attention_mask": [2, 16]}
SMALL = dict(vocab_size=100)
MODELS = {
    "bert": lambda: tr.BertModel(tr.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                               intermediate_size=64, max_position_embeddings=64, **SMALL)),
    "gpt2": lambda: tr.GPT2Model(tr.GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=64, **SMALL)),
    "llama": lambda: tr.LlamaModel(tr.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                                  num_key_value_heads=2, intermediate_size=64, **SMALL)),
}


class LastHiddenState(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        kwargs = {} if isinstance(self.model, tr.BertModel) else {"use_cache": False}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state


def export(name, path, dynamo=False):
    torch.manual_seed(0)
    model = LastHiddenState(MODELS[name]().eval()).eval()
    args = tuple(torch.ones(SHAPES[n], dtype=torch.long) for n in SHAPES)
    opset = {} if dynamo else {"opset_version": 17}
    torch.onnx.export(model, args, str(path), input_names=list(SHAPES), output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "batch", 1: "sequence"} for n in SHAPES}, dynamo=dynamo, **opset)


def params(path):
    """The symbolic dims of the model's inputs at SHAPES (torch.export names its own)."""
    m = onnx.load(str(path), load_external_data=False)
    dims = {}
    for i in m.graph.input:
        for d, v in zip(i.type.tensor_type.shape.dim, SHAPES.get(i.name, [])):
            if d.dim_param:
                dims[d.dim_param] = v
    return ", ".join(f"{p} = {v}" for p, v in sorted(dims.items()))


def figures(path):
    """Every node output's bytes, as ONNX Runtime gives them when it runs the model."""
    return node_output_bytes(path, {n: np.ones(s, np.int64) for n, s in SHAPES.items()})


def optimize(name, path, out):
    """The model as ONNX Runtime's transformer optimizer fuses it (attention, embedding and
    skip layer norms, GELUs into its contrib ops), as its BERT and GPT-2 recipes run."""
    kind = {"bert": "bert", "gpt2": "gpt2", "llama": "gpt2"}[name]
    heads = {"bert": 2, "gpt2": 2, "llama": 4}[name]
    optimizer.optimize_model(str(path), model_type=kind, num_heads=heads, hidden_size=32,
                             opt_level=1).save_model_to_file(str(out))


def main():
    out = pathlib.Path(__file__).parent / "onnx" / "exported"
    out.mkdir(parents=True, exist_ok=True)
    shapes = ", ".join(f'"{n}" = {s}' for n, s in SHAPES.items())
    lines = [
        f"# The bytes of every node output when ONNX Runtime {ort.__version__} runs the model at",
        "# these input shapes: `python onnx_exported.py` in tests/data, which writes the models too.",
    ]
    for name in MODELS:
        path = out / f"{name}.onnx"
        export(name, path)
        optimize(name, path, out / f"{name}_optimized.onnx")
        export(name, out / f"{name}_dynamo.onnx", dynamo=True)
        for written in (path.name, f"{name}_optimized.onnx", f"{name}_dynamo.onnx"):
            table = ", ".join(f'"{o}" = {b}' for o, b in sorted(figures(out / written).items()))
            lines += ["[[model]]", f'path = "onnx/exported/{written}"', f"input_shapes = {{ {shapes} }}",
                      f"params = {{ {params(out / written)} }}", f"bytes = {{ {table} }}"]
        (out / f"{name}_dynamo.onnx.data").unlink()
    (out / "figures.toml").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
