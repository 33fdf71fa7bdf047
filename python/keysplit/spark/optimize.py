"""``optimize(df)``: every keyed operator of a query that will straggle, split; the rest of
the plan left as Spark's own.

It reads the query's Spark Connect plan on the client (:mod:`.keyed_plan`), and for each
keyed operator it can split (a join, an aggregate with a holistic function, a window, with a
``partitionBy`` or none) builds keysplit's plan for it without running anything. Then, once per
query, it measures the inputs of those operators (:mod:`.statistics`: one sample of each
input, every input at once), and decides each operator by one rule, the **cost guard**:

    an operator is rewritten when its predicted hottest task holds at least ``min_skew``
    (5, Spark's own ``skewedPartitionFactor``) times a mean task's work (its hottest key's
    share of the rows, at the count's 95 % upper bound; a join's, of the work
    ``L + R + L·R``; times the tasks), and that key's work is at least ``min_rows``
    (1,000,000) rows; a window with no ``partitionBy`` whose rows move, five times that
    (:data:`.WHOLE_FRAME_MIN_ROWS_FACTOR`: Spark's one task sorts a million rows in about
    a second).

One shape is rewritten whatever its keys, with no statistics (rule ``tallied``): a distinct
count beside a ``mode`` or ``collect_set`` of the same column, which Spark computes per
(key, value) group (:attr:`.SkewAggregate.tallies_every_key`).

Below the factor, Spark's plan loses less to its straggler than keysplit's plan adds (it
reads its input two to four times: the keys not hot, the hot keys' rows, their totals);
below the size, the straggler ends sooner than the rewrite's extra stages do. The plan is
rebuilt bottom-up: each operator rewritten is replaced by keysplit's plan for it, its hot
keys, cuts and grids computed on the client from the sample and put in the plan as literal
tables, so no sampling stage runs with the query; every other node is Spark's own, and
where nothing is rewritten ``optimize`` returns ``df`` itself, with nothing added. A rewritten
operator above a rewritten join or window on keys that hold that one's is fused over its two
branches (:func:`_fused`); on other keys it reads that one's output persisted
(:func:`_split_below`).

An operator whose input is another keyed operator's output is measured without running that
operator where it can be: through windows (which keep their rows), from a join's statistics
on the join's keys, or with a join's driving side sampled (also, in a second statistics job,
for one on the join's keys that the join's statistics split: :func:`_sampled_again`).
Otherwise (above an aggregate, a full join on other keys) it is left to Spark and the report
says so; split it by hand with the verb the report names, whose plan samples in the plan.

Nothing is set on the session and nothing is shipped to the server: it runs wherever Spark
Connect does.
"""

from __future__ import annotations

import copy
import functools
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._errors import ConfigError, ConfigTypeError, KeysplitError
from keysplit.spark.columns import column
from keysplit.spark.expressions import alias_of, reference_name, rewritten, unaliased
from keysplit.spark.holistic import SPLIT_FUNCTIONS, HolisticReport, SkewAggregate, planned_aggregate
from keysplit.spark.intake import is_spark_frame, session_for, shuffle_partitions
from keysplit.spark.join import JoinReport, SkewJoin, planned_join
from keysplit.spark.keyed_plan import KeyedOperator, Kind, keyed_operators, plan_children, plan_frame, windows_in
from keysplit.spark.lifetime import unpersist_with
from keysplit.spark.options import MIN_ROWS, MIN_SKEW, WHOLE_FRAME_MIN_ROWS_FACTOR, SkewOptions
from keysplit.spark.report import Report
from keysplit.spark.statistics import (
    BROADCAST_SAMPLE_ROWS,
    InputSample,
    SampleRequest,
    estimated_rows,
    sample_fraction,
    sample_inputs,
)
from keysplit.spark.window import SkewWindow, WindowSplitReport, planned_window

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession

    from keysplit.spark.session import Session

    #: A plan over its inputs' rows whose keys are all hot, and what the rows its branches
    #: read pass through (:func:`_fused` persists them there).
    _HotOnly = Callable[[list[DataFrame], Callable[[DataFrame], DataFrame]], DataFrame]

_WINDOW_PREFIX = "__keysplit_o_w"

_Planned = SkewWindow | SkewAggregate | SkewJoin
_VerbReport = Report[WindowSplitReport] | Report[HolisticReport] | Report[JoinReport]


@dataclass(frozen=True)
class OperatorDecision:
    """One keyed operator of the query, and what :func:`optimize` did with it.

    ``operator`` is its description (as :func:`keysplit.spark.explain_skew` names it);
    ``rewritten`` whether keysplit's plan replaced it; ``rule`` what decided it (``skew``:
    rewritten; ``sampled in its plan``: rewritten, its hot keys found in its own plan;
    ``tallied``: rewritten, every key's values counted, no statistics needed;
    ``below threshold``, ``small``, ``straggler above``, ``no hot key``, ``few values``, ``combinable``,
    ``broadcast``, ``not measured``, ``not split``, ``needs merge``, ``not read``, and
    ``stacked``: its input a split plan the server would not persist); ``why``
    the rule with its figures; ``predicted_skew`` its predicted hottest task as a multiple of
    a mean task's work (null when not measured); ``hot_keys`` how many keys the sample found
    hot, and ``split_keys`` those it split (their key columns); ``report`` the verb's own report
    when rewritten, filled when an action runs the result (its exact hot keys' rows, chunks,
    grids; where adaptive execution drops a branch with no row, as when every key is hot, it
    drops what that branch observes, and the report may stay pending).
    """

    operator: str
    kind: str
    rewritten: bool
    rule: str
    why: str
    predicted_skew: float | None = None
    hot_keys: int = 0
    report: _VerbReport | None = None
    #: The hot keys it split (their key columns, hottest first), as the statistics found them.
    split_keys: pl.DataFrame | None = None


@dataclass(frozen=True)
class OptimizeReport:
    """What :func:`optimize` decided, per keyed operator (inputs first), with the statistics'
    cost: ``sampled_inputs`` inputs sampled in ``statistics_seconds`` (one pass over each, all
    at once; operators on one input's keys share its pass), and the plan read and rebuilt in
    ``planning_seconds``."""

    operators: tuple[OperatorDecision, ...]
    min_skew: float
    min_rows: int
    workers: int
    sampled_inputs: int
    statistics_seconds: float
    planning_seconds: float
    #: Of the inputs sampled, those whose sample was kept from an earlier call over the same
    #: plan and files, and not scanned again (:func:`keysplit.spark.forget_statistics`).
    reused_inputs: int = 0
    #: The split operators' outputs that a split operator above reads, persisted (memory and
    #: disk) so that its plan reads them once; :meth:`release` unpersists them.
    persisted: tuple[DataFrame, ...] = ()

    @property
    def rewritten(self) -> list[OperatorDecision]:
        return [decision for decision in self.operators if decision.rewritten]

    def release(self) -> None:
        """Unpersists what the optimized query persisted (:attr:`persisted`), once its
        actions are done; otherwise it is unpersisted once no DataFrame reads the query
        (when the last one is garbage collected)."""
        for frame in self.persisted:
            frame.unpersist()

    def table(self) -> pl.DataFrame:
        """One row per operator: ``operator``, ``kind``, ``rewritten``, ``rule``,
        ``predicted_skew``, ``hot_keys``, ``why``."""
        return pl.DataFrame(
            [
                {
                    "operator": d.operator,
                    "kind": d.kind,
                    "rewritten": d.rewritten,
                    "rule": d.rule,
                    "predicted_skew": d.predicted_skew,
                    "hot_keys": d.hot_keys,
                    "why": d.why,
                }
                for d in self.operators
            ],
            schema={
                "operator": pl.String,
                "kind": pl.String,
                "rewritten": pl.Boolean,
                "rule": pl.String,
                "predicted_skew": pl.Float64,
                "hot_keys": pl.Int64,
                "why": pl.String,
            },
        )

    def __str__(self) -> str:
        lines = [
            f"optimize: {len(self.rewritten)} of {len(self.operators)} keyed operators rewritten "
            f"(hottest task >= {self.min_skew:g}x a mean task's of {self.workers}, >= {self.min_rows:,} rows); "
            "statistics: "
            f"{self.sampled_inputs} inputs sampled in {self.statistics_seconds:.2f} s"
            + (f" ({self.reused_inputs} kept from an earlier call)" if self.reused_inputs else "")
            + (
                f"; {len(self.persisted)} split outputs persisted for the splits above them (release() frees them)"
                if self.persisted
                else ""
            )
        ]
        for number, d in enumerate(self.operators, 1):
            verdict = "rewritten" if d.rewritten else "left to Spark"
            skew = f", predicted hottest task {d.predicted_skew:.1f}x the mean" if d.predicted_skew is not None else ""
            lines.append(f"{number}. {d.operator}: {verdict} ({d.rule}{skew})\n   {d.why}")
        return "\n".join(lines)


@dataclass
class _Candidate:
    """An operator keysplit can split, with its plan built and its inputs to sample."""

    operator: KeyedOperator
    node: Any
    planned: _Planned
    requests: list[SampleRequest]
    #: For windows in a ``select`` or inside expressions: what makes the node's output from
    #: theirs and the input's column names.
    finish: Callable[[DataFrame, list[str]], DataFrame] | None = None
    samples: list[InputSample] = field(default_factory=list)
    #: The join or window (its operator's index) whose statistics this operator is judged
    #: from, when its input is that operator's output on its keys (then it is not sampled).
    source: int | None = None
    #: Whether it finds its hot keys in its own plan (a verb's operator whose input cannot
    #: be measured).
    in_plan: bool = False
    #: The report its verb fills (None: one of optimize's own).
    report: Report[Any] | None = None
    #: A join's: each side's rows as Spark's plan statistics estimate them (None: unknown).
    estimated_rows: tuple[float | None, ...] = ()
    #: For an operator judged from a join's statistics (``source``): its input sampled through
    #: the join's driving side, taken where that judgement splits it (:func:`_sampled_again`).
    through: SampleRequest | None = None


def optimize(
    frame: DataFrame,
    *,
    workers: int | None = None,
    seed: int = 0,
    min_skew: float = MIN_SKEW,
    min_rows: int = MIN_ROWS,
    session: Session | SparkSession | None = None,
    report: Report[OptimizeReport] | None = None,
) -> DataFrame:
    """``frame`` with every keyed operator of its plan that will straggle replaced by
    keysplit's plan for it: a lazy DataFrame equal to ``frame`` (as a multiset of rows; row
    for row where ``frame`` is ordered). Joins (any equi-join Spark shuffles), aggregates with
    a holistic function (``median``, ``percentile``, ``mode``, ``count_distinct``,
    ``collect_set``) and windows, over a ``partitionBy`` or none (every function
    :func:`keysplit.spark.window` splits), are rewritten where the cost guard (the module's
    notes) finds a hot key; every other node is Spark's own, and where nothing is rewritten
    ``frame`` itself is returned.

    Runs one statistics pass now (a sample of each measured input, all at once), not the
    query. ``workers`` (default: the shuffle's partitions) is what a key's work is measured
    against and how many tasks a rewritten operator's hot keys fill; ``seed`` seeds the
    samples and the hashes that spread the hot keys' rows; ``min_skew`` and ``min_rows`` are
    the cost guard's factor and size. ``report`` (a :class:`keysplit.spark.Report`) is filled at once with an
    :class:`OptimizeReport`: per operator, rewritten or left and why, with each rewritten
    operator's own report, filled when an action runs the result.
    """
    if not is_spark_frame(frame):
        raise ConfigTypeError(f"optimize works on a Spark DataFrame, got {type(frame).__name__}")
    options = SkewOptions(workers=workers, seed=seed, min_skew=min_skew, min_rows=min_rows, session=session)
    return optimized(frame, options, report=report)[0]


def optimized(
    frame: DataFrame,
    options: SkewOptions,
    *,
    report: Report[OptimizeReport] | None = None,
    only: Mapping[int, Report[Any] | None] | None = None,
) -> tuple[DataFrame, dict[int, OperatorDecision]]:
    """:func:`optimize`'s work, and its decisions by plan node (``id``). ``only``: the plan
    nodes of the operators to consider, each with the report its verb fills (``skewed(df)``'s
    verbs, which split one operator of their own): the others are neither measured nor
    reported, and one of these whose input cannot be measured finds its hot keys in its own
    plan (the user asked for it split)."""
    handle = session_for(frame, options.session)
    with handle.analyses_kept():
        return _optimized(frame, options, handle, report, only)


def _optimized(
    frame: DataFrame,
    options: SkewOptions,
    handle: Session,
    report: Report[OptimizeReport] | None,
    only: Mapping[int, Report[Any] | None] | None,
) -> tuple[DataFrame, dict[int, OperatorDecision]]:
    seed, min_skew = options.seed, options.min_skew
    started = time.perf_counter()
    tasks = options.workers if options.workers is not None else shuffle_partitions(handle)
    operators = handle.call("reading the plan", lambda: keyed_operators(frame))
    streaming = bool(operators) and handle.call("reading the plan", lambda: frame.isStreaming)
    decisions: dict[int, OperatorDecision] = {}
    candidates: dict[int, _Candidate] = {}
    considered = {
        index: _left_alone(operator, streaming)
        for index, operator in enumerate(operators)
        if only is None or id(_node(operator)) in only
    }
    # Their inputs' statistics and files asked for at once, while each is planned in turn.
    sampled = [operators[index] for index, left in considered.items() if left is None]
    handle.prefetch(
        {id(given): given for o in sampled if _measured(_below(o, operators)) for given in o.inputs}.values()
    )
    for index, left in considered.items():
        if left is None:
            left = _planned(index, operators, candidates, handle, tasks, seed, in_plan=only is not None)
        if left is not None:
            decisions[index] = left
            continue
        if only is not None:
            candidates[index].report = only[id(_node(operators[index]))]
        # Its requests' own plans (a verb's input with its columns added; their files are the
        # input's, asked for above), while the next operator is planned.
        handle.prefetch(
            [request.frame for request in candidates[index].requests if request.statistics_of is None], files=False
        )
    planning = time.perf_counter() - started
    requests = [request for candidate in candidates.values() for request in candidate.requests]
    started = time.perf_counter()
    samples, sampled_inputs, reused = sample_inputs(
        handle, requests, seed, tasks, min_skew=options.min_skew, min_rows=options.min_rows
    )
    statistics = time.perf_counter() - started
    started = time.perf_counter()
    for candidate in candidates.values():
        candidate.samples, samples = samples[: len(candidate.requests)], samples[len(candidate.requests) :]
    rebuilt = _Rebuilt()
    persisted: list[DataFrame] = []
    # Exact per-operator counts are observed only where a report will show them (a verb's
    # report, passed in ``only``, or this one's): see :func:`_decided`.
    observed = report is not None
    decided = {
        index: _decided(candidate, candidates, handle, options, observed=observed)
        for index, candidate in candidates.items()
    }
    started_again = time.perf_counter()
    again, reused_again = _sampled_again(decided, candidates, handle, options, tasks, observed=observed)
    statistics += time.perf_counter() - started_again
    sampled_inputs, reused = sampled_inputs + again, reused + reused_again
    _leave_under_kept_stragglers(decided, candidates, operators)
    # An operator fused over a split one below it; not over one that is itself fused (its
    # plan is not two branches by its keys).
    fused: dict[int, int] = {}
    for index, candidate in sorted(candidates.items()):
        lower = _fused_over(candidate, operators, decided)
        if lower is not None and lower not in fused:
            fused[index] = lower
    branches: dict[int, tuple[DataFrame, DataFrame]] = {}
    # Inputs first: an operator's replacement reads its inputs as rebuilt with those below.
    for index, candidate in sorted(candidates.items()):
        decision, build = decided[index]
        if build is not None:
            inputs = [rebuilt.frame(given) for given in candidate.operator.inputs]
            replacement: DataFrame | None
            if index in fused:
                lower_build = decided[fused[index]][1]
                assert lower_build is not None
                replacement, decision = _fused(
                    candidate,
                    decision,
                    build,
                    operators[fused[index]],
                    lower_build,
                    branches[fused[index]],
                    handle,
                    persisted,
                )
            elif index in fused.values():
                assert build.branches is not None
                branches[index] = build.branches(inputs)
                replacement = branches[index][0].union(branches[index][1])
            else:
                replacement, decision = _stacked(
                    candidate, decision, build, inputs, operators, rebuilt, handle, persisted
                )
            if replacement is not None:
                rebuilt.replace(candidate.node, replacement._plan)
        decisions[index] = decision
    result = rebuilt.frame(frame)
    for held in persisted:
        unpersist_with(result, held)
    planning += time.perf_counter() - started
    if report is not None:
        report.fill(
            OptimizeReport(
                operators=tuple(decisions[i] for i in sorted(decisions)),
                min_skew=float(min_skew),
                min_rows=options.min_rows,
                workers=tasks,
                sampled_inputs=sampled_inputs,
                reused_inputs=reused,
                statistics_seconds=statistics,
                planning_seconds=planning,
                persisted=tuple(persisted),
            )
        )
    return result, {id(_node(operators[index])): decision for index, decision in decisions.items()}


def _sampled_again(
    decided: dict[int, tuple[OperatorDecision, _Build | None]],
    candidates: dict[int, _Candidate],
    handle: Session,
    options: SkewOptions,
    tasks: int,
    *,
    observed: bool,
) -> tuple[int, int]:
    """Each operator judged from a join's statistics and split by that judgement, sampled
    through the join's driving side (:attr:`_Candidate.through`) and decided again from its
    own sample: its hot keys and cuts then known here, not sampled in its plan. At the
    input's full width, as the query about to be split runs. The inputs sampled, and of those
    the ones kept from an earlier call."""
    again = {
        index: candidate
        for index, candidate in candidates.items()
        if candidate.through is not None and decided[index][1] is not None
    }
    if not again:
        return 0, 0
    requests = [candidate.through for candidate in again.values() if candidate.through is not None]
    samples, sampled, reused = sample_inputs(
        handle, requests, options.seed, tasks, min_skew=options.min_skew, min_rows=options.min_rows, full_width=True
    )
    for (index, candidate), sample in zip(again.items(), samples, strict=True):
        candidate.samples, candidate.source = [sample], None
        decided[index] = _decided(candidate, candidates, handle, options, observed=observed)
    return sampled, reused


def _stacked(
    candidate: _Candidate,
    decision: OperatorDecision,
    build: _Build,
    inputs: list[DataFrame],
    operators: list[KeyedOperator],
    rebuilt: _Rebuilt,
    handle: Session,
    persisted: list[DataFrame],
) -> tuple[DataFrame | None, OperatorDecision]:
    """``candidate``'s replacement over its rebuilt ``inputs``, each input that is another
    split plan persisted (:func:`_split_below`); where the server refuses to persist, none
    (the operator is left to Spark: rule ``stacked``)."""
    if build.reads_once:
        return build.whole(inputs), decision
    stacked = [
        (given, lower)
        for given, lower in zip(candidate.operator.inputs, _split_below(candidate, operators, rebuilt), strict=True)
        if lower is not None
    ]
    below = ", ".join(lower.label for _, lower in stacked)
    refused = _persisted([_holding(given, lower, rebuilt) for given, lower in stacked], handle, persisted)
    if refused is not None:
        return None, OperatorDecision(
            candidate.operator.label,
            candidate.operator.kind,
            False,
            "stacked",
            f"its input is keysplit's plan of {below}, which its own plan would read once per branch unless "
            f"persisted, and the server refused to persist it ({refused}): Spark's operator reads it once",
            decision.predicted_skew,
            decision.hot_keys,
        )
    if stacked:
        decision = replace(
            decision,
            why=f"{decision.why}; it reads keysplit's plan of {below}, persisted (memory and disk) so that its "
            "branches read it once",
        )
    return build.whole(inputs), decision


def _fused_over(
    candidate: _Candidate,
    operators: list[KeyedOperator],
    decided: Mapping[int, tuple[OperatorDecision, _Build | None]],
) -> int | None:
    """The split join or window (its index) that ``candidate``, also split, reads on keys
    that hold that operator's own (its keys a superset), through nothing but filters and
    projections that keep those key columns; or None. Its keys' groups then never span
    the lower's two branches (:meth:`SkewWindow.branches`, :meth:`SkewJoin.branches`),
    and it is fused over them (:func:`_fused`)."""
    operator = candidate.operator
    upper = decided[operators.index(operator)][1]
    if upper is None or upper.reads_once:
        return None
    lower = _split_under(operator, operators, decided)
    if lower is None:
        return None
    build = decided[lower][1]
    assert build is not None
    return lower if build.branches is not None else None


def _split_under(
    operator: KeyedOperator,
    operators: list[KeyedOperator],
    decided: Mapping[int, tuple[OperatorDecision, _Build | None]],
) -> int | None:
    """The rewritten operator (its index) that ``operator``, an aggregate or window, reads on
    keys that hold that one's split columns, through nothing but filters and projections that
    keep those key columns; or None. In Spark's plan the two run in one stage (the lower's
    partitioning serves the upper)."""
    if operator.kind not in (Kind.AGGREGATE, Kind.WINDOW) or len(operator.inputs) != 1 or not operator.names[0]:
        return None
    rewritten = {id(_node(operators[index])): index for index, (_, build) in decided.items() if build is not None}
    node = operator.inputs[0]._plan
    keys = set(operator.names[0])
    while id(node) not in rewritten:
        if not _keeps_rows_and_keys(node, keys):
            return None
        node = node._child
    lower = rewritten[id(node)]
    return lower if any(set(split) <= keys for split in _split_columns(operators[lower])) else None


def _leave_under_kept_stragglers(
    decided: dict[int, tuple[OperatorDecision, _Build | None]],
    candidates: Mapping[int, _Candidate],
    operators: list[KeyedOperator],
) -> None:
    """A split join or window is left to Spark where the operator above it on its keys (in
    Spark's plan, one stage with it) keeps a hot key the guard found too small to split: the
    split would add an exchange under that operator and leave its straggler (at 2x10^6 rows,
    a join split under a median kept by Spark: the computed 32-slot makespan 0.64x Spark's;
    both split, 0.39x; both Spark's, the straggler in one stage)."""
    for index in sorted(candidates):
        above, build = decided[index]
        if build is not None or above.rule != "small":
            continue
        lower = _split_under(candidates[index].operator, operators, decided)
        if lower is None:
            continue
        split = decided[lower][0]
        decided[lower] = (
            replace(
                split,
                rewritten=False,
                rule="straggler above",
                why=f"{split.why}; but {above.operator} above it on its keys is left to Spark ({above.rule}), and "
                "splitting this one alone would add an exchange under that one and keep its hot key in one task: "
                "Spark runs the two in one stage",
                report=None,
                split_keys=None,
            ),
            None,
        )


def _keeps_rows_and_keys(node: Any, keys: set[str]) -> bool:
    """Whether ``node`` maps its child's rows one by one (or drops some) and passes the
    columns ``keys`` through unchanged: then it is applied to a union branch by branch."""
    kind = type(node).__name__
    if kind in ("Filter", "SubqueryAlias"):
        return True
    if kind == "WithColumns":
        return not keys & set(node._columnNames) and not any(
            windows_in(c._expr) for c in _connect_columns(node._columns)
        )
    if kind == "Drop":
        return all(isinstance(c, str) and c not in keys for c in node._columns)
    if kind == "WithColumnsRenamed":
        return not keys & (set(node._colsMap) | set(node._colsMap.values()))
    if kind == "Project":
        kept: set[str] = set()
        for given in _connect_columns(node._columns):
            expression = given._expr
            name = reference_name(unaliased(expression))
            if _plain_star(expression):
                kept |= keys
            elif name is None or alias_of(expression) not in (None, name):
                return False
            else:
                kept.add(name)
        return keys <= kept
    return False


def _split_columns(lower: KeyedOperator) -> list[list[str]]:
    """The output columns of ``lower`` (a join or a window) that hold the key it splits by,
    row for row, in its key's order: lists of names, any of which an operator above may
    group by."""
    if lower.kind is Kind.WINDOW:
        return [list(lower.names[0])]
    left, right = list(lower.names[0]), list(lower.names[1])
    if left == right:  # USING: the output's key columns are the key, whichever side it came from
        return [left]
    return {"inner": [left, right], "left": [left], "left_semi": [left], "left_anti": [left], "right": [right]}.get(
        lower.how or "", []
    )


def _fused(
    candidate: _Candidate,
    decision: OperatorDecision,
    build: _Build,
    lower: KeyedOperator,
    lower_build: _Build,
    branches: tuple[DataFrame, DataFrame],
    handle: Session,
    persisted: list[DataFrame],
) -> tuple[DataFrame, OperatorDecision]:
    """``candidate``'s replacement over the two branches of the split ``lower`` under it
    (:func:`_fused_over`): Spark's own operator over the keys ``lower`` left to Spark, in the
    stage of ``lower``'s own (its output is partitioned by those keys: no exchange between),
    and keysplit's plan of it over ``lower``'s hot keys' output alone, persisted, since each
    branch of that plan reads it. The lower's plan is not read whole by anything above it,
    and no branch of the upper re-reads the rows of the keys that are not hot."""
    assert candidate.operator.frame is not None
    hot = _through(candidate.operator.inputs[0], lower, branches[1])
    by_spark = _through(candidate.operator.frame, lower, branches[0])
    held: list[str | None] = []

    def hold(rows: DataFrame) -> DataFrame:
        held.append(_persisted([rows], handle, persisted))
        return rows

    if build.hot_only is not None and _covers(candidate.operator, build, lower, lower_build):
        # Each of lower's hot keys is hot here: no branch for keys not hot, and what its
        # branches read is persisted where its plan says (a window's rows with their chunks).
        split, what = build.hot_only([hot], hold), "each of them hot here too: its rows as its branches read them"
    else:
        split, what = build.whole([hot]), "that output"
    if not held:
        hold(hot)
    [refused] = held
    kept = "persisted (memory and disk)" if refused is None else f"not persisted (the server refused: {refused})"
    decision = replace(
        decision,
        why=f"{decision.why}; fused over {lower.label}'s split: Spark's own operator over the keys it left to "
        f"Spark, keysplit's over its hot keys' output ({what} {kept})",
    )
    return by_spark.union(split), decision


def _covers(upper: KeyedOperator, build: _Build, lower: KeyedOperator, lower_build: _Build) -> bool:
    """Whether ``upper``, fused over ``lower``, splits every key ``lower`` splits (its keys
    those of ``lower``'s split): then its plan over ``lower``'s hot keys' output has no branch
    for keys not hot (which would read that output for no row)."""
    if build.hot_only is None or build.hot_keys is None or lower_build.hot_keys is None:
        return False
    names = list(upper.names[0])
    for split in _split_columns(lower):
        if sorted(split) == sorted(names):
            order = [names.index(name) for name in split]
            return lower_build.hot_keys <= {tuple(key[i] for i in order) for key in build.hot_keys}
    return False


def _through(frame: DataFrame, lower: KeyedOperator, part: DataFrame) -> DataFrame:
    """``frame`` with ``lower``'s node under it read from ``part`` instead."""
    view = _Rebuilt()
    view.replace(_node(lower), copy.copy(part._plan))
    return view.frame(frame)


def _split_below(
    candidate: _Candidate, operators: list[KeyedOperator], rebuilt: _Rebuilt
) -> list[KeyedOperator | None]:
    """Per input of ``candidate``, the operator under it that keysplit's plan replaced, if
    any. Such an input is persisted: each branch of ``candidate``'s plan (its cold keys, its
    hot rows, their totals) reads its input, and Spark prunes each copy's columns
    differently, so few of their exchanges are reused and the plan below ran once per
    branch (2·10^6 rows, a hot key of 30 %: a split join feeding a split window, 86
    task-seconds against Spark's 11). A persisted input is computed once, where an action
    first reads it, and recomputed from its lineage where an executor is lost.

    Measured at 10^7 rows with a hot key of 30 % on local[2] (32 tasks), both split: every
    keyed stage's hottest task 1.03–1.49x its mean (Spark's 7.9–9.3x), the 32-slot makespan
    computed from the task times 1.25–1.44x better than Spark's (a join feeding a median,
    a join feeding a window, a window feeding a percentile), but 4–6x Spark's task time, so
    3.2–5.9x its wall on two cores: each branch above still passes over every row. With the
    lower alone split and the upper left to Spark, the makespan was 1.04–1.07x better (the
    upper's task held the hot key whole); with the upper alone, worse (Spark's lower
    operator, straggler and all, ran in each of its branches)."""
    found: list[KeyedOperator | None] = []
    for given in candidate.operator.inputs:
        under = _keyed_below(given._plan, operators)
        found.append(next((lower for lower in under if id(_node(lower)) in rebuilt.replacements), None))
    return found


def _holding(given: DataFrame, lower: KeyedOperator, rebuilt: _Rebuilt) -> DataFrame:
    """What of the input ``given`` is persisted for the split ``lower`` under it: the branch
    of a union that holds ``lower``, as rebuilt; the union's other branches are read again as
    they are (a scan, say: copying it into the cache would cost more than reading it).
    ``given`` as rebuilt where it is no union."""
    node = given._plan
    while type(node).__name__ == "SetOperation" and node.set_op == "union":
        holding = [child for child in (node._child, node.other) if _keyed_below(child, [lower])]
        if len(holding) != 1:
            break
        node = holding[0]
    return rebuilt.frame(given if node is given._plan else plan_frame(node, given._session))


def _persisted(frames: list[DataFrame], handle: Session, persisted: list[DataFrame]) -> str | None:
    """Persists ``frames`` (memory and disk), adding them to ``persisted``; where the server
    refuses (serverless platforms do), none stays persisted and its message is returned."""
    from pyspark.errors import PySparkException

    done: list[DataFrame] = []
    try:
        for given in frames:
            done.append(handle.call("persisting a split operator's output", given.persist))
    except PySparkException as error:
        for given in done:
            given.unpersist()
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    persisted.extend(done)
    return None


def split_verb(
    query: DataFrame,
    made: Sequence[DataFrame],
    options: SkewOptions,
    report: Report[Any] | None,
    unsplit: Callable[[Session, str], DataFrame],
) -> DataFrame:
    """A ``skewed(df)`` verb's result: ``query``, Spark's own plan of the verb, with its
    operators (the roots of the DataFrames in ``made``) split where the cost guard finds them
    straggling, from statistics gathered now. An operator its verb refuses raises here. When
    the verb's one operator is left to Spark and a report is asked for, the result is
    ``unsplit(session, why)``: Spark's plan, observed for the report."""
    nodes = [frame._plan for frame in made]
    reports = {id(node): report if len(nodes) == 1 else None for node in nodes}
    result, decisions = optimized(query, options, only=reports)
    for node in nodes:
        decision = decisions.get(id(node))
        if decision is not None and decision.rule in ("not split", "not read"):
            raise ConfigError(decision.why)
    decision = decisions.get(id(nodes[0]))
    if report is not None and len(nodes) == 1 and (decision is None or not decision.rewritten):
        why = decision.why if decision is not None else "no key is split"
        return unsplit(session_for(query, options.session), f"{decision.rule}: {why}" if decision else why)
    return result


def _node(operator: KeyedOperator) -> Any:
    """The plan node of ``operator``."""
    assert operator.frame is not None
    return operator.frame._plan


def _planned(
    index: int,
    operators: list[KeyedOperator],
    candidates: dict[int, _Candidate],
    handle: Session,
    workers: int,
    seed: int,
    *,
    in_plan: bool = False,
) -> OperatorDecision | None:
    """Plans operator ``index`` into ``candidates`` (measured, judged from the statistics of
    a join or window below it, or with ``in_plan`` and neither, sampled in its own plan), or
    returns why it is left to Spark."""
    operator = operators[index]

    def left(rule: str, why: str) -> OperatorDecision:
        return OperatorDecision(operator.label, operator.kind, False, rule, why)

    below = _below(operator, operators)
    measured = _measured(below)
    source = driving = None
    unmeasured: OperatorDecision | None = None
    if not measured:
        source = _join_on_the_same_keys(operator, operators, candidates)
        driving = _driving_join(operator, operators, candidates)
        if source is None and driving is None and not in_plan:
            lower = next(lower for found in below for lower in found if not lower.kind.keeps_rows)
            unmeasured = left(
                "not measured",
                f"its input is {lower.label}'s output: measuring it would run that operator; split it by hand "
                f"with {operator.call or 'the keysplit verb'}, which samples in its plan",
            )
            if not _tallied(operator):
                return unmeasured
    try:
        candidate = _candidate(operator, handle, workers, seed, measured=measured)
    except _Broadcast as broadcast:
        return left(
            "broadcast",
            f"Spark's plan broadcasts the {broadcast.side} side: no exchange moves the other side's rows by key",
        )
    except KeysplitError as error:
        if in_plan:
            # A verb's own operator: its refusal is the verb's error, as it was raised.
            raise
        return left("not split", str(error))
    if isinstance(candidate.planned, SkewAggregate) and candidate.planned.tallies_every_key:
        # Counted for every key: nothing to measure.
        candidate.requests = []
        candidates[index] = candidate
        return None
    if unmeasured is not None:
        return unmeasured
    candidate.source = source
    candidate.in_plan = not measured and source is None and driving is None
    if driving is not None:
        request = _sampled_through(candidate, candidates[driving[0]], driving[1], seed)
        if source is None:
            candidate.requests = [request]
        else:
            # Judged first from the join's statistics; sampled through only where those find it
            # split (:func:`_sampled_again`).
            candidate.through = request
    windows = [lower for found in below for lower in found if lower.kind.keeps_rows]
    if measured and windows and not isinstance(candidate.planned, SkewJoin):
        _measured_under_windows(candidate, windows, operators, candidates, handle)
    candidates[index] = candidate
    return None


def _tallied(operator: KeyedOperator) -> bool:
    """Whether ``operator`` may be an aggregate whose every key is counted
    (:attr:`SkewAggregate.tallies_every_key`, decided once its plan is built): a distinct
    count beside another holistic function."""
    names = {name for name, _ in operator.functions}
    return operator.kind is Kind.AGGREGATE and "count_distinct" in names and bool(names & {"mode", "collect_set"})


def _measured_under_windows(
    candidate: _Candidate,
    windows: list[KeyedOperator],
    operators: list[KeyedOperator],
    candidates: dict[int, _Candidate],
    handle: Session,
) -> None:
    """``candidate``'s sample taken with the windows under it removed: they keep their input's
    rows, so its key's rows are the same without them, and the sample then scans, no more.
    When it reads a window's values (a median of a lag), it is judged instead from the window
    it reads on the same keys (its rows per key are that window's input's), its cuts found in
    its plan; failing that, the sample runs the windows."""
    from pyspark.errors import AnalysisException
    from pyspark.logger import PySparkLogger

    assert not isinstance(candidate.planned, SkewJoin)
    view = _Rebuilt()
    for lower in windows:
        assert lower.frame is not None
        view.replace(lower.frame._plan, lower.frame._plan._child, keep_id=False)
    request = _over(candidate.planned, view.frame(candidate.operator.inputs[0])).sample_request()
    # PySpark's own logger class (a plain logging.Logger under its name breaks its calls).
    quiet = PySparkLogger.getLogger("DataFrameQueryContextLogger")
    level = quiet.level
    # A column the windows make is not there without them: Spark says so, and logs it.
    quiet.setLevel(logging.CRITICAL)
    try:
        handle.call("reading the plan", lambda: request.frame.select(request.key_hash, *request.columns).schema)
    except AnalysisException:
        fed = candidate.operator.fed_by[0]
        source = None if fed is None or fed.kind is not Kind.WINDOW else operators.index(fed)
        if source is not None and source in candidates and candidates[source].source is None:
            candidate.requests, candidate.source = [], source
        return
    finally:
        quiet.setLevel(level)
    candidate.requests = [request]


def _driving_join(
    operator: KeyedOperator, operators: list[KeyedOperator], candidates: dict[int, _Candidate]
) -> tuple[int, int] | None:
    """The measured join under ``operator`` each of whose output rows comes from one row of
    one side (an inner, left, semi or anti join's left side; a right join's right side), with
    that side: sampling that side samples the join's output. None when there is no such join."""
    under = _join_under(operator, operators, candidates)
    if under is None:
        return None
    side = {"inner": 0, "left": 0, "left_semi": 0, "left_anti": 0, "right": 1}.get(operators[under].how or "")
    return None if side is None else (under, side)


def _join_under(
    operator: KeyedOperator, operators: list[KeyedOperator], candidates: dict[int, _Candidate]
) -> int | None:
    """The one join under ``operator`` (through no keyed operator but those that keep their
    rows), when it is measured (its index), or None."""
    if operator.kind is Kind.JOIN or len(operator.inputs) != 1:
        return None
    below = _keyed_below(operator.inputs[0]._plan, operators)
    joins = [lower for lower in below if lower.kind is Kind.JOIN]
    if len(joins) != 1 or any(lower.kind is not Kind.JOIN and not lower.kind.keeps_rows for lower in below):
        return None
    index = operators.index(joins[0])
    candidate = candidates.get(index)
    return index if candidate is not None and candidate.source is None else None


def _sampled_through(candidate: _Candidate, join: _Candidate, side: int, seed: int) -> SampleRequest:
    """What to sample for ``candidate``, whose input is ``join``'s output on other keys: its
    input with the join's ``side`` sampled at the join's fraction (the other side read whole),
    which is a sample of the join's output at that fraction."""
    assert isinstance(join.planned, SkewJoin) and not isinstance(candidate.planned, SkewJoin)
    fraction = join.planned.sample_fraction
    driving = join.operator.inputs[side]
    rows = driving.sample(fraction=fraction, seed=seed)
    estimated = join.estimated_rows[side] if join.estimated_rows else None
    if estimated is not None and estimated * fraction <= BROADCAST_SAMPLE_ROWS:
        # The sampled side broadcast: the other side is then scanned once, not shuffled
        # (without the hint, where Spark broadcasts nothing, it sorted and shuffled it: 2-3 s of
        # a 10^7-row join's statistics). Spark ignores the hint where the join type cannot build
        # that side (a left join's left side), and plans the join as before.
        rows = rows.hint("broadcast")
    view = _Rebuilt()
    view.replace(driving._plan, rows._plan, keep_id=False)
    sampled = _over(candidate.planned, view.frame(candidate.operator.inputs[0]))
    return replace(sampled.sample_request(), fraction=fraction, presampled=True)


def _keyed_below(node: Any, operators: list[KeyedOperator]) -> list[KeyedOperator]:
    """The keyed operators in ``node``'s subtree (itself included)."""
    by_node = {id(operator.frame._plan): operator for operator in operators if operator.frame is not None}
    found: list[KeyedOperator] = []
    seen: set[int] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if id(current) in by_node:
            found.append(by_node[id(current)])
        pending.extend(plan_children(current))
    return found


def _join_on_the_same_keys(
    operator: KeyedOperator, operators: list[KeyedOperator], candidates: dict[int, _Candidate]
) -> int | None:
    """The measured join whose output ``operator`` reads on that join's keys, or None: its
    keys' rows are then the join's output rows per key, which the join's statistics estimate."""
    under = _join_under(operator, operators, candidates)
    if under is None:
        return None
    join = operators[under]
    return under if set(operator.names[0]) in (set(join.names[0]), set(join.names[1])) else None


def _below(operator: KeyedOperator, operators: list[KeyedOperator]) -> list[list[KeyedOperator]]:
    """The keyed operators under each of ``operator``'s inputs."""
    return [_keyed_below(given._plan, operators) for given in operator.inputs]


def _measured(below: list[list[KeyedOperator]]) -> bool:
    """Whether an operator's inputs are sampled as they are, from the keyed operators
    ``below`` them (:func:`_below`): none but those that keep their rows (a window: what is
    under one is measured through it, Spark pruning the window where the sample reads none of
    its columns)."""
    return all(lower.kind.keeps_rows for found in below for lower in found)


def _left_alone(operator: KeyedOperator, streaming: bool) -> OperatorDecision | None:
    """The decision for an operator :func:`optimize` does not measure, or None."""

    def left(rule: str, why: str) -> OperatorDecision:
        return OperatorDecision(operator.label, operator.kind, False, rule, why)

    if streaming:
        return left(
            "not split", "a streaming query: its keyed operators keep state; see keysplit.spark.stream_aggregate"
        )
    if operator.note is not None:
        return left("not split", operator.note)
    if operator.kind is Kind.SQL:
        return left(
            "not read",
            "a spark.sql query's operators are in its text, which only the server parses: build it with the "
            "DataFrame API to have it optimized",
        )
    if operator.kind is Kind.GROUPED_MAP:
        return left(
            "needs merge",
            "a grouped map's function is split only with a merge of its partial results: "
            f"{operator.call or 'skewed(df).groupBy(k).applyInPandas(f, schema, merge=m)'}",
        )
    if operator.kind is Kind.STATEFUL:
        return left("not split", "a stateful streaming operator's state partitions are fixed by its checkpoint")
    if operator.kind.flagged_only:
        return left(
            "not rewritten",
            f"{operator.label} keeps its rows where the plan asks: a partitioned write is split by "
            "skewed(df).write.partitionBy(...), a sort's ties by skewed(df).orderBy(...)",
        )
    if operator.kind is Kind.AGGREGATE and not any(name in SPLIT_FUNCTIONS for name, _ in operator.functions):
        return left(
            "combinable",
            "no holistic function: partial aggregation sends a map task's rows of a key as one row, and Spark's "
            "groupBy is right as it is",
        )
    return None


def _candidate(operator: KeyedOperator, handle: Session, workers: int, seed: int, *, measured: bool) -> _Candidate:
    """``operator``'s keysplit plan (built, not run) and, when ``measured``, what to sample
    for it: by its kind's planner."""
    planner = _PLANNERS.get(operator.kind)
    if planner is None:
        raise ConfigError(f"{operator.kind} is not split by optimize")
    candidate = planner(operator, _node(operator), handle, workers, seed)
    if not measured:
        candidate.requests = []
    return candidate


def _join_candidate(operator: KeyedOperator, node: Any, handle: Session, workers: int, seed: int) -> _Candidate:
    left, right = operator.inputs
    planned = planned_join(left, right, node.on, operator.how or "inner", workers=workers, seed=seed, handle=handle)
    if planned.broadcast is not None:
        raise _Broadcast(planned.broadcast)
    # Both sides at one fraction, the larger side's: the grid's bounds read one.
    estimates = handle.gathered(
        "reading the plan's statistics", *(functools.partial(estimated_rows, handle, side) for side in (left, right))
    )
    fraction = sample_fraction(max((e for e in estimates if e is not None), default=None))
    planned = replace(planned, sample_fraction=fraction)
    return _Candidate(operator, node, planned, planned.sample_requests(fraction), estimated_rows=tuple(estimates))


def _aggregate_candidate(operator: KeyedOperator, node: Any, handle: Session, workers: int, seed: int) -> _Candidate:
    columns = _connect_columns(node._aggregate_cols)
    planned = planned_aggregate(
        operator.inputs[0], operator.names[0], columns, workers=workers, seed=seed, handle=handle
    )
    return _Candidate(operator, node, planned, [planned.sample_request()])


def _window_candidate(operator: KeyedOperator, node: Any, handle: Session, workers: int, seed: int) -> _Candidate:
    columns, finish = _window_columns(node)
    planned = planned_window(operator.inputs[0], columns, workers=workers, seed=seed, handle=handle)
    return _Candidate(operator, node, planned, [planned.sample_request()], finish)


#: The kinds optimize splits, each with what plans it (the verb of its family).
_PLANNERS: dict[Kind, Callable[[KeyedOperator, Any, Session, int, int], _Candidate]] = {
    Kind.JOIN: _join_candidate,
    Kind.AGGREGATE: _aggregate_candidate,
    Kind.WINDOW: _window_candidate,
}


class _Broadcast(KeysplitError):
    def __init__(self, side: str) -> None:
        super().__init__(side)
        self.side = side


def _connect_columns(given: Any) -> list[Column]:
    from pyspark.sql.connect.column import Column as ConnectColumn

    return [c if isinstance(c, ConnectColumn) else ConnectColumn(c) for c in given]


def _window_columns(node: Any) -> tuple[dict[str, Column], Callable[[DataFrame, list[str]], DataFrame] | None]:
    """A window node's window functions (name → ``F.f(...).over(w)``), and what makes the
    node's output from their result and the input's column names (None: their result is it,
    a ``withColumns`` of window functions alone). A window inside an expression (``x -
    F.lag("x").over(w)``), or in a ``select``, is computed under a name of keysplit's own,
    then the node's expressions over those names (a ``*`` in a select must not take them)."""
    from pyspark.sql.connect.column import Column as ConnectColumn
    from pyspark.sql.connect.expressions import ColumnReference

    columns = _connect_columns(node._columns)
    projection = type(node).__name__ != "WithColumns"
    if not projection:
        if getattr(node, "_metadata", None):
            raise ConfigError("withColumns with column metadata is left to Spark")
        if all(type(unaliased(given._expr)).__name__ == "WindowExpression" for given in columns):
            return dict(zip(node._columnNames, columns, strict=True)), None
    windows: dict[str, Column] = {}
    names: dict[int, str] = {}
    for given in columns:
        for expression in windows_in(given._expr):
            names[id(expression)] = f"{_WINDOW_PREFIX}{len(windows)}"
            windows[names[id(expression)]] = ConnectColumn(expression)
    # Each window read from its column instead.
    outputs = [
        ConnectColumn(rewritten(given._expr, lambda e: ColumnReference(names[id(e)]) if id(e) in names else None))
        for given in columns
    ]

    def finish(windowed: DataFrame, input_names: list[str]) -> DataFrame:
        if not projection:
            return windowed.withColumns(dict(zip(node._columnNames, outputs, strict=True))).drop(*windows)
        selected: list[Column] = []
        for output in outputs:
            selected.extend(column(name) for name in input_names) if _plain_star(output._expr) else selected.append(
                output
            )
        return windowed.select(*selected)

    return windows, finish


@dataclass(frozen=True)
class _Build:
    """What makes a rewritten operator's replacement from its inputs (as rebuilt below it):
    ``whole``, its plan; ``branches``, that plan's two branches (the keys not hot by Spark's
    own operator, the hot keys split), for a join or window an operator above is fused over
    (:func:`_fused`)."""

    whole: Callable[[list[DataFrame]], DataFrame]
    branches: Callable[[list[DataFrame]], tuple[DataFrame, DataFrame]] | None = None
    #: Whether ``whole`` reads each input once (one branch): then an input that is another
    #: split plan is read as it is, neither persisted nor fused over.
    reads_once: bool = False
    #: The keys its plan splits, as tuples in the operator's key order (None: not known here).
    hot_keys: frozenset[tuple[Any, ...]] | None = None
    #: Its plan over rows whose keys are all among ``hot_keys``: no branch for keys not hot.
    hot_only: _HotOnly | None = None


def _decided(
    candidate: _Candidate,
    candidates: dict[int, _Candidate],
    handle: Session,
    options: SkewOptions,
    *,
    observed: bool,
) -> tuple[OperatorDecision, _Build | None]:
    """The cost guard's decision for ``candidate``, and when it is rewritten, what makes its
    replacement: observed for its verb's report (``candidate.report``, or a new one) when
    ``observed``. Unobserved, the replacement has no observation in it: Spark runs one as a
    step of its own over every row that passes (not fused into the stage's generated code),
    which cost 15–30 % of a join's map stage at 10^7 rows."""
    operator, planned = candidate.operator, candidate.planned
    min_skew, min_rows = options.min_skew, options.min_rows

    def left(rule: str, why: str, skew: float | None = None, hot: int = 0) -> tuple[OperatorDecision, _Build | None]:
        return OperatorDecision(operator.label, operator.kind, False, rule, why, skew, hot), None

    verb_report: Any = candidate.report if candidate.report is not None else Report() if observed else None
    if isinstance(planned, SkewAggregate) and planned.tallies_every_key:
        counted = planned
        return OperatorDecision(
            operator.label,
            operator.kind,
            True,
            "tallied",
            "a distinct count beside a mode or collect_set: Spark computes those per (key, value) group; every "
            "key's values are counted instead, hot or not (no statistics needed)",
            None,
            0,
            verb_report,
        ), _finished(candidate, _Build(lambda inputs: _over(counted, inputs[0]).plan(verb_report), reads_once=True))
    if candidate.in_plan:
        lower = operator.behind_shuffle[0] or operator.fed_by[0]
        what = lower.label if lower is not None else "another operator"
        return OperatorDecision(
            operator.label,
            operator.kind,
            True,
            "sampled in its plan",
            f"its input is {what}'s output, which cannot be sampled without running it: its hot keys are found "
            "from a sample in its own plan",
            None,
            0,
            verb_report,
        ), _finished(candidate, _Build(lambda inputs: _in_plan(planned, inputs, verb_report)))
    source = None if candidate.source is None else candidates[candidate.source]
    if source is not None and isinstance(source.planned, SkewJoin):
        skew, keys, rows = _join_skew(source.planned, source.samples, output_only=True, workers=planned.workers)
        measured_on = f"{source.operator.label}'s output rows per key, estimated from its statistics"
    elif isinstance(planned, SkewJoin):
        skew, keys, rows = _join_skew(planned, candidate.samples)
        measured_on = "its work per key (L + R + L·R)"
    else:
        # Its own sample, or that of the window under it on the same keys (the same rows per key).
        [sample] = (source or candidate).samples
        hottest = sample.hot(planned.workers)
        skew = sample.skew(planned.workers)
        keys = sample.key_values(hottest)
        rows = sample.hottest_rows(planned.workers)
        measured_on = "its rows per key" if source is None else f"{source.operator.label}'s rows per key"
    hot = keys.height
    names = operator.names[0] if len(operator.names[0]) == keys.width else keys.columns
    split_keys = keys.rename(dict(zip(keys.columns, names, strict=True)))
    if not hot or skew is None:
        return left("no hot key", f"no key holds more than a mean task's share of {measured_on}", skew)
    if skew < min_skew:
        return left(
            "below threshold",
            f"the hottest key's work is {skew:.1f}x a mean task's ({measured_on}), under the cost guard's "
            f"{min_skew:g}x: Spark's plan loses less to it than the rewrite would add",
            skew,
            hot,
        )
    if rows < min_rows:
        return left(
            "small",
            f"the hottest key's work is {skew:.1f}x a mean task's but about {rows:,.0f} rows, under the cost "
            f"guard's {min_rows:,}: its task ends sooner than the rewrite's extra stages would",
            skew,
            hot,
        )
    if isinstance(planned, SkewWindow) and planned.request.whole_frame and rows < whole_frame_rows(planned, min_rows):
        return left(
            "small",
            f"a window with no partitionBy over about {rows:,.0f} rows, under {WHOLE_FRAME_MIN_ROWS_FACTOR}x the "
            f"cost guard's {min_rows:,}: Spark's one task sorts them sooner than the split's stages run",
            skew,
            hot,
        )
    build: _Build
    how = ""
    if source is not None:
        # Its input is not sampled: the verb finds the hot keys in its own plan.
        assert not isinstance(planned, SkewJoin)
        keyed = planned
        build = _Build(
            lambda inputs: _over(keyed, inputs[0]).plan(verb_report),
            _branches(keyed, lambda over: over.branches(verb_report)),
        )

    elif isinstance(planned, SkewJoin):
        grid = planned.measured_grid(candidate.samples)
        if grid is None:
            return left("no hot key", "the sample's counts give no key a cell of its own", skew, hot)

        build = _Build(
            lambda inputs: replace(planned, left=inputs[0], right=inputs[1]).plan(verb_report, grid),
            lambda inputs: replace(planned, left=inputs[0], right=inputs[1]).branches(verb_report, grid),
            hot_keys=planned.grid_keys(grid),
        )

    else:
        [sample] = candidate.samples
        measured, entries, entry_keys = _over(planned, planned.frame, sample.fraction).measured(handle, sample)
        by_peers = isinstance(measured, SkewWindow) and measured.by_peers
        if entries is None and not by_peers:
            return left(
                "few values",
                "the hot keys' sampled values repeat: partial aggregation combines them map-side",
                skew,
                hot,
            )

        if by_peers:
            how = "; every value from its row's group of equal order values, no row moved"
        branched = _branches(measured, lambda over: over.branches(verb_report, entries))
        hot_only: _HotOnly | None = None
        if isinstance(measured, SkewAggregate):
            aggregate = measured

            def hot_only(inputs: list[DataFrame], hold: Callable[[DataFrame], DataFrame]) -> DataFrame:
                over = _over(aggregate, inputs[0])
                assert isinstance(over, SkewAggregate)
                return over.plan(verb_report, entries, hot_only=True, hold=hold)

        elif branched is not None:
            window = measured

            def hot_only(inputs: list[DataFrame], hold: Callable[[DataFrame], DataFrame]) -> DataFrame:
                over = _over(window, inputs[0])
                assert isinstance(over, SkewWindow)
                return over.branches(verb_report, entries, hold=hold)[1]

        build = _Build(
            lambda inputs: _over(measured, inputs[0]).plan(verb_report, entries),
            branched,
            hot_keys=frozenset(entry_keys.iter_rows()),
            hot_only=hot_only,
        )

    decision = OperatorDecision(
        operator.label,
        operator.kind,
        True,
        "skew",
        f"the hottest key's work is {skew:.1f}x a mean task's ({measured_on}; cost guard: {min_skew:g}x): {hot} "
        f"hot keys{how}",
        skew,
        hot,
        verb_report,
        split_keys,
    )
    return decision, _finished(candidate, build)


def _branches(
    planned: SkewWindow | SkewAggregate, branched: Callable[[SkewWindow], tuple[DataFrame, DataFrame]]
) -> Callable[[list[DataFrame]], tuple[DataFrame, DataFrame]] | None:
    """What makes a window's two branches over its rebuilt inputs (``branched`` of the window
    over them); None for an aggregate, and a window whose values are one per key or per group
    of peers (no row of it moves)."""
    if not isinstance(planned, SkewWindow) or planned.per_key_only or planned.by_peers:
        return None
    window = planned

    def made(inputs: list[DataFrame]) -> tuple[DataFrame, DataFrame]:
        over = _over(window, inputs[0])
        assert isinstance(over, SkewWindow)
        return branched(over)

    return made


def _finished(candidate: _Candidate, build: _Build) -> _Build:
    """``build``, then the node's own output from its result (each branch's), where the node
    needs one."""
    finish = candidate.finish
    if finish is None:
        return build
    names = candidate.planned.schema.names if isinstance(candidate.planned, SkewWindow) else []
    branches = build.branches

    def whole(inputs: list[DataFrame]) -> DataFrame:
        return finish(build.whole(inputs), names)

    def finished(inputs: list[DataFrame]) -> tuple[DataFrame, DataFrame]:
        assert branches is not None
        cold, hot = branches(inputs)
        return finish(cold, names), finish(hot, names)

    hot_only = build.hot_only

    def finished_hot(inputs: list[DataFrame], hold: Callable[[DataFrame], DataFrame]) -> DataFrame:
        assert hot_only is not None
        return finish(hot_only(inputs, hold), names)

    return replace(
        build,
        whole=whole,
        branches=finished if branches is not None else None,
        hot_only=finished_hot if hot_only is not None else None,
    )


def _in_plan(planned: _Planned, inputs: list[DataFrame], report: Report[Any] | None) -> DataFrame:
    """``planned`` over its rebuilt ``inputs``, its hot keys found from a sample in its plan."""
    if isinstance(planned, SkewJoin):
        return replace(planned, left=inputs[0], right=inputs[1]).plan(report)
    return _over(planned, inputs[0]).plan(report)


def whole_frame_rows(planned: SkewWindow, min_rows: int) -> int:
    """The rows from which the cost guard splits a window with no ``partitionBy``: where its
    rows move, :data:`.WHOLE_FRAME_MIN_ROWS_FACTOR` times ``min_rows``; ``min_rows`` where none
    does (values per key joined back, ranks counted in the input's order)."""
    moves = not (planned.per_key_only or planned.in_input_order)
    return WHOLE_FRAME_MIN_ROWS_FACTOR * min_rows if moves else min_rows


def _over(
    planned: SkewWindow | SkewAggregate, frame: DataFrame, fraction: float | None = None
) -> SkewWindow | SkewAggregate:
    """``planned`` over ``frame`` (its input as rebuilt), its hot keys found from ``fraction``
    of the rows."""
    fraction = planned.sample_fraction if fraction is None else fraction
    return replace(planned, frame=frame, sample_fraction=fraction)


def _plain_star(expression: Any) -> bool:
    """Whether ``expression`` is ``*`` of the input (not ``t.*``, nor a DataFrame's ``df["*"]``)."""
    return (
        type(expression).__name__ == "UnresolvedStar"
        and getattr(expression, "_unparsed_target", None) is None
        and getattr(expression, "_plan_id", None) is None
    )


def _join_skew(
    planned: SkewJoin, samples: list[InputSample], *, output_only: bool = False, workers: int | None = None
) -> tuple[float | None, pl.DataFrame, float]:
    """A join's hottest key's work as a multiple of a mean task's, and the keys holding more
    than a mean task's (their key columns, hottest first). A key's work is ``L + R`` and the
    rows it outputs (:func:`keysplit.spark.join_grid.key_output`: ``L·R``, a side's rows where
    the sample saw none of the other's), from the samples' estimates; ``output_only``: its
    output rows (what an operator on the join's keys above it reads per key), over ``workers``
    tasks. Also the hottest key's work, in rows."""
    from keysplit.spark.statistics import KEY_HASH

    counts = [sample.key_counts().rename({"sampled": f"n{i}"}) for i, sample in enumerate(samples)]
    both = counts[0] if len(counts) == 1 else counts[0].join(counts[1], on=KEY_HASH, how="full", coalesce=True)
    found = pl.concat([sample.rows.select(KEY_HASH, *sample.keys) for sample in samples]).unique(KEY_HASH)
    if both.height == 0:
        return None, found.drop(KEY_HASH), 0.0
    fraction = samples[0].fraction
    left = pl.col("n0").fill_null(0) / fraction
    right = (pl.col("n1").fill_null(0) / fraction) if len(counts) == 2 else pl.lit(0.0)
    output = left if planned.existence else pl.max_horizontal(left, 1) * pl.max_horizontal(right, 1)
    work = both.select(KEY_HASH, (output if output_only else left + right + output).alias("work"))
    total = float(work["work"].sum())
    tasks = workers if workers is not None else planned.workers
    hot = work.filter(pl.col("work") * tasks > total).sort(["work", KEY_HASH], descending=[True, False])
    keys = hot.select(KEY_HASH).join(found, on=KEY_HASH, how="left", maintain_order="left").drop(KEY_HASH)
    hottest = float(work["work"].max())  # type: ignore[arg-type]
    return hottest * tasks / max(total, 1.0), keys, hottest


class _Rebuilt:
    """The query's plan with operators replaced: each node above a replaced one copied with
    its new children (once, however many operators read it); a replacement keeps its node's
    plan id, so that a column named through the DataFrame (``joined["k"]``) still finds it."""

    def __init__(self) -> None:
        self.replacements: dict[int, Any] = {}
        self.done: dict[int, Any] = {}

    def replace(self, node: Any, replacement: Any, *, keep_id: bool = True) -> None:
        if keep_id:
            replacement._root_plan_id = node._root_plan_id
        self.replacements[id(node)] = replacement

    def frame(self, frame: DataFrame) -> DataFrame:
        """``frame`` over the plan as rebuilt so far (``frame`` itself when nothing under it
        is replaced)."""
        node = self.node(frame._plan)
        return frame if node is frame._plan else plan_frame(node, frame._session)

    def node(self, node: Any) -> Any:
        key = id(node)
        if key in self.replacements:
            return self.replacements[key]
        if key in self.done:
            return self.done[key]
        new = node
        for name in ("_child", "left", "right", "other"):
            child = getattr(node, name, None)
            if child is None or not hasattr(child, "_root_plan_id"):
                continue
            replaced = self.node(child)
            if replaced is not child:
                if new is node:
                    new = copy.copy(node)
                setattr(new, name, replaced)
        self.done[key] = new
        return new
