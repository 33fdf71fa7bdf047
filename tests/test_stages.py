"""tools/stages.py, which runs ``make test``: its shards of test modules, its reading of
pytest's JUnit files, its stages' order and failures, and its table."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("stages", ROOT / "tools" / "stages.py")
assert _spec is not None and _spec.loader is not None
stages = importlib.util.module_from_spec(_spec)
sys.modules["stages"] = stages
_spec.loader.exec_module(stages)


def test_shards_place_the_heaviest_modules_first_on_the_least_loaded_process():
    seconds = {"a": 100.0, "b": 90.0, "c": 60.0, "d": 40.0, "e": 30.0, "f": 5.0}
    placed = stages.shards(list(seconds), seconds, 2)
    assert placed == [["a", "d", "e"], ["b", "c", "f"]]
    loads = [sum(seconds[m] for m in shard) for shard in placed]
    assert loads == [170.0, 155.0]
    # Each process runs its modules heaviest first; a module not measured yet counts as
    # UNMEASURED_MODULE_SECONDS; no process is left empty or made up.
    assert stages.shards(["x", "a"], seconds, 3) == [["a"], ["x"]]
    assert stages.shards(["a", "b"], seconds, 1) == [["a", "b"]]


def test_every_test_module_is_in_one_shard_and_the_spark_ones_are_known():
    modules = stages.test_modules()
    placed = stages.shards(modules, stages.measured_seconds(), 3)
    assert sorted(m for shard in placed for m in shard) == modules
    without = stages.test_modules(without_spark=True)
    assert "tests/test_spark_join.py" in modules and "tests/test_spark_join.py" not in without
    assert "tests/test_docs_code.py" not in without and "tests/test_groupers.py" in without
    # The committed seconds name modules that exist.
    assert set(stages.measured_seconds()) <= set(modules)


def test_module_seconds_and_counts_come_from_pytest_s_junit_files(tmp_path):
    # A project of its own: its rootdir (and so the JUnit class names) is tmp_path, not ours.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_one.py").write_text(
        "import time, pytest\n"
        "def test_a(): time.sleep(0.2)\n"
        "def test_b(): assert False\n"
        "@pytest.mark.skipif(True, reason='counted as skipped')\n"
        "def test_c(): pass\n"
        "class TestClass:\n"
        "    def test_e(self): pass\n"
    )
    (tmp_path / "tests" / "test_two.py").write_text("def test_d(): pass\n")
    xml = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", "tests"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    durations = stages.module_durations([xml, tmp_path / "missing.xml"])
    assert set(durations) == {"tests/test_one.py", "tests/test_two.py"}
    seconds, tests = durations["tests/test_one.py"]
    assert tests == 4 and seconds >= 0.2
    assert stages.junit_counts([xml]) == {"tests": 5, "failures": 1, "errors": 0, "skipped": 1}


def test_measured_seconds_reads_its_file_and_skips_comments(tmp_path):
    path = tmp_path / "seconds.tsv"
    path.write_text("# a comment\nmodule\tseconds\ttests\ntests/test_a.py\t12.5\t3\n")
    assert stages.measured_seconds(path) == {"tests/test_a.py": 12.5}
    assert stages.measured_seconds(tmp_path / "none.tsv") == {}


def test_stages_wait_for_what_they_need_run_to_the_end_and_skip_what_a_failure_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(stages, "LOGS", tmp_path / "logs")
    monkeypatch.setattr(stages, "ROOT", tmp_path)
    order = tmp_path / "order"
    py = sys.executable

    def step(name: str, code: int = 0) -> list[str]:
        return [py, "-c", f"open({str(order)!r}, 'a').write('{name} '); raise SystemExit({code})"]

    plan = [
        stages.Stage("first", step("first")),
        stages.Stage("broken", step("broken", 3), after=("first",), background=True),
        stages.Stage("after-broken", step("after-broken"), after=("broken",)),
        stages.Stage("after-first", step("after-first"), after=("first",)),
    ]
    runner = stages.Runner(plan, origin=0.0)
    assert runner.run() is False
    ran = order.read_text().split()
    assert ran[0] == "first" and sorted(ran[1:]) == ["after-first", "broken"]
    assert [s.status for s in plan] == ["passed", "failed", "skipped", "passed"]
    assert all(s.wall is not None and s.cpu is not None for s in plan if s.status != "skipped")
    table = stages.report(
        plan, total=45 * 60.0, machine_cpu=100.0, jvms={"servers": 3, "clusters": 2, "workers": 4, "executors": 7}
    )
    assert "warning: over the 40-minute budget by 5:00" in table
    assert "3 Connect servers, 2 standalone clusters (4 workers), 7 executors" in table
    assert "broken" in table and "skipped" in table
    assert "warning" not in stages.report(plan, total=39 * 60.0, machine_cpu=1.0, jvms=None)
    assert "orphaned" not in table
    orphans = stages.report(plan, total=39 * 60.0, machine_cpu=1.0, jvms=None, orphan_cpu=12.4)
    assert "processes orphaned by their stage's processes, reaped here: 12 CPU s" in orphans
    # make check's budget, and no CI limit beside it; a run of test modules alone has none.
    checked = stages.report(plan, total=6 * 60.0, machine_cpu=1.0, jvms=None, budget=5 * 60, ci_limit=False)
    assert "budget 5:00" in checked and "CI's limit" not in checked
    assert "warning: over the 5-minute budget by 1:00" in checked
    unbudgeted = stages.report(plan, total=99 * 60.0, machine_cpu=1.0, jvms=None, budget=None)
    assert "budget" not in unbudgeted and "warning" not in unbudgeted
    # A failed stage's log closes the output, where a CI log cut to its last lines shows it.
    (tmp_path / "logs" / "broken.log").write_text("".join(f"line {i}\n" for i in range(100)))
    tail = stages.failed_log_tail("broken").splitlines()
    assert tail[0] == f"--- broken: the last 40 lines of {Path('logs') / 'broken.log'}"
    assert tail[1:] == [f"    line {i}" for i in range(60, 100)]
    assert "never started" in stages.failed_log_tail("after-broken")


_FORKING_JVM = """
import os, sys, time
child = os.fork()  # as a JVM forks to start a subprocess: the child has its command line
if child == 0:
    time.sleep(1.5)
    os._exit(0)
os.waitpid(child, 0)
time.sleep(0.5)
"""


def test_the_jvm_counter_counts_a_jvm_once_and_not_the_children_it_forks():
    # A stand-in JVM: its command line holds "java" and a class name of its own (the Spark
    # servers of the other test processes run beside this one, and would be counted too).
    marker = f"org.example.StandIn{uuid.uuid4().hex}"
    counter = stages.JvmCounter(period=0.1, kinds={marker.encode(): "servers"})
    counter.start()
    try:
        subprocess.run(["java", "-c", _FORKING_JVM, marker], executable=sys.executable, check=True, timeout=30)
    finally:
        counted = counter.stop()
    assert counted == {"servers": 1}


def test_the_tests_path_holds_no_rust_toolchain():
    path = stages.path_without_rust()
    for tool in ("cargo", "rustc", "rustup"):
        assert __import__("shutil").which(tool, path=path) is None


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_pytest_stages_split_the_modules_they_are_given(count):
    modules = stages.test_modules(without_spark=True)
    planned = stages.pytest_stages(modules, count, python=Path(sys.executable))
    given = [arg for stage in planned for arg in stage.command if arg.startswith("tests/")]
    assert sorted(given) == sorted(modules) and len(planned) == min(count, len(modules))
    assert all("--junitxml=" in " ".join(stage.command) for stage in planned)
