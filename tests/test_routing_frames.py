"""keysplit.route over Polars DataFrames and LazyFrames."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keysplit


def frame(rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"key": [f"k{i % 7}" for i in range(rows)], "value": list(range(rows))},
        schema={"key": pl.String, "value": pl.Int64},
    )


@given(rows=st.integers(0, 500), batch_rows=st.one_of(st.none(), st.integers(1, 200)), lazy=st.booleans())
def test_routing_a_frame_keeps_row_order_and_equals_routing_its_column(
    rows: int, batch_rows: int | None, lazy: bool
) -> None:
    data = frame(rows)
    expected = keysplit.Grouper("pkg", workers=5, seed=2).route(data["key"]).to_list()
    source = data.lazy() if lazy else data
    routed = keysplit.route(
        source, key="key", grouper=keysplit.Grouper("pkg", workers=5, seed=2), batch_rows=batch_rows
    )
    assert routed.columns == ["key", "value", "worker"]
    assert routed.schema["worker"] == pl.UInt32
    assert routed["value"].to_list() == list(range(rows))
    assert routed["worker"].to_list() == expected


def test_route_batches_yields_bounded_batches_in_order() -> None:
    grouper = keysplit.Grouper("key", workers=3)
    batches = list(keysplit.route_batches(frame(1000).lazy(), key="key", grouper=grouper, batch_rows=128))
    assert all(b.height <= 128 for b in batches)
    assert pl.concat(batches)["value"].to_list() == list(range(1000))


def test_a_custom_output_column_and_the_null_policy_pass_through() -> None:
    data = pl.DataFrame({"key": ["a", None, "a"]})
    with pytest.raises(ValueError, match="null"):
        keysplit.route(data, key="key", grouper=keysplit.Grouper("key", workers=4))
    routed = keysplit.route(data, key="key", grouper=keysplit.Grouper("key", workers=4), out="w", nulls="group")
    assert routed.columns == ["key", "w"]
    assert routed["w"][0] == routed["w"][2]


def test_an_all_null_column_routes_under_the_group_policy() -> None:
    data = pl.DataFrame({"key": [None, None]})
    assert data.schema["key"] == pl.Null
    routed = keysplit.route(data, key="key", grouper=keysplit.Grouper("key", workers=4), nulls="group")
    assert routed["worker"].n_unique() == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"key": "missing"}, ValueError, "key column 'missing' is not in the frame; columns: \\['key', 'value'\\]"),
        ({"key": "key", "out": "value"}, ValueError, "output column 'value' already exists"),
        ({"key": "key", "grouper": "pkg"}, TypeError, "grouper must be a keysplit.Grouper, got str"),
        ({"key": "key", "batch_rows": 0}, ValueError, "batch_rows must be a positive int"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs: dict, error: type, message: str) -> None:
    kwargs.setdefault("grouper", keysplit.Grouper("key", workers=2))
    with pytest.raises(error, match=message):
        keysplit.route(frame(3), **kwargs)


def test_frames_only() -> None:
    with pytest.raises(TypeError, match="frame must be a Polars or pandas DataFrame or a LazyFrame, got dict"):
        keysplit.route({"key": [1]}, key="key", grouper=keysplit.Grouper("key", workers=2))  # type: ignore[arg-type]


def test_an_empty_lazy_frame_routes_to_an_empty_frame_with_the_output_column() -> None:
    empty = frame(0).lazy()
    routed = keysplit.route(empty, key="key", grouper=keysplit.Grouper("key", workers=2))
    assert routed.height == 0
    assert routed.schema == pl.Schema({"key": pl.String, "value": pl.Int64, "worker": pl.UInt32})


@pytest.mark.parametrize("name", ["pkg", "pdstream", "d_choices"])
def test_routing_a_frame_is_all_or_nothing(tmp_path, name: str) -> None:
    # 300,000 keys then 5 nulls, read in batches: the refusal leaves the grouper untouched
    # and counts the nulls of the whole frame, not of one batch.
    keys = pl.Series("k", list(range(300_000)) + [None] * 5, dtype=pl.Int64)
    path = tmp_path / "keys.parquet"
    pl.DataFrame({"k": keys}).write_parquet(path)
    grouper = keysplit.Grouper(name, workers=4, seed=2)
    grouper.route(pl.Series([7, 8, 9]))
    before = grouper.snapshot()
    for frame in (pl.scan_parquet(path), pl.read_parquet(path)):
        with pytest.raises(ValueError, match=r"hold 5 null\(s\) in the whole frame; nothing was routed"):
            keysplit.route(frame, key="k", grouper=grouper, batch_rows=100_000)
        assert grouper.snapshot() == before
    assert sum(grouper.loads) == 3
    # After the refusal it routes on as if the refused frame had never been seen.
    fresh = keysplit.Grouper.restore(before)
    clean = pl.DataFrame({"k": keys.drop_nulls()})
    assert keysplit.route(clean, key="k", grouper=grouper, batch_rows=100_000)["worker"].equals(
        keysplit.route(clean, key="k", grouper=fresh, batch_rows=100_000)["worker"]
    )
