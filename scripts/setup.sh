#!/usr/bin/env bash
# Installs what `make test` and `make demo` need when it is missing: a Rust
# toolchain with rustfmt and clippy, a C compiler, Chromium (headless, for
# the report page test), Python 3 (pyo3's build
# script runs it; the Python tests need its venv module), and a PostgreSQL
# server with PostGIS (the results-store and PostGIS tests start a
# throw-away cluster on loopback). Uses Debian's packages only where nothing
# else provides them. Without the PostgreSQL server and PostGIS and without
# root to install them, setup fails under CI (CI=true, as .ci/run sets: the
# tests would fail there, see geoflash::testenv) and prints a note otherwise
# (the tests that need a server then skip, saying why). And eatmydata, through
# which `make test` runs its tests without waiting for the disk's syncs
# (scripts/no-fsync.sh); without it and without root to install it, the
# tests run with real syncs, only slower.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-venv)
# The report test renders a report page in headless Chromium (geoflash-bench
# report::tests); Debian's package.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
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
# The newest PostgreSQL server directory (Debian: /usr/lib/postgresql/<version>/bin).
pg_bindir() {
    if [ -n "${GEOFLASH_PG_BIN:-}" ]; then echo "$GEOFLASH_PG_BIN"; return; fi
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}
have_postgis() { ls /usr/share/postgresql/*/extension/postgis.control >/dev/null 2>&1; }
need_pg=()
if [ -z "$(pg_bindir)" ] && ! command -v initdb >/dev/null 2>&1; then need_pg+=(postgresql); fi
have_postgis || need_pg+=(postgis)
need_opt=()
command -v eatmydata >/dev/null 2>&1 || need_opt+=(eatmydata)
if ((${#need_opt[@]})) && [ "$(id -u)" -ne 0 ]; then
    echo "setup: note: missing ${need_opt[*]} (Debian package; apt-get needs root): make test runs its tests with real syncs, which only makes them slower" >&2
    need_opt=()
fi
if ((${#need_apt[@]})) && [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need_apt[*]}; install them (apt-get needs root)" >&2
    exit 1
fi
in_ci() { case "${CI:-}" in ""|0|false|FALSE|False) return 1 ;; *) return 0 ;; esac; }
if ((${#need_pg[@]})) && [ "$(id -u)" -ne 0 ]; then
    if in_ci; then
        echo "setup: CI=${CI}: missing ${need_pg[*]} (Debian packages) and not root to install them; the PostgreSQL and PostGIS tests need them: run as root or install them first" >&2
        exit 1
    fi
    echo "setup: note: missing ${need_pg[*]} (Debian packages); the PostgreSQL tests need them (apt-get needs root) and will be skipped" >&2
    need_pg=()
fi
if ((${#need_apt[@]} + ${#need_pg[@]} + ${#need_opt[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" "${need_pg[@]}" "${need_opt[@]}"
    # `postgis` only recommends the server extension; install it for the server's version
    if ((${#need_pg[@]})) && ! have_postgis && [ -n "$(pg_bindir)" ]; then
        v=$(basename "$(dirname "$(pg_bindir)")")
        apt-get install -y -qq "postgresql-$v-postgis-3"
    fi
fi
if command -v rustup >/dev/null 2>&1; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
fi
cargo --version
