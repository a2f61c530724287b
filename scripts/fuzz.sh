#!/usr/bin/env bash
# Coverage-guided fuzzing of the importers and of planning what they read (tests/fuzz): each
# target for SECONDS (default 120), from seeds copied out of tests/data and the examples, with
# what a run finds kept for the next (target/fuzz/corpus). Exits 1 at the first target that
# crashes, naming the input it wrote; replay one with
#   cargo +nightly fuzz run --fuzz-dir tests/fuzz --target-dir target/fuzz/build TARGET FILE
# Not part of ./scripts/test.sh: it needs a nightly toolchain and takes minutes a target.
#
#   ./scripts/fuzz.sh                  every target, 120 s each
#   SECONDS_EACH=600 ./scripts/fuzz.sh onnx pickle
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

CARGO_FUZZ_VERSION=0.13.2
seconds=${SECONDS_EACH:-120}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(pickle onnx tflite json csv trace xla zip gz)
fi

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version 2>/dev/null | grep -qF "$CARGO_FUZZ_VERSION"; then
  cargo +nightly install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

# Seeds: small real files of each kind (the fuzzer mutates them; a large one only slows it).
corpus=target/fuzz/corpus
seed() { # target, files...
  local dir="$corpus/$1"
  shift
  mkdir -p "$dir"
  [ -n "$(ls -A "$dir")" ] || cp "$@" "$dir/"
}
mkdir -p target/fuzz/seeds
python3 scripts/gen-snapshot.py --events 60 --protocol 2 -o target/fuzz/seeds/p2.pickle >/dev/null
python3 scripts/gen-snapshot.py --events 60 --protocol 5 -o target/fuzz/seeds/p5.pickle >/dev/null
python3 - <<'EOF'
import gzip, io, json, zipfile
trace = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 90},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Device Type": 1,
     "Device Id": 0, "Addr": 4096, "Bytes": 512, "Total Allocated": 512,
     "Total Reserved": 2097152}},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 9, "args": {"Device Type": 1,
     "Device Id": 0, "Addr": 4096, "Bytes": -512, "Total Allocated": 0,
     "Total Reserved": 2097152}}]}
text = json.dumps(trace).encode()
open("target/fuzz/seeds/trace.json", "wb").write(text)
open("target/fuzz/seeds/trace.json.gz", "wb").write(gzip.compress(text, mtime=0))
archive = io.BytesIO()
with zipfile.ZipFile(archive, "w") as z:
    z.writestr("snapshot/data.pkl", open("target/fuzz/seeds/p2.pickle", "rb").read())
    z.writestr("snapshot/version", "3\n")
    z.writestr("module_0030.cpu-buffer-assignment.txt",
               open("crates/memplan-formats/src/testdata/xla-pair.txt").read())
open("target/fuzz/seeds/archive.zip", "wb").write(archive.getvalue())
EOF
seed pickle target/fuzz/seeds/p2.pickle target/fuzz/seeds/p5.pickle
seed onnx tests/data/onnx/light_bvlc_alexnet.onnx $(ls tests/data/onnx/node/*.onnx | head -80) \
  tests/data/onnx/contrib/*.onnx
seed tflite tests/data/tflite/if_branches.tflite tests/data/tflite/while_loop.tflite \
  tests/data/tflite/keyword_scrambled.tflite
seed json static/examples/mlp-training.json static/examples/decoder-serving.json \
  static/examples/serving-program.json
seed csv tests/data/packed/packed-300-s4.csv
seed trace target/fuzz/seeds/trace.json
seed xla crates/memplan-formats/src/testdata/xla-pair.txt
seed zip target/fuzz/seeds/archive.zip
seed gz target/fuzz/seeds/trace.json.gz

cargo +nightly fuzz build --fuzz-dir tests/fuzz --target-dir target/fuzz/build -O
for target in "${targets[@]}"; do
  echo "== fuzzing $target for ${seconds} s"
  artifacts="target/fuzz/artifacts/$target/"
  mkdir -p "$artifacts"
  # Leaks are not failures: a pickle's memo can make a container hold itself, which reference
  # counting never frees (crates/memplan-pickle); what it holds is bounded by the file. Both
  # the fuzzer's check (-detect_leaks) and the sanitizer's at exit (ASAN_OPTIONS) are off.
  if ! ASAN_OPTIONS=detect_leaks=0 cargo +nightly fuzz run --fuzz-dir tests/fuzz --target-dir target/fuzz/build -O "$target" "$corpus/$target" -- \
    -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=3000 -timeout=20 \
    -detect_leaks=0 -artifact_prefix="$artifacts" -print_final_stats=1; then
    echo "fuzz: $target crashed; the input is in $artifacts" >&2
    exit 1
  fi
done
