# geoflash — build, test and benchmark tiers (see README.md).
# `make demo` and `make test` work on a fresh machine: `setup` installs what is missing.

CARGO ?= cargo
GEOFLASH_PROPTEST_CASES ?= 64
export GEOFLASH_PROPTEST_CASES
DEMO_DIR ?= demo

.PHONY: doc all setup build wheel demo test fmt lint unit python test-long torture bench bench-peers fuzz clean

all: build

## Install the toolchain pieces the project needs when they are missing.
setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --release -p geoflash-cli

## The Python package as an abi3 wheel in dist/ (release build, CPython >= 3.9,
## this OS and architecture): built once here, `pip install dist/geoflash-*.whl`
## installs it elsewhere in seconds without a Rust toolchain (scripts/wheel.sh).
wheel: setup
	@bash scripts/wheel.sh

## The main job on embedded defaults: the eFIND paper's experiment
## (workloads/efind-vs-fast.toml, small scale, 4 KiB pages) on the flash
## simulator and a real file, its report in demo/report/index.html and the
## headline table of eFIND's gains over FAST; then a short CLI tour.
demo: build
	@bash scripts/demo.sh $(DEMO_DIR)

## What CI runs: the declared minimum Rust version (every crate inherits
## it), formatting, no new function over 120 lines outside tests
## (scripts/check-fn-length.py), then one build of the workspace linted by clippy as it
## compiles (a warning fails it: scripts/lint-build-env.sh), every unit,
## property and crash test at moderate counts, the Python package's
## pytest suite on a wheel that reuses that build, and the API
## documentation with rustdoc's warnings denied (about 40 s). The tests run
## without waiting for the disk's syncs (GEOFLASH_NO_FSYNC=1:
## scripts/no-fsync.sh says why that tests as much; set it to 0 to wait).
test: export GEOFLASH_NO_FSYNC ?= 1
test: setup fmt unit python doc

fmt:
	bash scripts/check-rust-version.sh
	$(CARGO) fmt --all -- --check
	python3 scripts/check-fn-length.py

## The lints alone, without building the tests (`make test` lints as it builds),
## and the API documentation with rustdoc's warnings denied (no link to a
## private or missing item).
lint: fmt doc
	$(CARGO) clippy --workspace --all-targets -- -D warnings

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p geoflash -p geoflash-bench --no-deps

unit:
	@CARGO=$(CARGO) bash scripts/rust-test.sh

## The Python package: a venv in .venv, `pip install ./crates/geoflash-py`, pytest.
python:
	@bash scripts/python-test.sh

## Large property-test counts and full crash campaigns (not in CI), the
## ignored measurement tests included. The output goes to target/test-long.log
## too; the crash campaigns' one-line summaries (cases, crashes, torn pages
## restored) are printed again at the end, for docs/benchmarks.md.
test-long: setup
	@mkdir -p target
	bash -o pipefail -c 'GEOFLASH_PROPTEST_CASES=2000 GEOFLASH_CRASH_CASES=10000 $(CARGO) test --workspace --release -- --include-ignored --nocapture 2>&1 | tee target/test-long.log'
	@grep '^crash campaign' target/test-long.log

## The crash and damage campaigns of docs/reliability.md at large counts
## (not in CI; `make test` runs each at moderate counts): every crash
## campaign of the stores, the log and the rollback journal at 5,000 cases,
## the metadata damage campaign at every 4-byte range, the command line's
## SIGKILL tests, the SIGKILL matrices of tests/torture.rs (builds: every
## store x tree kind x durability x budget x build mode; every device form;
## update with kills of checkpoint and recover), the damage campaign of
## every page of every file (tests/torture_damage.rs, and through Python),
## ENOSPC on a small tmpfs (tests/torture_space.rs; root only) and the
## Python writers killed GEOFLASH_PY_KILLS=30 times per store. Summaries go
## to target/torture.log and are printed again at the end.
torture: setup
	@mkdir -p target
	bash -o pipefail -c 'GEOFLASH_CRASH_CASES=5000 GEOFLASH_DAMAGE_STRIDE=4 $(CARGO) test --release -p geoflash --lib -- crash damage killed journal --nocapture 2>&1 | tee target/torture.log'
	bash -o pipefail -c '$(CARGO) test --release -p geoflash-cli --test cli -- sigkill the_journal a_failed_insert a_file_size_limit --nocapture 2>&1 | tee -a target/torture.log'
	bash -o pipefail -c '$(CARGO) test --release -p geoflash-cli --test torture --test torture_damage --test torture_space -- --include-ignored --nocapture 2>&1 | tee -a target/torture.log'
	bash -o pipefail -c 'GEOFLASH_PY_KILLS=30 GEOFLASH_PY_DAMAGE_STRIDE=1 bash scripts/python-test.sh -s test_durable_updates.py test_torture_damage.py -k "killed_writer or damage" 2>&1 | tee -a target/torture.log'
	bash -o pipefail -c 'GEOFLASH_PY_KILLS=10 GEOFLASH_PY_KIND_MATRIX=full bash scripts/python-test.sh -s test_durable_kinds.py -k "killed_writer" 2>&1 | tee -a target/torture.log'
	@echo "torture: at commit $$(git rev-parse --short HEAD)$$(git diff --quiet HEAD -- crates || echo ' (with uncommitted changes)')" | tee -a target/torture.log
	@grep -E '^(crash campaign|journal crash campaign|metadata damage|torture:|python torture:|test result:)|[0-9]+ (passed|failed)' target/torture.log

## Criterion benchmarks, every shipped workload at small scale
## (scripts/bench-workloads.sh: results and reports in bench-results/), then
## the peer benchmark.
bench: setup
	$(CARGO) bench -p geoflash
	@bash scripts/bench-workloads.sh
	@bash scripts/bench-peers.sh

## geoflash against SQLite R*Tree, libspatialindex, DuckDB, PostGIS, shapely
## and geo-index in one run (scripts/bench-peers.sh; PEERS_ARGS="--scale full").
bench-peers: setup
	@bash scripts/bench-peers.sh

## Coverage-guided fuzzing of the page codec (needs cargo-fuzz; outside CI).
fuzz: setup
	@bash scripts/fuzz.sh

clean:
	$(CARGO) clean
