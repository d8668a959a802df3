"""A regression set's items, replayed against a submission's code in the sandbox.

Each item is run as a case of its own: the submission's ``item.agent`` runs on the item's
task in the sandbox, and every crossing it makes comes to this process, which serves it
from the item's record. So the grader, not the child, sees every prompt, every tool call
and every action the agent attempts, and decides where the run left the record.

- An **incident** item is replayed cut-point style: each model call and read-only tool
  call must be the recorded one, in the recorded order per boundary (its input's key);
  the boundaries the item runs live (its actions) are observed, answered with their
  recorded twin's output when there is one, and never run for real. A changed, extra or
  missing crossing is the run's first point of divergence: the agent gets a miss there,
  never a stale answer.
- A **case** item is served from its recorded cassette and fixture, by key, like a
  graded case; a prompt or tool call they do not hold is where the run left the record.

A crossing that failed when it was recorded is answered with a miss.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping

from gradekit import Envelope, decode_incident, prompt_key
from gradekit.internal import decode_cassette, decode_fixture
from grader._model import CaseOutcome, ItemRun
from grader.regression import Item, RegressionSet
from grader.sandbox import Sandbox

__all__ = ["replay_set"]


class _IncidentServer:
    """Serves one incident item's crossings in recorded order and notes the first place
    the run leaves the record."""

    def __init__(self, item: Item) -> None:
        assert item.incident is not None
        incident = decode_incident(item.incident, source=f"item {item.id}")
        self._queues: dict[str, deque[Envelope]] = defaultdict(deque)
        for envelope in incident.envelopes:
            self._queues[envelope.boundary].append(envelope)
        self._live = frozenset(item.live)
        self._counts: dict[str, int] = defaultdict(int)
        self.first = ""  # the first point of divergence

    def answer(self, prompt: str) -> str | None:
        found, output = self._cross("model", prompt_key(prompt))
        return output if found and isinstance(output, str) else None

    def tool(self, key: str) -> tuple[bool, object]:
        return self._cross(key.partition(" ")[0], key)

    def _cross(self, boundary: str, key: str) -> tuple[bool, object]:
        self._counts[boundary] += 1
        invocation, queue = self._counts[boundary], self._queues.get(boundary)
        if boundary in self._live:  # observed, never run: its recorded twin's output
            twin = queue.popleft() if queue else None
            return True, None if twin is None else twin.output
        if self.first:  # once the run has left the record, nothing more is served
            return False, None
        if not queue:
            self._leave(f"crossing {boundary} #{invocation} is not in the record (it crossed "
                        f"{boundary} {invocation - 1} time(s))")
            return False, None
        recorded = queue.popleft()
        if recorded.key != key:
            self._leave(f"crossing {recorded.index} ({boundary} #{invocation}): its input is "
                        "not the recorded one")
            return False, None
        return recorded.error is None, recorded.output

    def _leave(self, where: str) -> None:
        self.first = self.first or where

    def divergence(self, outcome: CaseOutcome | None) -> str:
        """Where the run left the record; a run that returned must also have made every
        recorded crossing of the boundaries it was served."""
        if self.first or outcome is None or outcome.status != "returned":
            return self.first
        left = sorted((queue[0] for boundary, queue in self._queues.items()
                       if queue and boundary not in self._live), key=lambda e: e.index)
        if left:
            return f"the run ended before crossing {left[0].index} ({left[0].boundary})"
        return ""


class _CaseServer:
    """Serves one case item from its recorded cassette and fixture, by key."""

    def __init__(self, item: Item) -> None:
        assert item.cassette is not None
        source = f"item {item.id}"
        self._answers = {key: entry.response for key, entry in
                         decode_cassette(item.cassette, source=source).entries.items()}
        self._calls: Mapping[str, object] = {} if item.fixture is None else {
            key: call.response for key, call in
            decode_fixture(item.fixture, source=source).calls.items()}
        self.first = ""

    def answer(self, prompt: str) -> str | None:
        key = prompt_key(prompt)
        if key in self._answers:
            return self._answers[key]
        self.first = self.first or f"a prompt the item's recording does not hold (key {key})"
        return None

    def tool(self, key: str) -> tuple[bool, object]:
        if key in self._calls:
            return True, self._calls[key]
        self.first = self.first or ("a tool call the item's recording does not hold "
                                    f"({key.partition(' ')[0]})")
        return False, None

    def divergence(self, outcome: CaseOutcome | None) -> str:
        return self.first


def replay_set(sandbox: Sandbox, pinned: RegressionSet, *, label: str,
               hashseed: int) -> dict[str, ItemRun]:
    """Every item of ``pinned`` that has its recordings, replayed against the submission in
    ``sandbox``: item id -> what the grader saw. Items of one agent share a sandboxed run."""
    by_agent: dict[str, list[Item]] = defaultdict(list)
    for item in pinned.items:
        if not item.missing:
            by_agent[item.agent].append(item)
    runs: dict[str, ItemRun] = {}
    for number, (agent, items) in enumerate(by_agent.items()):
        servers: dict[str, _IncidentServer | _CaseServer] = {
            item.id: _IncidentServer(item) if item.kind == "incident" else _CaseServer(item)
            for item in items}
        result = sandbox.within(f"regression-{number}").replay(
            agent, [(item.id, item.task) for item in items], servers, label=label,
            hashseed=hashseed)
        error = f"the agent {agent} could not be imported: {result.import_error}" \
            if result.import_error else ""
        for item in items:
            outcome = result.outcomes.get(item.id)
            runs[item.id] = ItemRun(outcome, servers[item.id].divergence(outcome), error)
    return runs
