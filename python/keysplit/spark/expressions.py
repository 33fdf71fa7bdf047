"""Reading a Spark Connect column: the client-side expression tree
(``pyspark.sql.connect.expressions``) a ``Column`` holds, taken apart by the verbs that
rebuild a user's expressions (``window``, ``holistic_agg``) before any plan is built."""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column

#: A column name Spark reads as itself, unquoted.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: One backquoted identifier, its backquotes doubled inside.
_QUOTED = re.compile(r"`((?:[^`]|``)*)`")

#: What :func:`literal` returns for an expression that is not a literal (None is a literal).
NOT_LITERAL = object()


def unaliased(expression: Any) -> Any:
    """``expression`` without its ``.alias(...)``\\ es."""
    while type(expression).__name__ == "ColumnAlias":
        expression = expression._child
    return expression


def alias_of(expression: Any) -> str | None:
    """The name ``expression`` is aliased to (its outermost ``.alias``), or None."""
    if type(expression).__name__ != "ColumnAlias":
        return None
    names = expression._alias
    return names[0] if len(names) == 1 else None


def literal(expression: Any) -> Any:
    """A literal's value (a list for ``F.lit([...])``, which is ``array(lit, ...)``), or
    :data:`NOT_LITERAL`."""
    kind = type(expression).__name__
    if kind == "LiteralExpression":
        return expression._value
    if kind == "UnresolvedFunction" and expression._name == "array" and not expression._is_distinct:
        values = [literal(arg) for arg in expression._args]
        return NOT_LITERAL if any(v is NOT_LITERAL for v in values) else values
    return NOT_LITERAL


def function_call(given: Column) -> tuple[str, list[Any], bool] | None:
    """``(name, arguments, distinct)`` of a function call (``F.median("v")``, aliases
    removed), or None for any other expression."""
    expression = unaliased(given._expr)
    if type(expression).__name__ != "UnresolvedFunction":
        return None
    return expression._name, list(expression._args), bool(expression._is_distinct)


def column_name(given: Column) -> str | None:
    """The name of the top-level column ``given`` reads (``F.col("k")``, ``"k"``), or None
    for any other expression (a struct's field, a name that needs quoting, a column of a
    named DataFrame, a computation)."""
    return reference_name(unaliased(given._expr))


def output_name(given: Column) -> str | None:
    """The name ``given`` takes in a ``select``: its alias, or the top-level column it reads
    (as :func:`keysplit.spark.columns.column` quotes it, or plain); None for anything else."""
    alias = alias_of(given._expr)
    if alias is not None:
        return alias
    expression = given._expr
    name = reference_name(expression)
    if (
        name is not None
        or type(expression).__name__ != "ColumnReference"
        or expression._plan_id is not None
        or expression._is_metadata_column
    ):
        return name
    found = _QUOTED.fullmatch(getattr(expression, "_unparsed_identifier", "") or "")
    return found.group(1).replace("``", "`") if found else None


def reference_name(expression: Any) -> str | None:
    """:func:`column_name` of an expression of the tree (a function's argument)."""
    if (
        type(expression).__name__ != "ColumnReference"
        or expression._plan_id is not None
        or expression._is_metadata_column
    ):
        return None
    name = getattr(expression, "_unparsed_identifier", None)
    return name if isinstance(name, str) and _IDENTIFIER.fullmatch(name) else None


def rewritten(expression: Any, change: Callable[[Any], Any | None]) -> Any:
    """``expression`` with each node of its tree for which ``change`` returns a replacement
    replaced; the nodes above a replaced one copied, the others shared (never modified)."""
    replacement = change(expression)
    if replacement is not None:
        return replacement
    changed: dict[str, Any] = {}
    for attribute, value in vars(expression).items():
        if isinstance(value, (list, tuple)):
            children = [rewritten(v, change) if is_expression(v) else v for v in value]
            if any(a is not b for a, b in zip(children, value, strict=True)):
                changed[attribute] = type(value)(children)
        elif is_expression(value):
            child = rewritten(value, change)
            if child is not value:
                changed[attribute] = child
    if not changed:
        return expression
    copied = copy.copy(expression)
    for attribute, value in changed.items():
        setattr(copied, attribute, value)
    return copied


def is_expression(value: Any) -> bool:
    """Whether ``value`` is a node of a Spark Connect expression tree."""
    return type(value).__module__.endswith("connect.expressions")
