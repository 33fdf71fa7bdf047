"""Which write task writes which rows of a partitioned write: files of the size asked for,
and no task holding more than one file's worth.

``df.repartition("date").write.partitionBy("date")`` gives each partition value one task,
so a hot value's rows are one task's work and one huge file. Here each value's predicted
size ``s`` (bytes or rows) is cut into files of the target size ``t``: ``⌊s / t⌋`` full files,
each a task of its own, and the remainder, which shares a task with other values' remainders
and small values (best fit decreasing, bins of ``t``: each bin but at most one more than
half full). Every task then holds at most ``t``, every file of a value but its remainder is
``t``, and a value is ``⌈s / t⌉`` files, as few as the target allows.

A row of value ``v`` goes by a uniform number ``u ∈ [0, 1)`` from a hash of its values:
``chunk = ⌊u · s_v / t⌋``; chunk ``c < ⌊s_v / t⌋`` is task ``first_v + c``, the last (partial)
chunk the task of ``v``'s remainder. Over many rows each chunk holds its share of ``s_v`` to
within sampling noise, and a re-run task sends every row where the first run did.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from keysplit._errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The most write tasks a plan may ask for: a target far below the data's size would
#: otherwise write millions of tiny files.
MAX_TASKS = 100_000


@dataclass(frozen=True)
class WritePlan:
    """Per partition value (in the order given): ``first`` the task of its first full file
    (-1: none), ``full`` its full files, ``chunks`` its size over the target (``s / t``) and
    ``rest`` the task of its remainder (-1: none); ``load`` each task's predicted size."""

    first: tuple[int, ...]
    full: tuple[int, ...]
    chunks: tuple[float, ...]
    rest: tuple[int, ...]
    load: tuple[float, ...]

    @property
    def tasks(self) -> int:
        return len(self.load)

    def files(self) -> int:
        """The files the plan writes: one per full chunk and one per remainder."""
        return sum(self.full) + sum(1 for task in self.rest if task >= 0)


def write_plan(sizes: Sequence[float], target: float) -> WritePlan:
    """The tasks of a write of values of ``sizes`` into files of ``target`` (module notes)."""
    if not target > 0 or math.isinf(target):
        raise ConfigError(f"the target file size must be a positive number, got {target!r}")
    for size in sizes:
        if not size >= 0 or math.isinf(size):
            raise ConfigError(f"a partition value's size must be a non-negative number, got {size!r}")
    full = [int(size // target) for size in sizes]
    remainders = [size - count * target for size, count in zip(sizes, full, strict=True)]
    wanted = sum(full) + sum(1 for r in remainders if r > 0)
    if wanted > MAX_TASKS:
        raise ConfigError(
            f"a target file size of {target:g} cuts {sum(sizes):g} into at least {wanted} files, over the "
            f"{MAX_TASKS} tasks a write may take: raise the target"
        )
    first: list[int] = []
    load: list[float] = []
    for count in full:
        first.append(len(load) if count else -1)
        load.extend([target] * count)
    rest = [-1] * len(sizes)
    # Best fit decreasing: each remainder, largest first, into the fullest bin it fits in.
    room: list[tuple[float, int]] = []  # (room left, task), sorted
    for value in sorted((v for v, r in enumerate(remainders) if r > 0), key=lambda v: (-remainders[v], v)):
        size = remainders[value]
        at = bisect.bisect_left(room, (size, -1))
        if at == len(room):
            task = len(load)
            load.append(0.0)
        else:
            task = room.pop(at)[1]
        load[task] += size
        rest[value] = task
        bisect.insort(room, (target - load[task], task))
    chunks = tuple(size / target for size in sizes)
    return WritePlan(tuple(first), tuple(full), chunks, tuple(rest), tuple(load))
