"""Key containers: every supported layout routes the same keys the same, without copies."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit
from strategies import int_keys, seeds, string_keys


def route(keys: object, name: str = "pkg", seed: int = 7, nulls: str = "raise") -> list[int]:
    return keysplit.Grouper(name, workers=13, seed=seed).route(keys, nulls=nulls).to_list()


def chunked(values: list, cuts: list[int], type: pa.DataType) -> pa.ChunkedArray:
    bounds = sorted({0, len(values), *(c % (len(values) + 1) for c in cuts)})
    return pa.chunked_array(
        [pa.array(values[a:b], type=type) for a, b in zip(bounds, bounds[1:], strict=False)] or [[]],
        type=type,
    )


@given(keys=string_keys, seed=seeds, cuts=st.lists(st.integers(0, 300), max_size=4))
def test_string_keys_route_the_same_in_every_container(keys: list[str], seed: int, cuts: list[int]) -> None:
    expected = route(keys, seed=seed)
    containers = [
        pl.Series(keys, dtype=pl.String),
        pa.array(keys, type=pa.string()),
        pa.array(keys, type=pa.large_string()),
        pa.array(keys, type=pa.string_view()),
        pa.array([k.encode() for k in keys], type=pa.binary()),
        pa.array([k.encode() for k in keys], type=pa.large_binary()),
        pa.array([k.encode() for k in keys], type=pa.binary_view()),
        pa.array(keys, type=pa.string()).dictionary_encode(),
        pl.Series(keys, dtype=pl.Categorical),
        chunked(keys, cuts, pa.string()),
        chunked(keys, cuts, pa.string_view()),
    ]
    for container in containers:
        assert route(container, seed=seed) == expected, type(container)


@given(keys=int_keys, seed=seeds, cuts=st.lists(st.integers(0, 300), max_size=4))
def test_integer_keys_route_the_same_in_every_width_and_container(keys: list[int], seed: int, cuts: list[int]) -> None:
    expected = route(keys, seed=seed)
    containers: list[object] = [
        pl.Series(keys, dtype=pl.Int64),
        np.array(keys, dtype=np.int64),
        np.array(keys, dtype=">i8"),
        np.repeat(np.array(keys, dtype=np.int64), 2)[::2],
        chunked(keys, cuts, pa.int64()),
    ]
    if all(0 <= k < 2**32 for k in keys):
        containers += [pa.array(keys, type=pa.uint32()), np.array(keys, dtype=np.uint32)]
    if all(-(2**15) <= k < 2**15 for k in keys):
        containers += [
            pl.Series(keys, dtype=pl.Int16),
            np.array(keys, dtype=np.int8 if all(-128 <= k < 128 for k in keys) else np.int16),
        ]
    if all(k >= 0 for k in keys):
        containers += [pl.Series(keys, dtype=pl.UInt64), np.array(keys, dtype=np.uint64)]
    for container in containers:
        assert route(container, seed=seed) == expected, container


def test_sliced_arrays_route_only_their_window() -> None:
    keys = [f"k{i}" for i in range(100)]
    for array in (pa.array(keys), pa.array(keys, type=pa.string_view()), pa.array(range(100))):
        window = array.slice(17, 40)
        assert route(window) == route(window.to_pylist())
    series = pl.Series(keys).slice(5, 50)
    assert route(series) == route(keys[5:55])


def test_nulls_are_refused_by_default_and_grouped_on_request() -> None:
    keys = pa.array(["a", None, "b", None])
    grouper = keysplit.Grouper("key", workers=8)
    with pytest.raises(ValueError, match=r"2 null\(s\).*nulls=\"group\""):
        grouper.route(keys)
    assert grouper.loads == [0] * 8, "a refused batch routes nothing"
    grouped = route(keys, name="key", nulls="group")
    assert grouped[1] == grouped[3] == route([""], name="key")[0]
    assert grouped == route(pl.Series(["a", None, "b", None]), name="key", nulls="group")
    assert grouped == route(["a", None, "b", None], name="key", nulls="group")
    assert route(pa.nulls(3), name="key", nulls="group") == [grouped[1]] * 3
    with pytest.raises(ValueError, match="null"):
        grouper.route_key(None)
    with pytest.raises(ValueError, match='nulls must be "raise" or "group"'):
        grouper.route(["a"], nulls="drop")  # type: ignore[arg-type]


def test_a_null_in_a_later_chunk_refuses_the_whole_batch() -> None:
    grouper = keysplit.Grouper("pkg", workers=4)
    with pytest.raises(ValueError, match="null"):
        grouper.route(pa.chunked_array([["a", "b"], ["c", None]]))
    assert sum(grouper.loads) == 0


def test_empty_inputs_route_to_nothing() -> None:
    for empty in ([], pl.Series([], dtype=pl.String), pa.array([], pa.int64()), np.array([], np.uint64)):
        grouper = keysplit.Grouper("pkg", workers=4)
        assert len(grouper.route(empty)) == 0
        assert grouper.loads == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (pa.array([1.5, 2.5]), "unsupported key type Float64"),
        (np.array([1.0, 2.0]), "unsupported key type Float64"),
        (pl.Series([True, False]), "unsupported key type Boolean"),
        (pa.array([[1], [2]]), "unsupported key type List"),
        ({"a": 1}, "keys must be an Arrow array or stream"),
        (42, "keys must be an Arrow array or stream"),
        ("abc", "use route_key"),
        ([1.5], "key at index 0: a key must be str, bytes, int or None, got float"),
        (["a", [1]], "key at index 1"),
    ],
)
def test_wrong_key_types_raise_a_clear_type_error(keys: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        keysplit.Grouper("key", workers=4).route(keys)


def test_integers_beyond_64_bits_are_refused() -> None:
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        keysplit.Grouper("key", workers=4).route([1 << 64])


def test_key_buffers_and_worker_ids_are_shared_not_copied() -> None:
    keys = np.arange(1_000_000, dtype=np.uint64)
    ids = keysplit.Grouper("key", workers=8).route(keys)
    address = np.asarray(ids).ctypes.data
    assert pa.array(ids).buffers()[1].address == address
    assert pl.Series(ids).to_numpy().ctypes.data == address
    assert np.asarray(ids).base is not None
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(ids)[0] = 1


@pytest.mark.parametrize("holder", ["numpy", "pyarrow", "polars", "memoryview"])
def test_recycled_id_buffers_are_reused_only_once_nothing_holds_them(holder: str) -> None:
    # Large outputs come from a pool of freed id buffers (keysplit_core::worker_ids). A
    # buffer some view of the ids still holds must never be handed to the next routing.
    keys = np.arange(2_000_000, dtype=np.uint64)
    grouper = keysplit.Grouper("key", workers=1000, seed=3)
    ids = grouper.route(keys)
    views = {"numpy": np.asarray, "pyarrow": pa.array, "polars": pl.Series, "memoryview": memoryview}
    held = views[holder](ids)
    expected = np.asarray(ids).copy()
    address = np.asarray(ids).ctypes.data
    del ids
    others = [keysplit.Grouper("key", workers=7, seed=s).route(keys) for s in range(3)]
    assert all(np.asarray(other).ctypes.data != address for other in others)
    assert np.array_equal(np.asarray(held), expected)
    del held
    # Once the last view is gone the buffer goes back to the pool and is written anew.
    again = keysplit.Grouper("key", workers=1000, seed=3).route(keys)
    assert np.array_equal(np.asarray(again), expected)
    assert np.array_equal(np.asarray(keysplit.Grouper("key", workers=7, seed=0).route(keys)), np.asarray(others[0]))


def test_worker_ids_behave_as_a_sequence() -> None:
    ids = keysplit.Grouper("shuffle", workers=3).route(["a"] * 5)
    assert len(ids) == 5
    assert list(ids) == ids.to_list() == [0, 1, 2, 0, 1]
    assert ids[-1] == 1
    with pytest.raises(IndexError, match="out of range"):
        ids[5]
    assert repr(ids) == "WorkerIds(len=5, [0, 1, 2, 0, 1])"
    assert pl.Series("w", ids).dtype == pl.UInt32
    assert pa.array(ids).type == pa.uint32()
    assert memoryview(ids).format == "I"


def _peak_rss_bytes() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize("container", ["numpy", "polars-strings"])
def test_routing_does_not_copy_the_keys(container: str) -> None:
    rows = 20_000_000
    if container == "numpy":
        keys: object = np.arange(rows, dtype=np.uint64)  # 160 MB
        key_bytes = rows * 8
    else:
        keys = pl.Series(np.arange(rows, dtype=np.uint64) % 1000).cast(pl.String)
        key_bytes = rows * 16  # one 16-byte view per row, short strings inline
    before = _peak_rss_bytes()
    ids = keysplit.Grouper("key", workers=8).route(keys)
    grown = _peak_rss_bytes() - before
    output_bytes = rows * 4
    # A copy of the keys would add key_bytes on top of the output.
    assert grown < output_bytes + key_bytes // 2, (grown, output_bytes, key_bytes)
    assert len(ids) == rows


def test_routing_releases_the_gil() -> None:
    # While the core routes, another Python thread must be able to run. Its timestamps
    # show when it ran: with the GIL held for the whole call, none could fall in the
    # middle half of it. No duration is asserted.
    import threading
    import time

    keys = np.arange(30_000_000, dtype=np.uint64)
    grouper = keysplit.Grouper("pkg", workers=8)
    stamps: list[int] = []
    running, stop = threading.Event(), threading.Event()

    def tick() -> None:
        running.set()
        while not stop.is_set():
            stamps.append(time.perf_counter_ns())

    ticker = threading.Thread(target=tick)
    ticker.start()
    running.wait()
    started = time.perf_counter_ns()
    grouper.route(keys)
    ended = time.perf_counter_ns()
    stop.set()
    ticker.join()
    quarter = (ended - started) // 4
    assert any(started + quarter < s < ended - quarter for s in stamps)
