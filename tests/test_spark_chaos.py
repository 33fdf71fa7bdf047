"""Every plan keysplit builds survives what Spark's own plans survive: one executor of a
two-worker standalone cluster killed with SIGKILL mid-stage, a Worker killed, and an input
whose row order changes from run to run. Every result is compared with an exact answer
computed by Polars.

The stage to kill in is found from a clean run of the same call (the slowest stage is the
function's, the last one the merge's) or by what it is, then the kill lands while that stage
runs (``chaos.run_killing``); the standalone master starts a new executor in the killed one's
place, and the test waits for it before going on. A test that kills in several stages kills
in them one after another within one run where they fit (``chaos.run_killing_at``: each
kill once the last one's successor has started, one executor lost at a time), and runs the
call again only for the stages a run ended before reaching.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
import pandas as pd
import polars as pl
import pytest
from pyspark import cloudpickle

from chaos import At, StatusApi, executor_pids, run_killing, run_killing_at, stages_of, wait_for_executors
from keysplit.spark import (
    AsofReport,
    Report,
    WriteReport,
    aggregate,
    apply_grouped,
    asof_join,
    holistic_agg,
    join,
    optimize,
    reference,
    route,
    session,
    skewed,
    window,
)
from keysplit.spark.grouped import GroupedReport

# The functions below travel by value: the cluster's executors do not see tests/.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TIMEOUT = 300.0
ROWS = 400_000
SCHEMA = "key long, value long"


def slow_top3(pdf: pd.DataFrame) -> pd.DataFrame:
    time.sleep(len(pdf) * 20e-6)
    return pdf.nlargest(3, "value")[["key", "value"]]


def slow_top3_merge(pdf: pd.DataFrame) -> pd.DataFrame:
    time.sleep(0.5)
    return pdf.nlargest(3, "value")[["key", "value"]]


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    return pl.DataFrame(
        {
            "key": np.minimum(rng.zipf(2.0, ROWS), 5_000).astype(np.int64),
            "value": rng.permutation(ROWS).astype(np.int64),
            "rid": np.arange(ROWS, dtype=np.int64),
        }
    )


@pytest.fixture(scope="module")
def directory(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("chaos")
    for index, part in enumerate(data.iter_slices(ROWS // 4)):
        part.write_parquet(path / f"part-{index}.parquet")
    return path


@pytest.fixture(scope="module")
def cluster():
    """A cluster of its own, with its web UI: the kills must not disturb other tests."""
    with session(master="cluster:2", ui=True, query_timeout=TIMEOUT) as handle:
        yield handle


@pytest.fixture(scope="module")
def api(cluster) -> StatusApi:
    return StatusApi(cluster)


def top3(data: pl.DataFrame) -> pl.DataFrame:
    return data.sort("value", descending=True).group_by("key").head(3).select("key", "value").sort("key", "value")


def fetched(frame) -> pl.DataFrame:
    table = pl.from_arrow(frame.toArrow())
    assert isinstance(table, pl.DataFrame)
    return table.sort(table.columns)


def slowest(stages: list[dict]) -> int:
    """The ordinal of the stage whose tasks ran longest."""
    return max(range(len(stages)), key=lambda ordinal: stages[ordinal]["executorRunTime"])


def grouped_action(cluster, frame, **options):
    def action() -> pl.DataFrame:
        result = apply_grouped(
            frame, key="key", function=slow_top3, merge=slow_top3_merge, schema=SCHEMA, workers=8, **options
        )
        return fetched(result)

    return action


@pytest.fixture(scope="module")
def two_pass_clean_run(cluster, api, directory):
    """apply_grouped's two-pass plan run once without a kill: its result and its stages,
    which both tests that kill in those stages read (each ran the same clean run before)."""
    frame = cluster.spark.read.parquet(str(directory)).select("key", "value")
    return stages_of(api, grouped_action(cluster, frame))


@pytest.mark.parametrize("grouper", [None, "pstream"], ids=["two-pass", "online"])
def test_apply_grouped_survives_a_kill_in_its_function_and_merge_stages(
    cluster, api, directory, data, grouper, request
):
    frame = cluster.spark.read.parquet(str(directory)).select("key", "value")
    action = grouped_action(cluster, frame, grouper=grouper)
    expected = top3(data)
    clean, stages = request.getfixturevalue("two_pass_clean_run") if grouper is None else stages_of(api, action)
    assert clean.equals(expected)
    function_stage = slowest(stages)
    merge_stage = len(stages) - 1  # the split keys' merges, and the result
    # Killed in the function's stage, then, once its successor has started, in the merges'.
    points = [At(ordinal=function_stage, completed=1), At(ordinal=merge_stage, completed=1)]
    runs = run_killing_at(api, cluster.cluster.pid, action, points)
    for result, kills in runs:
        assert result.equals(expected), f"wrong result after {kills}"
    assert len({kill.pid for _, kills in runs for kill in kills}) == 2  # two executors died, each replaced


def test_apply_grouped_routes_a_reordered_input_the_same_way_and_survives_a_kill(cluster, api, directory, data):
    # After a shuffle, each partition's rows come in a different order every run.
    frame = cluster.spark.read.parquet(str(directory)).repartition(6, "rid").select("key", "value")
    expected = top3(data)

    def calls() -> pl.DataFrame:
        report: Report[GroupedReport] = Report()
        result = apply_grouped(
            frame, key="key", function=slow_top3, merge=slow_top3_merge, schema=SCHEMA, workers=8, report=report
        )
        assert fetched(result).equals(expected)
        assert report.get.split.height > 0  # the hot keys were spread: their rows' workers matter
        # Each call's worker and rows: a row routed elsewhere changes two calls' rows.
        return report.get.calls.select("worker", "rows").sort("worker", "rows")

    assert calls().equals(calls())
    action = grouped_action(cluster, frame)
    _, stages = stages_of(api, action)
    result, kill = run_killing(api, cluster.cluster.pid, action, ordinal=slowest(stages), completed=1)
    assert result.equals(expected), f"wrong result after {kill}"


def test_aggregate_survives_a_kill_in_its_final_merge_and_after_it_returns(cluster, api, directory, data):
    frame = cluster.spark.read.parquet(str(directory))
    aggs = ["count", "sum(value)", "max(value)"]
    expected = fetched(reference(frame, key="key", aggs=aggs))
    assert expected["count"].sum() == data.height

    def action():
        return aggregate(frame, key="key", aggs=aggs, grouper="pdstream", workers=8, output="spark")

    held = action()
    assert fetched(held).equals(expected)
    # Killed once the partials are cached, while the final merge reads them: the lost
    # blocks are recomputed (a localCheckpoint's were not, and the job failed).
    result, kill = run_killing(api, cluster.cluster.pid, action, once_cached=True)
    assert fetched(result).equals(expected), f"wrong result after {kill}"
    # Killed after the call returned, before its result is read: the cached result's lost
    # blocks are recomputed.
    held = action()
    os.kill(executor_pids(cluster.cluster.pid)[0], signal.SIGKILL)
    assert fetched(held).equals(expected)
    wait_for_executors(api, 2, time.monotonic() + TIMEOUT)


def test_route_survives_a_kill_while_it_routes(cluster, api, directory, data):
    frame = cluster.spark.read.parquet(str(directory))

    def action() -> pl.DataFrame:
        routed = route(frame, key="key", grouper="pdstream", workers=8)
        return fetched(routed.groupBy("worker", "key").count())

    clean, stages = stages_of(api, action)
    assert clean["count"].sum() == ROWS
    # As soon as the routing stage runs: its few tasks can all end within one poll.
    result, kill = run_killing(api, cluster.cluster.pid, action, ordinal=0, completed=0)
    assert result.equals(clean), f"different routing after {kill}"


def test_aggregate_of_a_client_stream_survives_a_kill_in_its_final_merge(cluster, api, data):
    # Routed here, ingested as files the executors read, aggregated there.
    stream = data.select("key", "value")
    expected = (
        stream.group_by("key")
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("value").sum().alias("sum_value"))
        .sort("key")
    )

    def action():
        return aggregate(
            stream, key="key", aggs=["count", "sum(value)"], grouper="pdstream", workers=8, session=cluster
        )

    result, kill = run_killing(api, cluster.cluster.pid, action, once_cached=True)
    got = fetched(result)
    assert got.columns == expected.columns
    assert got.cast(expected.schema).equals(expected), f"wrong result after {kill}"


def test_join_survives_a_kill_in_its_sampling_and_join_stages(cluster, api, directory):
    # A full outer join of the Zipf facts (key 1 holds 61 %) with a dimension holding null
    # keys and lacking some: killed in its first stage (the sample the hot keys are found
    # from), its slowest and its last, exact each time.
    frame = cluster.spark.read.parquet(str(directory))
    dimension = cluster.spark.range(0, 5_200).selectExpr("IF(id % 97 = 5, NULL, id) AS key", "id % 13 AS w")

    def action() -> pl.DataFrame:
        return fetched(join(frame, dimension, "key", "full"))

    expected = fetched(frame.join(dimension, "key", "full"))
    clean, stages = stages_of(api, action, twice=False)
    assert clean.equals(expected)
    points = [At(ordinal=ordinal) for ordinal in sorted({0, slowest(stages), len(stages) - 1})]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(expected), f"a different join after {kills}"


@pytest.mark.parametrize("partition", [["key"], []], ids=["hot key", "no partitionBy"])
def test_window_survives_a_kill_in_its_sampling_window_and_carry_stages(cluster, api, directory, partition):
    # A running sum, a rank, a row number, a lag, a lead and a bounded sum over the Zipf facts
    # (key 1 holds 61 %, cut into ranges; with no partitionBy, the whole frame; the chunks'
    # edge rows found by their position in the input, which a re-run task gives again):
    # killed in its first stage (the sample the cuts come from), in an exchange's map side
    # (one task per input file, after the sample's) and in the window (the hot chunks' task
    # per worker and the other keys' in one stage; with no partitionBy, a stage reading the
    # chunks' exchange, the window's or its totals'), equal to Spark's window each time.
    # Picked by what they are, not their place: these stages run beside others, in no
    # fixed order.
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    workers = 24
    w = Window.partitionBy(*partition).orderBy("value")
    columns = {
        "run": F.sum("value").over(w),
        "rank": F.rank().over(w),
        "n": F.row_number().over(w),
        "prev": F.lag("rid", 2).over(w),
        "next": F.lead("rid", 1, -1).over(w),
        "around": F.sum("rid").over(w.rowsBetween(-3, 2)),
    }

    def action() -> pl.DataFrame:
        return fetched(window(frame, columns, workers=workers))

    expected = fetched(frame.withColumns(columns))
    assert action().equals(expected)
    # Spark packs the small files into fewer splits than files.
    splits = frame.select(F.spark_partition_id()).distinct().count()
    points = [
        At(ordinal=0),
        # A stage of one task per input split after the sample's, that runs (an exchange
        # written by an earlier job of the query is a stage Spark skips): a map side.
        At(stage=lambda s, index: index > 0 and s["numTasks"] == splits and s["status"] != "SKIPPED"),
        At(stage=lambda s, index: s["numTasks"] > workers if partition else s["numTasks"] == workers),
    ]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(expected), f"a different window after {kills}"


def test_asof_join_survives_a_kill_in_its_sampling_and_window_stages(cluster, api, directory, data):
    # Each fact with the last "quote" of its key at or before its value (a quarter of the
    # facts, their rid as the quote; key 1's 61 % cut into ranges of the value): killed in
    # the first stage (the window verb's sample) and in the window (its task per worker and
    # the other keys', which reads the union's exchange: the lost executor's map output is
    # computed again), equal to Polars' join_asof each time. The union's map stages of four
    # short tasks end before a kill lands on this machine.
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    quotes = frame.where(F.col("rid") % 4 == 0).select("key", "value", F.col("rid").alias("quote"))
    workers = 24

    def action() -> pl.DataFrame:
        return fetched(asof_join(frame, quotes, on="value", by="key", workers=workers))

    right = data.filter(pl.col("rid") % 4 == 0).select("key", "value", quote="rid")
    expected = data.sort("value").join_asof(right.sort("value"), on="value", by="key")
    expected = expected.sort(expected.columns)
    assert action().equals(expected)
    points = [At(ordinal=0), At(stage=lambda s, index: s["numTasks"] > workers)]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(expected), f"a different as-of join after {kills}"


def test_a_measured_nearest_asof_join_survives_a_kill_in_its_slowest_stage(cluster, api, directory, data):
    # skewed(facts).asof_join(..., direction="nearest"), its statistics job run by the call,
    # key 1 cut with literal cuts in both passes over the union (the forward one fused over
    # the backward one's split, whose hot output is persisted). Each run a new plan (a filter
    # that keeps every quote), persisted anew. Killed in the clean run's slowest stage, then
    # once that output is cached (the lost executor's blocks computed again from their
    # lineage): equal to pandas' merge_asof each time.
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    quotes = frame.where(F.col("rid") % 4 == 0).select("key", "value", F.col("rid").alias("quote"))
    runs = iter(range(1_000))
    reports: list[Report[AsofReport]] = []

    def action() -> pl.DataFrame:
        fresh = quotes.where(F.col("quote") != -1 - next(runs))
        reports.append(Report())
        joined = skewed(frame, workers=24, min_rows=0).asof_join(
            fresh, on="value", by="key", direction="nearest", report=reports[-1]
        )
        return fetched(joined)

    right = data.filter(pl.col("rid") % 4 == 0).select("key", "value", quote="rid").to_pandas()
    merged = pd.merge_asof(
        data.to_pandas().sort_values("value"), right.sort_values("value"), on="value", by="key", direction="nearest"
    )
    expected = pl.from_pandas(merged).with_columns(pl.col("quote").cast(pl.Int64))
    expected = expected.sort(expected.columns)
    assert frame.schema.names == data.columns  # the Parquet footers read now, in a stage of their own
    clean, stages = stages_of(api, action, twice=False)
    assert clean.equals(expected)
    assert len(reports[0].get.passes) == 2, reports[0].get
    result, kill = run_killing(api, cluster.cluster.pid, action, ordinal=slowest(stages), completed=0)
    assert result.equals(expected), f"a different as-of join after {kill}"
    result, kill = run_killing(api, cluster.cluster.pid, action, once_cached=True)
    assert result.equals(expected), f"a different as-of join after {kill}"


def test_ranks_in_the_input_order_survive_a_kill_in_the_counts_and_the_rows(cluster, api, directory):
    # A row number and ntile over monotonically_increasing_id() with no partitionBy: each
    # input partition's rows counted (a shuffle keyed on the partition's index, taken from
    # monotonically_increasing_id: Spark may call it indeterminate and rerun the whole
    # stage), then every row ranked where it is. Killed in the counts' map side and in the
    # rows' stage, each one task per input split: equal to Spark's window each time.
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    in_order = Window.orderBy(F.monotonically_increasing_id())
    columns = {"n": F.row_number().over(in_order), "tile": F.ntile(5).over(in_order)}

    def action() -> pl.DataFrame:
        return fetched(window(frame, columns, workers=24))

    expected = fetched(frame.withColumns(columns))
    assert action().equals(expected)
    splits = frame.select(F.spark_partition_id()).distinct().count()
    points = [
        At(ordinal=0),
        At(stage=lambda s, index: index > 0 and s["numTasks"] == splits and s["status"] != "SKIPPED"),
    ]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(expected), f"different ranks after {kills}"


def test_holistic_agg_survives_a_kill_in_its_sampling_counting_and_ranking_stages(cluster, api, directory):
    # The median, two percentiles and the mode of the Zipf facts' values per key (key 1
    # holds 61 %, split into value ranges): killed in its first stage (the sample the cuts
    # come from) and its slowest, equal to Spark's aggregate each time (its last stages
    # gather a few rows per hot key: too short to be killed in).
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    columns = [F.median("value"), F.percentile("value", [0.1, 0.99]), F.mode("rid", True)]

    def action() -> pl.DataFrame:
        return fetched(holistic_agg(frame, "key", *columns, workers=16))

    expected = fetched(frame.groupBy("key").agg(*columns))
    clean, stages = stages_of(api, action, twice=False)
    assert clean.equals(expected)
    points = [At(ordinal=ordinal) for ordinal in sorted({0, slowest(stages)})]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(expected), f"a different aggregate after {kills}"


def test_an_optimized_query_survives_a_kill_in_its_slowest_stage(cluster, api, directory):
    # A left join of the Zipf facts (key 1 holds 61 %) with a dimension, feeding a median and
    # a count per key: optimize splits the join (its grid a literal table in the plan) and
    # fuses the median above it over the join's two branches: Spark's own median of the keys
    # not hot, keysplit's of the hot keys' output, persisted. Killed in its slowest stage,
    # then once the persisted output is cached: equal to Spark's (the join and the median
    # alone are killed in every stage above).
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    dimension = cluster.spark.range(0, 5_200).selectExpr("id AS key", "id % 13 AS w").hint("merge")
    query = frame.join(dimension, "key", "left").groupBy("key").agg(F.median("value"), F.count("*"))
    plan = Report()
    optimized = optimize(query, workers=16, min_rows=0, report=plan)
    assert [decision.rule for decision in plan.get.operators] == ["skew", "skew"], str(plan.get)
    assert len(plan.get.persisted) == 1

    def action() -> pl.DataFrame:
        return fetched(optimized)

    expected = fetched(query)

    def uncached() -> None:
        # The join's hot output, persisted by optimize, dropped and persisted anew: the next run
        # computes it again, as the first did.
        plan.get.release()
        for frame in plan.get.persisted:
            frame.persist()

    clean, stages = stages_of(api, action, twice=False)
    assert clean.equals(expected)
    uncached()
    result, kill = run_killing(api, cluster.cluster.pid, action, ordinal=slowest(stages), completed=0)
    assert result.equals(expected), f"a different result after {kill}"
    # Killed once the join's hot output is wholly cached: the median's stages find the lost
    # executor's blocks missing and Spark computes them again from their lineage.
    uncached()
    result, kill = run_killing(api, cluster.cluster.pid, action, once_cached=True)
    assert result.equals(expected), f"a different result after {kill}"
    plan.get.release()


def test_a_window_of_peer_values_survives_a_kill_in_its_first_and_slowest_stages(cluster, api, directory):
    # A running sum, a rank and a cumulative share over the whole frame ordered by the Zipf
    # key (at most 5,000 values of 400,000 rows): optimize computes each from its group of
    # peers and moves no row (the groups' totals map-side, a window over the groups, broadcast
    # back to the rows). Killed in its first stage and its slowest, equal to Spark's one-task
    # window.
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    w = Window.orderBy("key")
    query = frame.withColumns({"run": F.sum("value").over(w), "rank": F.rank().over(w), "share": F.cume_dist().over(w)})
    plan = Report()
    optimized = optimize(query, workers=16, min_rows=0, report=plan)
    [decision] = plan.get.operators
    assert decision.rewritten and "no row moved" in decision.why, str(plan.get)

    def action() -> pl.DataFrame:
        return fetched(optimized)

    expected = fetched(query)
    clean, stages = stages_of(api, action, twice=False)
    assert clean.equals(expected)
    assert decision.report.get.by_peers
    points = [At(ordinal=ordinal) for ordinal in sorted({0, slowest(stages)})]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(expected), f"a different window after {kills}"


def test_a_window_of_edge_reads_cut_at_literals_survives_a_kill_in_its_first_and_slowest_stages(
    cluster, api, directory
):
    # A lag, a lead, a bounded sum and the first and last values (one with ignorenulls over
    # a sparse column) over the whole frame ordered by the Zipf key and the value: optimize
    # cuts it at literals from its statistics and finds each chunk's edge rows in the bands
    # the sample bounds (a hash aggregate of the rows in them). Killed in its first stage
    # and its slowest, equal to Spark's one-task window.
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    w = Window.orderBy("key", F.col("value").desc())
    query = frame.withColumns(
        {
            "prev": F.lag("rid", 2).over(w),
            "next": F.lead("rid", 1, -1).over(w),
            "around": F.sum("rid").over(w.rowsBetween(-3, 2)),
            "first": F.first("rid").over(w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)),
            "last_sparse": F.last(F.when(F.col("rid") % 1000 == 7, F.col("rid")), ignorenulls=True).over(
                w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
            ),
        }
    )
    plan = Report()
    optimized = optimize(query, workers=16, min_rows=0, report=plan)
    [decision] = plan.get.operators
    assert decision.rewritten, str(plan.get)
    assert "__keysplit_w_heads" in cluster.explained(optimized)

    def action() -> pl.DataFrame:
        return fetched(optimized)

    expected = fetched(query)
    clean, stages = stages_of(api, action, twice=False)
    assert clean.equals(expected)
    points = [At(ordinal=ordinal) for ordinal in sorted({0, slowest(stages)})]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(expected), f"a different window after {kills}"


@pytest.mark.parametrize("placed", ["by optimize's statistics", "in the plan"])
def test_a_window_over_one_nullable_column_with_ties_survives_a_kill_in_its_first_and_slowest_stage(
    cluster, api, directory, placed
):
    # A row number, a lag, a running sum and a bounded sum over the Zipf key with nulls and
    # no tie-breaker: the plan orders peers as Spark's radix sorter would in one task reading
    # the input in its order, the places it moves rows to found by optimize's statistics (a
    # literal table, recounted by the plan), or by the window verb's plan (each input
    # partition's rows and nulls counted in a stage of its own). On a cluster Spark's own
    # order of peers is the order its blocks are fetched in, which varies, so Spark gives the
    # running sum (the same for peers) and the row numbers, lags and bounded sums are checked
    # against the order the row numbers give. Killed in its first stage and its slowest, the
    # same as unkilled.
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory))
    frame = frame.withColumn("order", F.when(F.col("rid") % 37 == 5, F.lit(None)).otherwise(F.col("key")))
    w = Window.orderBy("order")
    columns = {
        "n": F.row_number().over(w),
        "prev": F.lag("rid", 1).over(w),
        "run": F.sum("rid").over(w),
        "around": F.sum("rid").over(w.rowsBetween(-2, 2)),
    }
    query = frame.withColumns(columns)
    if placed == "in the plan":
        optimized = window(frame, columns, workers=16)
        assert "__keysplit_w_nulls" in cluster.explained(optimized)
    else:
        plan = Report()
        optimized = optimize(query, workers=16, min_rows=0, report=plan)
        assert plan.get.operators[0].rewritten, str(plan.get)
        assert "__keysplit_w_checked" in cluster.explained(optimized)

    def action() -> pl.DataFrame:
        return fetched(optimized)

    expected = fetched(query).sort("rid")
    clean, stages = stages_of(api, action, twice=False)
    assert clean.sort("rid").select("rid", "order", "run").equals(expected.select("rid", "order", "run"))
    numbered = clean.sort("n")
    assert numbered["n"].to_list() == list(range(1, numbered.height + 1))
    assert numbered["order"].is_sorted(nulls_last=False) and numbered["order"].null_count() > 0
    assert numbered["prev"].equals(numbered["rid"].shift(1), check_names=False)
    around = numbered["rid"].rolling_sum(window_size=5, center=True, min_samples=1)
    assert numbered["around"].equals(around, check_names=False, check_dtypes=False)
    points = [At(ordinal=ordinal) for ordinal in sorted({0, slowest(stages)})]
    for result, kills in run_killing_at(api, cluster.cluster.pid, action, points):
        assert result.equals(clean), f"a different window after {kills}"


def test_a_partitioned_write_survives_a_kill_in_its_counts_and_its_write(cluster, api, directory, data, tmp_path):
    # The Zipf facts written partitioned by min(key, 20) (key 1, 61 % of the rows, in files of
    # 20,000 rows: a task each): killed in the counts' first stage and in the write's, the
    # files read back are the rows once each, as many files as a clean write's, and no
    # attempt's files are left behind (Spark's commit protocol drops a lost task's).
    from pyspark.sql import functions as F

    frame = cluster.spark.read.parquet(str(directory)).withColumn("part", F.least("key", F.lit(20)))
    expected = data.with_columns(pl.min_horizontal("key", pl.lit(20)).alias("part")).sort(data.columns)

    def action(path=tmp_path / "clean", report=None):
        def write() -> pl.DataFrame:
            writer = skewed(frame, target_file_rows=20_000).write.partitionBy("part").mode("overwrite")
            writer.parquet(str(path), report=report)
            back = pl.from_arrow(cluster.spark.read.parquet(str(path)).toArrow())
            assert isinstance(back, pl.DataFrame)
            return back.select(expected.columns).cast(expected.schema).sort(data.columns)

        return write

    report: Report[WriteReport] = Report()
    clean, _ = stages_of(api, action(report=report), twice=False)
    assert clean.equals(expected)
    files = sorted(p.relative_to(tmp_path / "clean").parent for p in (tmp_path / "clean").rglob("part-*"))
    assert len(files) == report.get.files > 20
    tasks = report.get.tasks
    points = [At(ordinal=0), At(stage=lambda s, index: s["numTasks"] == tasks and s["status"] != "SKIPPED")]
    killed = tmp_path / "killed"
    for result, kills in run_killing_at(api, cluster.cluster.pid, action(killed), points):
        assert result.equals(expected), f"different rows after {kills}"
        assert sorted(p.relative_to(killed).parent for p in killed.rglob("part-*")) == files, f"after {kills}"
        assert not list(killed.rglob("_temporary")), f"an attempt's files left after {kills}"


# Last: the cluster keeps one Worker after it.
def test_apply_grouped_survives_the_loss_of_a_worker(cluster, api, directory, data, two_pass_clean_run):
    """Last in the module: the Worker stays dead, its executor with it, and the job ends on
    the other one."""
    frame = cluster.spark.read.parquet(str(directory)).select("key", "value")
    action = grouped_action(cluster, frame)
    _, stages = two_pass_clean_run
    worker = cluster.cluster.worker_pids[0]
    result, kill = run_killing(
        api, cluster.cluster.pid, action, ordinal=slowest(stages), victim=lambda: worker, executors=1
    )
    assert result.equals(top3(data)), f"wrong result after {kill}"
    assert not cluster.cluster.running  # the Worker is gone for good
