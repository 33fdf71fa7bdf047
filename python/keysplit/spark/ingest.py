"""Getting a client stream into Spark, in bounded batches, by the fastest path the server allows.

A client stream is read batch by batch (:func:`frames`), routed on the client and written
to an :class:`Ingestion` sink, which ends as one Spark DataFrame of every row written:

``files``
    Parquet files in a directory the server's executors read: the embedded server and a
    cluster keysplit started run on this machine, and a remote server may share a
    filesystem. The plan is one file scan, whatever the stream's length.
``upload``
    Parquet files written here and copied to the server's filesystem with
    ``copyFromLocalToFs``, for a server that cannot see this machine's disk.
``arrow``
    Each batch sent inside the plan (``createDataFrame``) as a cached local relation, which
    the server's driver holds; it works everywhere but tops out near 0.35 M rows/s. The batches
    are joined by a balanced tree of unions: a plan message has a depth limit, which a
    chain of about 60 unions overflows, while the tree grows with log2 of the batch count.

``auto`` picks ``files`` for a server keysplit started, and otherwise probes the server
once per session with a tiny file: ``files`` if it reads it, ``upload`` if a copy works,
``arrow`` if neither does.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from keysplit._errors import ConfigError, ConfigTypeError, KeyInputError
from keysplit._routing import from_pandas
from keysplit.spark.intake import run_settings
from keysplit.spark.lifetime import release_with

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from keysplit.spark.session import Session

#: Rows per routed batch unless the caller says otherwise.
DEFAULT_BATCH_ROWS = 65_536
#: Rows per Parquet file of the ``files`` and ``upload`` paths: large enough that Spark
#: reads few files, small enough that its tasks split a window's files between them.
FILE_ROWS = 1 << 20

IngestPath = Literal["files", "upload", "arrow"]
IngestChoice = Literal["auto", "files", "upload", "arrow"]
INGEST_PATHS = ("files", "upload", "arrow")

Stream: TypeAlias = pl.DataFrame | pl.LazyFrame | pa.Table | pa.RecordBatch | Iterable[Any]

# Spark has no unsigned integers: each is widened to the next signed type that holds it.
_WIDER: dict[pl.DataType | type[pl.DataType], type[pl.DataType]] = {
    pl.UInt8: pl.Int16,
    pl.UInt16: pl.Int32,
    pl.UInt32: pl.Int64,
}
_PROBE_TIMEOUT = 60.0
#: Spark Connect sends a table at least this large as an artifact the driver caches, and a
#: smaller one inside every plan that reads it; keysplit's batches always go as artifacts.
_CACHE_THRESHOLD = "spark.sql.session.localRelationCacheThreshold"


@dataclass(frozen=True)
class IngestOptions:
    """How a client stream reaches Spark: ``path`` (``"auto"``, or one of
    :data:`INGEST_PATHS`), ``batch_rows`` per routed batch, the local ``staging_dir`` of
    the ``files`` path and the server-side ``upload_dir`` of the ``upload`` path."""

    path: IngestChoice = "auto"
    batch_rows: int = DEFAULT_BATCH_ROWS
    staging_dir: str | Path | None = None
    upload_dir: str | None = None

    def __post_init__(self) -> None:
        if self.path not in ("auto", *INGEST_PATHS):
            raise ConfigError(f"ingest must be 'auto', 'files', 'upload' or 'arrow', got {self.path!r}")
        if self.path == "upload" and self.upload_dir is None:
            raise ConfigError("ingest='upload' needs upload_dir, a directory on the server's filesystem")
        rows = self.batch_rows
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ConfigError(f"batch_rows must be a positive int, got {rows!r}")

    @classmethod
    def of(
        cls,
        ingest: IngestChoice | IngestOptions,
        *,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        staging_dir: str | Path | None = None,
        upload_dir: str | None = None,
    ) -> IngestOptions:
        """``ingest`` itself, or the options of a verb's ``ingest``, ``batch_rows``,
        ``staging_dir`` and ``upload_dir`` arguments."""
        if isinstance(ingest, IngestOptions):
            return ingest
        return cls(path=ingest, batch_rows=batch_rows, staging_dir=staging_dir, upload_dir=upload_dir)


def _as_frame(item: object) -> pl.DataFrame:
    item = from_pandas(item)
    if isinstance(item, pl.DataFrame):
        return item
    if isinstance(item, (pa.Table, pa.RecordBatch)):
        frame = pl.from_arrow(item)
        assert isinstance(frame, pl.DataFrame)
        return frame
    raise ConfigTypeError(
        f"a stream holds Polars or pandas DataFrames or Arrow tables/record batches, got {type(item).__name__}"
    )


def frames(stream: Stream, batch_rows: int) -> Iterator[pl.DataFrame]:
    """``stream`` as Polars frames of at most ``batch_rows`` rows, in order."""
    stream = from_pandas(stream)
    if isinstance(stream, pl.LazyFrame):
        items: Iterable[Any] = stream.collect_batches(chunk_size=batch_rows, maintain_order=True)
    elif isinstance(stream, (pl.DataFrame, pa.Table, pa.RecordBatch)):
        items = [stream]
    elif isinstance(stream, (str, bytes)) or not isinstance(stream, Iterable):
        raise ConfigTypeError(
            "stream must be a Spark DataFrame, a Polars or pandas DataFrame, a LazyFrame, an Arrow table, "
            f"or an iterable of DataFrames or Arrow batches; got {type(stream).__name__}"
        )
    else:
        items = stream
    for item in items:
        frame = _as_frame(item)
        yield from (frame.iter_slices(batch_rows) if frame.height > batch_rows else [frame])


def spark_compatible(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with types Spark reads from Arrow: unsigned ints widened, categoricals as strings."""
    casts: dict[str, Any] = {}
    for name, dtype in frame.schema.items():
        if dtype in _WIDER:
            casts[name] = _WIDER[dtype]
        elif dtype == pl.UInt64:
            top = frame.get_column(name).max()
            if isinstance(top, int) and top >= 1 << 63:
                raise KeyInputError(
                    f"column {name!r} holds uint64 values of 2**63 or more, which Spark's signed "
                    "bigint cannot hold; cast it to a string first"
                )
            casts[name] = pl.Int64
        elif isinstance(dtype, (pl.Categorical, pl.Enum)):
            casts[name] = pl.String
    # Polars types cast's argument as a Mapping keyed by a union, and a Mapping's key type is
    # invariant: the dict of column names its docs show is refused (pola-rs/polars#14468).
    return frame.cast(casts) if casts else frame  # type: ignore[arg-type]


def to_arrow(frame: pl.DataFrame) -> pa.Table:
    """Arrow data Spark reads (large strings, not string views)."""
    return spark_compatible(frame).to_arrow(compat_level=pl.CompatLevel.oldest())


def balanced_union(parts: list[DataFrame]) -> DataFrame:
    """The rows of every part, joined by a tree of unions of depth ⌈log2(len(parts))⌉."""
    if not parts:
        raise KeyInputError("nothing to union: no rows were written")
    while len(parts) > 1:
        parts = [parts[i].union(parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


class Ingestion:
    """One window's rows on their way to Spark; :meth:`finish` gives them as a DataFrame.

    ``rows`` and ``seconds`` (time spent converting, writing and sending) count what was
    written. What this side wrote lives as long as the DataFrame :meth:`finish` gives
    (:func:`~keysplit.spark.lifetime.release_with`): a query, or a recomputation after an
    executor's loss, may read it any time before. :meth:`discard` removes it when no
    DataFrame was given (a failed or abandoned stream).
    """

    path: IngestPath

    def __init__(self, session: Session) -> None:
        self.session = session
        self.rows = 0
        self.seconds = 0.0
        self._schema: pa.Schema | None = None
        self._given = False

    def write(self, frame: pl.DataFrame) -> None:
        started = time.perf_counter()
        table = to_arrow(frame)
        if self._schema is None:
            self._schema = table.schema
        elif table.schema != self._schema:
            try:
                table = table.cast(self._schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as error:
                raise KeyInputError(
                    f"a batch of the stream has the schema {table.schema}, after batches of "
                    f"{self._schema}, and cannot be cast to it: {error}"
                ) from None
        self._write(table)
        self.rows += table.num_rows
        self.seconds += time.perf_counter() - started

    def finish(self) -> DataFrame:
        started = time.perf_counter()
        if self._schema is None:
            raise KeyInputError("the stream is empty: nothing was written")
        frame = self._finish()
        release_with(frame, self._remove, at_exit=True)
        self._given = True
        self.seconds += time.perf_counter() - started
        return frame

    def discard(self) -> None:
        """Removes what was written, unless :meth:`finish` gave it to a DataFrame; idempotent."""
        if not self._given:
            self._remove()

    def _remove(self) -> None:
        """Removes what this side wrote; idempotent."""

    def _write(self, table: pa.Table) -> None:
        raise NotImplementedError

    def _finish(self) -> DataFrame:
        raise NotImplementedError


class _ParquetFiles:
    """Arrow tables written to Parquet files of at most :data:`FILE_ROWS` rows in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.files: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_file = 0

    def write(self, table: pa.Table) -> list[Path]:
        """Writes ``table``; returns the files it closed."""
        closed = []
        while table.num_rows:
            if self._writer is None:
                path = self.directory / f"part-{len(self.files):05d}.parquet"
                self._writer = pq.ParquetWriter(path, table.schema, compression="lz4")
                self.files.append(path)
                self._rows_in_file = 0
            take = min(table.num_rows, FILE_ROWS - self._rows_in_file)
            self._writer.write_table(table.slice(0, take))
            self._rows_in_file += take
            table = table.slice(take)
            if self._rows_in_file >= FILE_ROWS:
                closed.append(self.close())
        return closed

    def close(self) -> Path:
        assert self._writer is not None
        self._writer.close()
        self._writer = None
        return self.files[-1]

    @property
    def open(self) -> bool:
        return self._writer is not None


class FileIngestion(Ingestion):
    """Parquet files in a local directory that the server's executors read as they are."""

    path: IngestPath = "files"

    def __init__(self, session: Session, staging_dir: str | Path | None = None) -> None:
        super().__init__(session)
        parent = Path(staging_dir) if staging_dir is not None else None
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        self._directory = Path(tempfile.mkdtemp(prefix="keysplit-ingest-", dir=parent))
        self._files = _ParquetFiles(self._directory)

    def _write(self, table: pa.Table) -> None:
        self._files.write(table)

    def _finish(self) -> DataFrame:
        if self._files.open:
            self._files.close()
        spark = self.session.spark
        return spark.read.parquet(*[str(path) for path in self._files.files])

    def _remove(self) -> None:
        shutil.rmtree(self._directory, ignore_errors=True)


class UploadIngestion(Ingestion):
    """Parquet files written here and copied into ``upload_dir`` on the server's filesystem."""

    path: IngestPath = "upload"

    def __init__(self, session: Session, upload_dir: str) -> None:
        super().__init__(session)
        self._local = Path(tempfile.mkdtemp(prefix="keysplit-upload-"))
        self._files = _ParquetFiles(self._local)
        self._remote = f"{upload_dir.rstrip('/')}/{uuid.uuid4().hex}"
        self._uploaded: list[str] = []

    def _upload(self, path: Path) -> None:
        target = f"{self._remote}/{path.name}"
        self.session.call(f"uploading {path.name}", lambda: self.session.spark.copyFromLocalToFs(str(path), target))
        self._uploaded.append(target)
        path.unlink()

    def _write(self, table: pa.Table) -> None:
        for path in self._files.write(table):
            self._upload(path)

    def _finish(self) -> DataFrame:
        if self._files.open:
            self._upload(self._files.close())
        return self.session.spark.read.parquet(*self._uploaded)

    def _remove(self) -> None:
        shutil.rmtree(self._local, ignore_errors=True)


class ArrowIngestion(Ingestion):
    """Each batch sent as a cached local relation, which the server's driver holds (an
    artifact, not a block of an executor that may die); any server."""

    path: IngestPath = "arrow"

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._parts: list[DataFrame] = []
        # The setting that sends every batch as an artifact, changed once for the stream
        # and restored when its DataFrame is made or the stream is dropped.
        self._settings = contextlib.ExitStack()
        self._changed = False

    def _write(self, table: pa.Table) -> None:
        spark = self.session.spark
        if not self._changed:
            self._settings.enter_context(run_settings(self.session, {_CACHE_THRESHOLD: "0"}))
            self._changed = True
        self._parts.append(self.session.call(f"sending {table.num_rows} rows", lambda: spark.createDataFrame(table)))

    def _finish(self) -> DataFrame:
        self._settings.close()
        return balanced_union(self._parts)

    def _remove(self) -> None:
        self._settings.close()


# The path each Spark session's server takes, found once per Spark session.
_probed: weakref.WeakKeyDictionary[SparkSession, IngestPath] = weakref.WeakKeyDictionary()


def _probe_table() -> pa.Table:
    return pa.table({"keysplit_probe": [uuid.uuid4().hex]})


def _server_reads(session: Session, path: str, token: str) -> bool:
    try:
        rows = session.call(
            "probing the server's filesystem",
            lambda: session.spark.read.parquet(path).collect(),
            timeout=_PROBE_TIMEOUT,
        )
    except TimeoutError:
        raise
    except Exception:  # noqa: BLE001 - any failure to read means the path is not shared
        return False
    return [row[0] for row in rows] == [token]


def _probe(session: Session, staging_dir: str | Path | None, upload_dir: str | None) -> IngestPath:
    table = _probe_table()
    token = table.column(0)[0].as_py()
    directory = Path(tempfile.mkdtemp(prefix="keysplit-probe-", dir=staging_dir))
    try:
        local = directory / "probe.parquet"
        pq.write_table(table, local)
        if _server_reads(session, str(local), token):
            return "files"
        if upload_dir is not None:
            remote = f"{upload_dir.rstrip('/')}/probe-{token}.parquet"
            with contextlib.suppress(Exception):
                session.call(
                    "probing an upload",
                    lambda: session.spark.copyFromLocalToFs(str(local), remote),
                    timeout=_PROBE_TIMEOUT,
                )
                if _server_reads(session, remote, token):
                    return "upload"
        return "arrow"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def choose_path(session: Session, options: IngestOptions) -> IngestPath:
    """The ingestion path of ``options`` on this session's server (``"auto"`` probes it once)."""
    if options.path != "auto":
        return options.path
    if session.server is not None:
        return "files"
    if session.spark not in _probed:
        _probed[session.spark] = _probe(session, options.staging_dir, options.upload_dir)
    return _probed[session.spark]


def open_ingestion(session: Session, path: IngestPath, options: IngestOptions) -> Ingestion:
    """A fresh sink of ``path`` (see :func:`choose_path`)."""
    if path == "files":
        return FileIngestion(session, options.staging_dir)
    if path == "upload":
        assert options.upload_dir is not None
        return UploadIngestion(session, options.upload_dir)
    return ArrowIngestion(session)


def to_spark(session: Session, data: Stream, path: IngestPath, options: IngestOptions | None = None) -> DataFrame:
    """``data`` (a table or a client stream) as a Spark DataFrame held on the server, sent by
    ``path``; its partitions keep the stream's order."""
    options = options or IngestOptions()
    first: pl.DataFrame | None = None
    sink = open_ingestion(session, path, options)
    try:
        for part in frames(data, options.batch_rows):
            if first is None or not first.height:
                first = part
            if part.height:
                sink.write(part)
        if first is None:
            raise KeyInputError("the stream is empty")
        if not first.height:
            empty = to_arrow(first)
            return session.call("an empty result", lambda: session.spark.createDataFrame(empty))
        return sink.finish()
    finally:
        sink.discard()
