"""What a verb leaves behind lives as long as the DataFrames that read it.

A verb that runs eagerly keeps its result cached on the server (``persist``), and a client
stream ingested as files keeps those files, until the last client DataFrame whose plan
reads them is garbage collected: every DataFrame derived from another holds the other's
plan, so the plan object's life is the data's. This is how PySpark releases a
``localCheckpoint``; unlike checkpoint blocks, a cached block and a file scan keep their
lineage, so what an executor takes with it when it dies is recomputed.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame


def release_with(frame: DataFrame, release: Callable[[], None], *, at_exit: bool = False) -> None:
    """Calls ``release`` once no DataFrame reads ``frame``'s plan any more (and, with
    ``at_exit``, when the interpreter exits). ``release`` must not hold ``frame`` or a
    DataFrame derived from it, or the plan never dies."""
    plan = frame._plan  # noqa: SLF001 - a Spark Connect DataFrame's plan, held by every derived one
    weakref.finalize(plan, _quietly, release).atexit = at_exit


def unpersist_with(frame: DataFrame, held: DataFrame) -> None:
    """Unpersists ``held`` once no DataFrame reads ``frame`` (a DataFrame derived from
    ``held``), in a thread of its own: a finalizer must not wait on a server that may be
    gone."""

    def unpersist() -> None:
        if held.sparkSession.client.is_closed:
            return
        threading.Thread(target=_quietly, args=(held.unpersist,), daemon=True).start()

    release_with(frame, unpersist)


def _quietly(release: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        release()
