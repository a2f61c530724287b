#!/usr/bin/env bash
# Installs what is missing (pinned), then runs every test: native (unit, property, corpus, CLI),
# wasm in headless Chromium, and end-to-end on the release bundle. Stops at the first failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH" TRUNK_SKIP_VERSION_CHECK=true

echo "== native tests (unit, property, corpus, CLI)"
cargo test --workspace --locked

echo "== wasm tests in headless Chromium"
(cd web && cargo test --locked --target wasm32-unknown-unknown)

echo "== release bundle"
trunk build --release --locked
./scripts/bundle-size.sh

echo "== end-to-end tests on the release bundle"
node --test tests/e2e/
