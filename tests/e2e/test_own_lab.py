"""docs/own-lab.md, followed as written: a lab of an instructor's own, from an empty folder
to a Gradescope upload, with no ``--rubric`` anywhere.

Every ``sh`` block of the page runs in order, in one course folder, with this checkout's
``gradekit`` on PATH and the page's model server (``127.0.0.1:8080``) replaced by a
loopback server that speaks OpenAI's protocol. Between the hand-out and the grading,
three students work in copies of the hand-out as its README says: an honest one, one who
swallows a miss, one who never recorded a case. The grades are the ones the rubric
intends, and every command printed anywhere (the blocks' output, the reports) is the
lab's own: its cases, ``gradekit ...`` commands, never the kit's refund lab or a Makefile.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.loopback import Loopback, answer
from tests.submissions import REFERENCE

pytestmark = pytest.mark.slow
DOC = REFERENCE / "docs" / "own-lab.md"
ANSWER = "Late work is accepted for 48 hours and loses 10 percent per started day."
CASES = ("first-case", "extension")
FAILURES = """\
# Failures

## The notes tool found nothing for capitalised words
- Symptom: the first recording sent "(none)" as the notes for the extension case.
- Cause: search_notes compared words case-sensitively, and the task said "Answer".
- Fix: the tool lower-cases both sides; recorded again with the reason in the log.

## tool-fixtures: a tool result changed between two recordings
- Symptom: the second recording asked the model with other notes than the first.
- Cause: the notes file was edited between the two recordings of the same case.
- Fix: the tool's results are recorded as fixtures and replayed, never read live.

## Boundaries
- What this lab cannot measure: whether the model's answer is right; only that the
  agent keeps the contract on the answers it recorded.
"""
SWALLOW = """
from gradekit import CassetteMiss

from travel_desk.reference import run as _run


def run(provider, task, tools=None):
    try:
        return _run(provider, task, tools)
    except CassetteMiss:
        return ""
"""


def _blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL)


def _sh(script: str, cwd: Path, env: dict[str, str]) -> str:
    """``script`` run by bash in ``cwd``; what it printed, both streams."""
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return done.stdout + done.stderr


def _student(handout: Path, folder: Path, reference: Path, env: dict[str, str], url: str) -> Path:
    """A student's copy of the hand-out: the reference's agent written in, FAILURES.md
    written, the tool-fixtures goal claimed, recorded live once as the README says."""
    shutil.copytree(handout, folder)
    shutil.copy(reference / "travel_desk" / "agent.py", folder / "travel_desk" / "agent.py")
    (folder / "FAILURES.md").write_text(FAILURES, "utf-8")
    manifest = folder / "pyproject.toml"
    manifest.write_text(
        manifest.read_text("utf-8").replace(
            'replay = "gradekit:Replay"', 'replay = "gradekit:Replay"\nstretch = ["tool-fixtures"]'
        ),
        "utf-8",
    )
    said = _sh(
        f"GRADEKIT_PROVIDER=openai-compatible GRADEKIT_BASE_URL={url} "
        "GRADEKIT_MODEL=smollm2 gradekit record",
        folder,
        env,
    )
    assert all((folder / "cassettes" / f"{case}.json").is_file() for case in CASES), said
    return folder


def test_the_page_builds_hands_out_and_grades_a_lab_of_its_own(tmp_path: Path) -> None:
    blocks = _blocks()
    assert len(blocks) == 6, "the page's steps changed: follow them here too"
    course = tmp_path / "course"
    course.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GRADEKIT_", "OPENAI_", "ANTHROPIC_"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    said: list[str] = []
    with Loopback(default=answer(ANSWER)) as server:
        url = server.openai_url.rstrip("/")
        port = url.split("127.0.0.1:")[1].split("/")[0]
        for block in blocks[:4]:  # new, a second case, record and check, the hand-out
            said.append(_sh(block.replace("127.0.0.1:8080", f"127.0.0.1:{port}"), course, env))
        lab, handout = course / "travel-desk", course / "travel-desk-handout"
        assert (lab / "cassettes" / "extension.json").is_file(), said[2]
        assert "NotImplementedError" in (handout / "travel_desk" / "agent.py").read_text()
        assert not list(handout.glob("*/*.json"))  # recordings never ship
        subs = course / "submissions"
        honest = _student(handout, subs / "alice", lab, env, url)
        swallow = _student(handout, subs / "swallow", lab, env, url)
        (swallow / "travel_desk" / "reference.py").write_bytes(
            (swallow / "travel_desk" / "agent.py").read_bytes()
        )
        (swallow / "travel_desk" / "agent.py").write_text(SWALLOW.lstrip(), "utf-8")
        unrecorded = _student(handout, subs / "unrecorded", lab, env, url)
        for name in ("cassettes", "fixtures"):
            (unrecorded / name / "extension.json").unlink()
        assert honest.is_dir()
    for block in blocks[4:]:  # grade the cohort, build the autograder: offline
        said.append(_sh(block, course, env))

    gradebook = (course / "grades" / "gradebook.csv").read_text("utf-8").splitlines()
    rows = {row["submission"]: row for row in csv.DictReader(gradebook)}
    assert rows["alice"]["total"] == "100.00", said[4]
    # The swallower loses the loud-failure points of both cases, and keeps the Replay's.
    assert rows["swallow"]["loud_failure"] == "5.00"
    assert rows["swallow"]["total"] == "80.00"
    assert float(rows["unrecorded"]["total"]) < 100
    reports = {name: (course / "grades" / name / "report.md").read_text("utf-8") for name in rows}
    assert "`gradekit record --case extension`" in reports["unrecorded"]
    run_autograder = (course / "autograder" / "run_autograder").read_text("utf-8")
    assert 'GRADEKIT_COMMANDS="${GRADEKIT_COMMANDS:-gradekit}"' in run_autograder
    assert (course / "autograder" / "rubric" / "lab.toml").is_file()
    assert "results.json: 100.00 points" in said[5], said[5]  # the dry run graded alice
    assert "laid out as Gradescope does" in said[5]

    printed = "\n".join([*said, *reports.values()])
    for kit_word in (
        "refund",
        "make record",
        "make check",
        "make grade",
        "--rubric",
        "lab/agent.py",
        ".venv/bin/gradekit",
    ):
        assert kit_word not in printed, kit_word
    for case in re.findall(r"--case (\S+?)[`'\s]", printed):
        assert case in CASES, case
