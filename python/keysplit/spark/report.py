"""What Spark computed of a run, next to what the client measured: loads, λ, γ, Γ, times.

Every figure with ``spark`` in its name is computed by Spark from the rows it aggregated:
loads per worker and per source (the sum of the partial rows' tuple counts), Γ (the
partial rows of distinct (worker, key) pairs) and the distinct keys. ``client`` figures
exist only when the client routed the stream itself; they must equal Spark's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import polars as pl

from keysplit import metrics
from keysplit._errors import ConfigError, KeysplitError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

T = TypeVar("T")

#: The phases of a run, in order. Routing on the executors is part of ``partial``.
PHASES = ("routing", "ingest", "partial", "final")


class ObservationMismatch(KeysplitError, RuntimeError):
    """Spark's figures disagree with the client's routing: a tuple was lost or moved."""


class ReportPendingError(KeysplitError, RuntimeError):
    """A :class:`Report` read before the plan it was passed to has run."""


class Report(Generic[T]):
    """The figures of one verb's run, filled in when its plan runs, as
    ``pyspark.sql.Observation`` is: pass it as ``report=`` and read :attr:`get` after an
    action (``collect``, ``count``, a write) on the returned DataFrame::

        report = keysplit.spark.Report()
        out = keysplit.spark.apply_grouped(df, key="k", function=f, merge=m, schema=s, report=report)
        out.write.parquet("out/")
        report.get  # a GroupedReport: calls, split keys, λ, γ, ...

    A verb that runs when it is called (``aggregate``, ``apply_operator``) fills it before it
    returns. A report serves one call; the first action that runs the plan fills it. An
    action that reads only part of the result (``show``, ``limit(n).collect``) may run only
    part of the plan, and the report then holds that part: run a whole action for the whole
    figures. A stage Spark runs again after a lost executor may report its calls twice;
    the grouped report counts each (worker, key) call once.
    """

    def __init__(self) -> None:
        self._read: Callable[[], T | None] | None = None
        self._value: T | None = None

    def bind(self, read: Callable[[], T | None]) -> None:
        """Called by the verb: ``read`` gives the figures, or None until the plan has run."""
        if self._read is not None or self._value is not None:
            raise ConfigError("this Report was already passed to a verb; make a new Report() for each call")
        self._read = read

    def fill(self, value: T) -> None:
        """Called by a verb that has already run."""
        self.bind(lambda: value)

    @property
    def ready(self) -> bool:
        """Whether the figures are in (the plan has run)."""
        if self._value is None and self._read is not None:
            self._value = self._read()
        return self._value is not None

    @property
    def get(self) -> T:
        """The figures; raises :class:`ReportPendingError` before the plan has run."""
        if self._read is None:
            raise ReportPendingError("this Report was not passed to a verb (report=...)")
        if not self.ready:
            raise ReportPendingError(
                "the report is filled when an action runs the DataFrame it was passed with: "
                "run .collect(), .count(), .toArrow() or a write on it first"
            )
        assert self._value is not None
        return self._value

    def __repr__(self) -> str:
        return f"Report({self._value!r})" if self.ready else "Report(pending)"


class _Figures(Protocol):
    """What :class:`_Balance` reads: fields of a window, properties of a run."""

    @property
    def spark_loads(self) -> list[int]: ...
    @property
    def spark_partial_rows(self) -> int: ...
    @property
    def keys(self) -> int: ...


class _Balance:
    """λ and γ of Spark's figures (over a run: Γ and keys summed over its windows)."""

    @property
    def load_imbalance(self: _Figures) -> float:
        """λ = (max load − mean load) / mean load of Spark's loads."""
        return metrics.load_imbalance(pl.Series(self.spark_loads, dtype=pl.UInt64))

    @property
    def replication_factor(self: _Figures) -> float:
        """γ = Γ / distinct keys, from Spark's partials."""
        return self.spark_partial_rows / self.keys if self.keys else 0.0


@dataclass(repr=False)
class WindowReport(_Balance):
    """One window (or the whole stream) of a run.

    ``spark_loads[w]`` are the tuples Spark aggregated for worker ``w``, and
    ``source_loads[s][w]`` those that source ``s`` (an input partition, or the client)
    routed to ``w``. ``spark_partial_rows`` is Γ as Spark made it, ``keys`` the distinct
    keys. ``client_loads`` and ``client_partial_rows`` are the client's own figures when
    it routed. In operator mode ``partition_rows[p]`` are the rows of Spark's partition
    ``p`` and ``partition_workers[p]`` the workers found there (each must be just ``p``).
    ``resumed`` windows were read from a checkpoint, with the figures recorded then.
    """

    window: Any
    rows: int
    spark_loads: list[int]
    source_loads: list[list[int]]
    spark_partial_rows: int
    keys: int
    client_loads: list[int] | None = None
    client_partial_rows: int | None = None
    partition_rows: list[int] | None = None
    partition_workers: list[list[int]] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    resumed: bool = False

    def __repr__(self) -> str:
        resumed = ", resumed" if self.resumed else ""
        return (
            f"WindowReport(window={self.window!r}, rows={self.rows:,}, keys={self.keys:,}, "
            f"λ={self.load_imbalance:.4f}, γ={self.replication_factor:.4f}, Γ={self.spark_partial_rows:,}{resumed})"
        )

    def disagreements(self) -> list[str]:
        """Every way Spark's figures differ from each other or the client's; empty when none."""
        problems = []
        label = "" if self.window is None else f"window {self.window!r}: "
        if sum(self.spark_loads) != self.rows:
            problems.append(f"{label}Spark aggregated {sum(self.spark_loads)} tuples of {self.rows}")
        by_source = [sum(column) for column in zip(*self.source_loads, strict=True)] if self.source_loads else []
        if by_source and by_source != self.spark_loads:
            problems.append(f"{label}the sources' loads {by_source} != Spark's loads {self.spark_loads}")
        if self.client_loads is not None and self.client_loads != self.spark_loads:
            problems.append(f"{label}Spark's loads {self.spark_loads} != the client's routing {self.client_loads}")
        if self.client_partial_rows is not None and self.client_partial_rows != self.spark_partial_rows:
            problems.append(
                f"{label}Spark made {self.spark_partial_rows} partial rows, the routing's Γ is "
                f"{self.client_partial_rows}"
            )
        for partition, found in enumerate(self.partition_workers or []):
            if found and found != [partition]:
                problems.append(f"{label}partition {partition} holds workers {found}, not just {partition}")
        if self.partition_rows is not None and self.partition_rows != self.spark_loads:
            problems.append(f"{label}Spark's rows per partition {self.partition_rows} != loads {self.spark_loads}")
        return problems


@dataclass(repr=False)
class RunReport(_Balance):
    """A whole run: its windows, where routing ran, how the rows got to Spark, and times.

    ``routed_on`` is ``"client"`` (a client stream, routed here by one grouper) or
    ``"executors"`` (a Spark DataFrame, one grouper per input partition); ``ingestion`` is
    the path the client's rows took (``files``, ``upload``, ``arrow``) or ``"none"``.
    ``summary`` holds the client's stream metrics (:func:`keysplit.metrics.summarize`'s
    columns) when the client routed, else None.
    """

    grouper: str
    workers: int
    windows: list[WindowReport]
    routed_on: str
    ingestion: str
    summary: pl.DataFrame | None = None
    wall_seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(w.rows for w in self.windows)

    @property
    def spark_loads(self) -> list[int]:
        return [sum(w.spark_loads[i] for w in self.windows) for i in range(self.workers)]

    @property
    def client_loads(self) -> list[int] | None:
        loads = [w.client_loads for w in self.windows if w.client_loads is not None]
        if len(loads) < len(self.windows):
            return None
        return [sum(window[i] for window in loads) for i in range(self.workers)]

    @property
    def sources(self) -> int:
        return max((len(w.source_loads) for w in self.windows), default=0)

    @property
    def source_loads(self) -> list[list[int]]:
        """``[s][w]``: tuples source ``s`` routed to worker ``w``, over every window."""
        totals = [[0] * self.workers for _ in range(self.sources)]
        for window in self.windows:
            for source, loads in enumerate(window.source_loads):
                for worker, load in enumerate(loads):
                    totals[source][worker] += load
        return totals

    @property
    def spark_partial_rows(self) -> int:
        return sum(w.spark_partial_rows for w in self.windows)

    @property
    def client_partial_rows(self) -> int | None:
        rows = [w.client_partial_rows for w in self.windows if w.client_partial_rows is not None]
        if len(rows) < len(self.windows):
            return None
        return sum(rows)

    @property
    def keys(self) -> int:
        """Distinct keys summed over windows (a key in two windows counts twice)."""
        return sum(w.keys for w in self.windows)

    @property
    def phase_seconds(self) -> dict[str, float]:
        return {phase: sum(w.seconds.get(phase, 0.0) for w in self.windows) for phase in PHASES}

    def __repr__(self) -> str:
        return (
            f"RunReport(grouper={self.grouper!r}, workers={self.workers}, routed_on={self.routed_on!r}, "
            f"ingestion={self.ingestion!r}, sources={self.sources}, windows={len(self.windows)}, "
            f"rows={self.rows:,}, λ={self.load_imbalance:.4f}, γ={self.replication_factor:.4f}, "
            f"Γ={self.spark_partial_rows:,}, wall={self.wall_seconds:.2f} s)"
        )

    def disagreements(self) -> list[str]:
        return [problem for window in self.windows for problem in window.disagreements()]

    def check(self) -> None:
        """Raises :class:`ObservationMismatch` unless Spark agrees with the client everywhere."""
        problems = self.disagreements()
        if problems:
            raise ObservationMismatch("; ".join(problems[:5]))

    def loads_table(self) -> pl.DataFrame:
        """One row per worker: Spark's load and, when the client routed, the client's."""
        columns: dict[str, Any] = {"worker": list(range(self.workers)), "spark_load": self.spark_loads}
        if self.client_loads is not None:
            columns["client_load"] = self.client_loads
        return pl.DataFrame(columns).with_columns(
            pl.col("worker").cast(pl.UInt32), pl.exclude("worker").cast(pl.UInt64)
        )

    def sources_table(self) -> pl.DataFrame:
        """One row per (source, worker): the tuples that source routed to that worker."""
        return pl.DataFrame(
            {
                "source": [s for s in range(self.sources) for _ in range(self.workers)],
                "worker": [w for _ in range(self.sources) for w in range(self.workers)],
                "load": [load for loads in self.source_loads for load in loads],
            },
            schema={"source": pl.UInt32, "worker": pl.UInt32, "load": pl.UInt64},
        )

    def figures(self) -> dict[str, Any]:
        """The headline figures: λ, γ, Γ (Spark's, and the client's when it routed), times."""
        return {
            "grouper": self.grouper,
            "routed_on": self.routed_on,
            "ingestion": self.ingestion,
            "sources": self.sources,
            "tuples": self.rows,
            "load_imbalance": self.load_imbalance,
            "replication_factor": self.replication_factor,
            "aggregation_cost_spark": self.spark_partial_rows,
            "aggregation_cost_client": self.client_partial_rows,
            **{f"{phase}_s": seconds for phase, seconds in self.phase_seconds.items()},
            "wall_s": self.wall_seconds,
        }


def observing(frame: Any, observation: Any, *measures: Any) -> Any:
    """``frame.observe(observation, *measures)`` for the plans of batch inputs, without the
    round trip Spark Connect's ``observe`` makes first: it asks the server whether ``frame``
    is streaming, an analysis of its whole plan (0.15-0.2 s each on a split window's, three
    in a window's report: 0.5 s of a 10^6-row window's call). A split plan is built over
    batch inputs only: :func:`keysplit.spark.optimize` leaves a stream's operators to Spark,
    and the verbs given a report check their input (:func:`batch_input`)."""
    import uuid

    from pyspark.sql.connect import plan
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
    from pyspark.sql.connect.observation import Observation as ConnectObservation

    if not (isinstance(frame, ConnectFrame) and isinstance(observation, ConnectObservation) and measures):
        return frame.observe(observation, *measures)
    if getattr(observation, "_result", True) is not None:
        return frame.observe(observation, *measures)  # used before: PySpark's own error
    if observation._name is None:
        observation._name = str(uuid.uuid4())
    observation._result = {}
    return ConnectFrame(plan.CollectMetrics(frame._plan, observation, list(measures)), frame._session)


def batch_input(handle: Any, report: Report[Any] | None, *frames: Any) -> None:
    """Refuses a streaming DataFrame where a verb's ``report`` observes its plan (Spark Connect
    fills no ``Observation`` of a stream's): one analysis of each input's own plan, through
    the session ``handle``; nothing without a report."""
    if report is None:
        return

    def check() -> None:
        for frame in frames:
            if frame.isStreaming:
                raise ConfigError(
                    "report= observes a batch query's plan and this input is a streaming DataFrame: run the "
                    "verb on a batch DataFrame, or split a stream's aggregate with keysplit.spark.stream_aggregate"
                )

    handle.call("reading the plan", check)


def observed(observation: Any) -> dict[str, Any]:
    """An ``Observation``'s metrics; empty before its plan has run, or when the plan has no
    such stage (the merge stage of a plan that splits nothing)."""
    from pyspark.errors import PySparkAssertionError

    try:
        return dict(observation.get or {})
    except PySparkAssertionError:
        return {}


def observed_rows(
    rows: Sequence[Any], fields: Sequence[str], names: Sequence[str], types: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """Observed rows (``pyspark.sql.Row``) as a Polars frame: field ``fields[i]`` as column
    ``names[i]``, of ``types[name]`` where given; other columns take the type their values
    convert to."""
    types = types or {}
    return pl.DataFrame(
        [
            pl.Series(name, [row[f] for row in rows], dtype=types.get(name), strict=False)
            for f, name in zip(fields, names, strict=True)
        ]
    )
