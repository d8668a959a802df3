"""gradekit's grader: rubrics, the sandboxed harness, checks, reports and the command line.

The grader imports ``gradekit`` (the kit) and never ``lab`` (the student's code, which only
its sandboxed children import); ``gradekit`` never imports the grader.
"""

from grader._model import CheckResult, CriterionResult, Limits, Report
from grader.grading import Graded, grade_submission
from grader.outputs import (
    GradebookError,
    GradebookRow,
    gradebook_csv,
    merge_gradebooks,
    render_markdown,
    render_report_json,
    report_digest,
    verify_report,
)
from grader.rubric import Case, Criterion, Rubric, RubricError, load_cases, load_rubric
from grader.scoring import (
    BUILTIN_CHECKS,
    STRETCH_GOALS,
    Evidence,
    StretchGoal,
    parse_failures,
    score_written_summary,
)
from grader.submission import Manifest, ManifestError, load_manifest

__all__ = [
    "BUILTIN_CHECKS",
    "STRETCH_GOALS",
    "Case",
    "CheckResult",
    "Criterion",
    "CriterionResult",
    "Evidence",
    "GradebookError",
    "GradebookRow",
    "Graded",
    "Limits",
    "Manifest",
    "ManifestError",
    "Report",
    "Rubric",
    "RubricError",
    "StretchGoal",
    "grade_submission",
    "gradebook_csv",
    "load_cases",
    "load_manifest",
    "load_rubric",
    "merge_gradebooks",
    "parse_failures",
    "render_markdown",
    "render_report_json",
    "report_digest",
    "score_written_summary",
    "verify_report",
]
