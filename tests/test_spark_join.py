"""Joins with the hot keys split (``keysplit.spark.join``), against Spark's own join on the
real embedded server (the ``spark`` fixture).

Every result is compared with ``left.join(right, on, how)`` on the same DataFrames as a
multiset of rows (nulls and duplicate rows included), with Spark's column names and types
in Spark's order. The tables are read from Parquet files the tests write: a fact side whose
key 0 holds half the rows, null keys and rows alike in every column; a dimension side with
key 0 three times, keys the facts lack, and null keys.
"""

from __future__ import annotations

import datetime
import importlib
import re
import time
from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

from keysplit import ConfigError, ConfigTypeError, KeyInputError, KeyTypeError
from keysplit.spark import JoinReport, Report, join, skewed
from keysplit.spark.intake import run_settings
from keysplit.spark.join_grid import JoinGrid, grid_shape, key_output, spark_hash
from spark_status import StatusApi

HOWS = ["inner", "left", "right", "full", "left_semi", "left_anti"]
FACT_ROWS = 200_000
KEYS = 5_000


def _facts(rows: int = FACT_ROWS, seed: int = 1) -> pl.DataFrame:
    """Half the rows on key 0, the rest uniform over 1..KEYS, 1 % null keys, and 100 rows
    alike in every column."""
    rng = np.random.default_rng(seed)
    keys = np.where(rng.random(rows) < 0.5, 0, rng.integers(1, KEYS + 1, rows))
    frame = pl.DataFrame(
        {
            "id": np.arange(rows, dtype=np.int64),
            "key": keys.astype(np.int64),
            "v": rng.integers(0, 1000, rows).astype(np.int64),
            "tag": rng.choice(["a", "b", "c"], rows),
        }
    ).with_columns(pl.when(pl.col("id") % 100 == 7).then(None).otherwise(pl.col("key")).alias("key"))
    alike = pl.DataFrame({"id": [-1] * 100, "key": [0] * 100, "v": [1] * 100, "tag": ["alike"] * 100})
    return pl.concat([frame, alike])


def _dimension() -> pl.DataFrame:
    """Keys 0..KEYS once (key 0 three times, key 7 missing), keys the facts lack, null keys;
    a column ``v`` as the facts have."""
    keys = [0, 0, *range(KEYS + 1), *range(KEYS + 100, KEYS + 150)]
    keys.remove(7)
    frame = pl.DataFrame({"key": keys, "v": [k % 13 for k in keys], "name": [f"n{k}" for k in keys]})
    nulls = pl.DataFrame({"key": [None] * 5, "v": list(range(5)), "name": ["null"] * 5})
    return pl.concat([frame, nulls.cast(frame.schema)])


@pytest.fixture(scope="module", autouse=True)
def _shuffled(spark):
    """Both sides shuffled, as tables too big to broadcast are: the tests' tables are small,
    and where Spark broadcasts a side, ``join`` is Spark's join (tested on its own)."""
    with run_settings(spark, {"spark.sql.autoBroadcastJoinThreshold": "-1"}):
        yield


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    directory = tmp_path_factory.mktemp("join")
    _facts().write_parquet(directory / "facts.parquet")
    _dimension().write_parquet(directory / "dimension.parquet")
    read = spark.spark.read.parquet
    return read(str(directory / "facts.parquet")), read(str(directory / "dimension.parquet"))


def _rows(frame) -> pl.DataFrame:
    """A DataFrame's rows in a canonical order, its columns named by position (a join may
    hold two columns of one name)."""
    table = frame.toArrow()
    table = table.rename_columns([f"c{i}" for i in range(table.num_columns)])
    result = pl.from_arrow(table)
    assert isinstance(result, pl.DataFrame)
    return result.sort(result.columns, nulls_last=True)


def _fields(frame) -> list[tuple[str, object]]:
    return [(f.name, f.dataType) for f in frame.schema.fields]


def assert_same_join(ours, theirs) -> None:
    assert_join_gives(ours, _fields(theirs), _rows(theirs))


def assert_join_gives(ours, fields: list[tuple[str, object]], rows: pl.DataFrame) -> None:
    """``ours`` has Spark's join's fields and rows (``rows`` as :func:`_rows` gives them)."""
    assert _fields(ours) == fields
    mine = _rows(ours)
    assert mine.height == rows.height
    assert mine.equals(rows)


@pytest.mark.parametrize("how", HOWS)
def test_every_join_type_equals_sparks_with_the_hot_key_on_either_side(spark, tables, how):
    facts, dimension = tables
    for left, right in ((facts, dimension), (dimension, facts)):
        report: Report[JoinReport] = Report()
        ours = join(left, right, "key", how, report=report)
        assert_same_join(ours, left.join(right, "key", how))
        # The rows with a key: the facts' but their 1 % null keys, the dimension's 5,052.
        assert report.get.left_rows == (FACT_ROWS - FACT_ROWS // 100 + 100 if left is facts else 5_052)
        if how in ("left_semi", "left_anti") and left is dimension:
            # Only the facts' distinct keys are read: nothing is hot.
            assert report.get.hot.height == 0
            continue
        # Key 0 holds half the facts: split, its grid copying only the dimension's 3 rows
        # (of a semi join, its one distinct key).
        grid = report.get.hot.row(0, named=True)
        big, small = ("grid_rows", "grid_columns") if left is facts else ("grid_columns", "grid_rows")
        assert grid["key"] == 0 and grid[big] > 1 and grid[small] == 1
        assert report.get.rows_copied == (1 if how in ("left_semi", "left_anti") else 3) * (grid[big] - 1)
        # Key 0's 100,100 facts, estimated from the sample within the bound given.
        side = "left" if left is facts else "right"
        assert abs(grid[f"{side}_rows"] - 100_100) <= grid[f"{side}_error"] < 10_000


def test_output_skew_is_split_over_a_grid_of_both_sides(spark):
    # Key 0 holds 2,000 rows on the left and 1,000 on the right: 2 M of the 2.01 M output rows.
    left = spark.spark.range(0, 12_000).selectExpr("id", "IF(id < 2000, 0, id) AS k", "id % 7 AS v")
    right = spark.spark.range(0, 11_000).selectExpr("IF(id < 1000, 0, id) AS k", "id AS w")
    for how in ("inner", "full"):
        report: Report[JoinReport] = Report()
        ours = join(left, right, "k", how, report=report)
        theirs = left.join(right, "k", how)
        # 2 M rows of key 0, 9,000 of the keys 2,000..10,999; a full join adds 1,000 rows of
        # each side's own keys.
        assert ours.count() == theirs.count() == (2_009_000 if how == "inner" else 2_011_000)
        assert ours.groupBy("k").sum("v", "w").exceptAll(theirs.groupBy("k").sum("v", "w")).isEmpty()
        row = report.get.hot.row(0, named=True)
        assert row["k"] == 0 and row["grid_rows"] > 1 and row["grid_columns"] > 1
        assert report.get.rows_copied == 2_000 * (row["grid_columns"] - 1) + 1_000 * (row["grid_rows"] - 1)


@pytest.mark.parametrize("kind", ["string", "binary", "date", "int"])
def test_key_types_and_multi_column_keys(spark, tables, kind):
    facts, dimension = tables
    casts = {
        "string": "CAST(key AS STRING)",
        "binary": "CAST(CAST(key AS STRING) AS BINARY)",
        "date": "DATE_ADD(DATE'2020-01-01', CAST(key AS INT))",
        "int": "CAST(key AS INT)",
    }
    left = facts.selectExpr("id", f"{casts[kind]} AS k", "key % 2 AS part", "v")
    right = dimension.selectExpr(f"{casts[kind]} AS k", "key % 2 AS part", "name")
    for how in ("inner", "left_anti", "full"):
        assert_same_join(join(left, right, ["k", "part"], how), left.join(right, ["k", "part"], how))


def test_an_equality_of_columns_keeps_both_key_columns(spark, tables):
    facts, dimension = tables
    left = facts.withColumnRenamed("key", "a")
    right = dimension.withColumnRenamed("key", "b").selectExpr("*", "CAST(b AS INT) AS b32")
    for how in ("inner", "left", "right", "full", "semi", "anti"):
        on = left["a"] == right["b"]
        assert_same_join(join(left, right, on, how), left.join(right, on, how))
    # Two equalities, joined by & or listed; integer keys of two widths compare as Spark's do.
    both = (left["a"] == right["b32"]) & (left["v"] == right["v"])
    assert_same_join(join(left, right, both, "left"), left.join(right, both, "left"))
    listed = [left["a"] == right["b"], left["v"] == right["v"]]
    assert_same_join(join(left, right, listed, "inner"), left.join(right, listed, "inner"))


def test_a_self_join_and_the_skewed_front(spark, tables):
    facts, _ = tables
    small = facts.filter("id % 50 = 0")
    assert_same_join(join(small, small, "key", "inner"), small.join(small, "key", "inner"))
    facts, dimension = tables
    # The front, from statistics gathered when called, over a guard of 2 mean tasks (and no
    # size): its report names the key it split.
    report: Report[JoinReport] = Report()
    ours = skewed(facts, min_skew=2, min_rows=0).join(dimension, "key", "left", report=report)
    assert_same_join(ours, facts.join(dimension, "key", "left"))
    assert 0 in report.get.hot["key"].to_list() and report.get.left_to_spark is None
    with pytest.raises(ConfigError, match="join does not read nulls='raise'"):
        skewed(facts, nulls="raise").join(dimension, "key")


@pytest.mark.parametrize("kind", ["string", "date", "boolean"])
def test_grids_measured_before_the_plan_are_literals_in_it_for_each_literal_key_type(spark, tables, kind):
    # From statistics gathered when called (skewed(df)), the grid is known before the plan is
    # built: a few hot keys of one key column are held as literals (a set and a map) instead of a
    # broadcast join, and a left row of a one-wide grid reads its one cell with no explode.
    # Without a report nothing is observed. Every join type whose marks differ: equal to Spark's.
    facts, dimension = tables
    facts = facts.filter("id % 4 = 0")
    casts = {
        "string": "CAST(key AS STRING)",
        "date": "DATE_ADD(DATE'2020-01-01', CAST(key AS INT))",
        "boolean": "key % 3 = 0",
    }
    left = facts.selectExpr("id", f"{casts[kind]} AS k", "v")
    right = dimension.selectExpr(f"{casts[kind]} AS k", "name")
    if kind == "boolean":
        # Two keys (both hot) and null: one dimension row each, or the output is L·R (and not
        # an aggregate's output, which optimize would not sample).
        right = spark.spark.createDataFrame([(True, "t"), (False, "f"), (None, "n")], "k boolean, name string")
    for how in ("inner", "full", "left_semi"):
        report: Report[JoinReport] = Report()
        ours = skewed(left, min_skew=2, min_rows=0, workers=16).join(right, "k", how)
        plan = spark.explained(ours)
        assert "CollectMetrics" not in plan, plan
        if how == "full":
            assert "__keysplit_join_grid" in plan and "__keysplit_join_cell" in plan, plan
            assert "BroadcastHashJoin" not in plan and "Generate explode" in plan, plan
        else:
            # The hot keys' few right rows are broadcast to where their left rows are read (one
            # grid column: test_hot_keys_of_few_partners_are_joined_map_side).
            assert "__keysplit_join_cell" not in plan and "BroadcastHashJoin" in plan, plan
        assert_same_join(ours, left.join(right, "k", how))
        if kind != "boolean":
            # (Of booleans, every key is hot: adaptive execution drops the other keys' join,
            # whose right side has none, with what it observes, and the report stays pending.)
            reported = skewed(left, min_skew=2, min_rows=0, workers=16).join(right, "k", how, report=report)
            assert_same_join(reported, left.join(right, "k", how))
            assert report.get.hot["map_side"].to_list() == [how != "full"] * report.get.hot.height, report.get.hot


@pytest.mark.parametrize("how", ["inner", "left", "left_semi", "left_anti"])
def test_hot_keys_of_few_partners_are_joined_map_side(spark, tables, how, monkeypatch):
    # Key 0 holds half the facts and 3 dimension rows (a semi or anti join's one distinct key):
    # measured before the plan (skewed(df)), its facts are joined where they are read, against
    # those rows broadcast; no exchange moves them, and nothing is copied. Every other key goes
    # through Spark's own join. Its report counts every row once, in either branch.
    facts, dimension = tables
    report: Report[JoinReport] = Report()
    ours = skewed(facts, min_skew=2, min_rows=0).join(dimension, "key", how, report=report)
    assert_same_join(ours, facts.join(dimension, "key", how))
    hot = report.get.hot.filter(pl.col("key") == 0).row(0, named=True)
    assert hot["map_side"] and hot["grid_columns"] == 1, report.get.hot
    assert report.get.left_rows == FACT_ROWS - FACT_ROWS // 100 + 100
    # (The right side of a semi or anti join: its 5,050 distinct keys.)
    assert report.get.right_rows == (5_052 if how in ("inner", "left") else 5_050)
    assert report.get.rows_copied == 0
    if how in ("inner", "left"):
        # Over the budget of right rows broadcast, the grid copies them instead.
        monkeypatch.setattr(importlib.import_module("keysplit.spark.join"), "MAP_SIDE_ROWS", 2)
        report = Report()
        ours = skewed(facts, min_skew=2, min_rows=0).join(dimension, "key", how, report=report)
        assert_same_join(ours, facts.join(dimension, "key", how))
        assert not report.get.hot["map_side"].any() and report.get.rows_copied > 0, report.get.hot


def test_grids_of_many_hot_keys_or_of_several_key_columns_are_looked_up_in_a_broadcast_table(spark):
    # 20 keys, each 5 % of the rows: each gets a cell of its own, too many for literals; and the
    # same keys as two columns. Each found by a broadcast join of the grid table, as a plan
    # sampling in itself finds them. Of an inner join (each key one right row) they are joined
    # map-side, found in a broadcast table of their keys the same way (every key hot: the join
    # of the others is empty, and adaptive execution drops it with what it observes, so that
    # one is not reported).
    left = spark.spark.range(40_000).selectExpr("id % 20 AS k", "id % 20 % 3 AS part", "id AS v")
    right = spark.spark.range(25).selectExpr("id AS k", "id % 3 AS part", "id * 10 AS w")
    for on in ("k", ["k", "part"]):
        report: Report[JoinReport] = Report()
        ours = skewed(left, min_skew=1, min_rows=0, workers=32).join(right, on, "full", report=report)
        plan = spark.explained(ours)
        assert "BroadcastHashJoin" in plan and "__keysplit_join_grid " not in plan, plan
        assert_same_join(ours, left.join(right, on, "full"))
        assert report.get.hot.height > 16 and not report.get.hot["map_side"].any()
        ours = skewed(left, min_skew=1, min_rows=0, workers=32).join(right, on, "inner")
        plan = spark.explained(ours)
        assert "BroadcastHashJoin" in plan and "__keysplit_join_cell" not in plan, plan
        assert_same_join(ours, left.join(right, on, "inner"))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("inner", "inner"),
        ("left", "left"),
        ("inner", "left_semi"),
        ("left", "left_anti"),
        ("full", "inner"),
        ("inner", "right"),
    ],
)
def test_a_chain_of_joins_on_one_key_keeps_the_first_joins_cells(spark, tables, first, second):
    # The second join reads the first one's output where its exchange put it, key 0 split
    # over its cells, and copies the other side's rows of key 0 to each: Spark shuffles that
    # output no more than it would between two sort-merge joins on one key. A first full
    # join (whose right-only rows have no cell of the left's) or a second right or full one
    # (whose copies could come out unmatched) joins as any two sides.
    facts, dimension = tables
    other = dimension.selectExpr("key", "v * 2 AS w", "name")
    ours = join(join(facts, dimension, "key", first), other, "key", second)
    assert_same_join(ours, facts.join(dimension, "key", first).join(other, "key", second))
    plan = ours._explain_string(mode="simple")
    # The exchanges on (key, cell): the three sides' when the cells are kept; else also the
    # first output's (and the first join's again, in the second's sample).
    exchanged = len(re.findall(r"Exchange hashpartitioning\(__keysplit_join_k0#\d+L, __keysplit_join_cell", plan))
    if first in ("inner", "left") and second in ("inner", "left", "left_semi", "left_anti"):
        assert exchanged == 3, plan
    else:
        assert exchanged >= 4, plan


#: Each shuffle partition a task of its own: the join's tasks are its output's partitions.
_ONE_TASK_PER_PARTITION = {"spark.sql.adaptive.coalescePartitions.enabled": "false"}


def _rows_per_task(frame) -> list[int]:
    from pyspark.sql import functions as F

    counts = frame.select(F.spark_partition_id().alias("p")).groupBy("p").count().toArrow()
    return counts.column("count").to_pylist()


def test_the_hot_key_and_the_null_keys_land_on_partitions_of_their_own(spark, tables):
    # Spark's own join puts key 0's 100,000 facts on one task; here no join task holds more
    # than twice the mean (the hash of each cell's extra key is chosen for its partition).
    # Null keys, which never match, are spread by their rows' hash.
    facts, dimension = tables
    with run_settings(spark, {**_ONE_TASK_PER_PARTITION, "spark.sql.shuffle.partitions": "16"}):
        ours = _rows_per_task(join(facts, dimension, "key", "inner"))
        theirs = _rows_per_task(facts.join(dimension, "key", "inner"))
        # A left join whose left side holds 40 % null keys: Spark hashes them all to one task.
        holed = facts.selectExpr("id", "IF(id % 5 < 2, NULL, key) AS key", "v")
        null_ours = _rows_per_task(join(holed, dimension, "key", "left"))
        null_theirs = _rows_per_task(holed.join(dimension, "key", "left"))
    assert sum(ours) == sum(theirs)
    assert max(theirs) > 0.45 * sum(theirs)
    assert max(ours) <= 2 * sum(ours) / 16
    assert sum(null_ours) == sum(null_theirs)
    assert max(null_theirs) > 0.3 * sum(null_theirs)
    assert max(null_ours) <= 2 * sum(null_ours) / 16


def test_words_under_a_mean_task_are_placed_so_that_no_task_holds_twice_the_mean(spark, words):
    # Zipf's words over 32 tasks: "the" (8 %), "and" (6 %) and "of" (4.5 %, its one dictionary
    # row unsampled, sized by its output all the same) are split; "in", "to", ... (under 2 %,
    # a mean task's work or less) are placed whole, heaviest first, on the least-loaded
    # partitions. Hashed, "of" and a few of them shared a task: 2.3x the mean.
    text, dictionary = words
    with run_settings(spark, {**_ONE_TASK_PER_PARTITION, "spark.sql.shuffle.partitions": "32"}):
        report: Report[JoinReport] = Report()
        ours = _rows_per_task(join(text, dictionary, "key", "full", report=report))
        theirs = _rows_per_task(text.join(dictionary, "key", "full"))
    assert sum(ours) == sum(theirs)
    assert max(theirs) > 2.5 * sum(theirs) / 32
    assert max(ours) < 2 * sum(ours) / 32
    hot = report.get.hot
    split = hot.filter(pl.col("grid_rows") * pl.col("grid_columns") > 1)["key"].to_list()
    placed = hot.filter((pl.col("grid_rows") == 1) & (pl.col("grid_columns") == 1))["key"].to_list()
    assert {"the", "and", "of"} <= set(split) and {"in", "to"} <= set(placed)


def test_the_result_is_lazy(spark, tables):
    # Given their schemas, the files are read without a job of Spark's own (inferring a
    # Parquet schema is one).
    facts, dimension = (spark.spark.read.schema(t.schema).parquet(*t.inputFiles()) for t in tables)
    api = StatusApi(spark)
    called = time.time()
    report: Report[JoinReport] = Report()
    result = join(facts, dimension, "key", "left", report=report)
    assert api.jobs_submitted_since(called) == []
    assert not report.ready
    assert result.count() == facts.join(dimension, "key", "left").count()
    assert report.get.hot.height >= 1 and report.get.rows_copied > 0


def test_bad_input_is_refused_before_any_job(spark, tables):
    facts, dimension = tables
    with pytest.raises(KeyInputError, match=r"\['nope'\] is not a column of the left side"):
        join(facts, dimension, "nope")
    with pytest.raises(KeyInputError, match="right side"):
        join(facts, dimension.withColumnRenamed("key", "k"), "key")
    with pytest.raises(KeyTypeError, match="left side is bigint, the right side string.*cast"):
        join(facts, dimension.withColumn("key", dimension["key"].cast("string")), "key")
    with pytest.raises(ConfigError, match="crossJoin"):
        join(facts, dimension, "key", "cross")
    with pytest.raises(ConfigError, match="'sideways' is not a join type"):
        join(facts, dimension, "key", "sideways")
    with pytest.raises(ConfigError, match=r"workers must be an int in \[1"):
        join(facts, dimension, "key", workers=0)
    with pytest.raises(ConfigError, match="equalities of columns"):
        join(facts, dimension, facts["key"] < dimension["key"])
    with pytest.raises(ConfigError, match="same side"):
        join(facts, dimension, facts["key"] == facts["v"])
    with pytest.raises(ConfigTypeError, match="Spark DataFrame"):
        join(facts, _dimension(), "key")
    # A join's output holding two columns "v", joined on "v": ambiguous, as in Spark.
    with pytest.raises(KeyInputError, match=r"\['v'\] names two columns of the left side.*toDF"):
        join(facts.join(dimension, "key"), dimension, "v")


def test_dates_come_back_as_dates(spark):
    left = spark.spark.createDataFrame([(datetime.date(2024, 1, d % 3 + 1), d) for d in range(30)], "day date, n int")
    right = spark.spark.createDataFrame([(datetime.date(2024, 1, 1), "x")], "day date, label string")
    assert_same_join(join(left, right, "day", "left"), left.join(right, "day", "left"))


@pytest.mark.parametrize(
    ("cells", "left", "right"), [(8, 100_000, 3), (8, 3, 100_000), (16, 2_000, 1_000), (7, 50, 50)]
)
def test_the_grid_copies_the_fewest_rows(cells, left, right):
    rows, columns = grid_shape(cells, left, right, copy_left=True)
    assert rows * columns >= cells
    best = min(left * -(-cells // r) + right * r for r in range(1, cells + 1))
    assert left * columns + right * rows == best
    # A side with no rows is never copied to; a semi join never copies a left row.
    assert grid_shape(cells, left, 0, copy_left=True) == (cells, 1)
    assert grid_shape(cells, 0, right, copy_left=True) == (1, cells)
    assert grid_shape(cells, left, right, copy_left=False) == (cells, 1)


def _salts(grid: dict) -> list[int]:
    """A grid task's output row's salts, row-major: the first ``r·c`` of its cells."""
    from keysplit.spark.join_grid import CELLS, GRID_COLUMNS, GRID_ROWS

    return grid[CELLS][: grid[GRID_ROWS] * grid[GRID_COLUMNS]]


def test_the_grid_task_puts_each_cell_on_a_partition_of_its_own():
    import pyarrow as pa

    from keysplit.spark.join_grid import KEY_HASH, LEFT_ROWS, RIGHT_ROWS, TOTALS, WORK

    partitions, workers = 8, 8
    # Two partitions' heaviest keys and totals: key 10 holds 5/8 of the work, key 20 3/8 of
    # it less a little, key 30 shares key 10's hash but is lighter, key 40 is cold.
    rows = [
        (111, 10, 50_000, 1, 50_001.0 + 50_000, False),
        (222, 20, 29_000, 1, 29_001.0 + 29_000, False),
        (111, 30, 9_000, 1, 9_001.0 + 9_000, False),
        (333, 40, 10, 1, 21.0, False),
        (None, None, 60_000, 2, 120_000.0, True),
        (None, None, 38_010, 2, 76_022.0, True),
    ]
    names = (KEY_HASH, "k", LEFT_ROWS, RIGHT_ROWS, WORK, TOTALS)
    types = (pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.float64(), pa.bool_())
    table = pa.table([pa.array([row[i] for row in rows], types[i]) for i in range(len(names))], names=names)
    task = JoinGrid(("k",), ("bigint",), partitions, workers, copy_left=True)
    out = pa.Table.from_batches(list(task(iter(table.to_batches()))))
    grids = {row["k"]: row for row in out.to_pylist()}
    assert set(grids) == {10, 20, None}  # key 30 lost its hash to the heavier key 10; key 40 is cold
    assert grids[None][LEFT_ROWS] == 98_010 and grids[None][RIGHT_ROWS] == 4 and _salts(grids[None]) == []
    placed = [
        spark_hash((key, salt), ("bigint", "int")) % partitions for key in (10, 20) for salt in _salts(grids[key])
    ]
    # 5 + 3 cells (⌈8 · work / W⌉) on the 8 partitions: one each.
    assert [len(_salts(grids[key])) for key in (10, 20)] == [5, 3]
    assert sorted(placed) == list(range(partitions))


def test_a_sampled_key_whose_other_side_the_sample_missed_is_sized_for_its_output():
    import pyarrow as pa

    from keysplit.spark.join_grid import (
        CELLS,
        GRID_COLUMNS,
        GRID_ROWS,
        KEY_HASH,
        LEFT_ROWS,
        RIGHT_ROWS,
        TOTALS,
        WORK,
        JoinGrid,
    )

    # Counts from a 2 % sample: key 1's 1,000 sampled left rows (50,000), no right row seen
    # (a dimension's few rows of it may still be there, and each left row would output one
    # per row); key 2 seen on both sides, its output most of the work; key 3 is cold.
    fraction, partitions, workers = 0.02, 16, 16
    rows = [
        (11, 1, 50_000, 0, 50_000.0, False),
        (22, 2, 10_000, 50, 10_050.0 + 10_000 * 50, False),
        (33, 3, 1_000, 0, 1_000.0, False),
        (None, None, 100_000, 5_000, 600_000.0, True),
    ]
    names = (KEY_HASH, "k", LEFT_ROWS, RIGHT_ROWS, WORK, TOTALS)
    types = (pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.float64(), pa.bool_())
    table = pa.table([pa.array([row[i] for row in rows], types[i]) for i in range(len(names))], names=names)
    task = JoinGrid(("k",), ("bigint",), partitions, workers, copy_left=True, fraction=fraction)
    # The rule of three: no row in a 2 % sample bounds the count by 150 (95 %).
    assert task.upper(0) == pytest.approx(150) and task.upper(50_000) > 50_000
    assert JoinGrid(("k",), ("bigint",), 8, 8, copy_left=True).upper(1_234) == 1_234  # exact counts
    grids = {row["k"]: row for row in pa.Table.from_batches(list(task(iter(table.to_batches())))).to_pylist()}
    assert set(grids) == {1, 2, None}
    # Key 1's sampled work is 4/3 of a mean task's: 2 cells. But with the up to 150 right rows
    # the sample may have missed it could output 50,000 · 150 rows: every partition; its left
    # rows are never copied (no right row is known to exist), the right ones down its column.
    assert (grids[1][GRID_ROWS], grids[1][GRID_COLUMNS]) == (partitions, 1)
    assert grids[1][CELLS] == _salts(grids[1]) * 2
    # Key 2 (13.6 mean tasks' work): every partition too, its 50 right rows copied, not its
    # 10,000 left ones.
    assert (grids[2][GRID_ROWS], grids[2][GRID_COLUMNS]) == (partitions, 1)


def test_a_warm_key_is_placed_whole_and_a_key_seen_on_one_side_outputs_its_rows():
    # 32 tasks of 1,000 work each (exact counts): a key of a quarter of that or less is left
    # to Spark's hash, one of up to a whole mean task's is placed whole (one cell), a heavier
    # one is split over enough cells.
    task = JoinGrid(("k",), ("bigint",), 32, 32, copy_left=True)
    assert [task.cells(w, 0, float(w), 32_000.0) for w in (250, 251, 1_000)] == [0, 1, 1]
    assert task.cells(1_500, 1, 1_500 + 1 + key_output(1_500, 1), 32_000.0) == 4
    # A fact key whose one dimension row the sample missed still outputs its rows (an outer
    # join's null-extended ones, or the matched ones the sample did not see).
    assert (key_output(36_700, 0), key_output(0, 50), key_output(3, 4)) == (36_700, 50, 12)


def test_a_grid_of_more_cells_than_partitions_never_repeats_a_salt():
    import pyarrow as pa

    from keysplit.spark.join_grid import CELLS, KEY_HASH, LEFT_ROWS, RIGHT_ROWS, TOTALS, WORK

    # One key hot on both sides over 5 partitions: 5 cells wanted, a grid of 2 × 3, one
    # partition twice; a repeated salt would make two cells one, and their rows meet twice.
    # Also for a key type the ported hash does not cover.
    rows = [(7, 1, 1_000, 1_000, 1_002_000.0, False), (None, None, 1_100, 1_100, 1_002_000.0 + 200, True)]
    names = (KEY_HASH, "k", LEFT_ROWS, RIGHT_ROWS, WORK, TOTALS)
    types = (pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.float64(), pa.bool_())
    table = pa.table([pa.array([row[i] for row in rows], types[i]) for i in range(len(names))], names=names)
    for kinds, workers in ((("bigint",), 5), (("bigint",), 9), (("decimal(20,0)",), 9)):
        task = JoinGrid(("k",), kinds, 5, workers, copy_left=True)
        grid = pa.Table.from_batches(list(task(iter(table.to_batches())))).to_pylist()[0]
        salts = _salts(grid)
        assert len(salts) == grid["__keysplit_join_grid_rows"] * grid["__keysplit_join_grid_columns"] == 6
        assert len(set(salts)) == len(salts)
        # Column-major too: a right row's cells, down its grid column, side by side.
        rows_, columns = grid["__keysplit_join_grid_rows"], grid["__keysplit_join_grid_columns"]
        assert grid[CELLS] == salts + [salts[a * columns + b] for b in range(columns) for a in range(rows_)]


def test_spark_hash_is_sparks(spark):
    # The cells' partitions are computed in Python: they must be the ones Spark's exchange picks.
    frame = spark.spark.sql(
        """SELECT id, CAST(id * 7919 - 40000 AS BIGINT) AS l, CAST(id AS INT) AS i, CAST(id % 100 AS SMALLINT) AS s,
                  CAST(id % 100 AS TINYINT) AS t, id % 2 = 0 AS b, DATE_ADD(DATE'1969-12-25', CAST(id AS INT)) AS d,
                  REPEAT(CHR(65 + id % 50), CAST(id % 9 AS INT)) || 'é' AS str,
                  CAST(REPEAT(CHR(200 + id % 50), CAST(id % 7 AS INT)) AS BINARY) AS bin,
                  IF(id % 5 = 0, NULL, id) AS n
           FROM range(0, 400)"""
    )
    from pyspark.sql import functions as F

    kinds = {
        "l": "bigint",
        "i": "int",
        "s": "smallint",
        "t": "tinyint",
        "b": "boolean",
        "d": "date",
        "str": "string",
        "bin": "binary",
        "n": "bigint",
    }
    spark_side = (
        frame.select(
            *kinds, *[F.hash(F.col(c), F.col("i")).alias(f"h_{c}") for c in kinds], F.hash(*kinds).alias("h_all")
        )
        .toArrow()
        .to_pylist()
    )
    for row in spark_side:
        for c, kind in kinds.items():
            assert spark_hash((row[c], row["i"]), (kind, "int")) == row[f"h_{c}"], (c, row[c])
        assert spark_hash(tuple(row[c] for c in kinds), tuple(kinds.values())) == row["h_all"]


@pytest.fixture(scope="module")
def words(spark, tmp_path_factory):
    """Real identifiers: the King James Bible's words in text order ("the" 8 % of them), and
    a dictionary of its words holding "the" and "and" three times each, lacking "god", and
    with words the text lacks."""
    from keysplit import datasets

    text = pl.concat(list(datasets.kjv(batch_rows=1_000_000))).with_row_index("position")
    vocabulary = text["key"].unique().sort().filter(text["key"].unique().sort() != "god")
    extra = pl.Series("key", ["the", "the", "and", "and", "zyzzyva", "quokka"])
    dictionary = pl.DataFrame({"key": pl.concat([vocabulary, extra])}).with_columns(
        pl.col("key").str.len_chars().alias("letters"), pl.int_range(pl.len()).alias("entry")
    )
    directory = tmp_path_factory.mktemp("words")
    text.with_columns(pl.col("position").cast(pl.Int64)).write_parquet(directory / "text.parquet")
    dictionary.write_parquet(directory / "dictionary.parquet")
    read = spark.spark.read.parquet
    return read(str(directory / "text.parquet")), read(str(directory / "dictionary.parquet"))


@pytest.fixture(scope="module")
def words_joined_by_spark(words) -> Callable[[str], tuple[list[tuple[str, object]], pl.DataFrame]]:
    """Spark's own join of the words with the dictionary on "key": its fields and rows per join
    type, computed once for the tests below. A join's rows do not depend on its plan, so
    these are the rows Spark gives whether it shuffles both sides or broadcasts one."""
    text, dictionary = words
    joined: dict[str, tuple[list[tuple[str, object]], pl.DataFrame]] = {}

    def of(how: str) -> tuple[list[tuple[str, object]], pl.DataFrame]:
        if how not in joined:
            theirs = text.join(dictionary, "key", how)
            joined[how] = (_fields(theirs), _rows(theirs))
        return joined[how]

    return of


# The full outer join of the words is test_where_spark_broadcasts_a_side_join_is_sparks_join's
# (no side of a full outer join is broadcast, so the plan and the assertions are these).
@pytest.mark.parametrize("how", [how for how in HOWS if how != "full"])
def test_real_words_joined_with_a_dictionary_equal_sparks_join(spark, words, words_joined_by_spark, how):
    text, dictionary = words
    report: Report[JoinReport] = Report()
    assert_join_gives(join(text, dictionary, "key", how, workers=32, report=report), *words_joined_by_spark(how))
    split = report.get.hot["key"].to_list()
    assert "the" in split and "and" in split


@pytest.mark.parametrize("how", HOWS)
def test_where_spark_broadcasts_a_side_join_is_sparks_join(spark, words, words_joined_by_spark, how):
    # Under Spark's default broadcast threshold the dictionary (a few hundred KB) is
    # broadcast wherever the join type lets Spark build it: the text is not shuffled, no
    # task holds a word's rows, and join steps aside. A full outer join cannot broadcast.
    text, dictionary = words
    with run_settings(spark, {"spark.sql.autoBroadcastJoinThreshold": "10MB"}):
        report: Report[JoinReport] = Report()
        ours = join(text, dictionary, "key", how, workers=32, report=report)
        assert_join_gives(ours, *words_joined_by_spark(how))
        plan = spark.explained(ours)
        if how in ("inner", "left", "left_semi", "left_anti"):
            assert report.get.broadcast == "right" and report.get.hot.height == 0 and report.get.rows_copied == 0
            # None of keysplit's columns (all named __keysplit_*): a path may hold "keysplit".
            assert "BuildRight" in plan and "__keysplit" not in plan, plan
            assert "Spark broadcasts the right side" in repr(report.get)
            # Counted as the rows passed: every word of the text, every entry of the dictionary.
            assert (report.get.left_rows, report.get.right_rows) == (text.count(), dictionary.count())

            # Without a report, Spark's own plan, node for node.
            def physical(frame) -> str:
                return re.sub(r"plan_id=\d+", "", spark.explained(frame))

            assert physical(join(text, dictionary, "key", how)) == physical(text.join(dictionary, "key", how))
        elif how == "full":
            split = report.get.hot["key"].to_list()
            assert report.get.broadcast is None and "the" in split and "and" in split
        # An equality of columns, and a broadcast hint on a side the threshold would not pick.
        renamed = dictionary.withColumnRenamed("key", "word")
        on = text["key"] == renamed["word"]
        assert_same_join(join(text, renamed, on, how), text.join(renamed, on, how))


def test_a_broadcast_hint_on_a_side_the_threshold_would_not_pick_is_sparks_join(spark, words, words_joined_by_spark):
    # The module's threshold (-1) broadcasts nothing; the hint does.
    text, dictionary = words
    hinted = join(text, dictionary.hint("broadcast"), "key", "left", report=(hint := Report()))
    assert_join_gives(hinted, *words_joined_by_spark("left"))
    assert hint.get.broadcast == "right"
