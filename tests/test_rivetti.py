"""dkg_rivetti (distribution-aware key grouping, Rivetti et al., DEBS 2015): the Rust
grouper against its reference twin, and the family's invariants."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

import keysplit
from reference import fingerprint, h
from reference_rivetti import DkgRivettiTwin
from strategies import keys, seeds, workers

learning = st.integers(min_value=1, max_value=120)

# The integer keys `0 if i % 3 == 0 else i*i % 13`, i in 0..300, routed by
# DkgRivettiTwin(5, 42, learning_tuples=100); the Rust test `rivetti.rs` checks the same.
FIXED_STREAM = [0 if i % 3 == 0 else (i * i) % 13 for i in range(300)]
GOLDEN = (
    "3103033333203313203333023133023333303013103033333203313203333023133023333303013103033333"
    "2033132033334302003302102403202304201203300203401104302003302102403202304201203300203401"
    "1043020033021024032023042012033002034011043020033021024032023042012033002034011043020033"
    "021024032023042012033002034011043020"
)


def check_kg_then_one_worker(stream: list, routed: list[int], n: int, seed: int, learn: int) -> None:
    """KG during learning, one worker per key after it: at most two workers per key."""
    after: dict[object, int] = {}
    placed: dict[object, set[int]] = defaultdict(set)
    for i, (key, worker) in enumerate(zip(stream, routed, strict=True)):
        assert 0 <= worker < n
        if i < learn:
            assert worker == h(0, key, seed) % n
        else:
            assert after.setdefault(key, worker) == worker
        placed[key].add(worker)
    for key, workers_of_key in placed.items():
        assert len(workers_of_key) <= 2
        if key in after:
            assert workers_of_key <= {after[key], h(0, key, seed) % n}


@given(stream=keys, n=workers, seed=seeds, learn=learning)
def test_routes_like_its_reference_twin(stream: list, n: int, seed: int, learn: int) -> None:
    twin = DkgRivettiTwin(n, seed, learning_tuples=learn)
    expected = [twin.route(k) for k in stream]
    grouper = keysplit.Grouper("dkg_rivetti", workers=n, seed=seed, learning_tuples=learn)
    assert grouper.route(stream).to_list() == expected
    assert grouper.loads == twin.loads


@given(stream=keys, n=workers, seed=seeds, learn=learning, every=st.integers(1, 50))
def test_windows_change_nothing(stream: list, n: int, seed: int, learn: int, every: int) -> None:
    plain = keysplit.Grouper("dkg_rivetti", workers=n, seed=seed, learning_tuples=learn)
    windowed = keysplit.Grouper("dkg_rivetti", workers=n, seed=seed, learning_tuples=learn)
    routed = []
    for i, key in enumerate(stream):
        if i % every == 0:
            windowed.end_window()
        routed.append(windowed.route_key(key))
    assert routed == plain.route(stream).to_list()


@given(stream=keys, n=workers, seed=seeds, learn=learning)
def test_kg_while_learning_then_one_worker_per_key(stream: list, n: int, seed: int, learn: int) -> None:
    grouper = keysplit.Grouper("dkg_rivetti", workers=n, seed=seed, learning_tuples=learn)
    check_kg_then_one_worker(stream, grouper.route(stream).to_list(), n, seed, learn)


def test_default_learning_length() -> None:
    assert keysplit.Grouper("dkg_rivetti", workers=4).params["learning_tuples"] == 100_000


# The twin alone (runnable without the Rust grouper).


@given(stream=keys, n=workers, seed=seeds, learn=learning)
def test_twin_kg_while_learning_then_one_worker_per_key(stream: list, n: int, seed: int, learn: int) -> None:
    twin = DkgRivettiTwin(n, seed, learning_tuples=learn)
    check_kg_then_one_worker(stream, [twin.route(k) for k in stream], n, seed, learn)


def test_twin_worked_example() -> None:
    # n = 2, L = 8, stream a×6, b, c: only `a` is heavy (6 >= ceil(8/4) = 2) and gets
    # worker 0; every bucket (weights <= 2) then goes to worker 1.
    for seed in range(20):
        twin = DkgRivettiTwin(2, seed, learning_tuples=8)
        for key in ["a", "b", "a", "a", "c", "a", "a", "a"]:
            assert twin.route(key) == h(0, key, seed) % 2
        assert twin.heavy == {fingerprint("a"): 0}
        assert twin.bucket_workers == [1, 1, 1, 1]
        assert [twin.route(k) for k in ["b", "c", "new", "a"]] == [1, 1, 1, 0]


def test_twin_golden_stream() -> None:
    twin = DkgRivettiTwin(5, 42, learning_tuples=100)
    assert "".join(str(twin.route(k)) for k in FIXED_STREAM) == GOLDEN
    assert twin.loads == [97, 30, 51, 101, 21]
