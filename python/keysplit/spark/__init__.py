"""keysplit on Spark Connect: hot keys split, partial results merged exactly.

``session()`` starts an embedded local Spark Connect server, a standalone cluster on
loopback (``master="cluster:2"``), or connects to a remote one. ``skewed(df)`` is the
front shaped like PySpark's own API: ``skewed(df).groupBy("k").applyInPandas(f, schema,
merge=m)`` is ``apply_grouped()``, a lazy grouped map with the hot keys split, and
``.agg(...)`` is ``aggregate()``, a per-key aggregation through a grouper with partial and
final phases; ``skewed(left).join(right, on, how)`` is ``join()``, Spark's equi-join with the
hot keys of either side split over a grid of tasks; ``.agg(F.median("v"), ...)`` of
Columns is ``holistic_agg()``, Spark's aggregate with a hot key's exact median,
percentiles, mode and distinct values split. ``optimize(df)`` rewrites every keyed operator
of a query that will straggle (joins, holistic aggregates, windows) with those plans, from
statistics gathered once, and leaves the rest of the plan as Spark's own. ``apply_operator()`` runs a stateful operator per worker over its substream,
in arrival order, then merges; ``stream_aggregate()`` runs the aggregation in Structured
Streaming, its grouper state in Spark's state store; ``route()`` routes a DataFrame
lazily; ``skewed(df).write.partitionBy(...)`` writes a hot partition value with as many
tasks as its files need, and ``skewed(df).orderBy(...)`` spreads heavy ties; ``asof_join()`` joins each row to the nearest row in time of its series (pandas'
``merge_asof``), a hot series cut over the tasks; ``with_row_index()`` numbers a DataFrame's rows in their order, moving none; ``hot_keys()`` finds the heavy hitters. Every verb picks its session by one rule
(a Spark DataFrame's own unless ``session=`` names one) and reports through a :class:`Report` passed as
``report=``. A stream is a Spark DataFrame (routed on the executors, one source per
partition) or a client stream (routed here and ingested by the fastest path the server
allows). Needs ``pip install keysplit[spark]`` and Java 17.
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
from keysplit.spark.asof import AsofReport, asof_join
from keysplit.spark.explain import explain_skew, skew_table
from keysplit.spark.frame import SkewedFrame, SkewedGroupedData, skewed
from keysplit.spark.grouped import GroupedReport, apply_grouped, apply_grouped_with_report
from keysplit.spark.holistic import HolisticReport, holistic_agg
from keysplit.spark.hot_keys import hot_keys
from keysplit.spark.ingest import DEFAULT_BATCH_ROWS, INGEST_PATHS, IngestOptions
from keysplit.spark.join import JoinReport, join
from keysplit.spark.operator import Operator, apply_operator, windowed_count
from keysplit.spark.optimize import OperatorDecision, OptimizeReport, optimize
from keysplit.spark.options import SkewOptions
from keysplit.spark.report import ObservationMismatch, Report, ReportPendingError, RunReport, WindowReport
from keysplit.spark.routing import ExecutorSetupError, check_executors, package_archive, route, ship_keysplit
from keysplit.spark.row_index import with_row_index
from keysplit.spark.session import EmbeddedServer, Session, SparkConnectError, redact, session
from keysplit.spark.statistics import forget_statistics
from keysplit.spark.streaming import stream_aggregate, stream_metrics
from keysplit.spark.window import WindowSplitReport, window
from keysplit.spark.write import SkewedWriter, WriteReport

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_SKETCH_LG_K",
    "FUNCTIONS",
    "INGEST_PATHS",
    "Agg",
    "AsofReport",
    "EmbeddedServer",
    "ExecutorSetupError",
    "GroupedReport",
    "HolisticReport",
    "IngestOptions",
    "JoinReport",
    "ObservationMismatch",
    "Operator",
    "OperatorDecision",
    "OptimizeReport",
    "Report",
    "ReportPendingError",
    "RunReport",
    "Session",
    "SkewOptions",
    "SkewedFrame",
    "SkewedGroupedData",
    "SkewedWriter",
    "SparkConnectError",
    "WindowReport",
    "WindowSplitReport",
    "WriteReport",
    "aggregate",
    "aggregate_with_report",
    "explain_skew",
    "forget_statistics",
    "apply_grouped",
    "apply_grouped_with_report",
    "apply_operator",
    "asof_join",
    "optimize",
    "check_executors",
    "holistic_agg",
    "hot_keys",
    "join",
    "package_archive",
    "parse_aggs",
    "redact",
    "reference",
    "route",
    "session",
    "ship_keysplit",
    "skewed",
    "skew_table",
    "sketch_error",
    "stream_aggregate",
    "stream_metrics",
    "window",
    "with_row_index",
    "windowed_count",
]
