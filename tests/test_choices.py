"""D-Choices, W-Choices and Round-robin head (Nasir et al., ICDE 2016): the Rust groupers
against their twins in reference_choices.py, and the family's invariants.

The tests marked ``twin only`` need no Rust grouper of this family and check the twins
themselves: hand-worked examples, the golden digests shared with tests/choices.rs of the
Rust core, and the invariants on the twins' own routing.
"""

from __future__ import annotations

import math
from collections import defaultdict

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import fingerprint
from reference_choices import (
    TWINS,
    DChoicesTwin,
    RoundRobinHeadTwin,
    WChoicesTwin,
    choose_d,
    default_theta,
)
from release_smoke import GOLDEN_INTEGER_KEYS, fnv1a, golden_stream
from strategies import keys, seeds, workers


@st.composite
def choices_params(draw: st.DrawFn, name: str) -> dict:
    """Random valid parameters: theta 0 (auto) or in (0, 1), capacity 0 (auto) or a
    multiple of ceil(1/theta), and epsilon for d_choices."""
    params: dict = {"distinct_candidates": draw(st.booleans())}
    theta = draw(st.one_of(st.just(0.0), st.floats(0.001, 0.9)))
    params["theta"] = theta
    if theta > 0.0 and draw(st.booleans()):
        params["capacity"] = math.ceil(1.0 / theta) * draw(st.integers(1, 4))
    if name == "d_choices":
        params["epsilon"] = draw(st.one_of(st.just(1e-4), st.just(0.0), st.floats(0.0, 0.2)))
    return params


# Skewed integer streams, so that heads form: key 0 often, a few others sometimes.
skewed_keys = st.lists(st.one_of(st.just(0), st.just(0), st.integers(0, 3), st.integers(0, 50)), max_size=400)


@pytest.mark.parametrize("name", sorted(TWINS))
@given(data=st.data(), stream=st.one_of(keys, skewed_keys), n=workers, seed=seeds)
def test_routes_like_its_reference_twin(name: str, data: st.DataObject, stream: list, n: int, seed: int) -> None:
    params = data.draw(choices_params(name))
    twin = TWINS[name](n, seed, **params)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper(name, workers=n, seed=seed, **params)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


def check_twin_invariants(twin, stream: list) -> None:
    """Tail tuples go as PKG; head tuples by the grouper's rule; a key of D-Choices reaches
    at most D(k) workers, D(k) the widest d (at least 2) its head tuples saw."""
    n = twin.workers
    placed: dict[object, set[int]] = defaultdict(set)
    widest: dict[object, int] = defaultdict(lambda: 2)
    round_robin = 0
    for key in stream:
        before = list(twin.loads)
        worker = twin.route(key)
        assert 0 <= worker < n
        placed[key].add(worker)
        count = twin.summary.estimate(fingerprint(key))[0]
        if not twin.in_head(count):
            c1, c2 = twin.pkg_candidates(key)
            assert worker == (c2 if before[c2] < before[c1] else c1)
        elif isinstance(twin, DChoicesTwin):
            widest[key] = max(widest[key], twin.d)
            if twin.d < n:
                candidates = twin.head_candidates(key)
                assert worker in candidates
                assert before[worker] == min(before[c] for c in candidates)
            else:
                assert before[worker] == min(before)
        elif isinstance(twin, WChoicesTwin):
            assert worker == before.index(min(before))
        else:
            assert worker == round_robin
            round_robin = (round_robin + 1) % n
    if isinstance(twin, DChoicesTwin):
        for key, workers_of_key in placed.items():
            assert len(workers_of_key) <= min(widest[key], n)


@pytest.mark.parametrize("name", sorted(TWINS))
@given(data=st.data(), stream=skewed_keys, n=workers, seed=seeds)
def test_twin_invariants(name: str, data: st.DataObject, stream: list, n: int, seed: int) -> None:
    """Twin only."""
    check_twin_invariants(TWINS[name](n, seed, **data.draw(choices_params(name))), stream)


@pytest.mark.parametrize("name", sorted(TWINS))
@given(data=st.data(), stream=skewed_keys, n=workers, seed=seeds)
def test_rust_routing_keeps_the_invariants(name: str, data: st.DataObject, stream: list, n: int, seed: int) -> None:
    """The Rust routing equals the twin's, whose d and head the invariants then inspect."""
    params = data.draw(choices_params(name))
    routed = keysplit.Grouper(name, workers=n, seed=seed, **params).route(stream).to_list()
    assert all(0 <= w < n for w in routed)
    twin = TWINS[name](n, seed, **params)
    check_twin_invariants(twin, stream)
    again = TWINS[name](n, seed, **params)
    assert routed == [again.route(k) for k in stream]


def test_choose_d_by_hand() -> None:
    """Twin only; the same examples as tests/choices.rs, worked there by hand (n = 10)."""
    assert choose_d(10, 1, 0.1, 0.1, 1e-4) == 2
    assert choose_d(10, 1, 0.2, 0.2, 1e-4) == 3
    assert choose_d(10, 2, 0.3, 0.2, 1e-4) == 3
    assert choose_d(10, 1, 0.5, 0.5, 1e-4) == 10
    assert choose_d(10, 1, 0.25, 0.25, 1.0 - 1e-9) == 3  # round(2.5) = 3, half away from zero
    assert choose_d(64, 0, 0.0, 0.0, 1e-4) == 2
    assert choose_d(1, 1, 1.0, 1.0, 1e-4) == 1
    assert default_theta(10) == 0.02


def test_d_changes_only_with_the_head() -> None:
    """Twin only; tests/choices.rs walks the same stream."""
    twin = DChoicesTwin(10, 0, theta=0.2)
    for _ in range(6):
        twin.route(0)
    assert twin.d == 10
    for k in range(1, 24):
        twin.route(k)
        assert twin.d == 10
    twin.route(24)
    assert twin.head == set() and twin.d == 2


# The golden digests of tests/choices.rs, shared with the wheel's smoke test.
GOLDEN = GOLDEN_INTEGER_KEYS


@pytest.mark.parametrize(("name", "n", "seed", "params", "digest"), GOLDEN)
def test_twin_routes_the_golden_stream_as_the_rust_core(
    name: str, n: int, seed: int, params: dict, digest: int
) -> None:
    """Twin only: the digests of tests/choices.rs, computed by the Rust core."""
    twin = TWINS[name](n, seed, **params)
    assert fnv1a([twin.route(k) for k in golden_stream()]) == digest


@pytest.mark.parametrize(("name", "n", "seed", "params", "digest"), GOLDEN)
def test_rust_routes_the_golden_stream(name: str, n: int, seed: int, params: dict, digest: int) -> None:
    grouper = keysplit.Grouper(name, workers=n, seed=seed, **params)
    assert fnv1a(grouper.route(golden_stream()).to_list()) == digest


def test_head_keys_spread_where_pkg_cannot() -> None:
    stream = pl.Series(["hot"] * 1000)
    for name in ["d_choices", "w_choices", "rr_head"]:
        grouper = keysplit.Grouper(name, workers=8)
        grouper.route(stream)
        assert grouper.loads == [125] * 8, name


@pytest.mark.parametrize("name", sorted(TWINS))
def test_bad_parameters_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="theta"):
        keysplit.Grouper(name, workers=4, theta=1.5)
    with pytest.raises(ValueError, match="capacity"):
        keysplit.Grouper(name, workers=10, capacity=49)


def test_round_robin_head_twin_cycles() -> None:
    """Twin only: with theta 0.3, three tuples of one key are head tuples on 0, 1, 2."""
    twin = RoundRobinHeadTwin(4, 0, theta=0.3)
    assert [twin.route("a") for _ in range(3)] == [0, 1, 2]
