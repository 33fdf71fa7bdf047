"""The main job (``keysplit run``): a word count on Spark, routed by KG and by a skew-aware grouper.

Both pipelines run on one embedded Spark Connect server over the same corpus; each result
is checked against a plain Spark ``groupBy`` of the unrouted words, and the per-worker
loads, λ, γ, Γ and phase times are printed side by side and written to an HTML report with
a PNG chart.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit import datasets

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from keysplit.spark.report import RunReport


def dataset_stream(name: str, *, batch_rows: int, tuples: int, seed: int) -> Callable[[], Iterator[pl.DataFrame]]:
    """A function giving the named corpus afresh each time: ``kjv``, ``wordfreq`` or ``zipf``."""
    if name == "zipf":
        return lambda: datasets.zipf(keys=100_000, tuples=tuples, z=1.1, seed=seed, batch_rows=batch_rows)
    if name == "kjv":
        return lambda: datasets.kjv(batch_rows=batch_rows)
    if name == "wordfreq":
        return lambda: datasets.wordfreq_words(tuples=tuples, seed=seed, batch_rows=batch_rows)
    raise ValueError(f"unknown dataset {name!r}; known: kjv, wordfreq, zipf")


def _reference_counts(session: Any, stream: Iterator[pl.DataFrame]) -> pl.DataFrame:
    from pyspark.sql import functions as F

    from keysplit.spark.shipping import ship, to_arrow, union

    words = union([ship(session, to_arrow(frame.select("key"))) for frame in stream])
    plan = words.groupBy("key").agg(F.count(F.lit(1)).alias("count"))
    table = session.call("reference groupBy", plan.toArrow)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame.sort("key", nulls_last=False)


def _chart(reports: list[RunReport], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loads_axis, phases_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(reports)
    for i, report in enumerate(reports):
        workers = range(report.workers)
        loads_axis.bar([w + i * width for w in workers], report.partition_rows, width, label=report.grouper)
    loads_axis.set_xlabel("worker (= Spark partition)")
    loads_axis.set_ylabel("tuples")
    loads_axis.set_title("Rows per Spark partition")
    loads_axis.legend()
    phases = ["routing", "shipping", "partial", "final"]
    for i, report in enumerate(reports):
        seconds = report.phase_seconds
        phases_axis.bar([p + i * width for p in range(len(phases))], [seconds[p] for p in phases], width, label=report.grouper)
    phases_axis.set_xticks([p + width / 2 for p in range(len(phases))], phases)
    phases_axis.set_ylabel("seconds")
    phases_axis.set_title("Phase times")
    phases_axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _html(title: str, figures: pl.DataFrame, loads: pl.DataFrame, chart: str) -> str:
    def table(frame: pl.DataFrame) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(f'{v:.4g}' if isinstance(v, float) else str(v))}</td>" for v in row) + "</tr>"
            for row in frame.iter_rows()
        )
        return f"<table><tr>{head}</tr>{body}</table>"

    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:right}table{border-collapse:collapse;margin:1em 0}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><h2>Figures</h2>{table(figures)}"
        f"<h2>Loads: client routing vs Spark partitions</h2>{table(loads)}"
        f"<img src='{html.escape(chart)}' alt='loads and phase times'></body></html>"
    )


def run(
    *,
    dataset: str = "kjv",
    grouper: str = "pdstream",
    workers: int = 8,
    seed: int = 0,
    tuples: int = 1_000_000,
    batch_rows: int = 200_000,
    report_dir: str | Path = "results/run",
    print_: Callable[[str], None] = print,
) -> int:
    """Runs the job; returns 0 when both pipelines equal ``groupBy`` and Spark agrees with the client."""
    from keysplit._grouper import Grouper
    from keysplit.spark.aggregate import aggregate_with_report
    from keysplit.spark.session import session

    stream = dataset_stream(dataset, batch_rows=batch_rows, tuples=tuples, seed=seed)
    reports: list[RunReport] = []
    equal: dict[str, bool] = {}
    with session() as handle:
        print_(f"keysplit run: word count of {dataset!r} on an embedded Spark Connect server ({handle.url})")
        expected = _reference_counts(handle, stream())
        for name in ("key", grouper):
            result, report = aggregate_with_report(
                stream(), key="key", grouper=Grouper(name, workers=workers, seed=seed), aggs=["count"],
                session=handle, output="polars", batch_rows=batch_rows,
            )
            report.check()
            equal[name] = result.equals(expected)
            reports.append(report)
    figures = pl.DataFrame([r.figures() for r in reports]).with_columns(
        pl.Series("equals_groupBy", [equal[r.grouper] for r in reports])
    )
    loads = pl.DataFrame({"worker": list(range(workers))})
    for r in reports:
        loads = loads.with_columns(
            pl.Series(f"{r.grouper}_client", r.client_loads), pl.Series(f"{r.grouper}_spark", r.partition_rows)
        )
    words = int(expected["count"].sum())
    print_(f"{words:,} words, {expected.height:,} distinct; {workers} workers")
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   float_precision=4, tbl_width_chars=220):
        shown = figures.with_columns(pl.col(pl.Float64).round(4)).select(pl.all().cast(pl.String))
        print_(str(shown.transpose(include_header=True, header_name="figure", column_names="grouper")))
        print_(str(loads))
    directory = Path(report_dir)
    directory.mkdir(parents=True, exist_ok=True)
    _chart(reports, directory / "run.png")
    title = f"keysplit run: {dataset}, {words:,} words, {workers} workers"
    (directory / "run.html").write_text(_html(title, figures, loads, "run.png"))
    print_(f"report: {directory / 'run.html'} and {directory / 'run.png'}")
    if not all(equal.values()):
        print_(f"error: results differ from groupBy: {[g for g, ok in equal.items() if not ok]}")
        return 1
    print_("both pipelines equal Spark's groupBy; Spark's partitions agree with the routing")
    return 0
