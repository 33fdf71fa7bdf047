"""Dalton: the Rust grouper against its reference twin, and the family's invariants.

The invariants are checked on the twin (they hold for the Rust grouper through the
differential test) and, for the cold-key rule, on the Rust grouper directly.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import fingerprint, h
from reference_dalton import Q_INIT, DaltonTwin
from strategies import keys, seeds, workers
from twins import assert_routes_like_twin

intervals = st.integers(min_value=1, max_value=40)
panes = st.integers(min_value=1, max_value=4)
epsilons = st.one_of(st.sampled_from([0.0, 0.1, 1.0]), st.floats(0.0, 1.0))
skewed = st.lists(st.one_of(st.just("hot"), st.sampled_from(["a", "b", "c", 0, 1, 2])), max_size=300)
streams = st.one_of(keys, skewed)
window_ends = st.sets(st.integers(0, 300), max_size=4)


def hot_flags(stream: list, n: int, interval: int) -> list[bool]:
    """Hot tuples from the definition: count in the interval (this tuple included) times n
    above the previous interval's total, or found hot in the previous interval."""
    flags, counts, found, previous = [], {}, {}, 0
    for i, key in enumerate(stream):
        j = i // interval
        item = fingerprint(key)
        counts[item] = counts.get(item, 0) + 1
        if previous > 0 and counts[item] * n > previous:
            found[item] = j
            flags.append(True)
        else:
            flags.append(found.get(item, -2) >= j - 1)
        if (i + 1) % interval == 0:
            previous, counts = interval, {}
    return flags


@given(
    stream=streams,
    n=workers,
    seed=seeds,
    interval=intervals,
    window=panes,
    epsilon=epsilons,
    ends=window_ends,
)
def test_routes_like_its_reference_twin(
    stream: list, n: int, seed: int, interval: int, window: int, epsilon: float, ends: set[int]
) -> None:
    params = {"interval_tuples": interval, "window_panes": window, "epsilon": epsilon}
    assert_routes_like_twin("dalton", DaltonTwin, stream, n, seed, params, ends)


@given(stream=streams, n=workers, seed=seeds, interval=intervals, epsilon=epsilons)
def test_rust_sends_cold_keys_to_their_hash_worker(
    stream: list, n: int, seed: int, interval: int, epsilon: float
) -> None:
    grouper = keysplit.Grouper("dalton", workers=n, seed=seed, interval_tuples=interval, epsilon=epsilon)
    routed = grouper.route(stream).to_list() if stream else []
    for key, worker, hot in zip(stream, routed, hot_flags(stream, n, interval), strict=True):
        if not hot:
            assert worker == h(0, key, seed) % n


@given(
    stream=streams,
    n=st.integers(1, 12),
    seed=seeds,
    interval=intervals,
    window=panes,
    epsilon=epsilons,
)
def test_twin_cold_keys_hash_and_reached_keys_stay_on_known_workers(
    stream: list, n: int, seed: int, interval: int, window: int, epsilon: float
) -> None:
    """A hot tuple of a reached key goes to a worker that held it in the window or that
    its Q-row had tried (or, for a row that tried none, to the hash worker)."""
    twin = DaltonTwin(n, seed, interval_tuples=interval, window_panes=window, epsilon=epsilon)
    for key, hot in zip(stream, hot_flags(stream, n, interval), strict=True):
        item = fingerprint(key)
        hash_worker = h(0, key, seed) % n
        had_row, reached = item in twin.q, item in twin.reached
        holders = twin.window.holders(item)
        tried = [w for w, q in enumerate(twin.q.get(item, [])) if q != Q_INIT]
        worker = twin.route(key)
        if not hot:
            assert worker == hash_worker
        elif had_row and reached:
            assert worker in holders or worker in tried or (not tried and worker == hash_worker)


@given(
    stream=streams,
    n=st.integers(1, 16),
    seed=seeds,
    interval=st.integers(2, 30),
    epsilon=epsilons,
)
def test_within_one_window_a_key_that_stays_hot_never_exceeds_max_split(
    stream: list, n: int, seed: int, interval: int, epsilon: float
) -> None:
    # 1000 panes: no pane leaves the window in 300 tuples.
    twin = DaltonTwin(n, seed, interval_tuples=interval, window_panes=1000, epsilon=epsilon)
    ever_hot: set[int] = set()
    cooled: set[int] = set()
    for key in stream:
        twin.route(key)
        cooled |= {k for k in ever_hot if k not in twin.q}
        ever_hot |= set(twin.q)
        for k in ever_hot - cooled:
            assert len(twin.window.holders(k)) <= twin.max_split


def test_hand_worked_example_without_exploration() -> None:
    # The example of rust/keysplit-core/tests/dalton.rs (key 1 -> worker 0, key 0 -> 1).
    twin = DaltonTwin(2, 0, interval_tuples=4, window_panes=1, epsilon=0.0)
    assert [twin.route(k) for k in [1, 1, 1, 0, 1, 1, 1, 0]] == [0, 0, 0, 1, 0, 0, 0, 1]
    assert twin.q[fingerprint(1)] == [-2.0 * 0.9 + 0.1 * -(0.5 * (6 - 3.5) / 6 + 0.5 * 0.5), -2.0]
    assert twin.route(1) == 0  # still hot in interval 2; the tried worker wins the exploit
    twin.end_window()
    assert fingerprint(1) not in twin.q


def test_a_single_hot_key_raises_max_split_to_six() -> None:
    twin = DaltonTwin(16, 3, interval_tuples=10, window_panes=1000, epsilon=1.0)
    routed = {twin.route(1) for _ in range(510)}
    assert twin.max_split == 6
    assert len(twin.window.holders(fingerprint(1))) == 6
    assert len(routed) <= 6
