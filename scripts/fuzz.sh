#!/usr/bin/env bash
# Coverage-guided fuzzing of the page codec (outside CI). Needs a nightly
# toolchain (`rustup toolchain list`) and cargo-fuzz (installed here from
# crates.io when missing). FUZZ_SECONDS sets the run time (default 180).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup toolchain list 2>/dev/null | grep -q nightly; then
    echo "fuzz: no nightly toolchain; install one with 'rustup toolchain install nightly'" >&2
    exit 1
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
mkdir -p fuzz/corpus/page_decode
cargo +nightly fuzz run page_decode fuzz/corpus/page_decode fuzz/seeds/page_decode -- \
    -max_total_time="${FUZZ_SECONDS:-180}" -max_len=8200 -print_final_stats=1
