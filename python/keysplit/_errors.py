"""keysplit's exceptions, and what their messages share.

Every error keysplit raises on purpose is a :class:`KeysplitError`, and also the built-in
exception it was before these classes existed (``ValueError``, ``TypeError``,
``RuntimeError``, ``FileNotFoundError``), so code that catches those goes on working:

- :class:`ConfigError` (``ValueError``): a grouper, sketch or call configured out of
  range: an unknown grouper, a parameter, worker count or seed out of range;
- :class:`ConfigTypeError` (``TypeError``): a configuration value of the wrong type;
- :class:`KeyInputError` (``ValueError``): keys that cannot be routed as given: nulls
  under ``nulls="raise"``, an integer beyond 64 bits, a missing key column;
- :class:`KeyTypeError` (``TypeError``): keys of a type keysplit does not route, such
  as floats, or a single key where a column is expected;
- :class:`SnapshotError` (``ValueError``): snapshot bytes that cannot be restored;
- :class:`MissingSourceError` (``RuntimeError``): a dataset's source (a package, a program
  or a file) that is not installed or could not be made; the message says how to get it.
  :class:`MissingFileError`, a data file that is not there, is one and a
  ``FileNotFoundError`` too. :mod:`keysplit.datasets` exports both.

The Rust bindings raise these same classes (``pyo3::import_exception!``).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


class KeysplitError(Exception):
    """Every error keysplit raises on purpose."""


class ConfigError(KeysplitError, ValueError):
    """A grouper, sketch or call configured out of range; the message names the value
    and what is allowed."""


class ConfigTypeError(KeysplitError, TypeError):
    """A configuration value of the wrong type."""


class KeyInputError(KeysplitError, ValueError):
    """Keys that cannot be routed as given (nulls under ``nulls="raise"``, an integer
    beyond 64 bits, a missing key column). Nothing of the refused batch was routed."""


class KeyTypeError(KeysplitError, TypeError):
    """Keys of a type keysplit does not route; the message lists the types it does."""


class SnapshotError(KeysplitError, ValueError):
    """Snapshot bytes that cannot be restored: truncated, corrupt, of another format
    version or of another kind of object, or a state that fails its checks. The message
    says which."""


class MissingSourceError(KeysplitError, RuntimeError):
    """A dataset's source (a package, a program or a file) is not installed, or could not
    be made; the message says how to get it."""


class MissingFileError(MissingSourceError, FileNotFoundError):
    """A data file that is not there."""


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """``'did you mean "x"? '`` for the closest of ``known`` to a mistyped ``name``, or ""."""
    close = difflib.get_close_matches(name, known, n=1)
    return f'did you mean "{close[0]}"? ' if close else ""
