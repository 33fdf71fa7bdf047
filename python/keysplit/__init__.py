"""keysplit: split hot keys of skewed streams over workers.

The key groupers of the stream-partitioning literature, in Rust, routing Arrow and Polars
data without copying it. See ``keysplit.groupers()`` for what is available.
"""

from keysplit import datasets, metrics, simulate, sketches, tables
from keysplit._core import MAX_WORKERS, WorkerIds, __version__, hash_key
from keysplit._errors import ConfigError, ConfigTypeError, KeyInputError, KeysplitError, KeyTypeError, SnapshotError
from keysplit._grouper import Grouper, GrouperInfo, GrouperName, NullPolicy, groupers
from keysplit._recommend import Recommendation, recommend
from keysplit._routing import route, route_batches
from keysplit._sources import RoutedSources, route_sources

__all__ = [
    "MAX_WORKERS",
    "ConfigError",
    "ConfigTypeError",
    "Grouper",
    "GrouperInfo",
    "GrouperName",
    "KeyInputError",
    "KeyTypeError",
    "KeysplitError",
    "NullPolicy",
    "Recommendation",
    "RoutedSources",
    "SnapshotError",
    "WorkerIds",
    "__version__",
    "datasets",
    "groupers",
    "hash_key",
    "metrics",
    "recommend",
    "route",
    "route_batches",
    "route_sources",
    "simulate",
    "sketches",
    "tables",
]
