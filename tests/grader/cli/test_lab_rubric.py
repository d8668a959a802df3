"""A lab names its rubric: every command finds it there, with no --rubric anywhere, and the
grader still grades only on the instructor's.

The lab here is written from scratch (a one-case "greeting desk", none of the kit's
cases), recorded with the kit's recorder against a deterministic provider, checked,
and graded from the instructor's own folder as the course runs it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.submissions import REFERENCE, echo_provider, gradekit_in_process

pytestmark = pytest.mark.slow

AGENT = """
from gradekit import Traced


def run(provider, task):
    return Traced(provider).complete("Greet the visitor: " + task).strip()
"""
ECHO = echo_provider("Hello! You said: ", 40)
MANIFEST = """\
[project]
name = "greeting-desk"
version = "0.1.0"

[tool.gradekit]
agent = "desk.agent:run"
replay = "gradekit:Replay"
rubric = "course/desk.toml"
"""
CASE = """[[case]]
id = "greet"
task = "A visitor walks in and says good morning."

"""


def _rubric(version: int = 1) -> str:
    """The kit's criteria and limits, with the desk's one case instead of the kit's four."""
    text = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
    text = re.sub(r'id = "provider-swap-lab"', 'id = "greeting-desk"', text, count=1)
    text = re.sub(r"\nversion = \d+\n", f"\nversion = {version}\n", text, count=1)
    first, last = text.index("[[case]]"), text.index("[[criterion]]")
    return text[:first] + CASE + text[last:]


def _lab(root: Path) -> Path:
    (root / "desk").mkdir(parents=True)
    (root / "desk" / "__init__.py").write_text("", "utf-8")
    (root / "desk" / "agent.py").write_text(AGENT.lstrip(), "utf-8")
    (root / "echo.py").write_text(ECHO, "utf-8")
    (root / "course").mkdir()
    (root / "course" / "desk.toml").write_text(_rubric(), "utf-8")
    (root / "pyproject.toml").write_text(MANIFEST, "utf-8")
    (root / "FAILURES.md").write_bytes((REFERENCE / "FAILURES.md").read_bytes())
    return root


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    root = _lab(tmp_path / "desk-lab")
    assert (
        gradekit_in_process(
            "record",
            "--root",
            str(root),
            "--provider",
            "echo:provider",
            "--quiet",
            modules=("echo",),
        )
        == 0
    )
    return root


def test_record_and_check_use_the_rubric_the_lab_names(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sorted(p.name for p in (lab / "cassettes").iterdir()) == ["greet.json"]
    capsys.readouterr()
    gradekit_in_process("check", str(lab), "--wall", "process")
    shown = capsys.readouterr().out
    assert "refund-policy" not in shown and "grade now: " in shown
    assert "PASS  2. A miss is loud" in shown, shown


def test_the_instructors_folder_names_the_rubric_a_cohort_is_graded_on(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graded from the lab's own folder, each student on the lab's rubric; the student who
    edited their copy of it is graded on the instructor's all the same, and told so."""
    subs = tmp_path / "submissions"
    for name in ("ana", "ben"):
        shutil.copytree(lab, subs / name)
    edited = subs / "ben" / "course" / "desk.toml"
    edited.write_text(_rubric(version=7), "utf-8")
    monkeypatch.chdir(lab)
    assert (
        gradekit_in_process(
            "grade", str(subs), "--out", str(tmp_path / "grades"), "--wall", "process", "--quiet"
        )
        == 0
    )
    reports: dict[str, dict[str, Any]] = {
        name: json.loads((tmp_path / "grades" / name / "report.json").read_bytes())
        for name in ("ana", "ben")
    }
    assert [(r["rubric"]["id"], r["rubric"]["version"]) for r in reports.values()] == [
        ("greeting-desk", 1)
    ] * 2
    assert reports["ana"]["findings"] == []
    (finding,) = reports["ben"]["findings"]
    assert finding.startswith("the manifest names rubric = course/desk.toml (greeting-desk v7)")
    assert "graded on: greeting-desk v1, the instructor's" in finding
    assert reports["ana"]["total"] == reports["ben"]["total"]


def test_a_lab_for_other_cases_without_a_rubric_is_refused_with_the_fix(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = lab / "pyproject.toml"
    manifest.write_text(MANIFEST.replace('rubric = "course/desk.toml"\n', ""), "utf-8")
    assert gradekit_in_process("check", str(lab), "--wall", "process") == 2
    said = capsys.readouterr().err
    assert (
        "names no rubric, and its recordings (greet) are for cases the kit's own rubric "
        "does not have" in said
    )
    assert 'rubric = "rubric/lab.toml"' in said and "--rubric FILE" in said


def test_a_rubric_the_lab_names_that_is_not_there_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path / "desk-lab")
    (root / "course" / "desk.toml").unlink()
    assert (
        gradekit_in_process(
            "record",
            "--root",
            str(root),
            "--provider",
            "echo:provider",
            "--quiet",
            modules=("echo",),
        )
        == 2
    )
    said = capsys.readouterr().err
    assert "rubric = 'course/desk.toml' names no file" in said
    assert not (root / "cassettes").exists()  # nothing was recorded against another rubric


@pytest.mark.parametrize("how", ["check", "stretch"])
def test_checking_another_folder_never_imports_its_rubrics_own_checks(
    lab: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """A rubric's custom check, or its own stretch goal's evidence, is imported into the
    process that loads it: ``check`` takes such a rubric from the folder it runs in, never
    from another folder it is pointed at."""
    rubric = lab / "course" / "desk.toml"
    marker = tmp_path / "imported"
    (lab / "course" / "__init__.py").write_text("", "utf-8")
    (lab / "course" / "checks.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n", "utf-8"
    )
    text = rubric.read_text("utf-8")
    rubric.write_text(
        text.replace('check = "written_summary"', 'check = "course.checks:summary"')
        if how == "check"
        else text + '\n[[stretch]]\nid = "desk-goal"\nevidence = "course.checks:evidence"\n',
        "utf-8",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert gradekit_in_process("check", str(lab), "--wall", "process") == 2
    said = capsys.readouterr().err
    assert "whose custom checks or stretch goals would run in this process" in said
    assert "cd there" in said
    assert not marker.exists()
