"""Six recorded incidents (bench/_incidents.py) as cut-point regression tests.

Each incident is recorded once with the buggy code on the unsafe task, then replayed
with the model and the read tool served from the record and the action live. Detection:
the test fails on the buggy code. Specificity: it passes on the guarded code, and on the
benign task (recorded on its own) the action runs. The paper's all-stub baseline, the same
assertion with every boundary stubbed from the record, passes the fix and kills no mutant.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from bench._cutpoint import digest, mutants
from bench._incidents import (
    CASES,
    Case,
    StubMissing,
    TestFailed,
    all_stub_test,
    cut_point_test,
    live_run_acts,
    passed,
    record,
    strict_full_replay_test,
    stub_replay,
)
from gradekit import FakeProvider, Plan, Provider, Toolbox, read_incident, replay_incident

cases = pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])


@cases
def test_the_incident_holds_the_model_the_read_and_the_action_in_order(
    case: Case, tmp_path: Path
) -> None:
    incident = read_incident(record(case, tmp_path / "incident.jsonl"))
    assert [(e.boundary, e.kind) for e in incident.envelopes] == [
        ("model", "model"),
        (case.read, "read"),
        (case.action, "action"),
    ]
    action = incident.envelopes[-1]
    assert (action.input, action.ran) == ({"args": dict(case.unsafe_request)}, True)


@cases
def test_a_live_run_acts_with_the_buggy_code_only(case: Case) -> None:
    """The incidents are what they claim: the unsafe request is let through by the buggy
    guard only, and the benign one by the guarded guard."""
    assert (
        live_run_acts(case, case.buggy),
        live_run_acts(case, case.guarded),
        live_run_acts(case, case.guarded, benign=True),
    ) == (True, False, True)


@cases
def test_detection_the_cut_point_test_fails_on_the_buggy_code(case: Case, tmp_path: Path) -> None:
    path = record(case, tmp_path / "incident.jsonl")
    with pytest.raises(TestFailed, match=f"the unsafe action ran: {case.action}"):
        cut_point_test(case, case.buggy, path)
    replayed = replay_incident(
        path, case.agent(case.buggy), plan=Plan.of({case.action}), tools=case.tools()
    )
    assert [(c.live, c.ran) for c in replayed.actions(case.action)] == [(True, True)]


@cases
def test_specificity_the_cut_point_test_passes_on_the_guarded_code(
    case: Case, tmp_path: Path
) -> None:
    path = record(case, tmp_path / "incident.jsonl")
    replayed = cut_point_test(case, case.guarded, path)
    assert replayed.actions(case.action) == []
    assert [(c.boundary, c.live) for c in replayed.crossings] == [
        ("model", False),
        (case.read, False),
    ]  # served from the record
    assert str(replayed.answer).startswith(f"refused: {case.action}")


@cases
def test_specificity_the_benign_request_still_runs_the_action(case: Case, tmp_path: Path) -> None:
    path = record(case, tmp_path / "benign.jsonl", benign=True)
    replayed = cut_point_test(case, case.guarded, path, benign=True)
    [action] = replayed.actions(case.action)
    assert (action.live, action.ran, action.input) == (
        True,
        True,
        {"args": dict(case.benign_request)},
    )


@cases
def test_a_full_replay_calls_no_live_model_or_tool(case: Case, tmp_path: Path) -> None:
    path = record(case, tmp_path / "incident.jsonl")
    model, calls = FakeProvider(lambda prompt: "live"), list[str]()
    replayed = replay_incident(
        path, case.agent(case.buggy), provider=model, tools=case.tools(calls)
    )
    assert (model.calls, calls, replayed.error) == ([], [], None)
    assert [c.live for c in replayed.crossings] == [False, False, False]


@cases
def test_twenty_replays_have_one_outcome_digest(case: Case, tmp_path: Path) -> None:
    path = record(case, tmp_path / "incident.jsonl")
    digests = {
        digest(
            replay_incident(
                path, case.agent(case.buggy), plan=Plan.of({case.action}), tools=case.tools()
            )
        )
        for _ in range(20)
    }
    assert len(digests) == 1


@cases
def test_the_cut_point_test_kills_every_unsafe_mutant_and_all_stub_none(
    case: Case, tmp_path: Path
) -> None:
    path = record(case, tmp_path / "incident.jsonl")
    unsafe = [m for m in mutants(case.guarded) if live_run_acts(case, m.guard)]
    assert unsafe  # the study has something to kill
    survivors = [m.change for m in unsafe if passed(partial(cut_point_test, case, m.guard, path))]
    assert survivors == []
    assert passed(partial(all_stub_test, case, case.guarded, path))  # a fair baseline
    killed_by_stubs = [
        m.change for m in unsafe if not passed(partial(all_stub_test, case, m.guard, path))
    ]
    assert killed_by_stubs == []


@cases
def test_the_all_stub_baseline_passes_the_guarded_code(case: Case, tmp_path: Path) -> None:
    """The paper's baseline passes the fix: the run that skips the recorded action is
    served the model and the read tool, the unused action recording is no failure."""
    path = record(case, tmp_path / "incident.jsonl")
    replayed = all_stub_test(case, case.guarded, path)
    assert [(c.boundary, c.live) for c in replayed.crossings] == [
        ("model", False),
        (case.read, False),
    ]
    assert str(replayed.answer).startswith(f"refused: {case.action}")
    with pytest.raises(TestFailed, match="diverged from the record"):
        strict_full_replay_test(case, case.guarded, path)  # gradekit's replay is strict


@cases
def test_the_all_stub_baseline_only_sees_the_stub_of_the_action(case: Case, tmp_path: Path) -> None:
    """On the buggy code the action is answered from the record, never executed: the
    baseline misses the incident itself."""
    path = record(case, tmp_path / "incident.jsonl")
    replayed = all_stub_test(case, case.buggy, path)
    [action] = replayed.actions(case.action)
    assert (action.live, action.input) == (False, {"args": dict(case.unsafe_request)})
    assert list(replayed.live()) == []


def test_a_stub_answers_by_boundary_and_call_count_whatever_the_input(tmp_path: Path) -> None:
    case = CASES[0]
    path = record(case, tmp_path / "incident.jsonl")

    def agent(provider: Provider, task: str, tools: Toolbox) -> str:
        provider.complete("another prompt")
        first = tools.call(case.read, **{case.key: "another"})
        second = tools.call(case.read, **{case.key: "yet another"})
        assert first == second == case.states[case.unsafe_request[case.key]]
        tools.call("never_recorded")
        return "unreachable"

    replayed = stub_replay(path, agent)
    assert isinstance(replayed.error, StubMissing)
    assert [(c.boundary, c.live) for c in replayed.crossings] == [
        ("model", False),
        (case.read, False),
        (case.read, False),
    ]
