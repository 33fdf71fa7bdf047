"""What every paper's module shares: the row schema, building the rows of an experiment
and joining the paper numbers to them, the differences and their thresholds, the
helpers the claims are checked with, and the Markdown tables of ``docs/reproduction.md``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from keysplit._errors import ConfigError
from keysplit._grouper import Grouper

if TYPE_CHECKING:
    from collections.abc import Iterable

#: What identifies a measurement: the experiment, grouper, workers and the swept parameter.
_KEY_SCHEMA = {
    "experiment": pl.String,
    "grouper": pl.String,
    "workers": pl.Int64,
    "param": pl.String,
    "value": pl.Float64,
    "metric": pl.String,
}

_KEYS = list(_KEY_SCHEMA)
#: The columns an experiment measures, before the differences to the papers.
ROW_SCHEMA = {**_KEY_SCHEMA, "ours": pl.Float64}

#: One number a paper states: (experiment, grouper, workers, param, value, metric, paper,
#: source), ``source`` the section, table or figure it comes from.
PaperNumber = tuple[str, str, int, str, float, str, float, str]

#: The columns of :func:`keysplit.reproduction.claims`.
CLAIM_SCHEMA = {"experiment": pl.String, "claim": pl.String, "source": pl.String, "holds": pl.Boolean}

#: Paper numbers smaller than this in magnitude get no relative difference (``rel_diff``
#: null, ``diff %`` "–"). Every metric compared is in a unit (λ, γ, percent, MB, tuples²)
#: in which the papers' measured numbers are 0.02 or more; a smaller one stands for zero
#: (DKG's StdDev of 0.0001 for round robin) or for an order of magnitude (Pd-Stream's
#: λ "at 10^-6"), against which a percentage says nothing. ``abs_diff`` still compares it.
NEAR_ZERO = 1e-3

#: Ours and a paper number agree when their relative difference is at most this.
TOLERANCE = 0.15


def paper_numbers_frame(numbers: list[PaperNumber]) -> pl.DataFrame:
    """A paper's stated numbers as a frame: the key columns, ``paper`` and ``source``."""
    return pl.DataFrame(numbers, schema={**_KEY_SCHEMA, "paper": pl.Float64, "source": pl.String}, orient="row")


def require_scale(scale: object) -> float:
    """``scale`` as a float if it is a number in (0, 1]: the factor an experiment shrinks its
    streams by. :class:`~keysplit.ConfigError` otherwise, whatever its type."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1:
        raise ConfigError(f"scale must be in (0, 1], got {scale!r}")
    return float(scale)


def routed_frame(grouper: Grouper, batches: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """Route every batch, in order, and return the batches with a ``worker`` column."""
    routed = [b.with_columns(pl.Series(grouper.route(b.get_column("key"))).alias("worker")) for b in batches]
    return pl.concat(routed) if routed else pl.DataFrame({"key": [], "worker": []})


def measured_row(
    experiment: str, grouper: str, workers: int, param: str, value: float, metric: str, ours: float
) -> dict[str, object]:
    """One measured value, with the columns of :data:`ROW_SCHEMA`."""
    return {
        "experiment": experiment,
        "grouper": grouper,
        "workers": workers,
        "param": param,
        "value": float(value),
        "metric": metric,
        "ours": float(ours),
    }


def with_differences(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``rel_diff`` and ``abs_diff`` (re)computed from ``ours`` and ``paper``."""
    difference = pl.col("ours") - pl.col("paper")
    return frame.with_columns(
        pl.when(pl.col("paper").abs() >= NEAR_ZERO).then(difference / pl.col("paper")).alias("rel_diff"),
        difference.alias("abs_diff"),
    )


def experiment_frame(rows: list[dict[str, object]], paper_numbers: pl.DataFrame) -> pl.DataFrame:
    """An experiment's rows (:func:`measured_row`) as a frame, with the number ``paper_numbers``
    states for each (``paper``, null where it states none) and the differences."""
    frame = pl.DataFrame(rows, schema=ROW_SCHEMA)
    return with_differences(frame.join(paper_numbers.drop("source"), on=_KEYS, how="left"))


def rows_where(frame: pl.DataFrame, **where: object) -> pl.DataFrame:
    """The rows of ``frame`` whose columns equal the values ``where`` gives."""
    return frame.filter(*[pl.col(k) == v for k, v in where.items()])


def our_value(frame: pl.DataFrame, **where: object) -> float:
    """``ours`` of the one row of ``frame`` that ``where`` selects."""
    return float(rows_where(frame, **where)["ours"].item())


class Claims:
    """The claims of one experiment checked so far, as rows of
    :func:`keysplit.reproduction.claims`, in the order they were checked."""

    def __init__(self, experiment: str) -> None:
        self.experiment = experiment
        self.rows: list[dict[str, object]] = []

    def check(self, text: str, source: str, holds: bool) -> None:
        """Record the claim ``text``, stated in ``source``, and whether it ``holds``."""
        self.rows.append({"experiment": self.experiment, "claim": text, "source": source, "holds": bool(holds)})


def cell_text(value: object) -> str:
    """``value`` as a Markdown table cell: "–" for None, a float to 4 significant digits
    (3 below 0.001 or from a million), anything else as ``str`` writes it."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.3g}"
        return f"{value:.4g}"
    return str(value)


def markdown_table(frame: pl.DataFrame) -> str:
    """``frame`` as a Markdown table, its cells as :func:`cell_text` writes them."""
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * frame.width]
    lines += ["| " + " | ".join(cell_text(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)
