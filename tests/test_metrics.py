"""Metrics on small hand-computed examples."""

from __future__ import annotations

import polars as pl
import pytest

from keysplit import metrics

# Keys a (3 tuples), b (2), c (1) over 4 workers:
#   a -> workers 0, 0, 1; b -> 1, 1; c -> 2.  Loads [2, 3, 1, 0], mean 1.5.
ROUTED = pl.DataFrame({"key": ["a", "a", "a", "b", "b", "c"], "worker": [0, 0, 1, 1, 1, 2]})


def test_worker_loads_count_idle_workers() -> None:
    assert metrics.worker_loads(ROUTED, workers=4).to_list() == [2, 3, 1, 0]
    assert metrics.worker_loads(ROUTED.lazy(), workers=4).dtype == pl.UInt64


def test_load_imbalance_is_max_over_mean_minus_one() -> None:
    loads = metrics.worker_loads(ROUTED, workers=4)
    assert metrics.load_imbalance(loads) == pytest.approx((3 - 1.5) / 1.5)
    assert metrics.load_imbalance(pl.Series([5, 5, 5])) == 0.0
    assert metrics.load_imbalance(pl.Series([0, 0], dtype=pl.UInt64)) == 0.0


def test_replication_factor_is_workers_per_distinct_key() -> None:
    # a on {0, 1}, b on {1}, c on {2}: (2 + 1 + 1) / 3.
    assert metrics.replication_factor(ROUTED) == pytest.approx(4 / 3)
    assert metrics.replication_factor(ROUTED.head(0)) == 0.0


def test_worker_ids_beyond_the_worker_count_are_refused() -> None:
    with pytest.raises(ValueError, match=r"worker ids \[2\] are not below 2"):
        metrics.worker_loads(ROUTED, workers=2)
