"""keysplit on Spark Connect: routed Arrow batches, one partition per worker, two-phase merge.

``session()`` starts an embedded local Spark Connect server (or connects to a remote one),
``aggregate()`` aggregates a stream per key through a keysplit grouper with partial and
final phases, and ``apply_operator()`` runs a stateful operator per worker over its
substream, in arrival order, then merges. Needs ``pip install keysplit[spark]`` and Java 17.
"""

from __future__ import annotations

from keysplit.spark.aggregate import (
    DEFAULT_SKETCH_LG_K,
    FUNCTIONS,
    Agg,
    aggregate,
    aggregate_with_report,
    parse_aggs,
    reference,
    sketch_error,
)
from keysplit.spark.operator import apply_operator, windowed_count
from keysplit.spark.report import ObservationMismatch, RunReport, WindowReport
from keysplit.spark.session import EmbeddedServer, Session, SparkConnectError, redact, session
from keysplit.spark.shipping import DEFAULT_BATCH_ROWS

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_SKETCH_LG_K",
    "FUNCTIONS",
    "Agg",
    "EmbeddedServer",
    "ObservationMismatch",
    "RunReport",
    "Session",
    "SparkConnectError",
    "WindowReport",
    "aggregate",
    "aggregate_with_report",
    "apply_operator",
    "parse_aggs",
    "redact",
    "reference",
    "session",
    "sketch_error",
    "windowed_count",
]
