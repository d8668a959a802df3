"""grader/regression."""

from __future__ import annotations

from grader.regression._publish import add_item
from grader.regression._sets import (
    PAYLOAD_CAP,
    Item,
    RegressionSet,
    check_name,
    load_set,
    parse_ref,
    verify_sets,
    version_numbers,
)

__all__ = [
    "PAYLOAD_CAP",
    "Item",
    "RegressionSet",
    "add_item",
    "check_name",
    "load_set",
    "parse_ref",
    "verify_sets",
    "version_numbers",
]
