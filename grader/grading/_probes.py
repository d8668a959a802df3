"""The loud-failure probes: runs that withhold one provider or tool call each, to see the
agent fail loudly.

For each case the primary run made, one probe per call it made, each standing where the
primary run stood at the case's start. Where the wall can, one run copies itself at each
probed case's start (``_ProbeCopies``), and each copied case is checked by a probe in a run
of its own (``_loud_probes``); else every probe is a run of its own (``_probed_alone``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from grader._model import RunResult, Withhold
from grader._text import FLAGGED
from grader.sandbox import RunPlan
from grader.scoring import loud_problem, planned_probes, ran

__all__: list[str] = []


def _loud_probes(
    run: Callable[..., RunResult],
    plan: RunPlan,
    primary: RunResult,
    *,
    skip: Collection[str] = (),
    pick: int = 0,
    copied: bool = False,
    noted: Callable[[RunResult], None] = lambda result: None,
) -> tuple[tuple[tuple[Withhold, RunResult], ...], tuple[RunResult, ...], list[str]]:
    """The loud-failure probe runs, with the primary run's ``plan`` (its label, hash seed
    and clock): for each case that ran, one run per provider call and per tool call it
    made, each standing where the primary run stood at the case's start (a memo of an
    earlier case's answer is there). A case that failed a probe is not probed again: it
    has lost already. The cases in ``skip`` (their prompts change with the hash seed:
    whether the primary run was served is the draw's luck) are not probed, so that the
    draw moves no verdict.

    Where the wall can (``copied``), one run makes every case in order and copies itself
    at each probed case's start, one copy per probe (``_ProbeCopies``): a copy costs a
    fork, where a run of its own costs a child that makes every case before again. Each
    copied case is then checked by one probe in a run of its own, at the call whose copy
    failed, else at a call the draw picks (``pick``): a copy's verdict that a run of its
    own does not give is not kept. Where the copy alone raised the miss, the agent told a
    copy from a run (no honest agent can: the two stand alike), and that is flagged. A
    case that could not be copied (threads alive at its start, a run that ended) is
    probed in runs of its own, one per call. Returns the probes in order, the copying
    runs (for their findings) and what was flagged."""
    order = list(primary.outcomes)
    targets = {
        case: probes
        for case, outcome in primary.outcomes.items()
        if ran(outcome) and case not in skip and (probes := planned_probes(outcome))
    }
    copies = _ProbeCopies(targets)
    copying: tuple[RunResult, ...] = ()
    if copied and targets:
        last = max(order.index(case) for case in targets)
        copying = (run("loud-copies", replace(plan, copies=copies), order[: last + 1]),)
    runs: list[tuple[Withhold, RunResult]] = []
    flagged: list[str] = []
    for index, case in enumerate(order):
        if case not in targets:
            continue

        def alone(withhold: Withhold, index: int = index) -> RunResult:
            name = f"loud-{index + 1}-{withhold.kind}-{withhold.position}"
            return run(name, replace(plan, withhold=withhold), order[: index + 1])

        taken = copies.taken[case] if copies.complete(case) else []
        if not taken:
            runs += _probed_alone(case, targets[case], alone)
            continue
        failed = next(
            (
                at
                for at, (withhold, result) in enumerate(taken)
                if loud_problem(withhold, result.outcomes.get(case)) is not None
            ),
            None,
        )
        ended = taken[failed][1].outcomes.get(case) if failed is not None else None
        # A copy that ran out of time lost the case as a run of its own would, and a check
        # would cost the case's whole limit again.
        at = failed if failed is not None else (pick + index) % len(taken)
        withhold = taken[at][0]
        checked = None if ended is not None and ended.status == "timeout" else alone(withhold)
        for _, result in taken:  # after the check: a copy's timeout would have skipped it
            noted(result)
        if checked is None:
            runs += taken
            continue
        loud_alone = loud_problem(withhold, checked.outcomes.get(case)) is None
        runs += [*taken[:at], (withhold, checked)]
        if loud_alone != (failed is None):
            if loud_alone:  # the copy failed where a run of its own did not: the copy's fault
                runs += _probed_alone(case, targets[case][at + 1 :], alone)
            else:
                flagged.append(
                    FLAGGED + f"case {case}: the loud-failure probe of {withhold} "
                    "escaped run() in a copy of the run but not in a run of its "
                    "own, which alone counts: code that tells a probe from a run?"
                )
        elif failed is None:
            runs += taken[at + 1 :]
    return tuple(runs), copying, flagged


def _probed_alone(
    case: str, planned: Sequence[Withhold], alone: Callable[[Withhold], RunResult]
) -> list[tuple[Withhold, RunResult]]:
    """``case``'s probes in runs of their own, in order, until one fails."""
    runs = []
    for withhold in planned:
        result = alone(withhold)
        runs.append((withhold, result))
        if loud_problem(withhold, result.outcomes.get(case)) is not None:
            break
    return runs


class _ProbeCopies:
    """The loud-failure probes a run's copies make (``grader.sandbox.Copies``): for each
    case, one copy per planned probe in order, until one fails."""

    def __init__(self, planned: Mapping[str, Sequence[Withhold]]) -> None:
        self.cases = frozenset(planned)
        self._planned = planned
        self.taken: dict[str, list[tuple[Withhold, RunResult]]] = {case: [] for case in planned}
        self._lost: set[str] = set()

    def next(self, case: str) -> Withhold | None:
        if case not in self.taken or case in self._lost or self._ended(case):
            return None
        return self._planned[case][len(self.taken[case])]

    def took(self, withhold: Withhold, result: RunResult) -> None:
        if withhold.case in self.taken and not self._ended(withhold.case):
            self.taken[withhold.case].append((withhold, result))

    def lost(self, case: str) -> None:
        self._lost.add(case)

    def complete(self, case: str) -> bool:
        """Whether ``case`` got every copy it needed: one per probe, or up to a failure."""
        return case in self.taken and case not in self._lost and self._ended(case)

    def _ended(self, case: str) -> bool:
        taken = self.taken[case]
        return len(taken) == len(self._planned[case]) or (
            bool(taken) and loud_problem(taken[-1][0], taken[-1][1].outcomes.get(case)) is not None
        )
