"""``gradekit dashboard``: the cohort at a glance, a static site built from a grades folder.

May import: base, outputs, ledger.
"""

from __future__ import annotations

from grader.dashboard._build import build_dashboard
from grader.dashboard._data import finding_kind, load_cohort

__all__ = [
    "build_dashboard",
    "finding_kind",
    "load_cohort",
]
