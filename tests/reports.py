"""The Spark verbs with their reports, as the tests read them: the verb's result and the
figures of the :class:`keysplit.spark.Report` passed to it (``report=``)."""

from __future__ import annotations

from typing import Any

from keysplit.spark import Report, RunReport, aggregate, apply_operator


def aggregated(stream: Any, **arguments: Any) -> tuple[Any, RunReport]:
    """``aggregate(stream, **arguments)`` and its report, filled before it returns."""
    report: Report[RunReport] = Report()
    result = aggregate(stream, report=report, **arguments)
    return result, report.get


def operated(stream: Any, **arguments: Any) -> tuple[Any, RunReport]:
    """``apply_operator(stream, **arguments)`` and its report."""
    report: Report[RunReport] = Report()
    result = apply_operator(stream, report=report, **arguments)
    return result, report.get
