"""The papers' own workloads, as seeded synthetic streams.

Each function returns ``Iterator[pl.DataFrame]`` batches with a ``key`` column, like every
dataset of :mod:`keysplit.datasets`. Where a paper's stream is real data we do not ship
(TPC-H, DKG's country list), the function is a synthetic stand-in whose docstring says
exactly what it keeps and what it changes; ``docs/reproduction.md`` uses these streams.

All random draws come from :class:`keysplit._core.ZipfStream` (SplitMix64 and a portable
``pow``): with exponent 0 it draws uniform integers, so a seed gives the same stream on
every machine and in every release.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import polars as pl

from keysplit import _core
from keysplit._checks import require_count, require_fraction
from keysplit._errors import ConfigError
from keysplit.datasets.synthetic import DEFAULT_BATCH_ROWS, zipf

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Pd-Stream, Table IV: 10M messages per stream; the key universe is not stated. Drawing
#: 10^7 tuples from a Zipf law over 10^7 keys reproduces the table's distinct keys and
#: ``p_1st`` (``tests/test_datasets_papers.py`` checks ``p_1st``; the reproduction doc
#: prints both).
PDSTREAM_TABLE_IV: dict[float, dict[str, float]] = {
    1.0: {"messages": 10_000_000, "keys": 1_900_000, "p_1st": 0.059},
    1.2: {"messages": 10_000_000, "keys": 563_000, "p_1st": 0.185},
    1.4: {"messages": 10_000_000, "keys": 127_000, "p_1st": 0.322},
    1.6: {"messages": 10_000_000, "keys": 33_100, "p_1st": 0.437},
    1.8: {"messages": 10_000_000, "keys": 10_700, "p_1st": 0.532},
    2.0: {"messages": 10_000_000, "keys": 4_300, "p_1st": 0.607},
}
PDSTREAM_KEY_UNIVERSE = 10_000_000

#: Dynamic Key Grouping, Section 5.1: 204 country names.
DKG_COUNTRIES = 204

#: TPC-H Q1's four groups ``(l_returnflag, l_linestatus)`` and their row counts in the
#: well-known Q1 answer at scale factor 1 (``count_order``); the stream keeps their shares.
TPCH_Q1_GROUPS: dict[str, int] = {"A|F": 1_478_493, "N|F": 38_854, "N|O": 2_920_374, "R|F": 1_478_870}

#: The holistic paper's Table 3 / Section 6.1.2: "Query 3 presents up to 110000 groups".
TPCH_Q3_GROUPS = 110_000


def _uniform(buckets: int, seed: int) -> _core.ZipfStream:
    """Seeded uniform integers in ``0 .. buckets-1`` (a Zipf law of exponent 0)."""
    return _core.ZipfStream(buckets, 0.0, seed)


def _batches(tuples: int, batch_rows: int) -> Iterator[int]:
    require_count(tuples, "tuples")
    require_count(batch_rows, "batch_rows", minimum=1)
    remaining = tuples
    while remaining:
        rows = min(remaining, batch_rows)
        yield rows
        remaining -= rows


def pdstream_zipf(
    z: float, *, tuples: int = 10_000_000, seed: int = 0, batch_rows: int = DEFAULT_BATCH_ROWS
) -> Iterator[pl.DataFrame]:
    """Pd-Stream's synthetic stream of Table IV for Zipf coefficient ``z`` (1.0 to 2.0).

    ``tuples`` keys (uint64) drawn from a Zipf law of exponent ``z`` over
    ``PDSTREAM_KEY_UNIVERSE`` = 10^7 keys; with the paper's 10^7 tuples the distinct keys
    and the top key's share match Table IV. A smaller ``tuples`` keeps the law, not the
    table's distinct-key count.
    """
    return zipf(keys=PDSTREAM_KEY_UNIVERSE, tuples=tuples, z=z, seed=seed, batch_rows=batch_rows)


def dkg_country_skew(
    skewness: float,
    *,
    tuples: int = 10_000_000,
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """Dynamic Key Grouping's ``country-skew-r<N>`` streams (Section 5.1, Table 2).

    String keys ``country-000`` .. ``country-203`` stand in for the 204 country names. The
    paper does not define its "skewness ratio"; we read it as the share of the stream that
    carries one hot country: each tuple is ``country-000`` with probability ``skewness``
    (a fraction, 0.8 for ``r80``), otherwise one of the 203 others, uniformly. At
    ``skewness`` 0 all 204 are uniform. (Table 3's twitter-election stream, "68%
    skewness", has KG's StdDev 20.32 on 10 workers, which a 68% hot key gives.)
    """
    share = require_fraction(skewness, "skewness")
    resolution = 1_000_000
    hot_draws = _uniform(resolution, seed)
    other_draws = _uniform(DKG_COUNTRIES - 1 if share > 0 else DKG_COUNTRIES, seed ^ 0x5EED)
    names = pl.Series([f"country-{i:03d}" for i in range(DKG_COUNTRIES)])
    hot_below = round(share * resolution)
    for rows in _batches(tuples, batch_rows):
        hot = pl.Series(hot_draws.next_batch(rows)) < hot_below
        other = pl.Series(other_draws.next_batch(rows))
        if share > 0:
            other = other + 1
        index = pl.select(pl.when(hot).then(pl.lit(0, pl.UInt64)).otherwise(other)).to_series()
        yield pl.DataFrame({"key": names.gather(index)})


def _binned_gaussian(substreams: int, location: float, sd: float) -> list[float]:
    """Probabilities of ``1 .. substreams`` under N(location, sd) binned to the integers and
    truncated to the range."""

    def cdf(x: float) -> float:
        return 0.5 * (1.0 + math.erf((x - location) / (sd * math.sqrt(2.0))))

    low, high = cdf(0.5), cdf(substreams + 0.5)
    return [(cdf(a + 0.5) - cdf(a - 0.5)) / (high - low) for a in range(1, substreams + 1)]


def _gaussian_thresholds(substreams: int, mean: float, sd: float, resolution: int) -> list[int]:
    """Upper draw bounds of each substream ``1 .. substreams`` on a grid of ``resolution``
    draws, for the binned, truncated Gaussian whose mean is ``mean``: truncation shifts the
    mean, so its location is found by bisection."""
    low, high = mean - 10.0 * sd, mean + 10.0 * sd
    for _ in range(100):
        location = (low + high) / 2
        probabilities = _binned_gaussian(substreams, location, sd)
        if sum((a + 1) * q for a, q in enumerate(probabilities)) < mean:
            low = location
        else:
            high = location
    bounds, running = [], 0.0
    for q in _binned_gaussian(substreams, (low + high) / 2, sd):
        running += q
        bounds.append(round(running * resolution))
    return bounds


def elb_substreams(
    distribution: str,
    *,
    windows: int = 120,
    window_tuples: int = 600_000,
    substreams: int = 100,
    z: float = 1.0,
    sd: float = 10.0,
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """The ELB/CLB paper's synthetic streams S1 (``"gaussian"``) and S2 (``"zipf"``), Sect. 5.

    Key ``a_1`` (uint64) in ``1 .. substreams`` (100 in the paper); S2 follows a Zipf law of
    exponent ``z`` over it (key 1 hottest), S1 a Gaussian binned to the integers and
    truncated to the range, with the same mean as S2 (as the paper asks) and standard
    deviation ``sd``. The paper states neither ``z`` nor ``sd``: 1.0 and 10.0 are ours.
    A ``window`` column numbers the statistics windows: the paper's Poisson arrivals at
    λ = 10 000 tuples/s over 1-minute windows give about 600 000 tuples per window; we
    use exactly ``window_tuples`` per window (count windows, no timestamps).
    """
    if distribution not in ("gaussian", "zipf"):
        raise ConfigError(f"distribution must be 'gaussian' or 'zipf', got {distribution!r}")
    require_count(windows, "windows")
    require_count(window_tuples, "window_tuples")
    require_count(substreams, "substreams", minimum=1)
    if not sd > 0:
        raise ConfigError(f"sd must be positive, got {sd!r}")
    zipf_law = _core.ZipfStream(substreams, z, seed)
    mean = sum((r + 1) * zipf_law.probability(r) for r in range(substreams))
    if distribution == "zipf":
        draws, thresholds = zipf_law, None
    else:
        resolution = 1 << 20
        draws = _uniform(resolution, seed)
        thresholds = pl.Series(_gaussian_thresholds(substreams, mean, sd, resolution), dtype=pl.UInt64)
    produced = 0
    for rows in _batches(windows * window_tuples, batch_rows):
        raw = pl.Series(draws.next_batch(rows))
        if thresholds is None:
            keys = raw + 1
        else:
            keys = thresholds.search_sorted(raw, side="right").cast(pl.UInt64) + 1
        window = (pl.int_range(produced, produced + rows, eager=True) // window_tuples).cast(pl.UInt32)
        produced += rows
        yield pl.DataFrame({"key": keys, "window": window})


def tpch_q1_keys(
    *, tuples: int = 5_916_591, seed: int = 0, batch_rows: int = DEFAULT_BATCH_ROWS
) -> Iterator[pl.DataFrame]:
    """A TPC-H Query 1-like key stream: the four ``returnflag|linestatus`` groups.

    A synthetic stand-in for the holistic paper's TPC-H Q1 input (its Table 3: 4 groups):
    string keys ``"A|F"``, ``"N|F"``, ``"N|O"``, ``"R|F"``, drawn independently with the
    shares of ``TPCH_Q1_GROUPS`` (the Q1 answer's counts at scale factor 1; 25%, 0.7%,
    49%, 25%). The default ``tuples`` is that answer's total. Real TPC-H rows are in
    :func:`tpch`.
    """
    total = sum(TPCH_Q1_GROUPS.values())
    resolution = 1 << 20
    bounds, running = [], 0
    for count in TPCH_Q1_GROUPS.values():
        running += count
        bounds.append(round(running / total * resolution))
    thresholds = pl.Series(bounds, dtype=pl.UInt64)
    names = pl.Series(list(TPCH_Q1_GROUPS))
    draws = _uniform(resolution, seed)
    for rows in _batches(tuples, batch_rows):
        index = thresholds.search_sorted(pl.Series(draws.next_batch(rows)), side="right")
        yield pl.DataFrame({"key": names.gather(index)})


def tpch_q3_keys(
    *,
    groups: int = TPCH_Q3_GROUPS,
    max_group_rows: int = 7,
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """A TPC-H Query 3-like key stream: ``groups`` order keys, each on consecutive rows.

    A synthetic stand-in for the holistic paper's TPC-H Q3 group-by input (its Table 3:
    "up to ~100k" groups; Sect. 6.1.2: 110 000): Q3 groups lineitems by order, and
    ``lineitem`` lists an order's 1 to 7 items together. Key ``g`` (uint64, ascending) is
    repeated a uniform 1 .. ``max_group_rows`` times, so the stream has about
    ``4·groups`` rows and no hot key.
    """
    require_count(groups, "groups")
    require_count(max_group_rows, "max_group_rows", minimum=1)
    require_count(batch_rows, "batch_rows", minimum=1)
    sizes_draw = _uniform(max_group_rows, seed)
    chunk = 65_536
    pending: list[pl.Series] = []
    pending_rows = 0
    for start in range(0, groups, chunk):
        count = min(chunk, groups - start)
        sizes = pl.Series(sizes_draw.next_batch(count)) + 1
        keys = pl.int_range(start, start + count, eager=True, dtype=pl.UInt64).repeat_by(sizes).explode()
        pending.append(keys)
        pending_rows += keys.len()
        while pending_rows >= batch_rows:
            merged = pl.concat(pending)
            yield pl.DataFrame({"key": merged.head(batch_rows)})
            rest = merged.slice(batch_rows)
            pending, pending_rows = [rest], rest.len()
    if pending_rows:
        yield pl.DataFrame({"key": pl.concat(pending)})
