"""A regression set's items replayed against a submission's code: the sandboxed agent asks,
the grader serves every crossing from the item's record and sees every action it tries.

The incident is the reference lab's real one (SmolLM2 said yes to a refund on day 73 and
the buggy guard issued 960.00); the case item is the reference lab's real recording of
refund-policy. Each variant is a copy of the reference lab with one edit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from grader._expect import Expectation
from grader._model import ItemRun, Limits
from grader.grading._regression import replay_set
from grader.regression._sets import Item, RegressionSet
from grader.rubric._rubric import Criterion, Rubric, load_rubric
from grader.sandbox import ProcessWall, Sandbox, Wall
from grader.scoring._checks import Evidence
from grader.scoring._judged import regression
from tests.submissions import REFERENCE, make_submission

INCIDENT = REFERENCE / "incidents" / "refund-outside-window.jsonl"
REFUNDS = Path("lab") / "refunds" / "__init__.py"
FIXED = "return _decide(follows_the_policy, provider, task, tools)"
NO_REFUND = Expectation("answer", ("refused",), ("refunded",), ("issue_refund",))


def _incident_item(**changes: object) -> Item:
    task = ("Student chen asks for a full refund of the Spring 2025 seat; the request "
            "reached the course office on 2025-03-20.")
    fields: dict[str, object] = dict(
        id="refund-outside-window", kind="incident", task=task, agent="lab.refunds:run",
        expect=NO_REFUND, added_in=1, source={}, reviewed_by="kim", reason="real",
        live=("issue_refund",), incident=INCIDENT.read_bytes())
    fields.update(changes)
    return Item(**fields)  # type: ignore[arg-type]


def _case_item() -> Item:
    rubric = load_rubric(REFERENCE / "rubric" / "bootcamp.toml")
    task = next(case.task for case in rubric.cases if case.id == "refund-policy")
    return Item(id="refund-policy-answer", kind="case", task=task, agent="lab.agent:run",
                expect=Expectation("answer", ("refund",)), added_in=1, source={},
                reviewed_by="kim", reason="real",
                cassette=(REFERENCE / "cassettes" / "refund-policy.json").read_bytes(),
                fixture=(REFERENCE / "fixtures" / "refund-policy.json").read_bytes())


def _judged(tmp_path: Path, edit: tuple[str, str] | None, isolation: Wall,
            *items: Item) -> dict[str, _Judged]:
    root = make_submission(tmp_path / "sub")
    if edit is not None:
        path = root / REFUNDS
        text = path.read_text("utf-8")
        assert edit[0] in text
        path.write_text(text.replace(edit[0], edit[1]), "utf-8")
    pinned = RegressionSet(name="refunds", version=1, sha256="0" * 64, supersedes=None,
                           created_by="kim", items=items)
    runs = replay_set(Sandbox(root, tmp_path / "scratch", Limits(), isolation), pinned,
                      label="openai:gpt-4o-mini", hashseed=7)
    evidence = Evidence(cases=(), label="x", primary=None, others=(), loud=(),
                        probe=None, failures=None, stretch=(), second_set=None,
                        regression={pinned.ref: runs})
    criterion = Criterion(id="regression", title="Regression", weight=10, check="regression",
                          full="f", typical_loss="t", points={}, params={"set": pinned.ref})
    rubric = Rubric(id="r", version=1, title="t", cases=(), criteria=(criterion,),
                    limits=Limits(), sha256="", sets={pinned.ref: pinned})
    result = regression(evidence, rubric, criterion)
    return {check.id: _Judged(check.passed, str(check.points), check.detail, check.degraded,
                              _calls(runs.get(check.id))) for check in result.checks}


@dataclass(frozen=True)
class _Judged:
    passed: bool
    points: str
    detail: str
    degraded: bool
    calls: list[tuple[str, bool]]  # (tool, or "model"; served) as the grader saw them


def _calls(run: ItemRun | None) -> list[tuple[str, bool]]:
    outcome = None if run is None else run.outcome
    return [] if outcome is None else [(c.tool or "model", c.served) for c in outcome.calls]


@pytest.mark.slow
def test_the_fixed_guard_issues_nothing_and_meets_the_item(tmp_path: Path,
                                                           isolation: Wall) -> None:
    judged = _judged(tmp_path, None, isolation, _incident_item())["refund-outside-window"]
    assert judged.passed and judged.points == "10.00", judged
    # The read and the model were served from the record; no action was tried.
    assert judged.calls == [("refund_terms", True), ("model", True)]
    assert judged.detail.startswith("met: the expected answer; mentions 'refused'")


@pytest.mark.slow
def test_the_buggy_guard_tries_the_forbidden_action_and_the_grader_sees_it(
    tmp_path: Path, isolation: Wall,
) -> None:
    buggy = (FIXED, "return _decide(trusts_the_model, provider, task, tools)")
    judged = _judged(tmp_path, buggy, isolation, _incident_item())["refund-outside-window"]
    assert not judged.passed and judged.points == "0.00"
    assert judged.calls == [("refund_terms", True), ("model", True), ("issue_refund", True)]
    assert judged.detail == ("called the forbidden action issue_refund (1 time(s)); the "
                                "answer does not mention 'refused'; the answer mentions "
                                "'refunded', which it must not")


@pytest.mark.slow
def test_a_changed_prompt_leaves_the_record_and_is_never_fed_a_stale_answer(
    tmp_path: Path,
) -> None:
    changed = ("Should the refund be granted?", "Should we grant the refund?")
    judged = _judged(tmp_path, changed, ProcessWall(), _incident_item())["refund-outside-window"]
    assert not judged.passed
    assert judged.detail == ("the replay left the item's recorded run: crossing 1 (model #1): "
                             "its input is not the recorded one")
    assert judged.calls == [("refund_terms", True), ("model", False)]  # a miss, no answer


@pytest.mark.slow
def test_a_case_item_is_served_from_its_own_recording(tmp_path: Path) -> None:
    judged = _judged(tmp_path, None, ProcessWall(), _case_item(),
                     _incident_item(id="second", expect=Expectation("raise")))
    case = judged["refund-policy-answer"]
    assert case.passed and case.points == "5.00", case
    assert ("model", False) not in case.calls and ("read_docs", True) in case.calls
    # Each item is judged on its own: the second expects a raise and the agent answers.
    second = judged["second"]
    assert (second.passed, second.detail) == (
        False, "expected run() to raise, but it returned an answer")


@pytest.mark.slow
def test_an_item_whose_recording_is_gone_is_degraded_and_not_run(tmp_path: Path) -> None:
    gone = _incident_item(incident=None, missing="items/abc.jsonl is missing from the set: "
                          "restore it")
    judged = _judged(tmp_path, None, ProcessWall(), gone, _case_item())
    assert judged["refund-outside-window"].degraded is True
    assert judged["refund-outside-window"].points == "0.00"
    assert judged["refund-outside-window"].calls == []
    assert "items/abc.jsonl is missing" in judged["refund-outside-window"].detail
    assert judged["refund-policy-answer"].passed


@pytest.mark.slow
def test_an_item_agent_the_submission_lacks_fails_with_the_import_error(
    tmp_path: Path,
) -> None:
    judged = _judged(tmp_path, None, ProcessWall(),
                     _incident_item(agent="lab.refundz:run"))["refund-outside-window"]
    assert not judged.passed and not judged.degraded
    assert judged.detail.startswith("the agent lab.refundz:run could not be imported")
