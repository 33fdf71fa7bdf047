"""Routing throughput of keysplit's groupers against Polars' own hash partitioning.

Every grouper routes the same keys as ``pl.Series.hash(seed) % n`` in the same process;
the table gives keys per second and the ratio to Polars (above 1: keysplit is faster).
Each figure is the best of ``--repeat`` runs, the usual way to read throughput on a
shared, noisy machine.

    python benches/route_throughput.py --rows 10000000 --workers 8 --output results.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable

import polars as pl

import keysplit


def best_seconds(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def key_columns(rows: int, seed: int) -> dict[str, pl.Series]:
    ranks = pl.concat(keysplit.datasets.zipf(keys=1_000_000, tuples=rows, z=1.1, seed=seed))["key"]
    return {
        "uint64": ranks,
        "string": ("user_" + ranks.cast(pl.String)).rename("key"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[8])
    parser.add_argument("--groupers", default="key,pkg,shuffle")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", help="also write the results as JSON")
    args = parser.parse_args()

    results = []
    for key_type, keys in key_columns(args.rows, seed=0).items():
        for n in args.workers:
            polars_s = best_seconds(lambda: keys.hash(1) % n, args.repeat)
            for name in args.groupers.split(","):
                # A fresh grouper per run: every run routes the same stream from the same state.
                grouper_s = best_seconds(lambda: keysplit.Grouper(name, workers=n, seed=1).route(keys), args.repeat)
                results.append(
                    {
                        "grouper": name,
                        "key_type": key_type,
                        "workers": n,
                        "rows": args.rows,
                        "mkeys_per_s": args.rows / grouper_s / 1e6,
                        "polars_hash_mkeys_per_s": args.rows / polars_s / 1e6,
                        "ratio_to_polars": polars_s / grouper_s,
                    }
                )
    table = pl.DataFrame(results)
    print(f"keysplit {keysplit.__version__}, polars {pl.__version__}, {platform.processor() or platform.machine()}")
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, float_precision=2):
        print(table)
    if args.output:
        with open(args.output, "w") as out:
            json.dump({"keysplit": keysplit.__version__, "polars": pl.__version__, "results": results}, out, indent=2)


if __name__ == "__main__":
    main()
