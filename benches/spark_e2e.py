"""End-to-end keysplit on Spark: skewed and uniform streams, six groupers, 8/16/32 workers.

Runs ``keysplit.spark.aggregate`` on an embedded Spark Connect server (web UI on, so that
task times come from Spark's REST status API) and records, per run, the partial- and
final-phase times, the straggler ratio of the partial phase (its slowest partition's task
time over the median task time) and the total time, with KG's figures of the same stream
and worker count as the baseline of each ratio. Writes ``benches/results/spark_e2e.json``.

    python benches/spark_e2e.py [--tuples 400000] [--workers 8,16,32]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from pathlib import Path

import polars as pl

import keysplit
from keysplit import spark as ks

STREAMS = {"zipf-1.5": 1.5, "zipf-2.0": 2.0, "uniform": 0.0}
GROUPERS = ("key", "pkg", "w_choices", "pdstream", "flexd", "cam")


def _rest(port: int, path: str) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/{path}", timeout=30) as response:
        return json.load(response)


def _stage_ids(port: int, app: str) -> set[int]:
    return {s["stageId"] for s in _rest(port, f"applications/{app}/stages")}  # type: ignore[union-attr]


def _partial_task_seconds(port: int, app: str, before: set[int], workers: int) -> list[float]:
    """Task times of the partial phase: the first new stage with one task per worker."""
    stages = [s for s in _rest(port, f"applications/{app}/stages") if s["stageId"] not in before]  # type: ignore[union-attr]
    candidates = sorted((s for s in stages if s["numTasks"] == workers), key=lambda s: s["stageId"])
    if not candidates:
        return []
    stage = candidates[0]
    tasks = _rest(port, f"applications/{app}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=100000")
    return [t["taskMetrics"]["executorRunTime"] / 1000 for t in tasks if t.get("taskMetrics")]  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--workers", default="8,16,32")
    parser.add_argument("--groupers", default=",".join(GROUPERS))
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "spark_e2e.json"))
    args = parser.parse_args()
    rows = []
    with ks.session(ui=True) as handle:
        app = _rest(handle.server.ui_port, "applications")[0]["id"]  # type: ignore[index]
        for stream_name, z in STREAMS.items():
            data = pl.concat(list(keysplit.datasets.zipf(keys=args.keys, tuples=args.tuples, z=z, seed=1)))
            for workers in (int(w) for w in args.workers.split(",")):
                for name in args.groupers.split(","):
                    before = _stage_ids(handle.server.ui_port, app)
                    started = time.perf_counter()
                    _, report = ks.aggregate_with_report(
                        data, key="key", grouper=keysplit.Grouper(name, workers=workers, seed=1),
                        aggs=["count"], session=handle, batch_rows=200_000, output="spark",
                    )
                    total = time.perf_counter() - started
                    report.check()
                    tasks = _partial_task_seconds(handle.server.ui_port, app, before, workers)
                    median = statistics.median(tasks) if tasks else None
                    figures = report.figures()
                    rows.append(
                        {
                            "stream": stream_name, "workers": workers, "grouper": name, "tuples": args.tuples,
                            "load_imbalance": figures["load_imbalance"],
                            "replication_factor": figures["replication_factor"],
                            "partial_rows": figures["aggregation_cost_spark"],
                            "routing_s": figures["routing_s"], "shipping_s": figures["shipping_s"],
                            "partial_s": figures["partial_s"], "final_s": figures["final_s"], "total_s": total,
                            "straggler_ratio": max(tasks) / median if median else None,
                            "max_task_s": max(tasks) if tasks else None,
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
    table = pl.DataFrame(rows)
    baseline = table.filter(pl.col("grouper") == "key").select(
        "stream", "workers",
        pl.col("partial_s").alias("kg_partial_s"), pl.col("max_task_s").alias("kg_max_task_s"),
        pl.col("total_s").alias("kg_total_s"),
    )
    table = table.join(baseline, on=["stream", "workers"], how="left").with_columns(
        (pl.col("partial_s") / pl.col("kg_partial_s")).alias("partial_vs_kg"),
        (pl.col("max_task_s") / pl.col("kg_max_task_s")).alias("max_task_vs_kg"),
        (pl.col("total_s") / pl.col("kg_total_s")).alias("total_vs_kg"),
    )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(table.to_dicts(), indent=1))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=3, tbl_width_chars=200):
        print(table.select("stream", "workers", "grouper", "load_imbalance", "partial_rows", "partial_s",
                           "final_s", "straggler_ratio", "max_task_vs_kg", "total_s", "total_vs_kg"))


if __name__ == "__main__":
    main()
