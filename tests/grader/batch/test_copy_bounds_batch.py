"""A batch with a submission past its copy's caps (``grader.sandbox._bounds``): neither its
grading nor the idle helper copies it, its row says why, and its classmates are graded.

The red-team's batch: a 1.5 GB sparse file (0 bytes on disk) was copied whole into a 1 GiB
scratch in host memory, and six of eight honest classmates got error rows ("No space left
on device").

It takes ``IGNORED_NAMES`` from ``grader._model`` on purpose: the idle helper is handed the
very names a grading leaves out."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grader._model import IGNORED_NAMES, Limits
from grader.batch._idle import IdleHelper
from grader.sandbox import LAID_AHEAD, measure
from tests.grader.batch.test_batch_safety import Grader, graded_rows, short_rubric
from tests.submissions import make_submission

MIB = 1 << 20
SPARSE = 256 * MIB  # 4 times the bootcamp rubric's disk_mb


def sparse(path: Path, size: int) -> None:
    path.write_bytes(b"")
    os.truncate(path, size)
    assert path.stat().st_blocks * 512 < MIB  # nothing on the student's side


def used(folder: Path) -> int:
    """The bytes everything under ``folder`` really takes now (its blocks)."""
    total = 0
    for here, folders, files in os.walk(folder):
        for name in (*folders, *files):
            try:
                total += os.lstat(os.path.join(here, name)).st_blocks * 512
            except OSError:  # removed meanwhile
                continue
    return total


def _until(done: Callable[[], bool], seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return done()


@pytest.fixture
def helper() -> Iterator[IdleHelper]:
    idle = IdleHelper()
    yield idle
    idle.close()


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_the_idle_helper_lays_out_nothing_past_the_rubric_s_caps(
    helper: IdleHelper, tmp_path: Path
) -> None:
    mallory = tmp_path / "mallory"
    (mallory / "lab").mkdir(parents=True)
    (mallory / "lab" / "agent.py").write_text("def run(provider, task):\n    return task\n")
    sparse(mallory / "lab" / "big.bin", SPARSE)
    alice = tmp_path / "alice"
    (alice / "lab").mkdir(parents=True)
    for number in range(5):
        (alice / "lab" / f"part-{number}.py").write_text("x = 1\n")
    scratches = {name: tmp_path / f"scratch-{name}" for name in ("mallory", "many", "alice")}
    for scratch in scratches.values():
        scratch.mkdir()
    helper.lay_out(mallory, scratches["mallory"], IGNORED_NAMES, limits=Limits())
    # Within the default caps, past the ones this rubric sets: the order carries them.
    helper.lay_out(alice, scratches["many"], IGNORED_NAMES, limits=Limits(submission_entries=5))
    helper.lay_out(alice, scratches["alice"], IGNORED_NAMES, limits=Limits())
    assert _until(lambda: (scratches["alice"] / LAID_AHEAD).is_dir())  # orders go in turn
    assert sorted(p.name for p in (scratches["alice"] / LAID_AHEAD / "copy" / "lab").iterdir()) == [
        f"part-{number}.py" for number in range(5)
    ]
    assert list(scratches["mallory"].iterdir()) == [] and used(scratches["mallory"]) == 0
    assert list(scratches["many"].iterdir()) == []


@pytest.mark.slow
def test_a_sparse_submission_is_refused_and_its_classmates_are_graded(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    make_submission(subs / "alice")
    make_submission(subs / "mallory")
    sparse(subs / "mallory" / "lab" / "big.bin", SPARSE)
    make_submission(subs / "zoe")
    grader = Grader(tmp_path / "batch")
    peak = [0]
    done = threading.Event()

    def watch() -> None:  # what the batch's scratch (in its TMPDIR) really holds
        while not done.is_set():
            peak[0] = max(peak[0], used(grader.tmp))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        # Two at a time: the idle helper lays the next submission out ahead.
        batch = grader.grade(
            subs, "--jobs", "2", "--wall", "process", "--rubric", short_rubric(tmp_path)
        )
    finally:
        done.set()
        watcher.join()
        grader.close()
    assert batch.code == 1, batch.explain()
    assert "Traceback" not in batch.stderr
    graded_rows(batch, ["alice", "zoe"])
    row = batch.rows["mallory"]
    # The lab's own files (as the walk of tests/grader/sandbox/test_copy_bounds.py counts
    # them) and the sparse file, in full.
    over = measure(str(subs / "mallory"), IGNORED_NAMES, size=0, entries=1 << 20, depth=64)
    assert over is not None and SPARSE < over.found < SPARSE + MIB
    reason = (
        f"the submission holds {over.found / MIB:.2f} MiB (its apparent size: sparse files "
        "counted in full, and a hard-linked file once for each of its names, as the grader's "
        "copy writes them), past its limit of 64 MiB (disk_mb = 64 in the rubric's [limits]): its "
        "largest file is lab/big.bin, 256.00 MiB; nothing was copied or run. Remove what "
        "the lab does not need from the submission (data, models, build outputs), or raise "
        "disk_mb if the lab needs that much"
    )
    assert (row["status"], row["total"], row["reason"]) == ("ungradable", "", reason), row
    assert f"mallory: UNGRADABLE: {reason}" in batch.stdout.splitlines()
    # Two honest copies and their runs' copies, never the 256 MiB one.
    assert 0 < peak[0] < 64 * MIB, peak
