"""grader/dashboard."""

from __future__ import annotations

from grader.dashboard._build import build_dashboard

__all__ = [
    "build_dashboard",
]
