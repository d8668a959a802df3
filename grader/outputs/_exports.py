"""The gradebook in the forms learning platforms import: Canvas's and Moodle's grade CSVs.

Each is keyed by the roster's student id (the gradebook's ``student``), names the student
by the roster's display name, and carries the ``final`` grade: the automated total with
its current human reviews, less any late penalty. A row that was not graded has an empty
grade, which both platforms read as "no grade" and never as a zero. Text cells are
defused as the gradebook's are (``spreadsheet_cell``); grades are plain numbers.

- **Canvas** (Grades > Import): ``Student,ID,SIS User ID,SIS Login ID,Section,<assignment>``;
  the student id goes in ``SIS User ID``, which Canvas matches students on, so a roster's
  ids must be the course's SIS user ids.
- **Moodle** (Grades > Import > CSV file): ``ID number,Full name,<assignment>,Feedback``;
  map ``ID number`` to the user's ID number, the grade column to the assignment and
  ``Feedback`` to its feedback, which says what reviews and the late policy did.
"""

from __future__ import annotations

from collections.abc import Sequence

from grader.outputs._gradebook import REPORTED, GradebookRow, csv_row, spreadsheet_cell

__all__ = ["EXPORTS", "export_gradebook"]

EXPORTS = ("canvas", "moodle")


def export_gradebook(rows: Sequence[GradebookRow], form: str, assignment: str) -> bytes:
    """The ``rows`` (as ``read_gradebook`` gives them) in ``form``, one of ``EXPORTS``,
    with ``assignment`` as the grade column's title; rows in the gradebook's order."""
    if form not in EXPORTS:
        raise ValueError(f"no export {form!r}: one of {', '.join(EXPORTS)}")
    title = spreadsheet_cell(assignment)
    if form == "canvas":
        lines = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", title]]
        lines += [
            [
                spreadsheet_cell(row.name or row.student),
                "",
                spreadsheet_cell(row.student),
                "",
                "",
                _grade(row),
            ]
            for row in rows
        ]
    else:
        lines = [["ID number", "Full name", title, "Feedback"]]
        lines += [
            [
                spreadsheet_cell(row.student),
                spreadsheet_cell(row.name or row.student),
                _grade(row),
                spreadsheet_cell(_feedback(row)),
            ]
            for row in rows
        ]
    return "".join(csv_row(cells, "\r\n") for cells in lines).encode("utf-8")


def _grade(row: GradebookRow) -> str:
    if row.status not in REPORTED:
        return ""
    return row.final or row.total


def _feedback(row: GradebookRow) -> str:
    """What moved the grade from the automated total, for the student, in one line."""
    if row.status not in REPORTED:
        return f"not graded: {row.reason}"
    parts = [f"automated {row.total} / {row.max}"]
    if row.review:
        parts.append(f"review: {row.review}")
    if row.late:
        parts.append(f"late: {row.late}")
    return "; ".join(parts)
