"""``skewed(df).write``: a partitioned write whose hot partition value is written by as many
tasks as its size needs, in files of the size asked for.

``df.repartition("date").write.partitionBy("date")`` is the advised way to avoid many small
files, and it gives each date one task: a date of 60 % of the rows is one task's work and one
file of 60 % of the data. Here, before the write:

1. **Sizes.** Each partition value's rows are counted exactly (one job, over the partition
   columns alone), and the bytes a row takes in the chosen format are estimated from the
   first rows of the frame, encoded on the client as the format would encode them (Parquet
   and ORC with the write's codec; JSON and CSV as text, compressed with it): per value where
   the sample holds enough of its rows, else over the whole sample. With ``target_file_rows``
   the sizes are the counts, and nothing is encoded.
2. **Tasks** (:mod:`.write_plan`): each value is cut into files of the target size, each
   full file a task of its own, the remainders and the small values packed into tasks of at
   most one file's worth.
3. **The write** is Spark's own (its writer, format, modes, commit protocol and Hive-style
   layout), over the frame shuffled by ``repartitionById`` onto those tasks: a row goes to
   its value's task by a hash of its values, so a re-run task writes the rows the first run
   did. A row whose value was not counted (an input that changed between the two reads) goes
   to a task by a hash of its value: never lost.

The frame is read twice (the counts, then the write): persist one that is costly to compute.
"""

from __future__ import annotations

import bz2
import io
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.columns import column, joined_on, row_hash
from keysplit.spark.intake import session_for
from keysplit.spark.write_plan import WritePlan, write_plan

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from keysplit.spark.options import SkewOptions
    from keysplit.spark.report import Report
    from keysplit.spark.session import Session

#: Rows read from the start of the frame to estimate the bytes a row takes once written.
SAMPLE_ROWS = 20_000
#: A value's own bytes per row are estimated from its sampled rows from this many on.
VALUE_SAMPLE_ROWS = 1_000
#: Formats whose written bytes the sample can estimate, and the format their files are.
_ENCODED_AS = {"parquet": "parquet", "delta": "parquet", "orc": "orc", "json": "json", "csv": "csv"}
#: The session setting of each encoded kind's default codec (JSON and CSV: uncompressed).
_CODEC_SETTINGS = {"parquet": "spark.sql.parquet.compression.codec", "orc": "spark.sql.orc.compression.codec"}
_MODES = ("append", "overwrite", "error", "errorifexists", "ignore")
_TASK = "__keysplit_write_task"
_FIRST, _FULL, _CHUNKS, _REST = (f"__keysplit_write_{name}" for name in ("first", "full", "chunks", "rest"))
_ROWS, _SIZE, _FILES, _ROW_BYTES = (f"__keysplit_write_{name}" for name in ("rows", "size", "files", "row_bytes"))
#: A row's uniform number in [0, 1) takes this many bits of its hash.
_UNIFORM_BITS = 31


@dataclass(frozen=True)
class WriteReport:
    """What a skew-safe write planned: per partition value (``values``: the partition
    columns, ``rows``, predicted ``size`` in ``unit``, ``files``), each task's predicted size
    (``task_sizes``), the ``files`` of the write, the ``target`` file size and the estimated
    bytes a row takes (``row_bytes``; None when the target is in rows)."""

    values: pl.DataFrame
    task_sizes: tuple[float, ...]
    files: int
    target: float
    unit: str
    row_bytes: float | None

    @property
    def tasks(self) -> int:
        return len(self.task_sizes)

    @property
    def hottest_task(self) -> float:
        """The predicted largest task over the mean task (1: balanced)."""
        total = sum(self.task_sizes)
        return max(self.task_sizes) / (total / self.tasks) if total else 1.0

    def __repr__(self) -> str:
        return (
            f"WriteReport({self.values.height} partition values in {self.tasks} tasks and {self.files} files of "
            f"at most {self.target:,.0f} {self.unit}; predicted hottest task {self.hottest_task:.2f}x the mean)"
        )


class SkewedWriter:
    """``skewed(df).write``: PySpark's ``DataFrameWriter`` for partitioned writes, with each
    partition value written by the tasks its size needs (module notes)."""

    def __init__(self, frame: DataFrame, options: SkewOptions) -> None:
        self._frame = frame
        self._options = options.read_by("write", "target_file_bytes", "target_file_rows")
        self._mode: str | None = None
        self._format: str | None = None
        self._settings: dict[str, str] = {}
        self._partition: tuple[str, ...] = ()

    def mode(self, saveMode: str | None) -> SkewedWriter:  # noqa: N803 - PySpark's name
        """``append``, ``overwrite``, ``error`` (``errorifexists``, the default) or ``ignore``."""
        if saveMode is not None:
            if not isinstance(saveMode, str) or saveMode.lower() not in _MODES:
                raise ConfigError(f"mode must be one of {', '.join(_MODES)}, got {saveMode!r}")
            self._mode = saveMode.lower()
        return self

    def format(self, source: str) -> SkewedWriter:
        """The data source: ``parquet`` (Spark's default), ``orc``, ``json``, ``csv``, ``delta``;
        another only with ``target_file_rows`` (its bytes cannot be estimated here)."""
        if not isinstance(source, str) or not source:
            raise ConfigTypeError(f"format takes a data source's name, got {source!r}")
        self._format = source.lower()
        return self

    def option(self, key: str, value: Any) -> SkewedWriter:
        """A data source option, as ``DataFrameWriter.option``."""
        self._settings[str(key)] = _option_text(value)
        return self

    def options(self, **options: Any) -> SkewedWriter:
        """Data source options, as ``DataFrameWriter.options``."""
        for key, value in options.items():
            self.option(key, value)
        return self

    def partitionBy(self, *cols: str | Sequence[str]) -> SkewedWriter:  # noqa: N802 - PySpark's name
        """The partition columns (names), as ``DataFrameWriter.partitionBy``."""
        names = tuple(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
        for name in names:
            if not isinstance(name, str):
                raise ConfigTypeError(f"partitionBy takes column names, got {type(name).__name__}")
        self._partition = tuple(names)  # type: ignore[arg-type]
        return self

    def bucketBy(self, *args: Any, **kwargs: Any) -> SkewedWriter:  # noqa: N802 - PySpark's name
        raise ConfigError(
            "bucketBy: a bucketed table's rows go to their buckets' files by Spark's own rule; write it with "
            "df.write.bucketBy(...) (keysplit spreads partitioned writes, not buckets)"
        )

    sortBy = bucketBy

    def insertInto(  # noqa: N802 - PySpark's name
        self,
        tableName: str,  # noqa: N803 - PySpark's name
        overwrite: bool | None = None,
        *,
        report: Report[WriteReport] | None = None,
    ) -> None:
        """Inserts the frame into the existing table ``tableName`` by column position, as
        ``DataFrameWriter.insertInto``: the partition columns and the format are the table's
        (read from the catalog); ``overwrite`` as Spark's (static or dynamic by the session's
        ``partitionOverwriteMode``)."""
        if not isinstance(tableName, str):
            raise ConfigTypeError(f"insertInto takes a table name, got {type(tableName).__name__}")
        if self._partition:
            raise ConfigError("insertInto takes the table's partition columns: drop partitionBy (as Spark refuses it)")
        handle = session_for(self._frame, self._options.session)
        table = handle.call("reading the table's columns", lambda: handle.spark.catalog.listColumns(tableName))
        names = handle.call("reading the schema", lambda: self._frame.columns)
        if len(names) != len(table):
            raise ConfigError(
                f"insertInto({tableName!r}) matches columns by position: the table has {len(table)} "
                f"({[c.name for c in table]}), the frame {len(names)} ({names})"
            )
        described = handle.call(
            "reading the table's format", lambda: handle.spark.sql(f"DESCRIBE TABLE EXTENDED {tableName}").collect()
        )
        provider = [str(row[1]).lower() for row in described if row[0] == "Provider"]
        # Planned as the table's partition columns and format, whatever this writer was given.
        given = self._partition, self._format
        self._partition = tuple(names[i] for i, c in enumerate(table) if c.isPartition)
        self._format = provider[0] if provider else self._format
        try:
            writer = self._planned(report, partition_columns=False)
        finally:
            self._partition, self._format = given
        writer.insertInto(tableName, overwrite)

    def save(
        self,
        path: str | None = None,
        format: str | None = None,  # noqa: A002 - PySpark's name
        mode: str | None = None,
        partitionBy: str | Sequence[str] | None = None,  # noqa: N803 - PySpark's name
        *,
        report: Report[WriteReport] | None = None,
        **options: Any,
    ) -> None:
        """Writes the frame to ``path``, as ``DataFrameWriter.save``."""
        self._given(format, mode, partitionBy, options)
        writer = self._planned(report)
        if path is None:
            writer.save()
        else:
            writer.save(path)

    def saveAsTable(  # noqa: N802 - PySpark's name
        self,
        name: str,
        format: str | None = None,  # noqa: A002 - PySpark's name
        mode: str | None = None,
        partitionBy: str | Sequence[str] | None = None,  # noqa: N803 - PySpark's name
        *,
        report: Report[WriteReport] | None = None,
        **options: Any,
    ) -> None:
        """Writes the frame as the table ``name`` of the session's catalog, as
        ``DataFrameWriter.saveAsTable``."""
        if not isinstance(name, str):
            raise ConfigTypeError(f"saveAsTable takes a table name, got {type(name).__name__}")
        self._given(format, mode, partitionBy, options)
        self._planned(report).saveAsTable(name)

    def parquet(
        self,
        path: str,
        mode: str | None = None,
        partitionBy: str | Sequence[str] | None = None,  # noqa: N803 - PySpark's name
        compression: str | None = None,
        *,
        report: Report[WriteReport] | None = None,
    ) -> None:
        """Writes Parquet files under ``path``, as ``DataFrameWriter.parquet``."""
        self._file("parquet", path, mode, partitionBy, {"compression": compression}, report)

    def orc(
        self,
        path: str,
        mode: str | None = None,
        partitionBy: str | Sequence[str] | None = None,  # noqa: N803 - PySpark's name
        compression: str | None = None,
        *,
        report: Report[WriteReport] | None = None,
    ) -> None:
        """Writes ORC files under ``path``, as ``DataFrameWriter.orc``."""
        self._file("orc", path, mode, partitionBy, {"compression": compression}, report)

    def json(
        self,
        path: str,
        mode: str | None = None,
        compression: str | None = None,
        *,
        report: Report[WriteReport] | None = None,
        **options: Any,
    ) -> None:
        """Writes JSON lines under ``path``, as ``DataFrameWriter.json``."""
        self._file("json", path, mode, None, {"compression": compression, **options}, report)

    def csv(
        self,
        path: str,
        mode: str | None = None,
        compression: str | None = None,
        sep: str | None = None,
        header: bool | str | None = None,
        *,
        report: Report[WriteReport] | None = None,
        **options: Any,
    ) -> None:
        """Writes CSV files under ``path``, as ``DataFrameWriter.csv``."""
        self._file(
            "csv", path, mode, None, {"compression": compression, "sep": sep, "header": header, **options}, report
        )

    def _file(
        self,
        source: str,
        path: str,
        mode: str | None,
        partition: str | Sequence[str] | None,
        options: dict[str, Any],
        report: Report[WriteReport] | None,
    ) -> None:
        if not isinstance(path, str):
            raise ConfigTypeError(f"{source} takes a path, got {type(path).__name__}")
        self._given(source, mode, partition, {k: v for k, v in options.items() if v is not None})
        self._planned(report).save(path)

    def _given(
        self, source: str | None, mode: str | None, partition: str | Sequence[str] | None, options: dict[str, Any]
    ) -> None:
        if source is not None:
            self.format(source)
        self.mode(mode)
        if partition is not None:
            self.partitionBy(*([partition] if isinstance(partition, str) else partition))
        self.options(**options)

    def _planned(self, report: Report[WriteReport] | None, *, partition_columns: bool = True) -> Any:
        """Spark's writer over the frame shuffled onto the planned tasks (module notes); with
        ``partition_columns`` False, a writer without them (``insertInto`` takes the table's)."""
        handle = session_for(self._frame, self._options.session)
        source = self._format or str(
            handle.call("reading settings", lambda: handle.spark.conf.get("spark.sql.sources.default", "parquet"))
        )
        frame = self._frame
        if self._partition:
            schema = handle.call("reading the schema", lambda: frame.schema)
            names = [field.name for field in schema.fields]
            missing = [name for name in self._partition if name not in names]
            if missing:
                raise ConfigError(f"partitionBy names columns the frame lacks: {missing} (its columns: {names})")
            if self._options.target_file_rows is None and source not in _ENCODED_AS:
                raise ConfigError(
                    f"format {source!r}: the bytes its files take cannot be estimated here (only "
                    f"{', '.join(sorted(_ENCODED_AS))}); give the target in rows, skewed(df, target_file_rows=...), "
                    "or write it with df.write"
                )
            frame = self._spread(handle, source, schema, report)
        writer = frame.write.format(source).options(**self._settings)
        if self._mode is not None:
            writer = writer.mode(self._mode)
        if self._partition and partition_columns:
            writer = writer.partitionBy(*self._partition)
        return writer

    def _spread(
        self, handle: Session, source: str, schema: StructType, report: Report[WriteReport] | None
    ) -> DataFrame:
        """The frame on the write's tasks: sizes measured, tasks planned (module notes)."""
        frame, keys, seed = self._frame, list(self._partition), self._options.seed
        by_rows = self._options.target_file_rows is not None
        compression = None if by_rows else self._compression(handle, source)
        if not by_rows:
            _encoded_bytes(pl.DataFrame({"probe": [0]}), _ENCODED_AS[source], compression)  # a codec sized here?

        def counts() -> pa.Table:
            from pyspark.sql import functions as F

            return frame.groupBy(*[column(k) for k in keys]).agg(F.count(F.lit(1)).alias(_ROWS)).toArrow()

        def sample() -> pa.Table:
            return frame.limit(SAMPLE_ROWS).toArrow()

        def measure() -> tuple[pa.Table, pa.Table | None]:
            if by_rows:
                return counts(), None
            with ThreadPoolExecutor(max_workers=2) as pool:
                counted, sampled = pool.submit(counts), pool.submit(sample)
                return counted.result(), sampled.result()

        counted, sampled = handle.call("counting the rows of each partition value", measure)
        values = pl.from_arrow(counted)
        assert isinstance(values, pl.DataFrame)
        values = values.with_columns(pl.col(_ROWS).cast(pl.Int64))
        if by_rows:
            target, unit, row_bytes = float(self._options.target_file_rows or 0), "rows", None
            values = values.with_columns(pl.col(_ROWS).cast(pl.Float64).alias(_SIZE))
        else:
            assert sampled is not None
            row_bytes, per_value = _row_bytes(sampled, keys, _ENCODED_AS[source], compression)
            target, unit = float(self._options.target_file_bytes), "bytes"
            values = _sized(values, per_value, keys, row_bytes)
        plan = write_plan(values[_SIZE].to_list(), target)
        if report is not None:
            files = pl.Series([full + (rest >= 0) for full, rest in zip(plan.full, plan.rest, strict=True)])
            shown = values.with_columns(files.alias(_FILES))
            # Named rows, size and files, but where a partition column has one of those names.
            names = {_ROWS: "rows", _SIZE: "size", _FILES: "files"}
            shown = shown.rename({k: v if v not in keys else f"write_{v}" for k, v in names.items()})
            report.fill(WriteReport(shown, plan.load, plan.files(), target, unit, row_bytes))
        if plan.tasks == 0:
            return frame
        return _on_tasks(handle, frame, schema, keys, values.select(*keys), plan, seed)

    def _compression(self, handle: Session, source: str) -> str | None:
        """The codec the write uses: its ``compression`` option, else the session's setting."""
        given = self._settings.get("compression") or self._settings.get(f"{source}.compression")
        if given is not None:
            return given.lower()
        name = _CODEC_SETTINGS.get(_ENCODED_AS[source])
        if name is None:
            return None
        return str(handle.call("reading settings", lambda: handle.spark.conf.get(name))).lower()


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or isinstance(value, (str, int, float)):
        return "" if value is None else str(value)
    raise ConfigTypeError(f"an option's value is a str, a number or a bool, got {type(value).__name__}")


def _sized(values: pl.DataFrame, per_value: pl.DataFrame, keys: list[str], row_bytes: float) -> pl.DataFrame:
    """``values`` with ``size``: its rows times its own bytes per row where the sample had
    enough of its rows, else the sample's."""
    sized = values.join(per_value, on=keys, how="left", nulls_equal=True, maintain_order="left")
    each = pl.col(_ROW_BYTES).fill_null(row_bytes)
    return sized.with_columns((pl.col(_ROWS) * each).alias(_SIZE)).drop(_ROW_BYTES)


def _row_bytes(sample: pa.Table, keys: list[str], kind: str, compression: str | None) -> tuple[float, pl.DataFrame]:
    """The bytes a row of ``sample`` takes written as ``kind`` (the partition columns are
    the directories', not the files'): over the whole sample, and per value of ``keys`` with
    at least :data:`VALUE_SAMPLE_ROWS` sampled rows."""
    rows = pl.from_arrow(sample)
    assert isinstance(rows, pl.DataFrame)
    empty = pl.DataFrame(schema={**{k: rows.schema[k] for k in keys}, _ROW_BYTES: pl.Float64})
    if rows.height == 0:
        return 1.0, empty
    overall = _encoded_bytes(rows.drop(keys), kind, compression) / rows.height
    own = []
    for value, group in rows.group_by(keys, maintain_order=True):
        if group.height >= VALUE_SAMPLE_ROWS:
            bytes_per_row = _encoded_bytes(group.drop(keys), kind, compression) / group.height
            own.append({**dict(zip(keys, value, strict=True)), _ROW_BYTES: bytes_per_row})
    per_value = pl.DataFrame(own, schema=empty.schema) if own else empty
    return max(overall, 1e-9), per_value


def _encoded_bytes(rows: pl.DataFrame, kind: str, compression: str | None) -> int:
    """The bytes ``rows`` take as one file of ``kind`` compressed with ``compression``."""
    buffer = io.BytesIO()
    codec = None if compression in (None, "none", "uncompressed") else compression
    if kind == "parquet":
        import pyarrow.parquet as pq

        # Column by column, the smaller of dictionary and plain encoding: Spark's Parquet
        # writer drops a column's dictionary where it does not make the column smaller (Arrow's
        # keeps it, and overstates a column of distinct values by 2-3x).
        table, total = rows.to_arrow(), 0
        for name in table.column_names:
            sizes = []
            for dictionary in (True, False):
                one = io.BytesIO()
                pq.write_table(
                    table.select([name]), one, compression=_arrow_codec(codec) or "none", use_dictionary=dictionary
                )
                sizes.append(one.tell())
            total += min(sizes)
        return total
    if kind == "orc":
        from pyarrow import orc

        orc.write_table(rows.to_arrow(), buffer, compression=(_arrow_codec(codec) or "uncompressed").upper())
        return buffer.tell()
    if kind == "json":
        rows.write_ndjson(buffer)
    else:
        rows.write_csv(buffer)
    return _compressed_length(buffer.getvalue(), codec)


def _arrow_codec(codec: str | None) -> str | None:
    """Spark's name of a Parquet or ORC codec as Arrow's (Spark's ``lz4`` for Parquet is
    Hadoop's framing, sized alike)."""
    if codec is None:
        return None
    arrow = {"lz4raw": "lz4", "lz4_raw": "lz4"}.get(codec, codec)
    if arrow not in ("snappy", "gzip", "zlib", "brotli", "lz4", "zstd"):
        raise ConfigError(
            f"compression {codec!r}: its size cannot be estimated here; give skewed(df, target_file_rows=...)"
        )
    return arrow


def _compressed_length(data: bytes, codec: str | None) -> int:
    if codec is None:
        return len(data)
    if codec in ("gzip", "deflate"):
        return len(zlib.compress(data, 6))
    if codec == "bzip2":
        return len(bz2.compress(data))
    if pa.Codec.is_available(codec):
        return len(pa.Codec(codec).compress(data))
    raise ConfigError(
        f"compression {codec!r}: its size cannot be estimated here; give skewed(df, target_file_rows=...)"
    )


def _on_tasks(
    handle: Session,
    frame: DataFrame,
    schema: StructType,
    keys: list[str],
    values: pl.DataFrame,
    plan: WritePlan,
    seed: int,
) -> DataFrame:
    """``frame`` repartitioned onto ``plan``'s tasks (module notes)."""
    from pyspark.sql import functions as F

    table = values.with_columns(
        pl.Series(_FIRST, plan.first, dtype=pl.Int64),
        pl.Series(_FULL, plan.full, dtype=pl.Int64),
        pl.Series(_CHUNKS, plan.chunks, dtype=pl.Float64),
        pl.Series(_REST, plan.rest, dtype=pl.Int64),
    ).to_arrow()
    literal = handle.call("making the partition values' table", lambda: handle.spark.createDataFrame(table))
    uniform = F.pmod(row_hash(seed, schema), F.lit(1 << _UNIFORM_BITS)) / F.lit(float(1 << _UNIFORM_BITS))
    chunk = F.floor(uniform * column(_CHUNKS))
    # A value of no full file is its remainder's task whole: its rows are not hashed.
    planned = (
        F.when(column(_FULL) == 0, column(_REST))
        .when(chunk < column(_FULL), column(_FIRST) + chunk)
        .when(column(_REST) >= 0, column(_REST))
        .otherwise(column(_FIRST) + column(_FULL) - 1)
    )
    # A value the counts did not see (its input changed between the reads) still goes somewhere.
    unseen = F.pmod(F.xxhash64(F.lit(seed), *[column(k) for k in keys]), F.lit(plan.tasks))
    # Null-safe only where a value is null: a plain equality on one integer column is Spark's
    # fastest broadcast join (a null-safe one hashes a pair per row).
    nullable = [k for k in keys if values[k].null_count()]
    routed = joined_on(
        frame, literal, "left", null_safe=nullable, equal=[k for k in keys if k not in nullable], broadcast=True
    )
    task = F.coalesce(planned, unseen).cast("int")
    names = [f.name for f in schema.fields]
    return (
        routed.withColumn(_TASK, task)
        .repartitionById(plan.tasks, column(_TASK))
        .select(*[column(name) for name in names])
    )
