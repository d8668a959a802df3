"""Saved cases run before any is promoted: ``gradekit case run`` against one submission and
against a cohort, each judged against the case's expectation, the batch in the asset
ledger and never in the grades.

The case is the reference lab's real incident (the buggy guard refunded 960.00 on day 73),
saved by hand with the world it read. Alice keeps the reference's fixed guard; bob's trusts
the model, as the incident's did. Each records the case's task as ``make record`` does
(``--case cases/case-1``) against a provider that always says yes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gradekit import decode_incident
from grader.regression import world_json
from tests.submissions import (
    REFERENCE,
    YES_PROVIDER,
    gradekit_in_process,
    make_submission,
    record_in_process,
)

INCIDENT = REFERENCE / "incidents" / "refund-outside-window.jsonl"
REFUNDS = Path("lab") / "refunds" / "__init__.py"
FIXED = "return _decide(follows_the_policy, provider, task, tools)"
TRUSTING = "return _decide(trusts_the_model, provider, task, tools)"
RECORDING = "cases/case-1"


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """The kit's rubric, no set pinned, and one case saved by hand: the incident's task,
    the refund agent, the reads it made, and no refund outside the windows."""
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "rubric.toml").write_bytes((REFERENCE / "rubric" / "bootcamp.toml").read_bytes())
    incident = decode_incident(INCIDENT.read_bytes(), source=str(INCIDENT))
    world = folder / "world.json"
    world.write_bytes(
        world_json(
            (e.boundary, e.input.get("args", {}), e.output)
            for e in incident.envelopes
            if e.kind != "model" and e.error is None
        )
    )
    assert (
        gradekit_in_process(
            "case",
            "new",
            "--task",
            incident.task,
            "--name",
            "refund-day-73",
            "--world",
            str(world),
            "--agent",
            "lab.refunds:run",
            "--reference",
            str(REFERENCE),
            "--outcome",
            "answer",
            "--forbid",
            "issue_refund",
            "--never-mention",
            "refunded",
            "--goal",
            "no refund outside the policy's windows",
            "--by",
            "kim",
            "--reason",
            "960.00 refunded on day 73",
            "--rubric",
            str(folder / "rubric.toml"),
        )
        == 0
    )
    return folder


def _student(subs: Path, name: str, guard: str) -> Path:
    root = make_submission(subs / name)
    path = root / REFUNDS
    text = path.read_text("utf-8")
    assert FIXED in text
    path.write_text(text.replace(FIXED, guard), "utf-8")
    (root / "yes.py").write_text(YES_PROVIDER, "utf-8")
    return root


def _batches(course: Path) -> list[dict[str, Any]]:
    lines = (course / "regression" / "ledger.jsonl").read_text("utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == "case_batch"]


@pytest.mark.slow
def test_a_saved_case_runs_against_a_cohort_before_it_is_promoted(
    tmp_path: Path,
    course: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    subs = tmp_path / "subs"
    alice, bob = _student(subs, "alice", FIXED), _student(subs, "bob", TRUSTING)
    rubric = str(course / "rubric.toml")
    run = ("case", "run", "case-1", "--by", "lee", "--rubric", rubric, "--wall", "process")

    # Before bob records the case's task, his run meets nothing to answer it: told how.
    capsys.readouterr()
    assert gradekit_in_process(*run, "--root", str(bob)) == 1
    shown = capsys.readouterr().out
    assert "bob  case-1 v1  failed: first divergence at call 2 (provider)" in shown
    assert f"record the case (`make record ARGS='--case {RECORDING}'`)" in shown

    for root in (alice, bob):  # what `make record ARGS='--case cases/case-1'` does
        assert (
            record_in_process(root, course / "rubric.toml", "yes:provider", "--case", RECORDING)
            == 0
        )
        assert (root / "cassettes" / f"{RECORDING}.json").is_file()

    capsys.readouterr()
    assert gradekit_in_process(*run, "--submissions", str(subs), "--key", "week-3") == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "alice  case-1 v1  passed"
    assert lines[1] == (
        "bob  case-1 v1  failed: first divergence at call 3 (issue_refund): "
        "expected no call of issue_refund; observed issue_refund called 1 "
        "time(s), first as call 3"
    )
    assert lines[2].startswith("batch-2 completed: 1 passed, 1 failed (2 of 2 runs), by lee ")
    assert lines[2].endswith("; no grade changed")

    batch = _batches(course)[-1]
    assert (batch["batch"], batch["status"], batch["operator"], batch["idempotency_key"]) == (
        "batch-2",
        "completed",
        "lee",
        "week-3",
    )
    assert batch["cases"] == [{"case": "case-1", "version": 1}]
    assert [(r["submission"], r["verdict"]) for r in batch["results"]] == [
        ("alice", "passed"),
        ("bob", "failed"),
    ]
    assert not (tmp_path / "grades").exists() and not (course / "grades").exists()

    # The same key again is the same batch: shown, nothing run, nothing appended.
    ledger = (course / "regression" / "ledger.jsonl").read_bytes()
    assert gradekit_in_process(*run, "--submissions", str(subs), "--key", "week-3") == 1
    again = capsys.readouterr().out
    assert "already run under key week-3" in again and lines[1] in again
    assert (course / "regression" / "ledger.jsonl").read_bytes() == ledger

    # Fixed, bob passes: a new batch, the case still unpromoted.
    path = bob / REFUNDS
    path.write_text(path.read_text("utf-8").replace(TRUSTING, FIXED), "utf-8")
    assert gradekit_in_process(*run, "--root", str(bob)) == 0
    assert capsys.readouterr().out.splitlines()[0] == "bob  case-1 v1  passed"
    assert len(_batches(course)) == 3


@pytest.mark.slow
def test_a_case_run_refuses_an_archived_case_and_says_when_nothing_could_run(
    tmp_path: Path,
    course: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rubric = str(course / "rubric.toml")
    empty = tmp_path / "subs" / "carol"
    empty.mkdir(parents=True)  # no pyproject.toml: nothing to run
    capsys.readouterr()
    assert (
        gradekit_in_process(
            "case",
            "run",
            "case-1",
            "--root",
            str(empty),
            "--by",
            "lee",
            "--rubric",
            rubric,
            "--wall",
            "process",
        )
        == 1
    )
    shown = capsys.readouterr().out
    assert "carol  case-1 v1  not_run: first divergence at run" in shown
    assert "batch-1 failed: 1 not run (0 of 1 runs)" in shown
    assert (
        gradekit_in_process(
            "case", "archive", "case-1", "--by", "kim", "--reason", "gone", "--rubric", rubric
        )
        == 0
    )
    assert (
        gradekit_in_process(
            "case", "run", "case-1", "--root", str(empty), "--by", "lee", "--rubric", rubric
        )
        == 2
    )
    assert "archived" in capsys.readouterr().err
    assert (
        gradekit_in_process(
            "case", "run", "case-9", "--root", str(empty), "--by", "lee", "--rubric", rubric
        )
        == 2
    )
