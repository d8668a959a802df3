"""The grades folder's ledger and what happened to a grade in it: the folder's home (every
file's name, each submission's outputs written once and signed once), the append-only
grading ledger (``append_*``), people's reviews of grades, a student's history (why a grade
changed), merging folders graded apart, and ``report verify``.

Inside, the home (``_folder``) is the bottom: the ledger, reviews, history and report
verification find every file through it, and it imports none of them.

May import: base, submission, regression, rubric, scoring, outputs.
"""

from __future__ import annotations

from grader.ledger._bulk import plan_confirmations
from grader.ledger._folder import (
    ARCHIVE,
    CALLS,
    COPIES,
    DASHBOARD,
    DRAW_KEY,
    ENTRIES,
    GRADEBOOK,
    LEDGER,
    MARKDOWN,
    OUTPUT,
    OUTPUT_CAP,
    REPORT,
    RESULTS,
    archive_path,
    capped,
    draw_key,
    ledger_above,
    refuse_clashes,
    report_beside,
    reserved_for,
    sign_outputs,
    temporary_path,
    write_submission,
)
from grader.ledger._history import (
    case_snapshots,
    causes,
    first_divergence,
    history_lines,
    verdict_lines,
)
from grader.ledger._ledger import (
    GENESIS,
    BatchInfo,
    LedgerCorrupt,
    append_events,
    append_grading,
    archived,
    batch_status,
    batch_time,
    grader_version,
    keyed_batch,
    read_ledger,
    rubric_lineage,
    verified_archive,
    verify_ledger,
)
from grader.ledger._merge import LedgerMerge, Merged, merge_folders, plan_merge
from grader.ledger._report_verify import verify_file
from grader.ledger._reviews import (
    AppendedReview,
    ReviewIndex,
    ReviewRequest,
    ReviewState,
    append_review,
    append_reviews,
    apply_reviews,
    current_reviews,
    review_state,
)
from grader.ledger._sheet import COLUMNS, export_sheet, read_sheet, sheet_csv, sheet_rows

__all__ = [
    "ARCHIVE",
    "CALLS",
    "COLUMNS",
    "COPIES",
    "DASHBOARD",
    "DRAW_KEY",
    "ENTRIES",
    "GENESIS",
    "GRADEBOOK",
    "LEDGER",
    "MARKDOWN",
    "OUTPUT",
    "OUTPUT_CAP",
    "REPORT",
    "RESULTS",
    "AppendedReview",
    "BatchInfo",
    "LedgerCorrupt",
    "LedgerMerge",
    "Merged",
    "ReviewIndex",
    "ReviewRequest",
    "ReviewState",
    "append_events",
    "append_grading",
    "append_review",
    "append_reviews",
    "apply_reviews",
    "archive_path",
    "archived",
    "batch_status",
    "batch_time",
    "capped",
    "case_snapshots",
    "causes",
    "current_reviews",
    "draw_key",
    "export_sheet",
    "first_divergence",
    "grader_version",
    "history_lines",
    "keyed_batch",
    "ledger_above",
    "merge_folders",
    "plan_confirmations",
    "plan_merge",
    "read_ledger",
    "read_sheet",
    "refuse_clashes",
    "report_beside",
    "reserved_for",
    "review_state",
    "rubric_lineage",
    "sheet_csv",
    "sheet_rows",
    "sign_outputs",
    "temporary_path",
    "verdict_lines",
    "verified_archive",
    "verify_file",
    "verify_ledger",
    "write_submission",
]
