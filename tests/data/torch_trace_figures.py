"""Independent figures of a PyTorch profiler trace: per device, the most bytes live at once.

Written apart from memplan (Python's json and gzip only) so the importer is checked against
it: each device's `[memory]` events in time order (ties by `Ev Idx`), an allocation paired with
the next free of its address; a free with no allocation before it (allocated before the trace)
is skipped; an allocation never freed stays live to the end. A device's reservations are counted
unless its `Total Reserved` ever falls below its `Total Allocated` (the CPU's stays 0).

    python3 torch_trace_figures.py TRACE.json[.gz]
    # prints `device peak_bytes allocations reserved_counted`
"""
import gzip
import json
import sys
from collections import defaultdict


def figures(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    per_device = defaultdict(list)
    uncounted = set()
    for e in events:
        if e.get("name") != "[memory]":
            continue
        a = e["args"]
        kind, ident = a["Device Type"], a.get("Device Id", 0)
        device = "cpu" if kind == 0 else f"cuda:{ident}" if kind == 1 else f"device{kind}:{ident}"
        per_device[device].append((e["ts"], a.get("Ev Idx", 0), a["Addr"], a["Bytes"]))
        if "Total Reserved" in a and "Total Allocated" in a:
            if a["Total Reserved"] < a["Total Allocated"]:
                uncounted.add(device)
    out = {}
    for device, evs in sorted(per_device.items()):
        evs.sort(key=lambda x: (x[0], x[1]))
        open_sizes = defaultdict(list)
        live = peak = allocations = 0
        for _, _, addr, size in evs:
            if size > 0:
                open_sizes[addr].append(size)
                live += size
                allocations += 1
                peak = max(peak, live)
            elif size < 0 and open_sizes[addr]:
                live -= open_sizes[addr].pop(0)
        out[device] = (peak, allocations, device not in uncounted)
    return out


if __name__ == "__main__":
    for device, (peak, allocations, counted) in figures(sys.argv[1]).items():
        print(device, peak, allocations, "yes" if counted else "no")
