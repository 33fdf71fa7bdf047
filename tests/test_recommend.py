"""keysplit.recommend and `keysplit recommend`: every grouper on the user's sample, the
Pareto front, the offline bound and the pick under the stated cost model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import keysplit
from keysplit import metrics
from keysplit._recommend import TABLE_COLUMNS, rank
from keysplit.plots import pareto_figure
from test_cli import keysplit_command

SAMPLE = pl.concat(keysplit.datasets.zipf(keys=20_000, tuples=200_000, z=1.5, seed=4))["key"]
FEW = ["key", "pkg", "w_choices", "pdstream", "elastic", "shuffle"]


@pytest.fixture(scope="module")
def found() -> keysplit.Recommendation:
    return keysplit.recommend(SAMPLE, workers=32, progress=False)


def test_every_grouper_is_ranked_and_the_pick_is_on_the_front(found: keysplit.Recommendation) -> None:
    table = found.table
    assert table.columns == list(TABLE_COLUMNS)
    assert sorted(table["grouper"]) == sorted(info.name for info in keysplit.groupers())
    assert table["cost"].is_sorted()
    picked = table.filter(pl.col("recommended"))
    assert picked.height == 1 and picked["pareto"].item()
    assert found.grouper == picked["grouper"].item() == "elastic"
    assert (found.tuples, found.keys) == (SAMPLE.len(), SAMPLE.n_unique())
    bound = metrics.replication_bound(SAMPLE.to_frame("key"), workers=32)
    assert table["replication_bound"].to_list() == pytest.approx([bound] * table.height)
    assert "elastic" in repr(found) and "γ*" in repr(found)


def test_the_front_is_exactly_the_undominated_groupers(found: keysplit.Recommendation) -> None:
    rows = found.table.select("grouper", "load_imbalance", "replication_factor", "pareto").rows()
    for name, lam, gamma, on_front in rows:
        beaten = any(
            (l2 <= lam and g2 <= gamma) and (l2 < lam or g2 < gamma) for other, l2, g2, _ in rows if other != name
        )
        assert on_front == (not beaten), name


def test_the_weight_moves_the_pick_between_balance_and_merging(found: keysplit.Recommendation) -> None:
    front = found.table.filter(pl.col("pareto"))
    balance = rank(found.results, weight=1.0).filter(pl.col("recommended")).row(0, named=True)
    assert balance["load_imbalance"] == front["load_imbalance"].min()
    merging = rank(found.results, weight=0.0).filter(pl.col("recommended")).row(0, named=True)
    assert merging["aggregation_cost"] == front["aggregation_cost"].min()


@pytest.mark.parametrize(
    "sample",
    [
        SAMPLE.to_pandas(),
        SAMPLE.to_arrow(),
        pa.chunked_array([SAMPLE.to_arrow()]),
        SAMPLE.to_list(),
        SAMPLE.to_numpy(),
        SAMPLE.to_frame("user"),
        SAMPLE.to_frame("user").with_columns(other=pl.lit(1)).lazy(),
        pd.DataFrame({"user": SAMPLE.to_numpy(), "other": 1}),
        pa.table({"user": SAMPLE.to_arrow()}),
    ],
    ids=["pandas", "arrow", "chunked", "list", "numpy", "frame", "lazy", "pandas_frame", "arrow_table"],
)
def test_every_input_kind_gives_the_same_table(sample: object) -> None:
    expected = keysplit.recommend(SAMPLE, workers=8, candidates=FEW, progress=False).table
    key = "user" if isinstance(sample, (pl.DataFrame, pl.LazyFrame, pd.DataFrame, pa.Table)) else None
    got = keysplit.recommend(sample, workers=8, key=key, candidates=FEW, progress=False).table
    # Timings differ run to run, and with them nothing else.
    columns = ["grouper", "load_imbalance", "replication_factor", "replication_bound", "aggregation_cost", "pareto"]
    assert got.select(columns).sort("grouper").equals(expected.select(columns).sort("grouper"))


def test_a_file_sample_is_read_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    SAMPLE.to_frame("user").write_parquet(path)
    from_file = keysplit.recommend(path, workers=8, key="user", candidates=FEW, progress=False)
    in_memory = keysplit.recommend(SAMPLE, workers=8, candidates=FEW, progress=False)
    columns = ["grouper", "load_imbalance", "replication_factor", "replication_bound", "aggregation_cost"]
    assert from_file.table.select(columns).sort("grouper").equals(in_memory.table.select(columns).sort("grouper"))


@pytest.mark.parametrize(
    ("sample", "kwargs", "error", "builtin", "message"),
    [
        (SAMPLE, {"workers": 0}, keysplit.ConfigError, ValueError, r"workers must be an int in \[1, 1,048,576\]"),
        (SAMPLE, {"workers": "8"}, keysplit.ConfigTypeError, TypeError, r"workers must be an int in \[1, "),
        (
            SAMPLE,
            {"workers": 8, "weight": 1.5},
            keysplit.ConfigError,
            ValueError,
            r"weight must be a number in \[0, 1\]",
        ),
        (SAMPLE, {"workers": 8, "batch_rows": 0}, keysplit.ConfigError, ValueError, "batch_rows must be a positive"),
        (SAMPLE, {"workers": 8, "max_rows": 0}, keysplit.ConfigError, ValueError, "max_rows must be a positive"),
        (SAMPLE.to_frame("a").with_columns(b=1), {"workers": 8}, keysplit.KeyInputError, ValueError, "key="),
        (SAMPLE.to_frame("a"), {"workers": 8, "key": "user"}, keysplit.KeyInputError, ValueError, "no column 'user'"),
        (SAMPLE.to_frame("a").lazy(), {"workers": 8, "key": "user"}, keysplit.KeyInputError, ValueError, "'user'"),
        (pl.Series("key", [], dtype=pl.UInt64), {"workers": 8}, keysplit.KeyInputError, ValueError, "is empty"),
        (pl.Series("key", ["a", None]), {"workers": 8}, keysplit.KeyInputError, ValueError, "null"),
        ({"a": 1}, {"workers": 8}, keysplit.KeyTypeError, TypeError, "recommend takes a Polars"),
        (SAMPLE, {"workers": 8, "candidates": []}, keysplit.ConfigError, ValueError, "at least one candidate"),
        (SAMPLE, {"workers": 8, "candidates": ["nope"]}, keysplit.ConfigError, ValueError, "nope"),
        (SAMPLE, {"workers": 8, "candidates": ["pkg:d"]}, keysplit.ConfigError, ValueError, "param=value"),
        (
            "/nonexistent/sample.parquet",
            {"workers": 8, "key": "k"},
            keysplit.datasets.MissingFileError,
            FileNotFoundError,
            "sample.parquet",
        ),
    ],
)
def test_bad_input_is_refused_by_name(sample: object, kwargs: dict, error: type, builtin: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        keysplit.recommend(sample, progress=False, **kwargs)
    # Every refusal is a KeysplitError, and still the builtin it was before these classes.
    assert isinstance(caught.value, keysplit.KeysplitError) and isinstance(caught.value, builtin)


def test_rank_refuses_results_of_several_worker_counts(found: keysplit.Recommendation) -> None:
    twice = pl.concat([found.results, found.results.with_columns(workers=pl.lit(64, pl.UInt32))])
    with pytest.raises(keysplit.ConfigError, match="one dataset and one worker count"):
        rank(twice)


def test_the_chart_shows_the_front_and_the_bound(found: keysplit.Recommendation, tmp_path: Path) -> None:
    written = found.chart(tmp_path / "advice.png")
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    whole = found.results.filter(pl.col("window").is_null())
    style = {g: {"color": "black", "marker": "o", "linestyle": "-"} for g in whole["grouper"]}
    figure = pareto_figure(whole, "sample", style)
    (ax,) = figure.axes
    bound = whole["replication_bound"].max()
    assert any(list(line.get_xdata()) == [bound, bound] for line in ax.lines)
    assert f"γ* = {bound:.4g}" in ax.get_title()
    plt.close(figure)


def test_the_cli_prints_the_table_the_pick_and_writes_the_chart(tmp_path: Path) -> None:
    path = tmp_path / "sample.csv"
    SAMPLE.to_frame("user").write_csv(path)
    chart = tmp_path / "chart.png"
    run = subprocess.run(
        [*keysplit_command(), "recommend", str(path), "--key", "user", "--workers", "16", "--no-progress"]
        + ["--groupers", ",".join(FEW), "--chart", str(chart)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "recommended: elastic" in run.stdout
    assert "offline bound γ*" in run.stdout
    assert all(name in run.stdout for name in FEW)
    assert chart.exists()
    missing = subprocess.run(
        [*keysplit_command(), "recommend", str(path), "--workers", "16", "--key", "nope", "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_numpy_keys_are_routed_as_their_values() -> None:
    ints = np.arange(1000, dtype=np.uint64) % 7
    found = keysplit.recommend(ints, workers=4, candidates=["key"], progress=False)
    assert found.keys == 7


def test_ten_million_distinct_keys_route_their_first_rows_within_a_memory_limit(tmp_path: Path) -> None:
    """10^7 distinct keys once aborted the process (a Rust allocation failed under an 8 GB
    address-space limit) after minutes: the first max_rows are routed, and a file's rows
    too, within a 4 GB limit."""
    path = tmp_path / "distinct.parquet"
    pl.DataFrame({"user": np.random.default_rng(2).permutation(10_000_000)}).write_parquet(path)
    script = (
        "import resource, sys, numpy as np, keysplit\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "keys = np.random.default_rng(2).permutation(10_000_000)\n"
        "found = keysplit.recommend(keys, workers=32, progress=False)\n"
        "assert (found.tuples, found.keys) == (1_000_000, 1_000_000), (found.tuples, found.keys)\n"
        "found = keysplit.recommend(sys.argv[1], key='user', workers=32, max_rows=300_000, progress=False)\n"
        "assert (found.tuples, found.keys) == (300_000, 300_000), (found.tuples, found.keys)\n"
        "print(found.grouper)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() in {info.name for info in keysplit.groupers()}
