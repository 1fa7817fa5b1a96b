#!/usr/bin/env bash
# Coverage-guided fuzzing (outside CI): every target of fuzz/ in turn, each
# for FUZZ_SECONDS (default 60), or the targets named in FUZZ_TARGETS
# (space-separated). Needs a nightly toolchain (`rustup toolchain list`) and
# cargo-fuzz (installed here from crates.io when missing). Corpora go to
# fuzz/corpus/TARGET, crashes to fuzz/artifacts/TARGET (both ignored by git);
# each crash found becomes a regression test (see fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup toolchain list 2>/dev/null | grep -q nightly; then
    echo "fuzz: no nightly toolchain; install one with 'rustup toolchain install nightly'" >&2
    exit 1
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
# Rust's standard library and sanitizer runtime trip ASan's one-definition
# check when linked into a fuzz binary (a false positive, not geoflash's).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0}"
targets=${FUZZ_TARGETS:-$(cd fuzz && cargo +nightly fuzz list)}
for t in $targets; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    seeds=()
    [ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
    echo "fuzz: $t for ${FUZZ_SECONDS:-60} s" >&2
    cargo +nightly fuzz run "$t" "fuzz/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="${FUZZ_SECONDS:-60}" -max_len=8200 -malloc_limit_mb=2048 \
        -print_final_stats=1
done
