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
    plt = _pyplot()
    colors = plt.get_cmap("tab20").colors
    return {
        g: {"color": colors[i % len(colors)], "marker": _MARKERS[i % len(_MARKERS)]}
        for i, g in enumerate(groupers)
    }


def _pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both coordinates (lower is better), by x."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
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
    """λ against γ for one dataset's whole-stream rows."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    many_workers = rows.get_column("workers").n_unique() > 1
    for grouper, part in rows.group_by("grouper", maintain_order=True):
        label = grouper[0]
        ax.scatter(part["replication_factor"], part["load_imbalance"], label=label, s=40, **style[label])
        for r in part.iter_rows(named=True):
            text = f"{label} n={r['workers']}" if many_workers else label
            ax.annotate(text, (r["replication_factor"], r["load_imbalance"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    front = _pareto_front(list(zip(rows["replication_factor"], rows["load_imbalance"], strict=True)))
    ax.plot(*zip(*front, strict=True), color="grey", linestyle="--", linewidth=1, label="Pareto front")
    ax.set_xlabel("replication factor γ (workers per key)")
    ax.set_ylabel("load imbalance λ = (max − mean) / mean")
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_title(f"λ vs γ: {dataset}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def loads_chart(rows: pl.DataFrame, dataset: str, path: Path, style: dict[str, dict[str, Any]]) -> Path:
    """Each grouper's load per worker, over the mean, for the largest worker count."""
    plt = _pyplot()
    workers = rows.get_column("workers").max()
    rows = rows.filter(pl.col("workers") == workers)
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in rows.iter_rows(named=True):
        loads = r["worker_loads"]
        mean = sum(loads) / len(loads) if loads else 0
        ax.plot(range(len(loads)), [x / mean if mean else 0 for x in loads], label=r["grouper"],
                linewidth=1, markersize=4, **style[r["grouper"]])
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("worker")
    ax.set_ylabel("load / mean load")
    ax.set_title(f"load per worker, {workers} workers: {dataset}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
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


def _report(whole: pl.DataFrame, sections: list[tuple[str, list[Path]]]) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>keysplit simulation report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:right}th{background:#eee}img{max-width:100%;display:block;margin:1em 0}</style>",
        "</head><body><h1>keysplit simulation report</h1>",
        "<p>λ = (max load − mean load) / mean load; γ = workers per distinct key; Γ = Σ distinct "
        "keys per worker; ψ = tuples of state moved between windows. Metrics as in "
        "<code>keysplit.metrics</code>.</p>",
        "<h2>Whole-stream metrics</h2>",
        _html_table(whole),
    ]
    for title, charts in sections:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        for path in charts:
            encoded = base64.b64encode(path.read_bytes()).decode("ascii")
            parts.append(f"<img alt='{html.escape(path.stem)}' src='data:image/png;base64,{encoded}'>")
    parts.append("</body></html>")
    return "\n".join(parts)
