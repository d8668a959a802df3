"""grader/cli."""

from __future__ import annotations

from grader.cli._main import main

__all__ = [
    "main",
]
