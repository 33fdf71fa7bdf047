"""Key streams from any Parquet, CSV or text file."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import polars as pl

from keysplit._checks import require_count
from keysplit._errors import ConfigError, KeyInputError, KeyTypeError, MissingFileError
from keysplit.datasets.synthetic import DEFAULT_BATCH_ROWS, rebatch

if TYPE_CHECKING:
    from collections.abc import Iterator

FileFormat = Literal["parquet", "csv", "tsv", "text"]

# Runs of letters and digits, with apostrophes inside a word kept ("abel's", "don't").
WORD_PATTERN = r"[\p{L}\p{N}]+(?:['’][\p{L}\p{N}]+)*"

_SUFFIXES: dict[str, FileFormat] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "text",
    ".text": "text",
    ".md": "text",
}


def words_of_lines(lines: pl.Expr) -> pl.Expr:
    """The lower-cased words of each line, as a list per line (see ``WORD_PATTERN``)."""
    return lines.str.to_lowercase().str.extract_all(WORD_PATTERN)


def from_file(
    path: str | Path,
    *,
    key: str | None = None,
    value: str | None = None,
    timestamp: str | None = None,
    format: FileFormat | None = None,  # noqa: A002 - the natural name for a file format
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """The rows of a Parquet, CSV or TSV file keyed by its column ``key``, or the words of a
    text file, in file order.

    The format comes from the suffix (``.parquet``/``.pq``, ``.csv``, ``.tsv``,
    ``.txt``/``.text``/``.md``) unless ``format`` names it. For tables, ``key`` is required
    and must hold strings or integers; ``value`` and ``timestamp`` name optional columns
    passed through under those names. A text file yields its lower-cased words (runs of letters and digits,
    apostrophes inside a word kept) as ``key``, read a block of lines at a time. Tables are scanned
    with Polars' streaming engine, so memory stays bounded for files of any size.
    """
    require_count(batch_rows, "batch_rows", minimum=1)
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"no such data file: {path}")
    kind = format or _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ConfigError(f"cannot tell the format of {path.name}; pass format='parquet', 'csv', 'tsv' or 'text'")
    if kind == "text":
        if key is not None or value is not None or timestamp is not None:
            raise ConfigError("a text file's key is its words: key, value and timestamp do not apply")
        return rebatch(_text_words(path), batch_rows)
    if kind not in ("parquet", "csv", "tsv"):
        raise ConfigError(f"format must be 'parquet', 'csv', 'tsv' or 'text', got {kind!r}")
    if key is None:
        raise KeyInputError(f"{path.name} is a table: name its key column with key=...")
    scan = pl.scan_parquet(path) if kind == "parquet" else pl.scan_csv(path, separator="\t" if kind == "tsv" else ",")
    schema = scan.collect_schema()
    wanted = {"key": key, "value": value, "timestamp": timestamp}
    for role, column in wanted.items():
        if column is not None and column not in schema:
            raise KeyInputError(f"{path.name} has no column {column!r} for {role}; its columns are {list(schema)}")
    if not (schema[key].is_integer() or schema[key] in (pl.String, pl.Binary, pl.Categorical)):
        raise KeyTypeError(
            f"key column {key!r} of {path.name} is {schema[key]}; keys must be strings or integers: write the "
            f"column as one, e.g. with Polars df.with_columns(pl.col({key!r}).cast(pl.String)) "
            "(or .cast(pl.Int64) for whole numbers)"
        )
    stream = scan.select(pl.col(column).alias(role) for role, column in wanted.items() if column is not None)
    return rebatch(stream.collect_batches(chunk_size=batch_rows, maintain_order=True, lazy=True), batch_rows)


def _text_words(path: Path) -> Iterator[pl.DataFrame]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        while lines := list(itertools.islice(handle, 8192)):
            yield (
                pl.DataFrame({"line": lines})
                .select(words_of_lines(pl.col("line")).alias("key"))
                .explode("key")
                .drop_nulls()
            )
