"""The student's recording loop as people see it: a line per call and per retry, quiet on
request, and a Ctrl-C that says what was kept and how to resume."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gradekit import Replay
from grader.cli import main
from tests.loopback import Loopback, answer, error

CASE = "sql-explain"


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    """A copy whose agent is the kit's own lab.agent, and a provider that stalls on demand."""
    root = tmp_path / "alice"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8")
    (root / "stalling.py").write_text(textwrap.dedent('''
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
        '''), "utf-8")
    return root


def test_record_shows_each_call_and_each_retry_and_is_quiet_on_request(
    submission: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    with Loopback(error(429, "slow down", retry_after="0"),
                  default=answer("Counts passing submissions per student.")) as server:
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
    served = re.findall(r"^    call \d+: [0-9a-f]{16} from cassette, \d+\.\ds$", second,
                        re.MULTILINE)
    assert len(live) == len(served) == 3
    assert "    call" not in quiet and "retry" not in quiet
    assert "done: 0 answers recorded live" in quiet


def test_ctrl_c_in_record_says_what_was_kept_and_exits_130(submission: Path) -> None:
    """A real SIGINT while the second prompt waits on the provider: one line, no traceback,
    and the first answer is in the cassette for the next run to serve."""
    command = [str(Path(sys.executable).with_name("gradekit")), "record", "--root",
               str(submission), "--case", CASE, "--provider", "stalling:provider"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": ""})
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
        "not asked again)"]
    assert len(Replay(submission / "cassettes" / f"{CASE}.json")) == 1
