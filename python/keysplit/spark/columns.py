"""Spark column expressions the plans share: a column by its exact name, a hash of a row's values."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType


def quoted(name: str) -> str:
    """``name`` as a SQL identifier: backticks, so that dots and spaces stay in the name."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column named exactly ``name`` (``F.col`` would read ``a.b`` as a struct's field)."""
    from pyspark.sql import functions as F

    return F.col(quoted(name))


def holds_a_map(kind: DataType) -> bool:
    """Whether a value of ``kind`` holds a map anywhere, which Spark's hashes refuse."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(kind, MapType):
        return True
    if isinstance(kind, ArrayType):
        return holds_a_map(kind.elementType)
    if isinstance(kind, StructType):
        return any(holds_a_map(f.dataType) for f in kind.fields)
    return False


def row_hash(seed: int, schema: StructType) -> Column:
    """``xxhash64(seed, every column Spark can hash)``: where a split key's row goes. A hash
    of the row's own values, not of its position, so that a re-run map task, whatever order
    its input comes in, sends every row where the first run did (Spark retries a lost
    executor's stage only when the shuffle's expressions are deterministic). Rows equal in
    all those columns go alike."""
    from pyspark.sql import functions as F

    hashable = [column(f.name) for f in schema.fields if not holds_a_map(f.dataType)]
    return F.xxhash64(F.lit(seed), *hashable)


def joined_on(
    rows: DataFrame,
    other: DataFrame,
    how: str,
    *,
    null_safe: Sequence[str],
    equal: Sequence[str] = (),
    also: Column | None = None,
    broadcast: bool = False,
) -> DataFrame:
    """``rows`` joined to ``other`` where the ``null_safe`` columns are equal or both null (a
    null key is a group as any other), the ``equal`` columns are equal (a null matches
    nothing) and ``also`` holds; ``other``'s copies of those columns dropped."""
    from pyspark.sql import functions as F

    names = [*null_safe, *equal]
    copies = [f"__keysplit_joined_{i}" for i in range(len(names))]
    other = other.withColumnsRenamed(dict(zip(names, copies, strict=True)))
    condition = also if also is not None else F.lit(True)
    for i, (name, copy) in enumerate(zip(names, copies, strict=True)):
        same = column(name).eqNullSafe(column(copy)) if i < len(null_safe) else column(name) == column(copy)
        condition = condition & same
    return rows.join(F.broadcast(other) if broadcast else other, condition, how).drop(*copies)
