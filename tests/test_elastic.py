"""elastic (keysplit's own grouper): the Rust grouper against its reference twin, and the
guarantees its module documents, through the Python API."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import h
from reference_elastic import ElasticTwin
from strategies import keys, seeds, workers
from twins import assert_routes_like_twin

# Small tables, low counts and short periods, so that a few hundred keys exercise every
# path: collisions and decays in full buckets, sets that grow, budgets, halvings and trims.
params = st.fixed_dictionaries(
    {
        "epsilon": st.sampled_from([0.005, 0.05, 0.3, 1.0]),
        "hot_count": st.integers(1, 8),
        "table_entries": st.sampled_from([4, 8, 16, 64]),
        "decay_tuples": st.integers(1, 80),
    }
)


@given(stream=keys, n=workers, seed=seeds, params=params, ends=st.sets(st.integers(0, 300), max_size=6))
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, params: dict, ends: set[int]) -> None:
    assert_routes_like_twin("elastic", ElasticTwin, stream, n, seed, params, ends)


@given(stream=st.lists(st.integers(0, 3000), max_size=300), n=workers, seed=seeds)
def test_routes_like_its_reference_twin_with_the_defaults(stream: list, n: int, seed: int) -> None:
    assert_routes_like_twin("elastic", ElasticTwin, stream, n, seed, {})


def test_a_skewed_stream_is_split_only_where_the_load_needs_it() -> None:
    """Zipf 1.5 at 32 workers (the README's workload, shortened): near-perfect balance, and
    every key outside the hot-key table on its hash worker."""
    batches = keysplit.datasets.zipf(keys=100_000, tuples=400_000, z=1.5, seed=1)
    keys_column = pl.concat(batches)["key"]
    grouper = keysplit.Grouper("elastic", workers=32, seed=3)
    routed = grouper.route(keys_column)
    loads = grouper.loads
    assert max(loads) / (sum(loads) / len(loads)) - 1 <= 0.01
    placed: dict[int, set[int]] = {}
    for key, worker in zip(keys_column.to_list(), routed.to_list(), strict=True):
        placed.setdefault(key, set()).add(worker)
    split = {key for key, held in placed.items() if len(held) > 1}
    assert 0 < len(split) < 100
    for key, held in placed.items():
        if key not in split:
            assert held == {h(0, key, 3) % 32}
