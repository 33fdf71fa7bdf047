"""Universal-hash grouping (UHLB of the ELB/CLB paper) against its twin in
reference_uhlb.py. Tests marked ``twin only`` need no Rust grouper of this family."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given

import keysplit
from reference import h
from reference_uhlb import PRIME, UhlbTwin, draw_coefficients
from strategies import keys, seeds, workers


@given(stream=keys, n=workers, seed=seeds)
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int) -> None:
    twin = UhlbTwin(n, seed)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper("uhlb", workers=n, seed=seed)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


@given(stream=keys, n=workers, seed=seeds)
def test_sends_each_key_to_one_worker(stream: list, n: int, seed: int) -> None:
    routed = keysplit.Grouper("uhlb", workers=n, seed=seed).route(stream).to_list()
    placed: dict[object, set[int]] = defaultdict(set)
    for key, worker in zip(stream, routed, strict=True):
        placed[key].add(worker)
    a, b = draw_coefficients(seed)
    for key, workers_of_key in placed.items():
        assert workers_of_key == {((a * h(0, key, seed) + b) % PRIME) % n}


@given(seed=seeds)
def test_coefficients_lie_in_their_ranges(seed: int) -> None:
    """Twin only."""
    a, b = draw_coefficients(seed)
    assert 1 <= a < PRIME and 0 <= b < PRIME
    assert draw_coefficients((seed + 1) % (1 << 64))[0] not in (a, b)


def test_routes_a_key_by_hand() -> None:
    """Twin only; tests/uhlb.rs checks the same numbers in the Rust core."""
    a, b = draw_coefficients(0)
    assert (a, b) == (714393656571916682, 851087534771435056)
    x = h(0, "apple", 0)
    assert x == 5871078790819449344
    assert (a * x + b) % PRIME == 510370938693886036
    assert UhlbTwin(10, 0).route("apple") == 6


def test_twin_routes_the_golden_stream_as_the_rust_core() -> None:
    """Twin only: the digest of tests/uhlb.rs, computed by the Rust core."""
    from test_choices import fnv1a, golden_stream

    twin = UhlbTwin(37, 12345)
    assert fnv1a([twin.route(k) for k in golden_stream()]) == 0x6E4925C31CF85FA5
