"""The ``cut-point`` stretch goal: the submission's incident test must pass on its own guard
and fail once the grader replaces that guard with one that allows everything. Both runs
happen in the sandbox."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from grader import grade_submission, load_rubric
from grader.rubric import KIT_RUBRIC
from grader.sandbox import ProcessWall, Wall
from tests.submissions import make_submission

pytestmark = pytest.mark.slow  # each test runs a submission's incident test in the sandbox

REFUNDS = """
from gradekit import Tools


def may_refund(policy, amount):
    return amount <= policy["max_refund"]{bug}


def run(provider, task, tools):
    decision = provider.complete("Should we refund? " + task)
    policy = tools.call("policy", student="s1")
    if decision.lower().startswith("yes") and may_refund(policy, 120):
        tools.call("issue_refund", student="s1", amount=120)
        return "refunded"
    return "refused"


def _issue(store, student, amount):
    store.setdefault("refunds", []).append(amount)
    return {{"refunded": amount}}


TOOLS = Tools()
TOOLS.read_only("policy", lambda student: {{"max_refund": 100}})
TOOLS.write("issue_refund", _issue)
"""

INCIDENT_TEST = """
from pathlib import Path

from gradekit import Plan, replay_incident
from lab import refund_guard as refunds

INCIDENT = Path(__file__).resolve().parents[1] / "incidents" / "refund.jsonl"


def test_the_refund_outside_the_policy_is_blocked():
    replayed = replay_incident(INCIDENT, refunds.run, plan=Plan.of({plan}), tools=refunds.TOOLS)
    assert {assertion}
"""

WRITE_UP = """
## A refund outside the policy went through (cut-point)
- Symptom: the agent refunded 120 where the policy allows 100, and every replay agreed.
- Cause: the guard compared nothing; a full replay served the recorded refund back.
- Fix: a cut-point test replays the incident with issue_refund live; the guard blocks it.
"""


def submission(
    tmp_path: Path,
    *,
    bug: str = "",
    plan: str = '{"issue_refund"}',
    assertion: str = 'replayed.actions("issue_refund") == []',
) -> Path:
    root = make_submission(tmp_path / "sub")
    (root / "lab" / "refund_guard.py").write_text(textwrap.dedent(REFUNDS.format(bug=bug)), "utf-8")
    (root / "lab" / "incident_test.py").write_text(
        textwrap.dedent(INCIDENT_TEST.format(plan=plan, assertion=assertion)), "utf-8"
    )
    _record(root)
    manifest = root / "pyproject.toml"
    text = manifest.read_text("utf-8").replace(
        'stretch = ["two-providers"]', 'stretch = ["cut-point"]'
    )
    # The reference's own cut-point test and guard, replaced by this submission's.
    for key, value in (
        ("incident_test", "lab.incident_test:test_the_refund_outside_the_policy_is_blocked"),
        ("guard", "lab.refund_guard:may_refund"),
    ):
        text, count = re.subn(rf'(?m)^{key} = ".*"$', f'{key} = "{value}"', text)
        assert count == 1, key
    manifest.write_text(text, "utf-8")
    failures = root / "FAILURES.md"
    failures.write_text(failures.read_text("utf-8") + WRITE_UP, "utf-8")
    return root


def _record(root: Path) -> None:
    """The incident, recorded once with a guard that let the refund through."""
    import importlib.util

    from gradekit import FakeProvider, IncidentRecorder

    spec = importlib.util.spec_from_file_location(
        "refunds_at_incident_time", root / "lab" / "refund_guard.py"
    )
    assert spec is not None and spec.loader is not None
    refunds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refunds)
    vars(refunds)["may_refund"] = lambda policy, amount: True  # the bug the incident caught
    live = FakeProvider(lambda prompt: "yes, refund it", name="fake:model")
    task = "Student s1 asks for 120 back."
    with IncidentRecorder(
        root / "incidents" / "refund.jsonl", case="refund", task=task, provider=live.name
    ) as recorder:
        assert (
            refunds.run(recorder.provider(live), task, recorder.toolbox(refunds.TOOLS))
            == "refunded"
        )


def graded_evidence(root: Path, tmp_path: Path, isolation: Wall) -> tuple[str, str]:
    report = grade_submission(
        root,
        load_rubric(KIT_RUBRIC),
        submission="sub",
        scratch=tmp_path / "scratch",
        wall=isolation,
    ).report
    goal = next(c for c in report.criteria if c.id == "stretch_goal")
    evidence = next(c for c in goal.checks if c.id == "cut-point: evidence")
    return ("passed" if evidence.passed else "failed"), evidence.detail


def test_a_test_that_blocks_the_action_live_holds(tmp_path: Path, isolation: Wall) -> None:
    verdict, detail = graded_evidence(submission(tmp_path), tmp_path, isolation)
    assert verdict == "passed", detail
    assert "lab.incident_test:test_the_refund_outside_the_policy_is_blocked passes" in detail


def test_a_test_that_cannot_fail_does_not_hold(tmp_path: Path) -> None:
    """A test whose assertion no guard can break (the replay ran without an error) passes
    against an allow-all guard too: it checks nothing the incident was about."""
    root = submission(tmp_path, assertion="replayed.error is None")
    verdict, detail = graded_evidence(root, tmp_path, ProcessWall())
    assert verdict == "failed"
    assert "still passes when lab.refund_guard:may_refund allows every action" in detail


def test_a_test_that_fails_on_the_submissions_own_guard_does_not_hold(tmp_path: Path) -> None:
    root = submission(tmp_path, bug=" or True")
    verdict, detail = graded_evidence(root, tmp_path, ProcessWall())
    assert verdict == "failed"
    assert "fails on your own code (AssertionError" in detail
    assert "lab/incident_test.py, line" in detail


def test_a_claim_without_the_manifest_keys_says_what_to_declare(tmp_path: Path) -> None:
    root = submission(tmp_path)
    manifest = root / "pyproject.toml"
    manifest.write_text(
        manifest.read_text("utf-8").replace('guard = "lab.refund_guard:may_refund"\n', ""), "utf-8"
    )
    verdict, detail = graded_evidence(root, tmp_path, ProcessWall())
    assert verdict == "failed"
    assert 'guard = "package.module:function" (the live guard it checks)' in detail
