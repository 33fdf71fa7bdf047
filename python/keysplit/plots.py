"""Charts of :func:`keysplit.simulate.simulate`'s results: PNGs and one self-contained HTML report.

:func:`plot` draws, from a results table (or the Parquet/CSV file ``keysplit simulate
--output`` wrote):

- ``pareto-<dataset>.png``: load imbalance λ against replication factor γ, one point per
  grouper and worker count, the Pareto front (no other point is better on both) joined;
- ``loads-<dataset>.png``: each grouper's load per worker, over the mean load;
- ``windows-<dataset>-n<workers>-w<window tuples>.png``: λ, γ and the state moved ψ per
  window, one chart per worker count and window size, for runs with windows (how groupers
  follow a drifting stream);
- ``trend-skew-<dataset>-n<workers>.png`` and ``trend-workers-<dataset>.png``: every metric
  as the Zipf exponent or the worker count grows, where the results hold more than one (a
  dataset of a skew sweep has its points in the skew trends and no workers trend);
- ``report.html``: a summary table, all the charts inlined as base64, then the
  whole-stream metrics, one folded table per dataset.

``<dataset>`` is the dataset's label made a file name (:func:`file_names`): its kind, then
its parameters, a file by its name alone, e.g. ``zipf-keys10000-tuples1000000-z1.2`` or
``file-events-user``.

Every chart names its groupers in one legend right of its panels, in one colour and marker
per grouper across charts. :func:`figures` gives the charts as matplotlib figures.

Plotting needs matplotlib (``pip install keysplit[plot]``); it draws with the Agg backend,
so no display is needed.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
import textwrap
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from keysplit._numbers import to_float, to_int
from keysplit.metrics import DEFAULT_HYBRID_WEIGHT
from keysplit.simulate import TABLE_COLUMNS, read_results

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.figure import Figure, SubFigure
    from matplotlib.legend import Legend
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

#: The metrics each trend chart shows, with their axis labels.
TREND_METRICS = {
    "load_imbalance": "load imbalance λ",
    "replication_factor": "replication factor γ",
    "aggregation_cost": "aggregation cost Γ",
    "load_stddev": "StdDev of load",
    "hybrid_imbalance": "hybrid imbalance HI",
    "ns_per_tuple": "ns per tuple",
}
#: What HI is, wherever it is drawn: the name alone says nothing (keysplit.metrics.hybrid_imbalance).
HYBRID_IMBALANCE_DEFINITION = (
    f"hybrid imbalance HI = max_w H_w − mean_w H_w, with H_w = p·L′_w + (1 − p)·C′_w and "
    f"p = {DEFAULT_HYBRID_WEIGHT:g}: L′_w and C′_w are worker w's load and its distinct keys, "
    "each min-max scaled to [0, 1] over the workers (the holistic paper's Eq. 7–10)"
)
WINDOW_METRICS = {
    "load_imbalance": "load imbalance λ",
    "replication_factor": "replication factor γ",
    "state_moved": "state moved ψ (tuples)",
}
#: λ and ψ run from exactly 0 (shuffle's λ, key grouping's ψ) to thousands of times their
#: smallest non-zero values, and the small values are where the good groupers differ: on a
#: symlog axis, linear below these thresholds, both ends stay readable.
SYMLOG_BELOW = {"load_imbalance": 0.01, "state_moved": 1.0}
_MARKERS = "os^Dv<>pP*hX"
_LINESTYLES = ("-", "--", ":")
#: Resolution of every chart: enough to read, small enough that the report stays light.
DPI = 90
_LEGEND_FONTSIZE = 7


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


#: The longest dataset part of a file name; a longer one is cut and made unique by a hash.
_NAME_CHARACTERS = 80


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _readable_name(label: str) -> str:
    """A dataset label as a file name: ``zipf:keys=2000,z=1.5`` as ``zipf-keys2000-z1.5``,
    ``file:path=/data/events.parquet,key=user`` as ``file-events-user``. A number keeps its
    parameter's name (``z1.5``), a word stands alone (``user``), a file is its name without
    directory or suffix; anything but letters, digits, ``.``, ``_`` and ``-`` becomes ``_``."""
    kind, _, params = label.partition(":")
    parts = [kind]
    for item in filter(None, params.split(",")):
        name, equals, value = item.partition("=")
        if not equals:
            parts.append(item)
        elif name == "path":
            parts.append(Path(value).stem)
        elif _is_number(value):
            parts.append(f"{name}{value}")
        else:
            parts.append(value)
    safe = (re.sub(r"[^A-Za-z0-9._-]+", "_", part).strip("._-") for part in parts)
    return "-".join(filter(None, safe)) or "dataset"


def file_names(labels: Iterable[str]) -> dict[str, str]:
    """Each dataset label's part of the chart file names: :func:`_readable_name`, with
    ``-`` and 8 hex digits of the label's hash where two labels read alike (two files
    ``a/x.csv`` and ``b/x.csv``) or the name is cut at 80 characters. The same label gets
    the same name in every run with the same datasets."""
    readable = {label: _readable_name(label) for label in dict.fromkeys(labels)}
    shared = Counter(readable.values())
    names = {}
    for label, name in readable.items():
        if shared[name] > 1 or len(name) > _NAME_CHARACTERS:
            digest = hashlib.blake2b(label.encode(), digest_size=4).hexdigest()
            name = f"{name[:_NAME_CHARACTERS].rstrip('._-')}-{digest}"
        names[label] = name
    return names


def _family(label: str) -> str:
    """A dataset label without its ``z``: the streams a skew trend compares."""
    name, _, params = label.partition(":")
    kept = [p for p in params.split(",") if p and not p.startswith(("z=", "zipf_z="))]
    return name + (":" + ",".join(kept) if kept else "")


def _style(groupers: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A distinct (colour, marker) pair per grouper: colours cycle every 10, markers step
    each cycle, so 24 groupers never share both; lines also change dash each cycle, so two
    lines of one colour stay apart between their markers."""
    plt = _pyplot()
    colors = plt.get_cmap("tab10").colors
    return {
        g: {
            "color": colors[i % len(colors)],
            "marker": _MARKERS[(i + i // len(colors)) % len(_MARKERS)],
            "linestyle": _LINESTYLES[(i // len(colors)) % len(_LINESTYLES)],
        }
        for i, g in enumerate(groupers)
    }


def _pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both coordinates (lower is better), by x."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


def _grid(panels: int, max_columns: int) -> tuple[int, int]:
    """Lines and columns for ``panels`` panels, the lines as even as can be (4 panels as
    2 x 2, not 3 + 1)."""
    lines = -(-panels // max_columns)
    return lines, -(-panels // lines)


def _renderer(fig: Figure | SubFigure) -> RendererAgg:
    """The renderer that measures ``fig``'s text: the Agg canvas's, as :func:`_pyplot` draws
    with Agg."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415

    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    return canvas.get_renderer()


def _legend_outside(fig: Figure, style: dict[str, dict[str, Any]]) -> Legend:
    """One legend for every panel of ``fig``, right of them, the figure widened by the
    legend's width: inside an axes, two dozen groupers' names hide the data they name.
    Groupers come in ``style``'s order, the same in every chart; columns are added until
    the legend fits the figure's height."""
    handles: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    entries = {grouper: handles[grouper] for grouper in style if grouper in handles}
    renderer = _renderer(fig)
    for columns in range(1, len(entries) + 1):
        legend = fig.legend(
            list(entries.values()),
            list(entries),
            loc="outside right center",
            fontsize=_LEGEND_FONTSIZE,
            frameon=False,
            ncols=columns,
        )
        box = legend.get_window_extent(renderer)
        if box.height <= 0.95 * fig.bbox.height or columns == len(entries):
            break
        legend.remove()
    fig.set_size_inches(fig.get_figwidth() + box.width / fig.dpi, fig.get_figheight())
    return legend


def _plain_numbers(axis: Any) -> None:
    """Tick labels as 0.01, 2, 5,000 rather than 10^-2, 2 x 10^0, 5 x 10^3."""
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 1 else f"{v:g}"))


def _symlog_y(ax: Axes, metric: str) -> None:
    threshold = SYMLOG_BELOW[metric]
    ax.set_yscale("symlog", linthresh=threshold)
    _plain_numbers(ax.yaxis)
    # The metric is never negative; the default margin reached down to -0.1 on this scale.
    ax.set_ylim(bottom=-0.2 * threshold)


def _scale_y(ax: Axes, metric: str, values: pl.Series) -> None:
    if metric in SYMLOG_BELOW:
        _symlog_y(ax, metric)
        return
    finite: list[float] = values.drop_nulls().drop_nans().to_list()
    if finite and min(finite) > 0 and max(finite) >= 10 * min(finite):
        # One grouper a decade away (shuffle's γ ≈ the worker count) would flatten the
        # others into one line. Ticks at 1, 2, 5 per decade: these axes span a decade or
        # two, where decades alone leave one or two labels.
        from matplotlib.ticker import LogLocator, NullFormatter  # noqa: PLC0415

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        _plain_numbers(ax.yaxis)


def _ticks_at(ax: Axes, values: Sequence[float]) -> None:
    """x ticks at the values the results hold (8, 16, 32 workers; z = 1.0, 1.5), not at
    round numbers none of them is; at most about a dozen."""
    from matplotlib.ticker import NullLocator  # noqa: PLC0415

    shown = list(values)[:: -(-len(values) // 12)]
    ax.set_xticks(shown, [f"{v:g}" for v in shown])
    ax.xaxis.set_minor_locator(NullLocator())


def _save(fig: Figure, path: Path) -> Path:
    from PIL import Image  # noqa: PLC0415 - matplotlib's own dependency

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    _pyplot().close(fig)
    buffer.seek(0)
    # Charts hold few colours but anti-aliasing blends them into thousands: a 256-colour
    # palette looks the same at a third of the bytes, which keeps report.html light.
    with Image.open(buffer) as image:
        palette = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette.save(path, optimize=True)
    return path


def _one_window_setting(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of one window size (no windows when there are such rows): windows change how
    some groupers route, so charts never mix window sizes."""
    if rows.height == 0:
        return rows
    sizes = rows.get_column("window_tuples").unique().sort(nulls_last=False)
    first = sizes[0]
    return rows.filter(pl.col("window_tuples").is_null() if first is None else pl.col("window_tuples") == first)


#: Where a front label may go, tried in order from its point (x, y offset in points,
#: alignment): right above, left above, right below, left below.
_LABEL_SIDES: tuple[tuple[int, int, Literal["left", "right"], Literal["bottom", "top"]], ...] = (
    (4, 1, "left", "bottom"),
    (-4, 1, "right", "bottom"),
    (4, -1, "left", "top"),
    (-4, -1, "right", "top"),
)
#: How many lines of labels a label may be moved away from its point, up or down.
_LABEL_LINES = 12
_LABEL_STYLE: dict[str, Any] = {
    "fontsize": 7,
    "textcoords": "offset points",
    # A pale box: names often start on a neighbour's marker.
    "bbox": {"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "linewidth": 0},
}


def _text_box(label: Annotation, renderer: RendererAgg) -> Bbox:
    """Where ``label``'s text is on the page, without the line to its point (which
    :meth:`Annotation.get_window_extent` includes): lines may cross, names may not."""
    from matplotlib.text import Text  # noqa: PLC0415

    label.update_positions(renderer)
    return Text.get_window_extent(label, renderer)


def _label_front(ax: Axes, names_at: list[tuple[tuple[float, float], list[str]]]) -> None:
    """Names next to the front's points, for a figure already laid out. Each label takes
    the first place, nearest its point first (:data:`_LABEL_SIDES`, then a line further up
    or down each time), where it stays inside the panel and covers no label already written
    and no point of the front; a label moved off its point gets a thin line to it. Names
    written one over the other, or one label naming groupers at two points, misled. Groupers
    at the very same point share a label; where no place is free, the label joins the one
    it would cover."""
    from matplotlib.transforms import Bbox  # noqa: PLC0415

    renderer = _renderer(ax.figure)
    to_pixels = ax.figure.dpi / 72
    # A front marker's half-width: scatter size 36 is 6 points across, and its edge line.
    reach = 3.5 * to_pixels
    markers = []
    for point, _ in names_at:
        x, y = ax.transData.transform(point)
        markers.append(Bbox.from_extents(x - reach, y - reach, x + reach, y + reach))
    written: list[tuple[Annotation, Bbox]] = []
    for point, names in names_at:
        text = ", ".join(names)
        probe = ax.annotate(text, point, xytext=(4, 4), **_LABEL_STYLE)
        # Laid out already: moving the panels for a label would move the labels measured.
        probe.set_in_layout(False)
        place = _free_place(ax, probe, [*markers, *(box for _, box in written)])
        probe.remove()
        if place is None:
            # No place is free: the names join the label they would cover at the first place.
            first = ax.annotate(text, point, xytext=(4, 4), **_LABEL_STYLE)
            box = _text_box(first, renderer)
            first.remove()
            joined = next((i for i, (_, other) in enumerate(written) if box.overlaps(other)), None)
            if joined is not None:
                label, _ = written[joined]
                label.set_text(f"{label.get_text()}, {text}")
                written[joined] = (label, _text_box(label, renderer))
                continue
        offset, horizontal, vertical, moved = place or ((4.0, 4.0), "left", "bottom", False)
        leader = {"arrowstyle": "-", "color": "grey", "linewidth": 0.5, "shrinkA": 0, "shrinkB": 3}
        label = ax.annotate(
            text,
            point,
            xytext=offset,
            horizontalalignment=horizontal,
            verticalalignment=vertical,
            arrowprops=leader if moved else None,
            **_LABEL_STYLE,
        )
        label.set_in_layout(False)
        written.append((label, _text_box(label, renderer)))


def _free_place(
    ax: Axes, label: Annotation, taken: list[Bbox]
) -> tuple[tuple[float, float], Literal["left", "right"], Literal["bottom", "top"], bool] | None:
    """The first of :data:`_LABEL_SIDES`, then the same a line further from the point each
    time, where ``label`` stays inside ``ax`` and overlaps none of ``taken``: its offset,
    alignments, and whether it is off its point (a line then joins them); None if none is."""
    renderer = _renderer(ax.figure)
    line = _text_box(label, renderer).height / (ax.figure.dpi / 72) + 2
    panel = ax.bbox
    for lines in range(_LABEL_LINES + 1):
        for dx, direction, horizontal, vertical in _LABEL_SIDES:
            offset = (float(dx), direction * (4 + lines * line))
            label.xyann = offset
            label.set_horizontalalignment(horizontal)
            label.set_verticalalignment(vertical)
            box = _text_box(label, renderer)
            inside = panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y0 <= box.y0 and box.y1 <= panel.y1
            if inside and not any(box.overlaps(other) for other in taken):
                return offset, horizontal, vertical, lines > 0
    return None


def pareto_figure(rows: pl.DataFrame, dataset: str, style: dict[str, dict[str, Any]]) -> Figure:
    """λ against γ for one dataset's whole-stream rows: one panel per worker count, every
    grouper a marker, names written only on the Pareto front (the legend has the rest)."""
    plt = _pyplot()
    counts = sorted(rows.get_column("workers").unique().to_list())
    lines, columns = _grid(len(counts), 3)
    fig, axes = plt.subplots(lines, columns, figsize=(5.2 * columns, 4.4 * lines), squeeze=False, layout="constrained")
    flat = list(axes.flat)
    fronts: list[tuple[Axes, list[tuple[tuple[float, float], list[str]]]]] = []
    for ax, workers in zip(flat, counts, strict=False):
        part = rows.filter(pl.col("workers") == workers)
        for (grouper,), points in part.group_by("grouper", maintain_order=True):
            ax.scatter(
                points["replication_factor"],
                points["load_imbalance"],
                label=grouper,
                s=36,
                edgecolors="black",
                linewidths=0.3,
                color=style[grouper]["color"],
                marker=style[grouper]["marker"],
            )
        coordinates = list(zip(part["replication_factor"], part["load_imbalance"], strict=True))
        front = _pareto_front(coordinates)
        ax.plot(*zip(*front, strict=True), color="grey", linestyle="--", linewidth=1)
        title = f"{workers} workers"
        if "replication_bound" in part.columns and part["replication_bound"].null_count() < part.height:
            bound = to_float(part["replication_bound"].max())
            ax.axvline(bound, color="black", linestyle=":", linewidth=1)
            title += f", offline bound γ* = {bound:.4g}"
        names: dict[tuple[float, float], list[str]] = {point: [] for point in front}
        for grouper, point in zip(part["grouper"], coordinates, strict=True):
            if point in names:
                names[point].append(grouper)
        fronts.append((ax, list(names.items())))
        _symlog_y(ax, "load_imbalance")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("replication factor γ (workers per key)")
        ax.grid(alpha=0.3)
    for ax in flat[len(counts) :]:
        ax.remove()
    for ax in axes[:, 0]:
        ax.set_ylabel("load imbalance λ")
    title = f"λ vs γ (dashed: the Pareto front, named; dotted: the offline bound γ*): {dataset}"
    fig.suptitle(textwrap.fill(title, width=70 * columns), fontsize=10)
    _legend_outside(fig, style)
    # Labels are placed by their size on the page: the layout comes first.
    fig.canvas.draw()
    for ax, names_at in fronts:
        _label_front(ax, names_at)
    return fig


def pareto_chart(results: pl.DataFrame, path: Path, *, title: str = "") -> Path:
    """:func:`pareto_figure` of one dataset's whole-stream results, saved as the PNG
    ``path``, its title extended by ``title``."""
    frame = _results(results)
    whole = _one_window_setting(frame.filter(pl.col("window").is_null()))
    datasets = whole.get_column("dataset").unique(maintain_order=True).to_list()
    if len(datasets) != 1:
        raise ValueError(f"pareto_chart draws one dataset, got {len(datasets)}")
    style = _style(whole.get_column("grouper").unique(maintain_order=True).to_list())
    label = f"{datasets[0]}, {title}" if title else datasets[0]
    return _save(pareto_figure(whole, label, style), path)


def loads_figure(rows: pl.DataFrame, dataset: str, style: dict[str, dict[str, Any]]) -> Figure:
    """Each grouper's load per worker over the mean, as bars, one small panel per grouper
    (the largest worker count), on one scale."""
    plt = _pyplot()
    workers = to_int(rows.get_column("workers").max())
    rows = rows.filter(pl.col("workers") == workers)
    lines, columns = _grid(rows.height, 4)
    fig, axes = plt.subplots(
        lines,
        columns,
        figsize=(3.4 * columns, 2.2 * lines + 0.6),
        sharex=True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    flat = list(axes.flat)
    for ax, r in zip(flat, rows.iter_rows(named=True), strict=False):
        loads = r["worker_loads"]
        mean = sum(loads) / len(loads) if loads else 0
        # Past 32 workers a bar is about 3 pixels wide: gaps that narrow alias into uneven
        # stripes, so the bars touch.
        ax.bar(
            range(len(loads)),
            [x / mean if mean else 0 for x in loads],
            width=0.85 if len(loads) <= 32 else 1.0,
            color=style[r["grouper"]]["color"],
        )
        ax.axhline(1.0, color="grey", linewidth=0.8)
        # No room past the last bar, where the integer ticks put a worker that is not there.
        ax.margins(x=0.01)
        ax.set_title(f"{r['grouper']}  λ={r['load_imbalance']:.3g}", fontsize=8)
        ax.xaxis.set_major_locator(_integer_ticks())
        ax.tick_params(labelsize=7)
    for index, ax in enumerate(flat):
        if index >= rows.height:
            ax.remove()
        elif index + columns >= rows.height:
            # The lowest panel of its column: it alone labels the shared worker axis.
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("worker", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("load / mean", fontsize=8)
    fig.suptitle(f"load per worker, {workers} workers: {dataset}", fontsize=10)
    return fig


def windows_figure(rows: pl.DataFrame, dataset: str, style: dict[str, dict[str, Any]]) -> Figure:
    """λ, γ and ψ per window, for the per-window rows of one worker count and one window
    size (:func:`figures` draws one chart for each)."""
    plt = _pyplot()
    settings = rows.select("workers", "window_tuples").unique()
    if settings.height != 1:
        raise ValueError(f"windows_figure draws one worker count and one window size, got {settings.rows()}")
    workers, size = (to_int(value) for value in settings.row(0))
    rows = rows.sort("window")
    fig, axes = plt.subplots(
        len(WINDOW_METRICS), 1, figsize=(9, 3 * len(WINDOW_METRICS)), sharex=True, layout="constrained"
    )
    for ax, (metric, label) in zip(axes, WINDOW_METRICS.items(), strict=True):
        for (grouper,), part in rows.group_by("grouper", maintain_order=True):
            ax.plot(part["window"], part[metric], label=grouper, linewidth=1, markersize=3, **style[grouper])
        _scale_y(ax, metric, rows.get_column(metric))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("window")
    axes[-1].xaxis.set_major_locator(_integer_ticks())
    fig.suptitle(f"per window of {size:,} tuples, {workers} workers: {dataset}", fontsize=10)
    _legend_outside(fig, style)
    return fig


def trend_figure(rows: pl.DataFrame, x: str, xlabel: str, title: str, style: dict[str, dict[str, Any]]) -> Figure:
    """Every metric of :data:`TREND_METRICS` against ``x``, one line per grouper; worker
    counts on a log axis, since sweeps double them."""
    plt = _pyplot()
    metrics = [m for m in TREND_METRICS if not rows.get_column(m).is_null().all()]
    lines, columns = _grid(len(metrics), 2)
    fig, axes = plt.subplots(lines, columns, figsize=(5.5 * columns, 3 * lines), squeeze=False, layout="constrained")
    flat = list(axes.flat)
    values = rows.get_column(x).unique().sort().to_list()
    for ax, metric in zip(flat, metrics, strict=False):
        for (grouper,), part in rows.sort(x, maintain_order=True).group_by("grouper", maintain_order=True):
            ax.plot(part[x], part[metric], label=grouper, linewidth=1, markersize=4, **style[grouper])
        if x == "workers":
            ax.set_xscale("log", base=2)
        _ticks_at(ax, values)
        _scale_y(ax, metric, rows.get_column(metric))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(TREND_METRICS[metric])
        ax.grid(alpha=0.3)
    for ax in flat[len(metrics) :]:
        ax.remove()
    fig.suptitle(title, fontsize=10)
    if "hybrid_imbalance" in metrics:
        # The name alone is not defined anywhere a reader of the chart would look.
        width = int(fig.get_figwidth() * 13)
        fig.supxlabel(textwrap.fill(HYBRID_IMBALANCE_DEFINITION, width=width), fontsize=7, color="dimgrey")
    _legend_outside(fig, style)
    return fig


def _html_table(rows: pl.DataFrame) -> str:
    columns = ["dataset", "workers", "window_tuples", "grouper", *TABLE_COLUMNS]
    rows = rows.select(c for c in columns if c in rows.columns and not rows.get_column(c).is_null().all())

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        return html.escape("" if value is None else str(value))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows.iter_rows())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _results(results: pl.DataFrame | str | Path) -> pl.DataFrame:
    frame = results if isinstance(results, pl.DataFrame) else read_results(str(results))
    if frame.height == 0:
        raise ValueError("the results are empty: nothing to plot")
    missing = {
        "dataset",
        "grouper",
        "workers",
        "window",
        "window_tuples",
        "load_imbalance",
        "replication_factor",
        "worker_loads",
    } - set(frame.columns)
    if missing:
        raise ValueError(f"not a keysplit simulate results table: missing columns {sorted(missing)}")
    return frame


def figures(results: pl.DataFrame | str | Path) -> Iterator[tuple[str, str, Figure]]:
    """Every chart of the results as (report section, file name, figure), in report order;
    the caller closes the figures (:func:`plot` saves them). A skew sweep's trends come
    first: they sum up all its datasets."""
    frame = _results(results)
    style = _style(frame.get_column("grouper").unique(maintain_order=True).to_list())
    whole = frame.filter(pl.col("window").is_null())
    skewed = _one_window_setting(whole.filter(pl.col("z").is_not_null())) if "z" in whole.columns else whole.clear()
    skewed = skewed.with_columns(pl.col("dataset").map_elements(_family, return_dtype=pl.String).alias("family"))
    skewed = skewed.filter(pl.col("z").n_unique().over("family") > 1)

    family_names = file_names(skewed.get_column("family").sort())
    for (family, workers), rows in skewed.sort("family", "workers").group_by("family", "workers", maintain_order=True):
        yield (
            f"{family}, {workers} workers, as skew grows",
            f"trend-skew-{family_names[family]}-n{workers}.png",
            trend_figure(rows, "z", "Zipf exponent z", f"metrics as skew grows: {family}, {workers} workers", style),
        )

    dataset_names = file_names(frame.get_column("dataset").unique().sort())
    for (dataset,), rows in whole.group_by("dataset", maintain_order=True):
        rows = _one_window_setting(rows)
        name = dataset_names[dataset]
        yield dataset, f"pareto-{name}.png", pareto_figure(rows, dataset, style)
        yield dataset, f"loads-{name}.png", loads_figure(rows, dataset, style)
        windowed = frame.filter(pl.col("dataset") == dataset, pl.col("window").is_not_null())
        for (workers, size), part in windowed.sort("workers", "window_tuples").group_by(
            "workers", "window_tuples", maintain_order=True
        ):
            yield dataset, f"windows-{name}-n{workers}-w{size}.png", windows_figure(part, dataset, style)
        # A dataset of a skew sweep has its points in the skew trends already, one chart
        # per worker count: drawn again against workers, they doubled the report.
        if rows.get_column("workers").n_unique() > 1 and dataset not in skewed.get_column("dataset"):
            yield (
                dataset,
                f"trend-workers-{name}.png",
                trend_figure(rows, "workers", "workers", f"metrics as workers grow: {dataset}", style),
            )


def plot(results: pl.DataFrame | str | Path, out: str | Path) -> list[Path]:
    """Draws every chart of the module into ``out`` and returns the paths, report last."""
    frame = _results(results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sections: dict[str, list[Path]] = {}
    for section, name, figure in figures(frame):
        sections.setdefault(section, []).append(_save(figure, out / name))
    report = out / "report.html"
    report.write_text(_report(frame.filter(pl.col("window").is_null()), list(sections.items())), encoding="utf-8")
    return [path for charts in sections.values() for path in charts] + [report]


def _summary(whole: pl.DataFrame) -> str:
    """A table, one line per (dataset, workers): the grouper with the least λ, and the one
    with the least γ among those within 5 % load imbalance; each dataset named once, since
    a sweep's names are long and alike."""

    def pick(row: dict[str, Any]) -> str:
        return (
            f"<code>{html.escape(row['grouper'])}</code> λ {row['load_imbalance']:.3g}, "
            f"γ {row['replication_factor']:.3g}"
        )

    lines = []
    for (dataset,), rows in whole.sort("dataset", "workers").group_by("dataset", maintain_order=True):
        rows = _one_window_setting(rows)
        name = f"<th rowspan='{rows.get_column('workers').n_unique()}'>{html.escape(str(dataset))}</th>"
        for (workers,), part in rows.group_by("workers", maintain_order=True):
            best = part.sort("load_imbalance", "replication_factor").row(0, named=True)
            balanced = part.filter(pl.col("load_imbalance") <= 0.05).sort("replication_factor", "load_imbalance")
            least_gamma = pick(balanced.row(0, named=True)) if balanced.height else "none"
            lines.append(f"<tr>{name}<td>{workers}</td><td>{pick(best)}</td><td>{least_gamma}</td></tr>")
            name = ""
    return (
        "<table class='summary'><thead><tr><th>dataset</th><th>workers</th><th>least λ</th>"
        "<th>least γ within λ ≤ 0.05</th></tr></thead><tbody>" + "".join(lines) + "</tbody></table>"
    )


def _report(whole: pl.DataFrame, sections: list[tuple[str, list[Path]]]) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>keysplit simulation report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:right}th{background:#eee}img{max-width:100%;display:block;margin:1em 0}"
        "details{margin:1em 0}summary{cursor:pointer;font-weight:bold}"
        ".summary td,.summary th{text-align:left}"
        ".wide{overflow-x:auto}</style>",
        "</head><body><h1>keysplit simulation report</h1>",
        "<p>λ = (max load − mean load) / mean load; γ = workers per distinct key; Γ = Σ distinct "
        "keys per worker; ψ = tuples of state moved between windows; "
        f"{html.escape(HYBRID_IMBALANCE_DEFINITION)}. Metrics as in <code>keysplit.metrics</code>.</p>",
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
