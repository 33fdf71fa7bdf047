"""Seeded synthetic streams."""

from __future__ import annotations

import polars as pl
import pytest

from keysplit import _core, datasets


def test_zipf_is_seeded_batched_and_in_range() -> None:
    first = pl.concat(datasets.zipf(keys=100, tuples=10_000, z=1.2, seed=3, batch_rows=3000))
    again = pl.concat(datasets.zipf(keys=100, tuples=10_000, z=1.2, seed=3, batch_rows=7000))
    other = pl.concat(datasets.zipf(keys=100, tuples=10_000, z=1.2, seed=4))
    assert first.schema == pl.Schema({"key": pl.UInt64})
    assert first.height == 10_000
    assert first.equals(again), "batch size does not change the stream"
    assert not first.equals(other)
    assert first["key"].max() < 100


def test_zipf_frequencies_follow_the_law() -> None:
    stream = pl.concat(datasets.zipf(keys=1000, tuples=200_000, z=1.0, seed=0))["key"]
    top_share = (stream == 0).mean()
    expected = _core.ZipfStream(1000, 1.0, 0).probability(0)
    # H_1000 = 7.485..., so p_0 = 0.1336; the binomial sd of the share is 0.00076.
    assert expected == pytest.approx(1 / 7.485470860550345)
    assert abs(top_share - expected) < 5 * 0.00076


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keys": 0}, "keys must be between 1 and"),
        ({"z": -1.0}, "z must be a finite number >= 0"),
        ({"tuples": -5}, "tuples must be a non-negative int"),
        ({"batch_rows": 0}, "batch_rows must be positive"),
    ],
)
def test_bad_parameters_raise(kwargs: dict, message: str) -> None:
    args = {"keys": 10, "tuples": 10, "z": 1.0} | kwargs
    with pytest.raises(ValueError, match=message):
        list(datasets.zipf(**args))
