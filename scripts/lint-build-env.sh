# Sourced by scripts/rust-test.sh and scripts/python-test.sh: one Rust build
# for the lints, the tests and the Python wheel.
#
# `cargo clippy` only type-checks, so running it before `cargo test` compiled
# the whole workspace twice. Instead clippy's driver compiles the workspace's
# own crates as the tests are built (RUSTC_WORKSPACE_WRAPPER, which is what
# `cargo clippy` itself sets; dependencies compile with plain rustc) with
# warnings denied (CLIPPY_ARGS is how cargo-clippy hands its arguments to the
# driver), so a lint fails the build exactly as `cargo clippy -- -D
# warnings` does. The wheel is built with the same wrapper, profile settings
# and features, so it reuses the test build's artifacts.
#
# GEOFLASH_LINT=0 builds with plain rustc (no lints).
if [ "${GEOFLASH_LINT:-1}" != 0 ]; then
    driver=$(command -v clippy-driver || true)
    if [ -z "$driver" ] && command -v rustup >/dev/null 2>&1; then
        driver=$(rustup which clippy-driver 2>/dev/null || true)
    fi
    if [ -z "$driver" ]; then
        echo "clippy-driver not found: install clippy (rustup component add clippy, or Debian's rust-clippy), or set GEOFLASH_LINT=0 to build without lints" >&2
        exit 1
    fi
    export RUSTC_WORKSPACE_WRAPPER="$driver"
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
fi
