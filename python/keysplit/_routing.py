"""Routing Polars frames batch by batch, in row order."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._errors import ConfigError, KeyInputError, KeyTypeError
from keysplit._grouper import Grouper, NullPolicy

if TYPE_CHECKING:
    from collections.abc import Iterator


def from_pandas(frame: Any) -> Any:
    """A pandas DataFrame as a Polars one (through Arrow); anything else as it is."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(frame, pandas.DataFrame):
        return pl.from_pandas(frame)
    return frame


def route_batches(
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    key: str,
    grouper: Grouper,
    out: str = "worker",
    nulls: NullPolicy = "raise",
    batch_rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """Routes ``frame`` batch by batch and yields each batch with a uint32 column ``out``.

    Batches come in row order and each is routed as soon as it is read, so a LazyFrame is
    processed in bounded memory: ``batch_rows`` rows at a time (Polars' choice when None).
    A DataFrame is cut into slices of ``batch_rows`` rows, or routed whole. A batch that is
    refused stops the iteration, and the batches already yielded stay routed: use
    :func:`route` for all or nothing.
    """
    if not isinstance(grouper, Grouper):
        raise TypeError(f"grouper must be a keysplit.Grouper, got {type(grouper).__name__}")
    frame = from_pandas(frame)
    if batch_rows is not None and (isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1):
        raise ConfigError(f"batch_rows must be a positive int or None, got {batch_rows!r}")
    if isinstance(frame, pl.DataFrame):
        schema = frame.schema
        batches: Iterator[pl.DataFrame] = iter([frame]) if batch_rows is None else frame.iter_slices(batch_rows)
    elif isinstance(frame, pl.LazyFrame):
        schema = frame.collect_schema()
        batches = iter(frame.collect_batches(chunk_size=batch_rows, maintain_order=True))
    else:
        raise KeyTypeError(f"frame must be a Polars or pandas DataFrame or a LazyFrame, got {type(frame).__name__}")
    if key not in schema:
        raise KeyInputError(f"key column {key!r} is not in the frame; columns: {list(schema)}")
    if out in schema:
        raise ConfigError(f"output column {out!r} already exists; choose another name with out=")
    for batch in batches:
        ids = grouper.route(batch.get_column(key), nulls=nulls)
        yield batch.with_columns(pl.Series(ids).alias(out))


def route(
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    key: str,
    grouper: Grouper,
    out: str = "worker",
    nulls: NullPolicy = "raise",
    batch_rows: int | None = None,
) -> pl.DataFrame:
    """Routes every row of ``frame`` by its ``key`` column and adds a uint32 column ``out``.

    Rows keep their order. A LazyFrame is read and routed batch by batch (see
    :func:`route_batches`) and the result collected; routing advances the grouper's state,
    so the same frame routed twice need not land on the same workers the second time.

    All or nothing: if any batch is refused (null keys under ``nulls="raise"``, a key type
    the groupers do not take), the grouper is put back as it was before the first batch, and
    a refusal for nulls counts the null keys of the whole frame.
    """
    if not isinstance(grouper, Grouper):
        raise TypeError(f"grouper must be a keysplit.Grouper, got {type(grouper).__name__}")
    frame = from_pandas(frame)
    # One batch is refused by the core before any key is routed; several need a way back.
    before = grouper.snapshot() if isinstance(frame, pl.LazyFrame) or batch_rows is not None else None
    try:
        routed = list(route_batches(frame, key=key, grouper=grouper, out=out, nulls=nulls, batch_rows=batch_rows))
    except ValueError as error:
        if before is None:
            raise
        grouper._rewind(before)
        if nulls == "raise" and "null" in str(error):
            lazy = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
            total = lazy.select(pl.col(key).null_count()).collect().item()
            raise KeyInputError(
                f"the keys hold {total} null(s) in the whole frame; nothing was routed (the grouper "
                'is as it was). Nulls are refused by default: pass nulls="group" to route every null as one key'
            ) from None
        raise
    except BaseException:
        if before is not None:
            grouper._rewind(before)
        raise
    if not routed:
        schema = frame.collect_schema() if isinstance(frame, pl.LazyFrame) else frame.schema
        return pl.DataFrame(schema=schema).with_columns(pl.lit(None, pl.UInt32).alias(out))
    return pl.concat(routed, how="vertical", rechunk=False)
