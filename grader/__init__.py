"""gradekit's grader: rubrics, the sandboxed harness, checks, reports and the command line.

The grader imports ``gradekit`` (the kit) and never ``lab`` (the student's code, which only
its sandboxed children import); ``gradekit`` never imports the grader.
"""

from grader._checks import STRETCH_GOALS, Evidence, StretchGoal
from grader._grade import Graded, grade_submission
from grader._gradebook import GradebookError, GradebookRow, gradebook_csv, merge_gradebooks
from grader._judged import BUILTIN_CHECKS
from grader._manifest import Manifest, ManifestError, load_manifest
from grader._model import CheckResult, CriterionResult, Limits, Report
from grader._render import render_markdown
from grader._report import render_report_json, report_digest, verify_report
from grader._rubric import Case, Criterion, Rubric, RubricError, load_cases, load_rubric
from grader._summary import parse_failures, score_written_summary

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
