"""keysplit.reproduction and ``keysplit reproduce``, at small scale.

The assertions are properties the groupers must have on the papers' workloads and the
orderings the papers state, never the numbers of one run.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

import keysplit
from keysplit import reproduction
from keysplit.cli import main
from keysplit.reproduction.cli import _read_rows
from keysplit.reproduction.common import ROW_SCHEMA, with_differences
from test_cli import keysplit_command

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reproduction.md"


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


def dkg_rows(dkg_stddev_per_skew: float = 2.0, paper: dict[tuple[str, str], float] | None = None) -> pl.DataFrame:
    """A complete grid of the dkg experiment at skews 0, 0.5 and 1 in which every claim
    holds unless ``dkg_stddev_per_skew`` exceeds PKG's 5; ``paper`` sets paper numbers
    at skew 0.5 by (grouper, metric)."""
    rows = [
        ("dkg", g, 10, "skew", s, m, o, (paper or {}).get((g, m)) if s == 0.5 else None)
        for s in (0.0, 0.5, 1.0)
        for g, m, o in (
            ("shuffle", "stddev", 0.0),
            ("shuffle", "distcost", 10.0),
            ("key", "stddev", 10.0 * s),
            ("key", "distcost", 1.0),
            ("pkg", "stddev", 5.0 * s),
            ("pkg", "distcost", 2.0),
            ("dkg", "stddev", dkg_stddev_per_skew * s),
            ("dkg", "distcost", 2.0 + s),
        )
    ]
    schema = {**ROW_SCHEMA, "paper": pl.Float64}
    return with_differences(pl.DataFrame(rows, schema=schema, orient="row"))


def test_claims_reports_broken_orderings() -> None:
    frame = dkg_rows(dkg_stddev_per_skew=9.0)  # worse than PKG above 30%: the claim must fail
    checked = reproduction.claims(frame)
    failing = checked.filter(~pl.col("holds"))["claim"].to_list()
    assert failing and all("DKG's StdDev below PKG's" in c for c in failing)
    assert checked.filter(pl.col("claim").str.contains("KG's DistCost is 1"))["holds"].all()


def test_scale_is_checked() -> None:
    with pytest.raises(ValueError, match="scale"):
        reproduction.dkg(0.0)
    with pytest.raises(ValueError, match='unknown experiment "pdstrem"; did you mean "pdstream"'):
        reproduction.run(["dkg", "pdstrem"])  # refused before dkg runs, not when iterated
    with pytest.raises(ValueError, match="scale"):
        reproduction.run(["dkg"], 1.5)
    assert reproduction.experiment_names(["flexd_delta", "dkg", "flexd"]) == ["flexd", "dkg"]
    assert reproduction.experiment_names(["all"]) == list(reproduction.EXPERIMENTS)


def test_cli_reproduce_writes_the_rows(tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dkg.csv"  # type: ignore[operator]
    assert main(["reproduce", "dkg", "--scale", "0.02", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "== dkg" in printed and "claims the papers state" in printed
    frame = pl.read_csv(out)
    assert {"experiment", "grouper", "workers", "metric", "ours", "paper", "rel_diff", "abs_diff"} <= set(frame.columns)
    assert frame.filter(pl.col("paper").is_not_null()).height == 8


def test_cli_renders_a_saved_run_as_markdown(tmp_path: pytest.TempPathFactory) -> None:
    saved = tmp_path / "run.parquet"  # type: ignore[operator]
    tables = tmp_path / "tables.md"  # type: ignore[operator]
    assert main(["reproduce", "dkg", "--scale", "0.02", "--output", str(saved)]) == 0
    assert main(["reproduce", "dkg", "--from", str(saved), "--markdown", str(tables)]) == 0
    text = tables.read_text(encoding="utf-8")
    assert text.startswith(f"Generated by `keysplit reproduce dkg --from {saved}`")
    assert "Paper numbers beside ours" in text and "| dkg | 10 | skew=0.68 | stddev | 4.097 |" in text
    assert "#### Claims stated in words" in text


# --- the report: summary first, near-zero paper numbers, progress, argument checks, docs --


def test_summary_counts_numbers_and_claims_and_gives_a_verdict_per_paper() -> None:
    close = {("key", "stddev"): 5.2, ("shuffle", "stddev"): 0.0}  # ours 5.0 and 0.0
    passing = reproduction.summary(dkg_rows(paper=close))
    assert passing.to_dicts() == [
        {
            "paper": "Dynamic Key Grouping",
            "numbers": 2,
            "within_15pct": 1,
            "over_15pct": 0,
            "near_zero": 1,
            "claims_held": 10,
            "claims_failed": 0,
            "unexplained": 0,
            "verdict": "PASS",
        }
    ]
    # docs/reproduction.md explains DistCost over 15% (the stand-in stream has no rare keys).
    explained = reproduction.summary(dkg_rows(paper={**close, ("pkg", "distcost"): 1.16}))
    assert explained.select("over_15pct", "unexplained", "verdict").row(0) == (1, 0, "KNOWN")
    # Key grouping's StdDev 50% off is explained nowhere, nor is DKG above PKG.
    off = reproduction.summary(dkg_rows(paper={("key", "stddev"): 10.0}))
    assert off.select("over_15pct", "unexplained", "verdict").row(0) == (1, 1, "FAIL")
    broken = reproduction.summary(dkg_rows(dkg_stddev_per_skew=9.0))
    assert broken.select("numbers", "claims_failed", "unexplained", "verdict").row(0) == (0, 2, 2, "FAIL")
    # A side experiment alone has neither paper numbers nor claims.
    seeds = reproduction.pdstream_pkg_seeds(0.01, seeds=range(2))
    assert reproduction.summary(seeds).select("paper", "numbers", "verdict").row(0) == ("Pd-Stream", 0, "–")


def _documented_run() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The paper numbers and claims of the scale-1 run rendered in docs/reproduction.md."""
    numbers, claims = [], []
    experiment = None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"#### `(\w+)`", line):
            experiment = heading[1]
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) == 8 and re.fullmatch(r"\w+=[-0-9.e+]+", cells[2]):
            param, value = cells[2].split("=")
            numbers.append(
                (experiment, cells[0], int(cells[1]), param, float(value), cells[3], float(cells[5]), float(cells[4]))
            )
        elif len(cells) == 4 and cells[3] in ("True", "False"):
            claims.append((*cells[:3], cells[3] == "True"))
    schema = {**ROW_SCHEMA, "paper": pl.Float64}
    frame = with_differences(pl.DataFrame(numbers, schema=schema, orient="row"))
    checked = pl.DataFrame(claims, schema=["experiment", "claim", "source", "holds"], orient="row")
    return frame, checked


def test_every_miss_of_the_documented_run_is_one_the_docs_explain() -> None:
    frame, checked = _documented_run()
    assert frame.height > 50 and checked.height > 200
    verdicts = dict(reproduction.summary(frame, checked).select("paper", "verdict").iter_rows())
    assert verdicts == dict.fromkeys(
        [
            "Pd-Stream",
            "Dynamic Key Grouping",
            "Holistic partitioning costs",
            "ELB/CLB",
            "FlexD",
            "Beyond the papers (elastic's targets)",
        ],
        "KNOWN",
    )


def test_no_relative_difference_against_a_paper_number_at_zero(tmp_path: Path) -> None:
    rows = dkg_rows(paper={("shuffle", "stddev"): 0.0, ("pkg", "stddev"): 1e-6, ("key", "stddev"): 4.0})
    stated = rows.filter(pl.col("paper").is_not_null()).sort("grouper")
    assert stated.select("grouper", "rel_diff", "abs_diff").rows() == [
        ("key", pytest.approx(0.25), pytest.approx(1.0)),
        ("pkg", None, pytest.approx(2.5 - 1e-6)),
        ("shuffle", None, 0.0),
    ]
    text = reproduction.markdown(rows, "test")
    assert "| shuffle | 10 | skew=0.5 | stddev | 0 | 0 | – |  |" in text
    assert "| pkg | 10 | skew=0.5 | stddev | 1e-06 | 2.5 | – |  |" in text
    assert "| key | 10 | skew=0.5 | stddev | 4 | 5 | 25 | **>15%** |" in text
    # A file written before the rule, with the division by zero in it, is re-read by it.
    saved = tmp_path / "old.csv"
    rows.drop("abs_diff").with_columns(
        ((pl.col("ours") - pl.col("paper")) / pl.col("paper")).alias("rel_diff")
    ).write_csv(saved)
    tables = tmp_path / "tables.md"
    subprocess.run(
        [*keysplit_command(), "reproduce", "dkg", "--from", str(saved), "--markdown", str(tables)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "| shuffle | 10 | skew=0.5 | stddev | 0 | 0 | – |  |" in tables.read_text(encoding="utf-8")


def test_cli_prints_the_summary_before_the_tables(tmp_path: Path) -> None:
    saved = tmp_path / "dkg.json"
    run = subprocess.run(
        [*keysplit_command(), "reproduce", "dkg", "--scale", "0.02", "--no-progress", "--output", str(saved)],
        check=True,
        capture_output=True,
        text=True,
    )
    expected = reproduction.summary(_read_rows(str(saved))).row(0, named=True)
    lines = run.stdout.splitlines()
    assert lines[0] == "== summary per paper"
    summary_line = next(line for line in lines if "Dynamic Key Grouping" in line)
    cells = [c.strip() for c in re.split(r"[│┆]", summary_line) if c.strip()]
    assert cells == [str(v) for v in expected.values()]
    assert expected["numbers"] == 8 and expected["verdict"] in ("PASS", "KNOWN", "FAIL")
    assert (
        lines.index(summary_line)
        < lines.index("== dkg (scale 0.02)")
        < lines.index("== claims the papers state in words")
    )
    tables = tmp_path / "tables.md"
    subprocess.run(
        [*keysplit_command(), "reproduce", "dkg", "--from", str(saved), "--markdown", str(tables)],
        check=True,
        capture_output=True,
        text=True,
    )
    text = tables.read_text(encoding="utf-8")
    assert text.index("#### Summary") < text.index("#### `dkg`")
    assert f"| Dynamic Key Grouping | 8 | {expected['within_15pct']} |" in text


def test_run_reports_each_experiment_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    frames = list(reproduction.run(["dkg"], 0.02, progress=True))
    assert len(frames) == 1
    err = capsys.readouterr().err
    assert "[1/1] dkg (scale 0.02) …" in err
    assert re.search(r"\[1/1\] dkg done in \d+\.\d s", err)
    list(reproduction.run(["dkg"], 0.02))
    assert capsys.readouterr().err == ""


def test_cli_progress_goes_to_stderr_and_no_progress_silences_it() -> None:
    command = [*keysplit_command(), "reproduce", "dkg,elb", "--scale", "0.01"]
    run = subprocess.run(command, check=True, capture_output=True, text=True)
    starts = [line for line in run.stderr.splitlines() if line.endswith("…")]
    ends = [line for line in run.stderr.splitlines() if re.fullmatch(r"\[\d/2\] \w+ done in \d+\.\d s", line)]
    assert starts == ["[1/2] dkg (scale 0.01) …", "[2/2] elb (scale 0.01) …"]
    assert [line.split()[1] for line in ends] == ["dkg", "elb"]
    assert "…" not in run.stdout and "done in" not in run.stdout
    quiet = subprocess.run([*command, "--no-progress"], check=True, capture_output=True, text=True)
    assert quiet.stderr == "" and quiet.stdout.startswith("== summary per paper")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["dkg,pdstrem"], 'unknown experiment "pdstrem"; did you mean "pdstream"? known experiments: pdstream,'),
        ([","], "no experiment given"),
        (["dkg", "--scale", "0"], "scale must be in (0, 1], got 0.0"),
        (["dkg", "--scale", "1.5"], "scale must be in (0, 1], got 1.5"),
        (["dkg", "--output", "rows.txt"], "end the name with .parquet, .csv, .json"),
        (["dkg", "--output", "missing/rows.csv"], "there is no directory 'missing'"),
        (["dkg", "--markdown", "missing/tables.md"], "there is no directory 'missing'"),
        (["dkg", "--from", "missing.parquet"], "'missing.parquet': no such file"),
        (["dkg", "--from", "rows.txt"], "end the name with .parquet, .csv, .json"),
    ],
)
def test_cli_refuses_bad_arguments_before_running_anything(tmp_path: Path, arguments: list[str], message: str) -> None:
    run = subprocess.run([*keysplit_command(), "reproduce", *arguments], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2
    assert message in run.stderr and "keysplit reproduce: error: argument" in run.stderr
    # Nothing ran: no progress line, no table, no file.
    assert "[1/" not in run.stderr and run.stdout == "" and list(tmp_path.iterdir()) == []


def _reproduction_modules() -> list[ModuleType]:
    """The package keysplit.reproduction and each of its modules."""
    names = [info.name for info in pkgutil.iter_modules(reproduction.__path__, f"{reproduction.__name__}.")]
    return [reproduction, *(importlib.import_module(name) for name in names)]


def test_docs_and_modules_cite_public_references_not_team_files() -> None:
    text = DOCS.read_text(encoding="utf-8")
    sources = [inspect.getsource(module) for module in _reproduction_modules()]
    assert len(sources) > 1
    for place in (text, *sources):
        assert "papers/" not in place and "spec/" not in place and "our copy" not in place
    # One section per paper, each heading with its year; then keysplit's own grouper.
    headings = [line for line in text.splitlines() if line.startswith("## ") and "Verdict" not in line]
    assert headings[-1] == "## Beyond the papers"
    headings = headings[:-1]
    assert len(headings) == 5
    assert all(re.search(r"\b20[0-2]\d\b", heading) for heading in headings), headings
    # Each paper is cited by the title the grouper registry gives it.
    papers = {info.name: info.paper.lower() for info in keysplit.groupers()}
    for grouper, title in (
        ("pdstream", "a popularity-aware discriminative grouping strategy in distributed stream computing systems"),
        ("flexd", "adaptive key partitioning in distributed stream processing"),
        ("dkg", "dynamic key grouping: a load balancing algorithm for distributed stream processing engines"),
        ("cm", "a holistic view of stream partitioning costs"),
        ("elb", "stateful load balancing for parallel stream processing"),
    ):
        assert title in papers[grouper] and title in " ".join(text.lower().split()), title


def _beyond_rows(stream: str, workers: int, window: int, values: dict[str, dict[str, float]]) -> list[dict]:
    return [
        {
            "experiment": "beyond",
            "grouper": g,
            "workers": workers,
            "param": stream,
            "value": float(window),
            "metric": metric,
            "ours": v,
        }
        for g, metrics_of in values.items()
        for metric, v in metrics_of.items()
    ]


def test_beyond_checks_elastics_targets_against_every_grouper() -> None:
    from keysplit.reproduction import beyond_papers

    readme = {
        "elastic": {"lambda": 0.004, "gamma": 1.01, "gamma_bound": 1.002},
        "w_choices": {"lambda": 0.0, "gamma": 1.22, "gamma_bound": 1.002},
        "key": {"lambda": 11.0, "gamma": 1.0, "gamma_bound": 1.002},
    }
    preset = {
        "elastic": {"lambda": 0.003, "gamma": 1.09, "gamma_bound": 1.026},
        "dagreedy": {"lambda": 0.002, "gamma": 1.08, "gamma_bound": 1.026},
    }
    windows = {
        g: {"window_lambda_mean": v, "window_lambda_max": 2 * v}
        for g, v in {"elastic": 0.01, "w_choices": 0.02, "d_choices": 0.004}.items()
    }
    rows = (
        _beyond_rows(beyond_papers.README_ZIPF, 32, 0, readme)
        + _beyond_rows("pdstream:z=2", 128, 0, preset)
        + _beyond_rows("kjv", 128, 100_000, windows)
    )
    frame = pl.DataFrame(rows, schema=ROW_SCHEMA).with_columns(paper=pl.lit(None, pl.Float64))
    holds = {row["claim"]: row["holds"] for row in beyond_papers.claims(frame)}
    assert holds == {
        f"{beyond_papers.README_ZIPF} n=32: elastic's λ ≤ 0.01 and γ ≤ 1.03": True,
        f"{beyond_papers.README_ZIPF} n=32: no grouper beats elastic on both λ and γ": True,
        # γ − 1 = 0.09 > 2·0.026 + 0.03, and DAGreedy is better on both.
        "pdstream:z=2 n=128: elastic's λ ≤ 0.01 and γ − 1 ≤ 2(γ* − 1) + 0.03": False,
        "pdstream:z=2 n=128: no grouper beats elastic on both λ and γ": False,
        "kjv, windows of 100,000: elastic's mean window λ ≤ the better of W-C's and D-C's": False,
    }
    markdown = beyond_papers.markdown(frame)
    assert (
        "##### pdstream:z=2, 128 workers" in markdown
        and "##### kjv, 128 workers, windows of 100,000 tuples" in markdown
    )
