"""The ELB/CLB paper (Guo and Zhou, Euro-Par 2017 Workshops): its numbers, its
experiment, its claims and the differences ``docs/reproduction.md`` explains.

The paper measures var(L), the variance of the workers' loads per window, of its eager
(ELB) and coarse (CLB) rebalancing on Gaussian and Zipf streams of 100 substreams, and the
state each rebalance moves (Section 5.1, Figs. 2-4 and Table 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from keysplit import datasets, metrics
from keysplit._grouper import Grouper, GrouperName
from keysplit._numbers import to_float
from keysplit.reproduction.common import (
    Claims,
    PaperNumber,
    experiment_frame,
    measured_row,
    our_value,
    paper_numbers_frame,
    require_scale,
    routed_frame,
    rows_where,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

# Section 5.1, Fig. 2 text: CLB, n = 10, 100 substreams, 120 one-minute windows; var(L)
# over the windows.
_STATED: list[PaperNumber] = [
    ("elb", "clb", 10, "stream", 0.0, "mean_var", 2.08983e10, "ELB/CLB 5.1, Fig. 2 text (Gaussian S1)"),
    ("elb", "clb", 10, "stream", 1.0, "mean_var", 2.08325e10, "ELB/CLB 5.1, Fig. 2 text (Zipf S2)"),
    ("elb", "clb", 10, "stream", 0.0, "sd_var", 6.76016e8, "ELB/CLB 5.1, Fig. 2 text (Gaussian S1)"),
    ("elb", "clb", 10, "stream", 1.0, "sd_var", 7.92797e8, "ELB/CLB 5.1, Fig. 2 text (Zipf S2)"),
    # Fig. 4 text (the real Twitter stream): state moved per load balancing.
    *[
        ("elb", "elb", 10, "stream", s, "moved_pct", 14.5, "ELB/CLB 5.1, Fig. 4 text (Twitter stream)")
        for s in (0.0, 1.0)
    ],
    *[("elb", "clb", 10, "stream", s, "moved_pct", 48.4, "ELB/CLB 5.1, Table 1 text") for s in (0.0, 1.0)],
    *[("elb", "clb", 10, "stream", s, "moved_amortized_pct", 1.6, "ELB/CLB 5.1, Table 1 text") for s in (0.0, 1.0)],
]

#: The numbers the ELB/CLB paper states that our simulations can measure, with their sources.
PAPER_NUMBERS = paper_numbers_frame(_STATED)

ELB_GROUPERS: tuple[GrouperName, ...] = ("elb", "clb", "pkg", "uhlb")


def _moved_state(per_window: pl.DataFrame) -> tuple[float, float]:
    """From :func:`keysplit.metrics.summarize`'s window rows: the state moved entering each
    window (ψ, Eq. 2, d_i the previous window's tuples of a moved key) as a percentage of
    the previous window's tuples. Returns (mean over the windows that moved anything,
    mean over all windows after the first)."""
    share = (
        per_window["state_moved"].slice(1).cast(pl.Float64) / per_window["tuples"].slice(0, per_window.height - 1)
    ) * 100.0
    moving = share.filter(share > 0)
    return (to_float(moving.mean()) if moving.len() else 0.0, to_float(share.mean()) if share.len() else 0.0)


def elb(scale: float = 1.0, *, workers: int = 10, seed: int = 0) -> pl.DataFrame:
    """The ELB/CLB paper's Section 5.1: var(L) per window over 120 windows of Gaussian
    (``value`` 0) and Zipf (``value`` 1) streams of 100 substreams, n = 10, and the state
    each rebalance moves.

    Windows have 600 000·``scale`` tuples. ``cv2`` is var(L)/mean(L)², free of the
    window size. ELB and CLB get 100 substreams and the windows of the stream.
    """
    window_tuples = max(1, round(600_000 * require_scale(scale)))
    rows = []
    for code, distribution in ((0.0, "gaussian"), (1.0, "zipf")):
        keys = list(datasets.elb_substreams(distribution, window_tuples=window_tuples, seed=seed))
        for name in ELB_GROUPERS:
            params = {"substreams": 100, "window_tuples": window_tuples} if name in ("elb", "clb") else {}
            frame = routed_frame(Grouper(name, workers=workers, seed=seed, **params), keys)
            summary = metrics.summarize(frame, workers=workers, window="window")
            per_window = summary.filter(pl.col("window").is_not_null())
            var = per_window["load_variance"]
            mean_load = per_window["tuples"].cast(pl.Float64) / workers
            rows.append(measured_row("elb", name, workers, "stream", code, "mean_var", to_float(var.mean())))
            rows.append(measured_row("elb", name, workers, "stream", code, "sd_var", to_float(var.std(ddof=0))))
            rows.append(
                measured_row("elb", name, workers, "stream", code, "cv2", to_float((var / mean_load**2).mean()))
            )
            if name in ("elb", "clb"):
                moved, amortized = _moved_state(per_window)
                rows.append(measured_row("elb", name, workers, "stream", code, "moved_pct", moved))
                rows.append(measured_row("elb", name, workers, "stream", code, "moved_amortized_pct", amortized))
    return experiment_frame(rows, PAPER_NUMBERS)


def claims(frame: pl.DataFrame) -> list[dict[str, object]]:
    """The ELB/CLB paper's orderings in words (Section 5.1, Figs. 2-4), checked on the
    ``elb`` rows of ``frame``; none when it has none."""
    measured = rows_where(frame, experiment="elb")
    checked = Claims("elb")
    if measured.is_empty():
        return checked.rows
    for code, label in ((0.0, "Gaussian"), (1.0, "Zipf")):
        mean_variances = {g: our_value(measured, grouper=g, value=code, metric="mean_var") for g in ELB_GROUPERS}
        checked.check(
            f"{label}: ELB's mean var(L) below CLB's",
            "ELB/CLB 5.1, Fig. 3",
            mean_variances["elb"] < mean_variances["clb"],
        )
        for g in ("pkg", "uhlb"):
            checked.check(
                f"{label}: {g.upper()}'s mean var(L) an order of magnitude below CLB's",
                "ELB/CLB 5.1, Fig. 3 (Twitter stream)",
                mean_variances[g] * 10 <= mean_variances["clb"],
            )
        amortized_moves = {
            g: our_value(measured, grouper=g, value=code, metric="moved_amortized_pct") for g in ("elb", "clb")
        }
        checked.check(
            f"{label}: CLB moves less state than ELB, amortized over the windows",
            "ELB/CLB 5.1, Fig. 4 (Twitter stream)",
            amortized_moves["clb"] < amortized_moves["elb"],
        )
    gaussian = our_value(measured, grouper="clb", value=0.0, metric="mean_var")
    zipf = our_value(measured, grouper="clb", value=1.0, metric="mean_var")
    checked.check(
        "CLB: mean var(L) about equal on Gaussian and Zipf (within 15%)",
        "ELB/CLB 5.1, Fig. 2",
        abs(gaussian - zipf) <= 0.15 * max(gaussian, zipf),
    )
    return checked.rows


#: The ELB/CLB paper's numbers more than 15% from ours at scale 1 that
#: ``docs/reproduction.md`` explains, by the key columns they share.
EXPLAINED_NUMBERS: list[Mapping[str, object]] = [
    # The paper's var(L) exceeds what ten loads summing to a window allow; unit unstated.
    *({"experiment": "elb", "grouper": "clb", "metric": m} for m in ("mean_var", "sd_var")),
    # ELB's 14.5% is measured on a drifting real stream; ours are stationary.
    {"experiment": "elb", "grouper": "elb", "metric": "moved_pct"},
]

#: The ELB/CLB paper's claims that fail at scale 1 and ``docs/reproduction.md`` explains.
EXPLAINED_CLAIMS: frozenset[str] = frozenset(
    {
        # Stated for the paper's real Twitter stream; ours are stationary and synthetic.
        *(f"{s}: UHLB's mean var(L) an order of magnitude below CLB's" for s in ("Gaussian", "Zipf")),
        *(f"{s}: CLB moves less state than ELB, amortized over the windows" for s in ("Gaussian", "Zipf")),
        # Depends on the Gaussian's and the Zipf's parameters, which the paper does not state.
        "CLB: mean var(L) about equal on Gaussian and Zipf (within 15%)",
    }
)
