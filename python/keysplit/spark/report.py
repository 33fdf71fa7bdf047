"""What Spark saw next to what the client measured: loads, partial rows (Γ), phase times."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from keysplit import metrics

#: The phases of a run, in order.
PHASES = ("routing", "shipping", "partial", "final")


class ObservationMismatch(RuntimeError):
    """Spark's partitions disagree with the client's routing: a tuple was lost or moved."""


@dataclass
class WindowReport:
    """One window (or the whole stream) of a run.

    ``client_loads[w]`` are the tuples the grouper sent to worker ``w``;
    ``partition_rows[p]`` the rows Spark's partition ``p`` aggregated, read through
    ``spark_partition_id()``; ``partition_workers[p]`` the worker ids found on partition
    ``p``. ``client_partial_rows`` is Γ from the routing (distinct (worker, key) pairs),
    ``spark_partial_rows`` the partial rows Spark produced. ``resumed`` windows were read
    from a checkpoint: their Spark figures are the ones recorded when they ran.
    """

    window: Any
    rows: int
    client_loads: list[int]
    partition_rows: list[int]
    partition_workers: list[list[int]]
    client_partial_rows: int
    spark_partial_rows: int
    seconds: dict[str, float] = field(default_factory=dict)
    resumed: bool = False

    def disagreements(self) -> list[str]:
        """Every way Spark's view differs from the client's; empty when they agree."""
        problems = []
        label = "" if self.window is None else f"window {self.window!r}: "
        for partition, found in enumerate(self.partition_workers):
            if found and found != [partition]:
                problems.append(f"{label}partition {partition} holds workers {found}, not just {partition}")
        if self.partition_rows != self.client_loads:
            problems.append(f"{label}Spark's rows per partition {self.partition_rows} != loads {self.client_loads}")
        if self.spark_partial_rows != self.client_partial_rows:
            problems.append(
                f"{label}Spark made {self.spark_partial_rows} partial rows, the routing's Γ is "
                f"{self.client_partial_rows}"
            )
        return problems


@dataclass
class RunReport:
    """A whole run: its windows, the grouper's stream metrics and the phase times."""

    grouper: str
    workers: int
    windows: list[WindowReport]
    summary: pl.DataFrame
    wall_seconds: float = 0.0

    @property
    def client_loads(self) -> list[int]:
        return [sum(w.client_loads[i] for w in self.windows) for i in range(self.workers)]

    @property
    def partition_rows(self) -> list[int]:
        return [sum(w.partition_rows[i] for w in self.windows) for i in range(self.workers)]

    @property
    def client_partial_rows(self) -> int:
        return sum(w.client_partial_rows for w in self.windows)

    @property
    def spark_partial_rows(self) -> int:
        return sum(w.spark_partial_rows for w in self.windows)

    @property
    def phase_seconds(self) -> dict[str, float]:
        return {phase: sum(w.seconds.get(phase, 0.0) for w in self.windows) for phase in PHASES}

    def overall(self) -> dict[str, Any]:
        """The overall row of :func:`keysplit.metrics.summarize` as a dict (λ, γ, Γ, ...)."""
        row = self.summary.filter(pl.col("window").is_null())
        return row.row(0, named=True) if row.height else {}

    def disagreements(self) -> list[str]:
        return [problem for window in self.windows for problem in window.disagreements()]

    def check(self) -> None:
        """Raises :class:`ObservationMismatch` unless Spark agrees with the client everywhere."""
        problems = self.disagreements()
        if problems:
            raise ObservationMismatch("; ".join(problems[:5]))

    def loads_table(self) -> pl.DataFrame:
        """One row per worker: the client's load and the rows of Spark's partition."""
        return pl.DataFrame(
            {
                "worker": list(range(self.workers)),
                "client_load": self.client_loads,
                "spark_partition_rows": self.partition_rows,
            },
            schema_overrides={"worker": pl.UInt32, "client_load": pl.UInt64, "spark_partition_rows": pl.UInt64},
        )

    def figures(self) -> dict[str, Any]:
        """The headline figures: λ, γ, Γ (client and Spark) and the phase times."""
        overall = self.overall()
        loads = pl.Series(self.client_loads, dtype=pl.UInt64)
        return {
            "grouper": self.grouper,
            "tuples": sum(self.client_loads),
            "load_imbalance": metrics.load_imbalance(loads),
            "replication_factor": overall.get("replication_factor"),
            "aggregation_cost_client": self.client_partial_rows,
            "aggregation_cost_spark": self.spark_partial_rows,
            **{f"{phase}_s": seconds for phase, seconds in self.phase_seconds.items()},
            "wall_s": self.wall_seconds,
        }
