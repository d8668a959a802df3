"""The review sheet: a CSV a TA fills in a spreadsheet, one row per report and criterion to
review (``gradekit reviews export``), and reads back as review events (``gradekit reviews
import``).

Exported rows come from the gradebook: each graded row's report (its full digest) and, in
the report's order, its criteria marked for review or reviewed before (``--criterion C``:
that one on every row; ``--pending``: only those pending or needing a new review), with
what the report holds for a person to judge by (``evidence``: each check's verdict, points
and detail, and the advice, cut at ``EVIDENCE_LIMIT`` characters) and why a person should
look at the whole submission (``flagged``: the gradebook row's reason, a copy of a
classmate's work among them; empty for most rows). The TA fills
``decision`` (``confirm`` or ``override``), ``points`` (an override's), ``by`` and
``reason``; a row left without a decision is skipped.

Import checks every row before it appends anything, exactly as ``gradekit review`` checks
one review, and lists every bad row as ``FILE:LINE: problem; fix``. A valid sheet's reviews
are appended in one append, in a stable order (submission, report, the criterion's place in
the report), whatever order the spreadsheet sorted the rows into, so a sheet gives the
ledger, gradebook and results.json that ``gradekit review`` run row by row in that order
gives. A review is tied to its report's digest: a row of a report that is no longer the
student's latest is recorded all the same, and left out of the gradebook, as ``review
--report`` does. A row whose review is current already (same points, by and reason) is not
appended again, so importing a sheet twice appends it once.

The file: UTF-8 (a spreadsheet's byte-order mark is tolerated on import), the csv module's
quoting, CRLF line ends. Every cell is written as the gradebook's are
(``grader.outputs.spreadsheet_cell``): no spreadsheet runs one as a formula, whatever
separator it splits the file on (a ``'`` in front of a formula start, at the start of a
cell or after a separator or line break in it), and import reads each back exactly
(``cell_text``: it removes exactly those).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import commands
from grader._text import quote
from grader.ledger._bulk import graded_rows
from grader.ledger._folder import GRADEBOOK
from grader.ledger._ledger import verified_archive
from grader.ledger._reviews import (
    Planned,
    ReviewIndex,
    ReviewRequest,
    ReviewState,
    current_reviews,
    plan_review,
    review_states,
)
from grader.outputs import cell_text, csv_row, points_text, review_verdict, spreadsheet_cell
from grader.outputs._gradebook import _FORMULA_START as _FORMULA_START  # one escaping

__all__ = [
    "COLUMNS",
    "EVIDENCE_LIMIT",
    "Exported",
    "Imported",
    "export_sheet",
    "read_sheet",
    "sheet_csv",
    "sheet_rows",
]

COLUMNS = (
    "student",
    "submission",
    "report",
    "criterion",
    "automated",
    "max",
    "marked",
    "evidence",
    "flagged",
    "decision",
    "points",
    "by",
    "reason",
)
# A sheet exported before the ``flagged`` column: imported all the same (it is not read).
_EARLIER_COLUMNS = tuple(column for column in COLUMNS if column != "flagged")
FILLED = ("decision", "points", "by", "reason")  # the TA's columns: empty on export
EVIDENCE_LIMIT = 4000  # characters of the evidence cell: a summary's entries fit
DECISIONS = ("confirm", "override")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_FLAG = re.compile(r"--(criterion|points|by|reason|report)\b")


# -- the file ---------------------------------------------------------------------------------


def sheet_csv(rows: Sequence[Sequence[str]]) -> bytes:
    """The sheet's bytes: the header, then ``rows`` as given, each cell as no spreadsheet
    runs it (``spreadsheet_cell``); CRLF line ends, as RFC 4180 and spreadsheets write CSV."""
    lines = [csv_row(COLUMNS, "\r\n")]
    for row in rows:
        if len(row) != len(COLUMNS):
            raise ValueError(f"a sheet row has {len(COLUMNS)} cells, not {len(row)}")
        last = len(row) - 1
        lines.append(
            csv_row(
                [spreadsheet_cell(cell, ends_line=n == last) for n, cell in enumerate(row)], "\r\n"
            )
        )
    return "".join(lines).encode("utf-8")


def sheet_rows(path: Path, data: bytes) -> list[tuple[int, dict[str, str]]]:
    """Each row of the sheet ``data`` after its header, with the line it starts on, by
    column, each cell as ``sheet_csv`` was given it (``cell_text``); blank lines left out.
    ``UsageError`` when it is no review sheet or a row has another number of cells."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: byte {exc.start} is not UTF-8; save the sheet as CSV UTF-8"
        ) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    lines_read: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for row in reader:
            last = len(row) - 1
            lines_read.append(
                (start, [cell_text(cell, ends_line=n == last) for n, cell in enumerate(row)])
            )
            start = reader.line_num + 1
    except csv.Error as exc:
        raise UsageError(f"{path}:{start}: not CSV ({exc}); save the sheet as CSV") from None
    if not lines_read or tuple(lines_read[0][1]) not in (COLUMNS, _EARLIER_COLUMNS):
        found = ",".join(lines_read[0][1]) if lines_read else "nothing"
        export = commands.REVIEWS_EXPORT(out="grades", criterion="ID", sheet=path.name)
        raise UsageError(
            f"{path}:1: the header is {found}, not a review sheet's "
            f"{','.join(COLUMNS)}; save it as CSV with commas, its columns as "
            f"exported (`{export}` writes one)"
        )
    header = lines_read[0][1]
    rows = []
    problems = []
    for line, cells in lines_read[1:]:
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            problems.append(
                f"{path}:{line}: {len(cells)} cells where the header has "
                f"{len(header)}; give the row one cell per column"
            )
            continue
        rows.append((line, dict(zip(header, cells, strict=True))))
    if problems:
        raise _refused(path, problems)
    return rows


# -- export -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Exported:
    """A sheet's bytes and what is in it."""

    data: bytes
    rows: int
    reports: int
    pending: int
    stale: int


def export_sheet(
    out: Path, events: Sequence[Mapping[str, Any]], criterion: str | None, pending: bool
) -> Exported:
    """The review sheet of ``out``'s gradebook: a row per graded report and criterion to
    review, by submission and then in the report's order."""
    rows = graded_rows(out, criterion)
    cells: list[list[str]] = []
    problems: list[str] = []
    reports = waiting = stale = 0
    for row, state in zip(rows, review_states(out, rows, events), strict=True):
        try:
            document = verified_archive(out, row.digest)
        except UsageError as exc:
            problems.append(f"{row.submission}: {exc}")
            continue
        chosen = [
            c
            for c in document["criteria"]
            if isinstance(c, dict)
            and _chosen(str(c.get("id")), bool(c.get("review")), state, criterion, pending)
        ]
        reports += bool(chosen)
        for entry in chosen:
            criterion_id = str(entry["id"])
            waiting += criterion_id in state.pending
            stale += any(s.criterion == criterion_id for s in state.stale)
            cells.append(
                [
                    row.student,
                    row.submission,
                    row.digest,
                    criterion_id,
                    str(entry["points"]),
                    str(entry["max"]),
                    _marked(criterion_id, bool(entry.get("review")), state),
                    _evidence(entry),
                    quote(row.reason, EVIDENCE_LIMIT),
                    *("" for _ in FILLED),
                ]
            )
    if problems:
        raise UsageError(
            f"{len(problems)} graded row{'' if len(problems) == 1 else 's'} of "
            f"{out / GRADEBOOK} cannot be exported (no sheet was written):\n" + "\n".join(problems)
        )
    return Exported(sheet_csv(cells), len(cells), reports, waiting, stale)


def _chosen(
    criterion: str, review: bool, state: ReviewState, only: str | None, pending: bool
) -> bool:
    """Whether the sheet has a row for ``criterion`` (``review``: marked for review)."""
    stale = any(s.criterion == criterion for s in state.stale)
    if pending and criterion not in state.pending and not stale:
        return False
    if only is not None:
        return criterion == only
    return review or stale or any(r.criterion == criterion for r in state.current)


def _marked(criterion: str, review: bool, state: ReviewState) -> str:
    """The ``marked`` cell: where the criterion stands."""
    for current in state.current:
        if current.criterion == criterion:
            return f"reviewed: {review_verdict(current)} (ledger event {current.event})"
    for stale in state.stale:
        if stale.criterion == criterion:
            return (
                f"needs a new review: reviewed on report {stale.report[:12]} (ledger event "
                f"{stale.event}), not this one"
            )
    if criterion in state.pending:
        return "pending"
    return "marked for review" if review else "not marked for review"


def _evidence(criterion: Mapping[str, Any]) -> str:
    """What the report holds to judge ``criterion`` by, on one line."""
    parts = []
    for check in criterion.get("checks", ()):
        verdict = (
            "degraded"
            if check.get("verdict") == "degraded"
            else "passed"
            if check.get("passed") is True
            else "failed"
        )
        parts.append(
            f"{check.get('id')}: {verdict}, {check.get('points')} / "
            f"{check.get('max')}: {check.get('detail')}"
        )
    parts += [f"advice: {advice}" for advice in criterion.get("advice", ())]
    return quote(re.sub(r"\s+", " ", " | ".join(parts)).strip(), EVIDENCE_LIMIT)


# -- import -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Imported:
    """A checked sheet: the reviews to append, in order, and the rows that add none."""

    planned: tuple[Planned, ...]
    blank: int  # rows without a decision
    already: int  # rows whose review is current already


def read_sheet(
    path: Path, data: bytes, out: Path, events: Sequence[Mapping[str, Any]], by: str | None
) -> Imported:
    """The reviews of the filled sheet ``data`` (read from ``path``) for ``out``'s ledger,
    whose events are ``events``; ``by``: the reviewer of rows whose ``by`` is empty.
    ``UsageError`` listing every bad row, as ``FILE:LINE: problem; fix``."""
    planned: list[tuple[tuple[str, str, int], Planned]] = []
    problems: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    blank = already = 0
    index = ReviewIndex(events)  # once: each row reads its student's runs and reviews
    for line, cells in sheet_rows(path, data):
        try:
            decided = _decided(cells, by, seen, line, index, out)
        except UsageError as exc:
            problems.append(f"{path}:{line}: {exc}")
            continue
        if decided is None:
            blank += 1
            continue
        event, document = decided
        if _current(index, event):
            already += 1
            continue
        order = [c.get("id") for c in document["criteria"] if isinstance(c, dict)]
        key = (str(event["submission"]), str(event["report"]), order.index(event["criterion"]))
        planned.append((key, (event, document)))
    if problems:
        raise _refused(path, problems)
    return Imported(tuple(p for _, p in sorted(planned, key=lambda p: p[0])), blank, already)


def _decided(
    cells: Mapping[str, str],
    by: str | None,
    seen: dict[tuple[str, str], int],
    line: int,
    index: ReviewIndex,
    out: Path,
) -> Planned | None:
    """The review event of one row, None for a row without a decision."""
    decision, points = cells["decision"].strip().lower(), cells["points"].strip()
    if not decision:
        if points:
            raise UsageError(
                f"points {points} without a decision; write override in decision, or clear points"
            )
        return None
    if decision not in DECISIONS:
        raise UsageError(
            f"decision {cells['decision']!r} is neither confirm nor override; "
            "write confirm (the automated points stand), override (with points), "
            "or nothing to skip the row"
        )
    if decision == "confirm" and points:
        raise UsageError(
            f"a confirmation keeps the automated points, but points is {points}; "
            "clear points, or write override"
        )
    if decision == "override" and not points:
        raise UsageError(
            f"an override needs points; write the points that stand, 0 to "
            f"{cells['max'] or 'the max'}"
        )
    report = cells["report"].strip().lower()
    if not _DIGEST.fullmatch(report):
        raise UsageError(
            f"report {cells['report']!r} is not a full report digest (64 hex "
            "digits); export the sheet again, and keep its report cells as written"
        )
    who = cells["by"].strip() or (by or "")
    if not who:
        raise UsageError(
            "by is empty and no --by was given; write who reviewed it, or pass --by NAME"
        )
    criterion = cells["criterion"].strip()
    earlier = seen.setdefault((report, criterion), line)
    if earlier != line:
        raise UsageError(
            f"line {earlier} decides {criterion} of report {report[:12]} already; "
            "keep one of the two rows"
        )
    request = ReviewRequest(
        student=cells["student"].strip(),
        criterion=criterion,
        points=points or None,
        by=who,
        reason=cells["reason"].strip(),
        report=report,
    )
    try:
        event, document = plan_review(index.runs_of(request.student), request, out)
    except UsageError as exc:  # its flags are the sheet's columns here
        raise UsageError(_FLAG.sub(r"\1", str(exc))) from None
    if event["submission"] != cells["submission"].strip():
        raise UsageError(
            f"submission {cells['submission']!r} is not the submission of report "
            f"{report[:12]} ({event['submission']!r}); export the sheet again"
        )
    return event, document


def _current(index: ReviewIndex, event: Mapping[str, Any]) -> bool:
    """Whether ``event``'s review is the current one of its criterion already."""
    report = str(event["report"])
    for review in current_reviews(index.of_report(report), report):
        if review.criterion == event["criterion"]:
            points = None if review.points is None else points_text(review.points)
            return (points, review.by, review.reason) == (
                event["points"],
                event["by"],
                event["reason"],
            )
    return False


def _refused(path: Path, problems: Sequence[str]) -> UsageError:
    count = len(problems)
    return UsageError(
        f"{path}: {count} row{'' if count == 1 else 's'} cannot be appended, so "
        "nothing was; fix each and import the sheet again:\n" + "\n".join(problems)
    )
