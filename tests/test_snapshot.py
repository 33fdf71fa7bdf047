"""Snapshot and restore: in a new process, a restored grouper routes on as if uninterrupted."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import keysplit
from keysplit import sketches
from strategies import GROUPER_NAMES

# Small windows, segments and intervals, so that a snapshot lands amid every kind of state:
# learned tables, closed windows, hot-key entries, rebalanced substreams. Shared with the Rust
# tests (rust/keysplit-core/tests/snapshot.rs): each grouper's busy_params in data/groupers.json.
GROUPER_DATA = Path(__file__).parent / "data" / "groupers.json"
BUSY_PARAMS: dict[str, dict[str, bool | int | float | str]] = {
    name: entry["busy_params"] for name, entry in json.loads(GROUPER_DATA.read_text())["groupers"].items()
}


def test_the_grouper_data_has_an_entry_for_every_grouper() -> None:
    blessing = "KEYSPLIT_BLESS=1 cargo test -p keysplit-core --test routing_digests --test snapshot"
    assert set(BUSY_PARAMS) == set(GROUPER_NAMES), f"{GROUPER_DATA} is out of date: run `{blessing}`"


def busy_grouper(name: str, workers: int = 6, seed: int = 11) -> keysplit.Grouper:
    return keysplit.Grouper(name, workers=workers, seed=seed, **BUSY_PARAMS.get(name, {}))


def skewed_keys(rng: random.Random, count: int) -> list[str]:
    return [f"k{min(int(rng.paretovariate(1.2)), 40)}" for _ in range(count)]


# Runs in a fresh interpreter: nothing of this process's groupers can leak into it.
RESTORE_AND_ROUTE = """
import json, sys
import keysplit
cases = json.load(open(sys.argv[1]))
out = {name: list(keysplit.Grouper.restore(bytes.fromhex(case["snapshot"])).route(case["b"]))
       for name, case in cases.items()}
json.dump(out, open(sys.argv[2], "w"))
"""


def test_every_grouper_restored_in_a_new_process_routes_on_as_if_uninterrupted(tmp_path: Path) -> None:
    rng = random.Random(5)
    cases, expected = {}, {}
    for name in GROUPER_NAMES:
        a, b = skewed_keys(rng, 700), skewed_keys(rng, 500)
        uninterrupted, interrupted = busy_grouper(name), busy_grouper(name)
        for grouper in (uninterrupted, interrupted):
            grouper.route(a[:300])
            grouper.end_window()
        expected[name] = list(uninterrupted.route(a[300:] + b))[400:]
        interrupted.route(a[300:])
        cases[name] = {"snapshot": interrupted.snapshot().hex(), "b": b}
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    subprocess.run(
        [sys.executable, "-c", RESTORE_AND_ROUTE, tmp_path / "cases.json", tmp_path / "out.json"],
        check=True,
        timeout=120,
    )
    routed = json.loads((tmp_path / "out.json").read_text())
    assert set(routed) == set(GROUPER_NAMES)
    for name in GROUPER_NAMES:
        assert routed[name] == expected[name], name


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(GROUPER_NAMES),
    a=st.lists(st.sampled_from(["a", "b", "c", "hot", "hot", "hot", "x"]), max_size=200),
    b=st.lists(st.sampled_from(["a", "b", "c", "hot", "hot", "hot", "x"]), max_size=200),
    workers=st.integers(1, 9),
    seed=st.integers(0, 2**64 - 1),
)
def test_snapshot_then_restore_equals_routing_without_interruption(
    name: str, a: list[str], b: list[str], workers: int, seed: int
) -> None:
    whole = busy_grouper(name, workers, seed)
    expected = list(whole.route(a + b)) if a + b else []
    first = busy_grouper(name, workers, seed)
    routed = list(first.route(a)) if a else []
    restored = keysplit.Grouper.restore(first.snapshot())
    assert (restored.name, restored.workers, restored.seed, restored.params) == (
        first.name,
        first.workers,
        first.seed,
        first.params,
    )
    assert restored.loads == first.loads
    routed += list(restored.route(b)) if b else []
    assert routed == expected


def test_pickle_carries_the_routing_state() -> None:
    grouper = busy_grouper("pdstream")
    grouper.route(["hot"] * 50 + ["cold"])
    clone = pickle.loads(pickle.dumps(grouper))
    assert isinstance(clone, keysplit.Grouper)
    assert clone.loads == grouper.loads
    keys = ["hot"] * 30 + ["a", "b"]
    assert list(clone.route(keys)) == list(grouper.route(keys))


SNAPSHOT = busy_grouper("pkg").snapshot()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (SNAPSHOT[:5], "truncated"),
        (SNAPSHOT[:-1], "truncated"),
        (b"definitely not a snapshot", "not a keysplit snapshot"),
        (SNAPSHOT[:8] + b"\x07\x00" + SNAPSHOT[10:], "format version 7 is not supported"),
        (SNAPSHOT[:30] + bytes([SNAPSHOT[30] ^ 1]) + SNAPSHOT[31:], "corrupt: checksum"),
        (SNAPSHOT + b"\x00", "unexpected bytes after its checksum"),
        (sketches.HyperLogLog(6).snapshot(), '"sketch:hyperloglog", not a grouper'),
    ],
    ids=["cut-header", "cut-checksum", "garbage", "newer-version", "bit-flip", "trailing", "sketch"],
)
def test_bad_snapshots_raise_snapshot_error_naming_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(keysplit.SnapshotError, match=message):
        keysplit.Grouper.restore(data)
    assert issubclass(keysplit.SnapshotError, ValueError)


def test_restore_wants_bytes() -> None:
    with pytest.raises(TypeError, match="snapshot must be bytes, got str"):
        keysplit.Grouper.restore("KSPLSNAP")  # type: ignore[arg-type]
    assert keysplit.Grouper.restore(bytearray(SNAPSHOT)).name == "pkg"


def test_every_sketch_survives_snapshot_and_pickle() -> None:
    keys = [f"k{i % 37}" for i in range(500)] + ["hot"] * 200
    count_min = sketches.CountMin(64, 4, seed=3, conservative_update=True)
    summary = sketches.SpaceSaving(8)
    hll = sketches.HyperLogLog(10)
    window = sketches.SlidingWindowCounter(50)
    for sketch in (count_min, summary, hll, window):
        sketch.update(keys)
    probes = ["hot", "k1", "k36", "never"]

    def observed(sketch: object) -> object:
        if isinstance(sketch, sketches.CountMin):
            return [sketch.estimate(k) for k in probes], sketch.total
        if isinstance(sketch, sketches.SpaceSaving):
            return sketch.top(), sketch.total
        if isinstance(sketch, sketches.HyperLogLog):
            return sketch.estimate(), [sketch.maybe_contains(k) for k in probes]
        assert isinstance(sketch, sketches.SlidingWindowCounter)
        return [sketch.count(k) for k in probes], len(sketch)

    for sketch in (count_min, summary, hll, window):
        for clone in (type(sketch).restore(sketch.snapshot()), pickle.loads(pickle.dumps(sketch))):
            assert type(clone) is type(sketch)
            assert observed(clone) == observed(sketch)
            clone.update(keys[:100])
            sketch_copy = type(sketch).restore(sketch.snapshot())
            sketch_copy.update(keys[:100])
            assert observed(clone) == observed(sketch_copy)
    with pytest.raises(keysplit.SnapshotError, match='holds "sketch:hyperloglog", not "sketch:keyed_space_saving"'):
        sketches.SpaceSaving.restore(hll.snapshot())


# A snapshot forged with a valid checksum: shuffle's next worker set to 100 of 4, a state
# no routing produces. Restore checks the state and refuses it, naming what is wrong, so
# that nothing routes on it (every grouper's check_state; the Rust forging test covers
# every grouper and byte position).
def test_a_forged_state_is_refused_at_restore_with_the_reason() -> None:
    frame = bytearray(keysplit.Grouper("shuffle", workers=4).snapshot())
    body_end = len(frame) - 8
    # The state is the body's last field: next, workers, load scope, counter count, counters.
    assert frame[body_end - 8 : body_end] == bytes([0, 4, 0, 4, 0, 0, 0, 0])
    frame[body_end - 8] = 100
    frame[body_end:] = xxhash.xxh3_64_intdigest(bytes(frame[:body_end])).to_bytes(8, "little")
    with pytest.raises(
        keysplit.SnapshotError, match='state of "shuffle" does not match its header: a next worker 100 of 4'
    ):
        keysplit.Grouper.restore(bytes(frame))
