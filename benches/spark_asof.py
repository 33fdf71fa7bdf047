"""As-of joins with a hot series on Spark: ``keysplit.spark.asof_join`` against the window over
the union of both sides, as it is written by hand, and ``pyspark.pandas.merge_asof``.

**Input**, generated in Spark and written to Parquet: ``--trades`` left rows (``id``,
``series``, ``ts`` a timestamp at whole seconds over 30 days, ``qty``) and ``--quotes`` right
rows (``quote_id``, ``series``, ``ts`` a timestamp on an even grid of the 30 days, unique, so
that no two quotes tie; ``bid``, ``ask``), over ``--series`` series. Series 0 holds
``--share`` of the rows of both sides (``--share 0`` is the control: every series uniform).
Some trades fall on a quote's second exactly (exact matches). Each side in ``--files`` files
(32), a scan task each, as Spark sizes the splits of such an input for 32 cores (on this
machine's 2 it would make 2; the makespan is computed for 32 slots).

**Plans**, in one session, alternated after an untimed warm-up of each (A B, then B A,
``--repeats`` times), for each direction (backward, forward, nearest) without a tolerance and
with ``--tolerance-minutes``:

- ``union``: the hand-written plan, Spark's own window over the union of both sides: each
  side's columns in a struct, ``last(quote, ignorenulls=True)`` over
  ``Window.partitionBy("series").orderBy("ts", side)`` up to the current row (backward), the
  same in descending time (forward; ``first(...)`` from the current row to the end would be
  quadratic per series), both for nearest (one exchange, two sorts), then the trades' rows;
- ``keysplit``: ``keysplit.spark.skewed(trades).asof_join(quotes, on="ts", by="series",
  ...)``: the union sampled when it is called (timed with the query), a hot series cut at
  literal cuts, and a plan with no hot series left to Spark's own window.

Both end in the same fingerprint (rows, and a sum of a hash of each row), which must be
equal. Per run: the wall seconds; from Spark's REST status API every stage's task seconds
and the window stages' (those that read more than 5 % of the union's rows from a shuffle)
rows per task: the hottest task's rows over a mean task's (the rows the window stages read,
over 32 tasks per pass over the union); the makespan on 32 slots **computed** by LPT from the
measured task times, stage after stage (this machine has 2 cores). Medians per plan.

**Against pandas.** Once per direction and tolerance (untimed), whole series (series 0 and
three others) of both sides are collected, joined by ``pandas.merge_asof`` and compared row
for row with keysplit's rows of those series.

**pyspark.pandas.merge_asof** (``--pandas-sizes``): the same query on the first
``n`` trades and ``n / 5`` quotes (every direction without a tolerance would take hours:
backward only), timed against keysplit on the same rows, each size in turn until one takes
longer than ``--pandas-timeout`` seconds (its job is then cancelled): pandas-on-Spark plans
Spark's as-of join, a join of every trade with every quote of its series before the nearest
is kept (N x M within a series).

    python benches/spark_asof.py --setup local
    python benches/spark_asof.py --trades 2e5 --quotes 4e4 --series 100 --repeats 1 --pandas-sizes 1e4
    python benches/spark_asof.py --setup cluster --pandas-sizes

Writes ``benches/results/spark_asof[_cluster].json`` (rewritten after every row).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from keysplit import spark as ks
from spark_vs_native import BENCH_CONF, RESULTS, SETUPS, Report, SparkStatus, fingerprint, lpt_makespan, stage_briefs

SLOTS = 32
PLANS = ("union", "keysplit")
DIRECTIONS = ("backward", "forward", "nearest")
CONF = {
    **BENCH_CONF,
    "spark.sql.shuffle.partitions": str(SLOTS),
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
}
#: A stage reading more than this share of the union's rows from a shuffle is a window stage.
WINDOW_STAGE_SHARE = 0.05
START_S = 1_767_225_600  # 2026-01-01 00:00:00 UTC
SPAN_S = 30 * 86_400
HOT_SERIES = 0
#: The series compared with pandas.merge_asof: the hot one and three others.
CHECKED_SERIES = (HOT_SERIES, 17, 4_242, 9_001)


def generate(handle: ks.Session, directory: Path, args: argparse.Namespace, share: float) -> dict[str, str]:
    """Trades and quotes (module notes) as Parquet directories."""
    from pyspark.sql import functions as F

    def uniform(seed: int) -> Any:
        return F.pmod(F.xxhash64("id", F.lit(seed)), F.lit(1_000_000)) / F.lit(1_000_000.0)

    def series(seed: int) -> Any:
        other = 1 + F.pmod(F.xxhash64("id", F.lit(seed + 1)), F.lit(args.series - 1))
        return F.when(uniform(seed) < share, F.lit(HOT_SERIES)).otherwise(other).cast("int").alias("series")

    trades = handle.spark.range(0, args.trades, 1, args.files).select(
        "id",
        series(1),
        F.timestamp_seconds(F.lit(START_S) + F.pmod(F.xxhash64("id", F.lit(3)), F.lit(SPAN_S))).alias("ts"),
        (1 + F.pmod(F.xxhash64("id", F.lit(4)), F.lit(1000))).cast("int").alias("qty"),
    )
    step_us = SPAN_S * 1_000_000 // args.quotes
    price = 100 + F.pmod(F.xxhash64("id", F.lit(6)), F.lit(10_000)) / F.lit(100.0)
    quotes = handle.spark.range(0, args.quotes, 1, args.files).select(
        F.col("id").alias("quote_id"),
        series(5),
        F.timestamp_micros(F.lit(START_S * 1_000_000) + F.col("id") * F.lit(step_us)).alias("ts"),
        price.alias("bid"),
        (price + F.lit(0.05)).alias("ask"),
    )
    paths = {"trades": str(directory / "trades"), "quotes": str(directory / "quotes")}
    handle.call("writing the trades", lambda: trades.write.mode("overwrite").parquet(paths["trades"]))
    handle.call("writing the quotes", lambda: quotes.write.mode("overwrite").parquet(paths["quotes"]))
    return paths


def union_plan(trades: Any, quotes: Any, direction: str, tolerance: datetime.timedelta | None) -> Any:
    """The hand-written plan (module notes): Spark's own window over both sides' rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    lefts = trades.select("series", "ts", F.struct(*trades.columns).alias("trade"))
    quote = F.struct("quote_id", "bid", "ask", F.col("ts").alias("quote_ts"))
    rights = quotes.select("series", "ts", quote.alias("quote"))
    both = lefts.unionByName(rights, allowMissingColumns=True)
    series = Window.partitionBy("series")
    # A quote at a trade's time is an exact match: ordered before the trade. Forward is the
    # last quote in descending time: Spark computes first(...) over the rows from the current
    # one to the end anew at each row (237 s against 1.2 s at 2 x 10^5 trades).
    up_to_here = (Window.unboundedPreceding, Window.currentRow)
    looking_back = series.orderBy(F.col("ts").asc(), F.col("quote").isNull()).rowsBetween(*up_to_here)
    looking_forward = series.orderBy(F.col("ts").desc(), F.col("quote").isNull()).rowsBetween(*up_to_here)
    back = F.last("quote", ignorenulls=True).over(looking_back)
    forth = F.last("quote", ignorenulls=True).over(looking_forward)
    columns = {"back": back} if direction == "backward" else {"forth": forth} if direction == "forward" else {}
    if direction == "nearest":
        columns = {"back": back, "forth": forth}
    matched = both.withColumns(columns).where(F.col("trade").isNotNull())

    def distance(match: Any) -> Any:
        return F.abs(F.col("ts") - match.getField("quote_ts"))

    if direction == "nearest":
        b, f = F.col("back"), F.col("forth")
        match = F.when(f.isNull(), b).when(b.isNull(), f).when(distance(b) <= distance(f), b).otherwise(f)
    else:
        match = F.col("back" if direction == "backward" else "forth")
    if tolerance is not None:
        match = F.when(distance(match) <= F.lit(tolerance), match)
    matched = matched.withColumn("match", match)
    return matched.select("trade.*", *[F.col("match").getField(c).alias(c) for c in ("quote_id", "bid", "ask")])


def keysplit_plan(trades: Any, quotes: Any, direction: str, tolerance: datetime.timedelta | None) -> Any:
    """The join through ``skewed()``: its statistics job runs here, inside the timed call, each
    run as a first run (a sample kept from an earlier call over the same files is dropped)."""
    ks.forget_statistics()
    return ks.skewed(trades).asof_join(quotes, on="ts", by="series", direction=direction, tolerance=tolerance)


def measure(handle: ks.Session, status: SparkStatus, build: Any, union_rows: int) -> dict[str, Any]:
    """One run of the plan ``build()`` makes, timed from the call that builds it (keysplit's
    statistics job is part of its wall and its stages): its wall seconds, fingerprint, stages
    and window stages' figures."""
    first = status.next_execution()
    started = time.perf_counter()
    row = handle.call("as-of join", fingerprint(build()).collect)[0]
    wall = time.perf_counter() - started
    stages = status.stages_since(first, native=True)
    read_by = "task_shuffle_records_read"
    windows = [s for s in stages if sum(s[read_by]) > WINDOW_STAGE_SHARE * union_rows]
    read = sum(sum(s[read_by]) for s in windows)
    # A mean task's rows: each pass over the union (keysplit's nearest makes two) over 32 tasks;
    # a pass's rows may be read by two stages (the series not hot, the hot series' ranges).
    passes = max(1, round(read / union_rows))
    hottest = max((max(s[read_by]) for s in windows), default=0)
    heaviest = max(windows, key=lambda s: max(s[read_by]), default=None)
    return {
        "wall_s": wall,
        "result": [row["rows"], row["digest"]],
        "window_stages": len(windows),
        "passes": passes,
        "hottest_over_mean_records": hottest / (read / (SLOTS * passes)) if read else None,
        "hottest_window_task_s": max(heaviest["task_seconds"]) if heaviest else None,
        "task_s": sum(sum(s["task_seconds"]) for s in stages),
        f"makespan_{SLOTS}_slots_computed_s": sum(lpt_makespan(s["task_seconds"], SLOTS) for s in stages),
        "stages": stage_briefs(stages, SLOTS),
    }


def alternated(run: Any, repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Each plan once untimed, then ``repeats`` times in turn (A B, then B A)."""
    for plan in PLANS:
        run(plan)
    runs: dict[str, list[dict[str, Any]]] = {plan: [] for plan in PLANS}
    for repeat in range(repeats):
        for plan in PLANS if repeat % 2 == 0 else reversed(PLANS):
            runs[plan].append(run(plan))
            figures = runs[plan][-1]
            hottest = figures["hottest_over_mean_records"]
            print(
                f"  {plan}: {figures['wall_s']:.2f} s, hottest window task "
                f"{'-' if hottest is None else f'{hottest:.2f}'}x the mean, 32-slot makespan (computed) "
                f"{figures[f'makespan_{SLOTS}_slots_computed_s']:.2f} s",
                flush=True,
            )
    return runs


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per plan the median of each figure, and whether every run's result is the union plan's."""
    reference = runs["union"][0]["result"]
    medians = {
        plan: {
            k: statistics.median(r[k] for r in rs if r[k] is not None)
            for k, v in rs[0].items()
            if isinstance(v, (int, float)) and any(r[k] is not None for r in rs)
        }
        | {"stages": rs[0]["stages"]}
        for plan, rs in runs.items()
    }
    return {"plans": medians, "equal": {plan: all(r["result"] == reference for r in rs) for plan, rs in runs.items()}}


def pandas_check(handle: ks.Session, trades: Any, quotes: Any, direction: str, tolerance: Any) -> dict[str, Any]:
    """keysplit's rows of whole series against ``pandas.merge_asof`` of the same series."""
    import pandas as pd
    from pyspark.sql import functions as F

    def series_of(frame: Any) -> pd.DataFrame:
        chosen = frame.where(F.col("series").isin(*CHECKED_SERIES))
        return handle.call("collecting whole series", chosen.toPandas)

    ours = series_of(keysplit_plan(trades, quotes, direction, tolerance)).sort_values("id", ignore_index=True)
    left = series_of(trades).sort_values("ts", kind="stable")
    right = series_of(quotes).sort_values("ts", kind="stable")
    theirs = pd.merge_asof(
        left,
        right,
        on="ts",
        by="series",
        direction=direction,
        tolerance=None if tolerance is None else pd.Timedelta(tolerance),
    )
    theirs = theirs.sort_values("id", ignore_index=True)[list(ours.columns)]
    theirs["quote_id"] = theirs["quote_id"].astype("Int64")
    ours["quote_id"] = ours["quote_id"].astype("Int64")
    equal = ours.equals(theirs) or _same(ours, theirs)
    return {
        "series": list(CHECKED_SERIES),
        "trades": len(ours),
        "matched": int(ours["quote_id"].notna().sum()),
        "equal": equal,
    }


def _same(ours: Any, theirs: Any) -> bool:
    """Equal but for the dtypes each side's nulls gave a column."""
    import pandas as pd

    try:
        pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
    except AssertionError as difference:
        print(f"  keysplit and pandas.merge_asof differ: {difference}", file=sys.stderr)
        return False
    return True


def pandas_on_spark(
    handle: ks.Session, status: SparkStatus, trades: Any, quotes: Any, sizes: list[int], timeout: float
) -> list[dict[str, Any]]:
    """``pyspark.pandas.merge_asof`` against keysplit on the first ``n`` trades (module notes)."""
    import pyspark.pandas as ps

    rows: list[dict[str, Any]] = []
    os.environ["SPARK_REMOTE"] = handle.url  # where pandas-on-Spark finds its session
    ps.set_option("compute.default_index_type", "distributed")
    try:
        for size in sizes:
            left = trades.where(trades.id < size)
            right = quotes.where(quotes.quote_id < size // 5)
            merged = ps.merge_asof(left.pandas_api(), right.pandas_api(), on="ts", by="series").to_spark()
            cancel = threading.Timer(timeout, handle.spark.interruptAll)
            cancel.start()
            started = time.perf_counter()
            try:
                theirs = fingerprint(merged).collect()[0]
            except Exception as error:  # cancelled, or failed: either way it did not finish
                print(f"  pandas-on-Spark at {size:,} trades did not finish: {str(error)[:200]}", flush=True)
                rows.append({"trades": size, "pandas_on_spark_s": None, "finished": False, "timeout_s": timeout})
                break
            finally:
                cancel.cancel()
            theirs_s = time.perf_counter() - started
            ours = measure(handle, status, lambda: keysplit_plan(left, right, "backward", None), int(size * 1.2))
            row = {
                "trades": size,
                "pandas_on_spark_s": theirs_s,
                "keysplit_s": ours["wall_s"],
                "finished": True,
                "equal": [theirs["rows"], theirs["digest"]] == ours["result"],
            }
            print(f"  {size:,} trades: pandas-on-Spark {theirs_s:.1f} s, keysplit {ours['wall_s']:.1f} s", flush=True)
            rows.append(row)
    finally:
        del os.environ["SPARK_REMOTE"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trades", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--quotes", type=lambda t: int(float(t)), default=2_000_000)
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=32, help="Parquet files per side (a scan task each)")
    parser.add_argument("--share", type=float, nargs="*", default=[0.4, 0.0])
    parser.add_argument("--directions", nargs="+", choices=DIRECTIONS, default=list(DIRECTIONS))
    parser.add_argument("--tolerance-minutes", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pandas-sizes", type=lambda t: int(float(t)), nargs="*", default=[10_000, 30_000, 100_000])
    parser.add_argument("--pandas-timeout", type=float, default=600.0)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="local")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.series <= max(CHECKED_SERIES):
        parser.error(f"--series must be above {max(CHECKED_SERIES)}: series {CHECKED_SERIES} are checked")
    output = args.output or RESULTS / f"spark_asof{'' if args.setup == 'local' else '_' + args.setup}.json"
    settings = {k: v for k, v in vars(args).items() if k != "output"} | {"output": str(output), "conf": CONF}
    report = Report(output, {"benchmark": "spark_asof", "settings": settings}, started=time.perf_counter(), table=table)
    tolerance = datetime.timedelta(minutes=args.tolerance_minutes)
    problems = []
    with (
        tempfile.TemporaryDirectory(prefix="keysplit-asof-") as scratch,
        ks.session(master=SETUPS[args.setup], ui=True, driver_memory="4g", **CONF) as handle,
    ):
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        union_rows = args.trades + args.quotes
        for share in args.share:
            paths = generate(handle, Path(scratch) / f"in-{share}", args, share)
            trades, quotes = (handle.spark.read.parquet(paths[side]) for side in ("trades", "quotes"))
            for direction in args.directions:
                for limit in (None, tolerance):
                    print(f"{share:.0%} {direction}, tolerance {limit}", flush=True)
                    plans = {"union": union_plan, "keysplit": keysplit_plan}
                    runs = alternated(
                        lambda plan, d=direction, t=limit: measure(
                            handle, status, lambda: plans[plan](trades, quotes, d, t), union_rows
                        ),
                        args.repeats,
                    )
                    row = {
                        "share": share,
                        "direction": direction,
                        "tolerance_minutes": None if limit is None else args.tolerance_minutes,
                        **summary(runs),
                        "pandas": pandas_check(handle, trades, quotes, direction, limit),
                    }
                    report.add(row)
                    problems += [
                        f"{share} {direction} {limit}: {p} differs" for p, ok in row["equal"].items() if not ok
                    ]
                    if not row["pandas"]["equal"]:
                        problems.append(f"{share} {direction} {limit}: keysplit differs from pandas.merge_asof")
            if share and args.pandas_sizes:
                found = pandas_on_spark(handle, status, trades, quotes, args.pandas_sizes, args.pandas_timeout)
                report.document["pandas_on_spark"] = {"share": share, "sizes": found}
                problems += [f"pandas-on-Spark at {r['trades']}: differs" for r in found if r.get("equal") is False]
                report.write()
    report.write(complete=True)
    print(report.document["table_markdown"])
    for problem in problems:
        print(f"PROBLEM {problem}", file=sys.stderr)
    print(f"wrote {output}")
    if problems:
        sys.exit(1)


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| top series | direction | tolerance | plan | wall s | over union | 32-slot makespan s, computed | "
        "union / plan makespan | hottest window task / mean | equal | = pandas |\n"
        "|---|---|---|---|--:|--:|--:|--:|--:|---|---|"
    )
    lines = [head]
    for row in rows:
        union = row["plans"]["union"]
        for plan in PLANS:
            m = row["plans"][plan]
            span = f"makespan_{SLOTS}_slots_computed_s"
            hottest = m.get("hottest_over_mean_records")
            tolerance = "-" if row["tolerance_minutes"] is None else f"{row['tolerance_minutes']:g} min"
            lines.append(
                f"| {row['share']:.0%} | {row['direction']} | {tolerance} | {plan} | {m['wall_s']:.2f} | "
                f"{m['wall_s'] / union['wall_s']:.2f} | {m[span]:.2f} | {union[span] / m[span]:.2f} | "
                f"{'-' if hottest is None else f'{hottest:.2f}'} | {'yes' if row['equal'][plan] else 'NO'} | "
                f"{('yes' if row['pandas']['equal'] else 'NO') if plan == 'keysplit' else ''} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
