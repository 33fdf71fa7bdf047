"""Which grouper for my stream? :func:`recommend` routes a sample of the user's own keys
through every grouper and picks one under a stated cost model.

The cost model is the holistic paper's weighting of imbalance against aggregation cost
(Katsipoulakis, Labrinidis and Chrysanthis, PVLDB 2017, Eq. 7–9), applied to groupers
instead of workers: each grouper's load imbalance ``λ`` and aggregation cost ``Γ`` (the
partial results a merge reads) are min-max scaled over the groupers compared, and

    cost = weight · λ̂ + (1 − weight) · Γ̂

``weight = 1`` asks for balance alone (a straggler costs most: grouped maps, joins),
``weight = 0`` for the least merging (cheap aggregates); the default 0.5 is the paper's
``p``. Only groupers on the λ–γ Pareto front can be recommended: any other one is beaten
on both. The table also shows ``γ*``, the offline bound (:func:`keysplit.metrics.replication_bound`):
how close each grouper comes to the replication that perfect balance forces.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._checks import require_count, require_fraction, require_workers
from keysplit._errors import ConfigError, KeyInputError, KeyTypeError
from keysplit._grouper import NullPolicy, groupers
from keysplit._numbers import to_float
from keysplit.datasets import DEFAULT_BATCH_ROWS
from keysplit.datasets.files import from_file
from keysplit.simulate import Dataset, simulate

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

#: The columns of :attr:`Recommendation.table`, in order.
TABLE_COLUMNS = (
    "grouper",
    "load_imbalance",
    "replication_factor",
    "replication_bound",
    "aggregation_cost",
    "ns_per_tuple",
    "state_bytes",
    "pareto",
    "cost",
    "recommended",
)

DEFAULT_WEIGHT = 0.5
#: Rows of the sample that :func:`recommend` routes unless told otherwise: every grouper
#: keeps state per key, so memory grows with the sample's distinct keys (10^7 distinct keys
#: took 5.8 GB and 15 minutes); the first million rows rank the groupers as the whole does
#: wherever the stream is stationary, and in a few seconds.
DEFAULT_MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class Recommendation:
    """What :func:`recommend` found: ``grouper`` is the pick, ``table`` one row per grouper
    by increasing cost (``grouper``, ``load_imbalance``, ``replication_factor``,
    ``replication_bound``, ``aggregation_cost``, ``ns_per_tuple``, ``state_bytes``,
    ``pareto``, ``cost``, ``recommended``), ``results`` the full rows of
    :func:`keysplit.simulate.simulate` for charts and reports."""

    grouper: str
    workers: int
    weight: float
    tuples: int
    keys: int
    table: pl.DataFrame
    results: pl.DataFrame

    def chart(self, path: str | Path) -> Path:
        """Writes the λ-against-γ chart (the Pareto front dashed, the offline bound γ*
        dotted) to the PNG ``path``."""
        from keysplit.plots import pareto_chart  # noqa: PLC0415 - matplotlib is slow to import

        return pareto_chart(self.results, Path(path), title=f"recommended: {self.grouper}")

    def __repr__(self) -> str:
        row = self.table.filter(pl.col("recommended")).row(0, named=True)
        return (
            f"Recommendation(grouper={self.grouper!r}, workers={self.workers}, weight={self.weight}, "
            f"λ={row['load_imbalance']:.4f}, γ={row['replication_factor']:.4f}, γ*={row['replication_bound']:.4f}, "
            f"tuples={self.tuples:,}, keys={self.keys:,})"
        )


def _key_name(columns: list[str], key: str | None) -> str:
    """The sample's key column among ``columns``: ``key``, or the only column."""
    if key is None:
        if len(columns) != 1:
            raise KeyInputError(f"the sample has {len(columns)} columns {columns}: name the key column with key=")
        return columns[0]
    if key not in columns:
        raise KeyInputError(f"the sample has no column {key!r}; its columns: {columns}")
    return key


def _key_column(frame: pl.DataFrame, key: str | None) -> pl.Series:
    return frame.get_column(_key_name(frame.columns, key))


def _sample_keys(sample: Any, key: str | None) -> pl.Series:
    """The sample's keys as one Polars column, from any input :func:`recommend` takes."""
    if isinstance(sample, pl.Series):
        return sample
    if isinstance(sample, pl.LazyFrame):
        return sample.select(_key_name(sample.collect_schema().names(), key)).collect().to_series()
    if isinstance(sample, pl.DataFrame):
        return _key_column(sample, key)
    module = type(sample).__module__.partition(".")[0]
    converted: pl.DataFrame | pl.Series
    if module == "pandas":
        converted = pl.from_pandas(sample)
        return converted if isinstance(converted, pl.Series) else _key_column(converted, key)
    if module == "pyarrow" or hasattr(sample, "__arrow_c_stream__") or hasattr(sample, "__arrow_c_array__"):
        converted = pl.from_arrow(sample)
        return converted if isinstance(converted, pl.Series) else _key_column(converted, key)
    if isinstance(sample, (list, tuple)) or module == "numpy":
        return pl.Series("key", sample)
    raise KeyTypeError(
        f"recommend takes a Polars/pandas/Arrow column or frame, a list or a file path, not {type(sample).__name__}"
    )


def _first_rows(batches: Iterator[pl.DataFrame], rows: int) -> Iterator[pl.DataFrame]:
    for batch in batches:
        if rows <= 0:
            return
        yield batch.head(rows)
        rows -= batch.height


def _dataset(sample: Any, key: str | None, batch_rows: int, max_rows: int) -> Dataset:
    if isinstance(sample, (str, Path)):
        path = Path(sample)

        def open_file() -> Iterator[pl.DataFrame]:
            return _first_rows(from_file(path, key=key, batch_rows=batch_rows), max_rows)

        open_file()  # names a missing file or column before any routing
        return Dataset(path.name, open_file)
    keys = _sample_keys(sample, key).rename("key").head(max_rows)

    def open_keys() -> Iterator[pl.DataFrame]:
        frame = keys.to_frame()
        return iter(frame.iter_slices(batch_rows))

    return Dataset("sample", open_keys, keys.len())


def _scaled(column: str) -> pl.Expr:
    """Min-max scaled to [0, 1] over the groupers (holistic paper, Eq. 7–8); 0 when all
    are equal."""
    spread = pl.col(column).max() - pl.col(column).min()
    return pl.when(spread > 0).then((pl.col(column) - pl.col(column).min()) / spread).otherwise(0.0)


def _pareto(frame: pl.DataFrame) -> pl.Series:
    """Whether no other grouper is at least as good on both λ and γ and better on one."""
    points = list(zip(frame["load_imbalance"].to_list(), frame["replication_factor"].to_list(), strict=True))
    return pl.Series(
        "pareto",
        [
            not any((lam2 <= lam and gamma2 <= gamma) and (lam2 < lam or gamma2 < gamma) for lam2, gamma2 in points)
            for lam, gamma in points
        ],
    )


def rank(results: pl.DataFrame, *, weight: float = DEFAULT_WEIGHT) -> pl.DataFrame:
    """:data:`TABLE_COLUMNS` from whole-stream rows of one dataset and worker count, by
    increasing cost; the recommended grouper is the Pareto-front grouper of least cost (the
    first in registry order on ties)."""
    weight = require_fraction(weight, "weight")
    whole = results.filter(pl.col("window").is_null())
    if whole.select(pl.col("dataset").n_unique(), pl.col("workers").n_unique()).row(0) != (1, 1):
        raise ConfigError("rank compares the groupers on one dataset and one worker count")
    table = (
        whole.select(TABLE_COLUMNS[:7])
        .with_columns(_pareto(whole))
        .with_columns((weight * _scaled("load_imbalance") + (1.0 - weight) * _scaled("aggregation_cost")).alias("cost"))
        .with_row_index("order")
    )
    best = table.filter(pl.col("pareto")).sort("cost", "order").get_column("grouper")[0]
    return (
        table.with_columns((pl.col("grouper") == best).alias("recommended")).sort("cost", "order").select(TABLE_COLUMNS)
    )


def recommend(
    sample: Any,
    *,
    workers: int,
    key: str | None = None,
    candidates: Sequence[str] | None = None,
    weight: float = DEFAULT_WEIGHT,
    seed: int = 0,
    nulls: NullPolicy = "raise",
    progress: bool | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> Recommendation:
    """Routes ``sample`` through every grouper (or ``candidates``: names, optionally with
    parameters as in :func:`keysplit.simulate.simulate`) over ``workers`` workers and
    recommends one.

    ``sample`` is a column of keys in stream order (Polars, pandas or Arrow, a list, a NumPy
    array), a frame with its ``key`` column, or the path of a Parquet, CSV, TSV or text file
    (:func:`keysplit.datasets.from_file`). Take the sample in arrival order: bursts and
    drift are part of what decides. ``weight`` sets the cost model (module documentation);
    ``progress`` shows a bar on stderr (default: when stderr is a terminal).

    Only the first ``max_rows`` rows are routed (a million by default): the groupers'
    state, and so the memory taken, grows with the distinct keys routed. ``tuples`` of the
    result says how many were.
    """
    workers = require_workers(workers)
    weight = require_fraction(weight, "weight")
    require_count(batch_rows, "batch_rows", minimum=1)
    require_count(max_rows, "max_rows", minimum=1)
    names = list(candidates) if candidates is not None else [info.name for info in groupers()]
    if not names:
        raise ConfigError("recommend needs at least one candidate grouper")
    data = _dataset(sample, key, batch_rows, max_rows)
    results = simulate(groupers=names, workers=[workers], datasets=[data], seed=seed, progress=progress, nulls=nulls)
    table = rank(results, weight=weight)
    whole = results.filter(pl.col("window").is_null()).row(0, named=True)
    return Recommendation(
        grouper=table.filter(pl.col("recommended")).get_column("grouper")[0],
        workers=workers,
        weight=weight,
        tuples=int(whole["tuples"]),
        keys=int(whole["keys"]),
        table=table,
        results=results,
    )


def describe(recommendation: Recommendation) -> str:
    """The cost model and the pick in one sentence, for the CLI."""
    row = recommendation.table.filter(pl.col("recommended")).row(0, named=True)
    return (
        f"recommended: {recommendation.grouper} (λ {to_float(row['load_imbalance']):.4f}, "
        f"γ {to_float(row['replication_factor']):.4f}, offline bound γ* {to_float(row['replication_bound']):.4f}) "
        f"for {recommendation.workers} workers: the Pareto-front grouper of least "
        f"{recommendation.weight:g}·λ̂ + {1 - recommendation.weight:g}·Γ̂ (λ and aggregation cost Γ min-max "
        "scaled over the groupers, as the holistic paper's Eq. 7–9)"
    )
