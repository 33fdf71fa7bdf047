"""keysplit's ``apply_grouped`` against Spark's own grouped map and hand salting, in one session.

**What is compared.** One Spark DataFrame of ``--rows`` rows (int64 ``key``, ``value`` in
[0, 1000), ``user``), read from ``--files`` Parquet files (one input partition each; the
same files as ``benches/spark_vs_native.py``), and one grouped map per key, four ways:

- ``applyInPandas``: Spark's own plan, ``frame.groupBy("key").applyInPandas(f, schema)``;
- ``salted-32``: the hand recipe, a salt ``int(rand(7) * 32)`` on every row,
  ``groupBy(key, salt).applyInPandas(f)``, then ``groupBy(key).applyInPandas(merge)``;
- ``runner``: ``apply_grouped(frame, ..., workers=32, capacity=0)``: nothing split, every key
  whole on its hash worker as in ``applyInPandas``, but through keysplit's group runner:
  what the runner alone gains;
- ``two-pass``: ``keysplit.spark.apply_grouped(frame, ..., workers=32)``, the default:
  hot keys found in a pass inside the plan, each over ``⌈share·32⌉`` workers, merged only
  there: what splitting adds on top of the runner;
- an online grouper (``--online``, default ``pstream``):
  ``apply_grouped(..., grouper=<name>, workers=32)``, routing each partition as it comes.

Two functions: ``top3`` (the three largest values of a key; cheap per row, so the cost is
mostly the fixed cost of each call and task) and ``score3`` (each row scored by a small
neural network, 8 inputs, 128 tanh units, in blocks of 100 k rows, then the three best
scores of the key: about 4 µs a row, so the cost grows with the rows). Their merges keep the
three best of the partial results. Every plan's result must equal ``applyInPandas``'s (the
scores within 1e-9 relative), and ``top3``'s also Polars' exact answer from the files;
a difference exits non-zero. ``n``, the rows of the call, is in each output row, and the
merges keep its largest: the largest Python call of a plan is the largest ``n`` of its result.

**Spark's settings**: adaptive execution on, ``spark.sql.shuffle.partitions=32`` (the
workers keysplit uses, so that every plan's shuffle stages have 32 tasks) and partition
coalescing off: on ``local[2]`` it would merge Spark's partitions into about 2 tasks (its
minimum is the default parallelism, the 2 cores), which leaves nothing to schedule on 32 or
128 slots, where a cluster of that size would keep at least that many. ``apply_grouped``
fixes its own partition counts either way. One input partition per file.

**Task times** come from Spark's REST status API (``SparkStatus`` of
``spark_vs_native.py``): every stage of every SQL execution of the plan's run, including
keysplit's hot-key pass and bookkeeping. Reported per plan: the function stage (the stage
that read a shuffle with the most task time) as slowest over median task, the rows
shuffled (Spark's shuffle write records over all stages), and **computed, not measured**:
the makespan on 8, 32 and 128 slots, the sum over the plan's stages (which run one after
another) of each stage's LPT list schedule of its measured task times. On a 2-core machine
this is what more cores would see if each task took the time it took here.

Order per (setup, distribution, key count, function): ``--runs`` rounds (default 3) of
``applyInPandas`` then each other plan; a plan's wall time and makespans are the medians of
its rounds (the stages shown are the median-makespan round's), and its ratios are against
``applyInPandas``' medians: one round's slowest task moves by ±0.1 s on a shared machine. The
``top3`` run of each keysplit plan passes a ``keysplit.spark.Report``, which records its
split keys, λ, γ, γ* and the rows shuffled to the merge (observed while the plan runs).
``--keys`` takes several key counts (default 10^4 and 10^5 distinct keys drawn from).

    python benches/spark_grouped_map.py --rows 400000 --setups local --keys 10000     # a quick look
    python benches/spark_grouped_map.py                                  # 10^7 rows, both setups

Writes ``benches/results/spark_grouped_map.json`` (every figure, the machine, the table).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl

import keysplit
from keysplit import spark as ks
from keysplit.metrics import replication_bound_of_counts
from keysplit.spark.hot_keys import DEFAULT_CAPACITY
from spark_vs_native import (
    BENCH_CONF,
    DISTRIBUTIONS,
    SETUPS,
    Report,
    ResultMismatch,
    SparkStatus,
    dataset,
    lpt_makespan,
    machine,
    names,
)

RESULTS = Path(__file__).parent / "results"
SLOTS = (8, 32, 128)
SALTS = 32
WORKERS = 32
SCORE_HIDDEN = 128
SCORE_BLOCK = 100_000
_weights = np.random.default_rng(20261124)
W1 = _weights.normal(0.0, 1.0, (8, SCORE_HIDDEN))
W2 = _weights.normal(0.0, 1.0, SCORE_HIDDEN) / SCORE_HIDDEN
SCHEMAS = {"top3": "key long, rank int, value long, n long", "score3": "key long, rank int, score double, n long"}


def top3(pdf: pd.DataFrame) -> pd.DataFrame:
    best = pdf["value"].nlargest(3)
    return pd.DataFrame(
        {"key": pdf["key"].iloc[0], "rank": range(1, len(best) + 1), "value": best.to_numpy(), "n": len(pdf)}
    )


def top3_merge(pdf: pd.DataFrame) -> pd.DataFrame:
    best = pdf["value"].nlargest(3)
    return pd.DataFrame(
        {
            "key": pdf["key"].iloc[0],
            "rank": range(1, len(best) + 1),
            "value": best.to_numpy(),
            "n": pdf["n"].max(),
        }
    )


def score3(pdf: pd.DataFrame) -> pd.DataFrame:
    value = pdf["value"].to_numpy() / 1000.0
    user = pdf["user"].to_numpy() / 1e6
    scores = np.empty(len(pdf))
    for start in range(0, len(pdf), SCORE_BLOCK):
        v, u = value[start : start + SCORE_BLOCK], user[start : start + SCORE_BLOCK]
        features = np.stack([v, u, v * u, v * v, u * u, np.sin(6 * v), np.cos(6 * u), np.ones_like(v)], axis=1)
        scores[start : start + SCORE_BLOCK] = np.tanh(features @ W1) @ W2
    best = np.sort(scores)[::-1][:3]
    return pd.DataFrame({"key": pdf["key"].iloc[0], "rank": range(1, len(best) + 1), "score": best, "n": len(pdf)})


def score3_merge(pdf: pd.DataFrame) -> pd.DataFrame:
    best = np.sort(pdf["score"].to_numpy())[::-1][:3]
    return pd.DataFrame(
        {"key": pdf["key"].iloc[0], "rank": range(1, len(best) + 1), "score": best, "n": pdf["n"].max()}
    )


FUNCTIONS = {"top3": (top3, top3_merge), "score3": (score3, score3_merge)}


def polars_top3(directory: Path) -> pl.DataFrame:
    return (
        pl.scan_parquet(directory / "*.parquet")
        .select("key", "value")
        .sort("value", descending=True)
        .group_by("key", maintain_order=True)
        .head(3)
        .with_columns(rank=pl.int_range(1, pl.len() + 1).over("key").cast(pl.Int32))
        .select("key", "rank", "value")
        .sort("key", "rank")
        .collect()
    )


def check(plan: str, got: pl.DataFrame, expected: pl.DataFrame, function: str) -> None:
    column = "value" if function == "top3" else "score"
    got = got.select("key", "rank", column).sort("key", "rank")
    expected = expected.select("key", "rank", column).sort("key", "rank")
    if got.height != expected.height or not got.select("key", "rank").equals(expected.select("key", "rank")):
        raise ResultMismatch(f"{plan}: {got.height} rows, expected {expected.height}, or other keys")
    if function == "top3":
        same = got[column].equals(expected[column])
    else:
        same = bool(np.allclose(got[column].to_numpy(), expected[column].to_numpy(), rtol=1e-9, atol=0.0))
    if not same:
        raise ResultMismatch(f"{plan}: the {column}s differ from the expected result")


class Plans:
    """Each plan's lazy result, on one session."""

    def __init__(self, handle: ks.Session, online: str) -> None:
        self.handle = handle
        self.online = online

    def build(self, plan: str, frame: Any, function: str, report: ks.Report[Any] | None = None) -> Any:
        from pyspark.sql import functions as F

        f, merge = FUNCTIONS[function]
        schema = SCHEMAS[function]
        if plan == "applyInPandas":
            return frame.groupBy("key").applyInPandas(f, schema)
        if plan == f"salted-{SALTS}":
            salted = frame.withColumn("salt", (F.rand(7) * SALTS).cast("int"))
            return salted.groupBy("key", "salt").applyInPandas(f, schema).groupBy("key").applyInPandas(merge, schema)
        return ks.apply_grouped(
            frame,
            key="key",
            function=f,
            merge=merge,
            schema=schema,
            grouper=None if plan in ("two-pass", "runner") else self.online,
            capacity=0 if plan == "runner" else DEFAULT_CAPACITY,
            workers=WORKERS,
            session=self.handle,
            report=report,
        )


def stage_summary(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """The function stage's straggler, the rows shuffled and the computed makespans."""
    shuffled = [s for s in stages if s["role"] in ("post-shuffle", "shuffle") and s["tasks"]]
    function_stage = max(shuffled, key=lambda s: sum(s["task_seconds"]), default=None)
    return {
        "function_stage": None
        if function_stage is None
        else {
            "tasks": function_stage["tasks"],
            "max_task_s": function_stage["max_task_s"],
            "median_task_s": function_stage["median_task_s"],
            "straggler_ratio": function_stage["straggler_ratio"],
        },
        "rows_shuffled": sum(s["shuffle_write_records"] for s in stages),
        "task_seconds_total": sum(sum(s["task_seconds"]) for s in stages),
        **{f"makespan_{n}_slots_computed_s": sum(lpt_makespan(s["task_seconds"], n) for s in stages) for n in SLOTS},
    }


def timed(
    status: SparkStatus, handle: ks.Session, plans: Plans, plan: str, frame: Any, function: str
) -> tuple[dict[str, Any], pl.DataFrame]:
    gc.collect()
    first = status.next_execution()
    observed: ks.Report[ks.GroupedReport] | None = None
    if plan not in ("applyInPandas", f"salted-{SALTS}") and function == "top3":
        observed = ks.Report()
    started = time.perf_counter()
    result = plans.build(plan, frame, function, observed)
    table = pl.from_arrow(handle.call(f"{plan} {function}", result.toArrow))
    wall = time.perf_counter() - started
    del result
    gc.collect()
    assert isinstance(table, pl.DataFrame)
    stages = status.stages_since(first, native=plan == "applyInPandas")
    return {
        "wall_s": wall,
        "largest_call": int(table["n"].max() or 0),
        **stage_summary(stages),
        "stages": stages,
        "report": None if observed is None else report_figures(observed.get),
    }, table


def report_figures(report: ks.GroupedReport) -> dict[str, Any]:
    return {
        "split_keys": report.split.height,
        "most_workers_of_a_key": int(report.split["workers"].max() or 1),
        "calls": report.calls.height,
        "keys": report.keys,
        "largest_call": report.largest_call,
        "median_call": report.median_call,
        "load_imbalance": report.load_imbalance,
        "replication_factor": report.replication_factor,
        "offline_replication": report.offline_replication,
        "merge_rows": report.merge_rows,
        "salting_calls_expected": report.salting_calls,
        "salting_merge_rows_estimated": report.salting_merge_rows,
    }


def row_cells(row: dict[str, Any]) -> list[str]:
    stage = row["function_stage"]
    straggler = (
        "–"
        if stage is None
        else f"{stage['max_task_s']:.2f} / {stage['median_task_s']:.2f} s ({stage['straggler_ratio']:.1f})"
    )
    makespans = " / ".join(f"{row[f'makespan_{n}_slots_computed_s']:.1f}" for n in SLOTS)
    gains = " / ".join(f"{row[f'speedup_{n}_slots_computed']:.2f}×" for n in SLOTS)
    return [
        row["setup"],
        row["distribution"],
        f"{row['keys']:,}",
        row["function"],
        row["plan"],
        f"{row['wall_s']:.1f}",
        f"{row['wall_over_native']:.2f}",
        straggler,
        f"{row['largest_call']:,}",
        makespans,
        gains,
        f"{row['rows_shuffled']:,}",
    ]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    header = [
        "setup",
        "distribution",
        "keys drawn from",
        "function",
        "plan",
        "wall s",
        "wall ÷ applyInPandas",
        "function stage: slowest / median task",
        "largest call (rows)",
        "makespan on 8 / 32 / 128 slots, computed (s)",
        "speed-up on 8 / 32 / 128 slots, computed",
        "rows shuffled",
    ]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---", "---", "--:", "---", "---"] + ["--:"] * 2 + ["---", "--:", "---", "---", "--:"]) + "|",
    ]
    lines += ["| " + " | ".join(row_cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A plan's runs as one: the stages and calls of the run whose 32-slot makespan is the
    median, with the median wall time and the median makespan on each slot count; every
    run's wall and makespans kept beside them."""
    chosen = sorted(runs, key=lambda r: r["makespan_32_slots_computed_s"])[(len(runs) - 1) // 2]
    return {
        **chosen,
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        **{
            f"makespan_{n}_slots_computed_s": statistics.median(r[f"makespan_{n}_slots_computed_s"] for r in runs)
            for n in SLOTS
        },
        "runs_wall_s": [r["wall_s"] for r in runs],
        **{f"runs_makespan_{n}_slots_computed_s": [r[f"makespan_{n}_slots_computed_s"] for r in runs] for n in SLOTS},
    }


def run_setup(
    setup: str,
    args: argparse.Namespace,
    data: dict[tuple[str, int], Path],
    exact: dict[tuple[str, int], pl.DataFrame],
    report: Report,
) -> None:
    started = time.perf_counter()
    conf = {
        **BENCH_CONF,
        "spark.sql.shuffle.partitions": str(WORKERS),
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    }
    with ks.session(master=SETUPS[setup], ui=True, driver_memory=args.driver_memory, **conf) as handle:
        info: dict[str, Any] = {
            "master": SETUPS[setup],
            "session": repr(handle),
            "startup_s": time.perf_counter() - started,
        }
        report.document["setups"][setup] = info
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        plans = Plans(handle, args.online)
        order = [p for p in args.plans if p != "applyInPandas"]
        # Warm-up, untimed: the JVM, the executors' Python workers, keysplit's import.
        warm = time.perf_counter()
        small = handle.spark.range(0, 200_000, 1, 4).selectExpr("id % 500 as key", "id % 1000 as value", "id as user")
        for plan in ["applyInPandas", *order]:
            handle.call("warm-up", plans.build(plan, small, "top3").toArrow)
        info["warmup_s"] = time.perf_counter() - warm
        for (name, keys), directory in data.items():
            frame = handle.spark.read.parquet(str(directory))
            for function in args.functions:
                label = f"{setup} {name} {keys:,} keys {function}"
                runs: dict[str, list[dict[str, Any]]] = {plan: [] for plan in ["applyInPandas", *order]}
                expected: pl.DataFrame | None = exact.get((name, keys)) if function == "top3" else None
                for round_ in range(args.runs):
                    for plan in ["applyInPandas", *order]:
                        run, table = timed(status, handle, plans, plan, frame, function)
                        if expected is None:
                            expected = table
                        check(f"{label} {plan}", table, expected, function)
                        print(
                            f"  {label} {plan} (run {round_ + 1}): {run['wall_s']:.1f} s, "
                            f"largest call {run['largest_call']:,}",
                            flush=True,
                        )
                        runs[plan].append(run)
                native = median_run(runs["applyInPandas"])
                native["report"] = None
                for plan, plan_runs in runs.items():
                    run = native if plan == "applyInPandas" else median_run(plan_runs)
                    row = {
                        "setup": setup,
                        "distribution": name,
                        "keys": keys,
                        "function": function,
                        "plan": plan,
                        **run,
                        "native_wall_s": [r["wall_s"] for r in runs["applyInPandas"]],
                        "wall_over_native": run["wall_s"] / native["wall_s"],
                        **{
                            f"speedup_{n}_slots_computed": native[f"makespan_{n}_slots_computed_s"]
                            / run[f"makespan_{n}_slots_computed_s"]
                            for n in SLOTS
                        },
                        "largest_call_smaller_by": native["largest_call"] / max(run["largest_call"], 1),
                        "load_average": os.getloadavg(),
                        "equal": True,
                    }
                    report.add(row)
                print(
                    markdown_table(
                        [
                            r
                            for r in report.document["results"]
                            if r["setup"] == setup
                            and r["distribution"] == name
                            and r["keys"] == keys
                            and r["function"] == function
                        ]
                    ),
                    flush=True,
                )
    info["seconds"] = time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument(
        "--keys",
        type=lambda t: [int(float(k)) for k in t.split(",")],
        default=[10_000, 100_000],
        help="distinct keys drawn from, comma-separated: one dataset per count",
    )
    parser.add_argument("--files", type=int, default=8, help="Parquet files, one input partition each")
    parser.add_argument("--distributions", type=names(DISTRIBUTIONS), default=list(DISTRIBUTIONS))
    parser.add_argument("--functions", type=names(FUNCTIONS), default=list(FUNCTIONS))
    parser.add_argument("--online", choices=[g.name for g in keysplit.groupers()], default="pstream")
    all_plans = ["applyInPandas", f"salted-{SALTS}", "runner", "two-pass", "online"]
    parser.add_argument("--plans", type=names(all_plans), default=all_plans)
    parser.add_argument("--setups", type=names(SETUPS), default=list(SETUPS))
    parser.add_argument("--runs", type=int, default=3, help="rounds of every plan; each figure is the median")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "keysplit-spark-vs-native")
    parser.add_argument("--output", type=Path, default=RESULTS / "spark_grouped_map.json")
    args = parser.parse_args()
    args.plans = [args.online if p == "online" else p for p in args.plans]
    started = time.perf_counter()
    meta = machine()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data: dict[tuple[str, int], Path] = {}
    exact: dict[tuple[str, int], pl.DataFrame] = {}
    described: dict[str, dict[str, Any]] = {}
    for name in args.distributions:
        for keys in args.keys:
            data[name, keys] = dataset(args.data_dir, name, rows=args.rows, keys=keys, files=args.files, seed=args.seed)
            exact[name, keys] = polars_top3(data[name, keys])
            counts = pl.scan_parquet(data[name, keys] / "*.parquet").group_by("key").len().collect()["len"]
            described[f"{name}, {keys} keys"] = {
                "zipf_exponent": DISTRIBUTIONS[name],
                "keys_drawn_from": keys,
                "directory": str(data[name, keys]),
                "distinct_keys": counts.len(),
                "hot_key_rows": int(counts.max() or 0),
                "hot_key_share": int(counts.max() or 0) / args.rows,
                "offline_replication": replication_bound_of_counts(counts, workers=WORKERS),
            }
            print(
                f"{name}, {keys:,} keys: {counts.len()} distinct keys, the hot key holds "
                f"{int(counts.max() or 0) / args.rows:.1%}",
                flush=True,
            )
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report = Report(
        args.output,
        {
            "benchmark": "keysplit.spark.apply_grouped against applyInPandas and uniform salting",
            "machine": meta,
            "settings": {**settings, "workers": WORKERS, "salts": SALTS, "slots": SLOTS},
            "distributions": described,
        },
        started=started,
        table=markdown_table,
    )
    for setup in args.setups:
        run_setup(setup, args, data, exact, report)
    meta["load_average_end"] = os.getloadavg()
    report.write(complete=True)
    print(report.document["table_markdown"])
    print(f"wrote {args.output} in {report.document['total_s']:.0f} s")


if __name__ == "__main__":
    main()
