"""``keysplit.spark.shuffle_bytes``: rows laid out as Spark's ``UnsafeRow`` serializer writes
them, their LZ4 block compression, and the bytes per row of each reduce partition, checked
against Spark's own shuffle on the embedded server."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from keysplit.spark.shuffle_bytes import LZ4_BLOCK, compressed_size, partition_widths, unsafe_rows
from spark_status import StatusApi


def test_unsafe_row_layout_by_hand():
    table = pa.table(
        {
            "a": pa.array([1, None], pa.int32()),
            "s": pa.array(["ab", None]),
            "d": pa.array([1.5, 2.0]),
        }
    )
    first, second = unsafe_rows(table)
    # Length 40 (big-endian); no null bit; 1 in a zero-padded slot; "ab" at offset 32, size
    # 2; 1.5 as a little-endian double; "ab" padded to 8 bytes.
    assert first.hex() == (
        "00000028" + "00" * 8 + "0100000000000000" + "0200000020000000" + "000000000000f83f" + "6162000000000000"
    )
    # Fields 0 and 1 null: bits 0 and 1, their slots zero, no variable-length bytes.
    assert second.hex() == "00000020" + "0300000000000000" + "00" * 16 + "0000000000000040"


def test_fixed_width_types_fill_their_slots():
    table = pa.table(
        {
            "b": pa.array([True, None]),
            "i8": pa.array([-1, 5], pa.int8()),
            "f": pa.array([1.0, None], pa.float32()),
            "day": pa.array([1, 2], pa.date32()),
            "dec": pa.array([None, Decimal("123.45")], pa.decimal128(10, 2)),
        }
    )
    first, second = unsafe_rows(table)
    assert len(first) == len(second) == 4 + 8 + 5 * 8
    slots = np.frombuffer(second[12:], dtype="<u8")
    # -1 as a byte is 0xff, zero-padded; a decimal of 10 digits is its unscaled long.
    assert np.frombuffer(first[12:], dtype="<u8")[1] == 0xFF
    assert list(slots) == [0, 5, 0, 2, 12345]
    assert int.from_bytes(second[4:12], "little") == 0b101  # b and f are null


def test_compression_is_per_lz4_block_and_never_grows_a_block():
    noise = np.random.default_rng(1).integers(0, 256, 3 * LZ4_BLOCK + 100, dtype=np.uint8).tobytes()
    assert compressed_size(noise) == len(noise) + 4 * 21
    assert compressed_size(b"\0" * LZ4_BLOCK) < 300


def test_a_hot_keys_partition_costs_fewer_bytes_a_row():
    rng = np.random.default_rng(3)
    rows = 40_000
    keys = np.where(rng.random(rows) < 0.5, 0, rng.integers(1, 10_000, rows))
    table = pa.table({"k": keys, "v": rng.integers(0, 1 << 40, rows)})
    reduce = np.where(keys == 0, 3, keys % 16)
    widths = partition_widths(table, reduce, 16, 24.0)
    assert widths[3] < 0.8 * np.delete(widths, 3).min()
    # Every partition but the hot one shares the pooled width.
    assert len(set(np.delete(widths, 3).tolist())) == 1
    assert (partition_widths(table.slice(0, 0), reduce[:0], 16, 24.0) == 24.0).all()
    # A sample of one key's rows only: the other partitions get its width, not the fallback.
    hot = np.flatnonzero(keys == 0)
    alone = partition_widths(table.take(hot), reduce[hot], 16, 24.0)
    assert len(set(alone.tolist())) == 1 and alone[0] < 24.0


def test_widths_match_spark_shuffle_bytes(spark, tmp_path):
    """Spark's shuffle of a table whose key 0 holds a third of the rows: the bytes each reduce
    partition reads, against its rows times the width estimated from the first 50,000 rows."""
    rng = np.random.default_rng(5)
    rows, partitions = 600_000, 16
    keys = np.where(rng.random(rows) < 1 / 3, 0, rng.integers(1, 50_000, rows))
    frame = pl.DataFrame(
        {
            "id": np.arange(rows),
            "k": keys,
            "v": rng.integers(0, 10_000, rows),
            "s": [f"w{i % 997}" for i in range(rows)],
        }
    )
    frame.write_parquet(tmp_path / "t.parquet", row_group_size=rows)
    read = spark.spark.read.parquet(str(tmp_path / "t.parquet"))
    reduce = F.pmod(F.hash("k"), F.lit(partitions))
    head = read.select(reduce.alias("reduce"), "*").limit(50_000).toArrow()
    widths = partition_widths(
        head.remove_column(0), head.column(0).to_numpy().astype(np.int64), partitions, fallback=60.0
    )
    counts = dict(read.groupBy(reduce.alias("r")).count().collect())
    predicted = np.array([counts.get(r, 0) * widths[r] for r in range(partitions)])

    status = StatusApi(spark)
    before = status.last_stage()
    spark.spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        read.repartition(partitions, "k").write.format("noop").mode("overwrite").save()
    finally:
        spark.spark.conf.unset("spark.sql.adaptive.enabled")
    stages = [s for s in status.stages_after(before) if s["status"] == "COMPLETE"]
    reading = next(s for s in stages if s["shuffleReadBytes"] > 0)
    measured = np.zeros(partitions)
    for task in status.tasks(reading):
        read_metrics = task["taskMetrics"]["shuffleReadMetrics"]
        measured[task["index"]] = read_metrics["localBytesRead"] + read_metrics["remoteBytesRead"]
    hot = int(predicted.argmax())
    assert hot == int(measured.argmax())
    assert predicted[hot] == pytest.approx(measured[hot], rel=0.1)
    assert predicted.sum() == pytest.approx(measured.sum(), rel=0.1)
    # Uncompressed, the rows would be half again as many bytes: the skew rule reads these.
    uncompressed = rows * np.mean([len(row) for row in unsafe_rows(head.remove_column(0))])
    assert measured.sum() < 0.75 * uncompressed
