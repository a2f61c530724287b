"""TFLite models written back with memplan's plan load and run in the LiteRT interpreter with
the same outputs, and pass `memplan check`.

For each model of tests/data/tflite: `memplan convert MODEL --to tflite -o OUT` writes the model
with memplan's plan as its `OfflineMemoryAllocation`; `memplan check OUT` checks that plan
against the model's own problem; the interpreter runs the original and the written model on
the same random inputs (seeded) and their outputs must be equal, bit for bit. Vela's model runs
an Ethos-U operator that only the NPU's delegate runs: it is written and checked, not run.

    python3 tests/tflite_roundtrip.py MEMPLAN_BINARY    # with ai-edge-litert installed
"""
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
from ai_edge_litert.interpreter import Interpreter

MEMPLAN = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loaded(path):
    """The interpreter on `path`, ready to run; ValueError when it refuses the model."""
    interpreter = Interpreter(model_path=path)
    interpreter.allocate_tensors()
    return interpreter


def outputs(path, seed):
    interpreter = loaded(path)
    rng = np.random.default_rng(seed)
    for d in interpreter.get_input_details():
        dtype = np.dtype(d["dtype"])
        if np.issubdtype(dtype, np.floating):
            value = rng.standard_normal(d["shape"]).astype(dtype)
        elif dtype == np.bool_:
            value = rng.integers(0, 2, d["shape"]).astype(np.bool_)
        elif dtype.itemsize == 1:
            # A quantized feature map: any byte.
            info = np.iinfo(dtype)
            value = rng.integers(info.min, info.max, d["shape"], dtype=dtype, endpoint=True)
        else:
            # Wider integers are counters and indices: small ones.
            value = rng.integers(0, 3, d["shape"], dtype=dtype)
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in sorted(glob.glob(os.path.join(ROOT, "tests/data/tflite/*.tflite"))):
            name = os.path.basename(model)
            out = os.path.join(tmp, name)
            subprocess.run([MEMPLAN, "convert", model, "--to", "tflite", "-o", out], check=True,
                           stderr=subprocess.DEVNULL)
            checked = subprocess.run([MEMPLAN, "check", out], capture_output=True, text=True)
            if checked.returncode != 0 or "valid plan" not in checked.stdout:
                print(f"FAIL {name}: memplan check: {checked.stdout}{checked.stderr}")
                failures += 1
                continue
            if "vela" in name:
                print(f"ok {name}: written and checked (its Ethos-U operator needs the NPU)")
                continue
            try:
                loaded(model)
            except ValueError as refused:
                # The full interpreter refuses some microcontroller models (TFLite Micro reads
                # them): the written model must be refused alike.
                try:
                    loaded(out)
                    print(f"FAIL {name}: the interpreter refuses the original but runs the written model")
                    failures += 1
                except ValueError as again:
                    same = str(again) == str(refused)
                    print(f"{'ok' if same else 'FAIL'} {name}: written and checked; the interpreter refuses both alike")
                    failures += not same
                continue
            for seed in range(3):
                before, after = outputs(model, seed), outputs(out, seed)
                same = len(before) == len(after) and all(
                    a.shape == b.shape and a.tobytes() == b.tobytes() for a, b in zip(before, after))
                if not same:
                    print(f"FAIL {name}: outputs differ on seed {seed}")
                    failures += 1
                    break
            else:
                print(f"ok {name}: written, checked, and the same outputs on 3 inputs")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
