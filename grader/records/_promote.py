"""Which runs may become regression items: the promotion's policy
(``grader.regression._sets`` is the format, ``grader.regression._publish`` writes it).

A run enters a set only when

- a person reviewed it: a review event in the ledger names its report digest (a review
  of an earlier report of the student does not count for a later one);
- it failed: a check of the case did not pass in its archived report (a degraded check
  was never evaluated, and a criterion a reviewer gave full marks is no failure), or the
  incident shows a forbidden action that ran;
- with the bytes that run graded: each payload's SHA-256 equals the digest the run event
  recorded, so the item holds what was reviewed, not what the folder holds today.

- and it can apply to every student: an item keeps the run's task, the world of tool reads
  it started from and the expectation, never the student's model answers (each student
  records the item's task and is graded on that); the agent it asks is each submission's
  own, or one the reference lab (``--reference``, the hand-out's source) holds, and its
  task can be asked again.

What a promotion reads comes from a student: it is read through ``read_submission_file``
(no links, a regular file, at most ``PAYLOAD_CAP``), decoded before it is stored, and never
imported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

from gradekit import GradekitError, Incident, UsageError, decode_incident
from gradekit.internal import commands, decode_fixture
from grader._expect import Expectation, Told, laid_over
from grader._specs import SPEC
from grader.outputs import REPORTED
from grader.records._folder import LEDGER
from grader.records._ledger import read_ledger, verified_archive, verify_ledger
from grader.regression import PAYLOAD_CAP, Item, RegressionSet, valid_name, world_json
from grader.rubric import Case, load_rubric
from grader.submission import (
    MissingSubmissionFile,
    SubmissionFileError,
    load_manifest,
    read_submission_file,
)

__all__ = ["Promotion", "Request", "Reviewed", "promote_event", "promotion", "reviewed_run"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Request:
    """What an instructor asks to promote (``gradekit regression promote``'s flags): a case
    (``case``) or an incident file (``incident``, relative to ``root``), with what a run of
    it must come to."""

    student: str
    root: Path
    out: Path  # the grades folder whose ledger holds the run
    rubric: Path
    reason: str
    case: str | None = None
    incident: str | None = None
    agent: str | None = None  # None: each submission's own agent (its manifest's)
    reference: Path = Path(".")  # the reference lab the hand-out is built from
    told: Told = field(default_factory=Told)  # the expectation the flags give
    item: str | None = None
    report: str | None = None  # the run's report digest; None: the student's latest run


@dataclass(frozen=True, slots=True)
class Reviewed:
    """A graded run a person reviewed: its ledger event, the reviews naming its report (in
    ledger order, at least one) and the archived report, verified."""

    run: Mapping[str, Any]
    reviews: tuple[Mapping[str, Any], ...]
    report: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Promotion:
    """The item a request makes (``added_in`` is the set's to give), and the run and the
    review it rests on."""

    item: Item
    run: Mapping[str, Any]
    review: Mapping[str, Any]
    numbered: bool = False  # the id is the default one: the set may number it (-2, -3, ...)


def promotion(request: Request) -> Promotion:
    """The item ``request`` makes of a reviewed failing run; a ``UsageError`` saying what to
    do when the run is not reviewed, did not fail, or its files changed since."""
    reviewed = reviewed_run(request.out, request.student, request.report)
    evidence = _case(request, reviewed) if request.case else _incident(request, reviewed)
    run, review = reviewed.run, evidence.review
    source = {"student": str(run["student"]), "submission": str(run.get("submission", "")),
              "run": int(run.get("seq", -1)), "report": str(run["report"]),
              "review": int(review.get("seq", -1)), "path": evidence.path}
    item = Item(id=_item_id(request.item, evidence.stem), kind=evidence.kind,
                task=evidence.task, agent=evidence.agent, expect=evidence.expect, added_in=0,
                source=source, reviewed_by=_reviewer(review), reason=request.reason,
                world=evidence.world)
    return Promotion(item, run, review, numbered=request.item is None)


def promote_event(promoted: Promotion, published: RegressionSet, by: str) -> dict[str, Any]:
    """The ledger's record of a published version: which item, from which run and review."""
    return {"event": "promote", "set": published.name, "version": published.version,
            "sha256": published.sha256, "item": published.items[-1].id,
            "student": promoted.run["student"], "run": promoted.run.get("seq"),
            "report": promoted.run["report"], "review": promoted.review.get("seq"), "by": by}


# -- the run: graded, reviewed, its report kept ------------------------------------------------


def reviewed_run(out: Path, student: str, digest: str | None) -> Reviewed:
    """The student's latest graded run in ``out``'s ledger (or the one of report ``digest``)
    once a review names its report; a ``UsageError`` saying what to do otherwise."""
    ledger = out / LEDGER
    holds, message = verify_ledger(ledger)
    if not holds:
        raise UsageError(f"{message}; a promotion rests on the ledger's run and review events, "
                         f"so its chain must hold (`{commands.LEDGER_VERIFY(grades=str(out))}`)")
    events = read_ledger(ledger).events
    run = _run(events, student, digest, ledger)
    reviews = tuple(e for e in events if e.get("event") == "review"
                    and e.get("report") == run["report"] and e.get("student") == student)
    if not reviews:
        raise UsageError(_unreviewed(run, events, out))
    return Reviewed(run, reviews, verified_archive(out, str(run["report"])))


def _run(events: Sequence[Mapping[str, Any]], student: str, digest: str | None,
         ledger: Path) -> Mapping[str, Any]:
    runs = [e for e in events if e.get("event") == "run" and e.get("student") == student
            and e.get("status") in REPORTED and isinstance(e.get("report"), str)]
    if not runs:
        grade = commands.GRADE_INTO(submissions="SUBMISSION", out=str(ledger.parent))
        raise UsageError(f"{ledger} holds no graded run of {student!r}: grade the submission "
                         f"(`{grade}`), review it, then promote it")
    if digest is None:
        return runs[-1]
    chosen = [e for e in runs if e["report"] == digest]
    if not chosen:
        known = ", ".join(f"run {e.get('seq')} report {e['report']}" for e in runs[-5:])
        raise UsageError(f"no graded run of {student} has report {digest}; theirs: {known} "
                         "(pass one of these with --report)")
    return chosen[-1]


def _unreviewed(run: Mapping[str, Any], events: Sequence[Mapping[str, Any]], out: Path
                ) -> str:
    student = run["student"]
    older = [e for e in events if e.get("event") == "review" and e.get("student") == student]
    aside = (f" (the review at ledger event {older[-1].get('seq')} is of report "
             f"{str(older[-1].get('report'))[:12]}..., another grading: a review counts only "
             "for the report it names)") if older else ""
    review = commands.REVIEW(student=student, criterion="ID", by="NAME", reason="TEXT",
                             out=str(out))
    return (f"run {run.get('seq')} of {student} (report {run['report'][:12]}...) has not been "
            f"reviewed{aside}: a regression set takes only failures a person has looked at. "
            f"Review it first: `{review}` (with --points N to change the points), then "
            "promote it")


# -- the evidence: what the item replays, read from the submission -----------------------------


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What an item is made of, checked against the run: its input and expectation."""

    kind: Literal["incident", "case"]
    path: str  # the file of the submission it rests on: the item's source
    stem: str  # the case id or the incident's file stem: the default item id's tail
    task: str
    agent: str | None
    expect: Expectation
    review: Mapping[str, Any]  # the review the item cites
    world: bytes | None = None  # the tool reads the run started from (WORLD_FORMAT)


def _case(request: Request, reviewed: Reviewed) -> _Evidence:
    """A case the run failed: the rubric's task and expectation, and the tool reads of the
    case's graded fixture as the item's world. Its cassette stays the student's: every
    student records the item's task themselves."""
    case = _rubric_case(request.rubric, str(request.case))
    review = _standing_review(reviewed, case.id)
    manifest = load_manifest(request.root)
    fixture_path = f"{manifest.fixtures}/{case.id}.json"  # as the grader names its inputs
    fixture = _graded_bytes(request.root, fixture_path, reviewed.run)
    world = None
    if fixture is not None:
        decoded = _decoded(lambda: decode_fixture(fixture, source=fixture_path, case=case.id),
                           fixture_path, "a tool fixture")
        world = world_json((call.tool, call.args, call.response)
                           for call in decoded.calls.values())
    # The source names the run's recording of the case: what the report graded, which the
    # item does not keep.
    return _Evidence("case", f"{manifest.cassettes}/{case.id}.json", case.id, case.task,
                     _agent(request), _expectation(case.expect, request), review, world=world)


def _rubric_case(rubric: Path, case_id: str) -> Case:
    cases = load_rubric(rubric).cases
    for case in cases:
        if case.id == case_id:
            return case
    raise UsageError(f"the rubric {rubric} has no case {case_id!r}; its cases: "
                     f"{', '.join(case.id for case in cases)}")


def _standing_review(reviewed: Reviewed, case_id: str) -> Mapping[str, Any]:
    """The review to cite for case ``case_id``: the latest of a criterion where its check
    failed, unless a reviewer gave that criterion full marks (then it is no failure)."""
    failed = _failed_criteria(reviewed.report, case_id)
    run = f"run {reviewed.run.get('seq')} of {reviewed.run['student']}"
    if not failed:
        raise UsageError(f"{run} shows no failure of case {case_id} to guard against: no "
                         "check of it failed in its report (a degraded check was never "
                         "evaluated); promote a case the run failed")
    latest = {review.get("criterion"): review for review in reviewed.reviews}
    standing = [criterion for criterion in failed if not _full_marks(latest.get(criterion))]
    if not standing:
        raise UsageError(f"{run} shows no failure of case {case_id} to guard against: a "
                         f"reviewer gave full marks to every criterion where it failed "
                         f"({', '.join(failed)}), so a person judged it no failure")
    cited = [latest[criterion] for criterion in standing if criterion in latest]
    return max(cited, key=lambda r: int(r.get("seq", -1))) if cited else reviewed.reviews[-1]


def _failed_criteria(report: Mapping[str, Any], case_id: str) -> list[str]:
    return [str(criterion.get("id")) for criterion in _dicts(report.get("criteria"))
            if any(check.get("id") == case_id and check.get("passed") is False
                   and check.get("verdict") != "degraded"
                   for check in _dicts(criterion.get("checks")))]


def _dicts(value: object) -> list[Mapping[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) \
        else []


def _full_marks(review: Mapping[str, Any] | None) -> bool:
    if review is None or review.get("points") is None:
        return False
    try:
        return Decimal(str(review["points"])) >= Decimal(str(review.get("max")))
    except InvalidOperation:
        return False


def _incident(request: Request, reviewed: Reviewed) -> _Evidence:
    """An incident of the submission in which a forbidden action ran: its task, and every
    tool call it recorded that returned as the item's world: its reads (the state the run
    started from) and its actions' results (so an action the item does not forbid is
    answered as it was, and a forbidden one is seen, never run)."""
    if not request.agent:
        raise UsageError("--agent package.module:function is required with --incident: the "
                         "agent every student's run of the item asks (e.g. lab.refunds:run)")
    agent = _agent(request)
    path = PurePosixPath(str(request.incident)).as_posix()
    data = _required(_graded_bytes(request.root, path, reviewed.run), path, reviewed)
    incident = _decoded(lambda: decode_incident(data, source=path), path, "an incident")
    if incident.torn:
        raise UsageError(f"{path}: {incident.torn}: an item replays a whole record; record "
                         "the incident again, then grade, review and promote it")
    if not incident.task.strip():
        raise UsageError(f"{path} records no task, so no other student's agent could be asked "
                         "it: the item cannot apply to them; record the incident with --task "
                         "or --case")
    expect = _expectation(None, request)
    _guards_a_failure(expect, incident, path, reviewed)
    world = world_json((e.boundary, e.input.get("args", {}), e.output)
                       for e in incident.envelopes if e.kind != "model" and e.error is None)
    return _Evidence("incident", path, PurePosixPath(path).stem, incident.task, agent, expect,
                     reviewed.reviews[-1], world=world)


def _guards_a_failure(expect: Expectation, incident: Incident, path: str,
                      reviewed: Reviewed) -> None:
    ran = list(dict.fromkeys(e.boundary for e in incident.envelopes
                             if e.kind == "action" and e.ran))
    if not expect.forbidden_actions:
        raise UsageError(f"give --forbid TOOL: an incident item guards against an action "
                         f"that ran (in {path}: {', '.join(ran) or 'none'})")
    if not set(expect.forbidden_actions) & set(ran):
        raise UsageError(f"run {reviewed.run.get('seq')} of {reviewed.run['student']} shows no "
                         f"failure to guard against: none of {', '.join(expect.forbidden_actions)}"
                         f" ran in {path} (actions that ran: {', '.join(ran) or 'none'}); "
                         "forbid an action the incident shows running")


def _graded_bytes(root: Path, path: str, run: Mapping[str, Any]) -> bytes | None:
    """The bytes of ``path`` in the submission (None when absent), exactly those the run
    graded: a file changed since, or one the run never read, is not what was reviewed."""
    try:
        data: bytes | None = read_submission_file(root, path, cap=PAYLOAD_CAP)
    except MissingSubmissionFile:
        data = None
    except SubmissionFileError as exc:
        raise UsageError(f"cannot promote {path}: {exc}") from None
    inputs = run.get("inputs")
    graded = {PurePosixPath(key).as_posix(): digest for key, digest in inputs.items()} \
        if isinstance(inputs, dict) else {}
    then = graded.get(PurePosixPath(path).as_posix())  # "./x" and "x" are one file
    now = hashlib.sha256(data).hexdigest() if data is not None else None
    if now != then:
        raise UsageError(f"{path} {_changed(then, now)} since run {run.get('seq')} graded it: "
                         "an item holds what was reviewed; grade the submission again, review "
                         "that run, then promote it")
    return data


def _required(data: bytes | None, path: str, reviewed: Reviewed) -> bytes:
    if data is None:
        raise UsageError(f"{path} is missing, and run {reviewed.run.get('seq')} graded none: "
                         "record it, then grade, review and promote it")
    return data


def _changed(then: object, now: str | None) -> str:
    if then is None:
        return f"is a file (sha256 {(now or '')[:12]}...) the run did not grade"
    if now is None:
        return "is gone"
    return f"changed (sha256 {str(then)[:12]}... then, {now[:12]}... now)"


def _decoded(decode: Callable[[], T], path: str, what: str) -> T:
    """``decode()``: a student's file that is not ``what`` ("a cassette") is a clear refusal."""
    try:
        return decode()
    except (GradekitError, ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise UsageError(f"{path} is not {what} gradekit can replay ({detail}); it cannot "
                         "be promoted: fix or record it again, grade and review it") from None


def _agent(request: Request) -> str | None:
    """The agent the item asks: None (each submission's own) unless ``--agent`` names one,
    which must be a module the reference lab holds: a module only this student wrote is not
    in a classmate's submission, so the item could not apply to them."""
    spec = request.agent
    if spec is None:
        return None
    if not SPEC.fullmatch(spec):
        raise UsageError(f'--agent "{spec}" must look like "package.module:function" '
                         "(e.g. lab.refunds:run)")
    module = spec.partition(":")[0].replace(".", "/")
    found = [name for name in (f"{module}.py", f"{module}/__init__.py")
             if (request.reference / name).is_file()]  # never imported here
    if not found:
        raise UsageError(f"--agent {spec} cannot apply to another student: the reference lab "
                         f"({request.reference}) has no {module}.py or {module}/__init__.py, "
                         "so a classmate's submission need not have it. Promote with the "
                         "agent the hand-out gives every student, or without --agent (each "
                         "submission's own), or pass --reference DIR, the lab the hand-out "
                         "is built from")
    return spec


def _expectation(base: Expectation | None, request: Request) -> Expectation:
    """The rubric case's expectation (if any), the flags' over it (``laid_over``): it must
    have an outcome, and a business goal (without one the item could never pass)."""
    expect = laid_over(base, request.told,
                       "the item's expectation (the rubric case's and the flags)")
    if not expect.outcome:
        raise UsageError("give --outcome answer (run() must return a str) or --outcome raise "
                         "(it must raise): without an expected outcome the item could never "
                         "be judged")
    if not expect.goal:
        raise UsageError('give --goal "what the run is for" (e.g. "no refund outside the '
                         'policy\'s windows"): without a business goal the item could never '
                         "pass")
    return expect


def _item_id(given: str | None, stem: str) -> str:
    """The item's id: ``--item``, else the case id or the incident file's stem. Never the
    student's name: an item's id is a check of every classmate's report it grades."""
    if given is not None:
        return valid_name(given, "--item")
    try:
        return valid_name(stem, "the default item id")
    except UsageError as exc:
        raise UsageError(f"{exc}; give the item an id with --item") from None


def _reviewer(review: Mapping[str, Any]) -> str:
    by = review.get("by")
    if not isinstance(by, str) or not by.strip():
        raise UsageError(f"the review at ledger event {review.get('seq')} names no reviewer "
                         "(by): review the run again with --by NAME")
    return by
