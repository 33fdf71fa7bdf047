"""The keysplit command line, run through the installed entry point."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl


def keysplit_command() -> list[str]:
    script = Path(sys.executable).with_name("keysplit")
    return [str(script)] if script.exists() else [shutil.which("keysplit") or "keysplit"]


def test_simulate_prints_imbalance_and_replication_per_grouper(tmp_path: Path) -> None:
    output = tmp_path / "results.csv"
    run = subprocess.run(
        [*keysplit_command(), "simulate", "--tuples", "200000", "--keys", "1000", "--z", "1.4", "--output", str(output)],
        check=True, capture_output=True, text=True,
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
