"""Key streams for routing experiments, delivered as Polars batches in bounded memory.

Every dataset is a function returning an iterator of ``pl.DataFrame`` batches, each with a
``key`` column (and, where the source has them, more columns such as ``value`` or
``timestamp``), of at most ``batch_rows`` rows. Synthetic streams are drawn from a seed, so
a seed gives the same stream on every machine and in every release.
"""

from keysplit._errors import MissingFileError, MissingSourceError
from keysplit.datasets.files import from_file
from keysplit.datasets.papers import (
    dkg_country_skew,
    elb_substreams,
    pdstream_zipf,
    tpch_q1_keys,
    tpch_q3_keys,
)
from keysplit.datasets.real import kjv, nycflights, tpch, tpch_table, wordfreq_words
from keysplit.datasets.synthetic import (
    DEFAULT_BATCH_ROWS,
    Burst,
    bursty_zipf,
    drift_permutation,
    drifting_zipf,
    with_bursts,
    zipf,
)

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "Burst",
    "MissingFileError",
    "MissingSourceError",
    "bursty_zipf",
    "dkg_country_skew",
    "drift_permutation",
    "drifting_zipf",
    "elb_substreams",
    "from_file",
    "kjv",
    "nycflights",
    "pdstream_zipf",
    "tpch",
    "tpch_q1_keys",
    "tpch_q3_keys",
    "tpch_table",
    "wordfreq_words",
    "with_bursts",
    "zipf",
]
