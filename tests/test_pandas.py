"""pandas Series and DataFrames route as their Polars equivalents do (through Arrow)."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pytest

import keysplit

WORDS = ["the", "and", None, "lord", "the", "unto", "and", "the"] * 50


@pytest.mark.parametrize(
    ("series", "nulls"),
    [
        (pd.Series(WORDS, dtype=object), "group"),
        (pd.Series(WORDS, dtype="string[pyarrow]"), "group"),
        (pd.Series([w or "" for w in WORDS], dtype="category"), "raise"),
        (pd.Series(range(400), dtype="int64"), "raise"),
        (pd.Series([None if i % 7 == 0 else i for i in range(400)], dtype="Int64"), "group"),
    ],
    ids=["object", "string[pyarrow]", "category", "int64", "Int64 with nulls"],
)
def test_a_pandas_series_routes_as_its_polars_twin(series: pd.Series, nulls: str) -> None:
    for name in ("key", "pkg", "pdstream"):
        ids = keysplit.Grouper(name, workers=5, seed=4).route(series, nulls=nulls)
        twin = keysplit.Grouper(name, workers=5, seed=4).route(pl.from_pandas(series), nulls=nulls)
        assert pl.Series(ids).equals(pl.Series(twin))


def test_pandas_nulls_are_refused_and_counted() -> None:
    with pytest.raises(ValueError, match=r"hold 50 null\(s\)"):
        keysplit.Grouper("pkg", workers=3).route(pd.Series(WORDS, dtype=object))


def test_a_pandas_frame_routes_as_its_polars_twin() -> None:
    frame = pd.DataFrame({"word": WORDS, "n": range(len(WORDS))})
    routed = keysplit.route(frame, key="word", grouper=keysplit.Grouper("w_choices", workers=4), nulls="group")
    twin = keysplit.route(
        pl.from_pandas(frame), key="word", grouper=keysplit.Grouper("w_choices", workers=4), nulls="group"
    )
    assert isinstance(routed, pl.DataFrame) and routed.equals(twin)
