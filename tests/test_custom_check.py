"""An instructor's own check, named in the rubric and imported from the rubric's folder."""

from __future__ import annotations

import shutil
import textwrap
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from grader import RubricError, grade_submission, load_rubric

REPO = Path(__file__).resolve().parents[1]

CHECK = textwrap.dedent(
    '''
    from decimal import Decimal

    from grader import CheckResult, CriterionResult


    def answers_mention_refund(evidence, rubric, criterion):
        """Full marks when the primary run's refund-policy answer mentions a refund."""
        outcome = evidence.primary.outcomes["refund-policy"]
        found = "refund" in (outcome.answer or "").lower()
        weight = Decimal(criterion.weight).quantize(Decimal("0.01"))
        check = CheckResult("refund-policy", found, weight if found else Decimal("0.00"),
                            weight, "mentions a refund" if found else "never says refund")
        return CriterionResult(criterion.id, criterion.title, check.points, weight, (check,))
    '''
)


@pytest.fixture
def instructor(tmp_path: Path) -> Path:
    """A rubric folder with its own checks module (a fresh module name: imports are cached)."""
    folder = tmp_path / "instructor"
    folder.mkdir()
    module = f"course_checks_{uuid.uuid4().hex}"
    (folder / f"{module}.py").write_text(CHECK, encoding="utf-8")
    rubric = (REPO / "rubric" / "bootcamp.toml").read_text("utf-8")
    rubric = rubric.replace('check = "stretch_goal"', f'check = "{module}:answers_mention_refund"')
    rubric = rubric.replace("[criterion.points]\nevidence = 6\nwrite_up = 4\n", "")
    (folder / "rubric.toml").write_text(rubric, encoding="utf-8")
    return folder


@pytest.mark.slow
def test_a_custom_check_scores_its_criterion(instructor: Path, tmp_path: Path) -> None:
    submission = tmp_path / "alice"
    for part in ("lab", "cassettes", "fixtures", "rubric"):
        shutil.copytree(REPO / part, submission / part)
    for part in ("pyproject.toml", "FAILURES.md"):
        shutil.copy(REPO / part, submission / part)
    rubric = load_rubric(instructor / "rubric.toml")
    report = grade_submission(submission, rubric, label="provider-a",
                              scratch=tmp_path / "scratch").report
    custom = next(c for c in report.criteria if c.id == "stretch_goal")
    answer_mentions = "refund" in _reference_answer().lower()
    assert custom.checks[0].passed is answer_mentions
    assert custom.points == (Decimal("10.00") if answer_mentions else Decimal("0.00"))
    assert custom.checks[0].detail in ("mentions a refund", "never says refund")


def _reference_answer() -> str:
    from lab import Replay, ToolReplay
    from lab.agent import run

    task = next(c.task for c in load_rubric(REPO / "rubric" / "bootcamp.toml").cases
                if c.id == "refund-policy")
    return run(Replay(REPO / "cassettes" / "refund-policy.json"), task,
               ToolReplay(REPO / "fixtures" / "refund-policy.json"))


def test_a_custom_check_that_does_not_import_is_a_rubric_error(instructor: Path) -> None:
    next(instructor.glob("course_checks_*.py")).unlink()
    with pytest.raises(RubricError, match="course_checks"):
        load_rubric(instructor / "rubric.toml")
