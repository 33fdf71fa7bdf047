"""The argument checks several of keysplit's modules make, each with one range and one message.

Every ``require_*`` returns the value it checked, as the type it promises, or raises a
:class:`~keysplit.ConfigError` (a ``ValueError``) or :class:`~keysplit.ConfigTypeError` (a
``TypeError``) whose message names the argument, what it allows and what it got. A bool is
never an int here.
"""

from __future__ import annotations

from typing import TypeGuard

from keysplit import _core
from keysplit._errors import ConfigError, ConfigTypeError

#: Seeds are 64-bit: ``0 <= seed < SEED_LIMIT``.
SEED_LIMIT = 1 << 64


def _is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_int(value: object, name: str) -> int:
    """``value`` if it is an int; :class:`ConfigTypeError` otherwise."""
    if not _is_int(value):
        raise ConfigTypeError(f"{name} must be an int, got {type(value).__name__}")
    return value


def require_workers(value: object, name: str = "workers") -> int:
    """``value`` if it is a worker count keysplit routes to: an int in
    ``[1, keysplit.MAX_WORKERS]`` (1,048,576). :class:`ConfigTypeError` for any other type,
    :class:`ConfigError` for an int out of range."""
    allowed = f"{name} must be an int in [1, {_core.MAX_WORKERS:,}]"
    if not _is_int(value):
        raise ConfigTypeError(f"{allowed}, got {value!r} ({type(value).__name__})")
    if not 1 <= value <= _core.MAX_WORKERS:
        raise ConfigError(f"{allowed}, got {value!r}")
    return value


def require_seed(value: object, name: str = "seed") -> int:
    """``value`` if it is a seed: an int in ``[0, 2**64)``. :class:`ConfigTypeError` for any
    other type, :class:`ConfigError` for an int out of range."""
    seed = require_int(value, name)
    if not 0 <= seed < SEED_LIMIT:
        raise ConfigError(f"{name} must be in [0, 2**64), got {seed}")
    return seed


def require_count(value: object, name: str, *, minimum: int = 0) -> int:
    """``value`` if it is an int of at least ``minimum`` (a number of tuples, keys, rows);
    :class:`ConfigError` otherwise, whatever its type."""
    if not _is_int(value) or value < minimum:
        allowed = {0: "a non-negative int", 1: "a positive int"}.get(minimum, f"an int >= {minimum}")
        raise ConfigError(f"{name} must be {allowed}, got {value!r}")
    return value


def require_fraction(value: object, name: str) -> float:
    """``value`` as a float if it is a number in ``[0, 1]`` (a share, a weight);
    :class:`ConfigError` otherwise, whatever its type."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)
