"""The reference lab claims every stretch goal the rubric offers, and the grader shows each
one's evidence: the best goal scores, the others are shown beside it, each holding.

The cut-point goal is pinned on the reference itself: its cut-point test
(``lab.refunds.regression``) passes in the sandbox on the lab's own guard and fails once
the grader replaces ``lab.refunds:follows_the_policy`` by a guard that allows every action.
"""

from __future__ import annotations

import shutil
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

from grader import grade_submission, load_rubric
from grader.rubric import KIT_RUBRIC
from grader.sandbox import Sandbox, Wall, cut_point_problem
from grader.scoring import STRETCH_GOALS

pytestmark = pytest.mark.slow  # each test runs the reference's code in the sandbox

REFERENCE = Path(__file__).resolve().parents[2]
# What a student's copy of the kit holds: the repository without caches, builds or grades.
IGNORED = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "__pycache__",
    "*.pyc",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "build",
    "grades",
    "tests",
    "bench",
    "examples",
)
MANIFEST = tomllib.loads((REFERENCE / "pyproject.toml").read_text("utf-8"))["tool"]["gradekit"]


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    """A copy of the reference lab, so edits to the checkout cannot reach the grading."""
    copy = tmp_path / "reference"
    shutil.copytree(REFERENCE, copy, ignore=IGNORED)
    return copy


def test_the_reference_claims_every_stretch_goal_the_grader_offers() -> None:
    assert sorted(MANIFEST["stretch"]) == sorted(STRETCH_GOALS)


def test_the_cut_point_test_fails_on_the_reference_once_its_guard_allows_everything(
    reference: Path, tmp_path: Path, isolation: Wall
) -> None:
    rubric = load_rubric(KIT_RUBRIC)
    sandbox = Sandbox(reference, tmp_path / "scratch", rubric.limits, isolation)
    test, guard = MANIFEST["incident_test"], MANIFEST["guard"]
    own, allowing = (
        sandbox.within(f"cut-point-{allow_all}").run_cut_point_test(
            test, guard, allow_all=allow_all
        )
        for allow_all in (False, True)
    )
    assert (own.passed, own.tampering) == (True, ""), own.detail
    assert (allowing.passed, allowing.tampering) == (False, "")
    assert "issue_refund was tried again" in allowing.detail  # the refund ran, not an error
    assert "lab/refunds/regression.py" in allowing.detail
    assert cut_point_problem(own, allowing, test=test, guard=guard) is None
    # Judged the other way round (the test passing with every action allowed), it is
    # refused: a test that passes either way cannot fail.
    why = cut_point_problem(own, own, test=test, guard=guard)
    assert why is not None and "allows every action" in why


def test_grading_the_reference_shows_the_evidence_of_every_goal(
    reference: Path, tmp_path: Path
) -> None:
    report = grade_submission(
        reference, load_rubric(KIT_RUBRIC), submission="reference", scratch=tmp_path / "scratch"
    ).report
    assert (report.total, report.max) == (Decimal(100), Decimal(100))
    assert report.findings == ()
    goal = next(c for c in report.criteria if c.id == "stretch_goal")
    assert (goal.points, goal.max) == (Decimal(10), Decimal(10))
    checks = {check.id: check for check in goal.checks}
    assert sorted(checks) == sorted(
        f"{claim}: {part}" for claim in MANIFEST["stretch"] for part in ("evidence", "write-up")
    )
    for check in goal.checks:
        assert check.passed, (check.id, check.detail)
    for claim in MANIFEST["stretch"]:
        assert "the evidence holds: " in checks[f"{claim}: evidence"].detail, claim
        assert checks[f"{claim}: write-up"].detail.endswith("FAILURES.md has an entry naming it")
    scored = [check.id for check in goal.checks if check.max > 0]
    assert scored == [f"{MANIFEST['stretch'][0]}: evidence", f"{MANIFEST['stretch'][0]}: write-up"]
    assert checks["cut-point: evidence"].detail.endswith(
        "the evidence holds: lab.refunds.regression:refund_outside_window_is_not_issued passes "
        "on the submission's guard and fails when it allows every action"
    )
    assert "incidents/refund-outside-window.jsonl" in report.inputs
