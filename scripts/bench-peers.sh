#!/usr/bin/env bash
# `make bench-peers`: the peer benchmark (benchmarks/peers/run.py) in its own
# virtual environment (.venv-peers, gitignored) with the release builds of
# the geoflash command and Python package and every peer from the package
# index: rtree (libspatialindex), duckdb with duckdb-extension-spatial of the
# same version, shapely 2, geoindex-rs, psycopg (PostGIS runs on a
# throw-away cluster of the Debian packages scripts/setup.sh installs).
#
#   make bench-peers                      # --scale small (200,000 objects)
#   PEERS_ARGS="--scale full" make bench-peers
#   PEERS_ARGS="--scale small --datasets=" make bench-peers   # moving objects alone
#
# The moving-objects phase (benchmarks/peers/moving.py: 100,000 objects at
# --scale small, moved in commits of 1,000 with windows between them) runs
# too; PEERS_MOVING=0 leaves it out.
#
# Results: bench-results/peers/{results.sqlite,results.md,peers.png}.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${GEOFLASH_PEERS_VENV:-.venv-peers}
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
if ! "$VENV/bin/python" -c "import maturin, numpy, rtree, duckdb, duckdb_extension_spatial, shapely, geoindex_rs, psycopg, pyarrow, pyrosm, matplotlib" 2>/dev/null; then
    "${pip[@]}" install --upgrade pip
    # duckdb-extension-spatial pins the duckdb it was built for.
    "${pip[@]}" install "maturin>=1.5,<2" numpy rtree duckdb-extension-spatial "shapely>=2" geoindex-rs \
        "psycopg[binary]" pyarrow pyrosm matplotlib
fi
cargo build --release -p geoflash-cli
MATURIN_PEP517_ARGS="--profile release" "${pip[@]}" install --force-reinstall --no-deps ./crates/geoflash-py
moving=()
[ "${PEERS_MOVING:-1}" = 0 ] || moving=(--moving)
# shellcheck disable=SC2086
exec "$VENV/bin/python" benchmarks/peers/run.py --geoflash-bin target/release/geoflash \
    --out "${PEERS_OUT:-bench-results/peers}" "${moving[@]}" ${PEERS_ARGS:---scale small}
