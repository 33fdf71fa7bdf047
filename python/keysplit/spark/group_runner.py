"""The Python side of ``apply_grouped``'s two stages, run by ``mapInArrow`` on the executors.

Spark's own grouped map spends about 1.4 ms a group in its machinery (an Arrow stream per
group, a pandas concat, checks, a conversion back); :class:`FunctionStage` cuts a sorted
partition into its groups and spends a fraction of that, which is what lets a split plan
make more calls than ``applyInPandas`` and still win. :class:`MergeStage` then merges the
partial results of every key that more than one worker held and passes the others through.

Both stages write the same columns: the user's schema, then the bookkeeping the report
observes: the group's key, the worker, and on a call's first output row the rows it was
given and its seconds (``-1`` and ``0`` on the other rows), a marker for the placeholder row
of a call that returned nothing, and the Spark task. The module travels by value (it is
registered with cloudpickle), so executors without keysplit run it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keysplit.spark.runs import grouped_runs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pandas as pd
    import pyarrow as pa

#: Every column apply_grouped adds starts with this; the input and the schema may not use it.
PREFIX = "__keysplit_"
WORKER = PREFIX + "worker"
KEY = PREFIX + "key"
ROWS = PREFIX + "rows"
SECONDS = PREFIX + "seconds"
EMPTY = PREFIX + "empty"
TASK = PREFIX + "task"
#: Whether the row's key was placed on more than one worker (None: not known before the
#: function stage, as with an online grouper).
SPLIT = PREFIX + "split"
#: The bookkeeping columns, in order, after the user's.
BOOKKEEPING = (KEY, WORKER, ROWS, SECONDS, EMPTY, TASK, SPLIT)
#: The bookkeeping columns the merge stage reads; the others are the function calls', which
#: the report observes before the merge.
MERGE_INPUT = (KEY, WORKER, EMPTY, SPLIT)
#: Output rows a stage gathers before it hands a batch to Spark.
_BATCH_ROWS = 10_000


def takes_key(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is ``f(key, pdf)`` rather than ``f(pdf)``, as ``applyInPandas`` decides."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2


@dataclass(frozen=True)
class PandasCall:
    """``function`` called on one group, converted both ways as ``applyInPandas`` converts.

    ``what`` names the function in errors (``"function"`` or ``"merge"``); ``inputs`` are
    the group's columns it is given, ``schema`` the stage's Arrow schema (the user's
    columns first), ``timezone`` Spark's session time zone.
    """

    function: Callable[..., Any]
    what: str
    inputs: tuple[str, ...]
    columns: tuple[str, ...]
    schema: pa.Schema
    timezone: str

    def to_pandas(self, table: pa.Table) -> pd.DataFrame:
        import pyarrow as pa

        frame = table.to_pandas(date_as_object=True, coerce_temporal_nanoseconds=True)
        for column in table.schema:
            if pa.types.is_timestamp(column.type) and column.type.tz is not None:
                frame[column.name] = frame[column.name].dt.tz_convert(self.timezone).dt.tz_localize(None)
        return frame

    def to_arrow(self, series: pd.Series, target: pa.Field) -> pa.Array:
        import pyarrow as pa

        if pa.types.is_timestamp(target.type) and target.type.tz is not None and series.dt.tz is None:
            series = series.dt.tz_localize(self.timezone).dt.tz_convert("UTC")
        return pa.Array.from_pandas(series, type=target.type, safe=True)

    def conform(self, result: object) -> list[pa.Array]:
        """The user's columns of ``result``, the function's, checked against the schema."""
        import pandas as pd
        import pyarrow as pa

        if not isinstance(result, pd.DataFrame):
            raise TypeError(f"the {self.what} must return a pandas DataFrame, got {type(result).__name__}")
        out = result
        columns = list(self.columns)
        if all(isinstance(label, str) for label in out.columns):
            missing = [name for name in columns if name not in out.columns]
            unexpected = [label for label in out.columns if label not in columns]
            if missing or unexpected:
                raise ValueError(
                    f"the {self.what}'s pandas DataFrame does not match the schema: missing {missing}, "
                    f"unexpected {unexpected}"
                )
        elif len(out.columns) != len(columns):
            raise ValueError(f"the {self.what} returned {len(out.columns)} columns, the schema has {len(columns)}")
        else:
            out = out.set_axis(columns, axis=1)
        try:
            return [self.to_arrow(out[name], self.schema.field(name)) for name in columns]
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as error:
            raise TypeError(f"the {self.what}'s output does not fit the schema {self.schema}: {error}") from None

    def __call__(
        self, group: pa.Table, key: pa.Scalar, *, worker: int, task: int, split: bool | None
    ) -> pa.RecordBatch:
        """The call's output rows with their bookkeeping; one placeholder row if it returned
        none, so that the call is still counted."""
        import time

        import numpy as np
        import pyarrow as pa

        pdf = self.to_pandas(group.select(list(self.inputs)))
        started = time.perf_counter()
        out = self.function((key.as_py(),), pdf) if takes_key(self.function) else self.function(pdf)
        seconds = time.perf_counter() - started
        arrays = self.conform(out)
        empty = not len(arrays[0]) if arrays else not len(out)
        if empty:
            arrays = [pa.nulls(1, self.schema.field(name).type) for name in self.columns]
        height = len(arrays[0]) if arrays else len(out)
        rows = np.full(height, -1, dtype=np.int64)
        rows[0] = len(pdf)
        spent = np.zeros(height)
        spent[0] = seconds
        arrays += [
            pa.array([key.as_py()] * height, type=self.schema.field(KEY).type),
            pa.array(np.full(height, worker, dtype=np.int32)),
            pa.array(rows),
            pa.array(spent),
            pa.array(np.full(height, empty)),
            pa.array(np.full(height, task, dtype=np.int32)),
            pa.array([split] * height, type=pa.bool_()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _task() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else -1


def _gathered(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` joined into batches of at least :data:`_BATCH_ROWS` rows (the last smaller)."""
    import pyarrow as pa

    held: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        if rows >= _BATCH_ROWS:
            yield pa.concat_batches(held)
            held, rows = [], 0
    if held:
        yield pa.concat_batches(held)


@dataclass(frozen=True)
class FunctionStage:
    """The function stage: partition ``w`` holds worker ``w``'s rows sorted by ``key``, and
    ``call`` runs once per key."""

    call: PandasCall
    key: str

    def groups(self, batches: Iterator[pa.RecordBatch], task: int) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import pyarrow.compute as pc

        for pieces in grouped_runs(batches, self.key):
            workers = pa.chunked_array([piece.column(WORKER) for piece in pieces])
            if pc.min(workers).as_py() != task or pc.max(workers).as_py() != task:
                raise RuntimeError(
                    f"partition {task} holds rows of other workers: Spark moved the function stage's rows"
                )
            group = pa.Table.from_batches(pieces)
            split = group.column(SPLIT)[0].as_py()
            yield self.call(group, group.column(self.key)[0], worker=task, task=task, split=split)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from _gathered(self.groups(batches, _task()))


@dataclass(frozen=True)
class MergeStage:
    """The merge stage: function stage output sorted by key (the user's columns and
    :data:`MERGE_INPUT`); a key that more than one worker held is merged by ``call`` (its
    placeholder rows dropped), any other passes through (a key placed on several workers
    whose rows all met one, or every key of an online plan that stayed whole)."""

    call: PandasCall

    def groups(self, batches: Iterator[pa.RecordBatch], task: int) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for pieces in grouped_runs(batches, KEY):
            yield from self.merged(pa.Table.from_batches(pieces), task)

    def merged(self, group: pa.Table, task: int) -> Iterator[pa.RecordBatch]:
        """One key's output: ``call`` on its partial results, or the results passed through."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        workers = group.column(WORKER)
        if pc.min(workers).as_py() == pc.max(workers).as_py():
            # A whole key: the function's result, and not a call of this stage.
            schema = self.call.schema
            rows = group.num_rows
            made = {
                ROWS: pa.chunked_array([np.full(rows, -1, np.int64)]),
                SECONDS: pa.chunked_array([np.zeros(rows)]),
                TASK: pa.chunked_array([np.full(rows, task, np.int32)]),
            }
            columns = [made[name] if name in made else group.column(name) for name in schema.names]
            yield from pa.Table.from_arrays(columns, schema=schema).to_batches()
            return
        parts = group.filter(pc.invert(group.column(EMPTY)))
        if parts.num_rows:
            yield self.call(parts, group.column(KEY)[0], worker=-1, task=task, split=True)

    def table(self, group: pa.Table) -> pa.Table:
        """:meth:`merged` as ``groupBy(KEY).applyInArrow`` calls it: one key's rows in, its
        output out. Spark starts no Python worker for a partition without a group, which a
        ``mapInArrow`` stage does for every partition, empty or not."""
        import pyarrow as pa

        return pa.Table.from_batches(list(self.merged(group, _task())), schema=self.call.schema)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from _gathered(self.groups(batches, _task()))
