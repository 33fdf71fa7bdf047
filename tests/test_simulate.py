"""keysplit.simulate and keysplit.plots: the tidy results against an independent
computation, and the charts and report they produce."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import keysplit
from keysplit import datasets, metrics, plots
from keysplit._grouper import parse_spec
from keysplit.simulate import Dataset, dataset, read_results, simulate, write_results

if TYPE_CHECKING:
    from collections.abc import Iterator

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def test_results_equal_summarize_over_the_routed_stream() -> None:
    results = simulate(
        groupers=["key", "pkg", "cm"],
        workers=[3, 8],
        datasets=["zipf:keys=500,tuples=30000,z=1.3"],
        windows=[None, 7_000],
        seed=2,
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
                pl.col("grouper") == grouper,
                pl.col("workers") == workers,
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
        return simulate(
            groupers=["pkg", "dkg"], workers=[5], datasets=[custom, "drift:keys=100,tuples=8000,period=2000"], seed=4
        )

    first, second = run(), run()
    assert first.drop("ns_per_tuple").equals(second.drop("ns_per_tuple"))
    assert first["dataset"].unique(maintain_order=True).to_list() == [
        "custom",
        "drift:keys=100,tuples=8000,z=1.2,period=2000",
    ]


def test_specs_and_bad_input() -> None:
    assert parse_spec("tpch:key=l_partkey,zipf_z=1.0,scale=0.01") == (
        "tpch",
        {"key": "l_partkey", "zipf_z": 1.0, "scale": 0.01},
    )
    assert parse_spec("file:path=/data/x.csv") == ("file", {"path": "/data/x.csv"})
    assert dataset("zipf:z=2", keys=10).name == "zipf:keys=10,tuples=1000000,z=2"
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        dataset("nope")
    with pytest.raises(ValueError, match="unknown parameter"):
        dataset("kjv:z=1")
    with pytest.raises(ValueError, match="unknown grouper"):
        simulate(groupers=["nope"], workers=[2], datasets=["zipf"])
    with pytest.raises(ValueError, match=r"each worker count must be an int in \[1, 1,048,576\], got 0"):
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
        groupers=groupers,
        workers=[4, 8],
        datasets=[
            "zipf:keys=1000,tuples=20000,z=1.0",
            "zipf:keys=1000,tuples=20000,z=1.6",
            "drift:keys=1000,tuples=20000,z=1.4,period=5000",
        ],
        windows=[None, 5_000],
    )
    write_results(results, str(tmp_path / "r.parquet"))
    written = plots.plot(tmp_path / "r.parquet", tmp_path / "out")
    names = {p.name for p in written}
    assert written[-1].name == "report.html"
    # The two zipf streams are a skew sweep: their points are in the skew trend, not in a
    # workers trend of their own.
    for prefix in ("pareto-zipf", "loads-zipf", "windows-drift", "trend-workers-drift", "trend-skew-zipf"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    assert not any(n.startswith("trend-workers-zipf") for n in names)
    # Per window: one chart for each worker count, named by it and by the window size.
    drift = "drift-keys1000-tuples20000-z1.4-period5000"
    assert {f"windows-{drift}-n4-w5000.png", f"windows-{drift}-n8-w5000.png"} <= names
    assert "pareto-zipf-keys1000-tuples20000-z1.6.png" in names
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
    # The file by its name, not a spec's ``file:path=/tmp/...`` made a file name.
    assert {"pareto-file-words-key.png", "loads-file-words-key.png"} <= names, names
    assert not any(n.startswith("trend-skew") for n in names)
    assert (tmp_path / "out" / "report.html").read_text().rstrip().endswith("</html>")


def test_chart_file_names_are_readable_safe_stable_and_unique() -> None:
    labels = [
        "zipf:keys=2000,tuples=20000,z=1.5",
        "nycflights:key=dest",
        "kjv",
        "tpch:key=l_partkey,scale=0.1,zipf_z=1.0",
        "file:path=/data/a/events.parquet,key=user",
        "file:path=/data/b/events.parquet,key=user",
        "file:path=/data/my events (1).csv,key=user id",
        "zipf:" + ",".join(f"p{i}=x{i}" for i in range(40)),
    ]
    names = plots.file_names(labels)
    assert names["zipf:keys=2000,tuples=20000,z=1.5"] == "zipf-keys2000-tuples20000-z1.5"
    assert names["nycflights:key=dest"] == "nycflights-dest"
    assert names["kjv"] == "kjv"
    assert names["tpch:key=l_partkey,scale=0.1,zipf_z=1.0"] == "tpch-l_partkey-scale0.1-zipf_z1.0"
    assert names["file:path=/data/my events (1).csv,key=user id"] == "file-my_events_1-user_id"
    # Two files of one name, and a name cut at 80 characters, get a hash of their label.
    alike = [names[f"file:path=/data/{d}/events.parquet,key=user"] for d in "ab"]
    assert all(re.fullmatch(r"file-events-user-[0-9a-f]{8}", name) for name in alike) and len(set(alike)) == 2
    assert len(names[labels[-1]]) <= 80 + 9
    assert len(set(names.values())) == len(labels)
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) for name in names.values()), names
    assert plots.file_names(reversed(labels)) == names


def test_windows_are_drawn_for_every_worker_count_and_hybrid_imbalance_is_defined(tmp_path: Path) -> None:
    results = simulate(
        groupers=["key", "pkg"], workers=[4, 16], datasets=["zipf:keys=500,tuples=8000,z=1.2"], windows=[None, 2_000]
    )
    charts = [(name, figure) for _, name, figure in plots.figures(results)]
    windows = {name: figure for name, figure in charts if name.startswith("windows-")}
    assert sorted(windows) == [f"windows-zipf-keys500-tuples8000-z1.2-n{n}-w2000.png" for n in (16, 4)]
    for name, figure in windows.items():
        workers = re.search(r"-n(\d+)-", name)[1]
        assert f"{workers} workers" in figure.get_suptitle()
    # HI is named on its axis and defined under the chart and in the report.
    (trend,) = [figure for name, figure in charts if name.startswith("trend-workers-")]
    assert any(ax.get_ylabel() == "hybrid imbalance HI" for ax in trend.axes)
    caption = trend.get_supxlabel().replace("\n", " ")
    assert "HI = max_w H_w − mean_w H_w" in caption and "p = 0.5" in caption and "min-max scaled" in caption
    report = (tmp_path / "out").joinpath("report.html")
    plots.plot(results, tmp_path / "out")
    assert "hybrid imbalance HI = max_w H_w − mean_w H_w" in report.read_text()
    import matplotlib.pyplot as plt  # noqa: PLC0415

    plt.close("all")


def test_close_front_points_get_a_label_each_none_covering_another(tmp_path: Path) -> None:
    """Six groupers on the front within a hair of each other: each named at its own point
    (moved away with a line to it where it must), no label over another or over a point."""
    from matplotlib.text import Text  # noqa: PLC0415
    from matplotlib.transforms import Bbox  # noqa: PLC0415

    groupers = [f"grouper-{i}" for i in range(6)]
    rows = pl.DataFrame(
        {
            "workers": [8] * 6,
            "grouper": groupers,
            "replication_factor": [1.0 + 0.004 * i for i in range(6)],
            "load_imbalance": [0.30 - 0.002 * i for i in range(6)],
        }
    )
    style = {g: {"color": "black", "marker": "o", "linestyle": "-"} for g in groupers}
    figure = plots.pareto_figure(rows, "close", style)
    plots._save(figure, tmp_path / "close.png")  # draws it as keysplit plot does
    figure = plots.pareto_figure(rows, "close", style)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    (ax,) = figure.axes
    assert sorted(text.get_text() for text in ax.texts) == groupers
    boxes = [Text.get_window_extent(text, renderer) for text in ax.texts]
    points = [ax.transData.transform(text.xy) for text in ax.texts]
    for i, (text, box) in enumerate(zip(ax.texts, boxes, strict=True)):
        at = rows.row(groupers.index(text.get_text()), named=True)
        assert text.xy == (at["replication_factor"], at["load_imbalance"])
        assert not any(box.overlaps(other) for other in boxes[i + 1 :]), text.get_text()
        assert not any(box.overlaps(Bbox.from_extents(x - 2, y - 2, x + 2, y + 2)) for x, y in points)
        assert ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1 and ax.bbox.y0 <= box.y0 and box.y1 <= ax.bbox.y1
    assert any(text.arrow_patch is not None for text in ax.texts), "some label was moved, with a line to its point"
    import matplotlib.pyplot as plt  # noqa: PLC0415

    plt.close(figure)


def test_plot_refuses_what_is_not_a_results_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="missing columns"):
        plots.plot(pl.DataFrame({"x": [1]}), tmp_path)


ALL_GROUPERS = [info.name for info in keysplit.groupers()]


@pytest.fixture(scope="module")
def results_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Results of every dataset kind with every grouper, at small sizes: a Zipf stream
    with windows, a skew sweep, NYC flights, and one's own Parquet file through the command
    line into CSV."""
    directory = tmp_path_factory.mktemp("results")
    files = {}
    for kind, specs, windows in (
        ("zipf", ["zipf:keys=2000,tuples=20000,z=1.5"], [None, 5_000]),
        ("skew", [f"zipf:keys=2000,tuples=20000,z={z}" for z in (0.8, 1.2, 1.6)], [None]),
        ("real", ["nycflights:key=dest"], [None]),
    ):
        files[kind] = directory / f"{kind}.parquet"
        results = simulate(groupers=ALL_GROUPERS, workers=[4, 16], datasets=specs, windows=windows)
        write_results(results, str(files[kind]))
    users = directory / "users.parquet"
    stream = pl.concat(datasets.zipf(keys=3_000, tuples=30_000, z=1.4, seed=1))
    stream.select(user=pl.format("u{}", "key")).write_parquet(users)
    files["file"] = directory / "file.csv"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "keysplit",
            "simulate",
            "--groupers",
            "all",
            "--workers",
            "4,16",
            "--datasets",
            f"file:path={users},key=user",
            "--windows",
            "none,5000",
            "--no-progress",
            "--output",
            str(files["file"]),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return files


@pytest.fixture(scope="module")
def charts(results_files: dict[str, Path]) -> Iterator[dict[str, list[tuple[str, Figure]]]]:
    """Every chart of every results file, as (file name, laid-out figure)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    # The tests read every chart at once: two dozen open figures are meant, not a leak.
    with plt.rc_context({"figure.max_open_warning": 0}):
        drawn = {
            kind: [(name, figure) for _, name, figure in plots.figures(path)] for kind, path in results_files.items()
        }
    for figures in drawn.values():
        for _, figure in figures:
            figure.canvas.draw()
    yield drawn
    plt.close("all")


def test_plot_draws_every_dataset_kind(charts: dict[str, list[tuple[str, Figure]]]) -> None:
    names = {kind: [re.match(r"trend-\w+|\w+", name)[0] for name, _ in figures] for kind, figures in charts.items()}
    assert names["zipf"] == ["pareto", "loads", "windows", "windows", "trend-workers"]
    # The sweep's trends first; its datasets' points are in them, so no workers trend.
    assert names["skew"] == ["trend-skew", "trend-skew"] + ["pareto", "loads"] * 3
    assert names["real"] == ["pareto", "loads", "trend-workers"]
    assert names["file"] == ["pareto", "loads", "windows", "windows", "trend-workers"]


def test_one_legend_outside_every_panel_names_all_groupers(charts: dict[str, list[tuple[str, Figure]]]) -> None:
    """24 groupers' names inside an axes hid the data; the legend is the figure's, right of
    every panel (tick labels and titles included) and inside the picture."""
    for kind, figures in charts.items():
        for name, figure in figures:
            assert all(ax.get_legend() is None for ax in figure.axes), (kind, name)
            if name.startswith("loads-"):
                assert not figure.legends  # each panel's title names its grouper
                continue
            renderer = figure.canvas.get_renderer()
            (legend,) = figure.legends
            box = legend.get_window_extent(renderer)
            assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1, (kind, name)
            assert figure.bbox.y0 <= box.y0 and box.y1 <= figure.bbox.y1, (kind, name)
            for ax in figure.axes:
                assert not box.overlaps(ax.get_tightbbox(renderer)), (kind, name, ax.get_title())
            assert [text.get_text() for text in legend.get_texts()] == ALL_GROUPERS, (kind, name)


def _look(handle: Any) -> tuple[str, tuple[tuple[float, float], ...]]:
    """A line's or a scatter's colour and marker outline, comparable across the two."""
    from matplotlib.colors import to_hex  # noqa: PLC0415
    from matplotlib.lines import Line2D  # noqa: PLC0415
    from matplotlib.markers import MarkerStyle  # noqa: PLC0415

    if isinstance(handle, Line2D):
        marker = MarkerStyle(handle.get_marker())
        color, path = handle.get_color(), marker.get_path().transformed(marker.get_transform())
    else:
        color, path = handle.get_facecolor()[0], handle.get_paths()[0]
    return to_hex(color), tuple((round(x, 6), round(y, 6)) for x, y in path.vertices)


def test_every_grouper_keeps_one_distinct_colour_and_marker(charts: dict[str, list[tuple[str, Figure]]]) -> None:
    for kind, figures in charts.items():
        looks: dict[str, set[tuple[str, tuple[tuple[float, float], ...]]]] = {}
        for _, figure in figures:
            for ax in figure.axes:
                for handle, grouper in zip(*ax.get_legend_handles_labels(), strict=True):
                    looks.setdefault(grouper, set()).add(_look(handle))
        assert set(looks) == set(ALL_GROUPERS)
        assert all(len(seen) == 1 for seen in looks.values()), kind
        assert len({seen.pop() for seen in looks.values()}) == len(ALL_GROUPERS), kind


def test_wide_ranging_metrics_get_log_axes_with_plain_labels(charts: dict[str, list[tuple[str, Figure]]]) -> None:
    """λ and ψ reach 0 and thousands of times their small values: symlog, no negative
    part; γ is log where shuffle's sits a decade above key grouping's 1."""
    checked = set()
    for kind, figures in charts.items():
        for name, figure in figures:
            for ax in figure.axes:
                label = ax.get_ylabel()
                if label.startswith(("load imbalance", "state moved")):
                    threshold = plots.SYMLOG_BELOW["load_imbalance" if label.startswith("load") else "state_moved"]
                    assert ax.get_yscale() == "symlog", (kind, name)
                    assert -threshold < ax.get_ylim()[0] <= 0, (kind, name)
                    checked.add(label.split()[0])
                if ax.get_yscale() != "linear":
                    assert all("^" not in t.get_text() for t in ax.get_yticklabels()), (kind, name, label)
                if kind == "real" and name.startswith("trend") and label.startswith("replication"):
                    assert ax.get_yscale() == "log"
                    checked.add("replication")
    assert checked == {"load", "state", "replication"}


def _visible_ticks(ax: Axes) -> list[float]:
    low, high = sorted(ax.get_xlim())
    return [t for t in ax.get_xticks() if low <= t <= high]


def test_ticks_are_the_worker_counts_and_exponents_run(charts: dict[str, list[tuple[str, Figure]]]) -> None:
    for kind, figures in charts.items():
        for name, figure in figures:
            for ax in figure.axes:
                labels = [t.get_text() for t in ax.get_xticklabels()]
                if name.startswith("trend-workers"):
                    assert labels == ["4", "16"], (kind, name)
                elif name.startswith("trend-skew"):
                    assert labels == ["0.8", "1.2", "1.6"], (kind, name)
                elif name.startswith("loads-"):
                    # 16 workers are 0 to 15: no tick at a worker that is not there.
                    ticks = _visible_ticks(ax)
                    assert all(t == int(t) for t in ticks) and 0 <= min(ticks) and max(ticks) <= 15, (name, ticks)
                elif name.startswith("windows-"):
                    assert all(t == int(t) for t in _visible_ticks(ax)), name


def test_pareto_labels_stay_apart_and_inside_their_panel(charts: dict[str, list[tuple[str, Figure]]]) -> None:
    """Groupers at one point get one label, close ones a label each, moved apart: names
    written over each other were unreadable; a label past the right edge goes left of its
    point."""
    from matplotlib.text import Text  # noqa: PLC0415

    for kind, figures in charts.items():
        for name, figure in figures:
            if not name.startswith("pareto-"):
                continue
            renderer = figure.canvas.get_renderer()
            for ax in figure.axes:
                # The text alone: a moved label's line to its point may cross others.
                boxes = [Text.get_window_extent(text, renderer) for text in ax.texts]
                assert boxes, (kind, name)
                named = [n for text in ax.texts for n in text.get_text().split(", ")]
                assert len(named) == len(set(named)) and set(named) <= set(ALL_GROUPERS)
                for i, box in enumerate(boxes):
                    assert ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1, (kind, name, ax.texts[i].get_text())
                    assert not any(box.overlaps(other) for other in boxes[i + 1 :]), (
                        kind,
                        name,
                        ax.texts[i].get_text(),
                    )


def test_report_opens_with_a_summary_and_stays_small(results_files: dict[str, Path], tmp_path: Path) -> None:
    """The sweep (8 charts of every grouper) through plots.plot, the CSV through keysplit plot."""
    plots.plot(results_files["skew"], tmp_path / "skew")
    subprocess.run(
        [sys.executable, "-m", "keysplit", "plot", str(results_files["file"]), "--out", str(tmp_path / "file")],
        check=True,
        capture_output=True,
        text=True,
    )
    for kind, bound in (("skew", 800_000), ("file", 400_000)):
        report = (tmp_path / kind / "report.html").read_text()
        assert len(report) < bound, (kind, len(report))
        summary = report.index("<h2>Summary</h2>")
        assert summary < report.index("<table class='summary'>") < report.index("<img") < report.index("<details>")
    sweep = (tmp_path / "skew" / "report.html").read_text()
    assert sweep.index("<img alt='trend-skew") == sweep.index("<img")
    # One summary line per dataset and worker count, each dataset named once.
    table = sweep[sweep.index("<table class='summary'>") : sweep.index("</table>")]
    assert table.count("<tr>") == 1 + 3 * 2
    assert table.count("zipf:keys=2000,tuples=20000,z=0.8") == 1


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
