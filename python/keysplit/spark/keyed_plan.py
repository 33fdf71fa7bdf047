"""The keyed operators of a DataFrame's plan, read from Spark Connect's client-side plan
(``pyspark.sql.connect.plan``) without running anything: what :func:`explain_skew` judges.

A keyed operator moves every row of a key to one task: a join, an aggregate (``groupBy``,
``dropDuplicates``), a window's ``partitionBy``, a grouped map, a stateful streaming
operator. Each is listed with its inputs (sub-plans a DataFrame can be made of), its key
columns per input, and two facts about its neighbours that decide what adaptive execution
may do:

- ``fed_by``: per input, the keyed operator on the same keys whose output it reads without
  a shuffle in between (a chain of joins on one key, a window after a join), or None;
- ``consumer``: the keyed operator above that reads this one's output on the same keys
  without a shuffle (a ``groupBy`` after a join on its key), or None.

"The same keys" is by column name: the consumer's keys include all of the operator's
output keys (a hash partitioning on fewer columns satisfies a clustering on more, as
Spark's ``HashPartitioning.satisfies``). A full outer join's output is not partitioned by
either side's key (Spark's ``UnknownPartitioning``), so it feeds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from keysplit._errors import ConfigError, KeysplitError
from keysplit.spark.expressions import column_name, function_call, is_expression
from keysplit.spark.join import join_keys, join_type

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Plan nodes that keep their child's partitioning (no exchange): a keyed operator above
#: one of them reads its child's partitions as they are.
_PASS_THROUGH = (
    "Project",
    "Filter",
    "WithColumns",
    "WithColumnsRenamed",
    "Drop",
    "SubqueryAlias",
    "Hint",
    "ToDF",
    "ToSchema",
    "WithWatermark",
    "CollectMetrics",
    "NAFill",
    "NADrop",
    "NAReplace",
    "MapPartitions",
)


class Kind(StrEnum):
    """The kinds of keyed operator: the one registry :func:`keysplit.spark.explain_skew` and
    :func:`keysplit.spark.optimize` read. A new family adds its kind here, how
    :func:`keyed_operators` reads it from a plan, and its planner in :mod:`.optimize`."""

    JOIN = "join"
    AGGREGATE = "aggregate"
    WINDOW = "window"
    GROUPED_MAP = "grouped map"
    STATEFUL = "stateful"
    #: A ``spark.sql`` query, whose operators are in its text.
    SQL = "sql"
    #: ``repartition(col)``: each value's rows one task's (a partitioned write after it, one file).
    REPARTITION = "repartition"
    #: A global sort (``orderBy``, ``repartitionByRange``): each tied value one range partition's.
    SORT = "sort"

    @property
    def flagged_only(self) -> bool:
        """Whether it is an exchange that keeps its input's rows, which :func:`explain_skew`
        flags and ``skewed(df).write`` / ``.orderBy`` split, and the operators above read
        through as if it were not there (their rows are its input's)."""
        return self in (Kind.REPARTITION, Kind.SORT)

    @property
    def keeps_rows(self) -> bool:
        """Whether its output holds its input's rows, one for one (a window): what is under
        it is measured through it."""
        return self is Kind.WINDOW

    @property
    def partitions_output(self) -> bool:
        """Whether its output is hash-partitioned by its keys, for an operator above on the
        same keys to read without an exchange."""
        return self not in (Kind.STATEFUL, Kind.SQL, Kind.REPARTITION, Kind.SORT)


@dataclass
class KeyedOperator:
    """One keyed operator: ``kind`` is ``join``, ``aggregate``, ``window``, ``grouped map``
    or ``stateful`` (or ``sql``: a ``spark.sql`` query, whose operators are in its text); ``inputs[i]`` is a DataFrame of its i-th input, ``keys[i]`` that input's
    key columns (Spark Connect Columns), ``names[i]`` their names where they are plain
    columns (else the expression's text)."""

    kind: Kind
    label: str
    inputs: list[DataFrame]
    keys: list[list[Column]]
    names: list[tuple[str, ...]]
    how: str | None = None
    #: The aggregate's or window's functions: (name, first argument or None).
    functions: list[tuple[str, Column | None]] = field(default_factory=list)
    #: The keysplit call that splits it, as text.
    call: str = ""
    fed_by: list[KeyedOperator | None] = field(default_factory=list)
    consumer: KeyedOperator | None = None
    #: The inputs' sides as the user named them.
    sides: tuple[str, ...] = ("input",)
    #: Whether an input reads another keyed operator's output through an exchange: its
    #: keys can only be measured by running that operator.
    behind_shuffle: list[KeyedOperator | None] = field(default_factory=list)
    #: The operator's own output, as a DataFrame (for Spark's physical plan of it).
    frame: DataFrame | None = None
    #: Why it cannot be judged, when it cannot.
    note: str | None = None

    @property
    def output_keys(self) -> tuple[str, ...] | None:
        """The columns its output is hash-partitioned by (None: not partitioned by a key)."""
        if not self.kind.partitions_output or (self.kind is Kind.JOIN and self.how == "full"):
            return None
        keys = self.names[1] if self.kind is Kind.JOIN and self.how == "right" else self.names[0]
        # No keys (a window without partitionBy, a join on a condition): not partitioned by any.
        return keys or None


def keyed_operators(frame: DataFrame) -> list[KeyedOperator]:
    """Every keyed operator of ``frame``'s plan, inputs before the operators that read them."""
    plan = getattr(frame, "_plan", None)
    if plan is None or not hasattr(frame, "_session"):
        raise ConfigError(
            "explain_skew reads a Spark Connect DataFrame's plan; this DataFrame is a classic PySpark one: "
            "build it from a Spark Connect session (keysplit.spark.session())"
        )
    found: list[KeyedOperator] = []
    _visit(plan, frame._session, None, found)
    return found


def plan_frame(plan: Any, session: Any) -> DataFrame:
    """A DataFrame of a client plan node."""
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    return ConnectFrame(plan, session)


def _text(column: Column) -> str:
    name = column_name(column)
    return name if name is not None else str(column._expr)


def _columns(given: Any) -> list[Column]:
    from pyspark.sql.connect.column import Column as ConnectColumn

    return [c if isinstance(c, ConnectColumn) else ConnectColumn(c) for c in given]


def windows_in(expression: Any) -> list[Any]:
    """The window expressions in an expression tree."""
    kind = type(expression).__name__
    if kind == "WindowExpression":
        return [expression]
    found = []
    for value in vars(expression).values():
        children = value if isinstance(value, (list, tuple)) else [value]
        for child in children:
            if is_expression(child):
                found.extend(windows_in(child))
    return found


def _visit(
    node: Any, session: Any, above: tuple[KeyedOperator, tuple[str, ...]] | None, found: list[KeyedOperator]
) -> KeyedOperator | None:
    """Reads ``node``'s subtree; ``above`` is the keyed operator that reads ``node``'s output
    with no exchange in between, and its key columns on this input. Returns the keyed
    operator whose output ``node``'s output is, with no exchange in between (or None)."""
    kind = type(node).__name__
    below: Any = getattr(node, "_child", None)
    if kind == "Limit" and type(below).__name__ == "Sort" and below.is_global:
        # A top-N: Spark takes each partition's first rows in order, with no range exchange.
        for child in plan_children(below):
            _visit(child, session, None, found)
        return None
    operator = _operator(node, session)
    if operator is not None and operator.kind.flagged_only:
        operator.frame = plan_frame(node, session)
        lower = _visit(node._child, session, None, found)
        operator.fed_by.append(None)
        operator.behind_shuffle.append(lower or _first_keyed(node._child, session))
        found.append(operator)
        return None  # above it, its input's rows, through an exchange
    if operator is not None:
        operator.frame = plan_frame(node, session)
        if above is not None and operator.output_keys is not None and set(operator.output_keys) <= set(above[1]):
            operator.consumer = above[0]
        children = [node.left, node.right] if kind == "Join" else [node._child] if operator.inputs else []
        for child, names in zip(children, operator.names, strict=True):
            lower = _visit(child, session, (operator, names), found)
            fed = lower if lower is not None and lower.consumer is operator else None
            operator.fed_by.append(fed)
            # An input that reads another keyed operator's output through an exchange can
            # only be measured by running that operator.
            operator.behind_shuffle.append(None if fed is not None else (lower or _first_keyed(child, session)))
        found.append(operator)
        return operator
    if kind in _PASS_THROUGH and getattr(node, "_child", None) is not None:
        return _visit(node._child, session, above, found)
    for child in plan_children(node):
        _visit(child, session, None, found)
    return None


def _first_keyed(node: Any, session: Any) -> KeyedOperator | None:
    if node is None:
        return None
    operator = _operator(node, session)
    if operator is not None and not operator.kind.flagged_only:
        return operator
    for child in plan_children(node):
        below = _first_keyed(child, session)
        if below is not None:
            return below
    return None


def plan_children(node: Any) -> list[Any]:
    """A client plan node's inputs."""
    from pyspark.sql.connect.plan import LogicalPlan

    kids = [getattr(node, "_child", None), getattr(node, "left", None), getattr(node, "right", None)]
    kids.append(getattr(node, "other", None))
    kids.append(getattr(node, "_other", None))
    return [k for k in kids if isinstance(k, LogicalPlan)]


def _operator(node: Any, session: Any) -> KeyedOperator | None:
    """``node`` as a keyed operator, or None when it is not one."""
    kind = type(node).__name__
    if kind == "Join":
        return _join(node, session)
    query = _sql_text(node)
    if query is not None:
        # Its operators are in the query's text, which only the server parses.
        text = " ".join(query.split())
        return KeyedOperator(Kind.SQL, f"spark.sql({text[:60]!r}{'...' if len(text) > 60 else ''})", [], [], [])
    if kind == "Aggregate" and node._group_type == "groupby" and node._grouping_cols:
        keys = _columns(node._grouping_cols)
        functions = []
        for given in _columns(node._aggregate_cols):
            call = function_call(given)
            if call is not None:
                name, args, distinct = call
                argument = _columns(args[:1])[0] if args else None
                functions.append((f"{name}_distinct" if distinct else name, argument))
        names = tuple(_text(k) for k in keys)
        aggregates = ", ".join(str(c._expr) for c in _columns(node._aggregate_cols))
        return KeyedOperator(
            Kind.AGGREGATE,
            f"groupBy({', '.join(names)}).agg({aggregates})",
            [plan_frame(node._child, session)],
            [keys],
            [names],
            functions=functions,
            call=f"skewed(df).groupBy({', '.join(map(repr, names))}).agg({aggregates})",
        )
    if kind == "Deduplicate" and node.column_names and not node.all_columns_as_keys:
        names = tuple(node.column_names)
        from pyspark.sql.connect.functions import col

        return KeyedOperator(
            Kind.AGGREGATE,
            f"dropDuplicates({list(names)})",
            [plan_frame(node._child, session)],
            [[col(n) for n in names]],
            [names],
            functions=[("first", None)],
        )
    if kind in ("Project", "WithColumns"):
        windows = [w for c in _columns(node._columns) for w in windows_in(c._expr)]
        if windows:
            spec = windows[0]._windowSpec
            keys = _columns(spec._partitionSpec)
            names = tuple(_text(k) for k in keys)
            functions = []
            for w in windows:
                function = w._windowFunction
                args = getattr(function, "_args", [])
                functions.append(
                    (getattr(function, "_name", type(function).__name__), _columns(args[:1])[0] if args else None)
                )
            described = ", ".join(str(w) for w in windows)
            return KeyedOperator(
                Kind.WINDOW,
                f"window partitionBy({', '.join(names)}): {described}",
                [plan_frame(node._child, session)],
                [keys],
                [names],
                functions=functions,
                call="skewed(df).withColumns({...})",
            )
    if kind == "RepartitionByExpression" and node.columns:
        expressions = [c._expr for c in _columns(node.columns)]
        if any(type(e).__name__ == "DirectShufflePartitionID" for e in expressions):
            return None  # rows sent to the partitions they name: no key
        ranged = any(type(e).__name__ == "SortOrder" for e in expressions)
        return _exchange(node, session, Kind.SORT if ranged else Kind.REPARTITION, node.columns)
    if kind == "Sort" and node.is_global:
        return _exchange(node, session, Kind.SORT, node.columns)
    if kind in ("GroupMap", "ApplyInPandasWithState", "TransformWithStateInPandas", "TransformWithStateInPySpark"):
        keys = _columns(node._grouping_cols)
        names = tuple(_text(k) for k in keys)
        stateful = kind != "GroupMap"
        verb = (
            "applyInPandas"
            if not stateful
            else ("applyInPandasWithState" if kind.startswith("Apply") else "transformWithState")
        )
        return KeyedOperator(
            Kind.STATEFUL if stateful else Kind.GROUPED_MAP,
            f"groupBy({', '.join(names)}).{verb}(...)",
            [plan_frame(node._child, session)],
            [keys],
            [names],
            call=f"skewed(df).groupBy({', '.join(map(repr, names))}).applyInPandas(f, schema, merge=...)",
        )
    return None


def _exchange(node: Any, session: Any, kind: Kind, columns: list[Column]) -> KeyedOperator:
    """A repartition by value or a global sort, keyed by its columns (their directions aside)."""
    given = _columns(columns)
    keys = _columns([_unsorted(c._expr) for c in given])
    names = tuple(_text(k) for k in keys)
    if kind is Kind.SORT:
        label = f"orderBy({', '.join(str(c._expr) for c in given)})"
        call = f"skewed(df).orderBy({', '.join(map(repr, names))})"
    else:
        label = f"repartition({', '.join(names)})"
        call = f"skewed(df).write.partitionBy({', '.join(map(repr, names))})"
    return KeyedOperator(kind, label, [plan_frame(node._child, session)], [keys], [names], call=call)


def _unsorted(expression: Any) -> Any:
    """A sort order's expression without its direction."""
    return expression._child if type(expression).__name__ == "SortOrder" else expression


def _sql_text(node: Any) -> str | None:
    """The query of a ``spark.sql(...)`` relation (Spark Connect holds it as the server's
    answer, a ``sql`` relation), or None."""
    kind = type(node).__name__
    if kind == "SQL":
        return str(node._query)
    relation = getattr(node, "_plan", None) if kind == "CachedRelation" else None
    if relation is not None and relation.WhichOneof("rel_type") == "sql":
        return str(relation.sql.query)
    return None


def _join(node: Any, session: Any) -> KeyedOperator | None:
    import pyspark.sql.connect.proto as proto

    # The client plan holds Spark Connect's enum: JOIN_TYPE_LEFT_OUTER and so on.
    name = proto.Join.JoinType.Name(node.how).removeprefix("JOIN_TYPE_").lower() if node.how else "inner"
    if node.on is None or name in ("cross", "unspecified"):
        return None
    left, right = plan_frame(node.left, session), plan_frame(node.right, session)
    how = join_type(name)
    from pyspark.sql.connect.functions import col

    try:
        keys = join_keys(node.on, left, right)
    except KeysplitError as error:
        # Spark's join on a condition keysplit cannot read as key columns: listed, not measured.
        return KeyedOperator(
            Kind.JOIN,
            f"join({node.on}, {how!r})",
            [left, right],
            [[], []],
            [(), ()],
            how=how,
            sides=("left", "right"),
            note=f"its condition is not read as key columns ({error})",
        )

    on = (
        repr(keys.left[0])
        if keys.using and len(keys.left) == 1
        else (repr(list(keys.left)) if keys.using else str(node.on))
    )
    return KeyedOperator(
        Kind.JOIN,
        f"join({on}, {how!r})",
        [left, right],
        [[col(n) for n in keys.left], [col(n) for n in keys.right]],
        [keys.left, keys.right],
        how=how,
        call=f"skewed(left).join(right, {on}, {how!r})",
        sides=("left", "right"),
    )


def watermark_columns(frame: DataFrame) -> list[str]:
    """The event-time columns of the watermarks (``withWatermark``) in ``frame``'s client
    plan, outermost first: what the server will know of them, read without asking it."""
    found: list[str] = []
    pending: list[Any] = [frame._plan]
    while pending:
        node = pending.pop(0)
        if type(node).__name__ == "WithWatermark":
            found.append(node._event_time)
        pending.extend(plan_children(node))
    return found
