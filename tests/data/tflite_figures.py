"""Independent figures of TFLite models, as TFLite Micro's planner sees them.

Written apart from memplan, on the `tflite` package's bindings of the schema (PyPI `tflite`
2.18.0, over `flatbuffers`), for single-subgraph models:

- tensors: the main subgraph's tensors, and those that hold data (constants);
- arena_lower_bound: the most bytes of non-constant, non-variable tensors live at once, each
  living from the operator that first writes it (the start, for a subgraph input) to the last
  operator that reads it (the end, for a subgraph output), its bytes its shape times its type's
  width;
- always_live_bytes: the bytes of constants and variable tensors;
- offline_offsets: how many tensors an `OfflineMemoryAllocation` plan places (not -1).

    python3 tflite_figures.py MODEL...    # prints [[tflite.file]] TOML entries
"""
import struct
import sys

import tflite

WIDTH = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16, 12: 8, 15: 4,
         16: 2, 18: 2, 21: 1, 22: 1}


def figures(path):
    model = tflite.Model.GetRootAsModel(open(path, "rb").read(), 0)
    assert model.SubgraphsLength() == 1, "one subgraph"
    sg = model.Subgraphs(0)
    n = sg.TensorsLength()

    def has_data(t):
        b = model.Buffers(t.Buffer())
        return b.DataLength() > 0 or b.Offset() > 1

    sizes, constant, variable = [], [], []
    for i in range(n):
        t = sg.Tensors(i)
        count = 1
        for d in t.ShapeAsNumpy() if t.ShapeLength() else []:
            count *= int(d)
        sizes.append(count * WIDTH[t.Type()])
        constant.append(has_data(t))
        variable.append(bool(t.IsVariable()))
    ops = sg.OperatorsLength()
    first, last = [None] * n, [None] * n
    # Positions: 0 for the inputs, then operator k at k + 1.
    for i in sg.InputsAsNumpy():
        first[i] = 0
    for k in range(ops):
        op = sg.Operators(k)
        used = [i for i in op.InputsAsNumpy() if i >= 0] if op.InputsLength() else []
        made = list(op.OutputsAsNumpy()) if op.OutputsLength() else []
        made += list(op.IntermediatesAsNumpy()) if op.IntermediatesLength() else []
        for i in made:
            if first[i] is None:
                first[i] = k + 1
            last[i] = max(last[i] or 0, k + 1)
        for i in used:
            if first[i] is None:
                first[i] = k + 1
            last[i] = max(last[i] or 0, k + 1)
    for i in sg.OutputsAsNumpy():
        last[i] = ops
    planned = [i for i in range(n) if not constant[i] and not variable[i] and first[i] is not None]
    peak = max(sum(sizes[i] for i in planned if first[i] <= p <= last[i]) for p in range(ops + 1))
    offline = None
    for m in range(model.MetadataLength()):
        entry = model.Metadata(m)
        if entry.Name() == b"OfflineMemoryAllocation":
            data = model.Buffers(entry.Buffer()).DataAsNumpy().tobytes()
            words = struct.unpack(f"<{len(data) // 4}i", data)
            offline = sum(1 for w in words[3:] if w >= 0)
    return {
        "tensors": n,
        "constants": sum(constant),
        "operators": ops,
        "arena_lower_bound": peak,
        "always_live_bytes": sum(s for s, c, v in zip(sizes, constant, variable) if c or v),
        **({"offline_offsets": offline} if offline is not None else {}),
    }


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print("[[tflite.file]]")
        print(f'path = "{path}"')
        for k, v in figures(path).items():
            print(f"{k} = {v}")
        print()
