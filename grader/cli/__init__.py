"""The ``gradekit`` command line: one module per command group, the options they share, and
``main``, which maps every error to its exit code.

May import: base, submission, sandbox, recordings, regression, rubric, scoring, outputs,
ledger, assets, grading, batch, handout, dashboard.
"""

from __future__ import annotations

from grader.cli._main import main

__all__ = [
    "main",
]
