"""Speed-up of multi-source routing: the same sources on 1 thread and on ``--threads``.

``keysplit.route_sources`` routes each source with its own grouper on Rust threads. The
speed-up is the time of routing every source on one thread over the time on ``--threads``
threads (best of ``--repeat``), with private and with shared load counters. It can only
approach the thread count when the machine's cores are otherwise idle: the load average
at the start and the end of the run is recorded next to the figures.

    python benches/multi_source.py --sources 2 --threads 2 --output benches/results/multi_source.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import threading
import time
from pathlib import Path

import polars as pl

import keysplit

RESULTS = Path(__file__).parent / "results"


def best_seconds(run, repeat: int) -> float:  # noqa: ANN001 - a zero-argument callable
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def machine_parallelism(threads: int, repeat: int) -> float:
    """The speed-up of a control that needs nothing of keysplit: SHA-256 of 8 MB buffers on
    ``threads`` Python threads (hashlib releases the GIL) over one thread. Near ``threads``
    on idle cores; near 1 when other processes hold all but one core."""
    data = b"k" * (8 << 20)

    def work(rounds: int) -> None:
        for _ in range(rounds):
            hashlib.sha256(data).digest()

    def run(count: int) -> None:
        pool = [threading.Thread(target=work, args=(24 // count,)) for _ in range(count)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()

    return best_seconds(lambda: run(1), repeat) / best_seconds(lambda: run(threads), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=10_000_000, help="keys per source")
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--groupers", default="key,pkg,cam_hll,pdstream")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", type=Path, default=RESULTS / "multi_source.json")
    args = parser.parse_args()

    sources = [
        next(keysplit.datasets.zipf(keys=1_000_000, tuples=args.rows, z=1.1, seed=s, batch_rows=args.rows))["key"]
        for s in range(args.sources)
    ]
    columns = {"uint64": sources, "string": [("user_" + s.cast(pl.String)).rename("key") for s in sources]}
    load_start = os.getloadavg()
    control = machine_parallelism(args.threads, args.repeat)
    print(f"control (SHA-256 on {args.threads} threads): speed-up {control:.2f}x", flush=True)
    results = []
    for name in args.groupers.split(","):
        for key_type, keys in columns.items():
            for shared in (False, True):
                seconds = {
                    threads: best_seconds(
                        lambda threads=threads: keysplit.route_sources(
                            name, args.workers, keys, seed=1, shared_loads=shared, threads=threads
                        ),
                        args.repeat,
                    )
                    for threads in (1, args.threads)
                }
                row = {
                    "grouper": name,
                    "key_type": key_type,
                    "loads": "shared" if shared else "private",
                    "sources": args.sources,
                    "threads": args.threads,
                    "rows_per_source": args.rows,
                    "workers": args.workers,
                    "one_thread_mkeys_per_s": args.sources * args.rows / seconds[1] / 1e6,
                    "mkeys_per_s": args.sources * args.rows / seconds[args.threads] / 1e6,
                    "speedup": seconds[1] / seconds[args.threads],
                }
                results.append(row)
                print(
                    f"{name:>10} {key_type:>6} {row['loads']:>7}: 1 thread {row['one_thread_mkeys_per_s']:7.1f} M/s, "
                    f"{args.threads} threads {row['mkeys_per_s']:7.1f} M/s, speed-up {row['speedup']:.2f}x",
                    flush=True,
                )
    meta = {
        "cores": os.cpu_count(),
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "repeat": args.repeat,
        "control_speedup": control,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": meta, "results": results}, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
