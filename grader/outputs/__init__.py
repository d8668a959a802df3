"""The files a grading writes, each a format: ``report.json`` (canonical, with its digest),
``report.md`` and Gradescope's ``results.json``, ``calls.json``, ``gradebook.csv``,
``copies.json`` (a cohort's submissions that look copied), and the instructor's
signatures over them. Each is rendered, read and verified here, as bytes or
from a path it is given; the folder that holds them (every file's name, what is written
when, and the signing) is ``grader.ledger._folder``'s.

May import: base, rubric, scoring.
"""

from __future__ import annotations

from grader.outputs._calls import calls_document, read_calls, render_calls
from grader.outputs._copies import (
    PART_WORDS,
    PARTS,
    CopyFindings,
    CopyPair,
    Excerpt,
    PartScore,
    copy_notes,
    read_copies,
    render_copies,
    renoted,
)
from grader.outputs._exports import EXPORTS, export_gradebook
from grader.outputs._gradebook import (
    FIXED_COLUMNS,
    REPORTED,
    SEPARATORS,
    GradebookError,
    GradebookRow,
    Status,
    cell_text,
    csv_row,
    error_row,
    gradebook_csv,
    less_penalty,
    merge_gradebooks,
    read_gradebook,
    spreadsheet_cell,
)
from grader.outputs._render import (
    inline_markdown,
    render_gradescope,
    render_markdown,
    review_document,
    review_verdict,
    reviewed_test_name,
)
from grader.outputs._report import (
    SCHEMA,
    canonical,
    cents_of,
    parse_canonical,
    points_text,
    render_report_json,
    report_digest,
    report_from_document,
    verify_report,
)
from grader.outputs._results import verify_results
from grader.outputs._signing import (
    KEY_ENV,
    KEY_FILE_ENV,
    Kind,
    load_key,
    sign_file,
    signature_problem,
    without_signing_key,
)

__all__ = [
    "EXPORTS",
    "FIXED_COLUMNS",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "PARTS",
    "PART_WORDS",
    "REPORTED",
    "SCHEMA",
    "SEPARATORS",
    "CopyFindings",
    "CopyPair",
    "Excerpt",
    "GradebookError",
    "GradebookRow",
    "Kind",
    "PartScore",
    "Status",
    "calls_document",
    "canonical",
    "cell_text",
    "cents_of",
    "copy_notes",
    "csv_row",
    "error_row",
    "export_gradebook",
    "gradebook_csv",
    "inline_markdown",
    "less_penalty",
    "load_key",
    "merge_gradebooks",
    "parse_canonical",
    "points_text",
    "read_calls",
    "read_copies",
    "read_gradebook",
    "render_calls",
    "render_copies",
    "render_gradescope",
    "render_markdown",
    "render_report_json",
    "renoted",
    "report_digest",
    "report_from_document",
    "review_document",
    "review_verdict",
    "reviewed_test_name",
    "sign_file",
    "signature_problem",
    "spreadsheet_cell",
    "verify_report",
    "verify_results",
    "without_signing_key",
]
