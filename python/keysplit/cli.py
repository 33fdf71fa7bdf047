"""The ``keysplit`` command line."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

import polars as pl

from keysplit import datasets, metrics, reproduction
from keysplit._grouper import Grouper, groupers
from keysplit._routing import route_batches

if TYPE_CHECKING:
    from collections.abc import Sequence


def _simulate(args: argparse.Namespace) -> int:
    rows = []
    for name in args.groupers.split(","):
        grouper = Grouper(name.strip(), workers=args.workers, seed=args.seed)
        stream = datasets.zipf(keys=args.keys, tuples=args.tuples, z=args.z, seed=args.seed)
        routed: list[pl.DataFrame] = []
        routing_seconds = 0.0
        for batch in stream:
            started = time.perf_counter()
            ids = grouper.route(batch.get_column("key"))
            routing_seconds += time.perf_counter() - started
            routed.append(batch.with_columns(pl.Series(ids).alias("worker")))
        frame = pl.concat(routed)
        loads = metrics.worker_loads(frame, workers=args.workers)
        rows.append(
            {
                "grouper": grouper.name,
                "load_imbalance": metrics.load_imbalance(loads),
                "replication_factor": metrics.replication_factor(frame),
                "max_load": loads.max(),
                "mkeys_per_s": args.tuples / routing_seconds / 1e6 if routing_seconds else None,
            }
        )
    table = pl.DataFrame(rows)
    print(
        f"Zipf stream: {args.tuples:,} tuples over {args.keys:,} keys, z={args.z}, "
        f"seed={args.seed}; {args.workers} workers"
    )
    with pl.Config(
        tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, float_precision=4
    ):
        print(table)
    if args.output:
        (table.write_csv if args.output.endswith(".csv") else table.write_parquet)(args.output)
    return 0


def _list_groupers(_: argparse.Namespace) -> int:
    for info in groupers():
        defaults = ", ".join(f"{k}={v!r}" for k, v in info.defaults.items()) or "-"
        print(f"{info.name:10} {info.title}\n{'':10} paper: {info.paper}\n{'':10} defaults: {defaults}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="keysplit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    simulate = commands.add_parser(
        "simulate", help="route a seeded Zipf stream and print load imbalance and replication"
    )
    simulate.add_argument("--groupers", default="shuffle,key,pkg", help="comma-separated names")
    simulate.add_argument("--workers", type=int, default=8)
    simulate.add_argument("--keys", type=int, default=10_000)
    simulate.add_argument("--tuples", type=int, default=1_000_000)
    simulate.add_argument("--z", type=float, default=1.2, help="Zipf exponent")
    simulate.add_argument("--seed", type=int, default=0)
    simulate.add_argument("--output", help="write the table to this .parquet or .csv file")
    simulate.set_defaults(run=_simulate)

    listing = commands.add_parser("groupers", help="list every grouper with its paper")
    listing.set_defaults(run=_list_groupers)

    reproduction.add_subcommand(commands)

    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError) as error:
        print(f"keysplit: error: {error}", file=sys.stderr)
        return 2
