"""Holistic aggregates over a hot key on Spark: ``keysplit.spark.holistic_agg`` against
Spark's own ``groupBy().agg()``, in one session.

``--rows`` rows whose key 0 holds ``--share`` of them (the rest uniform over ``--keys``
keys; ``--share 0`` is the control without a hot key); ``v`` a double with many distinct
values (10^9) and 1 % nulls, ``u`` an integer of 10^6 values (a hot key's repeat a few
times each), ``w`` an integer with heavy ties (1,000 values). Families, each one
``groupBy("k").agg(...)``:

1. ``median(v)``;
2. ``percentile(v, [0.5, 0.99])``;
3. ``mode(u, True)`` (Spark's tie rule, so that both plans name the same value);
4. ``median(w)``: a hot key of few values, which Spark's partial aggregation already
   spreads and keysplit leaves to it (the control for that rule).

Plans, alternated (A B, then B A, ...) after a warm-up: ``spark`` and ``keysplit``. The
input is cached. 32 shuffle partitions, coalescing off. Every plan's output ends in the
same fingerprint (rows, and a sum of a hash of each row), which must equal Spark's. Per
run, from Spark's REST status API: the aggregate stages (those reading more than 5 % of the
run's shuffle bytes), their hottest task's bytes over the mean (the stages' bytes over the
32 slots) and its peak execution memory, the largest peak of any task, and the makespan on
32 slots **computed** by LPT from the measured task times of every stage (this machine has
2 cores).

    python benches/spark_holistic.py --rows 1e7 --share 0.3 0.6 0 --setup local

Writes ``benches/results/spark_holistic[_cluster].json``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keysplit import spark as ks
from spark_vs_native import (
    BENCH_CONF,
    RESULTS,
    SETUPS,
    SparkStatus,
    fingerprint,
    lpt_makespan,
    medians_and_exactness,
    stage_briefs,
    write_results,
)

SLOTS = 32
#: A stage reading more than this share of the run's shuffle bytes is an aggregate stage.
HEAVY_STAGE_SHARE = 0.05
CONF = {
    **BENCH_CONF,
    "spark.sql.shuffle.partitions": str(SLOTS),
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
}


def families() -> dict[str, Callable[[], list[Any]]]:
    from pyspark.sql import functions as F

    return {
        "median": lambda: [F.median("v")],
        "percentile": lambda: [F.percentile("v", [0.5, 0.99])],
        "mode": lambda: [F.mode("u", True)],
        "median of ties": lambda: [F.median("w")],
    }


def inputs(spark: Any, rows: int, keys: int, share: float) -> Any:
    from pyspark.sql import functions as F

    hot = F.when(F.rand(7) < share, F.lit(0)).otherwise(1 + F.pmod(F.xxhash64("id"), F.lit(keys - 1)))
    value = F.when(F.pmod(F.xxhash64("id", F.lit(5)), F.lit(100)) == 0, F.lit(None)).otherwise(
        F.pmod(F.xxhash64("id", F.lit(3)), F.lit(1_000_000_000)).cast("double") / 7
    )
    frame = spark.range(0, rows, numPartitions=16).select(
        "id",
        hot.alias("k"),
        value.alias("v"),
        F.pmod(F.xxhash64("id", F.lit(11)), F.lit(1_000_000)).alias("u"),
        F.pmod(F.xxhash64("id", F.lit(9)), F.lit(1000)).alias("w"),
    )
    frame = frame.cache()
    frame.count()
    return frame


def measure(handle: Any, status: SparkStatus, query: Any) -> dict[str, Any]:
    first = status.next_execution()
    started = time.perf_counter()
    row = handle.call("aggregate", query.collect)[0]
    wall = time.perf_counter() - started
    stages = status.stages_since(first, native=True)
    total = sum(s["shuffle_read_bytes"] for s in stages)
    heavy = [s for s in stages if s["shuffle_read_bytes"] > HEAVY_STAGE_SHARE * total]
    tasks = [(s, i) for s in heavy for i in range(len(s["task_shuffle_bytes_read"]))]
    stage, hottest = max(tasks, key=lambda task: task[0]["task_shuffle_bytes_read"][task[1]])
    read = sum(s["shuffle_read_bytes"] for s in heavy)
    mean = read / SLOTS
    return {
        "wall_s": wall,
        "result": [row["rows"], row["digest"]],
        "aggregate_stages": len(heavy),
        "hottest_over_mean_bytes": stage["task_shuffle_bytes_read"][hottest] / mean,
        "hottest_share_of_bytes": stage["task_shuffle_bytes_read"][hottest] / read,
        "hottest_task_bytes": stage["task_shuffle_bytes_read"][hottest],
        "hottest_task_s": stage["task_seconds"][hottest],
        "hottest_task_peak_memory_bytes": stage["task_peak_memory"][hottest],
        "largest_task_peak_memory_bytes": max(max(s["task_peak_memory"], default=0) for s in stages),
        "spill_bytes": max(s["spilled_to_disk"] for s in stages),
        "shuffle_read_bytes": total,
        "makespan_32_slots_computed_s": sum(lpt_makespan(s["task_seconds"], SLOTS) for s in stages),
        "stages": stage_briefs(stages, SLOTS),
    }


def run_family(
    handle: Any, status: SparkStatus, frame: Any, columns: Callable[[], list[Any]], repeats: int
) -> dict[str, list[dict[str, Any]]]:
    def named(result: Any) -> Any:
        # Plain names for the fingerprint (Spark's, like "percentile(v, array(0.5, 0.99), 1)",
        # do not read back as column names).
        return result.toDF(*[f"c{i}" for i in range(len(result.columns))])

    plans: dict[str, Callable[[], Any]] = {
        "spark": lambda: named(frame.groupBy("k").agg(*columns())),
        "keysplit": lambda: named(ks.holistic_agg(frame, "k", *columns())),
    }
    runs: dict[str, list[dict[str, Any]]] = {plan: [] for plan in plans}
    failed: dict[str, str] = {}

    def attempt(plan: str) -> dict[str, Any] | None:
        # A plan whose job Spark aborts (its executors out of memory, say) is recorded as
        # failed and not run again in this family; the other plan goes on.
        from pyspark.errors import PySparkException

        try:
            return measure(handle, status, fingerprint(plans[plan]()))
        except PySparkException as error:
            failed[plan] = str(error).splitlines()[0][:400]
            print(f"  {plan}: failed: {failed[plan]}", flush=True)
            return None

    for plan in plans:  # warm-up
        attempt(plan)
    order = list(plans)
    for repeat in range(repeats):
        for plan in order if repeat % 2 == 0 else list(reversed(order)):
            if plan in failed:
                continue
            figures = attempt(plan)
            if figures is None:
                continue
            runs[plan].append(figures)
            print(
                f"  {plan}: {figures['wall_s']:.2f} s, hottest aggregate task {figures['hottest_share_of_bytes']:.1%} "
                f"of the bytes ({figures['hottest_over_mean_bytes']:.2f}x the mean), peak memory "
                f"{figures['largest_task_peak_memory_bytes'] / 2**20:.1f} MiB, 32-slot makespan (computed) "
                f"{figures['makespan_32_slots_computed_s']:.2f} s",
                flush=True,
            )
    for plan, reason in failed.items():
        runs[plan] = [{"failed": reason}]
    return runs


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    failed = {plan: rs[0]["failed"] for plan, rs in runs.items() if rs and "failed" in rs[0]}
    if failed:
        return {"failed": failed}
    summary = medians_and_exactness(runs, "spark")
    median = summary["median"]
    ours, theirs = median["keysplit"], median["spark"]
    summary["makespan spark / keysplit"] = theirs["makespan_32_slots_computed_s"] / ours["makespan_32_slots_computed_s"]
    summary["wall keysplit / spark"] = ours["wall_s"] / theirs["wall_s"]
    summary["largest peak memory spark / keysplit"] = theirs["largest_task_peak_memory_bytes"] / max(
        ours["largest_task_peak_memory_bytes"], 1
    )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--keys", type=lambda t: int(float(t)), default=100_000)
    parser.add_argument("--share", type=float, nargs="+", default=[0.3, 0.6, 0.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="local")
    parser.add_argument("--families", nargs="*", help="run only the families whose names start so")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    name = "spark_holistic.json" if args.setup == "local" else "spark_holistic_cluster.json"
    output = args.output or RESULTS / name
    results: dict[str, Any] = {}
    with ks.session(master=SETUPS[args.setup], ui=True, driver_memory="4g", **CONF) as handle:
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        for share in args.share:
            frame = inputs(handle.spark, args.rows, args.keys, share)
            for family, columns in families().items():
                if args.families and not any(family.startswith(prefix) for prefix in args.families):
                    continue
                print(f"share {share:.0%}, {family}", flush=True)
                runs = run_family(handle, status, frame, columns, args.repeats)
                results[f"{share:.0%} {family}"] = {"runs": runs, **summarise(runs)}
            frame.unpersist()
    write_results(
        output,
        "holistic aggregates over a hot key: keysplit.spark.holistic_agg against Spark",
        {**vars(args), "output": str(output), "conf": CONF},
        families=results,
    )
    for family, figures in results.items():
        if "failed" in figures:
            print(f"{family}: failed {figures['failed']}")
            continue
        print(
            f"{family}: exact {figures['exact']}; makespan spark/keysplit {figures['makespan spark / keysplit']:.2f}, "
            f"wall keysplit/spark {figures['wall keysplit / spark']:.2f}, largest peak memory spark/keysplit "
            f"{figures['largest peak memory spark / keysplit']:.1f}"
        )


if __name__ == "__main__":
    main()
