#!/usr/bin/env bash
# The Rust tier of `make test`: every crate, test, bench and example of the
# workspace compiled once, linted by clippy as it compiles
# (scripts/lint-build-env.sh: a warning fails the build), then every unit,
# property, crash and integration test and the doctests run. The Python
# extension (geoflash-py) has no Rust tests; scripts/python-test.sh builds
# and lints it with the same settings, reusing this build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lint-build-env.sh
. scripts/no-fsync.sh
CARGO=${CARGO:-cargo}
"$CARGO" test --workspace --exclude geoflash-py --all-targets --no-run
without_fsync "$CARGO" test --workspace --exclude geoflash-py "$@"
