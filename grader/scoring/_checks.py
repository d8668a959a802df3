"""The five built-in checks: pure functions from what the parent observed to points.

Each check reads an ``Evidence`` (the sandboxed runs, the probe of the
submission's own Replay, the failure log) and returns a ``CriterionResult``.
No I/O, no clock, no label in any detail: a report must not depend on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal

from gradekit.internal import closest, commands, divergence
from grader._model import (
    CENT,
    EVIDENCE,
    OWN_REPLAY,
    TOOLS_CHANGED,
    WRITE_UP,
    CaseOutcome,
    CheckResult,
    CriterionResult,
    ItemRun,
    ReplayProbe,
    RunResult,
    Served,
    TraceRecord,
    Withhold,
)
from grader._text import quote
from grader.rubric import Case, Criterion, LabGoal, Rubric, RubricError, per_case_points
from grader.scoring._causes import cause, holds_date, seed_shifted
from grader.scoring._failures import (
    FailureEntry,
    counted_entries,
    parse_failures,
    score_written_summary,
)
from grader.scoring._loud import head, loud_problem, planned_probes, provider_calls, ran
from grader.scoring._summary import Grounds
from grader.scoring._traces import pair_records

__all__ = [
    "CORE_CHECKS",
    "STABLE",
    "STRETCH_GOALS",
    "STUB_ERROR",
    "ZERO",
    "Check",
    "Evidence",
    "StretchGoal",
    "cents",
    "criterion_result",
    "loudness",
    "shown_keys",
    "stretch_goals",
    "unstable_cause",
]

ESCAPED = "the miss (CassetteMiss or MissingFixtureError) escaped run()"
STUB_ERROR = "NotImplementedError"  # what the hand-out's run() raises until it is written
NEVER_ASKED = "never asked the provider: the answer did not come from the recordings"
REPLAY_OK = "your Replay answered a recorded prompt and raised CassetteMiss on an unrecorded one"
ZERO = Decimal("0.00")


def cents(value: Decimal) -> Decimal:
    """Round to exact cents, half to even: the only rounding a report ever sees."""
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """What the parent gathered about one submission; ``None`` where a run was impossible."""

    cases: tuple[Case, ...]
    label: str
    primary: RunResult | None  # every case, the first label and hash seed
    others: tuple[RunResult, ...]  # every case under each other label, each its own seed
    # The loud-failure probes: what each run withheld, and the run (only the cases that
    # made such a call and had not already failed an earlier probe)
    loud: tuple[tuple[Withhold, RunResult], ...]
    probe: ReplayProbe | None  # the submission's own Replay
    failures: str | None  # FAILURES.md text; None when missing or unreadable
    stretch: tuple[str, ...]  # stretch goals claimed in the manifest
    second_set: RunResult | None  # every case against the second provider's cassettes
    second_set_problem: str = ""  # why there is no second_set run
    blocked: str = ""  # why no run happened at all (no manifest, import error, ...)
    rerecording_problem: str | None = "not checked"  # None: a change-log entry matches the files
    second_cassettes: str = ""  # the second set's folder, as the manifest declares it
    fixtures: str = "fixtures"  # the tool fixtures' folder
    rerecording_basis: str = ""  # the change-log entry and keys the re-record evidence rests on
    again: RunResult | None = None  # the primary run's label and seed, another clock
    seeds: tuple[RunResult, ...] = ()  # the primary label under each other run's hash seed,
    # over the cases up to the last one the runs disagree on or did not serve
    clock: int = 0  # where the primary run's clock started (seconds since the epoch)
    recording_problems: Mapping[str, str] = field(default_factory=dict)  # case -> its finding
    recorded_prompts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # by case
    # GRADEKIT_* settings that record the provider the cassettes were recorded with (empty
    # when their names do not tell): a fix that records prints them, so it runs as printed
    recorded_with: Mapping[str, str] = field(default_factory=dict)
    cut_point_problem: str | None = "not checked"  # None: the incident test holds
    incident_test: str = ""  # the manifest's cut-point test, as the evidence names it
    # regression set ("name@version") -> item id -> its replay against the submission
    regression: Mapping[str, Mapping[str, ItemRun]] = field(default_factory=dict)
    # what the failure log's claims are checked against: the submission's files, keys, ...
    grounds: Grounds = field(default_factory=Grounds)


Check = Callable[[Evidence, Rubric, Criterion], CriterionResult]


def criterion_result(
    criterion: Criterion, checks: list[CheckResult], advice: list[str], *, review: bool = False
) -> CriterionResult:
    """A criterion's result: the sum of ``checks``, out of its weight, ``advice`` unique."""
    return CriterionResult(
        id=criterion.id,
        title=criterion.title,
        points=cents(sum((c.points for c in checks), ZERO)),
        max=cents(Decimal(criterion.weight)),
        checks=tuple(checks),
        review=review,
        advice=tuple(dict.fromkeys(advice)),  # unique, first-seen order
    )


def _check(check_id: str, passed: bool, maximum: Decimal, detail: str) -> CheckResult:
    return CheckResult(check_id, passed, maximum if passed else ZERO, maximum, detail)


def _outcome(run: RunResult | None, case: str) -> CaseOutcome | None:
    return None if run is None else run.outcomes.get(case)


def _failed_run(outcome: CaseOutcome | None, blocked: str) -> str | None:
    """Why a run of a case produced no usable answer, or None when it returned."""
    if outcome is None:
        return blocked or "the case was not run"
    if outcome.status == "timeout":
        return f"timed out ({quote(outcome.detail)})" if outcome.detail else "timed out"
    if outcome.status == "crashed":
        return f"crashed ({quote(outcome.detail)})" if outcome.detail else "crashed"
    if outcome.status == "not_run":
        return blocked or quote(outcome.detail) or "the case was not run"
    return None


def _asked(outcome: CaseOutcome) -> bool:
    """Whether the agent asked the provider at least once and the grader served it: an
    answer that never came from the recordings shows nothing about replaying them."""
    return any(call.tool is None and call.served for call in outcome.calls)


def _misses(outcome: CaseOutcome) -> int:
    return sum(1 for call in outcome.calls if not call.served)


def _unrecorded(outcome: CaseOutcome) -> str:
    """What the run asked that nothing recorded: prompts, tool calls, or both."""
    prompts = sum(1 for c in outcome.calls if not c.served and c.tool is None and not c.http)
    sent = [c.key for c in outcome.calls if not c.served and c.http]
    requests = len(set(sent))  # an SDK sends a request that failed again: its retries
    tools = _misses(outcome) - prompts - len(sent)
    retried = f" (sent {len(sent)} times: the SDK's retries)" if len(sent) > requests else ""
    parts = [f"{prompts} prompt(s) the cassette does not hold"] if prompts else []
    parts += (
        [f"{requests} SDK request(s) the HTTP cassette does not hold{retried}"] if requests else []
    )
    parts += [f"{tools} tool call(s) the fixtures do not hold"] if tools else []
    return "asked " + " and ".join(parts)


# -- contract_stability -----------------------------------------------------------------


def contract_stability(evidence: Evidence, rubric: Rubric, criterion: Criterion) -> CriterionResult:
    """Per case: every run (one per provider label, each with its own hash seed, and one
    that sees another clock) answers, without a miss, identically."""
    shares = per_case_points(rubric, criterion)
    checks, advice = [], []
    for case in evidence.cases:
        detail = stability_detail(case.id, evidence)
        passed = detail == STABLE
        checks.append(_check(case.id, passed, shares[case.id], detail))
        if not passed:
            advice.append(f"{case.id}: {stability_advice(case.id, evidence)}")
    return criterion_result(criterion, checks, advice)


def stability_detail(case: str, evidence: Evidence) -> str:
    """A case's contract-stability detail: ``STABLE``, or what kept its runs from agreeing."""
    first = _outcome(evidence.primary, case)
    others = [_outcome(run, case) for run in (*evidence.others, evidence.again) if run is not None]
    return _moved(case, evidence) or _stability(first, others, evidence.blocked)


def stability_advice(case: str, evidence: Evidence) -> str:
    """The fix for a case whose detail is not ``STABLE``."""
    return _stability_advice(case, _outcome(evidence.primary, case), evidence)


STABLE = "identical under every provider label and hash seed"
# The details of a case whose runs disagree for a cause no recording can pin: their words
# never depend on which run was served (that is the draw's luck).
BY_SEED = "the prompts change with the hash seed alone, so a recording matches only by luck"
BY_CLOCK = "what the case asks or answers changes between identical runs"
SEED_PROMPTS = (
    "the prompts change with the hash seed: a set's or a dict's order reaches a "
    "prompt. Sort it (sorted(...)) before joining it into text; recording again "
    "cannot fix this, since every run iterates in another order"
)
IDENTICAL_CAUSE = (
    "the answer or the prompts change between identical runs (a clock, a date, "
    "random numbers or ids): take them out of what the agent asks and answers, "
    "or pass them in with the task; no recording can match them"
)
DATE_CAUSE = (
    "a prompt holds today's date (or the time), read from the clock, so no "
    "recording matches it on any other day: take the date out of the prompt, or pass "
    "it in with the task"
)
LABEL_CAUSE = (
    "the answer changes with the provider's name alone: never read provider.name "
    "in the agent, and never put it in a prompt or an answer"
)
SEED_CAUSE = (
    "the answer changes with the hash seed alone: iterate over sets and dict keys "
    "in sorted order (sorted(...)) before joining them into text"
)
BOTH_CAUSES = (
    "the answer changes with both the provider's name and the hash seed: never "
    "read provider.name, and sort sets before joining them"
)


def _stability_advice(case: str, first: CaseOutcome | None, evidence: Evidence) -> str:
    """The fix for one unstable case, from what the grader saw: a recording it could not
    use, a run that failed, a prompt it does not hold (and where it differs from the
    closest one), or answers that changed with the label or with the hash seed."""
    problem = evidence.recording_problems.get(case)
    unwritten = first is not None and first.status == "raised" and first.exception == STUB_ERROR
    if problem and not unwritten:  # no recording can be made before run() is written
        return problem
    if evidence.blocked:
        return f"fix this first: {evidence.blocked}"
    if unwritten:
        return (
            f"write run() first: it raises {STUB_ERROR}, as the hand-out's stub does; then "
            f"record the case once with `{commands.RECORD_CASE(case=case)}`"
        )
    if first is None or _failed_run(first, "") is not None:
        return (
            f"make run() finish this task without a timeout or a crash ({_failed_run(first, '')})"
        )
    moved = unstable_cause(case, evidence) if _moved(case, evidence) else None
    if moved:
        return moved
    missed = [call for call in first.calls if not call.served]
    if missed:
        return _miss_advice(case, missed, evidence)
    if first.answer is None:
        return f"run() must return a str: it {_no_answer(first)}"
    if not _asked(first):
        return "call the provider: the answer must come from the recorded answers"
    return (
        unstable_cause(case, evidence)
        or "make every run of this case answer: see the detail for the run that did not"
    )


def unstable_cause(case: str, evidence: Evidence) -> str | None:
    """Why a case's runs differ, from the runs that isolate each cause (``_causes``); None
    when they do not differ."""
    found = cause(case, evidence.primary, evidence.others, evidence.again, evidence.seeds)
    if found is None:
        return None
    if found == "identical":
        return DATE_CAUSE if _holds_date(case, evidence) else IDENTICAL_CAUSE
    if found == "seed":
        return SEED_PROMPTS if case in _shifted(evidence) else SEED_CAUSE
    return LABEL_CAUSE if found == "label" else BOTH_CAUSES


def _moved(case: str, evidence: Evidence) -> str | None:
    """The stability detail of a case that moves with the hash seed alone or between
    identical runs: the same words whichever run was served. None for any other case."""
    if case in _shifted(evidence):
        return BY_SEED
    if (
        cause(case, evidence.primary, evidence.others, evidence.again, evidence.seeds)
        == "identical"
    ):
        return BY_CLOCK
    return None


def _shifted(evidence: Evidence) -> set[str]:
    """The cases whose prompts change with the hash seed alone."""
    return seed_shifted(evidence.primary, evidence.seeds) if evidence.primary else set()


def _holds_date(case: str, evidence: Evidence) -> bool:
    """Whether what the primary run asked unserved, or answered, holds its clock's date."""
    outcome = _outcome(evidence.primary, case)
    texts = [call.asked for call in outcome.calls if not call.served] if outcome else []
    texts += [outcome.answer] if outcome is not None and outcome.answer else []
    return any(holds_date(text, evidence.clock) for text in texts)


def _miss_advice(case: str, missed: Sequence[Served], evidence: Evidence) -> str:
    asked = next((call.asked for call in missed if call.tool is None and call.asked), "")
    if asked and evidence.label and evidence.label in asked:
        return (
            "a prompt holds the provider's name, so no recording can ever match it: "
            "never put provider.name in a prompt"
        )
    # The command the miss's own message printed to the agent (the kit's Replay prints it
    # too): a prompt is recorded once more where it is missing, a tool call re-recorded.
    record = commands.configured(commands.RECORD_CASE(case=case), evidence.recorded_with)
    fix = f"record case {case} again: `{record}`"
    if missed[0].http:
        parts = (
            f"; it differs from the closest recorded one: {missed[0].asked}"
            if missed[0].asked
            else ""
        )
        return f"{fix} (an SDK request {case}.http.json does not hold: {missed[0].key}{parts})"
    recorded = evidence.recorded_prompts.get(case, ())
    if asked and recorded:
        best, _ = closest(asked.strip(), recorded, lambda prompt: prompt)
        return (
            f"{fix}; the prompt asked first differs from the closest recorded one "
            f"{divergence(asked, best)}"
        )
    if not asked:
        command = commands.configured(
            commands.RERECORD_CASE(case=case, reason=TOOLS_CHANGED), evidence.recorded_with
        )
        return (
            f"re-record case {case}: `{command}` (a tool call the fixtures do not hold: "
            f"{missed[0].key})"
        )
    return fix


def _stability(
    first: CaseOutcome | None, others: Sequence[CaseOutcome | None], blocked: str
) -> str:
    """The stability detail of one case. Its words never depend on what was drawn (which
    family's run failed, how many runs differed), so a report's digest does not either."""
    problem = _unusable(first, blocked)
    if problem is not None:
        return problem
    problems = sorted({p for o in others if (p := _unusable(o, blocked)) is not None})
    if problems:
        return f"{problems[0]} under another provider label and hash seed"
    if not others:
        return "it was run under one provider label only"
    assert first is not None
    if any(o is not None and o.answer_sha256 != first.answer_sha256 for o in others):
        return "the answer changed with the provider label or the hash seed"
    return STABLE


def _unusable(outcome: CaseOutcome | None, blocked: str) -> str | None:
    """Why one run's answer to a case cannot be compared, or None when it can."""
    failure = _failed_run(outcome, blocked)
    if failure is not None:
        return failure
    assert outcome is not None
    if _misses(outcome):
        return _unrecorded(outcome)
    if outcome.answer is None:
        return _no_answer(outcome)
    if not _asked(outcome):
        return NEVER_ASKED
    return None


# -- loud_failure -------------------------------------------------------------------------


def loud_failure(evidence: Evidence, rubric: Rubric, criterion: Criterion) -> CriterionResult:
    """Per case: a miss withheld at each call its primary run made escapes run(), and
    nothing is served after it; and the submission's own Replay raises on a miss."""
    shares = per_case_points(rubric, criterion)
    checks, advice = [], []
    for case in evidence.cases:
        detail = loudness(case.id, evidence)
        passed = detail.startswith(ESCAPED)
        checks.append(_check(case.id, passed, shares[case.id], detail))
        if not passed:
            advice.append(NOT_RAN_ADVICE if detail.startswith(NOT_PROBED) else LOUD_ADVICE)
    own = criterion.points.get(OWN_REPLAY)
    if own is not None:
        detail = _own_replay(evidence.probe, evidence.blocked)
        shifted = _shifted(evidence)  # whether those ran is the draw's luck
        if detail == REPLAY_OK and not any(
            ran(_outcome(evidence.primary, case.id)) and case.id not in shifted
            for case in evidence.cases
        ):
            detail = NOT_CREDITED
        passed = detail == REPLAY_OK
        checks.append(_check(OWN_REPLAY, passed, own, detail))
        if not passed and evidence.probe is not None and not evidence.probe.loaded:
            advice.append(
                'Name a Replay that loads in [tool.gradekit]: replay = "module:Class" '
                'for your own, or replay = "gradekit:Replay" for the kit\'s.'
            )
        elif not passed and evidence.probe is not None and detail != NOT_CREDITED:
            advice.append(
                "Your Replay must answer a recorded prompt (strip it before hashing) "
                "and raise CassetteMiss for a key it does not hold."
            )
    return criterion_result(criterion, checks, advice)


NOT_PROBED, NOT_CHECKED = "not probed: ", "not checked: "
NOT_CREDITED = (
    "not credited: no case of the agent ran on its recordings, so nothing showed "
    "that a miss is loud"
)
SHIFTED = (
    "its prompts change with the hash seed, so whether a run of it is served is luck "
    "(see Contract stability)"
)
UNREPEATABLE = (
    "its prompts change between identical runs, so no recording can serve them "
    "(see Contract stability)"
)


def _not_probed(case: str, evidence: Evidence) -> str | None:
    """Why a case is neither probed nor its trace checked, when its prompts move: with the
    hash seed (always: whether its primary run was served is luck), or between identical
    runs (when its primary run missed: re-recording cannot help). None otherwise."""
    if case in _shifted(evidence):
        return SHIFTED
    if (
        not ran(_outcome(evidence.primary, case))
        and cause(case, evidence.primary, evidence.others, evidence.again, evidence.seeds)
        == "identical"
    ):
        return UNREPEATABLE
    return None


NOT_RAN_ADVICE = (
    "Make every case run on its recordings first (see Contract stability): a "
    "case is probed for loud failure, and its trace checked, only once its "
    "primary run returns an answer with every call it asks served."
)
LOUD_ADVICE = (
    "Let every CassetteMiss (and MissingFixtureError) propagate out of run(), "
    "at every call: no except that swallows it, no default answer, no retry that "
    "hides it, no contextlib.suppress; if you must wrap it, use "
    "`raise YourError(...) from miss`."
)


def loudness(case: str, evidence: Evidence) -> str:
    """The loud-failure detail of one case: ``ESCAPED`` and what was probed, or the first
    probe whose miss did not escape (its call, the head of what it asked, and what the
    agent did), or why the case could not be probed."""
    primary = _outcome(evidence.primary, case)
    if (moved := _not_probed(case, evidence)) is not None:
        return NOT_PROBED + moved
    if not ran(primary):
        return NOT_PROBED + _not_ran(primary, evidence.blocked)
    assert primary is not None
    planned, runs = planned_probes(primary), dict(evidence.loud)
    for withhold in planned:
        probe = runs.get(withhold)
        outcome = _outcome(probe, case)
        problem = loud_problem(withhold, outcome)
        if problem is not None:
            return f"{_probe_name(withhold, primary, outcome)}: {problem}"
    tools = " and at its first tool call" if planned[-1].kind == "tool" else ""
    n = provider_calls(primary)
    return f"{ESCAPED} at each of its {n} provider call(s){tools}"


def _probe_name(withhold: Withhold, primary: CaseOutcome, outcome: CaseOutcome | None) -> str:
    """``call 2 of 4 ('Task: ...')``: which call was withheld, and the head of what it asked."""
    calls = [call for call in primary.calls if (call.tool is not None) == (withhold.kind == "tool")]
    name = f"{withhold} of {len(calls)}"
    withheld = next((call for call in outcome.calls if call.withheld), None) if outcome else None
    return f"{name} ('{head(withheld)}')" if withheld is not None and withheld.asked else name


def _not_ran(outcome: CaseOutcome | None, blocked: str) -> str:
    """Why a case's primary run shows nothing to probe or trace."""
    failure = _failed_run(outcome, blocked)
    if failure is not None:  # timed out or crashed; else never run, and why
        return (
            f"its primary run {failure}"
            if outcome is not None and outcome.status in ("timeout", "crashed")
            else failure
        )
    assert outcome is not None
    if _misses(outcome):
        return f"its primary run {_unrecorded(outcome)}; record them first"
    if outcome.status == "raised":
        return f"its primary run raised {_raised(outcome)}"
    if outcome.answer is None:
        return f"its primary run {_no_answer(outcome)}"
    return "its primary run never asked the provider"


def _own_replay(probe: ReplayProbe | None, blocked: str) -> str:
    if probe is None:
        return blocked or "your Replay was not probed"
    if not probe.loaded:
        return f"your Replay could not be used: {quote(probe.detail)}"
    if not probe.whitespace_hit:
        return (
            "your Replay did not answer a recorded prompt asked with extra outer "
            f"whitespace: {quote(probe.detail)}"
        )
    if not probe.miss_raised:
        return "your Replay answered an unrecorded prompt instead of raising"
    if not probe.raised_miss:
        return (
            f"your Replay raised {quote(str(probe.exception))} on an unrecorded prompt, "
            "not CassetteMiss"
        )
    return REPLAY_OK


# -- tracing -------------------------------------------------------------------------------


def tracing(evidence: Evidence, rubric: Rubric, criterion: Criterion) -> CriterionResult:
    """Per case: each call the parent answered has a record naming its key, written after
    the answer, with its label, latency and ok; each call it withheld in the loud-failure
    probes, one with ok false and its error. Records are paired with calls by key."""
    shares = per_case_points(rubric, criterion)
    checks, advice = [], []
    for case in evidence.cases:
        good, total, detail = _traced(case.id, evidence)
        points = cents(shares[case.id] * good / total) if total else ZERO
        checks.append(
            CheckResult(case.id, total > 0 and good == total, points, shares[case.id], detail)
        )
        if not total:
            advice.append(NOT_RAN_ADVICE)
        elif good != total:
            advice.append(_untraced_advice(case.id, evidence) or _wrap_advice(case.id, evidence))
    return criterion_result(criterion, checks, advice)


WRAP_ADVICE = (
    "Wrap the provider in Traced (or write one JSON line per call yourself, once "
    "the call has returned or raised) to $GRADEKIT_TRACE: key, provider (the "
    "provider's name), latency_ms, ok, and error on a call that failed."
)


WRAP_TOOLS_ADVICE = (
    "Wrap the tools in TracedTools (or write one JSON line per tool call "
    "yourself, once it has returned or raised) to $GRADEKIT_TRACE: key, tool, "
    "latency_ms, ok, and error on a call that failed."
)


def _wrap_advice(case: str, evidence: Evidence) -> str:
    """The advice for a case none of whose calls of some kind is traced: the provider's, or
    the tools' when every provider call is traced and a tool call is not."""
    outcome = _outcome(evidence.primary, case)
    if outcome is None:
        return WRAP_ADVICE
    paired = pair_records(outcome.calls, outcome.trace).records
    untraced = [
        call
        for call, index in zip(outcome.calls, paired, strict=True)
        if index is None or not _record_ok(outcome.trace[index], call, evidence.label)
    ]
    return (
        WRAP_TOOLS_ADVICE if untraced and all(c.tool is not None for c in untraced) else WRAP_ADVICE
    )


def _untraced_advice(case: str, evidence: Evidence) -> str | None:
    """The advice that names the first call of the case's primary run without a right trace
    record, when other calls of its kind have one (the agent traces them, and missed this
    one); else None."""
    outcome = _outcome(evidence.primary, case)
    if outcome is None:
        return None
    paired = pair_records(outcome.calls, outcome.trace).records
    right = [
        index is not None and _record_ok(outcome.trace[index], call, evidence.label)
        for call, index in zip(outcome.calls, paired, strict=True)
    ]
    if all(right):
        return None
    at = right.index(False)
    call = outcome.calls[at]
    kind = [
        ok
        for c, ok in zip(outcome.calls, right, strict=True)
        if (c.tool is None) == (call.tool is None)
    ]
    if not any(kind):  # no call of its kind is traced: the generic advice says how
        return None
    position = sum(1 for c in outcome.calls[: at + 1] if (c.tool is None) == (call.tool is None))
    if call.tool is not None:
        named = f"tool call {position} ({quote(call.key)})"
        fix = "trace it as the other calls are traced (TracedTools, or your own record)"
    else:
        named = f"provider call {position} (key {call.key}, '{quote(call.head)}')"
        fix = (
            "trace it as the case's other calls are traced (the Traced provider, or "
            "your own record)"
        )
    return (
        f"{case}: {named} has no trace record with its key, provider, latency_ms and ok, "
        f"while the case's other calls do: {fix}, written once it has returned or "
        "raised."
    )


def _traced(case: str, evidence: Evidence) -> tuple[int, int, str]:
    """(records right, records expected, detail) for one case."""
    outcome = _outcome(evidence.primary, case)
    if (moved := _not_probed(case, evidence)) is not None:
        return 0, 0, NOT_CHECKED + moved
    if not ran(outcome):
        return 0, 0, NOT_CHECKED + _not_ran(outcome, evidence.blocked)
    assert outcome is not None
    good, left_over, early = _judge_records(outcome, evidence.label)
    calls = len(outcome.calls)
    detail = f"{good} of {calls} calls traced correctly"
    if good < calls:
        detail += f"; {_wrongly_traced(outcome, evidence.label)}"
    if left_over:
        detail += f"; {left_over} record(s) name no call the grader answered"
    if early:
        detail += f"; {early} record(s) written before the grader answered their call"
    missed, missed_good = _traced_misses(case, evidence)
    if missed:
        detail += f"; {missed_good} of {missed} withheld calls traced with ok false and their error"
    if outcome.trace_error:
        detail += f"; trace file: {quote(outcome.trace_error)}"
    return good + missed_good, calls + left_over + missed, detail


def _judge_records(
    outcome: CaseOutcome, label: str, *, only: Callable[[Served], bool] = lambda call: True
) -> tuple[int, int, int]:
    """(calls with a right record, records that name no call, calls traced early), counting
    the calls ``only`` keeps."""
    pairing = pair_records(outcome.calls, outcome.trace)
    good = sum(
        1
        for call, index in zip(outcome.calls, pairing.records, strict=True)
        if only(call) and index is not None and _record_ok(outcome.trace[index], call, label)
    )
    return good, len(pairing.left_over), len(pairing.early)


def _traced_misses(case: str, evidence: Evidence) -> tuple[int, int]:
    """(withheld calls in the case's probe runs, those traced right): the probes of each
    provider call and of its first tool call. A later tool call's probe shows whether its
    miss is loud; how a tool's miss is traced, the first one shows."""
    expected = right = 0
    for withhold, run in evidence.loud:
        outcome = _outcome(run, case)
        if (
            outcome is None
            or withhold.case not in ("", case)
            or (withhold.kind == "tool" and withhold.position > 1)
        ):
            continue
        expected += sum(1 for call in outcome.calls if not call.served)
        right += _judge_records(outcome, evidence.label, only=lambda call: not call.served)[0]
    return expected, right


SHOWN_CALLS = 5  # calls a tracing detail names; it counts the rest


def _wrongly_traced(outcome: CaseOutcome, label: str) -> str:
    """Each call of ``outcome`` without a right record, as feedback names it (its kind and
    position, the head of what it asked or its tool) and what is wrong with its record."""
    pairing = pair_records(outcome.calls, outcome.trace)
    wrong, positions = [], {"tool": 0, "provider": 0}
    for number, (call, index) in enumerate(zip(outcome.calls, pairing.records, strict=True)):
        kind = "tool" if call.tool is not None else "provider"
        positions[kind] += 1
        if index is None:
            problem = (
                "its only record was written before the grader answered it"
                if number in pairing.early
                else "no trace record names its key"
            )
        else:
            problem = _record_problem(outcome.trace[index], call, label) or ""
        if problem:
            named = (
                f"tool call {positions[kind]} ({quote(call.tool or '')})"
                if call.tool
                else f"provider call {positions[kind]} ('{quote(call.head)}')"
            )
            wrong.append(f"{named}: {problem}")
    more = f", and {len(wrong) - SHOWN_CALLS} more" if len(wrong) > SHOWN_CALLS else ""
    return "not traced right: " + ", ".join(wrong[:SHOWN_CALLS]) + more


def _record_ok(record: TraceRecord, call: Served, label: str) -> bool:
    """A record that matches what the parent served (its key, paired already)."""
    return _record_problem(record, call, label) is None


def _record_problem(record: TraceRecord, call: Served, label: str) -> str | None:
    """What is wrong with the record paired with ``call`` (by its key); None when nothing."""
    if not _latency_ok(record.latency_ms):
        return "its record's latency_ms is not a number of at least 0"
    if call.tool and record.tool != call.tool:
        return "its record does not name the tool"
    if not call.tool and record.provider != label:
        return "its record's provider is not the provider's name"
    if call.served:
        return None if record.ok is True else "its record's ok is not true, yet it returned"
    if record.ok is False and isinstance(record.error, str) and record.error != "":
        return None
    return "its record of a miss needs ok false and the error's name"


def _latency_ok(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


# -- written_summary ----------------------------------------------------------------------


def written_summary(evidence: Evidence, rubric: Rubric, criterion: Criterion) -> CriterionResult:
    """FAILURES.md, scored by what its entries say that holds; always marked for a human
    to read."""
    return score_written_summary(
        evidence.failures,
        points=criterion.points,
        weight=Decimal(criterion.weight),
        criterion_id=criterion.id,
        title=criterion.title,
        grounds=evidence.grounds,
    )


# -- stretch_goal ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StretchGoal:
    """A stretch goal: a deterministic evidence check and the words its write-up must name."""

    id: str
    names: tuple[str, ...]  # a FAILURES.md entry naming any of these is its write-up
    evidence: Callable[[Evidence], str | None]  # None when the evidence holds, else why not
    basis: Callable[[Evidence], str]  # when it holds: the files and keys it rests on


def _two_providers(evidence: Evidence) -> str | None:
    if evidence.second_set is None:
        return evidence.second_set_problem or "no second cassette set was replayed"
    for case in evidence.cases:
        outcome = evidence.second_set.outcomes.get(case.id)
        failure = _failed_run(outcome, evidence.blocked)
        if failure is not None:
            return f"case {case.id} on the second cassette set: {failure}"
        assert outcome is not None
        if _misses(outcome):
            return f"case {case.id} on the second cassette set: {_unrecorded(outcome)}"
        if outcome.answer is None:
            return f"case {case.id} on the second cassette set: {_no_answer(outcome)}"
        if not _asked(outcome):
            return f"case {case.id} on the second cassette set: {NEVER_ASKED}"
    return None


def _no_answer(outcome: CaseOutcome) -> str:
    """What a run gave instead of a str answer."""
    if outcome.status == "raised":
        return f"raised {_raised(outcome)}"
    return f"returned {_shown(outcome)}, not str"


def _raised(outcome: CaseOutcome) -> str:
    """What run() raised, as feedback shows it: its class and message, and what it was
    raised from (the grader's miss named as such)."""
    shown = quote(outcome.message) if outcome.message else _exception(outcome)
    if not outcome.causes:
        return shown
    causes = ", ".join(
        "the grader's miss" if name == "miss" else quote(name) for name in outcome.causes
    )
    return f"{shown}, raised from {causes}"


def _shown(outcome: CaseOutcome) -> str:
    """A returned value for feedback: the text itself (quoted, so capped), None, or the type."""
    if outcome.answer is not None:
        return quote(repr(outcome.answer))
    return "None" if outcome.returned_type == "NoneType" else quote(str(outcome.returned_type))


def _exception(outcome: CaseOutcome) -> str:
    """The raised exception's class name, as the child reported it: any text at all."""
    return quote(str(outcome.exception))


def _tool_fixtures(evidence: Evidence) -> str | None:
    if evidence.primary is None:
        return evidence.blocked or "the agent was not run"
    cases = evidence.cases
    outcomes = [evidence.primary.outcomes.get(case.id) for case in cases]
    if not any(call.tool for o in outcomes if o for call in o.calls):
        if any(o is not None and _misses(o) for o in outcomes):  # it stopped before its tools
            return (
                "no case reached a tool call: the runs stopped at a miss first; make "
                "every case run on its recordings (see Contract stability)"
            )
        return "the agent made no tool call: take a third parameter, tools, and use it"
    for case, outcome in zip(cases, outcomes, strict=True):
        calls = outcome.calls if outcome else ()
        if any(call.tool and not call.served for call in calls):
            return f"case {case.id} made a tool call its fixture does not hold"
        paired = pair_records(calls, outcome.trace).records if outcome else ()
        for call, index in zip(calls, paired, strict=True):
            if call.tool and (
                index is None or outcome is None or outcome.trace[index].tool != call.tool
            ):
                return f"case {case.id}: tool calls are not traced (wrap tools in TracedTools)"
    return None


def _rerecord_review(evidence: Evidence) -> str | None:
    return evidence.rerecording_problem


def _served_from(run: RunResult | None, cases: tuple[Case, ...], folder: str, tools: bool) -> str:
    """Per case, each recording file and the keys of what it served in ``run``: the
    fixtures (``tools``), else the cassette and the HTTP cassette (an SDK's requests)."""
    parts = []
    for case in cases:
        outcome = _outcome(run, case.id)
        served = (
            [c for c in outcome.calls if c.served and (c.tool is not None) == tools]
            if outcome
            else []
        )
        for suffix, http in ((".json", False), (".http.json", True)):
            keys = sorted({c.key for c in served if c.http == http})
            if keys:
                parts.append(f"{folder}/{case.id}{suffix}: {shown_keys(keys)}")
    return "; ".join(parts)


def shown_keys(keys: Sequence[str], shown: int = 6) -> str:
    """Keys for a reviewer: the first few, and how many more."""
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


STRETCH_GOALS: Mapping[str, StretchGoal] = {
    "rerecord-review": StretchGoal(
        "rerecord-review",
        ("rerecord-review", "re-record"),
        _rerecord_review,
        lambda e: e.rerecording_basis,
    ),
    "tool-fixtures": StretchGoal(
        "tool-fixtures",
        ("tool-fixtures", "tool fixture"),
        _tool_fixtures,
        lambda e: (
            "tool calls served from " + _served_from(e.primary, e.cases, e.fixtures, tools=True)
        ),
    ),
    "cut-point": StretchGoal(
        "cut-point",
        ("cut-point", "cut point", "incident"),
        lambda e: e.cut_point_problem,
        lambda e: (
            f"{e.incident_test} passes on the submission's guard and fails when it "
            "allows every action"
        ),
    ),
    "two-providers": StretchGoal(
        "two-providers",
        ("two-providers", "two providers"),
        _two_providers,
        lambda e: (
            "prompts served from "
            + _served_from(e.second_set, e.cases, e.second_cassettes, tools=False)
        ),
    ),
}


def stretch_goals(rubric: Rubric) -> dict[str, StretchGoal]:
    """The goals a manifest may claim under ``rubric``: the kit's, then the lab's own (its
    ``[[stretch]]`` tables, each judged by the functions ``load_rubric`` imported)."""
    return {
        **STRETCH_GOALS,
        **{goal.id: _lab_goal(goal, rubric.stretch_code) for goal in rubric.stretch},
    }


def _lab_goal(goal: LabGoal, code: Mapping[str, Callable[..., object]]) -> StretchGoal:
    """A lab's goal as the kit's are scored: its evidence function's reason, quoted (it may
    hold submission text), and its basis, or what found the evidence holding."""

    def evidence(found: Evidence) -> str | None:
        why_not = _lab_call(goal, "evidence", code, found)
        if why_not is None:
            return None
        if isinstance(why_not, str) and why_not.strip():
            return quote(why_not)
        raise RubricError(
            f"stretch goal {goal.id}: {goal.evidence} returned {why_not!r}: "
            "return None when the evidence holds, else a str saying what is "
            "missing and how to fix it"
        )

    def basis(found: Evidence) -> str:
        if not goal.basis:
            return f"{goal.evidence} found nothing missing"
        text = _lab_call(goal, "basis", code, found)
        if isinstance(text, str) and text.strip():
            return quote(text)
        raise RubricError(
            f"stretch goal {goal.id}: {goal.basis} returned {text!r}: return a "
            "str naming what the evidence rests on (files, cases, keys)"
        )

    return StretchGoal(goal.id, goal.names, evidence, basis)


def _lab_call(
    goal: LabGoal, key: str, code: Mapping[str, Callable[..., object]], evidence: Evidence
) -> object:
    spec = goal.evidence if key == "evidence" else goal.basis
    function = code.get(spec)
    if function is None:
        raise RubricError(
            f'stretch goal {goal.id}: {key} = "{spec}" was never imported: '
            "grade with the rubric load_rubric read (it imports the [[stretch]] "
            "functions from the rubric's folder), not one only parsed"
        )
    return function(evidence)


def stretch_goal(evidence: Evidence, rubric: Rubric, criterion: Criterion) -> CriterionResult:
    """The best claimed stretch goal: its evidence holds and FAILURES.md writes it up.

    Every claimed goal is checked and shown: the best one's checks first, with its points,
    then each other claimed goal's, in claim order, worth nothing (``max`` 0.00), so a
    reviewer sees the evidence of every claim while only the best one scores. The goals
    are the kit's and the rubric's own (``stretch_goals``).
    """
    goals = stretch_goals(rubric)
    if not evidence.stretch:
        check = _check(
            "claimed",
            False,
            cents(Decimal(criterion.weight)),
            "no stretch goal claimed (stretch = [...] in [tool.gradekit])",
        )
        return criterion_result(criterion, [check], [f"Finish one of: {', '.join(goals)}."])
    scored = [_score_goal(goal_id, goals, evidence, criterion) for goal_id in evidence.stretch]
    best = max(range(len(scored)), key=lambda n: sum((c.points for c in scored[n]), ZERO))
    advice = (
        []
        if all(c.passed for c in scored[best])
        else [
            "Finish one stretch goal completely and write up, in FAILURES.md, the failure it found."
        ]
    )
    unscored = [
        _unscored(check, evidence.stretch[best])
        for n, checks in enumerate(scored)
        if n != best
        for check in checks
    ]
    # The write-up is judged by its structure only: a person reads it before the points count.
    return criterion_result(criterion, [*scored[best], *unscored], advice, review=True)


def _unscored(check: CheckResult, best: str) -> CheckResult:
    """A claimed goal's check beside the best goal's: shown as it is, worth nothing."""
    return CheckResult(
        check.id,
        check.passed,
        ZERO,
        ZERO,
        f"not scored (only the best claimed goal, {quote(best)}, scores): " + check.detail,
    )


def _score_goal(
    goal_id: str, goals: Mapping[str, StretchGoal], evidence: Evidence, criterion: Criterion
) -> list[CheckResult]:
    proof, write_up = criterion.points[EVIDENCE], criterion.points[WRITE_UP]
    goal = goals.get(goal_id)
    if goal is None:
        known = ", ".join(goals)
        return [
            _check(
                quote(goal_id),
                False,
                proof + write_up,
                f"unknown stretch goal {quote(goal_id)!r}; known: {known}",
            )
        ]
    why_not = goal.evidence(evidence)
    named = _written_up(counted_entries(evidence.failures, evidence.grounds), goal.names)
    hollow = not named and _written_up(
        parse_failures(evidence.failures).entries if evidence.failures else (), goal.names
    )
    return [
        _check(
            f"{goal_id}: evidence",
            why_not is None,
            proof,
            why_not or f"the evidence holds: {goal.basis(evidence)}",
        ),
        _check(
            f"{goal_id}: write-up",
            named,
            write_up,
            "FAILURES.md has an entry naming it"
            if named
            else f"the FAILURES.md entry naming {goal.names[0]!r} does not count (see "
            "the written summary's entries for why)"
            if hollow
            else f"no FAILURES.md entry names {goal.names[0]!r}",
        ),
    ]


def _written_up(entries: Sequence[FailureEntry], names: tuple[str, ...]) -> bool:
    # A person reads the heading as part of the entry: "## tool-fixtures: ..." names it.
    return any(
        name.lower() in f"{entry.title}\n{entry.text}".lower()
        for entry in entries
        for name in names
    )


# The checks of what a submission does under the lab's contract; grader.scoring._judged adds the
# checks judged against the rubric's expectations and regression sets (BUILTIN_CHECKS).
CORE_CHECKS: Mapping[str, Check] = {
    "contract_stability": contract_stability,
    "loud_failure": loud_failure,
    "tracing": tracing,
    "written_summary": written_summary,
    "stretch_goal": stretch_goal,
}
