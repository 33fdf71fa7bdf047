# The two commands of the README:
#   make run   sets everything up, builds the release wheel and runs the main job;
#   make test  sets everything up, builds the release wheel and the sdist, and runs every
#              test against them, each installed as a user would.
# Both work from a fresh clone: the virtualenvs, their packages and the wheel are made here.
# `make test` runs its stages beside one another (tools/stages.py) and ends with a table of
# their times; `make check` is the inner loop of a change (a few minutes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEPS_STAMP := $(VENV)/.requirements-dev.stamp
# Read by the prerequisites of $(DEPS_STAMP), so defined before that rule (make expands a
# rule's prerequisites as it reads them).
BUILD_TOOLS_STAMP := $(VENV)/.build-tools.stamp
DIST_DIR := dist
# What the release wheel and the sdist are built from: a change rebuilds them, and nothing
# else does (a second `make` reuses the build).
PACKAGE_SOURCES := $(shell find rust python -type f \( -name '*.rs' -o -name '*.py' -o -name '*.pyi' \
  -o -name py.typed -o -name Cargo.toml \) -not -path '*/__pycache__/*') Cargo.toml Cargo.lock pyproject.toml README.md
DIST_STAMP := $(DIST_DIR)/.built
HOST_TRIPLE := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
WHEEL_STAMP := $(VENV)/.keysplit-wheel.stamp
# Fresh on every `make test`: the release wheel installed as `pip install keysplit[...]`
# would, and the package built from the sdist.
RELEASE_VENV := .venv-release
RELEASE_STAMP := $(RELEASE_VENV)/.ready
SDIST_VENV := .venv-sdist
.PHONY: run test check test-module module-seconds setup build-tools wheel dist release-venv release-venv-deps sdist-venv-deps sdist-test crates docs data java lint stubtest rust-test python-test fuzz-check fuzz-smoke bench spark-vs-native spark-ingest spark-grouped-map spark-skew-join spark-window spark-global-window spark-holistic spark-explain-skew spark-optimize spark-write spark-asof spark-streaming clean

# Debian packages of the real datasets (keysplit.datasets.kjv); the PyPI ones are in
# requirements-dev.txt.
DEBIAN_DATA_PACKAGES := bible-kjv bible-kjv-text

run: data wheel java
	$(BIN)/keysplit run

# Every stage below, the independent ones beside each other and the builds niced beside the
# tests; the table of their times at the end, and in target/timings.tsv.
test:
	$(PYTHON) tools/stages.py test

setup: $(DEPS_STAMP) data java

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(DEPS_STAMP): requirements-dev.txt requirements-test.txt | $(BUILD_TOOLS_STAMP)
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

# What the release build needs, first and alone, so that it can start before the rest of
# the development packages are installed.
build-tools: $(BUILD_TOOLS_STAMP)
$(BUILD_TOOLS_STAMP): requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	grep -E '^(maturin|ziglang|auditwheel|twine)==' requirements-dev.txt > $(VENV)/build-tools.txt
	$(BIN)/python -m pip install --quiet -r $(VENV)/build-tools.txt
	touch $@

# The development virtualenv runs the release wheel too: one build, one binary.
wheel: $(WHEEL_STAMP)
$(WHEEL_STAMP): $(DIST_STAMP) $(DEPS_STAMP)
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall $(DIST_DIR)/keysplit-*.whl
	$(BIN)/python -m pip check
	touch $@

# Release artefacts, as users install them: an abi3 wheel for glibc 2.17 and later
# (manylinux2014, linked with zig from PyPI's ziglang, so no old toolchain is needed) and an
# sdist; auditwheel confirms the wheel's tag and twine both files' metadata.
dist: $(DIST_STAMP)
$(DIST_STAMP): $(PACKAGE_SOURCES) $(BUILD_TOOLS_STAMP)
	rm -rf $(DIST_DIR)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/maturin build --release --zig --compatibility manylinux2014 --out $(DIST_DIR)
	$(BIN)/maturin sdist --out $(DIST_DIR)
	$(BIN)/auditwheel show $(DIST_DIR)/keysplit-*.whl | tr -s ' \n' ' ' | grep -q '"manylinux_2_17_x86_64"'
	$(BIN)/twine check --strict $(DIST_DIR)/*
	touch $@

# dist/'s wheel with every extra, in a new virtualenv, resolved from its own metadata. The
# virtualenv and the test suite's packages come first, beside the build of the wheel.
RELEASE_DEPS_STAMP := $(RELEASE_VENV)/.requirements-test.stamp
release-venv: $(RELEASE_STAMP)
$(RELEASE_STAMP): $(DIST_STAMP) $(RELEASE_DEPS_STAMP)
	$(RELEASE_VENV)/bin/python -m pip install --quiet --force-reinstall --no-deps --only-binary keysplit \
	  "$$(ls $(DIST_DIR)/keysplit-*.whl)"
	$(RELEASE_VENV)/bin/python -m pip install --quiet --only-binary keysplit \
	  "$$(ls $(DIST_DIR)/keysplit-*.whl)[arrow,numpy,datasets,plot,progress,spark]"
	$(RELEASE_VENV)/bin/python -m pip check
	touch $@

release-venv-deps: $(RELEASE_DEPS_STAMP)
$(RELEASE_DEPS_STAMP): requirements-test.txt
	rm -rf $(RELEASE_VENV)
	$(PYTHON) -m venv $(RELEASE_VENV)
	$(RELEASE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RELEASE_VENV)/bin/python -m pip install --quiet -r requirements-test.txt
	touch $@

# The sdist, built into a wheel from its own contents alone (unpacked, away from this tree)
# by maturin as dist's wheel is built, then installed in a fresh virtualenv with the release
# smoke test and the routing and snapshot, input and sketch tests run on what it built
# (without the optional Spark and plot packages). Cargo builds it in the release wheel's
# build directory: it finds each source file that build read in the sdist, unchanged, and
# compiles nothing twice (one missing from the sdist would be compiled for, and fail: 11 s
# where pip's build from nothing took 420 CPU-seconds). The release workflow builds the
# sdist from nothing with pip, as a user without a wheel would.
# The virtualenv and its packages (the pinned ones: keysplit's one dependency, Polars, and
# what those tests import) come first, beside the builds: `make test` runs sdist-test
# niced beside the Spark tests, where a download crawls (pip at nice 19 took 4 minutes to
# upgrade itself, and CI's failed); what is installed then comes from no index.
SDIST_BUILD := target/sdist
SDIST_DEPS_STAMP := $(SDIST_VENV)/.requirements.stamp
sdist-venv-deps: $(SDIST_DEPS_STAMP)
$(SDIST_DEPS_STAMP): requirements-test.txt
	rm -rf $(SDIST_VENV)
	$(PYTHON) -m venv $(SDIST_VENV)
	$(SDIST_VENV)/bin/python -m pip install --quiet --upgrade pip
	grep -E '^(polars|pytest|hypothesis|xxhash|numpy|pyarrow|datasketches)==' requirements-test.txt > $(SDIST_VENV)/pins.txt
	$(SDIST_VENV)/bin/python -m pip install --quiet -r $(SDIST_VENV)/pins.txt
	touch $@

sdist-test: $(DIST_STAMP) $(SDIST_DEPS_STAMP)
	rm -rf $(SDIST_BUILD) && mkdir -p $(SDIST_BUILD)
	tar -xzf $(DIST_DIR)/keysplit-*.tar.gz -C $(SDIST_BUILD)
	cd $(SDIST_BUILD)/keysplit-*/ && CARGO_TARGET_DIR="$(abspath target)" PATH="$(abspath $(BIN)):$$PATH" \
	  $(abspath $(BIN))/maturin build --release --zig --compatibility manylinux2014 --out $(abspath $(SDIST_BUILD))/wheel
	$(SDIST_VENV)/bin/python -m pip install --quiet --no-index --no-deps --force-reinstall $(SDIST_BUILD)/wheel/keysplit-*.whl
	$(SDIST_VENV)/bin/python -m pip check
	$(SDIST_VENV)/bin/python tests/release_smoke.py
	$(SDIST_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_choices.py tests/test_snapshot.py \
	  tests/test_groupers.py tests/test_inputs.py tests/test_sketches.py tests/test_release.py

# The documentation site, into site/ (open site/index.html): the guides of docs/, the API
# reference from the installed wheel's docstrings, the CLI reference from its parser; every
# warning, a broken link or cross-reference included, fails the build.
docs: $(WHEEL_STAMP)
	rm -rf site
	$(BIN)/sphinx-build -E -W --keep-going -n -q -b html -d target/doctrees docs site

lint: $(DEPS_STAMP)
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc -p keysplit-core --no-deps --locked
	$(BIN)/ruff check python tests benches tools docs/conf.py docs/_ext
	$(BIN)/ruff format --check python tests benches tools docs/conf.py docs/_ext
	$(BIN)/mypy
	$(BIN)/actionlint -shellcheck $(BIN)/shellcheck

# The type stub python/keysplit/_core.pyi against the compiled module it describes, so
# that the two cannot drift: it needs the wheel installed, which lint (run first, on the
# sources alone) does not.
stubtest: $(WHEEL_STAMP)
	$(BIN)/python -m mypy.stubtest keysplit._core --mypy-config-file pyproject.toml

# keysplit-core's tests; keysplit-py holds only bindings, tested through the wheel by pytest.
rust-test:
	cargo test -p keysplit-core --locked

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

# The test modules against the release wheel in its fresh virtualenv, with no Rust toolchain
# on PATH, in a few pytest processes (shards) that each start their own Spark server: the
# heaviest modules first, placed by their measured seconds (tests/module_seconds.tsv).
python-test: data java $(RELEASE_STAMP)
	$(PYTHON) tools/stages.py pytest

# One test module on its own Spark server, against the release wheel of the current sources
# (rebuilt if they changed): make test-module MODULE=tests/test_spark_join.py ARGS="-k words"
MODULE ?= tests/test_spark.py
test-module: data java $(RELEASE_STAMP)
	$(PYTHON) tools/stages.py pytest --shards 1 --modules $(MODULE) -- $(ARGS)

# The inner loop of a change, a few minutes on a warm machine: lint, the Rust tests and an
# incremental build of the wheel into the development virtualenv beside each other, then the
# test modules that start no Spark server, in two processes (tools/stages.py check).
check: $(DEPS_STAMP)
	$(PYTHON) tools/stages.py check

# tests/module_seconds.tsv from the last run's JUnit files (target/pytest/modules.tsv).
module-seconds:
	{ echo "# Seconds per test module, measured by make test; tools/stages.py places the modules"; \
	  echo "# over its pytest processes by them. make module-seconds refreshes this file."; \
	  cat target/pytest/modules.tsv; } > tests/module_seconds.tsv

# The crates of the workspace and of the fuzz targets (a few seconds): `make test` fetches
# them at full priority before its niced cargo stages start, as it does the pip packages.
crates:
	cargo fetch --locked
	cargo fetch --locked --manifest-path fuzz/Cargo.toml

# Keeps the fuzz targets compiling and lint-clean on the stable toolchain;
# `fuzz/README.md` says how to run them.
fuzz-check:
	cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --no-default-features --locked -- -D warnings

# A short libFuzzer run of every target, coverage-guided but without a sanitizer, so that
# it needs only the stable toolchain; `fuzz/README.md` has the long runs (cargo fuzz, on
# nightly). The targets are built as `cargo fuzz run --sanitizer none` builds them (the
# rustc flags of cargo-fuzz 0.13: optimized, debug assertions on, sanitizer coverage), all
# in one cargo call and without compiling cargo-fuzz itself.
FUZZ_TARGETS := route_batch hash snapshot sketches
FUZZ_SECONDS ?= 15
FUZZ_RUSTFLAGS := -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
  -Cllvm-args=-sanitizer-coverage-stack-depth -Cdebug-assertions -Ccodegen-units=1
fuzz-smoke:
	RUSTFLAGS="$(FUZZ_RUSTFLAGS)" cargo build --manifest-path fuzz/Cargo.toml --target $(HOST_TRIPLE) --release \
	  --config 'profile.release.debug="line-tables-only"' --bins --locked
	for target in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/corpus/$$target fuzz/artifacts/$$target && \
	  fuzz/target/$(HOST_TRIPLE)/release/$$target -artifact_prefix=fuzz/artifacts/$$target/ \
	    -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=30 fuzz/corpus/$$target || exit 1; \
	done

# Throughput against Polars and NumPy, call overhead and copies, multi-source speed-up;
# then the tables of docs/performance.md. `cargo bench -p keysplit-bench` runs the Rust ones.
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

# Window functions with no partitionBy against Spark's one-task window, 10^7 and 10^6 rows, then
# 5 x 10^7 for the ties, the row numbers and the offsets (Spark's one task spills there), and every
# family at 10^7 on cluster:2; writes benches/results/spark_global_window.json, _1e6.json, _5e7.json
# and _cluster.json.
spark-global-window: wheel java
	cd benches && ../$(BIN)/python spark_window.py --whole-frame --rows 1e7
	cd benches && ../$(BIN)/python spark_window.py --whole-frame --rows 1e6 --guarded --output results/spark_global_window_1e6.json
	cd benches && ../$(BIN)/python spark_window.py --whole-frame --rows 5e7 --families ties "row numbers" offsets \
		--output results/spark_global_window_5e7.json
	cd benches && ../$(BIN)/python spark_window.py --whole-frame --rows 1e7 --setup cluster

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

# optimize(query) against Spark's own plan of 15 multi-operator queries (joins, join -> median,
# window -> percentile, TPC-H with Zipf keys), skew none / mild / strong, 10^7 rows; writes
# benches/results/spark_optimize.json.
spark-optimize: wheel java
	cd benches && ../$(BIN)/python spark_optimize.py

# Partitioned writes with a hot day (none, 30 %, 60 %; the hot day's rows in every input file
# or in one) against repartition(col), REBALANCE(col) and a plain partitionBy write, 10^7 rows
# then 5 x 10^7; writes benches/results/spark_write.json and spark_write_5e7.json.
spark-write: wheel java
	cd benches && ../$(BIN)/python spark_write.py --rows 1e7
	cd benches && ../$(BIN)/python spark_write.py --rows 5e7 --share 0.6 --target-mib 16 --repeats 1 \
		--output results/spark_write_5e7.json

# As-of joins (trades and quotes, one series holding 40 % and a control, each direction with and
# without a tolerance) against the window over the union of both sides and
# pyspark.pandas.merge_asof, 10^7 trades and 2 x 10^6 quotes, local[2] then cluster:2; writes
# benches/results/spark_asof.json and spark_asof_cluster.json.
spark-asof: wheel java
	cd benches && ../$(BIN)/python spark_asof.py
	cd benches && ../$(BIN)/python spark_asof.py --setup cluster --pandas-sizes

# stream_aggregate against Spark's own streaming aggregation and an identity routing step,
# on a file source of 10^7 rows in 100 files whose distinct keys keep growing; writes
# benches/results/spark_streaming.json.
spark-streaming: wheel java
	cd benches && ../$(BIN)/python spark_streaming.py

clean:
	rm -rf $(VENV) $(RELEASE_VENV) $(SDIST_VENV) $(DIST_DIR) site target fuzz/target
