"""What of a failing run may become a case (``gradekit case from-run``): the policy. The
case store is ``grader.assets._assets``; how a case reaches a set, its path.

A run is saved as a case only when

- it failed: a check of the case did not pass in its archived report (a degraded check
  was never evaluated, and a criterion a reviewer gave full marks is no failure), or the
  incident shows a forbidden action that ran;
- with the bytes that run graded: what the case takes (the case's fixture, as its world;
  the incident) hashes to the digest the run event recorded, so the case holds what was
  graded, not what the folder holds today;
- and it can apply to every student: a case keeps the run's task, the world of tool calls
  it started from and the expectation, never the student's model answers (each student
  records the task and is graded on that); the agent it asks is each submission's own, or
  one the reference lab (``--reference``, the hand-out's source) holds, and its task can be
  asked again.

What is read comes from a student: through ``read_submission_file`` (no links, a regular
file, at most ``PAYLOAD_CAP``), decoded before it is stored, and never imported.
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
from grader.ledger import LEDGER, read_ledger, verified_archive, verify_ledger
from grader.outputs import REPORTED
from grader.regression import PAYLOAD_CAP, valid_name, world_json
from grader.rubric import Case, load_rubric
from grader.submission import (
    MissingSubmissionFile,
    SubmissionFileError,
    load_manifest,
    read_submission_file,
)

__all__ = [
    "FromRun",
    "GradedRun",
    "PromotionRequest",
    "applicable_agent",
    "default_item_id",
    "from_run",
    "graded_run",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PromotionRequest:
    """What an instructor asks to save of a failing run (``gradekit case from-run``'s
    flags): a rubric case it failed (``case``) or an incident file of the submission
    (``incident``, relative to ``root``), with what a run of it must come to."""

    student: str
    root: Path
    out: Path  # the grades folder whose ledger holds the run
    rubric: Path
    case: str | None = None
    incident: str | None = None
    agent: str | None = None  # None: each submission's own agent (its manifest's)
    reference: Path = Path(".")  # the reference lab the hand-out is built from
    told: Told = field(default_factory=Told)  # the expectation the flags give
    report: str | None = None  # the run's report digest; None: the student's latest run


@dataclass(frozen=True, slots=True)
class GradedRun:
    """A graded run: its ledger event, the reviews naming its report (in ledger order, maybe
    none) and the archived report, verified."""

    run: Mapping[str, Any]
    reviews: tuple[Mapping[str, Any], ...]
    report: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class FromRun:
    """What a case saved from a failing run holds: the run (its ledger event), the file it
    rests on, the default item id's tail (``stem``), and its input and expectation."""

    run: Mapping[str, Any]
    kind: Literal["incident", "case"]
    path: str
    stem: str
    task: str
    agent: str | None
    expect: Expectation
    world: bytes | None

    @property
    def source_run(self) -> dict[str, Any]:
        """The link to the run it came from, as a case and an item hold it."""
        return {
            "student": str(self.run["student"]),
            "submission": str(self.run.get("submission", "")),
            "seq": int(self.run.get("seq", -1)),
            "report": str(self.run["report"]),
            "path": self.path,
        }


def from_run(request: PromotionRequest) -> FromRun:
    """What ``request`` saves of a failing run; a ``UsageError`` saying what to do when the
    run did not fail, its files changed since, or it could not apply to every student."""
    graded = graded_run(request.out, request.student, request.report)
    evidence = _case(request, graded) if request.case else _incident(request, graded)
    return FromRun(
        graded.run,
        evidence.kind,
        evidence.path,
        evidence.stem,
        evidence.task,
        evidence.agent,
        evidence.expect,
        evidence.world,
    )


# -- the run: graded, its report kept ----------------------------------------------------------


def graded_run(out: Path, student: str, digest: str | None) -> GradedRun:
    """The student's latest graded run in ``out``'s ledger (or the one of report ``digest``),
    its reviews and its archived report; a ``UsageError`` saying what to do otherwise."""
    ledger = out / LEDGER
    holds, message = verify_ledger(ledger)
    if not holds:
        raise UsageError(
            f"{message}; a case from a run rests on the ledger's run and review "
            "events, so its chain must hold "
            f"(`{commands.LEDGER_VERIFY(grades=str(out))}`)"
        )
    events = read_ledger(ledger).events
    run = _run(events, student, digest, ledger)
    reviews = tuple(
        e
        for e in events
        if e.get("event") == "review"
        and e.get("report") == run["report"]
        and e.get("student") == student
    )
    return GradedRun(run, reviews, verified_archive(out, str(run["report"])))


def _run(
    events: Sequence[Mapping[str, Any]], student: str, digest: str | None, ledger: Path
) -> Mapping[str, Any]:
    runs = [
        e
        for e in events
        if e.get("event") == "run"
        and e.get("student") == student
        and e.get("status") in REPORTED
        and isinstance(e.get("report"), str)
    ]
    if not runs:
        grade = commands.GRADE_INTO(submissions="SUBMISSION", out=str(ledger.parent))
        raise UsageError(
            f"{ledger} holds no graded run of {student!r}: grade the submission "
            f"(`{grade}`), then save the case"
        )
    if digest is None:
        return runs[-1]
    chosen = [e for e in runs if e["report"] == digest]
    if not chosen:
        known = ", ".join(f"run {e.get('seq')} report {e['report']}" for e in runs[-5:])
        raise UsageError(
            f"no graded run of {student} has report {digest}; theirs: {known} "
            "(pass one of these with --report)"
        )
    return chosen[-1]


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
    world: bytes | None = None  # the tool calls the run started from (WORLD_FORMAT)


def _case(request: PromotionRequest, reviewed: GradedRun) -> _Evidence:
    """A case the run failed: the rubric's task and expectation, and the tool reads of the
    case's graded fixture as the item's world. Its cassette stays the student's: every
    student records the item's task themselves."""
    case = _rubric_case(request.rubric, str(request.case))
    _failed(reviewed, case.id)
    manifest = load_manifest(request.root)
    fixture_path = f"{manifest.fixtures}/{case.id}.json"  # as the grader names its inputs
    fixture = _graded_bytes(request.root, fixture_path, reviewed.run)
    world = None
    if fixture is not None:
        decoded = _decoded(
            lambda: decode_fixture(fixture, source=fixture_path, case=case.id),
            fixture_path,
            "a tool fixture",
        )
        world = world_json((call.tool, call.args, call.response) for call in decoded.calls.values())
    # The source names the run's recording of the case: what the report graded, which the
    # item does not keep.
    return _Evidence(
        "case",
        f"{manifest.cassettes}/{case.id}.json",
        case.id,
        case.task,
        _agent(request),
        _expectation(case.expect, request),
        world=world,
    )


def _rubric_case(rubric: Path, case_id: str) -> Case:
    cases = load_rubric(rubric).cases
    for case in cases:
        if case.id == case_id:
            return case
    raise UsageError(
        f"the rubric {rubric} has no case {case_id!r}; its cases: "
        f"{', '.join(case.id for case in cases)}"
    )


def _failed(graded: GradedRun, case_id: str) -> None:
    """The run failed case ``case_id``: a check of it did not pass in its report, and no
    reviewer gave every criterion where it failed full marks (then it is no failure)."""
    failed = _failed_criteria(graded.report, case_id)
    run = f"run {graded.run.get('seq')} of {graded.run['student']}"
    if not failed:
        raise UsageError(
            f"{run} shows no failure of case {case_id} to guard against: no "
            "check of it failed in its report (a degraded check was never "
            "evaluated); save a case the run failed"
        )
    latest = {review.get("criterion"): review for review in graded.reviews}
    if all(_full_marks(latest.get(criterion)) for criterion in failed):
        raise UsageError(
            f"{run} shows no failure of case {case_id} to guard against: a "
            f"reviewer gave full marks to every criterion where it failed "
            f"({', '.join(failed)}), so a person judged it no failure"
        )


def _failed_criteria(report: Mapping[str, Any], case_id: str) -> list[str]:
    return [
        str(criterion.get("id"))
        for criterion in _dicts(report.get("criteria"))
        if any(
            check.get("id") == case_id
            and check.get("passed") is False
            and check.get("verdict") != "degraded"
            for check in _dicts(criterion.get("checks"))
        )
    ]


def _dicts(value: object) -> list[Mapping[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _full_marks(review: Mapping[str, Any] | None) -> bool:
    if review is None or review.get("points") is None:
        return False
    try:
        return Decimal(str(review["points"])) >= Decimal(str(review.get("max")))
    except InvalidOperation:
        return False


def _incident(request: PromotionRequest, reviewed: GradedRun) -> _Evidence:
    """An incident of the submission in which a forbidden action ran: its task, and every
    tool call it recorded that returned as the item's world: its reads (the state the run
    started from) and its actions' results (so an action the item does not forbid is
    answered as it was, and a forbidden one is seen, never run)."""
    if not request.agent:
        raise UsageError(
            "--agent package.module:function is required with --incident: the "
            "agent every student's run of the item asks (e.g. lab.refunds:run)"
        )
    agent = _agent(request)
    path = PurePosixPath(str(request.incident)).as_posix()
    data = _required(_graded_bytes(request.root, path, reviewed.run), path, reviewed)
    incident = _decoded(lambda: decode_incident(data, source=path), path, "an incident")
    if incident.torn:
        raise UsageError(
            f"{path}: {incident.torn}: an item replays a whole record; record "
            "the incident again, then grade, review and promote it"
        )
    if not incident.task.strip():
        raise UsageError(
            f"{path} records no task, so no other student's agent could be asked "
            "it: the item cannot apply to them; record the incident with --task "
            "or --case"
        )
    expect = _expectation(None, request)
    _guards_a_failure(expect, incident, path, reviewed)
    world = world_json(
        (e.boundary, e.input.get("args", {}), e.output)
        for e in incident.envelopes
        if e.kind != "model" and e.error is None
    )
    return _Evidence(
        "incident", path, PurePosixPath(path).stem, incident.task, agent, expect, world=world
    )


def _guards_a_failure(
    expect: Expectation, incident: Incident, path: str, reviewed: GradedRun
) -> None:
    ran = list(
        dict.fromkeys(e.boundary for e in incident.envelopes if e.kind == "action" and e.ran)
    )
    if not expect.forbidden_actions:
        raise UsageError(
            f"give --forbid TOOL: an incident item guards against an action "
            f"that ran (in {path}: {', '.join(ran) or 'none'})"
        )
    if not set(expect.forbidden_actions) & set(ran):
        raise UsageError(
            f"run {reviewed.run.get('seq')} of {reviewed.run['student']} shows no "
            f"failure to guard against: none of {', '.join(expect.forbidden_actions)}"
            f" ran in {path} (actions that ran: {', '.join(ran) or 'none'}); "
            "forbid an action the incident shows running"
        )


def _graded_bytes(root: Path, path: str, run: Mapping[str, Any]) -> bytes | None:
    """The bytes of ``path`` in the submission (None when absent), exactly those the run
    graded: a file changed since, or one the run never read, is not what was reviewed."""
    try:
        data: bytes | None = read_submission_file(root, path, cap=PAYLOAD_CAP)
    except MissingSubmissionFile:
        data = None
    except SubmissionFileError as exc:
        raise UsageError(f"cannot save {path}: {exc}") from None
    inputs = run.get("inputs")
    graded = (
        {PurePosixPath(key).as_posix(): digest for key, digest in inputs.items()}
        if isinstance(inputs, dict)
        else {}
    )
    then = graded.get(PurePosixPath(path).as_posix())  # "./x" and "x" are one file
    now = hashlib.sha256(data).hexdigest() if data is not None else None
    if now != then:
        raise UsageError(
            f"{path} {_changed(then, now)} since run {run.get('seq')} graded it: "
            "a case holds what was graded; grade the submission again, then save "
            "the case from that run"
        )
    return data


def _required(data: bytes | None, path: str, reviewed: GradedRun) -> bytes:
    if data is None:
        raise UsageError(
            f"{path} is missing, and run {reviewed.run.get('seq')} graded none: "
            "record it, then grade, review and promote it"
        )
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
        raise UsageError(
            f"{path} is not {what} gradekit can replay ({detail}); it cannot "
            "be promoted: fix or record it again, grade and review it"
        ) from None


def _agent(request: PromotionRequest) -> str | None:
    return applicable_agent(request.agent, request.reference)


def applicable_agent(spec: str | None, reference: Path) -> str | None:
    """The agent a case asks: None (each submission's own) unless ``spec`` names one, which
    must be a module the reference lab holds: a module only one student wrote is not in a
    classmate's submission, so the case could not apply to them."""
    if spec is None:
        return None
    if not SPEC.fullmatch(spec):
        raise UsageError(
            f'--agent "{spec}" must look like "package.module:function" (e.g. lab.refunds:run)'
        )
    module = spec.partition(":")[0].replace(".", "/")
    found = [
        name for name in (f"{module}.py", f"{module}/__init__.py") if (reference / name).is_file()
    ]  # never imported here
    if not found:
        raise UsageError(
            f"--agent {spec} cannot apply to another student: the reference lab "
            f"({reference}) has no {module}.py or {module}/__init__.py, so a "
            "classmate's submission need not have it. Use the agent the hand-out "
            "gives every student, or no --agent (each submission's own), or pass "
            "--reference DIR, the lab the hand-out is built from"
        )
    return spec


def _expectation(base: Expectation | None, request: PromotionRequest) -> Expectation:
    """The rubric case's expectation (if any), the flags' over it (``laid_over``): it must
    have an outcome, and a business goal (without one the item could never pass)."""
    expect = laid_over(
        base, request.told, "the item's expectation (the rubric case's and the flags)"
    )
    if not expect.outcome:
        raise UsageError(
            "give --outcome answer (run() must return a str) or --outcome raise "
            "(it must raise): without an expected outcome the item could never "
            "be judged"
        )
    if not expect.goal:
        raise UsageError(
            'give --goal "what the run is for" (e.g. "no refund outside the '
            "policy's windows\"): without a business goal the item could never "
            "pass"
        )
    return expect


def default_item_id(given: str | None, stem: str) -> str:
    """An item's id: ``given`` (``--item``), else ``stem`` (the rubric case's id or the
    incident file's stem). Never the student's name: an item's id is a check of every
    classmate's report it grades."""
    if given is not None:
        return valid_name(given, "--item")
    try:
        return valid_name(stem, "the default item id")
    except UsageError as exc:
        raise UsageError(f"{exc}; give the item an id with --item") from None
