"""Client streams into Spark: ingestion rate per path, and 10^8 rows in windows.

On the embedded server (started with local destinations allowed for ``copyFromLocalToFs``,
so that the upload path runs too), with int64 keys (Zipf 1.5 over 10^5 keys) and int64
values, generated batch by batch so that no path holds the stream in memory:

* **rate per path**: ``keysplit.spark.aggregate`` (with a ``Report``) with ``count`` and
  ``sum(value)``, once per ``ingest`` path. The ingestion rate is rows over the ``ingest``
  phase (converting, writing and sending the routed batches), and the client rate rows
  over routing plus ingestion. ``files`` and ``upload`` run ``--rows`` rows; ``arrow``
  (about 0.35 M rows/s) runs ``--arrow-rows``, and its rate is read off that run.
  ``createDataFrame`` of the same stream batch by batch (what a user would do by hand) is
  timed as the baseline in the same session.
* **windows**: ``--window-rows``-row count windows over ``--windowed-rows`` rows with the
  default settings; the result is checked against a Polars count and sum of the same
  stream, window by window.

    python benches/spark_ingest.py [--rows 10000000] [--windowed-rows 100000000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from keysplit import spark as ks

if TYPE_CHECKING:
    from collections.abc import Iterator

BATCH = 1_000_000


def zipf_batches(rows: int, *, seed: int = 1, keys: int = 100_000, a: float = 1.5) -> Iterator[pl.DataFrame]:
    rng = np.random.default_rng(seed)
    permutation = rng.permutation(keys + 1)
    for start in range(0, rows, BATCH):
        size = min(BATCH, rows - start)
        yield pl.DataFrame(
            {
                "key": permutation[np.minimum(rng.zipf(a, size), keys)].astype(np.int64),
                "value": rng.integers(0, 1000, size),
            }
        )


def rate(handle: ks.Session, path: str, rows: int, upload_dir: str) -> dict:
    started = time.perf_counter()
    observed: ks.Report[ks.RunReport] = ks.Report()
    ks.aggregate(
        zipf_batches(rows),
        aggs=["count", "sum(value)"],
        ingest=path,
        upload_dir=upload_dir,
        session=handle,
        report=observed,
    )
    report = observed.get
    wall = time.perf_counter() - started
    report.check()
    seconds = report.phase_seconds
    return {
        "path": report.ingestion,
        "rows": rows,
        "wall_s": wall,
        **{f"{k}_s": v for k, v in seconds.items()},
        "ingest_rows_per_s": rows / seconds["ingest"],
        "client_rows_per_s": rows / (seconds["routing"] + seconds["ingest"]),
    }


def create_dataframe_baseline(handle: ks.Session, rows: int) -> dict:
    """What a user does by hand: ``createDataFrame`` per batch, held with ``localCheckpoint``."""
    spark = handle.spark
    started = time.perf_counter()
    for batch in zipf_batches(rows):
        table = batch.to_arrow()
        handle.call("createDataFrame", lambda t=table: spark.createDataFrame(t).localCheckpoint(eager=True))
    seconds = time.perf_counter() - started
    return {
        "path": "createDataFrame (baseline)",
        "rows": rows,
        "ingest_s": seconds,
        "ingest_rows_per_s": rows / seconds,
    }


def windows(handle: ks.Session, rows: int, window: int) -> dict:
    expected = []
    for index, batch in enumerate(zipf_batches(rows)):
        expected.append(batch.with_columns(window=pl.lit(index * BATCH // window, pl.Int64)))
    want = (
        pl.concat(expected)
        .group_by("window", "key")
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("value").sum().alias("sum_value"))
        .sort("window", "key")
    )
    del expected
    started = time.perf_counter()
    observed: ks.Report[ks.RunReport] = ks.Report()
    result = ks.aggregate(
        zipf_batches(rows),
        aggs=["count", "sum(value)"],
        window=window,
        session=handle,
        output="polars",
        report=observed,
    )
    report = observed.get
    wall = time.perf_counter() - started
    report.check()
    equal = result.select("window", "key", "count", "sum_value").equals(want)
    return {
        "rows": rows,
        "window_rows": window,
        "windows": len(report.windows),
        "wall_s": wall,
        "rows_per_s": rows / wall,
        "equals_polars": equal,
        "ingestion": report.ingestion,
        **{f"{k}_s": v for k, v in report.phase_seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--arrow-rows", type=int, default=1_000_000)
    parser.add_argument("--windowed-rows", type=int, default=100_000_000)
    parser.add_argument("--window-rows", type=int, default=10_000_000)
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "spark_ingest.json"))
    args = parser.parse_args()
    results: dict = {
        "machine": {"cores": os.cpu_count(), "date": datetime.date.today().isoformat()},
        "rates": [],
    }
    with (
        tempfile.TemporaryDirectory(prefix="keysplit-bench-upload-") as upload_dir,
        ks.session(driver_memory="4g", **{"spark.sql.artifact.copyFromLocalToFs.allowDestLocal": "true"}) as handle,
    ):
        rate(handle, "files", 1_000_000, upload_dir)  # warm-up
        for path, rows in (("files", args.rows), ("upload", args.rows), ("arrow", args.arrow_rows)):
            results["rates"].append(rate(handle, path, rows, upload_dir))
            print(json.dumps(results["rates"][-1]), flush=True)
        results["rates"].append(create_dataframe_baseline(handle, args.arrow_rows))
        print(json.dumps(results["rates"][-1]), flush=True)
        if args.windowed_rows:
            results["windows"] = windows(handle, args.windowed_rows, args.window_rows)
            print(json.dumps(results["windows"]), flush=True)
            if not results["windows"]["equals_polars"]:
                raise SystemExit("the windowed result differs from Polars' count and sum")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=1))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=2, tbl_width_chars=200):
        print(pl.DataFrame(results["rates"]))


if __name__ == "__main__":
    main()
