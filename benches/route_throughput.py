"""Routing throughput of every grouper against Polars' and NumPy's hash partitioning.

On the same keys and in the same process, each grouper's ``Grouper.route`` is timed next to
Polars' ``pl.col("key").hash(seed) % n`` and a NumPy-vectorised hash ``% n``; the results
give keys per second and the ratios (above 1: keysplit is faster), plus each grouper's
``state_bytes`` after routing. Keys are Zipf(1.1) ranks over 10^6 keys, as uint64 and as
the short strings ``user_<rank>`` (6 to 11 bytes). Each figure is the best of ``--repeat``
runs, the usual way to read throughput on a shared, noisy machine; every run routes the
same stream with a fresh grouper.

    python benches/route_throughput.py                          # the default grid, minutes
    python benches/route_throughput.py --sizes 1e6 1e7 1e8      # the full grid, hours
    python benches/route_throughput.py --groupers key,pkg --sizes 1e7 --workers 8

``benches/render.py`` turns the JSON (``--output``) into the tables of
``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

import keysplit

RESULTS = Path(__file__).parent / "results"

SPLITMIX_1 = np.uint64(0xBF58476D1CE4E5B9)
SPLITMIX_2 = np.uint64(0x94D049BB133111EB)


def best_seconds(run: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` timed runs of ``run``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def key_columns(rows: int, seed: int = 0) -> dict[str, pl.Series]:
    """The benchmark's keys: uint64 Zipf ranks and the same keys as ``user_<rank>``."""
    ranks = next(keysplit.datasets.zipf(keys=1_000_000, tuples=rows, z=1.1, seed=seed, batch_rows=rows))["key"]
    return {"uint64": ranks, "string": ("user_" + ranks.cast(pl.String)).rename("key")}


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, in place on a uint64 array: NumPy's best vectorised hash."""
    x ^= x >> np.uint64(30)
    x *= SPLITMIX_1
    x ^= x >> np.uint64(27)
    x *= SPLITMIX_2
    x ^= x >> np.uint64(31)
    return x


def numpy_partitioner(keys: pl.Series) -> Callable[[int], np.ndarray]:
    """A NumPy-vectorised ``hash(k) % n`` over ``keys``.

    Integers are mixed by SplitMix64's finaliser. Strings (at most 16 bytes here) are laid
    out once, before timing, as fixed-width 16-byte records, the only layout NumPy
    vectorises; the hash mixes their two 64-bit words.
    """
    if keys.dtype == pl.UInt64:
        values = keys.to_numpy()

        def partition(n: int) -> np.ndarray:
            return _mix(values.copy()) % np.uint64(n)

        return partition
    records = keys.cast(pl.Binary).to_numpy().astype("S16")
    words = records.view(np.uint64).reshape(-1, 2)
    low, high = np.ascontiguousarray(words[:, 0]), np.ascontiguousarray(words[:, 1])

    def partition_strings(n: int) -> np.ndarray:
        h = _mix(high.copy())
        h ^= low
        return _mix(h) % np.uint64(n)

    return partition_strings


def groupers_arg(text: str) -> list[str]:
    names = [g.name for g in keysplit.groupers()]
    if text == "all":
        return names
    chosen = text.split(",")
    unknown = [g for g in chosen if g not in names]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown groupers {unknown}; known: {names}")
    return chosen


def sizes_arg(text: str) -> int:
    return int(float(text))


def machine() -> dict[str, object]:
    """What the figures were measured on, including how busy the machine was."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "keysplit": keysplit.__version__,
        "polars": pl.__version__,
        "numpy": np.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=sizes_arg, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 64, 1024])
    parser.add_argument("--groupers", type=groupers_arg, default="all", help="comma-separated names, or all")
    parser.add_argument("--key-types", nargs="+", choices=["uint64", "string"], default=["uint64", "string"])
    parser.add_argument(
        "--slow-size",
        type=sizes_arg,
        default=1_000_000,
        help="groupers other than key, pkg and shuffle run only at sizes up to this (0: no limit)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS / "route_throughput.json")
    args = parser.parse_args()

    meta = machine()
    results = []
    for rows in args.sizes:
        columns = key_columns(rows)
        for key_type in args.key_types:
            keys = columns[key_type]
            frame = keys.to_frame("key")
            numpy_hash = numpy_partitioner(keys)
            frame.select(pl.col("key").hash(1) % 8)  # Polars' one-time set-up out of the timing
            for n in args.workers:
                polars_s = best_seconds(lambda: frame.select(pl.col("key").hash(1) % n), args.repeat)
                numpy_s = best_seconds(lambda: numpy_hash(n), args.repeat)
                for name in args.groupers:
                    if args.slow_size and rows > args.slow_size and name not in ("key", "pkg", "shuffle"):
                        continue
                    state_bytes = 0

                    def run() -> None:
                        nonlocal state_bytes
                        grouper = keysplit.Grouper(name, workers=n, seed=1)
                        grouper.route(keys)
                        state_bytes = grouper.state_bytes

                    seconds = best_seconds(run, args.repeat)
                    row = {
                        "grouper": name,
                        "key_type": key_type,
                        "workers": n,
                        "rows": rows,
                        "mkeys_per_s": rows / seconds / 1e6,
                        "polars_mkeys_per_s": rows / polars_s / 1e6,
                        "numpy_mkeys_per_s": rows / numpy_s / 1e6,
                        "ratio_to_polars": polars_s / seconds,
                        "ratio_to_numpy": numpy_s / seconds,
                        "state_bytes": state_bytes,
                    }
                    results.append(row)
                    print(
                        f"{name:>12} {key_type:>6} n={n:<5} rows={rows:<10} {row['mkeys_per_s']:8.1f} M/s"
                        f"  x{row['ratio_to_polars']:.2f} Polars  x{row['ratio_to_numpy']:.2f} NumPy"
                        f"  {state_bytes} B",
                        flush=True,
                    )
    meta["load_average_end"] = os.getloadavg()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": meta, "repeat": args.repeat, "results": results}, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
