"""Grading one submission: gather the evidence in the sandbox (every provider label, the
loud-failure probes, the own-Replay probe, the cut-point test, regression-set replays),
score it and build the report; and ``gradekit check``'s three checkpoints.

May import: base, submission, sandbox, recordings, regression, rubric, scoring, outputs.
"""

from __future__ import annotations

from grader.grading._cases import CASES, case_recording, run_cases
from grader.grading._checkpoints import predicted, run_checkpoints
from grader.grading._draws import seed_pool
from grader.grading._grade import Graded, grade_submission
from grader.grading._packages import MissingPackage
from grader.grading._preload import cohort_packages

__all__ = [
    "CASES",
    "Graded",
    "MissingPackage",
    "case_recording",
    "cohort_packages",
    "grade_submission",
    "predicted",
    "run_cases",
    "run_checkpoints",
    "seed_pool",
]
