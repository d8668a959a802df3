"""gradekit's grader: rubrics, the sandboxed harness, checks, reports and the command line.

The grader imports ``gradekit`` (the kit, through its public package and
``gradekit.internal``) and never ``lab`` (the student's code, which only its sandboxed
children import); ``gradekit`` never imports the grader.

Its packages, each a room with one door (its ``__init__``, which names what other rooms
use) and a list of the rooms below it that it may import (the last paragraph of its
docstring, held by tests/grader/test_layers.py). From the bottom up:

    base         _model, _errors, _exits, _expect, _shortfall, _calls, _facts, _reply,
                 _specs, _text, _late, _cache: values, errors, words, expectations and
                 the derived-result cache every room shares; they import no room
    submission   what a student handed in: manifest, files, roster
    sandbox      the trust boundary: the harness, the walls, the runs made through them
    recordings   cassettes and fixtures as review sees them: stale, diff, change log
    regression   regression sets: the format and how a next version is published
    rubric       the rubric: cases, criteria, limits, packages, pinned sets
    scoring      pure: evidence and rubric in, points and advice out
    outputs      the files a grading writes, each a format, and their signatures
    ledger       the grades folder, append-only: its ledger, reviews, history, merges,
                 report verify
    assets       the evaluation assets: cases, investigations, candidates, promotion, in
                 the asset ledger beside the sets
    grading      one submission: evidence gathered in the sandbox, scored, reported
    batch        a cohort end to end (``grade_cohort``): workers, the gradebook, the
                 ledger, reviews
    handout      the students' starter repository and the Gradescope autograder
    dashboard    the cohort at a glance, as a static site
    cli          the ``gradekit`` command line

This module is the grader's public API for Python callers; ``python -m grader`` is the
command line.
"""

from grader._expect import Expectation
from grader._model import (
    CaseOutcome,
    CheckResult,
    CriterionResult,
    HumanReview,
    ItemRun,
    Limits,
    Refusal,
    ReplayProbe,
    Report,
    RunResult,
    Served,
    TraceRecord,
    Withhold,
)
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
from grader.rubric import (
    Case,
    Criterion,
    Rubric,
    RubricError,
    load_cases,
    load_rubric,
    per_case_points,
)
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
    "CaseOutcome",
    "CheckResult",
    "Criterion",
    "CriterionResult",
    "Evidence",
    "Expectation",
    "GradebookError",
    "GradebookRow",
    "Graded",
    "HumanReview",
    "ItemRun",
    "Limits",
    "Manifest",
    "ManifestError",
    "Refusal",
    "ReplayProbe",
    "Report",
    "Rubric",
    "RubricError",
    "RunResult",
    "Served",
    "StretchGoal",
    "TraceRecord",
    "Withhold",
    "grade_submission",
    "gradebook_csv",
    "load_cases",
    "load_manifest",
    "load_rubric",
    "merge_gradebooks",
    "parse_failures",
    "per_case_points",
    "render_markdown",
    "render_report_json",
    "report_digest",
    "score_written_summary",
    "verify_report",
]
