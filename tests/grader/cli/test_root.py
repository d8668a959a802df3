"""``--root DIR`` runs DIR's own agent, tools and ``lab``, whatever the environment holds.

Carol's submission has an agent and a ``lab`` unlike the kit's: her ``lab`` defines a name
the kit's lacks, her agent imports it, and her tool registry lives in her ``lab`` too. The
kit's ``lab`` is importable in this environment (the editable install) and already
imported by this test process; a command that used it would run the kit's agent against
carol's cassettes, which once happened without a word of warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import lab
from gradekit import Replay
from grader import load_cases
from grader.cli import main
from grader.rubric import KIT_RUBRIC

CASE = "refund-policy"
CAROL_LAB = '''
"""Carol's lab: the kit's names, and her signature."""
from gradekit import *  # noqa: F403
from gradekit import Tools

SIGNATURE = "carol-was-here"

TOOLS = Tools()
TOOLS.read_only("shout", lambda text: text.upper())
'''
CAROL_AGENT = """
from lab import SIGNATURE


def run(provider, task, tools=None):
    loud = tools.call("shout", text="refunds") if tools is not None else "-"
    return f"{SIGNATURE} {loud} " + provider.complete(f"{SIGNATURE} asks: {task}")
"""
CAROL_PROVIDER = """
from gradekit import FakeProvider


def fake():
    return FakeProvider(lambda prompt: "answer of " + prompt.split(" asks:")[0], name="fake")
"""


@pytest.fixture
def carol(tmp_path: Path) -> Path:
    root = tmp_path / "carol"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text(textwrap.dedent(CAROL_LAB), "utf-8")
    (root / "lab" / "agent.py").write_text(textwrap.dedent(CAROL_AGENT), "utf-8")
    (root / "carol_provider.py").write_text(textwrap.dedent(CAROL_PROVIDER), "utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "carol"\n\n[tool.gradekit]\nagent = "lab.agent:run"\n'
        'tools = "lab:TOOLS"\n',
        "utf-8",
    )
    return root


def _carol_answered(stdout: str) -> None:
    assert f"## {CASE}\ncarol-was-here REFUNDS answer of carol-was-here\n" in stdout


def test_record_and_run_use_the_roots_own_agent_and_lab_in_a_new_process(
    carol: Path, tmp_path: Path
) -> None:
    """The installed command, as an instructor runs it from another folder."""
    env = {**os.environ, "PYTHONPATH": ""}
    gradekit = [str(Path(sys.executable).with_name("gradekit"))]
    recorded = subprocess.run(
        [
            *gradekit,
            "record",
            "--root",
            str(carol),
            "--case",
            CASE,
            "--provider",
            "carol_provider:fake",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert recorded.returncode == 0, recorded.stderr
    ran = subprocess.run(
        [*gradekit, "run", "--root", str(carol), "--case", CASE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    _carol_answered(ran.stdout)
    cassette = json.loads((carol / "cassettes" / f"{CASE}.json").read_bytes())
    assert [
        entry["prompt"].startswith("carol-was-here asks:") for entry in cassette["entries"].values()
    ] == [True]
    fixture = json.loads((carol / "fixtures" / f"{CASE}.json").read_bytes())
    assert [(call["tool"], call["response"]) for call in fixture["calls"]] == [("shout", "REFUNDS")]


@pytest.mark.usefixtures("kit_lab_restored")
def test_record_and_run_use_the_roots_own_lab_though_this_process_imported_the_kits(
    carol: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not hasattr(lab, "SIGNATURE")  # the kit's lab, imported at the top of this file
    path_before = list(sys.path)

    assert (
        main(["record", "--root", str(carol), "--case", CASE, "--provider", "carol_provider:fake"])
        == 0
    )
    assert main(["run", "--root", str(carol), "--case", CASE]) == 0

    _carol_answered(capsys.readouterr().out)
    assert sys.path == path_before  # nothing left behind
    replay = Replay(carol / "cassettes" / f"{CASE}.json")
    task = next(case for case in load_cases(KIT_RUBRIC) if case.id == CASE).task
    assert replay.complete(f"carol-was-here asks: {task}") == "answer of carol-was-here"


@pytest.mark.usefixtures("kit_lab_restored")
@pytest.mark.slow
def test_check_runs_the_roots_own_agent(carol: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check's checkpoints run carol's agent in the sandbox, on her cassettes: the kit's agent
    would ask prompts they do not hold, and the third checkpoint would fail."""
    assert main(["record", "--root", str(carol), "--provider", "carol_provider:fake"]) == 0
    capsys.readouterr()
    code = main(["check", "--root", str(carol), "--wall", "process"])
    shown = capsys.readouterr().out
    assert [line.split()[0] for line in shown.splitlines()[:3]] == ["PASS"] * 3, shown
    # Her lab is a sketch (no tracing, no FAILURES.md): the grade it predicts says so.
    assert code == 1
    assert "  lost 20.00 of Tracing (0.00 / 20.00):" in shown
