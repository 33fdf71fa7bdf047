"""Pd-Stream (Sun, Wu, Wen, Gao and Buyya): its numbers, its experiments, its claims and
the differences ``docs/reproduction.md`` explains.

The paper measures λ (its LI) and γ (its RF) of PKG, W-Choices, DAGreedy and Pd-Stream on
the Zipf streams of its Table IV (Section VI-D, Fig. 8 and VI-E, Fig. 10). Besides
:func:`pdstream`, three side experiments vary what the paper leaves open, behind
numbers and claims we do not meet: W-C's head threshold (:func:`pdstream_wchoices_theta`),
PKG's hash seeds (:func:`pdstream_pkg_seeds`) and DAGreedy's interval and window
(:func:`pdstream_dagreedy_params`).
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
    from collections.abc import Iterable, Mapping

# Section VI-D (Fig. 8) and VI-E (Fig. 10).
_STATED: list[PaperNumber] = [
    ("pdstream", "pkg", 64, "z", 1.0, "lambda", 0.97, "Pd-Stream VI-D, Fig. 8 text"),
    ("pdstream", "pkg", 64, "z", 2.0, "lambda", 18.45, "Pd-Stream VI-D, Fig. 8 text"),
    ("pdstream", "pkg", 16, "z", 1.6, "lambda", 3.85, "Pd-Stream VI-D, Fig. 8 text"),
    ("pdstream", "pkg", 128, "z", 1.6, "lambda", 27.01, "Pd-Stream VI-D, Fig. 8 text"),
    *[
        (
            "pdstream",
            g,
            p,
            "z",
            z,
            "lambda",
            1e-6 if p <= 32 else 1e-5,
            "Pd-Stream VI-D: 'stabilizes at 10^-6 (p 16, 32) / 10^-5 (p 64, 128)'",
        )
        for g in ("w_choices", "pdstream")
        for p in (16, 32, 64, 128)
        for z in (1.0, 2.0)
    ],
    *[
        (
            "pdstream",
            "pkg",
            p,
            "z",
            z,
            "gamma",
            rf,
            "Pd-Stream VI-E, Fig. 10 text: 'from approximately 1.15 to around 1.03'",
        )
        for p in (16, 32, 64, 128)
        for z, rf in ((1.0, 1.15), (2.0, 1.03))
    ],
    ("pdstream", "dagreedy", 128, "z", 2.0, "gamma", 1.029, "Pd-Stream VI-E, Fig. 10 text (DAGreedy's maximum)"),
    ("pdstream", "w_choices", 16, "z", 1.0, "gamma", 1.18, "Pd-Stream VI-E, Fig. 10 text"),
    ("pdstream", "w_choices", 128, "z", 2.0, "gamma", 7.97, "Pd-Stream VI-E, Fig. 10 text"),
    ("pdstream", "pdstream", 16, "z", 1.2, "gamma", 1.05, "Pd-Stream VI-E, Fig. 10 text"),
    ("pdstream", "pdstream", 64, "z", 1.4, "gamma", 1.19, "Pd-Stream VI-E, Fig. 10 text"),
    ("pdstream", "pdstream", 64, "z", 1.8, "gamma", 1.35, "Pd-Stream VI-E, Fig. 10 text"),
    ("pdstream", "pdstream", 128, "z", 2.0, "gamma", 1.74, "Pd-Stream VI-E, Fig. 10 text and abstract"),
]

#: The numbers Pd-Stream states that our simulations can measure, with their sources.
PAPER_NUMBERS = paper_numbers_frame(_STATED)

PDSTREAM_GROUPERS: tuple[GrouperName, ...] = ("pkg", "w_choices", "dagreedy", "pdstream")
PDSTREAM_Z = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
PDSTREAM_WORKERS = (16, 32, 64, 128)


def pdstream(
    scale: float = 1.0,
    *,
    zs: Iterable[float] = PDSTREAM_Z,
    workers: Iterable[int] = PDSTREAM_WORKERS,
    groupers: Iterable[GrouperName] = PDSTREAM_GROUPERS,
    seed: int = 0,
) -> pl.DataFrame:
    """Pd-Stream's Figs. 8 and 10: λ and γ (its LI and RF) on the Table IV Zipf streams.

    10^7·``scale`` tuples over 10^7 keys per z, one source, every grouper with defaults.
    """
    tuples = round(10_000_000 * require_scale(scale))
    rows = []
    for z in zs:
        keys = [b for b in datasets.pdstream_zipf(z, tuples=tuples, seed=seed)]
        for p in workers:
            for name in groupers:
                frame = routed_frame(Grouper(name, workers=p, seed=seed), keys)
                loads = metrics.worker_loads(frame, workers=p)
                rows.append(measured_row("pdstream", name, p, "z", z, "lambda", metrics.load_imbalance(loads)))
                rows.append(measured_row("pdstream", name, p, "z", z, "gamma", metrics.replication_factor(frame)))
    return experiment_frame(rows, PAPER_NUMBERS)


def pdstream_wchoices_theta(scale: float = 1.0, *, seed: int = 0) -> pl.DataFrame:
    """W-C's γ as its head threshold θ falls from the default 1/(5n), at the two points
    Pd-Stream states (z = 2.0, p = 128: 7.97; z = 1.0, p = 16: 1.18). ``param`` is θ.

    Pd-Stream's 7.97 needs far more split keys than θ = 1/(5n) makes; this sweep shows the
    θ at which our W-C meets it, and what that θ gives at the other point.
    """
    tuples = round(10_000_000 * require_scale(scale))
    rows = []
    for z, p, thetas in ((2.0, 128, (1 / 640, 1e-3, 1e-4, 3e-5, 1e-5, 3e-6)), (1.0, 16, (1 / 80, 1e-5))):
        keys = list(datasets.pdstream_zipf(z, tuples=tuples, seed=seed))
        for theta in thetas:
            frame = routed_frame(Grouper("w_choices", workers=p, seed=seed, theta=theta), keys)
            loads = metrics.worker_loads(frame, workers=p)
            name = f"w_choices z={z}"
            rows.append(
                measured_row("pdstream_wc_theta", name, p, "theta", theta, "lambda", metrics.load_imbalance(loads))
            )
            rows.append(
                measured_row("pdstream_wc_theta", name, p, "theta", theta, "gamma", metrics.replication_factor(frame))
            )
    return experiment_frame(rows, PAPER_NUMBERS)


def pdstream_pkg_seeds(scale: float = 1.0, *, seeds: Iterable[int] = range(10)) -> pl.DataFrame:
    """PKG's λ at z = 1.6, p = 16 over hash seeds (``param`` is ``seed``).

    At p = 16 the top keys' two candidates often share workers, so λ depends on the hash
    functions; this shows the spread behind the paper's single 3.85.
    """
    tuples = round(10_000_000 * require_scale(scale))
    keys = list(datasets.pdstream_zipf(1.6, tuples=tuples, seed=0))
    rows = []
    for seed in seeds:
        grouper = Grouper("pkg", workers=16, seed=seed)
        frame = routed_frame(grouper, keys)
        loads = metrics.worker_loads(frame, workers=16)
        rows.append(
            measured_row("pdstream_pkg_seeds", "pkg", 16, "seed", seed, "lambda", metrics.load_imbalance(loads))
        )
    return experiment_frame(rows, PAPER_NUMBERS)


def pdstream_dagreedy_params(scale: float = 1.0, *, seed: int = 0) -> pl.DataFrame:
    """DAGreedy's λ and γ at p = 128 for z 1.0, 1.4, 2.0 as its interval and window vary.

    Neither Pd-Stream nor FlexD, whose texts describe DAGreedy, states them; ``grouper``
    names the parameters.
    """
    tuples = round(10_000_000 * require_scale(scale))
    rows = []
    for z in (1.0, 1.4, 2.0):
        keys = list(datasets.pdstream_zipf(z, tuples=tuples, seed=seed))
        for interval in (10_000, 100_000, 1_000_000):
            for panes in (1, 10):
                grouper = Grouper("dagreedy", workers=128, seed=seed, interval_tuples=interval, window_panes=panes)
                frame = routed_frame(grouper, keys)
                loads = metrics.worker_loads(frame, workers=128)
                name = f"dagreedy interval={interval} panes={panes}"
                rows.append(
                    measured_row("pdstream_dagreedy_params", name, 128, "z", z, "lambda", metrics.load_imbalance(loads))
                )
                rows.append(
                    measured_row(
                        "pdstream_dagreedy_params", name, 128, "z", z, "gamma", metrics.replication_factor(frame)
                    )
                )
    return experiment_frame(rows, PAPER_NUMBERS)


def claims(frame: pl.DataFrame) -> list[dict[str, object]]:
    """Pd-Stream's orderings and trends in words (Sections VI-D and VI-E), checked on the
    ``pdstream`` rows of ``frame``; none when it has none."""
    measured = rows_where(frame, experiment="pdstream")
    checked = Claims("pdstream")
    if measured.is_empty():
        return checked.rows
    worker_counts = sorted(set(measured["workers"].to_list()))
    zs = sorted(set(measured["value"].to_list()))
    for p in worker_counts:
        for z in zs:
            lambdas = {
                g: our_value(measured, grouper=g, workers=p, value=z, metric="lambda") for g in PDSTREAM_GROUPERS
            }
            checked.check(
                f"p={p} z={z}: λ of W-C and Pd-Stream below DAGreedy's",
                "Pd-Stream VI-D",
                max(lambdas["w_choices"], lambdas["pdstream"]) < lambdas["dagreedy"],
            )
            if lambdas["pkg"] > 1.0:
                checked.check(
                    f"p={p} z={z}: where PKG is imbalanced (λ > 1), DAGreedy's λ is lower",
                    "Pd-Stream VI-D",
                    lambdas["dagreedy"] < lambdas["pkg"],
                )
            order = 1e-5 if p <= 32 else 1e-4
            checked.check(
                f"p={p} z={z}: λ of W-C and Pd-Stream below {order:g} (paper: 'at 10^-{6 if p <= 32 else 5}')",
                "Pd-Stream VI-D",
                max(lambdas["w_choices"], lambdas["pdstream"]) < order,
            )
    dagreedy_lambdas = rows_where(measured, grouper="dagreedy", metric="lambda")["ours"]
    checked.check(
        "DAGreedy's λ stays within 0.1 to 1.0",
        "Pd-Stream VI-D",
        bool(((dagreedy_lambdas >= 0.1) & (dagreedy_lambdas <= 1.0)).all()),
    )
    for p in worker_counts:
        dagreedy_lambda_by_z = rows_where(measured, grouper="dagreedy", metric="lambda", workers=p).sort("value")[
            "ours"
        ]
        checked.check(
            f"p={p}: DAGreedy's λ falls as z grows (first z above last)",
            "Pd-Stream VI-D",
            dagreedy_lambda_by_z[0] > dagreedy_lambda_by_z[-1],
        )
        pdstream_gamma_by_z = rows_where(measured, grouper="pdstream", metric="gamma", workers=p).sort("value")["ours"]
        checked.check(
            f"p={p}: Pd-Stream's γ stays below 2.0 and grows with z",
            "Pd-Stream VI-E",
            bool((pdstream_gamma_by_z < 2).all()) and pdstream_gamma_by_z[-1] > pdstream_gamma_by_z[0],
        )
        for z in zs:
            gammas = {g: our_value(measured, grouper=g, workers=p, value=z, metric="gamma") for g in PDSTREAM_GROUPERS}
            checked.check(
                f"p={p} z={z}: DAGreedy's γ below PKG's", "Pd-Stream VI-E", gammas["dagreedy"] < gammas["pkg"]
            )
            checked.check(
                f"p={p} z={z}: Pd-Stream's γ below W-C's", "Pd-Stream VI-E", gammas["pdstream"] < gammas["w_choices"]
            )
    wchoices_gammas = rows_where(measured, grouper="w_choices", metric="gamma")
    checked.check(
        "W-C's γ grows with z and p (largest at z=2.0, p=128)",
        "Pd-Stream VI-E",
        to_float(wchoices_gammas["ours"].max())
        == our_value(wchoices_gammas, workers=max(worker_counts), value=max(zs)),
    )
    return checked.rows


#: Pd-Stream's numbers more than 15% from ours at scale 1 that ``docs/reproduction.md``
#: explains, by the key columns they share.
EXPLAINED_NUMBERS: list[Mapping[str, object]] = [
    # 3.85 is PKG's two-choice bound at z = 2.0: the sentence most likely quotes the wrong z.
    {"experiment": "pdstream", "grouper": "pkg", "workers": 16, "value": 1.6, "metric": "lambda"},
    # Pd-Stream does not state W-C's head threshold; the default 1/(5n) splits fewer keys.
    {"experiment": "pdstream", "grouper": "w_choices", "workers": 128, "value": 2.0, "metric": "gamma"},
]

#: Pd-Stream's claims that fail at scale 1 and ``docs/reproduction.md`` explains.
EXPLAINED_CLAIMS: frozenset[str] = frozenset(
    {
        # W-C's default θ = 1/(5n) splits so few keys that its γ is below Pd-Stream's.
        *(f"p={p} z={z}: Pd-Stream's γ below W-C's" for p in PDSTREAM_WORKERS for z in PDSTREAM_Z),
        # DAGreedy's first interval has no hot keys; no interval meets both statements.
        "p=128: DAGreedy's λ falls as z grows (first z above last)",
        *(f"p={p} z={z}: DAGreedy's γ below PKG's" for p, z in ((64, 2.0), (128, 1.6), (128, 1.8), (128, 2.0))),
    }
)
