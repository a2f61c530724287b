#!/usr/bin/env bash
# The planner in WebAssembly against the native build, on the minimalloc and large ML-compiler
# problems, side by side in one run (see scripts/wasm-bench.mjs): the CLI built for speed
# (`--profile fast`) natively, and the CLI built for wasm32-wasip1 with the release profile, the
# browser bundle's (memplan-core at opt-level 3, fat LTO), run in node. Each plan runs REPEAT
# times in a row (default 5), in ROUNDS rounds that alternate the two builds (default 3); the
# table shows the medians over all those runs and the wasm build's first run. Adds the
# wasm32-wasip1 target if it is missing; only this benchmark needs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
repeat=${REPEAT:-5}
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1; then
  rustup target add wasm32-wasip1 >&2
fi
# Another build's pair (scripts/release-compare.sh wasm) is given by NATIVE_CLI and WASM_CLI.
native=${NATIVE_CLI:-target/fast/memplan}
wasm=${WASM_CLI:-target/wasm32-wasip1/release/memplan.wasm}
if [ -z "${NATIVE_CLI:-}${WASM_CLI:-}" ]; then
  cargo build -q --locked --profile fast -p memplan-cli
  cargo build -q --locked --release --target wasm32-wasip1 -p memplan-cli
fi
node --expose-gc --no-warnings scripts/wasm-bench.mjs "$native" "$wasm" -- \
  bench --csv-dir "$root/tests/data/minimalloc" --csv-dir "$root/tests/data/large" \
  --synthetic 0 --all-live 0 --strategies search,best --repeat "$repeat" --json
