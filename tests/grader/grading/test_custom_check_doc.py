"""docs/custom-checks.md, followed as written: its check and its criterion, taken from the
page, grade the kit's own lab as the page says they do."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from grader import grade_submission, load_rubric
from tests.submissions import REFERENCE, make_submission

pytestmark = pytest.mark.slow

DOC = REFERENCE / "docs" / "custom-checks.md"


def _block(language: str) -> str:
    """The page's one ``language`` block in its worked example of a check (the page's later
    sections have blocks of their own)."""
    page = DOC.read_text("utf-8")
    start = page.index("\n## A worked example: answers of a readable length\n")
    section = page[start : page.index("\n## ", start + 1)]
    (found,) = re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)
    return str(found)


def _instructor(folder: Path, most_words: str | None = None) -> Path:
    """The page's check as a module of the rubric's folder (a fresh name: imports are
    cached), and the kit's rubric with the page's criterion in place of the stretch goal."""
    folder.mkdir()
    module = f"course_checks_{uuid.uuid4().hex}"
    (folder / f"{module}.py").write_text(_block("python"), "utf-8")
    criterion = _block("toml").replace('"course_checks:', f'"{module}:')
    if most_words is not None:
        criterion = criterion.replace('most_words = "120"', f'most_words = "{most_words}"')
    kit = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
    start = kit.index('[[criterion]]\nid = "stretch_goal"')
    (folder / "rubric.toml").write_text(kit[:start] + criterion, "utf-8")
    return folder / "rubric.toml"


# What the page says the reference lab scores: each limit, the points, the cases it fails.
SAID = [
    (None, "7.50", {"flaky-grade"}),
    ("5", "0.00", {"refund-policy", "incident-summary", "sql-explain", "flaky-grade"}),
]


@pytest.mark.parametrize(("most_words", "points", "failed"), SAID)
def test_the_pages_check_grades_the_kits_lab_as_the_page_says(
    tmp_path: Path, most_words: str | None, points: str, failed: set[str]
) -> None:
    rubric = load_rubric(_instructor(tmp_path / "course", most_words))
    report = grade_submission(
        make_submission(tmp_path / "alice"),
        rubric,
        submission="alice",
        scratch=tmp_path / "scratch",
    ).report
    found = next(c for c in report.criteria if c.id == "short_answers")
    assert (found.points, found.max) == (Decimal(points), Decimal("10.00"))
    assert sum((c.points for c in found.checks), Decimal(0)) == found.points
    assert [c.id for c in found.checks] == [case.id for case in rubric.cases]
    limit = most_words or "120"
    assert all(re.fullmatch(rf"\d+ words, at most {limit}", c.detail) for c in found.checks)
    assert {c.id for c in found.checks if not c.passed} == failed
    assert found.advice == tuple(
        f"{case}: answer in at most {limit} words"
        for case in (c.id for c in found.checks)
        if case in failed
    )
    if most_words is None:  # the page quotes the one answer over the limit
        assert next(c.detail for c in found.checks if c.id == "flaky-grade") in DOC.read_text(
            "utf-8"
        )
    assert report.total == sum((c.points for c in report.criteria), Decimal(0))
