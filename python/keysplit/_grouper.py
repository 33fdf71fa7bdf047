"""The grouper API: one class for every grouper of the registry."""

from __future__ import annotations

import ast
import functools
import sys

# At run time too: typing.get_type_hints(GrouperInfo), and Polars through it, resolve it.
from collections.abc import Mapping  # noqa: TC003
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard

import polars as pl

from keysplit import _core
from keysplit._checks import require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError, did_you_mean

if TYPE_CHECKING:
    from keysplit._core import WorkerIds

#: The grouper of the Spark pipelines and ``keysplit run`` when none is given: on Zipf 1.5,
#: Zipf 2.0 and uniform keys (10^7 rows, 32 workers, ``benches/spark_vs_native.py``)
#: ``aggregate`` took 0.69×, 0.80× and 0.54× of Pd-Stream's time (the default before it) in
#: the same session, at λ ≤ 0.01 and a fraction of its partial rows. Here, not in
#: ``keysplit.spark``, so that the command line starts without Spark's client installed.
DEFAULT_GROUPER = "elastic"

#: A grouper parameter's value.
ParamValue: TypeAlias = bool | int | float | str
NullPolicy = Literal["raise", "group"]
#: Every registered grouper's name, for editors and type checkers (a test keeps it equal to
#: the registry). Specs with parameters go through :meth:`Grouper.from_spec`.
GrouperName = Literal[
    "shuffle",
    "key",
    "uhlb",
    "pkg",
    "d_choices",
    "w_choices",
    "rr_head",
    "dkg_rivetti",
    "dkg",
    "flexd",
    "pdstream",
    "cm",
    "am",
    "cam",
    "lm",
    "cm_hll",
    "am_hll",
    "cam_hll",
    "lm_hll",
    "elb",
    "clb",
    "pstream",
    "dagreedy",
    "dalton",
    "elastic",
]


@dataclass(frozen=True, repr=False)
class GrouperInfo:
    """A registered grouper: its name, the paper it follows and its default parameters.

    ``pl.DataFrame(keysplit.groupers())`` gives them as a table (``defaults`` and
    ``param_docs`` as structs)."""

    name: str
    title: str
    paper: str
    defaults: Mapping[str, ParamValue]
    param_docs: Mapping[str, str]

    def __repr__(self) -> str:
        defaults = ", ".join(f"{k}={v!r}" for k, v in self.defaults.items())
        return f"GrouperInfo({self.name!r}, {self.title!r}, defaults: {defaults or '-'})"

    def describe(self) -> str:
        """Everything about the grouper, as ``keysplit groupers NAME`` prints it."""
        lines = [f"{self.name}: {self.title}", f"  paper: {self.paper}"]
        if self.defaults:
            lines.append("  parameters (default, meaning):")
            width = max(map(len, self.defaults))
            for name, value in self.defaults.items():
                lines.append(f"    {name:<{width}}  {value!r:<10} {self.param_docs.get(name, '')}".rstrip())
        else:
            lines.append("  parameters: none")
        return "\n".join(lines)


def groupers() -> list[GrouperInfo]:
    """Every grouper keysplit has, with its paper and its default parameters."""
    return [
        GrouperInfo(
            name=entry["name"],
            title=entry["title"],
            paper=entry["paper"],
            # Fresh dicts on every call (so nothing shared can change), which Polars and
            # dataclasses.asdict can copy, as they cannot a mappingproxy.
            defaults=dict(entry["defaults"]),
            param_docs=dict(entry["param_docs"]),
        )
        for entry in _core.groupers()
    ]


@functools.cache
def _grouper_names() -> tuple[str, ...]:
    return tuple(info.name for info in groupers())


def _is_grouper_name(name: str) -> TypeGuard[GrouperName]:
    return name in _grouper_names()


def require_grouper_name(name: object) -> GrouperName:
    """``name``, if a grouper has it; :class:`ConfigTypeError` or :class:`ConfigError` (with
    the nearest names) otherwise."""
    if not isinstance(name, str):
        raise ConfigTypeError(f"name must be a str, got {type(name).__name__}")
    if not _is_grouper_name(name):
        known = _grouper_names()
        hint = did_you_mean(name, known)
        raise ConfigError(f'unknown grouper "{name}"; {hint}known groupers: {", ".join(known)}')
    return name


def check_grouper_config(name: object, workers: object, seed: object) -> None:
    """The checks every grouper construction makes before the core sees its arguments."""
    require_grouper_name(name)
    require_workers(workers)
    require_seed(seed)


def parse_spec(spec: str) -> tuple[str, dict[str, ParamValue]]:
    """Splits a spec of the command line's form, ``"name:a=1,b=x"``, into
    ``("name", {"a": 1, "b": "x"})``: a grouper's (:meth:`Grouper.from_spec`) or a dataset's
    (:func:`keysplit.simulate.dataset`).

    Values are read as Python literals (ints, floats, ``True``/``False``) and otherwise kept
    as strings, so ``path=/data/x.csv`` needs no quotes.
    """
    name, _, rest = spec.strip().partition(":")
    if not name:
        raise ConfigError(f"empty name in spec {spec!r}")
    params: dict[str, ParamValue] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        param, equals, text = item.partition("=")
        if not equals or not param.strip():
            raise ConfigError(f"expected param=value in spec {spec!r}, got {item!r}")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()
        if not isinstance(value, (bool, int, float, str)):
            value = text.strip()
        params[param.strip()] = value
    return name.strip(), params


def importable_keys(keys: Any) -> Any:
    """Keys in a form the core imports as they are.

    A pandas Series goes through Polars (and Arrow). Strided or byte-swapped NumPy arrays
    are copied to C-contiguous native-endian ones,
    which the buffer protocol needs. A Polars column of dtype Null (all nulls) becomes an
    all-null String column: Polars exports Null arrays with a buffer the Arrow C data
    interface does not allow. Every other container is shared.
    """
    if isinstance(keys, pl.Series):
        return keys.cast(pl.String) if keys.dtype == pl.Null else keys
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(keys, pandas.Series):
        # Through Arrow, without a copy where Arrow allows: object strings, string[pyarrow],
        # categoricals and nullable integers all become Arrow arrays the core reads.
        return importable_keys(pl.from_pandas(keys))
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(keys, numpy.ndarray):
        return keys
    if keys.dtype.byteorder not in "=|":
        keys = keys.astype(keys.dtype.newbyteorder("="))
    return numpy.ascontiguousarray(keys)


class Grouper:
    """A key grouper: routes each tuple of one source to one of ``workers`` workers.

    Parameters
    ----------
    name
        A grouper of :func:`keysplit.groupers`, e.g. ``"key"``, ``"shuffle"`` or ``"pkg"``.
    workers
        The number of downstream workers ``n``; ids are ``0 .. n-1``.
    seed
        Seeds every hash and random draw: the same seed and keys give the same routing on
        every machine and in every release.
    **params
        The grouper's parameters; each defaults to its paper's value
        (see ``GrouperInfo.defaults``). Unknown names are refused.

    Notes
    -----
    A grouper is stateful: routing a batch is routing its keys one at a time, in order,
    and later routings depend on earlier ones (through loads, tables and sketches).

    Examples
    --------
    >>> import polars as pl, keysplit
    >>> kg = keysplit.Grouper("key", workers=8, seed=1)
    >>> ids = kg.route(pl.Series(["a", "b", "a"]))
    >>> ids[0] == ids[2]
    True
    >>> pl.Series("worker", ids).dtype
    UInt32
    """

    __slots__ = ("_core",)

    def __init__(self, name: GrouperName, workers: int, seed: int = 0, **params: ParamValue) -> None:
        check_grouper_config(name, workers, seed)
        self._core = _core.GrouperCore(name, workers, seed, params)

    @classmethod
    def from_spec(cls, spec: str, *, workers: int, seed: int = 0) -> Grouper:
        """A grouper from a spec of the command line's form: ``"pkg"``,
        ``"flexd:delta=2.0,threshold=0.1"`` (values are parsed as ints, floats, booleans or
        strings, then checked against the grouper's parameters)."""
        if not isinstance(spec, str):
            raise ConfigTypeError(f"spec must be a str, got {type(spec).__name__}")
        name, params = parse_spec(spec)
        return cls(require_grouper_name(name), workers=workers, seed=seed, **params)

    def route(self, keys: Any, *, nulls: NullPolicy = "raise") -> WorkerIds:
        """Routes a column of keys, in order, and returns one worker id per key.

        ``keys`` is anything that implements the Arrow PyCapsule interface (a Polars
        Series, a PyArrow Array or ChunkedArray), a NumPy integer array, or a list of
        ``str``/``bytes``/``int``. Arrow and NumPy key buffers are read in place, never
        copied, and the GIL is released while routing.

        ``nulls="raise"`` (the default) refuses a column with null keys before routing any
        of it. ``nulls="group"`` routes every null as one key, the empty byte string.

        The result is a :class:`WorkerIds` (uint32) that ``pl.Series``, ``pa.array`` and
        ``np.asarray`` take without copying.
        """
        return self._core.route(importable_keys(keys), nulls)

    def snapshot(self) -> bytes:
        """The grouper's configuration and whole routing state, as bytes.

        :meth:`Grouper.restore` rebuilds it, in this process or another, so that the next
        key routes exactly as it would have without the interruption. The format is
        versioned and checksummed (``docs/snapshot.md``); pickling a grouper stores this.
        """
        return self._core.snapshot()

    @classmethod
    def restore(cls, snapshot: bytes | bytearray | memoryview) -> Grouper:
        """The grouper that :meth:`snapshot` saved.

        Raises :class:`keysplit.SnapshotError` (a ``ValueError``) for truncated, corrupt or
        incompatible bytes, or bytes that hold a sketch rather than a grouper.
        """
        if not isinstance(snapshot, (bytes, bytearray, memoryview)):
            raise TypeError(f"snapshot must be bytes, got {type(snapshot).__name__}")
        grouper = cls.__new__(cls)
        grouper._core = _core.GrouperCore.restore(bytes(snapshot))
        return grouper

    def _rewind(self, snapshot: bytes) -> None:
        """Puts this grouper back in the state :meth:`snapshot` saved (an all-or-nothing routing)."""
        self._core = _core.GrouperCore.restore(snapshot)

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return (type(self).restore, (self.snapshot(),))

    def route_key(self, key: str | bytes | int | None, *, nulls: NullPolicy = "raise") -> int:
        """Routes one tuple with key ``key``; the same as routing a batch of one."""
        return self._core.route_key(key, nulls)

    def end_window(self) -> None:
        """Marks a window boundary; groupers without windowed state ignore it."""
        self._core.end_window()

    @property
    def name(self) -> str:
        """The registry name of the grouper."""
        return self._core.name

    @property
    def workers(self) -> int:
        """The number of workers ``n``."""
        return self._core.workers

    @property
    def seed(self) -> int:
        """The seed of every hash and random draw."""
        return self._core.seed

    @property
    def params(self) -> dict[str, ParamValue]:
        """Every parameter with its effective value, defaults included."""
        return self._core.params

    @property
    def loads(self) -> list[int]:
        """Tuples routed to each worker so far (local load estimation)."""
        return self._core.loads

    @property
    def state_bytes(self) -> int:
        """Bytes of routing state: load counters, tables and sketches."""
        return self._core.state_bytes

    def __repr__(self) -> str:
        params = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"Grouper({self.name!r}, workers={self.workers}, seed={self.seed}{params})"
