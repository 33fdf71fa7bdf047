"""keysplit.simulate and keysplit.plots: the tidy results against an independent
computation, and the charts and report they produce."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import keysplit
from keysplit import datasets, metrics, plots
from keysplit.simulate import Dataset, dataset, parse_spec, read_results, simulate, write_results


def test_results_equal_summarize_over_the_routed_stream() -> None:
    results = simulate(
        groupers=["key", "pkg", "cm"], workers=[3, 8], datasets=["zipf:keys=500,tuples=30000,z=1.3"],
        windows=[None, 7_000], seed=2,
    )
    # One whole-stream row per grouper x workers x window size, plus one row per window.
    assert results.filter(pl.col("window").is_null()).height == 3 * 2 * 2
    assert results.filter(pl.col("window").is_not_null()).height == 3 * 2 * 5  # 30,000 / 7,000 -> 5 windows
    assert set(metrics.SUMMARY_COLUMNS) <= set(results.columns)
    assert {"ns_per_tuple", "state_bytes", "worker_loads"} <= set(results.columns)

    stream = pl.concat(datasets.zipf(keys=500, tuples=30_000, z=1.3, seed=2))
    for grouper in ("key", "pkg", "cm"):
        for workers in (3, 8):
            g = keysplit.Grouper(grouper, workers=workers, seed=2)
            routed = stream.with_columns(worker=pl.Series(g.route(stream["key"])))
            expected = metrics.summarize(routed, workers=workers)
            row = results.filter(
                pl.col("grouper") == grouper, pl.col("workers") == workers,
                pl.col("window_tuples").is_null(),
            )
            columns = list(metrics.SUMMARY_COLUMNS[1:])
            assert_frame_equal(row.select(columns), expected.select(columns))
            assert row["worker_loads"][0].to_list() == metrics.worker_loads(routed, workers=workers).to_list()
            assert row["state_bytes"][0] == g.state_bytes
            assert row["ns_per_tuple"][0] > 0


def test_windows_split_the_stream_and_end_each_window() -> None:
    results = simulate(groupers=["cm"], workers=[4], datasets=["zipf:keys=300,tuples=20000,z=1.1"], windows=[5_000])
    stream = pl.concat(datasets.zipf(keys=300, tuples=20_000, z=1.1, seed=0))
    g = keysplit.Grouper("cm", workers=4, seed=0)
    parts = []
    for window, part in enumerate(stream.iter_slices(5_000)):
        parts.append(part.with_columns(worker=pl.Series(g.route(part["key"])), window=pl.lit(window, pl.UInt64)))
        g.end_window()  # CM counts distinct keys per window: the simulation must end each one
    expected = metrics.summarize(pl.concat(parts), workers=4, window="window")
    # Float sums may differ in the last bit: the stream is aggregated batch by batch.
    assert_frame_equal(results.select(expected.columns), expected.with_columns(pl.col("window").cast(pl.UInt64)))
    per_window = results.filter(pl.col("window").is_not_null())
    assert per_window["worker_loads"].list.sum().to_list() == [5_000] * 4


def test_same_seed_same_metrics_and_datasets_from_objects() -> None:
    frame = pl.DataFrame({"key": [f"k{i % 37}" for i in range(5_000)]})
    custom = Dataset("custom", lambda: iter([frame]), tuples=5_000)

    def run() -> pl.DataFrame:
        return simulate(groupers=["pkg", "dkg"], workers=[5], datasets=[custom, "drift:keys=100,tuples=8000,period=2000"], seed=4)

    first, second = run(), run()
    assert first.drop("ns_per_tuple").equals(second.drop("ns_per_tuple"))
    assert first["dataset"].unique(maintain_order=True).to_list() == [
        "custom", "drift:keys=100,tuples=8000,z=1.2,period=2000",
    ]


def test_specs_and_bad_input() -> None:
    assert parse_spec("tpch:key=l_partkey,zipf_z=1.0,scale=0.01") == (
        "tpch", {"key": "l_partkey", "zipf_z": 1.0, "scale": 0.01},
    )
    assert parse_spec("file:path=/data/x.csv") == ("file", {"path": "/data/x.csv"})
    assert dataset("zipf:z=2", keys=10).name == "zipf:keys=10,tuples=1000000,z=2"
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        dataset("nope")
    with pytest.raises(ValueError, match="unknown parameter"):
        dataset("kjv:z=1")
    with pytest.raises(ValueError, match="unknown grouper"):
        simulate(groupers=["nope"], workers=[2], datasets=["zipf"])
    with pytest.raises(ValueError, match="worker counts must be positive"):
        simulate(groupers=["key"], workers=[0], datasets=["zipf"])


def test_results_round_trip_through_parquet_and_csv(tmp_path: Path) -> None:
    results = simulate(groupers=["key", "shuffle"], workers=[2], datasets=["zipf:keys=50,tuples=3000"], windows=[1_000])
    for name in ("r.parquet", "r.csv"):
        write_results(results, str(tmp_path / name))
        back = read_results(str(tmp_path / name))
        assert back.select("grouper", "window", "load_imbalance", "worker_loads").equals(
            results.select("grouper", "window", "load_imbalance", "worker_loads")
        )


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_plot_writes_pngs_and_a_self_contained_report(tmp_path: Path) -> None:
    groupers = ["shuffle", "key", "pkg", "flexd:delta=2.0"]
    results = simulate(
        groupers=groupers, workers=[4, 8],
        datasets=[
            "zipf:keys=1000,tuples=20000,z=1.0", "zipf:keys=1000,tuples=20000,z=1.6",
            "drift:keys=1000,tuples=20000,z=1.4,period=5000",
        ],
        windows=[None, 5_000],
    )
    write_results(results, str(tmp_path / "r.parquet"))
    written = plots.plot(tmp_path / "r.parquet", tmp_path / "out")
    names = {p.name for p in written}
    assert written[-1].name == "report.html"
    for prefix in ("pareto-zipf", "loads-zipf", "windows-drift", "trend-workers-zipf", "trend-skew-zipf"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    pngs = [p for p in written if p.suffix == ".png"]
    assert all(p.read_bytes().startswith(PNG_SIGNATURE) for p in pngs)

    report = (tmp_path / "out" / "report.html").read_text()
    assert report.startswith("<!DOCTYPE html>") and report.rstrip().endswith("</html>")
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", report)
    assert len(images) == len(pngs), "every chart is inlined"
    assert all(base64.b64decode(i).startswith(PNG_SIGNATURE) for i in images)
    assert "src='http" not in report and "<script" not in report
    for grouper in groupers:
        assert f"<td>{grouper}</td>" in report
    # A short summary first, then the charts; the long tables last, folded, one per dataset.
    assert report.index("<h2>Summary</h2>") < report.index("<img") < report.index("<details>")
    assert report.count("<details>") == 3
    assert len(report) < 1_500_000


def test_plot_draws_results_without_a_synthetic_zipf_dataset(tmp_path: Path) -> None:
    """One's own data (a file, here) has no Zipf exponent: no skew trend, the rest drawn."""
    data = tmp_path / "words.parquet"
    pl.DataFrame({"key": [f"w{i % 97}" for i in range(5_000)]}).write_parquet(data)
    results = simulate(groupers=["key", "pkg", "pdstream"], workers=[8], datasets=[f"file:path={data},key=key"])
    write_results(results, str(tmp_path / "r.parquet"))
    written = plots.plot(tmp_path / "r.parquet", tmp_path / "out")
    names = {p.name for p in written}
    assert any(n.startswith("pareto-") for n in names) and any(n.startswith("loads-") for n in names)
    assert not any(n.startswith("trend-skew") for n in names)
    assert (tmp_path / "out" / "report.html").read_text().rstrip().endswith("</html>")


def test_plot_refuses_what_is_not_a_results_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="missing columns"):
        plots.plot(pl.DataFrame({"x": [1]}), tmp_path)


def test_the_readme_python_snippets_run_in_a_fresh_interpreter() -> None:
    # `import keysplit` alone gives keysplit.simulate, and the Datasets block's with_bursts
    # line runs as written (on a small zipf stream instead of the KJV).
    import subprocess
    import sys

    code = (
        "import keysplit\n"
        "from keysplit import datasets\n"
        "table = keysplit.simulate.simulate(groupers=['key', 'pkg'], workers=[8, 16], "
        "datasets=['zipf:z=1.5,keys=1000,tuples=20000'], windows=[None, 10_000])\n"
        "assert table.height > 0\n"
        "stream = datasets.with_bursts(datasets.zipf(keys=1_000, tuples=30_000, z=1.0), "
        "[datasets.Burst(key=999, start=10_000, length=5_000, share=0.5)])\n"
        "assert sum(batch.height for batch in stream) == 30_000\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_progress_moves_at_least_every_100k_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A default synthetic stream is one batch of 2^20 rows; the bar must still move."""
    from keysplit import simulate as simulation

    class Recorder:
        def __init__(self) -> None:
            self.steps: list[int] = []

        def start(self) -> None: ...
        def stop(self) -> None: ...
        def add_task(self, *_: object, **__: object) -> int:
            return 0
        def advance(self, _task: int, rows: int) -> None:
            self.steps.append(rows)
        def remove_task(self, _task: int) -> None: ...

    recorder = Recorder()
    monkeypatch.setattr(simulation, "progress_display", lambda _enabled: recorder)
    tuples = 1_200_000
    simulation.simulate(groupers=["key"], workers=[4], datasets=[f"zipf:keys=1000,tuples={tuples},z=1.2"])
    assert sum(recorder.steps) == tuples
    assert max(recorder.steps) <= simulation.PROGRESS_ROWS
