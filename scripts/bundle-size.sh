#!/usr/bin/env bash
# Prints the size of the release wasm bundle in dist/, raw and gzipped (gzip -9).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
for wasm in "$root"/dist/*.wasm; do
  raw=$(wc -c < "$wasm")
  gz=$(gzip -9 -c "$wasm" | wc -c)
  printf 'wasm bundle %s: %d bytes raw (%d KiB), %d bytes gzipped (%d KiB)\n' \
    "$(basename "$wasm")" "$raw" $((raw / 1024)) "$gz" $((gz / 1024))
done
