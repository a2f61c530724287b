#!/usr/bin/env bash
# Optional: memplan's `best` and `search` side by side with OmniMalloc (PyPI `omnimalloc`,
# Apache-2.0) `greedy_by_all` and `supermalloc`, on the vendored minimalloc and large
# ML-compiler problems, in one run. The project does not depend on it: where Python cannot
# install the package, the script says so and exits 0.
#
# Every solver runs on one thread (OmniMalloc's thread count is set to 1; memplan is
# single-threaded). Times are each solver's own: `search`'s `elapsed_ms`, `best`'s wall time
# past a `bump` run of the same file (reading it, writing the JSON), OmniMalloc's `allocate`.
# The fast ones (`best`, `bump` and `greedy_by_all`, a few milliseconds each, where a process's
# start-up varies as much) are medians of five runs, memplan's alternating. Ratios are memplan
# over OmniMalloc: below 1 is a lower peak or a faster run.
#
# Scale: the suite the large problems come from has problems of tens of thousands of buffers,
# not vendored here; in their place, the ResNet-50 problem tiled in time (28 and 96 copies, each
# starting halfway through the one before, so that neighbours overlap: 29,176 and 100,032
# buffers). On these `greedy_by_all` takes seconds, so it runs once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=1.0.0
venv="$root/target/omnimalloc-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import omnimalloc" 2>/dev/null; then
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q "omnimalloc==$version"; } >/dev/null 2>&1; then
    echo "omnimalloc==$version cannot be installed here: nothing to compare with (skipped)"
    exit 0
  fi
fi
cargo build -q --locked --profile fast -p memplan-cli
memplan="$root/target/fast/memplan"

"$venv/bin/python" - "$memplan" tests/data/minimalloc/*.csv tests/data/large/*.csv <<'PY'
import json, shutil, statistics, subprocess, sys, tempfile, time
import omnimalloc
from omnimalloc.io import load_allocation

omnimalloc.set_max_threads(1)
memplan, files = sys.argv[1], sys.argv[2:]

def tiled(path, copies, folder):
    """`path`'s buffers `copies` times, each copy shifted by half the file's time span."""
    rows = [line.split(",") for line in open(path).read().split("\n")[1:] if line]
    shift = max(1, (max(int(r[2]) for r in rows) - min(int(r[1]) for r in rows)) // 2)
    name = f"{folder}/{path.rsplit('/', 1)[-1][:-4]}-x{copies}.csv"
    with open(name, "w") as out:
        out.write("id,lower,upper,size\n")
        for k in range(copies):
            for n, (_, lower, upper, size) in enumerate(rows):
                out.write(f"{k * len(rows) + n},{int(lower) + k * shift},{int(upper) + k * shift},{size}\n")
    return name

folder = tempfile.mkdtemp()
resnet = next(f for f in files if f.endswith("somas_tensors_resnet50.csv"))
files += [tiled(resnet, 28, folder), tiled(resnet, 96, folder)]

def run(path, strategy):
    started = time.perf_counter()
    out = subprocess.run([memplan, "plan", path, "--strategy", strategy, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out), (time.perf_counter() - started) * 1000

def ours(path, strategy):
    plan, wall = run(path, strategy)
    if "elapsed_ms" in plan:
        ms = plan["elapsed_ms"]
    else:
        # No clock in a deterministic plan: the wall time past a `bump` run's (reading the
        # file, writing the JSON), at least 0.1 ms.
        walls, bumps = [wall], [run(path, "bump")[1]]
        for _ in range(4):
            walls.append(run(path, strategy)[1])
            bumps.append(run(path, "bump")[1])
        ms = max(statistics.median(walls) - statistics.median(bumps), 0.1)
    return plan["footprint_bytes"], round(ms, 1), plan["lower_bound_bytes"]

def theirs(path, allocator, runs):
    pool = load_allocation(path)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        placed = omnimalloc.allocate(pool, allocator, validate=True)
        times.append((time.perf_counter() - started) * 1000)
    return max(a.offset + a.size for a in placed.allocations), statistics.median(times)

print(f"memplan vs omnimalloc {omnimalloc.__version__ if hasattr(omnimalloc, '__version__') else ''}".strip())
print()
print("| file | LB | best | greedy_by_all | best / greedy peak | best / greedy time "
      "| search | supermalloc | search / supermalloc peak | search / supermalloc time |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for path in files:
    best, best_ms, lb = ours(path, "best")
    search, search_ms, _ = ours(path, "search")
    greedy, greedy_ms = theirs(path, "greedy_by_all", 5 if best_ms < 100 else 1)
    sm, sm_ms = theirs(path, "supermalloc", 1)
    name = path.rsplit("/", 1)[-1]
    print(f"| {name} | {lb} | {best} ({best_ms} ms) | {greedy} ({greedy_ms:.0f} ms) "
          f"| {best / greedy:.4f} | {best_ms / max(greedy_ms, 1e-3):.2f} "
          f"| {search} ({search_ms} ms) | {sm} ({sm_ms:.0f} ms) "
          f"| {search / sm:.4f} | {search_ms / max(sm_ms, 1e-3):.2f} |")
shutil.rmtree(folder)
PY
