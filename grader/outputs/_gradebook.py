"""The batch's ``gradebook.csv``: one row per submission, merged from shards byte-exactly.

Columns: submission (the folder's name), student (who it is: the roster's student id,
else the folder's name; never what the submission says), name (the roster's display name,
for people; never in a digest), status, total (the automated points), review (what people
reviewed, what is pending, what needs a new review), late (what the lab's late policy made
of the submission's time, ``grader._late``), penalty (the late penalty's points), final
(the total with current reviews, ``grader.ledger._reviews``, less the penalty, never below
zero; the total when there are neither), max,
one per criterion id in rubric order, digest, reason. Rows are sorted by submission; lines end
in ``\\n``; UTF-8; the csv module's minimal quoting, and a cell that holds a carriage return
is quoted too (``csv_row``).

Every cell is safe in a spreadsheet whatever separator it splits the file on (``,``, ``;``
as European locales do, a tab, ``|``), and reads back exactly (``spreadsheet_cell`` and
``cell_text``, the review sheet's too):

- a cell that starts like a formula (``=``, ``+``, ``-``, ``@``, a tab or a carriage
  return) is written with a ``'`` in front, and so is one that starts with ``'``;
- inside a cell, after a separator or a line break (where a reader splitting on another
  separator starts a field or a line) and the double quotes a reader strips there, a
  formula start (or apostrophes that lead to one) gets a ``'`` in front.

Reading removes exactly those, so a round trip, and a merge of shards, gives the same bytes.
Quoting such cells instead would not do: the quote opens after a comma, in the middle of
what a reader splitting on ``;`` takes for one field. A cell without a formula start after
a separator keeps the bytes earlier versions wrote; a reader that also trims the spaces
after a separator (an import option of some spreadsheets) is not covered.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Literal, get_args

from grader._errors import GradebookError

__all__ = [
    "FIXED_COLUMNS",
    "REPORTED",
    "SEPARATORS",
    "GradebookError",
    "GradebookRow",
    "Status",
    "cell_text",
    "csv_row",
    "gradebook_csv",
    "less_penalty",
    "merge_gradebooks",
    "read_gradebook",
    "spreadsheet_cell",
]

HEAD_COLUMNS = (
    "submission",
    "student",
    "name",
    "status",
    "total",
    "review",
    "late",
    "penalty",
    "final",
    "max",
)
# The head of gradebooks written before reviews: read only to say what to do.
_EARLIER_HEAD = ("submission", "student", "status", "total", "max")
# The head of gradebooks written before names and late policies: read as they are, with
# those cells empty, so grading into an earlier grades folder loses nothing.
_BEFORE_LATE = ("submission", "student", "status", "total", "review", "final", "max")
TAIL_COLUMNS = ("digest", "reason")
FIXED_COLUMNS = HEAD_COLUMNS + TAIL_COLUMNS
# graded: scored; degraded: scored, but some checks could not be evaluated because the
# rubric's contract is incomplete (the reason says which: not a final grade); error: could
# not be graded (the reason says why); ungradable: not a submission at all; interrupted:
# Ctrl-C stopped the batch first (this gradebook is partial).
Status = Literal["graded", "degraded", "error", "ungradable", "interrupted"]
_STATUSES: tuple[Status, ...] = get_args(Status)
REPORTED: frozenset[Status] = frozenset(("graded", "degraded"))  # rows with a report
_FORMULA = ("=", "+", "-", "@", "\t", "\r")  # how a cell a spreadsheet runs as a formula starts
_FORMULA_START = (*_FORMULA, "'")  # a cell that starts with one gets a "'" in front
SEPARATORS = (",", ";", "\t", "|")  # what spreadsheets split a CSV file on
# Where a reader splitting on one of them starts a field or a line, with the double quotes it
# strips there; then the apostrophes that lead to a formula start (in reading, after the
# one that escapes them).
_AFTER_BREAK = "(?<=[" + "".join(map(re.escape, (*SEPARATORS, "\r", "\n"))) + '])("*)'
_LEADS = "('*[" + "".join(map(re.escape, _FORMULA)) + "])"
_DEFUSE = re.compile(_AFTER_BREAK + _LEADS)
_RESTORE = re.compile(_AFTER_BREAK + "'" + _LEADS)
_ENDS_BREAK = re.compile(_AFTER_BREAK + "'*\\Z")  # the end of a cell that ends a CRLF line
_ENDS_ESCAPED = re.compile(_AFTER_BREAK + "''*\\Z")
_QUOTED = frozenset(',"\r\n')  # a cell holding one of these is quoted


@dataclass(frozen=True, slots=True)
class GradebookRow:
    """One submission's line of the gradebook; points are strings such as ``"7.50"``."""

    submission: str
    student: str
    status: Status
    total: str
    max: str
    criteria: Mapping[str, str]  # criterion id -> points; "" when not graded
    digest: str  # the report's digest; "" for an error
    reason: str  # why the status is "error"; "" when graded
    review: str = ""  # human text: reviews, pending ones, ones that need doing again
    final: str = ""  # the total after current reviews and the penalty; "" means the total
    name: str = ""  # the roster's display name; "" without one
    late: str = ""  # what the late policy made of it, for people; "" without a policy
    penalty: str = ""  # the late penalty's points, such as "20.00"; "" without one


def gradebook_csv(rows: Iterable[GradebookRow], criterion_ids: Sequence[str]) -> bytes:
    """The gradebook's bytes: fixed columns around ``criterion_ids``, rows by submission."""
    _require_ids(criterion_ids)
    # Whole rows break ties, so any order of the same rows gives the same bytes (a batch
    # refuses two folders of one name, and a merge two rows of one submission, anyway).
    ordered = sorted(_cells(row, criterion_ids) for row in rows)
    lines = [csv_row([*HEAD_COLUMNS, *criterion_ids, *TAIL_COLUMNS], "\n")]
    lines += [csv_row([spreadsheet_cell(cell) for cell in cells], "\n") for cells in ordered]
    return "".join(lines).encode("utf-8")


def read_gradebook(data: bytes) -> tuple[list[str], list[GradebookRow]]:
    """The criterion ids and the rows of a gradebook written by ``gradebook_csv``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GradebookError(f"byte {exc.start} is not UTF-8: not a gradekit gradebook") from exc
    table = list(csv.reader(io.StringIO(text, newline="")))
    if not table:
        raise GradebookError("the gradebook is empty; it needs at least its header line")
    header = table[0]
    if tuple(header[: len(_BEFORE_LATE)]) == _BEFORE_LATE:
        header = [*HEAD_COLUMNS, *header[len(_BEFORE_LATE) :]]
        width = len(table[0])
        table = [
            header,
            *([*r[:2], "", *r[2:5], "", "", *r[5:]] if len(r) == width else r for r in table[1:]),
        ]
    head, tail = len(HEAD_COLUMNS), len(TAIL_COLUMNS)
    if tuple(header[: len(_EARLIER_HEAD)]) == _EARLIER_HEAD:
        raise GradebookError(
            f"the header {','.join(header)} is an earlier gradekit's, without the review and "
            "final columns: grade the submissions again with this version to write it anew"
        )
    if tuple(header[:head]) != HEAD_COLUMNS or tuple(header[-tail:]) != TAIL_COLUMNS:
        raise GradebookError(
            f"header {','.join(header)} must start with {','.join(HEAD_COLUMNS)} and end with "
            f"{','.join(TAIL_COLUMNS)}: not a gradekit gradebook"
        )
    criterion_ids = header[head:-tail]
    _require_ids(criterion_ids)
    rows = [_row(cells, header, number) for number, cells in enumerate(table[1:], 2)]
    return criterion_ids, rows


def merge_gradebooks(parts: Sequence[bytes]) -> bytes:
    """One gradebook from shards with the same header: the bytes of grading all at once.

    A submission in two shards is an error; rows of one name within a shard (the batch's
    error rows for folders sharing a name) are kept as they are.
    """
    if not parts:
        raise GradebookError("nothing to merge: pass at least one gradebook")
    criterion_ids, rows = read_gradebook(parts[0])
    seen = {row.submission: 1 for row in rows}
    for number, part in enumerate(parts[1:], 2):
        ids, more = read_gradebook(part)
        new: dict[str, int] = {}
        if ids != criterion_ids:
            raise GradebookError(
                f"gradebook {number} has criteria {','.join(ids)} but gradebook 1 has "
                f"{','.join(criterion_ids)}: merge only shards graded with one rubric"
            )
        for row in more:
            if row.submission in seen:
                raise GradebookError(
                    f"submission {row.submission!r} is in gradebook {seen[row.submission]} "
                    f"and gradebook {number}; grade each submission in one shard only"
                )
            new[row.submission] = number
        seen |= new
        rows += more
    return gradebook_csv(rows, criterion_ids)


def _require_ids(criterion_ids: Sequence[str]) -> None:
    clashes = sorted(set(criterion_ids) & set(FIXED_COLUMNS))
    if clashes or len(set(criterion_ids)) != len(criterion_ids):
        raise GradebookError(
            f"criterion ids {','.join(criterion_ids)} must be unique and differ from the "
            f"gradebook's own columns {','.join(FIXED_COLUMNS)}"
        )


def _cells(row: GradebookRow, criterion_ids: Sequence[str]) -> list[str]:
    unknown = sorted(set(row.criteria) - set(criterion_ids))
    if unknown:
        raise GradebookError(
            f"submission {row.submission!r} has points for {', '.join(unknown)}, which is not "
            f"a column ({', '.join(criterion_ids)})"
        )
    points = [row.criteria.get(criterion_id, "") for criterion_id in criterion_ids]
    # Unreviewed, the final score is the automated one less any penalty: a reader never
    # has to fall back.
    final = row.final or (less_penalty(row.total, row.penalty) if row.status in REPORTED else "")
    head = [
        row.submission,
        row.student,
        row.name,
        row.status,
        row.total,
        row.review,
        row.late,
        row.penalty,
        final,
        row.max,
    ]
    return [*head, *points, row.digest, row.reason]


def _row(line: Sequence[str], header: Sequence[str], number: int) -> GradebookRow:
    if len(line) != len(header):
        raise GradebookError(f"row {number} has {len(line)} cells but the header has {len(header)}")
    cells = dict(zip(header, (cell_text(cell) for cell in line), strict=True))
    if cells["status"] not in _STATUSES:
        raise GradebookError(
            f"row {number}: status {cells['status']!r} is not one of {', '.join(_STATUSES)}"
        )
    criteria = {key: cells[key] for key in header[len(HEAD_COLUMNS) : -len(TAIL_COLUMNS)]}
    return GradebookRow(
        submission=cells["submission"],
        student=cells["student"],
        status=cells["status"],
        total=cells["total"],
        max=cells["max"],
        criteria=MappingProxyType(criteria),
        digest=cells["digest"],
        reason=cells["reason"],
        review=cells["review"],
        final=cells["final"],
        name=cells["name"],
        late=cells["late"],
        penalty=cells["penalty"],
    )


def spreadsheet_cell(text: str, *, ends_line: bool = False) -> str:
    """``text`` as a cell no spreadsheet runs as a formula, whatever separator it splits
    the file on (see the module's docstring); ``cell_text`` gives ``text`` back.

    ``ends_line``: the cell ends a line that ends in a carriage return (the review sheet's
    CRLF). When it is quoted and ends with a separator or a line break, a reader splitting
    on another separator starts a field at the quote that closes it, which it strips: the
    field would start with that carriage return. Such a cell gets a ``'`` at its end.
    """
    cell = _DEFUSE.sub(r"\1'\2", text)
    if ends_line and _QUOTED.intersection(cell) and _ENDS_BREAK.search(cell):
        cell += "'"
    return f"'{cell}" if cell.startswith(_FORMULA_START) else cell


def cell_text(cell: str, *, ends_line: bool = False) -> str:
    """The text ``spreadsheet_cell`` wrote as ``cell`` (with the same ``ends_line``)."""
    text = cell[1:] if cell.startswith("'") else cell
    if ends_line and _QUOTED.intersection(text) and _ENDS_ESCAPED.search(text):
        text = text[:-1]
    return _RESTORE.sub(r"\1\2", text)


def csv_row(cells: Sequence[str], end: str) -> str:
    """One CSV line of ``cells``, ended with ``end``: the csv module's minimal quoting (a
    cell holding a comma, a double quote or a line break is quoted, its quotes doubled),
    with a carriage return quoted whatever the line end, which the csv module leaves bare
    under ``"\\n"`` (and a reader then takes for the end of the line)."""
    return (
        ",".join(
            f'"{cell.replace(chr(34), chr(34) * 2)}"' if _QUOTED.intersection(cell) else cell
            for cell in cells
        )
        + end
    )


def less_penalty(points: str, penalty: str) -> str:
    """``points`` less a late ``penalty`` (both as the gradebook writes them; "" is none),
    never below zero."""
    if not penalty:
        return points
    return f"{max(Decimal(0), Decimal(points) - Decimal(penalty)):.2f}"


def error_row(folder: str, student: str, reason: str, status: Status = "error") -> GradebookRow:
    """The row of a submission that was not graded; ``reason`` says why and what to do."""
    return GradebookRow(
        submission=folder,
        student=student,
        status=status,
        total="",
        max="",
        criteria={},
        digest="",
        reason=reason,
    )
