#!/usr/bin/env bash
# ThreadSanitizer run of the concurrency tests (outside CI): many threads
# querying one open index while its buffer evicts. Needs the nightly
# toolchain with rust-src (std is rebuilt with the sanitizer); uses its own
# target directory so the normal build is not disturbed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup toolchain list 2>/dev/null | grep -q nightly; then
    echo "tsan: no nightly toolchain; install one with 'rustup toolchain install nightly'" >&2
    exit 1
fi
rustup component add rust-src --toolchain nightly >/dev/null
export RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread"
export TSAN_OPTIONS="halt_on_error=1"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/tsan}"
cargo +nightly test -Zbuild-std --target "$(rustc -vV | sed -n 's/^host: //p')" \
    -p geoflash --lib -- "${TSAN_FILTER:-two_threads}"
