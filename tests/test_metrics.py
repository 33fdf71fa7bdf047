"""Metrics on small hand-computed examples."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

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
    with pytest.raises(ValueError, match=r"worker ids \[2\] are outside 0\.\.1"):
        metrics.worker_loads(ROUTED, workers=2)


def test_every_load_metric_on_the_hand_example() -> None:
    loads = metrics.worker_loads(ROUTED, workers=4)  # [2, 3, 1, 0], mean 1.5
    assert metrics.absolute_imbalance(loads) == pytest.approx(1.5)
    # ((0.5)² + (1.5)² + (0.5)² + (1.5)²) / 4
    assert metrics.load_variance(loads) == pytest.approx(1.25)
    assert metrics.load_stddev(loads) == pytest.approx(1.25**0.5)


def test_cardinality_metrics_on_the_hand_example() -> None:
    # Worker 0 holds {a}, 1 holds {a, b}, 2 holds {c}, 3 nothing.
    cardinalities = metrics.worker_cardinalities(ROUTED, workers=4)
    assert cardinalities.to_list() == [1, 2, 1, 0]
    assert metrics.aggregation_cost(ROUTED) == 4
    assert metrics.cardinality_imbalance(cardinalities) == pytest.approx(2 - 1)


def test_hybrid_imbalance_scales_both_loads_before_weighting() -> None:
    loads = metrics.worker_loads(ROUTED, workers=4)
    cardinalities = metrics.worker_cardinalities(ROUTED, workers=4)
    # L' = [2/3, 1, 1/3, 0], CL' = [1/2, 1, 1/2, 0]; H = [7/12, 1, 5/12, 0], mean 1/2.
    assert metrics.hybrid_imbalance(loads, cardinalities) == pytest.approx(0.5)
    # p = 1 is the scaled tuple imbalance alone: 1 − mean(L') = 1 − 1/2.
    assert metrics.hybrid_imbalance(loads, cardinalities, p=1.0) == pytest.approx(0.5)
    # p = 0: 1 − mean(CL') = 1 − 1/2; equal loads scale to 0 rather than dividing by 0.
    assert metrics.hybrid_imbalance(loads, cardinalities, p=0.0) == pytest.approx(0.5)
    assert metrics.hybrid_imbalance(pl.Series([4, 4]), pl.Series([1, 1])) == 0.0
    with pytest.raises(ValueError, match="p must be a number in"):
        metrics.hybrid_imbalance(loads, cardinalities, p=1.5)
    with pytest.raises(ValueError, match="4 loads but 2 cardinalities"):
        metrics.hybrid_imbalance(loads, pl.Series([1, 1]))


WINDOWED = pl.DataFrame(
    {
        # Window 0: a -> 0, 0; b -> 1.  Window 1: a -> 2 (a's state moves), b -> 1, c -> 1.
        "key": ["a", "a", "b", "a", "b", "c"],
        "worker": [0, 0, 1, 2, 1, 1],
        "window": [0, 0, 0, 1, 1, 1],
    }
)


def test_summarize_gives_every_metric_per_window_and_overall() -> None:
    summary = metrics.summarize(WINDOWED, workers=3, window="window")
    assert summary.columns == list(metrics.SUMMARY_COLUMNS)
    assert summary["window"].to_list() == [0, 1, None]
    assert summary["tuples"].to_list() == [3, 3, 6]
    assert summary["keys"].to_list() == [2, 3, 3]
    assert summary["max_load"].to_list() == [2, 2, 3]
    assert summary["load_imbalance"].to_list() == pytest.approx([1.0, 1.0, 0.5])
    # Overall a is on {0, 2}, b on {1}, c on {1}.
    assert summary["replication_factor"].to_list() == pytest.approx([1.0, 1.0, 4 / 3])
    assert summary["aggregation_cost"].to_list() == [2, 3, 4]
    # a's two window-0 tuples stay behind on worker 0 when a arrives at worker 2.
    assert summary["state_moved"].to_list() == [0, 2, 2]


def test_state_moved_counts_only_keys_that_arrive_again_elsewhere() -> None:
    frame = pl.DataFrame({"key": ["a", "b", "b", "a"], "worker": [0, 1, 0, 0], "window": [0, 0, 1, 2]})
    # b moves 1 -> 0 entering window 1 (1 tuple); a is absent from window 1 and then
    # returns to its old worker, so nothing of it moves.
    assert metrics.summarize(frame, workers=2, window="window")["state_moved"].to_list() == [0, 1, 0, 1]


def test_summarize_without_windows_has_one_row_and_no_state_moved() -> None:
    summary = metrics.summarize(ROUTED, workers=4)
    assert summary.height == 1
    assert summary["window"][0] is None and summary["state_moved"][0] is None
    assert summary["aggregation_cost"][0] == 4
    assert metrics.summarize(ROUTED.head(0), workers=4).height == 0


@settings(max_examples=60)
@given(
    rows=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 4), st.integers(0, 2)), max_size=80),
    cut=st.integers(1, 10),
)
def test_streaming_metrics_equal_summarize(rows: list[tuple[str, int, int]], cut: int) -> None:
    frame = pl.DataFrame(rows, schema={"key": pl.String, "worker": pl.Int64, "window": pl.Int64}, orient="row").sort(
        "window", maintain_order=True
    )
    for window in (None, "window"):
        streaming = metrics.StreamingMetrics(5, window=window)
        for batch in frame.iter_slices(cut):
            streaming.update(batch)
        expected = metrics.summarize(frame, workers=5, window=window)
        got = streaming.summary()
        assert got.height == expected.height
        if expected.height:
            assert_frame_equal(got, expected, check_dtypes=False)


def test_streaming_metrics_refuse_windows_that_go_back() -> None:
    streaming = metrics.StreamingMetrics(2, window="window")
    streaming.update(pl.DataFrame({"key": ["a"], "worker": [0], "window": [3]}))
    with pytest.raises(ValueError, match="window 1 arrives after window 3"):
        streaming.update(pl.DataFrame({"key": ["a"], "worker": [0], "window": [1]}))


def test_bad_routed_frames_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"columns \['shard'\] are not in the frame"):
        metrics.summarize(ROUTED, workers=4, worker="shard")
    with pytest.raises(ValueError, match="1 routed rows have a null worker id"):
        metrics.summarize(
            pl.DataFrame({"key": ["a"], "worker": [None]}, schema={"key": pl.String, "worker": pl.Int64}),
            workers=2,
        )
    with pytest.raises(ValueError, match=r"worker ids \[-1, 2\] are outside 0\.\.1"):
        metrics.summarize(pl.DataFrame({"key": ["a", "b"], "worker": [-1, 2]}), workers=2)
    with pytest.raises(ValueError, match=r"workers must be an int in \[1, 1,048,576\], got 0"):
        metrics.summarize(ROUTED, workers=0)
    with pytest.raises(TypeError, match="expected a Polars DataFrame"):
        metrics.aggregation_cost({"key": [1]})  # type: ignore[arg-type]


def test_replication_bound_is_the_workers_the_key_shares_force() -> None:
    # Shares 0.6, 0.2, 0.1, 0.1 over 10 workers need 6, 2, 1 and 1 workers.
    frame = pl.DataFrame({"key": ["a"] * 6 + ["b"] * 2 + ["c", "d"]})
    assert metrics.replication_bound(frame, workers=10) == pytest.approx(10 / 4)
    # Over 4 workers a (0.6) needs ⌈2.4⌉ = 3; shares of exactly 1/n need 1.
    assert metrics.replication_bound(frame.lazy(), workers=4) == pytest.approx((3 + 1 + 1 + 1) / 4)
    assert metrics.replication_bound(ROUTED, workers=4) == pytest.approx((2 + 2 + 1) / 3)
    assert metrics.replication_bound(frame.clear(), workers=4) == 0.0
    with pytest.raises(ValueError, match="workers"):
        metrics.replication_bound(frame, workers=0)


@given(
    counts=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    workers=st.integers(1, 9),
)
def test_a_perfectly_balanced_routing_replicates_at_least_the_bound(counts: list[int], workers: int) -> None:
    """Round robin over a whole number of rounds has λ = 0, so its γ cannot be below γ*;
    each window's bound is that of its own shares."""
    keys = [key for key, count in enumerate(counts) for _ in range(count)]
    keys += [len(counts)] * (-len(keys) % workers)
    frame = pl.DataFrame({"key": keys, "worker": [i % workers for i in range(len(keys))], "window": 0})
    summary = metrics.summarize(frame, workers=workers, window="window")
    overall = summary.filter(pl.col("window").is_null()).row(0, named=True)
    assert overall["load_imbalance"] == 0.0
    assert overall["replication_bound"] == pytest.approx(metrics.replication_bound(frame, workers=workers))
    assert overall["replication_factor"] >= overall["replication_bound"] - 1e-12
    assert summary.get_column("replication_bound").min() >= 1.0
