"""Multi-source routing: several upstream sources route in parallel, each its own grouper."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keysplit import _core
from keysplit._checks import require_int
from keysplit._errors import ConfigError, ConfigTypeError, KeyTypeError
from keysplit._grouper import GrouperName, NullPolicy, ParamValue, check_grouper_config, importable_keys

if TYPE_CHECKING:
    from collections.abc import Sequence

    from keysplit._core import WorkerIds


@dataclass(frozen=True)
class RoutedSources:
    """What :func:`route_sources` returns, one entry per source, in the order given.

    ``loads[i]`` is source ``i``'s view of the load counters at the end: its own tuples
    with private loads, the one global vector (the same for every source) when shared.
    """

    ids: list[WorkerIds]
    loads: list[list[int]]
    state_bytes: list[int]
    shared_loads: bool

    @property
    def total_loads(self) -> list[int]:
        """Tuples every source sent to each worker, added up."""
        if self.shared_loads or not self.loads:
            return list(self.loads[0]) if self.loads else []
        return [sum(column) for column in zip(*self.loads, strict=True)]


def _default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def route_sources(
    name: GrouperName,
    workers: int,
    sources: Sequence[Any],
    *,
    seed: int = 0,
    shared_loads: bool = False,
    nulls: NullPolicy = "raise",
    threads: int | None = None,
    **params: ParamValue,
) -> RoutedSources:
    """Routes each of ``sources`` (columns of keys) with its own grouper, in parallel.

    As in the papers' multi-spout experiments, every source holds its own grouper
    ``Grouper(name, workers, seed, **params)``: its own tables, sketches and random draws,
    and the same hash functions as the others. Routing runs on ``threads`` Rust threads
    (default: the CPUs this process may use) with the GIL released; each column is read
    in place, as by :meth:`Grouper.route`.

    With ``shared_loads=False`` each source counts only the tuples it sent (local load
    estimation): the result is deterministic and equals routing each source alone. With
    ``shared_loads=True`` all sources add to one lock-free global load vector, in bursts of
    ``max(256, 4 * workers)`` tuples and at the end of each batch, and each routes on the
    global loads as of its last burst plus its own tuples since; routing then depends on
    how the threads interleave, ids stay below ``workers`` and the loads add up to the
    tuples routed.

    Every source is checked for nulls (``nulls="raise"``) before any is routed.
    """
    check_grouper_config(name, workers, seed)
    if not isinstance(shared_loads, bool):
        raise ConfigTypeError(f"shared_loads must be a bool, got {type(shared_loads).__name__}")
    if threads is None:
        threads = _default_threads()
    elif require_int(threads, "threads") < 1:
        raise ConfigError(f"threads must be at least 1, got {threads}")
    if isinstance(sources, (str, bytes)) or not isinstance(sources, (list, tuple)):
        raise KeyTypeError(f"sources must be a list of key columns, got {type(sources).__name__}")
    columns = [importable_keys(keys) for keys in sources]
    ids, loads, state_bytes = _core.route_sources(name, workers, columns, seed, params, shared_loads, nulls, threads)
    return RoutedSources(ids=ids, loads=loads, state_bytes=state_bytes, shared_loads=shared_loads)
