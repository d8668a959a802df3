"""A regression set's items, run against a submission's code in the sandbox, each served
from that submission's own recordings of it.

An item fixes what is asked (its task, and the world of tool reads it starts from) and what
the run must come to; it holds no student's model answers. So every submission's run of
item I of set S is served like a graded case's, from its own recordings of the item's task,
recording name ``regression/S/I`` (``grader.regression.recording_name``): prompts from
``<cassettes>/regression/S/I.json``, an SDK's requests from ``.../I.http.json``, and each tool
call from the item's world first, then from ``<fixtures>/regression/S/I.json``. The grader, not
the child, sees every prompt, tool call and action the agent attempts. A call that neither
holds is a miss, and where the run left its recordings: the item fails there, with the fix.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from gradekit import Entry, HttpCassette, prompt_key
from gradekit.internal import commands
from grader._model import CaseOutcome, ItemRun
from grader.regression import Item, RegressionSet, recording_name
from grader.sandbox import CLOCK, RunPlan, Sandbox, Serving

__all__ = ["ItemRecordings", "replay_set", "run_items"]


class ItemRecordings:
    """A submission's recordings of the items of the sets a rubric pins, by recording name:
    the answers of its cassettes, its fixtures' tool results and its HTTP cassettes, as the
    parent read them (a file it could not read is absent here, and a finding)."""

    def __init__(
        self,
        answers: Mapping[str, Mapping[str, Entry]],
        fixtures: Mapping[str, Mapping[str, object]],
        http: Mapping[str, HttpCassette],
        *,
        cassettes: str = "cassettes",
        fixtures_folder: str = "fixtures",
    ) -> None:
        self.answers, self.fixtures, self.http = answers, fixtures, http
        self.cassettes, self.fixtures_folder = cassettes, fixtures_folder


def replay_set(
    sandbox: Sandbox,
    pinned: RegressionSet,
    agent: str,
    recordings: ItemRecordings,
    *,
    label: str,
    hashseed: int,
    clock: int = CLOCK,
) -> dict[str, ItemRun]:
    """Every item of ``pinned`` that has its world and a goal, run against the submission in
    ``sandbox`` and served from its ``recordings``: item id -> what the grader saw. ``agent``
    is the submission's own (its manifest's), for the items that name none; items of one
    agent share a sandboxed run."""
    return run_items(
        sandbox,
        pinned.items,
        {item.id: recording_name(pinned.name, item.id) for item in pinned.items},
        agent,
        recordings,
        label=label,
        hashseed=hashseed,
        clock=clock,
    )


def run_items(
    sandbox: Sandbox,
    items: Sequence[Item],
    names: Mapping[str, str],
    agent: str,
    recordings: ItemRecordings,
    *,
    label: str,
    hashseed: int,
    clock: int = CLOCK,
    what: str = "item",
) -> dict[str, ItemRun]:
    """``items`` (those with their world and a goal), each run under its recording name in
    ``names`` and served from the submission's ``recordings`` of that name: item id -> what
    the grader saw. ``what`` names them in a miss's fix (an ``item``, a ``case``)."""
    by_agent: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        if not item.missing and item.expect.goal:  # else degraded whatever the run does
            by_agent[item.agent or agent].append(item)
    runs: dict[str, ItemRun] = {}
    for number, (spec, chosen) in enumerate(by_agent.items()):
        served = _Served({names[item.id]: item.reads() for item in chosen}, recordings)
        serving = Serving(
            served.answer,
            served.tool,
            {
                names[item.id]: recordings.http[names[item.id]]
                for item in chosen
                if names[item.id] in recordings.http
            },
            recordings.fixtures_folder,
            recordings.cassettes,
        )
        result = sandbox.within(f"regression-{number}").run(
            spec,
            [(names[item.id], item.task) for item in chosen],
            RunPlan(label, hashseed, serving, clock=clock),
        )
        error = (
            f"the agent {spec} could not be imported: {result.import_error}"
            if result.import_error
            else ""
        )
        for item in chosen:
            outcome = result.outcomes.get(names[item.id])
            left_at, divergence = _divergence(outcome, item, names[item.id], recordings, what)
            runs[item.id] = ItemRun(outcome, divergence, error, left_at)
    return runs


class _Served:
    """How one run of items is answered: prompts from the submission's item cassettes, a
    tool call from the item's world, else from the submission's item fixture."""

    def __init__(
        self, worlds: Mapping[str, Mapping[str, object]], recordings: ItemRecordings
    ) -> None:
        self._worlds, self._recordings = worlds, recordings

    def answer(self, case: str, prompt: str) -> str | None:
        entry = self._recordings.answers.get(case, {}).get(prompt_key(prompt))
        return None if entry is None else entry.response

    def tool(self, case: str, key: str) -> tuple[bool, object]:
        for source in (self._worlds.get(case, {}), self._recordings.fixtures.get(case, {})):
            if key in source:
                return True, source[key]
        return False, None


def _divergence(
    outcome: CaseOutcome | None, item: Item, name: str, recordings: ItemRecordings, what: str
) -> tuple[str, str]:
    """Where the run first asked for what the item's world and the submission's own
    recordings of the item do not hold (``call N (TOOL)``, N counting every call), and
    what it asked, with the fix; ("", "") when it never did. A call of a forbidden action
    is no such place: recording again would not answer it, and the expectation judges it."""
    forbidden = set(item.expect.forbidden_actions)
    calls = outcome.calls if outcome is not None else ()
    found = next(
        (
            (number, call)
            for number, call in enumerate(calls, 1)
            if not call.served and call.tool not in forbidden
        ),
        None,
    )
    if found is None:
        return "", ""
    number, missed = found
    at = f"call {number} ({missed.tool or ('request' if missed.http else 'provider')})"
    record = commands.RECORD_CASE(case=name)
    if missed.tool is not None:
        return at, (
            f"a {missed.tool} call that neither the {what}'s world nor "
            f"{recordings.fixtures_folder}/{name}.json holds: record the {what} "
            f"(`{record}`) and commit the files it writes"
        )
    held = name in recordings.answers or name in recordings.http
    where = f"{recordings.cassettes}/{name}.json" + (
        " does not hold" if held else " is missing, so nothing holds"
    )
    return at, (
        f"{where} this {'request' if missed.http else 'prompt'} (key {missed.key}): "
        f"record the {what} (`{record}`) and commit the files it writes"
    )
