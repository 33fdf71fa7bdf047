"""A skewed join on Spark with and without adaptive execution's skew-join split, in one session.

Backs the "joins" row of ``docs/spark.md``'s "which plan" table: for joins Spark's own
adaptive execution already splits a skewed partition, so keysplit has nothing to add. The
fact side is the Zipf 2.0 DataFrame of ``benches/spark_grouped_map.py`` (``--rows`` rows,
int64 ``key``, ``value``, ``user``; the hot key holds 61 %), joined with a dimension of
one row per key by a sort-merge join (broadcast joins off), then summed. Two plans,
alternated, ``--repeats`` times each: ``spark.sql.adaptive.skewJoin.enabled`` true (Spark's
default) and false; 32 shuffle partitions, coalescing off, and the skew threshold and
advisory partition size at 16 MB (at the default 256 MB threshold the hot partition, about
100 MB here, is not split at all). Reported per plan: wall time,
the join stage's task count and slowest over median task (Spark's REST status API), and
the makespan on 32 slots computed by LPT from the measured task times. The sums must agree.

    python benches/spark_skew_join.py --rows 1e7

Writes ``benches/results/spark_skew_join.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from keysplit import spark as ks
from spark_vs_native import BENCH_CONF, SparkStatus, dataset, lpt_makespan, machine

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--keys", type=lambda t: int(float(t)), default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "keysplit-spark-vs-native")
    parser.add_argument("--output", type=Path, default=RESULTS / "spark_skew_join.json")
    args = parser.parse_args()
    directory = dataset(args.data_dir, "zipf-2.0", rows=args.rows, keys=args.keys, files=8, seed=1)
    conf = {
        **BENCH_CONF,
        "spark.sql.shuffle.partitions": "32",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        # The hot key's partition is about 100 MB, below the default skew threshold (256 MB),
        # so Spark would not split it at all; at 16 MB it does, into about 16 MB pieces.
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "16MB",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16MB",
    }
    results: dict[str, list[dict[str, Any]]] = {"skew join split (default)": [], "skew join split off": []}
    with ks.session(ui=True, driver_memory="4g", **conf) as handle:
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        from pyspark.sql import functions as F

        facts = handle.spark.read.parquet(str(directory))
        dimension = handle.spark.range(0, args.keys).select(F.col("id").alias("key"), (F.col("id") % 7).alias("weight"))
        plan = facts.join(dimension, "key").agg(F.sum(F.col("value") * F.col("weight")).alias("total"))
        handle.call("warm-up", plan.collect)
        totals = set()
        for repeat in range(args.repeats):
            for label in list(results) if repeat % 2 == 0 else list(reversed(results)):
                handle.spark.conf.set("spark.sql.adaptive.skewJoin.enabled", str(label.endswith("(default)")).lower())
                first = status.next_execution()
                started = time.perf_counter()
                totals.add(handle.call(label, plan.collect)[0]["total"])
                wall = time.perf_counter() - started
                stages = status.stages_since(first, native=True)
                join = max(stages, key=lambda s: sum(s["task_seconds"]) if s["role"] != "map" else 0.0)
                results[label].append(
                    {
                        "wall_s": wall,
                        "join_tasks": join["tasks"],
                        "join_max_task_s": join["max_task_s"],
                        "join_median_task_s": join["median_task_s"],
                        "makespan_32_slots_computed_s": sum(lpt_makespan(s["task_seconds"], 32) for s in stages),
                    }
                )
                print(
                    f"{label}: {wall:.2f} s, join stage {join['tasks']} tasks, slowest "
                    f"{join['max_task_s']:.2f} s / median {join['median_task_s']:.2f} s",
                    flush=True,
                )
    if len(totals) != 1:
        raise AssertionError(f"the plans disagree: {totals}")
    summary = {
        label: {name: statistics.median(run[name] for run in runs) for name in runs[0]}
        for label, runs in results.items()
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "benchmark": "a skewed sort-merge join with and without adaptive execution's skew-join split",
                "machine": machine(),
                "settings": {"rows": args.rows, "keys": args.keys, "repeats": args.repeats, "conf": conf},
                "runs": results,
                "median": summary,
            },
            indent=1,
        )
        + "\n"
    )
    for label, figures in summary.items():
        print(
            f"{label}: median {figures['wall_s']:.2f} s, join stage {figures['join_tasks']:.0f} tasks, slowest "
            f"{figures['join_max_task_s']:.2f} s / median {figures['join_median_task_s']:.2f} s; "
            f"32-slot makespan (computed) {figures['makespan_32_slots_computed_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
