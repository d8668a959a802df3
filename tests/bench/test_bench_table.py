"""The benchmark tables' number formats: what a reader quotes from them."""

from __future__ import annotations

import pytest

from bench._table import fmt_ns


@pytest.mark.parametrize(("ns", "shown"), [
    (999_600, "1 ms"),  # rounding up crosses into the next unit: never "1e+03 µs"
    (999_400, "999 µs"),
    (1_234, "1.23 µs"),
    (12.34, "12.3 ns"),
    (2.5e9, "2.5 s"),
])
def test_a_duration_has_three_significant_digits_in_its_unit(ns: float, shown: str) -> None:
    assert fmt_ns(ns) == shown
