"""The shipped reference lab: every case replays offline from its committed cassette.

It reads the cassettes with ``gradekit._store.load`` on purpose: the kit's own reader of a
cassette file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradekit import Replay, ToolReplay, prompt_key
from gradekit._store import load
from grader import Case, load_cases
from grader.recordings import verify_cassette
from lab.agent import run

REPO = Path(__file__).resolve().parents[2]
CASES = load_cases(REPO / "rubric" / "bootcamp.toml")


def test_the_rubric_has_at_least_four_cases() -> None:
    assert len(CASES) >= 4


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_each_case_replays_identically_under_two_labels_using_every_entry(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = REPO / "cassettes" / f"{case.id}.json"
    assert verify_cassette(path, env={}) == ([], len(json.loads(path.read_bytes())["entries"]))
    answers = []
    for label in ("provider-a", "provider-b"):
        trace = tmp_path / f"{label}.jsonl"
        monkeypatch.setenv("GRADEKIT_TRACE", str(trace))
        tools = ToolReplay(REPO / "fixtures" / f"{case.id}.json")
        answers.append(run(Replay(path, name=label), case.task, tools))
        records = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
        assert {r["provider"] for r in records if "tool" not in r} == {label}
        assert next(r["tool"] for r in records if "tool" in r) == "read_docs"
        keys = [r["key"] for r in records if "tool" not in r]
    assert answers[0] == answers[1]
    assert answers[0].strip()
    cassette = load(path)
    assert cassette is not None
    assert sorted(keys) == sorted(cassette.entries)  # no stale entry, no miss
    assert all(prompt_key(e.prompt or "") == k for k, e in cassette.entries.items())


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_shipped_cassettes_come_from_a_real_model_recording(case: Case) -> None:
    cassette = load(REPO / "cassettes" / f"{case.id}.json")
    assert cassette is not None
    assert {e.provider for e in cassette.entries.values()} == {"openai-compatible:smollm2"}
    assert all(e.recorded_at.endswith("Z") for e in cassette.entries.values())
