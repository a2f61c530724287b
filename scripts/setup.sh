#!/usr/bin/env bash
# Installs what building, serving and testing memplan need, pinned, and only what is missing.
# Idempotent: with everything present it checks versions and returns in well under a second.
set -euo pipefail

WASM_BINDGEN_VERSION=0.2.129
TRUNK_VERSION=0.21.14

root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
log() { printf 'setup: %s\n' "$*" >&2; }

have_version() { # command, expected substring of its --version output
  command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -qF "$2"
}

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  log "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if ! have_version wasm-bindgen "$WASM_BINDGEN_VERSION"; then
  log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 2 minutes)"
  cargo install --locked wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

if ! have_version trunk "$TRUNK_VERSION"; then
  log "installing trunk $TRUNK_VERSION (about 8 minutes on 2 cores)"
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo install --locked trunk --version "$TRUNK_VERSION"
fi

apt_install() {
  local sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}

if [ "${MEMPLAN_SETUP_BROWSER:-1}" = 1 ]; then
  if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    log "installing chromium and chromium-driver from Debian"
    apt_install chromium chromium-driver
  fi
  if ! command -v npm >/dev/null 2>&1; then
    log "installing node and npm from Debian"
    apt_install nodejs npm
  fi
  if [ ! -d "$root/tests/e2e/node_modules/playwright-core" ] ||
     ! cmp -s "$root/tests/e2e/package-lock.json" "$root/tests/e2e/node_modules/.package-lock.json.installed"; then
    log "installing the end-to-end test dependencies (npm ci)"
    (cd "$root/tests/e2e" && npm ci --no-audit --no-fund --silent &&
      cp package-lock.json node_modules/.package-lock.json.installed)
  fi
fi

# The LiteRT interpreter, for the test that runs TFLite models written back with memplan's plan.
if [ "${MEMPLAN_SETUP_LITERT:-1}" = 1 ]; then
  venv="$root/target/litert-venv"
  stamp="$venv/.requirements.installed"
  if ! cmp -s "$root/tests/litert-requirements.txt" "$stamp"; then
    log "installing the LiteRT interpreter (tests/litert-requirements.txt) into target/litert-venv"
    if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
      apt_install python3-venv
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/tests/litert-requirements.txt"
    cp "$root/tests/litert-requirements.txt" "$stamp"
  fi
fi
