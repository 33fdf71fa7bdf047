"""The keysplit command line, run through the installed entry point."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import keysplit


def keysplit_command() -> list[str]:
    script = Path(sys.executable).with_name("keysplit")
    return [str(script)] if script.exists() else [shutil.which("keysplit") or "keysplit"]


def test_simulate_prints_imbalance_and_replication_per_grouper(tmp_path: Path) -> None:
    output = tmp_path / "results.csv"
    run = subprocess.run(
        [
            *keysplit_command(),
            "simulate",
            "--tuples",
            "200000",
            "--keys",
            "1000",
            "--z",
            "1.4",
            "--output",
            str(output),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "load_imbalance" in run.stdout and "replication_factor" in run.stdout
    table = pl.read_csv(output)
    rows = {r["grouper"]: r for r in table.iter_rows(named=True)}
    assert set(rows) == {"shuffle", "key", "pkg"}
    # Shuffle balances perfectly and replicates hot keys on every worker; key grouping
    # never replicates; PKG sits in between on both counts.
    assert rows["shuffle"]["load_imbalance"] < 1e-3
    assert rows["key"]["replication_factor"] == 1.0
    assert rows["pkg"]["load_imbalance"] < rows["key"]["load_imbalance"]
    assert 1.0 < rows["pkg"]["replication_factor"] <= 2.0 < rows["shuffle"]["replication_factor"]


def test_groupers_lists_papers() -> None:
    run = subprocess.run([*keysplit_command(), "groupers"], check=True, capture_output=True, text=True)
    assert "pkg" in run.stdout and "ICDE 2015" in run.stdout


def test_errors_are_reported_without_a_traceback() -> None:
    run = subprocess.run([*keysplit_command(), "simulate", "--groupers", "nope"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "keysplit: error: unknown grouper" in run.stderr
    assert "Traceback" not in run.stderr


def test_simulate_runs_every_combination_and_plot_reads_it(tmp_path: Path) -> None:
    output = tmp_path / "results.parquet"
    subprocess.run(
        [
            *keysplit_command(),
            "simulate",
            "--groupers",
            "key,pkg,flexd:delta=2.0,threshold=0.1",
            "--workers",
            "4,8",
            "--z",
            "1.0,1.5",
            "--tuples",
            "20000",
            "--keys",
            "500",
            "--datasets",
            "zipf",
            "nycflights:key=carrier",
            "--windows",
            "none,10000",
            "--output",
            str(output),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    results = pl.read_parquet(output)
    whole = results.filter(pl.col("window").is_null())
    # 3 groupers x 2 worker counts x 3 datasets (zipf at two z, flights) x 2 window sizes.
    assert whole.height == 3 * 2 * 3 * 2
    assert set(whole["grouper"]) == {"key", "pkg", "flexd:delta=2.0,threshold=0.1"}
    assert whole.filter(pl.col("dataset") == "nycflights:key=carrier")["tuples"].unique().to_list() == [336_776]
    plot = subprocess.run(
        [*keysplit_command(), "plot", str(output), "--out", str(tmp_path / "plots")],
        check=True,
        capture_output=True,
        text=True,
    )
    assert (tmp_path / "plots" / "report.html").exists() and "report.html" in plot.stdout
    # Readable file names, and the per-window chart once for each worker count.
    names = {Path(line).name for line in plot.stdout.split()}
    assert {"pareto-nycflights-carrier.png", "pareto-zipf-keys500-tuples20000-z1.0.png"} <= names
    for workers in (4, 8):
        assert f"windows-nycflights-carrier-n{workers}-w10000.png" in names
        assert f"windows-zipf-keys500-tuples20000-z1.5-n{workers}-w10000.png" in names
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", name) for name in names), names


def test_run_steps_go_to_stderr_with_their_seconds_and_no_progress_silences_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """keysplit run's helper: a line as each step starts and ends, on stderr (the tables
    keep stdout), what the step found on its last line; a failing step says so."""
    from keysplit._progress import PhaseProgress

    with PhaseProgress("keysplit run", None) as shown:
        with shown.step("reading kjv") as step:
            step.outcome = "789,684 words"
        with pytest.raises(RuntimeError), shown.step("Spark's own groupBy"):
            raise RuntimeError("lost")
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 4
    assert re.fullmatch(r"keysplit run \[0:0\d\] reading kjv …", lines[0])
    assert re.fullmatch(r"keysplit run \[0:0\d\] reading kjv: done in \d+\.\d s \(789,684 words\)", lines[1])
    assert re.fullmatch(r"keysplit run \[0:0\d\] Spark's own groupBy: failed after \d+\.\d s", lines[3])
    with PhaseProgress("keysplit run", False) as shown, shown.step("reading kjv"):
        pass
    assert capsys.readouterr() == ("", "")
    help_text = subprocess.run([*keysplit_command(), "run", "--help"], check=True, capture_output=True, text=True)
    assert "--no-progress" in help_text.stdout


def test_missing_dataset_sources_are_reported(tmp_path: Path) -> None:
    run = subprocess.run(
        [*keysplit_command(), "simulate", "--datasets", f"file:path={tmp_path / 'none.csv'},key=k"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert "no such data file" in run.stderr and "Traceback" not in run.stderr


def test_run_checks_its_grouper_before_starting_spark() -> None:
    """A typo is named at once, with the closest name; no Spark server is started for it."""
    run = subprocess.run(
        [*keysplit_command(), "run", "--grouper", "pdstraem"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2
    assert 'unknown grouper "pdstraem"; did you mean "pdstream"?' in run.stderr
    assert "Spark Connect server" not in run.stdout
    bad_parameter = subprocess.run(
        [*keysplit_command(), "run", "--grouper", "flexd:delta=two"], capture_output=True, text=True, timeout=60
    )
    assert (
        bad_parameter.returncode == 2 and 'parameter "delta" of grouper "flexd" must be float' in bad_parameter.stderr
    )
    zero = subprocess.run([*keysplit_command(), "run", "--workers", "0"], capture_output=True, text=True, timeout=60)
    assert zero.returncode == 2 and "workers must be an int in [1, 1,048,576], got 0" in zero.stderr


def test_simulate_writes_json_refuses_an_unknown_suffix_and_can_group_nulls(tmp_path: Path) -> None:
    data = tmp_path / "keys.parquet"
    pl.DataFrame({"key": [None if i % 10 == 0 else f"k{i % 13}" for i in range(2_000)]}).write_parquet(data)
    dataset = f"file:path={data},key=key"
    refused = subprocess.run(
        [*keysplit_command(), "simulate", "--datasets", dataset, "--output", str(tmp_path / "r.txt")],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "end the name with .parquet, .csv, .json" in refused.stderr
    nulls = subprocess.run(
        [*keysplit_command(), "simulate", "--datasets", dataset],
        capture_output=True,
        text=True,
    )
    # The fix is said as the command line spells it, not as the Python API does.
    assert nulls.returncode == 2 and "pass --nulls group" in nulls.stderr and 'nulls="group"' not in nulls.stderr
    floats = tmp_path / "floats.parquet"
    pl.DataFrame({"key": [0.5, 1.5] * 100}).write_parquet(floats)
    refused_floats = subprocess.run(
        [*keysplit_command(), "simulate", "--datasets", f"file:path={floats},key=key"], capture_output=True, text=True
    )
    assert refused_floats.returncode == 2 and "cast(pl.String)" in refused_floats.stderr
    output = tmp_path / "r.json"
    subprocess.run(
        [*keysplit_command(), "simulate", "--datasets", dataset, "--nulls", "group", "--output", str(output)],
        check=True,
        capture_output=True,
        text=True,
    )
    from keysplit.simulate import read_results

    results = read_results(str(output))
    assert results.height == 3 and results["worker_loads"].dtype == pl.List(pl.UInt64)
    assert all(sum(loads) == 2_000 for loads in results["worker_loads"].to_list())


def test_discovery_version_one_grouper_and_all_groupers() -> None:
    version = subprocess.run([*keysplit_command(), "--version"], check=True, capture_output=True, text=True)
    import keysplit

    assert version.stdout.strip() == f"keysplit {keysplit.__version__}"
    described = subprocess.run([*keysplit_command(), "groupers", "flexd"], check=True, capture_output=True, text=True)
    assert described.stdout.startswith("flexd: FlexD") and "delta" in described.stdout and "1.5" in described.stdout
    typo = subprocess.run([*keysplit_command(), "groupers", "pkgg"], capture_output=True, text=True)
    assert typo.returncode == 2 and 'did you mean "pkg"?' in typo.stderr
    every = subprocess.run(
        [*keysplit_command(), "simulate", "--groupers", "all", "--tuples", "5000", "--keys", "200", "--no-progress"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert all(info.name in every.stdout for info in keysplit.groupers())


def test_a_reader_that_stops_reading_is_not_an_error() -> None:
    """``keysplit groupers | head -1``: the pipe closes before keysplit has written."""
    process = subprocess.Popen(
        [*keysplit_command(), "groupers", "pkg", "flexd", "dkg"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    errors = process.stderr.read().decode()
    assert process.wait(timeout=120) == 1
    assert errors == ""


def test_the_readme_grouper_table_is_the_registry() -> None:
    """The README's table is `keysplit groupers --markdown`: a new grouper, title or
    default shows there only by regenerating it."""
    run = subprocess.run([*keysplit_command(), "groupers", "--markdown"], check=True, capture_output=True, text=True)
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    marker = "<!-- generated by `keysplit groupers --markdown`; tests/test_cli.py keeps it equal -->\n"
    start = readme.index(marker) + len(marker)
    table = readme[start : readme.index("\n\n", start)]
    assert table == run.stdout.rstrip("\n")
    assert table.count("\n| `") == len(keysplit.groupers())
