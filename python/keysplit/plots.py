"""Charts of :func:`keysplit.simulate.simulate`'s results: PNGs and one self-contained HTML report.

:func:`plot` draws, from a results table (or the Parquet/CSV file ``keysplit simulate
--output`` wrote):

- ``pareto-<dataset>.png``: load imbalance λ against replication factor γ, one point per
  grouper and worker count, the Pareto front (no other point is better on both) joined;
- ``loads-<dataset>.png``: each grouper's load per worker, over the mean load;
- ``windows-<dataset>.png``: λ, γ and the state moved ψ per window, for runs with windows
  (how groupers follow a drifting stream);
- ``trend-skew-<dataset>.png`` and ``trend-workers-<dataset>.png``: every metric as the
  Zipf exponent or the worker count grows, where the results hold more than one;
- ``report.html``: all of them inlined as base64, with the table of whole-stream metrics.

Plotting needs matplotlib (``pip install keysplit[plot]``); it draws with the Agg backend,
so no display is needed.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit.simulate import TABLE_COLUMNS, read_results

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The metrics each trend chart shows, with their axis labels.
TREND_METRICS = {
    "load_imbalance": "load imbalance λ",
    "replication_factor": "replication factor γ",
    "aggregation_cost": "aggregation cost Γ",
    "load_stddev": "StdDev of load",
    "hybrid_imbalance": "hybrid imbalance",
    "ns_per_tuple": "ns per tuple",
}
WINDOW_METRICS = {
    "load_imbalance": "load imbalance λ",
    "replication_factor": "replication factor γ",
    "state_moved": "state moved ψ (tuples)",
}
_MARKERS = "os^Dv<>pP*hX"


def _pyplot() -> Any:
    try:
        import matplotlib as mpl  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise ModuleNotFoundError(
            "keysplit plot needs matplotlib; run `pip install matplotlib` (or `pip install keysplit[plot]`)"
        ) from None
    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _integer_ticks() -> Any:
    _pyplot()
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    return MaxNLocator(integer=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")[:80] or "dataset"


def _family(label: str) -> str:
    """A dataset label without its ``z``: the streams a skew trend compares."""
    name, _, params = label.partition(":")
    kept = [p for p in params.split(",") if p and not p.startswith(("z=", "zipf_z="))]
    return name + (":" + ",".join(kept) if kept else "")


def _style(groupers: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A distinct (colour, marker) pair per grouper: colours cycle every 10, markers step
    each cycle, so 24 groupers never share both."""
    plt = _pyplot()
    colors = plt.get_cmap("tab10").colors
    return {
        g: {"color": colors[i % len(colors)], "marker": _MARKERS[(i + i // len(colors)) % len(_MARKERS)]}
        for i, g in enumerate(groupers)
    }


def _pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both coordinates (lower is better), by x."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


#: Resolution of every chart: enough to read, small enough that the report stays light.
DPI = 90


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _pyplot().close(fig)
    return path


def _one_window_setting(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of one window size (no windows when there are such rows): windows change how
    some groupers route, so charts never mix window sizes."""
    if rows.height == 0:
        return rows
    sizes = rows.get_column("window_tuples").unique().sort(nulls_last=False)
    first = sizes[0]
    return rows.filter(pl.col("window_tuples").is_null() if first is None else pl.col("window_tuples") == first)


def pareto_chart(rows: pl.DataFrame, dataset: str, path: Path, style: dict[str, dict[str, Any]]) -> Path:
    """λ against γ for one dataset's whole-stream rows: one panel per worker count, every
    grouper a marker, names written only on the Pareto front (the legend has the rest)."""
    plt = _pyplot()
    counts = sorted(rows.get_column("workers").unique().to_list())
    columns = min(len(counts), 3)
    lines = -(-len(counts) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5.2 * columns + 2.2, 4.4 * lines), squeeze=False)
    flat = list(axes.flat)
    for ax, workers in zip(flat, counts, strict=False):
        part = rows.filter(pl.col("workers") == workers)
        for grouper, points in part.group_by("grouper", maintain_order=True):
            label = grouper[0]
            ax.scatter(points["replication_factor"], points["load_imbalance"], label=label, s=36,
                       edgecolors="black", linewidths=0.3, **style[label])
        coordinates = list(zip(part["replication_factor"], part["load_imbalance"], strict=True))
        front = _pareto_front(coordinates)
        ax.plot(*zip(*front, strict=True), color="grey", linestyle="--", linewidth=1)
        on_front = set(front)
        for r in part.iter_rows(named=True):
            if (r["replication_factor"], r["load_imbalance"]) in on_front:
                ax.annotate(r["grouper"], (r["replication_factor"], r["load_imbalance"]), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_title(f"{workers} workers", fontsize=9)
        ax.set_xlabel("replication factor γ (workers per key)")
        ax.grid(alpha=0.3)
    for ax in flat[len(counts):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("load imbalance λ")
    handles, labels = flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=7, frameon=False)
    fig.suptitle(f"λ vs γ (dashed: the Pareto front, named): {dataset}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 2.0 / (5.2 * columns + 2.2), 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def loads_chart(rows: pl.DataFrame, dataset: str, path: Path, style: dict[str, dict[str, Any]]) -> Path:
    """Each grouper's load per worker over the mean, as bars, one small panel per grouper
    (the largest worker count), on one scale."""
    plt = _pyplot()
    workers = rows.get_column("workers").max()
    rows = rows.filter(pl.col("workers") == workers)
    columns = min(rows.height, 4)
    lines = -(-rows.height // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(3.4 * columns, 2.2 * lines + 0.6), sharey=True, squeeze=False)
    flat = list(axes.flat)
    for ax, r in zip(flat, rows.iter_rows(named=True), strict=False):
        loads = r["worker_loads"]
        mean = sum(loads) / len(loads) if loads else 0
        ax.bar(range(len(loads)), [x / mean if mean else 0 for x in loads], width=0.85,
               color=style[r["grouper"]]["color"])
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_title(f"{r['grouper']}  λ={r['load_imbalance']:.3g}", fontsize=8)
        ax.xaxis.set_major_locator(_integer_ticks())
        ax.tick_params(labelsize=7)
    for ax in flat[rows.height:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("load / mean", fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("worker", fontsize=8)
    fig.suptitle(f"load per worker, {workers} workers: {dataset}", fontsize=10)
    return _save(fig, path)


def windows_chart(rows: pl.DataFrame, dataset: str, path: Path, style: dict[str, dict[str, Any]]) -> Path:
    """λ, γ and ψ per window (the largest worker count and the smallest window size)."""
    plt = _pyplot()
    workers = rows.get_column("workers").max()
    size = rows.get_column("window_tuples").min()
    rows = rows.filter(pl.col("workers") == workers, pl.col("window_tuples") == size).sort("window")
    fig, axes = plt.subplots(len(WINDOW_METRICS), 1, figsize=(9, 3 * len(WINDOW_METRICS)), sharex=True)
    for ax, (metric, label) in zip(axes, WINDOW_METRICS.items(), strict=True):
        for grouper, part in rows.group_by("grouper", maintain_order=True):
            ax.plot(part["window"], part[metric], label=grouper[0], linewidth=1, markersize=3, **style[grouper[0]])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_title(f"per window of {size:,} tuples, {workers} workers: {dataset}", fontsize=10)
    axes[-1].set_xlabel("window")
    axes[-1].xaxis.set_major_locator(_integer_ticks())
    axes[0].legend(fontsize=7, ncol=3)
    return _save(fig, path)


def trend_chart(
    rows: pl.DataFrame, x: str, xlabel: str, title: str, path: Path, style: dict[str, dict[str, Any]]
) -> Path:
    """Every metric of :data:`TREND_METRICS` against ``x``, one line per grouper."""
    plt = _pyplot()
    metrics = [m for m in TREND_METRICS if not rows.get_column(m).is_null().all()]
    fig, axes = plt.subplots((len(metrics) + 1) // 2, 2, figsize=(11, 3 * ((len(metrics) + 1) // 2)))
    flat = list(axes.flat)
    for ax, metric in zip(flat, metrics, strict=False):
        for grouper, part in rows.sort(x).group_by("grouper", maintain_order=True):
            ax.plot(part[x], part[metric], label=grouper[0], linewidth=1, markersize=4, **style[grouper[0]])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(TREND_METRICS[metric])
        ax.grid(alpha=0.3)
    for ax in flat[len(metrics):]:
        ax.set_visible(False)
    flat[0].legend(fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def _html_table(rows: pl.DataFrame) -> str:
    columns = ["dataset", "workers", "window_tuples", "grouper", *TABLE_COLUMNS]
    rows = rows.select(c for c in columns if c in rows.columns and not rows.get_column(c).is_null().all())

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        return html.escape("" if value is None else str(value))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows.iter_rows()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def plot(results: pl.DataFrame | str | Path, out: str | Path) -> list[Path]:
    """Draws every chart of the module into ``out`` and returns the paths, report last."""
    frame = results if isinstance(results, pl.DataFrame) else read_results(str(results))
    if frame.height == 0:
        raise ValueError("the results are empty: nothing to plot")
    missing = {"dataset", "grouper", "workers", "window", "window_tuples", "load_imbalance",
               "replication_factor", "worker_loads"} - set(frame.columns)
    if missing:
        raise ValueError(f"not a keysplit simulate results table: missing columns {sorted(missing)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    style = _style(frame.get_column("grouper").unique(maintain_order=True).to_list())
    whole = frame.filter(pl.col("window").is_null())
    sections: list[tuple[str, list[Path]]] = []

    for (dataset,), rows in whole.group_by("dataset", maintain_order=True):
        rows = _one_window_setting(rows)
        slug = _slug(dataset)
        charts = [
            pareto_chart(rows, dataset, out / f"pareto-{slug}.png", style),
            loads_chart(rows, dataset, out / f"loads-{slug}.png", style),
        ]
        windowed = frame.filter(pl.col("dataset") == dataset, pl.col("window").is_not_null())
        if windowed.height:
            charts.append(windows_chart(windowed, dataset, out / f"windows-{slug}.png", style))
        if rows.get_column("workers").n_unique() > 1:
            charts.append(trend_chart(rows, "workers", "workers", f"metrics as workers grow: {dataset}",
                                      out / f"trend-workers-{slug}.png", style))
        sections.append((dataset, charts))

    skewed = _one_window_setting(whole.filter(pl.col("z").is_not_null())) if "z" in whole.columns else whole.clear()
    skewed = skewed.with_columns(pl.col("dataset").map_elements(_family, return_dtype=pl.String).alias("family"))
    for (family, workers), rows in skewed.group_by("family", "workers", maintain_order=True):
        if rows.get_column("z").n_unique() > 1:
            path = out / f"trend-skew-{_slug(family)}-n{workers}.png"
            sections.append((
                f"{family}, {workers} workers, as skew grows",
                [trend_chart(rows, "z", "Zipf exponent z", f"metrics as skew grows: {family}, {workers} workers",
                             path, style)],
            ))

    report = out / "report.html"
    report.write_text(_report(whole, sections), encoding="utf-8")
    return [path for _, charts in sections for path in charts] + [report]


def _summary(whole: pl.DataFrame) -> str:
    """One line per (dataset, workers): the grouper with the least λ, and the one with the
    least γ among those within 5 % load imbalance."""
    items = []
    for (dataset, workers), rows in whole.sort("dataset", "workers").group_by("dataset", "workers", maintain_order=True):
        best = rows.sort("load_imbalance", "replication_factor").row(0, named=True)
        balanced = rows.filter(pl.col("load_imbalance") <= 0.05).sort("replication_factor", "load_imbalance")
        line = (f"<b>{html.escape(str(dataset))}</b>, {workers} workers: least λ "
                f"<code>{html.escape(best['grouper'])}</code> (λ {best['load_imbalance']:.3g}, "
                f"γ {best['replication_factor']:.3g})")
        if balanced.height:
            pick = balanced.row(0, named=True)
            line += (f"; least γ within λ ≤ 0.05 <code>{html.escape(pick['grouper'])}</code> "
                     f"(λ {pick['load_imbalance']:.3g}, γ {pick['replication_factor']:.3g})")
        items.append(f"<li>{line}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _report(whole: pl.DataFrame, sections: list[tuple[str, list[Path]]]) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>keysplit simulation report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:right}th{background:#eee}img{max-width:100%;display:block;margin:1em 0}"
        "details{margin:1em 0}summary{cursor:pointer;font-weight:bold}"
        ".wide{overflow-x:auto}</style>",
        "</head><body><h1>keysplit simulation report</h1>",
        "<p>λ = (max load − mean load) / mean load; γ = workers per distinct key; Γ = Σ distinct "
        "keys per worker; ψ = tuples of state moved between windows. Metrics as in "
        "<code>keysplit.metrics</code>.</p>",
        "<h2>Summary</h2>",
        _summary(whole),
    ]
    for title, charts in sections:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        for path in charts:
            encoded = base64.b64encode(path.read_bytes()).decode("ascii")
            parts.append(f"<img alt='{html.escape(path.stem)}' src='data:image/png;base64,{encoded}'>")
    parts.append("<h2>Whole-stream metrics</h2>")
    for (dataset,), rows in whole.sort("dataset").group_by("dataset", maintain_order=True):
        table = _html_table(rows.sort("workers", "load_imbalance", "replication_factor"))
        parts.append(
            f"<details><summary>{html.escape(str(dataset))}: {rows.height} rows, by workers, then λ</summary>"
            f"<div class='wide'>{table}</div></details>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
