"""Routing a Spark DataFrame on the executors, and getting keysplit to them.

Each partition of the DataFrame is an upstream source of the multi-source setting of the
PKG papers: ``mapInArrow`` routes its rows, in the partition's order, with a grouper of its
own that starts from the caller's grouper (its snapshot), so every source has the **same
seed** and hash functions and only its local loads differ. As measured for
``docs/spark.md``, a shared seed keeps λ and γ within 0.2 % of one source from 1 to 32
partitions, while a seed per partition doubled γ.

A retried task must route as the first attempt did, so a partition's rows must come in an
order that does not change from run to run: a file scan, an in-memory relation or a
checkpoint has one; the output of a shuffle has not (its blocks arrive as they are
fetched). :func:`route_on_executors` refuses a DataFrame whose plan ends in a shuffle
unless ``order_by`` names columns to sort each partition by.

The function that runs on the executors is built inside :func:`_router`, so cloudpickle
sends its code by value and it imports keysplit itself: an executor without keysplit then
gets to say so, rather than failing to unpickle.
"""

from __future__ import annotations

import importlib.metadata
import re
import tarfile
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keysplit._errors import ConfigError, ConfigTypeError, KeyInputError, KeysplitError
from keysplit._grouper import DEFAULT_GROUPER
from keysplit.spark.intake import is_spark_frame, session_for
from keysplit.spark.options import make_grouper, order_columns

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from keysplit._grouper import Grouper, NullPolicy
    from keysplit.spark.session import Session

#: The directory keysplit's archive unpacks to in an executor's working directory.
ARCHIVE_DIR = "keysplit_packages"
#: The column holding each row's worker.
WORKER_COLUMN = "worker"
#: The column holding each row's source (the input partition that routed it).
SOURCE_COLUMN = "__source"

_KEY_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "binary")
# Whole-number decimals that fit 64 bits, such as Parquet's uint64 read by Spark as decimal(20, 0).
_INTEGRAL_DECIMAL = re.compile(r"decimal\((?:[1-9]|1[0-9]|20),0\)")
# A shuffle's output order changes between runs; a broadcast does not reorder the other side.
_SHUFFLE = re.compile(r"(?<!Broadcast)Exchange |ShuffleQueryStage|AQEShuffleRead")
_PROBE_TIMEOUT = 120.0


class ExecutorSetupError(KeysplitError, RuntimeError):
    """The executors' Python cannot import keysplit (or another version of it)."""


def _missing_message(python: str, problem: str, version: str) -> str:
    return (
        f"the Spark executors' Python ({python}) cannot run keysplit: {problem}. Routing runs "
        "on the executors, so they need keysplit too. Fix it with one of: "
        "keysplit.spark.ship_keysplit(session), which adds an archive of keysplit and Polars "
        "to the session (addArtifacts(..., archive=True)); installing "
        f"keysplit=={version} in the executors' Python; or setting "
        "spark.sql.execution.pyspark.python to an interpreter that has it"
    )


def keysplit_importer(archive_dir: str) -> Callable[[], Any]:
    """A function that imports keysplit on an executor, from the shipped archive if there
    is one; nested, so that it travels by value inside the functions that use it."""

    def import_keysplit() -> Any:
        import importlib
        import os
        import sys

        shipped = os.path.abspath(archive_dir)
        if os.path.isdir(shipped) and shipped not in sys.path:
            sys.path.insert(0, shipped)
        return importlib.import_module("keysplit")

    return import_keysplit


def _router(
    snapshot: bytes,
    key: str,
    nulls: NullPolicy,
    window: str | None,
    archive_dir: str,
    worker_column: str = WORKER_COLUMN,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    import_keysplit = keysplit_importer(archive_dir)

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import sys

        try:
            keysplit = import_keysplit()
        except ImportError as error:
            raise RuntimeError(
                f"keysplit is not installed on this executor ({sys.executable}): {error}; "
                "ship it with keysplit.spark.ship_keysplit(session)"
            ) from None
        import pyarrow as pa
        import pyarrow.compute as pc

        from keysplit.spark.runs import run_slices

        grouper = keysplit.Grouper.restore(snapshot)
        last = None
        for batch in batches:
            if window is None:
                runs = [batch]
            else:
                ids = batch.column(window)
                if ids.null_count:
                    raise ValueError(f"{ids.null_count} rows have a null {window!r} window")
                if len(ids) > 1 and pc.any(pc.less(ids.slice(1), ids.slice(0, len(ids) - 1))).as_py():
                    raise ValueError(
                        f"window ids in {window!r} decrease within a partition; sort each partition "
                        "by the window (order_by) so that windows do not decrease"
                    )
                runs = [batch.slice(start, length) for start, length in run_slices(ids)]
            for run in runs:
                if window is not None and run.num_rows:
                    first = run.column(window)[0].as_py()
                    if last is not None and first != last:
                        if first < last:
                            raise ValueError(
                                f"window {first!r} arrives after window {last!r} in one partition; "
                                "sort each partition by the window (order_by)"
                            )
                        grouper.end_window()
                    last = first
                keys = run.column(key)
                if pa.types.is_decimal(keys.type):
                    # Parquet's uint64 reads as decimal(20, 0): route it as the integers it holds.
                    lowest = pc.min(keys).as_py()
                    keys = keys.cast(pa.int64() if lowest is not None and lowest < 0 else pa.uint64())
                workers = pa.array(grouper.route(keys, nulls=nulls)).cast(pa.int32())
                yield run.append_column(worker_column, workers)

    return route


def _version() -> str:
    return importlib.metadata.version("keysplit")


def require_key_type(schema: StructType, key: str) -> None:
    """Refuses a key column the groupers cannot hash (they take integers, strings and bytes)."""
    names = [field.name for field in schema.fields]
    if key not in names:
        raise KeyInputError(f"key column {key!r} is not in the DataFrame; columns: {names}")
    kind = schema[key].dataType.simpleString()
    if kind not in _KEY_TYPES and not _INTEGRAL_DECIMAL.fullmatch(kind):
        raise KeyInputError(
            f"key column {key!r} is {kind}; keysplit routes integer, string and binary keys: "
            f"cast it, e.g. frame.withColumn({key!r}, F.col({key!r}).cast('string'))"
        )


def routed_columns(key: str, columns: Sequence[str], added: Sequence[str] = ()) -> list[str]:
    """The key and ``columns`` that go through the routing, refusing the names it adds
    (``worker``, ``__source`` and ``added``)."""
    chosen = list(dict.fromkeys([key, *columns]))
    for reserved in (WORKER_COLUMN, SOURCE_COLUMN, *added):
        if reserved in chosen:
            raise ConfigError(f"the stream may not have a column {reserved!r}: the routing adds it; rename it")
    return chosen


def in_repeatable_order(session: Session, frame: DataFrame, order_by: Sequence[str] | None) -> DataFrame:
    """``frame`` with each partition in an order that is the same in every run.

    With ``order_by``, each partition is sorted by those columns (which should be unique
    within a partition). Without it, a plan whose last step is a shuffle is refused.
    """
    if order_by:
        return frame.sortWithinPartitions(*order_by)
    plan = session.explained(frame, timeout=_PROBE_TIMEOUT)
    physical = plan.split("== Physical Plan ==")[-1]
    shuffles = [line.strip(" +-:*") for line in physical.splitlines() if _SHUFFLE.search(line)]
    if shuffles:
        raise ConfigError(
            "the DataFrame's rows come out of a shuffle "
            f"({shuffles[0][:120]} in its plan), so each partition's order changes from run "
            "to run and so would the routing. Pass order_by=[columns unique within a partition], "
            "or route a DataFrame read from files (write it to Parquet first)"
        )
    return frame


#: The session setting that picks the executors' Python.
PYTHON_SETTING = "spark.sql.execution.pyspark.python"
# The executors' keysplit version per Spark session and executor Python, found once (and
# again after keysplit is shipped).
_checked: weakref.WeakKeyDictionary[SparkSession, dict[str | None, str]] = weakref.WeakKeyDictionary()


def _executor_probe(archive_dir: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    import_keysplit = keysplit_importer(archive_dir)

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import importlib.metadata
        import sys

        import pyarrow as pa

        for _ in batches:
            pass
        try:
            import_keysplit()
            found = "ok " + importlib.metadata.version("keysplit")
        except Exception as error:  # noqa: BLE001 - reported to the client
            found = f"error {type(error).__name__}: {error}"
        yield pa.RecordBatch.from_pydict({"python": [sys.executable], "found": [found]})

    return probe


def check_executors(session: Session) -> str:
    """The keysplit version the executors import; raises :class:`ExecutorSetupError` if none.

    Runs one tiny task, once per Spark session and executor Python
    (``spark.sql.execution.pyspark.python``); a version other than the client's is refused too.
    """
    python_setting = session.call(
        "reading the executors' Python", lambda: session.spark.conf.get(PYTHON_SETTING, None), timeout=_PROBE_TIMEOUT
    )
    known = _checked.setdefault(session.spark, {})
    if python_setting in known:
        return known[python_setting]
    version = _version()
    probe = session.spark.range(0, 1, 1, 1).mapInArrow(_executor_probe(ARCHIVE_DIR), "python string, found string")
    try:
        rows = session.call("checking the executors", probe.collect, timeout=_PROBE_TIMEOUT)
    except (TimeoutError, ExecutorSetupError):
        raise
    except Exception as error:  # noqa: BLE001 - the executors' Python could not even start
        raise ExecutorSetupError(
            _missing_message("unknown", f"a Python task failed: {str(error).splitlines()[0][:300]}", version)
        ) from None
    python, found = rows[0]["python"], rows[0]["found"]
    if not found.startswith("ok "):
        raise ExecutorSetupError(_missing_message(python, found.removeprefix("error "), version))
    theirs = found.removeprefix("ok ")
    if theirs != version:
        raise ExecutorSetupError(_missing_message(python, f"it has keysplit {theirs}, the client {version}", version))
    known[python_setting] = theirs
    return theirs


def _requirements(name: str, seen: set[str]) -> None:
    """``name`` and the distributions it needs (not its extras), into ``seen``."""
    canonical = re.sub(r"[-_.]+", "-", name).lower()
    if canonical in seen:
        return
    seen.add(canonical)
    for requirement in importlib.metadata.requires(name) or []:
        if "extra ==" in requirement:
            continue
        _requirements(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0], seen)


def package_archive(directory: str | Path | None = None) -> Path:
    """A ``.tar`` of the installed keysplit and the packages it needs (Polars), as installed.

    Unpacked into a directory on ``sys.path`` it imports as here: the executors need the
    same platform and a Python of at least the wheel's ``abi3`` floor (3.11).
    """
    names: set[str] = set()
    _requirements("keysplit", names)
    target = Path(directory or tempfile.mkdtemp(prefix="keysplit-archive-"))
    archive = target / f"keysplit-{_version()}-packages.tar"
    with tarfile.open(archive, "w", dereference=True) as tar:
        for name in sorted(names):
            distribution = importlib.metadata.distribution(name)
            for file in distribution.files or []:
                source = Path(str(distribution.locate_file(file)))
                if file.parts[0] == ".." or "__pycache__" in file.parts or not source.is_file():
                    continue
                tar.add(source, arcname=str(file))
    return archive


def ship_keysplit(session: Session) -> None:
    """Adds an archive of keysplit and Polars to the session, for executors that lack them.

    The archive (:func:`package_archive`, about 200 MB, most of it Polars) goes to the
    server with ``addArtifacts(..., archive=True)``; Spark unpacks it in each executor's
    working directory as ``keysplit_packages``, which the routing puts on ``sys.path``.
    Each ``persist()`` in the session then copies the archive on the server (Spark's cache
    clones the session with its artifacts): where the executors can install keysplit, that
    is the better fix. Raises :class:`ExecutorSetupError` if the executors still cannot
    import keysplit (a different platform, or a Python older than 3.11).
    """
    with tempfile.TemporaryDirectory(prefix="keysplit-archive-") as directory:
        archive = package_archive(directory)
        session.call(
            "shipping keysplit to the executors",
            lambda: session.spark.addArtifacts(f"{archive}#{ARCHIVE_DIR}", archive=True),
        )
    _checked.pop(session.spark, None)
    check_executors(session)


def route_on_executors(
    session: Session,
    frame: DataFrame,
    *,
    schema: StructType,
    key: str,
    grouper: Grouper,
    columns: Sequence[str],
    nulls: NullPolicy,
    window: str | None = None,
    order_by: Sequence[str] | None = None,
    worker_column: str = WORKER_COLUMN,
    source_column: str | None = SOURCE_COLUMN,
) -> DataFrame:
    """``frame``'s ``columns`` routed partition by partition on the executors.

    ``schema`` is ``frame``'s. Adds ``worker_column`` (int) and, unless it is None,
    ``source_column`` (the input partition, one source each). Every source starts from
    ``grouper``'s state; ``grouper`` itself does not move.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructField, StructType

    require_key_type(schema, key)
    check_executors(session)
    ordered = in_repeatable_order(session, frame, order_by)
    routed_schema = StructType([*[schema[name] for name in columns], StructField(worker_column, IntegerType(), False)])
    router = _router(grouper.snapshot(), key, nulls, window, ARCHIVE_DIR, worker_column)
    routed = ordered.select(*columns).mapInArrow(router, routed_schema)
    return routed if source_column is None else routed.withColumn(source_column, F.spark_partition_id())


def route(
    frame: DataFrame,
    *,
    key: str = "key",
    grouper: Grouper | str = DEFAULT_GROUPER,
    workers: int = 8,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    order_by: Sequence[str] | str | None = None,
    window: str | None = None,
    nulls: NullPolicy = "group",
) -> DataFrame:
    """``frame`` routed on the executors: every column, plus ``worker`` and ``source`` (int).

    Each partition is a source with its own grouper, all starting from ``grouper`` (or a
    fresh grouper of that name, ``workers`` and ``seed``), in the partition's order, in
    ``session`` (the DataFrame's own by default); see
    :func:`keysplit.spark.aggregate` for ``order_by``, ``window`` and ``nulls``. The result
    is lazy: Spark routes when it runs a query on it, and routes the same way every time.
    Checking that the executors import keysplit runs one tiny job, once per session.
    """
    if not is_spark_frame(frame):
        raise ConfigTypeError(
            f"frame must be a Spark DataFrame, got {type(frame).__name__}; route a Polars frame with keysplit.route"
        )
    handle = session_for(frame, session)
    routing = make_grouper(grouper, workers, seed)
    schema = handle.call("reading the schema", lambda: frame.schema)
    names = [field.name for field in schema.fields]
    columns = routed_columns(key, names, ["source"])
    routed = route_on_executors(
        handle,
        frame,
        schema=schema,
        key=key,
        grouper=routing,
        columns=columns,
        nulls=nulls,
        window=window,
        order_by=order_columns(order_by),
    )
    return routed.withColumnRenamed(SOURCE_COLUMN, "source")
