"""The Spark verbs' shared arguments, checked once where they arrive.

Each verb turns its keyword arguments into these values on entry, so that the layers
below get checked, typed values: a :class:`~keysplit.Grouper` (from a name, a spec or
itself), the ``order_by`` columns as a tuple, a window as None, a column or a count.
:class:`SkewOptions` bundles the options ``skewed(df)`` and ``optimize(df)`` pass to every
verb they call; a verb given one it does not read says so, instead of dropping it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from keysplit._checks import require_count, require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError
from keysplit._grouper import Grouper

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession

    from keysplit._grouper import NullPolicy
    from keysplit.spark.session import Session

#: The cost guard's factor (:mod:`keysplit.spark.optimize`): an operator whose predicted
#: hottest task holds at least this many mean tasks' work is split (Spark's own
#: ``skewedPartitionFactor`` for its join splits).
MIN_SKEW = 5.0
#: The cost guard's size: an operator is split only where its hottest key's work is at least
#: this many rows. Under it the straggler costs less than the rewrite's extra stages do in
#: task launches alone (a sort of a million rows takes about a second; a window over the
#: King James Bible's 790,000 words on 128 tasks ran 14.6 s as Spark's plan, 93.5 s rewritten,
#: on two cores).
MIN_ROWS = 1_000_000
#: A window with no ``partitionBy`` whose rows move is split only from this many times
#: ``min_rows``: Spark's one task sorts about a million rows a second, while the split pays
#: stages of its own (at 10^6 rows on ``local[2]``: 2-4x Spark's wall).
WHOLE_FRAME_MIN_ROWS_FACTOR = 5
#: The size of a file a skew-safe partitioned write aims at (Spark's own
#: ``spark.sql.files.maxPartitionBytes``, the split a reader makes of a bigger file).
TARGET_FILE_BYTES = 128 << 20
#: Space-Saving counters per partition unless asked otherwise: at most N/4097 rows of error
#: per key.
DEFAULT_CAPACITY = 4096
#: Which verbs read each option, for the message of a verb given one it does not read.
_READERS = {
    "workers": "every verb",
    "seed": "every verb",
    "session": "every verb",
    "min_skew": "join, withColumns, agg and optimize (the cost guard)",
    "min_rows": "join, withColumns, agg and optimize (the cost guard)",
    "grouper": "applyInPandas",
    "capacity": "applyInPandas",
    "order_by": "applyInPandas",
    "nulls": "applyInPandas",
    "target_file_bytes": "write",
    "target_file_rows": "write",
}


@dataclass(frozen=True)
class SkewOptions:
    """The options of ``skewed(df)``'s verbs and of ``optimize(df)``, checked once.

    ``workers``: the tasks a key's work is measured against and a split key's rows fill
    (None: each verb's default, the shuffle's partitions; 32 for ``applyInPandas``);
    ``seed``: the samples' and the hashes' seed; ``min_skew``: the cost guard's factor (an
    operator is split where its predicted hottest task holds at least that many mean tasks'
    work; 1 splits every hot key); ``min_rows``: the guard's size (an operator is split only
    where its hottest key's work is at least that many rows; 0 drops the condition); ``grouper``, ``capacity``, ``order_by``, ``nulls``:
    ``applyInPandas``'s (:func:`keysplit.spark.apply_grouped`); ``session``: the session to
    run in (None: the DataFrame's own); ``target_file_bytes``, ``target_file_rows``: the size of
    the files ``write`` aims at (rows, where given, instead of bytes).
    """

    workers: int | None = None
    seed: int = 0
    min_skew: float = MIN_SKEW
    min_rows: int = MIN_ROWS
    grouper: Grouper | str | None = None
    capacity: int = DEFAULT_CAPACITY
    order_by: tuple[str, ...] | None = None
    nulls: NullPolicy = "group"
    session: Session | SparkSession | None = None
    target_file_bytes: int = TARGET_FILE_BYTES
    target_file_rows: int | None = None

    def __post_init__(self) -> None:
        if self.workers is not None:
            require_workers(self.workers)
        require_seed(self.seed)
        if isinstance(self.min_skew, bool) or not isinstance(self.min_skew, (int, float)) or not self.min_skew >= 1:
            raise ConfigError(
                f"min_skew is a factor of at least 1 (a mean task's work), got {self.min_skew!r}: an operator is "
                "split where its hottest task would hold at least min_skew mean tasks' work"
            )
        require_count(self.min_rows, "min_rows")
        if self.grouper is not None and not isinstance(self.grouper, (str, Grouper)):
            raise ConfigTypeError(f"grouper must be a keysplit.Grouper or a grouper name, got {self.grouper!r}")
        require_count(self.capacity, "capacity", minimum=1)
        object.__setattr__(self, "order_by", order_columns(self.order_by))
        if self.nulls not in ("group", "raise"):
            raise ConfigError(f"nulls must be 'group' or 'raise', got {self.nulls!r}")
        require_count(self.target_file_bytes, "target_file_bytes", minimum=1)
        if self.target_file_rows is not None:
            require_count(self.target_file_rows, "target_file_rows", minimum=1)

    def read_by(self, verb: str, *names: str) -> SkewOptions:
        """These options, for ``verb``, which reads ``names``: any other set apart from its
        default is refused, naming the verbs that read it."""
        for option in fields(self):
            if option.name in names or option.name in ("workers", "seed", "session"):
                continue
            value: Any = getattr(self, option.name)
            if value != option.default:
                raise ConfigError(
                    f"{verb} does not read {option.name}={value!r}: it is an option of {_READERS[option.name]}; "
                    f"pass it where it is read, or leave it out of skewed(...) for {verb}"
                )
        return self


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
