"""The papers' load-imbalance and replication experiments, in simulation.

Each experiment function routes the paper's workload (:mod:`keysplit.datasets.papers`)
through our groupers with their default parameters and returns a Polars frame with one
row per measured value: ``experiment, grouper, workers, param, value, metric, ours,
paper, rel_diff, abs_diff`` (``param`` names the swept quantity, ``value`` its value;
``paper`` is null where the paper states no number; ``abs_diff = ours − paper``;
``rel_diff = (ours − paper) / paper``, null where ``|paper|`` is below :data:`NEAR_ZERO`).
:func:`claims` checks the orderings and trends the papers state in words, which is all
FlexD and the holistic paper give for their figures. :func:`summary` condenses both into
one line and verdict per paper.

The paper numbers live in :data:`PAPER_NUMBERS`, each with the section, table or figure
it comes from. ``scale`` shrinks every stream (tuples, or windows) for quick runs; the
numbers in ``docs/reproduction.md`` are at ``scale=1``.

One module per paper holds everything about it: the numbers it states, its experiments,
its claims in words and the differences ``docs/reproduction.md`` explains
(:mod:`~keysplit.reproduction.pdstream_paper`, :mod:`~keysplit.reproduction.flexd_paper`,
:mod:`~keysplit.reproduction.dkg_paper`, :mod:`~keysplit.reproduction.holistic_paper`,
:mod:`~keysplit.reproduction.elb_clb_paper`). :mod:`~keysplit.reproduction.common` holds
what they share, :mod:`~keysplit.reproduction.registry` puts them together and runs
experiments by name, :mod:`~keysplit.reproduction.report` renders the summary and the
Markdown, and :mod:`~keysplit.reproduction.cli` is ``keysplit reproduce``.
"""

from __future__ import annotations

from keysplit.reproduction.cli import add_subcommand
from keysplit.reproduction.common import NEAR_ZERO, TOLERANCE
from keysplit.reproduction.dkg_paper import DKG_GROUPERS, DKG_SKEWS, dkg
from keysplit.reproduction.elb_clb_paper import ELB_GROUPERS, elb
from keysplit.reproduction.flexd_paper import FLEXD_GROUPERS, FLEXD_Z, flexd
from keysplit.reproduction.holistic_paper import HOLISTIC_GROUPERS, HOLISTIC_VARIANTS, holistic, holistic_memory
from keysplit.reproduction.pdstream_paper import (
    PDSTREAM_GROUPERS,
    PDSTREAM_WORKERS,
    PDSTREAM_Z,
    pdstream,
    pdstream_dagreedy_params,
    pdstream_pkg_seeds,
    pdstream_wchoices_theta,
)
from keysplit.reproduction.registry import (
    EXPERIMENTS,
    EXPLAINED_CLAIMS,
    EXPLAINED_NUMBERS,
    PAPER_NUMBERS,
    PAPERS,
    ROW_EXPERIMENTS,
    claims,
    experiment_names,
    run,
)
from keysplit.reproduction.report import SUMMARY_LEGEND, markdown, summary

__all__ = [
    "DKG_GROUPERS",
    "DKG_SKEWS",
    "ELB_GROUPERS",
    "EXPERIMENTS",
    "EXPLAINED_CLAIMS",
    "EXPLAINED_NUMBERS",
    "FLEXD_GROUPERS",
    "FLEXD_Z",
    "HOLISTIC_GROUPERS",
    "HOLISTIC_VARIANTS",
    "NEAR_ZERO",
    "PAPERS",
    "PAPER_NUMBERS",
    "PDSTREAM_GROUPERS",
    "PDSTREAM_WORKERS",
    "PDSTREAM_Z",
    "ROW_EXPERIMENTS",
    "SUMMARY_LEGEND",
    "TOLERANCE",
    "add_subcommand",
    "claims",
    "dkg",
    "elb",
    "experiment_names",
    "flexd",
    "holistic",
    "holistic_memory",
    "markdown",
    "pdstream",
    "pdstream_dagreedy_params",
    "pdstream_pkg_seeds",
    "pdstream_wchoices_theta",
    "run",
    "summary",
]
