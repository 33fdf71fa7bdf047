"""What keysplit's error messages share."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """``'did you mean "x"? '`` for the closest of ``known`` to a mistyped ``name``, or ""."""
    close = difflib.get_close_matches(name, known, n=1)
    return f'did you mean "{close[0]}"? ' if close else ""
