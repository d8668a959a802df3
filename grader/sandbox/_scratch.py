"""Where the grader's scratch folders live: in memory, where the machine has room for them.

A grading lays its submission out in a scratch folder and runs every child over that copy;
a batch makes and removes thousands of small files a minute there. On a disk file system
that churn costs the kernel more than the runs do (on ext4 without a journal, every new
file's inode is searched for past the recently deleted ones), while in a tmpfs it costs a
memory copy. So the scratch goes to ``/dev/shm`` when:

- ``TMPDIR`` is not set (a grader who sets it has chosen, and is obeyed);
- ``/dev/shm`` is a tmpfs this process may write and execute from;
- it has ``MEMORY_FREE`` bytes available (a container's 64 MB default does not qualify).

Otherwise the scratch is wherever ``tempfile`` puts it. Nothing of the folder's path
reaches a report.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["MEMORY", "MEMORY_FREE", "scratch_folder", "scratch_root"]

MEMORY = "/dev/shm"
MEMORY_FREE = 1 << 30  # a cohort's workers hold a few laid-out submissions at a time


def scratch_root() -> str | None:
    """The folder for this process's scratch folders, ``None`` for ``tempfile``'s choice."""
    if os.environ.get("TMPDIR"):
        return None
    try:
        status = os.statvfs(MEMORY)
    except OSError:
        return None
    if (
        status.f_flag & (os.ST_RDONLY | os.ST_NOEXEC)
        or status.f_bavail * status.f_frsize < MEMORY_FREE
        or not os.access(MEMORY, os.W_OK | os.X_OK)
        or not _is_tmpfs(MEMORY)
    ):
        return None
    return MEMORY


def scratch_folder(prefix: str) -> Path:
    """A new private folder under ``scratch_root()``: the caller removes it."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root()))


def _is_tmpfs(folder: str) -> bool:
    """Whether ``folder`` is a tmpfs's mount point (by this process's mount table)."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            return any(
                fields[1] == folder and fields[2] == "tmpfs"
                for fields in (line.split() for line in mounts)
                if len(fields) > 2
            )
    except OSError:
        return False
