"""FlexD: the Rust grouper against its reference twin, and the family's invariants.

The invariants are checked on the twin (they hold for the Rust grouper through the
differential test) and, for hash routing of keys that are not hot, on the Rust grouper.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import h
from reference_flexd import FlexDTwin
from strategies import keys, seeds, workers
from twins import assert_routes_like_twin

# Small segments, thresholds and micro-batches, so that keys turn hot, cross their
# thresholds, segments close and clean-ups run within a few hundred tuples.
params = st.fixed_dictionaries(
    {
        "delta": st.sampled_from([1.01, 1.2, 1.5, 2.0, 4.0]),
        "threshold": st.sampled_from([0.0, 0.02, 0.1, 0.25, 0.5, 1.0]),
        "counters": st.integers(0, 10),
        "segment_tuples": st.integers(1, 60),
        "batch_tuples": st.integers(1, 12),
        "cleanup_segments": st.integers(1, 4),
        "retain": st.integers(0, 4),
    }
)
# Skewed streams: one key about half of the time.
skewed = st.lists(st.one_of(st.just("hot"), st.sampled_from(["a", "b", "c", 0, 1, 2])), max_size=300)
streams = st.one_of(keys, skewed)
# Tuple positions before which end_window() is called.
window_ends = st.sets(st.integers(0, 300), max_size=4)

# Section 4.4 on a fixed stream; the same list is GOLDEN in rust/keysplit-core/tests/flexd.rs.
GOLDEN_PARAMS = {
    "threshold": 0.125,
    "counters": 6,
    "segment_tuples": 40,
    "batch_tuples": 3,
    "cleanup_segments": 2,
    "retain": 2,
}
GOLDEN_STREAM = [0 if i % 3 == 0 else (i * i) % 7 for i in range(200)]
GOLDEN = [
    2, 4, 4, 2, 0, 4, 2, 2, 4, 2, 0, 0, 1, 4, 1, 1, 4, 0, 3, 4, 4, 3, 4, 4, 3, 0, 3, 1, 1, 1,
    3, 1, 1, 3, 1, 0, 3, 3, 1, 2, 3, 1, 2, 4, 4, 2, 0, 4, 2, 2, 4, 2, 0, 0, 3, 4, 0, 3, 4, 0,
    1, 4, 4, 3, 1, 3, 0, 0, 3, 2, 2, 1, 0, 1, 0, 2, 1, 3, 2, 3, 0, 2, 4, 4, 2, 4, 4, 2, 0, 4,
    2, 2, 4, 1, 0, 0, 3, 4, 1, 3, 4, 0, 1, 4, 4, 3, 1, 3, 1, 3, 0, 2, 1, 1, 3, 3, 3, 0, 1, 2,
    2, 4, 0, 2, 4, 4, 2, 4, 4, 2, 0, 4, 2, 2, 4, 1, 0, 0, 3, 4, 1, 3, 4, 0, 1, 3, 4, 1, 1, 3,
    0, 3, 0, 2, 1, 2, 3, 3, 2, 0, 1, 0, 2, 4, 0, 2, 4, 4, 2, 4, 4, 2, 0, 4, 1, 3, 4, 1, 0, 0,
    3, 4, 1, 3, 4, 0, 1, 3, 1, 3, 1, 3, 2, 2, 3, 0, 1, 1, 0, 2,
]  # fmt: skip


@given(stream=streams, n=workers, seed=seeds, p=params, ends=window_ends)
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, p: dict, ends: set[int]) -> None:
    assert_routes_like_twin("flexd", FlexDTwin, stream, n, seed, p, ends)


def test_rust_routes_the_golden_stream() -> None:
    grouper = keysplit.Grouper("flexd", workers=5, seed=11, **GOLDEN_PARAMS)
    assert grouper.route(GOLDEN_STREAM).to_list() == GOLDEN


def test_the_twin_routes_the_golden_stream() -> None:
    twin = FlexDTwin(5, 11, **GOLDEN_PARAMS)
    assert [twin.route(k) for k in GOLDEN_STREAM] == GOLDEN


@given(stream=streams, n=st.integers(1, 12), seed=seeds, p=params, ends=window_ends)
def test_twin_instances_are_one_plus_the_crossings(stream: list, n: int, seed: int, p: dict, ends: set[int]) -> None:
    twin = FlexDTwin(n, seed, **p)
    for i, key in enumerate(stream):
        hot, entry = twin.is_hot(key), twin.entry(key)
        instances = list(entry["instances"]) if entry else None
        segment = twin.segment
        before = {k: list(e["instances"]) for k, e in twin.entries.items()}
        worker = twin.route(key)
        # A hot key goes to one of its instances, any other key to its hash worker.
        if hot:
            assert worker in instances
        else:
            assert worker == h(0, key, seed) % n
        if i in ends:
            twin.end_window()
        for k, e in twin.entries.items():
            assert len(e["instances"]) == min(n, 1 + e["crossings"])
            assert len(set(e["instances"])) == len(e["instances"])
            assert all(0 <= w < n for w in e["instances"])
            # Instances only grow, unless a clean-up dropped the entry and it came back.
            if k in before and twin.segment == segment:
                assert e["instances"][: len(before[k])] == before[k]
            # The threshold is f * delta^(1 + crossings).
            expected = twin.f * twin.delta
            for _ in range(e["crossings"]):
                expected *= twin.delta
            assert e["threshold"] == expected


@given(stream=streams, n=workers, seed=seeds, p=params)
def test_rust_hashes_keys_that_were_never_hot(stream: list, n: int, seed: int, p: dict) -> None:
    grouper = keysplit.Grouper("flexd", workers=n, seed=seed, **p)
    routed = grouper.route(stream).to_list() if stream else []
    twin = FlexDTwin(n, seed, **p)
    for key in stream:
        twin.route(key)
    for key, worker in zip(stream, routed, strict=True):
        if twin.entry(key) is None:
            # Never hot since the last clean-up; a key cleaned up may have been hot before.
            if twin.segment < p["cleanup_segments"]:
                assert worker == h(0, key, seed) % n


def lowest_except(used: list[int]) -> int:
    return next(w for w in range(100) if w not in used)


def test_hand_worked_example() -> None:
    # As in rust/keysplit-core/tests/flexd.rs: n = 8, l = 16, f = 1/4 (hot at a count of
    # 4), delta = 1.5 (crossings at counts 6, 9 and 14), m = 1 (one tuple of lag).
    twin = FlexDTwin(8, 3, threshold=0.25, counters=8, segment_tuples=16, batch_tuples=1)
    hashed = h(0, "a", 3) % 8
    assert [twin.route("a") for _ in range(4)] == [hashed] * 4
    w0 = lowest_except([hashed])
    assert twin.entry("a")["instances"] == [w0] and twin.entry("a")["threshold"] == 0.375
    assert [twin.route("a") for _ in range(2)] == [w0, w0]
    w1 = lowest_except([hashed, w0])
    assert twin.entry("a")["instances"] == [w0, w1]
    assert [twin.route("a") for _ in range(3)] == [w1, w1, w0]
    w2 = lowest_except([hashed, w0, w1])
    assert [twin.route("a") for _ in range(5)] == [w2, w2, w1, w2, w0]
    w3 = lowest_except([hashed, w0, w1, w2])
    assert twin.entry("a")["instances"] == [w0, w1, w2, w3]
    assert twin.entry("a")["crossings"] == 3
    assert [twin.route("a") for _ in range(2)] == [w3, w3]
    # The 16th key closed the segment: cold again, by hash, until a count of 4.
    assert twin.segment == 1 and not twin.is_hot("a")
    assert [twin.route("a") for _ in range(4)] == [hashed] * 4
    assert twin.is_hot("a")


def test_the_twin_micro_batch_lag() -> None:
    twin = FlexDTwin(8, 3, threshold=0.25, counters=8, segment_tuples=16, batch_tuples=4)
    hashed = h(0, "a", 3) % 8
    assert [twin.route("a") for _ in range(4)] == [hashed] * 4
    w0 = lowest_except([hashed])
    assert [twin.route("a") for _ in range(4)] == [w0] * 4
    w1 = lowest_except([hashed, w0])
    assert twin.entry("a")["instances"] == [w0, w1]
    assert [twin.route("a") for _ in range(4)] == [w1] * 4


def test_the_twin_clean_up_keeps_the_most_recently_accessed() -> None:
    twin = FlexDTwin(
        8, 0, threshold=0.25, counters=8, segment_tuples=16, batch_tuples=1,
        cleanup_segments=2, retain=1,
    )  # fmt: skip
    for key in ["a"] * 4 + ["b"] * 4:
        twin.route(key)
    twin.end_window()
    assert len(twin.entries) == 2
    twin.route("a")
    twin.end_window()
    assert twin.entry("a") is not None and twin.entry("b") is None


def test_defaults() -> None:
    twin = FlexDTwin(8)
    assert twin.f == 1 / 16 and twin.sketch.capacity == 32 and twin.delta == 1.5
    assert (twin.l, twin.m, twin.cleanup_segments, twin.retain) == (100_000, 1_000, 10, 50_000)


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        ("delta", 1.0, "must be finite and > 1, got 1"),
        ("threshold", 1.5, "must be in (0, 1]"),
        ("counters", -1, "counters"),
        ("segment_tuples", 0, "must be at least 1, got 0"),
        ("batch_tuples", 0, "batch_tuples"),
        ("cleanup_segments", 0, "cleanup_segments"),
        ("retain", -1, "retain"),
    ],
)
def test_bad_parameters_are_refused(param: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        keysplit.Grouper("flexd", workers=8, **{param: value})
