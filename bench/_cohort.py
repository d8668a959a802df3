"""A synthetic cohort: a real-format grades folder of ``n`` submissions, in seconds.

The growth bench (``bench._growth``) and the dashboard's tests need a grades folder of
200, 2 000 or 10 000 submissions; grading that many real ones takes hours. Here every
file is still written by the grader's own code, as a grading and ``gradekit review``
write it: the reports (``grader.ledger.write_submission``), the ledger's batch, run and
review events (``append_grading``, ``append_events``, review events planned by
``plan_review``), the results.json of each reviewed report (``rewrite_results``) and the
gradebook (``gradebook_csv``, with the review and final cells of ``review_state``). Only
what a sandboxed run would have observed is made up: each check's pass or fail, the
agent's calls and trace, its FAILURES.md (scored by the real ``score_written_summary``).

What the folder holds, for ``n`` submissions ``student-00000``, ...:

- a first batch of all of them: varied totals (each student has a skill; each check passes
  with it), 2 % ungradable rows (no pyproject.toml);
- reviews of 8 % of the first batch's reports: written summaries overridden (two in
  three) or confirmed; every other report's written summary and stretch goal stay pending;
- a second batch of 10 % of the students, their FAILURES.md changed (another digest: their
  histories hold two gradings; for half the reviewed ones, the review needs doing
  again), and a confirmation of some of their second reports' written summaries;
- ``gradebook.csv`` with every submission's latest row, as merging each batch's gradebook
  would give, review and final cells brought up to date as ``gradekit grade`` does.

The bytes depend on ``n`` (and the rubric and gradekit version) only: no clock, no
random state but seeds derived from each student's name.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from grader._model import (
    CaseOutcome,
    CheckResult,
    CriterionResult,
    Report,
    RunResult,
    Served,
    TraceRecord,
)
from grader.ledger import (
    GRADEBOOK,
    LEDGER,
    REPORT,
    ReviewRequest,
    append_events,
    append_grading,
    apply_reviews,
    current_reviews,
    grader_version,
    read_ledger,
    write_submission,
)
from grader.ledger._folder import archive_path, rewrite_results
from grader.ledger._reviews import plan_review
from grader.outputs import (
    REPORTED,
    GradebookRow,
    cents_of,
    error_row,
    gradebook_csv,
    points_text,
)
from grader.rubric import Criterion, Rubric, load_rubric, per_case_points
from grader.scoring import Evidence, score_written_summary

__all__ = ["ISOLATION", "RUBRIC", "student_name", "synthetic_grades"]

RUBRIC = Path(__file__).resolve().parents[1] / "rubric" / "bootcamp.toml"  # the kit's rubric
ISOLATION = "process wall (synthetic cohort: nothing ran)"
_LABEL = "provider-a"
# Who is what, by number: a cohort of 20 already has one of each; 2 % are ungradable, 8 %
# reviewed, 10 % graded twice (half the reviewed among them: their review is stale).
_UNGRADABLE = (50, 7)  # number % 50 == 7: no pyproject.toml
_REVIEWED = (12, 3)  # number % 12 == 3: the first report's written summary is reviewed
_REGRADED = ((16, 1), (24, 15))  # number % 16 == 1 or number % 24 == 15: graded twice
_CONFIRMED_AGAIN = (32, 1)  # number % 32 == 1: the second report's summary is confirmed
_REVIEWERS = ("kim", "ana", "lee")
_UNGRADABLE_REASON = (
    "no pyproject.toml, so this folder is not a submission: a submission is "
    "a copy of the lab with its pyproject.toml at the top; add it, or remove "
    "the folder from the batch"
)


def student_name(number: int) -> str:
    """The folder and student name of submission ``number``: ``student-00042``."""
    return f"student-{number:05d}"


def synthetic_grades(out: Path, n: int, *, reviews: bool = True) -> None:
    """Write a grades folder of ``n`` synthetic submissions into ``out`` (new or empty):
    two batches, reviews (unless ``reviews`` is False) and the gradebook; see the module's
    docstring. ``report verify`` and ``ledger verify`` pass on every file it writes."""
    if n < 1:
        raise ValueError(f"a cohort needs at least one submission, not {n}")
    if (out / LEDGER).exists():
        raise ValueError(f"{out} already holds a ledger: write a cohort into a new folder")
    rubric = load_rubric(RUBRIC)
    version = grader_version()
    ledger = out / LEDGER
    students = [student_name(number) for number in range(n)]
    first = [
        _grade(out, rubric, student, attempt=1)
        if not _is(number, _UNGRADABLE)
        else error_row(student, student, _UNGRADABLE_REASON, status="ungradable")
        for number, student in enumerate(students)
    ]
    append_grading(ledger, rubric, first, out, version)
    latest = {row.student: row for row in first}
    if reviews:
        _review(
            out,
            rubric,
            [
                (row, number // _REVIEWED[0] % 3 != 1)
                for number, row in enumerate(first)
                if row.status in REPORTED and _is(number, _REVIEWED)
            ],
        )
    again = [
        number
        for number, row in enumerate(first)
        if row.status in REPORTED and any(_is(number, pick) for pick in _REGRADED)
    ]
    second = {number: _grade(out, rubric, students[number], attempt=2) for number in again}
    if second:
        append_grading(ledger, rubric, list(second.values()), out, version)
        latest |= {row.student: row for row in second.values()}
    if reviews:  # a confirmation of some second reports
        _review(
            out,
            rubric,
            [(row, False) for number, row in second.items() if _is(number, _CONFIRMED_AGAIN)],
        )
    _write_gradebook(out, rubric, [latest[student] for student in students])


# -- one synthetic grading -----------------------------------------------------------------------


def _rng(*parts: object) -> random.Random:
    """A generator seeded from text alone: the same draws under any PYTHONHASHSEED."""
    return random.Random("/".join(map(str, parts)))


def _is(number: int, pick: tuple[int, int]) -> bool:
    """Whether student ``number`` is one of those ``pick`` (every, offset) picks."""
    every, offset = pick
    return number % every == offset


def _grade(out: Path, rubric: Rubric, student: str, *, attempt: int) -> GradebookRow:
    """One submission graded: its outputs written and archived, its gradebook row."""
    skill = _rng("skill", student).betavariate(4, 2)  # most do well, a long tail does not
    draw = _rng("checks", student, attempt)
    failures = _failures(_rng("failures", student, attempt), skill)
    criteria = tuple(
        _criterion(rubric, criterion, skill, draw, failures) for criterion in rubric.criteria
    )
    inputs = {
        path: hashlib.sha256(f"{student}/{path}/{attempt}".encode()).hexdigest()
        for path in ("FAILURES.md", "lab/agent.py", "pyproject.toml")
    }
    inputs["FAILURES.md"] = hashlib.sha256(failures.encode()).hexdigest()
    report = Report(
        submission=student,
        rubric_id=rubric.id,
        rubric_version=rubric.version,
        rubric_sha256=rubric.sha256,
        inputs=dict(sorted(inputs.items())),
        criteria=criteria,
    )
    folder = out / student
    digest = write_submission(
        folder, report, _evidence(rubric, student, failures, draw), isolation=ISOLATION
    )
    # Archived here without append_grading's fsync per file: the same bytes, in seconds.
    kept = archive_path(out, digest)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes((folder / REPORT).read_bytes())
    return GradebookRow(
        submission=student,
        student=student,
        status="graded",
        total=points_text(report.total),
        max=points_text(report.max),
        criteria={c.id: points_text(c.points) for c in criteria},
        digest=digest,
        reason="",
    )


def _criterion(
    rubric: Rubric, criterion: Criterion, skill: float, draw: random.Random, failures: str
) -> CriterionResult:
    if criterion.check == "written_summary":
        return _written_summary(failures, criterion)
    checks = []
    for check_id, most in (per_case_points(rubric, criterion) | dict(criterion.points)).items():
        passed = draw.random() < skill
        detail = "as expected" if passed else f"{check_id}: not as expected (synthetic)"
        checks.append(
            CheckResult(check_id, passed, most if passed else Decimal("0.00"), most, detail)
        )
    lost = [check.id for check in checks if not check.passed]
    return CriterionResult(
        id=criterion.id,
        title=criterion.title,
        points=sum((check.points for check in checks), Decimal(0)),
        max=Decimal(criterion.weight).quantize(Decimal("0.01")),
        checks=tuple(checks),
        review=criterion.check == "stretch_goal",
        advice=(f"Fix {', '.join(lost)}: {criterion.typical_loss}.",) if lost else (),
    )


def _written_summary(failures: str, criterion: Criterion) -> CriterionResult:
    """The real scoring of a FAILURES.md; a cohort has a few dozen distinct ones."""
    return _scored_summary(
        failures,
        criterion.id,
        criterion.title,
        criterion.weight,
        tuple(sorted(criterion.points.items())),
    )


@functools.lru_cache(maxsize=256)
def _scored_summary(
    failures: str,
    criterion_id: str,
    title: str,
    weight: int,
    points: tuple[tuple[str, Decimal], ...],
) -> CriterionResult:
    return score_written_summary(
        failures,
        points=dict(points),
        weight=Decimal(weight),
        criterion_id=criterion_id,
        title=title,
    )


_ENTRY = """
## {title}
- Symptom: the replay raised CassetteMiss on the {case} case after a prompt edit.
- Cause: the prompt kept a trailing space, so its key was never in the cassette.
- {fix}: the agent strips every prompt before it sends it; the case was re-recorded.
"""
_BOUNDARIES = """
## Boundaries
- What this lab cannot measure: answer quality beyond the recorded expectations.
"""


def _failures(draw: random.Random, skill: float) -> str:
    """A FAILURES.md: more complete entries, boundaries and no template text with skill."""
    entries = sum(draw.random() < skill for _ in range(3))
    text = "# Failures\n" + "".join(
        _ENTRY.format(
            title=f"Failure {number}",
            case=("refund-policy", "sql-explain")[number % 2],
            fix="Fix" if number % 2 else "Status",
        )
        for number in range(1, entries + 1)
    )
    if draw.random() < skill:
        text += _BOUNDARIES
    if draw.random() > skill:
        text += "\nTODO: write up the flaky-grade case\n"
    return text


def _evidence(rubric: Rubric, student: str, failures: str, draw: random.Random) -> Evidence:
    """What the primary run observed: a few served calls per case, each traced."""
    outcomes = {}
    for case in rubric.cases:
        keys = [
            hashlib.sha256(f"{student}/{case.id}/{call}".encode()).hexdigest()
            for call in range(1 + draw.randrange(3))
        ]
        outcomes[case.id] = CaseOutcome(
            case=case.id,
            status="returned",
            answer=f"the answer to {case.id}",
            returned_type="str",
            calls=tuple(Served(key, True, trace_lines=number) for number, key in enumerate(keys)),
            trace=tuple(TraceRecord(key, _LABEL, 12, True) for key in keys),
        )
    primary = RunResult(outcomes, stdout=f"{student}: {len(outcomes)} cases answered\n")
    return Evidence(
        cases=rubric.cases,
        label=_LABEL,
        primary=primary,
        others=(),
        loud=(),
        probe=None,
        failures=failures,
        stretch=(),
        second_set=None,
    )


# -- reviews -------------------------------------------------------------------------------------


def _review(out: Path, rubric: Rubric, rows: Sequence[tuple[GradebookRow, bool]]) -> None:
    """Review the written summary of each row's report, an override (True) or a
    confirmation, as ``gradekit review`` plans it; append them at once and write each
    reviewed results.json again with its report's current reviews."""
    summary = next((c for c in rubric.criteria if c.check == "written_summary"), None)
    if not rows or summary is None:
        return
    events = _runs_by_student(out)
    planned: list[tuple[dict[str, Any], Mapping[str, Any]]] = []
    for row, override in rows:
        draw = _rng("reviewer", row.student, row.digest)
        automated = cents_of(row.criteria[summary.id], summary.id)
        delta = Decimal(draw.choice((1, 2, 3, 4)))
        changed = (
            automated - delta
            if automated >= delta
            else min(automated + delta, Decimal(summary.weight))
        )
        points = points_text(changed) if override and changed != automated else None
        request = ReviewRequest(
            student=row.student,
            criterion=summary.id,
            points=points,
            by=draw.choice(_REVIEWERS),
            reason="read the write-up"
            if points is None
            else "the entries say more than their structure shows",
        )
        planned.append(plan_review(events.get(row.student, []), request, out))
    written = append_events(out / LEDGER, [event for event, _ in planned])
    for event, (_, document) in zip(written, planned, strict=True):
        student, digest = str(event["student"]), str(event["report"])
        events.setdefault(student, []).append(event)
        rewrite_results(
            out / str(event["submission"]),
            digest,
            document,
            current_reviews(events[student], digest),
            None,
        )


def _runs_by_student(out: Path) -> dict[str, list[Mapping[str, Any]]]:
    """The ledger's run and review events of each student, in ledger order."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for event in read_ledger(out / LEDGER).events:
        if event.get("event") in ("run", "review"):
            found.setdefault(str(event.get("student")), []).append(event)
    return found


# -- the gradebook -------------------------------------------------------------------------------


def _write_gradebook(out: Path, rubric: Rubric, rows: Sequence[GradebookRow]) -> None:
    """Every row with its review and final cells, filled by ``apply_reviews`` itself."""
    (out / GRADEBOOK).write_bytes(gradebook_csv(rows, [c.id for c in rubric.criteria]))
    apply_reviews(out, rows)
