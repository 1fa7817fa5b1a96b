#!/usr/bin/env bash
# Installs what `make test` and `make demo` need when it is missing: a Rust
# toolchain with rustfmt and clippy, a C compiler, and Python 3 (pyo3's build
# script runs it; the Python tests need its venv module). Uses Debian's
# packages only where nothing else provides them.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-venv)
# The Python tier of `make test` (scripts/python-test.sh) makes a virtual
# environment: Debian splits venv and ensurepip into python3-venv.
if command -v python3 >/dev/null 2>&1 && ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
    need_apt+=(python3-venv)
fi
if ! command -v cargo >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
        rustup default stable
    else
        need_apt+=(cargo rustc rustfmt rust-clippy)
    fi
fi
if ((${#need_apt[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: missing ${need_apt[*]}; install them (apt-get needs root)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}"
fi
if command -v rustup >/dev/null 2>&1; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
fi
cargo --version
