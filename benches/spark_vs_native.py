"""keysplit's two-phase aggregate against Spark's own ``groupBy``, on one DataFrame and session.

**What is compared.** One Spark DataFrame of ``--rows`` rows (int64 ``key``, ``value``,
``user``), read with ``spark.read.parquet`` from ``--files`` Parquet files written once to
a cache directory, aggregated per key with ``count``, ``sum(value)``, ``mean(value)`` and a
sketched distinct count of ``user``, two ways in the same Spark Connect session:

- **native**: ``keysplit.spark.reference(frame, distinct="sketch")``, i.e.
  ``frame.groupBy("key").agg(count, sum, avg, approx_count_distinct)``; Spark combines
  map-side, so only one partial row per (input partition, key) crosses the shuffle;
- **keysplit**: ``keysplit.spark.aggregate(frame, grouper=..., workers=..., report=...)``:
  the frame routed on the executors (one source per input partition), partials per
  (source, worker, key), an exact merge per key (HyperLogLog sketches for the distinct count).

Both end in the same terminal action, ``.toArrow()`` of a Spark DataFrame: the native plan
runs inside it; keysplit's result is already checkpointed on the executors, so its
``.toArrow()`` only fetches it. A wall time is from building the plan to holding the Arrow
table in the client, so keysplit's includes its bookkeeping queries (loads, Γ).

**Distributions.** Zipf 1.5 and Zipf 2.0 (NumPy ``rng.zipf``, truncated to ``--keys``
distinct values by redrawing the draws above it, so no tail mass piles up on one key, then
mapped through a random permutation so that the hot key is not key 0) and uniform over
``--keys`` keys. The files are contiguous slices of the rows; one Spark input partition per
file (``spark.sql.files.openCostInBytes`` is set high so that Spark does not pack files
together), so every run reads the same partitions and keysplit routes ``--files`` sources.

**How.** Per session (the embedded ``local[2]`` server, and a standalone cluster of two
one-core executors on loopback, ``session(master="cluster:2")``, both with the web UI on) one
untimed native and one untimed keysplit run warm up the JVM; then for each (distribution,
grouper, workers) ``--repeats`` pairs of runs, native and keysplit alternated (ABBA order,
so that a drift of the machine hits both alike). Figures are the median run's.

**Spark's task times.** Each plan's SQL executions are the ones Spark's REST status API
(``/api/v1/applications/<app>/sql``) lists after the run began; their jobs give the stages
and each stage's tasks their ``executorRunTime``. Tags cannot do this: keysplit runs its
queries from worker threads, and Spark Connect's tags are per thread. Reported per plan:
the post-shuffle ("final-aggregation") stage of native's ``groupBy``, and of keysplit's
partial aggregation and of its final merge, each as its slowest task over its median task
(the straggler ratio: near 1 when a hot key does not make one task slow). A stage
partitioned by the key alone (native's, and keysplit's final merge) also gives the time and
the shuffle rows read of the task holding the hot key (its partition is Spark's hash of the
key, ``pmod(hash(key), 8)``). Also **computed, not measured**: the makespan of each stage's
tasks on 8 and 32 slots by LPT list scheduling, and their sum over the plan's stages
(stages run one after the other).

Partition coalescing by adaptive execution is off unless ``--aqe-coalesce``: it merges a
small shuffle's 8 partitions into one or two tasks, which leaves no tasks to compare.

**Checks, on every measured run** (a difference exits non-zero): the exact per-key
figures are computed once per distribution from the Parquet files with Polars; native and
keysplit must both equal them for count and sum exactly and for mean exactly as a double
(the sums stay below 2^53), and the same keys, so keysplit's equal native's; keysplit's distinct counts must be within
``keysplit.spark.sketch_error()`` of the exact count, ``approx_count_distinct``'s within
3 x 0.05 (its default relative standard error is 0.05), each with an absolute slack of
``DISTINCT_SLACK`` for tiny counts, where a sketch's collisions lose a whole item. Being
three standard errors, a bound is exceeded by chance on about 0.3 % of the keys: up to
``OUTSIDE_SHARE`` (1 %) of them may exceed it, none by 5/3 of it (five standard errors).

    python benches/spark_vs_native.py --rows 200000 --repeats 1     # a quick look
    python benches/spark_vs_native.py                               # 10^7 rows, both setups

Writes ``benches/results/spark_vs_native.json`` (every figure, the machine, and the Markdown
table that is printed at the end).
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

import keysplit
from keysplit import spark as ks

RESULTS = Path(__file__).parent / "results"
#: Zipf exponent per distribution; None is uniform.
DISTRIBUTIONS: dict[str, float | None] = {"zipf-1.5": 1.5, "zipf-2.0": 2.0, "uniform": None}
SETUPS = {"local": "local[2]", "cluster": "cluster:2"}
AGGS = ["count", "sum(value)", "mean(value)", "distinct(user)"]
#: approx_count_distinct's default relative standard error, and the bound checked: 3 of them.
NATIVE_DISTINCT_RSD = 0.05
NATIVE_DISTINCT_BOUND = 3 * NATIVE_DISTINCT_RSD
#: Items a distinct count may miss whatever its relative bound: two of a handful of users
#: falling in one register of approx_count_distinct's 512 makes 2 of 3, a third off.
DISTINCT_SLACK = 2
#: Both bounds are three standard errors, which one key in 370 exceeds by chance (one of
#: the 4,359 Zipf-2.0 keys at 10^7 rows does: 1,124 for 977 users, +15.05 %). So up to this
#: share of the keys may exceed its bound, and none this factor of it (five standard errors).
OUTSIDE_SHARE = 0.01
HARD_BOUND_FACTOR = 5 / 3
VALUES = 1_000
USERS = 1_000_000
SLOTS = (8, 32)
#: Settings of both plans' session. One input partition per file: a file's open cost above
#: the split size closes a partition after each file.
BENCH_CONF = {
    "spark.sql.files.openCostInBytes": str(1 << 30),
    # Every run's executions must stay listed until read (the default keeps 1,000).
    "spark.sql.ui.retainedExecutions": "100000",
    "spark.ui.retainedJobs": "100000",
    "spark.ui.retainedStages": "100000",
}


class ResultMismatch(AssertionError):
    """A plan's result differs from the exact figures (or keysplit's from native's)."""


# --- data ------------------------------------------------------------------------------


def draw_keys(rng: np.random.Generator, rows: int, keys: int, z: float | None) -> np.ndarray:
    """``rows`` keys in ``0 .. keys-1``: uniform, or Zipf(z) ranks through a random permutation."""
    if z is None:
        return rng.integers(0, keys, rows, dtype=np.int64)
    ranks = rng.zipf(z, rows)
    # Redraw, rather than clip, the ranks above `keys`: clipping would make the last key hot.
    while (over := np.flatnonzero(ranks > keys)).size:
        ranks[over] = rng.zipf(z, over.size)
    return rng.permutation(keys).astype(np.int64)[ranks - 1]


def dataset(root: Path, name: str, *, rows: int, keys: int, files: int, seed: int) -> Path:
    """The directory of ``name``'s Parquet files, written on first use and reused after."""
    spec = {
        "distribution": name,
        "rows": rows,
        "keys": keys,
        "files": files,
        "seed": seed,
        "values": VALUES,
        "users": USERS,
    }
    directory = root / f"{name}-rows{rows}-keys{keys}-files{files}-seed{seed}"
    marker = directory / "_dataset.json"  # "_": Spark skips it
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    rng = np.random.default_rng([seed, list(DISTRIBUTIONS).index(name)])
    table = pa.table(
        {
            "key": draw_keys(rng, rows, keys, DISTRIBUTIONS[name]),
            "value": rng.integers(0, VALUES, rows, dtype=np.int64),
            "user": rng.integers(0, USERS, rows, dtype=np.int64),
        }
    )
    partial = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    bounds = np.linspace(0, rows, files + 1).astype(int)
    for index, (start, end) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        pq.write_table(table.slice(start, end - start), partial / f"part-{index:03d}.parquet")
    (partial / "_dataset.json").write_text(json.dumps(spec))
    partial.rename(directory)  # the marker appears only with every file
    return directory


def exact_figures(directory: Path) -> pl.DataFrame:
    """Per key: count, sum, mean and the exact distinct users, from the files, by Polars."""
    return (
        pl.scan_parquet(directory / "*.parquet")
        .group_by("key")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("value").sum().alias("sum_value"),
            pl.col("user").n_unique().cast(pl.Int64).alias("distinct_user"),
        )
        # Spark's avg of integers: the sum as a double over the count, exact below 2^53.
        .with_columns((pl.col("sum_value").cast(pl.Float64) / pl.col("count").cast(pl.Float64)).alias("mean_value"))
        .collect()
    )


# --- checks ----------------------------------------------------------------------------


def check_result(exact: pl.DataFrame, result: pa.Table, *, plan: str, distinct_bound: float) -> dict[str, float]:
    """Raises :class:`ResultMismatch` unless ``result`` matches ``exact``; otherwise how
    far its distinct counts are: the keys beyond ``distinct_bound``, the worst relative
    error over keys of at least 100 users (where a relative bound means something), and
    the worst absolute error over the others."""
    got = pl.from_arrow(result)
    assert isinstance(got, pl.DataFrame)
    if got.height != exact.height or got["key"].n_unique() != got.height:
        raise ResultMismatch(
            f"{plan}: {got.height} result rows ({got['key'].n_unique()} keys), expected {exact.height} keys"
        )
    joined = exact.join(got, on="key", how="left", suffix="_got")
    missing = joined["count_got"].null_count()
    if missing:
        raise ResultMismatch(f"{plan}: {missing} keys are missing from the result")
    for column in ("count", "sum_value", "mean_value"):
        wrong = joined.filter(pl.col(column) != pl.col(f"{column}_got"))
        if wrong.height:
            raise ResultMismatch(
                f"{plan}: {column} differs on {wrong.height} keys, e.g. "
                f"{wrong.select('key', column, f'{column}_got').head(3).to_dicts()}"
            )
    error = (pl.col("distinct_user_got") - pl.col("distinct_user")).abs()
    relative = error / pl.col("distinct_user")
    beyond = (error > DISTINCT_SLACK) & (relative > distinct_bound)
    far_beyond = (error > DISTINCT_SLACK) & (relative > distinct_bound * HARD_BOUND_FACTOR)
    outside, far_outside = joined.filter(beyond), joined.filter(far_beyond)
    allowed = max(1, math.ceil(OUTSIDE_SHARE * joined.height))
    if far_outside.height or outside.height > allowed:
        worst = outside.sort(relative, descending=True).select("key", "distinct_user", "distinct_user_got").head(3)
        raise ResultMismatch(
            f"{plan}: distinct(user) is off by more than {distinct_bound:.3f} (and {DISTINCT_SLACK} users) on "
            f"{outside.height} of {joined.height} keys (at most {allowed} may be), by more than "
            f"{distinct_bound * HARD_BOUND_FACTOR:.3f} on {far_outside.height} (none may be); e.g. {worst.to_dicts()}"
        )
    large = pl.col("distinct_user") >= 100
    return {
        "keys_beyond_bound": outside.height,
        "max_relative_error_100_users_plus": float(joined.select(relative.filter(large).max()).item() or 0.0),
        "max_absolute_error_below_100_users": float(joined.select(error.filter(~large).max()).item() or 0.0),
    }


# --- Spark's REST status API -------------------------------------------------------------


def lpt_makespan(seconds: list[float], slots: int) -> float:
    """The makespan of ``seconds`` (task times) on ``slots`` slots by LPT list scheduling:
    longest task first, each onto the least loaded slot."""
    loads = [0.0] * slots
    for task in sorted(seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + task)
    return max(loads)


def fingerprint(frame: Any) -> Any:
    """Rows, and a sum of a hash of each row (an exact multiset check, but for collisions)."""
    from pyspark.sql import functions as F

    digest = F.pmod(F.xxhash64(*[F.col(c) for c in frame.columns]), F.lit(2**31))
    return frame.agg(F.count(F.lit(1)).alias("rows"), F.sum(digest).alias("digest"))


def medians_and_exactness(runs: dict[str, list[dict[str, Any]]], reference: str) -> dict[str, Any]:
    """Per plan, the median of each numeric figure of its runs, and whether every run's
    ``result`` equals the ``reference`` plan's first."""
    numeric = [k for k, v in next(iter(runs.values()))[0].items() if isinstance(v, (int, float))]
    exact = runs[reference][0]["result"]
    return {
        "median": {plan: {k: statistics.median(r[k] for r in rs) for k in numeric} for plan, rs in runs.items()},
        "exact": {plan: all(r["result"] == exact for r in rs) for plan, rs in runs.items()},
    }


def stage_briefs(stages: list[dict[str, Any]], slots: int) -> list[dict[str, Any]]:
    """Each stage's tasks, task seconds and computed makespan on ``slots``, for a results file."""
    return [
        {
            "tasks": s["tasks"],
            "task_s": round(sum(s["task_seconds"]), 3),
            "max_task_s": round(s["max_task_s"], 3),
            f"makespan_{slots}_slots_computed_s": round(lpt_makespan(s["task_seconds"], slots), 3),
            "shuffle_write_records": s["shuffle_write_records"],
        }
        for s in stages
    ]


def stage_role(stage: dict[str, Any]) -> str:
    """A stage's place around its shuffles: map (writes one), shuffle (reads and writes),
    post-shuffle (reads one: where an aggregation completes) or scan (neither)."""
    reads, writes = stage["shuffleReadBytes"] > 0, stage["shuffleWriteBytes"] > 0
    return {(False, True): "map", (True, True): "shuffle", (True, False): "post-shuffle"}.get((reads, writes), "scan")


def execution_phase(plan: str, native: bool) -> str:
    """Which part of a plan a SQL execution is, from its physical plan's text."""
    if native:
        return "groupBy"
    if "MapInArrow" in plan and "Scan parquet" in plan:
        return "partial"  # routing on the executors, then the partial aggregation
    if "hll_union_agg" in plan:
        return "final"
    return "bookkeeping"  # reading loads, Γ, fetching the result


class SparkStatus:
    """The stages and task times of a Spark application, from its REST status API."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.app = self._get("applications")[0]["id"]

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/{path}", timeout=30) as response:
            return json.load(response)

    def _executions(self, first: int) -> list[dict[str, Any]]:
        # The list is by execution id and nothing is evicted (BENCH_CONF), so the offset is an id.
        query = f"details=false&planDescription=true&offset={first}&length=100000"
        listed = self._get(f"applications/{self.app}/sql?{query}")
        return [e for e in listed if e["id"] >= first]

    def next_execution(self) -> int:
        """The id the next SQL execution will get."""
        listed = self._get(f"applications/{self.app}/sql?details=false&planDescription=false&offset=0&length=100000")
        return 1 + max((e["id"] for e in listed), default=-1)

    def stages_since(self, first: int, *, native: bool, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every completed stage of the SQL executions from id ``first`` on, with its phase,
        role and task seconds. Waits for the status listener, which lags the query a little."""
        deadline = time.monotonic() + timeout
        while True:
            executions = self._executions(first)
            if executions and all(e["status"] != "RUNNING" and not e["runningJobIds"] for e in executions):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"Spark's status API still shows executions from {first} running")
            time.sleep(0.2)
        stages = []
        for execution in executions:
            phase = execution_phase(execution.get("planDescription", ""), native)
            stage_ids = set()
            for job in execution["successJobIds"]:
                stage_ids.update(self._get(f"applications/{self.app}/jobs/{job}")["stageIds"])
            for stage_id in sorted(stage_ids):
                for attempt in self._get(f"applications/{self.app}/stages/{stage_id}"):
                    if attempt["status"] != "COMPLETE":
                        continue  # skipped: its shuffle output was reused
                    tasks = self._get(
                        f"applications/{self.app}/stages/{stage_id}/{attempt['attemptId']}/taskList?length=1000000"
                    )
                    # By index: a post-shuffle task's index is the shuffle partition it reads.
                    done = sorted((t for t in tasks if t["status"] == "SUCCESS"), key=lambda t: t["index"])
                    seconds = [t["taskMetrics"]["executorRunTime"] / 1000 for t in done]
                    records = [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in done]
                    read = [
                        t["taskMetrics"]["shuffleReadMetrics"]["localBytesRead"]
                        + t["taskMetrics"]["shuffleReadMetrics"]["remoteBytesRead"]
                        for t in done
                    ]
                    peak = max((t["taskMetrics"]["peakExecutionMemory"] for t in done), default=0)
                    spilled = max((t["taskMetrics"]["diskBytesSpilled"] for t in done), default=0)
                    stages.append(
                        stage_figures(attempt, seconds, records, execution["id"], phase)
                        | {
                            "peak_memory": peak,
                            "spilled_to_disk": spilled,
                            "task_shuffle_bytes_read": read,
                            "task_peak_memory": [t["taskMetrics"]["peakExecutionMemory"] for t in done],
                            "task_input_records": [t["taskMetrics"]["inputMetrics"]["recordsRead"] for t in done],
                            "task_records_written": [t["taskMetrics"]["outputMetrics"]["recordsWritten"] for t in done],
                        }
                    )
        return stages

    def largest_build_side(self, first: int) -> int:
        """The largest hash table a hash join built in one task, in bytes, over the SQL
        executions from id ``first`` on (Spark's SQL metric "data size of build side", whose
        memory the tasks' ``peakExecutionMemory`` leaves out); 0 without a hash join."""
        largest = 0
        for execution in self._executions(first):
            detail = self._get(f"applications/{self.app}/sql/{execution['id']}?details=true&planDescription=false")
            for node in detail.get("nodes", []):
                for metric in node.get("metrics", []):
                    if metric["name"] == "data size of build side":
                        # "total (min, med, max (stageId: taskId))\n<total> (<min>, <med>, <max> (...))",
                        # or one size for one task.
                        sizes = [_bytes(number, unit) for number, unit in _SIZE.findall(metric["value"])]
                        largest = max(largest, sizes[3] if len(sizes) >= 4 else max(sizes, default=0))
        return largest


_SIZE = re.compile(r"([0-9][0-9.,]*) (B|KiB|MiB|GiB|TiB)\b")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _bytes(number: str, unit: str) -> int:
    return int(float(number.replace(",", "")) * _UNITS[unit])


def stage_figures(
    stage: dict[str, Any], seconds: list[float], records: list[int], execution: int, phase: str
) -> dict[str, Any]:
    median = statistics.median(seconds) if seconds else 0.0
    return {
        "stage": stage["stageId"],
        "execution": execution,
        "phase": phase,
        "role": stage_role(stage),
        "tasks": len(seconds),
        "input_bytes": stage["inputBytes"],
        "shuffle_read_bytes": stage["shuffleReadBytes"],
        "shuffle_write_bytes": stage["shuffleWriteBytes"],
        "shuffle_write_records": stage["shuffleWriteRecords"],
        "task_seconds": seconds,  # by task index
        "task_shuffle_records_read": records,
        "max_task_s": max(seconds, default=0.0),
        "median_task_s": median,
        "straggler_ratio": max(seconds) / median if median else None,
        **{f"makespan_{n}_slots_computed_s": lpt_makespan(seconds, n) for n in SLOTS},
    }


def post_shuffle(stages: list[dict[str, Any]], phase: str) -> dict[str, Any] | None:
    """The last post-shuffle stage of ``phase``: where its aggregation completes per key."""
    found = [s for s in stages if s["phase"] == phase and s["role"] == "post-shuffle"]
    return found[-1] if found else None


# --- runs ------------------------------------------------------------------------------


@dataclass
class Run:
    """One timed run of a plan: its wall time, result, Spark's stages and keysplit's report."""

    wall_s: float
    result: pa.Table
    stages: list[dict[str, Any]]
    figures: dict[str, Any] | None = None


class Bench:
    """Both plans on one session, each run timed and its stages read from Spark."""

    def __init__(self, handle: ks.Session, status: SparkStatus) -> None:
        self.handle = handle
        self.status = status

    def native(self, frame: Any) -> Run:
        def run() -> tuple[pa.Table, None]:
            return self._fetch("native groupBy", ks.reference(frame, key="key", aggs=AGGS, distinct="sketch")), None

        return self._timed(run, native=True)

    def keysplit(self, frame: Any, grouper: str, workers: int) -> Run:
        def run() -> tuple[pa.Table, dict[str, Any]]:
            report: ks.Report[ks.RunReport] = ks.Report()
            result = ks.aggregate(
                frame, key="key", grouper=grouper, workers=workers, aggs=AGGS, output="spark", report=report
            )
            return self._fetch("keysplit result", result), report.get.figures()

        return self._timed(run, native=False)

    def _fetch(self, what: str, frame: Any) -> pa.Table:
        return self.handle.call(what, frame.toArrow)

    def _timed(self, run: Any, *, native: bool) -> Run:
        # Released checkpoints of the last run go now, not inside this run's time.
        gc.collect()
        first = self.status.next_execution()
        started = time.perf_counter()
        table, figures = run()
        wall = time.perf_counter() - started
        gc.collect()
        stages = self.status.stages_since(first, native=native)
        return Run(wall, table, stages, figures)


def with_hot_key_task(stage: dict[str, Any] | None, hot_partition: int | None) -> dict[str, Any] | None:
    """``stage`` with the time of the task that aggregated the hot key, when it is known:
    a stage partitioned by the key alone, with every shuffle partition a task of its own."""
    if stage is not None and hot_partition is not None and hot_partition < stage["tasks"]:
        stage["hot_key_task_s"] = stage["task_seconds"][hot_partition]
        # Combined map-side, the hot key adds one row per map task to its partition's reads.
        stage["hot_key_task_shuffle_records_read"] = stage["task_shuffle_records_read"][hot_partition]
        stage["median_task_shuffle_records_read"] = statistics.median(stage["task_shuffle_records_read"])
    return stage


def summarise(runs: list[Run], plan: str, hot_partition: int | None) -> dict[str, Any]:
    """The median run's figures (by wall time), with every run's wall time."""
    walls = [r.wall_s for r in runs]
    median_run = sorted(runs, key=lambda r: r.wall_s)[(len(runs) - 1) // 2]
    stages = median_run.stages
    summary: dict[str, Any] = {
        "wall_s": walls,
        "median_wall_s": statistics.median(walls),
        "best_wall_s": min(walls),
        "stages": stages,
        **{
            f"plan_makespan_{n}_slots_computed_s": sum(s[f"makespan_{n}_slots_computed_s"] for s in stages)
            for n in SLOTS
        },
    }
    if plan == "native":
        summary["final_stage"] = with_hot_key_task(post_shuffle(stages, "groupBy"), hot_partition)
        summary["map_stage"] = next((s for s in stages if s["role"] == "map"), None)
    else:
        summary["partial_stage"] = post_shuffle(stages, "partial")
        summary["partial_map_stage"] = next((s for s in stages if s["phase"] == "partial" and s["role"] == "map"), None)
        summary["final_stage"] = with_hot_key_task(post_shuffle(stages, "final"), hot_partition)
        summary["report"] = median_run.figures
    return summary


def measure(
    bench: Bench,
    frame: Any,
    exact: pl.DataFrame,
    hot_partition: int | None,
    grouper: str,
    workers: int,
    repeats: int,
    label: str,
) -> dict[str, Any]:
    """``repeats`` pairs of native and keysplit runs, ABBA, each checked against ``exact``."""
    native_runs: list[Run] = []
    keysplit_runs: list[Run] = []
    errors: dict[str, dict[str, float]] = {"native": {}, "keysplit": {}}
    for repeat in range(repeats):
        order = ("native", "keysplit") if repeat % 2 == 0 else ("keysplit", "native")
        for plan in order:
            if plan == "native":
                run = bench.native(frame)
                error = check_result(exact, run.result, plan=f"{label} native", distinct_bound=NATIVE_DISTINCT_BOUND)
                native_runs.append(run)
            else:
                run = bench.keysplit(frame, grouper, workers)
                error = check_result(exact, run.result, plan=f"{label} keysplit", distinct_bound=ks.sketch_error())
                keysplit_runs.append(run)
            errors[plan] = {name: max(value, errors[plan].get(name, 0.0)) for name, value in error.items()}
            run.result = None  # type: ignore[assignment]  # checked; free the table
            print(f"  {label} {plan}: {run.wall_s:.2f} s", flush=True)
    native = summarise(native_runs, "native", hot_partition)
    keysplit_summary = summarise(keysplit_runs, "keysplit", hot_partition)
    return {
        "native": native,
        "keysplit": keysplit_summary,
        "keysplit_over_native": keysplit_summary["median_wall_s"] / native["median_wall_s"],
        "paired_ratios": [k.wall_s / n.wall_s for n, k in zip(native_runs, keysplit_runs, strict=True)],
        "distinct_count_errors": errors,
        "load_average": os.getloadavg(),
    }


# --- output ----------------------------------------------------------------------------


def straggler_cell(stage: dict[str, Any] | None) -> str:
    """Slowest / median task (their ratio), and the hot key's task when known."""
    if not stage or not stage["tasks"]:
        return "–"
    ratio = f"{stage['straggler_ratio']:.2f}" if stage["straggler_ratio"] else "–"
    cell = f"{stage['max_task_s']:.2f} / {stage['median_task_s']:.2f} s ({ratio})"
    if "hot_key_task_s" in stage:
        cell += f"; hot key's task {stage['hot_key_task_s']:.2f} s"
    return cell


def markdown_table(rows: list[dict[str, Any]]) -> str:
    header = [
        "setup",
        "distribution",
        "grouper",
        "workers",
        "native s",
        "keysplit s",
        "keysplit/native",
        "native final stage: slowest / median task (ratio)",
        "keysplit partial stage: slowest / median task (ratio)",
        "makespan on 32 slots, computed: native / keysplit",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * 4 + ["--:"] * 3 + ["---"] * 3) + "|"]
    for row in rows:
        native, keysplit_summary = row["native"], row["keysplit"]
        cells = [
            row["setup"],
            row["distribution"],
            row["grouper"],
            str(row["workers"]),
            f"{native['median_wall_s']:.2f}",
            f"{keysplit_summary['median_wall_s']:.2f}",
            f"{row['keysplit_over_native']:.2f}",
            straggler_cell(native["final_stage"]),
            straggler_cell(keysplit_summary["partial_stage"]),
            f"{native['plan_makespan_32_slots_computed_s']:.2f} / "
            f"{keysplit_summary['plan_makespan_32_slots_computed_s']:.2f} s",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    """What the figures were measured on, including how busy the machine was."""
    import pyspark

    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20).stderr.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        java = None
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": java,
        "keysplit": keysplit.__version__,
        "polars": pl.__version__,
        "numpy": np.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def hot_key_partition(handle: ks.Session, exact: pl.DataFrame) -> int:
    """The shuffle partition of the most frequent key in a shuffle by the key alone: Spark's
    hash partitioning is pmod(murmur3 hash with seed 42, partitions), which is F.hash."""
    from pyspark.sql import functions as F

    hot = int(exact.sort("count", descending=True)["key"][0])
    partitions = int(handle.spark.conf.get("spark.sql.shuffle.partitions"))
    probe = handle.spark.range(1).select(F.pmod(F.hash(F.lit(hot).cast("long")), F.lit(partitions)).alias("partition"))
    return int(handle.call("hashing the hot key", probe.collect)[0]["partition"])


def dumps(document: dict[str, Any]) -> str:
    """``document`` as indented JSON, with each list of numbers (task times) on one line."""
    text = json.dumps(document, indent=1)
    return re.sub(r"\[\s+([-\d.,\se+]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def write_results(output: Path, benchmark: str, settings: dict[str, Any], **sections: Any) -> None:
    """A benchmark's JSON document at ``output``: what it measured, the machine, the
    settings, then its own ``sections`` (in order)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": benchmark, "machine": machine(), "settings": settings, **sections}
    output.write_text(json.dumps(document, indent=1, default=str) + "\n")


class Report:
    """The JSON document, rewritten after every measured row so that a long run that stops
    keeps what it measured."""

    def __init__(self, path: Path, document: dict[str, Any], *, started: float, table: Any = None) -> None:
        self.table = table or markdown_table
        self.path = path
        self.document = {**document, "setups": {}, "results": [], "complete": False}
        self.started = started

    def add(self, row: dict[str, Any]) -> None:
        self.document["results"].append(row)
        self.write()

    def write(self, *, complete: bool = False) -> None:
        self.document["table_markdown"] = self.table(self.document["results"])
        self.document["total_s"] = time.perf_counter() - self.started
        self.document["complete"] = complete
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(dumps(self.document))


def run_setup(
    setup: str, args: argparse.Namespace, data: dict[str, Path], exact: dict[str, pl.DataFrame], report: Report
) -> None:
    """Every measured row of one Spark setup, into ``report``."""
    conf = dict(BENCH_CONF)
    if not args.aqe_coalesce:
        conf["spark.sql.adaptive.coalescePartitions.enabled"] = "false"
    started = time.perf_counter()
    with ks.session(master=SETUPS[setup], ui=True, driver_memory=args.driver_memory, **conf) as handle:
        info = {
            "master": SETUPS[setup],
            "session": repr(handle),
            "startup_s": time.perf_counter() - started,
            "conf": conf,
        }
        report.document["setups"][setup] = info
        assert handle.server is not None and handle.server.ui_port is not None
        bench = Bench(handle, SparkStatus(handle.server.ui_port))
        frames = {name: handle.spark.read.parquet(str(directory)) for name, directory in data.items()}
        hot_partitions = {name: None if args.aqe_coalesce else hot_key_partition(handle, exact[name]) for name in data}
        info["hot_key_partitions"] = hot_partitions
        # Warm-up, untimed: the JVM's compilers, the executors' Python workers, keysplit's import.
        first = next(iter(frames.values()))
        warm = time.perf_counter()
        bench.native(first)
        bench.keysplit(first, args.groupers[0], args.workers[0])
        info["warmup_s"] = time.perf_counter() - warm
        for name, frame in frames.items():
            for grouper in args.groupers:
                for workers in args.workers:
                    label = f"{setup} {name} {grouper} w={workers}"
                    row = {"setup": setup, "distribution": name, "grouper": grouper, "workers": workers}
                    row.update(
                        measure(bench, frame, exact[name], hot_partitions[name], grouper, workers, args.repeats, label)
                    )
                    report.add(row)
                    native, keysplit_summary = row["native"], row["keysplit"]
                    print(
                        f"{label}: native {native['median_wall_s']:.2f} s, "
                        f"keysplit {keysplit_summary['median_wall_s']:.2f} s, "
                        f"keysplit/native {row['keysplit_over_native']:.2f}; native final stage "
                        f"{straggler_cell(native['final_stage'])}; keysplit partial stage "
                        f"{straggler_cell(keysplit_summary['partial_stage'])}, final stage "
                        f"{straggler_cell(keysplit_summary['final_stage'])}",
                        flush=True,
                    )
    info["seconds"] = time.perf_counter() - started


def names(allowed: Any) -> Any:
    """An argparse type: a comma-separated list of names from ``allowed``."""

    def parse(text: str) -> list[str]:
        chosen = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in chosen if n not in allowed]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)}; got {text!r}")
        return chosen

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--keys", type=lambda t: int(float(t)), default=100_000, help="distinct keys drawn from")
    parser.add_argument("--files", type=int, default=8, help="Parquet files, one input partition each")
    parser.add_argument("--distributions", type=names(DISTRIBUTIONS), default=list(DISTRIBUTIONS))
    parser.add_argument(
        "--groupers", type=names([g.name for g in keysplit.groupers()]), default=["pdstream", "key", "w_choices"]
    )
    parser.add_argument("--workers", type=lambda t: [int(w) for w in t.split(",")], default=[8, 32])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--setups", type=names(SETUPS), default=list(SETUPS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument(
        "--aqe-coalesce", action="store_true", help="let adaptive execution coalesce shuffle partitions"
    )
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "keysplit-spark-vs-native")
    parser.add_argument("--output", type=Path, default=RESULTS / "spark_vs_native.json")
    args = parser.parse_args()
    started = time.perf_counter()
    meta = machine()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data, exact, described = {}, {}, {}
    for name in args.distributions:
        data[name] = dataset(args.data_dir, name, rows=args.rows, keys=args.keys, files=args.files, seed=args.seed)
        exact[name] = exact_figures(data[name])
        counts = exact[name]["count"]
        described[name] = {
            "zipf_exponent": DISTRIBUTIONS[name],
            "directory": str(data[name]),
            "distinct_keys": exact[name].height,
            "hot_key_share": counts.max() / args.rows,
        }
        share = described[name]["hot_key_share"]
        print(f"{name}: {exact[name].height} distinct keys, the hot key holds {share:.1%}", flush=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report = Report(
        args.output,
        {
            "benchmark": "keysplit.spark.aggregate against Spark's groupBy (keysplit.spark.reference)",
            "machine": meta,
            "settings": {
                **settings,
                "aggs": AGGS,
                "terminal_action": "toArrow",
                "figures": "the median run of the repeats",
            },
            "distributions": described,
        },
        started=started,
    )
    for setup in args.setups:
        run_setup(setup, args, data, exact, report)
    meta["load_average_end"] = os.getloadavg()
    report.write(complete=True)
    print(report.document["table_markdown"])
    print(f"wrote {args.output} in {report.document['total_s']:.0f} s")


if __name__ == "__main__":
    main()
