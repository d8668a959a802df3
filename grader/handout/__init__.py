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
from grader.handout._new import NewLab, new_lab
from grader.handout._starter import OptIn, Starter, build_starter

__all__ = [
    "ROOT_ENV",
    "NewLab",
    "OptIn",
    "Starter",
    "Tried",
    "build",
    "build_starter",
    "new_lab",
    "run",
    "submitted",
    "try_autograder",
    "walls_here",
]
