"""DAGreedy: the Rust grouper against its reference twin, and the family's invariants.

The invariants are checked on the twin (they hold for the Rust grouper through the
differential test) and, for the cold-key rule, on the Rust grouper directly.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import fingerprint, h
from reference_dagreedy import DaGreedyTwin
from strategies import keys, seeds, workers
from twins import assert_routes_like_twin

intervals = st.integers(min_value=1, max_value=40)
panes = st.integers(min_value=1, max_value=4)
# Skewed streams: one key about half of the time, so that keys turn hot.
skewed = st.lists(st.one_of(st.just("hot"), st.sampled_from(["a", "b", "c", 0, 1, 2])), max_size=300)
streams = st.one_of(keys, skewed)
# Tuple positions before which end_window() is called.
window_ends = st.sets(st.integers(0, 300), max_size=4)


def hot_flags(stream: list, n: int, interval: int) -> list[bool]:
    """Hot tuples from the definition: count in the interval (this tuple included) above
    T / (100 n), T the previous interval's total; or found hot in the previous interval."""
    flags, counts, found, previous = [], {}, {}, 0
    for i, key in enumerate(stream):
        j = i // interval
        item = fingerprint(key)
        counts[item] = counts.get(item, 0) + 1
        if previous > 0 and Fraction(counts[item]) > Fraction(previous, 100 * n):
            found[item] = j
            flags.append(True)
        else:
            flags.append(found.get(item, -2) >= j - 1)
        if (i + 1) % interval == 0:
            previous, counts = interval, {}
    return flags


@given(stream=streams, n=workers, seed=seeds, interval=intervals, window=panes, ends=window_ends)
def test_routes_like_its_reference_twin(
    stream: list, n: int, seed: int, interval: int, window: int, ends: set[int]
) -> None:
    params = {"interval_tuples": interval, "window_panes": window}
    assert_routes_like_twin("dagreedy", DaGreedyTwin, stream, n, seed, params, ends)


@given(stream=streams, n=workers, seed=seeds, interval=intervals)
def test_rust_sends_cold_keys_to_their_hash_worker(stream: list, n: int, seed: int, interval: int) -> None:
    grouper = keysplit.Grouper("dagreedy", workers=n, seed=seed, interval_tuples=interval)
    routed = grouper.route(stream).to_list() if stream else []
    for key, worker, hot in zip(stream, routed, hot_flags(stream, n, interval), strict=True):
        if not hot:
            assert worker == h(0, key, seed) % n


@given(stream=streams, n=st.integers(1, 12), seed=seeds, interval=intervals, window=panes)
def test_twin_cold_keys_hash_and_hot_keys_take_the_argmax_of_the_score(
    stream: list, n: int, seed: int, interval: int, window: int
) -> None:
    twin = DaGreedyTwin(n, seed, interval_tuples=interval, window_panes=window)
    for key, hot in zip(stream, hot_flags(stream, n, interval), strict=True):
        item = fingerprint(key)
        # The score in exact arithmetic: 0.5 [k on w] - 0.5 (L_w - avg) / avg.
        total = twin.window.total()
        holders = twin.window.holders(item)
        avg = Fraction(total, n)
        scores = [
            Fraction(1, 2) * (w in holders) - (Fraction(1, 2) * (twin.window.load(w) - avg) / avg if avg else 0)
            for w in range(n)
        ]
        float_scores = [twin.score(item, w) for w in range(n)]
        worker = twin.route(key)
        if hot:
            assert worker == scores.index(max(scores))  # the first of the best
            assert abs(float_scores[worker] - float(max(scores))) < 1e-9
        else:
            assert worker == h(0, key, seed) % n


def test_hand_worked_example() -> None:
    # The example of rust/keysplit-core/tests/dagreedy.rs: with seed 0 and 2 workers,
    # key 1 hashes to worker 0 and key 0 to worker 1.
    assert (h(0, 1, 0) % 2, h(0, 0, 0) % 2) == (0, 1)
    twin = DaGreedyTwin(2, 0, interval_tuples=4, window_panes=1)
    assert [twin.route(k) for k in [1, 1, 1, 0, 1, 1, 1, 0, 0]] == [0, 0, 0, 1, 0, 1, 1, 1, 0]


def test_an_empty_interval_leaves_no_key_hot() -> None:
    twin = DaGreedyTwin(2, 0, interval_tuples=1000, window_panes=1)
    for _ in range(50):
        twin.route(1)
    twin.end_window()
    twin.end_window()  # an empty interval: T = 0
    assert all(twin.route(1) == 0 for _ in range(50))
