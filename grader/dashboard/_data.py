"""What the dashboard shows, read from a grades folder: plain values, no HTML.

The gradebook (``gradebook.csv``) is the cohort's numbers as they stand; each
submission's ``report.json`` and ``calls.json`` say where its points went and what its
agent asked; the ledger (``ledger.jsonl``) and the archived reports say how each grade
came to be and why it changed (``grader.ledger._history``). Everything is read, never
written, and every list is in a fixed order, so one grades folder gives one site.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from grader._model import HumanReview
from grader._text import FLAGGED
from grader.ledger import (
    CALLS,
    COPIES,
    GRADEBOOK,
    LEDGER,
    REPORT,
    archived,
    case_snapshots,
    causes,
    current_reviews,
    first_divergence,
    read_ledger,
    verdict_lines,
)
from grader.outputs import (
    FIXED_COLUMNS,
    REPORTED,
    CopyPair,
    GradebookRow,
    read_calls,
    read_copies,
    read_gradebook,
    review_verdict,
    verify_report,
)

__all__ = [
    "Cohort",
    "GradeChange",
    "GradingEvent",
    "GridCell",
    "Submission",
    "decimal",
    "finding_kind",
    "load_cohort",
]

FULL = "full marks"
# What a finding is about, by the words the grader uses for it; the first that matches.
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        ("flagged for review", rf"^{re.escape(FLAGGED)}|tamper|forged|replaced the harness"),
        ("sandbox refusal", r"sandbox refused"),
        ("timeout or budget", r"timed out|timeout|budget"),
        ("import error", r"failed to import|could not be imported"),
        ("miss", r"does not hold|no recording|cassette miss|missing fixture"),
        ("recording problem", r"cannot be used|is missing|cannot be decoded|not valid JSONL"),
        ("failure log", r"FAILURES|failure log"),
    )
)


def finding_kind(text: str) -> str:
    """The kind of a finding or of a reason a row was not graded."""
    return next((kind for kind, pattern in _KINDS if pattern.search(text)), "other")


@dataclass(frozen=True, slots=True)
class GridCell:
    """One case of one submission in the students x cases grid: the first criterion (in
    rubric order) that lost points on it, or ``FULL``; ``""`` when nothing was graded."""

    case: str
    criterion: str  # the criterion's id, "" when none lost points
    label: str  # its title, FULL, or the row's status


@dataclass(frozen=True, slots=True)
class GradingEvent:
    """One grade of a student, as the ledger has it, and what changed since the one before."""

    number: int  # 1, 2, ...: the student's grades in ledger order
    seq: int  # the run event's
    status: str
    total: Decimal | None
    report: str  # digest; "" when there is none
    causes: tuple[str, ...]  # what the ledger says changed since the previous grade
    divergence: str  # the first criterion/check whose result differs, "" when none or unknown
    reviews: tuple[str, ...] = ()  # human reviews made of this grade, each one line
    # The grade after people's reviews: ``total`` with the current reviews of ``report``
    # (what the gradebook's ``final`` is for the latest grade); None when there is no total.
    final: Decimal | None = None
    reviewed: str = ""  # those current reviews in a few words; "" when there are none
    failed: tuple[str, ...] = ()  # each judged check it failed, where it first diverged


@dataclass(frozen=True, slots=True)
class GradeChange:
    """How the latest grade differs from the one before, criterion by criterion."""

    previous: GradingEvent
    current: GradingEvent
    criteria: tuple[tuple[str, str, str, str], ...]  # (id, title, before, after) that differ
    checks: tuple[tuple[str, str, str, str], ...]  # (criterion/check, before, after, detail)


@dataclass(frozen=True)
class Submission:
    """One gradebook row and everything behind it."""

    row: GradebookRow
    slug: str  # its page's file name, without .html
    report: Mapping[str, Any] | None  # report.json; None when there is none
    report_problem: str  # why the report is not shown or not trusted; "" when it verifies
    calls: Mapping[str, Any] | None  # calls.json
    cells: tuple[GridCell, ...]
    history: tuple[GradingEvent, ...]
    change: GradeChange | None  # the latest grade against the one before it, when there is one
    reviews: tuple[HumanReview, ...] = ()  # the current reviews of the row's report

    def points(self, criterion: str) -> Decimal | None:
        """The criterion's points after review: an override's points, else (a confirmation,
        or no review) the automated points the gradebook holds."""
        override = next(
            (r.points for r in self.reviews if r.criterion == criterion and r.points is not None),
            None,
        )
        return override if override is not None else decimal(self.row.criteria.get(criterion))

    @property
    def reported(self) -> bool:
        return self.row.status in REPORTED


@dataclass(frozen=True)
class Cohort:
    """The whole grades folder, ready to show."""

    criteria: tuple[tuple[str, str, Decimal], ...]  # (id, title, max) in rubric order
    cases: tuple[str, ...]
    maximum: Decimal
    submissions: tuple[Submission, ...]  # in gradebook order
    findings: tuple[tuple[str, str, str], ...]  # (kind, submission, text), in order
    latest_batch: int | None  # the seq of the ledger's latest batch event
    rubric: str = ""  # "provider-swap-lab v1"
    problems: tuple[str, ...] = field(default=())  # what could not be read, for the page
    batches: tuple[Batch, ...] = field(default=())  # the latest first (those that say status)
    copies: tuple[CopyPair, ...] = field(default=())  # copies.json's pairs, by name


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch as its ledger event says it: its status and counts, who ran it and when
    (labels from the ledger, never part of a report), and its idempotency key."""

    seq: int
    status: str
    requested: int
    completed: int
    failed: int
    operator: str
    at: str
    key: str


_BATCHES_SHOWN = 20  # the latest batches on the cohort page


def batches_of(events: Sequence[Mapping[str, Any]]) -> tuple[Batch, ...]:
    """The latest batches that say their status (an older gradekit's say none), latest
    first."""
    found = [
        Batch(
            int(e["seq"]),
            str(e["status"]),
            int(e.get("requested", 0)),
            int(e.get("completed", 0)),
            int(e.get("failed", 0)),
            str(e.get("operator", "")),
            str(e.get("at", "")),
            str(e.get("idempotency_key", "")),
        )
        for e in events
        if e.get("event") == "batch" and "status" in e
    ]
    return tuple(reversed(found[-_BATCHES_SHOWN:]))


def load_cohort(grades: Path) -> Cohort:
    """Read ``grades`` (what ``gradekit grade --out`` wrote)."""
    header, rows = read_gradebook((grades / GRADEBOOK).read_bytes())
    problems: list[str] = []
    events: list[Mapping[str, Any]] = []
    if (grades / LEDGER).exists():
        events = list(read_ledger(grades / LEDGER).events)
    else:
        problems.append(f"no {LEDGER}: grade histories are not shown")
    reports = {row.submission: _report(grades / row.submission) for row in rows}
    criteria = _criteria(header, [r for r, _ in reports.values() if r is not None])
    calls = {row.submission: read_calls(grades / row.submission / CALLS) for row in rows}
    cases = _cases(calls.values(), events)
    slugs = _slugs([row.submission for row in rows])
    snapshots = case_snapshots(events)
    # Each archived report is read (and verified) once, however many pages compare it.
    archive: Callable[[str], Mapping[str, Any] | None] = functools.cache(
        lambda digest: archived(grades, digest) if digest else None
    )
    batches = [int(e["seq"]) for e in events if e.get("event") == "batch"]
    reviewed = _reviews_by_report(events)
    # One pass over the ledger: each student's events, in ledger order, grouped once.
    by_student: dict[object, list[Mapping[str, Any]]] = {}
    for event in events:
        by_student.setdefault(event.get("student"), []).append(event)
    submissions = []
    for row in rows:
        report, problem = reports[row.submission]
        history = _history(
            archive, by_student.get(row.student, []), row.student, snapshots, reviewed
        )
        submissions.append(
            Submission(
                row=row,
                slug=slugs[row.submission],
                report=report,
                report_problem=problem,
                calls=calls[row.submission],
                cells=_cells(row, report, criteria, cases),
                history=history,
                change=_change(archive, history, criteria),
                reviews=reviewed(row.digest) if row.status in REPORTED else (),
            )
        )
    findings = tuple(
        (finding_kind(text), s.row.submission, text)
        for s in submissions
        for text in (
            [str(f) for f in (s.report or {}).get("findings", [])]
            or ([s.row.reason] if s.row.reason and not s.reported else [])
        )
        + _observed(s.calls)
    )
    maximum = next(
        (decimal(r.max) for r in rows if decimal(r.max) is not None),
        sum((c[2] for c in criteria), Decimal(0)),
    )
    rubric = next(
        (
            f"{r['rubric'].get('id')} v{r['rubric'].get('version')}"
            for r, _ in reports.values()
            if r and isinstance(r.get("rubric"), dict)
        ),
        "",
    )
    return Cohort(
        criteria=criteria,
        cases=cases,
        maximum=maximum or Decimal(0),
        submissions=tuple(submissions),
        findings=findings,
        latest_batch=max(batches) if batches else None,
        rubric=rubric,
        batches=batches_of(events),
        copies=_copies(grades, problems),
        problems=tuple(problems),
    )


def _copies(grades: Path, problems: list[str]) -> tuple[CopyPair, ...]:
    """The pairs ``copies.json`` flags (none without one; an unreadable one is a problem)."""
    try:
        return read_copies((grades / COPIES).read_bytes()).pairs
    except FileNotFoundError:
        return ()
    except (OSError, ValueError) as exc:
        problems.append(f"{COPIES} cannot be read ({exc}): its pairs are not shown")
        return ()


def _observed(calls: Mapping[str, Any] | None) -> list[str]:
    """What the grader saw in the primary run that is worth counting: a case that timed
    out or crashed, and one whose calls missed the recordings."""
    found = []
    for case in (calls or {}).get("cases", []):
        if not isinstance(case, dict):
            continue
        name, status = case.get("case"), case.get("status")
        if status in ("timeout", "crashed"):
            word = "timed out" if status == "timeout" else "crashed"
            found.append(f"case {name} {word} in the primary run: {case.get('detail', '')}")
        missed = [c for c in case.get("calls", []) if isinstance(c, dict) and not c.get("served")]
        if missed:
            found.append(
                f"case {name}: {len(missed)} call(s) of the primary run had no "
                f"recording (first: {missed[0].get('kind')} {missed[0].get('key')})"
            )
    return found


def _report(folder: Path) -> tuple[Mapping[str, Any] | None, str]:
    path = folder / REPORT
    try:
        data = path.read_bytes()
    except OSError:
        return None, "no report.json"
    ok, problem = verify_report(data)
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "report.json is not JSON"
    if not isinstance(document, dict):
        return None, "report.json is not a report"
    return document, "" if ok else f"report.json does not verify: {problem}"


def _criteria(
    header: Sequence[str], reports: Sequence[Mapping[str, Any]]
) -> tuple[tuple[str, str, Decimal], ...]:
    """The gradebook's criterion columns with the title and max a report gives them."""
    known: dict[str, tuple[str, Decimal]] = {}
    for report in reports:
        for criterion in report.get("criteria", []):
            if isinstance(criterion, dict) and criterion.get("id") not in known:
                known[str(criterion.get("id"))] = (
                    str(criterion.get("title", "")),
                    decimal(criterion.get("max")) or Decimal(0),
                )
    fixed = set(FIXED_COLUMNS)
    return tuple(
        (column, *known.get(column, (column, Decimal(0))))
        for column in header
        if column not in fixed
    )


def _cases(
    calls: Iterable[Mapping[str, Any] | None], events: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    """The rubric's cases in its order (as calls.json lists them), else the ledger's."""
    for document in calls:
        if document:
            return tuple(
                str(case.get("case")) for case in document["cases"] if isinstance(case, dict)
            )
    for event in reversed(events):
        rubric = event.get("rubric") if event.get("event") == "batch" else None
        if isinstance(rubric, dict) and isinstance(rubric.get("cases"), dict):
            return tuple(sorted(rubric["cases"]))
    return ()


def _slugs(names: Sequence[str]) -> dict[str, str]:
    """A file name for each submission's page: its own name when that is safe and unique,
    else a cleaned one with a short hash of the name."""
    slugs: dict[str, str] = {}
    taken: set[str] = set()  # the slugs so far, lower case (a case-blind file system)
    for name in names:
        clean = re.sub(r"[^A-Za-z0-9._-]", "-", name).strip(".-")[:60] or "submission"
        if clean != name or clean.lower() in taken:
            clean = f"{clean}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"
        slugs[name] = clean
        taken.add(clean.lower())
    return slugs


def _cells(
    row: GradebookRow,
    report: Mapping[str, Any] | None,
    criteria: Sequence[tuple[str, str, Decimal]],
    cases: Sequence[str],
) -> tuple[GridCell, ...]:
    if report is None or row.status not in REPORTED:
        return tuple(GridCell(case, "", row.status) for case in cases)
    by_id = {str(c.get("id")): c for c in report.get("criteria", []) if isinstance(c, dict)}
    cells = []
    for case in cases:
        lost = next(
            (
                (cid, title)
                for cid, title, _ in criteria
                if any(
                    check.get("id") == case and _lost(check)
                    for check in by_id.get(cid, {}).get("checks", [])
                )
            ),
            None,
        )
        cells.append(GridCell(case, lost[0], lost[1]) if lost else GridCell(case, "", FULL))
    return tuple(cells)


def _lost(check: Mapping[str, Any]) -> bool:
    points, maximum = decimal(check.get("points")), decimal(check.get("max"))
    return points is not None and maximum is not None and points < maximum


Archive = Callable[[str], Mapping[str, Any] | None]  # a report digest -> the archived report
Reviews = Callable[[str], tuple[HumanReview, ...]]  # a report digest -> its current reviews


def _reviews_by_report(events: Sequence[Mapping[str, Any]]) -> Reviews:
    """The current reviews of a report, as ``gradekit review`` and the gradebook count them
    (``grader.ledger.current_reviews``), with the ledger's review events grouped by report
    once rather than scanned for every row."""
    by_report: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        if event.get("event") == "review" and isinstance(event.get("report"), str):
            by_report.setdefault(event["report"], []).append(event)

    @functools.cache
    def reviews(digest: str) -> tuple[HumanReview, ...]:
        return current_reviews(by_report.get(digest, []), digest) if digest else ()

    return reviews


def _final(total: Decimal | None, reviews: Sequence[HumanReview]) -> Decimal | None:
    return None if total is None else total + sum((r.delta for r in reviews), Decimal(0))


def _in_words(reviews: Sequence[HumanReview]) -> str:
    """``written_summary 15.00->12.00 by kim``: as the gradebook's ``review`` cell says it."""
    return "; ".join(f"{r.criterion} {review_verdict(r).replace(' -> ', '->')}" for r in reviews)


def _history(
    archive: Archive,
    events: Sequence[Mapping[str, Any]],
    student: str,
    snapshots: Mapping[str, Mapping[str, str]],
    reviewed: Reviews,
) -> tuple[GradingEvent, ...]:
    """``student``'s gradings; ``events``: the ledger's events (the student's alone, or all
    of them), in ledger order."""
    found: list[GradingEvent] = []
    previous: Mapping[str, Any] | None = None
    reviews: dict[int, list[str]] = {}
    for event in events:
        if event.get("student") != student:
            continue
        if event.get("event") == "review" and isinstance(event.get("run"), int):
            verdict = (
                "confirmed"
                if event.get("points") is None
                else f"{event.get('automated')} -> {event.get('points')}"
            )
            reviews.setdefault(event["run"], []).append(
                f"{event.get('criterion')} {verdict} by {event.get('by')}: {event.get('reason')}"
            )
        if event.get("event") != "run":
            continue
        divergence = ""
        new = archive(str(event.get("report")))
        if previous is not None:
            old = archive(str(previous.get("report")))
            if old is not None and new is not None:
                divergence = first_divergence(old, new)
        total, digest = decimal(event.get("total")), str(event.get("report") or "")
        current = reviewed(digest) if total is not None else ()
        found.append(
            GradingEvent(
                number=len(found) + 1,
                seq=int(event.get("seq", 0)),
                status=str(event.get("status")),
                total=total,
                report=digest,
                causes=tuple(causes(previous, event, snapshots)) if previous is not None else (),
                divergence=divergence,
                final=_final(total, current),
                reviewed=_in_words(current),
                failed=tuple(verdict_lines(new or {}, label="")),
            )
        )
        previous = event
    return tuple(replace(g, reviews=tuple(reviews.get(g.seq, ()))) for g in found)


def _change(
    archive: Archive, history: Sequence[GradingEvent], criteria: Sequence[tuple[str, str, Decimal]]
) -> GradeChange | None:
    if len(history) < 2:
        return None
    previous, current = history[-2], history[-1]
    old, new = archive(previous.report), archive(current.report)
    titles = {cid: title for cid, title, _ in criteria}
    rows, checks = [], []
    if old is not None and new is not None:
        before = {str(c.get("id")): c for c in old.get("criteria", []) if isinstance(c, dict)}
        for criterion in new.get("criteria", []):
            cid = str(criterion.get("id"))
            was = before.get(cid, {})
            if (was.get("points"), was.get("max")) != (
                criterion.get("points"),
                criterion.get("max"),
            ):
                rows.append(
                    (
                        cid,
                        titles.get(cid, cid),
                        str(was.get("points", "—")),
                        str(criterion.get("points")),
                    )
                )
            earlier = {str(k.get("id")): k for k in was.get("checks", [])}
            for check in criterion.get("checks", []):
                then = earlier.get(str(check.get("id")), {})
                if (then.get("points"), then.get("detail")) != (
                    check.get("points"),
                    check.get("detail"),
                ):
                    checks.append(
                        (
                            f"{cid}/{check.get('id')}",
                            str(then.get("points", "—")),
                            str(check.get("points")),
                            str(check.get("detail", "")),
                        )
                    )
    return GradeChange(previous, current, tuple(rows), tuple(checks))


def decimal(value: object) -> Decimal | None:
    """A points string (``"12.50"``) as a Decimal; None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return Decimal(value)
    except InvalidOperation:
        return None
