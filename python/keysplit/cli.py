"""The ``keysplit`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

import polars as pl

from keysplit import datasets, reproduction
from keysplit import simulate as simulation
from keysplit._checks import require_workers
from keysplit._errors import ConfigError
from keysplit._grouper import DEFAULT_GROUPER, Grouper, GrouperInfo, groupers, parse_spec

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def _comma_list(kind: Callable[[str], object]) -> Callable[[str], list]:
    def parse(text: str) -> list:
        try:
            return [kind(item.strip()) for item in text.split(",") if item.strip()]
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None

    return parse


def _grouper_specs(text: str) -> list[str]:
    """``"pkg,flexd:delta=2.0,threshold=0.1"`` -> ``["pkg", "flexd:delta=2.0,threshold=0.1"]``:
    an item with ``=`` but no ``:`` is one more parameter of the grouper before it; ``all``
    is every grouper with its defaults."""
    if text.strip() == "all":
        return [info.name for info in groupers()]
    specs: list[str] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        if "=" in item and ":" not in item and specs:
            specs[-1] += "," + item
        else:
            specs.append(item)
    return specs


def _window_size(text: str) -> int | None:
    return None if text.lower() in {"none", "0", ""} else int(text)


def _simulate(args: argparse.Namespace) -> int:
    specs = args.datasets or ["zipf"]
    sets: list[simulation.Dataset] = []
    for spec in specs:
        kind, params = parse_spec(spec)
        # Synthetic streams without their own z are run at every --z, for trends over skew.
        zs = args.z if kind in {"zipf", "drift", "bursts"} and "z" not in params else [args.z[0]]
        sets.extend(simulation.dataset(spec, seed=args.seed, keys=args.keys, tuples=args.tuples, z=z) for z in zs)
    results = simulation.simulate(
        groupers=args.groupers,
        workers=args.workers,
        datasets=sets,
        windows=args.windows,
        seed=args.seed,
        progress=False if args.no_progress else None,
        nulls=args.nulls,
    )
    table = simulation.terminal_table(results)
    print(f"datasets: {'; '.join(d.name for d in sets)}")
    print(f"workers: {', '.join(map(str, args.workers))}; seed: {args.seed}")
    _print_table(table)
    if args.output:
        simulation.write_results(results, args.output)
        print(f"{results.height} rows written to {args.output}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from keysplit import plots  # noqa: PLC0415 - matplotlib is only needed here

    written = plots.plot(args.results, args.out)
    for path in written:
        print(path)
    return 0


def _print_table(table: pl.DataFrame) -> None:
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=200,
        fmt_str_lengths=60,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        float_precision=4,
    ):
        print(table)


def _recommend(args: argparse.Namespace) -> int:
    from keysplit._recommend import describe, recommend  # noqa: PLC0415 - keeps --help quick

    found = recommend(
        args.file,
        workers=args.workers,
        key=args.key,
        candidates=args.groupers,
        weight=args.weight,
        seed=args.seed,
        nulls=args.nulls,
        progress=False if args.no_progress else None,
        **({} if args.max_rows is None else {"max_rows": args.max_rows}),
    )
    print(f"{args.file}: {found.tuples:,} tuples, {found.keys:,} keys, {found.workers} workers")
    _print_table(found.table)
    print(describe(found))
    if args.chart:
        print(f"chart written to {found.chart(args.chart)}")
    return 0


def _worker_count(text: str) -> int:
    """A worker count of the command line, checked as the API checks it."""
    try:
        return require_workers(int(text))
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _output_path(text: str) -> str:
    if not text.endswith(simulation.RESULT_SUFFIXES):
        raise argparse.ArgumentTypeError(
            f"{text!r}: the results are written as Parquet, CSV or JSON; end the name with "
            f"{', '.join(simulation.RESULT_SUFFIXES)}"
        )
    return text


def _run(args: argparse.Namespace) -> int:
    from keysplit.spark.job import corpus_stream, run

    # Checked before the job starts Spark, so that a typo is reported at once.
    Grouper.from_spec(args.grouper, workers=args.workers, seed=args.seed)
    corpus_stream(args.dataset, batch_rows=1, tuples=args.tuples, seed=args.seed)

    return run(
        dataset=args.dataset,
        grouper=args.grouper,
        workers=args.workers,
        seed=args.seed,
        tuples=args.tuples,
        report_dir=args.report_dir,
        progress=False if args.no_progress else None,
    )


def groupers_markdown() -> str:
    """The README's grouper table: every grouper in registry order, its title, the
    publication it follows, and its defaults."""

    def defaults(info: GrouperInfo) -> str:
        shown = ", ".join(f"`{name}={value!r}`" for name, value in info.defaults.items())
        return shown or "–"

    rows = ["| name | grouper | follows | defaults |", "|---|---|---|---|"]
    rows += [f"| `{info.name}` | {info.title} | {info.paper} | {defaults(info)} |" for info in groupers()]
    return "\n".join(rows)


def _list_groupers(args: argparse.Namespace) -> int:
    known = {info.name: info for info in groupers()}
    if args.markdown:
        print(groupers_markdown())
        return 0
    if args.names:
        unknown = [name for name in args.names if name not in known]
        if unknown:
            # The grouper constructor's message names the closest grouper.
            Grouper(unknown[0], workers=1)
        print("\n\n".join(known[name].describe() for name in args.names))
        return 0
    for info in known.values():
        defaults = ", ".join(f"{k}={v!r}" for k, v in info.defaults.items()) or "-"
        print(f"{info.name:10} {info.title}\n{'':10} paper: {info.paper}\n{'':10} defaults: {defaults}")
    return 0


def _as_command_line(message: str) -> str:
    """An error's fix as the command line spells it: the core and the Python API name their
    keyword arguments (``nulls="group"``), the commands their flags."""
    return message.replace('nulls="group"', "--nulls group")


def build_parser() -> argparse.ArgumentParser:
    """The ``keysplit`` argument parser, every subcommand included; the documentation's
    command-line reference is generated from it."""
    parser = argparse.ArgumentParser(prog="keysplit", description=__doc__)
    from keysplit import __version__

    parser.add_argument("--version", action="version", version=f"keysplit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    simulate = commands.add_parser(
        "simulate",
        help="route datasets through groupers and print every metric",
        description="Runs every grouper x worker count x dataset x window size and prints "
        "the whole-stream metrics; --output writes every row (per window too).",
        epilog="datasets: " + "; ".join(f"{name}: {what}" for name, what in simulation.DATASET_KINDS.items()),
    )
    simulate.add_argument(
        "--groupers",
        type=_grouper_specs,
        default=["shuffle", "key", "pkg"],
        help="comma-separated grouper names (or all), each optionally with parameters: "
        "pkg,flexd:delta=2.0,threshold=0.1 (default shuffle,key,pkg)",
    )
    simulate.add_argument("--workers", type=_comma_list(_worker_count), default=[8], help="worker counts, e.g. 8,16,32")
    simulate.add_argument(
        "--datasets",
        nargs="+",
        metavar="SPEC",
        help="datasets as name[:param=value,...], e.g. zipf:z=1.5 drift:period=100000 kjv "
        "nycflights:key=dest wordfreq tpch:key=l_partkey,zipf_z=1.0 file:path=x.csv,key=user "
        "(default: zipf)",
    )
    simulate.add_argument("--keys", type=int, default=simulation.DEFAULT_KEYS, help="synthetic streams' key count")
    simulate.add_argument("--tuples", type=int, default=simulation.DEFAULT_TUPLES, help="synthetic streams' length")
    simulate.add_argument(
        "--z",
        type=_comma_list(float),
        default=[simulation.DEFAULT_Z],
        help="Zipf exponent(s) of the synthetic streams, e.g. 1.0,1.5,2.0",
    )
    simulate.add_argument(
        "--windows",
        type=_comma_list(_window_size),
        default=[None],
        help="window sizes in tuples, 'none' for the whole stream only, e.g. none,100000",
    )
    simulate.add_argument("--seed", type=int, default=0)
    simulate.add_argument("--output", type=_output_path, help="write every row to this .parquet, .csv or .json file")
    simulate.add_argument(
        "--nulls",
        choices=["raise", "group"],
        default="raise",
        help="null keys: refuse them (default) or route them all as one key",
    )
    simulate.add_argument("--no-progress", action="store_true", help="no progress bars")
    simulate.set_defaults(run=_simulate)

    plot = commands.add_parser("plot", help="PNG charts and an HTML report from simulate's results")
    plot.add_argument("results", help="a .parquet or .csv file written by keysplit simulate --output")
    plot.add_argument("--out", default="plots", help="directory for the PNGs and report.html")
    plot.set_defaults(run=_plot)

    job = commands.add_parser(
        "run", help="the main job: a word count on an embedded Spark server, KG vs a skew-aware grouper"
    )
    job.add_argument(
        "--dataset",
        default="kjv",
        help="kjv (default), wordfreq, zipf, or any dataset spec of simulate, e.g. "
        "file:path=events.parquet,key=user or nycflights:key=dest (keys are counted as strings)",
    )
    job.add_argument(
        "--grouper",
        default=DEFAULT_GROUPER,
        help=f"the skew-aware grouper set against KG, optionally with parameters: flexd:delta=2.0 "
        f"(default {DEFAULT_GROUPER})",
    )
    job.add_argument("--workers", type=_worker_count, default=8)
    job.add_argument("--tuples", type=int, default=10_000_000, help="words drawn (wordfreq, zipf)")
    job.add_argument("--seed", type=int, default=0)
    job.add_argument("--report-dir", default="results/run", help="where run.html and run.png go")
    job.add_argument(
        "--no-progress",
        action="store_true",
        help="no lines on stderr as each step starts and ends, and no live line naming the Spark action",
    )
    job.set_defaults(run=_run)

    listing = commands.add_parser("groupers", help="list every grouper with its paper, or describe some")
    listing.add_argument("names", nargs="*", help="groupers to describe with every parameter's meaning")
    listing.add_argument("--markdown", action="store_true", help="the table of every grouper, as the README has it")
    listing.set_defaults(run=_list_groupers)

    advice = commands.add_parser(
        "recommend",
        help="route a sample of your stream through every grouper and recommend one",
        description="Routes the keys of FILE (Parquet, CSV, TSV: its --key column; a text file: its "
        "words), in file order, through every grouper over --workers workers, and prints λ, γ, the "
        "offline bound γ*, the aggregation cost Γ, ns/tuple and state bytes per grouper, the Pareto "
        "front, and the grouper of least weight·λ̂ + (1 − weight)·Γ̂ on the front.",
    )
    advice.add_argument("file", help="a Parquet, CSV, TSV or text file holding a sample of the stream, in order")
    advice.add_argument("--key", help="the key column (not for text files)")
    advice.add_argument("--workers", type=_worker_count, required=True)
    advice.add_argument(
        "--weight",
        type=float,
        default=0.5,
        help="weight of load imbalance against aggregation cost, in [0, 1] (default 0.5, the holistic paper's p)",
    )
    advice.add_argument("--groupers", type=_grouper_specs, help="candidates, as simulate's --groupers (default all)")
    advice.add_argument("--chart", help="write the λ-vs-γ chart (front and bound) to this PNG")
    advice.add_argument("--seed", type=int, default=0)
    advice.add_argument(
        "--max-rows",
        type=int,
        default=None,
        help="route only the file's first rows (default 1,000,000: the groupers' memory grows with distinct keys)",
    )
    advice.add_argument("--nulls", choices=["raise", "group"], default="raise", help="null keys: refuse or group")
    advice.add_argument("--no-progress", action="store_true", help="no progress bar")
    advice.set_defaults(run=_recommend)

    reproduction.add_subcommand(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError, ImportError, FileNotFoundError, datasets.MissingSourceError) as error:
        print(f"keysplit: error: {_as_command_line(str(error))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (`| head`) has stopped reading: nothing is wrong, and there is no one
        # to tell. Pointing stdout at devnull keeps the interpreter's last flush quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
