"""The loops as people see them: record tells each call and retry, is quiet on request and
says on Ctrl-C what was kept; grade tells each row with an estimate, and which case a
long submission is still running."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gradekit import Replay
from grader.batch import _batch
from grader.batch._batch import discover, grade_batch, print_heartbeat, print_progress
from grader.cli import main
from grader.outputs import GradebookRow
from grader.rubric import KIT_RUBRIC, load_rubric
from tests.loopback import Loopback, answer, error
from tests.submissions import CASES, REFERENCE, as_installed, make_submission

CASE = "sql-explain"


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    """A copy whose agent is the kit's own lab.agent, and a provider that stalls on demand.
    The lab is the submission's own copy: an installed gradekit ships none."""
    root = tmp_path / "alice"
    shutil.copytree(REFERENCE / "lab", root / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8")
    (root / "stalling.py").write_text(
        textwrap.dedent('''
        import time

        class Stalling:
            """Answers the first prompt at once, then never again."""
            name = "stalling"

            def __init__(self):
                self.calls = 0

            def complete(self, prompt):
                self.calls += 1
                if self.calls > 1:
                    time.sleep(600)
                return "first answer"

        def provider():
            return Stalling()
        '''),
        "utf-8",
    )
    return root


def test_record_shows_each_call_and_each_retry_and_is_quiet_on_request(
    submission: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Loopback(
        error(429, "slow down", retry_after="0"),
        default=answer("Counts passing submissions per student."),
    ) as server:
        monkeypatch.setenv("GRADEKIT_PROVIDER", "openai-compatible")
        monkeypatch.setenv("GRADEKIT_BASE_URL", server.openai_url)
        monkeypatch.setenv("GRADEKIT_MODEL", "tiny")
        assert main(["record", "--root", str(submission), "--case", CASE]) == 0
        first = capsys.readouterr().err
        assert main(["record", "--root", str(submission), "--case", CASE]) == 0
        second = capsys.readouterr().err
        assert main(["record", "--root", str(submission), "--case", CASE, "--quiet"]) == 0
        quiet = capsys.readouterr().err

    assert "    retry: HTTP 429 (rate limited): waiting 0.0s before attempt 2 of 5" in first
    live = re.findall(r"^    call \d+: [0-9a-f]{16} live, \d+\.\ds$", first, re.MULTILINE)
    served = re.findall(
        r"^    call \d+: [0-9a-f]{16} from cassette, \d+\.\ds$", second, re.MULTILINE
    )
    assert len(live) == len(served) == 3
    assert "    call" not in quiet and "retry" not in quiet
    assert "done: 0 answers recorded live" in quiet


def test_ctrl_c_in_record_says_what_was_kept_and_exits_130(submission: Path) -> None:
    """A real SIGINT while the second prompt waits on the provider: one line, no traceback,
    and the first answer is in the cassette for the next run to serve."""
    command = [
        str(Path(sys.executable).with_name("gradekit")),
        "record",
        "--root",
        str(submission),
        "--case",
        CASE,
        "--provider",
        "stalling:provider",
    ]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ""}
    )
    assert process.stderr is not None
    seen = ""
    deadline = time.monotonic() + 60
    while "call 1:" not in seen and time.monotonic() < deadline:
        seen += process.stderr.readline()
    assert "call 1:" in seen, seen
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=60)[1]

    assert process.returncode == 130, seen + rest
    assert "Traceback" not in rest
    assert rest.strip().splitlines() == [
        f"interrupted: the 1 answers recorded live so far are kept in {submission}/cassettes/; "
        "run the same command again to resume (what is recorded is served from the cassettes, "
        "not asked again)"
    ]
    assert len(Replay(submission / "cassettes" / f"{CASE}.json")) == 1


SLOW_ON_REFUNDS = """

_run = run


def run(provider, task, tools=None):
    import threading

    if "refund" in task:  # a timed wait is real (a time.sleep would cost no wall time)
        threading.Event().wait(1)
    return _run(provider, task, tools)
"""


@pytest.mark.slow
def test_grade_tells_each_row_with_an_estimate_and_a_heartbeat_names_the_running_case(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_batch, "HEARTBEAT_S", 0.3)
    subs = tmp_path / "subs"
    make_submission(subs / "alice")
    agent = make_submission(subs / "bob") / "lab" / "agent.py"
    agent.write_text(agent.read_text("utf-8") + SLOW_ON_REFUNDS, "utf-8")
    told: list[tuple[int, int, str, str]] = []
    beats: list[tuple[str, str]] = []

    rows = grade_batch(
        discover([subs]),
        load_rubric(KIT_RUBRIC),
        out=tmp_path / "out",
        jobs=1,
        progress=lambda done, total, row, elapsed: told.append(
            (done, total, row.submission, row.total)
        ),
        heartbeat=lambda folder, seconds, case: beats.append((folder, case)),
    )

    assert [row.total for row in rows] == ["100.00", "100.00"]
    assert told == [(1, 2, "alice", "100.00"), (2, 2, "bob", "100.00")]
    assert ("bob", "refund-policy") in beats
    assert {case for _, case in beats} <= {"", *CASES}


def test_the_progress_line_has_counts_the_row_elapsed_time_and_an_estimate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    row = GradebookRow(
        submission="alice",
        student="alice",
        status="graded",
        total="96.00",
        max="100.00",
        criteria={},
        digest="d",
        reason="",
    )
    print_progress(1, 4, row, 2.0)
    print_progress(4, 4, row, 125.0)
    print_heartbeat("bob", 75.0, "refund-policy")
    assert capsys.readouterr().err.splitlines() == [
        "[1/4] alice: 96.00 / 100.00 (2.0s elapsed, about 6.0s left)",
        "[4/4] alice: 96.00 / 100.00 (2m05s elapsed)",
        "    bob: still grading after 1m15s, case refund-policy",
    ]


def _printed_commands(text: str) -> list[str]:
    """Every command a message or a report tells the student to run, in backticks."""
    return sorted(
        set(re.findall(r"`((?:[A-Z_]+=\S+ )*(?:make [a-z]+|\.venv/bin/gradekit)\b[^`]*)`", text))
    )


@pytest.mark.parametrize("breakage", ["prompt_changed", "fixture_missing", "cassette_missing"])
@pytest.mark.slow
def test_every_printed_fix_command_works_as_printed(
    breakage: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run each command exactly as the check or the miss printed it (a live provider on
    loopback): it succeeds, and afterwards the case replays."""
    root = as_installed(make_submission(tmp_path / "alice"))
    if breakage == "prompt_changed":
        agent = root / "lab" / "agent.py"
        agent.write_text(
            agent.read_text("utf-8").replace(
                "You are a teaching assistant", "You are a helpful teaching assistant", 1
            ),
            "utf-8",
        )
        assert main(["check", str(root), "--wall", "process"]) == 1
    else:
        folder = "fixtures" if breakage == "fixture_missing" else "cassettes"
        (root / folder / "sql-explain.json").unlink()
        assert main(["run", "--root", str(root), "--case", "sql-explain"]) == 3
    shown = capsys.readouterr()
    commands = _printed_commands(shown.out + shown.err)
    assert commands, shown
    env = {**os.environ, "PYTHONPATH": "", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    with Loopback(default=answer("A recorded answer.")) as server:
        env |= {
            "GRADEKIT_PROVIDER": "openai-compatible",
            "GRADEKIT_MODEL": "tiny",
            "GRADEKIT_BASE_URL": server.openai_url,
        }
        for command in commands:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, (command, done.stderr)
    if breakage == "prompt_changed":  # the one recording run first, with the cassettes' provider
        assert "GRADEKIT_PROVIDER=llamacpp make record" in commands
    case = re.search(r"--case ([\w-]+)", next(c for c in commands if "--case" in c))
    assert case is not None
    assert main(["run", "--root", str(root), "--case", case[1]]) == 0
