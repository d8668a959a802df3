"""A readable copy of what a child needs, for a root grader whose interpreter or packages
uid 65534 cannot reach (``readable_copy``).

A root grader runs its children as uid 65534, never as root on the host. Bubblewrap binds
each path the child sees as that uid, and the process wall's child runs the interpreter
as that uid, so the interpreter, its standard library and the grader environment's packages
must be readable to it. An interpreter under ``/root`` (pyenv, a hand-built Python) is not:
``/root`` is private. So such a tree is copied once a machine into ``CACHE`` (root's, mode
0755, every entry readable and none writable but by root): each file a hard link to the
original where the file system allows (nothing copied, a few milliseconds for a standard
library), a copy elsewhere. Behind namespaces the copy is bound at the original's path, so
the child sees the same paths as an unprivileged grader's child does; the process wall runs
the copy's interpreter itself.

Only what a run can need is taken: of an interpreter's prefix, its binary, its shared
library and its standard library (not its ``site-packages``, which a child never imports:
it starts with ``-S`` and is given the grader environment's packages, nor its test suite).
A file not readable to other users in the original (a private file) is left out: making it
readable would publish what its owner kept private. A copy is named by what it was made
from (the path, and the identity and time of the files that change when the tree is
reinstalled or a package is added), so a changed tree gets a new copy and an old one is
never changed under a running child; it is made under a private name and renamed into place
whole, so two graders making it at once each get a whole copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable

__all__ = ["CACHE", "interpreter_parts", "readable_copy"]

CACHE = "/var/cache/gradekit/readable"  # root's; every copy under it is readable to all


def interpreter_parts(
    binary: str, version: str, keep: tuple[str, ...] = ()
) -> Callable[[str], bool]:
    """Which paths under an interpreter's prefix a child needs (relative to the prefix):
    ``bin/NAME`` of ``binary``, ``lib``'s shared libraries and ``lib/pythonX.Y`` but its
    ``site-packages`` and ``test``; ``keep``: folders taken whole all the same (the
    grader's package folders, where it runs without a virtual environment)."""
    program = f"bin/{os.path.basename(binary)}"
    stdlib = f"lib/python{version}"
    left_out = (f"{stdlib}/site-packages", f"{stdlib}/test")

    def wanted(relative: str) -> bool:
        if relative in ("bin", "lib", stdlib, program) or any(
            relative == k or relative.startswith(k + "/") or k.startswith(relative + "/")
            for k in keep
        ):
            return True
        if any(relative == out or relative.startswith(out + "/") for out in left_out):
            return False
        if relative.startswith(stdlib + "/"):
            return True
        return (
            relative.startswith("lib/")
            and "/" not in relative[4:]
            and relative[4:].startswith("libpython")
        )

    return wanted


def readable_copy(
    source: str, wanted: Callable[[str], bool] = lambda relative: True, *, cache: str = CACHE
) -> str:
    """The path of a copy of the folder ``source`` that every user can read, made under
    ``cache`` once (``OSError`` where it cannot be made): the entries ``wanted`` takes (by
    their path relative to ``source``; a folder not taken is not walked)."""
    key = _key(source)
    copy = os.path.join(cache, f"{os.path.basename(source) or 'root'}-{key}")
    if os.path.isdir(copy):
        return copy
    _make_cache(cache)
    making = tempfile.mkdtemp(prefix=".making-", dir=cache)
    try:
        _fill(source, making, wanted)
        os.chmod(making, 0o755)
        try:
            os.rename(making, copy)
        except OSError:
            if not os.path.isdir(copy):  # another grader's copy landed first: that is whole
                raise
    finally:
        if os.path.isdir(making):
            shutil.rmtree(making, ignore_errors=True)
    return copy


def _key(source: str) -> str:
    """What the copy of ``source`` is named by: its path, and the identity and time of it
    and of each entry at its top and one level below (a reinstalled interpreter, a package
    added or upgraded change at least one of them)."""
    parts = [source]
    for here in (source, *_folders_in(source)):
        found = os.stat(here)
        parts.append(f"{here}:{found.st_ino}:{found.st_mtime_ns}")
        with contextlib.suppress(OSError), os.scandir(here) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                seen = entry.stat(follow_symlinks=False)
                parts.append(f"{entry.name}:{seen.st_ino}:{seen.st_mtime_ns}:{seen.st_size}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _folders_in(source: str) -> list[str]:
    with contextlib.suppress(OSError), os.scandir(source) as entries:
        return sorted(e.path for e in entries if e.is_dir(follow_symlinks=False))
    return []


def _make_cache(cache: str) -> None:
    """``cache`` made where missing (0755), and checked: root's, a folder, writable by root
    alone, and every folder above it searchable by every user (else ``OSError``)."""
    os.makedirs(cache, mode=0o755, exist_ok=True)
    found = os.lstat(cache)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != 0 or found.st_mode & 0o022:
        raise OSError(f"{cache} must be a folder of root's that only root can write")
    os.chmod(cache, 0o755)
    here = cache
    while here != "/":
        if not os.stat(here).st_mode & stat.S_IXOTH:
            raise OSError(f"{here} is not searchable by every user")
        here = os.path.dirname(here)


def _fill(source: str, copy: str, wanted: Callable[[str], bool]) -> None:
    """Copy the entries of ``source`` that ``wanted`` takes into ``copy``: folders 0755,
    files hard-linked (or copied, 0644 or 0755), links as links; private files left out."""
    for here, folders, files in os.walk(source):
        relative = os.path.relpath(here, source)
        prefix = "" if relative == "." else relative + "/"
        linked = [f for f in folders if os.path.islink(os.path.join(here, f))]
        folders[:] = sorted(f for f in folders if f not in linked and wanted(prefix + f))
        target = os.path.join(copy, relative) if prefix else copy
        os.makedirs(target, mode=0o755, exist_ok=True)
        os.chmod(target, 0o755)
        for name in sorted(files) + linked:  # a link to a folder is copied as a link
            if not wanted(prefix + name):
                continue
            origin, made = os.path.join(here, name), os.path.join(target, name)
            found = os.lstat(origin)
            if stat.S_ISLNK(found.st_mode):
                os.symlink(os.readlink(origin), made)
            elif stat.S_ISREG(found.st_mode) and found.st_mode & stat.S_IROTH:
                try:
                    os.link(origin, made, follow_symlinks=False)
                except OSError:
                    shutil.copyfile(origin, made, follow_symlinks=False)
                    os.chmod(made, 0o755 if found.st_mode & stat.S_IXOTH else 0o644)
