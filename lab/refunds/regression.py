# BEGIN SOLUTION
"""The refund agent's cut-point test: the incident of ``incidents/refund-outside-window.jsonl``
replayed through the current code.

The incident was recorded for real: SmolLM2-135M on llama.cpp, the refund agent with the
guard that trusts the model (``run_buggy``), the course database read live. Chen asked for
a refund on day 73 after the purchase, when the policy gives nothing; the model said
"The refund should be granted." and 960.00 euros were refunded.

``refund_outside_window_is_not_issued`` replays it with the model's answer and the policy
read served from the record, and ``issue_refund`` live: the fixed guard must not issue the
refund. It is the manifest's ``incident_test`` (the ``cut-point`` stretch goal), so it
lives in the lab, where the grader can import it, and ``tests/lab/`` calls it too. The
grader runs it twice in the sandbox: on the lab's own guard (``guard =
"lab.refunds:follows_the_policy"``), where it must pass, and with that guard replaced by
one that allows every action, where it must fail. ``run`` looks its guard up when it is
called, so the replacement is what runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradekit import Plan, Replayed, Tools, replay_incident
from lab import refunds

__all__ = [
    "ACTION_LIVE",
    "INCIDENT",
    "action_only_tools",
    "assert_no_refund_issued",
    "refund_outside_window_is_not_issued",
    "replay",
]

# The lab's root is two folders up from this file: lab/refunds/regression.py.
INCIDENT = Path(__file__).resolve().parents[2] / "incidents" / "refund-outside-window.jsonl"
ACTION_LIVE = Plan.of({"issue_refund"})
"""The cut point: the action runs through the current code, everything before it is served."""


def action_only_tools() -> Tools:
    """``issue_refund`` live; a policy read that reaches the database fails the test, so a
    passing replay proves the policy was served from the record."""
    tools = Tools()

    def refund_terms(student: str, requested_on: str) -> dict[str, Any]:
        raise AssertionError("refund_terms ran live: it must be served from the incident")

    tools.read_only("refund_terms", refund_terms)
    tools.write("issue_refund", refunds.issue_refund)
    return tools


def replay(agent: Callable[..., object], plan: Plan = ACTION_LIVE) -> Replayed:
    """The incident replayed on ``agent`` under ``plan``, with ``action_only_tools``."""
    return replay_incident(INCIDENT, agent, plan=plan, tools=action_only_tools())


def assert_no_refund_issued(replayed: Replayed) -> None:
    """The regression assertion: no refund was tried, and the run ended cleanly."""
    tried = replayed.actions("issue_refund")
    assert tried == [], f"issue_refund was tried again: {[action.input for action in tried]}"
    assert replayed.error is None, replayed.error


def refund_outside_window_is_not_issued() -> None:
    """The cut-point test: replaying the incident on ``run`` issues no refund."""
    assert_no_refund_issued(replay(refunds.run))
# STUB
# """Your cut-point test, if you claim the cut-point stretch goal: a function of no arguments
# that replays an incident you recorded with the action live and asserts the action did not
# run. Name it as incident_test, and the guard it checks as guard, in [tool.gradekit];
# docs/formats.md has the incident's format and the manifest's keys."""
# END SOLUTION
