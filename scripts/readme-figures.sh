#!/usr/bin/env bash
# Writes the measured figures of docs/ (and the README's screenshot) from the commands that
# measure them, never by hand:
# the benchmark table (`memplan bench`), the wasm build against the native one
# (`scripts/wasm-bench.sh`), the bundle size (`scripts/bundle-size.sh`, after a
# release build) and the browser figures (`scripts/browser-bench.mjs`). Each block sits between `<!-- NAME:begin -->` and `<!-- NAME:end -->` with the date and
# the command that produced it. Run it after `./scripts/test.sh` on the machine the figures are for.
# Usage: ./scripts/readme-figures.sh [BLOCK...]
set -euo pipefail
# With names (bench capacity minimize best targets wasm-compare omnimalloc wasm scale remat greedy onnx chain orders fits
# compilers bundle bundle-compare browser snapshots screenshot), only those.
only=" $* "
want() { [ "$only" = "  " ] || [[ "$only" == *" $1 "* ]]; }
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
today=$(date -u +%Y-%m-%d)
cores=$(nproc)

replace() { # name, file holding the new block: replaced wherever its markers are (README, docs/)
  python3 - "$1" "$2" <<'PY'
import sys, glob
name, path = sys.argv[1], sys.argv[2]
block = open(path).read().rstrip('\n')
begin, end = f'<!-- {name}:begin -->', f'<!-- {name}:end -->'
docs = [d for d in ['README.md', *sorted(glob.glob('docs/*.md'))] if begin in open(d).read()]
if len(docs) != 1:
    sys.exit(f'{begin} ... {end} must stand in exactly one of README.md and docs/*.md, not {docs}')
text = open(docs[0]).read()
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(docs[0], 'w').write(f'{head}{begin}\n{block}\n{end}{tail}')
PY
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A block that is one command's output under a line naming it: block NAME LINE COMMAND...
block() {
  local name=$1 line=$2
  shift 2
  { echo "$line"; echo; "$@"; } > "$tmp/$name"
  replace "$name" "$tmp/$name"
}

bench_cmd="cargo run --profile fast -p memplan-cli -- bench --csv-dir tests/data/minimalloc --csv-dir tests/data/large"
if want bench; then
{
  echo "\`$bench_cmd\` ($today, $cores cores, one run, all rows side by side):"
  echo
  cargo run -q --locked --profile fast -p memplan-cli -- bench --csv-dir tests/data/minimalloc --csv-dir tests/data/large
} > "$tmp/bench"
replace bench "$tmp/bench"
fi

if want capacity; then
  block capacity "\`./scripts/release-compare.sh capacity\` ($today, $cores cores, side by side in one run, one run of each build; \`memplan plan FILE --strategy search --capacity 1048576 --json\` on each minimalloc file and on \`scripts/gen-packed.py\`'s instances, whose optimum is 1 MiB; time is the JSON's \`elapsed_ms\`):" \
    ./scripts/release-compare.sh capacity
fi

if want minimize; then
{
  echo "\`memplan plan FILE --strategy search --time-limit LIMIT --json\` on each minimalloc file, minimizing ($today, $cores cores, one run each): a search that proves its layout optimal stops there, one that does not runs to the limit and keeps the best layout found; time is the JSON's \`elapsed_ms\` (the limit, then the checker and the report), found its \`found_ms\`, when the search found the layout it returns:"
  echo
  echo '| file | buffers | proven lower bound | footprint, 0.5 s limit | nodes | found (ms) | time (ms) | footprint, 1 s limit | optimal | nodes | found (ms) | time (ms) |'
  echo '|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|'
  cat > "$tmp/minimize.py" <<'PY'
import json, sys
half, one = (json.loads(open(p).read()) for p in sys.argv[2:4])
cells = [sys.argv[1], len(one["placements"]), one["proven_lower_bound_bytes"],
         half["footprint_bytes"], half["nodes"], half["found_ms"], half["elapsed_ms"],
         one["footprint_bytes"], "yes" if one["optimal"] else "no", one["nodes"], one["found_ms"],
         one["elapsed_ms"]]
print("| " + " | ".join(str(c) for c in cells) + " |")
PY
  for f in tests/data/minimalloc/*.csv; do
    target/fast/memplan plan "$f" --strategy search --time-limit 500ms --json > "$tmp/half.json"
    target/fast/memplan plan "$f" --strategy search --time-limit 1s --json > "$tmp/one.json"
    python3 "$tmp/minimize.py" "$(basename "$f")" "$tmp/half.json" "$tmp/one.json"
  done
} > "$tmp/minimize"
replace minimize "$tmp/minimize"
fi

if want best; then
  block best "\`./scripts/release-compare.sh best\` ($today, $cores cores, all rows side by side in one run; the \`packed-*\` rows are \`scripts/gen-packed.py\`'s instances, whose optimum is the lower bound; time is the whole command's, the median of 3 runs of each build, alternated):" \
    ./scripts/release-compare.sh best
fi

if want targets; then
  block targets "\`./scripts/release-compare.sh targets\` ($today, $cores cores, side by side in one run; wall time and peak memory by GNU time, the median time of 3 runs of each build where it says so, alternated):" \
    ./scripts/release-compare.sh targets
fi

if want wasm-compare; then
  block wasm-compare "\`./scripts/release-compare.sh wasm\` ($today, $cores cores; \`scripts/wasm-bench.sh\`'s table for this build and then for the earlier one, in one run, each ratio from rounds that alternate that build's native and wasm CLIs):" \
    ./scripts/release-compare.sh wasm
fi

if want omnimalloc; then
  block omnimalloc "\`./scripts/omnimalloc-compare.sh\` ($today, $cores cores, all rows side by side; \`best\` is the median of 5 runs, \`greedy_by_all\` too where \`best\` takes under 100 ms, the rest one run; the \`-xN\` rows are the ResNet-50 problem tiled N times in time, neighbours overlapping by half):" \
    ./scripts/omnimalloc-compare.sh
fi

if want wasm; then
  block wasm "\`./scripts/wasm-bench.sh\` ($today, $cores cores, side by side in one run; each plan 5 times in a row, in 3 rounds that alternate the native and the wasm build, the medians of the 15 runs, and the wasm build's first run, which for the rows after the first ran after the rows above it; time is the CLI's own clock around the plan):" \
    ./scripts/wasm-bench.sh
fi

scale_cmd="memplan bench --synthetic 1000000 --all-live 0 --strategies first-fit,best"
if want scale; then
{
  echo "\`$scale_cmd\` ($today, $cores cores, one run; the last line is GNU time's):"
  echo
  cargo build -q --locked --profile fast -p memplan-cli
  /usr/bin/time -o "$tmp/time" -f '%M KiB maximum resident set size, %e s wall' \
    target/fast/memplan bench --synthetic 1000000 --all-live 0 --strategies first-fit,best
  echo
  echo
  cat "$tmp/time"
} > "$tmp/scale"
replace scale "$tmp/scale"
fi

if want remat; then
{
  echo "\`memplan bench --remat static/examples/transformer-training.json --remat static/examples/convnet-training.json\` ($today, $cores cores):"
  echo
  cargo run -q --locked --profile fast -p memplan-cli -- bench \
    --remat static/examples/transformer-training.json --remat static/examples/convnet-training.json
} > "$tmp/remat"
replace remat "$tmp/remat"
fi

if want greedy; then
{
  echo "\`memplan sweep static/examples/convnet-training.json --points 12 --strategy first-fit\` ($today):"
  echo
  cargo run -q --locked --profile fast -p memplan-cli -- sweep static/examples/convnet-training.json \
    --points 12 --strategy first-fit
} > "$tmp/greedy"
replace greedy "$tmp/greedy"
fi

if want onnx; then
{
  echo "\`memplan bench --onnx-mb 20\` ($today, $cores cores):"
  echo
  cargo run -q --locked --profile fast -p memplan-cli -- bench --onnx-mb 20
} > "$tmp/onnx"
replace onnx "$tmp/onnx"
fi

if want chain; then
{
  echo "\`memplan bench --onnx-chain 20000,100000,1000000\` ($today, $cores cores, one run each; load is decoding, shape inference, resolving and liveness):"
  echo
  cargo run -q --locked --profile fast -p memplan-cli -- bench --onnx-chain 20000,100000,1000000
} > "$tmp/chain"
replace chain "$tmp/chain"
fi

if want orders; then
{
  # Training examples in a valid but poor order, made apart from memplan (scripts/poor-order.py).
  for e in mlp-training transformer-training; do
    python3 scripts/poor-order.py "static/examples/$e.json" --seed 1 -o "$tmp/$e-poor-order.json"
  done
  files=(static/examples/*.json tests/data/onnx/light_*.onnx "$tmp"/*-poor-order.json)
  echo "\`memplan bench --orders FILE...\` on the bundled examples, the ONNX models of tests/data/onnx and two training examples whose steps \`scripts/poor-order.py --seed 1\` put in a valid but poor order (\`*-poor-order.json\`) ($today, $cores cores; each cell the footprint under the default strategy and the median of five plans, loading excluded):"
  echo
  cargo run -q --locked --profile fast -p memplan-cli -- bench $(printf -- '--orders %s ' "${files[@]}") 2>/dev/null
} > "$tmp/orders"
replace orders "$tmp/orders"
fi

if want compilers; then
{
  cargo build -q --locked --profile fast -p memplan-cli
  echo "\`memplan plan FILE --json\` on each compiler dump of tests/data ($today): the plan the compiler wrote into it, when it wrote one (checked by memplan's checker; \"across dtypes\": its pairs of buffers of different dtypes in the same bytes, which memplan's precision classes keep apart), beside memplan's default plan of the same values, and memplan's plan by the compiler's rule, without precision classes (\`--no-precision-classes\`) (values: XLA's values, a TFLite model's tensors):"
  echo
  echo '| dump | values | compiler | its plan | its arena | checker | memplan | memplan arena | memplan, no precision classes | lower bound |'
  echo '|---|---:|---|---:|---:|---|---:|---:|---:|---:|'
  cat > "$tmp/compiler-row.py" <<'PY'
import json, sys
p = json.load(open(sys.argv[3]))
unclassed = json.load(open(sys.argv[4]))
g = p.get("given_plan")
mib = lambda b: f"{b / 2**20:,.2f} MiB" if b >= 2**20 else f"{b / 2**10:,.2f} KiB"
arena = sum(d["arena_bytes"] for d in p["devices"])
verdict = lambda g: ("valid" if g["valid"] else f'{g["violations"]} violations') + (
    f', {g["across_classes"]} across dtypes' if g.get("across_classes") else "")
given = (f'{g["planner"]} | {mib(g["footprint_bytes"])} | {mib(g["arena_bytes"])} | '
         f'{verdict(g)}') if g else 'none (planned at run time) | | |'
print(f'| {sys.argv[1]} | {sys.argv[2]} | {given} | {mib(p["footprint_bytes"])} | {mib(arena)} | '
      f'{mib(unclassed["footprint_bytes"])} | {mib(p["lower_bound_bytes"])} |')
PY
  row() { # name, values, dump
    target/fast/memplan plan "$3" --json > "$tmp/classed.json" 2>/dev/null
    target/fast/memplan plan "$3" --json --no-precision-classes > "$tmp/unclassed.json" 2>/dev/null
    python3 "$tmp/compiler-row.py" "$1" "$2" "$tmp/classed.json" "$tmp/unclassed.json"
  }
  for f in tests/data/xla/*/*-buffer-assignment.txt; do
    name="xla/$(basename "$(dirname "$f")")"
    values=$(grep -c '^ value:' "$f")
    row "$name" "$values" "$f"
  done
  for f in tests/data/tflite/*.tflite; do
    values=$(target/fast/memplan validate "$f" 2>/dev/null | sed -E 's/.*: ([0-9]+) tensors.*/\1/')
    row "tflite/$(basename "$f" .tflite)" "$values" "$f"
  done
} > "$tmp/compilers"
replace compilers "$tmp/compilers"
fi

fits_cmd="memplan fits static/examples/decoder-serving.json --device-class l4-24gb --util 0.9 --param B --set S=4096"
if want fits; then
{
  echo "\`$fits_cmd\` ($today, $cores cores):"
  echo
  echo '```'
  cargo run -q --locked --profile fast -p memplan-cli -- fits static/examples/decoder-serving.json \
    --device-class l4-24gb --util 0.9 --param B=1..1024 --set S=4096
  echo '```'
} > "$tmp/fits"
replace fits "$tmp/fits"
fi

if want bundle && ls dist/*.wasm >/dev/null 2>&1; then
  {
    echo "\`./scripts/bundle-size.sh\` after \`trunk build --release\` ($today):"
    echo
    echo '```'
    ./scripts/bundle-size.sh
    echo '```'
  } > "$tmp/bundle"
  replace bundle "$tmp/bundle"
fi

if want bundle-compare; then
  block bundle-compare "\`./scripts/release-compare.sh bundle\` ($today; both releases built by \`trunk build --release\` in one run, gzip -9):" \
    ./scripts/release-compare.sh bundle
fi

if want browser && [ -f dist/index.html ]; then
  cargo build -q --locked --profile fast -p memplan-cli
  cargo build -q --locked -p memplan-cli
  node scripts/browser-bench.mjs "$tmp/browser-bench"
  {
    echo "\`node scripts/browser-bench.mjs\` on the release bundle in headless Chromium ($today, $cores cores):"
    echo
    echo '```'
    cat "$tmp/browser-bench/perf.json" "$tmp/browser-bench/big-dump.txt" \
      "$tmp/browser-bench/onnx-20mb.txt" "$tmp/browser-bench/remat-browser.txt"
    echo '```'
    echo
    cat "$tmp/browser-bench/responsiveness.txt"
    echo
    cat "$tmp/browser-bench/solver-browser.txt"
  } > "$tmp/browser"
  replace browser "$tmp/browser"
fi

if want snapshots && [ -f dist/index.html ]; then
  cargo build -q --locked --profile fast -p memplan-cli
  {
    echo "\`node scripts/snapshot-bench.mjs 64 128 256 400 512 660 800 1024 csv:250000 csv:1000000 csv:2000000 csv:2400000\` on the release bundle in headless Chromium and with \`target/fast/memplan\` ($today, $cores cores, one run each):"
    echo
    node scripts/snapshot-bench.mjs 64 128 256 400 512 660 800 1024 csv:250000 csv:1000000 csv:2000000 csv:2400000
  } > "$tmp/snapshots"
  replace snapshots "$tmp/snapshots"
fi

if want screenshot && [ -f dist/index.html ]; then
  node scripts/screenshot.mjs docs/screenshot.png
fi
echo "figures written ($today)"
