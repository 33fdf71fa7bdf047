"""pstream (Chen, Zhang, Jin, IEEE TC 2021): the Rust grouper against its reference twin,
and the family's invariants."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import h
from reference_pstream import PStreamTwin
from strategies import keys, seeds, workers


@st.composite
def pstream_params(draw: st.DrawFn) -> dict:
    l = draw(st.integers(1, 20))  # noqa: E741 (the paper's name)
    return {
        "l": l,
        "r": draw(st.integers(0, l)),
        "p": draw(st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0))),
        "round_robin": draw(st.booleans()),
    }


FIXED_STREAM = [0 if i % 3 == 0 else (i * i) % 13 for i in range(300)]
# PStreamTwin(5, 42, r=2, p=0.05) over FIXED_STREAM; the Rust test `pstream.rs` checks it.
GOLDEN_LEAST = (
    "3103033333203314204331024124021334301012104032334204112402341024124012341302041204031234"
    "1024124012410241240123403124012401234012340123401234012340123401234012340123401234012340"
    "1234012340123401234012340123401234012340123401234012340123401234012340123401234012340123"
    "401234012340123401234012340123401234"
)


def check_cold_keys_on_kg(stream: list, routed: list[int], twin: PStreamTwin, n: int, seed: int) -> None:
    """Replays the twin beside a routing: cold tuples on KG, never-hot keys on KG only."""
    ever_hot = set()
    placed: dict[object, set[int]] = defaultdict(set)
    for key, worker in zip(stream, routed, strict=True):
        assert twin.route(key) == worker
        if twin.is_hot(key):
            ever_hot.add(key)
        else:
            assert worker == h(0, key, seed) % n
        placed[key].add(worker)
    for key, workers_of_key in placed.items():
        if key not in ever_hot:
            assert workers_of_key == {h(0, key, seed) % n}


@given(stream=keys, n=workers, seed=seeds, params=pstream_params())
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, params: dict) -> None:
    twin = PStreamTwin(n, seed, **params)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper("pstream", workers=n, seed=seed, **params)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


@given(stream=keys, n=workers, seed=seeds, params=pstream_params())
def test_cold_keys_stay_on_their_kg_worker(stream: list, n: int, seed: int, params: dict) -> None:
    routed = keysplit.Grouper("pstream", workers=n, seed=seed, **params).route(stream).to_list()
    check_cold_keys_on_kg(stream, routed, PStreamTwin(n, seed, **params), n, seed)


@given(stream=keys, n=workers, seed=seeds, l=st.integers(1, 20))
def test_one_bit_keys_never_turn_hot(stream: list, n: int, seed: int, l: int) -> None:  # noqa: E741
    # r = l and p = 0: only bit l is ever set, so no key is ever hot: pure KG.
    grouper = keysplit.Grouper("pstream", workers=n, seed=seed, l=l, r=l, p=0.0)
    assert grouper.route(stream).to_list() == [h(0, k, seed) % n for k in stream]


def test_defaults_are_the_spec_ones() -> None:
    params = keysplit.Grouper("pstream", workers=4).params
    assert (params["l"], params["r"], params["p"], params["round_robin"]) == (16, 6, 0.01, False)


# The twin alone (runnable without the Rust grouper).


@given(stream=keys, n=workers, seed=seeds, params=pstream_params())
def test_twin_cold_keys_stay_on_their_kg_worker(stream: list, n: int, seed: int, params: dict) -> None:
    twin = PStreamTwin(n, seed, **params)
    routed = [twin.route(k) for k in stream]
    assert all(0 <= w < n for w in routed)
    check_cold_keys_on_kg(stream, routed, PStreamTwin(n, seed, **params), n, seed)


def test_twin_certain_decay_turns_a_key_hot_at_its_second_update() -> None:
    # l = r = 2, p = 1: {} -> {2} -> {1,2} (hot) -> {0,1,2} -> {0,1,2} ...
    twin = PStreamTwin(3, 11, l=2, r=2, p=1.0)
    states = [0]
    for _ in range(400):
        twin.route("k")
        bits = next(iter(twin.predictor.values()), 0)
        if bits != states[-1]:
            states.append(bits)
    assert states == [0, 0b100, 0b110, 0b111]


def test_twin_golden_stream() -> None:
    twin = PStreamTwin(5, 42, r=2, p=0.05)
    assert "".join(str(twin.route(k)) for k in FIXED_STREAM) == GOLDEN_LEAST
