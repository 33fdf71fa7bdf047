"""Renders the JSON results of ``benches/`` into the tables of ``docs/performance.md``.

Rewrites the part of the document between ``<!-- results:begin -->`` and
``<!-- results:end -->``; the rest (method, profiles, explanations) is written by hand.

    python benches/render.py            # after the benchmarks wrote benches/results/*.json
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benches" / "results"
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def markdown(frame: pl.DataFrame) -> str:
    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * frame.width]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


def throughput_section(data: dict) -> str:
    machine = data["machine"]
    frame = pl.DataFrame(data["results"])
    parts = [
        f"Measured {machine['date']} on {machine['cpu']} ({machine['cores']} cores, load average "
        f"{machine['load_average'][0]:.1f} at the start, {machine['load_average_end'][0]:.1f} at the end), "
        f"keysplit {machine['keysplit']}, Polars {machine['polars']}, NumPy {machine['numpy']}; "
        f"best of {data['repeat']} runs. The ratios are keysplit's speed over that of "
        "`pl.col('key').hash(1) % n` and of the NumPy hash on the same keys in the same run "
        "(above 1: keysplit is faster)."
    ]
    for (rows,), by_rows in frame.sort("rows").group_by("rows", maintain_order=True):
        by_rows = by_rows.with_columns((pl.col("key_type") + " n=" + pl.col("workers").cast(pl.String)).alias("column"))
        tables = []
        for value, title in (
            ("mkeys_per_s", "M keys/s"),
            ("ratio_to_polars", "× Polars `hash % n`"),
            ("ratio_to_numpy", "× NumPy hash"),
        ):
            table = by_rows.pivot(on="column", index="grouper", values=value, aggregate_function="first")
            tables.append(f"{title}:\n\n" + markdown(table))
        baselines = by_rows.group_by("column", maintain_order=True).agg(
            pl.col("polars_mkeys_per_s").first().alias("Polars M keys/s"),
            pl.col("numpy_mkeys_per_s").first().alias("NumPy M keys/s"),
        )
        parts.append(f"#### {rows:,} keys\n\n" + "\n\n".join(tables) + "\n\nBaselines:\n\n" + markdown(baselines))
    states = (
        frame.group_by("grouper", "key_type", "workers", maintain_order=True)
        .agg(pl.col("state_bytes").max())
        .filter(pl.col("key_type") == "uint64")
        .pivot(on="workers", index="grouper", values="state_bytes", aggregate_function="first")
    )
    states = states.rename({c: f"n={c} bytes" for c in states.columns if c != "grouper"})
    parts.append("#### Routing state after the run (`Grouper.state_bytes`, uint64 keys)\n\n" + markdown(states))
    return "\n\n".join(parts)


def overhead_section(data: dict) -> str:
    calls = pl.DataFrame(data["call_overhead"]).with_columns(pl.col("us_per_call").round(2))
    copies = (
        pl.DataFrame(data["copies"])
        .with_columns(
            (pl.col(c) / 1e6).round(1).alias(c.replace("_bytes", " MB"))
            for c in ("key_buffer_bytes", "ids_bytes", "rss_peak_growth_bytes")
        )
        .select("input", "rows", "key_buffer MB", "ids MB", "rss_peak_growth MB", "tracemalloc_peak_bytes")
    )
    states = pl.DataFrame(data["state"]).with_columns((pl.col("state_bytes") / 1e6).round(3).alias("MB"))
    return (
        "#### Python call overhead (µs per call, one key)\n\n"
        + markdown(calls)
        + "\n\n#### Key buffers are not copied\n\n"
        + markdown(copies)
        + "\n\n#### Memory: the papers' settings\n\n"
        + markdown(states)
    )


def multi_source_section(data: dict) -> str:
    machine = data["machine"]
    frame = pl.DataFrame(data["results"]).select(
        "grouper", "key_type", "loads", "sources", "threads", "one_thread_mkeys_per_s", "mkeys_per_s", "speedup"
    )
    return (
        f"#### Multi-source speed-up\n\nMeasured {machine['date']}, {machine['cores']} cores, load average "
        f"{machine['load_average_start'][0]:.1f} at the start and {machine['load_average_end'][0]:.1f} at the end; "
        f"best of {machine['repeat']}. Control: SHA-256 on {frame['threads'][0]} Python threads ran "
        f"{machine.get('control_speedup', float('nan')):.2f}× faster than on one, in the same run "
        "(the most this machine gave any process then).\n\n" + markdown(frame)
    )


def main() -> None:
    sections = []
    for name, render in (
        ("route_throughput.json", throughput_section),
        ("call_overhead.json", overhead_section),
        ("multi_source.json", multi_source_section),
    ):
        path = RESULTS / name
        if path.exists():
            sections.append(render(json.loads(path.read_text())))
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + BEGIN + "\n\n" + "\n\n".join(sections) + "\n\n" + END + tail)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
