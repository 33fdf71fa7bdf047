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

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import polars as pl

from keysplit import metrics
from keysplit._grouper import Grouper, NullPolicy
from keysplit._progress import PhaseProgress
from keysplit.spark.ingest import Ingestion, IngestPath, Stream, frames, open_ingestion
from keysplit.spark.routing import SOURCE_COLUMN, WORKER_COLUMN, route_on_executors
from keysplit.spark.session import as_session

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

    from keysplit.spark.session import Session

#: The grouper of the Spark pipelines when none is given: on Zipf 1.5, Zipf 2.0 and uniform
#: keys (10^7 rows, 32 workers, ``benches/spark_vs_native.py``) ``aggregate`` took 0.69×,
#: 0.80× and 0.54× of Pd-Stream's time (the default before it) in the same session, at
#: λ ≤ 0.01 and a fraction of its partial rows.
DEFAULT_GROUPER = "elastic"

#: The column the window id is written to when windows are a count of tuples.
WINDOW_COLUMN = "window"
#: The column holding each tuple's position in the stream, when asked for.
SEQUENCE_COLUMN = "seq"


def is_spark_frame(stream: object) -> TypeGuard[DataFrame]:
    """Whether ``stream`` is a PySpark DataFrame (Connect or classic)."""
    return type(stream).__name__ == "DataFrame" and type(stream).__module__.startswith("pyspark.sql")


#: Session settings for the duration of a run. Routing on the executors moves Arrow batches
#: between the JVM and Python, and fewer, larger ones cost less (2.0 s against 2.4 s per
#: 10^7 rows here). Distinct-count sketches are object aggregates, which Spark sorts
#: instead of hashing past 128 groups a task; partials have tens of thousands of groups,
#: and sorting them made the partial phase 4x slower.
RUN_SETTINGS = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "65536",
}


@contextlib.contextmanager
def run_settings(session: Session, settings: Mapping[str, str] = RUN_SETTINGS) -> Iterator[None]:
    """``settings`` (:data:`RUN_SETTINGS` by default) on the session while the block runs;
    the previous values after."""
    conf = session.spark.conf
    previous = session.call("reading settings", lambda: {name: conf.get(name, None) for name in settings})

    def change() -> None:
        for name, value in settings.items():
            conf.set(name, value)

    session.call("changing settings", change)
    try:
        yield
    finally:

        def restore() -> None:
            for name, value in previous.items():
                if value is None:
                    conf.unset(name)
                else:
                    conf.set(name, value)

        with contextlib.suppress(Exception):
            session.call("restoring settings", restore, timeout=30.0)


def shown_session(
    given: Session | SparkSession | None, stack: contextlib.ExitStack, title: str, progress: bool | None
) -> tuple[Session, bool, PhaseProgress]:
    """:func:`as_session`, with a :class:`PhaseProgress` on ``stack`` that shows the
    start-up and then every action the session runs until ``stack`` closes."""
    shown = stack.enter_context(PhaseProgress(title, progress))
    shown.phase("connecting to Spark")
    try:
        handle, owned = as_session(given)
    except BaseException:
        stack.close()
        raise
    stack.enter_context(handle.observed(shown.phase))
    return handle, owned, shown


def make_grouper(grouper: Grouper | str, workers: int, seed: int) -> Grouper:
    """``grouper`` itself, or one made from a name or spec (``"flexd:delta=2.0"``)."""
    if isinstance(grouper, str):
        return Grouper.from_spec(grouper, workers=workers, seed=seed)
    if not isinstance(grouper, Grouper):
        raise TypeError(f"grouper must be a keysplit.Grouper or a grouper name, got {type(grouper).__name__}")
    return grouper


def require_window(window: object) -> int | str | None:
    if window is None or isinstance(window, str):
        return window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be None, a column name or a positive tuple count, got {window!r}")
    return window


def _routed_columns(key: str, columns: Sequence[str], sequence: bool) -> list[str]:
    """The stream's columns that go to Spark, refusing the names the routing adds."""
    chosen = list(dict.fromkeys([key, *columns]))
    for reserved in (WORKER_COLUMN, SOURCE_COLUMN, *([SEQUENCE_COLUMN] if sequence else [])):
        if reserved in chosen:
            raise ValueError(f"the stream may not have a column {reserved!r}: the routing adds it; rename it")
    return chosen


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
                raise ValueError(f"window column {window!r} is not in the stream; columns: {frame.columns}")
            ids = frame.get_column(window)
            if ids.null_count():
                raise ValueError(f"{ids.null_count()} rows have a null {window!r} window")
            start = 0
            for run in ids.rle().struct.unnest().iter_rows(named=True):
                value, length = run["value"], run["len"]
                if last is not None and value < last:
                    raise ValueError(f"window {value!r} arrives after window {last!r}; windows must not decrease")
                last = value
                yield value, frame.slice(start, length)
                start += length


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
        batch_rows: int,
        nulls: NullPolicy,
        ingestion: IngestPath,
        staging_dir: str | Path | None = None,
        upload_dir: str | None = None,
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
        self.batch_rows = batch_rows
        self.nulls = nulls
        self.ingestion = ingestion
        self.staging_dir = staging_dir
        self.upload_dir = upload_dir
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
            raise ValueError(f"columns {missing} are not in the stream; columns: {frame.columns}")
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
            for window_id, frame in _windows(frames(self.stream, self.batch_rows), self.window):
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
                raise ValueError("the stream is empty")
            yield self._close(state)
            if self.window is not None:
                self.grouper.end_window()
        finally:
            if state is not None:
                _discard(state)

    def _open(self, window_id: Any) -> dict[str, Any]:
        sink: Ingestion | None = None
        if not self.done(window_id):
            sink = open_ingestion(
                self.session, self.ingestion, staging_dir=self.staging_dir, upload_dir=self.upload_dir
            )
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
    ingestion = "none"

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
        order_by: Sequence[str] | None,
        sequence: bool = False,
    ) -> None:
        self.schema = session.call("reading the schema", lambda: frame.schema)
        names = [f.name for f in self.schema.fields]
        chosen = names if columns is None else [*columns, *([window] if window else [])]
        self.columns = _routed_columns(key, chosen, sequence)
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ValueError(f"columns {missing} are not in the DataFrame; columns: {names}")
        self.session = session
        self.frame = frame
        self.key = key
        self.grouper = grouper
        self.window = window
        self.nulls = nulls
        self.order_by = list(order_by) if order_by else None
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


def route(
    frame: DataFrame,
    *,
    key: str = "key",
    grouper: Grouper | str = DEFAULT_GROUPER,
    workers: int = 8,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    order_by: Sequence[str] | str | None = None,
    window: str | None = None,
    nulls: NullPolicy = "group",
) -> DataFrame:
    """``frame`` routed on the executors: every column, plus ``worker`` and ``source`` (int).

    Each partition is a source with its own grouper, all starting from ``grouper`` (or a
    fresh grouper of that name, ``workers`` and ``seed``), in the partition's order, in
    ``session`` (the DataFrame's own by default); see
    :func:`keysplit.spark.aggregate` for ``order_by``, ``window`` and ``nulls``. The result
    is lazy: Spark routes when it runs a query on it, and routes the same way every time.
    """
    if not is_spark_frame(frame):
        raise TypeError(
            f"frame must be a Spark DataFrame, got {type(frame).__name__}; route a Polars frame with keysplit.route"
        )
    handle, _ = as_session(frame.sparkSession if session is None else session)
    order = [order_by] if isinstance(order_by, str) else order_by
    routed = SparkFrame(
        handle,
        frame,
        key=key,
        grouper=make_grouper(grouper, workers, seed),
        columns=None,
        window=window,
        nulls=nulls,
        order_by=order,
    )
    if "source" in routed.columns:
        raise ValueError("the DataFrame may not have a column 'source': the routing adds it; rename it")
    (window_rows,) = routed.windows()
    assert window_rows.rows is not None
    return window_rows.rows.withColumnRenamed(SOURCE_COLUMN, "source")
