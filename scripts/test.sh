#!/usr/bin/env bash
# Installs what is missing (pinned), then runs every test: native, wasm in headless Chromium, and
# end-to-end on the release bundle. Exits non-zero on the first failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

echo "== native tests"
cargo test --workspace --locked
