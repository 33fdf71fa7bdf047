"""explain_skew against what Spark then did, on every workload of the join, window and
holistic benchmarks.

For each workload, in one session: ``keysplit.spark.explain_skew`` (timed; it runs one
measuring job, not the query), then Spark's own query, whose final adaptive plan is read
from Spark's REST status API (a split join prints ``SortMergeJoin(skew=true)``) with the
per-task figures the three benchmarks read (``spark_skew_join.measure``,
``spark_window.measure``, ``spark_holistic.measure``): the hottest task's share of the
records (windows) or of the bytes (holistic aggregates) its stage read; for joins, of the
shuffle records read by the stage whose largest task reads the most (the query's straggler:
after a forced split, the operator above the join). Checked:

- the verdict "Spark splits / does not split" against the final plan;
- the predicted share of the hottest task within 25 % of the measured one (the operator
  explain_skew predicts the hottest, against the stage measured the hottest);
- explain_skew's time against one ``hot_keys`` pass over the workload's largest input,
  run in the same session (``hot_keys`` is timed once per input); each the faster of two
  calls after a warm-up call.

The join workloads run under Spark's defaults and under the join benchmark's tuned
settings (skew threshold and advisory size 4 MB, ``forceOptimizeSkewedJoin``), where Spark
does split. Example::

    python benches/spark_explain_skew.py --rows 1e7 --share 0.3 --setup local

Writes ``benches/results/spark_explain_skew[_cluster].json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import spark_holistic
import spark_skew_join
import spark_window
from keysplit import spark as ks
from spark_vs_native import RESULTS, SETUPS, SparkStatus, fingerprint, write_results

TOLERANCE = 0.25


def final_plans(status: SparkStatus, first: int) -> str:
    return "\n".join(e.get("planDescription", "") for e in status._executions(first))


def judged(explained: Any) -> dict[str, Any]:
    """The operator explain_skew predicts the hottest, and whether it says Spark splits any."""
    rows = list(explained.iter_rows(named=True))
    hottest = max(rows, key=lambda row: row["hottest_task_share"] or 0.0)
    return {
        "operator": hottest["operator"],
        "rule": hottest["rule"],
        "why": hottest["why"],
        "fix": hottest["fix"],
        "hot_keys": [{k: v for k, v in h.items()} for h in hottest["hot_keys"]],
        "predicted_share": hottest["hottest_task_share"],
        "predicted_split": any(row["spark_splits"] for row in rows),
        "operators": [f"{row['operator']}: {row['rule']}" for row in rows],
    }


def check(
    workload: str, explain_s: float, hot_keys_s: float, verdict: dict[str, Any], plan: str, measured: float
) -> dict[str, Any]:
    split = "SortMergeJoin(skew=true)" in plan
    predicted = verdict["predicted_share"]
    error = abs(predicted - measured) / measured if predicted is not None and measured else None
    row = {
        "workload": workload,
        **verdict,
        "spark_split": split,
        "verdict_agrees": verdict["predicted_split"] == split,
        "measured_share": measured,
        "share_error": error,
        "share_within_25pct": error is not None and error <= TOLERANCE,
        "explain_s": explain_s,
        "hot_keys_s": hot_keys_s,
        "explain_over_hot_keys": explain_s / hot_keys_s,
    }
    print(
        f"  {workload}: {verdict['rule']}; Spark split: {split} (agrees: {row['verdict_agrees']}); hottest task "
        f"predicted {predicted if predicted is None else f'{predicted:.1%}'}, measured {measured:.1%}; "
        f"explain {explain_s:.2f} s = {row['explain_over_hot_keys']:.2f}x one hot_keys pass",
        flush=True,
    )
    return row


def timed(action: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = action()
    return value, time.perf_counter() - started


def best_of_two(action: Any) -> tuple[Any, float]:
    """``action``'s value and its faster time of two calls after a warm-up call: how both
    explain_skew and hot_keys are timed."""
    action()
    runs = [timed(action) for _ in range(2)]
    return runs[0][0], min(seconds for _, seconds in runs)


def hot_keys_time(frame: Any) -> float:
    return best_of_two(lambda: ks.hot_keys(frame, key="k"))[1]


def joins(handle: Any, status: SparkStatus, args: Any, share: float) -> list[dict[str, Any]]:
    frames = spark_skew_join.inputs(handle.spark, args.data_dir, args.rows, args.keys, share)
    baseline = hot_keys_time(frames["facts"])
    rows = []
    for name, build in spark_skew_join.shapes(frames).items():
        plans = ("spark tuned",) if name.startswith("control") else ("spark", "spark tuned")
        for plan in plans:
            conf = handle.spark.conf
            for setting, value in spark_skew_join.TUNED.items():
                conf.set(setting, value) if plan == "spark tuned" else conf.unset(setting)
            query = build(spark_skew_join.spark_join)
            explained, seconds = best_of_two(lambda q=query: ks.explain_skew(q))
            first = status.next_execution()
            figures = spark_skew_join.measure(handle, status, plan, build, {})
            rows.append(
                check(
                    f"{share:.0%} join {name} ({plan})",
                    seconds,
                    baseline,
                    judged(explained),
                    final_plans(status, first),
                    figures["straggler_share_of_shuffle_records"],
                )
            )
    for setting in spark_skew_join.TUNED:
        handle.spark.conf.unset(setting)
    return rows


def families(
    status: SparkStatus,
    label: str,
    frame: Any,
    queries: dict[str, Any],
    measure: Any,
    measured: str,
) -> list[dict[str, Any]]:
    """Each family's query of ``frame``: explained, then Spark's own run measured."""
    baseline = hot_keys_time(frame)
    rows = []
    for name, query in queries.items():
        explained, seconds = best_of_two(lambda q=query: ks.explain_skew(q))
        first = status.next_execution()
        figures = measure(fingerprint(query))
        rows.append(
            check(
                f"{label} {name}", seconds, baseline, judged(explained), final_plans(status, first), figures[measured]
            )
        )
    frame.unpersist()
    return rows


def windows(handle: Any, status: SparkStatus, args: Any, share: float) -> list[dict[str, Any]]:
    frame = spark_window.inputs(handle.spark, args.rows, args.keys, share)
    queries = {name: frame.withColumns(columns()) for name, columns in spark_window.families(["k"]).items()}
    return families(
        status,
        f"{share:.0%} window",
        frame,
        queries,
        lambda query: spark_window.measure(handle, status, query, args.rows),
        "hottest_share_of_records",
    )


def holistic(handle: Any, status: SparkStatus, args: Any, share: float) -> list[dict[str, Any]]:
    frame = spark_holistic.inputs(handle.spark, args.rows, args.keys, share)
    queries = {}
    for name, columns in spark_holistic.families().items():
        aggregated = frame.groupBy("k").agg(*columns())
        # Plain names for the fingerprint, as spark_holistic's (Spark's own do not read back).
        queries[name] = aggregated.toDF(*[f"c{i}" for i in range(len(aggregated.columns))])
    return families(
        status,
        f"{share:.0%} holistic",
        frame,
        queries,
        lambda query: spark_holistic.measure(handle, status, query),
        "hottest_share_of_bytes",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--keys", type=lambda t: int(float(t)), default=100_000)
    parser.add_argument("--share", type=float, nargs="+", default=[0.3])
    parser.add_argument("--setup", choices=sorted(SETUPS), default="local")
    parser.add_argument("--families", nargs="*", default=["join", "window", "holistic"])
    parser.add_argument("--output", type=Path)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "keysplit-skew-join")
    args = parser.parse_args()
    output = args.output or RESULTS / (
        "spark_explain_skew.json" if args.setup == "local" else "spark_explain_skew_cluster.json"
    )
    rows: list[dict[str, Any]] = []
    with ks.session(master=SETUPS[args.setup], ui=True, driver_memory="4g", **spark_skew_join.CONF) as handle:
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        for share in args.share:
            for family, run in (("join", joins), ("window", windows), ("holistic", holistic)):
                if family in args.families:
                    print(f"share {share:.0%}, {family}", flush=True)
                    rows.extend(run(handle, status, args, share))
    agree = sum(r["verdict_agrees"] for r in rows)
    within = sum(r["share_within_25pct"] for r in rows)
    cheaper = sum(r["explain_over_hot_keys"] <= 1 for r in rows)
    summary = {
        "workloads": len(rows),
        "verdicts_agree": agree,
        "shares_within_25pct": within,
        "explain_at_most_one_hot_keys_pass": cheaper,
        "median_explain_over_hot_keys": sorted(r["explain_over_hot_keys"] for r in rows)[len(rows) // 2]
        if rows
        else None,
    }
    write_results(
        output,
        "explain_skew's verdicts and predicted hottest tasks against Spark's final plans",
        {**vars(args), "output": str(output), "conf": spark_skew_join.CONF},
        summary=summary,
        workloads=rows,
    )
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
