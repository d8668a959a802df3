"""grader/outputs."""

from __future__ import annotations

from grader.outputs._calls import CALLS, calls_document, read_calls, render_calls
from grader.outputs._gradebook import (
    REPORTED,
    GradebookError,
    GradebookRow,
    Status,
    error_row,
    gradebook_csv,
    merge_gradebooks,
    read_gradebook,
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
from grader.outputs._signing import (
    DRAW_KEY,
    KEY_ENV,
    KEY_FILE_ENV,
    Kind,
    draw_key,
    load_key,
    sign_file,
    signature_problem,
    without_signing_key,
)

__all__ = [
    "CALLS",
    "DRAW_KEY",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "REPORTED",
    "SCHEMA",
    "GradebookError",
    "GradebookRow",
    "Kind",
    "Status",
    "calls_document",
    "canonical",
    "cents_of",
    "draw_key",
    "error_row",
    "gradebook_csv",
    "inline_markdown",
    "load_key",
    "merge_gradebooks",
    "parse_canonical",
    "points_text",
    "read_calls",
    "read_gradebook",
    "render_calls",
    "render_gradescope",
    "render_markdown",
    "render_report_json",
    "report_digest",
    "report_from_document",
    "review_document",
    "review_verdict",
    "reviewed_test_name",
    "sign_file",
    "signature_problem",
    "verify_report",
    "without_signing_key",
]
