"""A regression set's items run against a submission's code, each served from that
submission's own recordings of the item: the sandboxed agent asks, the grader answers from
the item's world and the student's cassette, and sees every action it tries.

The item is the reference lab's real incident (SmolLM2 said yes to a refund on day 73 and
the buggy guard issued 960.00), promoted with its world: the reads it recorded. Every
student records the item's task themselves (``gradekit record`` against a provider that
always says yes), as ``make record`` asks; their prompts are their own. Carol's refund desk
is written from scratch, unlike the reference in every line: it is graded on her prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from gradekit import decode_incident, tool_key
from grader import Expectation, ItemRun, Limits
from grader.grading._reading import _item_recordings, item_cases
from grader.grading._regression import ItemRecordings, _Served, replay_set
from grader.regression import Item, add_item, recording_name, world_json
from grader.rubric import Criterion, Rubric, load_rubric
from grader.sandbox import ProcessWall, Sandbox, Wall
from grader.scoring import Evidence, regression
from grader.submission import load_manifest
from tests.submissions import (
    REFERENCE,
    REFUND_DESK,
    YES_PROVIDER,
    gradekit_in_process,
    make_submission,
    record_in_process,
)

INCIDENT = REFERENCE / "incidents" / "refund-outside-window.jsonl"
REFUNDS = Path("lab") / "refunds" / "__init__.py"
FIXED = "return _decide(follows_the_policy, provider, task, tools)"
NO_REFUND = Expectation(
    "answer",
    ("refused",),
    ("refunded",),
    ("issue_refund",),
    goal="no refund outside the policy's windows",
)
ITEM = "refund-outside-window"
NAME = recording_name("refunds", ITEM)  # regression/refunds/refund-outside-window
KIT = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
PINNED = (
    KIT.replace("weight = 30", "weight = 20", 1)
    + """
[[criterion]]
id = "regression"
title = "Known failures stay fixed"
weight = 10
check = "regression"
full = "f"
typical_loss = "t"
[criterion.params]
set = "refunds@1"
"""
)


def _world() -> bytes:
    incident = decode_incident(INCIDENT.read_bytes(), source=str(INCIDENT))
    return world_json(
        (e.boundary, e.input.get("args", {}), e.output)
        for e in incident.envelopes
        if e.kind != "model" and e.error is None
    )


def _item(**changes: object) -> Item:
    incident = decode_incident(INCIDENT.read_bytes(), source=str(INCIDENT))
    fields: dict[str, object] = dict(
        id=ITEM,
        kind="incident",
        task=incident.task,
        agent="lab.refunds:run",
        expect=NO_REFUND,
        added_in=0,
        source={
            "case": "case-1",
            "version": 1,
            "candidate": "cand-1",
            "approved_by": "kim",
            "run": {
                "path": "incidents/refund-outside-window.jsonl",
                "report": "0" * 64,
                "seq": 2,
                "student": "alice",
                "submission": "alice",
            },
        },
        reviewed_by="kim",
        reason="960.00 refunded on day 73",
        world=_world(),
    )
    fields.update(changes)
    return Item(**fields)  # type: ignore[arg-type]


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A course whose rubric pins refunds@1: the incident's item, as promotion publishes it."""
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "rubric.toml").write_text(PINNED, "utf-8")
    add_item(folder / "regression", "refunds", _item(), created_by="kim", then=lambda *_: None)
    return folder


def _student(
    tmp_path: Path, name: str, edit: tuple[str, str] | None = None, whole: str | None = None
) -> Path:
    root = make_submission(tmp_path / name)
    path = root / REFUNDS
    if whole is not None:
        path.write_text(whole, "utf-8")
    if edit is not None:
        text = path.read_text("utf-8")
        assert edit[0] in text
        path.write_text(text.replace(edit[0], edit[1]), "utf-8")
    (root / "yes.py").write_text(YES_PROVIDER, "utf-8")
    return root


def _record(root: Path, course: Path) -> None:
    """``make record``'s item, as a student runs it."""
    assert record_in_process(root, course / "rubric.toml", "yes:provider", "--case", NAME) == 0


@dataclass(frozen=True)
class _Judged:
    passed: bool
    points: str
    detail: str
    degraded: bool
    calls: list[tuple[str, bool]]  # (tool, or "model"; served) as the grader saw them
    verdict: str = ""
    divergence: tuple[str, str, str] | None = None  # the first point: at, expected, observed


PROCESS = ProcessWall()


def _judged(
    root: Path, course: Path, isolation: Wall = PROCESS, items: tuple[Item, ...] | None = None
) -> dict[str, _Judged]:
    rubric = load_rubric(course / "rubric.toml")
    pinned = rubric.sets["refunds@1"]
    assert pinned is not None
    if items is not None:
        pinned = type(pinned)(pinned.name, pinned.version, pinned.sha256, None, "kim", items)
    recordings, findings = _item_recordings(root, load_manifest(root), item_cases(rubric))
    assert findings == []
    scratch = root.parent / f"{root.name}-scratch"
    runs = replay_set(
        Sandbox(root, scratch, Limits(), isolation),
        pinned,
        "lab.agent:run",
        recordings,
        label="openai:gpt-4o-mini",
        hashseed=7,
    )
    evidence = Evidence(
        cases=(),
        label="x",
        primary=None,
        others=(),
        loud=(),
        probe=None,
        failures=None,
        stretch=(),
        second_set=None,
        regression={pinned.ref: runs},
    )
    criterion = Criterion(
        id="regression",
        title="Regression",
        weight=10,
        check="regression",
        full="f",
        typical_loss="t",
        points={},
        params={"set": pinned.ref},
    )
    judged = Rubric(
        id="r",
        version=1,
        title="t",
        cases=(),
        criteria=(criterion,),
        limits=Limits(),
        sha256="",
        sets={pinned.ref: pinned},
    )
    result = regression(evidence, judged, criterion)
    return {
        check.id: _Judged(
            check.passed,
            str(check.points),
            check.detail,
            check.degraded,
            _calls(runs.get(check.id)),
            check.verdict,
            None
            if check.divergence is None
            else (check.divergence.at, check.divergence.expected, check.divergence.observed),
        )
        for check in result.checks
    }


def _calls(run: ItemRun | None) -> list[tuple[str, bool]]:
    outcome = None if run is None else run.outcome
    return [] if outcome is None else [(c.tool or "model", c.served) for c in outcome.calls]


@pytest.mark.slow
def test_the_fixed_guard_records_the_item_and_meets_it(
    tmp_path: Path,
    course: Path,
    isolation: Wall,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice = _student(tmp_path, "alice")
    _record(alice, course)
    recorded = alice / "cassettes" / "regression" / "refunds" / f"{ITEM}.json"
    assert recorded.is_file()  # the student's own answer to their own prompt
    # `gradekit run` replays it offline, the world answering the read.
    assert (
        gradekit_in_process(
            "run", "--root", str(alice), "--rubric", str(course / "rubric.toml"), "--case", NAME
        )
        == 0
    )
    assert capsys.readouterr().out == (
        f"## {NAME}\nrefused: chen's request reached us on "
        "day 73 after the purchase; the policy gives 0%\n\n"
    )
    judged = _judged(alice, course, isolation)[ITEM]
    assert judged.passed and judged.points == "10.00", judged
    # The read came from the item's world, the model from alice's recording; no action.
    assert judged.calls == [("refund_terms", True), ("model", True)]
    assert judged.detail.startswith("met: the expected answer; mentions 'refused'")


@pytest.mark.slow
def test_a_student_who_wrote_every_line_differently_is_graded_on_her_own_prompts(
    tmp_path: Path,
    course: Path,
) -> None:
    carol = _student(tmp_path, "carol", whole=REFUND_DESK)
    _record(carol, course)
    judged = _judged(carol, course)[ITEM]
    assert judged.passed and judged.points == "10.00", judged
    assert (judged.verdict, judged.divergence) == ("passed", None)
    assert judged.calls == [("refund_terms", True), ("model", True)]
    # Her guard trusting the model instead: the same mistake as the incident's, in her words.
    trusting = _student(
        tmp_path,
        "carol-trusting",
        whole=REFUND_DESK.replace(
            'return terms["refund_cents"] if says_yes else 0',
            'return terms["paid_cents"] if says_yes else 0',
        ),
    )
    _record(trusting, course)
    judged = _judged(trusting, course)[ITEM]
    assert not judged.passed and judged.points == "0.00"
    assert ("issue_refund", True) in judged.calls  # the incident's twin: the same arguments
    assert judged.detail.startswith("called the forbidden action issue_refund (1 time(s))")


@pytest.mark.slow
def test_the_buggy_guard_tries_the_forbidden_action_and_the_grader_sees_it(
    tmp_path: Path,
    course: Path,
    isolation: Wall,
) -> None:
    bob = _student(
        tmp_path, "bob", (FIXED, "return _decide(trusts_the_model, provider, task, tools)")
    )
    _record(bob, course)
    judged = _judged(bob, course, isolation)[ITEM]
    assert not judged.passed and judged.points == "0.00"
    # The action is answered as the incident recorded it (the same arguments), never run.
    assert judged.calls == [("refund_terms", True), ("model", True), ("issue_refund", True)]
    assert judged.detail == (
        "called the forbidden action issue_refund (1 time(s)); the "
        "answer does not mention 'refused'; the answer mentions "
        "'refunded', which it must not"
    )
    # Its verdict, and the first point of divergence: the third call, the forbidden one.
    assert (judged.verdict, judged.divergence) == (
        "failed",
        (
            "call 3 (issue_refund)",
            "no call of issue_refund",
            "issue_refund called 1 time(s), first as call 3",
        ),
    )


@pytest.mark.slow
def test_a_prompt_changed_since_the_recording_is_a_miss_that_says_to_record_again(
    tmp_path: Path,
    course: Path,
) -> None:
    dave = _student(tmp_path, "dave")
    _record(dave, course)
    refunds = dave / REFUNDS
    refunds.write_text(
        refunds.read_text("utf-8").replace(
            "Should the refund be granted?", "Should we grant the refund?"
        ),
        "utf-8",
    )
    judged = _judged(dave, course)[ITEM]
    assert not judged.passed
    assert judged.calls == [("refund_terms", True), ("model", False)]  # a miss, no answer
    assert judged.detail.startswith(
        f"the replay left the item's recorded run: cassettes/{NAME}.json does not hold this "
        "prompt (key "
    )
    assert f"record the item (`make record ARGS='--case {NAME}'`)" in judged.detail
    # The first point of divergence is the model call, the second; the other side is
    # what the recordings hold instead.
    assert judged.divergence is not None and judged.verdict == "failed"
    at, expected, observed = judged.divergence
    assert (at, expected) == (
        "call 2 (provider)",
        "every call answered by its world or the recordings of its task",
    )
    assert observed.startswith(f"cassettes/{NAME}.json does not hold this prompt (key ")


@pytest.mark.slow
def test_a_student_who_never_recorded_the_item_is_told_to(
    tmp_path: Path,
    course: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    erin = _student(tmp_path, "erin")
    judged = _judged(erin, course)[ITEM]
    assert not judged.passed and not judged.degraded
    assert f"cassettes/{NAME}.json is missing, so nothing holds this prompt" in judged.detail
    # `make check` says so too, with the command that records it.
    assert (
        gradekit_in_process(
            "check", str(erin), "--rubric", str(course / "rubric.toml"), "--wall", "process"
        )
        == 1
    )
    shown = capsys.readouterr().out
    assert (
        f"    - {ITEM}: the replay left the item's recorded run: cassettes/{NAME}.json is "
        "missing, so nothing holds this prompt" in shown
    )
    assert f"gradekit record --case {NAME}" in shown  # erin's folder has no Makefile


def test_the_items_world_is_served_before_the_students_own_fixture() -> None:
    world = {tool_key("refund_terms", {"student": "chen"}): {"day": 73}}
    mine = {
        NAME: {
            tool_key("refund_terms", {"student": "chen"}): {"day": 5},
            tool_key("glossary", {"term": "refund"}): {"meaning": "m"},
        }
    }
    served = _Served({NAME: world}, ItemRecordings({}, mine, {}))
    assert served.tool(NAME, tool_key("refund_terms", {"student": "chen"})) == (True, {"day": 73})
    assert served.tool(NAME, tool_key("glossary", {"term": "refund"})) == (True, {"meaning": "m"})
    assert served.tool(NAME, tool_key("glossary", {"term": "sql"})) == (False, None)
    assert served.tool("regression/refunds/other", tool_key("glossary", {"term": "refund"})) == (
        False,
        None,
    )


@pytest.mark.slow
def test_an_item_whose_world_is_gone_is_degraded_and_not_run(tmp_path: Path, course: Path) -> None:
    alice = _student(tmp_path, "alice")
    gone = _item(
        added_in=1, world=None, missing="refunds/items/abc.json is missing from the set: restore it"
    )
    second = _item(id="second", added_in=1, agent=None, expect=Expectation("raise", goal="g"))
    aimless = _item(id="aimless", added_in=1, expect=Expectation("answer"))
    judged = _judged(alice, course, items=(gone, second, aimless))
    # An item without a business goal cannot pass: degraded, not run.
    assert judged["aimless"].degraded is True and judged["aimless"].calls == []
    assert judged["aimless"].detail.startswith(
        "item aimless has no business goal, so it cannot pass: revise its case with --goal"
    )
    assert judged[ITEM].degraded is True and judged[ITEM].points == "0.00"
    assert judged[ITEM].calls == []
    assert "items/abc.json is missing" in judged[ITEM].detail
    # Each item is judged on its own: the second asks the submission's own agent (lab.agent),
    # which has no recording of it, and expects a raise.
    assert not judged["second"].degraded and judged["second"].calls


@pytest.mark.slow
def test_an_item_agent_the_submission_lacks_fails_with_the_import_error(
    tmp_path: Path,
    course: Path,
) -> None:
    alice = _student(tmp_path, "alice")
    judged = _judged(alice, course, items=(_item(added_in=1, agent="lab.refundz:run"),))[ITEM]
    assert not judged.passed and not judged.degraded
    assert judged.detail.startswith("the agent lab.refundz:run could not be imported")
