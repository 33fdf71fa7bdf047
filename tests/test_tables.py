"""The papers' exact tables, out of the library's public API."""

from __future__ import annotations

import pytest

from keysplit import tables

# Pd-Stream, Table III: p̂_k in percent for n_k = 1..16 (N = 16, P̂ = 99%, ε = 1e-4).
TABLE_III = [25.0, 34.9, 43.1, 50.3, 56.9, 63.0, 68.7, 73.9, 78.8, 83.4, 87.5, 91.2, 94.5, 97.1, 99.0, 99.9]

# Dynamic Key Grouping, Table 1: machines, ideal load %, threshold load %, max machines.
TABLE_1 = [
    (5, 20.00, 24.47, 5),
    (10, 10.00, 13.16, 8),
    (20, 5.00, 7.24, 14),
    (50, 2.00, 3.41, 30),
    (100, 1.00, 2.00, 51),
]


def test_pdstream_table_iii() -> None:
    table = tables.pdstream_probability_table()
    assert table["occurrences"].to_list() == list(range(1, 17))
    assert [round(p * 100, 1) for p in table["probability"]] == TABLE_III


def test_dkg_table_1() -> None:
    rows = tables.dkg_threshold_table().rows()
    assert [(m, round(li, 2), round(ls, 2), mx) for m, li, ls, mx in rows] == TABLE_1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tables.pdstream_probability_table(0), r"window must be in \[1, "),
        (lambda: tables.pdstream_probability_table(16, expected_probability=1.0), "expected_probability"),
        (lambda: tables.dkg_threshold_table([10, 0]), "machines must be at least 1, got 0"),
    ],
)
def test_bad_arguments_raise(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
