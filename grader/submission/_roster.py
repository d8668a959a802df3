"""Who a submission is: decided on the instructor's side, never by the submission.

A submission is named by its folder. With a roster (``gradekit grade --roster FILE``),
a UTF-8 CSV whose header starts ``folder,student_id,display_name``, the folder
name is looked up and the student id becomes the identity; without one, the folder
name is the identity. Two more columns may follow, in either order, for a late policy
(``grader._late``): ``submitted_at``, when the student handed the work in (a date and
time with its offset, from what the instructor trusts: the learning platform's export,
never the submission), and ``extension``, the student's extra time (``1d``, ``36h``).
The manifest's ``student`` key is never read for identity: a student could write a
classmate's name there.

Refused before anything is graded (``UsageError``, exit 2): a roster that cannot be
read, a line with an empty folder or student id, a folder or a student id listed
twice, and two submissions that resolve to one identity (two folders of one name,
or, without a roster, a folder named like another student's id). A submission
whose folder the roster does not list is not graded: its gradebook row is an error
that says to add it. Roster lines without a folder are only warned about.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from gradekit import UsageError
from grader._late import parse_duration, parse_time

__all__ = [
    "ROSTER_COLUMNS",
    "ROSTER_HEADER",
    "Identity",
    "Roster",
    "Student",
    "identify",
    "load_roster",
    "parse_roster",
    "unclaimed",
]

ROSTER_HEADER = ("folder", "student_id", "display_name")
ROSTER_COLUMNS = ("submitted_at", "extension")  # optional, after the header, for a late policy


@dataclass(frozen=True, slots=True)
class Student:
    """One line of the roster."""

    folder: str
    student_id: str
    display_name: str
    submitted_at: dt.datetime | None = None
    extension: int = 0  # seconds


@dataclass(frozen=True, slots=True)
class Roster:
    """The roster's students by folder name; ``source`` names the file in messages."""

    students: Mapping[str, Student]
    source: str


@dataclass(frozen=True, slots=True)
class Identity:
    """Who one submission folder belongs to."""

    path: Path  # the submission folder as given
    folder: str  # its name: the gradebook's ``submission`` column and its output folder
    student: str  # the identity: roster student id, or the folder name; "" when unlisted
    display_name: str  # for people; "" without a roster
    submitted_at: dt.datetime | None = None  # the roster's, when it has the column
    extension: int = 0  # seconds: the roster's extension column
    submitted_from: str = ""  # where submitted_at came from: "roster", "gradescope"


def load_roster(path: Path) -> Roster:
    """Read and validate the roster CSV at ``path``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"--roster {path}: cannot be read ({exc.strerror or exc}); pass the "
            f"CSV with the header {','.join(ROSTER_HEADER)}"
        ) from exc
    return parse_roster(data, source=str(path))


def parse_roster(data: bytes, *, source: str) -> Roster:
    """Validate a roster's bytes; a byte order mark (spreadsheets write one) is allowed."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source}: byte {exc.start} is not UTF-8; save the roster as UTF-8 CSV"
        ) from exc
    rows = [
        (number, row)
        for number, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1)
        if row
    ]
    header = tuple(cell.strip() for cell in rows[0][1]) if rows else ()
    extra = header[len(ROSTER_HEADER) :]
    if (
        header[: len(ROSTER_HEADER)] != ROSTER_HEADER
        or len(set(extra)) < len(extra)
        or not set(extra) <= set(ROSTER_COLUMNS)
    ):
        raise UsageError(
            f"{source}: line 1 must be the header {','.join(ROSTER_HEADER)}, "
            f"then optionally {' and '.join(ROSTER_COLUMNS)} (each once), not "
            f"{','.join(header)}"
        )
    students: dict[str, Student] = {}
    lines: dict[tuple[str, str], int] = {}  # (what, value) -> the line that listed it first
    for number, row in rows[1:]:
        student = _student(row, header, number, source)
        for what, value in (("folder", student.folder), ("student id", student.student_id)):
            if (what, value) in lines:
                raise UsageError(
                    f"{source}: {what} {value!r} is on lines "
                    f"{lines[what, value]} and {number}; list each {what} once"
                )
            lines[what, value] = number
        students[student.folder] = student
    return Roster(MappingProxyType(students), source)


def _student(line: Sequence[str], header: Sequence[str], number: int, source: str) -> Student:
    if len(line) != len(header):
        raise UsageError(
            f"{source}: line {number} has {len(line)} cells, not "
            f"{len(header)} ({','.join(header)}); quote a cell "
            "that holds a comma"
        )
    cells = dict(zip(header, (cell.strip() for cell in line), strict=True))
    folder, student_id, display_name = (cells[name] for name in ROSTER_HEADER)
    if not folder or not student_id:
        raise UsageError(f"{source}: line {number} needs a folder name and a student id")
    if "/" in folder or folder in (".", ".."):
        raise UsageError(
            f"{source}: line {number}: folder {folder!r} must be a folder's name, not a path"
        )
    at = cells.get("submitted_at", "")
    submitted = parse_time(at, f"{source}: line {number}, submitted_at") if at else None
    extension = parse_duration(cells.get("extension", ""), f"{source}: line {number}, extension")
    return Student(folder, student_id, display_name, submitted, extension)


def identify(submissions: Sequence[Path], roster: Roster | None) -> list[Identity]:
    """Each submission's identity, in order; two submissions of one identity are refused."""
    identities = [_identity(path, roster) for path in submissions]
    seen: dict[str, Identity] = {}
    for identity in identities:
        # The folder name is also the output folder, so it is unique even when unlisted.
        keys = (f"folder name {identity.folder!r}", f"student {identity.student!r}")
        for key in keys[: 2 if identity.student else 1]:
            if key in seen:
                fix = f", or correct {roster.source}" if roster else ""
                raise UsageError(
                    f"{seen[key].path} and {identity.path} both resolve to {key}: "
                    "one student would get two grades; rename or remove one of "
                    f"the folders{fix}"
                )
            seen[key] = identity
    return identities


def _identity(path: Path, roster: Roster | None) -> Identity:
    folder = path.resolve().name
    if roster is None:
        return Identity(path, folder, folder, "")
    student = roster.students.get(folder)
    if student is None:
        return Identity(path, folder, "", "")
    return Identity(
        path,
        folder,
        student.student_id,
        student.display_name,
        student.submitted_at,
        student.extension,
        "roster" if student.submitted_at else "",
    )


def unclaimed(roster: Roster, identities: Sequence[Identity]) -> list[Student]:
    """Roster lines whose folder is not among the submissions, in folder order."""
    present = {identity.folder for identity in identities}
    return [s for folder, s in sorted(roster.students.items()) if folder not in present]
