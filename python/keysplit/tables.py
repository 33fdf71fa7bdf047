"""The papers' tables, computed by the library's own functions.

With their default arguments these reproduce the published tables; other arguments give
the same tables for other configurations.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from keysplit import _core


def pdstream_probability_table(
    window: int = 16, *, expected_probability: float = 0.99, epsilon: float = 1e-4
) -> pl.DataFrame:
    """Pd-Stream's probability table (Algorithm 1; Table III with the defaults).

    One row per occurrence count ``n_k = 1 .. window`` of a key in the sampling window, with
    ``probability`` the estimated ``p̂_k`` (a fraction; Table III prints percents).
    """
    probabilities = _core.pdstream_probability_table(window, expected_probability, epsilon)
    return pl.DataFrame(
        {"occurrences": range(1, len(probabilities) + 1), "probability": probabilities},
        schema={"occurrences": pl.UInt32, "probability": pl.Float64},
    )


def dkg_threshold_table(machines: Sequence[int] = (5, 10, 20, 50, 100)) -> pl.DataFrame:
    """Dynamic Key Grouping's Table 1: per worker count, the ideal load ``Li = 100/m`` %,
    the scale-out threshold ``Ls = Li + √Li`` % and the widest ring slice of a key."""
    rows = _core.dkg_threshold_table(list(machines))
    return pl.DataFrame(
        rows,
        schema={
            "machines": pl.UInt32,
            "ideal_load": pl.Float64,
            "threshold_load": pl.Float64,
            "max_machines": pl.UInt32,
        },
        orient="row",
    )
