"""Multi-source routing: private loads are deterministic, shared loads keep the invariants."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import keysplit


def _sources(count: int, rows: int) -> list[pl.Series]:
    return [
        next(keysplit.datasets.zipf(keys=5000, tuples=rows, z=1.2, seed=source, batch_rows=rows))["key"]
        for source in range(count)
    ]


@pytest.mark.parametrize("name", ["key", "pkg", "w_choices", "pdstream", "cam_hll", "dalton"])
def test_private_loads_equal_routing_each_source_alone(name: str) -> None:
    sources = _sources(3, 20_000)
    sources[1] = ("k" + sources[1].cast(pl.String)).rename("key")  # sources may differ in type
    routed = keysplit.route_sources(name, 16, sources, seed=7, threads=2)
    sequential = keysplit.route_sources(name, 16, sources, seed=7, threads=1)
    assert [ids.to_list() for ids in routed.ids] == [ids.to_list() for ids in sequential.ids]
    assert routed.loads == sequential.loads
    for keys, ids, loads, state_bytes in zip(sources, routed.ids, routed.loads, routed.state_bytes, strict=True):
        alone = keysplit.Grouper(name, workers=16, seed=7)
        assert pl.Series(ids).equals(pl.Series(alone.route(keys)))
        assert loads == alone.loads
        assert state_bytes == alone.state_bytes
    assert routed.total_loads == [sum(column) for column in zip(*routed.loads, strict=True)]


@pytest.mark.parametrize("name", ["pkg", "d_choices", "lm"])
def test_shared_loads_count_every_tuple_once(name: str) -> None:
    sources = _sources(4, 50_000)
    routed = keysplit.route_sources(name, 12, sources, seed=1, shared_loads=True, threads=2)
    counted = np.zeros(12, dtype=np.int64)
    for ids in routed.ids:
        ids = np.asarray(ids)
        assert ids.max() < 12
        counted += np.bincount(ids, minlength=12)
    # Every source holds a handle on the one global vector; it saw every tuple exactly once.
    assert all(loads == routed.loads[0] for loads in routed.loads)
    assert routed.total_loads == counted.tolist()
    assert sum(routed.total_loads) == 4 * 50_000


def test_params_and_nulls_apply_to_every_source() -> None:
    sources = [pl.Series(["a", "b"]), pl.Series(["c", None])]
    with pytest.raises(ValueError, match="source 1: .*1 null"):
        keysplit.route_sources("key", 4, sources)
    routed = keysplit.route_sources("key", 4, sources, nulls="group")
    assert routed.ids[1][1] == keysplit.Grouper("key", workers=4).route_key(b"")
    routed = keysplit.route_sources("pkg", 4, sources[:1], distinct_candidates=False)
    assert len(routed.ids) == 1


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("nope", 4, []), {}, ValueError, "unknown grouper"),
        (("pkg", 0, []), {}, ValueError, "workers must be between"),
        (("pkg", 4, "ab"), {}, TypeError, "sources must be a list"),
        (("pkg", 4, [[1.5]]), {}, TypeError, "source 0: .*key at index 0"),
        (("pkg", 4, []), {"threads": 0}, ValueError, "threads must be at least 1"),
        (("pkg", 4, []), {"bogus": 1}, ValueError, "no parameter .bogus."),
        (("pkg", 4, []), {"shared_loads": 1}, TypeError, "shared_loads must be a bool"),
    ],
)
def test_bad_arguments_raise_clear_errors(args: tuple, kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        keysplit.route_sources(*args, **kwargs)


def test_no_sources_route_nothing() -> None:
    routed = keysplit.route_sources("pkg", 4, [])
    assert (routed.ids, routed.total_loads) == ([], [])
