"""The reference lab's own incident, replayed as a regression test.

``incidents/refund-outside-window.jsonl`` was recorded for real: SmolLM2-135M on llama.cpp
(``make local-model``), the refund agent of ``lab/refunds/`` with its buggy guard, the
course database read live. Chen asked for a refund on day 73 after the purchase, when the
policy gives nothing; the model said "The refund should be granted." and the guard, which
trusts the model, issued 960.00 euros.

The cut-point test is the lab's own, ``lab.refunds.regression``, the manifest's
``incident_test`` (the grader runs it for the cut-point stretch goal): it replays the
incident with the model and the policy read served from the record and ``issue_refund``
running live through the current code, and the fixed guard must not issue the refund.
Here it runs as a test, and the same assertion run on the buggy guard must fail, and does.
"""

from __future__ import annotations

import tomllib

import pytest

from gradekit import FakeProvider, IncidentDivergence, read_incident, replay_incident
from grader.sandbox import allow_everything
from lab import refunds
from lab.refunds import regression
from lab.refunds.regression import (
    INCIDENT,
    action_only_tools,
    assert_no_refund_issued,
    replay,
)

REPO = INCIDENT.parents[1]


# -- the cut-point test -----------------------------------------------------------------------


def test_the_labs_cut_point_test_passes_on_the_fixed_guard() -> None:
    regression.refund_outside_window_is_not_issued()


def test_the_labs_cut_point_test_fails_once_the_guard_allows_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the grader does for the cut-point goal, in process: the manifest's guard
    replaced by one that lets every action through (the harness's own) fails the test."""
    manifest = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["gradekit"]
    assert (manifest["incident_test"], manifest["guard"], manifest["incidents"]) == (
        "lab.refunds.regression:refund_outside_window_is_not_issued",
        "lab.refunds:follows_the_policy",
        "incidents",
    )
    assert "cut-point" in manifest["stretch"]
    monkeypatch.setattr(refunds, "follows_the_policy", allow_everything)
    with pytest.raises(AssertionError, match="issue_refund was tried again"):
        regression.refund_outside_window_is_not_issued()


def test_the_fixed_guard_does_not_issue_the_refund_of_the_incident() -> None:
    after_fix = replay(refunds.run)
    assert_no_refund_issued(after_fix)
    assert after_fix.answer == (
        "refused: chen's request reached us on day 73 after the purchase; the policy gives 0%"
    )
    assert [(c.boundary, c.live) for c in after_fix.crossings] == [
        ("refund_terms", False),
        ("model", False),
    ]


def test_the_same_test_fails_on_the_buggy_guard_the_refund_runs_again() -> None:
    before_fix = replay(refunds.run_buggy)
    with pytest.raises(AssertionError):
        assert_no_refund_issued(before_fix)
    [action] = before_fix.actions("issue_refund")
    assert (action.live, action.ran, action.error) == (True, True, None)
    assert action.input == {"args": {"amount_cents": 96000, "purchase_id": 3, "student": "chen"}}
    assert before_fix.answer == "refunded 960.00 euros to chen (purchase 3)"


# -- what the incident holds --------------------------------------------------------------------


def test_the_incident_is_the_recorded_run_of_the_buggy_guard() -> None:
    incident = read_incident(INCIDENT)
    assert (incident.case, incident.provider, incident.torn) == (
        "refund-outside-window",
        "openai-compatible:smollm2",
        "",
    )
    assert [(e.index, e.kind, e.boundary) for e in incident.envelopes] == [
        (0, "read", "refund_terms"),
        (1, "model", "model"),
        (2, "action", "issue_refund"),
    ]
    terms, answer, action = incident.envelopes
    assert (terms.output["day"], terms.output["share_percent"], terms.output["refund_cents"]) == (
        73,
        0,
        0,
    )
    assert refunds.model_grants(answer.output)  # the model said yes to a refund on day 73
    assert (action.ran, action.output["amount_cents"]) == (True, 96000)


def test_the_recorded_policy_read_is_what_the_course_database_says_today() -> None:
    """The served read is not stale: the database answers the recorded call the same way."""
    terms = read_incident(INCIDENT).envelopes[0]
    assert refunds.refund_terms(**terms.input["args"]) == terms.output


def test_a_full_replay_makes_no_live_model_call() -> None:
    live = FakeProvider(lambda prompt: "YES", name="fake:must-not-be-called")
    replayed = replay_incident(
        INCIDENT, refunds.run_buggy, provider=live, tools=action_only_tools()
    )
    assert live.calls == []
    assert [c.live for c in replayed.crossings] == [False, False, False]
    assert replayed.actions()[0].output == read_incident(INCIDENT).envelopes[2].output


def test_replays_are_bit_stable() -> None:
    seen = {
        repr((r.answer, r.error, r.crossings))
        for r in (replay(agent) for _ in range(10) for agent in (refunds.run, refunds.run_buggy))
    }
    assert len(seen) == 2  # one outcome per guard, the same on every replay
    lines = INCIDENT.read_bytes().splitlines(keepends=True)
    assert b"".join(e.line() for e in read_incident(INCIDENT).envelopes) == b"".join(lines[1:])


def test_a_changed_prompt_is_a_divergence_never_a_stale_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refunds, "PROMPT", refunds.PROMPT.replace("YES or NO", "yes or no"))
    with pytest.raises(IncidentDivergence) as caught:
        replay(refunds.run)
    assert (caught.value.index, caught.value.boundary) == (1, "model")


# -- the agent, live on the course database ----------------------------------------------------


def test_the_fixed_guard_refunds_the_share_the_policy_gives_inside_a_window() -> None:
    toolbox = refunds.TOOLS.for_run()
    answer = refunds.run(
        FakeProvider(lambda prompt: "YES. It is inside the window."),
        "Student ada asks for a refund; it reached the office on 2025-02-10.",
        toolbox,
    )
    assert answer == "refunded 600.00 euros to ada (purchase 1)"  # day 21: 50% of 1200.00
    assert toolbox.store["refunds"] == [
        {"refund": 1, "student": "ada", "purchase_id": 1, "amount_cents": 60000}
    ]


@pytest.mark.parametrize(
    ("answer", "grants"),
    [
        ("The refund should be granted.", True),
        ("YES", True),
        ("No.\nThe refund is not allowed.", False),
        ("The refund should not be granted.", False),
        ("I am a language model.", False),
        ("", False),
    ],
)
def test_the_model_answer_is_read_by_its_first_decisive_word(answer: str, grants: bool) -> None:
    assert refunds.model_grants(answer) is grants
