"""The batch's idle helper (``grader.batch._idle``): it lays out submissions ahead and
removes graded ones' scratch folders, in a process of its own under ``SCHED_IDLE``; an order
it cannot take is done in place (a removal) or left to the grading (a lay-out).

It takes ``IGNORED_NAMES`` from ``grader._model`` on purpose: the helper is handed the very
names a grading leaves out."""

from __future__ import annotations

import json
import os
import select
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grader._model import IGNORED_NAMES
from grader.batch._idle import IdleHelper
from grader.sandbox import LAID_AHEAD, copy_submission

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's"),
]


@pytest.fixture
def helper() -> Iterator[IdleHelper]:
    idle = IdleHelper()
    yield idle
    idle.close()


def _until(done: Callable[[], bool], seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return done()


def _tree(top: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every entry under ``top``: its kind, its mode, its bytes (a link: its target)."""
    found: dict[str, tuple[str, int, bytes]] = {}
    for path in sorted(top.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[str(path.relative_to(top))] = ("link", 0, os.fsencode(os.readlink(path)))
        elif stat.S_ISDIR(info.st_mode):
            found[str(path.relative_to(top))] = ("folder", info.st_mode & 0o777, b"")
        else:
            found[str(path.relative_to(top))] = ("file", info.st_mode & 0o777, path.read_bytes())
    return found


def test_the_helper_runs_only_when_a_cpu_would_idle(helper: IdleHelper) -> None:
    assert helper._pid > 0
    assert os.sched_getscheduler(helper._pid) == os.SCHED_IDLE


def test_a_submission_laid_out_ahead_is_the_copy_a_grading_would_make(
    helper: IdleHelper, tmp_path: Path
) -> None:
    root = tmp_path / "alice"
    (root / "lab" / "__pycache__").mkdir(parents=True)
    (root / "lab" / "agent.py").write_text("def run(provider, task):\n    return task\n")
    (root / "lab" / "__pycache__" / "agent.cpython-311.pyc").write_bytes(b"stale")
    (root / ".git").mkdir()
    (root / "notes.txt").write_text("private")
    (root / "notes.txt").chmod(0o600)
    (root / "link").symlink_to("/etc/passwd")
    os.mkfifo(root / "pipe")  # left out: reading it could hang a copy
    umask = os.umask(0o077)
    try:
        expected = tmp_path / "expected"
        copy_submission(str(root), str(expected), IGNORED_NAMES, shared=True)
    finally:
        os.umask(umask)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    helper.lay_out(root, scratch, IGNORED_NAMES)
    assert _until(lambda: (scratch / LAID_AHEAD).is_dir())
    assert (scratch / LAID_AHEAD).stat().st_mode & 0o777 == 0o755
    assert _tree(scratch / LAID_AHEAD / "copy") == _tree(expected)
    assert set(_tree(expected)) == {"lab", "lab/agent.py", "notes.txt", "link"}
    assert sorted(p.name for p in scratch.iterdir()) == [LAID_AHEAD]  # nothing half-made


def test_a_submission_that_cannot_be_laid_out_leaves_nothing_for_a_grading_to_take(
    helper: IdleHelper, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    helper.lay_out(tmp_path / "gone", scratch, IGNORED_NAMES)
    helper.remove(tmp_path / "marker")  # orders are taken in turn: this one comes after
    (tmp_path / "marker").mkdir()
    assert _until(lambda: not (tmp_path / "marker").exists())
    assert list(scratch.iterdir()) == []


def test_a_graded_folder_is_removed_by_the_helper_or_in_place_when_it_cannot_take_it(
    helper: IdleHelper, tmp_path: Path
) -> None:
    graded = tmp_path / "worker-1"
    (graded / "run" / "deep").mkdir(parents=True)
    (graded / "run" / "deep" / "file").write_text("x")
    helper.remove(graded)
    assert _until(lambda: not graded.exists())

    # A folder whose order does not fit one write to the pipe (each "é" is written "\\u00e9"):
    # removed here, before remove returns.
    long = tmp_path.joinpath(*["é" * 100] * 7)
    long.mkdir(parents=True)
    assert len(str(long)) < select.PIPE_BUF < len(json.dumps(str(long)))
    helper.remove(long)
    assert not long.exists() and long.parent.exists()

    helper.close()
    closed = tmp_path / "worker-2"
    closed.mkdir()
    helper.remove(closed)  # no helper any more: removed before remove returns
    assert not closed.exists()
    helper.lay_out(tmp_path, tmp_path / "nowhere", IGNORED_NAMES)  # dropped, not raised
