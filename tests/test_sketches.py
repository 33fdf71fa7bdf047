"""keysplit.sketches: guarantees on real streams, cross-checked against Apache DataSketches."""

from __future__ import annotations

import math
from collections import Counter, deque

import datasketches as ds
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from keysplit import sketches
from reference import fingerprint
from strategies import keys

STREAM = pl.concat(keysplit.datasets.zipf(keys=10_000, tuples=200_000, z=1.1, seed=3))["key"]
TRUE = Counter(STREAM.to_list())
M = len(STREAM)


def test_count_min_never_underestimates_and_stays_within_its_bound_like_datasketches() -> None:
    epsilon, delta = 0.001, 0.01
    ours = sketches.CountMin.with_error(epsilon, delta, seed=1)
    plain_cu = sketches.CountMin.with_error(epsilon, delta, seed=1, conservative_update=True)
    theirs = ds.count_min_sketch(
        ds.count_min_sketch.suggest_num_hashes(1 - delta), ds.count_min_sketch.suggest_num_buckets(epsilon), 1
    )
    ours.update(STREAM)
    plain_cu.update(STREAM)
    for key, count in TRUE.items():
        theirs.update(key, count)
    assert ours.total == M
    over_ours = over_theirs = 0
    for key, count in TRUE.items():
        estimate = ours.estimate(key)
        assert count <= plain_cu.estimate(key) <= estimate
        assert theirs.get_estimate(key) >= count
        over_ours += estimate - count > epsilon * M
        over_theirs += theirs.get_estimate(key) - count > epsilon * M
    # Each sketch may exceed epsilon * m on a delta share of the keys; both stay far below.
    assert over_ours <= delta * len(TRUE)
    assert over_theirs <= delta * len(TRUE)


def test_space_saving_keeps_its_guarantees_and_finds_the_heavy_hitters_datasketches_finds() -> None:
    capacity = 200
    ours = sketches.SpaceSaving(capacity)
    ours.update(STREAM)
    assert ours.total == M and len(ours) == capacity
    for key, count in TRUE.items():
        estimate = ours.estimate(key)
        if count > M / capacity:
            assert estimate is not None, f"key {key} ({count} > m/capacity) is not monitored"
        if estimate is not None:
            top, error = estimate
            assert top - error <= count <= top
    theirs = ds.frequent_items_sketch(9)
    for key, count in TRUE.items():
        theirs.update(str(key), count)
    their_heavy = {int(row[0]) for row in theirs.get_frequent_items(ds.frequent_items_error_type.NO_FALSE_POSITIVES)}
    true_top = {key for key, _ in TRUE.most_common(20)}
    our_top = {key for key, _, _ in ours.top(20)}
    assert true_top == our_top
    assert true_top <= their_heavy
    assert ours.top(1)[0][0] == TRUE.most_common(1)[0][0]


@pytest.mark.parametrize("distinct", [1_000, 10_000, 100_000])
def test_hyperloglog_estimates_within_three_standard_errors_like_datasketches(distinct: int) -> None:
    column = pl.Series(range(distinct), dtype=pl.UInt64)
    ours = sketches.HyperLogLog(12)
    ours.update(column)
    ours.update(column.head(distinct // 2))  # repeats change nothing
    theirs = ds.hll_sketch(12, ds.tgt_hll_type.HLL_4)
    for key in range(distinct):
        theirs.update(key)
    bound = 3 * 1.04 / math.sqrt(4096)
    assert abs(ours.estimate() - distinct) <= bound * distinct
    assert theirs.get_lower_bound(3) <= distinct <= theirs.get_upper_bound(3)
    assert abs(ours.estimate() - theirs.get_estimate()) <= 2 * bound * distinct
    assert ours.state_bytes == 2560


def test_hyperloglog_merge_is_the_union_and_the_probe_has_no_false_negative() -> None:
    left, right, union = sketches.HyperLogLog(), sketches.HyperLogLog(), sketches.HyperLogLog()
    left.update(list(range(0, 6000)))
    right.update(list(range(4000, 10000)))
    union.update(list(range(10000)))
    left.merge(right)
    assert left.estimate() == union.estimate()
    assert all(left.maybe_contains(k) for k in range(10000))
    with pytest.raises(ValueError, match="precisions differ"):
        left.merge(sketches.HyperLogLog(10))


def test_count_min_merge_equals_one_sketch_of_both_streams() -> None:
    a, b, both = (sketches.CountMin(272, 5, seed=9) for _ in range(3))
    a.update(STREAM.head(1000))
    b.update(STREAM.tail(1000))
    both.update(pl.concat([STREAM.head(1000), STREAM.tail(1000)]))
    a.merge(b)
    assert all(a.estimate(k) == both.estimate(k) for k in set(STREAM.head(2000).to_list()))
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(sketches.CountMin(100, 5, seed=9))


@given(stream=keys, window=st.integers(1, 20))
def test_sliding_window_counts_equal_a_plain_window(stream: list, window: int) -> None:
    counter = sketches.SlidingWindowCounter(window)
    recent: deque = deque(maxlen=window)
    for key in stream:
        recent.append(key)
        assert counter.push(key) == recent.count(key)
        assert counter.count(key) == recent.count(key)
    assert len(counter) == len(recent)


def test_update_reads_every_key_container_and_the_null_policy() -> None:
    a, b = sketches.HyperLogLog(), sketches.HyperLogLog()
    a.update(pl.Series(["x", "y", "z"]))
    b.update(["x", "y", "z"])
    assert a.estimate() == b.estimate()
    with pytest.raises(ValueError, match="null"):
        a.update(["x", None])
    a.update(["x", None], nulls="group")
    assert a.maybe_contains("")
    assert sketches.fingerprint(5) == fingerprint(5)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: sketches.CountMin(0, 3), "width must be at least 1"),
        (lambda: sketches.CountMin.with_error(1.5, 0.1), "epsilon"),
        (lambda: sketches.SpaceSaving(0), "capacity must be at least 1, got 0"),
        (lambda: sketches.HyperLogLog(30), "precision"),
        (lambda: sketches.SlidingWindowCounter(0), "window"),
    ],
)
def test_bad_parameters_raise_a_clear_error(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (pl.Series(["b", "a", "b", None, "b", None], dtype=pl.String), ["b", None, "a"]),
        (pa.array([b"\x00b", b"a", b"\x00b"], pa.binary()), [b"\x00b", b"a"]),
        (pa.array(["x", "y", "x"], pa.large_string()), ["x", "y"]),
        (pl.Series([-5, 7, -5, -5], dtype=pl.Int8), [-5, 7]),
        (pl.Series([2**64 - 1, 3, 2**64 - 1], dtype=pl.UInt64), [2**64 - 1, 3]),
        (pa.chunked_array([[1, 2], [2, 2], []], pa.int32()), [2, 1]),
        (pa.array(["p", "q", "p"]).dictionary_encode(), ["p", "q"]),
        ([-(2**63), "s", b"t", 2**64 - 1, "s", None], ["s", -(2**63), b"t", 2**64 - 1, None]),
    ],
)
def test_space_saving_top_gives_keys_as_they_came(column: object, expected: list[object]) -> None:
    summary = sketches.SpaceSaving(8)
    summary.update(column, nulls="group")
    assert [key for key, _, _ in summary.top()] == expected
    restored = sketches.SpaceSaving.restore(summary.snapshot())
    assert restored.top() == summary.top()


def test_space_saving_keeps_keys_only_while_monitored_and_finds_them_again() -> None:
    summary = sketches.SpaceSaving(4)
    tail = [f"tail{i}" for i in range(10_000)]
    for start in range(0, len(tail), 997):
        summary.update(tail[start : start + 997] + ["hot"] * 50)
    top = summary.top()
    assert top[0] == ("hot", summary.estimate("hot")[0], summary.estimate("hot")[1])
    assert all(isinstance(key, str) for key, _, _ in top)
    assert summary.state_bytes < 4_096


#: ``SpaceSaving(4)`` after "a", "a", "b", written when the Python class kept fingerprints only.
PLAIN_SPACE_SAVING_SNAPSHOT = (
    "4b53504c534e415001007c0000000000000013736b657463683a73706163655f736176696e6700000005302e"
    "312e305e0402ff868f97b0ee85020001ffffffff0fffffffff0fcab7f29cd3ec95d4b4010000ffffffff0fff"
    "ffffff0f02010101ffffffff0f0102000000ffffffff0fffffffff0f000102ff868f97b0ee850200cab7f29c"
    "d3ec95d4b40101ee010359f61e3cd30738e4"
)


def test_space_saving_reads_a_fingerprint_only_snapshot_with_its_keys_unknown() -> None:
    """A `sketch:space_saving` snapshot, as the groupers and earlier releases write it."""
    plain = bytes.fromhex(PLAIN_SPACE_SAVING_SNAPSHOT)
    summary = sketches.SpaceSaving.restore(plain)
    assert [(key, count) for key, count, _ in summary.top()] == [(None, 2), (None, 1)]
    summary.update(["a", "b"])
    assert [(key, count) for key, count, _ in summary.top()] == [("a", 3), ("b", 2)]
    assert summary.estimate("a") == (3, 0)


def test_sketch_reprs_say_what_they_hold() -> None:
    count_min = sketches.CountMin(64, 4, seed=3, conservative_update=True)
    summary, hll, window = sketches.SpaceSaving(8), sketches.HyperLogLog(10), sketches.SlidingWindowCounter(50)
    for sketch in (count_min, summary, hll, window):
        sketch.update(["a", "b", "a"])
    assert repr(count_min) == "CountMin(width=64, depth=4, seed=3, conservative_update=True, total=3)"
    assert repr(summary) == "SpaceSaving(capacity=8, monitored=2, total=3)"
    assert repr(hll) == "HyperLogLog(precision=10, estimate=2)"
    assert repr(window) == "SlidingWindowCounter(window=50, held=3)"
