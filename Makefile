# The two commands of the README:
#   make run   sets everything up, builds the release wheel and runs the main job;
#   make test  sets everything up, builds the release wheel and runs every test.
# Both work from a fresh clone: the virtualenv, its packages and the wheel are made here.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEPS_STAMP := $(VENV)/.requirements-dev.stamp
WHEEL_DIR := target/wheels

.PHONY: run test wheel lint rust-test python-test fuzz-check bench clean

run: wheel
	$(BIN)/keysplit simulate

test: lint fuzz-check wheel rust-test python-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(DEPS_STAMP): requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

# The tests import the installed wheel, never the source tree.
wheel: $(DEPS_STAMP)
	rm -rf $(WHEEL_DIR)
	$(BIN)/maturin build --release --out $(WHEEL_DIR)
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall $(WHEEL_DIR)/keysplit-*.whl
	$(BIN)/python -m pip check

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc -p keysplit-core --no-deps --locked

rust-test:
	cargo test --workspace --locked

python-test: $(DEPS_STAMP)
	$(BIN)/python -m pytest

# Keeps the fuzz targets compiling and lint-clean on the stable toolchain;
# `fuzz/README.md` says how to run them.
fuzz-check:
	cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings

# Throughput against Polars and NumPy, call overhead and copies, multi-source speed-up;
# then the tables of docs/performance.md. `cargo bench -p keysplit-core` runs the Rust ones.
bench: wheel
	$(BIN)/python benches/route_throughput.py
	$(BIN)/python benches/call_overhead.py
	$(BIN)/python benches/multi_source.py
	$(BIN)/python benches/render.py

clean:
	rm -rf $(VENV) target fuzz/target
