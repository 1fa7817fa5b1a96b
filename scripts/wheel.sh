#!/usr/bin/env bash
# `make wheel`: the Python package as one abi3 wheel in dist/ (release
# profile, what `pip install ./crates/geoflash-py` compiles), for CPython >= 3.9
# on this operating system and architecture. Build it once, then install it
# anywhere alike without compiling: `pip install dist/geoflash-*.whl`.
#
# maturin comes from the virtual environment $GEOFLASH_VENV (default .venv,
# the one scripts/python-test.sh makes); it is created with maturin alone
# when missing. WHEEL_DIR changes the output directory (default dist).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${GEOFLASH_VENV:-.venv}
OUT=${WHEEL_DIR:-dist}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import maturin" 2>/dev/null; then
    "$VENV/bin/python" -m pip --disable-pip-version-check -q install "maturin>=1.5,<2"
fi

start=$(date +%s)
mkdir -p "$OUT"
# Only this build's wheel is left in $OUT, so that `pip install $OUT/*.whl` is
# unambiguous.
rm -f "$OUT"/geoflash-*.whl
"$VENV/bin/python" -m maturin build --release --quiet \
    --manifest-path crates/geoflash-py/Cargo.toml --out "$OUT"
wheel=$(ls "$OUT"/geoflash-*.whl)
case "$wheel" in
    *abi3*) ;;
    *) echo "wheel: $wheel is not an abi3 wheel" >&2; exit 1 ;;
esac
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1)) built in $(( $(date +%s) - start )) s; install it with: pip install $wheel"
