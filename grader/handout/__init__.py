"""What the instructor hands out: the students' starter repository (the reference lab
without its solutions, only what its ``[tool.gradekit.starter]`` table lists, checked
before it is written) and the Gradescope autograder.

May import: base, submission, sandbox, regression, rubric, outputs, ledger, batch.
"""

from __future__ import annotations

from grader.handout._gradescope import (
    ROOT_ENV,
    Tried,
    build,
    run,
    submitted,
    try_autograder,
    walls_here,
)
from grader.handout._markers import Removed, strip_solutions
from grader.handout._new import NewLab, new_lab
from grader.handout._preflight import scan_for_regions
from grader.handout._readme import CRITERIA_LINE, student_readme
from grader.handout._starter import OptIn, Starter, build_starter
from grader.handout._student import student_tests

__all__ = [
    "CRITERIA_LINE",
    "ROOT_ENV",
    "NewLab",
    "OptIn",
    "Removed",
    "Starter",
    "Tried",
    "build",
    "build_starter",
    "new_lab",
    "run",
    "scan_for_regions",
    "strip_solutions",
    "student_readme",
    "student_tests",
    "submitted",
    "try_autograder",
    "walls_here",
]
