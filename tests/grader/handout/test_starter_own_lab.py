"""``gradekit starter`` on an instructor's own lab: a package that is not ``lab``, a rubric
the manifest names, tools of its own. The students' tests are written for that lab: its
rubric's first task, its tools passed as the grader passes them, the kit's Replay as the
default, and commands that its hand-out has.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from grader.cli import main
from grader.handout import student_tests
from tests.grader.handout.starters import BEGIN, END, REFERENCE, with_table

TASK = "A traveller in Lyon asks which morning train reaches Paris before noon."
CASE = f'[[case]]\nid = "morning-train"\ntask = "{TASK}"\n\n'
AGENT = f'''\
"""The travel desk's agent: look the trains up with the lab's tool, then answer."""

from __future__ import annotations

from gradekit import Provider, Toolbox, Traced, TracedTools


def run(provider: Provider, task: str, tools: Toolbox) -> str:
    """Answer ``task`` from the timetable."""
    {BEGIN}
    trains = TracedTools(tools).call("trains", origin="Lyon")
    listed = ", ".join(f"{{t['leaves']}} to {{t['to']}}" for t in trains)
    return Traced(provider).complete(f"{{task}}\\nTrains: {{listed}}").strip()
    # STUB
    # raise NotImplementedError("travel/agent.py: write run() with the trains tool")
    {END}
'''
TOOLS = '''\
"""The travel desk's one read-only tool, over travel/timetable.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gradekit import Tools

TOOLS = Tools()


@TOOLS.read_only("trains")
def trains(origin: str) -> list[dict[str, Any]]:
    """The trains that leave ``origin``, in timetable order."""
    rows = json.loads((Path(__file__).parent / "timetable.json").read_text("utf-8"))
    return [row for row in rows if row["from"] == origin]
'''
TIMETABLE = [
    {"from": "Lyon", "to": "Paris", "leaves": "07:04"},
    {"from": "Lyon", "to": "Paris", "leaves": "09:00"},
    {"from": "Paris", "to": "Lyon", "leaves": "08:30"},
]
MANIFEST = """\
[project]
name = "travel-desk"
version = "0.1.0"

[tool.gradekit]
agent = "travel.agent:run"
tools = "travel.tools:TOOLS"
rubric = "rubric/travel.toml"
"""


def _rubric() -> str:
    """The kit's criteria and limits, with the travel desk's one case instead of the kit's."""
    text = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
    text = text.replace('id = "provider-swap-lab"', 'id = "travel-desk"', 1)
    text = re.sub(r"\nversion = \d+\n", "\nversion = 1\n", text, count=1)
    return text[: text.index("[[case]]")] + CASE + text[text.index("[[criterion]]") :]


def _travel_lab(root: Path) -> Path:
    """An instructor's lab: the package ``travel``, its tool and data, its own rubric."""
    (root / "travel").mkdir(parents=True)
    (root / "travel" / "__init__.py").write_text("", "utf-8")
    (root / "travel" / "agent.py").write_text(AGENT, "utf-8")
    (root / "travel" / "tools.py").write_text(TOOLS, "utf-8")
    (root / "travel" / "timetable.json").write_text(json.dumps(TIMETABLE), "utf-8")
    (root / "rubric").mkdir()
    (root / "rubric" / "travel.toml").write_text(_rubric(), "utf-8")
    (root / "FAILURES.md").write_text("# Failures\n", "utf-8")
    (root / "pyproject.toml").write_text(MANIFEST, "utf-8")
    with_table(root, include=["travel/**", "rubric/*.toml", "FAILURES.md", "pyproject.toml"])
    return root


def _starter(lab: Path, out: Path, *extra: str) -> Path:
    assert main(["starter", "--from", str(lab), "--out", str(out), "--no-grade", *extra]) == 0
    return out


def _task(tests: str) -> object:
    """The value the students' tests give ``TASK``."""
    assign = next(
        node
        for node in ast.parse(tests).body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "TASK"
    )
    return ast.literal_eval(assign.value)


def test_the_students_tests_run_on_the_labs_own_task(tmp_path: Path) -> None:
    out = _starter(_travel_lab(tmp_path / "travel-lab"), tmp_path / "handout")
    tests = (out / "tests" / "test_lab.py").read_text("utf-8")
    assert _task(tests) == TASK
    assert "refund" not in tests.lower() and "bootcamp" not in tests.lower()
    assert 'MANIFEST.get("replay", "gradekit:Replay")' in tests
    # No Makefile ships: the docstring names what the hand-out has.
    assert "make " not in tests
    assert "Run them with ``pytest``." in tests
    assert "``gradekit check`` runs the grader's three" in tests  # the lab has no Makefile
    assert 'tools = "travel.tools:TOOLS"' in (out / "pyproject.toml").read_text("utf-8")


def test_own_replay_writes_the_stub_in_the_labs_package(tmp_path: Path) -> None:
    out = _starter(_travel_lab(tmp_path / "travel-lab"), tmp_path / "handout", "--own-replay")
    stub = (out / "travel" / "replay.py").read_text("utf-8")
    assert '``replay = "travel.replay:Replay"``' in stub and '"travel/replay.py: read' in stub
    assert "lab" not in stub.replace("tests/test_lab.py", "")
    assert '\nreplay = "travel.replay:Replay"\n' in (out / "pyproject.toml").read_text("utf-8")


def test_the_table_examples_name_the_labs_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = _travel_lab(tmp_path / "travel-lab")
    with_table(lab, table="")
    assert main(["starter", "--from", str(lab), "--out", str(tmp_path / "out"), "--no-grade"]) != 0
    err = capsys.readouterr().err
    assert 'include = ["travel/**", ' in err and '"lab/**"' not in err
    with_table(lab, include=[])
    assert main(["starter", "--from", str(lab), "--out", str(tmp_path / "out"), "--no-grade"]) != 0
    assert 'e.g. include = ["travel/**", "FAILURES.md"]' in capsys.readouterr().err


@pytest.mark.parametrize(
    "task",
    [
        TASK,
        'She said "stop"; the path is C:\\trains\\lyon.\nThen\ta tab, and a bell \a.',
        "Trains " * 40 + "x" * 150,
        "東京から大阪まで、" * 12 + "Zürich\u2013Genève? ",
        "  leading and trailing spaces  ",
    ],
)
def test_any_task_is_written_as_a_literal_within_the_line_length(task: str) -> None:
    tests = student_tests(task=task, case="a-case", replay="gradekit:Replay", make=())
    assert _task(tests) == task
    compile(tests, "test_lab.py", "exec")
    wide = {"W", "F"}  # two columns each, as ruff counts a line's length
    assert (
        max(
            sum(1 + (unicodedata.east_asian_width(char) in wide) for char in line)
            for line in tests.splitlines()
        )
        <= 100
    )


# -- running them -------------------------------------------------------------------------------


def _pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rfs",
            "tests/test_lab.py",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow  # runs the hand-out's own suite in a process
def test_the_students_tests_pass_on_the_labs_agent_skip_its_stub_and_catch_a_bug(
    tmp_path: Path,
) -> None:
    lab = _travel_lab(tmp_path / "travel-lab")
    out = _starter(lab, tmp_path / "handout")
    done = _pytest(out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b2 passed, 4 skipped\b", done.stdout), done.stdout
    assert re.search(
        r"SKIPPED \[4\] .*the agent is not written yet: travel/agent\.py: "
        r"write run\(\) with the trains tool",
        done.stdout,
    ), done.stdout
    # The kit's own rules (the lab has none): gradekit is not the lab's, so it sorts as
    # pytest does, in one block.
    ruff = subprocess.run(
        [
            str(Path(sys.executable).with_name("ruff")),
            "check",
            "--isolated",
            "--no-cache",
            "--line-length",
            "100",
            "--select",
            "E,F,W,I,B,UP,SIM,RUF,PT,N",
            "--ignore",
            "N818,PT018",
            "tests",
        ],
        cwd=out,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ruff.returncode == 0, ruff.stdout

    # The instructor's agent (it takes the tools, as a third argument) passes them all.
    (lab / "tests").mkdir()
    (lab / "tests" / "__init__.py").write_text("", "utf-8")
    shutil.copy2(out / "tests" / "test_lab.py", lab / "tests" / "test_lab.py")
    done = _pytest(lab)
    assert done.returncode == 0 and re.search(r"\b6 passed\b", done.stdout), done.stdout

    # One that swallows the miss fails the test that says so, and only that one.
    agent = lab / "travel" / "agent.py"
    text = agent.read_text("utf-8")
    agent.write_text(
        text.replace(
            "    return Traced(provider)", "    try:\n        return Traced(provider)", 1
        ).replace(
            ".strip()\n", '.strip()\n    except Exception:\n        return "No trains today."\n', 1
        ),
        "utf-8",
    )
    done = _pytest(lab)
    assert done.returncode == 1 and re.search(r"\b1 failed, 5 passed\b", done.stdout), done.stdout
    assert "FAILED tests/test_lab.py::test_a_miss_escapes_the_agent" in done.stdout
