"""The grades folder and what happened to a grade in it: the folder's home (every file's
name, each submission's outputs written once and signed once), the append-only grading
ledger, people's reviews of grades, a student's history (why a grade changed), the
evaluation assets (cases, and the path from a failure to a regression item, in the
asset ledger beside the sets), and ``report verify``.

Inside, the home (``_folder``) is the bottom: the ledger, reviews, history, promotion and
verify find every file through it, and it imports none of them.

May import: base, submission, regression, rubric, scoring, outputs.
"""

from __future__ import annotations

from grader.records._assets import (
    ASSETS,
    DISPOSITIONS,
    SOURCES,
    Assets,
    StoredCase,
    approve,
    archive,
    candidate_item,
    case_batch,
    case_item,
    dispose,
    investigate,
    new_case,
    read_assets,
    record_case_batch,
    revise,
    save_from_run,
)
from grader.records._bulk import plan_confirmations
from grader.records._folder import (
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
    REPORT,
    RESULTS,
    draw_key,
    refuse_clashes,
    reserved_for,
    sign_outputs,
    temporary_path,
    write_submission,
)
from grader.records._history import (
    case_snapshots,
    causes,
    first_divergence,
    history_lines,
    verdict_lines,
)
from grader.records._ledger import (
    BatchInfo,
    LedgerCorrupt,
    append_events,
    archived,
    batch_time,
    grader_version,
    keyed_batch,
    read_ledger,
    record_grading,
    rubric_lineage,
    verify_ledger,
)
from grader.records._merge import LedgerMerge, Merged, merge_folders, plan_merge
from grader.records._promote import FromRun, Request, applicable_agent, from_run
from grader.records._reviews import (
    Recorded,
    ReviewRequest,
    ReviewState,
    apply_reviews,
    current_reviews,
    record_review,
    record_reviews,
)
from grader.records._sheet import export_sheet, read_sheet
from grader.records._verify import verify_file

__all__ = [
    "ARCHIVE",
    "ASSETS",
    "CALLS",
    "COPIES",
    "DASHBOARD",
    "DISPOSITIONS",
    "DRAW_KEY",
    "ENTRIES",
    "GRADEBOOK",
    "LEDGER",
    "MARKDOWN",
    "OUTPUT",
    "REPORT",
    "RESULTS",
    "SOURCES",
    "Assets",
    "BatchInfo",
    "FromRun",
    "LedgerCorrupt",
    "LedgerMerge",
    "Merged",
    "Recorded",
    "Request",
    "ReviewRequest",
    "ReviewState",
    "StoredCase",
    "append_events",
    "applicable_agent",
    "apply_reviews",
    "approve",
    "archive",
    "archived",
    "batch_time",
    "candidate_item",
    "case_batch",
    "case_item",
    "case_snapshots",
    "causes",
    "current_reviews",
    "dispose",
    "draw_key",
    "export_sheet",
    "first_divergence",
    "from_run",
    "grader_version",
    "history_lines",
    "investigate",
    "keyed_batch",
    "merge_folders",
    "new_case",
    "plan_confirmations",
    "plan_merge",
    "read_assets",
    "read_ledger",
    "read_sheet",
    "record_case_batch",
    "record_grading",
    "record_review",
    "record_reviews",
    "refuse_clashes",
    "reserved_for",
    "revise",
    "rubric_lineage",
    "save_from_run",
    "sign_outputs",
    "temporary_path",
    "verdict_lines",
    "verify_file",
    "verify_ledger",
    "write_submission",
]
