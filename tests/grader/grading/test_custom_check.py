"""An instructor's own check, named in the rubric and imported from the rubric's folder.

Only ever the instructor's rubric: a rubric inside a submission is never read, since
its custom checks would run in the grader's own process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from grader import RubricError, grade_submission, load_rubric
from grader.batch._batch import grade_batch
from tests.submissions import make_submission

REPO = Path(__file__).resolve().parents[3]

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
    report = grade_submission(
        submission, rubric, submission="alice", label="provider-a", scratch=tmp_path / "scratch"
    ).report
    custom = next(c for c in report.criteria if c.id == "stretch_goal")
    answer_mentions = "refund" in _reference_answer().lower()
    assert custom.checks[0].passed is answer_mentions
    assert custom.points == (Decimal("10.00") if answer_mentions else Decimal("0.00"))
    assert custom.checks[0].detail in ("mentions a refund", "never says refund")


def _reference_answer() -> str:
    from gradekit import Replay, ToolReplay
    from lab.agent import run

    task = next(
        c.task
        for c in load_rubric(REPO / "rubric" / "bootcamp.toml").cases
        if c.id == "refund-policy"
    )
    return run(
        Replay(REPO / "cassettes" / "refund-policy.json"),
        task,
        ToolReplay(REPO / "fixtures" / "refund-policy.json"),
    )


def test_a_custom_check_that_does_not_import_is_a_rubric_error(instructor: Path) -> None:
    next(instructor.glob("course_checks_*.py")).unlink()
    with pytest.raises(RubricError, match="course_checks"):
        load_rubric(instructor / "rubric.toml")


@pytest.mark.slow
def test_a_custom_check_scores_its_criterion_in_the_batch_workers_too(
    instructor: Path, tmp_path: Path
) -> None:
    """Each worker imports the check from the folder this process imported it from."""
    submission = make_submission(tmp_path / "subs" / "alice")
    rubric = load_rubric(instructor / "rubric.toml")
    rows = grade_batch([submission], rubric, out=tmp_path / "out", jobs=1, label="provider-a")
    assert rows[0].status == "graded", rows[0].reason
    answer_mentions = "refund" in _reference_answer().lower()
    assert rows[0].criteria["stretch_goal"] == ("10.00" if answer_mentions else "0.00")


EVIL_CHECK = textwrap.dedent(
    """
    from pathlib import Path

    Path({marker!r}).write_text("the submission's code ran in the grader's process")


    def check(evidence, rubric, criterion):
        raise AssertionError("never called: importing was the attack")
    """
)


@pytest.mark.slow
def test_check_never_reads_a_rubric_from_the_submission(tmp_path: Path) -> None:
    """A student plants rubric/bootcamp.toml naming a "custom check" of their own: `gradekit
    check` used to import it, and so run it, in its own process (as root, on a grading box)."""
    root = make_submission(tmp_path / "mallory")
    marker, module = tmp_path / "pwned", f"evil_{uuid.uuid4().hex}"
    (root / "rubric" / f"{module}.py").write_text(EVIL_CHECK.format(marker=str(marker)), "utf-8")
    planted = (root / "rubric" / "bootcamp.toml").read_text("utf-8")
    planted = planted.replace('check = "stretch_goal"', f'check = "{module}:check"')
    planted = planted.replace("[criterion.points]\nevidence = 6\nwrite_up = 4\n", "")
    (root / "rubric" / "bootcamp.toml").write_text(planted, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check", str(root)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert not marker.exists(), "the submission's rubric/ code ran in the grader's process"
    assert done.returncode == 0, (done.stdout, done.stderr)  # graded by the kit's rubric
    assert [line.split()[0] for line in done.stdout.splitlines()[:3]] == ["PASS"] * 3
