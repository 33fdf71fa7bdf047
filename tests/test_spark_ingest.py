"""Client streams into Spark: each ingestion path, hundreds of batches, and 10^7 rows.

Against the real embedded server (the ``spark`` fixture), which was started with local
destinations allowed for ``copyFromLocalToFs`` so that the upload path can be exercised.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import keysplit
from keysplit import ConfigError
from keysplit._grouper import DEFAULT_GROUPER
from keysplit.spark import reference
from keysplit.spark.ingest import IngestOptions, balanced_union, choose_path
from keysplit.spark.session import Session
from reports import aggregated

TIMEOUT = 600.0
AGGS = ["count", "sum(value)", "max(value)"]


def _zipf(rows: int, *, a: float = 1.5, keys: int = 100_000, seed: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(a, rows), keys)
    return pl.DataFrame(
        {"key": rng.permutation(keys + 1)[ranks].astype(np.int64), "value": rng.integers(-500, 500, rows)}
    )


def _expected(spark, frame) -> pl.DataFrame:
    table = spark.call("reference", reference(frame, key="key", aggs=AGGS).toArrow, timeout=TIMEOUT)
    return pl.from_arrow(table).sort("key")


def test_hundreds_of_batches_in_one_window_through_arrow(spark):
    # A chain of ~60 unions overflows the plan's depth limit; the tree of unions does not.
    data = _zipf(36_000, keys=2_000)
    result, report = aggregated(
        data,
        grouper="pkg",
        aggs=AGGS,
        ingest="arrow",
        batch_rows=100,
        session=spark,
        output="polars",
        timeout=TIMEOUT,
    )
    assert report.ingestion == "arrow" and report.rows == 36_000
    assert result.equals(_expected(spark, spark.spark.createDataFrame(data.to_arrow())))


def test_upload_copies_files_to_the_servers_filesystem(spark, tmp_path):
    data = _zipf(300_000, keys=5_000)
    server_dir = tmp_path / "server"
    result, report = aggregated(
        data,
        grouper="w_choices",
        aggs=AGGS,
        ingest="upload",
        upload_dir=str(server_dir),
        session=spark,
        output="polars",
        timeout=TIMEOUT,
    )
    assert report.ingestion == "upload"
    assert sorted(p.suffix for p in server_dir.rglob("*.parquet")) == [".parquet"]
    # The uploaded files hold the routed stream: groupBy of them is the result.
    uploaded = spark.spark.read.option("recursiveFileLookup", "true").parquet(str(server_dir))
    assert result.equals(_expected(spark, uploaded))


def test_auto_probes_a_server_it_did_not_start(spark, tmp_path):
    given = Session(spark.spark, url=spark.url, server=None, query_timeout=TIMEOUT)
    # This server runs on this machine, so it reads the client's files: the fast path.
    assert choose_path(given, IngestOptions()) == "files"
    assert choose_path(given, IngestOptions("arrow")) == "arrow"
    with pytest.raises(ConfigError, match="needs upload_dir"):
        IngestOptions("upload")
    with pytest.raises(ConfigError, match="ingest must be"):
        IngestOptions("carrier-pigeon")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="batch_rows must be"):
        IngestOptions(batch_rows=0)


def test_the_union_tree_stays_shallow():
    class Plan:
        def __init__(self, depth: int = 0) -> None:
            self.depth = depth

        def union(self, other: Plan) -> Plan:
            return Plan(1 + max(self.depth, other.depth))

    for parts in (1, 2, 3, 62, 1_000, 100_000):
        assert balanced_union([Plan() for _ in range(parts)]).depth == (parts - 1).bit_length()


@pytest.fixture(scope="module")
def ten_million(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("ten-million")
    data = _zipf(10_000_000)
    for index, part in enumerate(data.iter_slices(2_500_000)):
        part.write_parquet(directory / f"part-{index}.parquet")
    return directory


@pytest.fixture(scope="module")
def ten_million_expected(spark, ten_million) -> pl.DataFrame:
    """Spark's own aggregate of the ten million rows, computed once for the tests below."""
    return _expected(spark, spark.spark.read.parquet(str(ten_million)))


def test_ten_million_rows_from_the_client_with_default_settings(spark, ten_million, ten_million_expected):
    result, report = aggregated(
        pl.scan_parquet(ten_million / "*.parquet"),
        aggs=AGGS,
        session=spark,
        output="polars",
        timeout=TIMEOUT,
    )
    assert report.rows == 10_000_000 and sum(report.spark_loads) == 10_000_000
    assert report.ingestion == "files" and report.disagreements() == []
    assert result.equals(ten_million_expected)


def test_ten_million_rows_of_a_spark_dataframe(spark, ten_million, ten_million_expected):
    frame = spark.spark.read.parquet(str(ten_million))
    result, report = aggregated(frame, aggs=AGGS, session=spark, output="polars", timeout=TIMEOUT)
    assert report.routed_on == "executors" and sum(report.spark_loads) == 10_000_000
    assert result.equals(ten_million_expected)
    # Every source routes with the same seed: their loads are balanced as one source's would be.
    one_source = keysplit.route(
        pl.read_parquet(ten_million / "*.parquet").select("key"),
        key="key",
        grouper=keysplit.Grouper(DEFAULT_GROUPER, workers=8),
    )
    assert report.load_imbalance < 0.01
    assert report.replication_factor == pytest.approx(keysplit.metrics.replication_factor(one_source), rel=0.02)
