"""Load, replication and aggregation metrics, as ``docs/baselines.md`` (section "Metrics") defines them.

Every metric takes routed tuples as Polars data: a worker column, and a key column where
the metric needs keys. Workers that received nothing count, with load 0. The same
definitions serve a whole frame (:func:`summarize`) and a stream read batch by batch
(:class:`StreamingMetrics`), per window and over the whole stream.

=============================  ==========================================================
metric (column)                definition
=============================  ==========================================================
``load_imbalance``             ``λ = (max_w L_w − mean L) / mean L`` (FlexD, Pd-Stream's LI)
``absolute_imbalance``         ``max_w L_w − mean L`` (the holistic paper's imbalance)
``load_stddev``                ``sqrt(Σ_w (L_w − mean L)² / n)`` (Dynamic Key Grouping, Eq. 7)
``load_variance``              ``var(L) = Σ_w (L_w − mean L)² / n`` (ELB/CLB, Eq. 1)
``replication_factor``         ``γ = Σ_k |W^k| / K`` (Pd-Stream's RF, DKG's DistCost)
``replication_bound``          ``γ* = Σ_k max(1, ⌈p_k·n⌉) / K``: the least γ of any routing with
                               ``λ = 0``, ``p_k`` the share of key ``k`` (keysplit's own)
``aggregation_cost``           ``Γ = Σ_w CL_w``, ``CL_w`` = distinct keys at ``w`` (holistic, Eq. 2)
``cardinality_imbalance``      ``CI = max_w CL_w − mean CL`` (holistic, Eq. 6)
``hybrid_imbalance``           ``HI = max_w H_w − mean H`` (holistic, Eq. 7–10, ``p = 0.5``)
``state_moved``                ``ψ`` observed between consecutive windows (ELB/CLB, Eq. 2)
=============================  ==========================================================

``state_moved`` is read off the routing, not asked of the grouper: entering window ``t``,
a key that was sent to worker ``w`` in window ``t − 1`` and arrives again, but no longer at
``w``, moves the state that its ``t − 1`` tuples built at ``w``. For a grouper that keeps a
key on one worker per window this is exactly the paper's ``Σ_i x_i·d_i`` with
``d_i`` = the tuples of the previous window, over the keys that arrive in both windows.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import polars as pl

from keysplit._checks import require_fraction, require_workers
from keysplit._numbers import to_float, to_int

if TYPE_CHECKING:
    from collections.abc import Iterable

#: LM's and the hybrid imbalance's weight of tuples against distinct keys (holistic paper, §5).
DEFAULT_HYBRID_WEIGHT = 0.5

_COUNTS = ("tuples", "keys", "max_load", "aggregation_cost", "state_moved")

#: The columns of :func:`summarize` and :meth:`StreamingMetrics.summary`, in order.
SUMMARY_COLUMNS = (
    "window",
    "tuples",
    "keys",
    "max_load",
    "load_imbalance",
    "absolute_imbalance",
    "load_stddev",
    "load_variance",
    "replication_factor",
    "replication_bound",
    "aggregation_cost",
    "cardinality_imbalance",
    "hybrid_imbalance",
    "state_moved",
)


def _as_lazy(frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    if isinstance(frame, pl.DataFrame):
        return frame.lazy()
    if isinstance(frame, pl.LazyFrame):
        return frame
    raise TypeError(f"expected a Polars DataFrame or LazyFrame, got {type(frame).__name__}")


#: How the hybrid weight is named in messages.
_HYBRID_WEIGHT = "the hybrid weight p"


def _require_columns(schema: pl.Schema, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in schema]
    if missing:
        raise ValueError(f"columns {missing} are not in the frame; columns: {list(schema)}")


def _check_worker_ids(pairs: pl.DataFrame, workers: int) -> None:
    """Refuses null or out-of-range worker ids: they would silently drop tuples."""
    worker = pairs.get_column("worker")
    if worker.null_count():
        raise ValueError(f"{worker.null_count()} routed rows have a null worker id")
    if pairs.height and (to_int(worker.min()) < 0 or to_int(worker.max()) >= workers):
        bad = worker.filter((worker < 0) | (worker >= workers)).unique().sort().to_list()
        raise ValueError(f"worker ids {bad} are outside 0..{workers - 1}")


def _pairs(frame: pl.DataFrame | pl.LazyFrame, *, key: str | None, worker: str, window: str | None) -> pl.DataFrame:
    """Tuples per (window, worker, key): everything every metric needs, and no more.

    Missing key or window columns become one constant group, so that the load-only metrics
    work on frames without keys.
    """
    lazy = _as_lazy(frame)
    _require_columns(lazy.collect_schema(), [c for c in (key, worker, window) if c is not None])
    if window is not None:
        nulls = lazy.select(pl.col(window).null_count()).collect().item()
        if nulls:
            raise ValueError(f"{nulls} rows have a null {window!r} window")
    pairs = (
        lazy.select(
            (pl.col(window) if window is not None else pl.lit(0)).alias("window"),
            pl.col(worker).cast(pl.Int64).alias("worker"),
            (pl.col(key) if key is not None else pl.lit(0)).alias("key"),
        )
        .group_by("window", "worker", "key")
        .agg(pl.len().cast(pl.UInt64).alias("tuples"))
        .collect()
    )
    return pairs


def _hybrid(column: str, other: str, p: float) -> pl.Expr:
    """Eq. 7–9: loads and cardinalities each min-max scaled to [0, 1], then weighted."""

    def scaled(c: str) -> pl.Expr:
        spread = pl.col(c).max() - pl.col(c).min()
        return pl.when(spread > 0).then((pl.col(c) - pl.col(c).min()) / spread).otherwise(0.0)

    return p * scaled(column) + (1.0 - p) * scaled(other)


def _per_window(pairs: pl.DataFrame, workers: int, p: float) -> pl.DataFrame:
    """One row of every metric but ``state_moved`` per window of ``pairs``."""
    _check_worker_ids(pairs, workers)
    per_worker = pairs.group_by("window", "worker").agg(
        pl.col("tuples").sum().cast(pl.Float64).alias("load"),
        pl.len().cast(pl.Float64).alias("cardinality"),
    )
    # Idle workers have load 0 and count towards every mean.
    grid = pairs.select(pl.col("window").unique()).join(
        pl.DataFrame({"worker": range(workers)}, schema={"worker": pl.Int64}), how="cross"
    )
    per_worker = grid.join(per_worker, on=["window", "worker"], how="left").with_columns(
        pl.col("load", "cardinality").fill_null(0.0)
    )
    mean_load = pl.col("load").mean()
    mean_cardinality = pl.col("cardinality").mean()
    hybrid = _hybrid("load", "cardinality", p)
    by_worker = per_worker.group_by("window").agg(
        pl.col("load").sum().cast(pl.UInt64).alias("tuples"),
        pl.col("load").max().cast(pl.UInt64).alias("max_load"),
        pl.when(mean_load > 0)
        .then((pl.col("load").max() - mean_load) / mean_load)
        .otherwise(0.0)
        .alias("load_imbalance"),
        (pl.col("load").max() - mean_load).alias("absolute_imbalance"),
        pl.col("load").std(ddof=0).alias("load_stddev"),
        pl.col("load").var(ddof=0).alias("load_variance"),
        pl.col("cardinality").sum().cast(pl.UInt64).alias("aggregation_cost"),
        (pl.col("cardinality").max() - mean_cardinality).alias("cardinality_imbalance"),
        (hybrid.max() - hybrid.mean()).alias("hybrid_imbalance"),
    )
    by_key = (
        pairs.group_by("window", "key")
        .agg(pl.col("tuples").sum().cast(pl.Int64).alias("count"))
        .group_by("window")
        .agg(
            pl.len().cast(pl.UInt64).alias("keys"),
            _workers_needed(pl.col("count"), pl.col("count").sum(), workers).sum().alias("needed"),
        )
    )
    return (
        by_worker.join(by_key, on="window")
        .with_columns((pl.col("needed") / pl.col("keys")).alias("replication_bound"))
        .drop("needed")
        .with_columns(
            pl.when(pl.col("keys") > 0)
            .then(pl.col("aggregation_cost") / pl.col("keys"))
            .otherwise(0.0)
            .alias("replication_factor")
        )
    )


def _workers_needed(count: pl.Expr, total: pl.Expr, workers: int) -> pl.Expr:
    """``max(1, ⌈count·n / total⌉)``, in integers: the workers a key of ``count`` tuples
    needs for perfect balance."""
    return ((count * workers + total - 1) // total).clip(lower_bound=1)


def _state_moved(previous: pl.DataFrame, current: pl.DataFrame) -> int:
    """``ψ`` entering ``current`` from ``previous`` (both: worker, key, tuples)."""
    arriving = current.select("key").unique()
    left_behind = previous.join(arriving, on="key", how="semi").join(
        current.select("key", "worker"), on=["key", "worker"], how="anti"
    )
    return int(left_behind.get_column("tuples").sum())


def _empty_summary() -> pl.DataFrame:
    return pl.DataFrame(schema={c: pl.UInt64 if c in _COUNTS else pl.Float64 for c in SUMMARY_COLUMNS})


def _finish(rows: pl.DataFrame, overall: pl.DataFrame, windowed: bool) -> pl.DataFrame:
    """Window rows in window order, then the overall row (``window`` null)."""
    if not windowed:
        return overall.with_columns(pl.lit(None).alias("window"), pl.lit(None, pl.UInt64).alias("state_moved")).select(
            SUMMARY_COLUMNS
        )
    overall = overall.with_columns(
        pl.lit(None, rows.schema["window"]).alias("window"),
        pl.lit(rows.get_column("state_moved").sum(), pl.UInt64).alias("state_moved"),
    )
    return pl.concat([rows.sort("window").select(SUMMARY_COLUMNS), overall.select(SUMMARY_COLUMNS)])


def summarize(
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    workers: int,
    key: str = "key",
    worker: str = "worker",
    window: str | None = None,
    p: float = DEFAULT_HYBRID_WEIGHT,
) -> pl.DataFrame:
    """Every metric of the module, one row per window (in window order) and one overall.

    Without ``window`` there is only the overall row. The overall row has ``window`` null
    and its ``state_moved`` is the sum over windows. Window ids must be orderable; the
    stream's windows are taken in that order for ``state_moved``.
    """
    workers = require_workers(workers)
    p = require_fraction(p, _HYBRID_WEIGHT)
    pairs = _pairs(frame, key=key, worker=worker, window=window)
    if pairs.height == 0:
        return _empty_summary()
    whole = pairs.group_by("worker", "key").agg(pl.col("tuples").sum()).with_columns(window=pl.lit(0))
    overall = _per_window(whole.select("window", "worker", "key", "tuples"), workers, p)
    if window is None:
        return _finish(overall, overall, windowed=False)
    rows = _per_window(pairs, workers, p)
    by_window = {w: part for (w,), part in pairs.partition_by("window", as_dict=True).items()}
    order = sorted(by_window)
    moved = [0] + [
        _state_moved(by_window[before], by_window[after]) for before, after in zip(order, order[1:], strict=False)
    ]
    rows = rows.join(
        pl.DataFrame({"window": order, "state_moved": moved}, schema_overrides={"state_moved": pl.UInt64}),
        on="window",
    )
    return _finish(rows, overall, windowed=True)


class StreamingMetrics:
    """:func:`summarize` over a stream of routed batches, in memory bounded by its pairs.

    Feed batches in arrival order with :meth:`update`; window ids must not decrease from
    one row to the next. Memory holds the distinct (worker, key) pairs of the open window,
    of the previous one (for ``state_moved``) and of the whole stream, never the tuples.
    """

    def __init__(
        self,
        workers: int,
        *,
        key: str = "key",
        worker: str = "worker",
        window: str | None = None,
        p: float = DEFAULT_HYBRID_WEIGHT,
    ) -> None:
        self._workers = require_workers(workers)
        self._p = require_fraction(p, _HYBRID_WEIGHT)
        self._key, self._worker, self._window = key, worker, window
        self._open: list[pl.DataFrame] = []
        self._open_window: object = None
        self._previous: pl.DataFrame | None = None
        self._whole: pl.DataFrame | None = None
        self._rows: list[pl.DataFrame] = []
        self._open_rows = 0

    def update(self, batch: pl.DataFrame | pl.LazyFrame) -> None:
        """Adds one routed batch (its rows after every row seen so far)."""
        pairs = _pairs(batch, key=self._key, worker=self._worker, window=self._window)
        if pairs.height == 0:
            return
        _check_worker_ids(pairs, self._workers)
        if self._window is not None:
            column = _as_lazy(batch).select(pl.col(self._window)).collect().to_series()
            if column.len() > 1 and not column.is_sorted():
                raise ValueError(f"window ids in {self._window!r} decrease within a batch")
            first = column[0]
            if self._open_window is not None and first < self._open_window:
                raise ValueError(
                    f"window {first!r} arrives after window {self._open_window!r}; windows must not decrease"
                )
        for window_id, part in sorted(pairs.partition_by("window", as_dict=True).items()):
            (window_id,) = window_id
            if self._open and window_id != self._open_window:
                self._close()
            self._open_window = window_id
            self._open.append(part)
            self._open_rows += part.height
            # Re-aggregating keeps the open window's memory at its distinct pairs.
            if self._open_rows > 4 * 1_048_576:
                self._compact()

    def _compact(self) -> None:
        merged = pl.concat(self._open).group_by("window", "worker", "key").agg(pl.col("tuples").sum())
        self._open = [merged]
        self._open_rows = merged.height

    def _close(self) -> None:
        self._compact()
        (pairs,) = self._open
        row = _per_window(pairs, self._workers, self._p)
        moved = 0 if self._previous is None else _state_moved(self._previous, pairs)
        self._rows.append(row.with_columns(pl.lit(moved, pl.UInt64).alias("state_moved")))
        whole = pairs.drop("window")
        if self._whole is not None:
            whole = pl.concat([self._whole, whole]).group_by("worker", "key").agg(pl.col("tuples").sum())
        self._whole = whole
        self._previous = pairs.drop("window")
        self._open = []
        self._open_rows = 0

    def summary(self) -> pl.DataFrame:
        """The metrics so far, as :func:`summarize` gives them; the open window counts as closed."""
        if self._open:
            self._close()
        if self._whole is None:
            return _empty_summary()
        whole = self._whole.with_columns(window=pl.lit(0)).select("window", "worker", "key", "tuples")
        overall = _per_window(whole, self._workers, self._p)
        if self._window is None:
            return _finish(overall, overall, windowed=False)
        return _finish(pl.concat(self._rows), overall, windowed=True)


def worker_loads(frame: pl.DataFrame | pl.LazyFrame, *, workers: int, worker: str = "worker") -> pl.Series:
    """``L_w``: tuples per worker, for every worker ``0 .. workers-1`` (uint64)."""
    workers = require_workers(workers)
    pairs = _pairs(frame, key=None, worker=worker, window=None)
    _check_worker_ids(pairs, workers)
    loads = [0] * workers
    for w, tuples in pairs.select("worker", "tuples").iter_rows():
        loads[w] = tuples
    return pl.Series("tuples", loads, dtype=pl.UInt64)


def worker_cardinalities(
    frame: pl.DataFrame | pl.LazyFrame, *, workers: int, key: str = "key", worker: str = "worker"
) -> pl.Series:
    """``CL_w``: distinct keys per worker, for every worker ``0 .. workers-1`` (uint64)."""
    workers = require_workers(workers)
    pairs = _pairs(frame, key=key, worker=worker, window=None)
    _check_worker_ids(pairs, workers)
    cardinalities = [0] * workers
    for w, keys in pairs.group_by("worker").len().iter_rows():
        cardinalities[w] = keys
    return pl.Series("keys", cardinalities, dtype=pl.UInt64)


def _values(series: pl.Series, what: str) -> list[float]:
    if not isinstance(series, pl.Series):
        raise TypeError(f"{what} must be a Polars Series, got {type(series).__name__}")
    if series.null_count():
        raise ValueError(f"{what} contain nulls")
    return [float(v) for v in series.cast(pl.Float64)]


def load_imbalance(loads: pl.Series) -> float:
    """``λ = (max_w L_w − mean L) / mean L``, FlexD's and Pd-Stream's definition; 0 for no load."""
    values = _values(loads, "loads")
    mean = sum(values) / len(values) if values else 0.0
    return (max(values) - mean) / mean if mean else 0.0


def absolute_imbalance(loads: pl.Series) -> float:
    """``max_w L_w − mean L``: the holistic paper's imbalance (Eq. 6 when given cardinalities)."""
    values = _values(loads, "loads")
    return max(values) - sum(values) / len(values) if values else 0.0


def cardinality_imbalance(cardinalities: pl.Series) -> float:
    """``CI = max_w CL_w − mean CL`` (holistic paper, Eq. 6)."""
    return absolute_imbalance(cardinalities)


def load_variance(loads: pl.Series) -> float:
    """``var(L) = Σ_w (L_w − mean L)² / n``: the ELB/CLB paper's imbalance (Eq. 1)."""
    values = _values(loads, "loads")
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


def load_stddev(loads: pl.Series) -> float:
    """``sqrt(var(L))``, Dynamic Key Grouping's StdDev (Eq. 7), over ``n`` not ``n − 1``."""
    return math.sqrt(load_variance(loads))


def hybrid_imbalance(loads: pl.Series, cardinalities: pl.Series, p: float = DEFAULT_HYBRID_WEIGHT) -> float:
    """``HI = max_w H_w − mean H`` with ``H_w = p·L'_w + (1 − p)·CL'_w`` (holistic, Eq. 7–10).

    ``L'`` and ``CL'`` are min-max scaled to [0, 1]; a vector whose entries are all equal
    scales to 0 (the paper divides by zero there).
    """
    p = require_fraction(p, _HYBRID_WEIGHT)
    if len(loads) != len(cardinalities):
        raise ValueError(f"{len(loads)} loads but {len(cardinalities)} cardinalities")
    frame = pl.DataFrame(
        {"load": _values(loads, "loads"), "cardinality": _values(cardinalities, "cardinalities")},
        schema={"load": pl.Float64, "cardinality": pl.Float64},
    )
    if frame.height == 0:
        return 0.0
    hybrid = frame.select(_hybrid("load", "cardinality", p).alias("h")).get_column("h")
    return to_float(hybrid.max()) - to_float(hybrid.mean())


def replication_factor(frame: pl.DataFrame | pl.LazyFrame, *, key: str = "key", worker: str = "worker") -> float:
    """``γ = Σ_k |W^k| / K``: workers per distinct key (Pd-Stream's RF, DKG's DistCost)."""
    pairs = _pairs(frame, key=key, worker=worker, window=None)
    keys = pairs.get_column("key").n_unique()
    return pairs.height / keys if keys else 0.0


def replication_bound(frame: pl.DataFrame | pl.LazyFrame, *, workers: int, key: str = "key") -> float:
    """``γ* = Σ_k max(1, ⌈p_k·n⌉) / K``: the least replication of any routing of the stream
    over ``workers`` workers with perfect balance (``λ = 0``), ``p_k`` the share of key ``k``.

    A key with more than ``1/n`` of the tuples must be split over at least ``⌈p_k·n⌉``
    workers, and every other key can stay on one; the bound is offline (it knows the
    shares in advance), so an online grouper can only approach it from above.
    """
    lazy = _as_lazy(frame)
    _require_columns(lazy.collect_schema(), [key])
    counts = lazy.group_by(key).agg(pl.len().alias("count")).collect().get_column("count")
    return replication_bound_of_counts(counts, workers=workers)


def replication_bound_of_counts(counts: pl.Series, *, workers: int) -> float:
    """:func:`replication_bound` of a stream given by its tuples per key."""
    workers = require_workers(workers)
    if counts.len() == 0:
        return 0.0
    count = pl.col("count").cast(pl.Int64)
    row = pl.DataFrame({"count": counts}).select(_workers_needed(count, count.sum(), workers).sum())
    return to_int(row.item()) / counts.len()


def aggregation_cost(frame: pl.DataFrame | pl.LazyFrame, *, key: str = "key", worker: str = "worker") -> int:
    """``Γ = Σ_w`` (distinct keys at ``w``): the partial results to merge (holistic, Eq. 2)."""
    return _pairs(frame, key=key, worker=worker, window=None).height
