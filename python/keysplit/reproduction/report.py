"""What a run shows against the papers: the :func:`summary` per paper with its verdict,
and the :func:`markdown` of ``docs/reproduction.md``."""

from __future__ import annotations

import polars as pl

from keysplit.reproduction import beyond_papers
from keysplit.reproduction.common import NEAR_ZERO, TOLERANCE, cell_text, markdown_table
from keysplit.reproduction.registry import EXPLAINED_CLAIMS, EXPLAINED_NUMBERS, PAPERS, claims

_WITHIN = f"within_{round(TOLERANCE * 100)}pct"
_OVER = f"over_{round(TOLERANCE * 100)}pct"

#: What :func:`summary`'s columns and verdicts mean, printed under it.
SUMMARY_LEGEND = (
    f"numbers: the paper's numbers beside ours, by relative difference {_WITHIN} or {_OVER}, "
    f"or near_zero (|paper| < {NEAR_ZERO:g}, compared by abs_diff only). claims: the paper's "
    "statements in words, checked on our values. unexplained: misses (numbers over "
    f"{TOLERANCE:.0%}, failed claims) that docs/reproduction.md does not explain. verdict: PASS, "
    "no misses; KNOWN, every miss is one the docs explain (as at scale 1); FAIL, a miss the "
    "docs do not explain (a regression; smaller --scale streams give some); –, nothing to compare."
)


def _explained_number() -> pl.Expr:
    return pl.any_horizontal(pl.all_horizontal(pl.col(k) == v for k, v in key.items()) for key in EXPLAINED_NUMBERS)


def summary(frame: pl.DataFrame, checked: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per paper with experiments in ``frame``: how its numbers and claims compare
    with ours, and a verdict.

    ``numbers`` counts the paper numbers beside ours, split into within and over 15%
    (:data:`TOLERANCE`) of ours by ``rel_diff``, and ``near_zero``, those below
    :data:`NEAR_ZERO` in magnitude, which have no ``rel_diff``. ``claims_held`` and
    ``claims_failed`` count :func:`claims` (``checked``; computed from ``frame`` when
    None). A miss is a number over 15% or a failed claim; ``unexplained`` counts the
    misses ``docs/reproduction.md`` does not explain (:data:`EXPLAINED_NUMBERS`,
    :data:`EXPLAINED_CLAIMS`, the differences of a scale-1 run). The verdict:

    - ``PASS``: no misses;
    - ``KNOWN``: misses, each one the docs explain (what a scale-1 run gives);
    - ``FAIL``: a miss the docs do not explain: a regression, or streams too short
      (``scale`` below 1) for what the paper states;
    - ``–``: nothing of the paper's to compare (only its side experiments ran).

    The numbers over 15% do count as misses: each one scale 1 gives is explained, so an
    unexplained one is news.
    """
    checked = claims(frame) if checked is None else checked
    title = pl.col("experiment").replace(PAPERS).alias("paper")
    over = (pl.col("rel_diff").abs() > TOLERANCE).fill_null(False)
    numbers = (
        frame.filter(pl.col("paper").is_not_null())
        .select(
            title,
            over.alias("over"),
            (pl.col("paper").abs() < NEAR_ZERO).alias("near_zero"),
            _explained_number().alias("explained"),
        )
        .group_by("paper")
        .agg(
            pl.len().alias("numbers"),
            (~pl.col("over") & ~pl.col("near_zero")).sum().alias(_WITHIN),
            pl.col("over").sum().alias(_OVER),
            pl.col("near_zero").sum().alias("near_zero"),
            (pl.col("over") & ~pl.col("explained")).sum().alias("unexplained_numbers"),
        )
    )
    stated = (
        checked.select(title, "holds", pl.col("claim").is_in(sorted(EXPLAINED_CLAIMS)).alias("explained"))
        .group_by("paper")
        .agg(
            pl.col("holds").sum().alias("claims_held"),
            (~pl.col("holds")).sum().alias("claims_failed"),
            (~pl.col("holds") & ~pl.col("explained")).sum().alias("unexplained_claims"),
        )
    )
    counts = ["numbers", _WITHIN, _OVER, "near_zero", "claims_held", "claims_failed"]
    papers = pl.concat([frame.select("experiment"), checked.select("experiment")]).select(
        title.unique(maintain_order=True)
    )
    return (
        papers.join(numbers, on="paper", how="left")
        .join(stated, on="paper", how="left")
        .with_columns(pl.col(*counts, "unexplained_numbers", "unexplained_claims").fill_null(0).cast(pl.Int64))
        .with_columns((pl.col("unexplained_numbers") + pl.col("unexplained_claims")).alias("unexplained"))
        .with_columns(
            pl.when(pl.col("numbers") + pl.col("claims_held") + pl.col("claims_failed") == 0)
            .then(pl.lit("–"))
            .when(pl.col(_OVER) + pl.col("claims_failed") == 0)
            .then(pl.lit("PASS"))
            .when(pl.col("unexplained") == 0)
            .then(pl.lit("KNOWN"))
            .otherwise(pl.lit("FAIL"))
            .alias("verdict")
        )
        .select("paper", *counts, "unexplained", "verdict")
    )


# --- Markdown --------------------------------------------------------------------------


def markdown(frame: pl.DataFrame, command: str) -> str:
    """Markdown for ``docs/reproduction.md``: the :func:`summary` per paper, then per
    experiment the rows with a paper number (diff in percent, flagged over 15%, "–" near
    zero), the grid of our values, and the claims."""
    checked = claims(frame)
    parts = [
        f"Generated by `{command}`.\n",
        "#### Summary\n\n" + markdown_table(summary(frame, checked)) + "\n\n" + SUMMARY_LEGEND + "\n",
    ]
    for experiment in frame["experiment"].unique(maintain_order=True):
        rows = frame.filter(pl.col("experiment") == experiment)
        parts.append(f"#### `{experiment}`\n")
        if experiment == beyond_papers.EXPERIMENT:
            parts.append(beyond_papers.markdown(rows))
            continue
        stated = rows.filter(pl.col("paper").is_not_null())
        if stated.height:
            table = stated.select(
                "grouper",
                "workers",
                (pl.col("param") + "=" + pl.col("value").map_elements(cell_text, return_dtype=pl.String)).alias(
                    "setting"
                ),
                "metric",
                "paper",
                "ours",
                (pl.col("rel_diff") * 100).round(1).alias("diff %"),
                pl.when(pl.col("rel_diff").abs() > TOLERANCE)
                .then(pl.lit("**>15%**"))
                .otherwise(pl.lit(""))
                .alias("flag"),
            )
            parts.append("Paper numbers beside ours:\n\n" + markdown_table(table) + "\n")
        grid = rows.pivot(on="grouper", index=["metric", "workers", "value"], values="ours").sort(
            "metric", "workers", "value"
        )
        param = rows["param"][0]
        parts.append(f"All our values (`value` is {param}):\n\n" + markdown_table(grid.rename({"value": param})) + "\n")
    if checked.height:
        parts.append("#### Claims stated in words\n\n" + markdown_table(checked) + "\n")
    return "\n".join(parts)
