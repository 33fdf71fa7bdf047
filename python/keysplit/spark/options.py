"""The Spark verbs' shared arguments, checked once where they arrive.

Each verb turns its keyword arguments into these values on entry, so that the layers
below get checked, typed values: a :class:`~keysplit.Grouper` (from a name, a spec or
itself), the ``order_by`` columns as a tuple, a window as None, a column or a count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit._grouper import Grouper

if TYPE_CHECKING:
    from collections.abc import Sequence


def make_grouper(grouper: Grouper | str, workers: int, seed: int) -> Grouper:
    """``grouper`` itself, or one made from a name or spec (``"flexd:delta=2.0"``)."""
    if isinstance(grouper, str):
        return Grouper.from_spec(grouper, workers=workers, seed=seed)
    if not isinstance(grouper, Grouper):
        raise ConfigTypeError(f"grouper must be a keysplit.Grouper or a grouper name, got {type(grouper).__name__}")
    return grouper


#: The most workers of a plan in which each worker is a Spark task (``apply_grouped``'s
#: function stage, ``apply_operator``'s): a stage of a million tasks runs for its tasks'
#: scheduling alone (hundreds of seconds), where a few per core is what Spark needs.
MAX_TASK_WORKERS = 65_536


def require_task_workers(workers: int) -> int:
    """``workers`` (already a checked worker count) if a plan can run one Spark task each."""
    if workers > MAX_TASK_WORKERS:
        raise ConfigError(
            f"workers={workers:,} would start a stage of {workers:,} Spark tasks, one per worker; this plan "
            f"takes at most {MAX_TASK_WORKERS:,}: pass a few workers per executor core (e.g. 32 to 1,024)"
        )
    return workers


def order_columns(order_by: Sequence[str] | str | None) -> tuple[str, ...] | None:
    """``order_by`` as a tuple of column names, or None when there is none."""
    if order_by is None:
        return None
    columns = (order_by,) if isinstance(order_by, str) else tuple(order_by)
    if not all(isinstance(column, str) for column in columns):
        raise ConfigTypeError(f"order_by must be a column name or a list of them, got {order_by!r}")
    return columns or None


def require_window(window: object) -> int | str | None:
    """A window: None, a column name, or a positive count of tuples."""
    if window is None or isinstance(window, str):
        return window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"window must be None, a column name or a positive tuple count, got {window!r}")
    return window


def require_key(key: object) -> str:
    """The key column's name."""
    if not isinstance(key, str):
        raise ConfigTypeError(f"key must be a column name, got {type(key).__name__}")
    return key
