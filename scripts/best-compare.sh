#!/usr/bin/env bash
# `best` (the default strategy) against `search` given a second, the greedy layouts, and `best`
# of an earlier commit, on the minimalloc files, the large problems of tests/data, and packed
# instances whose optimum is known (scripts/gen-packed.py): one markdown table, measured side
# by side in one run. Time is the whole command's (loading and the report included), the
# median of three runs of each build, alternating them.
# Usage: scripts/best-compare.sh [BASELINE_REV]   (default: the commit before best's exact budget)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
baseline_rev=${1:-2b701af}

tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/baseline-src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

cargo build -q --locked --profile fast -p memplan-cli
git worktree add -q --detach "$tmp/baseline-src" "$baseline_rev"
(cd "$tmp/baseline-src" &&
  cargo build -q --locked --profile fast -p memplan-cli --target-dir "$root/target/baseline")
now=target/fast/memplan
then=target/baseline/fast/memplan

python3 scripts/gen-packed.py 200 8 "$tmp/packed"
python3 scripts/gen-packed.py 300 8 "$tmp/packed"

cat > "$tmp/rows.py" <<'PY'
import json, statistics, subprocess, sys, time
now, then, files = sys.argv[1], sys.argv[2], sys.argv[3:]
def plan(binary, path, *args):
    started = time.perf_counter()
    out = subprocess.run([binary, "plan", path, "--json", *args], check=True,
                         capture_output=True).stdout
    return json.loads(out), (time.perf_counter() - started) * 1e3
for path in files:
    runs = {"now": [], "then": []}
    for _ in range(3):
        runs["now"].append(plan(now, path))
        runs["then"].append(plan(then, path))
    for build, rows in runs.items():
        if len({r["footprint_bytes"] for r, _ in rows}) != 1:
            sys.exit(f"{path}: best at {build} planned different footprints run to run")
    search, _ = plan(now, path, "--strategy", "search", "--time-limit", "1s")
    greedy = min(plan(now, path, "--strategy", s)[0]["footprint_bytes"]
                 for s in ("first-fit", "best-fit"))
    first = runs["now"][0][0]
    lb, best = first["lower_bound_bytes"], first["footprint_bytes"]
    old, found = runs["then"][0][0]["footprint_bytes"], search["footprint_bytes"]
    ms = lambda rows: statistics.median(t for _, t in rows)
    cells = [path.rsplit("/", 1)[-1], len(first["placements"]), lb,
             f"{best} ({best / lb:.3f})", f"{ms(runs['now']):.0f}",
             f"{old} ({old / lb:.3f})", f"{ms(runs['then']):.0f}",
             f"{found} ({found / lb:.3f})", f"{best / found:.3f}", f"{best / greedy:.3f}"]
    print("| " + " | ".join(str(c) for c in cells) + " |")
PY

echo "| file | buffers | lower bound | best | time (ms) | best at $baseline_rev | time (ms) | search, 1 s | best / search | best / greedy |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
python3 "$tmp/rows.py" "$now" "$then" tests/data/minimalloc/*.csv tests/data/large/*.csv \
  "$tmp"/packed/packed-200-*.csv "$tmp"/packed/packed-300-*.csv
