"""The front every Spark run shares: a stream in, routed rows in Spark out, window by window.

A **Spark DataFrame** is routed where it lives, on the executors (:mod:`.routing`): one
window holding the whole DataFrame, each input partition a source. A **client stream**
(Polars, Arrow, an iterable of batches) is read batch by batch, routed here by the one
grouper (a single source, in arrival order), and written to Spark by an ingestion path
(:mod:`.ingest`), one window at a time; the client's own loads and Γ go with each window so
that Spark's can be checked against them.

Either way a window's rows reach the caller as a Spark DataFrame with the asked-for
columns, ``worker`` (int) and ``__source`` (int), and ``seq`` when asked: each tuple's
position in the stream (client streams) or Spark's ``monotonically_increasing_id`` (a
DataFrame: increasing along each partition, partition after partition, not dense).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from keysplit import metrics
from keysplit._errors import ConfigError, KeyInputError
from keysplit.spark.ingest import Ingestion, IngestOptions, IngestPath, Stream, choose_path, frames, open_ingestion
from keysplit.spark.intake import is_spark_frame
from keysplit.spark.routing import SOURCE_COLUMN, WORKER_COLUMN, route_on_executors, routed_columns
from keysplit.spark.runs import run_slices

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator, Sequence

    from pyspark.sql import DataFrame

    from keysplit._grouper import Grouper, NullPolicy
    from keysplit.spark.session import Session

#: The column the window id is written to when windows are a count of tuples.
WINDOW_COLUMN = "window"
#: The column holding each tuple's position in the stream, when asked for.
SEQUENCE_COLUMN = "seq"


def _routed_columns(key: str, columns: Sequence[str], sequence: bool) -> list[str]:
    return routed_columns(key, columns, [SEQUENCE_COLUMN] if sequence else [])


@dataclass
class RoutedWindow:
    """One window's routed rows in Spark, and what the client knows of them.

    ``rows`` is None for a window a checkpoint already holds (routed again, not sent).
    ``client_*`` figures exist for client streams only; ``row_count`` too.
    """

    window: Any
    rows: DataFrame | None
    row_count: int | None = None
    client_loads: list[int] | None = None
    client_partial_rows: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def _windows(stream: Iterator[pl.DataFrame], window: int | str | None) -> Iterator[tuple[Any, pl.DataFrame]]:
    """(window id, slice) in arrival order; a window's slices are consecutive."""
    if window is None:
        for frame in stream:
            yield None, frame
    elif isinstance(window, int):
        offset = 0
        for frame in stream:
            while frame.height:
                index = offset // window
                take = min(frame.height, (index + 1) * window - offset)
                yield index, frame.slice(0, take)
                frame = frame.slice(take)
                offset += take
    else:
        last: Any = None
        for frame in stream:
            if window not in frame.columns:
                raise ConfigError(f"window column {window!r} is not in the stream; columns: {frame.columns}")
            ids = frame.get_column(window)
            if ids.null_count():
                raise KeyInputError(f"{ids.null_count()} rows have a null {window!r} window")
            for start, length in run_slices(ids.to_arrow()):
                value = ids[start]
                if last is not None and value < last:
                    raise KeyInputError(f"window {value!r} arrives after window {last!r}; windows must not decrease")
                last = value
                yield value, frame.slice(start, length)


class ClientStream:
    """A client stream routed here, window by window; iterate :meth:`windows` once.

    A window's ingested files are removed when the iteration moves past it (or stops):
    use its rows, or checkpoint them, before asking for the next window.

    ``done(window_id)`` tells which windows a checkpoint already holds: they are routed
    (the grouper must reach the same state) but not sent. ``summary()`` gives the client's
    stream metrics once the windows are consumed.
    """

    routed_on = "client"

    def __init__(
        self,
        session: Session,
        stream: Stream,
        *,
        key: str,
        grouper: Grouper,
        columns: Sequence[str] | None,
        window: int | str | None,
        nulls: NullPolicy,
        ingest: IngestOptions,
        path: IngestPath,
        sequence: bool = False,
        done: Callable[[Any], bool] | None = None,
    ) -> None:
        self.session = session
        self.stream = stream
        self.key = key
        self.grouper = grouper
        self.columns = None if columns is None else _routed_columns(key, columns, sequence)
        self.window = window
        self.window_column = WINDOW_COLUMN if isinstance(window, int) else window
        self.nulls = nulls
        self.ingest = ingest
        self.ingestion: IngestPath = path
        self.sequence = sequence
        self.done = done or (lambda _: False)
        self.first_frame: pl.DataFrame | None = None
        self._metrics = metrics.StreamingMetrics(grouper.workers, key=key, window=self.window_column)

    def summary(self) -> pl.DataFrame:
        return self._metrics.summary()

    def _route(self, frame: pl.DataFrame, offset: int) -> tuple[pl.DataFrame, float]:
        if self.columns is None:
            self.columns = _routed_columns(self.key, frame.columns, self.sequence)
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise ConfigError(f"columns {missing} are not in the stream; columns: {frame.columns}")
        started = time.perf_counter()
        ids = self.grouper.route(frame.get_column(self.key), nulls=self.nulls)
        seconds = time.perf_counter() - started
        routed = frame.select(self.columns).with_columns(pl.Series(WORKER_COLUMN, ids).cast(pl.Int32))
        if self.sequence:
            routed = routed.with_columns(
                pl.int_range(offset, offset + frame.height, dtype=pl.Int64).alias(SEQUENCE_COLUMN)
            )
        return routed, seconds

    def windows(self) -> Generator[RoutedWindow, None, None]:
        n = self.grouper.workers
        current: Any = object()
        state: dict[str, Any] | None = None
        offset = 0
        try:
            for window_id, frame in _windows(frames(self.stream, self.ingest.batch_rows), self.window):
                if self.first_frame is None:
                    self.first_frame = frame
                if state is None or window_id != current:
                    if state is not None:
                        yield self._close(state)
                        _discard(state)
                        if self.window is not None:
                            self.grouper.end_window()
                    state = self._open(window_id)
                    current = window_id
                routed, seconds = self._route(frame, offset)
                offset += frame.height
                state["seconds"]["routing"] += seconds
                state["rows"] += routed.height
                loads = metrics.worker_loads(routed, workers=n).to_list()
                state["loads"] = [a + b for a, b in zip(state["loads"], loads, strict=True)]
                state["metrics"].update(routed)
                self._metrics.update(
                    routed
                    if self.window_column is None
                    else routed.with_columns(pl.lit(window_id).alias(self.window_column))
                )
                if state["sink"] is not None:
                    state["sink"].write(routed)
            if state is None:
                raise KeyInputError("the stream is empty")
            yield self._close(state)
            if self.window is not None:
                self.grouper.end_window()
        finally:
            if state is not None:
                _discard(state)

    def _open(self, window_id: Any) -> dict[str, Any]:
        sink: Ingestion | None = None
        if not self.done(window_id):
            sink = open_ingestion(self.session, self.ingestion, self.ingest)
        return {
            "window": window_id,
            "rows": 0,
            "loads": [0] * self.grouper.workers,
            "sink": sink,
            "metrics": metrics.StreamingMetrics(self.grouper.workers, key=self.key),
            "seconds": {"routing": 0.0, "ingest": 0.0},
        }

    def _close(self, state: dict[str, Any]) -> RoutedWindow:
        from pyspark.sql import functions as F

        summary = state["metrics"].summary()
        gamma = int(summary["aggregation_cost"][0]) if summary.height else 0
        rows = None
        sink: Ingestion | None = state["sink"]
        if sink is not None:
            rows = sink.finish().withColumn(SOURCE_COLUMN, F.lit(0))
            state["seconds"]["ingest"] = sink.seconds
        return RoutedWindow(
            window=state["window"],
            rows=rows,
            row_count=state["rows"],
            client_loads=state["loads"],
            client_partial_rows=gamma,
            seconds=state["seconds"],
        )


def _discard(state: dict[str, Any]) -> None:
    if state["sink"] is not None:
        state["sink"].discard()


class SparkFrame:
    """A Spark DataFrame routed on the executors: one window, one source per partition.

    ``columns`` are the DataFrame's columns that are routed besides the key (None: all).
    """

    routed_on = "executors"
    ingestion: IngestPath | Literal["none"] = "none"

    def __init__(
        self,
        session: Session,
        frame: DataFrame,
        *,
        key: str,
        grouper: Grouper,
        columns: Sequence[str] | None,
        window: str | None,
        nulls: NullPolicy,
        order_by: tuple[str, ...] | None,
        sequence: bool = False,
    ) -> None:
        self.schema = session.call("reading the schema", lambda: frame.schema)
        names = [f.name for f in self.schema.fields]
        chosen = names if columns is None else [*columns, *([window] if window else [])]
        self.columns = _routed_columns(key, chosen, sequence)
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ConfigError(f"columns {missing} are not in the DataFrame; columns: {names}")
        self.session = session
        self.frame = frame
        self.key = key
        self.grouper = grouper
        self.window = window
        self.nulls = nulls
        self.order_by = order_by
        self.sequence = sequence

    def summary(self) -> None:
        return None

    def windows(self) -> Generator[RoutedWindow, None, None]:
        from pyspark.sql import functions as F

        rows = route_on_executors(
            self.session,
            self.frame,
            schema=self.schema,
            key=self.key,
            grouper=self.grouper,
            columns=self.columns,
            nulls=self.nulls,
            window=self.window,
            order_by=self.order_by,
        )
        if self.sequence:
            rows = rows.withColumn(SEQUENCE_COLUMN, F.monotonically_increasing_id())
        yield RoutedWindow(window=None, rows=rows, seconds={"routing": 0.0, "ingest": 0.0})


def routed_input(
    session: Session,
    data: object,
    *,
    key: str,
    grouper: Grouper,
    columns: Sequence[str] | None,
    window: int | str | None,
    nulls: NullPolicy,
    order_by: tuple[str, ...] | None,
    ingest: IngestOptions,
    sequence: bool = False,
    done: Callable[[Any], bool] | None = None,
) -> ClientStream | SparkFrame:
    """``data`` as routed windows: a Spark DataFrame routed on the executors, or a client
    stream routed here and ingested by ``ingest``'s path."""
    if is_spark_frame(data):
        if isinstance(window, int):
            raise ConfigError(
                "count windows need one arrival order, and a Spark DataFrame has one per partition; "
                "pass window=<a column of window ids> instead"
            )
        return SparkFrame(
            session,
            data,
            key=key,
            grouper=grouper,
            columns=columns,
            window=window,
            nulls=nulls,
            order_by=order_by,
            sequence=sequence,
        )
    if order_by is not None:
        raise ConfigError(
            "order_by sorts the partitions of a Spark DataFrame; a client stream is routed in its own order"
        )
    return ClientStream(
        session,
        data,
        key=key,
        grouper=grouper,
        columns=columns,
        window=window,
        nulls=nulls,
        ingest=ingest,
        path=choose_path(session, ingest),
        sequence=sequence,
        done=done,
    )
