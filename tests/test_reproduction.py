"""keysplit.reproduction and ``keysplit reproduce``, at small scale.

The assertions are properties the groupers must have on the papers' workloads and the
orderings the papers state, never the numbers of one run.
"""

from __future__ import annotations

import polars as pl
import pytest

from keysplit import reproduction
from keysplit.cli import main


def test_paper_numbers_are_cited_and_unique() -> None:
    table = reproduction.PAPER_NUMBERS
    assert table.height > 0
    assert table["source"].str.len_chars().min() > 0
    keys = ["experiment", "grouper", "workers", "param", "value", "metric"]
    assert table.select(keys).is_duplicated().sum() == 0
    assert set(table["experiment"]) <= set(reproduction.EXPERIMENTS)


def test_pkg_lands_on_the_two_choice_bound_of_pdstream_fig_8() -> None:
    # At z = 2.0 the top key holds 60.7% of the stream; PKG halves it over two workers:
    # λ = 0.607/2·64 − 1 = 18.4 at p = 64, the paper's 18.45.
    frame = reproduction.pdstream(0.01, zs=(2.0,), workers=(64,), groupers=("pkg", "w_choices"))
    pkg = frame.filter(pl.col("grouper") == "pkg", pl.col("metric") == "lambda")
    assert pkg["ours"].item() == pytest.approx(0.607 / 2 * 64 - 1, rel=0.03)
    assert pkg["paper"].item() == 18.45
    assert pkg["rel_diff"].item() == pytest.approx((pkg["ours"].item() - 18.45) / 18.45)
    wc = frame.filter(pl.col("grouper") == "w_choices", pl.col("metric") == "lambda")["ours"].item()
    assert wc < 0.01 < pkg["ours"].item()


def test_dkg_experiment_properties() -> None:
    frame = reproduction.dkg(0.2)
    distcost = frame.filter(pl.col("metric") == "distcost")
    assert (distcost.filter(pl.col("grouper") == "key")["ours"] == 1.0).all()
    # Round robin puts every country that has at least 10 tuples on all 10 workers.
    assert (distcost.filter(pl.col("grouper") == "shuffle", pl.col("value") <= 0.5)["ours"] == 10.0).all()
    stddev = frame.filter(pl.col("metric") == "stddev", pl.col("value") == 0.68)
    by = dict(zip(stddev["grouper"], stddev["ours"], strict=True))
    # A 68% key split over PKG's two workers: loads 34, 34 and 4 ×8 percent, SD 12.0.
    assert by["pkg"] == pytest.approx(12.0, rel=0.05)
    assert by["shuffle"] < 0.01
    assert by["dkg"] < by["pkg"] < by["key"]


def test_holistic_one_choice_groupers_keep_aggregation_cost_at_the_key_count() -> None:
    frame = reproduction.holistic(0.02, workers=(8,))
    for query in (1.0, 3.0):
        rows = frame.filter(pl.col("value") == query)
        keys = rows.filter(pl.col("grouper") == "key", pl.col("metric") == "keys")["ours"].item()
        cost = rows.filter(pl.col("metric") == "aggregation_cost")
        by = dict(zip(cost["grouper"], cost["ours"], strict=True))
        assert by["key"] == by["am"] == by["cam"] == keys
        assert by["shuffle"] == max(by.values())
    q1 = frame.filter(pl.col("value") == 1.0, pl.col("metric") == "imbalance")
    assert q1.filter(pl.col("grouper") == "shuffle")["ours"].item() <= 1.0


def test_elb_rebalances_and_clb_moves_its_state_in_rare_large_steps() -> None:
    frame = reproduction.elb(0.01)
    by = {(g, v, m): o for g, v, m, o in frame.select("grouper", "value", "metric", "ours").iter_rows()}
    for stream in (0.0, 1.0):
        assert by[("elb", stream, "mean_var")] < by[("clb", stream, "mean_var")]
        assert by[("clb", stream, "moved_amortized_pct")] < by[("clb", stream, "moved_pct")]


def test_claims_reports_broken_orderings() -> None:
    rows = [
        ("dkg", g, 10, "skew", s, m, o)
        for s in (0.0, 0.5, 1.0)
        for g, m, o in (
            ("shuffle", "stddev", 0.0),
            ("shuffle", "distcost", 10.0),
            ("key", "stddev", 10.0 * s),
            ("key", "distcost", 1.0),
            ("pkg", "stddev", 5.0 * s),
            ("pkg", "distcost", 2.0),
            ("dkg", "stddev", 9.0 * s),  # worse than PKG above 30%: the claim must fail
            ("dkg", "distcost", 2.0 + s),
        )
    ]
    frame = pl.DataFrame(
        rows, schema=["experiment", "grouper", "workers", "param", "value", "metric", "ours"], orient="row"
    )
    checked = reproduction.claims(frame)
    failing = checked.filter(~pl.col("holds"))["claim"].to_list()
    assert failing and all("DKG's StdDev below PKG's" in c for c in failing)
    assert checked.filter(pl.col("claim").str.contains("KG's DistCost is 1"))["holds"].all()


def test_scale_is_checked() -> None:
    with pytest.raises(ValueError, match="scale"):
        reproduction.dkg(0.0)
    with pytest.raises(ValueError, match="unknown experiments"):
        list(reproduction.run(["nope"]))


def test_cli_reproduce_writes_the_rows(tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dkg.csv"  # type: ignore[operator]
    assert main(["reproduce", "dkg", "--scale", "0.02", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "== dkg" in printed and "claims the papers state" in printed
    frame = pl.read_csv(out)
    assert {"experiment", "grouper", "workers", "metric", "ours", "paper", "rel_diff"} <= set(frame.columns)
    assert frame.filter(pl.col("paper").is_not_null()).height == 8
    assert main(["reproduce", "nope"]) == 2
    assert main(["reproduce", "dkg", "--scale", "2"]) == 2


def test_cli_renders_a_saved_run_as_markdown(tmp_path: pytest.TempPathFactory) -> None:
    saved = tmp_path / "run.parquet"  # type: ignore[operator]
    tables = tmp_path / "tables.md"  # type: ignore[operator]
    assert main(["reproduce", "dkg", "--scale", "0.02", "--output", str(saved)]) == 0
    assert main(["reproduce", "dkg", "--from", str(saved), "--markdown", str(tables)]) == 0
    text = tables.read_text(encoding="utf-8")
    assert text.startswith(f"Generated by `keysplit reproduce dkg --from {saved}`")
    assert "Paper numbers beside ours" in text and "| dkg | 10 | skew=0.68 | stddev | 4.097 |" in text
    assert "#### Claims stated in words" in text
