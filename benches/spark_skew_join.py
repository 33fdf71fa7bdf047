"""Skewed joins on Spark: ``keysplit.spark.join`` against Spark's own plan, Spark with its
skew settings tuned, and salting by hand, in one session.

The shapes are those where adaptive execution's skew-join rule leaves the hot key on one
task (``../shared/notes/spark-skew-beyond-grouped-maps.md`` §1.2), and its good case as a
control. ``--rows`` rows on the big side, whose key 0 holds ``--share`` of them (the rest
uniform over ``--keys`` keys); a dimension of one row per key:

1. left outer join, the hot key on the null-supplying side (``dim ⟕ facts``);
2. full outer join (``facts ⟗ dim``);
3. inner join at Spark's default skew threshold (256 MB), which the hot partition is under;
4. a join followed by ``groupBy`` on the same key;
5. a chain of two joins on the same key;
6. the hot key written by one map task (the facts partitioned by key);
7. output skew: 5,000 rows of key 0 on one side of ``--rows``/10 and 10,000 on the other;
8. control: the inner join of shape 3, against Spark with its threshold lowered, where it
   splits the hot partition itself;
9. real words, every join type: the King James Bible's words repeated ``--words`` times
   (about 7.9 M rows at 10; "the" is 8 % of them) joined with a dictionary of its words
   holding "the" and "and" three times each, at Spark's default broadcast threshold (the
   dictionary is a few hundred KB, so Spark broadcasts it wherever the join type allows,
   and ``join`` then is Spark's join), ``spark`` against ``keysplit`` only.

Plans, alternated (A B C D, then D C B A, ...): ``spark`` (Spark's defaults, adaptive
execution on), ``spark tuned`` (skew threshold and advisory size 4 MB,
``forceOptimizeSkewedJoin``), ``salted`` (16 salts on the big side, the other side copied
16 times), ``keysplit`` (``keysplit.spark.join``). 32 shuffle partitions, coalescing off,
broadcast joins off (the sides are tables too big to broadcast). Every plan ends in the
same fingerprint of its output (rows, and a sum of a hash of each row), which must equal
Spark's own; a salted plan that does not (salting a join whose preserved side is copied
duplicates its unmatched rows) is reported as wrong. Per run, from Spark's REST status API:
the join stage's hottest task's records over the mean (the join stage is the one that
reads the most records, from a shuffle or, for a broadcast join, from its input), the rows shuffled, the join's
largest memory in one task (the larger of the tasks' peak execution memory, which a sort
fills, and the SQL metric "data size of build side", which a hash join's table fills), and
the makespan on 32 slots **computed** by LPT from the measured task times of every stage
(this machine has 2 cores).

    python benches/spark_skew_join.py --rows 1e7 --share 0.3 0.6 --setup local

Writes ``benches/results/spark_skew_join[_cluster].json``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keysplit import spark as ks
from keysplit.spark.intake import run_settings
from spark_vs_native import (
    BENCH_CONF,
    SparkStatus,
    fingerprint,
    lpt_makespan,
    medians_and_exactness,
    stage_briefs,
    write_results,
)

RESULTS = Path(__file__).parent / "results"
SETUPS = {"local": "local[2]", "cluster": "cluster:2"}
PLANS = ("spark", "spark tuned", "salted", "keysplit")
SALTS = 16
SLOTS = 32
TUNED = {
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "4MB",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "4MB",
    "spark.sql.adaptive.forceOptimizeSkewedJoin": "true",
}
CONF = {
    **BENCH_CONF,
    "spark.sql.shuffle.partitions": str(SLOTS),
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}

Join = Callable[[Any, Any, str, str], Any]


def spark_join(left: Any, right: Any, on: str, how: str) -> Any:
    return left.join(right, on, how)


def keysplit_join(left: Any, right: Any, on: str, how: str) -> Any:
    return ks.join(left, right, on, how)


def salted_join(left: Any, right: Any, on: str, how: str) -> Any:
    """Salting by hand, as users write it: the bigger side (the one named ``facts``, or the
    left) gets a salt of 16, the other side is copied once per salt."""
    from pyspark.sql import functions as F

    big_left = "id" in left.columns or "id" not in right.columns
    salt = F.pmod(F.xxhash64(*[F.col(c) for c in (left if big_left else right).columns]), F.lit(SALTS)).alias("salt")
    copies = F.explode(F.sequence(F.lit(0), F.lit(SALTS - 1))).alias("salt")
    if big_left:
        left, right = left.select("*", salt), right.select("*", copies)
    else:
        left, right = left.select("*", copies), right.select("*", salt)
    return left.join(right, [on, "salt"], how).drop("salt")


def inputs(spark: Any, directory: Path, rows: int, keys: int, share: float) -> dict[str, Any]:
    """The sides of every shape, written and counted first."""
    from pyspark.sql import functions as F

    hot = F.when(F.rand(7) < share, F.lit(0)).otherwise(1 + F.pmod(F.xxhash64("id"), F.lit(keys - 1)))
    facts = spark.range(0, rows, numPartitions=16).select("id", hot.alias("k"), F.pmod("id", F.lit(1000)).alias("v"))
    frames = {
        "facts": facts,
        "clustered": facts.repartition(16, "k"),
        "dim": spark.range(0, keys).select(F.col("id").alias("k"), (F.col("id") % 7).alias("w")),
        "dim2": spark.range(0, keys).select(F.col("id").alias("k"), (F.col("id") % 11).alias("u")),
        "few": spark.range(0, rows // 10, numPartitions=16).select(
            "id",
            F.when(F.col("id") < 5_000, 0).otherwise(1 + F.pmod("id", F.lit(keys - 1))).alias("k"),
            F.pmod("id", F.lit(1000)).alias("v"),
        ),
        "many": spark.range(0, keys + 10_000).select(
            F.when(F.col("id") < 10_000, 0).otherwise(F.col("id") - 10_000).alias("k"), (F.col("id") % 5).alias("x")
        ),
    }
    # Written once as Parquet and read back: a scan Spark reuses within a plan (it does not
    # reuse an exchange over a cached DataFrame referenced twice), read from the page cache.
    for name, frame in frames.items():
        path = str(directory / f"{name}-{rows}-{keys}-{share}")
        frame.write.mode("overwrite").parquet(path)
        frames[name] = spark.read.parquet(path)
        frames[name].count()
    return frames


def words(spark: Any, directory: Path, repeat: int) -> dict[str, Any]:
    """The Bible's words ``repeat`` times over (16 Parquet files; ``position`` numbers them)
    and a dictionary of them: "the" and "and" three times each, "god" missing, and a word
    the text lacks; each entry's letters and number."""
    import polars as pl

    from keysplit import datasets

    text = pl.concat(list(datasets.kjv(batch_rows=1_000_000)))
    text = pl.concat([text] * repeat).with_row_index("position").with_columns(pl.col("position").cast(pl.Int64))
    vocabulary = text["key"].unique().sort()
    extra = pl.Series("key", ["the", "the", "and", "and", "zyzzyva"])
    dictionary = pl.DataFrame({"key": pl.concat([vocabulary.filter(vocabulary != "god"), extra])}).with_columns(
        pl.col("key").str.len_chars().alias("letters"), pl.int_range(pl.len()).alias("entry")
    )
    path = directory / f"words-{repeat}"
    path.mkdir(parents=True, exist_ok=True)
    size = -(-text.height // 16)
    for i in range(16):
        text.slice(i * size, size).write_parquet(path / f"text-{i:02d}.parquet")
    dictionary.write_parquet(path / "dictionary.parquet")
    frames = {
        "text": spark.read.parquet(str(path / "text-*.parquet")),
        "dictionary": spark.read.parquet(str(path / "dictionary.parquet")),
    }
    for frame in frames.values():
        frame.count()
    return frames


def word_shapes(frames: dict[str, Any]) -> dict[str, Callable[[Join], Any]]:
    text, dictionary = frames["text"], frames["dictionary"]
    return {
        f"9 words, {how}": (lambda how: lambda j: j(text, dictionary, "key", how))(how)
        for how in ("inner", "left", "right", "full", "left_semi", "left_anti")
    }


def shapes(frames: dict[str, Any]) -> dict[str, Callable[[Join], Any]]:
    from pyspark.sql import functions as F

    f, d, d2 = frames["facts"], frames["dim"], frames["dim2"]
    return {
        "1 left outer, hot on the null-supplying side": lambda j: j(d, f, "k", "left"),
        "2 full outer": lambda j: j(f, d, "k", "full"),
        "3 inner under the threshold": lambda j: j(f, d, "k", "inner"),
        "4 join then groupBy on the key": lambda j: (
            j(f, d, "k", "inner").groupBy("k").agg(F.sum(F.col("v") * F.col("w")).alias("total"))
        ),
        "5 chain of joins": lambda j: j(j(f, d, "k", "inner"), d2, "k", "inner"),
        "6 hot key from one map task": lambda j: j(frames["clustered"], d, "k", "inner"),
        "7 output skew": lambda j: j(frames["few"], frames["many"], "k", "inner"),
        "control: inner, Spark splits it": lambda j: j(f, d, "k", "inner"),
    }


def measure(
    handle: Any, status: SparkStatus, plan: str, build: Callable[[Join], Any], settings: dict[str, str]
) -> dict[str, Any]:
    conf = handle.spark.conf
    for name, value in TUNED.items():
        if plan == "spark tuned":
            conf.set(name, value)
        else:
            conf.unset(name)
    join = {"spark": spark_join, "spark tuned": spark_join, "salted": salted_join, "keysplit": keysplit_join}[plan]
    with run_settings(handle, settings):
        query = fingerprint(build(join))
        first = status.next_execution()
        started = time.perf_counter()
        row = handle.call(plan, query.collect)[0]
        wall = time.perf_counter() - started
    stages = status.stages_since(first, native=True)

    def records_read(stage: dict[str, Any]) -> list[int]:
        return [a + b for a, b in zip(stage["task_shuffle_records_read"], stage["task_input_records"], strict=True)]

    heaviest = max(stages, key=lambda s: sum(records_read(s)))
    records = records_read(heaviest)
    # The query's straggler among the tasks reading a shuffle (where keyed operators run):
    # after a split join, an operator above on the same key may read more than the join.
    straggling = max(stages, key=lambda s: max(s["task_shuffle_records_read"], default=0))
    shuffled = straggling["task_shuffle_records_read"]
    table = status.largest_build_side(first)
    return {
        "wall_s": wall,
        "result": [row["rows"], row["digest"]],
        "join_tasks": len(records),
        "hottest_over_mean_records": max(records) / (sum(records) / len(records)),
        "hottest_share_of_records": max(records) / sum(records),
        "straggler_share_of_shuffle_records": max(shuffled) / max(sum(shuffled), 1),
        "rows_shuffled": sum(s["shuffle_write_records"] for s in stages),
        "peak_memory_bytes": heaviest["peak_memory"],
        # A hash join's table is not in the tasks' peak execution memory: Spark's SQL metric.
        "largest_hash_table_bytes": table,
        "task_memory_bytes": max(heaviest["peak_memory"], table),
        "makespan_32_slots_computed_s": sum(lpt_makespan(s["task_seconds"], SLOTS) for s in stages),
        "stages": stage_briefs(stages, SLOTS),
    }


def run_shape(
    handle: Any, status: SparkStatus, name: str, build: Callable[[Join], Any], repeats: int
) -> dict[str, list[dict[str, Any]]]:
    # The control is Spark's good case: its plan is the tuned one.
    plans = ("spark tuned", "salted", "keysplit") if name.startswith("control") else PLANS
    settings = {}
    if name.startswith("9 "):
        plans, settings = ("spark", "keysplit"), {"spark.sql.autoBroadcastJoinThreshold": "10MB"}
    runs: dict[str, list[dict[str, Any]]] = {plan: [] for plan in plans}
    for plan in plans:  # warm-up
        measure(handle, status, plan, build, settings)
    for repeat in range(repeats):
        for plan in plans if repeat % 2 == 0 else tuple(reversed(plans)):
            figures = measure(handle, status, plan, build, settings)
            runs[plan].append(figures)
            print(
                f"  {plan}: {figures['wall_s']:.2f} s, hottest task {figures['hottest_share_of_records']:.1%} of "
                f"the join's records ({figures['hottest_over_mean_records']:.1f}x the mean), 32-slot makespan "
                f"(computed) {figures['makespan_32_slots_computed_s']:.2f} s",
                flush=True,
            )
    return runs


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary = medians_and_exactness(runs, "spark tuned" if "spark tuned" in runs else "spark")
    median = summary["median"]
    ours = median["keysplit"]
    for plan in runs:
        if plan != "keysplit":
            summary[f"makespan {plan} / keysplit"] = (
                median[plan]["makespan_32_slots_computed_s"] / ours["makespan_32_slots_computed_s"]
            )
            summary[f"wall keysplit / {plan}"] = ours["wall_s"] / median[plan]["wall_s"]
            summary[f"rows shuffled {plan} / keysplit"] = median[plan]["rows_shuffled"] / ours["rows_shuffled"]
            summary[f"task memory {plan} / keysplit"] = median[plan]["task_memory_bytes"] / max(
                ours["task_memory_bytes"], 1
            )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda t: int(float(t)), default=10_000_000)
    parser.add_argument("--keys", type=lambda t: int(float(t)), default=100_000)
    parser.add_argument("--share", type=float, nargs="+", default=[0.3, 0.6])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="local")
    parser.add_argument("--shapes", nargs="*", help="run only the shapes whose names start so (e.g. 1 2 control)")
    parser.add_argument("--words", type=int, default=10, help="times the Bible's words are repeated (0: no words)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "keysplit-skew-join")
    args = parser.parse_args()
    output = args.output or RESULTS / (
        "spark_skew_join.json" if args.setup == "local" else "spark_skew_join_cluster.json"
    )
    results: dict[str, Any] = {}
    with ks.session(master=SETUPS[args.setup], ui=True, driver_memory="4g", **CONF) as handle:
        assert handle.server is not None and handle.server.ui_port is not None
        status = SparkStatus(handle.server.ui_port)
        for share in args.share:
            frames = inputs(handle.spark, args.data_dir, args.rows, args.keys, share)
            for name, build in shapes(frames).items():
                if args.shapes and not any(name.startswith(prefix) for prefix in args.shapes):
                    continue
                print(f"share {share:.0%}, {name}", flush=True)
                runs = run_shape(handle, status, name, build, args.repeats)
                results[f"{share:.0%} {name}"] = {"runs": runs, **summarise(runs)}
        if args.words and (not args.shapes or any("9".startswith(p) or p == "words" for p in args.shapes)):
            for name, build in word_shapes(words(handle.spark, args.data_dir, args.words)).items():
                print(name, flush=True)
                runs = run_shape(handle, status, name, build, args.repeats)
                results[name] = {"runs": runs, **summarise(runs)}
    write_results(
        output,
        "skewed joins: keysplit.spark.join against Spark, Spark tuned and salting by hand",
        {**vars(args), "output": str(output), "conf": CONF, "tuned": TUNED, "salts": SALTS},
        shapes=results,
    )
    for name, figures in results.items():
        line = ", ".join(
            f"{k} {v:.2f}" for k, v in figures.items() if isinstance(v, float) and k.startswith(("makespan", "wall"))
        )
        print(f"{name}: exact {figures['exact']}; {line}")


if __name__ == "__main__":
    main()
