#!/usr/bin/env python3
"""``make test`` as stages that run beside one another where they do not depend on each
other, each timed, with the table of their times printed at the end.

The test modules run in a few pytest processes (shards), each with its own Spark server,
the heaviest modules first and placed by their measured seconds (``tests/module_seconds.tsv``,
refreshed from a run by ``make module-seconds``). The builds and linters are off that
critical path: they run niced, so that the tests get the cores first and the builds fill
the time the tests spend waiting on JVMs. Every stage runs to its end even when another
fails (as ``make -k``), so one run reports every failure; the exit status is 1 if any failed.

What a run leaves in ``target/``: ``timings.tsv`` (a row per stage: wall and CPU seconds,
CPU/wall, status), ``logs/<stage>.log`` (each stage's output), ``pytest/<shard>.xml``
(JUnit) and ``pytest/modules.tsv`` (seconds per test module). The total is compared with a
40-minute budget and CI's 90-minute limit: over the budget is a warning, never a failure.

Only the standard library: it runs before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import heapq
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "target"
LOGS = TARGET / "logs"
PYTEST_DIR = TARGET / "pytest"
TIMINGS = TARGET / "timings.tsv"
MODULE_SECONDS = ROOT / "tests" / "module_seconds.tsv"
BUDGET_SECONDS = 40 * 60
CI_LIMIT_SECONDS = 90 * 60
# make check's: the inner loop of a change.
CHECK_BUDGET_SECONDS = 5 * 60
RUST_TOOLS = ("cargo", "rustc", "rustup")
RELEASE_PYTHON = ROOT / ".venv-release" / "bin" / "python"
# Off the critical path: at nice 19 a stage weighs 1/68 of one at nice 0 for the scheduler.
BACKGROUND_NICE = 19
# A module not yet in tests/module_seconds.tsv counts as this many seconds.
UNMEASURED_MODULE_SECONDS = 60.0
HEARTBEAT_SECONDS = 300.0
POLL_SECONDS = 0.2
DEFAULT_SHARDS = 3
CHECK_SHARDS = 2


@dataclasses.dataclass
class Stage:
    """One command of the run. ``after``: the stages it needs to have passed first;
    ``background``: off the critical path, run niced."""

    name: str
    command: list[str]
    after: tuple[str, ...] = ()
    background: bool = False
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    # Filled in as it runs.
    start: float | None = None
    wall: float | None = None
    cpu: float | None = None
    status: str = "pending"

    @property
    def cpu_per_wall(self) -> float | None:
        if self.wall is None or self.cpu is None or self.wall <= 0:
            return None
        return self.cpu / self.wall


def make(*targets: str) -> list[str]:
    return ["make", "--no-print-directory", *targets]


def path_without_rust() -> str:
    """PATH less the directories that hold a Rust toolchain: the tests run against the wheel
    where nothing could compile it."""
    return os.pathsep.join(
        directory
        for directory in os.environ.get("PATH", "").split(os.pathsep)
        if directory and not any(os.path.exists(os.path.join(directory, tool)) for tool in RUST_TOOLS)
    )


# ---------------------------------------------------------------------------------------
# The test modules and their shards


def test_modules(*, without_spark: bool = False) -> list[str]:
    """The test modules; ``without_spark``: only those that start no Spark server."""
    modules = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py"))
    return [m for m in modules if not (without_spark and starts_spark(m))]


def starts_spark(module: str) -> bool:
    name = Path(module).name
    return name.startswith("test_spark") or name in ("test_docs_code.py", "test_shuffle_bytes.py")


def measured_seconds(path: Path = MODULE_SECONDS) -> dict[str, float]:
    """Seconds per test module, from a ``module<TAB>seconds`` file (``#`` lines are comments)."""
    seconds: dict[str, float] = {}
    if not path.exists():
        return seconds
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            module, value = line.split("\t")[:2]
            if module != "module":
                seconds[module] = float(value)
    return seconds


def shards(modules: Sequence[str], seconds: dict[str, float], count: int) -> list[list[str]]:
    """Longest processing time first: each module, heaviest first, to the shard with the
    fewest seconds so far; each shard runs its modules heaviest first."""
    weight = {module: seconds.get(module, UNMEASURED_MODULE_SECONDS) for module in modules}
    loads: list[tuple[float, int]] = [(0.0, index) for index in range(count)]
    placed: list[list[str]] = [[] for _ in range(count)]
    for module in sorted(modules, key=lambda m: (-weight[m], m)):
        load, index = heapq.heappop(loads)
        placed[index].append(module)
        heapq.heappush(loads, (load + weight[module], index))
    return [shard for shard in placed if shard]


def pytest_stages(
    modules: Sequence[str],
    count: int,
    *,
    python: Path = RELEASE_PYTHON,
    after: tuple[str, ...] = (),
    extra: Sequence[str] = (),
) -> list[Stage]:
    """``modules`` as ``count`` pytest processes of ``python``, each running its modules in
    the order given, with no Rust toolchain on PATH."""
    path = path_without_rust()
    for tool in RUST_TOOLS:
        if (found := shutil.which(tool, path=path)) is not None:
            raise SystemExit(f"stages: {tool} is still on the tests' PATH ({found})")
    stages = []
    for index, placed in enumerate(shards(modules, measured_seconds(), count), start=1):
        name = f"pytest-{index}"
        command = [
            str(python),
            "-m",
            "pytest",
            f"--basetemp={PYTEST_DIR / name}",
            f"--junitxml={PYTEST_DIR / (name + '.xml')}",
            "-p",
            "no:cacheprovider",
            *extra,
            *placed,
        ]
        stages.append(Stage(name, command, after=after, env={"PATH": path}))
    return stages


def module_durations(xml_files: Iterable[Path]) -> dict[str, tuple[float, int]]:
    """(seconds, tests) per test module, from pytest's JUnit files."""
    found: dict[str, tuple[float, int]] = {}
    for xml_file in xml_files:
        if not xml_file.exists():
            continue
        for case in ElementTree.parse(xml_file).getroot().iter("testcase"):
            # "tests.test_x" or "tests.test_x.TestClass": the module is the part up to test_x.
            parts = case.get("classname", "").split(".")
            modules = [i for i, part in enumerate(parts) if part.startswith("test_")]
            last = modules[-1] if modules else len(parts) - 1
            module = "/".join(parts[: last + 1]) + ".py"
            seconds, tests = found.get(module, (0.0, 0))
            found[module] = (seconds + float(case.get("time", 0.0)), tests + 1)
    return found


def junit_counts(xml_files: Iterable[Path]) -> dict[str, int]:
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for xml_file in xml_files:
        if not xml_file.exists():
            continue
        for suite in ElementTree.parse(xml_file).getroot().iter("testsuite"):
            for key in totals:
                totals[key] += int(suite.get(key, 0))
    return totals


# ---------------------------------------------------------------------------------------
# Spark's JVMs, counted by watching the process table


SPARK_JVM_KINDS = {
    b"org.apache.spark.sql.connect.service.SparkConnectServer": "servers",
    b"org.apache.spark.deploy.master.Master": "clusters",
    b"org.apache.spark.deploy.worker.Worker": "workers",
    b"org.apache.spark.executor.CoarseGrainedExecutorBackend": "executors",
}


class JvmCounter(threading.Thread):
    """Counts the Spark JVMs (servers, cluster masters, workers, executors) started while it
    runs, by sampling /proc: a JVM lives for seconds at least, far longer than the period.

    A JVM starts each subprocess (a Python worker, an executor) by forking a child that
    carries the JVM's command line until it executes the program: that child is not a JVM
    of its own, and is told apart by its parent's having the same command line."""

    def __init__(self, period: float = 0.5, kinds: dict[bytes, str] = SPARK_JVM_KINDS) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.kinds = kinds
        self.seen: dict[str, set[tuple[int, str]]] = {kind: set() for kind in kinds.values()}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.period):
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    command = cmdline.read_bytes()
                    # spark-class first runs a launcher JVM that only prints the real command.
                    if b"java" not in command or b"org.apache.spark.launcher.Main" in command:
                        continue
                    fields = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
                    start, parent = fields[19], fields[1]
                    if Path(f"/proc/{parent}/cmdline").read_bytes() == command:
                        continue
                except (OSError, IndexError):
                    continue
                for marker, kind in self.kinds.items():
                    if marker in command:
                        self.seen[kind].add((int(cmdline.parent.name), start))

    def stop(self) -> dict[str, int]:
        self._stop_event.set()
        self.join()
        return {kind: len(pids) for kind, pids in self.seen.items()}


# ---------------------------------------------------------------------------------------
# Running the stages


def become_subreaper() -> None:
    """Orphans of this process's descendants (a JVM whose parent was killed) become its
    children, to be reaped here rather than by init."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def nice_autogroup(pid: int, nice: int) -> None:
    """Where the kernel groups each session for the scheduler (autogroup), a process's nice
    value only weighs against its own session's processes, and every session (each stage,
    each Spark server) gets an equal share: so the session of ``pid`` gets the nice value."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")


def machine_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (every core)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Runner:
    def __init__(self, stages: list[Stage], *, origin: float, subreaper: bool = False) -> None:
        names = [stage.name for stage in stages]
        assert len(set(names)) == len(names), names
        for stage in stages:
            unknown = set(stage.after) - set(names)
            assert not unknown, f"{stage.name} waits for unknown stages {unknown}"
        self.stages = stages
        self.subreaper = subreaper
        if subreaper:
            become_subreaper()
        self.running: dict[int, tuple[Stage, subprocess.Popen[bytes]]] = {}
        #: CPU seconds of the orphans reaped here (a subreaper's), in no stage's figure.
        self.orphan_cpu = 0.0
        self.origin = origin

    def _ready(self, stage: Stage) -> bool | None:
        """True: start it; False: not yet; None: never (a stage it needs failed)."""
        status = {s.name: s.status for s in self.stages}
        if any(status[name] in ("failed", "skipped") for name in stage.after):
            return None
        return all(status[name] == "passed" for name in stage.after)

    def _start(self, stage: Stage) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        log = open(log_of(stage.name), "wb")  # noqa: SIM115 - closed when it ends
        nice = BACKGROUND_NICE if stage.background else 0
        command = ["nice", "-n", str(nice), *stage.command] if nice else stage.command
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **stage.env},
            start_new_session=True,
        )
        if nice:
            nice_autogroup(process.pid, nice)
        log.close()
        stage.start = time.monotonic() - self.origin
        stage.status = "running"
        self.running[process.pid] = (stage, process)
        niced = f" (nice {nice})" if nice else ""
        print(f"[{self._clock()}] {stage.name}: started{niced}: {shlex.join(stage.command)}", flush=True)

    def _clock(self) -> str:
        elapsed = int(time.monotonic() - self.origin)
        return f"{elapsed // 60:3d}:{elapsed % 60:02d}"

    def _finish(self, pid: int, code: int, usage: resource.struct_rusage) -> None:
        stage, process = self.running.pop(pid)
        process.returncode = code
        assert stage.start is not None
        stage.wall = time.monotonic() - self.origin - stage.start
        stage.cpu = usage.ru_utime + usage.ru_stime
        stage.status = "passed" if code == 0 else "failed"
        log = log_of(stage.name).read_text(errors="replace").splitlines()
        print(
            f"[{self._clock()}] {stage.name}: {stage.status} in {stage.wall:.0f} s "
            f"(CPU {stage.cpu:.0f} s; log {log_of(stage.name).relative_to(ROOT)})",
            flush=True,
        )
        shown = log if code != 0 else log[-12:]
        for line in shown:
            print(f"    {line}")
        sys.stdout.flush()

    def run(self) -> bool:
        last_heartbeat = time.monotonic()
        try:
            while True:
                for stage in self.stages:
                    if stage.status != "pending":
                        continue
                    ready = self._ready(stage)
                    if ready is None:
                        stage.status = "skipped"
                        print(f"[{self._clock()}] {stage.name}: skipped (a stage it needs failed)", flush=True)
                    elif ready:
                        self._start(stage)
                if not self.running:
                    break
                time.sleep(POLL_SECONDS)
                self._reap()
                if time.monotonic() - last_heartbeat > HEARTBEAT_SECONDS:
                    last_heartbeat = time.monotonic()
                    names = ", ".join(stage.name for stage, _ in self.running.values())
                    print(f"[{self._clock()}] still running: {names}", flush=True)
        except KeyboardInterrupt:
            self._stop_all()
            raise
        return all(stage.status == "passed" for stage in self.stages)

    def _reap(self) -> None:
        """Finishes the stages that ended. As the subreaper of its stages' orphans (a JVM
        whose parent was killed), it reaps those too; otherwise it waits for nothing but its
        own stages (a test may run it in a process with children of its own)."""
        if self.subreaper:
            while True:
                try:
                    pid, wait_status, usage = os.wait4(-1, os.WNOHANG)
                except ChildProcessError:
                    return
                if pid == 0:
                    return
                if pid in self.running:
                    self._finish(pid, os.waitstatus_to_exitcode(wait_status), usage)
                else:
                    self.orphan_cpu += usage.ru_utime + usage.ru_stime
        for pid in list(self.running):
            pid_ended, wait_status, usage = os.wait4(pid, os.WNOHANG)
            if pid_ended:
                self._finish(pid, os.waitstatus_to_exitcode(wait_status), usage)

    def _stop_all(self) -> None:
        for stage, process in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            stage.status = "failed"
        deadline = time.monotonic() + 30
        for _stage, process in self.running.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        self.running.clear()


# ---------------------------------------------------------------------------------------
# The report


def minutes(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def report(
    stages: list[Stage],
    total: float,
    machine_cpu: float,
    jvms: dict[str, int] | None,
    orphan_cpu: float = 0.0,
    budget: int | None = BUDGET_SECONDS,
    ci_limit: bool = True,
) -> str:
    """The table of the stages and the totals; ``budget``: the run's (None: none), with CI's
    limit beside it if ``ci_limit``."""
    rows = [("stage", "start", "wall", "CPU", "CPU/wall", "status")]
    for stage in stages:
        if stage.wall is None:
            rows.append((stage.name, "", "", "", "", stage.status))
            continue
        assert stage.start is not None and stage.cpu is not None
        rows.append(
            (
                stage.name,
                minutes(stage.start),
                f"{stage.wall:.0f} s",
                f"{stage.cpu:.0f} s",
                "" if stage.cpu_per_wall is None else f"{stage.cpu_per_wall:.2f}",
                stage.status,
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    cores = os.cpu_count() or 1
    lines.append(
        f"total: {minutes(total)} wall ({total:.0f} s), the machine's {cores} cores busy "
        f"{machine_cpu:.0f} CPU s ({machine_cpu / (cores * total):.0%})"
        + (f"; budget {minutes(budget)}" if budget is not None else "")
        + (f", CI's limit {minutes(CI_LIMIT_SECONDS)}" if budget is not None and ci_limit else "")
    )
    if orphan_cpu:
        # A process whose parent died first (a Python worker of a killed JVM) is reaped here,
        # and its CPU is in no stage's figure.
        lines.append(f"processes orphaned by their stage's processes, reaped here: {orphan_cpu:.0f} CPU s")
    if budget is not None and total > budget:
        lines.append(f"warning: over the {budget // 60}-minute budget by {minutes(total - budget)}")
    if jvms is not None:
        lines.append(
            "Spark JVMs started: {servers} Connect servers, {clusters} standalone clusters "
            "({workers} workers), {executors} executors".format(**jvms)
        )
    return "\n".join(lines)


def write_timings(stages: list[Stage]) -> None:
    TARGET.mkdir(exist_ok=True)
    lines = ["stage\tstart_s\twall_s\tcpu_s\tcpu_per_wall\tstatus"]
    for stage in stages:
        if stage.wall is None or stage.start is None or stage.cpu is None:
            lines.append(f"{stage.name}\t\t\t\t\t{stage.status}")
        else:
            ratio = stage.cpu_per_wall or 0.0
            lines.append(
                f"{stage.name}\t{stage.start:.1f}\t{stage.wall:.1f}\t{stage.cpu:.1f}\t{ratio:.2f}\t{stage.status}"
            )
    TIMINGS.write_text("\n".join(lines) + "\n")


def write_module_seconds(xml_files: list[Path]) -> str:
    """target/pytest/modules.tsv from the JUnit files; returns the heaviest modules' lines."""
    durations = module_durations(xml_files)
    ordered = sorted(durations.items(), key=lambda item: -item[1][0])
    lines = ["module\tseconds\ttests"] + [f"{module}\t{s:.1f}\t{n}" for module, (s, n) in ordered]
    PYTEST_DIR.mkdir(parents=True, exist_ok=True)
    (PYTEST_DIR / "modules.tsv").write_text("\n".join(lines) + "\n")
    return "\n".join(f"  {s:7.1f} s  {n:4d} tests  {module}" for module, (s, n) in ordered[:12])


# ---------------------------------------------------------------------------------------
# The plans


def test_plan(shard_count: int) -> list[Stage]:
    """``make test``: every stage, the builds and linters niced beside the tests. (Cargo
    locks a build directory per profile: the release wheel's, ``target/<host>/release``, is
    none of the linters' or the Rust tests', so none of them holds the tests up.)"""
    return [
        Stage("build-tools", make("build-tools")),
        Stage("setup", make("setup"), after=("build-tools",)),
        Stage("release-venv-deps", make("release-venv-deps")),
        Stage("sdist-venv-deps", make("sdist-venv-deps")),
        Stage("dist", make("dist"), after=("build-tools",)),
        Stage("release-venv", make("release-venv"), after=("dist", "release-venv-deps")),
        *pytest_stages(test_modules(), shard_count, after=("release-venv",)),
        Stage("crates", make("crates")),
        Stage("fuzz", make("fuzz-check", "fuzz-smoke"), after=("crates",), background=True),
        Stage("lint", make("lint", "rust-test"), after=("setup", "crates"), background=True),
        Stage("stubtest-docs", make("stubtest", "docs"), after=("dist", "setup"), background=True),
        Stage("sdist-test", make("sdist-test"), after=("dist", "sdist-venv-deps"), background=True),
    ]


def check_plan() -> list[Stage]:
    """``make check``: the linters, the Rust tests and an incremental build beside each
    other, then the test modules that start no Spark server against the build."""
    return [
        Stage("lint", make("lint")),
        Stage("rust-test", make("rust-test")),
        Stage("wheel", make("wheel")),
        *pytest_stages(
            test_modules(without_spark=True), CHECK_SHARDS, python=ROOT / ".venv" / "bin" / "python", after=("wheel",)
        ),
    ]


def run(stages: list[Stage], budget: int | None = None, *, ci_limit: bool = False) -> int:
    """Runs the stages and prints their table against ``budget`` (None: no budget)."""
    emptied(PYTEST_DIR)
    origin = time.monotonic()
    cpu_before = machine_cpu_seconds()
    jvms = JvmCounter()
    jvms.start()
    runner = Runner(stages, origin=origin, subreaper=True)
    passed = runner.run()
    total = time.monotonic() - origin
    counted = jvms.stop()
    write_timings(stages)
    xml_files = sorted(PYTEST_DIR.glob("pytest-*.xml"))
    if xml_files:
        heaviest = write_module_seconds(xml_files)
        counts = junit_counts(xml_files)
        print(
            f"\ntests: {counts['tests']} run in {len(xml_files)} pytest processes, {counts['failures']} failed, "
            f"{counts['errors']} errors, {counts['skipped']} skipped; the heaviest modules "
            f"({PYTEST_DIR.relative_to(ROOT) / 'modules.tsv'} has them all):\n{heaviest}"
        )
    machine_cpu = machine_cpu_seconds() - cpu_before
    jvms_counted = counted if xml_files else None
    print("\n" + report(stages, total, machine_cpu, jvms_counted, runner.orphan_cpu, budget, ci_limit))
    print(f"(written to {TIMINGS.relative_to(ROOT)})")
    failed = [stage.name for stage in stages if stage.status != "passed"]
    if failed:
        print(f"FAILED: {', '.join(failed)} (their logs are in {LOGS.relative_to(ROOT)}/)")
        # Again at the very end, where a CI log cut to its last lines still shows why.
        for name in failed:
            print(failed_log_tail(name))
    return 0 if passed else 1


FAILED_LOG_LINES = 40


def log_of(name: str) -> Path:
    """Where stage ``name`` writes its output."""
    return LOGS / f"{name}.log"


def failed_log_tail(name: str) -> str:
    path = log_of(name)
    lines = path.read_text(errors="replace").splitlines() if path.exists() else ["(no log: the stage never started)"]
    shown = lines[-FAILED_LOG_LINES:]
    return f"--- {name}: the last {len(shown)} lines of {path.relative_to(ROOT)}\n" + "\n".join(
        f"    {line}" for line in shown
    )


def emptied(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="plan", required=True)
    sub.add_parser("check", help="the stages of make check")
    test = sub.add_parser("test", help="every stage of make test")
    test.add_argument("--shards", type=int, default=DEFAULT_SHARDS, help=f"pytest processes ({DEFAULT_SHARDS})")
    pytest = sub.add_parser("pytest", help="only the test modules, in shards")
    pytest.add_argument("--shards", type=int, default=DEFAULT_SHARDS, help=f"pytest processes ({DEFAULT_SHARDS})")
    pytest.add_argument("--modules", nargs="+", help="these modules only (default: every one)")
    pytest.add_argument("--without-spark", action="store_true", help="only the modules that start no Spark server")
    pytest.add_argument("--python", type=Path, default=RELEASE_PYTHON, help="the interpreter (the release venv's)")
    pytest.add_argument("extra", nargs="*", help="more pytest arguments, after --")
    shown = sub.add_parser("shards", help="which modules each pytest process would run")
    shown.add_argument("--shards", type=int, default=DEFAULT_SHARDS)
    args = parser.parse_args(argv)
    if args.plan == "shards":
        seconds = measured_seconds()
        for index, modules in enumerate(shards(test_modules(), seconds, args.shards), start=1):
            total = sum(seconds.get(m, UNMEASURED_MODULE_SECONDS) for m in modules)
            print(f"pytest-{index} ({total:.0f} s): {' '.join(modules)}")
        return 0
    if args.plan == "test":
        return run(test_plan(args.shards), BUDGET_SECONDS, ci_limit=True)
    if args.plan == "check":
        return run(check_plan(), CHECK_BUDGET_SECONDS)
    modules = args.modules or test_modules(without_spark=args.without_spark)
    return run(pytest_stages(modules, args.shards, python=args.python.absolute(), extra=args.extra))


if __name__ == "__main__":
    sys.exit(main())
