"""The papers' workloads in keysplit.datasets.papers."""

from __future__ import annotations

import math

import polars as pl
import pytest

from keysplit import _core, datasets
from keysplit.datasets import papers


def _all(batches: object) -> pl.DataFrame:
    return pl.concat(list(batches))  # type: ignore[arg-type]


@pytest.mark.parametrize("z", sorted(papers.PDSTREAM_TABLE_IV))
def test_pdstream_key_universe_gives_table_iv_top_share(z: float) -> None:
    top = _core.ZipfStream(papers.PDSTREAM_KEY_UNIVERSE, z, 0).probability(0)
    # Table IV prints p_1st to 0.1 percentage point.
    assert top == pytest.approx(papers.PDSTREAM_TABLE_IV[z]["p_1st"], abs=0.0011)


def test_pdstream_zipf_is_the_seeded_zipf_stream() -> None:
    stream = _all(datasets.pdstream_zipf(2.0, tuples=100_000, seed=1, batch_rows=30_000))
    again = _all(datasets.pdstream_zipf(2.0, tuples=100_000, seed=1))
    assert stream.equals(again)
    share = (stream["key"] == 0).mean()
    sd = math.sqrt(0.607 * 0.393 / 100_000)
    assert abs(share - 0.607) < 5 * sd + 0.001


@pytest.mark.parametrize("skewness", [0.0, 0.3, 0.68, 1.0])
def test_country_skew_has_204_countries_and_the_hot_share(skewness: float) -> None:
    tuples = 100_000
    stream = _all(datasets.dkg_country_skew(skewness, tuples=tuples, seed=2, batch_rows=40_000))
    assert stream.schema == pl.Schema({"key": pl.String})
    assert stream.height == tuples
    counts = stream["key"].value_counts()
    assert counts.height <= papers.DKG_COUNTRIES
    if skewness < 1.0:
        assert counts.height == papers.DKG_COUNTRIES
    hot = (stream["key"] == "country-000").mean()
    expected = skewness if skewness > 0 else 1 / papers.DKG_COUNTRIES
    sd = math.sqrt(expected * (1 - expected) / tuples)
    assert abs(hot - expected) < 5 * sd + 1e-9
    assert stream.equals(_all(datasets.dkg_country_skew(skewness, tuples=tuples, seed=2)))


def test_country_skew_rejects_bad_skewness() -> None:
    with pytest.raises(ValueError, match="skewness"):
        next(datasets.dkg_country_skew(1.5, tuples=10))
    with pytest.raises(ValueError, match="tuples"):
        next(datasets.dkg_country_skew(0.5, tuples=-1))


@pytest.mark.parametrize("distribution", ["gaussian", "zipf"])
def test_elb_substreams_windows_and_range(distribution: str) -> None:
    stream = _all(datasets.elb_substreams(distribution, windows=4, window_tuples=25_000, batch_rows=9_999))
    assert stream.height == 100_000
    assert stream["key"].min() >= 1 and stream["key"].max() <= 100
    assert stream["window"].value_counts().sort("window")["count"].to_list() == [25_000] * 4
    assert stream["window"].is_sorted()


def test_elb_gaussian_and_zipf_have_the_same_mean() -> None:
    # Section 5: "The means for Gaussian and Zipf are set as the same."
    means = {
        d: _all(datasets.elb_substreams(d, windows=1, window_tuples=200_000, seed=3))["key"].mean()
        for d in ("gaussian", "zipf")
    }
    assert means["gaussian"] == pytest.approx(means["zipf"], rel=0.02)
    gaussian = _all(datasets.elb_substreams("gaussian", windows=1, window_tuples=200_000, seed=3))["key"]
    zipf = _all(datasets.elb_substreams("zipf", windows=1, window_tuples=200_000, seed=3))["key"]
    assert zipf.std() > gaussian.std(), "S2 is the more skewed stream"


def test_elb_substreams_rejects_unknown_distribution() -> None:
    with pytest.raises(ValueError, match="distribution"):
        next(datasets.elb_substreams("uniform"))


def test_tpch_q1_keys_are_four_groups_with_q1_shares() -> None:
    tuples = 200_000
    stream = _all(datasets.tpch_q1_keys(tuples=tuples, seed=4, batch_rows=70_000))
    shares = stream["key"].value_counts()
    assert set(shares["key"].to_list()) == set(papers.TPCH_Q1_GROUPS)
    total = sum(papers.TPCH_Q1_GROUPS.values())
    for key, count in shares.iter_rows():
        expected = papers.TPCH_Q1_GROUPS[key] / total
        assert abs(count / tuples - expected) < 5 * math.sqrt(expected * (1 - expected) / tuples)


def test_tpch_q3_keys_are_contiguous_groups_of_one_to_seven_rows() -> None:
    stream = _all(datasets.tpch_q3_keys(groups=20_000, seed=5, batch_rows=7_000))
    assert stream["key"].is_sorted()
    sizes = stream["key"].value_counts()["count"]
    assert sizes.len() == 20_000
    assert sizes.min() >= 1 and sizes.max() <= 7
    assert sizes.mean() == pytest.approx(4.0, rel=0.03)
    assert all(b.height <= 7_000 for b in datasets.tpch_q3_keys(groups=20_000, seed=5, batch_rows=7_000))
    assert stream.equals(_all(datasets.tpch_q3_keys(groups=20_000, seed=5)))
    assert _all(datasets.tpch_q3_keys()).select(pl.col("key").n_unique()).item() == papers.TPCH_Q3_GROUPS
