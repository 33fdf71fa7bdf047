"""Hostile input, for every grouper: each case routes correctly or raises a clear error.

"Correctly" means exactly as the same keys in a plain list route on a fresh grouper of the
same configuration; "clear" means a ValueError or TypeError whose message names what is
wrong. Nothing may panic, hang or lose a tuple.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import keysplit
from strategies import GROUPER_NAMES

if TYPE_CHECKING:
    from collections.abc import Callable

WORKERS = 5
WORDS = ["hot", "hot", "a", "b", "hot", "c", "", "café", "hot", "d"] * 30


def fresh(name: str, workers: int = WORKERS) -> keysplit.Grouper:
    return keysplit.Grouper(name, workers=workers, seed=3)


def routed_as_list(name: str, keys: list[Any], *, nulls: str = "raise") -> list[int]:
    grouper = fresh(name)
    return [grouper.route_key(k, nulls=nulls) for k in keys]  # type: ignore[arg-type]


# Each case: (hostile keys, the same keys as a plain list, route options).
ROUTABLE: dict[str, Callable[[], tuple[Any, list[Any], dict[str, str]]]] = {
    "nulls-grouped": lambda: (pa.array(["a", None, "hot", None]), ["a", None, "hot", None], {"nulls": "group"}),
    "empty-arrow": lambda: (pa.array([], pa.string()), [], {}),
    "empty-polars": lambda: (pl.Series([], dtype=pl.Int64), [], {}),
    "empty-numpy": lambda: (np.array([], dtype=np.uint64), [], {}),
    "chunked-mixed-sizes": lambda: (
        pa.chunked_array([WORDS[:1], [], WORDS[1:4], WORDS[4:250], [], WORDS[250:]], pa.string()),
        WORDS,
        {},
    ),
    "sliced-with-offset": lambda: (pa.array(WORDS)[7:203], WORDS[7:203], {}),
    "sliced-chunked": lambda: (pa.chunked_array([WORDS[:100], WORDS[100:]]).slice(95, 50), WORDS[95:145], {}),
    "sliced-with-nulls": lambda: (
        pa.array([None, "a", None, "hot", "b"])[1:],
        ["a", None, "hot", "b"],
        {"nulls": "group"},
    ),
    "dictionary-arrow": lambda: (pa.array(WORDS).dictionary_encode(), WORDS, {}),
    "dictionary-polars": lambda: (pl.Series(WORDS, dtype=pl.Categorical), WORDS, {}),
    "non-utf8-binary": lambda: (
        pa.array([b"\xff\xfe", b"\x80", b"", b"\xff\xfe"] * 20, pa.binary()),
        [b"\xff\xfe", b"\x80", b"", b"\xff\xfe"] * 20,
        {},
    ),
    "one-megabyte-keys": lambda: (
        pa.array(["x" * (1 << 20), "y" * (1 << 20), "x" * (1 << 20)], pa.large_string()),
        ["x" * (1 << 20), "y" * (1 << 20), "x" * (1 << 20)],
        {},
    ),
    "numpy-strided": lambda: (np.arange(400, dtype=np.int64)[::3] % 7, [int(v) for v in np.arange(400)[::3] % 7], {}),
    "numpy-big-endian": lambda: (np.arange(50, dtype=">u4"), list(range(50)), {}),
}


@pytest.mark.parametrize("case", sorted(ROUTABLE))
@pytest.mark.parametrize("name", GROUPER_NAMES)
def test_hostile_but_valid_keys_route_like_a_plain_list(name: str, case: str) -> None:
    keys, as_list, options = ROUTABLE[case]()
    grouper = fresh(name)
    ids = grouper.route(keys, **options).to_list()  # type: ignore[arg-type]
    assert ids == routed_as_list(name, as_list, **options)
    assert sum(grouper.loads) == len(as_list)


REFUSED: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "nulls-by-default": (lambda: pa.array(["a", None]), ValueError, r"1 null\(s\); nulls are refused"),
    "null-in-late-chunk": (lambda: pa.chunked_array([["a"] * 5, [None]]), ValueError, "null"),
    "float-arrow": (lambda: pa.array([1.5, math.nan]), TypeError, "unsupported key type Float64"),
    "float-polars": (lambda: pl.Series([1.0]), TypeError, "unsupported key type Float64"),
    "float-numpy": (lambda: np.array([1.0]), TypeError, "unsupported key type Float64"),
    "float-in-list": (lambda: ["a", 2.5], TypeError, "key at index 1"),
    "nested-lists": (lambda: pa.array([[1], [2]]), TypeError, "unsupported key type List"),
    "struct": (lambda: pa.array([{"a": 1}]), TypeError, "unsupported key type Struct"),
    "int-beyond-64-bits": (lambda: [1 << 64], ValueError, "does not fit in 64 bits"),
    "a-string-not-a-column": (lambda: "hot", TypeError, "use route_key"),
    "a-mapping": (lambda: {"k": 1}, TypeError, "keys must be an Arrow array or stream"),
    "none": (lambda: None, TypeError, "keys must be an Arrow array or stream"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("name", GROUPER_NAMES)
def test_invalid_keys_are_refused_before_any_routing(name: str, case: str) -> None:
    make, error, message = REFUSED[case]
    grouper = fresh(name)
    grouper.route(["warm", "up"])
    before = grouper.snapshot()
    with pytest.raises(error, match=message):
        grouper.route(make())
    # Nothing was routed: the state is exactly what it was.
    assert keysplit.Grouper.restore(before).loads == grouper.loads
    assert grouper.route(WORDS).to_list() == keysplit.Grouper.restore(before).route(WORDS).to_list()


@pytest.mark.parametrize("name", GROUPER_NAMES)
@pytest.mark.parametrize("workers", [1, 2, 65_536, keysplit.MAX_WORKERS])
def test_one_worker_up_to_the_maximum_route_every_tuple(name: str, workers: int) -> None:
    grouper = fresh(name, workers)
    ids = grouper.route(WORDS[:100]).to_list()
    assert all(0 <= w < workers for w in ids)
    assert sum(grouper.loads) == 100
    if workers == 1:
        assert set(ids) == {0}


@pytest.mark.parametrize("name", GROUPER_NAMES)
@pytest.mark.parametrize("workers", [0, -1, keysplit.MAX_WORKERS + 1, 1 << 64])
def test_worker_counts_out_of_range_are_refused(name: str, workers: int) -> None:
    with pytest.raises(ValueError, match=r"workers must be an int in \[1, 1,048,576\]"):
        keysplit.Grouper(name, workers=workers)


HOSTILE_VALUES = [math.nan, math.inf, -math.inf, -1, -1.0, 0, 0.0, 1 << 62, 1e300, -(1 << 63), "x", True]


def hostile_param_cases() -> list[tuple[str, str, object]]:
    return [
        (info.name, param, value) for info in keysplit.groupers() for param in info.defaults for value in HOSTILE_VALUES
    ]


@pytest.mark.parametrize(("name", "param", "value"), hostile_param_cases())
def test_hostile_parameters_are_refused_by_name_or_route_safely(name: str, param: str, value: object) -> None:
    try:
        grouper = keysplit.Grouper(name, workers=WORKERS, **{param: value})  # type: ignore[arg-type]
    except (ValueError, TypeError) as error:
        assert param in str(error), str(error)
        return
    assert not (isinstance(value, float) and math.isnan(value)), f"{name} accepted {param}=nan"
    ids = grouper.route(WORDS).to_list()
    assert all(0 <= w < WORKERS for w in ids)
    assert sum(grouper.loads) == len(WORDS)


def test_a_batch_of_a_hundred_million_keys_routes_in_place() -> None:
    keys = np.arange(100_000_000, dtype=np.uint64)
    keys %= 1_000_003
    grouper = fresh("key", 64)
    ids = np.asarray(grouper.route(keys))
    assert ids.shape == (100_000_000,) and ids.dtype == np.uint32
    assert sum(grouper.loads) == 100_000_000
    # Spot-check against single-key routing, which goes through another code path.
    probe = fresh("key", 64)
    for i in (0, 1, 99_999_999, 54_321_987):
        assert ids[i] == probe.route_key(int(keys[i]))


@pytest.mark.parametrize(
    ("make_error", "kind", "builtin"),
    [
        (lambda: keysplit.Grouper("pgk", workers=4), keysplit.ConfigError, ValueError),
        (lambda: keysplit.Grouper("pkg", workers=0), keysplit.ConfigError, ValueError),
        (lambda: keysplit.Grouper("flexd", workers=4, delta=-1.0), keysplit.ConfigError, ValueError),
        (lambda: keysplit.Grouper("flexd", workers=4, delta="big"), keysplit.ConfigTypeError, TypeError),
        (lambda: keysplit.Grouper("pkg", workers="4"), keysplit.ConfigTypeError, TypeError),
        (lambda: keysplit.sketches.SpaceSaving(0), keysplit.ConfigError, ValueError),
        (lambda: keysplit.Grouper("pkg", workers=4).route(["a", None]), keysplit.KeyInputError, ValueError),
        (lambda: keysplit.Grouper("pkg", workers=4).route([2**64]), keysplit.KeyInputError, ValueError),
        (lambda: keysplit.Grouper("pkg", workers=4).route(pl.Series([1.5])), keysplit.KeyTypeError, TypeError),
        (lambda: keysplit.Grouper("pkg", workers=4).route("abc"), keysplit.KeyTypeError, TypeError),
        (lambda: keysplit.Grouper("pkg", workers=4).route([["nested"]]), keysplit.KeyTypeError, TypeError),
        (
            lambda: keysplit.route(pl.DataFrame({"k": [1]}), key="x", grouper=keysplit.Grouper("pkg", workers=2)),
            keysplit.KeyInputError,
            ValueError,
        ),
        (lambda: keysplit.route_sources("pkg", workers=2, sources=[["a"], [None]]), keysplit.KeyInputError, ValueError),
        (lambda: keysplit.route_sources("pkg", workers=2, sources=[["a"], [1.5]]), keysplit.KeyTypeError, TypeError),
        (lambda: keysplit.Grouper.restore(b"KSPLSNAP" + bytes(30)), keysplit.SnapshotError, ValueError),
    ],
)
def test_errors_are_typed_and_still_the_builtin_they_were(make_error, kind, builtin) -> None:
    with pytest.raises(kind) as caught:
        make_error()
    assert isinstance(caught.value, keysplit.KeysplitError) and isinstance(caught.value, builtin)
