"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

from hypothesis import strategies as st

import keysplit

GROUPER_NAMES = [info.name for info in keysplit.groupers()]

seeds = st.integers(min_value=0, max_value=(1 << 64) - 1)
workers = st.integers(min_value=1, max_value=64)

# Few distinct keys, so that they repeat and load-dependent choices matter.
string_keys = st.lists(st.sampled_from(["", "a", "b", "hot", "café", "x" * 20, "🔑"]), max_size=300)
int_keys = st.lists(st.one_of(st.integers(0, 9), st.sampled_from([-1, (1 << 63) - 1, -(1 << 63)])), max_size=300)
keys = st.one_of(string_keys, int_keys)
