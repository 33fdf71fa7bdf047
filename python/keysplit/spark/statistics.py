"""Statistics gathered before a plan is built: each keyed input's keys, from one sample.

The verbs' own plans find their hot keys from a sample *in the plan*: lazy, but every run
pays the sample's small stages (seconds of task time), in series before the operator, even
where nothing is hot. :func:`keysplit.spark.optimize` instead measures first, once per query:
one Bernoulli sample of each input it judges, of the key hash and the columns its operator
cuts by (a window's ordering, a percentile's values), brought to the client in one scan of
that input, every input at once. From it the hot keys, their cuts and their grids are
computed here in milliseconds (:mod:`.window`, :mod:`.holistic`, :mod:`.join`), and go into
the rewritten plan as literal tables: the plan holds no sampling stage, and where nothing is
hot it is Spark's own, with nothing added.

A key is hot by the front's rule (:func:`keysplit.spark.sampled.hot_in_sample`): its sampled
rows, at the count's 95 % upper bound (``n + 2√n + 3``), are more than a mean task's share of
the sampled rows.

**Reuse.** A recurring job (a loop, a scheduler in one driver, a notebook run again) would
pay the scan again for the same answer, so each sample is kept, in this process, for a later
call that samples the same plan over the same files: keyed by the plan's protobuf (its ids
and call sites aside) with the sample's fraction and seed, and by its input files' names and,
where the client can see the file, its size and modification time (Spark writes new files
under new names, so an overwrite or an append changes the key). An input with no files that
could change under the same plan (a table read by name, SQL text, a JDBC or Python source,
and no file listed) is sampled anew every time. A sample kept past a change the key does not
see (a file rewritten in place under its name, on storage the client cannot read) costs
balance, never exactness: every plan is exact whatever hot keys it splits.
:func:`forget_statistics` drops them all; at most :data:`KEPT_BYTES` are kept.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import numpy as np
import polars as pl

from keysplit.spark.columns import column
from keysplit.spark.group_runner import PREFIX
from keysplit.spark.row_index import PLACE_BITS
from keysplit.spark.sorter_places import COUNTED_PARTITIONS, LISTED_NULLS, CountedPlaces

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from keysplit.spark.session import Session

#: The sampled rows aimed at per input: a key of a mean task's share at 32 tasks is then seen
#: about 6,000 times (±2.6 % at 95 %), and a hot key gives its ``C - 1`` candidate cuts many
#: rows each.
SAMPLE_ROWS = 200_000
#: The smallest fraction sampled, whatever the input's estimated size: a plan's estimate may
#: be far above its rows (a filter keeps its input's size), and too small a sample sees no key.
MIN_FRACTION = 0.002
#: The bytes (as Spark's plan estimates them) a statistics scan's task reads at least: a
#: scan of a file per task costs more in each task's fixed cost than in its rows (the key of
#: 1.2x10^7 rows in 64 files: 0.70 s in 64 tasks, 0.48 s in 32, 0.30 s in 6 on local[2]);
#: a scan in as few tasks as the cores stands alone on a wider cluster (the key of 4x10^6
#: rows, 104 MiB of files, in 2 tasks: 0.106 s its longest task, a quarter of a split join's
#: computed 32-slot makespan; in 4, 0.054-0.078 s).
SCAN_TASK_BYTES = 32 << 20
#: The most rows a join side's sample is expected to hold (its estimated rows times the
#: fraction) for the sample to be broadcast where a keyed operator above the join is measured
#: through it (a few tens of MiB at most; Spark's plan statistics overestimate a file's rows).
BROADCAST_SAMPLE_ROWS = 500_000
#: The sampled key hash's column: ``xxhash64(seed, keys)``, as each verb's plan finds keys by.
KEY_HASH = "__keysplit_st_key_hash"
#: A row's position in the input, observed where :attr:`SampleRequest.placed`.
_POSITION = PREFIX + "st_position"
#: The most bytes of samples kept for reuse (least recently used dropped first).
KEPT_BYTES = 256 << 20
#: Plan nodes that read something which may change under the same plan: with no input file
#: listed, such an input's sample is not kept.
_CHANGING_SOURCES = frozenset(
    {
        "read",
        "sql",
        "catalog",
        "cached_remote_relation",
        "common_inline_user_defined_table_function",
        "common_inline_user_defined_data_source",
        "unresolved_table_valued_function",
        "extension",
    }
)
_ESTIMATE = re.compile(r"Statistics\(sizeInBytes=([\d.]+)\s*([A-Za-z]*)(?:, rowCount=([\d.E+]+))?")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60}


def estimated_rows(handle: Session, frame: DataFrame) -> float | None:
    """Spark's plan statistics' rows (or its size over an 8-byte row): no job runs."""
    return _estimated(handle.explained(frame, "cost"))


def _estimated(text: str) -> float | None:
    found = _ESTIMATE.search(text)
    if found is None:
        return None
    if found.group(3):
        return float(found.group(3))
    return _size_bytes(found) / 8


def _size_bytes(found: re.Match[str]) -> float:
    return float(found.group(1)) * _UNITS.get(found.group(2), 1)


def _scan_tasks(text: str, workers: int, slots: int = 1) -> int | None:
    """The tasks a statistics scan of the plan ``text`` (Spark's ``explain("cost")``) runs in:
    one per :data:`SCAN_TASK_BYTES` of its estimated size, at least the executors' ``slots``
    (a scan in fewer leaves cores idle: on ``local[2]`` the key of 4x10^6 rows took 0.13 s
    in one task, a quarter of a split join's computed makespan), at most ``workers`` (one
    wave of the query's tasks); None (as planned) where the plan shuffles (coalescing would
    narrow the stage that computes it) or has no estimate."""
    found = _ESTIMATE.search(text)
    if found is None or not text.partition("== Physical Plan ==")[2] or _shuffles(text):
        return None
    return max(1, min(workers, max(slots, math.ceil(_size_bytes(found) / SCAN_TASK_BYTES))))


def _shuffles(text: str) -> bool:
    """Whether the physical plan in ``text`` (Spark's ``explain("cost")``) has an exchange."""
    return "Exchange" in text.partition("== Physical Plan ==")[2]


def sample_fraction(estimated: float | None) -> float:
    """The fraction that samples about :data:`SAMPLE_ROWS` of an input of ``estimated`` rows."""
    if estimated is None:
        return 0.02
    return min(1.0, max(MIN_FRACTION, SAMPLE_ROWS / max(estimated, 1.0)))


@dataclass(frozen=True)
class SampleRequest:
    """What one input is sampled for: ``frame``'s ``key_hash`` and ``columns`` (aliased)."""

    frame: DataFrame
    key_hash: Column
    columns: tuple[Column, ...] = ()
    #: The sampled columns that are the key's (named in the report of the keys split).
    keys: tuple[str, ...] = ()
    #: Rows whose key has a null are dropped first (a join's: they match nothing).
    where: Column | None = None
    #: The fraction to sample (None: :func:`sample_fraction` of the input's estimated rows).
    fraction: float | None = None
    #: Whether ``frame`` is already a sample at ``fraction`` (a join's output, its driving
    #: side sampled: each output row comes from one row of that side).
    presampled: bool = False
    #: A frame of ``frame``'s rows whose plan statistics are read for it (a join's side, of
    #: which ``frame`` renames the columns): one analysis call for every decision.
    statistics_of: DataFrame | None = None
    #: A frame that reads ``frame``'s input files (the operator's input, of which ``frame``
    #: adds columns): its files are listed once for every request over it.
    files_of: DataFrame | None = None
    #: A condition whose rows are counted exactly, over every row the scan reads (observed
    #: before the sample; not for a ``presampled`` frame): :attr:`InputSample.counted`. Such
    #: a request has a scan of its own.
    counted_where: Column | None = None
    #: ... and where ``frame`` is read in its input's own partitions (its plan shuffles
    #: nothing), where those rows are: :attr:`InputSample.placed`.
    placed: bool = False


@dataclass(frozen=True)
class InputSample:
    """A Bernoulli sample of an input at ``fraction`` (1: every row): its :data:`KEY_HASH` and
    the requested columns, as Arrow and Polars."""

    fraction: float
    table: pa.Table
    #: The sampled columns that are the key's.
    keys: tuple[str, ...] = ()
    #: Whether it was kept from an earlier call over the same plan and files.
    reused: bool = False
    #: The input's rows that meet its request's :attr:`SampleRequest.counted_where`, all of
    #: them (None: nothing was counted).
    counted: int | None = None
    #: ... and where they are (:attr:`SampleRequest.placed`; None: not listed).
    placed: CountedPlaces | None = None

    @property
    def rows(self) -> pl.DataFrame:
        frame = pl.from_arrow(self.table)
        assert isinstance(frame, pl.DataFrame)
        return frame

    def key_counts(self) -> pl.DataFrame:
        """Sampled rows per key hash (``sampled``), hottest first, ties by hash."""
        return self._key_counts

    @functools.cached_property
    def _key_counts(self) -> pl.DataFrame:
        # Counted once a sample: each operator's decision reads them (a grouping of up to
        # SAMPLE_ROWS rows, about 25 ms each time).
        return (
            self.rows.group_by(KEY_HASH)
            .agg(pl.len().cast(pl.Int64).alias("sampled"))
            .sort(["sampled", KEY_HASH], descending=[True, False])
        )

    def hot(self, workers: int) -> pl.DataFrame:
        """The hot keys (:data:`KEY_HASH`, ``sampled``, ``upper``), hottest first."""
        counts = self.key_counts()
        total = int(counts["sampled"].sum()) if counts.height else 0
        upper = pl.col("sampled") + 2 * pl.col("sampled").sqrt() + 3
        return counts.with_columns(upper.alias("upper")).filter(pl.col("upper") * workers > total)

    def skew(self, workers: int) -> float | None:
        """The hottest key's rows in mean tasks' of ``workers``, at the count's upper bound
        (:meth:`hot`); None where no key is hot."""
        hot = self.hot(workers)
        return float(hot["upper"][0]) * workers / max(self.table.num_rows, 1) if hot.height else None

    def hottest_rows(self, workers: int) -> float:
        """The hottest key's rows, estimated (its sampled rows over the fraction); 0 where no
        key is hot at ``workers`` tasks."""
        hot = self.hot(workers)
        return float(hot["sampled"][0]) / self.fraction if hot.height else 0.0

    def may_split(self, workers: int, min_skew: float, min_rows: int) -> bool:
        """Whether the cost guard may split its hottest key, by the figures optimize's
        decision reads: it holds ``min_skew`` mean tasks' rows of ``workers``, and ``min_rows``
        rows."""
        skew = self.skew(workers)
        return skew is not None and skew >= min_skew and self.hottest_rows(workers) >= min_rows

    def key_values(self, hot: pl.DataFrame) -> pl.DataFrame:
        """The key columns of the ``hot`` keys (by :data:`KEY_HASH`), hottest first."""
        rows = self.rows.unique(KEY_HASH, keep="first").select(KEY_HASH, *self.keys)
        return hot.select(KEY_HASH).join(rows, on=KEY_HASH, how="left", maintain_order="left").drop(KEY_HASH)


def sample_inputs(
    handle: Session,
    requests: Sequence[SampleRequest],
    seed: int,
    workers: int,
    *,
    min_skew: float,
    min_rows: int,
    full_width: bool = False,
) -> tuple[list[InputSample], int, int]:
    """Each request's sample, in one scan of its input, every input at once (one Spark job
    each, side by side): the statistics a query's plan is decided from; with the inputs
    sampled, and of those the ones kept from an earlier call. Requests that sample the same
    rows of one input (two operators on one input's keys) share one scan. A sample kept from
    an earlier call over the same plan and files is reused (the module's notes).

    Keys first: a request that reads columns beside its key (a window's ordering, a
    percentile's values) has its input sampled for the key alone, its columns null, and read
    again with them only where the cost guard may split a key (it holds ``min_skew`` mean
    tasks' rows of ``workers`` and ``min_rows`` rows, as ``optimize`` decides): only such a
    key's columns are ever read (its cuts, its grid), and most inputs have none.
    A scan of the key alone decodes less (10^7 trades and 2x10^6 quotes keyed by series,
    ordered by time: 0.74-0.81 s against 0.98-1.17 s on local[2], warm); where a key is hot,
    the input is scanned twice.

    A scan runs in few tasks (:func:`_scan_tasks`), except the second one: that query is
    about to be split and run at its full width, where one task scanning for the statistics
    would stand alone (at 4x10^6 rows on 32 slots, computed: 0.51 s of a window's 3.7 s);
    ``full_width``: every scan at the input's own splits (inputs sampled once their query is
    known to be split)."""

    def scanned(
        frame: DataFrame,
        fraction: float,
        presampled: bool,
        tasks: int | None,
        where: Column | None = None,
        placed: bool = False,
    ) -> tuple[pa.Table, int | None, CountedPlaces | None]:
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        counting: Any = Observation() if where is not None and not presampled else None
        read = frame
        if counting is not None:
            assert where is not None
            measures = [F.count_if(where).alias("counted")]
            if placed:
                # A column first: Spark refuses a nondeterministic expression in an observation.
                frame = frame.withColumn(_POSITION, F.monotonically_increasing_id())
                measures += _placing_measures(column(_POSITION))
            frame = frame.observe(counting, *measures)
            if placed:
                frame = frame.drop(_POSITION)
        if fraction < 1 and not presampled:
            frame = frame.sample(fraction=fraction, seed=seed)
        if tasks is not None:
            # Each task then reads several of the input's splits: the same rows, sampled by
            # their own split's seed, fewer fixed costs.
            frame = frame.coalesce(tasks)
        table = _arrow(frame)
        if counting is None:
            return table, None, None
        observed = counting.get
        count = int(observed["counted"])
        if not placed:
            return table, count, None
        assert where is not None
        return table, count, _counted_places(observed, lambda: _listed_positions(read, where, count))

    def sampled(request: SampleRequest) -> InputSample:
        frame = request.frame if request.where is None else request.frame.filter(request.where)
        whole = frame.select(request.key_hash.alias(KEY_HASH), *request.columns)
        counted = request.counted_where
        what = None if counted is None else (_expression_bytes(counted, frame.sparkSession.client), request.placed)
        settings = (request.fraction, request.presampled, seed, SAMPLE_ROWS, MIN_FRACTION, what)
        key = _kept_key(handle, whole, request.files_of or request.statistics_of or request.frame, settings)
        kept = _KEPT.get(key) if key is not None else None
        if kept is not None and (
            kept.whole or not InputSample(kept.fraction, kept.table).may_split(workers, min_skew, min_rows)
        ):
            return InputSample(
                kept.fraction, kept.table, request.keys, reused=True, counted=kept.counted, placed=kept.placed
            )
        plan = handle.explained(request.statistics_of or request.frame, "cost")
        if kept is not None:
            fraction = kept.fraction
        elif request.fraction is not None:
            fraction = request.fraction
        else:
            fraction = sample_fraction(_estimated(plan))
        tasks = None if full_width else _scan_tasks(plan, workers, handle.task_slots)
        keys_alone = None if kept is not None or counted is not None else _keys_alone(request, frame)
        if keys_alone is not None:
            table, _, _ = scanned(keys_alone, fraction, request.presampled, tasks)
            alone = InputSample(fraction, table, request.keys)
            if not alone.may_split(workers, min_skew, min_rows):
                if key is not None:
                    _KEPT.put(key, _Sample(fraction, alone.table, whole=False))
                return alone
            tasks = None
        # Places read in other partitions than the plan's would be wrong: only where the plan
        # shuffles nothing (an exchange's output is coalesced by the sizes of what it moves,
        # which the scan's pruned columns change).
        placed = request.placed and not _shuffles(plan)
        table, count, places = scanned(whole, fraction, request.presampled, tasks, request.counted_where, placed)
        if key is not None:
            _KEPT.put(key, _Sample(fraction, table, whole=True, counted=count, placed=places))
        return InputSample(fraction, table, request.keys, counted=count, placed=places)

    merged, positions = _shared_scans(requests)

    def gather() -> list[InputSample]:
        if len(merged) == 1:
            return [sampled(merged[0])]
        with ThreadPoolExecutor(max_workers=min(8, len(merged))) as pool:
            return list(pool.map(sampled, merged))

    scans = handle.call("sampling the keyed inputs", gather) if requests else []
    samples = [
        InputSample(
            scans[scan].fraction,
            scans[scan].table.select([0, *columns]),
            request.keys,
            scans[scan].reused,
            scans[scan].counted,
            scans[scan].placed,
        )
        for request, (scan, columns) in zip(requests, positions, strict=True)
    ]
    return samples, len(scans), sum(scan.reused for scan in scans)


def _placing_measures(position: Column) -> list[Column]:
    """What an observation gathers, besides the count, for :class:`CountedPlaces`: each of
    the first :data:`COUNTED_PARTITIONS` input partitions' rows, and the last partition's
    index (the rows counted are listed apart: :func:`_listed_positions`).

    The rows per partition are a ``histogram_numeric`` of the partition's index with as many
    bins as partitions counted: its bins merge only where more than that many are held (Ben-Haim
    and Tom-Tov's rule, as Spark's ``NumericHistogram`` has it), the closest first, so a bin
    never merges two indices and its height is the exact count. The one aggregate an
    observation has that counts per value; :func:`_counted_places` checks the bins, and the
    plan recounts them (:func:`keysplit.spark.sorter_places.check_sums`)."""
    from pyspark.sql import functions as F

    partition = F.shiftright(position, PLACE_BITS)
    counted = F.when(partition < COUNTED_PARTITIONS, partition.cast("double"))
    return [
        F.histogram_numeric(counted, F.lit(COUNTED_PARTITIONS)).alias("partitions"),
        F.max(partition).alias("last_partition"),
    ]


def _listed_positions(frame: DataFrame, where: Column, count: int) -> np.ndarray | None:
    """The positions in ``frame``'s input partitions of its ``count`` rows that meet ``where``
    (as the observation counted them), ascending; None where they are more than
    :data:`LISTED_NULLS`, or not ``count`` (the input changed between the two reads).

    A job of its own, after the count: listed in the observation (a ``collect_list``) they
    were gathered whole on the driver before any limit could drop them (8 bytes a row, 4 GB
    for 5x10^8 nulls); here the count bounds the list before it is read. Its one stage reads
    the order column alone (column pruning), in the input's partitions (no exchange, as the
    observed plan's)."""
    from pyspark.sql import functions as F

    if count > LISTED_NULLS:
        return None
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    listed = frame.withColumn(_POSITION, F.monotonically_increasing_id()).filter(where).select(_POSITION)
    positions = _arrow(listed).column(_POSITION).to_numpy()
    if len(positions) != count:
        return None
    return np.sort(positions.astype(np.int64))


def _counted_places(observed: dict[str, Any], listed: Callable[[], np.ndarray | None]) -> CountedPlaces | None:
    """The observation's :func:`_placing_measures` and the rows' positions (``listed``, a job
    run only once the bins are found whole) as :class:`CountedPlaces`; None where a bin is not
    one partition's (an index not whole), or the rows were not listed."""
    rows: dict[int, int] = {}
    for bin_ in observed["partitions"] or []:
        index, height = round(bin_["x"]), round(bin_["y"])
        if abs(bin_["x"] - index) > 1e-6 or abs(bin_["y"] - height) > 1e-6:
            return None
        rows[index] = rows.get(index, 0) + height
    positions = listed()
    if positions is None:
        return None
    last = observed["last_partition"]
    return CountedPlaces(rows, -1 if last is None else int(last), positions)


def _arrow(frame: DataFrame) -> pa.Table:
    """``frame.toArrow()``, typed by the schema its results carry: no analysis call before the
    job (``toArrow`` asks for the schema first, a round trip of 10-20 ms)."""
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
    from pyspark.sql.pandas.types import to_arrow_schema

    if not isinstance(frame, ConnectFrame):
        return frame.toArrow()
    table, schema = frame._to_table()
    if schema is None:
        schema = frame.schema
    return table.cast(to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC"))


def _keys_alone(request: SampleRequest, frame: DataFrame) -> DataFrame | None:
    """``frame``'s key hash with ``request``'s columns as nulls of their types (Spark folds
    ``when(false, c)`` to a typed null and reads none of ``c``'s inputs): a sample of it has
    the whole sample's schema. None where the columns are the key's alone (a join's: the
    hash reads them anyway), or their names cannot be read here, or the frame is a sample
    already (its join would run twice), or it has no key (a window with no ``partitionBy``:
    its one key, every row, is hot wherever measured)."""
    from pyspark.sql import functions as F
    from pyspark.sql.connect.column import Column as ConnectColumn

    from keysplit.spark.expressions import output_name, unaliased

    names = [output_name(c) for c in request.columns]
    if not request.keys or request.presampled or None in names or set(names) <= set(request.keys):
        return None
    nulls = [
        F.when(F.lit(False), ConnectColumn(unaliased(c._expr))).alias(str(name))
        for c, name in zip(request.columns, names, strict=True)
    ]
    return frame.select(request.key_hash.alias(KEY_HASH), *nulls)


def _shared_scans(requests: Sequence[SampleRequest]) -> tuple[list[SampleRequest], list[tuple[int, list[int]]]]:
    """The scans that sample ``requests``: those of the same rows of one input (the same plan,
    or the same plan with columns added by ``select("*", ...)``; the same filter, key hash
    and fraction) merged into one reading every column any of them reads; and per request
    its scan and the positions of its columns in that scan's (after the key hash). A request
    whose columns' names cannot be read here, or clash with another's, has a scan of its own."""
    from keysplit.spark.expressions import output_name

    scans: list[SampleRequest] = []
    held: list[dict[str | tuple[int], bytes]] = []  # per scan, its columns' names and expressions
    added: list[set[bytes]] = []  # per scan, the columns its frame adds to the rows' plan
    by_rows: dict[bytes, int] = {}
    positions: list[tuple[int, list[int]]] = []
    for request in requests:
        client = request.frame.sparkSession.client
        mine = [_expression_bytes(c, client) for c in request.columns]
        labels = [output_name(c) for c in request.columns]
        base, extras = _projected(request.frame)
        rows = b"\0".join(
            [
                base,
                b"" if request.where is None else _expression_bytes(request.where, client),
                _expression_bytes(request.key_hash, client),
                repr((request.fraction, request.presampled)).encode(),
            ]
        )
        alone = None in labels or request.counted_where is not None
        scan = by_rows.get(rows) if not alone else None
        if scan is not None and (
            any(label in held[scan] and held[scan][label] != e for label, e in zip(labels, mine, strict=True))
            or not (extras <= added[scan] or added[scan] <= extras)
        ):
            scan = None
        if scan is None:
            scan = len(scans)
            scans.append(replace(request, columns=()))
            held.append({})
            added.append(extras)
            if not alone:
                by_rows.setdefault(rows, scan)
        elif not extras <= added[scan]:
            # This frame adds more columns to the same rows: the scan reads it instead.
            scans[scan] = replace(scans[scan], frame=request.frame)
            added[scan] = extras
        columns = []
        for label, expression, given in zip(labels, mine, request.columns, strict=True):
            # A column whose name is unknown here (its request has a scan of its own) by place.
            key: str | tuple[int] = label if label is not None else (len(held[scan]),)
            if key not in held[scan]:
                held[scan][key] = expression
                scans[scan] = replace(scans[scan], columns=(*scans[scan].columns, given))
            columns.append(1 + list(held[scan]).index(key))
        positions.append((scan, columns))
    return scans, positions


def _projected(frame: DataFrame) -> tuple[bytes, set[bytes]]:
    """The plan of ``frame``'s rows, and the columns it adds to them: a ``select("*", ...)``'s
    input and its other expressions where each is one of keysplit's own columns (a verb's
    prepared input: no name of the input's); else its whole plan, and none."""
    plan, _ = _cleared_root(frame)
    if plan.WhichOneof("rel_type") == "project" and plan.project.expressions:
        first, *others = plan.project.expressions
        ours = all(
            e.WhichOneof("expr_type") == "alias" and [n[: len(PREFIX)] for n in e.alias.name] == [PREFIX]
            for e in others
        )
        if first.WhichOneof("expr_type") == "unresolved_star" and not first.unresolved_star.unparsed_target and ours:
            return plan.project.input.SerializeToString(deterministic=True), {
                e.SerializeToString(deterministic=True) for e in others
            }
    return plan.SerializeToString(deterministic=True), set()


def _cleared_root(frame: DataFrame) -> tuple[Any, set[str]]:
    """``frame``'s plan (its root relation) with its ids and call sites cleared, so that equal
    plans serialize to equal bytes, and the kinds of plan node it holds."""
    node: Any = frame._plan
    root = node.to_proto(frame.sparkSession.client).root
    return root, _cleared(root)


def _expression_bytes(given: Column, client: Any) -> bytes:
    node: Any = given._expr
    expression = node.to_plan(client)
    _cleared(expression)
    return expression.SerializeToString(deterministic=True)


def forget_statistics() -> None:
    """Drops every sample kept for reuse (the module's notes): the next call samples anew."""
    _KEPT.clear()


@dataclass(frozen=True)
class _Sample:
    """A kept sample: its fraction, its table, and whether its columns were read (not only
    its keys: :func:`sample_inputs`)."""

    fraction: float
    table: pa.Table
    whole: bool
    counted: int | None = None
    placed: CountedPlaces | None = None


class _Kept:
    """Samples by key, least recently used dropped first past :data:`KEPT_BYTES`; shared by
    the threads that sample a query's inputs side by side."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.samples: OrderedDict[str, _Sample] = OrderedDict()

    def get(self, key: str) -> _Sample | None:
        with self.lock:
            found = self.samples.get(key)
            if found is not None:
                self.samples.move_to_end(key)
            return found

    def put(self, key: str, sample: _Sample) -> None:
        with self.lock:
            self.samples[key] = sample
            while sum(kept.table.nbytes for kept in self.samples.values()) > KEPT_BYTES and len(self.samples) > 1:
                self.samples.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.samples.clear()


_KEPT = _Kept()


def _kept_key(handle: Session, frame: DataFrame, reading: DataFrame, settings: tuple[Any, ...]) -> str | None:
    """What a sample of ``frame`` is kept under: a digest of its plan (ids and call sites
    cleared), ``settings`` and its input files (those of ``reading``, which reads them);
    None when an input could change unseen."""
    from pyspark.errors import PySparkException

    plan, sources = _cleared_root(frame)
    try:
        files = handle.input_files(reading)
    except PySparkException:
        return None  # an input Spark cannot list is sampled anew
    if not files and sources & _CHANGING_SOURCES:
        return None
    digest = hashlib.sha256(plan.SerializeToString(deterministic=True))
    digest.update(repr(settings).encode())
    for name in files:
        digest.update(name.encode() + b"\0" + repr(_file_version(name)).encode() + b"\0")
    return digest.hexdigest()


def _cleared(message: Any) -> set[str]:
    """Clears every ``common`` field (a plan node's id, an expression's call site) of the
    protobuf ``message`` in place; returns the kinds of plan node it holds."""
    kinds: set[str] = set()
    if message.DESCRIPTOR.name == "Relation":
        kind = message.WhichOneof("rel_type")
        if kind is not None:
            kinds.add(kind)
    for descriptor, value in message.ListFields():
        if descriptor.name == "common":
            message.ClearField("common")
        elif descriptor.message_type is None:
            continue
        elif _repeated(descriptor):
            if descriptor.message_type.GetOptions().map_entry:
                values = list(value.values()) if descriptor.message_type.fields_by_name["value"].message_type else []
            else:
                values = list(value)
            for item in values:
                kinds |= _cleared(item)
        else:
            kinds |= _cleared(value)
    return kinds


def _repeated(descriptor: Any) -> bool:
    # ``is_repeated`` is protobuf 6's; ``label``, which it replaces, older releases'.
    found = getattr(descriptor, "is_repeated", None)
    return bool(found) if found is not None else descriptor.label == descriptor.LABEL_REPEATED


def _file_version(name: str) -> tuple[int, int] | None:
    """A file's size and modification time, where the client can read them (a local path)."""
    parsed = urlparse(name)
    if parsed.scheme not in ("", "file"):
        return None
    try:
        found = os.stat(unquote(parsed.path))
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns


def cut_rows(count: int, candidates: int) -> list[int]:
    """The 0-based positions, among a key's ``count`` sampled rows in order, of its
    ``candidates - 1`` candidate cuts: candidate ``j`` is the row at rank ``⌈j·m/C⌉``
    (:func:`keysplit.spark.sampled.candidate_cuts`'s rule); none when ``count`` is 0."""
    if count <= 0:
        return []
    return [-(-j * count // candidates) - 1 for j in range(1, candidates)]
