#!/usr/bin/env bash
# This build against an earlier commit (BASELINE_REV, default: the last commit of the session
# before these targets were worked on), side by side in one run, both built for speed.
#   best:    `best` (the default strategy) against `search` given a second, the greedy layouts
#            and `best` of the earlier commit, on the minimalloc files, the large problems of
#            tests/data, and packed instances whose optimum is known (scripts/gen-packed.py).
#            Time is the whole command's (loading and the report included), the median of
#            three runs of each build, alternating them.
#   targets: the targets of docs/benchmarks.md measured end to end by the CLI: a million-row
#            minimalloc CSV (scripts/gen-csv.py), the same problem as memplan JSON and a
#            ten-million-row CSV planned (time and peak memory, GNU time), `fit --target
#            minimize` and a 32-point `sweep` on the 2,000-tensor training example (the median
#            of three runs of each build, alternating them).
#   capacity: `search --capacity` at 1 MiB (the lower bound of most of them) on the minimalloc
#            files and the packed instances, whose optimum is 1 MiB: footprint, nodes and time
#            (the JSON's own clock), one run of each build.
#   wasm:    scripts/wasm-bench.sh's table (the CLI in wasm in node against the native CLI) for
#            each build, its ratios side by side.
#   bundle:  the release bundles (`trunk build --release`) of both builds, gzipped (gzip -9),
#            against docs/benchmarks.md's targets.
# Usage: scripts/release-compare.sh best|targets|capacity|wasm|bundle [BASELINE_REV]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
usage="usage: scripts/release-compare.sh best|targets|capacity|wasm|bundle [BASELINE_REV]"
what=${1:?$usage}
baseline_rev=${2:-2b701af}
case "$what" in best | targets | capacity | wasm | bundle) ;; *) echo "$usage" >&2; exit 2 ;; esac

tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/baseline-src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

git worktree add -q --detach "$tmp/baseline-src" "$baseline_rev"

if [ "$what" = bundle ]; then
  export TRUNK_SKIP_VERSION_CHECK=true
  trunk build --release --locked --dist "$tmp/dist-now" >/dev/null 2>&1
  (cd "$tmp/baseline-src" && CARGO_TARGET_DIR="$root/target/baseline" \
    trunk build --release --locked --dist "$tmp/dist-then" >/dev/null 2>&1)
  gz_kib() { echo $(($(gzip -9 -c "$1" | wc -c) / 1024)); }
  echo "| bundle | target (gzipped) | this build (KiB gzipped) | at $baseline_rev (KiB gzipped) |"
  echo "|---|---:|---:|---:|"
  for row in "page:memplan-web-*_bg.wasm:600" "worker:memplan-worker_bg.wasm:450"; do
    IFS=: read -r name pattern target <<<"$row"
    now_wasm=$(ls "$tmp"/dist-now/$pattern)
    then_wasm=$(ls "$tmp"/dist-then/$pattern)
    echo "| $name | $target | $(gz_kib "$now_wasm") | $(gz_kib "$then_wasm") |"
  done
  exit 0
fi

cargo build -q --locked --profile fast -p memplan-cli
(cd "$tmp/baseline-src" &&
  cargo build -q --locked --profile fast -p memplan-cli --target-dir "$root/target/baseline")
now=target/fast/memplan
then=target/baseline/fast/memplan

if [ "$what" = best ]; then
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
fi

if [ "$what" = capacity ]; then
python3 scripts/gen-packed.py 200 8 "$tmp/packed"
python3 scripts/gen-packed.py 300 8 "$tmp/packed"
cat > "$tmp/capacity.py" <<'PY'
import json, subprocess, sys
now, then, files = sys.argv[1], sys.argv[2], sys.argv[3:]
CAPACITY = 1048576
def plan(binary, path):
    """The plan's JSON: printed too when no layout fits (the command then exits 1)."""
    out = subprocess.run([binary, "plan", path, "--json", "--strategy", "search",
                          "--capacity", str(CAPACITY)], capture_output=True)
    if out.returncode not in (0, 1) or not out.stdout:
        sys.exit(f"{binary} on {path}: {out.stderr.decode().strip()}")
    return json.loads(out.stdout)
for path in files:
    a, b = plan(now, path), plan(then, path)
    fits = lambda p: "yes" if p["footprint_bytes"] <= CAPACITY else "no"
    cells = [path.rsplit("/", 1)[-1], len(a["placements"]), a["lower_bound_bytes"],
             a["footprint_bytes"], fits(a), a["nodes"], a["elapsed_ms"],
             b["footprint_bytes"], fits(b), b["elapsed_ms"]]
    print("| " + " | ".join(str(c) for c in cells) + " |")
PY
echo "| file | buffers | lower bound | footprint | fits | nodes | time (ms) | footprint at $baseline_rev | fits | time (ms) |"
echo "|---|---:|---:|---:|---|---:|---:|---:|---|---:|"
python3 "$tmp/capacity.py" "$now" "$then" tests/data/minimalloc/*.csv \
  "$tmp"/packed/packed-200-*.csv "$tmp"/packed/packed-300-*.csv
fi

if [ "$what" = wasm ]; then
# This build's pair first: wasm-bench.sh builds it (and adds the wasm32-wasip1 target).
./scripts/wasm-bench.sh > "$tmp/wasm-now"
(cd "$tmp/baseline-src" &&
  cargo build -q --locked --release --target wasm32-wasip1 -p memplan-cli --target-dir "$root/target/baseline")
NATIVE_CLI="$then" WASM_CLI=target/baseline/wasm32-wasip1/release/memplan.wasm \
  ./scripts/wasm-bench.sh > "$tmp/wasm-then"
python3 - "$tmp/wasm-now" "$tmp/wasm-then" "$baseline_rev" <<'PY'
import statistics, sys
def rows(path):
    out = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[3].replace(".", "").isdigit():
            out[(cells[0], cells[1])] = (float(cells[5]), float(cells[7]))
    return out
now, then = rows(sys.argv[1]), rows(sys.argv[2])
print(f"| instance | strategy | wasm / native | first / native | wasm / native at {sys.argv[3]} | first / native |")
print("|---|---|---:|---:|---:|---:|")
for key, (ratio, first) in now.items():
    old = then.get(key)
    old_cells = [f"{old[0]:.2f}", f"{old[1]:.2f}"] if old else ["", ""]
    print("| " + " | ".join([*key, f"{ratio:.2f}", f"{first:.2f}", *old_cells]) + " |")
for name, table in (("this build", now), (f"at {sys.argv[3]}", then)):
    print(f"\nMedian wasm / native {name}: {statistics.median(r for r, _ in table.values()):.2f}, "
          f"first run {statistics.median(f for _, f in table.values()):.2f}.", end="")
print()
PY
fi

if [ "$what" = targets ]; then
python3 scripts/gen-csv.py 1000000 "$tmp/m1.csv"
python3 scripts/gen-csv.py 10000000 "$tmp/m10.csv"
$now convert "$tmp/m1.csv" --to json > "$tmp/m1.json"
cat > "$tmp/targets.py" <<'PY'
import statistics, subprocess, sys, time
now, then, tmp, baseline = sys.argv[1:5]
# No run may take the machine down: past this much address space a build fails, and says so.
LIMIT_KIB = 20 << 20
def run(binary, args):
    """Wall time (s) and peak memory (MiB: GNU time's %M is KiB) of one run; None if it failed."""
    out = subprocess.run(["sh", "-c", f'ulimit -v {LIMIT_KIB}; exec "$@"', "sh",
                          "/usr/bin/time", "-f", "%e %M", binary, *args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    seconds, kib = out.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kib) / 1024
rows = [
    ("1M-row minimalloc CSV, `plan`", ["plan", f"{tmp}/m1.csv"], 1, "4 s, 400 MB"),
    ("the same as memplan JSON, `plan`", ["plan", f"{tmp}/m1.json"], 1, "6 s, 600 MB"),
    ("10M-row minimalloc CSV, `plan`", ["plan", f"{tmp}/m10.csv"], 1, "60 s, 4 GB"),
    ("`fit --target minimize`, transformer-training", ["fit", "static/examples/transformer-training.json", "--target", "minimize"], 3, "150 ms"),
    ("32-point `sweep`, transformer-training", ["sweep", "static/examples/transformer-training.json", "--points", "32", "--strategy", "first-fit"], 3, "500 ms"),
]
print(f"| task | target | this build | at {baseline} |")
print("|---|---|---:|---:|")
for name, args, runs, target in rows:
    got = {"now": [], "then": []}
    for _ in range(runs):
        got["now"].append(run(now, args))
        got["then"].append(run(then, args))
    def cell(rs):
        if None in rs:
            return f"failed (past {LIMIT_KIB >> 20} GiB of address space, or an error)"
        secs = statistics.median(r[0] for r in rs)
        mib = max(r[1] for r in rs)
        return f"{secs:.2f} s, {mib:.0f} MiB"
    print(f"| {name} | {target} | {cell(got['now'])} | {cell(got['then'])} |")
PY
python3 "$tmp/targets.py" "$now" "$then" "$tmp" "$baseline_rev"
fi
