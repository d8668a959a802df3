"""grader/handout."""

from __future__ import annotations

from grader.handout._gradescope import ROOT_ENV, build, run
from grader.handout._starter import build_starter

__all__ = [
    "ROOT_ENV",
    "build",
    "build_starter",
    "run",
]
