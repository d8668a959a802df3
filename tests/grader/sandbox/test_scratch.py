"""Where scratch folders go: in memory where the machine has room, else where TMPDIR says.

It tests ``grader.sandbox._scratch``'s private helpers on purpose: whether a folder is in
memory, and the room it needs."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from grader.sandbox import _scratch, scratch_folder, scratch_root


def _memory_usable() -> bool:
    try:
        status = os.statvfs("/dev/shm")
    except OSError:
        return False
    return (
        _scratch._is_tmpfs("/dev/shm")
        and os.access("/dev/shm", os.W_OK | os.X_OK)
        and not status.f_flag & (os.ST_RDONLY | os.ST_NOEXEC)
        and status.f_bavail * status.f_frsize >= _scratch.MEMORY_FREE
    )


@pytest.fixture
def no_tmpdir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)


def test_tmpdir_set_by_the_grader_is_obeyed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert scratch_root() is None
    folder = scratch_folder("gradekit-test-")
    assert folder.parent == tmp_path
    assert folder.stat().st_mode & 0o777 == 0o700  # private, as mkdtemp makes it


@pytest.mark.skipif(not _memory_usable(), reason="/dev/shm is not a usable tmpfs here")
@pytest.mark.usefixtures("no_tmpdir")
def test_memory_is_chosen_where_it_is_a_roomy_tmpfs() -> None:
    assert scratch_root() == "/dev/shm"
    folder = scratch_folder("gradekit-test-")
    try:
        assert folder.parent == Path("/dev/shm")
    finally:
        shutil.rmtree(folder)


@pytest.mark.usefixtures("no_tmpdir")
def test_a_folder_that_is_no_tmpfs_is_not_taken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_scratch, "MEMORY", str(tmp_path))  # a folder, not a mount point
    assert scratch_root() is None
    assert scratch_folder("gradekit-test-").parent == Path(tempfile.gettempdir())


@pytest.mark.usefixtures("no_tmpdir")
def test_a_tmpfs_without_room_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    status = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
    room = status.f_bavail * status.f_frsize if status else 0
    monkeypatch.setattr(_scratch, "MEMORY_FREE", room + (1 << 40))  # a container's 64 MB
    assert scratch_root() is None


@pytest.mark.usefixtures("no_tmpdir")
def test_a_missing_folder_is_not_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_scratch, "MEMORY", str(tmp_path / "absent"))
    assert scratch_root() is None
