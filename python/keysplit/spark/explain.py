"""``explain_skew``: which keyed operator of a DataFrame will straggle, whether Spark's
adaptive execution will split it, and if not, which of its rules stops it.

It reads the plan (:mod:`.keyed_plan`), never runs the query, and measures the inputs of
every keyed operator in **one Spark job**: each input's key columns, hashed as Spark's
exchange hashes them (``pmod(murmur3(keys), partitions)``), counted per (map task,
reduce partition): the shuffle's blocks, in rows, exactly; and per key, from a Bernoulli
sample of about ``sample_rows`` rows of each input (every row of a smaller one), with a 95 %
bound on each share. An input that reads another keyed operator through an exchange is
not measured (that would run the operator); an operator reading one on its own keys
without an exchange runs in that operator's tasks, and inherits its hottest task.

The verdicts replay Spark's rules (``OptimizeSkewedJoin`` and ``ShufflePartitionsUtil``,
quoted in ``docs/spark.md``) on the measured blocks, with the session's settings:

- a join is split only on a side its type allows (left: inner, cross, left outer, semi,
  anti; right: inner, cross, right outer), only for a partition over
  ``max(threshold, factor × median)`` bytes, only between two shuffles, never when the
  split would add a shuffle under an operator above on the same key (unless
  ``forceOptimizeSkewedJoin``), and only at map-output blocks;
- a broadcast join (planned, or converted at run time under the broadcast threshold)
  moves no key: nothing to split;
- a key hot on both sides outputs ``L·R`` rows in one task whatever the bytes say;
- aggregates, windows, grouped maps and stateful streaming operators are never split;
  combinable aggregates need not be (partial aggregation sends one row per key and map
  task), nor a holistic aggregate whose hot key holds few values.

Bytes are the skew rule's: compressed shuffle bytes, each reduce partition's rows times its
bytes per row, estimated from the input's first rows laid out and LZ4-compressed as
Spark's shuffle writes them (:mod:`.shuffle_bytes`; a hot key's partition, whose rows repeat
their key, costs fewer). The broadcast rule reads uncompressed bytes (``UnsafeRow`` widths
from the schema). The shuffle's columns are the input's: a column the query above prunes is
counted. The predicted share of the hottest task is of the rows the operator's stage reads
(for a holistic aggregate: of the values its buffers hold); above a forced split, of the
join's output rows, which the exchange Spark adds sends to the operator by key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from keysplit._checks import require_count, require_seed
from keysplit._errors import KeysplitError
from keysplit.spark.holistic import REPEATS, SPLIT_FUNCTIONS
from keysplit.spark.intake import RUN_SETTINGS, run_settings, session_for, shuffle_partitions
from keysplit.spark.join import broadcast_side, join_key_type
from keysplit.spark.keyed_plan import KeyedOperator, Kind, keyed_operators
from keysplit.spark.shuffle_bytes import partition_widths
from keysplit.spark.statistics import estimated_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from keysplit.spark.session import Session

#: The first rows of each join input, laid out and compressed as Spark's shuffle writes them for
#: its bytes per row: enough to fill a few LZ4 blocks per partition at 32 partitions.
SHUFFLE_SAMPLE_ROWS = 50_000
#: The rows of each input whose keys are counted: every row of an input this small, else a
#: sample of about this many (Spark's plan statistics size the input, without a job). A
#: key of a mean task's share at 32 tasks is then seen about 7,800 times: ±2.2 % (95 %).
SAMPLE_ROWS = 250_000
#: Keys per input brought back: the hottest.
TOP_KEYS = 32
#: The measuring job's shuffle partitions (it shuffles counts, not rows).
_OWN_PARTITIONS = 4
#: The sketch size of the distinct-value estimate of a holistic aggregate's hot keys.
_LG_K = 8
_COMBINABLE = frozenset(
    "sum count avg mean min max first last any_value count_if bool_and bool_or every some any stddev "
    "stddev_samp stddev_pop variance var_samp var_pop corr covar_samp covar_pop approx_count_distinct "
    "percentile_approx approx_percentile hll_sketch_agg sum_distinct count_distinct max_by min_by bit_and "
    "bit_or bit_xor kurtosis skewness regr_count".split()
)
#: A holistic buffer's bytes in the shuffle, per value and per key and map task: Spark's
#: ``Percentile`` and ``Mode`` serialise their value -> count map as one 2-field
#: ``UnsafeRow`` (24 bytes) and its length (4) per value, in a row of the key and the buffer.
VALUE_BYTES = 28
GROUP_BYTES = 32
_UNSPLITTABLE = frozenset(("collect_list", "array_agg", "listagg", "string_agg"))
_SETTINGS: dict[str, tuple[str, str | None]] = {
    "adaptive": ("spark.sql.adaptive.enabled", "true"),
    "skew": ("spark.sql.adaptive.skewJoin.enabled", "true"),
    "factor": ("spark.sql.adaptive.skewJoin.skewedPartitionFactor", "5.0"),
    "threshold": ("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "256MB"),
    "advisory": ("spark.sql.adaptive.advisoryPartitionSizeInBytes", "64MB"),
    "force": ("spark.sql.adaptive.forceOptimizeSkewedJoin", "false"),
    "broadcast": ("spark.sql.autoBroadcastJoinThreshold", "10MB"),
    "adaptive_broadcast": ("spark.sql.adaptive.autoBroadcastJoinThreshold", None),
}
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}
_UNITS.update({"t": 1 << 40, "tb": 1 << 40})
_SPLITTABLE = {"left": ("inner", "cross", "left_semi", "left_anti", "left"), "right": ("inner", "cross", "right")}
_BUILDABLE = {
    "inner": ("left", "right"),
    "left": ("right",),
    "left_semi": ("right",),
    "left_anti": ("right",),
    "right": ("left",),
    "full": (),
}


def _bytes(text: str) -> int:
    match = re.fullmatch(r"\s*(-?\d+)\s*([a-zA-Z]*)\s*", text)
    if match is None or match.group(2).lower() not in _UNITS:
        return -1
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _megabytes(size: float) -> str:
    return f"{size / (1 << 20):,.1f} MB"


@dataclass(frozen=True)
class _Settings:
    partitions: int
    adaptive: bool
    skew: bool
    factor: float
    threshold: int
    advisory: int
    force: bool
    broadcast: int

    @staticmethod
    def read(handle: Session) -> _Settings:
        conf = handle.spark.conf
        # One call: the settings made (defaults are not listed), then Spark's defaults.
        made = handle.call("reading settings", lambda: dict(conf.getAll))
        values = {k: made.get(name) or default for k, (name, default) in _SETTINGS.items()}
        broadcast = values["adaptive_broadcast"] or values["broadcast"]
        return _Settings(
            partitions=shuffle_partitions(handle),
            adaptive=str(values["adaptive"]).lower() == "true",
            skew=str(values["skew"]).lower() == "true",
            factor=float(str(values["factor"])),
            threshold=_bytes(str(values["threshold"])),
            advisory=_bytes(str(values["advisory"])),
            force=str(values["force"]).lower() == "true",
            broadcast=_bytes(str(broadcast)),
        )


@dataclass
class _Input:
    """One measured input of an operator: its shuffle's blocks and its hottest keys."""

    rows: int
    #: An uncompressed ``UnsafeRow``'s bytes: what adaptive execution's broadcast rule reads.
    width: int
    #: Compressed shuffle bytes per row of each reduce partition (:mod:`.shuffle_bytes`):
    #: what its skew rule reads.
    shuffle_widths: np.ndarray
    #: rows per (map task, reduce partition), exactly.
    blocks: np.ndarray
    #: distinct keys per (map task, reduce partition), estimated from the sample.
    block_keys: np.ndarray
    fraction: float
    sampled: int
    #: (key text, sampled rows, reduce partition, distinct values or None), hottest first.
    keys: list[tuple[str | None, int, int, float | None]]

    def groups(self) -> np.ndarray:
        """Distinct keys per block: counted when every row was, else the ``D`` whose
        expected sampled distinct keys, ``D·(1 - (1 - f)^(n/D))`` for ``n`` rows and a
        sample fraction ``f``, are the ones seen (keys taken as equally frequent)."""
        if self.fraction >= 1:
            return self.block_keys.copy()
        seen, rows = self.block_keys, self.blocks
        low, high = seen.copy(), np.maximum(rows, seen)
        for _ in range(60):
            middle = (low + high) / 2
            expected = middle * (1 - np.power(1 - self.fraction, rows / np.maximum(middle, 1e-9)))
            low = np.where(expected < seen, middle, low)
            high = np.where(expected < seen, high, middle)
        return (low + high) / 2

    @property
    def sizes(self) -> np.ndarray:
        """Each reduce partition's compressed shuffle bytes."""
        return self.blocks.sum(axis=0) * self.shuffle_widths

    @property
    def data_size(self) -> float:
        """The shuffle's uncompressed bytes (its ``dataSize`` metric)."""
        return float(self.blocks.sum()) * self.width

    def share(self, sampled: int) -> tuple[float, float, float]:
        """A key's share of the rows, with its 95 % bounds (exact when every row was counted)."""
        total = max(self.sampled, 1)
        share = sampled / total
        if self.fraction >= 1:
            return share, share, share
        half = 1.96 * math.sqrt(max(share * (1 - share), 1e-12) / total)
        return share, max(0.0, share - half), min(1.0, share + half)

    def hot(self, partitions: int) -> list[tuple[str | None, int, int, float | None]]:
        """The front's rule (:func:`keysplit.spark.sampled.hot_in_sample`): more than a mean
        task's share of the rows at the count's upper bound."""
        return [k for k in self.keys if (k[1] + 2 * math.sqrt(k[1]) + 3) * partitions > self.sampled and k[1] > 0]


@dataclass(frozen=True)
class _Verdict:
    splits: bool
    rule: str
    why: str
    share: float | None
    fix: str | None
    #: A forced split's join: the hottest task's share of its output read by key (what the
    #: exchange the split adds under the operator above sends it), with its rows.
    output_by_key: tuple[float, float] | None = None


def explain_skew(
    frame: DataFrame,
    *,
    sample_rows: int = SAMPLE_ROWS,
    seed: int = 0,
    session: Session | SparkSession | None = None,
) -> pl.DataFrame:
    """Every keyed operator of ``frame``'s plan, with its hot keys and whether Spark's
    adaptive execution will split it, as a Polars DataFrame (the query is not run).

    One row per operator, inputs first:

    - ``operator``: what it is (``join('k', 'left')``, ``groupBy(k).agg(median(v))``, a
      window, a grouped map, a stateful streaming operator, ``repartition(col)``, a global
      sort); ``keys``: its key columns;
    - ``hot_keys``: a list of structs (``input``, ``key``, ``share``, ``share_low``,
      ``share_high``): each input's keys holding more than a mean task's share of its rows,
      with 95 % bounds (exact, equal bounds, when every row was counted);
    - ``spark_splits``: whether adaptive execution splits its hot partition; ``rule``:
      what decides it (``join type``, ``threshold``, ``extra shuffle``, ``not two
      shuffles``, ``map blocks``, ``output skew``, ``broadcast``, ``not a join``,
      ``combinable``, ``few values``, ``stateful stream``, ``no hot key``, ``not measured``,
      ``not read``, ``no partitionBy``, ``no shuffle of its own``, ``adaptive execution
      off``, ``splits``, ``forced split``, ``one task a value`` (``repartition(col)``),
      ``heavy ties`` (a global sort); ``docs/spark.md`` has the table); ``why``: the
      rule with the figures;
    - ``hottest_task_share``: the predicted share of the rows its stage reads (a holistic
      aggregate: of the bytes its buffers hold) that the hottest task reads, after Spark's
      own splitting; null when not measured;
    - ``fix``: the keysplit call that splits it, or null when none is needed or none helps.

    The shuffle's blocks (rows per map task and reduce partition) are counted from every
    row; the keys from a sample of about ``sample_rows`` rows per input. ``seed`` fixes the
    sample. ``skewed(df).explain_skew()`` prints the same as a table.
    """
    sample_rows = require_count(sample_rows, "sample_rows", minimum=1)
    seed = require_seed(seed)
    handle = session_for(frame, session)
    operators = handle.call("reading the plan", lambda: keyed_operators(frame))
    settings = _Settings.read(handle)
    streaming = bool(operators) and handle.call("reading the plan", lambda: frame.isStreaming)
    broadcasts = {} if streaming else _planned_broadcasts(handle, operators)
    measured = _measure(handle, operators, settings, seed, streaming, sample_rows)
    rows: list[dict[str, Any]] = []
    verdicts: dict[int, _Verdict] = {}
    for index, operator in enumerate(operators):
        inputs = measured.get(index, [])
        verdict = _judge(handle, operator, inputs, settings, streaming, verdicts, operators, broadcasts)
        verdicts[index] = verdict
        hot = []
        for side, measured_input in zip(operator.sides, inputs, strict=False):
            if measured_input is None:
                continue
            for key, sampled, _, _ in measured_input.hot(settings.partitions):
                share, low, high = measured_input.share(sampled)
                hot.append({"input": side, "key": key, "share": share, "share_low": low, "share_high": high})
        rows.append(
            {
                "operator": operator.label,
                "keys": [name for names in operator.names[:1] for name in names],
                "hot_keys": hot,
                "spark_splits": verdict.splits,
                "rule": verdict.rule,
                "why": verdict.why,
                "hottest_task_share": verdict.share,
                "fix": verdict.fix,
            }
        )
    hot_type = pl.List(
        pl.Struct(
            {
                "input": pl.String,
                "key": pl.String,
                "share": pl.Float64,
                "share_low": pl.Float64,
                "share_high": pl.Float64,
            }
        )
    )
    return pl.DataFrame(
        rows,
        schema={
            "operator": pl.String,
            "keys": pl.List(pl.String),
            "hot_keys": hot_type,
            "spark_splits": pl.Boolean,
            "rule": pl.String,
            "why": pl.String,
            "hottest_task_share": pl.Float64,
            "fix": pl.String,
        },
    )


def skew_table(explained: pl.DataFrame) -> str:
    """:func:`explain_skew`'s frame as text for a terminal: one block per operator."""
    if explained.height == 0:
        return "no keyed operator (join, aggregate, window, grouped map): nothing moves rows by key"
    blocks = []
    for number, row in enumerate(explained.iter_rows(named=True), 1):
        verdict = "Spark splits it" if row["spark_splits"] else "Spark will not split it"
        lines = [f"{number}. {row['operator']}", f"   {verdict} ({row['rule']})"]
        for hot in row["hot_keys"][:5]:
            bound = (
                "" if hot["share_low"] == hot["share_high"] else f" ({hot['share_low']:.1%}-{hot['share_high']:.1%})"
            )
            lines.append(f"   hot key {hot['key']} on the {hot['input']}: {hot['share']:.1%} of its rows{bound}")
        if len(row["hot_keys"]) > 5:
            lines.append(f"   ... and {len(row['hot_keys']) - 5} more hot keys")
        if row["hottest_task_share"] is not None:
            lines.append(f"   hottest task (predicted): {row['hottest_task_share']:.1%} of the stage's rows")
        lines.append(f"   why: {row['why']}")
        if row["fix"]:
            lines.append(f"   fix: {row['fix']}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------------------------
# Measuring: one job over every measurable input.


def _width(schema: Any) -> int:
    """An ``UnsafeRow``'s bytes for ``schema``: a null bitset, 8 bytes a field, and the
    variable-length ones' data at Spark's default sizes."""
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

    fields = schema.fields
    width = 8 * ((len(fields) + 63) // 64) + 8 * len(fields)
    for f in fields:
        kind = f.dataType
        if isinstance(kind, (StringType, BinaryType)):
            width += 24
        elif isinstance(kind, StructType):
            width += _width(kind)
        elif isinstance(kind, (ArrayType, MapType)):
            width += 100
    return width + 4


def _shuffle_widths(handle: Session, frame: DataFrame, keys: list[Column], partitions: int, width: int) -> np.ndarray:
    """Compressed shuffle bytes per row of each reduce partition, from the first
    :data:`SHUFFLE_SAMPLE_ROWS` rows of ``frame`` (a limit: Spark reads the first split and
    stops) laid out and compressed as Spark's shuffle writes them."""
    from pyspark.sql import functions as F

    head = frame.select(F.pmod(F.hash(*keys), F.lit(partitions)).alias("reduce"), "*").limit(SHUFFLE_SAMPLE_ROWS)
    table = handle.call("sampling rows for their shuffle bytes", head.toArrow)
    reduce = table.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return partition_widths(table.remove_column(0), reduce, partitions, float(width))


def _schema(handle: Session, frame: DataFrame) -> Any:
    return handle.call("reading the schema", lambda: frame.schema)


def _value(operator: KeyedOperator) -> Column | None:
    if operator.kind is not Kind.AGGREGATE:
        return None
    for name, argument in operator.functions:
        if name not in _COMBINABLE and argument is not None:
            return argument
    return None


def _measure(
    handle: Session, operators: list[KeyedOperator], settings: _Settings, seed: int, streaming: bool, sample_rows: int
) -> dict[int, list[_Input | None]]:
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    jobs: list[tuple[int, int, DataFrame, float, int, list[Column]]] = []
    parts = []
    holistic = False
    if streaming:
        return {}
    for index, operator in enumerate(operators):
        compared = _compared_types(handle, operator) if operator.kind is Kind.JOIN and operator.names[0] else None
        for side, frame in enumerate(operator.inputs):
            if operator.fed_by[side] is not None or operator.behind_shuffle[side] is not None:
                continue
            keys = list(operator.keys[side])
            if not keys:
                continue
            if (
                operator.kind is Kind.JOIN
                and operator.how in ("inner", "left_semi")
                or (
                    operator.kind is Kind.JOIN and (operator.how, side) in (("left", 1), ("right", 0), ("left_anti", 1))
                )
            ):
                # Spark infers `key IS NOT NULL` for a side whose null keys match nothing
                # and are not kept: they never reach the exchange.
                frame = frame.where(reduce(lambda a, b: a & b, [k.isNotNull() for k in keys]))
            if compared is not None:
                keys = [key.cast(kind) for key, kind in zip(keys, compared, strict=True)]
            estimated = estimated_rows(handle, frame)
            fraction = 1.0 if estimated is None or estimated <= sample_rows else sample_rows / estimated
            width = _width(_schema(handle, frame))
            picked = F.lit(True) if fraction >= 1 else F.rand(seed & ((1 << 63) - 1)) < F.lit(fraction)
            text = keys[0].cast("string") if len(keys) == 1 else F.to_json(F.struct(*keys))
            value = _value(operator)
            number = len(jobs)
            jobs.append((index, side, frame, fraction, width, keys))
            drawn = frame.select(
                F.lit(number).alias("input"),
                F.spark_partition_id().alias("map"),
                F.pmod(F.hash(*keys), F.lit(settings.partitions)).alias("reduce"),
                picked.alias("picked"),
                text.alias("key"),
                (value if value is not None else F.lit(None)).cast("string").alias("value"),
            )
            holistic = holistic or value is not None
            parts.append(
                drawn.select(
                    "input",
                    "map",
                    "reduce",
                    "picked",
                    F.when(F.col("picked"), F.col("key")).alias("key"),
                    F.when(F.col("picked"), F.col("value")).alias("value"),
                )
            )
    if not parts:
        return {}
    counts = (
        reduce(lambda a, b: a.unionByName(b), parts)
        .groupBy("input", "map", "reduce", "picked", "key")
        .agg(
            F.count(F.lit(1)).alias("n"),
            # The grouping sets below null the columns a set leaves out: a copy.
            F.first("reduce").alias("reduce_of_key"),
            F.hll_sketch_agg("value", _LG_K).alias("sketch")
            if holistic
            else F.lit(None).cast("binary").alias("sketch"),
        )
    )
    # Blocks and keys from one aggregation of the counts (grouping sets), so that the input
    # is read once: a second reader of the counts would read it again.
    grouped = counts.groupingSets(
        [["input", "map", "reduce"], ["input", "picked", "key"]], "input", "map", "reduce", "picked", "key"
    ).agg(
        F.sum("n").alias("rows"),
        F.sum(F.when(F.col("picked"), F.col("n"))).alias("sampled"),
        F.count_if(F.col("picked") & F.col("key").isNotNull()).alias("keys"),
        F.first("reduce_of_key").alias("reduce_of_key"),
        F.hll_sketch_estimate(F.hll_union_agg("sketch", True)).alias("distinct"),
    )
    by_rows = Window.partitionBy("input", F.col("map").isNull()).orderBy(F.desc("rows"), F.asc("key"))
    rows = grouped.withColumn("rank", F.row_number().over(by_rows)).where(
        F.col("map").isNotNull() | (F.col("picked") & (F.col("rank") <= TOP_KEYS))
    )
    # The measuring job's own shuffles are small: a few tasks, not the query's partitions.
    # (and a holistic input's sketches stay in a hash map, not sorted: RUN_SETTINGS).
    with run_settings(handle, {**RUN_SETTINGS, "spark.sql.shuffle.partitions": str(_OWN_PARTITIONS)}):
        fetched = pl.from_arrow(handle.call("measuring the keyed operators' inputs", rows.toArrow))
    assert isinstance(fetched, pl.DataFrame)
    measured: dict[int, list[_Input | None]] = {
        index: [None] * len(operator.inputs) for index, operator in enumerate(operators)
    }
    for number, (index, side, frame, fraction, width, keys) in enumerate(jobs):
        mine = fetched.filter(pl.col("input") == number)
        block_rows = mine.filter(pl.col("map").is_not_null())
        maps = int(block_rows.select(pl.col("map").max()).item() or 0) + 1
        grid = np.zeros((maps, settings.partitions), dtype=np.float64)
        keys_grid = np.zeros((maps, settings.partitions), dtype=np.float64)
        for m, r, n, k in block_rows.select("map", "reduce", "rows", "keys").iter_rows():
            grid[m, r] += n
            keys_grid[m, r] += k
        top = mine.filter(pl.col("map").is_null()).sort(["rows", "key"], descending=[True, False])
        measured[index][side] = _Input(
            rows=int(grid.sum()),
            width=width,
            # Only a join's verdict reads its inputs' bytes.
            shuffle_widths=_shuffle_widths(handle, frame, keys, settings.partitions, width)
            if operators[index].kind is Kind.JOIN
            else np.full(settings.partitions, float(width)),
            blocks=grid,
            block_keys=keys_grid,
            fraction=fraction,
            sampled=int(block_rows["sampled"].fill_null(0).sum()),
            keys=[
                (k, int(n), int(r), d)
                for k, n, r, d in top.select("key", "rows", "reduce_of_key", "distinct").iter_rows()
            ],
        )
    return measured


def _compared_types(handle: Session, operator: KeyedOperator) -> list[DataType] | None:
    """The types a join's key pairs are compared (and hashed) in, by :func:`join`'s rule;
    None for pairs that rule does not compare (each side's keys are hashed as they are)."""
    schemas = [_schema(handle, f) for f in operator.inputs]
    try:
        return [
            join_key_type(left, schemas[0][left].dataType, schemas[1][right].dataType)
            for left, right in zip(operator.names[0], operator.names[1], strict=True)
        ]
    except KeysplitError:
        return None


# ---------------------------------------------------------------------------------------
# Judging: Spark's rules on the measured blocks.


def _planned_broadcasts(handle: Session, operators: list[KeyedOperator]) -> dict[int, str]:
    """The joins Spark's physical plan broadcasts (index → the side broadcast).

    Such a join moves no row by key, so the operator that reads its output on the same key
    is not fed by it: it shuffles that output itself, and its input is measured as any
    other (reading it runs the broadcast join, a map-side step), unless the join reads
    another keyed operator's output, which measuring would run."""
    planned = {}
    for index, join in enumerate(operators):
        if join.kind is not Kind.JOIN or join.frame is None:
            continue
        side = broadcast_side(handle.explained(join.frame))
        if side is None:
            continue
        planned[index] = side
        below = next((o for o in [*join.fed_by, *join.behind_shuffle] if o is not None), None)
        for above in operators:
            for i, fed in enumerate(above.fed_by):
                if fed is join:
                    above.fed_by[i] = None
                    above.behind_shuffle[i] = below
        join.consumer = None
    return planned


def _judge(
    handle: Session,
    operator: KeyedOperator,
    inputs: list[_Input | None],
    settings: _Settings,
    streaming: bool,
    verdicts: dict[int, _Verdict],
    operators: list[KeyedOperator],
    broadcasts: dict[int, str],
) -> _Verdict:
    if streaming:
        fix = "keysplit.spark.stream_aggregate(...)" if operator.kind is Kind.AGGREGATE else None
        return _Verdict(
            False,
            "stateful stream",
            "adaptive execution is off in a stateful streaming query, and its state partitions are fixed by a "
            "hash of the key for the life of the checkpoint: a hot key's state and rows stay on one task",
            None,
            fix,
        )
    if operator.note is not None:
        return _Verdict(False, "not measured", operator.note, None, None)
    if operator.kind is Kind.SQL:
        return _Verdict(
            False,
            "not read",
            "a spark.sql query's operators are in its text, which only the server parses: explain_skew reads "
            "DataFrame plans; build the query with the DataFrame API, or explain the DataFrames it joins",
            None,
            None,
        )
    if operator.kind is Kind.WINDOW and not operator.names[0]:
        return _Verdict(
            False,
            "no partitionBy",
            "a window without partitionBy moves every row to one task, which sorts and scans them all; "
            "keysplit's window verb cuts the ordering into ranges over every task",
            1.0,
            operator.call or None,
        )
    for lower in operator.fed_by:
        if lower is None:
            continue
        inherited = verdicts.get(operators.index(lower))
        if inherited is not None and inherited.output_by_key is not None:
            return _after_forced_split(operator, lower, inherited.output_by_key)
        if operator.kind is not Kind.JOIN:
            return _Verdict(
                False,
                "no shuffle of its own",
                f"it reads {lower.label}'s output on the same key without an exchange: it runs in that operator's "
                "tasks, whose hottest task is its hottest",
                inherited.share if inherited else None,
                None,
            )
    missing = [operator.sides[i] for i, m in enumerate(inputs or [None] * len(operator.inputs)) if m is None]
    if operator.kind is Kind.JOIN:
        return _join(operator, inputs, settings, broadcasts.get(operators.index(operator)))
    if missing or not inputs:
        behind = operator.behind_shuffle[0]
        return _Verdict(
            False,
            "not measured",
            f"its input is {behind.label if behind else 'another operator'}'s output on other keys: measuring it "
            "would run that operator (explain_skew runs nothing); measure it with keysplit.spark.hot_keys",
            None,
            operator.call or None,
        )
    measured = inputs[0]
    assert measured is not None
    hot = measured.hot(settings.partitions)
    sizes = measured.blocks.sum(axis=0)
    row_share = float(sizes.max() / max(sizes.sum(), 1))
    if operator.kind is Kind.AGGREGATE:
        return _aggregate(operator, measured, hot)
    if operator.kind.flagged_only:
        return _exchange(operator, measured, hot, row_share, settings.partitions)
    if not hot:
        return _Verdict(False, "no hot key", "no key holds more than a mean task's share of the rows", row_share, None)
    what = "a window partition" if operator.kind is Kind.WINDOW else "a group of a grouped map"
    return _Verdict(
        False,
        "not a join",
        f"adaptive execution splits joins only: {what} is one task's, so the hot key's "
        f"{hot[0][1] / max(measured.sampled, 1):.1%} of the rows are read by one task",
        row_share,
        operator.call,
    )


def _exchange(operator: KeyedOperator, measured: _Input, hot: list[Any], row_share: float, partitions: int) -> _Verdict:
    """A repartition by value (its hash partitions, counted) or a global sort (a range
    partition holds a tied value whole; the others about a mean task's rows)."""
    top = hot[0][1] / max(measured.sampled, 1) if hot else 0.0
    share = row_share if operator.kind is Kind.REPARTITION else max(top, 1 / partitions)
    if not hot:
        return _Verdict(False, "no hot key", "no value holds more than a mean task's share of the rows", share, None)
    if operator.kind is Kind.REPARTITION:
        return _Verdict(
            False,
            "one task a value",
            f"{operator.label} gives each value one task (and a partitioned write after it one file): the hot "
            f"value's {top:.1%} of the rows are one task's; adaptive execution splits joins only",
            share,
            operator.call,
        )
    return _Verdict(
        False,
        "heavy ties",
        f"a range partition holds a tied value whole: the hot value's {top:.1%} of the rows are sorted by one "
        "task, whatever bounds Spark samples",
        share,
        operator.call,
    )


def _buffer_entries(measured: _Input) -> np.ndarray:
    """The value→count entries partial aggregation sends each reduce partition: one a row,
    but a top key of few distinct values (``d``, from its sample's sketch) at most the
    ``d·(1 - (1 - 1/d)^n)`` distinct values expected among its ``n`` rows in each map task."""
    entries = measured.blocks.sum(axis=0).astype(np.float64)
    maps = measured.blocks.shape[0]
    for _, sampled, partition, distinct in measured.keys:
        if distinct is None or distinct * REPEATS >= sampled or distinct < 1:
            continue
        rows = sampled / measured.fraction
        per_map = distinct * (1 - (1 - 1 / distinct) ** (rows / maps)) if distinct > 1 else 1.0
        entries[partition] -= max(rows - maps * per_map, 0.0)
    return entries


def _after_forced_split(operator: KeyedOperator, lower: KeyedOperator, output: tuple[float, float]) -> _Verdict:
    """An operator on a join's key above Spark's forced split of that join: the split adds an
    exchange of the join's output, by key, under it."""
    share, rows = output
    if operator.kind is Kind.JOIN:
        return _Verdict(
            False,
            "not measured",
            f"Spark's forced split of {lower.label} adds an exchange of that join's output under it, so it joins "
            "two shuffles and may be split in turn; measuring its input would run that join",
            None,
            operator.call or None,
        )
    combinable = operator.kind is Kind.AGGREGATE and all(name in _COMBINABLE for name, _ in operator.functions)
    planned = (
        " (planned over the join's partitioning, it has no partial aggregation: every output row is shuffled)"
        if operator.kind is Kind.AGGREGATE
        else ""
    )
    return _Verdict(
        False,
        "extra shuffle",
        f"forceOptimizeSkewedJoin splits {lower.label} and adds an exchange of its output under this operator, by "
        f"key{planned}: the hot key's output rows (about {rows:,.0f}, estimated) meet in one task",
        share,
        # A combinable aggregate over keysplit's join gets its own exchange, and partial aggregation with it.
        lower.call if combinable else operator.call or lower.call,
    )


def _aggregate(
    operator: KeyedOperator, measured: _Input, hot: list[tuple[str | None, int, int, float | None]]
) -> _Verdict:
    holistic = [name for name, _ in operator.functions if name not in _COMBINABLE]
    # Partial aggregation sends a row per key and map task; a holistic buffer holds the
    # key's values besides.
    groups = measured.groups()
    per_reduce = groups.sum(axis=0)
    combined_share = float(per_reduce.max() / max(per_reduce.sum(), 1))
    buffered = (VALUE_BYTES * measured.blocks + GROUP_BYTES * groups).sum(axis=0)
    buffered_share = float(buffered.max() / max(buffered.sum(), 1))
    if not holistic:
        return _Verdict(
            False,
            "combinable",
            "partial aggregation sends a map task's rows of a key as one row: a hot key costs its task no more "
            "than any other key; Spark's groupBy is right as it is",
            combined_share,
            None,
        )
    if not hot:
        return _Verdict(
            False, "no hot key", "no key holds more than a mean task's share of the rows", buffered_share, None
        )
    spread = [k for k in hot if k[3] is not None and k[3] * REPEATS >= k[1]]
    if not spread:
        entries = _buffer_entries(measured)
        few = VALUE_BYTES * entries + GROUP_BYTES * groups.sum(axis=0)
        return _Verdict(
            False,
            "few values",
            f"{', '.join(holistic)} of a hot key of few distinct values: partial aggregation combines them "
            "map-side into a few entries, so no task holds many of them",
            float(few.max() / max(few.sum(), 1)),
            None,
        )
    unsplittable = [name for name in holistic if name in _UNSPLITTABLE]
    others = [name for name in holistic if name not in SPLIT_FUNCTIONS and name not in _UNSPLITTABLE]
    why = (
        f"adaptive execution splits joins only, and {', '.join(holistic)} keeps every value of a key in one "
        f"buffer (partial aggregation cuts rows, not bytes): the hot key's {spread[0][1] / max(measured.sampled, 1):.1%} "
        "of the values meet in one task"
    )
    if unsplittable:
        why += f"; {', '.join(unsplittable)}'s result is as large as its key's rows wherever it is built: no split helps it"
        return _Verdict(False, "not a join", why, buffered_share, None)
    if others:
        why += f"; {', '.join(others)} runs as Spark's own over the hot rows"
    return _Verdict(False, "not a join", why, buffered_share, operator.call)


def _join(
    operator: KeyedOperator, inputs: list[_Input | None], settings: _Settings, planned_broadcast: str | None
) -> _Verdict:
    how = operator.how or "inner"
    fix = operator.call
    for side, lower in enumerate(operator.fed_by):
        if lower is not None:
            return _Verdict(
                False,
                "not two shuffles",
                f"its {operator.sides[side]} input is {lower.label}'s output on the same key, read without an "
                "exchange: adaptive execution's rule matches a join of two shuffles only",
                None,
                fix,
            )
    if any(m is None for m in inputs) or not inputs:
        behind = next((b for b in operator.behind_shuffle if b is not None), None)
        return _Verdict(
            False,
            "not measured",
            f"an input is {behind.label if behind else 'another operator'}'s output on other keys: measuring it "
            "would run that operator (explain_skew runs nothing); measure it with keysplit.spark.hot_keys",
            None,
            fix,
        )
    left, right = inputs
    assert left is not None and right is not None
    total = left.blocks.sum(axis=0) + right.blocks.sum(axis=0)
    unsplit_share = float(total.max() / max(total.sum(), 1))
    hot = {s: m.hot(settings.partitions) for s, m in zip(("left", "right"), (left, right), strict=True)}
    broadcast = planned_broadcast or _broadcast_at_run_time(operator, left, right, settings)
    if broadcast is not None:
        stream = right if broadcast == "left" else left
        per_map = stream.blocks.sum(axis=1)
        return _Verdict(
            False,
            "broadcast",
            f"Spark broadcasts the {broadcast} side ({_megabytes((left if broadcast == 'left' else right).data_size)} "
            "estimated): no exchange moves the other side's rows by key, so no task gets a key's rows",
            float(per_map.max() / max(per_map.sum(), 1)),
            None,
        )
    if not (hot["left"] or hot["right"]):
        return _Verdict(
            False, "no hot key", "no key holds more than a mean task's share of either side", unsplit_share, None
        )
    skewed = {}
    for name, measured in (("left", left), ("right", right)):
        sizes = measured.sizes
        median = float(np.median(sizes))
        limit = max(settings.threshold, settings.factor * median)
        skewed[name] = (np.flatnonzero(sizes > limit), float(sizes.max()), median, limit)
    hottest_side = max(skewed, key=lambda s: skewed[s][1] / max(skewed[s][3], 1))
    over = [s for s in skewed if len(skewed[s][0])]
    product = _output_skew(left, right, settings.partitions)
    if product is not None and (not over or not settings.adaptive or not settings.skew):
        key, left_rows, right_rows, output_share = product
        return _Verdict(
            False,
            "output skew",
            f"key {key} meets about {left_rows:,.0f} x {right_rows:,.0f} = {left_rows * right_rows:,.0f} output "
            f"rows in one task ({output_share:.0%} of the join's output, estimated); adaptive execution sees input "
            f"bytes only, and the hottest partition ({_megabytes(skewed[hottest_side][1])} estimated) is under its "
            "threshold",
            unsplit_share,
            fix,
        )
    if not settings.adaptive or not settings.skew:
        return _Verdict(
            False, "adaptive execution off", "spark.sql.adaptive(.skewJoin).enabled is false", unsplit_share, fix
        )
    if not over:
        size, median, limit = skewed[hottest_side][1:]
        # What would still stop it over the threshold, for whoever lowers it.
        also = []
        if how not in _SPLITTABLE[hottest_side]:
            also.append(f"a {how} join keeps its {hottest_side} side whole")
        if operator.consumer is not None and not settings.force:
            also.append(
                f"{operator.consumer.label} above reads the join's output on the same key, so a split would add a "
                "shuffle and is vetoed (forceOptimizeSkewedJoin is off)"
            )
        return _Verdict(
            False,
            "threshold",
            f"the hottest {hottest_side} partition ({_megabytes(size)} estimated, {size / max(median, 1):.1f}x the "
            f"median) is under the skew threshold max({_megabytes(settings.threshold)}, {settings.factor:g} x "
            f"median) = {_megabytes(limit)}" + (f"; over it, still no split: {'; '.join(also)}" if also else ""),
            unsplit_share,
            fix,
        )
    splittable = [s for s in over if how in _SPLITTABLE[s]]
    if not splittable:
        hot_side = over[0]
        return _Verdict(
            False,
            "join type",
            f"the hot partition is on the {hot_side} side, and a {how} join keeps that side whole (splitting it would "
            "drop or repeat its unmatched rows)",
            unsplit_share,
            fix,
        )
    if operator.consumer is not None and not settings.force:
        return _Verdict(
            False,
            "extra shuffle",
            f"splitting would break the partitioning {operator.consumer.label} above reads on the same key, adding "
            "a shuffle, so adaptive execution keeps the plan (spark.sql.adaptive.forceOptimizeSkewedJoin is off)",
            unsplit_share,
            fix,
        )
    share, block, pieces = _split_share(left, right, {s: skewed[s][0] for s in splittable}, settings)
    if pieces == 1:
        return _Verdict(
            False,
            "map blocks",
            f"the {'/'.join(splittable)} side's hot partition was written by one map task: adaptive execution "
            "splits at map-output blocks only, so it has nothing to split",
            unsplit_share,
            fix,
        )
    if operator.consumer is not None:
        return _Verdict(
            True,
            "forced split",
            f"forceOptimizeSkewedJoin splits it, and adds an exchange of the join's output under "
            f"{operator.consumer.label}, which then reads the hot key's output rows by key",
            share,
            fix,
            _output_by_key(left, right, settings.partitions),
        )
    if block is not None:
        return _Verdict(
            True,
            "map blocks",
            f"Spark splits the {'/'.join(splittable)} side's hot partition, but only at map-output blocks, and one "
            f"map task wrote {block:.0%} of it",
            share,
            fix,
        )
    return _Verdict(
        True,
        "splits",
        f"the {'/'.join(splittable)} side's hot partition is over the skew threshold and the join type allows "
        "splitting it: Spark's own plan is right",
        share,
        None,
    )


def _output_skew(left: _Input, right: _Input, partitions: int) -> tuple[str, float, float, float] | None:
    """The key whose output rows ``L·R`` make one task's output more than twice a mean
    task's, and more than its input rows (a key on both sides' top lists: null keys never
    match), with its rows on each side and its estimated share of the join's output."""
    counts = [{k[0]: k[1] / m.fraction for k in m.keys if k[0] is not None} for m in (left, right)]
    common = counts[0].keys() & counts[1].keys()
    if not common:
        return None
    outputs = {k: counts[0][k] * counts[1][k] for k in common}
    # Rows of the other keys meet about one partner each.
    rest = max(left.rows - sum(counts[0][k] for k in common), right.rows - sum(counts[1][k] for k in common), 0)
    key = max(outputs, key=lambda k: (outputs[k], str(k)))
    share = outputs[key] / (sum(outputs.values()) + rest)
    if share * partitions <= 2 or outputs[key] <= 2 * (counts[0][key] + counts[1][key]):
        return None
    return str(key), counts[0][key], counts[1][key], share


def _output_by_key(left: _Input, right: _Input, partitions: int) -> tuple[float, float]:
    """A join's output rows per reduce partition of its key (a key on both sides' top lists
    meets ``L·R`` rows; the other rows about one partner each): the hottest partition's
    share of them, and its rows."""
    rest = [m.blocks.sum(axis=0).astype(np.float64) for m in (left, right)]
    output = np.zeros(partitions)
    counts = [{k[0]: (k[1] / m.fraction, k[2]) for k in m.keys if k[0] is not None} for m in (left, right)]
    for key in counts[0].keys() & counts[1].keys():
        (left_rows, partition), (right_rows, _) = counts[0][key], counts[1][key]
        output[partition] += left_rows * right_rows
        rest[0][partition] -= left_rows
        rest[1][partition] -= right_rows
    output += np.maximum(np.maximum(rest[0], rest[1]), 0.0)
    hottest = int(output.argmax())
    return float(output[hottest] / max(output.sum(), 1.0)), float(output[hottest])


def _split_share(
    left: _Input, right: _Input, skewed: dict[str, np.ndarray], settings: _Settings
) -> tuple[float, float | None, int]:
    """The hottest task's share after Spark's split (``ShufflePartitionsUtil``: a skewed
    partition's map blocks packed in order into pieces of about the target size), the
    largest map block's share of a hot partition when a block too big to split keeps its
    task over twice the mean task's rows, and the most pieces a skewed partition is cut
    into (1: Spark marks nothing skewed)."""
    sides = {"left": left, "right": right}
    tasks: list[float] = []
    worst_block: float | None = None
    most = 1
    for r in range(settings.partitions):
        pieces = {}
        for name, measured in sides.items():
            blocks = measured.blocks[:, r]
            if name in skewed and r in set(skewed[name].tolist()):
                normal = np.delete(measured.sizes, skewed[name])
                target = max(settings.advisory, float(normal.mean()) if len(normal) else 0.0)
                width = float(measured.shuffle_widths[r])
                packed = _pack(blocks * width, target)
                pieces[name] = [size / width for size in packed]
                most = max(most, len(packed))
                biggest = float(blocks.max() / max(blocks.sum(), 1))
                if max(packed) > 2 * target and (worst_block is None or biggest > worst_block):
                    worst_block = biggest
            else:
                pieces[name] = [float(blocks.sum())]
        tasks.extend(a + b for a in pieces["left"] for b in pieces["right"])
    tasks_array = np.array(tasks)
    share = float(tasks_array.max() / max(tasks_array.sum(), 1))
    # The blocks matter when they leave a task of more than twice the mean's rows.
    return share, worst_block if share > 2 / len(tasks_array) else None, most


def _pack(blocks: np.ndarray, target: float) -> list[float]:
    """Spark's ``splitSizeListByTargetSize``: map blocks packed in order until the next one
    would pass ``target``; a piece merges into the one before when either is under 0.2 of
    the target or both together under 1.2 of it."""
    pieces: list[float] = []

    def close(size: float) -> None:
        if pieces and (size + pieces[-1] < 1.2 * target or size < 0.2 * target or pieces[-1] < 0.2 * target):
            pieces[-1] += size
        else:
            pieces.append(size)

    current = 0.0
    for size in blocks:
        if current > 0 and current + size > target:
            close(current)
            current = 0.0
        current += float(size)
    close(current)
    return pieces


def _broadcast_at_run_time(operator: KeyedOperator, left: _Input, right: _Input, settings: _Settings) -> str | None:
    """The side adaptive execution broadcasts at run time (a buildable side under its
    broadcast threshold), or None."""
    if not settings.adaptive or settings.broadcast < 0:
        return None
    for side in _BUILDABLE.get(operator.how or "inner", ()):
        measured = left if side == "left" else right
        if measured.data_size <= settings.broadcast:
            return side
    return None
