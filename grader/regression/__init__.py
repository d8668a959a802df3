"""Regression sets, the evaluation asset: reviewed failing runs kept as immutable, versioned,
hash-chained collections of items; their format and how a next version is published. Which
runs may become items is ``grader.ledger``' (promotion), how an item is replayed against a
submission ``grader.grading``'s.

May import: base.
"""

from __future__ import annotations

from grader.regression._publish import add_item, write_public
from grader.regression._sets import (
    PAYLOAD_CAP,
    Item,
    RegressionSet,
    decode_item,
    decode_world,
    load_set,
    parse_ref,
    public_json,
    public_name,
    recording_name,
    set_document,
    set_json,
    valid_name,
    verify_sets,
    version_numbers,
    world_json,
)

__all__ = [
    "PAYLOAD_CAP",
    "Item",
    "RegressionSet",
    "add_item",
    "decode_item",
    "decode_world",
    "load_set",
    "parse_ref",
    "public_json",
    "public_name",
    "recording_name",
    "set_document",
    "set_json",
    "valid_name",
    "verify_sets",
    "version_numbers",
    "world_json",
    "write_public",
]
