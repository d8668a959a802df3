"""What the grader's copy of a submission would hold, counted before it is made.

A grading copies its submission once into its scratch folder (``LaidOut``), which is
usually host memory (``/dev/shm``), and a batch's idle helper copies the next ones ahead
the same way: ``copy_submission`` of the harness, uncapped. ``measure`` walks the
submission exactly as that copy would (each folder's entries in name order, ``ignored``
names left out, links kept as links and never followed, FIFOs, sockets and devices left
out), and its callers copy nothing when it passes a cap:

- the apparent size: every regular file's ``st_size`` and every link's (its target's
  length), so a sparse file counts in full and so does each name of a hard-linked file,
  as the copy writes each in full; a folder counts none (what a folder takes differs from
  one file system to the next, and a refusal must read the same on every machine);
- the entries: the files, folders and links the copy would make;
- the depth: the folders an entry's path inside the submission runs through, plus one
  (``lab`` is 1 deep, ``lab/agent.py`` 2).

The walk stops at the first entry past the entries or depth cap, so a refused submission
costs no more to walk than an allowed one; the size is judged once the walk is whole, so
its refusal names the largest file.

Standard library only: the idle helper loads this file by its path, as it loads the
harness. ``refusal`` words what ``measure`` found as a row's reason: sizes and paths
inside the submission only, the same on every machine.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Over", "measure", "refusal"]

SIZE, ENTRIES, DEPTH = "size", "entries", "depth"


@dataclass(frozen=True, slots=True)
class Over:
    """A cap the copy of a submission would pass, and where.

    ``what`` is ``SIZE`` (``found``: the whole apparent size in bytes; ``path``: the
    largest file, ``size`` its bytes), ``ENTRIES`` (``found``: the count when the walk
    stopped, the cap plus one; ``path``: the entry that passed it) or ``DEPTH``
    (``found``: ``path``'s depth, the cap plus one). ``path`` is inside the submission,
    its parts joined by ``/``.
    """

    what: str
    found: int
    cap: int
    path: str
    size: int = 0


def measure(
    root: str, ignored: Iterable[str], *, size: int, entries: int, depth: int
) -> Over | None:
    """The first cap the copy of ``root`` (``ignored`` names left out) would pass: its
    apparent ``size`` in bytes, its ``entries``, its ``depth``; None when it passes none.
    The walk stops at the entries or depth cap, so it costs no more than what it allows;
    an entry that cannot be looked at raises ``OSError``, as the copy would."""
    skipped = _skipped(tuple(ignored))
    total = count = largest = 0
    biggest = ""
    # The folders being listed, the innermost last: what is left of each one's entries (in
    # name order), its path inside the submission, the depth of its entries. The copy
    # makes a folder's entries in name order, each folder's whole tree before the next
    # entry, and so does this walk: the path a refusal names is where the copy would be.
    stack = [(iter(_listed(root, skipped, follow=True)), root, "", 1)]
    while stack:
        left, here, inside, level = stack[-1]
        entry = next(left, None)
        if entry is None:
            stack.pop()
            continue
        name, folder, bytes_ = entry
        path = f"{inside}{name}"
        if level > depth:
            return Over(DEPTH, level, depth, path)
        count += 1
        if count > entries:
            return Over(ENTRIES, count, entries, path)
        total += bytes_
        if bytes_ > largest:
            largest, biggest = bytes_, path
        if folder:
            there = os.path.join(here, name)
            stack.append((iter(_listed(there, skipped)), there, f"{path}/", level + 1))
    if total > size:
        return Over(SIZE, total, size, biggest, largest)
    return None


def refusal(over: Over, limits: dict[str, str]) -> str:
    """Why the submission was not copied, its fix last; ``limits``: the name of the rubric
    limit behind each cap (``SIZE``, ``ENTRIES``, ``DEPTH``)."""
    limit = limits[over.what]
    path = _shown(over.path)
    if over.what == SIZE:
        mib = over.cap >> 20
        found = _bytes(over.found)
        if found == f"{mib:.2f} MiB":  # just past the cap: the exact count says so
            found += f" ({over.found:,} bytes)"
        return (
            f"the submission holds {found} (its apparent size: sparse files counted in "
            f"full, and a hard-linked file once for each of its names, as the grader's "
            f"copy writes them), past its limit of {mib} MiB ({limit} = {mib} in the "
            f"rubric's [limits]): its largest file is {path}, {_bytes(over.size)}; nothing "
            f"was copied or run. Remove what the lab does not need from the submission "
            f"(data, models, build outputs), or raise {limit} if the lab needs that much"
        )
    if over.what == ENTRIES:
        return (
            f"the submission holds more than {over.cap:,} files, folders and links "
            f"(ignored names such as .git, .venv and node_modules not counted), past its "
            f"limit of {over.cap:,} ({limit} = {over.cap} in the rubric's [limits]): the "
            f"first past it, in the order the grader copies them, is {path}; nothing was "
            f"copied or run. Remove what the lab does not need from the submission "
            f"(generated files, a copied library), or raise {limit} if the lab needs "
            f"that many"
        )
    return (
        f"the submission nests {path} {over.found} levels deep, past its limit of "
        f"{over.cap} ({limit} = {over.cap} in the rubric's [limits]); nothing was copied "
        f"or run. Move it nearer the top or remove it, or raise {limit} if the lab "
        f"needs that depth"
    )


@functools.lru_cache(maxsize=8)
def _skipped(patterns: tuple[str, ...]) -> Callable[[str], object]:
    """Whether a name matches one of ``patterns``, as ``copy_submission`` matches it."""
    if not patterns:
        return lambda name: None
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)).match


def _listed(
    folder: str, skipped: Callable[[str], object], *, follow: bool = False
) -> list[tuple[str, bool, int]]:
    """What the copy takes of ``folder``, in name order: each entry's name, whether it is a
    folder, and its bytes (a regular file's size, a link's; none for a folder). Each is
    looked at through the folder's descriptor, not by its whole path: a walk's lookups are
    most of its cost. ``follow``: ``folder`` may be a link (the submission's own folder,
    which the copy lists through one); a folder inside never is."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | (0 if follow else os.O_NOFOLLOW))
    try:
        taken = []
        with os.scandir(fd) as found:
            for entry in found:
                if skipped(entry.name):
                    continue
                if entry.is_symlink():  # kept a link: its target's length
                    taken.append((entry.name, False, entry.stat(follow_symlinks=False).st_size))
                elif entry.is_dir(follow_symlinks=False):
                    taken.append((entry.name, True, 0))
                elif entry.is_file(follow_symlinks=False):
                    taken.append((entry.name, False, entry.stat(follow_symlinks=False).st_size))
                # else a FIFO, a socket, a device: the copy leaves it out
    finally:
        os.close(fd)
    taken.sort()  # by name: one folder never holds two entries of one name
    return taken


_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def _bytes(count: int) -> str:
    """``count`` bytes in the largest unit it fills, to two decimals."""
    for unit, name in _UNITS:
        if count >= unit:
            return f"{count / unit:.2f} {name}"
    return f"{count} bytes"


_SHOWN = 160  # characters of a path a refusal quotes; a longer one keeps its ends


def _shown(path: str) -> str:
    """``path`` as a reason quotes it: on one line, printable, at most ``_SHOWN`` long."""
    if not path.isprintable():
        path = ascii(path)[1:-1]
    if len(path) > _SHOWN:
        path = f"{path[: _SHOWN // 2]}…{path[-(_SHOWN // 2 - 1) :]}"
    return path
