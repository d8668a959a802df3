"""The batch's ``gradebook.csv``: one row per submission, merged from shards byte-exactly.

Columns: submission (the folder's name), student (who it is: the roster's student id,
else the folder's name; never what the submission says), status, total (the automated
points), review (what people reviewed, what is pending, what needs a new review), final
(the total with current reviews: ``grader.records._reviews``; the total when there are none), max,
one per criterion id in rubric order, digest, reason. Rows are sorted by submission; lines end
in ``\\n``; UTF-8; the csv module's minimal quoting. A cell that a spreadsheet would run
as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) is
written with a leading ``'``, and so is a cell that starts with ``'``, so reading strips
exactly one and a round trip gives the same bytes.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

from grader._errors import GradebookError

__all__ = [
    "FIXED_COLUMNS",
    "REPORTED",
    "GradebookError",
    "GradebookRow",
    "Status",
    "gradebook_csv",
    "merge_gradebooks",
    "read_gradebook",
]

HEAD_COLUMNS = ("submission", "student", "status", "total", "review", "final", "max")
# The head of gradebooks written before reviews: read only to say what to do.
_EARLIER_HEAD = ("submission", "student", "status", "total", "max")
TAIL_COLUMNS = ("digest", "reason")
FIXED_COLUMNS = HEAD_COLUMNS + TAIL_COLUMNS
# graded: scored; degraded: scored, but some checks could not be evaluated because the
# rubric's contract is incomplete (the reason says which: not a final grade); error: could
# not be graded (the reason says why); ungradable: not a submission at all; interrupted:
# Ctrl-C stopped the batch first (this gradebook is partial).
Status = Literal["graded", "degraded", "error", "ungradable", "interrupted"]
_STATUSES: tuple[Status, ...] = get_args(Status)
REPORTED: frozenset[Status] = frozenset(("graded", "degraded"))  # rows with a report
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


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
    final: str = ""  # the total after current reviews; "" means the total, when reported


def gradebook_csv(rows: Iterable[GradebookRow], criterion_ids: Sequence[str]) -> bytes:
    """The gradebook's bytes: fixed columns around ``criterion_ids``, rows by submission."""
    _require_ids(criterion_ids)
    # Whole rows break ties, so any order of the same rows gives the same bytes (a batch
    # refuses two folders of one name, and a merge two rows of one submission, anyway).
    ordered = sorted(_cells(row, criterion_ids) for row in rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*HEAD_COLUMNS, *criterion_ids, *TAIL_COLUMNS])
    for cells in ordered:
        writer.writerow([_escape(cell) for cell in cells])
    return buffer.getvalue().encode("utf-8")


def read_gradebook(data: bytes) -> tuple[list[str], list[GradebookRow]]:
    """The criterion ids and the rows of a gradebook written by ``gradebook_csv``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GradebookError(f"byte {exc.start} is not UTF-8: not a gradekit gradebook") from exc
    records = list(csv.reader(io.StringIO(text, newline="")))
    if not records:
        raise GradebookError("the gradebook is empty; it needs at least its header line")
    header = records[0]
    head, tail = len(HEAD_COLUMNS), len(TAIL_COLUMNS)
    if tuple(header[:len(_EARLIER_HEAD)]) == _EARLIER_HEAD:
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
    rows = [_row(record, header, number) for number, record in enumerate(records[1:], 2)]
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
    # Unreviewed, the final score is the automated one: a reader never has to fall back.
    final = row.final or (row.total if row.status in REPORTED else "")
    head = [row.submission, row.student, row.status, row.total, row.review, final, row.max]
    return [*head, *points, row.digest, row.reason]


def _row(record: Sequence[str], header: Sequence[str], number: int) -> GradebookRow:
    if len(record) != len(header):
        raise GradebookError(
            f"row {number} has {len(record)} cells but the header has {len(header)}"
        )
    cells = dict(zip(header, (_unescape(cell) for cell in record), strict=True))
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
    )


def _escape(cell: str) -> str:
    return f"'{cell}" if cell.startswith(_FORMULA_START) else cell


def _unescape(cell: str) -> str:
    return cell[1:] if cell.startswith("'") else cell


def error_row(folder: str, student: str, reason: str,
              status: Status = "error") -> GradebookRow:
    """The row of a submission that was not graded; ``reason`` says why and what to do."""
    return GradebookRow(submission=folder, student=student, status=status, total="", max="",
                        criteria={}, digest="", reason=reason)
