# Sourced by scripts/rust-test.sh and scripts/python-test.sh: with
# GEOFLASH_NO_FSYNC=1 (what `make test` sets unless it is set), their test
# runs go through eatmydata (Debian's libeatmydata, installed by
# scripts/setup.sh), which makes fsync, fdatasync and syncfs return at once
# without asking the disk. No test of those tiers can observe a sync: their
# crashes are injected at the device layer (a simulated power cut drops or
# tears the writes the device has not synced) or are SIGKILLs, after which
# the kernel still holds every write. The syncs only cost time: about 50 s
# of the library's tests and 100 s in all on this 2-core machine. The
# engine still makes and counts every sync (its counters are unchanged);
# only the kernel's flush to the disk is skipped. `make torture` and `make
# test-long` keep real syncs; GEOFLASH_NO_FSYNC=0 keeps them in `make test`.
#
# Defines `without_fsync CMD ARGS...`: runs CMD, through eatmydata when asked
# and available (without it, with a note, the run is only slower).
without_fsync() {
    if [ "${GEOFLASH_NO_FSYNC:-0}" = 1 ]; then
        if command -v eatmydata >/dev/null 2>&1; then
            eatmydata -- "$@"
            return
        fi
        echo "note: eatmydata is not installed (scripts/setup.sh installs it as root): the tests run with real syncs, which only makes them slower" >&2
    fi
    "$@"
}
