"""keysplit.spark against a real embedded Spark Connect server (the ``spark`` fixture).

Every query runs through ``Session.call`` with a timeout; no query sees more than 100k rows.
"""

from __future__ import annotations

import re

import polars as pl
import pytest

import keysplit
from keysplit import metrics
from keysplit.spark import (
    ObservationMismatch,
    aggregate,
    reference,
    sketch_error,
    windowed_count,
)
from keysplit.spark.ingest import to_arrow
from reports import aggregated, operated

TIMEOUT = 180.0
AGGS = ["count", "count(value)", "sum(value)", "min(value)", "max(value)", "mean(value)", "distinct(user)"]


def _stream(rows: int = 6_000, *, z: float = 1.4, seed: int = 7) -> pl.DataFrame:
    """A Zipf key stream with integer values (some null) and a user column."""
    keys = pl.concat(list(keysplit.datasets.zipf(keys=400, tuples=rows, z=z, seed=seed)))
    i = pl.int_range(rows, dtype=pl.Int64)
    return keys.with_columns(
        value=pl.when(i % 11 == 3).then(None).otherwise((i * 7919) % 1000 - 300),
        user=((i * 104729) % 97).cast(pl.Int64),
    )


def _reference(spark, data: pl.DataFrame, *, key: str = "key", aggs=AGGS, window=None) -> pl.DataFrame:
    frame = spark.spark.createDataFrame(to_arrow(data))
    table = spark.call("reference", reference(frame, key=key, aggs=aggs, window=window).toArrow, timeout=TIMEOUT)
    result = pl.from_arrow(table)
    return result.sort([c for c in (window, key) if c is not None], nulls_last=False)


@pytest.fixture(scope="module")
def zipf_stream() -> pl.DataFrame:
    return _stream()


@pytest.fixture(scope="module")
def zipf_reference(spark, zipf_stream) -> pl.DataFrame:
    return _reference(spark, zipf_stream)


@pytest.mark.parametrize("name", [info.name for info in keysplit.groupers()])
def test_every_grouper_equals_groupby(spark, zipf_stream, zipf_reference, name):
    result, report = aggregated(
        zipf_stream,
        key="key",
        grouper=keysplit.Grouper(name, workers=6, seed=3),
        aggs=AGGS,
        distinct="exact",
        session=spark,
        output="polars",
        batch_rows=10_000,
        timeout=TIMEOUT,
    )
    assert result.equals(zipf_reference)
    # Spark's loads and Γ, computed from the partials it aggregated, are the client's routing.
    routed = keysplit.route(zipf_stream, key="key", grouper=keysplit.Grouper(name, workers=6, seed=3))
    assert report.spark_loads == metrics.worker_loads(routed, workers=6).to_list()
    assert report.spark_partial_rows == metrics.aggregation_cost(routed)
    assert report.replication_factor == pytest.approx(metrics.replication_factor(routed))
    assert report.routed_on == "client" and report.ingestion == "files" and report.sources == 1


def test_sketched_distinct_within_its_error(spark, zipf_stream, zipf_reference):
    data = zipf_stream.with_columns(user=pl.int_range(zipf_stream.height) % 3_000)
    exact = _reference(spark, data, aggs=["distinct(user)"])
    result = aggregate(
        data,
        key="key",
        grouper="pkg",
        aggs=["distinct(user)"],
        session=spark,
        output="polars",
        batch_rows=10_000,
        timeout=TIMEOUT,
    )
    joined = result.join(exact, on="key", suffix="_exact")
    assert joined.height == exact.height
    error = (joined["distinct_user"] - joined["distinct_user_exact"]).abs() / joined["distinct_user_exact"]
    assert error.max() <= sketch_error()
    # The hottest keys have well over a thousand distinct users: a sketch, not a list.
    assert joined["distinct_user_exact"].max() > 1_000


def test_string_keys_nulls_and_count_windows(spark):
    words = ["the", "and", "of", None, "lord", "the", "unto", "the", "and", "shall"]
    rows = 5_000
    data = pl.DataFrame(
        {"word": [words[(i * i + i // 7) % len(words)] for i in range(rows)], "value": list(range(rows))}
    ).with_columns(
        value=pl.when(pl.col("word") == "lord").then(None).otherwise(pl.col("value")).cast(pl.Int32),
        window=pl.int_range(rows, dtype=pl.Int64) // 1_200,
    )
    aggs = ["count", "sum(value)", "mean(value)", "max(value)"]
    expected = _reference(spark, data, key="word", aggs=aggs, window="window")
    result, report = aggregated(
        data.drop("window"),
        key="word",
        grouper="w_choices",
        workers=4,
        aggs=aggs,
        window=1_200,
        session=spark,
        output="polars",
        batch_rows=1_000,
        timeout=TIMEOUT,
    )
    assert result.equals(expected)
    assert [w.window for w in report.windows] == [0, 1, 2, 3, 4]
    assert [w.rows for w in report.windows] == [1_200] * 4 + [200]
    # "lord" has no value: null sum, mean and max, as groupBy gives.
    lord = result.filter(pl.col("word") == "lord")
    assert lord.height == 5 and lord["sum_value"].null_count() == 5
    assert result.filter(pl.col("word").is_null()).height == 5


def test_window_column_and_spark_output(spark, zipf_stream):
    data = zipf_stream.with_columns(day=(pl.int_range(zipf_stream.height) // 2_500).cast(pl.Int32))
    expected = _reference(spark, data, aggs=["count", "min(value)"], window="day")
    frame = aggregate(
        data,
        key="key",
        grouper="cam",
        aggs=["count", "min(value)"],
        window="day",
        session=spark,
        batch_rows=4_000,
        timeout=TIMEOUT,
    )
    result = pl.from_arrow(spark.call("collect", frame.toArrow, timeout=TIMEOUT)).sort("day", "key")
    assert result.equals(expected)


def test_operator_mode_windowed_word_count(spark, zipf_stream):
    from pyspark.sql import functions as F

    data = zipf_stream.select("key")
    expected_frame = (
        spark.spark.createDataFrame(to_arrow(data.with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))))
        .groupBy(F.floor(F.col("seq") / 1_000).cast("long").alias("window"), "key")
        .agg(F.count(F.lit(1)).alias("count"))
    )
    expected = pl.from_arrow(spark.call("reference", expected_frame.toArrow, timeout=TIMEOUT)).sort("window", "key")
    result, report = operated(
        data,
        operator=windowed_count(1_000),
        grouper="pdstream",
        workers=5,
        session=spark,
        output="polars",
        batch_rows=3_000,
        timeout=TIMEOUT,
    )
    assert result.equals(expected)
    routed = keysplit.route(data, key="key", grouper=keysplit.Grouper("pdstream", workers=5))
    assert report.spark_loads == metrics.worker_loads(routed, workers=5).to_list()
    # Operator mode puts worker w on Spark partition w, and nothing else there.
    assert report.windows[0].partition_rows == report.spark_loads
    assert all(found in ([], [p]) for p, found in enumerate(report.windows[0].partition_workers))
    # Each worker emits one count per (window, key) it saw: that is Γ per window.
    per_window = routed.with_columns(window=pl.int_range(routed.height) // 1_000)
    assert report.spark_partial_rows == per_window.select("window", "worker", "key").unique().height


def test_bad_input_is_refused_before_any_query(spark, zipf_stream):
    with pytest.raises(ValueError, match="unknown aggregate 'median'"):
        aggregate(zipf_stream, aggs=["median(value)"], session=spark)
    with pytest.raises(ValueError, match="needs a column"):
        aggregate(zipf_stream, aggs=["sum"], session=spark)
    with pytest.raises(ValueError, match="window must be"):
        aggregate(zipf_stream, window=0, session=spark)
    with pytest.raises(ValueError, match="columns \\['nope'\\] are not in the stream"):
        aggregate(zipf_stream, aggs=["sum(nope)"], session=spark)
    with pytest.raises(TypeError, match="stream must be"):
        aggregate(42, session=spark)
    with pytest.raises(ValueError, match="windows must not decrease"):
        aggregate(pl.DataFrame({"key": [1, 2], "w": [2, 1]}), window="w", session=spark)


def test_observation_mismatch_is_an_error():
    from keysplit.spark.report import WindowReport

    window = WindowReport(
        window=None,
        rows=3,
        spark_loads=[1, 2],
        source_loads=[[1, 2]],
        spark_partial_rows=2,
        keys=2,
        client_loads=[2, 1],
        client_partial_rows=3,
        partition_rows=[1, 2],
        partition_workers=[[0], [1, 0]],
    )
    problems = window.disagreements()
    assert len(problems) == 3 and issubclass(ObservationMismatch, RuntimeError)
    assert window.replication_factor == 1.0 and window.load_imbalance == pytest.approx(1 / 3)


def test_reports_print_their_headline_figures_not_their_tables():
    from keysplit.spark.report import RunReport, WindowReport

    window = WindowReport(
        window=3,
        rows=12_000,
        spark_loads=[5_000, 7_000],
        source_loads=[[5_000, 7_000]],
        spark_partial_rows=150,
        keys=100,
    )
    run = RunReport(
        grouper="pkg", workers=2, windows=[window], routed_on="executors", ingestion="none", wall_seconds=1.5
    )
    assert repr(window) == "WindowReport(window=3, rows=12,000, keys=100, λ=0.1667, γ=1.5000, Γ=150)"
    assert repr(run) == (
        "RunReport(grouper='pkg', workers=2, routed_on='executors', ingestion='none', sources=1, "
        "windows=1, rows=12,000, λ=0.1667, γ=1.5000, Γ=150, wall=1.50 s)"
    )


def test_a_pandas_frame_is_a_client_stream(spark, zipf_stream, zipf_reference):
    frame = zipf_stream.to_pandas()
    result = aggregate(
        frame,
        key="key",
        grouper="pkg",
        workers=4,
        aggs=AGGS,
        distinct="exact",
        session=spark,
        output="polars",
        timeout=TIMEOUT,
    )
    assert result.equals(zipf_reference)


class _RecordedDisplay:
    """Stands in for rich's Progress and keeps every description it was given."""

    def __init__(self) -> None:
        self.descriptions: list[str] = []
        self.advanced = 0

    def start(self) -> None: ...
    def stop(self) -> None: ...

    def add_task(self, description: str, **_: object) -> int:
        self.descriptions.append(description)
        return 0

    def update(self, _task: int, *, description: str, advance: int, refresh: bool) -> None:
        self.descriptions.append(description)
        self.advanced += advance


def test_progress_names_each_spark_action_and_counts_windows(spark, monkeypatch):
    data = pl.DataFrame({"key": [i % 13 for i in range(3_000)]})
    # Real rich first: the calls the display makes must be ones rich has.
    aggregate(data, key="key", grouper="pkg", workers=4, window=1_000, session=spark, output="polars", progress=True)
    import keysplit._progress

    recorded = _RecordedDisplay()
    monkeypatch.setattr(keysplit._progress, "progress_display", lambda _enabled: recorded)
    result = aggregate(data, key="key", grouper="pkg", workers=4, window=1_000, session=spark, output="polars")
    assert result["count"].sum() == 3_000
    assert recorded.advanced == 3
    shown = "\n".join(recorded.descriptions)
    assert recorded.descriptions[1] == "aggregate (pkg, 4 workers) · connecting to Spark"
    assert "· partial aggregation" in shown and "· final merge" in shown
    assert "· 3 windows, 3,000 rows · " in shown


def test_run_report_page_fits_and_its_legend_covers_no_bar(tmp_path):
    """``keysplit run``'s run.html and run.png, from reports like a run's."""
    from keysplit.spark import job
    from keysplit.spark.report import RunReport, WindowReport

    def report(grouper: str, loads: list[int], routed_on: str) -> RunReport:
        window = WindowReport(
            window=None,
            rows=sum(loads),
            spark_loads=loads,
            source_loads=[loads],
            spark_partial_rows=40,
            keys=20,
            client_loads=loads if routed_on == "client" else None,
            client_partial_rows=40 if routed_on == "client" else None,
            seconds={"routing": 0.1, "ingest": 0.2, "partial": 0.3, "final": 0.1},
        )
        return RunReport(
            grouper=grouper,
            workers=8,
            windows=[window],
            routed_on=routed_on,
            ingestion="files",
            summary=None,
            wall_seconds=1.0,
        )

    labels = ["KG, client stream", "pdstream, client stream", "pdstream, Spark DataFrame"]
    reports = [
        report("key", [90, 10, 0, 0, 0, 0, 0, 900], "client"),
        report("pdstream", [125] * 8, "client"),
        report("pdstream", [125] * 8, "executors"),
    ]
    figures = pl.DataFrame([r.figures() for r in reports])
    by_run = job._by_run(figures, labels)
    assert by_run.columns == ["figure", *labels]
    assert "–" in by_run["pdstream, Spark DataFrame"].to_list()  # the client's figures, for executor routing
    page = job._html(
        "run", by_run, pl.DataFrame({"worker": range(8)}), "run.png", pl.DataFrame({"plan": ["a"]}), "g.png"
    )
    assert "None" not in page and "<th>grouper</th>" not in page
    # Two runs of each pipeline, with times apart: the chart draws what the table shows.
    seconds = {
        label: [
            {"routing_s": 0.1 * i, "ingest_s": 0.2, "partial_s": 0.3 + i, "final_s": 0.1, "wall_s": 1.0},
            {"routing_s": 0.3 * i, "ingest_s": 0.4, "partial_s": 0.5 + i, "final_s": 0.1, "wall_s": 2.0},
        ]
        for i, label in enumerate(labels)
    }
    table = job._figures(labels, reports, seconds)
    figure = job._run_figure(labels, reports, seconds)
    phases_axis = figure.axes[1]
    assert "mean of 2 runs" in phases_axis.get_title()
    phase_names = [t.get_text() for t in phases_axis.get_xticklabels()]
    assert phase_names == ["routing", "ingest", "partial", "final"]
    for i, bars in enumerate(phases_axis.containers):
        drawn = [bar.get_height() for bar in bars]
        assert drawn == pytest.approx([table[f"{phase}_s"][i] for phase in phase_names])
        assert drawn != [seconds[labels[i]][0][f"{phase}_s"] for phase in phase_names]  # not the first run's
    dots = [list(line.get_ydata()) for line in phases_axis.lines]
    assert dots == [[run[f"{phase}_s"] for phase in phase_names] for label in labels for run in seconds[label]]
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    (legend,) = figure.legends
    box = legend.get_window_extent(renderer)
    assert [t.get_text() for t in legend.get_texts()] == labels
    for axis in figure.axes:
        assert not box.overlaps(axis.get_tightbbox(renderer)), axis.get_title()
    loads_axis = figure.axes[0]
    assert [t.get_text() for t in loads_axis.get_xticklabels()] == [str(w) for w in range(8)]
    job._chart(labels, reports, seconds, tmp_path / "run.png")
    assert (tmp_path / "run.png").stat().st_size > 0


def test_keysplit_run_takes_ones_own_file(spark, tmp_path, capsys):
    """The main job on a file no corpus ships: integer keys with nulls and a hot key; each
    step on stderr as it starts and ends, the results alone on print_."""
    from keysplit.spark import job

    path = tmp_path / "events.parquet"
    users = [None if i % 97 == 0 else (0 if i % 3 == 0 else (i * i) % 501) for i in range(30_000)]
    pl.DataFrame({"user": users, "other": range(30_000)}).write_parquet(path)
    lines: list[str] = []
    code = job.run(
        dataset=f"file:path={path},key=user",
        grouper="pdstream",
        workers=4,
        report_dir=tmp_path / "run",
        print_=lines.append,
        spark=spark,
    )
    output = "\n".join(lines)
    assert code == 0, output
    assert "every pipeline equals Spark's groupBy" in output
    steps = capsys.readouterr().err
    assert f"reading file:path={path},key=user and writing it as Parquet files: done in " in steps
    assert "(30,000 words)" in steps
    for label in ("KG, client stream", "pdstream, client stream", "pdstream, Spark DataFrame"):
        for run in (1, 2):
            assert re.search(
                rf"{label}, run {run} of 2: done in [0-9.]+ s \(routing [0-9.]+ s, ingest [0-9.]+ s, partial", steps
            ), steps
    assert "grouped map: keysplit's apply_grouped, 32 tasks: done in" in steps
    # The query of a window feeding a median, rewritten by optimize beside Spark's plan.
    assert re.search(r"optimize\(query\) +wall +[0-9.]+ s .*results equal: yes", output), output
    # Its hottest key, 10,000 rows, is under the cost guard's million: Spark's plan is kept.
    assert "optimize: 0 of 2 keyed operators rewritten" in output and "(small, predicted hottest task" in output
    assert "done in" not in output
    assert {"run.html", "run.png", "grouped.png"} <= {p.name for p in (tmp_path / "run").iterdir()}


def test_keysplit_run_refuses_a_dataset_before_starting_spark(tmp_path):
    import subprocess

    from test_cli import keysplit_command

    missing = subprocess.run(
        [*keysplit_command(), "run", "--dataset", f"file:path={tmp_path}/none.parquet,key=k"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "none.parquet" in missing.stderr
    assert "Spark Connect server" not in missing.stdout
    unknown = subprocess.run(
        [*keysplit_command(), "run", "--dataset", "kvj"], capture_output=True, text=True, timeout=60
    )
    assert unknown.returncode == 2 and "kvj" in unknown.stderr


def test_every_verb_picks_its_session_by_one_rule(spark, zipf_stream):
    """An explicit session; else a Spark DataFrame's own; else a client stream is refused
    with an error that names keysplit.spark.session()."""
    from keysplit import ConfigError
    from keysplit.spark import apply_grouped, apply_operator, hot_keys, route

    frame = spark.spark.createDataFrame(to_arrow(zipf_stream))
    client_verbs = {
        "aggregate": lambda data, **kw: aggregate(data, aggs=["count"], output="polars", **kw),
        "apply_operator": lambda data, **kw: apply_operator(data, operator=windowed_count(1_000), **kw),
        "apply_grouped": lambda data, **kw: apply_grouped(
            data, function=lambda pdf: pdf.head(1), merge=lambda pdf: pdf.head(1), schema="key long", **kw
        ),
    }
    for name, verb in client_verbs.items():
        with pytest.raises(ConfigError, match=r"needs session=.*keysplit\.spark\.session\(\)"):
            verb(zipf_stream)
        # The same verb on a Spark DataFrame, with no session: the DataFrame's own.
        result = verb(frame)
        assert result is not None, name
    assert route(frame, key="key").count() == zipf_stream.height
    assert hot_keys(frame, key="key", workers=4)["rows"][0] == zipf_stream.height
    with pytest.raises(TypeError, match="session must be"):
        aggregate(frame, session="sc://localhost")


def test_a_report_is_filled_by_the_verb_that_runs_now(spark, zipf_stream, zipf_reference):
    """aggregate runs when called: its Report is filled when it returns, with the same
    figures the deprecated aggregate_with_report gives, which warns."""
    from keysplit.spark import Report, RunReport, aggregate_with_report

    report: Report[RunReport] = Report()
    result = aggregate(zipf_stream, aggs=AGGS, distinct="exact", session=spark, output="polars", report=report)
    assert result.equals(zipf_reference)
    assert report.get.rows == zipf_stream.height and report.get.disagreements() == []
    with pytest.warns(DeprecationWarning, match="report=keysplit.spark.Report"):
        twin, old = aggregate_with_report(zipf_stream, aggs=AGGS, distinct="exact", session=spark, output="polars")
    assert twin.equals(result)
    assert old.spark_loads == report.get.spark_loads and old.spark_partial_rows == report.get.spark_partial_rows


def test_the_one_line_migration_of_agg_gives_spark_s_columns_and_values(spark, zipf_stream):
    """skewed(df).groupBy(k).agg({...}) equals df.groupBy(k).agg({...}), column names included."""
    from pyspark.sql import functions as F

    from keysplit.spark import skewed

    frame = spark.spark.createDataFrame(to_arrow(zipf_stream))
    spec = {"value": "sum", "user": "avg"}
    native = pl.from_arrow(frame.groupBy("key").agg(spec).toArrow()).sort("key")
    ours = pl.from_arrow(skewed(frame, workers=4).groupBy("key").agg(spec).toArrow()).sort("key")
    assert ours.columns == native.columns == ["key", "sum(value)", "avg(user)"]
    assert ours["sum(value)"].equals(native["sum(value)"])
    assert (ours["avg(user)"] - native["avg(user)"]).abs().max() < 1e-9
    counted = pl.from_arrow(skewed(frame).groupBy("key").agg("count", "distinct(user)").toArrow()).sort("key")
    assert counted.columns == ["key", "count(1)", "count(DISTINCT user)"]
    assert counted["count(1)"].sum() == zipf_stream.height
    with pytest.raises(TypeError, match="dict form"):
        skewed(frame).groupBy("key").agg(42)
    # Columns are Spark's own aggregate (holistic_agg), with Spark's names and values.
    spark_own = skewed(frame).groupBy("key").agg(F.sum("value"), F.count("user"))
    assert sorted(spark_own.collect()) == sorted(frame.groupBy("key").agg(F.sum("value"), F.count("user")).collect())


def test_a_user_operators_error_comes_back_as_its_own_type(spark, zipf_stream):
    from keysplit.spark import Operator, apply_operator

    def failing(table):
        raise ValueError(f"the operator met a bad row among {table.num_rows}")

    operator = Operator(function=failing, schema=lambda _: "key long, count long", merge=lambda partials: partials)
    with pytest.raises(ValueError, match=r"^the operator met a bad row among \d+ \(raised in a Spark task") as caught:
        apply_operator(
            zipf_stream.select("key").head(1_000),
            operator=operator,
            grouper="pkg",
            workers=2,
            session=spark,
            output="polars",
            timeout=TIMEOUT,
        )
    assert type(caught.value.__cause__).__name__ == "PythonException"
