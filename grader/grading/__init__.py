"""grader/grading."""

from __future__ import annotations

from grader.grading._checkpoints import predicted, run_checkpoints
from grader.grading._grade import REVIEW, Graded, grade_submission
from grader.grading._packages import MissingPackage

__all__ = [
    "REVIEW",
    "Graded",
    "MissingPackage",
    "grade_submission",
    "predicted",
    "run_checkpoints",
]
