"""``explain_skew`` on the real embedded server (the ``spark`` fixture): each verdict is
checked against what Spark's adaptive execution then did to the same query, read from
the final plan in Spark's REST status API, and the measured hot keys against exact counts.

The tables are Parquet files the tests write: ``facts`` (key 0 holds half the rows, in
every file, read as about eight map tasks), ``dim`` (one row per key), and ``clustered``
(key 0's rows all in one file, one row group: one map task writes them).
"""

from __future__ import annotations

import contextlib

import numpy as np
import polars as pl
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from keysplit import ConfigError, datasets
from keysplit.spark import Report, explain_skew, optimize, skew_table, skewed
from spark_status import MARKER, StatusApi

ROWS = 400_000
KEYS = 2_000
PARTITIONS = 16
#: Settings under which the hot partition of ``facts`` (about 200,000 rows) is over the
#: skew threshold: what is left to stop a split is the rule under test.
LOW_THRESHOLD = {
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "256KB",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "256KB",
}
BASE = {
    "spark.sql.shuffle.partitions": str(PARTITIONS),
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.files.maxPartitionBytes": "512KB",
}


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    rng = np.random.default_rng(11)
    keys = np.where(rng.random(ROWS) < 0.5, 0, rng.integers(1, KEYS, ROWS)).astype(np.int64)
    facts = pl.DataFrame({"id": np.arange(ROWS, dtype=np.int64), "k": keys, "v": rng.integers(0, 10_000, ROWS)})
    directory = tmp_path_factory.mktemp("explain")
    paths = {}
    rest = facts.filter(pl.col("k") != 0)
    for name, parts in (
        ("facts", [facts[p] for p in np.array_split(np.arange(ROWS), 8)]),
        ("dim", [pl.DataFrame({"k": np.arange(KEYS, dtype=np.int64), "w": np.arange(KEYS) % 7})]),
        ("clustered", [facts.filter(pl.col("k") == 0)] + [rest[p] for p in np.array_split(np.arange(rest.height), 7)]),
    ):
        folder = directory / name
        folder.mkdir()
        for i, part in enumerate(parts):
            part.write_parquet(folder / f"part-{i}.parquet", row_group_size=ROWS)
        paths[name] = str(folder)
    read = {name: spark.spark.read.parquet(path) for name, path in paths.items()}
    return read, facts


@contextlib.contextmanager
def settings(spark, **extra: str):
    conf = spark.spark.conf
    wanted = {**BASE, **extra}
    before = {name: conf.get(name, None) for name in wanted}
    for name, value in wanted.items():
        conf.set(name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                conf.unset(name)
            else:
                conf.set(name, value)


def spark_final_plan(spark, query) -> str:
    """Runs ``query`` (Spark's own plan) and returns its final adaptive plan's text, from
    Spark's REST status API."""
    status = StatusApi(spark)
    status.caught_up()
    first = len(status.executions())
    query.write.format("noop").mode("overwrite").save()
    status.caught_up()
    runs = [e for e in status.executions(offset=first, plans=True) if MARKER not in e["planDescription"]]
    assert runs and all(e["status"] != "RUNNING" for e in runs), runs
    return "\n".join(e["planDescription"] for e in runs)


def straggler_share(status: StatusApi, after_stage: int, read: str = "records") -> float:
    """In the stage after ``after_stage`` whose largest task reads the most shuffle records
    (or bytes), that task's share of them: the query's straggler among the tasks of keyed
    operators."""
    largest, total = 0, 1

    def amount(metrics: dict) -> int:
        return metrics["recordsRead"] if read == "records" else metrics["localBytesRead"] + metrics["remoteBytesRead"]

    for stage in status.stages_after(after_stage):
        if stage["status"] != "COMPLETE":
            continue
        reads = [amount(t["taskMetrics"]["shuffleReadMetrics"]) for t in status.tasks(stage)]
        if reads and max(reads) > largest:
            largest, total = max(reads), sum(reads)
    return largest / total


def spark_split(plan: str) -> bool:
    """Whether the final plan has a sort-merge join adaptive execution split (Spark prints
    it ``SortMergeJoin(skew=true)``)."""
    return "SortMergeJoin(skew=true)" in plan


def only(explained: pl.DataFrame, prefix: str) -> dict:
    rows = [row for row in explained.iter_rows(named=True) if row["operator"].startswith(prefix)]
    assert len(rows) == 1, explained
    return rows[0]


def test_join_then_aggregate_names_the_hot_key_the_rule_and_the_call(spark, tables):
    read, facts = tables
    query = read["facts"].join(read["dim"], "k").groupBy("k").agg(F.sum(F.col("v") * F.col("w")).alias("total"))
    with settings(spark, **LOW_THRESHOLD):
        explained = explain_skew(query)
        join = only(explained, "join")
        assert join["spark_splits"] is False and join["rule"] == "extra shuffle"
        assert "groupBy(k)" in join["why"] and "forceOptimizeSkewedJoin" in join["why"]
        assert join["fix"] == "skewed(left).join(right, 'k', 'inner')"
        hot = [h for h in join["hot_keys"] if h["input"] == "left"]
        exact = (facts["k"] == 0).mean()
        assert [h["key"] for h in hot] == ["0"] and hot[0]["share_low"] <= exact <= hot[0]["share_high"]
        assert hot[0]["share_high"] - hot[0]["share_low"] < 0.01
        aggregate = only(explained, "groupBy(k)")
        assert aggregate["rule"] == "no shuffle of its own"
        assert aggregate["hottest_task_share"] == join["hottest_task_share"]
        # What Spark then did: no split.
        assert not spark_split(spark_final_plan(spark, query))
    # At Spark's default threshold that is the first reason, and the veto is named as well.
    with settings(spark):
        join = only(explain_skew(query), "join")
        assert join["rule"] == "threshold" and "over it, still no split" in join["why"]
        assert "groupBy(k)" in join["why"] and join["fix"] == "skewed(left).join(right, 'k', 'inner')"
    # With the veto lifted Spark splits it and shuffles the join's output, by key, to the
    # aggregate (planned without partial aggregation): the hot key's output rows meet there.
    with settings(spark, **LOW_THRESHOLD, **{"spark.sql.adaptive.forceOptimizeSkewedJoin": "true"}):
        explained = explain_skew(query)
        join = only(explained, "join")
        assert join["spark_splits"] is True and join["rule"] == "forced split"
        assert join["hottest_task_share"] < 0.2
        aggregate = only(explained, "groupBy(k)")
        assert aggregate["rule"] == "extra shuffle" and "no partial aggregation" in aggregate["why"]
        assert aggregate["fix"] == "skewed(left).join(right, 'k', 'inner')"
        stages = StatusApi(spark)
        before = stages.last_stage()
        assert spark_split(spark_final_plan(spark, query))
        measured = straggler_share(stages, before)
        assert measured > 0.4 and aggregate["hottest_task_share"] == pytest.approx(measured, rel=0.25)


def test_join_rules_agree_with_spark_final_plan(spark, tables):
    read, _ = tables
    facts, dim, clustered = read["facts"], read["dim"], read["clustered"]
    cases = [
        ("inner, over the threshold", facts.join(dim, "k"), LOW_THRESHOLD, True, "splits"),
        ("inner, default threshold", facts.join(dim, "k"), {}, False, "threshold"),
        ("hot on the null-supplying side", dim.join(facts, "k", "left"), LOW_THRESHOLD, False, "join type"),
        ("full outer", facts.join(dim, "k", "full"), LOW_THRESHOLD, False, "join type"),
        ("left outer, hot on the kept side", facts.join(dim, "k", "left"), LOW_THRESHOLD, True, "splits"),
        ("one map task", clustered.join(dim, "k"), LOW_THRESHOLD, True, "map blocks"),
    ]
    for name, query, extra, splits, rule in cases:
        with settings(spark, **extra):
            join = only(explain_skew(query), "join")
            assert (join["spark_splits"], join["rule"]) == (splits, rule), (name, join)
            assert spark_split(spark_final_plan(spark, query)) == splits, name
            assert (join["fix"] is None) == (rule == "splits"), name


def test_chain_of_joins_and_broadcast(spark, tables):
    read, _ = tables
    facts, dim = read["facts"], read["dim"]
    chain = facts.join(dim, "k").join(dim.withColumnRenamed("w", "u"), "k")
    with settings(spark, **LOW_THRESHOLD):
        explained = explain_skew(chain)
        rules = [row["rule"] for row in explained.iter_rows(named=True)]
        assert rules == ["extra shuffle", "not two shuffles"], explained
        assert not spark_split(spark_final_plan(spark, chain))
    with settings(spark, **{"spark.sql.autoBroadcastJoinThreshold": "10MB"}):
        join = only(explain_skew(facts.join(dim, "k")), "join")
        assert join["rule"] == "broadcast" and join["fix"] is None
        assert "BroadcastHashJoin" in spark_final_plan(spark, facts.join(dim, "k"))


def test_a_real_join_then_median(spark, tmp_path):
    """NYC's flights of 2013 joined to their carriers' names, then a median per carrier (UA
    holds 17 % of the flights): the hot key is named, the straggling operator is the
    aggregate whichever way Spark joins, and the call that splits it is named."""
    flights = pl.concat(datasets.nycflights(key="carrier")).rename({"key": "carrier"})
    names = pl.DataFrame({"carrier": sorted(flights["carrier"].unique()), "name": "an airline"})
    for name, table in (("flights", flights), ("carriers", names)):
        table.write_parquet(tmp_path / f"{name}.parquet")
    read = {name: spark.spark.read.parquet(str(tmp_path / f"{name}.parquet")) for name in ("flights", "carriers")}
    query = (
        read["flights"]
        .join(read["carriers"], "carrier")
        .groupBy("carrier")
        .agg(F.median(F.unix_timestamp("timestamp")).alias("middle"))
    )
    exact = flights["carrier"].value_counts().sort("count", descending=True)
    share = exact["count"][0] / flights.height
    assert exact["carrier"][0] == "UA"

    def names_the_hot_key(row: dict) -> bool:
        hot = {h["key"]: h for h in row["hot_keys"] if h["input"] in ("left", "input")}
        return row["spark_splits"] is False and hot["UA"]["share_low"] <= share <= hot["UA"]["share_high"]

    # Spark broadcasts the carriers: the aggregate shuffles the joined rows by carrier itself.
    with settings(spark, **{"spark.sql.autoBroadcastJoinThreshold": "10MB"}):
        explained = explain_skew(query)
        assert only(explained, "join")["rule"] == "broadcast", explained
        straggler = only(explained, "groupBy")
        assert straggler["rule"] == "not a join" and "adaptive execution splits joins only" in straggler["why"]
        assert straggler["fix"].startswith("skewed(df).groupBy('carrier').agg(")
        assert names_the_hot_key(straggler)
        assert "BroadcastHashJoin" in spark_final_plan(spark, query)
    # A shuffled join: the aggregate runs in the join's tasks, and the join straggles.
    with settings(spark):
        explained = explain_skew(query)
        straggler = only(explained, "join")
        assert straggler["rule"] == "threshold" and "skew threshold" in straggler["why"]
        assert straggler["fix"] == "skewed(left).join(right, 'carrier', 'inner')"
        assert names_the_hot_key(straggler)
        assert only(explained, "groupBy")["rule"] == "no shuffle of its own"
        assert not spark_split(spark_final_plan(spark, query))


def test_window_and_aggregates(spark, tables):
    read, facts = tables
    frame = read["facts"]
    with settings(spark):
        window = frame.withColumns({"run": F.sum("v").over(Window.partitionBy("k").orderBy("id"))})
        row = only(explain_skew(window), "window")
        assert not row["spark_splits"] and row["rule"] == "not a join"
        assert row["fix"] == "skewed(df).withColumns({...})"
        # The blocks are counted from every row (the keys from a sample): the predicted
        # hottest task holds the rows of the partition Spark's exchange sends key 0 to.
        partition_of = pl.from_arrow(
            spark.spark.range(KEYS)
            .select(F.col("id").alias("k"), F.pmod(F.hash("id"), F.lit(PARTITIONS)).alias("p"))
            .toArrow()
        )
        loads = facts.join(partition_of, on="k").group_by("p").len()["len"]
        assert row["hottest_task_share"] == pytest.approx(loads.max() / ROWS, abs=1e-12)
        assert [h["key"] for h in row["hot_keys"]] == ["0"]

        median = only(explain_skew(frame.groupBy("k").agg(F.median("id"), F.sum("v"))), "groupBy")
        assert median["rule"] == "not a join" and median["fix"].startswith("skewed(df).groupBy('k').agg(")
        combinable = only(explain_skew(frame.groupBy("k").agg(F.sum("v"))), "groupBy")
        assert combinable["rule"] == "combinable" and combinable["fix"] is None
        assert combinable["hottest_task_share"] < 0.2
        listed = only(explain_skew(frame.groupBy("k").agg(F.collect_list("id"))), "groupBy")
        assert listed["fix"] is None and "no split helps" in listed["why"]
        ties = frame.groupBy("k").agg(F.median(F.col("v") % 3))
        few = only(explain_skew(ties), "groupBy")
        assert few["rule"] == "few values"
        # Partial aggregation sends a key's value->count entries: a hot key of three values
        # sends three a map task, and its partition's bytes are near a mean partition's.
        status = StatusApi(spark)
        before = status.last_stage()
        ties.write.format("noop").mode("overwrite").save()
        assert few["hottest_task_share"] == pytest.approx(straggler_share(status, before, "bytes"), rel=0.25)
        grouped = only(explain_skew(frame.groupBy("k").applyInPandas(lambda p: p, frame.schema)), "groupBy")
        assert grouped["rule"] == "not a join" and "applyInPandas(f, schema, merge=" in grouped["fix"]
        deduplicated = only(explain_skew(frame.dropDuplicates(["k"])), "dropDuplicates")
        assert deduplicated["rule"] == "combinable" and deduplicated["fix"] is None


def test_a_repartition_by_value_and_a_sort_with_heavy_ties_are_flagged(spark, tables):
    # Key 0 holds half the facts: repartition("k") gives it one task (its partition's rows,
    # counted), and so does a range partition of a sort on k; a sort whose key is unique has
    # no tie. An aggregate above the sort is measured through it, as before it.
    read, facts = tables
    frame = read["facts"]
    with settings(spark):
        repartitioned = only(explain_skew(frame.repartition("k")), "repartition")
        assert repartitioned["rule"] == "one task a value" and not repartitioned["spark_splits"]
        assert repartitioned["fix"] == "skewed(df).write.partitionBy('k')"
        assert [h["key"] for h in repartitioned["hot_keys"]] == ["0"]
        status = StatusApi(spark)
        before = status.last_stage()
        frame.repartition("k").write.format("noop").mode("overwrite").save()
        assert repartitioned["hottest_task_share"] == pytest.approx(straggler_share(status, before), abs=1e-9)
        ordered = only(explain_skew(frame.orderBy(F.col("k").desc())), "orderBy")
        assert ordered["rule"] == "heavy ties" and ordered["fix"] == "skewed(df).orderBy('k')"
        assert ordered["hottest_task_share"] == pytest.approx(0.5, abs=0.02)
        # A top-N sorts no range partition: not flagged.
        assert explain_skew(frame.orderBy("k").limit(10)).height == 0
        unique = only(explain_skew(frame.orderBy("id")), "orderBy")
        assert unique["rule"] == "no hot key" and unique["fix"] is None
        above = explain_skew(frame.orderBy("id").groupBy("k").agg(F.median("id")))
        assert above["rule"].to_list() == ["no hot key", "not a join"]
        assert above["hottest_task_share"][1] is not None
        plan = Report()
        optimize(frame.repartition("k"), report=plan)
        assert [d.rule for d in plan.get.operators] == ["not rewritten"]


def test_no_keyed_operator_and_printing(spark, tables, capsys):
    read, _ = tables
    with settings(spark):
        assert explain_skew(read["facts"].where("v > 3")).height == 0
        assert "nothing moves rows by key" in skew_table(explain_skew(read["facts"]))
        skewed(read["dim"].join(read["facts"], "k", "left")).explain_skew()
    printed = capsys.readouterr().out
    assert "Spark will not split it" in printed and "hot key 0 on the right" in printed
    assert "fix: skewed(left).join(right, 'k', 'left')" in printed


def test_sql_text_and_streams_are_said_so(spark, tables):
    read, _ = tables
    read["facts"].createOrReplaceTempView("explain_facts")
    with settings(spark):
        sql = explain_skew(spark.spark.sql("SELECT k, count(*) FROM explain_facts GROUP BY k"))
        assert sql["rule"].to_list() == ["not read"] and "DataFrame API" in sql["why"][0]
        facts, dim = read["facts"], read["dim"]
        theta = only(explain_skew(facts.join(dim, (facts["k"] == dim["k"]) & (facts["v"] > dim["w"]))), "join")
        assert theta["rule"] == "not measured" and "not read as key columns" in theta["why"]
        # A join on a condition is partitioned by no key column: an aggregate above it shuffles.
        above = explain_skew(facts.join(dim, facts["v"] > dim["w"] * 100000).groupBy(facts["k"]).count())
        assert only(above, "groupBy")["rule"] != "no shuffle of its own"
        # A stream's keyed operator: stateful, adaptive execution off; nothing is measured
        # (a stream cannot be read by a batch job).
        stream = spark.spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        row = only(explain_skew(stream.groupBy((F.col("value") % 3).alias("k")).count()), "groupBy")
        assert row["rule"] == "stateful stream" and row["hottest_task_share"] is None
        assert row["fix"] == "keysplit.spark.stream_aggregate(...)"


def test_bad_input(spark):
    with pytest.raises(ConfigError, match="session="):
        explain_skew(pl.DataFrame({"k": [1]}))  # type: ignore[arg-type]
    frame = spark.spark.range(10)
    with pytest.raises(ConfigError, match="sample_rows must be a positive int"):
        explain_skew(frame, sample_rows=0)
    with pytest.raises(ConfigError, match="seed"):
        explain_skew(frame, seed=-1)
