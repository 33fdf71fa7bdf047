"""Partitioned writes with a hot partition value: ``skewed(df).write`` against Spark's own.

**Input.** ``--rows`` rows generated in Spark and written to Parquet (``--files`` files):
``id``, ``day`` (an int of ``--days`` values, one of which, the hot day, holds ``--share`` of
the rows, the rest uniform), ``v`` (a double) and ``text`` (one of a few words). Two layouts
of the same rows: ``spread`` (the hot day's rows in every file) and ``one-file`` (the files
cut by ranges of ``day``: the hot day's rows come from one file, as a table clustered by
date gives them).

**Plans**, in one session, alternated after an untimed warm-up of each (A B C D, then the
reverse, ``--repeats`` times), each writing Parquet partitioned by ``day`` with mode
``overwrite``:

- ``repartition``: ``df.repartition("day").write.partitionBy("day")``, the advised way to
  avoid many small files;
- ``rebalance``: ``df.hint("rebalance", day)`` with adaptive execution (Spark splits a
  skewed rebalance partition at its map output blocks);
- ``plain``: ``df.write.partitionBy("day")``, no shuffle (every input task writes a file
  per day it holds);
- ``keysplit``: ``skewed(df, target_file_bytes=--target-mib MiB).write.partitionBy("day")``.

**Sorts** (``--sort-share``, the ``spread`` layout): ``df.orderBy("day")`` against
``skewed(df).orderBy("day")``, each written unpartitioned to Parquet (the action that keeps
the sort), the hot day holding that share of the rows: Spark's range partitions give every
tied row of the hot day to one task. Both with 32 range partitions, each a task of its own
(``SORT_CONF``). Per run the rows each task of the sort stage read, and
the files read back in order must hold the days in order and the input's rows.

Per run: the wall seconds (keysplit's include its counts and its sample); from Spark's REST
status API every stage's task times, and the write stage's (the stage whose tasks wrote the
files) rows per task; the makespan on 32 slots **computed** by LPT from the measured task
times, stage after stage (this machine has 2 cores); from the output directory, the files
per day and their sizes; and per day an order-insensitive checksum of the rows written
(count and a sum of a hash of each row), which must equal the input's. Medians per plan.

    python benches/spark_write.py --rows 1e7 --share 0 0.3 0.6 --setup local
    python benches/spark_write.py --rows 2e5 --repeats 1 --target-mib 0.25      # a quick look
    python benches/spark_write.py --rows 1e7 --share --sort-share 0.5             # sorts alone

Writes ``benches/results/spark_write[_cluster].json`` (rewritten after every row).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from keysplit import spark as ks
from spark_vs_native import BENCH_CONF, RESULTS, SETUPS, Report, SparkStatus, lpt_makespan

SLOTS = 32
PLANS = ("repartition", "rebalance", "plain", "keysplit")
SORT_PLANS = ("spark", "keysplit")
SORT_CONF = {"spark.sql.shuffle.partitions": str(SLOTS), "spark.sql.adaptive.coalescePartitions.enabled": "false"}
LAYOUTS = ("spread", "one-file")
HOT_DAY = 7
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]


def generate(handle: ks.Session, directory: Path, rows: int, days: int, share: float, files: int) -> dict[str, str]:
    """The two layouts of the input (module notes), as Parquet directories."""
    from pyspark.sql import functions as F

    uniform = F.pmod(F.xxhash64(F.col("id"), F.lit(1)), F.lit(1_000_000)) / F.lit(1_000_000.0)
    other = F.pmod(F.xxhash64(F.col("id"), F.lit(2)), F.lit(days)).cast("int")
    words = F.array(*[F.lit(w) for w in WORDS])
    frame = handle.spark.range(0, rows, 1, files).select(
        "id",
        F.when(uniform < share, F.lit(HOT_DAY)).otherwise(other).alias("day"),
        (F.pmod(F.xxhash64(F.col("id"), F.lit(3)), F.lit(10**9)) / F.lit(7.0)).alias("v"),
        F.element_at(words, (F.pmod(F.xxhash64(F.col("id"), F.lit(4)), F.lit(len(WORDS))) + 1).cast("int")).alias(
            "text"
        ),
    )
    paths = {"spread": str(directory / "spread"), "one-file": str(directory / "one-file")}
    handle.call("writing the input", lambda: frame.write.mode("overwrite").parquet(paths["spread"]))
    spread = handle.spark.read.parquet(paths["spread"])
    handle.call(
        "writing the clustered input",
        lambda: spread.repartitionByRange(files, "day").write.mode("overwrite").parquet(paths["one-file"]),
    )
    return paths


def checksums(frame: Any) -> dict[Any, tuple[int, int]]:
    """Per day: rows and a sum of a hash of each row's other columns."""
    from pyspark.sql import functions as F

    digest = F.pmod(F.xxhash64("id", "v", "text"), F.lit(2**31))
    rows = frame.groupBy("day").agg(F.count(F.lit(1)).alias("n"), F.sum(digest).alias("h")).collect()
    return {row["day"]: (row["n"], row["h"]) for row in rows}


def files_of(root: Path) -> dict[str, list[int]]:
    """Per day directory, the sizes of its data files."""
    found: dict[str, list[int]] = {}
    for path in root.rglob("part-*"):
        found.setdefault(path.parent.name, []).append(path.stat().st_size)
    return found


def file_figures(files: dict[str, list[int]], target: int) -> dict[str, Any]:
    total = sum(len(sizes) for sizes in files.values())
    least = sum(-(-sum(sizes) // target) for sizes in files.values())
    inner = [size for sizes in files.values() for size in sorted(sizes)[1:]]
    within = [0.5 * target <= size <= 1.5 * target for size in inner]
    hot = files.get(f"day={HOT_DAY}", [])
    return {
        "files": total,
        "files_over_least": total / least if least else None,
        "inner_files": len(inner),
        "inner_within_band": sum(within) / len(within) if within else None,
        "hot_day_files": len(hot),
        "hot_day_largest_mib": max(hot, default=0) / 2**20,
    }


def run_plan(handle: ks.Session, status: SparkStatus, plan: str, frame: Any, out: Path, target: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    def write() -> None:
        if plan == "repartition":
            frame.repartition("day").write.partitionBy("day").mode("overwrite").parquet(str(out))
        elif plan == "rebalance":
            frame.hint("rebalance", F.col("day")).write.partitionBy("day").mode("overwrite").parquet(str(out))
        elif plan == "plain":
            frame.write.partitionBy("day").mode("overwrite").parquet(str(out))
        else:
            ks.skewed(frame, target_file_bytes=target).write.partitionBy("day").mode("overwrite").parquet(str(out))

    return {**measured(status, out, write, "task_records_written", "write"), **file_figures(files_of(out), target)}


def run_sort(status: SparkStatus, plan: str, frame: Any, out: Path) -> dict[str, Any]:
    def write() -> None:
        (ks.skewed(frame) if plan == "keysplit" else frame).orderBy("day").write.mode("overwrite").parquet(str(out))

    # The sort: the last stage that read a shuffle (the range exchange's).
    return measured(status, out, write, "task_shuffle_records_read", "sort")


def measured(status: SparkStatus, out: Path, write: Any, per_task: str, name: str) -> dict[str, Any]:
    """Runs ``write`` (into ``out``, emptied first): its wall seconds, every stage's task
    seconds and computed makespan, and of the last stage whose tasks counted ``per_task``
    (rows written, or shuffle rows read), its tasks and its hottest task's rows and seconds."""
    shutil.rmtree(out, ignore_errors=True)
    first = status.next_execution()
    started = time.perf_counter()
    write()
    wall = time.perf_counter() - started
    stages = status.stages_since(first, native=False)
    counted = [s for s in stages if sum(s[per_task])]
    rows = counted[-1][per_task] if counted else []
    seconds = counted[-1]["task_seconds"] if counted else []
    mean = sum(rows) / len(rows) if rows else 0
    return {
        "wall_s": wall,
        f"makespan_{SLOTS}_slots_computed_s": sum(lpt_makespan(s["task_seconds"], SLOTS) for s in stages),
        "task_s": sum(sum(s["task_seconds"]) for s in stages),
        f"{name}_tasks": len(rows),
        f"hottest_{name}_task_over_mean": max(rows) / mean if mean else None,
        f"hottest_{name}_task_s": max(seconds, default=0.0),
    }


def in_order(root: Path) -> bool:
    """Whether the files of a sorted write, in their part order, hold the days in order."""
    import polars as pl

    days = [pl.read_parquet(path, columns=["day"])["day"] for path in sorted(root.glob("part-*"))]
    flat = pl.concat([d for d in days if d.len()]) if any(d.len() for d in days) else pl.Series([], dtype=pl.Int32)
    return bool(flat.is_sorted(nulls_last=False))


def alternated(
    plans: tuple[str, ...], run: Any, exact_output: Any, repeats: int
) -> tuple[dict[str, dict[str, Any]], dict[str, bool]]:
    """Each plan run once untimed, then ``repeats`` times in turn (A B, then B A): the median
    of each figure per plan, and whether every timed run's output was exact."""
    for plan in plans:  # warm-up
        run(plan)
    runs: dict[str, list[dict[str, Any]]] = {plan: [] for plan in plans}
    exact = dict.fromkeys(plans, True)
    for repeat in range(repeats):
        for plan in plans if repeat % 2 == 0 else reversed(plans):
            runs[plan].append(run(plan))
            exact[plan] &= exact_output()
    return {plan: {k: median([r[k] for r in measured]) for k in measured[0]} for plan, measured in runs.items()}, exact


def sorts(handle: ks.Session, status: SparkStatus, frame: Any, out: Path, share: float, repeats: int) -> dict:
    """The sort family's row (module notes)."""
    expected = checksums(frame)
    # A range partition a task, 32 of them, as on the computed makespan's 32 slots (adaptive
    # execution would pack this machine's small partitions into a few tasks, ties or not).
    for name, value in SORT_CONF.items():
        handle.spark.conf.set(name, value)
    medians, exact = alternated(
        SORT_PLANS,
        lambda plan: run_sort(status, plan, frame, out),
        lambda: in_order(out) and checksums(handle.spark.read.parquet(str(out))) == expected,
        repeats,
    )
    for name in SORT_CONF:
        handle.spark.conf.unset(name)
    return {"family": "sort", "share": share, "layout": "spread", "exact": exact, "conf": SORT_CONF, **medians}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--share", type=float, nargs="*", default=[0.0, 0.3, 0.6])
    parser.add_argument("--sort-share", type=float, nargs="*", default=[0.5], help="the hot day's share in sorts")
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--target-mib", type=float, default=4.0, help="keysplit's target file size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="local")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    target = int(args.target_mib * 2**20)
    output = args.output or RESULTS / f"spark_write{'' if args.setup == 'local' else '_' + args.setup}.json"
    settings = {k: v for k, v in vars(args).items() if k != "output"} | {"output": str(output)}
    report = Report(
        output, {"benchmark": "spark_write", "settings": settings}, started=time.perf_counter(), table=table
    )
    failures = []
    with (
        tempfile.TemporaryDirectory(prefix="keysplit-write-") as scratch,
        ks.session(master=SETUPS[args.setup], ui=True, driver_memory=args.driver_memory, **BENCH_CONF) as handle,
    ):
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        for share in args.share:
            paths = generate(handle, Path(scratch) / f"in-{share}", args.rows, args.days, share, args.files)
            for layout in args.layouts:
                frame = handle.spark.read.parquet(paths[layout])
                expected = checksums(frame)
                out = Path(scratch) / "out"
                medians, exact = alternated(
                    PLANS,
                    lambda plan, frame=frame, out=out: run_plan(handle, status, plan, frame, out, target),
                    lambda out=out, expected=expected: checksums(handle.spark.read.parquet(str(out))) == expected,
                    args.repeats,
                )
                row = {"family": "write", "share": share, "layout": layout, "exact": exact, **medians}
                report.add(row)
                failures += [f"{share} {layout} {plan}" for plan, ok in exact.items() if not ok]
                print(table([row]), flush=True)
        for share in args.sort_share:
            paths = generate(handle, Path(scratch) / f"sort-{share}", args.rows, args.days, share, args.files)
            row = sorts(
                handle, status, handle.spark.read.parquet(paths["spread"]), Path(scratch) / "out", share, args.repeats
            )
            report.add(row)
            failures += [f"sort {share} {plan}" for plan, ok in row["exact"].items() if not ok]
            print(table([row]), flush=True)
    report.write(complete=True)
    print(report.document["table_markdown"])
    if failures:
        print("rows differ from the input:", ", ".join(failures), file=sys.stderr)
        sys.exit(1)


def median(values: list[Any]) -> Any:
    """The median of the figures measured (None where a run had none)."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def table(rows: list[dict[str, Any]]) -> str:
    writes = [row for row in rows if row.get("family", "write") == "write"]
    sorted_ = [row for row in rows if row.get("family") == "sort"]
    return "\n\n".join(part for part in (write_table(writes), sort_table(sorted_)) if part)


def sort_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    lines = [
        "| top day | plan | wall s | over keysplit | 32-slot makespan s, computed | hottest sort task / mean | "
        "sort tasks | in order, equal |\n|---|---|--:|--:|--:|--:|--:|---|"
    ]
    for row in rows:
        ours = row["keysplit"]["wall_s"]
        for plan in SORT_PLANS:
            m = row[plan]
            hottest = m.get("hottest_sort_task_over_mean")
            lines.append(
                f"| {row['share']:.0%} | {plan} | {m['wall_s']:.2f} | {m['wall_s'] / ours:.2f} | "
                f"{m[f'makespan_{SLOTS}_slots_computed_s']:.2f} | {'-' if hottest is None else f'{hottest:.2f}'} | "
                f"{m['sort_tasks']:.0f} | {'yes' if row['exact'][plan] else 'NO'} |"
            )
    return "\n".join(lines)


def write_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    head = (
        "| hot day | layout | plan | wall s | over keysplit | 32-slot makespan s, computed | hottest write task / "
        "mean | write tasks | files (over ⌈bytes/target⌉) | files but the last within 0.5–1.5× | hot day's files, "
        "largest MiB | equal |\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|"
    )
    lines = [head]
    for row in rows:
        ours = row["keysplit"]["wall_s"]
        for plan in PLANS:
            m = row[plan]
            over = m.get("files_over_least")
            band = m.get("inner_within_band")
            hottest = m.get("hottest_write_task_over_mean")
            lines.append(
                f"| {row['share']:.0%} | {row['layout']} | {plan} | {m['wall_s']:.2f} | {m['wall_s'] / ours:.2f} | "
                f"{m[f'makespan_{SLOTS}_slots_computed_s']:.2f} | {'-' if hottest is None else f'{hottest:.2f}'} | "
                f"{m['write_tasks']:.0f} | {m['files']:.0f} ({'-' if over is None else f'{over:.2f}'}) | "
                f"{'-' if band is None else f'{band:.0%}'} | {m['hot_day_files']:.0f}, {m['hot_day_largest_mib']:.1f} | "
                f"{'yes' if row['exact'][plan] else 'NO'} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
