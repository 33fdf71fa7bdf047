"""Dynamic Key Grouping (Dalabasmaz and Can): Table 1, the reference twin against the Rust
grouper, and the family's invariants (contiguous ring slices within Table 1's maximum)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference_dkg import DkgTwin, max_machines, threshold_load, threshold_table
from strategies import keys, seeds, workers

# Table 1: machines, ideal load (%), threshold load (%), max machines.
TABLE_1 = [
    (5, 20.00, 24.47, 5),
    (10, 10.00, 13.16, 8),
    (20, 5.00, 7.24, 14),
    (50, 2.00, 3.41, 30),
    (100, 1.00, 2.00, 51),
]

# Small spaces and short windows, so that promotions, scale outs and scale downs happen
# within a Hypothesis stream; the defaults (15 000 tuples per window) are checked by the
# golden stream below.
params = st.fixed_dictionaries(
    {
        "window_tuples": st.integers(1, 40),
        "old_cycle_windows": st.integers(1, 4),
        "warmup_windows": st.integers(0, 2),
        "expected_keys": st.integers(10, 40),
    }
)

# The integer keys `0 if i % 3 != 0 else i*7 % 11`, i in 0..300, routed by
# DkgTwin(6, 11, window_tuples=10, old_cycle_windows=2, warmup_windows=1, expected_keys=10);
# the Rust test `dkg.rs` checks the same routing.
FIXED_STREAM = [0 if i % 3 != 0 else (i * 7) % 11 for i in range(300)]
FIXED_PARAMS = {"window_tuples": 10, "old_cycle_windows": 2, "warmup_windows": 1, "expected_keys": 10}
GOLDEN = (
    "505405205050505305101411211521222212433301520512401250412350512102335401350512012450212450"
    "315012250123450315012501425201450312501225012450315012501422150450312501225012450312501520"
    "312150450312501223501425301501522401250412350510212350412350501512401225401350512201235401"
    "350510512401222450315012250125"
)


def test_the_twins_threshold_table_is_table_1() -> None:
    table = threshold_table([row[0] for row in TABLE_1])
    for (m, ideal, threshold, max_m), expected in zip(table, TABLE_1, strict=True):
        assert (m, round(ideal, 2), round(threshold, 2), max_m) == expected


def test_the_maximum_is_what_the_threshold_allows() -> None:
    for m in range(1, 500):
        top = max_machines(m)
        assert min(2, m) <= top <= m
        if top < m:
            # top - 1 machines at Ls percent fit in 100%, top machines do not.
            assert (top - 1) * threshold_load(m) <= 100 < top * threshold_load(m)
    assert math.floor(100 / threshold_load(100)) + 1 == 51


def test_the_twin_routes_the_golden_stream() -> None:
    twin = DkgTwin(6, 11, **FIXED_PARAMS)
    assert "".join(str(twin.route(k)) for k in FIXED_STREAM) == GOLDEN
    assert twin.loads == [62, 62, 62, 26, 25, 63]


def test_a_hot_key_scales_out_then_down_by_hand() -> None:
    # n = 4: Li = 25%, Ls = 30%; the same walk as the Rust test of that name.
    twin = DkgTwin(4, 7, window_tuples=10**6, old_cycle_windows=1, warmup_windows=0, expected_keys=10)
    i = twin.first_worker("a")
    ring = [(i + o) % 4 for o in range(4)]
    assert [twin.route("a") for _ in range(3)] == [ring[0], ring[1], ring[0]]
    twin.end_window()
    assert twin.space_of("a") == "old"
    assert twin.route("a") == ring[2] and twin.width("a") == 3  # 33.3% >= 30%: scale out
    assert twin.route("a") == ring[1] and twin.width("a") == 2  # two below 30%: scale down


def check_ring_slices(twin: DkgTwin, stream: list, closes: set[int]) -> list[int]:
    """Route `stream`, closing windows before the given positions, and check the ring-slice
    invariant after each tuple: the key's candidates are the contiguous ring slice from
    ``h_0(k) mod n``, between ``min(2, n)`` and Table 1's maximum wide, and hold the worker
    (unless the window end at this tuple discarded the key's item)."""
    n = twin.workers
    routed = []
    for t, key in enumerate(stream):
        if t in closes:
            twin.end_window()
        before = twin.width(key)
        worker = twin.route(key)
        routed.append(worker)
        width = twin.width(key)
        first = twin.first_worker(key)
        assert 0 <= worker < n
        assert min(2, n) <= width <= max_machines(n) and width <= before + 1
        assert twin.candidates(key) == [(first + j) % n for j in range(width)]
        assert worker in twin.candidates(key) or twin.space_of(key) is None
    return routed


@given(stream=keys, n=workers, seed=seeds, p=params, closes=st.sets(st.integers(0, 300), max_size=5))
def test_the_twins_candidates_are_ring_slices_within_table_1(
    stream: list, n: int, seed: int, p: dict, closes: set[int]
) -> None:
    check_ring_slices(DkgTwin(n, seed, **p), stream, closes)


@given(stream=keys, n=workers, seed=seeds, p=params)
def test_the_twin_is_deterministic(stream: list, n: int, seed: int, p: dict) -> None:
    first, second = DkgTwin(n, seed, **p), DkgTwin(n, seed, **p)
    assert [first.route(k) for k in stream] == [second.route(k) for k in stream]


@given(stream=keys, n=workers, seed=seeds, p=params)
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, p: dict) -> None:
    twin = DkgTwin(n, seed, **p)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper("dkg", workers=n, seed=seed, **p)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


@given(stream=keys, n=workers, seed=seeds, p=params, cut=st.integers(0, 300))
def test_end_window_like_its_reference_twin(stream: list, n: int, seed: int, p: dict, cut: int) -> None:
    twin = DkgTwin(n, seed, **p)
    expected = [twin.route(k) for k in stream[:cut]]
    twin.end_window()
    expected += [twin.route(k) for k in stream[cut:]]
    grouper = keysplit.Grouper("dkg", workers=n, seed=seed, **p)
    routed = grouper.route(stream[:cut]).to_list()
    grouper.end_window()
    routed += grouper.route(stream[cut:]).to_list()
    assert routed == expected


def test_the_rust_grouper_routes_the_golden_stream() -> None:
    grouper = keysplit.Grouper("dkg", workers=6, seed=11, **FIXED_PARAMS)
    assert "".join(map(str, grouper.route(FIXED_STREAM).to_list())) == GOLDEN
