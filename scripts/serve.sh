#!/usr/bin/env bash
# Installs what is missing (pinned), then serves the explorer at http://127.0.0.1:8080 with the
# bundled example loaded, rebuilding on change.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
MEMPLAN_SETUP_BROWSER=0 ./scripts/setup.sh
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH" TRUNK_SKIP_VERSION_CHECK=true
exec trunk serve --locked "$@"
