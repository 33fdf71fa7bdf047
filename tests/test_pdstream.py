"""Pd-Stream (Sun et al.): Table III, the reference twin, and the routing invariants."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference_pdstream import PdStreamTwin, estimate_probability, probability_table, window_length
from strategies import keys, seeds, workers

# Table III: p_hat in percent for n_k = 1..16, N = 16, P_hat(X_k >= n_k) = 99%, eps = 1e-4.
TABLE_III = [25.0, 34.9, 43.1, 50.3, 56.9, 63.0, 68.7, 73.9, 78.8, 83.4, 87.5, 91.2, 94.5, 97.1, 99.0, 99.9]

params = st.fixed_dictionaries(
    {
        "alpha": st.integers(1, 6),
        "expected_probability": st.sampled_from([0.5, 0.9, 0.95, 0.99, 0.999]),
        "epsilon": st.sampled_from([1e-2, 1e-3, 1e-4, 1e-5]),
        "distinct_candidates": st.booleans(),
    }
)


def test_the_twins_table_is_table_iii() -> None:
    table = probability_table(16, 0.99, 1e-4)
    assert [round(p * 100, 1) for p in table] == TABLE_III
    # Fig. 3(a): "62.99%" for n_k = 6 (62.997%, truncated): n_hat = floor(0.63 * 8) = 5.
    assert int(table[5] * 10_000) / 100 == 62.99
    assert int(table[5] * 8) == 5
    assert window_length(4, 8) == 16


def test_the_texts_999_percent_does_not_give_table_iii() -> None:
    assert round(probability_table(16, 0.999, 1e-4)[0] * 100, 1) == 35.1


def test_the_table_has_the_closed_forms_at_its_ends() -> None:
    # n_k = 1: 1 - (1 - p)^N = P;  n_k = N: p^N = P; within the search margin.
    n, target = 16, 0.99
    assert abs(estimate_probability(n, 1, target, 1e-6) - (1 - (1 - target) ** (1 / n))) < 1e-6
    assert abs(estimate_probability(n, n, target, 1e-6) - target ** (1 / n)) < 1e-6


@given(stream=keys, n=workers, seed=seeds, p=params)
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, p: dict) -> None:
    twin = PdStreamTwin(n, seed, **p)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper("pdstream", workers=n, seed=seed, **p)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


@given(stream=keys, n=workers, seed=seeds, p=params)
def test_the_twins_candidate_sets_grow_by_one_within_the_table_bound(stream: list, n: int, seed: int, p: dict) -> None:
    twin = PdStreamTwin(n, seed, **p)
    largest_bound: dict[object, int] = defaultdict(int)
    for key in stream:
        c1, c2 = twin.hash_candidates(key)
        initial = [c1] if c1 == c2 else [c1, c2]
        before = twin.candidate_set(key)
        worker = twin.route(key)
        n_k = twin.occurrences(key)
        assert 0 <= worker < n and 1 <= n_k <= twin.window_length
        if n_k == 1:
            assert worker in (c1, c2) and twin.candidate_set(key) == before
            continue
        after = twin.candidate_set(key)
        if before is None:
            before = initial
            largest_bound.pop(key, None)
        n_hat = twin.estimated_candidates(n_k)
        largest_bound[key] = max(largest_bound[key], n_hat)
        assert after[: len(before)] == before and len(after) <= len(before) + 1
        if len(after) > len(before):
            assert len(after) <= n_hat
        assert len(after) <= max(len(initial), largest_bound[key])
        assert worker in after and len(set(after)) == len(after)


def test_a_single_key_spreads_over_seven_of_eight_workers() -> None:
    # N = 16: n_k saturates at 16, p_hat = 99.94%, n_hat = floor(7.995) = 7.
    grouper = keysplit.Grouper("pdstream", workers=8)
    routed = grouper.route(["only"] * 1000).to_list()
    twin = PdStreamTwin(8)
    assert routed == [twin.route("only") for _ in range(1000)]
    assert len(set(routed)) == 7


def test_the_twin_spreads_a_single_key_over_seven_of_eight_workers() -> None:
    twin = PdStreamTwin(8)
    for _ in range(1000):
        twin.route("only")
    assert len(twin.candidate_set("only")) == 7
    assert sorted(twin.loads)[0] == 0 and sorted(twin.loads)[1:] == [142] + [143] * 6


def test_the_twin_drops_an_entry_when_its_key_leaves_the_window() -> None:
    twin = PdStreamTwin(4)  # N = 8
    twin.route("a")
    twin.route("a")
    entry = twin.candidate_set("a")
    for i in range(7):
        twin.route(1000 + i)
    assert twin.occurrences("a") == 1 and twin.candidate_set("a") == entry
    for i in range(8):
        twin.route(2000 + i)
    assert twin.candidate_set("a") is None and twin.routes == {}


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        ("alpha", 0, "must be in [1, 16], got 0"),
        ("alpha", 17, "got 17"),
        ("expected_probability", 1.0, "must be in (0, 1)"),
        ("epsilon", 0.0, "epsilon"),
    ],
)
def test_bad_parameters_are_refused(param: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        keysplit.Grouper("pdstream", workers=8, **{param: value})


def test_n_k_counts_the_last_n_keys_including_the_incoming_one() -> None:
    twin = PdStreamTwin(2, alpha=2)  # N = 2
    for key in ["a", "b", "a"]:
        twin.route(key)
    assert twin.occurrences("a") == 1 and twin.candidate_set("a") is None
    twin.route("a")
    assert twin.occurrences("a") == 2 and twin.candidate_set("a") is not None
