"""Values shared by the grader's parts: what a sandboxed run produced, what a check scored.

Pure data, no I/O. Everything here that reaches a report is built only from
what the parent process observed or computed, never from what the child claims
about scores.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

__all__ = [
    "ASKED_CAP",
    "BOUNDARIES",
    "CENT",
    "CONTRACT",
    "ENTRIES",
    "EVIDENCE",
    "NO_PLACEHOLDERS",
    "OWN_REPLAY",
    "TOOLS_CHANGED",
    "WRITE_UP",
    "CaseOutcome",
    "CheckResult",
    "CriterionResult",
    "Divergence",
    "HumanReview",
    "ItemRun",
    "Limits",
    "Refusal",
    "ReplayProbe",
    "Report",
    "RunResult",
    "Served",
    "Status",
    "TraceRecord",
    "Withhold",
    "ignored_name",
]

# The reason a missing tool call's re-recording gives, wherever the fix is printed.
TOOLS_CHANGED = "the agent's tool calls changed"
ASKED_CAP = 4096  # of a missed prompt, kept to show where it differs from the recorded ones
CENT = Decimal("0.01")  # points are exact cents: the one definition every module uses
# The first point of divergence of a check that could not be evaluated: the rubric (the
# evaluation contract) is incomplete there, so the check is degraded, never passed.
CONTRACT = "evaluation.contract"

# The named sub-checks' ids, as rubrics' [criterion.points] tables and reports spell them.
OWN_REPLAY = "own_replay"  # loud_failure: the submission's own Replay raises on a miss
ENTRIES, BOUNDARIES, NO_PLACEHOLDERS = "entries", "boundaries", "no_placeholders"  # summary
EVIDENCE, WRITE_UP = "evidence", "write_up"  # stretch_goal

Status = Literal["returned", "raised", "timeout", "crashed", "not_run"]


# Never part of a submission: version control, environments, caches, build output. The
# sandbox leaves them out of a child's copy, and the tamper scan does not read them.
IGNORED_NAMES = (
    ".git",
    ".venv*",
    "__pycache__",
    "*.pyc",
    "grades",
    "*.egg-info",
    "build",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "node_modules",
)
# One expression for all of them: a submission's every name is matched, in every run.
_IGNORED = re.compile("|".join(fnmatch.translate(pattern) for pattern in IGNORED_NAMES))


def ignored_name(name: str) -> bool:
    """Whether ``name`` (a file or folder's own name) matches one of ``IGNORED_NAMES``."""
    return _IGNORED.match(name) is not None


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one sandboxed child; set in the rubric's ``[limits]`` table."""

    timeout_s: float = 30.0  # wall clock per case
    memory_mb: int = 1024  # address space
    cpu_s: int = 120  # CPU seconds for the whole child
    file_mb: int = 16  # largest file the child may write
    open_files: int = 256
    output_kb: int = 64  # stdout/stderr kept for feedback, each
    disk_mb: int = 64  # writable space of one sandboxed run (its copy, HOME and TMPDIR)
    processes: int = 64  # processes and threads one sandboxed run may have at once
    trace_records: int = 1000  # trace lines the parent reads per case; more is a trace error
    answer_kb: int = 64  # of a returned str, what is kept for feedback (it is compared whole)
    budget_s: int = 600  # wall clock for grading one whole submission, every run included
    grader_memory_mb: int = 2048  # address space of the worker process grading one submission
    # The grader's copy of a submission, counted before it is made (its apparent size is
    # held to disk_mb): files, folders and links, and how deep they nest (``lab/agent.py``: 2).
    submission_entries: int = 10000
    submission_depth: int = 32


@dataclass(frozen=True, slots=True)
class Served:
    """One provider or tool call as the parent served it, in order."""

    key: str  # prompt_key for a provider call, tool_key for a tool call
    served: bool  # False: the parent answered with a miss
    tool: str | None = None  # the tool's name; None for a provider call
    # Complete lines in the case's trace when the parent answered: a record on an earlier
    # line was written before this call was answered, so it cannot be this call's.
    trace_lines: int = 0
    asked: str = ""  # a missed prompt's first ASKED_CAP characters: where it differs, for advice
    http: bool = False  # an SDK client's request (key: request_key); a miss's ``asked`` then
    # says where it parts from the closest recorded request (``temperature: 0.7 != 0.2``)
    withheld: bool = False  # recorded, but the parent answered a miss on purpose (a loud-
    # failure probe); ``asked`` then holds the head of what was asked, for feedback
    in_flight: bool = False  # asked before the agent had the probe's first miss (another
    # thread's call, already on its way): no step taken after the miss
    head: str = ""  # what a provider call asked, its first characters on one line: the
    # call named in feedback (a tool call is named by its key)
    reordered: bool = False  # a missed provider call that asks what a recording of its case
    # asks, in another order (the same characters): an order a set's hash seed can move
    args: str = ""  # a tool call's arguments as the parent read them, canonical JSON
    result: str = ""  # what the parent answered a served tool call with, canonical JSON:
    # the evidence an answer's citation of a tool result is checked against
    write: bool = False  # a write tool's call: the child ran it on the case run's own store
    # (never a fixture's answer, never recorded); ``result`` is then ""

    @property
    def provider(self) -> bool:
        """A provider call: ``complete`` or an SDK's HTTP request, not a tool call."""
        return self.tool is None


@dataclass(frozen=True, slots=True)
class Withhold:
    """What a loud-failure probe run withholds: from the ``position``-th call of ``kind`` in
    case ``case`` on (1-based, in the order the parent serves them), every such call is
    answered with a miss although it is recorded, the miss a missing recording gives;
    everything else is served as in the primary run. The run makes the primary run's cases
    in its order up to ``case``, so the agent meets the miss where its real run stood."""

    kind: Literal["provider", "tool"]
    position: int
    case: str = ""  # "": in every case (a run of one case, or a test's)

    def __str__(self) -> str:
        return f"{'tool ' if self.kind == 'tool' else ''}call {self.position}"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One line of the child's ``$GRADEKIT_TRACE`` file, as the parent parsed it."""

    key: object
    provider: object
    latency_ms: object
    ok: object
    tool: object = None  # set on the record of a tool call
    error: object = None  # what the call raised, on a record with ok false


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """How one case of one run ended, as the parent saw it.

    Observed by the parent: ``calls`` (what it answered, in order), ``trace`` (the file it
    read), a timeout or a crash. Claimed by the child: whether ``run()`` returned or raised,
    and with what (``status`` "returned" / "raised", ``answer``, ``returned_type``,
    ``exception``, ``miss_escaped``). Only the child's harness can see that; its verdict is
    sealed with a secret of the parent's and sent with a look at whether its own code was
    replaced, so the known ways of forging it are detected (``RunResult.tampering``), but it
    stays a claim: an agent that finds the seal in its own process's memory could forge one.
    """

    case: str
    status: Status
    answer: str | None = None  # claim: the returned str, cut to limits.answer_kb for feedback
    answer_sha256: str | None = None  # of the whole returned str: what runs compare
    returned_type: str | None = None  # claim: type name of what run() returned
    exception: str | None = None  # claim: class name of what run() raised
    miss_escaped: bool = False  # claim: the parent's miss was in the raised exception's chain
    calls: tuple[Served, ...] = ()  # observed
    trace: tuple[TraceRecord, ...] = ()  # observed
    trace_error: str | None = None  # "line 3: not valid JSON" and the like
    detail: str = ""  # a short, deterministic reason for timeout / crash / not_run
    missing_module: str | None = None  # claim: run() raised ModuleNotFoundError for this module
    message: str = ""  # claim: what run() raised, "Class: first line of its message"
    causes: tuple[str, ...] = ()  # claim: what that was raised from, nearest first:
    # "module.Class", or "miss" for a miss the parent answered this run


@dataclass(frozen=True, slots=True)
class ItemRun:
    """One regression item replayed against the submission's code, as the parent saw it:
    the run's outcome (its calls served from the item's record), where the run first
    left that record ("" when it never did), and why it could not run at all, if so."""

    outcome: CaseOutcome | None
    divergence: str = ""
    error: str = ""  # the item's agent could not be imported from the submission
    left_at: str = ""  # the call where it left the record, ``call N (TOOL)``; "" if never


@dataclass(frozen=True, slots=True)
class Refusal:
    """Something the sandbox refused: a socket, a subprocess, a write outside the copy."""

    case: str  # "" when it happened at import time
    event: str  # the audit event, e.g. "socket.connect"
    detail: str  # deterministic: no addresses of the grading machine, no PIDs


@dataclass(frozen=True, slots=True)
class RunResult:
    """One sandboxed run of the agent over some cases, under one label and hash seed."""

    outcomes: dict[str, CaseOutcome]
    refusals: tuple[Refusal, ...] = ()
    import_error: str | None = None  # the agent could not be imported: every case is lost
    stdout: str = ""  # size-capped, for feedback only; never parsed for results
    stderr: str = ""
    tampering: tuple[str, ...] = ()  # forged verdicts or replaced harness code, as detected
    missing_module: str | None = None  # claim: importing it raised ModuleNotFoundError for this


@dataclass(frozen=True, slots=True)
class ReplayProbe:
    """What the submission's own ``Replay`` did when probed in the sandbox."""

    loaded: bool  # it could be imported and constructed
    whitespace_hit: bool  # a recorded prompt with extra outer whitespace was served
    miss_raised: bool  # an unknown prompt raised
    exception: str | None = None  # class name of what the unknown prompt raised
    detail: str = ""
    raised_miss: bool = False  # what it raised is a CassetteMiss (by its classes' names)
    tampering: str = ""  # a forged verdict or replaced harness code, as detected


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One sub-check of a criterion: usually one case.

    A ``degraded`` check could not be evaluated because the rubric's contract is
    incomplete there (a case with no expected outcome, a check without its parameters, a
    recording the instructor's side lacks): it scores nothing, is never passed, and its
    first point of divergence is ``CONTRACT``. ``detail`` then says what is missing.
    """

    id: str
    passed: bool
    points: Decimal
    max: Decimal
    detail: str
    degraded: bool = False
    judged: bool = False  # a run judged against the rubric's truth: it has a ``verdict``
    divergence: Divergence | None = None  # a judged check that failed: where, both sides

    @property
    def verdict(self) -> str:
        """``degraded``, or for a judged check ``passed`` or ``failed``; "" for the rest."""
        if self.degraded:
            return "degraded"
        return ("passed" if self.passed else "failed") if self.judged else ""


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first point where a judged run left what its case expected: where (a call, the
    outcome, the answer, the run's recordings), what was expected there and what the run
    did."""

    at: str
    expected: str
    observed: str


@dataclass(frozen=True, slots=True)
class CriterionResult:
    """A criterion's score: the sum of its checks."""

    id: str
    title: str
    points: Decimal
    max: Decimal
    checks: tuple[CheckResult, ...]
    review: bool = False  # marked for a human to look at (written summary)
    advice: tuple[str, ...] = ()  # what to do to earn the lost points

    @property
    def degraded(self) -> tuple[CheckResult, ...]:
        """The checks that could not be evaluated: the contract is incomplete there."""
        return tuple(check for check in self.checks if check.degraded)


@dataclass(frozen=True, slots=True)
class HumanReview:
    """A person's current verdict on one criterion of a report, as a ledger ``review``
    event records it (``grader.ledger._reviews``). The report itself is never edited: a review is
    rendered beside the automated points."""

    criterion: str  # the criterion's id
    automated: Decimal  # the criterion's points in the report
    points: Decimal | None  # None: a confirmation, the automated points stand
    by: str
    reason: str
    event: int  # the ledger event's seq

    @property
    def final(self) -> Decimal:
        """The criterion's points once reviewed."""
        return self.automated if self.points is None else self.points

    @property
    def delta(self) -> Decimal:
        """What the review adds to the automated total (negative when it takes points)."""
        return self.final - self.automated


@dataclass(frozen=True, slots=True)
class Report:
    """Everything ``report.json`` holds except its digest."""

    submission: str
    rubric_id: str
    rubric_version: int
    rubric_sha256: str
    inputs: dict[str, str]  # submission-relative path -> sha256 of its bytes
    criteria: tuple[CriterionResult, ...]
    findings: tuple[str, ...] = field(default=())
    sets: dict[str, str] = field(default_factory=dict)  # pinned regression sets: ref -> sha256

    @property
    def total(self) -> Decimal:
        """Points earned."""
        return sum((c.points for c in self.criteria), Decimal("0"))

    @property
    def max(self) -> Decimal:
        """Points available."""
        return sum((c.max for c in self.criteria), Decimal("0"))

    @property
    def degraded(self) -> tuple[tuple[CriterionResult, CheckResult], ...]:
        """Every check that could not be evaluated, with its criterion, in report order."""
        return tuple((c, check) for c in self.criteria for check in c.degraded)
