# The two commands of the README:
#   make run   sets everything up, builds the release wheel and runs the main job;
#   make test  sets everything up, builds the release wheel and the sdist, and runs every
#              test against them, each installed as a user would.
# Both work from a fresh clone: the virtualenvs, their packages and the wheel are made here.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEPS_STAMP := $(VENV)/.requirements-dev.stamp
DIST_DIR := dist
# Fresh on every `make test`: the release wheel installed as `pip install keysplit[...]`
# would, and the package built from the sdist.
RELEASE_VENV := .venv-release
SDIST_VENV := .venv-sdist
# PATH less the directories that hold a Rust toolchain: the tests run against the wheel
# where nothing could compile it.
NO_RUST_PATH := $(shell printf '%s' "$$PATH" | tr ':' '\n' | while IFS= read -r dir; do \
  [ -e "$$dir/cargo" ] || [ -e "$$dir/rustc" ] || [ -e "$$dir/rustup" ] || printf '%s:' "$$dir"; done | sed 's/:$$//')

.PHONY: run test wheel dist release-venv sdist-test docs data java lint stubtest rust-test python-test fuzz-check fuzz-smoke bench spark-vs-native spark-ingest spark-grouped-map spark-skew-join spark-window spark-holistic spark-explain-skew spark-streaming clean

# Debian packages of the real datasets (keysplit.datasets.kjv); the PyPI ones are in
# requirements-dev.txt.
DEBIAN_DATA_PACKAGES := bible-kjv bible-kjv-text

run: data wheel java
	$(BIN)/keysplit run

test: lint fuzz-check fuzz-smoke wheel stubtest rust-test python-test sdist-test docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(DEPS_STAMP): requirements-dev.txt requirements-test.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

# The development virtualenv runs the release wheel too: one build, one binary.
wheel: dist
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall $(DIST_DIR)/keysplit-*.whl
	$(BIN)/python -m pip check

# Release artefacts, as users install them: an abi3 wheel for glibc 2.17 and later
# (manylinux2014, linked with zig from PyPI's ziglang, so no old toolchain is needed) and an
# sdist; auditwheel confirms the wheel's tag and twine both files' metadata.
dist: $(DEPS_STAMP)
	rm -rf $(DIST_DIR)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/maturin build --release --zig --compatibility manylinux2014 --out $(DIST_DIR)
	$(BIN)/maturin sdist --out $(DIST_DIR)
	$(BIN)/auditwheel show $(DIST_DIR)/keysplit-*.whl | tr -s ' \n' ' ' | grep -q '"manylinux_2_17_x86_64"'
	$(BIN)/twine check --strict $(DIST_DIR)/*

# dist/'s wheel with every extra, in a new virtualenv, resolved from its own metadata.
release-venv: dist
	rm -rf $(RELEASE_VENV)
	$(PYTHON) -m venv $(RELEASE_VENV)
	$(RELEASE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RELEASE_VENV)/bin/python -m pip install --quiet -r requirements-test.txt
	$(RELEASE_VENV)/bin/python -m pip install --quiet --only-binary keysplit \
	  "$$(ls $(DIST_DIR)/keysplit-*.whl)[arrow,numpy,datasets,plot,progress,spark]"
	$(RELEASE_VENV)/bin/python -m pip check

# The sdist, built by pip as a user without a wheel for their platform would (maturin from
# PyPI, the crates of its Cargo.lock from crates.io), then the release smoke test and the routing and
# snapshot, input and sketch tests on what it built (without the optional Spark and plot packages).
sdist-test: dist
	rm -rf $(SDIST_VENV)
	$(PYTHON) -m venv $(SDIST_VENV)
	$(SDIST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SDIST_VENV)/bin/python -m pip install --quiet --no-binary keysplit $(DIST_DIR)/keysplit-*.tar.gz
	grep -E '^(pytest|hypothesis|xxhash|numpy|pyarrow|datasketches)==' requirements-test.txt > $(SDIST_VENV)/pins.txt
	$(SDIST_VENV)/bin/python -m pip install --quiet -r $(SDIST_VENV)/pins.txt
	$(SDIST_VENV)/bin/python tests/release_smoke.py
	$(SDIST_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_choices.py tests/test_snapshot.py \
	  tests/test_groupers.py tests/test_inputs.py tests/test_sketches.py tests/test_release.py

# The documentation site, into site/ (open site/index.html): the guides of docs/, the API
# reference from the installed wheel's docstrings, the CLI reference from its parser; every
# warning, a broken link or cross-reference included, fails the build.
docs: wheel
	rm -rf site
	$(BIN)/sphinx-build -E -W --keep-going -n -q -b html -d target/doctrees docs site

lint: $(DEPS_STAMP)
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc -p keysplit-core --no-deps --locked
	$(BIN)/ruff check python tests benches docs/conf.py docs/_ext
	$(BIN)/ruff format --check python tests benches docs/conf.py docs/_ext
	$(BIN)/mypy
	$(BIN)/actionlint -shellcheck $(BIN)/shellcheck

# The type stub python/keysplit/_core.pyi against the compiled module it describes, so
# that the two cannot drift: it needs the wheel installed, which lint (run first, on the
# sources alone) does not.
stubtest: wheel
	$(BIN)/python -m mypy.stubtest keysplit._core --mypy-config-file pyproject.toml

rust-test:
	cargo test --workspace --locked

# Installs the Debian data packages that are missing, with sudo unless already root.
data:
	@missing=""; for p in $(DEBIAN_DATA_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if ! command -v apt-get >/dev/null; then \
	    echo "make data: apt-get not found; install the Debian packages$$missing by hand" >&2; exit 1; fi; \
	  if [ "$$(id -u)" -eq 0 ]; then sudo=""; \
	  elif command -v sudo >/dev/null; then sudo="sudo"; \
	  else echo "make data: need root or sudo to run apt-get install$$missing" >&2; exit 1; fi; \
	  echo "make data: installing$$missing"; \
	  $$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q $$missing \
	    || { echo "make data: apt-get install$$missing failed" >&2; exit 1; }; \
	fi

# Against the release wheel in its fresh virtualenv, with no Rust toolchain on PATH. The
# Spark tests run in one pytest process, one embedded server or cluster at a time as they
# always have; the tests without Spark run beside them in a second process (its output
# follows), since the Spark tests spend much of their time waiting on JVMs rather than
# computing.
SPARK_TESTS := $(sort $(wildcard tests/test_spark*.py)) tests/test_docs_code.py tests/test_shuffle_bytes.py
PYTEST_DIR := target/pytest
PYTEST := PATH="$(NO_RUST_PATH)" $(RELEASE_VENV)/bin/python -m pytest
python-test: data java release-venv
	@env PATH="$(NO_RUST_PATH)" sh -c 'for tool in cargo rustc rustup; do \
	  if command -v $$tool >/dev/null; then echo "python-test: $$tool is still on PATH: $$PATH" >&2; exit 1; fi; done'
	rm -rf $(PYTEST_DIR) && mkdir -p $(PYTEST_DIR)
	$(PYTEST) --basetemp=$(PYTEST_DIR)/rest $(addprefix --ignore=,$(SPARK_TESTS)) > $(PYTEST_DIR)/rest.log 2>&1 & rest=$$!; \
	$(PYTEST) --basetemp=$(PYTEST_DIR)/spark $(SPARK_TESTS); spark_status=$$?; \
	wait $$rest; rest_status=$$?; echo "python-test: the tests without Spark ($(PYTEST_DIR)/rest.log):"; \
	cat $(PYTEST_DIR)/rest.log; [ $$spark_status -eq 0 ] && [ $$rest_status -eq 0 ]

# Keeps the fuzz targets compiling and lint-clean on the stable toolchain;
# `fuzz/README.md` says how to run them.
fuzz-check:
	cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings

# A short libFuzzer run of every target, coverage-guided but without a sanitizer, so that
# it needs only the stable toolchain; `fuzz/README.md` has the long runs.
FUZZ_TARGETS := route_batch hash snapshot sketches
FUZZ_SECONDS ?= 15
CARGO_FUZZ_VERSION := 0.13.2
fuzz-smoke:
	command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version $(CARGO_FUZZ_VERSION)
	cd fuzz && for target in $(FUZZ_TARGETS); do \
		cargo fuzz run --sanitizer none $$target -- -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=30 || exit 1; \
	done

# Throughput against Polars and NumPy, call overhead and copies, multi-source speed-up;
# then the tables of docs/performance.md. `cargo bench -p keysplit-core` runs the Rust ones.
bench: wheel
	$(BIN)/python benches/route_throughput.py
	$(BIN)/python benches/call_overhead.py
	$(BIN)/python benches/multi_source.py
	$(BIN)/python benches/render.py

# The embedded Spark Connect server (keysplit.spark) needs Java 17 or newer.
java:
	@if java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then :; else \
	  echo "Java >= 17 not found: installing openjdk-17-jre-headless with apt-get"; \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jre-headless; } \
	    || { echo "error: could not install openjdk-17-jre-headless; install Java 17+ and re-run" >&2; exit 1; }; \
	  java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])' \
	    || { echo "error: java on PATH is still older than 17 after installing openjdk-17-jre-headless" >&2; exit 1; }; \
	fi

# keysplit's aggregate against Spark's own groupBy on 10^7 rows, local[2] and a two-worker
# standalone cluster; writes benches/results/spark_vs_native.json (about an hour on 2 cores).
spark-vs-native: wheel java
	$(BIN)/python benches/spark_vs_native.py

# Client-stream ingestion per path (files, upload, arrow) at 10^7 rows and 10^8 rows in
# windows; writes benches/results/spark_ingest.json (a few minutes on 2 cores).
spark-ingest: wheel java
	$(BIN)/python benches/spark_ingest.py

# keysplit's apply_grouped against applyInPandas and uniform salting on 10^7 rows, local[2]
# and a two-worker standalone cluster; writes benches/results/spark_grouped_map.json.
spark-grouped-map: wheel java
	cd benches && ../$(BIN)/python spark_grouped_map.py

# A skewed join with and without adaptive execution's skew-join split (the "joins" row of
# docs/spark.md's plan table); writes benches/results/spark_skew_join.json.
spark-skew-join: wheel java
	cd benches && ../$(BIN)/python spark_skew_join.py

# Window functions over a hot key against Spark's own window and the salting recipe, 10^7
# rows, hot key 30 % and 60 % and none; writes benches/results/spark_window.json.
spark-window: wheel java
	cd benches && ../$(BIN)/python spark_window.py

# Holistic aggregates (median, percentile, mode) over a hot key against Spark's own
# groupBy().agg(), 10^7 rows, hot key 30 % and 60 % and none; writes
# benches/results/spark_holistic.json.
spark-holistic: wheel java
	cd benches && ../$(BIN)/python spark_holistic.py

# explain_skew's verdicts and predicted hottest tasks against Spark's final plans, on every
# workload of the three benchmarks above, 10^7 rows, hot key 30 %; writes
# benches/results/spark_explain_skew.json.
spark-explain-skew: wheel java
	cd benches && ../$(BIN)/python spark_explain_skew.py --share 0.3 0.6

# stream_aggregate against Spark's own streaming aggregation and an identity routing step,
# on a file source of 10^7 rows in 100 files whose distinct keys keep growing; writes
# benches/results/spark_streaming.json.
spark-streaming: wheel java
	cd benches && ../$(BIN)/python spark_streaming.py

clean:
	rm -rf $(VENV) $(RELEASE_VENV) $(SDIST_VENV) $(DIST_DIR) site target fuzz/target
