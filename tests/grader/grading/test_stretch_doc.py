"""docs/custom-checks.md's "A stretch goal of your lab's own", followed as written: its
module and ``[[stretch]]`` table in the instructor's copy of the kit's rubric, its claim and
write-up in a student's copy of the lab, graded as the page says they grade."""

from __future__ import annotations

import json
import re
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from grader import grade_submission, load_rubric
from tests.submissions import REFERENCE, gradekit_in_process, make_submission

pytestmark = pytest.mark.slow

DOC = REFERENCE / "docs" / "custom-checks.md"
HOLDS = (
    "the evidence holds: model calls per case in the primary run: refund-policy 3, "
    "incident-summary 3, sql-explain 3, flaky-grade 3"
)
OVER = (
    "case refund-policy asked the model 3 times: ask at most 2 (a draft, a self-check "
    "and one revision)"
)
NAMED, UNNAMED = "FAILURES.md has an entry naming it", "no FAILURES.md entry names 'call-budget'"


def _section() -> str:
    """The page's section on a lab's own stretch goal: up to the next ``##`` heading outside
    a code block (its FAILURES.md example has one inside)."""
    lines = DOC.read_text("utf-8").splitlines(keepends=True)
    start = lines.index("## A stretch goal of your lab's own\n")
    fenced, end = False, len(lines)
    for number in range(start + 1, len(lines)):
        fenced ^= lines[number].startswith("```")
        if not fenced and lines[number].startswith("## "):
            end = number
            break
    return "".join(lines[start:end])


def _blocks(language: str) -> list[str]:
    """The ``language`` blocks of the section, in order."""
    return [str(block) for block in re.findall(rf"```{language}\n(.*?)```", _section(), re.DOTALL)]


def _instructor(folder: Path, most_calls: str | None) -> Path:
    """The page's module beside the rubric (a fresh name: imports are cached), and the
    kit's rubric with the page's [[stretch]] table after its criteria."""
    folder.mkdir()
    module = f"course_goals_{uuid.uuid4().hex}"
    (python,) = _blocks("python")
    if most_calls is not None:
        assert python.count("MOST_CALLS = 3  #") == 1
        python = python.replace("MOST_CALLS = 3  #", f"MOST_CALLS = {most_calls}  #")
    (folder / f"{module}.py").write_text(python, "utf-8")
    table, _claim = _blocks("toml")
    assert table.count('"course_goals:') == 2
    kit = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
    rubric = folder / "rubric.toml"
    rubric.write_text(kit + "\n" + table.replace('"course_goals:', f'"{module}:'), "utf-8")
    return rubric


def _student(folder: Path, *, write_up: bool) -> Path:
    """A copy of the reference lab that claims the page's goal alone, with the page's
    write-up entry in its FAILURES.md (before Boundaries) or without it."""
    root = make_submission(folder)
    _table, claim = _blocks("toml")
    (line,) = re.findall(r"^stretch = .*$", claim, re.MULTILINE)
    pyproject = root / "pyproject.toml"
    text, count = re.subn(r"^stretch = .*$", line, pyproject.read_text("utf-8"), flags=re.MULTILINE)
    assert count == 1
    pyproject.write_text(text, "utf-8")
    if write_up:
        (entry,) = _blocks("markdown")
        failures = root / "FAILURES.md"
        log = failures.read_text("utf-8")
        assert log.count("\n## Boundaries\n") == 1
        failures.write_text(
            log.replace("\n## Boundaries\n", f"\n{entry}\n## Boundaries\n"), "utf-8"
        )
    return root


# What the page says the reference scores: the budget, the write-up, the goal's points and
# each of its two checks' points and detail.
SAID = [
    pytest.param(None, True, "10.00", ("6.00", HOLDS), ("4.00", NAMED), id="as-written"),
    pytest.param("2", True, "4.00", ("0.00", OVER), ("4.00", NAMED), id="evidence-fails"),
    pytest.param(None, False, "6.00", ("6.00", HOLDS), ("0.00", UNNAMED), id="no-write-up"),
]


@pytest.mark.parametrize(("most_calls", "write_up", "points", "proof", "written"), SAID)
def test_the_pages_stretch_goal_grades_the_kits_lab_as_the_page_says(
    tmp_path: Path,
    most_calls: str | None,
    write_up: bool,
    points: str,
    proof: tuple[str, str],
    written: tuple[str, str],
) -> None:
    rubric = load_rubric(_instructor(tmp_path / "course", most_calls))
    report = grade_submission(
        _student(tmp_path / "alice", write_up=write_up),
        rubric,
        submission="alice",
        scratch=tmp_path / "scratch",
    ).report
    found = next(c for c in report.criteria if c.id == "stretch_goal")
    assert (found.points, found.max) == (Decimal(points), Decimal("10.00"))
    assert [(c.id, str(c.points), str(c.max), c.detail) for c in found.checks] == [
        ("call-budget: evidence", proof[0], "6.00", proof[1]),
        ("call-budget: write-up", written[0], "4.00", written[1]),
    ]
    assert [c.passed for c in found.checks] == [proof[0] != "0.00", written[0] != "0.00"]
    page = " ".join(DOC.read_text("utf-8").split())  # the page wraps its quoted details
    assert all(f"`{c.detail}`" in page for c in found.checks)
    assert f"scores {points}" in page
    # The page's entry is a complete one: the written summary, and every other criterion,
    # keep their full points.
    assert all(c.points == c.max for c in report.criteria if c.id != "stretch_goal")
    assert report.total == Decimal("90.00") + found.points


def test_a_batchs_workers_import_the_pages_goal_and_grade_it_alike(tmp_path: Path) -> None:
    """A batch's worker is a fresh process that gets the rubric as data: it imports the
    goal's functions from the rubric's folder itself."""
    rubric = _instructor(tmp_path / "course", None)
    _student(tmp_path / "subs" / "alice", write_up=True)
    out = tmp_path / "grades"
    assert (
        gradekit_in_process(
            "grade",
            str(tmp_path / "subs"),
            "--rubric",
            str(rubric),
            "--out",
            str(out),
            "--wall",
            "process",
            "--quiet",
        )
        == 0
    )
    report = json.loads((out / "alice" / "report.json").read_bytes())
    found = next(c for c in report["criteria"] if c["id"] == "stretch_goal")
    assert [(c["id"], c["points"], c["detail"]) for c in found["checks"]] == [
        ("call-budget: evidence", "6.00", HOLDS),
        ("call-budget: write-up", "4.00", NAMED),
    ]
    assert report["total"] == "100.00"
