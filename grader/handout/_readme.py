"""The students' README: the hand-out's own README source (``[tool.gradekit.starter]
readme``, ``handout/README.md`` in the kit), with its criteria line replaced by a table of
the rubric's criteria, so what the README says is graded is what the rubric grades.

The line is ``<!-- gradekit:criteria -->``, alone on its line (spaces around it are
allowed), exactly once. The table has one row per criterion, in rubric order: its title,
its weight (and its named sub-checks' points, when it has some), what full marks need
(``full``) and the typical loss (``typical_loss``), then the total. Rubric text is put in
a table cell as it is, on one line, with ``|`` escaped; nothing else is changed.
"""

from __future__ import annotations

import re
from decimal import Decimal

from gradekit import UsageError
from grader.rubric import Criterion, Rubric

__all__ = ["CRITERIA_LINE", "criteria_table", "student_readme"]

CRITERIA_LINE = "<!-- gradekit:criteria -->"
_PIPE = re.compile(r"(?<!\\)((?:\\\\)*)\|")  # a pipe after an even run of backslashes
_HEADER = ("| Criterion | Points | Full marks need | Typical loss |", "|---|---:|---|---|")


def student_readme(source: str, rubric: Rubric, *, name: str = "the hand-out's README") -> str:
    """``source`` with its ``CRITERIA_LINE`` replaced by ``criteria_table(rubric)``.

    ``name`` names the source file in errors. A source without the line, or with it more
    than once, is a ``UsageError`` that says where the line goes.
    """
    lines = source.splitlines(keepends=True)
    found = [n for n, line in enumerate(lines) if line.strip() == CRITERIA_LINE]
    if not found:
        raise UsageError(
            f"{name} has no line {CRITERIA_LINE}: add it, on a line of its own, where the "
            "table of the rubric's criteria goes (under a heading such as '## What is graded')"
        )
    if len(found) > 1:
        numbers = ", ".join(str(n + 1) for n in found)
        raise UsageError(
            f"{name} has the line {CRITERIA_LINE} {len(found)} times (lines "
            f"{numbers}): keep one, where the table of the criteria goes"
        )
    at = found[0]
    newline = "\r\n" if lines[at].endswith("\r\n") else "\n"
    table = "".join(row + newline for row in criteria_table(rubric))
    return "".join(lines[:at]) + table + "".join(lines[at + 1 :])


def criteria_table(rubric: Rubric) -> list[str]:
    """The Markdown rows of the criteria table, header and total included."""
    rows = [
        f"| {_cell(c.title)} | {_points(c)} | {_cell(c.full)} | {_cell(c.typical_loss)} |"
        for c in rubric.criteria
    ]
    total = sum(c.weight for c in rubric.criteria)
    return [*_HEADER, *rows, f"| **Total** | **{total}** | | |"]


def _points(criterion: Criterion) -> str:
    """The weight, and the named sub-checks' points after it: ``15 (`entries` 6, ...)``."""
    if not criterion.points:
        return str(criterion.weight)
    parts = ", ".join(f"`{name}` {_number(points)}" for name, points in criterion.points.items())
    return f"{criterion.weight} ({parts})"


def _number(value: Decimal) -> str:
    """Points as people write them: 5, not 5.00; 2.50 stays 2.50."""
    return str(int(value)) if value == value.to_integral_value() else f"{value:.2f}"


def _cell(text: str) -> str:
    """Rubric text in one table cell: on one line, each ``|`` escaped so it ends no cell
    (one already escaped, ``\\|``, stays as it is)."""
    return _PIPE.sub(r"\1\\|", " ".join(text.split()))
