"""Where every Spark verb starts: which session runs it, its progress line, its settings.

**The session rule**, the same for every verb: an explicit ``session=`` (a
:class:`~keysplit.spark.Session` or a PySpark ``SparkSession``); else a Spark DataFrame's
own session; else the input is a client stream (Polars, pandas, Arrow), whose rows must be
sent to some Spark, and the verb refuses it with an error naming
``keysplit.spark.session()``. No verb starts a server of its own.

A verb that runs Spark jobs when it is called (``aggregate``, ``apply_operator``) runs
them inside an :class:`Intake`: a progress line on stderr naming each action, and
:data:`RUN_SETTINGS` on the session, restored when the verb returns.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, TypeGuard

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit._progress import PhaseProgress
from keysplit.spark.session import DEFAULT_QUERY_TIMEOUT, OPENED, Session

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from pyspark.sql import DataFrame, SparkSession

#: Session settings while a verb runs its jobs. Routing on the executors moves Arrow batches
#: between the JVM and Python, and fewer, larger ones cost less (2.0 s against 2.4 s per
#: 10^7 rows here). Distinct-count sketches are object aggregates, which Spark sorts
#: instead of hashing past 128 groups a task; partials have tens of thousands of groups,
#: and sorting them made the partial phase 4x slower.
RUN_SETTINGS = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "65536",
}


def is_spark_frame(data: object) -> TypeGuard[DataFrame]:
    """Whether ``data`` is a PySpark DataFrame (Connect or classic)."""
    return type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pyspark.sql")


def refuse_reserved(names: Iterable[str], prefix: str) -> None:
    """Raises where a column (of the input, or one a verb adds) is named as the verb's own
    columns are (``prefix``): the plan would read the user's column for its own."""
    clashes = [name for name in names if name.startswith(prefix)]
    if clashes:
        raise ConfigError(f"columns starting with {prefix!r} are keysplit's own; rename {clashes}")


def as_session(given: Session | SparkSession) -> Session:
    """``given`` as a keysplit :class:`Session`: itself, or the one a PySpark session was
    opened through, or a wrapper with the default query timeout."""
    if isinstance(given, Session):
        # The one a PySpark session was last used through: its DataFrames' verbs keep its
        # server, cluster and timeouts.
        OPENED[id(given.spark)] = given
        return given
    if type(given).__module__.startswith("pyspark.sql") and type(given).__name__ == "SparkSession":
        known = OPENED.get(id(given))
        if known is not None and known.spark is given:
            return known
        return Session(given, url="(given session)", server=None, query_timeout=DEFAULT_QUERY_TIMEOUT)
    raise ConfigTypeError(f"session must be a keysplit.spark.Session or a SparkSession, got {type(given).__name__}")


def session_for(data: object, session: Session | SparkSession | None) -> Session:
    """The session that runs a verb on ``data``, by the module's rule."""
    if session is not None:
        return as_session(session)
    if is_spark_frame(data):
        return as_session(data.sparkSession)
    raise ConfigError(
        f"a client stream ({type(data).__name__}) needs session=: its rows are sent to that Spark and the "
        "result lives there; pass session=keysplit.spark.session() (an embedded server) or "
        "keysplit.spark.session('sc://host:port'), or pass a Spark DataFrame"
    )


def shuffle_partitions(session: Session) -> int:
    """The partitions of a verb's exchange when it is given no ``workers``: adaptive
    execution's initial number if set, else ``spark.sql.shuffle.partitions``."""
    conf = session.spark.conf

    def read() -> int:
        initial = conf.get("spark.sql.adaptive.coalescePartitions.initialPartitionNum", None)
        return int(initial or conf.get("spark.sql.shuffle.partitions") or 200)

    return session.kept_answer(("shuffle partitions", b""), lambda: int(session.call("reading settings", read)))


@contextlib.contextmanager
def run_settings(session: Session, settings: Mapping[str, str] = RUN_SETTINGS) -> Iterator[None]:
    """``settings`` on the session while the block runs; the previous values after."""
    conf = session.spark.conf
    previous = session.call("reading settings", lambda: {name: conf.get(name, None) for name in settings})

    def change() -> None:
        for name, value in settings.items():
            conf.set(name, value)

    session.call("changing settings", change)
    try:
        yield
    finally:

        def restore() -> None:
            for name, value in previous.items():
                if value is None:
                    conf.unset(name)
                else:
                    conf.set(name, value)

        with contextlib.suppress(Exception):
            session.call("restoring settings", restore, timeout=30.0)


class Intake(contextlib.ExitStack):
    """A verb that runs now: its session (by the rule), a progress line naming each action,
    and :data:`RUN_SETTINGS` until it ends. ``with Intake(...) as intake: intake.session...``"""

    def __init__(
        self,
        title: str,
        data: object,
        *,
        session: Session | SparkSession | None,
        progress: bool | None,
    ) -> None:
        super().__init__()
        self._title = title
        self._data = data
        self._given = session
        self._progress = progress
        self.session: Session
        self.shown: PhaseProgress

    def __enter__(self) -> Intake:
        super().__enter__()
        self.session = session_for(self._data, self._given)
        try:
            self.shown = self.enter_context(PhaseProgress(self._title, self._progress))
            self.shown.phase("connecting to Spark")
            self.enter_context(self.session.observed(self.shown.phase))
            self.enter_context(run_settings(self.session))
        except BaseException:
            self.close()
            raise
        return self
