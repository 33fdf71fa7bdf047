"""The main job (``keysplit run``): a word count on Spark, routed by KG and by a skew-aware grouper.

Three pipelines run on one embedded Spark Connect server over the same corpus: KG and the
chosen grouper routing it as a client stream, and the chosen grouper routing it as a Spark
DataFrame on the executors. Each result is checked against Spark's own ``groupBy`` of the
same words, timed in the same session; the per-worker loads, λ, γ, Γ, phase times and the
wall time against ``groupBy`` are printed side by side and written to an HTML report with a
PNG chart.

Then the case where splitting pays: a grouped map that scores every occurrence of a word
and keeps each word's three best, as Spark's ``applyInPandas`` and as keysplit's
``apply_grouped``, with the same 32 tasks, in the same session. The function seconds of
each task are drawn side by side (``grouped.png``): the commonest words make one
``applyInPandas`` task the straggler, and ``apply_grouped`` spreads them. Last, a query of
two keyed operators (each word's gaps between its occurrences, a window, feeding their
median per word) as Spark plans it and as ``keysplit.spark.optimize`` decides it, over 32
tasks, with optimize's report of what it rewrote or left and why (on the King James Bible
its cost guard keeps Spark's plan: "the" is 2.6 mean tasks' words, and 64,000 rows end
sooner than a rewrite's extra stages would; what the call costs is its statistics).
"""

from __future__ import annotations

import contextlib
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit import datasets
from keysplit._grouper import DEFAULT_GROUPER
from keysplit._numbers import to_int
from keysplit._progress import PhaseProgress

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from keysplit.spark.report import RunReport
    from keysplit.spark.session import Session


#: The corpora ``keysplit run`` names itself; any other spec is one of ``keysplit simulate``'s.
CORPORA = ("kjv", "wordfreq", "zipf")


def corpus_stream(name: str, *, batch_rows: int, tuples: int, seed: int) -> Callable[[], Iterator[pl.DataFrame]]:
    """A function giving the corpus afresh each time: ``kjv``, ``wordfreq`` or ``zipf``,
    or any dataset spec of ``keysplit simulate`` (``file:path=events.parquet,key=user``,
    ``nycflights:key=dest``, ``zipf:z=1.5``…), resolved now so that a bad one fails here."""
    if name == "zipf":
        return lambda: datasets.zipf(keys=100_000, tuples=tuples, z=1.1, seed=seed, batch_rows=batch_rows)
    if name == "kjv":
        return lambda: datasets.kjv(batch_rows=batch_rows)
    if name == "wordfreq":
        return lambda: datasets.wordfreq_words(tuples=tuples, seed=seed, batch_rows=batch_rows)
    from keysplit import simulate

    return simulate.dataset(name, seed=seed, tuples=tuples, batch_rows=batch_rows).open


def _write_corpus(stream: Iterator[pl.DataFrame], directory: Path, files: int = 4) -> pl.DataFrame:
    """The corpus as ``files`` Parquet files (each word and its ``position``): a Spark
    DataFrame of ``files`` input partitions. Returns the words, which the client streams
    route, so that every pipeline and ``groupBy`` count the very same keys."""
    # Keys as strings, whatever the dataset's type: the job is a word count, and the
    # grouped-map case's schema names a string key.
    words = (
        pl.concat(list(stream))
        .select(pl.col("key").cast(pl.String))
        .with_row_index("position")
        .select("key", pl.col("position").cast(pl.Int64))
    )
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.parquet"):
        old.unlink()
    for index, part in enumerate(words.iter_slices(max(1, -(-words.height // files)))):
        part.write_parquet(directory / f"part-{index}.parquet")
    return words


def _mean_seconds(runs: list[dict[str, float]]) -> dict[str, float]:
    """The mean of each time (``routing_s``, ``wall_s``…) over a pipeline's runs: what the
    table and the chart both show."""
    return {name: sum(run[name] for run in runs) / len(runs) for name in runs[0]}


def _figures(labels: list[str], reports: list[RunReport], seconds: dict[str, list[dict[str, float]]]) -> pl.DataFrame:
    """One row per pipeline: its report's figures, the times the mean of its runs (the
    other figures are deterministic)."""
    return pl.DataFrame(
        [{**report.figures(), **_mean_seconds(seconds[label])} for label, report in zip(labels, reports, strict=True)]
    )


def _phase_times(runs: list[dict[str, float]]) -> list[float]:
    """The mean over ``runs`` of each phase's seconds, in :data:`PHASES` order."""
    from keysplit.spark.report import PHASES

    mean = _mean_seconds(runs)
    return [mean[f"{phase}_s"] for phase in PHASES]


def _run_figure(labels: list[str], reports: list[RunReport], seconds: dict[str, list[dict[str, float]]]) -> Any:
    """run.png: load per worker, one bar per pipeline; and each phase's seconds, a bar for
    the mean of the pipeline's runs (the table's figure) and a dot for each run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keysplit.spark.report import PHASES

    figure, (loads_axis, phases_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(reports)
    for i, (label, report) in enumerate(zip(labels, reports, strict=True)):
        workers = range(report.workers)
        loads_axis.bar([w + i * width for w in workers], report.spark_loads, width, label=label)
    centres = [w + width * (len(reports) - 1) / 2 for w in range(reports[0].workers)]
    loads_axis.set_xticks(centres, [str(w) for w in range(reports[0].workers)])
    loads_axis.set_xlabel("worker")
    loads_axis.set_ylabel("tuples (as Spark aggregated them)")
    loads_axis.set_title("Load per worker")
    runs = {len(seconds[label]) for label in labels}
    for i, label in enumerate(labels):
        at = [p + i * width for p in range(len(PHASES))]
        phases_axis.bar(at, _phase_times(seconds[label]), width, label=label)
        # Each run's own seconds over the mean's bar: how far apart the runs were.
        for run in seconds[label]:
            phases_axis.plot(at, _phase_times([run]), linestyle="none", marker="o", markersize=3, color="black")
    phases_axis.set_xticks([p + width * (len(labels) - 1) / 2 for p in range(len(PHASES))], PHASES)
    phases_axis.set_ylabel("seconds")
    shown_runs = f"{runs.pop()} runs" if len(runs) == 1 else "its runs"
    phases_axis.set_title(f"Phase times: bars the mean of {shown_runs} (as in the table), dots each run", fontsize=10)
    # One legend for both panels, below them: inside, it covered the first workers' bars.
    handles, names = loads_axis.get_legend_handles_labels()
    figure.legend(handles, names, loc="lower center", ncol=len(names), frameon=False)
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    return figure


def _chart(labels: list[str], reports: list[RunReport], seconds: dict[str, list[dict[str, float]]], path: Path) -> None:
    import matplotlib.pyplot as plt

    figure = _run_figure(labels, reports, seconds)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _by_run(figures: pl.DataFrame, labels: list[str]) -> pl.DataFrame:
    """One row per figure and one column per run, so that the table is as wide as the
    runs, not the figures; missing figures (None) read "–"."""
    shown = figures.drop("grouper").with_columns(
        pl.col(pl.Float64).map_elements(lambda v: f"{v:.4g}", return_dtype=pl.String)
    )
    shown = shown.select(pl.all().cast(pl.String).fill_null("–")).with_columns(pl.Series("run", labels))
    return shown.transpose(include_header=True, header_name="figure", column_names="run")


def _cell(value: object) -> str:
    if value is None:
        return "–"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _html(
    title: str, figures: pl.DataFrame, loads: pl.DataFrame, chart: str, grouped: pl.DataFrame, grouped_chart: str
) -> str:
    def table(frame: pl.DataFrame) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>" for row in frame.iter_rows()
        )
        return f"<table><tr>{head}</tr>{body}</table>"

    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:right}table{border-collapse:collapse;margin:1em 0}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><h2>Figures</h2>{table(figures)}"
        f"<h2>Loads: client routing vs Spark partitions</h2>{table(loads)}"
        f"<img src='{html.escape(chart)}' alt='loads and phase times'>"
        f"<h2>Grouped map: applyInPandas against apply_grouped</h2>{table(grouped)}"
        f"<img src='{html.escape(grouped_chart)}' alt='function seconds per task'></body></html>"
    )


#: The grouped-map case: each occurrence of a word scored by a small network (8 inputs,
#: SCORE_UNITS tanh units, about 10 µs a row), the word's 3 best scores kept.
SCORE_UNITS = 512
#: Tasks of the grouped-map case: enough that the corpus's commonest words need splitting.
GROUPED_WORKERS = 32
GROUPED_SCHEMA = "key string, rank int, score double, n long"


def score3(pdf: Any) -> Any:
    """The 3 best scores of a word's occurrences, and ``n``, the rows of the call."""
    import numpy as np
    import pandas as pd

    weights = np.random.default_rng(7)
    inner, outer = weights.normal(0.0, 1.0, (8, SCORE_UNITS)), weights.normal(0.0, 1.0, SCORE_UNITS) / SCORE_UNITS
    x = pdf["position"].to_numpy() / 1e6
    scores = np.empty(len(x))
    for start in range(0, len(x), 10_000):
        v = x[start : start + 10_000]
        features = np.stack(
            [v, v * v, np.sin(9 * v), np.cos(9 * v), np.sin(31 * v), np.cos(31 * v), v**3, np.ones_like(v)], 1
        )
        scores[start : start + 10_000] = np.tanh(features @ inner) @ outer
    best = np.sort(scores)[::-1][:3]
    return pd.DataFrame({"key": pdf["key"].iloc[0], "rank": range(1, len(best) + 1), "score": best, "n": len(pdf)})


def best3(pdf: Any) -> Any:
    """score3's merge: the 3 best of the partial best scores; ``n`` keeps the largest call."""
    import numpy as np
    import pandas as pd

    best = np.sort(pdf["score"].to_numpy())[::-1][:3]
    return pd.DataFrame(
        {"key": pdf["key"].iloc[0], "rank": range(1, len(best) + 1), "score": best, "n": pdf["n"].max()}
    )


def timed_score3(pdf: Any) -> Any:
    """score3 for ``applyInPandas``, with its task and its seconds on each output row."""
    import time

    from pyspark import TaskContext

    started = time.perf_counter()
    out = score3(pdf)
    context = TaskContext.get()
    return out.assign(task=context.partitionId() if context else -1, seconds=time.perf_counter() - started)


def grouped_map_case(handle: Any, frame: Any, workers: int, shown: PhaseProgress) -> dict[str, Any]:
    """``applyInPandas`` and ``apply_grouped`` on the same grouped map, same session, same
    task count (``workers``); their per-task function seconds, largest call and wall time.
    ``shown`` names each step as it runs."""
    import time

    import numpy as np

    from keysplit.spark.grouped import GroupedReport, apply_grouped
    from keysplit.spark.intake import run_settings
    from keysplit.spark.report import Report

    settings = {"spark.sql.shuffle.partitions": str(workers), "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    with run_settings(handle, settings):
        native_plan = frame.groupBy("key").applyInPandas(timed_score3, GROUPED_SCHEMA + ", task int, seconds double")
        # Untimed first runs on a slice: Python workers and imports are no plan's cost.
        sample = frame.limit(20_000)
        with shown.step("grouped map: warming up on 20,000 words (untimed)"):
            handle.call("warming up", sample.groupBy("key").applyInPandas(score3, GROUPED_SCHEMA).count)
            warm_up = apply_grouped(
                sample, key="key", function=score3, merge=best3, schema=GROUPED_SCHEMA, workers=workers, session=handle
            )
            handle.call("warming up", warm_up.count)
        with shown.step(f"grouped map: Spark's applyInPandas, {workers} tasks"):
            started = time.perf_counter()
            native = pl.from_arrow(handle.call("applyInPandas", native_plan.toArrow))
            native_wall = time.perf_counter() - started
        with shown.step(f"grouped map: keysplit's apply_grouped, {workers} tasks") as step:
            started = time.perf_counter()
            observed: Report[GroupedReport] = Report()
            result = apply_grouped(
                frame,
                key="key",
                function=score3,
                merge=best3,
                schema=GROUPED_SCHEMA,
                workers=workers,
                session=handle,
                report=observed,
            )
            ours = pl.from_arrow(handle.call("apply_grouped", result.toArrow))
            ours_wall = time.perf_counter() - started
            report = observed.get
            step.outcome = f"{report.split.height} words split"
    assert isinstance(native, pl.DataFrame) and isinstance(ours, pl.DataFrame)
    native_tasks = native.group_by("key").agg(pl.col("task").first(), pl.col("seconds").first())
    native_seconds = [0.0] * workers
    for task, seconds in native_tasks.group_by("task").agg(pl.col("seconds").sum()).iter_rows():
        native_seconds[task] = seconds
    expected = native.select("key", "rank", "score").sort("key", "rank")
    got = ours.select("key", "rank", "score").sort("key", "rank")
    equal = got.select("key", "rank").equals(expected.select("key", "rank")) and bool(
        np.allclose(got["score"].to_numpy(), expected["score"].to_numpy(), rtol=1e-9, atol=0.0)
    )
    plans: dict[str, dict[str, Any]] = {
        "applyInPandas": {
            "wall_s": native_wall,
            "task_seconds": native_seconds,
            "largest_call": to_int(native["n"].max()),
        },
        "apply_grouped": {
            "wall_s": ours_wall,
            "task_seconds": report.worker_seconds,
            "largest_call": report.largest_call,
            "split": report.split.height,
        },
    }
    for figures in plans.values():
        seconds = figures["task_seconds"]
        figures["slowest_task_s"] = max(seconds)
        figures["median_task_s"] = float(np.median(seconds))
    split = ", ".join(map(str, report.split[report.split.columns[0]].head(5)))
    return {"plans": plans, "equal": equal, "workers": workers, "split": f"{report.split.height} words ({split})"}


#: The tasks of the job's query for ``optimize``, as the grouped map's.
OPTIMIZE_WORKERS = GROUPED_WORKERS


def optimize_case(handle: Any, frame: Any, shown: PhaseProgress) -> dict[str, Any]:
    """A query of two keyed operators over the corpus, as Spark plans it and as
    ``optimize`` rewrites it, in the same session over the same tasks: each word's gaps
    between its occurrences (a window, ``lag``) and their median per word (a holistic
    aggregate). Their wall times, the rows of the hottest key against a mean task's, the
    report and whether the results are equal."""
    import time

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from keysplit.spark.intake import run_settings
    from keysplit.spark.optimize import OptimizeReport, optimize
    from keysplit.spark.report import Report

    by_word = Window.partitionBy("key").orderBy("position")
    gaps = frame.withColumn("gap", F.col("position") - F.lag("position").over(by_word))
    query = gaps.groupBy("key").agg(F.median("gap").alias("median_gap"), F.count(F.lit(1)).alias("n"))
    settings = {
        "spark.sql.shuffle.partitions": str(OPTIMIZE_WORKERS),
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    }
    with run_settings(handle, settings):
        with shown.step(f"a window feeding a median: Spark's own plan, {OPTIMIZE_WORKERS} tasks"):
            started = time.perf_counter()
            native = pl.from_arrow(handle.call("Spark's plan", query.toArrow))
            native_wall = time.perf_counter() - started
        with shown.step("the same query through keysplit.spark.optimize") as step:
            started = time.perf_counter()
            plan: Report[OptimizeReport] = Report()
            fixed = optimize(query, report=plan)
            planned = time.perf_counter() - started
            ours = pl.from_arrow(handle.call("optimize's plan", fixed.toArrow))
            wall = time.perf_counter() - started
            step.outcome = f"{len(plan.get.rewritten)} of {len(plan.get.operators)} operators rewritten"
    assert isinstance(native, pl.DataFrame) and isinstance(ours, pl.DataFrame)
    hottest = native.sort(["n", "key"], descending=[True, False]).row(0, named=True)
    mean_task = native["n"].sum() / OPTIMIZE_WORKERS
    return {
        "equal": ours.sort("key").equals(native.sort("key")),
        "workers": OPTIMIZE_WORKERS,
        "spark_wall_s": native_wall,
        "optimize_wall_s": wall,
        "optimize_call_s": planned,
        "hottest_word": hottest["key"],
        "hottest_rows": hottest["n"],
        "hottest_over_mean": hottest["n"] / mean_task,
        "report": plan.get,
    }


def _print_optimized(case: dict[str, Any], print_: Callable[[str], None]) -> None:
    print_(
        "a query of two keyed operators (each word's gaps between occurrences, a window, feeding their "
        f"median per word), {case['workers']} tasks: Spark's plan puts the word {case['hottest_word']!r} "
        f"({case['hottest_rows']:,} rows, {case['hottest_over_mean']:.1f}x a mean task's) in one task of each"
    )
    print_(
        f"  Spark's own plan   wall {case['spark_wall_s']:5.1f} s\n"
        f"  optimize(query)    wall {case['optimize_wall_s']:5.1f} s (the call, its statistics included: "
        f"{case['optimize_call_s']:.1f} s); results equal: {'yes' if case['equal'] else 'NO'}"
    )
    print_("  " + str(case["report"]).replace("\n", "\n  "))
    print_(
        "  (where the guard keeps Spark's plan, the call costs its statistics alone; where it rewrites, the split "
        "pays on as many cores as tasks: make spark-optimize measures both)"
    )


def _print_grouped(case: dict[str, Any], print_: Callable[[str], None]) -> None:
    print_(
        "grouped map (each occurrence of a word scored by a small network, its 3 best kept), "
        f"{case['workers']} tasks each:"
    )
    for name, figures in case["plans"].items():
        print_(
            f"  {name:14s} wall {figures['wall_s']:5.1f} s; function seconds per task: slowest "
            f"{figures['slowest_task_s']:.2f} s, median {figures['median_task_s']:.2f} s; largest call "
            f"{figures['largest_call']:,} rows"
        )
    print_(f"  apply_grouped split {case['split']}; results equal: {'yes' if case['equal'] else 'NO'}")


def _grouped_chart(case: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plans = case["plans"]
    figure, axes = plt.subplots(1, len(plans), figsize=(12, 4), sharey=True)
    for axis, (name, figures) in zip(axes, plans.items(), strict=True):
        seconds = figures["task_seconds"]
        axis.bar(range(len(seconds)), seconds, color="#c0392b" if name == "applyInPandas" else "#2e86c1")
        axis.set_title(
            f"{name}: slowest task {figures['slowest_task_s']:.2f} s, median {figures['median_task_s']:.2f} s"
        )
        axis.set_xlabel("task (worker)")
    axes[0].set_ylabel("function seconds (Python)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def run(
    *,
    dataset: str = "kjv",
    grouper: str = DEFAULT_GROUPER,
    workers: int = 8,
    seed: int = 0,
    tuples: int = 1_000_000,
    batch_rows: int = 200_000,
    report_dir: str | Path = "results/run",
    print_: Callable[[str], None] = print,
    spark: Session | None = None,
    progress: bool | None = None,
) -> int:
    """Runs the job; returns 0 when every pipeline equals ``groupBy`` and Spark agrees with the client.

    Three pipelines over one corpus: KG and ``grouper`` routing the corpus as a client
    stream (ingested as files), and ``grouper`` routing the corpus as a Spark DataFrame on
    the executors (one source per Parquet file). Spark's own ``groupBy`` of the same
    DataFrame, timed in the same session, is the reference and the baseline. ``spark``: a
    session to run in (left open); None starts an embedded server for the job.

    The results go to ``print_``; the steps, as they start and end with their seconds, to
    stderr, with a live line naming the Spark action running when stderr is a terminal
    (``progress``: None, as everywhere; ``False`` silences both).
    """
    import time

    from pyspark.sql import functions as F

    from keysplit._grouper import Grouper
    from keysplit.spark.aggregate import aggregate
    from keysplit.spark.report import Report
    from keysplit.spark.session import session

    # Arguments are checked before Spark starts: a typo costs nothing.
    Grouper.from_spec(grouper, workers=workers, seed=seed)
    open_dataset = corpus_stream(dataset, batch_rows=batch_rows, tuples=tuples, seed=seed)
    directory = Path(report_dir)
    corpus = directory / "corpus"
    runs: list[tuple[str, RunReport, bool, float]] = []
    with contextlib.ExitStack() as stack:
        shown = stack.enter_context(PhaseProgress("keysplit run", progress))
        if spark is None:
            with shown.step("starting an embedded Spark Connect server"):
                handle = stack.enter_context(session())
        else:
            handle = spark
        # The live line names every Spark action the job runs, whichever verb runs it.
        stack.enter_context(handle.observed(shown.phase))
        print_(f"keysplit run: word count of {dataset!r} on an embedded Spark Connect server ({handle.url})")
        with shown.step(f"reading {dataset} and writing it as Parquet files") as step:
            corpus_words = _write_corpus(open_dataset(), corpus).select("key")
            words = corpus_words.height
            step.outcome = f"{words:,} words"

        def stream() -> Iterator[pl.DataFrame]:
            return corpus_words.iter_slices(batch_rows)

        frame = handle.spark.read.parquet(str(corpus))
        plan = frame.groupBy("key").agg(F.count(F.lit(1)).alias("count"))
        # One untimed run of each plan first: the first query of a kind pays for the JVM's
        # compilation and the Python workers' start, which no pipeline should be charged.
        with shown.step("warming up: one untimed run of each plan on a slice"):
            handle.call("warming up", plan.count)
            for rows in (frame, next(iter(stream()))):
                aggregate(
                    rows,
                    key="key",
                    grouper=Grouper.from_spec(grouper, workers=workers, seed=seed),
                    aggs=["count"],
                    session=handle,
                    progress=False,
                )
        with shown.step("Spark's own groupBy, the baseline"):
            started = time.perf_counter()
            table = handle.call("Spark's own groupBy", plan.toArrow)
            native_walls = [time.perf_counter() - started]
        expected = pl.from_arrow(table)
        assert isinstance(expected, pl.DataFrame)
        expected = expected.sort("key", nulls_last=False)
        pipelines: list[tuple[str, Any]] = [
            ("KG, client stream", lambda: (stream(), "key")),
            (f"{grouper}, client stream", lambda: (stream(), grouper)),
            (f"{grouper}, Spark DataFrame", lambda: (frame, grouper)),
        ]
        # Each pipeline twice, forward then backward, so that no position in the order (the
        # machine warming, a neighbour's load) favours one; the loads are the first run's
        # (routing is deterministic), the times the mean of both. groupBy is timed before
        # and after them.
        walls: dict[str, list[float]] = {}
        seconds: dict[str, list[dict[str, float]]] = {}
        first: dict[str, RunReport] = {}
        equal: dict[str, bool] = {}
        for label, make in [*pipelines, *reversed(pipelines)]:
            rows, name = make()
            observed: Report[RunReport] = Report()
            with shown.step(f"{label}, run {len(walls.get(label, [])) + 1} of 2") as step:
                # The job's own live line names the verb's actions: rich shows one at a time.
                result = aggregate(
                    rows,
                    key="key",
                    grouper=Grouper.from_spec(name, workers=workers, seed=seed),
                    aggs=["count"],
                    session=handle,
                    output="polars",
                    batch_rows=batch_rows,
                    report=observed,
                    progress=False,
                )
                report = observed.get
                step.outcome = ", ".join(f"{phase} {s:.1f} s" for phase, s in report.phase_seconds.items())
            report.check()
            first.setdefault(label, report)
            equal[label] = equal.get(label, True) and result.equals(expected)
            walls.setdefault(label, []).append(report.wall_seconds)
            seconds.setdefault(label, []).append({k: v for k, v in report.figures().items() if k.endswith("_s")})
        with shown.step("Spark's own groupBy again"):
            started = time.perf_counter()
            handle.call("Spark's own groupBy", plan.toArrow)
            native_walls.append(time.perf_counter() - started)
        native_seconds = sum(native_walls) / len(native_walls)
        runs = [(label, first[label], equal[label], sum(walls[label]) / len(walls[label])) for label, _ in pipelines]
        case = grouped_map_case(handle, frame, GROUPED_WORKERS, shown)
        optimized = optimize_case(handle, frame, shown)
    labels = [label for label, *_ in runs]
    reports = [report for _, report, *_ in runs]
    figures = _figures(labels, reports, seconds).with_columns(
        pl.Series("equals_groupBy", [equal for *_, equal, _ in runs]),
        pl.Series("wall_vs_groupBy", [wall / native_seconds for *_, wall in runs]),
    )
    loads = pl.DataFrame({"worker": list(range(workers))})
    for label, report in zip(labels, reports, strict=True):
        loads = loads.with_columns(pl.Series(label, report.spark_loads))
    print_(
        f"{words:,} words, {expected.height:,} distinct; {workers} workers; Spark's own groupBy: {native_seconds:.2f} s"
    )
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        float_precision=4,
        tbl_width_chars=220,
    ):
        print_(str(_by_run(figures, labels)))
        print_(str(loads))
    _chart(labels, reports, seconds, directory / "run.png")
    title = f"keysplit run: {dataset}, {words:,} words, {workers} workers"
    _print_grouped(case, print_)
    _print_optimized(optimized, print_)
    _grouped_chart(case, directory / "grouped.png")
    grouped = pl.DataFrame(
        [
            {"plan": name, **{k: v for k, v in figures.items() if k != "task_seconds"}}
            for name, figures in case["plans"].items()
        ]
    )
    (directory / "run.html").write_text(
        _html(title, _by_run(figures, labels), loads, "run.png", grouped, "grouped.png")
    )
    print_(f"report: {directory / 'run.html'}, {directory / 'run.png'} and {directory / 'grouped.png'}")
    failed = [label for label, _, equal, _ in runs if not equal] + ([] if case["equal"] else ["grouped map"])
    failed += [] if optimized["equal"] else ["optimize"]
    if failed:
        print_(f"error: results differ from groupBy: {failed}")
        return 1
    print_(
        "every pipeline equals Spark's groupBy, and Spark's loads and Γ equal the client's routing. "
        "For a combinable count Spark's groupBy is the faster tool (wall_vs_groupBy); splitting "
        "pays off in grouped maps, where a hot key is one straggling task (grouped.png)"
    )
    return 0
