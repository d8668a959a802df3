"""Why a case's runs disagree, told by the runs that show it: pure functions of outcomes.

A grading runs the agent under one provider label of each family, each with its own hash
seed (the primary run and the others); once more with the primary run's label and seed
but another clock (``again``: a run identical but for the day and time it sees); and, for
the cases where those disagree or were not served, once with the primary label under
each other run's seed (``seeds``). So each cause has a run that isolates it:

- the clock or randomness: ``again`` differs from the primary run, which it repeats;
- the hash seed: a run of ``seeds`` differs from the primary run, the label held;
- the label: the others differ, while every run with the primary label agrees.

What a run "says" is compared as a multiset of the calls it asked (the order of calls
sent from threads is the scheduler's) and its answer.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import Literal

from grader._model import CaseOutcome, RunResult

__all__ = ["Said", "holds_date", "said", "seed_shifted", "unsettled_cases"]

Said = tuple[tuple[str, ...], str | None]  # (the keys asked, sorted; the answer's sha256)


def said(outcome: CaseOutcome | None) -> Said | None:
    """What one run of a case asked and answered; None when it did not end on its own
    (timed out, crashed, never run): such a run shows no cause."""
    if outcome is None or outcome.status not in ("returned", "raised"):
        return None
    answer = outcome.answer_sha256 if outcome.status == "returned" else None
    return tuple(sorted(call.key for call in outcome.calls)), answer


def _settled(outcome: CaseOutcome | None) -> bool:
    """A returned str with every call served: nothing to explain."""
    return (
        outcome is not None
        and outcome.status == "returned"
        and outcome.answer_sha256 is not None
        and all(call.served for call in outcome.calls)
    )


def unsettled_cases(primary: RunResult, others: Iterable[RunResult]) -> list[str]:
    """The primary run's cases that a run left unserved or unanswered, or on which two runs
    disagree: the cases whose cause the seed runs are asked to tell."""
    runs = [primary, *others]
    unsettled = []
    for case in primary.outcomes:
        outcomes = [run.outcomes.get(case) for run in runs if case in run.outcomes]
        if not all(_settled(o) for o in outcomes) or len({said(o) for o in outcomes}) > 1:
            unsettled.append(case)
    return unsettled


def seed_shifted(primary: RunResult, seeds: Sequence[RunResult]) -> set[str]:
    """The cases whose prompts (the calls they ask) change with the hash seed alone: a run
    of ``seeds`` (the primary label, another seed) asked other calls than the primary run.
    Whether such a case's primary run was served is the draw's luck."""
    shifted = set()
    for case, outcome in primary.outcomes.items():
        first = said(outcome)
        for run in seeds:
            other = said(run.outcomes.get(case))
            if first is not None and other is not None and other[0] != first[0]:
                shifted.add(case)
    return shifted


Cause = Literal["identical", "seed", "label", "both"]


def cause(
    case: str,
    primary: RunResult | None,
    others: Sequence[RunResult],
    again: RunResult | None,
    seeds: Sequence[RunResult],
) -> Cause | None:
    """What a case's disagreement between runs comes from, or None when they agree."""
    if primary is None:
        return None
    first = said(primary.outcomes.get(case))
    if first is None:
        return None

    def differs(run: RunResult | None) -> bool:
        other = said(run.outcomes.get(case)) if run is not None else None
        return other is not None and other != first

    if differs(again):
        return "identical"
    by_seed = any(differs(run) for run in seeds)
    by_other = any(differs(run) for run in others)
    if not by_other:
        return "seed" if by_seed else None
    if not by_seed:
        return "label"
    # Each seed run shares its seed with one of the others: where every pair agrees, the
    # label never mattered.
    pairs = zip(seeds, others, strict=False)
    same = all(
        said(seed.outcomes.get(case)) == said(other.outcomes.get(case)) for seed, other in pairs
    )
    return "seed" if same else "both"


def holds_date(text: str, clock: int) -> bool:
    """Whether ``text`` holds the date a run's clock read (its year, which a grading draws
    far from any day a recording is made, so it appears in a prompt only through the clock)."""
    year = datetime.datetime.fromtimestamp(clock, datetime.UTC).year
    return str(year) in text
