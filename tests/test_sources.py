"""Multi-source routing: private loads are deterministic, shared loads keep the invariants."""

from __future__ import annotations

import os
import subprocess
import sys

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
        (("pkg", 0, []), {}, ValueError, r"workers must be an int in \["),
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


def test_a_large_batch_routes_alike_on_any_number_of_threads() -> None:
    # KG cuts a batch of over 2^19 keys per thread into parts on several threads
    # (keysplit_core::parallel); KEYSPLIT_MAX_THREADS caps them. Ids and loads must not
    # depend on the cap, for integer and string keys, with nulls, over chunks.
    script = """
import hashlib, sys
import polars as pl, pyarrow as pa
import keysplit
ranks = next(keysplit.datasets.zipf(keys=100_000, tuples=1_600_000, z=1.1, seed=5, batch_rows=1_600_000))["key"]
strings = ("k" + ranks.cast(pl.String)).rename("key")
with_nulls = pa.chunked_array([pa.array(strings.to_list()[:1_100_000] + [None]), pa.array(strings.to_list()[1_100_000:])])
digest = hashlib.sha256()
for keys in (ranks, strings, with_nulls):
    for workers in (8, 1000):
        grouper = keysplit.Grouper("key", workers=workers, seed=3)
        digest.update(memoryview(grouper.route(keys, nulls="group")))
        digest.update(repr(grouper.loads).encode())
print(digest.hexdigest())
"""
    digests = set()
    for cap in ("1", "2", "3"):
        env = {**os.environ, "KEYSPLIT_MAX_THREADS": cap}
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        digests.add(result.stdout.strip())
    assert len(digests) == 1, digests
