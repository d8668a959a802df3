"""The reference agent keeps the submission contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradekit import CassetteMiss, FakeProvider, Recorder, Replay, prompt_key
from lab.agent import CHECK, PLAN, REVISE, run

TASK = "Explain what a cassette miss is."


def test_plan_answer_check_makes_three_calls_when_the_check_says_yes() -> None:
    live = FakeProvider(["1. define it", "A miss is loud.", "YES, it does."])
    assert run(live, TASK) == "A miss is loud."
    assert live.calls[0] == PLAN.format(task=TASK, notes="")
    assert live.calls[2] == CHECK.format(task=TASK, answer="A miss is loud.")


@pytest.mark.parametrize("verdict", ["NO. Too vague.", "no: too vague", "**No** - vague"])
def test_a_no_from_the_check_asks_for_one_revision(verdict: str) -> None:
    live = FakeProvider(["plan", "draft", verdict, " revised "])
    assert run(live, TASK) == "revised"
    assert live.calls[3] == REVISE.format(task=TASK, answer="draft", verdict=verdict)


def test_noted_is_not_no() -> None:
    live = FakeProvider(["plan", "draft", "Noted, the answer is fine."])
    assert run(live, TASK) == "draft"
    assert len(live.calls) == 3


def test_the_label_never_changes_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    with Recorder(FakeProvider(["plan", "draft", "NO", "final"]), path) as recorder:
        recorded = run(recorder, TASK)
    assert run(Replay(path, name="provider-a"), TASK) == recorded
    assert run(Replay(path, name="provider-b"), TASK) == recorded


def test_a_miss_propagates_out_of_the_agent(tmp_path: Path) -> None:
    with pytest.raises(CassetteMiss):
        run(Replay(tmp_path / "empty.json"), TASK)


def test_every_call_is_traced_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("GRADEKIT_TRACE", str(trace))
    live = FakeProvider(["plan", "draft", "YES"], name="label-x")
    run(live, TASK)
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert [r["key"] for r in records] == [prompt_key(p) for p in live.calls]
    assert {r["provider"] for r in records} == {"label-x"}
