"""Polars' statistics as Python numbers, for the type checker.

``Series.max()``, ``mean()``, ``median()`` and their kin are typed as any value a column
can hold (a date, a string, a list, None). The numeric columns keysplit reads them from
give an int or a float: these functions say so, and fail as ``int()`` and ``float()``
would on anything else.
"""

from __future__ import annotations


def to_float(value: object) -> float:
    """``float(value)`` for an int or a float; ``TypeError`` for anything else (None too)."""
    if isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"expected a number, got {type(value).__name__}: {value!r}")


def to_int(value: object) -> int:
    """``int(value)`` for an int or a float; ``TypeError`` for anything else (None too)."""
    if isinstance(value, (int, float)):
        return int(value)
    raise TypeError(f"expected a number, got {type(value).__name__}: {value!r}")
