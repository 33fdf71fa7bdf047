"""Routing invariants and reference twins of shuffle, key and pkg."""

from __future__ import annotations

import re
from collections import defaultdict

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import TWINS, PkgTwin, all_twins, h
from strategies import GROUPER_NAMES, keys, seeds, workers


def workers_per_key(stream: list, routed: list[int]) -> dict[object, set[int]]:
    seen: dict[object, set[int]] = defaultdict(set)
    for key, worker in zip(stream, routed, strict=True):
        seen[key].add(worker)
    return seen


@pytest.mark.parametrize("name", sorted(TWINS))
@given(stream=keys, n=workers, seed=seeds)
def test_routes_like_its_reference_twin(name: str, stream: list, n: int, seed: int) -> None:
    twin = TWINS[name](n, seed)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper(name, workers=n, seed=seed)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


@pytest.mark.parametrize("name", GROUPER_NAMES)
@given(stream=keys, n=workers, seed=seeds, cut=st.integers(0, 300))
def test_batches_route_like_single_tuples(name: str, stream: list, n: int, seed: int, cut: int) -> None:
    single = keysplit.Grouper(name, workers=n, seed=seed)
    one_by_one = [single.route_key(k) for k in stream]
    batched = keysplit.Grouper(name, workers=n, seed=seed)
    head, tail = stream[:cut], stream[cut:]
    routed = batched.route(head).to_list() + batched.route(tail).to_list()
    assert routed == one_by_one
    assert all(0 <= w < n for w in routed)
    assert single.loads == batched.loads
    assert sum(batched.loads) == len(stream)


@given(stream=keys, n=workers, seed=seeds)
def test_key_grouping_sends_each_key_to_exactly_one_worker(stream: list, n: int, seed: int) -> None:
    routed = keysplit.Grouper("key", workers=n, seed=seed).route(stream).to_list()
    for key, placed in workers_per_key(stream, routed).items():
        assert placed == {h(0, key, seed) % n}


@given(stream=keys, n=workers, seed=seeds, distinct=st.booleans())
def test_pkg_sends_each_key_to_at_most_two_of_its_candidates(stream: list, n: int, seed: int, distinct: bool) -> None:
    grouper = keysplit.Grouper("pkg", workers=n, seed=seed, distinct_candidates=distinct)
    routed = grouper.route(stream).to_list()
    twin = PkgTwin(n, seed, distinct)
    for key, placed in workers_per_key(stream, routed).items():
        assert len(placed) <= 2
        assert placed <= set(twin.candidates(key))


@given(stream=keys, n=workers)
def test_shuffle_keeps_max_minus_min_load_within_one(stream: list, n: int) -> None:
    grouper = keysplit.Grouper("shuffle", workers=n)
    for key in stream:
        grouper.route_key(key)
        assert max(grouper.loads) - min(grouper.loads) <= 1


def test_pkg_candidates_collide_only_when_allowed() -> None:
    n = 4
    colliding = next(k for k in range(10_000) if h(1, k, 0) % n == h(2, k, 0) % n)
    paper = keysplit.Grouper("pkg", workers=n, distinct_candidates=False)
    storm = keysplit.Grouper("pkg", workers=n)
    assert len(set(paper.route([colliding] * 10).to_list())) == 1
    assert len(set(storm.route([colliding] * 10).to_list())) == 2


def test_pkg_balances_a_hot_key_that_key_grouping_cannot() -> None:
    stream = pl.Series(["hot"] * 1000)
    kg = keysplit.Grouper("key", workers=8)
    pkg = keysplit.Grouper("pkg", workers=8)
    kg.route(stream)
    pkg.route(stream)
    assert max(kg.loads) == 1000
    assert max(pkg.loads) == 500


def test_every_registered_grouper_has_a_reference_twin() -> None:
    # Each family's twins live in tests/reference*.py, registered by name in TWINS.
    assert sorted(all_twins()) == sorted(GROUPER_NAMES)


@given(stream=keys, n=workers, seed=seeds, distinct=st.booleans(), choices=st.integers(2, 6))
def test_pk_m_routes_like_its_twin_and_uses_at_most_m_workers_per_key(
    stream: list, n: int, seed: int, distinct: bool, choices: int
) -> None:
    grouper = keysplit.Grouper("pkg", workers=n, seed=seed, distinct_candidates=distinct, choices=choices)
    twin = PkgTwin(n, seed, distinct, choices)
    routed = grouper.route(stream).to_list() if stream else []
    assert routed == [twin.route(k) for k in stream]
    assert grouper.loads == twin.loads
    for key, placed in workers_per_key(stream, routed).items():
        assert placed <= set(twin.candidates(key))
        assert len(placed) <= choices


@pytest.mark.parametrize("choices", [0, 1, 33, -2])
def test_pk_m_needs_two_to_thirty_two_candidates(choices: int) -> None:
    with pytest.raises(ValueError, match=re.escape(f'"choices" of grouper "pkg" must be in [2, 32], got {choices}')):
        keysplit.Grouper("pkg", workers=4, choices=choices)
