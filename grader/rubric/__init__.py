"""grader/rubric."""

from __future__ import annotations

from grader.rubric._packages import KIT_MODULES, SDK_EXTRA, install_command
from grader.rubric._rubric import (
    KIT_RUBRIC,
    SETS,
    Case,
    Criterion,
    Rubric,
    RubricError,
    distribute,
    load_cases,
    load_custom_check,
    load_rubric,
    per_case_points,
)

__all__ = [
    "KIT_MODULES",
    "KIT_RUBRIC",
    "SDK_EXTRA",
    "SETS",
    "Case",
    "Criterion",
    "Rubric",
    "RubricError",
    "distribute",
    "install_command",
    "load_cases",
    "load_custom_check",
    "load_rubric",
    "per_case_points",
]
