"""Load and replication metrics, with the definitions of ``spec/baselines.md``.

Each function takes routed tuples as Polars data: a worker column, and a key column where
the metric needs keys. Workers that received nothing count, with load 0.
"""

from __future__ import annotations

import polars as pl


def _as_lazy(frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    if isinstance(frame, pl.DataFrame):
        return frame.lazy()
    if isinstance(frame, pl.LazyFrame):
        return frame
    raise TypeError(f"expected a Polars DataFrame or LazyFrame, got {type(frame).__name__}")


def worker_loads(
    frame: pl.DataFrame | pl.LazyFrame, *, workers: int, worker: str = "worker"
) -> pl.Series:
    """``L_w``: tuples per worker, for every worker ``0 .. workers-1`` (uint64)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    counts = (
        _as_lazy(frame)
        .group_by(worker)
        .agg(pl.len().cast(pl.UInt64).alias("tuples"))
        .collect()
    )
    out_of_range = counts.filter(pl.col(worker).cast(pl.Int64) >= workers)
    if out_of_range.height:
        raise ValueError(f"worker ids {out_of_range[worker].to_list()} are not below {workers}")
    loads = [0] * workers
    for w, tuples in counts.iter_rows():
        loads[w] = tuples
    return pl.Series("tuples", loads, dtype=pl.UInt64)


def load_imbalance(loads: pl.Series) -> float:
    """``λ = (max_w L_w − mean L) / mean L``, FlexD's and Pd-Stream's definition; 0 for no load."""
    mean = loads.mean()
    if not mean:
        return 0.0
    return float((loads.max() - mean) / mean)


def replication_factor(
    frame: pl.DataFrame | pl.LazyFrame, *, key: str = "key", worker: str = "worker"
) -> float:
    """``γ = Σ_k |W^k| / K``: workers per distinct key (Pd-Stream's RF, DKG's DistCost)."""
    counts = (
        _as_lazy(frame)
        .select(
            pl.struct(key, worker).n_unique().alias("pairs"),
            pl.col(key).n_unique().alias("keys"),
        )
        .collect()
    )
    keys = counts["keys"][0]
    return float(counts["pairs"][0] / keys) if keys else 0.0
