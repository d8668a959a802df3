"""The rubric: cases, weighted criteria, sub-check points, sandbox limits, the packages a lab
may import, the regression sets it pins and the lab's own stretch goals; read from TOML and
validated. The rubric the
kit ships is package data of its own (``grader.kit_rubric``, the repository's ``rubric/``).
A rubric travels to the batch's workers as JSON (``rubric_document``) and is checked again
on arrival by the same validators as the file (``rubric_from_document``).

May import: base, regression.
"""

from __future__ import annotations

from grader.rubric._packages import KIT_MODULES, SDK_EXTRA, install_command
from grader.rubric._rubric import (
    KIT_RUBRIC,
    SETS,
    SUBCHECKS,
    Case,
    Criterion,
    Rubric,
    RubricError,
    check_maxima,
    distribute,
    load_cases,
    load_custom_check,
    load_rubric,
    parse_rubric,
    per_case_points,
)
from grader.rubric._stretch import KIT_GOALS, LabGoal
from grader.rubric._wire import rubric_document, rubric_from_document

__all__ = [
    "KIT_GOALS",
    "KIT_MODULES",
    "KIT_RUBRIC",
    "SDK_EXTRA",
    "SETS",
    "SUBCHECKS",
    "Case",
    "Criterion",
    "LabGoal",
    "Rubric",
    "RubricError",
    "check_maxima",
    "distribute",
    "install_command",
    "load_cases",
    "load_custom_check",
    "load_rubric",
    "parse_rubric",
    "per_case_points",
    "rubric_document",
    "rubric_from_document",
]
