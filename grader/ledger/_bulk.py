"""Confirming one criterion on every report that waits for it: ``gradekit review --criterion
C --pending [--passed]``.

A grading marks the criteria judged by structure alone (the written summary, a stretch
goal's write-up) for review on every report, so a cohort of 200 has 200 pending lines. A
person who has read them confirms them at once: each row of the gradebook whose report has
C *pending* (marked for review, with no current review, and not reviewed on an earlier
report either) gets a confirmation, ``points`` null, exactly the event ``gradekit review
STUDENT --criterion C`` appends for that report. ``--passed`` keeps only the reports where
every automated check of C has ``passed`` true in the report. A report whose gradebook row
is *flagged for review* (a copy of a classmate's work, an entry repeating the hand-out's
example or another entry, code that reaches for the harness) is never confirmed in bulk: a
person looks at the whole submission first. A criterion that *needs a new
review* (reviewed on an earlier report of the student) is never confirmed in bulk: a person
decided on that criterion once, so one looks again (``gradekit review``, or a review sheet).

Bulk confirmation never changes points: an override is one person's decision on one
report, made one at a time or row by row in a review sheet (``grader.ledger._sheet``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import commands
from grader._text import flagged
from grader.ledger._folder import GRADEBOOK, LEDGER
from grader.ledger._reviews import (
    Planned,
    ReviewIndex,
    ReviewRequest,
    plan_review,
    require_reviewer,
    review_states,
)
from grader.outputs import REPORTED, GradebookRow, read_gradebook
from grader.scoring import shown_keys

__all__ = ["Confirmations", "all_passed", "graded_rows", "plan_confirmations"]

NAMES_SHOWN = 10  # students a summary names before it counts the rest


@dataclass(frozen=True, slots=True)
class Confirmations:
    """What ``review --pending`` found: the confirmations to append, in gradebook order,
    and the students whose criterion it leaves for a person."""

    out: Path
    criterion: str
    planned: tuple[Planned, ...]
    failed: tuple[str, ...] = ()  # pending, but a check of the criterion did not pass
    stale: tuple[str, ...] = ()  # reviewed on an earlier report: needs a new review
    flagged: tuple[str, ...] = ()  # the row is flagged for review: a person looks first

    def would(self) -> list[str]:
        """A line per confirmation, as ``--dry-run`` prints them."""
        return [
            f"{event['student']}: would confirm {self.criterion} {event['automated']} / "
            f"{event['max']} (report {str(event['report'])[:12]})"
            for event, _ in self.planned
        ]

    def summary(self, *, done: bool) -> str:
        """``confirmed C on 180 reports; 20 still pending ...``: what happened, and what a
        person still has to do."""
        count = len(self.planned)
        if count:
            verb = "confirmed" if done else "would confirm"
            parts = [f"{verb} {self.criterion} on {count} report{'' if count == 1 else 's'}"]
        else:
            parts = [
                f"nothing to confirm: no report in {self.out} has {self.criterion} pending"
                + (" with every check passed" if self.failed else "")
                + (" and not flagged for review" if self.flagged else "")
            ]
        if self.failed:
            parts.append(
                f"{len(self.failed)} still pending, a check of {self.criterion} not "
                f"passed: {shown_keys(self.failed, NAMES_SHOWN)}"
            )
        if self.flagged:
            one = commands.REVIEW(
                student=self.flagged[0],
                criterion=self.criterion,
                by="NAME",
                reason="TEXT",
                out=str(self.out),
            )
            parts.append(
                f"{len(self.flagged)} left for a person, never confirmed in bulk (the "
                "gradebook's reason flags the submission for review: a copy, a "
                f"repeated entry, tampering): {shown_keys(self.flagged, NAMES_SHOWN)}; "
                f"read each, then review it (`{one}`)"
            )
        if self.stale:
            one = commands.REVIEW(
                student=self.stale[0],
                criterion=self.criterion,
                by="NAME",
                reason="TEXT",
                out=str(self.out),
            )
            sheet = commands.REVIEWS_EXPORT(
                out=str(self.out), criterion=self.criterion, sheet="SHEET.csv"
            )
            parts.append(
                f"{len(self.stale)} need a new review, never confirmed in bulk (the "
                "criterion was reviewed on an earlier report): "
                f"{shown_keys(self.stale, NAMES_SHOWN)}; "
                f"review each (`{one}`) or in a review sheet (`{sheet}`)"
            )
        return "; ".join(parts)


def plan_confirmations(
    out: Path,
    events: Sequence[Mapping[str, Any]],
    criterion: str,
    *,
    passed: bool,
    by: str,
    reason: str,
) -> Confirmations:
    """The confirmations of ``criterion`` that ``review --pending`` appends to ``out``'s
    ledger (whose events are ``events``); ``UsageError`` listing every report that cannot be
    confirmed (nothing is appended then)."""
    require_reviewer(by, reason)
    rows = graded_rows(out, criterion)
    planned: list[Planned] = []
    failed: list[str] = []
    stale: list[str] = []
    left: list[str] = []
    problems: list[str] = []
    index = ReviewIndex(events)  # once: each row reads its student's runs
    for row, state in zip(rows, review_states(out, rows, events), strict=True):
        if any(s.criterion == criterion for s in state.stale):
            stale.append(row.student)
        if criterion not in state.pending:
            continue
        if flagged(row.reason):
            left.append(row.student)
            continue
        request = ReviewRequest(
            student=row.student,
            criterion=criterion,
            points=None,
            by=by,
            reason=reason,
            report=row.digest,
        )
        try:
            event, document = plan_review(index.runs_of(row.student), request, out)
        except UsageError as exc:
            problems.append(f"{row.submission}: {exc}")
            continue
        if passed and not all_passed(document, criterion):
            failed.append(row.student)
        else:
            planned.append((event, document))
    if problems:
        raise UsageError(
            f"{len(problems)} report{'' if len(problems) == 1 else 's'} with "
            f"{criterion} pending cannot be confirmed, so none was (nothing "
            f"appended to {out / LEDGER}):\n" + "\n".join(problems)
        )
    return Confirmations(out, criterion, tuple(planned), tuple(failed), tuple(stale), tuple(left))


def graded_rows(out: Path, criterion: str | None) -> list[GradebookRow]:
    """The rows of ``out``'s gradebook that have a report, by submission; ``UsageError``
    when there is no gradebook, or ``criterion`` is none of its columns."""
    book = out / GRADEBOOK
    if not book.is_file():
        grade = commands.GRADE_INTO(submissions="SUBMISSIONS", out=str(out))
        raise UsageError(
            f"no gradebook in {out}: grade first (`{grade}`), or pass --out with "
            "the folder the grading wrote"
        )
    criterion_ids, rows = read_gradebook(book.read_bytes())
    if criterion is not None and criterion not in criterion_ids:
        raise UsageError(
            f"{criterion!r} is not a criterion of {book}: give --criterion one of "
            f"{', '.join(criterion_ids)}"
        )
    return sorted(
        (row for row in rows if row.status in REPORTED and row.digest),
        key=lambda row: (row.submission, row.student),
    )


def all_passed(document: Mapping[str, Any], criterion: str) -> bool:
    """Whether every automated check of ``criterion`` in the report ``document`` has
    ``passed`` true (a degraded check never has)."""
    found = [c for c in document["criteria"] if isinstance(c, dict) and c.get("id") == criterion]
    checks = found[0].get("checks") if found else None
    return (
        isinstance(checks, list)
        and bool(checks)
        and all(isinstance(c, dict) and c.get("passed") is True for c in checks)
    )
