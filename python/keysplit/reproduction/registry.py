"""The papers' modules together: every experiment by name and the paper it reproduces,
all the papers' numbers, claims and explained differences, and running experiments by
name."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._errors import did_you_mean
from keysplit._progress import progress_display
from keysplit.reproduction import beyond_papers, dkg_paper, elb_clb_paper, flexd_paper, holistic_paper, pdstream_paper
from keysplit.reproduction.common import CLAIM_SCHEMA, require_scale

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

#: The papers' modules, in the order their claims are listed.
_PAPERS = (pdstream_paper, flexd_paper, dkg_paper, holistic_paper, elb_clb_paper, beyond_papers)

EXPERIMENTS: dict[str, Callable[..., pl.DataFrame]] = {
    "pdstream": pdstream_paper.pdstream,
    "pdstream_wc_theta": pdstream_paper.pdstream_wchoices_theta,
    "pdstream_pkg_seeds": pdstream_paper.pdstream_pkg_seeds,
    "pdstream_dagreedy_params": pdstream_paper.pdstream_dagreedy_params,
    "flexd": flexd_paper.flexd,
    "dkg": dkg_paper.dkg,
    "holistic": holistic_paper.holistic,
    "holistic_memory": holistic_paper.holistic_memory,
    "elb": elb_clb_paper.elb,
    "beyond": beyond_papers.beyond,
}

#: The ``experiment`` of an experiment's rows where it is not (only) the experiment's name.
ROW_EXPERIMENTS: dict[str, tuple[str, ...]] = {"flexd": ("flexd", "flexd_delta")}

#: The paper each experiment reproduces, by the ``experiment`` of its rows.
PAPERS: dict[str, str] = {
    "pdstream": "Pd-Stream",
    "pdstream_wc_theta": "Pd-Stream",
    "pdstream_pkg_seeds": "Pd-Stream",
    "pdstream_dagreedy_params": "Pd-Stream",
    "flexd": "FlexD",
    "flexd_delta": "FlexD",
    "dkg": "Dynamic Key Grouping",
    "holistic": "Holistic partitioning costs",
    "holistic_memory": "Holistic partitioning costs",
    "elb": "ELB/CLB",
    "beyond": "Beyond the papers (elastic's targets)",
}

#: Every number the papers state that our simulations can measure, with its source.
PAPER_NUMBERS = pl.concat(
    [pdstream_paper.PAPER_NUMBERS, dkg_paper.PAPER_NUMBERS, elb_clb_paper.PAPER_NUMBERS, holistic_paper.PAPER_NUMBERS]
)

#: The paper numbers more than 15% from ours at scale 1 that ``docs/reproduction.md``
#: explains (each paper's "Differences" list), by the key columns they share.
EXPLAINED_NUMBERS: list[Mapping[str, object]] = [key for paper in _PAPERS for key in paper.EXPLAINED_NUMBERS]

#: The claims that fail at scale 1 and ``docs/reproduction.md`` explains, by their text.
EXPLAINED_CLAIMS: frozenset[str] = frozenset().union(*(paper.EXPLAINED_CLAIMS for paper in _PAPERS))


def claims(frame: pl.DataFrame) -> pl.DataFrame:
    """Check the orderings and trends the papers state in words against ``frame`` (the
    concatenated experiment frames). One row per claim whose data is present:
    ``experiment, claim, source, holds``."""
    checked = [row for paper in _PAPERS for row in paper.claims(frame)] if frame.height else []
    return pl.DataFrame(checked, schema=CLAIM_SCHEMA)


def experiment_names(names: Iterable[str]) -> list[str]:
    """The experiments ``names`` select, in order and without repeats: ``"all"`` is every
    experiment, and a row name of :data:`ROW_EXPERIMENTS` (``flexd_delta``) is the
    experiment that writes it. An unknown name raises ValueError naming the closest one."""
    owners = {row: name for name, rows in ROW_EXPERIMENTS.items() for row in rows}
    selected: list[str] = []
    for name in (n.strip() for n in names):
        if name == "all":
            chosen = list(EXPERIMENTS)
        elif name in EXPERIMENTS or name in owners:
            chosen = [owners.get(name, name)]
        else:
            hint = did_you_mean(name, [*EXPERIMENTS, "all"])
            raise ValueError(f'unknown experiment "{name}"; {hint}known experiments: {", ".join(EXPERIMENTS)}, or all')
        selected += [c for c in chosen if c not in selected]
    if not selected:
        raise ValueError(f"no experiment given; known experiments: {', '.join(EXPERIMENTS)}, or all")
    return selected


def run(names: Iterable[str], scale: float = 1.0, *, progress: bool | None = False) -> Iterator[pl.DataFrame]:
    """Run the experiments ``names`` select (see :func:`experiment_names`), yielding one
    frame each. The names and ``scale`` are checked before the first experiment starts.

    ``progress=False`` is silent. Otherwise a line goes to stderr as each experiment starts
    and ends, with its seconds, and a rich progress bar joins them as in
    :func:`keysplit.simulate.simulate` (``None``: when stderr is a terminal; ``True``:
    always, if rich is installed).
    """
    selected = experiment_names(names)
    require_scale(scale)
    return _run(selected, scale, progress)


def _run(names: list[str], scale: float, progress: bool | None) -> Iterator[pl.DataFrame]:
    bar = progress_display(progress)
    with bar if bar is not None else contextlib.nullcontext():
        task = bar.add_task("experiments", total=len(names)) if bar is not None else None
        for number, name in enumerate(names, start=1):
            step = f"[{number}/{len(names)}] {name}"
            if progress is not False:
                _note(bar, f"{step} (scale {scale:g}) …")
            if bar is not None:
                bar.update(task, description=name)
            started = time.perf_counter()
            frame = EXPERIMENTS[name](scale)
            if progress is not False:
                _note(bar, f"{step} done in {time.perf_counter() - started:.1f} s")
            if bar is not None:
                bar.advance(task)
            yield frame


def _note(bar: Any, line: str) -> None:
    """``line`` on stderr, above the progress bar where there is one (rich redraws it)."""
    if bar is None:
        print(line, file=sys.stderr, flush=True)
    else:
        bar.console.print(line, markup=False, highlight=False)
