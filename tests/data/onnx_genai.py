"""Writes onnx/genai/: a small LLaMA (two layers, random weights from a fixed seed) built by
ONNX Runtime GenAI's model builder for CPU with 4-bit weights, as its published LLMs are made
(`GroupQueryAttention` with the rotary embedding fused in, `MatMulNBits`, the skip simplified
layer norms, a KV cache as inputs and outputs); and figures.toml, the bytes of every node
output when ONNX Runtime runs the model at a batch of 1, 8 new tokens after 4 cached. Only
`model.onnx` is kept: its weights' data file is not needed to size it.

    python -m venv venv && venv/bin/pip install torch==2.9.1 transformers==5.25.0 \\
        onnxruntime-genai==0.18.0 onnx==1.23.2 onnxruntime==1.32.0 numpy
    venv/bin/python onnx_genai.py          # in tests/data
"""

import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort
import torch
import transformers as tr
from onnx_run import node_output_bytes
from tokenizers import Tokenizer, models, pre_tokenizers

CACHE = [1, 2, 4, 16]  # batch, kv heads, cached tokens, head size
# The symbolic dims at those shapes.
PARAMS = ("batch_size = 1, sequence_length = 8, total_sequence_length = 12, past_sequence_length = 4, "
          "kv_cache_dim = 16")
SHAPES = {"input_ids": [1, 8], "attention_mask": [1, 12]} | {
    f"past_key_values.{layer}.{kv}": CACHE for layer in range(2) for kv in ("key", "value")
}


def build(folder):
    torch.manual_seed(0)
    config = tr.LlamaConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=128, max_position_embeddings=128)
    tr.LlamaForCausalLM(config).save_pretrained(folder / "hf")
    # The builder copies the tokenizer: a word-level one of the vocabulary.
    tokenizer = Tokenizer(models.WordLevel({f"t{i}": i for i in range(100)}, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tr.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="t0", bos_token="t1",
                               eos_token="t2").save_pretrained(folder / "hf")
    subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", folder / "hf",
                    "-o", folder / "out", "-p", "int4", "-e", "cpu", "-c", folder / "cache"], check=True)
    return folder / "out" / "model.onnx"


def figures(path):
    """Every node output's bytes, as ONNX Runtime gives them when it runs the model."""
    feed = {n: np.ones(s, np.int64) if n in ("input_ids", "attention_mask") else np.zeros(s, np.float32)
            for n, s in SHAPES.items()}
    return node_output_bytes(path, feed)


def main():
    out = pathlib.Path(__file__).parent / "onnx" / "genai"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        built = build(pathlib.Path(tmp))
        bytes_of = figures(built)
        (out / "model.onnx").write_bytes(built.read_bytes())
    shapes = ", ".join(f'"{n}" = {s}' for n, s in SHAPES.items())
    table = ", ".join(f'"{o}" = {b}' for o, b in sorted(bytes_of.items()))
    (out / "figures.toml").write_text("\n".join([
        f"# The bytes of every node output when ONNX Runtime {ort.__version__} runs the model at",
        "# these input shapes: `python onnx_genai.py` in tests/data, which writes the model too.",
        "[[model]]", 'path = "onnx/genai/model.onnx"', f"input_shapes = {{ {shapes} }}",
        f"params = {{ {PARAMS} }}", f"bytes = {{ {table} }}"]) + "\n")


if __name__ == "__main__":
    main()
