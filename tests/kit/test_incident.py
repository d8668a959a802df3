"""Cut-point replay: envelopes, plans, divergence, and a guard that must block an action.

The incident: a refund agent asks the model whether to refund, reads the refund policy
(a read tool) and, if its guard allows, issues the refund (an action). The buggy guard
lets any refund through; the fixed one checks the amount against the policy. Recorded
once with the buggy guard, the incident replays with the model and the policy served
from the record and the action live: the buggy guard issues the refund again, the
fixed one does not.

It tests ``gradekit._incident``'s private line writers on purpose: the fast model line
against the general one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gradekit import (
    FakeProvider,
    IncidentCorrupt,
    IncidentDivergence,
    IncidentRecorder,
    Plan,
    Provider,
    Toolbox,
    Tools,
    UsageError,
    prompt_key,
    read_incident,
    replay_incident,
)
from gradekit._incident import _line, _model_line

TASK = "Student s1 asks for a refund of 120 for the course."
Guard = Callable[[dict[str, Any], int], bool]


def buggy(policy: dict[str, Any], amount: int) -> bool:
    return True


def fixed(policy: dict[str, Any], amount: int) -> bool:
    return bool(policy["within_window"]) and amount <= int(policy["max_refund"])


def refund_agent(
    guard: Guard, *, extra_question: bool = False, prompt: str = "Should we refund? {task}"
) -> Callable[..., str]:
    def run(provider: Provider, task: str, tools: Toolbox) -> str:
        decision = provider.complete(prompt.format(task=task))
        if extra_question:
            provider.complete("Are you sure?")
        policy = tools.call("policy", student="s1")
        if decision.strip().lower().startswith("yes") and guard(policy, 120):
            tools.call("issue_refund", student="s1", amount=120)
            return "refunded"
        return "refused"

    return run


def tools() -> Tools:
    registry = Tools()
    registry.read_only("policy", lambda student: {"max_refund": 100, "within_window": True})

    def issue_refund(store: dict[str, Any], student: str, amount: int) -> dict[str, Any]:
        store.setdefault("refunds", []).append([student, amount])
        return {"refunded": amount}

    registry.write("issue_refund", issue_refund)
    return registry


def record(path: Path, guard: Guard = buggy) -> str:
    live = FakeProvider(lambda prompt: "yes, refund it", name="fake:model")
    with IncidentRecorder(path, case="refund", task=TASK, provider=live.name) as recorder:
        return refund_agent(guard)(recorder.provider(live), TASK, recorder.toolbox(tools()))


ACTION_LIVE = Plan.of({"issue_refund"})


def test_the_recording_holds_every_crossing_in_order_with_its_input_and_key(tmp_path: Path) -> None:
    assert record(tmp_path / "refund.jsonl") == "refunded"
    incident = read_incident(tmp_path / "refund.jsonl")
    assert (incident.case, incident.task, incident.provider, incident.torn) == (
        "refund",
        TASK,
        "fake:model",
        "",
    )
    assert [(e.index, e.boundary, e.kind) for e in incident.envelopes] == [
        (0, "model", "model"),
        (1, "policy", "read"),
        (2, "issue_refund", "action"),
    ]
    action = incident.envelopes[2]
    assert (action.input, action.key, action.output, action.ran) == (
        {"args": {"amount": 120, "student": "s1"}},
        'issue_refund {"amount":120,"student":"s1"}',
        {"refunded": 120},
        True,
    )


def test_the_bytes_are_deterministic_and_an_incident_is_never_rewritten(tmp_path: Path) -> None:
    record(tmp_path / "a.jsonl")
    record(tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    before = (tmp_path / "a.jsonl").read_bytes()
    with pytest.raises(UsageError, match="never rewritten"):
        record(tmp_path / "a.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == before


def test_each_envelope_is_written_before_the_crossing_returns(tmp_path: Path) -> None:
    """Append-only: after every crossing the file so far is a prefix of the final file."""
    path = tmp_path / "refund.jsonl"
    seen: list[bytes] = []
    live = FakeProvider(lambda prompt: "yes", name="fake:model")
    with IncidentRecorder(path, case="refund", task=TASK) as recorder:
        provider = recorder.provider(live)
        for number in range(3):
            provider.complete(f"question {number}")
            seen.append(path.read_bytes())
    final = path.read_bytes()
    assert [final.startswith(prefix) for prefix in seen] == [True] * 3
    assert [prefix.count(b"\n") for prefix in seen] == [2, 3, 4]


def test_a_torn_last_line_is_reported_and_every_earlier_envelope_stays_readable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    path.write_bytes(path.read_bytes()[:-30])
    incident = read_incident(path)
    assert [e.boundary for e in incident.envelopes] == ["model", "policy"]
    assert incident.torn == "line 4 was cut off while it was written and is left out"


def test_a_corrupt_line_in_the_middle_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'{"index": 1, "oops'
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(IncidentCorrupt, match=r"refund.jsonl:3: not a JSON line"):
        read_incident(path)


def test_a_run_killed_mid_way_leaves_every_earlier_envelope(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    script = textwrap.dedent(f"""
        import os, signal
        from gradekit import FakeProvider, IncidentRecorder
        recorder = IncidentRecorder({str(path)!r}, case="c", task="t")
        provider = recorder.provider(FakeProvider(lambda p: "answer"))
        for number in range(5):
            provider.complete(f"question {{number}}")
        os.kill(os.getpid(), signal.SIGKILL)
        """)
    done = subprocess.run([sys.executable, "-c", script], timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL
    incident = read_incident(path)
    assert [e.input["prompt"] for e in incident.envelopes] == [f"question {n}" for n in range(5)]
    assert incident.torn == ""


def test_a_failed_crossing_is_recorded_and_fails_again_in_the_replay(tmp_path: Path) -> None:
    path = tmp_path / "failed.jsonl"
    registry = Tools()

    def policy(student: str) -> dict[str, Any]:
        raise ConnectionError("the course database is down")

    registry.read_only("policy", policy)
    agent = refund_agent(fixed)
    with IncidentRecorder(path, case="c", task=TASK) as recorder, pytest.raises(ConnectionError):
        agent(recorder.provider(FakeProvider(lambda p: "yes")), TASK, recorder.toolbox(registry))
    envelope = read_incident(path).envelopes[-1]
    assert (envelope.boundary, envelope.output, envelope.error) == (
        "policy",
        None,
        "ConnectionError: the course database is down",
    )
    replayed = replay_incident(path, agent)
    assert replayed.error is not None
    assert "ConnectionError: the course database is down" in str(replayed.error)


# -- replay under a plan --------------------------------------------------------------------


def test_the_fixed_guard_blocks_the_action_the_buggy_one_lets_through(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    after_fix = replay_incident(path, refund_agent(fixed), plan=ACTION_LIVE, tools=tools())
    before_fix = replay_incident(path, refund_agent(buggy), plan=ACTION_LIVE, tools=tools())

    assert (after_fix.answer, after_fix.actions()) == ("refused", [])
    assert before_fix.answer == "refunded"
    [action] = before_fix.actions("issue_refund")
    assert (action.live, action.ran, action.input) == (
        True,
        True,
        {"args": {"amount": 120, "student": "s1"}},
    )
    served = [c.boundary for c in after_fix.crossings if not c.live]
    assert served == ["model", "policy"]  # the model and the policy came from the record


def test_a_full_replay_calls_no_live_model_and_serves_the_recorded_action(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    replayed = replay_incident(path, refund_agent(buggy))  # the default plan: all recorded
    assert replayed.answer == "refunded"
    assert [c.live for c in replayed.crossings] == [False, False, False]
    assert replayed.actions()[0].output == {"refunded": 120}


def test_a_live_model_boundary_goes_to_the_provider_given(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    now = FakeProvider(lambda prompt: "no", name="fake:model")
    replayed = replay_incident(
        path,
        refund_agent(buggy),
        plan=Plan.of({"model", "issue_refund"}),
        provider=now,
        tools=tools(),
    )
    assert (replayed.answer, now.calls) == ("refused", [f"Should we refund? {TASK}"])
    with pytest.raises(UsageError, match="no provider was given"):
        replay_incident(path, refund_agent(buggy), plan=Plan.of({"model"}))


def test_one_invocation_of_a_boundary_can_run_live(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    live = FakeProvider(lambda prompt: "yes", name="fake:model")
    agent = refund_agent(buggy, extra_question=True)
    with IncidentRecorder(path, case="c", task=TASK) as recorder:
        agent(recorder.provider(live), TASK, recorder.toolbox(tools()))
    second = FakeProvider(lambda prompt: "certainly")
    replayed = replay_incident(
        path, agent, plan=Plan.of({"model#2"}), provider=second, tools=tools()
    )
    assert second.calls == ["Are you sure?"]
    assert [c.live for c in replayed.crossings if c.boundary == "model"] == [False, True]


# -- divergence -----------------------------------------------------------------------------


def test_a_changed_input_names_the_first_point_of_divergence_with_a_diff(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    changed = refund_agent(fixed, prompt="Refund? {task}")
    with pytest.raises(IncidentDivergence) as caught:
        replay_incident(path, changed, plan=ACTION_LIVE, tools=tools())
    error = caught.value
    assert (error.index, error.boundary) == (0, "model")
    message = str(error)
    assert message.startswith("the run left the incident at crossing 0 (model #1)")
    assert f'-  "prompt": "Should we refund? {TASK}"' in message
    assert f'+  "prompt": "Refund? {TASK}"' in message


def test_an_extra_crossing_is_never_answered_with_a_stale_record(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    with pytest.raises(IncidentDivergence, match=r"crossing model #2 is not in the record"):
        replay_incident(
            path, refund_agent(fixed, extra_question=True), plan=ACTION_LIVE, tools=tools()
        )


def test_a_missing_crossing_is_reported_when_the_run_ends(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)

    def skips_the_policy(provider: Provider, task: str, toolbox: Toolbox) -> str:
        provider.complete(f"Should we refund? {task}")
        return "refused"

    with pytest.raises(IncidentDivergence) as caught:
        replay_incident(path, skips_the_policy, plan=ACTION_LIVE, tools=tools())
    assert (caught.value.index, caught.value.boundary) == (1, "policy")
    assert "the run ended before crossing 1 (policy)" in str(caught.value)


def test_a_live_boundary_crossed_fewer_times_is_no_divergence(tmp_path: Path) -> None:
    """The fix blocks the action: the live boundary's recorded crossing is not missing."""
    path = tmp_path / "refund.jsonl"
    record(path)
    assert replay_incident(path, refund_agent(fixed), plan=ACTION_LIVE, tools=tools()).error is None


def test_replays_are_bit_stable(tmp_path: Path) -> None:
    path = tmp_path / "refund.jsonl"
    record(path)
    outcomes = {
        repr(replay_incident(path, refund_agent(buggy), plan=ACTION_LIVE, tools=tools()).crossings)
        for _ in range(20)
    }
    assert len(outcomes) == 1


@pytest.mark.parametrize("variable", ["PYTHONHASHSEED"])
def test_recording_is_the_same_under_another_hash_seed(tmp_path: Path, variable: str) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from tests.kit.test_incident import record
        from pathlib import Path
        record(Path(sys.argv[1]))
        """)
    for seed, name in (("1", "one.jsonl"), ("2", "two.jsonl")):
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / name)],
            check=True,
            env={**os.environ, variable: seed},
            timeout=60,
        )
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()


@given(prompt=st.text(), answer=st.text(), index=st.integers(min_value=0, max_value=10**9))
@example(prompt='quote " backslash \\ newline \n tab \t nul \x00 é 日本 \u2028', answer="", index=0)
def test_the_fast_model_line_is_byte_for_byte_the_general_one(
    prompt: str, answer: str, index: int
) -> None:
    key = prompt_key(prompt)
    try:
        general = _line(index, "model", "model", {"prompt": prompt}, key, answer, None, None)
    except UnicodeEncodeError:  # a lone surrogate: neither path can write it
        with pytest.raises(UnicodeEncodeError):
            _model_line(index, prompt, key, answer)
        return
    assert _model_line(index, prompt, key, answer) == general
