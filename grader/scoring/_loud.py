"""Loud failure, probed the way agents fail: a miss withheld at each call a run really made.

The primary run shows what each case asks, in order. For each provider call position k of
a case (``complete`` and SDK requests alike), a probe run makes the cases before it as the
primary run did, then serves the case's tools and first k-1 provider calls as recorded and
answers a miss from call k on; likewise for each tool call position. So the agent meets the
miss where its real run stood: what earlier cases left in its memory is there. A probe
holds when its miss escaped run() and the agent asked nothing after it but the same call
again (an SDK's retries) or calls already on their way when the miss came (another
thread's): an agent that swallows the miss, or goes on to its next step (whose own miss may
then escape), hides it. Pure functions of what the parent observed.
"""

from __future__ import annotations

from grader._model import CaseOutcome, Served, Withhold
from grader._text import HEAD, one_line, quote

__all__ = ["HEAD", "head", "loud_problem", "planned_probes", "provider_calls", "ran"]


def ran(outcome: CaseOutcome | None) -> bool:
    """Whether a case's run returned a str with every call it asked served, at least one of
    them by the provider: only such a run shows anything to probe or trace."""
    return (
        outcome is not None
        and outcome.status == "returned"
        and outcome.answer_sha256 is not None
        and bool(outcome.calls)
        and all(call.served for call in outcome.calls)
        and any(call.provider for call in outcome.calls)
    )


def provider_calls(outcome: CaseOutcome) -> int:
    """How many provider calls (``complete`` and SDK requests) the run made."""
    return sum(1 for call in outcome.calls if call.provider)


def planned_probes(primary: CaseOutcome) -> tuple[Withhold, ...]:
    """The probes a case that ran needs: one per provider call it made, in order, then one
    per read-only tool call it made (a write tool's call is never withheld: no fixture
    holds it, so it cannot miss)."""
    tools = sum(1 for call in primary.calls if call.tool is not None and not call.write)
    return (
        *(Withhold("provider", k, primary.case) for k in range(1, provider_calls(primary) + 1)),
        *(Withhold("tool", k, primary.case) for k in range(1, tools + 1)),
    )


_ENDED = {"timeout": "timed out", "crashed": "crashed", "not_run": "did not run"}


def loud_problem(withhold: Withhold, outcome: CaseOutcome | None) -> str | None:
    """None when the probe's miss escaped run() and the agent asked nothing after it but
    the same call again (an SDK's retries); else what the agent did instead, for feedback.

    Every call from the withheld one on misses, so an agent that swallows the miss and goes
    on to its next step meets another miss there, which may escape: that escape hides the
    first, so it does not count. Only repeats of the withheld call are no new step.
    """
    if outcome is None:
        return "was not probed"
    if outcome.status in _ENDED:
        shown = f" ({quote(outcome.detail)})" if outcome.detail else ""
        return f"the probe run {_ENDED[outcome.status]}{shown}"
    first = next((i for i, call in enumerate(outcome.calls) if call.withheld), None)
    if first is None:
        return (
            f"the probe run never reached {withhold}: the agent asked other calls than in "
            "its primary run"
        )
    if outcome.status == "returned":
        return f"run() returned {_returned(outcome)} after the miss: a miss must raise"
    if not outcome.miss_escaped:
        return (
            f"run() raised {quote(str(outcome.exception))}, which hides the miss (it is "
            "not in that exception's chain): re-raise it, or `raise ... from miss`"
        )
    missed = outcome.calls[first]
    went_on = [
        call
        for call in outcome.calls[first + 1 :]
        if not call.in_flight
        and (call.served or (call.key, call.tool) != (missed.key, missed.tool))
    ]
    if went_on:
        return (
            f"the agent went on after the miss and asked {len(went_on)} other call(s) "
            "before a miss escaped: a miss must end run(), not only the step it hit"
        )
    return None


def head(call: Served) -> str:
    """What a withheld call asked, as feedback shows it: its first ``HEAD`` characters on
    one line, quoted."""
    return _head(call.asked)


def _returned(outcome: CaseOutcome) -> str:
    """What run() returned, as feedback shows it: a str's head in quotes, else None or the
    type's name."""
    if outcome.answer is not None:
        return f"'{_head(outcome.answer)}'"
    return "None" if outcome.returned_type == "NoneType" else quote(str(outcome.returned_type))


def _head(text: str) -> str:
    """``text`` on one line, its first ``HEAD`` characters, quoted."""
    return quote(one_line(text, HEAD))
