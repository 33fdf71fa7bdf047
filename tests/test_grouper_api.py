"""The Grouper class: construction, parameters, errors and introspection."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import polars as pl
import pytest

import keysplit


def test_registry_lists_each_grouper_with_its_paper_and_defaults() -> None:
    infos = {info.name: info for info in keysplit.groupers()}
    assert {"shuffle", "key", "pkg"} <= set(infos)
    assert "ICDE 2015" in infos["pkg"].paper
    assert infos["pkg"].defaults == {"choices": 2, "distinct_candidates": True}
    assert "Storm" in infos["pkg"].param_docs["distinct_candidates"]
    for info in infos.values():
        grouper = keysplit.Grouper(info.name, workers=4)
        assert grouper.params == dict(info.defaults)
        # A reader must be able to find the paper: a year beside its venue or title.
        assert re.search(r"\b(19|20)\d\d\b", info.paper), f"{info.name}: no year in {info.paper!r}"


def test_introspection() -> None:
    grouper = keysplit.Grouper("pkg", workers=8, seed=1, distinct_candidates=False)
    assert (grouper.name, grouper.workers, grouper.seed) == ("pkg", 8, 1)
    assert grouper.params == {"choices": 2, "distinct_candidates": False}
    assert repr(grouper) == "Grouper('pkg', workers=8, seed=1, choices=2, distinct_candidates=False)"
    assert grouper.loads == [0] * 8
    grouper.route(["a", "b", "c"])
    assert sum(grouper.loads) == 3
    # Eight counters of one cache line each, at least.
    assert grouper.state_bytes >= 8 * 64
    grouper.end_window()
    assert sum(grouper.loads) == 3


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("key", 0), {}, ValueError, r"workers must be an int in \[1, 1,048,576\], got 0"),
        (("key", -3), {}, ValueError, "got -3"),
        (("key", 1 << 70), {}, ValueError, r"workers must be an int in \[1, "),
        (("key", keysplit.MAX_WORKERS + 1), {}, ValueError, r"workers must be an int in \[1, .*, got 1048577"),
        (("key", 4.0), {}, TypeError, r"workers must be an int in \[1, 1,048,576\], got 4.0 \(float\)"),
        (("key", True), {}, TypeError, r"workers must be an int in \[1, 1,048,576\], got True \(bool\)"),
        (("key", 4), {"seed": -1}, ValueError, r"seed must be in \[0, 2\*\*64\)"),
        (("key", 4), {"seed": "1"}, TypeError, "seed must be an int, got str"),
        (("nope", 4), {}, ValueError, 'unknown grouper "nope"; known groupers: shuffle, key, .*pkg'),
        ((3, 4), {}, TypeError, "name must be a str"),
        (
            ("pkg", 4),
            {"distinct": True},
            ValueError,
            'has no parameter "distinct"; its parameters: distinct_candidates, choices',
        ),
        (("key", 4), {"d": 2}, ValueError, 'grouper "key" takes no parameter, got "d"'),
        (("pkg", 4), {"distinct_candidates": 1}, TypeError, "must be bool, got int"),
        (("pkg", 4), {"distinct_candidates": None}, TypeError, "must be a bool, int, float or str, got NoneType"),
        (("pkg", 4), {"distinct_candidates": 1 << 80}, ValueError, "does not fit in 64 bits"),
    ],
)
def test_bad_construction_raises_a_clear_error(args: tuple, kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        keysplit.Grouper(*args, **kwargs)


def test_one_worker_and_many_workers_route_correctly() -> None:
    assert set(keysplit.Grouper("pkg", workers=1).route(list(range(100))).to_list()) == {0}
    many = keysplit.Grouper("pkg", workers=keysplit.MAX_WORKERS)
    assert max(many.route(list(range(10_000))).to_list()) < keysplit.MAX_WORKERS


def test_hash_key_is_xxh3_with_the_documented_seed() -> None:
    import xxhash

    for key, data in (("café", "café".encode()), (b"\x00\xff", b"\x00\xff"), (-2, (-2 % 2**64).to_bytes(8, "little"))):
        assert keysplit.hash_key(key) == xxhash.xxh3_64_intdigest(data, seed=0)
        assert keysplit.hash_key(key, seed=0, index=3) == xxhash.xxh3_64_intdigest(data, seed=3)
        assert keysplit.hash_key(key, seed=5, index=1) == xxhash.xxh3_64_intdigest(
            data, seed=(5 * 0x9E3779B97F4A7C15 + 1) % 2**64
        )


ROUTING_SCRIPT = """
import json, sys, keysplit
keys = [f"k{i % 37}" for i in range(2000)] + list(range(500))
print(json.dumps({name: keysplit.Grouper(name, workers=11, seed=42).route(keys).to_list()
                  for name in ("shuffle", "key", "pkg")}))
"""


def test_same_seed_and_input_route_the_same_in_a_separate_process() -> None:
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", ROUTING_SCRIPT], check=True, capture_output=True, text=True).stdout
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    keys = [f"k{i % 37}" for i in range(2000)] + list(range(500))
    for name, routed in runs[0].items():
        assert keysplit.Grouper(name, workers=11, seed=42).route(keys).to_list() == routed


def test_routing_is_frozen_across_releases() -> None:
    # Golden routing: a change here changes every user's partitioning and must be a
    # deliberate, announced break. Values computed with tests/reference.py's twins.
    from reference import KeyTwin, PkgTwin

    keys = ["apple", "banana", "cherry", 0, 1, 2**63]
    kg, pkg = KeyTwin(16, seed=3), PkgTwin(16, seed=3)
    assert keysplit.Grouper("key", workers=16, seed=3).route(keys).to_list() == [kg.route(k) for k in keys]
    assert keysplit.Grouper("pkg", workers=16, seed=3).route(keys).to_list() == [pkg.route(k) for k in keys]
    assert keysplit.Grouper("key", workers=16, seed=3).route(keys).to_list() == GOLDEN_KEY_ROUTING


GOLDEN_KEY_ROUTING = [3, 7, 14, 9, 15, 11]


def test_grouper_infos_read_as_a_table_and_as_types() -> None:
    """Discovery: a short repr, a Polars table, resolvable type hints, one description."""
    import typing

    infos = keysplit.groupers()
    assert repr(infos[3]).startswith("GrouperInfo('pkg', ") and "mappingproxy" not in repr(infos)
    table = pl.DataFrame(infos)
    assert table.height == len(infos) and table["name"].to_list() == [i.name for i in infos]
    assert set(typing.get_type_hints(keysplit.GrouperInfo)) == {"name", "title", "paper", "defaults", "param_docs"}
    assert "threshold" in next(i for i in infos if i.name == "flexd").describe()
    # Every call gives fresh dicts: changing one changes no grouper.
    infos[3].defaults["choices"] = 99
    assert keysplit.groupers()[3].defaults["choices"] == 2


def test_one_grouper_spec_everywhere() -> None:
    """Grouper.from_spec reads the command line's form; the Spark API's grouper= takes it too."""
    from keysplit.spark.options import make_grouper

    grouper = keysplit.Grouper.from_spec("flexd:delta=2.0,threshold=0.1", workers=8, seed=3)
    assert grouper.params["delta"] == 2.0 and grouper.params["threshold"] == 0.1 and grouper.seed == 3
    assert make_grouper("flexd:delta=2.0", 8, 0).params["delta"] == 2.0
    with pytest.raises(ValueError, match='did you mean "pdstream"'):
        keysplit.Grouper.from_spec("pdstraem", workers=8)
    with pytest.raises(TypeError, match='parameter "delta" of grouper "flexd" must be float'):
        keysplit.Grouper.from_spec("flexd:delta=two", workers=8)


def test_grouper_name_literal_lists_the_registry() -> None:
    """Editors complete grouper names from keysplit.GrouperName; it must not drift."""
    import typing

    assert typing.get_args(keysplit.GrouperName) == tuple(info.name for info in keysplit.groupers())
