"""Key streams for routing experiments, delivered as Polars batches in bounded memory.

Every dataset is a function returning an iterator of ``pl.DataFrame`` batches, each with a
``key`` column (and, where the source has them, more columns such as ``value`` or
``timestamp``), of at most ``batch_rows`` rows. Synthetic streams are drawn from a seed, so
a seed gives the same stream on every machine and in every release.
"""

from keysplit.datasets.papers import (
    dkg_country_skew,
    elb_substreams,
    pdstream_zipf,
    tpch_q1_keys,
    tpch_q3_keys,
)
from keysplit.datasets.synthetic import DEFAULT_BATCH_ROWS, zipf

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "dkg_country_skew",
    "elb_substreams",
    "pdstream_zipf",
    "tpch_q1_keys",
    "tpch_q3_keys",
    "zipf",
]
