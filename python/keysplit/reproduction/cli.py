"""``keysplit reproduce``: the subcommand, its argument checks, and reading and writing
the rows of ``--output`` files."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import polars as pl

from keysplit.reproduction.common import ROW_SCHEMA, require_scale, with_differences
from keysplit.reproduction.registry import EXPERIMENTS, ROW_EXPERIMENTS, claims, experiment_names, run
from keysplit.reproduction.report import SUMMARY_LEGEND, markdown, summary
from keysplit.simulate import RESULT_SUFFIXES, result_suffix


def _print(frame: pl.DataFrame) -> None:
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=200,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        float_precision=4,
        fmt_str_lengths=100,
    ):
        print(frame)


def _read_rows(path: str) -> pl.DataFrame:
    """The rows an earlier ``--output`` wrote, with their differences recomputed, so that
    files written before a change of :func:`with_differences` follow the current rule."""
    suffix = result_suffix(path)
    rows = pl.read_csv(path) if suffix == ".csv" else pl.read_json(path) if suffix == ".json" else pl.read_parquet(path)
    schema = {**ROW_SCHEMA, "paper": pl.Float64}
    missing = [c for c in schema if c not in rows.columns]
    if missing:
        raise ValueError(f"{path}: not rows of keysplit reproduce --output (no columns {', '.join(missing)})")
    # A CSV or JSON column that is null throughout (no paper numbers) is read as text or Null.
    # Polars types cast's argument as a Mapping keyed by a union, and a Mapping's key type is
    # invariant: the dict of column names its docs show is refused (pola-rs/polars#14468).
    return with_differences(rows.cast(schema))  # type: ignore[arg-type]


def _write_rows(rows: pl.DataFrame, path: str) -> None:
    suffix = result_suffix(path)
    if suffix == ".csv":
        rows.write_csv(path)
    elif suffix == ".json":
        rows.write_json(path)
    else:
        rows.write_parquet(path)


def _saved_rows(paths: list[str], names: list[str] | None) -> pl.DataFrame:
    """The rows of ``paths`` of the experiments ``names`` (None: every row)."""
    rows = pl.concat([_read_rows(p) for p in paths], how="diagonal_relaxed")
    if names is None:
        return rows
    wanted = {name: ROW_EXPERIMENTS.get(name, (name,)) for name in names}
    rows = rows.filter(pl.col("experiment").is_in([row for group in wanted.values() for row in group]))
    absent = [name for name, group in wanted.items() if not set(group) & set(rows["experiment"])]
    if absent:
        raise ValueError(f"{', '.join(paths)} hold no rows of {', '.join(absent)}")
    return rows


def _reproduce(args: argparse.Namespace) -> int:
    names = experiment_names(args.experiments)
    if args.from_files:
        results = _saved_rows(args.from_files, None if "all" in args.experiments else names)
        origin = f"from {', '.join(args.from_files)}"
    else:
        progress = False if args.no_progress else None
        results = pl.concat(run(names, args.scale, progress=progress), how="vertical_relaxed")
        origin = f"scale {args.scale:g}"
    checked = claims(results)
    # The verdicts first: the tables below run to hundreds of rows.
    print("== summary per paper")
    _print(summary(results, checked))
    print(textwrap.fill(SUMMARY_LEGEND, width=100))
    for (name,), frame in results.group_by("experiment", maintain_order=True):
        print(f"== {name} ({origin})")
        _print(frame)
    if checked.height:
        print("== claims the papers state in words")
        _print(checked)
    if args.markdown:
        command = f"keysplit reproduce {','.join(args.experiments)}" + (
            f" --scale {args.scale:g}" if args.scale != 1.0 else ""
        )
        if args.from_files:
            command += " --from " + " ".join(args.from_files)
        Path(args.markdown).write_text(markdown(results, command), encoding="utf-8")
    if args.output:
        _write_rows(results, args.output)
    return 0


def _experiments_argument(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        experiment_names(names)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return names


def _scale_argument(text: str) -> float:
    try:
        return require_scale(float(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _results_argument(text: str) -> str:
    """A results file name, by its suffix (the one :mod:`keysplit.simulate` writes too)."""
    try:
        result_suffix(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _new_file_argument(text: str) -> str:
    """A file to write: its directory must exist, so a typo fails before the experiments."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: there is no directory {str(path.parent)!r} to write it in")
    return text


def _output_argument(text: str) -> str:
    return _new_file_argument(_results_argument(text))


def _saved_argument(text: str) -> str:
    if not Path(_results_argument(text)).is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: no such file")
    return text


def add_subcommand(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``keysplit reproduce <experiment[,experiment...]|all> [--scale] [--output]
    [--markdown] [--from] [--no-progress]``. Every argument is checked while parsing,
    before any experiment runs."""
    parser = commands.add_parser(
        "reproduce",
        help="run the papers' experiments and compare with their numbers",
        description="Runs the papers' experiments (or reads an earlier --output) and prints, "
        "first, one summary line per paper: its numbers within or over 15% of ours (or near "
        "zero, where a percentage says nothing), its claims in words that hold or fail, and a "
        "verdict: PASS (no misses), KNOWN (only misses docs/reproduction.md explains, as a "
        "scale-1 run gives), FAIL (a miss the docs do not explain), – (nothing to compare). "
        "Then every experiment's rows and the claims. Progress goes to stderr.",
    )
    parser.add_argument(
        "experiments", type=_experiments_argument, help=f"comma-separated, from: {', '.join(EXPERIMENTS)}; or all"
    )
    parser.add_argument(
        "--scale", type=_scale_argument, default=1.0, help="shrink every stream by this factor, in (0, 1]"
    )
    parser.add_argument(
        "--output",
        type=_output_argument,
        help=f"write the measured rows to this file ({', '.join(RESULT_SUFFIXES)})",
    )
    parser.add_argument(
        "--markdown", type=_new_file_argument, help="write the tables for docs/reproduction.md to this file"
    )
    parser.add_argument(
        "--from",
        dest="from_files",
        type=_saved_argument,
        nargs="+",
        metavar="FILE",
        help="print and render the rows of earlier --output files instead of running",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress lines or bar on stderr while the experiments run"
    )
    parser.set_defaults(run=_reproduce)
