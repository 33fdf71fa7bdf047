"""Python call overhead of routing, and evidence that key buffers are not copied.

Overhead: the time of ``Grouper.route`` on a one-key column of each input type, and of
``route_key``, where routing the key itself costs a few nanoseconds; the rest is the call.

Memory: the routing state of Pd-Stream at n = 128 and of the holistic paper's HLL
variants at 32 workers, against the limits we set from the papers' own figures (5 MB and
0.1 MB).

Copies: routing a large column must allocate the worker ids (4 bytes a key) and nothing
the size of the keys. The peak resident set size (``VmHWM``, reset through
``/proc/self/clear_refs`` before each route) and ``tracemalloc``'s peak of Python
allocations are measured around each route and compared with the key buffer's size.

    python benches/call_overhead.py --output benches/results/call_overhead.json
"""

from __future__ import annotations

import argparse
import json
import timeit
import tracemalloc
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

import keysplit

RESULTS = Path(__file__).parent / "results"


def call_overheads(number: int, repeat: int) -> list[dict[str, object]]:
    grouper = keysplit.Grouper("key", workers=8, seed=1)
    inputs = {
        "polars uint64": pl.Series([7], dtype=pl.UInt64),
        "polars string": pl.Series(["user_7"]),
        "pyarrow uint64": pa.array([7], pa.uint64()),
        "numpy uint64": np.array([7], dtype=np.uint64),
        "list of one str": ["user_7"],
    }
    results = []
    for label, keys in inputs.items():
        seconds = min(timeit.repeat(lambda keys=keys: grouper.route(keys), number=number, repeat=repeat))
        results.append({"call": f"route({label})", "us_per_call": seconds / number * 1e6})
    for label, key in {"int": 7, "str": "user_7"}.items():
        seconds = min(timeit.repeat(lambda key=key: grouper.route_key(key), number=number, repeat=repeat))
        results.append({"call": f"route_key({label})", "us_per_call": seconds / number * 1e6})
    return results


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def key_buffer_copies(rows: int) -> list[dict[str, object]]:
    ranks = next(keysplit.datasets.zipf(keys=1_000_000, tuples=rows, z=1.1, seed=0, batch_rows=rows))["key"]
    strings = ("user_" + ranks.cast(pl.String)).rename("key")
    inputs = {
        "polars uint64": (ranks, rows * 8),
        "polars string": (strings, int(strings.str.len_bytes().sum()) + rows * 16),
        "pyarrow string": (strings.to_arrow(), int(strings.str.len_bytes().sum()) + rows * 4),
        "numpy uint64": (ranks.to_numpy(), rows * 8),
    }
    results = []
    for label, (keys, key_bytes) in inputs.items():
        grouper = keysplit.Grouper("key", workers=8, seed=1)
        grouper.route(keys[:1000])  # first-call allocations (caches, module state) out of the way
        resettable = _reset_peak_rss()
        rss_before = _status_kib("VmRSS")
        tracemalloc.start()
        ids = grouper.route(keys)
        _, python_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss_peak_growth = (_status_kib("VmHWM") - rss_before) * 1024 if resettable else None
        results.append(
            {
                "input": label,
                "rows": rows,
                "key_buffer_bytes": key_bytes,
                "ids_bytes": len(ids) * 4,
                "rss_peak_growth_bytes": rss_peak_growth,
                "tracemalloc_peak_bytes": python_peak,
            }
        )
        del ids
    return results


#: (grouper, workers, the most bytes we allow): Pd-Stream at n = 128 (the paper
#: reports about 4.5 MB) and the holistic paper's HLL variants at 32 workers (0.08 MB in
#: its Table 4).
STATE_LIMITS = [("pdstream", 128, 5_000_000)] + [
    (name, 32, 100_000) for name in ("cm_hll", "am_hll", "cam_hll", "lm_hll")
]


def state_sizes(rows: int) -> list[dict[str, object]]:
    """``Grouper.state_bytes`` after routing ``rows`` Zipf(1.1) string keys over 10^6 keys."""
    ranks = next(keysplit.datasets.zipf(keys=1_000_000, tuples=rows, z=1.1, seed=0, batch_rows=rows))["key"]
    keys = ("user_" + ranks.cast(pl.String)).rename("key")
    results = []
    for name, workers, limit in STATE_LIMITS:
        grouper = keysplit.Grouper(name, workers=workers, seed=1)
        grouper.route(keys)
        results.append(
            {
                "grouper": name,
                "workers": workers,
                "rows": rows,
                "state_bytes": grouper.state_bytes,
                "limit_bytes": limit,
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--output", type=Path, default=RESULTS / "call_overhead.json")
    args = parser.parse_args()
    overheads = call_overheads(args.number, args.repeat)
    for row in overheads:
        print(f"{row['call']:>28}: {row['us_per_call']:.2f} us")
    copies = key_buffer_copies(args.rows)
    for row in copies:
        print(
            f"{row['input']:>16}: keys {row['key_buffer_bytes'] / 1e6:.0f} MB, ids {row['ids_bytes'] / 1e6:.0f} MB, "
            f"peak RSS growth {(row['rss_peak_growth_bytes'] or 0) / 1e6:.1f} MB, "
            f"tracemalloc peak {row['tracemalloc_peak_bytes'] / 1e3:.1f} kB"
        )
    states = state_sizes(1_000_000)
    for row in states:
        print(
            f"{row['grouper']:>16} n={row['workers']}: state {row['state_bytes']:,} bytes (limit {row['limit_bytes']:,})"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"call_overhead": overheads, "copies": copies, "state": states}, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
