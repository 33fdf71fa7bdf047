"""ELB and CLB (Guo and Zhou, "Stateful load balancing for parallel stream processing",
Euro-Par 2017 Workshops) against their twins in reference_rebalancing.py, and their
invariants (every worker within [v, u] after ELB on a feasible window, one worker per key
between rebalances, CLB's split a partition of the substreams). Tests marked
``twin only`` need no Rust grouper of this family."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import keysplit
from reference import h
from reference_rebalancing import (
    TWINS,
    ClbTwin,
    ElbTwin,
    clb_assign,
    clb_split,
    elb_bounds,
    elb_feasible,
    elb_rebalance,
    movement,
    worker_loads,
)
from strategies import keys, seeds

# CLB's split is quadratic in p: keep p small enough for the plain-Python twin.
small_workers = st.integers(min_value=1, max_value=12)

common = {"substreams": st.integers(0, 60), "window_tuples": st.integers(1, 80)}
elb_params = st.fixed_dictionaries({**common, "tolerance": st.floats(0.01, 0.99)})
clb_params = st.fixed_dictionaries(
    {
        **common,
        "period_windows": st.integers(1, 5),
        "covariance_threshold": st.floats(0.0, 0.99),
    }
)
named_params = st.one_of(st.tuples(st.just("elb"), elb_params), st.tuples(st.just("clb"), clb_params))
# Where to call end_window(): after these tuple positions.
window_ends = st.sets(st.integers(0, 300), max_size=20)


def drive(grouper, stream: list, ends: set[int]) -> list[int]:
    """Routes key by key, closing a window after each position in ``ends``."""
    routed = []
    for i, key in enumerate(stream):
        routed.append(grouper.route(key))
        if i in ends:
            grouper.end_window()
    return routed


@given(stream=keys, n=small_workers, seed=seeds, named=named_params)
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, named) -> None:
    name, p = named
    twin = TWINS[name](n, seed, **p)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper(name, workers=n, seed=seed, **p)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


@given(stream=keys, n=small_workers, seed=seeds, named=named_params, ends=window_ends)
def test_end_window_routes_like_its_reference_twin(stream: list, n: int, seed: int, named, ends: set[int]) -> None:
    name, p = named
    twin = TWINS[name](n, seed, **p)
    expected = drive(twin, stream, ends)
    grouper = keysplit.Grouper(name, workers=n, seed=seed, **p)
    routed = []
    start = 0
    for end in sorted({e for e in ends if e < len(stream)} | {len(stream) - 1}):
        chunk = stream[start : end + 1]
        if chunk:
            routed += grouper.route(chunk).to_list()
        if end in ends:
            grouper.end_window()
        start = end + 1
    assert routed == expected
    assert grouper.loads == twin.loads


@given(stream=keys, n=small_workers, seed=seeds, name=st.sampled_from(["elb", "clb"]))
def test_sends_each_key_to_one_worker_between_rebalances(stream: list, n: int, seed: int, name: str) -> None:
    """One window (the default 600 000 tuples): F(h_0(k) mod p) = (h_0(k) mod p) mod n."""
    routed = keysplit.Grouper(name, workers=n, seed=seed).route(stream).to_list()
    placed: dict[object, set[int]] = defaultdict(set)
    for key, worker in zip(stream, routed, strict=True):
        placed[key].add(worker)
    for key, workers_of_key in placed.items():
        assert workers_of_key == {(h(0, key, seed) % (10 * n)) % n}


@pytest.mark.parametrize(
    ("name", "param", "value", "message"),
    [
        ("elb", "tolerance", 1.5, "(0, 1)"),
        ("elb", "substreams", -1, "substreams"),
        ("clb", "window_tuples", 0, "must be at least 1, got 0"),
        ("clb", "period_windows", 0, "period_windows"),
        ("clb", "covariance_threshold", 1.0, "[0, 1)"),
    ],
)
def test_bad_parameters_name_the_problem(name: str, param: str, value, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        keysplit.Grouper(name, workers=4, **{param: value})


# ---------------------------------------------------------------- twin only


def test_elb_phases_two_and_three_by_hand() -> None:
    """Twin only; tests/rebalancing.rs works the same example in the Rust core."""
    y = [3, 1, 1, 0, 1, 0]
    assert elb_bounds(6, 2, 0.5) == (1.5, 4.5, 1.5, 3.0)
    table = elb_rebalance(y, [0, 1, 0, 1, 0, 1], 2, 0.5)
    assert table == [0, 1, 1, 1, 1, 1]
    assert worker_loads(y, table, 2) == [3, 3]
    assert movement([0, 1, 0, 1, 0, 1], table, y) == 2


def test_elb_repair_by_hand() -> None:
    """Twin only."""
    y = [5, 1, 3, 1]
    assert not elb_feasible(y, 2, 0.2)
    assert elb_rebalance(y, [0, 1, 0, 1], 2, 0.2) == [0, 1, 1, 1]


def test_elb_repair_takes_from_the_next_donor() -> None:
    """Twin only; worked in tests/rebalancing.rs: worker 0 holds one hot substream."""
    y = [9, 4, 0, 0, 4, 1]
    table = elb_rebalance(y, [0, 1, 2, 0, 1, 2], 3, 0.5)
    assert table == [0, 2, 2, 0, 1, 2]
    assert worker_loads(y, table, 3) == [9, 4, 5]


def test_clb_by_hand() -> None:
    """Twin only."""
    history = [[1, 1, 0, 0], [2, 2, 0, 1]]
    sets = clb_split(history, 2, 0.0)
    assert sets == [[0], [1, 2, 3]]
    assert clb_assign(sets, [0, 1, 0, 1], history[1], 2) == [0, 1, 1, 1]
    assert clb_split([[2, 0, 1, 1], [0, 2, 1, 1]], 2, 0.0) == [[0, 1], [2, 3]]
    # A common-mode stream: singletons peel off (documented in groupers/rebalancing.rs).
    assert clb_split([[1, 1, 1, 1], [2, 2, 2, 2]], 3, 0.0) == [[0], [1], [2, 3]]


GOLDEN = [
    (ElbTwin, 5, 7, {"window_tuples": 100, "tolerance": 0.1}, 0x8F19043DB7F0F913, 353),
    (
        ElbTwin,
        8,
        3,
        {"substreams": 37, "window_tuples": 250, "tolerance": 0.3},
        0xB04898DE5FEF1C72,
        16,
    ),
    (
        ElbTwin,
        4,
        9,
        {"substreams": 12, "window_tuples": 100, "tolerance": 0.1},
        0x914EA2ECD12885F5,
        249,
    ),
    (ClbTwin, 5, 7, {"window_tuples": 100, "period_windows": 3}, 0xD47951FC90B7A9B6, 780),
    (
        ClbTwin,
        3,
        11,
        {"substreams": 20, "window_tuples": 64, "period_windows": 2},
        0x362A506F5F30F0D6,
        956,
    ),
]


@pytest.mark.parametrize(("twin", "n", "seed", "params", "digest", "psi"), GOLDEN)
def test_twin_routes_the_golden_stream_as_the_rust_core(
    twin, n: int, seed: int, params: dict, digest: int, psi: int
) -> None:
    """Twin only: digests and psi of tests/rebalancing.rs, computed by the Rust core."""
    from test_choices import fnv1a, golden_stream

    g = twin(n, seed, **params)
    assert fnv1a([g.route(k) for k in golden_stream()]) == digest
    assert g.total_movement == psi


def test_twin_follows_end_window_as_the_rust_core() -> None:
    """Twin only: tests/rebalancing.rs, end_window() after every 333rd tuple."""
    from test_choices import fnv1a, golden_stream

    stream = [f"k{k}" for k in golden_stream()]
    ends = {i for i in range(len(stream)) if i % 333 == 332}
    elb = ElbTwin(6, 99, substreams=60, window_tuples=(1 << 64) - 1, tolerance=0.2)
    assert (fnv1a(drive(elb, stream, ends)), elb.total_movement) == (0xC9F7EBE942900FD7, 21)
    clb = ClbTwin(4, 5, substreams=40, window_tuples=(1 << 64) - 1, period_windows=2, covariance_threshold=0.5)
    assert (fnv1a(drive(clb, stream, ends)), clb.total_movement) == (0x89DF45E50EB10C45, 1151)


@given(
    y=st.lists(st.integers(0, 30), min_size=1, max_size=60),
    n=st.integers(1, 8),
    assignment=st.lists(st.integers(0, 7), min_size=60, max_size=60),
    tolerance=st.floats(0.05, 0.95),
)
def test_elb_keeps_every_worker_within_bounds_when_feasible(
    y: list[int], n: int, assignment: list[int], tolerance: float
) -> None:
    """Twin only: ELB's guarantee. A window is feasible when every y_i <= (u - v) / 2
    (the paper's assumption, Section 3); then every load under the new table is in [v, u]."""
    before = [a % n for a in assignment[: len(y)]]
    table = elb_rebalance(y, before, n, tolerance)
    assert all(0 <= w < n for w in table)
    v, u, _, _ = elb_bounds(sum(y), n, tolerance)
    if elb_feasible(y, n, tolerance):
        assert all(v <= load <= u for load in worker_loads(y, table, n))
    if all(v <= load <= u for load in worker_loads(y, before, n)):
        assert table == before


@given(
    y=st.lists(st.integers(0, 4), min_size=20, max_size=80),
    n=st.integers(2, 5),
    tolerance=st.floats(0.1, 0.5),
    skew=st.integers(0, 2),
)
def test_elb_repairs_feasible_unbalanced_windows(y: list[int], n: int, tolerance: float, skew: int) -> None:
    """Twin only: every substream starts on the first skew + 1 workers."""
    assume(elb_feasible(y, n, tolerance))
    table = elb_rebalance(y, [(i % (skew + 1)) % n for i in range(len(y))], n, tolerance)
    v, u, _, _ = elb_bounds(sum(y), n, tolerance)
    assert all(v <= load <= u for load in worker_loads(y, table, n))


@given(
    history=st.lists(st.lists(st.integers(0, 20), min_size=12, max_size=12), min_size=1, max_size=5),
    n=st.integers(1, 16),
    theta=st.floats(0.0, 0.99),
)
def test_clb_split_partitions_the_substreams(history: list[list[int]], n: int, theta: float) -> None:
    """Twin only: min(n, p) non-empty sets covering every substream, each on its own worker."""
    sets = clb_split(history, n, theta)
    assert len(sets) == min(n, 12)
    assert sorted(i for s in sets for i in s) == list(range(12))
    assert all(sets)
    table = clb_assign(sets, [i % n for i in range(12)], history[-1], n)
    assert all(0 <= w < n for w in table)
    assert len(set(table)) == len(sets)


@given(stream=keys, n=small_workers, seed=seeds, named=named_params, ends=window_ends)
@example(  # found by CI: a count-closed window then end_window() on the same tuple
    stream=[0] * 18 + [1],
    n=2,
    seed=1,
    named=("elb", {"substreams": 0, "window_tuples": 19, "tolerance": 0.5}),
    ends={18},
)
def test_twin_psi_is_eq_2_and_routing_follows_the_table(stream: list, n: int, seed: int, named, ends: set[int]) -> None:
    """Twin only: every tuple goes to F(substream); psi adds up Eq. 2 over rebalances."""
    name, p = named
    twin = TWINS[name](n, seed, **p)
    psi = 0

    def moved_since(table: list[int], rebalances: int) -> int:
        if twin.rebalances == rebalances:
            return 0
        assert twin.last_movement == movement(table, twin.table, twin.last_window)
        return twin.last_movement

    for i, key in enumerate(stream):
        # A tuple that fills a window by count rebalances inside route(); an end_window()
        # right after it closes the next (empty) window: two rebalances, checked one by one.
        table, rebalances = list(twin.table), twin.rebalances
        assert twin.route(key) == table[twin.substream_of(key)]
        psi += moved_since(table, rebalances)
        if i in ends:
            table, rebalances = list(twin.table), twin.rebalances
            twin.end_window()
            psi += moved_since(table, rebalances)
    assert twin.total_movement == psi
