"""What a grading makes of its runs beside the primary run, and what every run tells the report.

A message of what run() raised is kept only where every run that raised gave the same one
(``_steady_messages``); a case that asks a recording's words in another order is run under
more hash seeds until one moves it, so that its cause never hangs on the draw
(``_reordered``, ``_more_seeds``); and each run's findings (``_run_findings``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from grader._model import RunResult
from grader._text import FLAGGED, quote
from grader.sandbox import RunPlan
from grader.scoring import cause, seed_shifted

__all__: list[str] = []


def _reordered(cases: Sequence[str], runs: Sequence[RunResult]) -> list[str]:
    """The ``cases`` a run missed a provider call of that asks a recording's words in
    another order: the hash seed may be why, though the seeds tried so far kept it."""
    return [
        case
        for case in cases
        if any(
            call.reordered and not call.withheld
            for run in runs
            if (outcome := run.outcomes.get(case))
            for call in outcome.calls
        )
    ]


def _more_seeds(
    run: Callable[..., RunResult],
    plan: RunPlan,
    more: Sequence[int],
    order: Sequence[str],
    reordered: Sequence[str],
    runs: tuple[RunResult, tuple[RunResult, ...], RunResult, tuple[RunResult, ...]],
) -> tuple[RunResult, ...]:
    """Runs with the primary label under the seeds of ``more``, one at a time, for the
    ``reordered`` cases no seed has moved yet and no clock explains, until each has moved
    or the seeds run out: whether a set's order is told as the hash seed's must not hang
    on which seeds a draw gave (a set of two words keeps its order under half of them)."""
    primary, others, again, seeds = runs
    found: list[RunResult] = []

    def still_open() -> list[str]:
        moved = seed_shifted(primary, (*seeds, *found))
        return [
            case
            for case in reordered
            if case not in moved and cause(case, primary, others, again, ()) != "identical"
        ]

    cases = still_open()
    for n, seed in enumerate(more, len(seeds) + 2):
        if not cases:
            break
        upto = order[: max(order.index(case) + 1 for case in cases)]
        found.append(run(f"seed-{n}", replace(plan, hashseed=seed), upto))
        cases = still_open()
    return tuple(found)


def _steady_messages(
    primary: RunResult, others: tuple[RunResult, ...], again: RunResult
) -> tuple[RunResult, tuple[RunResult, ...], RunResult]:
    """The runs, each case's message of what run() raised kept only where every run that
    raised gave the same one: a message that holds a time, an id or an address would
    otherwise make one grading's report differ from the next."""
    runs = (primary, *others, again)
    unsteady = {
        case
        for case in primary.outcomes
        if len(
            {o.message for run in runs if (o := run.outcomes.get(case)) and o.status == "raised"}
        )
        > 1
    }
    if not unsteady:
        return primary, others, again

    def steady(run: RunResult) -> RunResult:
        return replace(
            run,
            outcomes={
                case: replace(o, message="") if case in unsteady else o
                for case, o in run.outcomes.items()
            },
        )

    return steady(primary), tuple(steady(run) for run in others), steady(again)


def _run_findings(result: RunResult) -> list[str]:
    """What a sandboxed run gave the report: tampering, an import error, refusals, traces
    that are not valid JSONL."""
    findings = [FLAGGED + quote(what) for what in result.tampering]
    if result.import_error:
        findings.append(f"the agent failed to import: {quote(result.import_error)}")
    for refusal in result.refusals:
        where = f" in case {refusal.case}" if refusal.case else " at import"
        findings.append(f"sandbox refused {quote(refusal.event)}{where}: {quote(refusal.detail)}")
    for outcome in sorted(result.outcomes.values(), key=lambda o: o.case):
        if outcome.trace_error:
            findings.append(
                f"trace of case {outcome.case} is not valid JSONL: {quote(outcome.trace_error)}"
            )
    return findings
