"""Multi-operator queries on Spark: ``keysplit.spark.optimize`` against Spark's own plan.

Both plans of each query run in one session. ``optimize(query)`` reads a query's plan,
samples the inputs of its keyed operators once (its statistics pass, run when it is called)
and returns the query with every straggling join, holistic aggregate and window over a
``partitionBy`` replaced by keysplit's plan for it, decided by its cost guard (its module's
notes: rewritten when the predicted hottest task holds at least 5 mean tasks' work and its
key a million rows; a rewritten operator's output that a rewritten one above reads is
persisted, and released after each run); where nothing is hot it returns the query itself.

**Inputs.** Synthetic, generated in Spark from ``spark.range`` and written to Parquet first
(as ``spark_skew_join.py`` does: a scan Spark reuses within a plan): ``facts`` of
``--rows`` rows whose key ``k`` 0 holds ``--share`` of them (the rest uniform over
``--keys`` keys), a second key ``j`` uniform over the keys, a time ``t`` with ties (10^5
values), ``v`` of 10^9 values and ``u`` of 10^6; ``others``, ``--rows``/100 rows whose key
1 holds ``--share`` of them (the rest uniform); ``dim``, one row per key but every tenth
key missing, and keys 0 to 4 three times each (output skew on the hot key); ``keyset``,
the even keys. TPC-H: ``lineitem``, ``orders`` and ``customer`` written by ``tpchgen-cli``
at scale ``--tpch-scale`` (default ``--rows``/10^7: 6 M lineitem rows at 10^7), with, at a
share above 0, ``l_orderkey``, ``l_partkey`` and ``o_custkey`` overwritten in Spark by a
Zipf-like law over the column's own keys (a bounded Pareto law's integer part, its
exponent solved so that the hottest key holds ``--share`` of the rows; the next keys hold
less and less). Three skew levels by default: none (share 0: uniform keys, TPC-H's own),
mild (0.08: Spark's hottest task about 3x the mean at 32 partitions, under the cost guard)
and strong (0.3).

**Queries** (``--queries`` runs those whose names start so):

1. ``inner``: ``facts ⋈ dim`` on ``k``; 2. ``left``: the same, left outer;
3. ``full``: ``facts ⟗ others`` on ``k`` (a hot key on each side);
4. ``semi`` and 5. ``anti``: ``facts`` left semi / left anti ``keyset``;
6. ``join-median``: ``facts ⋈ dim``, then ``groupBy(k).agg(median(v), count(*))``;
7. ``outer-median``: ``facts ⟗ others``, then the same median and count per ``k``;
8. ``join-window``: ``facts ⋈ dim``, then a running sum and a ``lag`` per ``k`` by ``t``;
9. ``window-percentile``: a running sum and ``row_number`` per ``k``, then
   ``groupBy(k).agg(percentile(v, [0.5, 0.9]))`` of them;
10. ``grouped-map-control``: ``facts ⋈ dim`` on the uniform ``j``, then
   ``groupBy(g).applyInPandas(f)`` on ``g = k mod 1000`` (1,000 calls of ``f``, the hot key's
   group hot): a grouped map is not rewritten (it needs ``merge=``) and the join has no hot
   key, so ``optimize`` returns the query and costs its statistics;
11. ``mode-distinct``: ``groupBy(k).agg(mode(u), count_distinct(u))``;
12. ``select-window``: ``facts.select("*", lag(v).over(w))``;
13. ``tpch-join-median``: ``lineitem ⋈ orders`` on the order key, then the median
    ``l_extendedprice`` per ``o_custkey``;
14. ``tpch-join-percentile``: ``orders ⋈ customer`` on the customer key, then
    ``percentile(o_totalprice, [0.5, 0.9])`` per customer;
15. ``tpch-window``: a running sum of ``l_quantity`` and a ``lag`` per ``l_partkey``;
16. ``tpch-median``: the median ``o_totalprice`` and the distinct order dates per ``o_custkey``.

In 6, 7, 8, 9, 13 and 14 an operator reads another keyed operator's output: sampling its input
would run the operator below, so ``optimize`` estimates it from the statistics of the one
below or leaves it to Spark; its report, printed once per query and level, says which.

**Plans**, in one session, alternated after an untimed warm-up of each (A B, then B A, ...,
``--repeats`` pairs): ``spark``, the query as it is (adaptive execution on; the settings of
``spark_skew_join.py``: 32 shuffle partitions, coalescing off, broadcast joins off: the
sides stand for tables too big to broadcast), and ``optimize``, ``optimize(query)`` called
anew in each run. Both end in the same fingerprint (rows, and a sum of a hash of each row),
which must equal Spark's. The warm-up's first ``optimize`` is given a report (what it
decided, its ``statistics_seconds`` and ``planning_seconds``, and each rewritten operator's
own report, which observes every row it counts), its second is not; nor are the timed
runs, as a user who wants the query, not its figures, calls it. Per run: the wall seconds
(for ``optimize``, its call, which runs its statistics pass, plus the query's; each run's
statistics gathered anew), and ``recurring``: the query's seconds plus a second
``optimize`` call's, made right after it, whose statistics are those the first call kept
(as a job run again over the same files finds them); and from Spark's REST status API the
makespan on 32 slots
**computed** by LPT from the measured task times of every stage (the statistics pass's
stages included; this machine has 2 cores), and per keyed stage (one reading more than 5 %
of the run's shuffle bytes) its hottest task's shuffle bytes and records over the stage's
mean task's; the table shows it for the keyed stage with the slowest task (the query's
straggler), and in brackets the largest of any keyed stage (a cheap stage of keysplit's plan
may read a skewed shuffle yet take milliseconds). Per query and level: the medians, the
operators ``optimize`` rewrote and why it left the others (its report, printed once), and
whether every run's result equals Spark's; a result that differs, or an ``optimize`` that
raises, is listed at the end and makes the exit status 1.

    python benches/spark_optimize.py --rows 1e7 --share 0 0.08 0.3 --setup local
    python benches/spark_optimize.py --rows 2e5 --repeats 1 --queries tpch     # a quick look

Writes ``benches/results/spark_optimize[_cluster].json`` (rewritten after every query, with
the table printed at the end).
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from keysplit import spark as ks
from keysplit.datasets.real import _tpchgen, tpch_table
from spark_skew_join import CONF
from spark_vs_native import (
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
PLANS = ("spark", "optimize")
#: A stage reading more than this share of the run's shuffle bytes is a keyed stage.
KEYED_STAGE_SHARE = 0.05
#: ``dim`` holds keys 0 .. DUPLICATED - 1 three times each.
DUPLICATED = 5
#: The grouped map's groups: ``g = k mod GROUPS`` (a call of a pandas function per group).
GROUPS = 1000
GROUPED_SCHEMA = "g long, rows long, total long"
QUERIES = (
    "inner",
    "left",
    "full",
    "semi",
    "anti",
    "join-median",
    "outer-median",
    "join-window",
    "window-percentile",
    "grouped-map-control",
    "mode-distinct",
    "select-window",
    "tpch-join-median",
    "tpch-join-percentile",
    "tpch-window",
    "tpch-median",
)


def level(share: float) -> str:
    return "none" if share == 0 else ("mild" if share < 0.3 else "strong")


# --- inputs ------------------------------------------------------------------------------


def written(frames: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Each frame written once as Parquet, read back and counted."""
    spark = next(iter(frames.values())).sparkSession
    for name, frame in frames.items():
        path = str(directory / name)
        frame.write.mode("overwrite").parquet(path)
        frames[name] = spark.read.parquet(path)
        frames[name].count()
    return frames


def synthetic(spark: Any, directory: Path, rows: int, keys: int, share: float) -> dict[str, Any]:
    """``facts``, ``others``, ``dim`` and ``keyset`` (the module's notes)."""
    from pyspark.sql import functions as F

    def draw(seed: int) -> Any:
        return F.pmod(F.xxhash64("id", F.lit(seed)), F.lit(keys))

    hot = F.when(F.rand(7) < share, F.lit(0)).otherwise(1 + F.pmod(F.xxhash64("id"), F.lit(keys - 1)))
    dim_key = F.when(F.col("id") < keys, F.col("id")).otherwise(F.pmod(F.col("id") - keys, F.lit(DUPLICATED)))
    frames = {
        "facts": spark.range(0, rows, numPartitions=16).select(
            "id",
            hot.alias("k"),
            draw(13).alias("j"),
            F.pmod(F.xxhash64("id", F.lit(5)), F.lit(100_000)).alias("t"),
            F.pmod(F.xxhash64("id", F.lit(3)), F.lit(1_000_000_000)).alias("v"),
            F.pmod(F.xxhash64("id", F.lit(11)), F.lit(1_000_000)).alias("u"),
        ),
        "others": spark.range(0, max(rows // 100, 1), numPartitions=16).select(
            F.when(F.rand(8) < share, F.lit(1)).otherwise(draw(17)).alias("k"),
            F.col("id").alias("x"),
            F.pmod(F.xxhash64("id", F.lit(19)), F.lit(1000)).alias("y"),
        ),
        "dim": spark.range(0, keys + 2 * DUPLICATED)
        .select(dim_key.alias("k"), F.col("id").alias("d"), (F.col("id") % 7).alias("w"))
        .filter(F.pmod("k", F.lit(10)) != 9),
        "keyset": spark.range(0, keys, 2).select(F.col("id").alias("k")),
    }
    return written(frames, directory / f"synthetic-{rows}-{keys}-{share}")


def zipf_shape(share: float, keys: int) -> float:
    """The shape ``a`` of the Pareto law on [1, keys + 1) whose integer part (a Zipf-like
    rank, of exponent about ``a + 1``) is 1 with probability ``share``: ``(1 - 2^-a) / (1 -
    (keys + 1)^-a)``, increasing in ``a`` (at ``a`` = -1 the ranks are uniform)."""

    def top(a: float) -> float:
        return math.expm1(-a * math.log(2)) / math.expm1(-a * math.log(keys + 1))

    low, high = -0.999, 60.0
    if not top(low) < share < top(high):
        raise ValueError(f"no Zipf-like law over {keys} keys gives its hottest key a share of {share}")
    for _ in range(200):
        middle = (low + high) / 2 or 1e-12
        low, high = (middle, high) if top(middle) < share else (low, middle)
    return (low + high) / 2


def zipf_column(frame: Any, column: str, keys: Any, share: float, seed: int) -> Any:
    """``frame`` with ``column`` overwritten by the keys of ``keys`` (a frame of one column
    of distinct keys) drawn by a Zipf-like rank, the smallest key the hottest, holding
    ``share`` of the rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    name = keys.columns[0]
    count = keys.count()
    a = zipf_shape(share, count)
    # The inverse of the law's distribution function at a uniform u: (1 - u (1 - (n+1)^-a))^(-1/a).
    spread = -math.expm1(-a * math.log(count + 1))
    pareto = F.pow(1 - F.rand(seed) * F.lit(spread), F.lit(-1 / a))
    rank = F.least(F.floor(pareto).cast("long"), F.lit(count))
    # The keys numbered in one partition (Spark warns as it sends the plan, in tpch()).
    ranked = keys.select(F.row_number().over(Window.orderBy(name)).alias("__rank"), F.col(name).alias("__key"))
    return (
        frame.withColumn("__rank", rank)
        .join(ranked, "__rank")
        .withColumn(column, F.col("__key"))
        .drop("__rank", "__key")
    )


def tpch_paths(scale: float, directory: Path) -> dict[str, Path]:
    """The Parquet files of lineitem and orders (``keysplit.datasets``' cache) and customer,
    generated by the same ``tpchgen-cli`` into ``directory``."""
    paths = {table: tpch_table(table, scale=scale) for table in ("lineitem", "orders")}
    customer = directory / f"tpch-sf{scale:g}" / "customer.parquet"
    if not customer.exists():
        partial = customer.with_name(".customer.partial")
        shutil.rmtree(partial, ignore_errors=True)
        command = [_tpchgen(), "parquet", "-s", f"{scale:g}", "--tables", "customer", "--output-dir", str(partial)]
        subprocess.run(command, check=True, capture_output=True)
        (partial / "customer.parquet").rename(customer)
        shutil.rmtree(partial, ignore_errors=True)
    return {**paths, "customer": customer}


def tpch(spark: Any, directory: Path, scale: float, share: float) -> dict[str, Any]:
    """TPC-H's lineitem, orders and customer (the columns the queries read; ``l_id`` numbers
    the lines), their keys Zipf-skewed at ``share`` above 0."""
    from pyspark.sql import functions as F

    paths = tpch_paths(scale, directory)
    lineitem = spark.read.parquet(str(paths["lineitem"])).select(
        F.monotonically_increasing_id().alias("l_id"),
        "l_orderkey",
        "l_partkey",
        "l_quantity",
        "l_extendedprice",
        "l_shipdate",
    )
    orders = spark.read.parquet(str(paths["orders"])).select("o_orderkey", "o_custkey", "o_totalprice", "o_orderdate")
    customer = spark.read.parquet(str(paths["customer"])).select("c_custkey", "c_mktsegment", "c_nationkey")
    if share > 0:
        partkeys = lineitem.select("l_partkey").distinct()
        lineitem = zipf_column(lineitem, "l_orderkey", orders.select("o_orderkey"), share, 21)
        lineitem = zipf_column(lineitem, "l_partkey", partkeys, share, 22)
        orders = zipf_column(orders, "o_custkey", customer.select("c_custkey"), share, 23)
    frames = {"lineitem": lineitem.repartition(16), "orders": orders.repartition(16), "customer": customer}
    with warnings.catch_warnings():
        # zipf_column's keys numbered in one partition: a step of the inputs' preparation.
        warnings.filterwarnings("ignore", "WARN WindowExpression: No Partition Defined", UserWarning)
        return written(frames, directory / f"tpch-sf{scale:g}-{share}")


# --- queries -----------------------------------------------------------------------------


def per_key(rows: pd.DataFrame) -> pd.DataFrame:
    """The grouped map of the control: one group's rows and its sum of ``v * w``."""
    return pd.DataFrame(
        {"g": [int(rows["g"].iloc[0])], "rows": [len(rows)], "total": [int((rows["v"] * rows["w"]).sum())]}
    )


def queries(frames: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Each query of the module's notes whose inputs are in ``frames``, built anew per call."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    built: dict[str, Callable[[], Any]] = {}
    if "facts" in frames:
        facts, others, dim, keyset = (frames[n] for n in ("facts", "others", "dim", "keyset"))
        by_time = Window.partitionBy("k").orderBy("t", "id")
        joined_by_time = Window.partitionBy("k").orderBy("t", "id", "d")
        built |= {
            "inner": lambda: facts.join(dim, "k", "inner"),
            "left": lambda: facts.join(dim, "k", "left"),
            "full": lambda: facts.join(others, "k", "full"),
            "semi": lambda: facts.join(keyset, "k", "left_semi"),
            "anti": lambda: facts.join(keyset, "k", "left_anti"),
            "join-median": lambda: (
                facts.join(dim, "k").groupBy("k").agg(F.median("v").alias("median_v"), F.count("*").alias("rows"))
            ),
            "outer-median": lambda: (
                facts.join(others, "k", "full")
                .groupBy("k")
                .agg(F.median("v").alias("median_v"), F.count("*").alias("rows"))
            ),
            "join-window": lambda: facts.join(dim, "k").withColumns(
                {"run_sum": F.sum("v").over(joined_by_time), "previous": F.lag("v").over(joined_by_time)}
            ),
            "window-percentile": lambda: (
                facts.withColumns({"run_sum": F.sum("v").over(by_time), "n": F.row_number().over(by_time)})
                .groupBy("k")
                .agg(
                    F.percentile("v", [0.5, 0.9]).alias("p"),
                    F.max("n").alias("rows"),
                    F.max("run_sum").alias("total"),
                )
            ),
            "grouped-map-control": lambda: (
                facts.join(dim.withColumnRenamed("k", "j"), "j")
                .withColumn("g", F.pmod("k", F.lit(GROUPS)))
                .groupBy("g")
                .applyInPandas(per_key, GROUPED_SCHEMA)
            ),
            "mode-distinct": lambda: facts.groupBy("k").agg(
                F.mode("u", True).alias("mode_u"), F.count_distinct("u").alias("users")
            ),
            "select-window": lambda: facts.select("*", F.lag("v").over(by_time).alias("prev")),
        }
    if "lineitem" in frames:
        lineitem, orders, customer = frames["lineitem"], frames["orders"], frames["customer"]
        by_part = Window.partitionBy("l_partkey").orderBy("l_shipdate", "l_id")
        built |= {
            "tpch-join-median": lambda: (
                lineitem.join(orders, lineitem["l_orderkey"] == orders["o_orderkey"])
                .groupBy("o_custkey")
                .agg(F.median("l_extendedprice").alias("median_price"), F.count("*").alias("lines"))
            ),
            "tpch-join-percentile": lambda: (
                orders.join(customer, F.col("o_custkey") == F.col("c_custkey"))
                .groupBy("o_custkey", "c_mktsegment")
                .agg(F.percentile("o_totalprice", [0.5, 0.9]).alias("p"), F.count("*").alias("orders"))
            ),
            "tpch-window": lambda: lineitem.withColumns(
                {"run_quantity": F.sum("l_quantity").over(by_part), "previous": F.lag("l_extendedprice").over(by_part)}
            ),
            "tpch-median": lambda: orders.groupBy("o_custkey").agg(
                F.median("o_totalprice").alias("median_total"), F.count_distinct("o_orderdate").alias("dates")
            ),
        }
    return built


# --- runs --------------------------------------------------------------------------------


def over_mean(values: list[int]) -> float:
    """The largest of ``values`` over their mean (0 when they sum to 0)."""
    total = sum(values)
    return max(values) * len(values) / total if total else 0.0


def keyed_stages(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stages reading more than :data:`KEYED_STAGE_SHARE` of the run's shuffle bytes,
    each with its hottest task's bytes and records over its mean task's."""
    total = sum(s["shuffle_read_bytes"] for s in stages)
    return [
        {
            "stage": s["stage"],
            "tasks": s["tasks"],
            "shuffle_read_bytes": s["shuffle_read_bytes"],
            "hottest_over_mean_bytes": over_mean(s["task_shuffle_bytes_read"]),
            "hottest_over_mean_records": over_mean(s["task_shuffle_records_read"]),
            "max_task_s": s["max_task_s"],
        }
        for s in stages
        if total and s["shuffle_read_bytes"] > KEYED_STAGE_SHARE * total
    ]


def decisions(decided: ks.OptimizeReport) -> list[dict[str, Any]]:
    """Per keyed operator: what optimize decided, with the verb's report of a rewritten one."""
    rows = decided.table().to_dicts()
    for row, decision in zip(rows, decided.operators, strict=True):
        verb = decision.report
        row["verb_report"] = repr(verb.get) if verb is not None and verb.ready else None
    return rows


def run_plan(
    handle: Any, status: SparkStatus, query: Any, plan: str, options: dict[str, Any], *, reported: bool
) -> dict[str, Any]:
    """One timed run of ``plan`` on ``query`` (``options``: optimize's): its figures (and, for
    optimize when ``reported``, its report)."""
    first = status.next_execution()
    figures: dict[str, Any] = {}
    frame, decided = query, None
    if plan == "optimize":
        report: ks.Report[ks.OptimizeReport] | None = ks.Report() if reported else None
        # Each run as a first run: its statistics gathered anew (see "recurring" below).
        ks.forget_statistics()
        started = time.perf_counter()
        frame = ks.optimize(query, **options, report=report)
        figures["optimize_s"] = time.perf_counter() - started
        if report is not None:
            decided = report.get
            figures["statistics_s"] = decided.statistics_seconds
            figures["planning_s"] = decided.planning_seconds
    checked = fingerprint(frame)
    query_first = status.next_execution()
    started = time.perf_counter()
    row = handle.call(plan, checked.collect)[0]
    figures["query_s"] = time.perf_counter() - started
    if decided is not None:
        # What it persisted for a split above a split: computed anew by the next run.
        decided.release()
    figures["wall_s"] = figures["query_s"] + figures.get("optimize_s", 0.0)
    stages = status.stages_since(first, native=True)
    if plan == "optimize":
        # A recurring job's call: the same query over the same files again, its statistics
        # kept from the call above (the query itself would run as above). After the stages
        # are read: a job it ran would not count.
        started = time.perf_counter()
        ks.optimize(query, **options)
        figures["recurring_optimize_s"] = time.perf_counter() - started
        figures["recurring_wall_s"] = figures["query_s"] + figures["recurring_optimize_s"]
    keyed = keyed_stages(stages)
    straggler = max(keyed, key=lambda s: s["max_task_s"], default=None)
    figures |= {
        "result": [row["rows"], row["digest"]],
        "makespan_32_slots_computed_s": sum(lpt_makespan(s["task_seconds"], SLOTS) for s in stages),
        "hottest_over_mean_bytes": max((s["hottest_over_mean_bytes"] for s in keyed), default=0.0),
        "hottest_over_mean_records": max((s["hottest_over_mean_records"] for s in keyed), default=0.0),
        # The keyed stage of the query's slowest task: a cheap stage may read a skewed
        # shuffle yet take milliseconds.
        "straggler_stage_hottest_over_mean_bytes": straggler["hottest_over_mean_bytes"] if straggler else 0.0,
        "straggler_stage_hottest_over_mean_records": straggler["hottest_over_mean_records"] if straggler else 0.0,
        "straggler_task_s": straggler["max_task_s"] if straggler else 0.0,
        "rows_shuffled": sum(s["shuffle_write_records"] for s in stages),
        "keyed_stages": keyed,
        "stages": stage_briefs(stages, SLOTS),
    }
    if plan == "optimize":
        statistics_stages = [s for s in stages if s["execution"] < query_first]
        figures["statistics_makespan_32_slots_computed_s"] = sum(
            lpt_makespan(s["task_seconds"], SLOTS) for s in statistics_stages
        )
        # A recurring run's: its statistics kept, their stages not run.
        figures["recurring_makespan_32_slots_computed_s"] = (
            figures["makespan_32_slots_computed_s"] - figures["statistics_makespan_32_slots_computed_s"]
        )
        figures["returned_the_query"] = frame is query
        same = frame.schema == query.schema
        figures["schemas"] = (
            None if same else {"spark": query.schema.simpleString(), "optimize": frame.schema.simpleString()}
        )
    if decided is not None:
        figures["rewritten"] = [d.operator for d in decided.rewritten]
        figures["report"] = decided
    return figures


def run_query(
    handle: Any, status: SparkStatus, build: Callable[[], Any], repeats: int, options: dict[str, Any]
) -> dict[str, Any]:
    """Warm-up, then ``repeats`` pairs of the two plans, alternated; a plan that raises is
    recorded as failed (with its error) and not run again."""
    runs: dict[str, list[dict[str, Any]]] = {plan: [] for plan in PLANS}
    failed: dict[str, str] = {}
    extra: dict[str, Any] = {}

    def attempt(plan: str, *, reported: bool = False) -> dict[str, Any] | None:
        try:
            query = build()
            figures = run_plan(handle, status, query, plan, options, reported=reported)
        except Exception as error:  # recorded, as the module's notes say: optimize must not raise
            failed[plan] = f"{type(error).__name__}: {error}"[:2000]
            print(f"  {plan}: failed: {failed[plan]}", flush=True)
            traceback.print_exc()
            return None
        if plan == "optimize" and figures["schemas"] is not None:
            extra["schemas"] = figures["schemas"]
        return figures

    for plan in PLANS:  # warm-up, optimize's with its report
        warm = attempt(plan, reported=True)
        if plan == "optimize" and warm is not None:
            # Then as the timed runs plan it (no observation): its generated code differs, and
            # each executor compiles it on first use (on cluster:2, two JVMs; the first
            # unreported run's map stage took 1.3x the next one's).
            attempt(plan)
        decided = warm.pop("report", None) if warm is not None else None
        if decided is not None:
            assert warm is not None
            extra |= {
                "report": str(decided),
                "decisions": decisions(decided),
                "rewritten": warm["rewritten"],
                "statistics_s": warm["statistics_s"],
                "planning_s": warm["planning_s"],
            }
            print("    " + extra["report"].replace("\n", "\n    "), flush=True)
    for repeat in range(repeats):
        for plan in PLANS if repeat % 2 == 0 else tuple(reversed(PLANS)):
            if plan in failed:
                continue
            figures = attempt(plan)
            if figures is None:
                continue
            runs[plan].append(figures)
            call = f" (optimize() {figures['optimize_s']:.2f} s)" if plan == "optimize" else ""
            print(
                f"  {plan}: {figures['wall_s']:.2f} s{call}, slowest keyed stage's hottest task "
                f"{figures['straggler_stage_hottest_over_mean_bytes']:.2f}x its mean bytes (of all keyed stages "
                f"{figures['hottest_over_mean_bytes']:.2f}x), 32-slot makespan (computed) "
                f"{figures['makespan_32_slots_computed_s']:.2f} s",
                flush=True,
            )
    return {"runs": runs, "failed": failed, **extra}


def summarise(figures: dict[str, Any]) -> dict[str, Any]:
    """The medians per plan, whether every result equals Spark's, and the ratios."""
    runs = figures["runs"]
    if figures["failed"] or not all(runs.values()):
        return {}
    summary = medians_and_exactness(runs, "spark")
    median = summary["median"]
    ours, theirs = median["optimize"], median["spark"]
    for name, value in runs["optimize"][0].items():
        if isinstance(value, float) and name not in ours:
            ours[name] = statistics.median(run[name] for run in runs["optimize"])
    summary["wall optimize / spark"] = ours["wall_s"] / theirs["wall_s"]
    summary["wall recurring / spark"] = ours["recurring_wall_s"] / theirs["wall_s"]
    summary["makespan spark / optimize"] = theirs["makespan_32_slots_computed_s"] / max(
        ours["makespan_32_slots_computed_s"], 1e-9
    )
    summary["makespan spark / recurring"] = theirs["makespan_32_slots_computed_s"] / max(
        ours["recurring_makespan_32_slots_computed_s"], 1e-9
    )
    summary["returned_the_query"] = all(run["returned_the_query"] for run in runs["optimize"])
    return summary


# --- output ------------------------------------------------------------------------------


def operators_cell(figures: dict[str, Any]) -> str:
    """The keyed operators: a rewritten one ticked, every other with why it was left."""
    cells = []
    for row in figures.get("decisions", []):
        name = row["operator"] if row["kind"] == "join" else row["kind"]
        cells.append(f"{name} ✔" if row["rewritten"] else f"{name}: {row['rule']}")
    return "; ".join(cells) or "–"


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    header = [
        "level",
        "query",
        "keyed operators (✔ rewritten by optimize)",
        "Spark s",
        "optimize s (its call; statistics)",
        "wall optimize / Spark (recurring)",
        "32-slot makespan, computed: Spark / optimize s",
        "makespan Spark / optimize (recurring)",
        "hottest task / mean bytes, slowest keyed stage (any keyed stage): Spark / optimize",
        "equal",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * 3 + ["--:"] * 6 + ["---"]) + "|"]
    for figures in results.values():
        share, name = f"{figures['level']} ({figures['share']:.0%})", figures["query"]
        if "median" not in figures:
            failed = "; ".join(f"{plan} failed" for plan in figures["failed"]) or "no runs"
            lines.append(
                f"| {share} | {name} | {operators_cell(figures)} | " + " | ".join(["–"] * 6) + f" | {failed} |"
            )
            continue
        spark, ours = figures["median"]["spark"], figures["median"]["optimize"]
        equal = all(figures["exact"].values()) and "schemas" not in figures
        # Rows merged from runs before the recurring figures (and with each timed run's own
        # statistics seconds) are shown as they were measured.
        statistics = figures.get("statistics_s", ours.get("statistics_s", float("nan")))

        def recurring(name: str, figures: dict[str, Any] = figures) -> str:
            return f" ({figures[name]:.2f})" if name in figures else ""

        cells = [
            share,
            name,
            operators_cell(figures),
            f"{spark['wall_s']:.2f}",
            f"{ours['wall_s']:.2f} ({ours['optimize_s']:.2f}; {statistics:.2f})",
            f"{figures['wall optimize / spark']:.2f}{recurring('wall recurring / spark')}",
            f"{spark['makespan_32_slots_computed_s']:.2f} / {ours['makespan_32_slots_computed_s']:.2f}",
            f"{figures['makespan spark / optimize']:.2f}{recurring('makespan spark / recurring')}",
            f"{spark['straggler_stage_hottest_over_mean_bytes']:.2f} ({spark['hottest_over_mean_bytes']:.2f}) / "
            f"{ours['straggler_stage_hottest_over_mean_bytes']:.2f} ({ours['hottest_over_mean_bytes']:.2f})",
            "yes" if equal else "**NO**",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def problems(results: dict[str, dict[str, Any]]) -> list[str]:
    """Every failed plan, result unequal to Spark's and schema unequal to the query's."""
    found = []
    for label, figures in results.items():
        found += [f"{label}: {plan} failed: {error}" for plan, error in figures["failed"].items()]
        found += [
            f"{label}: {plan}'s result differs from Spark's" for plan, ok in figures.get("exact", {}).items() if not ok
        ]
        if "schemas" in figures:
            found.append(f"{label}: optimize's schema differs from the query's: {figures['schemas']}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--keys", type=lambda t: int(float(t)), default=100_000)
    parser.add_argument("--share", type=float, nargs="+", default=[0.0, 0.08, 0.3])
    parser.add_argument("--tpch-scale", type=float, help="TPC-H scale factor (default: --rows / 10^7)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="local")
    parser.add_argument(
        "--queries", nargs="*", help=f"run only the queries whose names start so ({', '.join(QUERIES)})"
    )
    parser.add_argument("--seed", type=int, default=0, help="optimize()'s seed")
    parser.add_argument(
        "--min-rows", type=lambda t: int(float(t)), help="optimize()'s cost guard size (default: the library's)"
    )
    parser.add_argument("--output", type=Path)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "keysplit-optimize")
    args = parser.parse_args()
    chosen = [q for q in QUERIES if not args.queries or any(q.startswith(prefix) for prefix in args.queries)]
    if not chosen:
        parser.error(f"--queries: no query's name starts with {' or '.join(args.queries)}; choose from {QUERIES}")
    scale = args.tpch_scale or round(args.rows / 1e7, 4)
    output = args.output or RESULTS / (
        "spark_optimize.json" if args.setup == "local" else "spark_optimize_cluster.json"
    )
    args.data_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    settings = {**vars(args), "output": str(output), "data_dir": str(args.data_dir), "tpch_scale": scale, "conf": CONF}

    def write(complete: bool) -> None:
        write_results(
            output,
            "multi-operator queries: keysplit.spark.optimize(query) against Spark's own plan",
            settings,
            queries=results,
            table_markdown=markdown_table(results),
            complete=complete,
        )

    optimize_options: dict[str, Any] = {"seed": args.seed}
    if args.min_rows is not None:
        optimize_options["min_rows"] = args.min_rows
    with ks.session(master=SETUPS[args.setup], ui=True, driver_memory="4g", **CONF) as handle:
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        for share in args.share:
            frames: dict[str, Any] = {}
            if any(not q.startswith("tpch") for q in chosen):
                frames |= synthetic(handle.spark, args.data_dir, args.rows, args.keys, share)
            if any(q.startswith("tpch") for q in chosen):
                frames |= tpch(handle.spark, args.data_dir, scale, share)
            built = queries(frames)
            for name in chosen:
                print(f"{level(share)} ({share:.0%}), {name}", flush=True)
                figures = run_query(handle, status, built[name], args.repeats, optimize_options)
                results[f"{share:g} {name}"] = {"level": level(share), "share": share, "query": name}
                results[f"{share:g} {name}"] |= figures | summarise(figures)
                write(complete=False)
    write(complete=True)
    print(markdown_table(results))
    found = problems(results)
    for problem in found:
        print(f"PROBLEM {problem}")
    print(f"wrote {output}")
    if found:
        sys.exit(1)


if __name__ == "__main__":
    main()
