"""Human review of automated grades: a person's verdict on one criterion of a graded report.

A review is one ``review`` event in the ledger (``grades/ledger.jsonl``), tied to the
digest of the report it judged: an **override** (``points``, 0 to the criterion's max) or
a **confirmation** (``points`` null: the automated points stand). The automated
``report.json`` and ``report.md`` are never edited. ``results.json`` carries the current
reviews of its report: a grading writes it with them (``grader.ledger._folder``), and a
review appended later writes it again; the gradebook's ``review`` and ``final`` cells are
brought up to date from the ledger after each grading and each review.

- A *current* review of a report is the latest review event of one criterion whose
  ``report`` is that report's digest (the digest covers the student's identity, so it is
  the latest of that student too). Final = automated total + the sum over current reviews
  of (points - automated).
- A review is never carried over to another report: once a grading gives the student a
  report with another digest (their code, a recording or the rubric changed), a criterion
  whose latest review was of another report and that has no review of this one *needs a
  new review*. Grading unchanged inputs again gives the same digest, so its reviews apply
  again.

Deciding (``current_reviews``, ``review_state``, ``plan_review``) is separate from the
edge that reads and writes files (``apply_reviews``, ``append_review``), which finds
every file through the grades folder's home (``grader.ledger._folder``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import commands, write_atomic
from grader._model import HumanReview
from grader._text import QUOTE_LIMIT, TEXT_LIMIT, quote
from grader.ledger._folder import (
    GRADEBOOK,
    LEDGER,
    REPORT,
    RESULTS,
    read_document,
    rewrite_results,
)
from grader.ledger._ledger import (
    LedgerCorrupt,
    append_events,
    archived,
    read_ledger,
    verified_archive,
)
from grader.outputs import (
    REPORTED,
    GradebookRow,
    cents_of,
    gradebook_csv,
    less_penalty,
    points_text,
    read_gradebook,
    review_verdict,
    signature_problem,
)

__all__ = [
    "AppendedReview",
    "Applied",
    "Planned",
    "ReviewIndex",
    "ReviewRequest",
    "ReviewState",
    "Stale",
    "append_review",
    "append_reviews",
    "apply_reviews",
    "current_reviews",
    "plan_review",
    "require_reviewer",
    "review_of",
    "review_state",
    "review_states",
]

BY_LIMIT = 100  # characters of a reviewer's name
_POINTS = re.compile(r"[0-9]{1,6}(\.[0-9]{1,2})?")
_PREFIX = re.compile(r"[0-9a-f]{8,64}")


@dataclass(frozen=True, slots=True)
class Stale:
    """A criterion whose latest review was of another report of the student."""

    criterion: str
    event: int  # that review's ledger seq
    report: str  # the digest it was of


@dataclass(frozen=True, slots=True)
class ReviewState:
    """How reviews bear on one report: current ones in ledger order, stale ones, and the
    criteria marked for review that no one has reviewed."""

    current: tuple[HumanReview, ...]
    stale: tuple[Stale, ...] = ()
    pending: tuple[str, ...] = ()

    def final(self, total: Decimal) -> Decimal:
        """The automated ``total`` with every current review's change."""
        return total + sum((review.delta for review in self.current), Decimal(0))

    def done(self) -> list[str]:
        """Each current review in a few words: ``written_summary 15.00->12.00 by kim``."""
        return [f"{r.criterion} {review_verdict(r).replace(' -> ', '->')}" for r in self.current]

    def cell(self) -> str:
        """The gradebook's ``review`` cell: what people did and what is still to do."""
        parts = self.done()
        parts += [
            f"NEEDS A NEW REVIEW: {s.criterion} was reviewed on report {s.report[:12]} "
            f"(ledger event {s.event}), not this one"
            for s in self.stale
        ]
        if self.pending:
            parts.append(f"pending: {', '.join(self.pending)}")
        return "; ".join(parts)


def review_of(event: Mapping[str, Any]) -> HumanReview:
    """A ledger review event as a value; ``LedgerCorrupt`` when it is not one."""
    try:
        points = event["points"]
        if not all(
            isinstance(event[k], str) for k in ("criterion", "by", "reason")
        ) or not isinstance(event["seq"], int):
            raise ValueError("a field is of the wrong type")
        return HumanReview(
            criterion=event["criterion"],
            automated=cents_of(event["automated"], "automated"),
            points=None if points is None else cents_of(points, "points"),
            by=event["by"],
            reason=event["reason"],
            event=event["seq"],
        )
    except (KeyError, ValueError) as exc:
        raise LedgerCorrupt(
            f"ledger event {event.get('seq')} is no review event ({exc}): the "
            "ledger is append-only: restore it from a backup"
        ) from None


def _reviews(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [event for event in events if event.get("event") == "review"]


def current_reviews(events: Sequence[Mapping[str, Any]], digest: str) -> tuple[HumanReview, ...]:
    """The current review of each criterion of report ``digest``, in ledger order: a later
    review of the same criterion supersedes an earlier one."""
    latest = {
        event.get("criterion"): event for event in _reviews(events) if event.get("report") == digest
    }
    return tuple(sorted((review_of(e) for e in latest.values()), key=lambda r: r.event))


def review_state(
    events: Sequence[Mapping[str, Any]], student: str, digest: str, marked: Sequence[str] = ()
) -> ReviewState:
    """The reviews of ``student``'s report ``digest``; ``marked``: its criteria marked for
    review, in report order (those neither reviewed nor stale are pending)."""
    current = current_reviews(events, digest)
    done = {review.criterion for review in current}
    elsewhere = {
        event.get("criterion"): event
        for event in _reviews(events)
        if event.get("student") == student and event.get("report") != digest
    }
    stale = tuple(
        Stale(str(c), int(e["seq"]), str(e.get("report")))
        for c, e in elsewhere.items()
        if c not in done
    )
    stale = tuple(sorted(stale, key=lambda s: s.event))
    gone = done | {s.criterion for s in stale}
    return ReviewState(current, stale, tuple(c for c in marked if c not in gone))


# -- the gradebook, brought up to date --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    """Rows with ``review`` and ``final`` filled, a line to print for each row that has
    current reviews or needs a new one, and the review state of each row graded now."""

    rows: tuple[GradebookRow, ...]
    notes: tuple[str, ...]
    states: tuple[ReviewState, ...] = ()


def apply_reviews(
    out: Path, rows: Sequence[GradebookRow], kept: Sequence[GradebookRow] = ()
) -> Applied:
    """Bring the gradebook of the grades folder ``out`` up to date with its ledger's
    reviews after a grading: every row gets its ``review`` and ``final``; ``kept`` (rows of
    earlier batches this one did not grade) are written as they are. (Each reviewed
    row's ``results.json`` was written with its reviews already, and signed once.)

    The ledger's review events are indexed once, so the cost grows with the rows and
    the events, not with their product."""
    index = ReviewIndex(read_ledger(out / LEDGER).events)
    states = [_state(out, row, index.bearing_on(row)) for row in rows]
    reviewed = tuple(_reviewed_row(row, state) for row, state in zip(rows, states, strict=True))
    _write_gradebook(out, [*reviewed, *kept])
    notes = [
        note
        for row, state in zip(reviewed, states, strict=True)
        for note in _notes(row, state, out)
    ]
    return Applied(reviewed, tuple(notes), tuple(states))


class ReviewIndex:
    """The ledger's review events by student and by report digest, and its run events by
    student, built in one pass: what keeps many rows' reviews linear in the ledger."""

    def __init__(self, events: Sequence[Mapping[str, Any]]) -> None:
        self._reviews = _reviews(events)
        self._student: dict[object, list[int]] = {}
        self._report: dict[object, list[int]] = {}
        self._runs: dict[object, list[Mapping[str, Any]]] = {}
        for place, event in enumerate(self._reviews):
            self._student.setdefault(event.get("student"), []).append(place)
            self._report.setdefault(event.get("report"), []).append(place)
        for event in events:
            if event.get("event") == "run":
                self._runs.setdefault(event.get("student"), []).append(event)

    def bearing_on(self, row: GradebookRow) -> list[Mapping[str, Any]]:
        """The review events of the row's student or of its report, in ledger order: all
        that ``review_state`` looks at, so it gives what it gives for the whole ledger."""
        places = {*self._student.get(row.student, ()), *self._report.get(row.digest, ())}
        return [self._reviews[place] for place in sorted(places)]

    def runs_of(self, student: str) -> list[Mapping[str, Any]]:
        """The run events of ``student``, in ledger order: all that ``plan_review`` reads."""
        return self._runs.get(student, [])

    def of_report(self, digest: str) -> list[Mapping[str, Any]]:
        """The review events of report ``digest``, in ledger order."""
        return [self._reviews[place] for place in self._report.get(digest, ())]


def _state(out: Path, row: GradebookRow, events: Sequence[Mapping[str, Any]]) -> ReviewState:
    """The row's review state; ``events``: the ledger's, or at least every review event
    of the row's student and of its report (``ReviewIndex.bearing_on``)."""
    if row.status not in REPORTED or not row.digest:
        return ReviewState(())
    return review_state(events, row.student, row.digest, _marked(out, row))


def _reviewed_row(row: GradebookRow, state: ReviewState) -> GradebookRow:
    if row.status not in REPORTED:
        return dataclasses.replace(row, review="", final="")
    final = less_penalty(points_text(state.final(cents_of(row.total, "total"))), row.penalty)
    return dataclasses.replace(row, review=state.cell(), final=final)


def _notes(row: GradebookRow, state: ReviewState, out: Path) -> list[str]:
    notes = []
    if state.current:
        penalty = f", less a late penalty of {row.penalty}" if row.penalty else ""
        notes.append(
            f"{row.submission}: final {row.final} / {row.max} after human review "
            f"(automated {row.total}{penalty}): {'; '.join(state.done())}"
        )
    if state.stale:
        listed = ", ".join(
            f"{s.criterion} was reviewed on report {s.report[:12]} (ledger event {s.event})"
            for s in state.stale
        )
        again = commands.REVIEW(
            student=row.student,
            criterion=state.stale[0].criterion,
            by="NAME",
            reason="TEXT",
            out=str(out),
        )
        notes.append(
            f"{row.submission}: NEEDS A NEW REVIEW: {listed}; the submission changed "
            f"since: review it again (`{again}`, each criterion listed)"
        )
    return notes


def _marked(out: Path, row: GradebookRow) -> tuple[str, ...]:
    """The ids of the row's report's criteria marked for review, in report order."""
    document = archived(out, row.digest)
    if document is None:  # an archive set aside: the folder's own copy, if it is this one
        document = read_document(out / row.submission / REPORT)
        if document is None or document.get("digest") != row.digest:
            return ()
    criteria = document.get("criteria")
    return (
        tuple(str(c.get("id")) for c in criteria if isinstance(c, dict) and c.get("review"))
        if isinstance(criteria, list)
        else ()
    )


def _write_gradebook(out: Path, rows: Sequence[GradebookRow]) -> None:
    path = out / GRADEBOOK
    if path.is_file():
        criterion_ids, _ = read_gradebook(path.read_bytes())
        write_atomic(path, gradebook_csv(rows, criterion_ids))


# -- gradekit review -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    """What ``gradekit review`` was asked, as typed."""

    student: str
    criterion: str
    points: str | None  # None: a confirmation
    by: str
    reason: str
    report: str | None = None  # a digest, or a unique prefix of 8 or more hex digits


@dataclass(frozen=True, slots=True)
class AppendedReview:
    """A review as appended, and the final score of the report it judged."""

    event: Mapping[str, Any]
    review: HumanReview
    total: Decimal  # the report's automated total
    final: Decimal
    max: Decimal
    superseded: int | None  # the seq of the review of the same criterion it replaces
    latest: bool  # the report is the student's latest grade

    def line(self) -> str:
        """What ``gradekit review`` prints."""
        replaced = (
            "" if self.superseded is None else f", superseding ledger event {self.superseded}"
        )
        return (
            f"{self.event['student']}: {self.review.criterion} "
            f"{review_verdict(self.review)} (ledger event {self.review.event}{replaced}); "
            f"final {points_text(self.final)} / {points_text(self.max)} (automated "
            f"{points_text(self.total)})"
        )


def plan_review(
    events: Sequence[Mapping[str, Any]], request: ReviewRequest, out: Path
) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """The review event to append (without ``seq`` and ``prev``) and the verified archived
    report it judges; ``UsageError`` with the fix for anything wrong."""
    run = _pick_run(events, request, out)
    digest = str(run["report"])
    document = verified_archive(out, digest)
    criterion = _criterion(document, request.criterion, digest)
    points = _points(request.points, criterion)
    _require_text("--by", request.by, BY_LIMIT)
    _require_text("--reason", request.reason, TEXT_LIMIT)
    event = {
        "event": "review",
        "student": request.student,
        "submission": run["submission"],
        "report": digest,
        "run": run["seq"],
        "criterion": criterion["id"],
        "automated": criterion["points"],
        "max": criterion["max"],
        "points": None if points is None else points_text(points),
        "by": request.by,
        "reason": request.reason,
    }
    return event, document


def append_review(out: Path, request: ReviewRequest, key: bytes | None) -> AppendedReview:
    """Append one review event to ``out``'s ledger and bring the gradebook and the
    reviewed report's results.json up to date. Every check runs before the append, so an
    error appends nothing."""
    events = read_ledger(out / LEDGER).events
    event, document = plan_review(events, request, out)
    folder = str(event["submission"])
    _require_signable(out / folder / RESULTS, str(event["report"]), key)
    book = out / GRADEBOOK
    rows = read_gradebook(book.read_bytes())[1] if book.is_file() else []
    superseded = next(
        (
            r.event
            for r in current_reviews(events, str(event["report"]))
            if r.criterion == event["criterion"]
        ),
        None,
    )
    written = append_events(out / LEDGER, [event])[0]
    events = read_ledger(out / LEDGER).events
    states = review_states(out, rows, events)
    _write_gradebook(out, [_reviewed_row(r, s) for r, s in zip(rows, states, strict=True)])
    reviews = current_reviews(events, str(event["report"]))
    rewrite_results(out / folder, str(event["report"]), document, reviews, key)
    total = cents_of(document["total"], "total")
    latest = _student_runs(events, request.student)[-1]["report"] == event["report"]
    return AppendedReview(
        written,
        review_of(written),
        total,
        _less(ReviewState(reviews).final(total), rows, str(event["report"])),
        cents_of(document["max"], "max"),
        superseded,
        latest,
    )


def _less(final: Decimal, rows: Sequence[GradebookRow], digest: str) -> Decimal:
    """``final`` less the late penalty of the gradebook's row of report ``digest``."""
    penalty = next((row.penalty for row in rows if row.digest == digest), "")
    return Decimal(less_penalty(points_text(final), penalty))


def _student_runs(events: Sequence[Mapping[str, Any]], student: str) -> list[Mapping[str, Any]]:
    return [
        e
        for e in events
        if e.get("event") == "run"
        and e.get("student") == student
        and e.get("status") in REPORTED
        and isinstance(e.get("report"), str)
    ]


def _pick_run(
    events: Sequence[Mapping[str, Any]], request: ReviewRequest, out: Path
) -> Mapping[str, Any]:
    """The run event whose report is reviewed: the student's latest graded one, or the
    latest whose report digest starts with ``request.report``."""
    runs = _student_runs(events, request.student)
    if not runs:
        if not (out / LEDGER).is_file():
            grade = commands.GRADE_INTO(submissions="SUBMISSIONS", out=str(out))
            raise UsageError(
                f"no ledger in {out}: grade first (`{grade}`), or pass --out with "
                "the folder the grading wrote"
            )
        raise UsageError(
            f"no graded report of student {request.student!r} in {out / LEDGER}: "
            "name the student as the student column of "
            f"{out / GRADEBOOK} does, or pass --out for the grades folder that "
            "holds their grades"
        )
    if request.report is None:
        return runs[-1]
    prefix = request.report.lower()
    if not _PREFIX.fullmatch(prefix):
        raise UsageError(
            f"--report {request.report!r} is not a report digest: give 8 to 64 "
            f"hex digits of one "
            f"(`{commands.HISTORY(student=request.student, out=str(out))}` lists "
            "them)"
        )
    matching = {str(run["report"]): run for run in runs if str(run["report"]).startswith(prefix)}
    if len(matching) > 1:
        raise UsageError(
            f"--report {request.report} is the start of {len(matching)} reports of "
            f"{request.student} ({', '.join(sorted(d[:16] for d in matching))}): "
            "give more of the digest"
        )
    if not matching:
        raise UsageError(
            f"{request.student} has no graded report {request.report}: give one "
            f"that `{commands.HISTORY(student=request.student, out=str(out))}` lists"
        )
    return next(iter(matching.values()))


def _criterion(document: Mapping[str, Any], criterion_id: str, digest: str) -> Mapping[str, Any]:
    criteria = [c for c in document["criteria"] if isinstance(c, dict)]
    for criterion in criteria:
        if criterion.get("id") == criterion_id:
            return criterion
    raise UsageError(
        f"{criterion_id!r} is not a criterion of report {digest[:12]}: give "
        f"--criterion one of {', '.join(str(c.get('id')) for c in criteria)}"
    )


def _points(text: str | None, criterion: Mapping[str, Any]) -> Decimal | None:
    """``--points`` as exact cents from 0 to the criterion's max; None confirms."""
    if text is None:
        return None
    most = cents_of(criterion["max"], "max")
    allowed = f"give a decimal from 0 to {points_text(most)} with at most two places"
    if not _POINTS.fullmatch(text):
        raise UsageError(f"--points {text!r} is not exact points: {allowed}, such as 12.50")
    points = Decimal(text)
    if points > most:
        raise UsageError(
            f"--points {text} is more than {criterion['id']}'s max {points_text(most)}: {allowed}"
        )
    return points


def _require_text(flag: str, text: str, limit: int) -> None:
    """A reviewer's name or reason: one line, nothing hidden, not empty."""
    if not text.strip() or "\n" in text or "\t" in text or quote(text, limit) != text:
        raise UsageError(
            f"{flag} must be one line of at most {limit} visible characters, "
            f"not empty and without control or invisible characters: write it "
            f"again ({quote(text, min(limit, QUOTE_LIMIT))!r} was given)"
        )


def _require_signable(path: Path, digest: str, key: bytes | None) -> None:
    """A signed results.json of the reviewed report is written again only with the key
    that signed it: refuse before anything is appended."""
    document = read_document(path)
    extra = document.get("extra_data") if document is not None else None
    if (
        document is None
        or not isinstance(extra, dict)
        or extra.get("digest") != digest
        or "signature" not in extra
    ):
        return
    if key is None:
        raise UsageError(
            f"{path} is signed, and no signing key was given to sign it again: "
            "pass --key-file FILE (or set GRADEKIT_SIGNING_KEY_FILE) with the key "
            "it was graded with"
        )
    wrong, _ = signature_problem("results", document, key)
    if wrong:
        raise UsageError(f"{path}: {wrong}; pass --key-file with the key it was graded with")


# -- many reviews at once: gradekit review --pending, gradekit reviews import -----------------

# A review event as ``plan_review`` makes it (no ``seq``, no ``prev``), with the verified
# archived report it judges.
Planned = tuple[dict[str, Any], Mapping[str, Any]]


def review_states(
    out: Path, rows: Sequence[GradebookRow], events: Sequence[Mapping[str, Any]]
) -> list[ReviewState]:
    """Each gradebook row's reviews, as its ``review`` cell shows them (none for a row that
    has no report); the ledger's ``events`` are indexed once."""
    index = ReviewIndex(events)
    return [_state(out, row, index.bearing_on(row)) for row in rows]


def append_reviews(
    out: Path, events: Sequence[Mapping[str, Any]], planned: Sequence[Planned], key: bytes | None
) -> tuple[AppendedReview, ...]:
    """Append every review ``planned`` against the ledger's ``events`` in one append (one
    lock, one fsync), then write the gradebook once and each reviewed report's results.json
    once. The ledger, gradebook and results.json end as ``append_review`` leaves them after
    each review in turn, and each ``Recorded`` says what it would have printed. A signed
    results.json without its key is refused before anything is appended."""
    judged = [(str(event["report"]), str(event["criterion"])) for event, _ in planned]
    if len(set(judged)) < len(judged):
        raise ValueError("two planned reviews judge one criterion of one report")
    if not planned:
        return ()
    folders = sorted({(str(event["submission"]), str(event["report"])) for event, _ in planned})
    for folder, digest in folders:
        _require_signable(out / folder / RESULTS, digest, key)
    book = out / GRADEBOOK
    rows = read_gradebook(book.read_bytes())[1] if book.is_file() else []
    before = ReviewIndex(events)
    superseded = [
        next(
            (
                r.event
                for r in current_reviews(before.of_report(report), report)
                if r.criterion == criterion
            ),
            None,
        )
        for report, criterion in judged
    ]
    written = append_events(out / LEDGER, [event for event, _ in planned])
    after = read_ledger(out / LEDGER).events
    _write_gradebook(
        out,
        [
            _reviewed_row(row, state)
            for row, state in zip(rows, review_states(out, rows, after), strict=True)
        ],
    )
    index = ReviewIndex(after)
    documents = {str(event["report"]): document for event, document in planned}
    for folder, digest in folders:
        rewrite_results(
            out / folder,
            digest,
            documents[digest],
            current_reviews(index.of_report(digest), digest),
            key,
        )
    recorded = []
    for event, earlier in zip(written, superseded, strict=True):
        document, report = documents[str(event["report"])], str(event["report"])
        total = cents_of(document["total"], "total")
        then = [e for e in index.of_report(report) if int(e["seq"]) <= int(event["seq"])]
        reviews = current_reviews(then, report)  # as it stood then
        latest = (
            _student_runs(index.runs_of(str(event["student"])), str(event["student"]))[-1]["report"]
            == report
        )
        recorded.append(
            AppendedReview(
                event,
                review_of(event),
                total,
                _less(ReviewState(reviews).final(total), rows, report),
                cents_of(document["max"], "max"),
                earlier,
                latest,
            )
        )
    return tuple(recorded)


def require_reviewer(by: str, reason: str) -> None:
    """``--by`` and ``--reason`` as ``gradekit review`` takes them; ``UsageError`` with the
    fix otherwise (checked once for many reviews, before any is planned)."""
    _require_text("--by", by, BY_LIMIT)
    _require_text("--reason", reason, TEXT_LIMIT)
