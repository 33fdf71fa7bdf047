"""Streaming aggregation at streaming scale: ``keysplit.spark.stream_aggregate`` against
Spark's own streaming ``groupBy().agg()`` and an identity routing step, in one session.

A file source of ``--files`` Parquet files of ``--rows`` rows each, read one file per
micro-batch (``maxFilesPerTrigger=1``). Key 0 holds 30 % of every file; the rest are drawn
from a range that moves on by 40,000 keys a file, so that the distinct keys keep growing
(to 4·10^6 at 100 files). Aggregates: a count and a sum per key. Pipelines, each a query of
its own on the same files, alternated (A B C, then C B A):

- ``spark``: Spark's own streaming aggregation, update mode, into the ``noop`` sink;
- ``identity``: the same after a ``transformWithStateInPandas`` step that passes every row
  on unrouted, grouped into sources as keysplit's are (``pmod(xxhash64(seq), 4)``, one
  source per state partition): the floor of any Python routing step;
- ``keysplit``: ``stream_aggregate`` with its defaults (elastic, 8 workers, one source per
  state partition) into the same sink; at the end its running aggregates, read from the
  state store with Spark's state data source, are checked against an exact group-by.

Per batch, from the query's progress: the trigger's and ``addBatch``'s durations and the
state rows. Per pipeline: the median batch time of batches 3–12 and of the last 10, and
their ratio (how batch time grows with the history), the rows per second, and the ratios
of keysplit's throughput to the floor's and to Spark's.

    python benches/spark_streaming.py --files 100 --rows 1e5 --setup local

Writes ``benches/results/spark_streaming[_cluster].json``. ``spark_streaming_before.json``
holds the run at these defaults (``local[2]``) of the ``foreachBatch`` implementation of
0.1.0's development that rewrote the running partials of every key each batch: 2.24 s a
batch early, 4.21 s late.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from keysplit import spark as ks
from keysplit.spark.streaming import source_column
from spark_vs_native import BENCH_CONF, RESULTS, SETUPS, write_results

#: keysplit's default: one source per state partition (CONF's shuffle partitions).
SOURCES = 4
NEW_KEYS_PER_FILE = 40_000
HOT_SHARE = 0.3
CONF = {
    **BENCH_CONF,
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
}
SCHEMA = "key long, seq long, v long"


def write_files(directory: Path, files: int, rows: int) -> None:
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True)
    for i in range(files):
        start = 1 + i * NEW_KEYS_PER_FILE
        keys = np.where(rng.random(rows) < HOT_SHARE, 0, rng.integers(start, start + NEW_KEYS_PER_FILE * 3 // 2, rows))
        pl.DataFrame(
            {"key": keys, "seq": np.arange(i * rows, (i + 1) * rows), "v": rng.integers(0, 100, rows)}
        ).write_parquet(directory / f"part-{i:05d}.parquet")


def identity_processor() -> Any:
    from pyspark.sql.streaming import StatefulProcessor

    class PassOn(StatefulProcessor):
        def init(self, handle: Any) -> None:
            pass

        def handleInputRows(self, source: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803
            yield from rows

        def close(self) -> None:
            pass

    return PassOn()


def query_figures(query: Any, rows: int, wall: float) -> dict[str, Any]:
    progress = [p for p in query.recentProgress if p.numInputRows > 0]
    batches = [p.durationMs["triggerExecution"] / 1000 for p in progress]
    add_batch = [p.durationMs.get("addBatch", 0) / 1000 for p in progress]
    state_rows = [sum(o.numRowsTotal for o in p.stateOperators if o.operatorName == "stateStoreSave") for p in progress]
    partitions = max((o.numShufflePartitions for p in progress for o in p.stateOperators), default=1)
    early, late = statistics.median(batches[2:12]), statistics.median(batches[-10:])
    return {
        "wall_s": wall,
        "rows_per_s": rows / wall,
        "batches": len(batches),
        "batch_s": batches,
        "add_batch_s": add_batch,
        "state_rows": state_rows,
        "state_rows_per_partition": [r / partitions for r in state_rows],
        "early_batch_s": early,
        "late_batch_s": late,
        "growth": late / early,
    }


def run_pipeline(handle: Any, name: str, source: Path, scratch: Path, rows: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    stream = handle.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    started = time.perf_counter()
    if name == "keysplit":
        stream = ks.stream_aggregate(stream, key="key", aggs=["count", "sum(v)"], order_by="seq", session=handle)
    if name == "identity":
        stream = (
            stream.withColumn("source", source_column(["seq"], SOURCES, SOURCES))
            .groupBy("source")
            .transformWithStateInPandas(
                identity_processor(), outputStructType=SCHEMA, outputMode="Append", timeMode="None"
            )
        )
    table = (
        stream
        if name == "keysplit"
        else stream.groupBy("key").agg(F.count("*").alias("count"), F.sum("v").alias("sum_v"))
    )
    query = (
        table.writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(scratch / "checkpoint"))
        .start()
    )
    handle.call(f"{name}: the whole source", query.processAllAvailable, timeout=24 * 3600.0)
    wall = time.perf_counter() - started
    figures = query_figures(query, rows, wall)
    query.stop()
    if name == "keysplit":
        figures["exact"] = state_equals_group_by(handle, scratch / "checkpoint", source)
    return figures


def state_equals_group_by(handle: Any, checkpoint: Path, source: Path) -> bool:
    """Whether the running aggregates in the aggregation's state store (read with Spark's
    state data source: the aggregation is operator 0, the routing 1) equal an exact group-by of the files."""
    state = handle.spark.read.format("statestore").option("operatorId", 0).load(str(checkpoint))
    table = pl.from_arrow(state.selectExpr("key.key AS key", "value.count AS count", "value.sum AS sum_v").toArrow())
    expected = (
        pl.scan_parquet(source / "*.parquet")
        .group_by("key")
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("v").sum().alias("sum_v"))
        .sort("key")
        .collect()
    )
    return table.sort("key").select(expected.columns).equals(expected)


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    def median(plan: str, figure: str) -> float:
        return statistics.median(run[figure] for run in runs[plan])

    return {
        plan: {
            figure: median(plan, figure)
            for figure in ("wall_s", "rows_per_s", "early_batch_s", "late_batch_s", "growth")
        }
        for plan in runs
    } | {
        "keysplit throughput / identity": median("keysplit", "rows_per_s") / median("identity", "rows_per_s"),
        "keysplit throughput / spark": median("keysplit", "rows_per_s") / median("spark", "rows_per_s"),
        "exact": all(run["exact"] for run in runs["keysplit"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=100_000, help="rows per file")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="local")
    parser.add_argument("--pipelines", nargs="+", default=["spark", "identity", "keysplit"])
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    name = "spark_streaming.json" if args.setup == "local" else "spark_streaming_cluster.json"
    output = args.output or RESULTS / name
    rows = args.files * args.rows
    runs: dict[str, list[dict[str, Any]]] = {plan: [] for plan in args.pipelines}
    with tempfile.TemporaryDirectory(prefix="keysplit-streaming-") as work:
        source = Path(work) / "source"
        write_files(source, args.files, args.rows)
        with ks.session(master=SETUPS[args.setup], driver_memory="4g", query_timeout=24 * 3600.0, **CONF) as handle:
            for repeat in range(args.repeats):
                order = args.pipelines if repeat % 2 == 0 else list(reversed(args.pipelines))
                for plan in order:
                    scratch = Path(work) / f"{plan}-{repeat}"
                    figures = run_pipeline(handle, plan, source, scratch, rows)
                    shutil.rmtree(scratch, ignore_errors=True)
                    runs[plan].append(figures)
                    print(
                        f"{plan:9s} run {repeat + 1}: {figures['wall_s']:7.1f} s, {figures['rows_per_s']:,.0f} rows/s, "
                        f"batch {figures['early_batch_s']:.2f} s early, {figures['late_batch_s']:.2f} s late "
                        f"(×{figures['growth']:.2f}), state rows {figures['state_rows'][-1]:,}"
                        + (f", exact {figures['exact']}" if "exact" in figures else ""),
                        flush=True,
                    )
    summary = summarise(runs) if {"spark", "identity", "keysplit"} <= set(runs) else {}
    write_results(
        output,
        "streaming aggregation: stream_aggregate against Spark's own and an identity routing step",
        {**vars(args), "output": str(output), "conf": CONF},
        summary=summary,
        runs=runs,
    )
    for figure, value in summary.items():
        print(f"{figure}: {value}")


if __name__ == "__main__":
    main()
