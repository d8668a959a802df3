"""grader/records."""

from __future__ import annotations

from grader.records._history import case_snapshots, causes, first_divergence, history_lines
from grader.records._ledger import (
    LEDGER,
    LedgerCorrupt,
    append_events,
    archived,
    grader_version,
    read_ledger,
    record_grading,
    rubric_lineage,
    verify_ledger,
)
from grader.records._promote import Request, promote_event, promotion
from grader.records._reviews import ReviewRequest, apply_reviews, record_review
from grader.records._verify import sign_outputs, verify_file

__all__ = [
    "LEDGER",
    "LedgerCorrupt",
    "Request",
    "ReviewRequest",
    "append_events",
    "apply_reviews",
    "archived",
    "case_snapshots",
    "causes",
    "first_divergence",
    "grader_version",
    "history_lines",
    "promote_event",
    "promotion",
    "read_ledger",
    "record_grading",
    "record_review",
    "rubric_lineage",
    "sign_outputs",
    "verify_file",
    "verify_ledger",
]
