"""CM, AM, cAM, LM (Katsipoulakis et al., VLDB 2017): the Rust groupers against their
reference twins, and the family's invariants.

The invariants are checked on the twins (they hold for the Rust groupers through the
differential tests) and, where cheap, on the Rust groupers directly.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import fingerprint
from reference_holistic import TWINS, HyperLogLogTwin
from strategies import keys, seeds, workers
from twins import assert_routes_like_twin

NAMES = ["cm", "am", "cam", "lm", "cm_hll", "am_hll", "cam_hll", "lm_hll"]
EXACT_AFFINITY = ["am", "cam"]

# Skewed streams: one key about half of the time, so that keys split.
skewed = st.lists(st.one_of(st.just("hot"), st.sampled_from(["a", "b", "c", 0, 1, 2])), max_size=300)
# Many distinct keys, so that the HLL probe meets its false positives.
spread = st.lists(st.integers(0, 5_000), max_size=300)
streams = st.one_of(keys, skewed, spread)
# Tuple positions before which end_window() is called.
window_ends = st.sets(st.integers(0, 300), max_size=4)


@st.composite
def named_params(draw, names=NAMES):
    name = draw(st.sampled_from(names))
    params = {
        "choices": draw(st.sampled_from([1, 2, 2, 3, 5])),
        "window_tuples": draw(st.sampled_from([0, 0, 1, 7, 50])),
        "distinct_candidates": draw(st.booleans()),
    }
    if name.startswith("lm"):
        params["p"] = draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0)))
    return name, params


@given(stream=streams, n=workers, seed=seeds, named=named_params(), ends=window_ends)
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, named, ends: set[int]) -> None:
    name, params = named
    assert_routes_like_twin(name, TWINS[name], stream, n, seed, params, ends, as_batch=False)


@given(stream=streams, n=workers, seed=seeds, named=named_params())
def test_batch_routing_equals_the_twin(stream: list, n: int, seed: int, named) -> None:
    name, params = named
    twin = TWINS[name](n, seed, **params)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper(name, workers=n, seed=seed, **params)
    assert grouper.route(stream).to_list() == expected


@given(stream=streams, n=workers, seed=seeds, named=named_params(), ends=window_ends)
def test_every_key_goes_to_one_of_its_candidates(stream: list, n: int, seed: int, named, ends: set[int]) -> None:
    name, params = named
    twin = TWINS[name](n, seed, **params)
    for i, key in enumerate(stream):
        if i in ends:
            twin.end_window()
        candidates = twin.candidates(key)
        assert len(candidates) == params["choices"]
        worker = twin.route(key)
        assert 0 <= worker < n and worker in candidates


@given(stream=streams, n=workers, seed=seeds, named=named_params(EXACT_AFFINITY), ends=window_ends)
def test_exact_affinity_sends_each_key_to_one_worker_per_window(
    stream: list, n: int, seed: int, named, ends: set[int]
) -> None:
    name, params = named
    twin = TWINS[name](n, seed, **params)
    window: dict = {}
    in_window = 0
    for i, key in enumerate(stream):
        if i in ends:
            twin.end_window()
            window, in_window = {}, 0
        worker = twin.route(key)
        assert window.setdefault(fingerprint(key), worker) == worker
        in_window += 1
        if params["window_tuples"] and in_window == params["window_tuples"]:
            window, in_window = {}, 0


@given(stream=spread, seed=seeds)
def test_the_hll_twins_probe_never_misses_a_key_it_was_sent(stream: list, seed: int) -> None:
    twin = TWINS["cm_hll"](4, seed)
    sent: dict = {}
    for key in stream:
        worker = twin.route(key)
        sent.setdefault(worker, set()).add(fingerprint(key))
    for worker, items in sent.items():
        assert all(twin.C[worker].already_sent(item) for item in items)


def test_the_hll_twin_estimates_within_three_standard_errors() -> None:
    sketch = HyperLogLogTwin()
    for item in range(20_000):
        sketch.insert(fingerprint(item))
    assert abs(sketch.estimate() - 20_000) / 20_000 <= 3 * 1.04 / math.sqrt(4096)


def test_the_hll_twin_places_items_by_the_documented_layout() -> None:
    # Register index: the top 12 bits; rank: 1 + leading zeros of the low 52 bits, <= 31.
    sketch = HyperLogLogTwin()
    index, rank = sketch.position(fingerprint("hot"))
    assert 0 <= index < 4096 and 1 <= rank <= 31
    assert HyperLogLogTwin().estimate() == 0.0


def test_lm_defaults_and_hand_worked_example() -> None:
    # p = 0.5 (Section 5.1); every algorithm defaults to M = 2 candidates and no windows by count.
    twin = TWINS["lm"](2)
    assert twin.p == 0.5 and twin.choices == 2 and twin.window_tuples == 0
    a = next(k for k in range(1000) if twin.candidates(k) == [0, 1])
    # a: tie -> 0; a: H = [1, 0] -> 1; a: H = [0, 0] -> 0 (see tests/holistic.rs).
    assert [twin.route(a) for _ in range(3)] == [0, 1, 0]


@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith("_hll")])
def test_hll_state_fits_table_4_at_32_workers(name: str) -> None:
    # Table 4: 0.08 MB at 32 workers for the -H variants; we hold them to at most 0.1 MB.
    grouper = keysplit.Grouper(name, workers=32, seed=0)
    grouper.route(list(range(100_000)))
    assert 32 * 2560 <= grouper.state_bytes <= 100_000


@pytest.mark.parametrize(
    ("name", "param", "value", "message"),
    [
        ("cm", "choices", 0, 'parameter "choices" of grouper "cm" must be in [1, 32], got 0'),
        ("am", "choices", 33, "must be in [1, 32], got 33"),
        ("cam_hll", "window_tuples", -1, "must be at least 0"),
        ("lm", "p", 1.5, "must be in [0, 1], got 1.5"),
        ("lm_hll", "p", -0.5, "must be in [0, 1], got -0.5"),
    ],
)
def test_out_of_range_parameters_are_refused(name: str, param: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        keysplit.Grouper(name, workers=4, seed=0, **{param: value})


def test_p_belongs_to_lm_only() -> None:
    with pytest.raises(ValueError, match="p"):
        keysplit.Grouper("cm", workers=4, p=0.5)
