"""What the instructor hands out: the students' starter repository (the reference lab
without its solutions) and the Gradescope autograder.

May import: base, sandbox, rubric, outputs, records, batch.
"""

from __future__ import annotations

from grader.handout._gradescope import ROOT_ENV, build, run
from grader.handout._starter import build_starter

__all__ = [
    "ROOT_ENV",
    "build",
    "build_starter",
    "run",
]
