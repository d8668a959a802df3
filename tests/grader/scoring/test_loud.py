"""Loud failure probed at every call, tracing paired by key, no points for what never ran:
the checks on evidence built by hand, each rule once as it holds and once as it breaks.

The sandbox gathers this evidence for real in tests/e2e/test_grading.py,
tests/grader/grading/test_check.py and the corpus of student agents
(tests/e2e/test_corpus.py); here the rules themselves are pinned, one call position, one
record at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from grader import CaseOutcome, ReplayProbe, RunResult, Served, TraceRecord, Withhold
from grader.rubric import Case, Criterion, load_rubric
from grader.scoring import (
    ESCAPED,
    WRAP_ADVICE,
    WRAP_TOOLS_ADVICE,
    Evidence,
    loud_failure,
    loud_problem,
    loudness,
    pair_records,
    planned_probes,
    tracing,
)

REFERENCE = Path(__file__).resolve().parents[3]
RUBRIC = load_rubric(REFERENCE / "rubric" / "bootcamp.toml")
CASE = "refund-policy"
LABEL = "anthropic:claude-3-5-haiku"
PROMPTS = ("Plan: refund a seat bought ten days ago", "Answer the student", "Check the answer")
GOOD_PROBE = ReplayProbe(
    loaded=True, whitespace_hit=True, miss_raised=True, exception="CassetteMiss", raised_miss=True
)


def _prompt(n: int, *, served: bool = True, withheld: bool = False, lines: int = 0) -> Served:
    return Served(
        key=f"{n:016x}",
        served=served,
        withheld=withheld,
        trace_lines=lines,
        asked=PROMPTS[n - 1] if withheld else "",
    )


def _tool(*, served: bool = True, withheld: bool = False) -> Served:
    return Served(
        key="read_docs:1",
        served=served,
        tool="read_docs",
        withheld=withheld,
        asked='read_docs {"query": "refund"}' if withheld else "",
    )


def _traced(
    calls: Sequence[Served], traced: Sequence[int] | None = None, ok: bool | None = None
) -> tuple[tuple[Served, ...], tuple[TraceRecord, ...]]:
    """``calls`` as the parent saw them when the ``traced`` ones (default all) each wrote
    their record once answered: each call's ``trace_lines`` counts the records before it."""
    kept = range(len(calls)) if traced is None else traced
    seen = tuple(
        replace(call, trace_lines=sum(1 for i in kept if i < n)) for n, call in enumerate(calls)
    )
    return seen, tuple(_record(seen[i], ok=ok) for i in kept)


def _record(call: Served, *, ok: bool | None = None, label: str = LABEL) -> TraceRecord:
    ok = call.served if ok is None else ok
    return TraceRecord(
        call.key, None if call.tool else label, 0.4, ok, call.tool, None if ok else "CassetteMiss"
    )


def _primary(
    calls: Sequence[Served] | None = None, *, traced: Sequence[int] | None = None
) -> CaseOutcome:
    """A returned run: a tool call, then three provider calls, each recorded and (the
    ``traced`` ones, default all) traced in order."""
    seen, records = _traced(
        calls if calls is not None else (_tool(), *(_prompt(n) for n in (1, 2, 3))), traced
    )
    return CaseOutcome(
        CASE,
        "returned",
        answer="Full refund.",
        answer_sha256="a" * 64,
        returned_type="str",
        calls=seen,
        trace=records,
    )


def _raised(withhold: Withhold, **changes: object) -> CaseOutcome:
    """A probe run that withheld ``withhold`` and let its miss escape."""
    before = [_tool()] if withhold.kind == "provider" else []
    before += [_prompt(n) for n in range(1, withhold.position)]
    missed = (
        _tool(served=False, withheld=True)
        if withhold.kind == "tool"
        else _prompt(withhold.position, served=False, withheld=True)
    )
    calls, records = _traced((*before, missed))
    outcome = CaseOutcome(
        CASE, "raised", exception="CassetteMiss", miss_escaped=True, calls=calls, trace=records
    )
    return replace(outcome, **changes)  # type: ignore[arg-type]


def _evidence(
    primary: CaseOutcome | None,
    probes: dict[Withhold, CaseOutcome],
    probe: ReplayProbe | None = GOOD_PROBE,
) -> Evidence:
    return Evidence(
        cases=(Case(CASE, "a task"),),
        label=LABEL,
        primary=RunResult({CASE: primary} if primary else {}),
        others=(),
        loud=tuple((w, RunResult({CASE: o})) for w, o in probes.items()),
        probe=probe,
        failures=None,
        stretch=(),
        second_set=None,
    )


def _all_probes(**changed: CaseOutcome) -> dict[Withhold, CaseOutcome]:
    probes = {w: _raised(w) for w in planned_probes(_primary())}
    for name, outcome in changed.items():
        kind, _, position = name.partition("_")
        probes[Withhold("tool" if kind == "tool" else "provider", int(position), CASE)] = outcome
    return probes


def test_a_case_that_ran_is_probed_at_each_provider_call_and_each_tool_call() -> None:
    assert planned_probes(_primary()) == (
        Withhold("provider", 1, CASE),
        Withhold("provider", 2, CASE),
        Withhold("provider", 3, CASE),
        Withhold("tool", 1, CASE),
    )
    no_tools = _primary([_prompt(1), _prompt(2)])
    assert planned_probes(no_tools) == (
        Withhold("provider", 1, CASE),
        Withhold("provider", 2, CASE),
    )
    two_tools = _primary([_tool(), _prompt(1), _tool()])
    assert planned_probes(two_tools) == (
        Withhold("provider", 1, CASE),
        Withhold("tool", 1, CASE),
        Withhold("tool", 2, CASE),
    )


def test_a_miss_swallowed_at_a_later_tool_call_alone_loses_the_case() -> None:
    """Every tool call position is probed: a student who guards only the second lookup
    (``except MissingFixtureError: return []``) is seen there."""
    primary = _primary([_tool(), _prompt(1), _tool()])
    probes = {w: _raised(w) for w in planned_probes(primary)}
    assert loudness(CASE, _evidence(primary, probes)).startswith(ESCAPED)
    second = Withhold("tool", 2, CASE)
    probes[second] = replace(
        probes[second],
        status="returned",
        exception=None,
        miss_escaped=False,
        answer="no notes",
        returned_type="str",
    )
    assert loudness(CASE, _evidence(primary, probes)).startswith(
        "tool call 2 of 2 ('read_docs {\"query\": \"refund\"}'): run() returned 'no notes'"
    )


def test_a_call_already_on_its_way_when_the_miss_came_is_not_going_on() -> None:
    """A thread pool's second draft, asked before the first draft's miss reached the agent,
    is no step taken after the miss; the same call asked after it is."""
    escaped = _raised(Withhold("provider", 1, CASE))
    other = Served(key="00000000000000ff", served=False, asked="Second draft")
    together = replace(escaped, calls=(*escaped.calls, replace(other, in_flight=True)))
    detail = loudness(CASE, _evidence(_primary(), _all_probes(provider_1=together)))
    assert detail.startswith(ESCAPED)
    after = replace(escaped, calls=(*escaped.calls, other))
    detail = loudness(CASE, _evidence(_primary(), _all_probes(provider_1=after)))
    assert detail.endswith(WENT_ON.format(1))


def test_every_withheld_miss_that_escaped_earns_the_case() -> None:
    detail = loudness(CASE, _evidence(_primary(), _all_probes()))
    assert detail == f"{ESCAPED} at each of its 3 provider call(s) and at its first tool call"


def test_a_miss_swallowed_at_a_later_call_alone_loses_the_case_and_names_that_call() -> None:
    swallowed = _raised(
        Withhold("provider", 2),
        status="returned",
        exception=None,
        miss_escaped=False,
        answer="Sorry, try later.",
        returned_type="str",
    )
    detail = loudness(CASE, _evidence(_primary(), _all_probes(provider_2=swallowed)))
    assert detail == (
        "call 2 of 3 ('Answer the student'): run() returned 'Sorry, try "
        "later.' after the miss: a miss must raise"
    )


def test_a_tool_first_agent_is_probed_with_its_tools_served() -> None:
    """The first provider call comes after a tool call the probe serves as recorded: an
    agent that swallows the provider's miss is seen even though it calls a tool first."""
    swallowed = _raised(
        Withhold("provider", 1),
        status="returned",
        exception=None,
        miss_escaped=False,
        answer="",
        returned_type="str",
    )
    assert swallowed.calls[0].tool == "read_docs" and swallowed.calls[0].served
    detail = loudness(CASE, _evidence(_primary(), _all_probes(provider_1=swallowed)))
    assert detail.startswith(
        "call 1 of 3 ('Plan: refund a seat bought ten days ago'): run() returned '' after the miss"
    )


WENT_ON = (
    "the agent went on after the miss and asked {} other call(s) before a miss "
    "escaped: a miss must end run(), not only the step it hit"
)


def test_a_miss_that_escapes_only_after_more_calls_were_served_does_not_count() -> None:
    went_on = _raised(Withhold("provider", 1))
    went_on = replace(went_on, calls=(*went_on.calls, _tool()))  # a tool after the miss
    detail = loudness(CASE, _evidence(_primary(), _all_probes(provider_1=went_on)))
    assert detail.endswith(WENT_ON.format(1))


def test_a_swallowed_miss_hidden_behind_the_next_steps_miss_does_not_count() -> None:
    """The first call's miss is swallowed; the agent's next step misses too (every call
    from the withheld one on does) and that miss escapes: the first stays hidden."""
    next_step = _prompt(2, served=False)
    swallowed = _raised(Withhold("provider", 1))
    swallowed = replace(swallowed, calls=(*swallowed.calls, next_step))
    detail = loudness(CASE, _evidence(_primary(), _all_probes(provider_1=swallowed)))
    assert detail.startswith("call 1 of 3 ('Plan: refund a seat bought ten days ago'): ")
    assert detail.endswith(WENT_ON.format(1))


def test_retries_of_the_withheld_call_are_no_new_step() -> None:
    """An SDK retries the request that missed: the same call again, missing again."""
    retried = _raised(Withhold("provider", 2))
    again = replace(retried.calls[-1], withheld=True)
    retried = replace(retried, calls=(*retried.calls, again, again))
    assert loud_problem(Withhold("provider", 2), retried) is None


def test_a_miss_raised_as_another_error_without_its_chain_hides_it() -> None:
    hidden = _raised(Withhold("provider", 3), exception="RuntimeError", miss_escaped=False)
    detail = loudness(CASE, _evidence(_primary(), _all_probes(provider_3=hidden)))
    assert detail.startswith(
        "call 3 of 3 ('Check the answer'): run() raised RuntimeError, which hides the miss"
    )


def test_a_swallowed_missing_fixture_loses_the_case() -> None:
    swallowed = _raised(
        Withhold("tool", 1),
        status="returned",
        exception=None,
        miss_escaped=False,
        answer="no docs",
        returned_type="str",
    )
    detail = loudness(CASE, _evidence(_primary(), _all_probes(tool_1=swallowed)))
    assert detail.startswith(
        "tool call 1 of 1 ('read_docs {\"query\": \"refund\"}'): run() returned 'no docs'"
    )


@pytest.mark.parametrize(
    ("primary", "why"),
    [
        (None, "not probed: the case was not run"),
        (
            _primary([_tool(), _prompt(1, served=False)]),
            "not probed: its primary run asked 1 prompt(s) the cassette does not hold; record "
            "them first",
        ),
        (
            CaseOutcome(CASE, "raised", exception="NotImplementedError"),
            "not probed: its primary run raised NotImplementedError",
        ),
        (_primary([_tool()]), "not probed: its primary run never asked the provider"),
    ],
)
def test_no_points_for_what_never_ran(primary: CaseOutcome | None, why: str) -> None:
    evidence = _evidence(primary, _all_probes())
    result = loud_failure(evidence, RUBRIC, _criterion("loud_failure"))
    assert [(c.id, c.points, c.detail) for c in result.checks] == [
        (CASE, Decimal("0.00"), why),
        (
            "own_replay",
            Decimal("0.00"),
            "not credited: no case of the agent ran on its "
            "recordings, so nothing showed that a miss is loud",
        ),
    ]
    traced = tracing(evidence, RUBRIC, _criterion("tracing"))
    assert traced.points == 0 and traced.checks[0].detail == why.replace(
        "not probed", "not checked"
    )


def test_a_probe_that_never_ran_is_not_a_pass() -> None:
    probes = _all_probes()
    del probes[Withhold("provider", 2, CASE)]
    assert loud_problem(Withhold("provider", 2), None) == "was not probed"
    assert loudness(CASE, _evidence(_primary(), probes)) == "call 2 of 3: was not probed"


def test_one_untraced_call_costs_that_call_alone() -> None:
    """The tool call is untraced: every later record is paired with its own call by key."""
    primary = _primary(traced=(1, 2, 3))
    assert pair_records(primary.calls, primary.trace).records == (None, 0, 1, 2)
    result = tracing(_evidence(primary, _all_probes()), RUBRIC, _criterion("tracing"))
    share = Decimal(20) / 4
    check = result.checks[0]
    assert check.detail == (
        "3 of 4 calls traced correctly; not traced right: tool call 1 "
        "(read_docs): no trace record names its key; 4 of 4 withheld calls "
        "traced with ok false and their error"
    )
    assert check.points == (share * 7 / 8).quantize(Decimal("0.01"))
    assert 0 < check.points < share
    # The provider is traced, the tool is not: the advice is about the tools.
    assert result.advice == (WRAP_TOOLS_ADVICE,)


def test_an_untraced_call_among_traced_ones_of_its_kind_is_named() -> None:
    """The second provider call alone has no record: the advice names it, by position,
    key and the head of what it asked, not "wrap the provider"."""
    primary = _primary(traced=(0, 1, 3))
    result = tracing(_evidence(primary, _all_probes()), RUBRIC, _criterion("tracing"))
    (advice,) = result.advice
    assert advice.startswith(f"{CASE}: provider call 2 (key {primary.calls[2].key}, '")
    assert WRAP_ADVICE not in advice and WRAP_TOOLS_ADVICE not in advice


def test_a_record_written_before_its_answer_is_no_calls_record() -> None:
    calls = (_prompt(1), _prompt(2, lines=2))  # two lines were there before call 2
    records = (_record(calls[0]), _record(calls[1]))  # ... but only one is call 1's
    pairing = pair_records(calls, records)
    assert pairing.records == (0, None) and pairing.early == (1,) and pairing.left_over == (1,)


def test_records_naming_no_call_count_against_the_case() -> None:
    primary = _primary()
    extra = TraceRecord("ffffffffffffffff", LABEL, 0.1, True)
    doubled = replace(primary, trace=(*primary.trace, extra))
    check = tracing(_evidence(doubled, _all_probes()), RUBRIC, _criterion("tracing")).checks[0]
    assert check.detail.startswith("4 of 4 calls traced correctly; 1 record(s) name no call")
    assert not check.passed and check.points < check.max


def test_a_withheld_call_traced_as_ok_is_not_traced_right() -> None:
    probes = _all_probes()
    lying = _raised(Withhold("provider", 1))
    lying = replace(lying, trace=_traced(lying.calls, ok=True)[1])
    probes[Withhold("provider", 1, CASE)] = lying
    check = tracing(_evidence(_primary(), probes), RUBRIC, _criterion("tracing")).checks[0]
    assert check.detail.endswith("3 of 4 withheld calls traced with ok false and their error")


def _criterion(check: str) -> Criterion:
    return next(c for c in RUBRIC.criteria if c.check == check)
