"""Reading a file of an untrusted submission from the grader's parent process.

A submission is a student's copy of the kit, so anything in it may be hostile: a
symlink to ``/dev/zero`` or to the grader's own files, a FIFO that never answers, a
file of gigabytes. Every parent-side read of a submission file goes through
``read_submission_file``, which

- walks the path one component at a time with ``os.open(name, dir_fd=...)`` and
  ``O_NOFOLLOW``, so a symlink anywhere on the path is refused, even one that stays
  inside the submission (a submission has no need for links and refusing them all
  leaves nothing to race);
- refuses ``..``, absolute paths and empty names before opening anything;
- opens with ``O_NONBLOCK`` and ``O_NOCTTY``, so a FIFO or a terminal cannot block or
  take over the grader, and checks the open descriptor with ``fstat``: a regular file only;
- reads at most ``cap + 1`` bytes and refuses a file larger than ``cap``.

The submission folder itself (``root``) is the grader's choice and is opened as given.
Where ``os.open`` takes no ``dir_fd`` (Windows, where only the student's own ``gradekit``
commands run, never the grader), the same checks are made by path with ``lstat`` before
the open, which a concurrent change to the folder could race.
Every refusal is a ``SubmissionFileError`` whose message names the file and the fix;
a file (or folder on its path) that does not exist is the subclass
``MissingSubmissionFile``, which callers turn into their own "missing: record it" finding.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from grader._errors import MissingSubmissionFile, SubmissionFileError

__all__ = [
    "CASSETTE_CAP",
    "CHANGE_LOG_CAP",
    "FAILURES_CAP",
    "FIXTURE_CAP",
    "INCIDENT_CAP",
    "PYPROJECT_CAP",
    "SOURCE_CAP",
    "MissingSubmissionFile",
    "SubmissionFileError",
    "read_submission_file",
    "require_submission_folder",
    "submission_entries",
    "submission_files",
]

_KIB = 1024
_MIB = 1024 * _KIB

# The most the parent reads of each kind of submission file; larger is a finding.
CASSETTE_CAP = 16 * _MIB
FIXTURE_CAP = 16 * _MIB
FAILURES_CAP = 256 * _KIB
PYPROJECT_CAP = 256 * _KIB
CHANGE_LOG_CAP = 1 * _MIB
SOURCE_CAP = 16 * _MIB  # the agent's module, only ever hashed for the report's inputs
INCIDENT_CAP = 16 * _MIB  # a recorded incident, hashed for the report's inputs

_CHUNK = 1 * _MIB
_O = {
    name: getattr(os, name, 0)
    for name in ("O_DIRECTORY", "O_NOFOLLOW", "O_NONBLOCK", "O_NOCTTY", "O_CLOEXEC", "O_BINARY")
}
_FOLDER_FLAGS = os.O_RDONLY | _O["O_DIRECTORY"] | _O["O_NOFOLLOW"] | _O["O_CLOEXEC"]
_FILE_FLAGS = (
    os.O_RDONLY
    | _O["O_NOFOLLOW"]
    | _O["O_NONBLOCK"]
    | _O["O_NOCTTY"]
    | _O["O_CLOEXEC"]
    | _O["O_BINARY"]
)
# openat and O_NOFOLLOW: every POSIX system the grader runs on; not Windows.
_AT = os.open in os.supports_dir_fd and bool(_O["O_NOFOLLOW"] and _O["O_DIRECTORY"])


def read_submission_file(root: Path, relative: str, *, cap: int) -> bytes:
    """The bytes of ``root/relative``: a regular file, reached without a link, at most ``cap``."""
    parts = _parts(relative)
    fd = _open_at(root, relative, parts) if _AT else _open_by_path(root, relative, parts)
    try:
        return _read_capped(fd, relative, cap)
    finally:
        os.close(fd)


def require_submission_folder(root: Path, relative: str) -> None:
    """Raise unless ``root/relative`` is a folder reached without a link."""
    parts = _parts(relative)
    if _AT:
        os.close(_open_folders(root, relative, parts))
    else:
        _walk_by_path(root, relative, parts, folder=True)


def submission_files(root: Path, relative: str, *, suffix: str, most: int) -> list[str]:
    """The names in the folder ``root/relative`` (reached without a link) that end in
    ``suffix``, sorted, at most ``most`` of them; none when the folder does not exist.
    Only names are listed: each file is still read with ``read_submission_file``."""
    try:
        entries = _entries(root, relative)
    except MissingSubmissionFile:
        return []
    return sorted(name for name, _ in entries if name.endswith(suffix))[:most]


def submission_entries(root: Path, relative: str, *, most: int) -> list[tuple[str, bool]]:
    """Each name in the folder ``root/relative`` (reached without a link, or the submission
    folder itself for ``""``), sorted, at most ``most``, and whether it is a folder itself
    (a link to one is not): a whole tree is walked with one listing a folder, where
    ``require_submission_folder`` on every name would open its whole path."""
    return sorted(_entries(root, relative))[:most]


def _entries(root: Path, relative: str) -> list[tuple[str, bool]]:
    """Each name in the folder ``root/relative`` (reached without a link) and whether it
    is a folder, told while the folder is open (a name whose type the listing does not
    give is looked up in it)."""
    if not relative:
        return _listed(root)
    parts = _parts(relative)
    if not _AT:
        _walk_by_path(root, relative, parts, folder=True)
        return _listed(root / relative)
    fd = _open_folders(root, relative, parts)
    try:
        return _listed(fd)
    finally:
        os.close(fd)


def _listed(folder: Path | int) -> list[tuple[str, bool]]:
    with os.scandir(folder) as found:
        return [(entry.name, _is_folder(entry)) for entry in found]


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _parts(relative: str) -> tuple[str, ...]:
    """The names to walk; a path that could leave the submission is refused unopened."""
    path = PurePosixPath(relative)
    if "\0" in relative or path.is_absolute() or ".." in path.parts or not path.parts:
        raise SubmissionFileError(
            f"{relative!r} is not a path inside the submission: name files relative to "
            "the submission folder, without '..'"
        )
    return path.parts


def _open_at(root: Path, relative: str, parts: tuple[str, ...]) -> int:
    """A descriptor of the regular file ``parts``, each folder opened inside the previous."""
    folder = _open_folders(root, relative, parts[:-1])
    try:
        return _open_file(folder, relative, parts[-1])
    finally:
        os.close(folder)


def _open_folders(root: Path, relative: str, names: tuple[str, ...]) -> int:
    """A descriptor of the last folder of ``names``, each opened inside the previous one."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise MissingSubmissionFile(
            f"{relative} is missing: the submission folder does not exist"
        ) from None
    except OSError as exc:
        raise SubmissionFileError(
            f"{relative} cannot be read: the submission folder cannot "
            f"be opened ({exc.strerror}); grade a readable folder"
        ) from None
    for depth, name in enumerate(names, 1):
        shown = "/".join(names[:depth])
        try:
            inner = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
        except OSError as exc:
            kind = _kind_at(fd, name)
            os.close(fd)
            raise _refusal(exc, relative, shown, kind, folder=True) from None
        os.close(fd)
        fd = inner
    return fd


def _open_file(folder: int, relative: str, name: str) -> int:
    """A descriptor of the regular file ``name`` in ``folder``; nothing else is opened."""
    kind = _kind_at(folder, name)
    if kind == "symlink":
        raise _symlink(relative, relative, folder=False)
    if kind not in ("", "file", "folder"):  # never open a device or a FIFO, even nonblocking
        raise _not_regular(relative, kind)
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        raise _refusal(exc, relative, relative, _kind_at(folder, name), folder=False) from None
    return _regular(fd, relative)


def _regular(fd: int, relative: str) -> int:
    """``fd`` if it is a regular file; what was opened decides, it may have changed since."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(relative, _kind(mode))
    return fd


def _open_by_path(root: Path, relative: str, parts: tuple[str, ...]) -> int:
    """``_open_at`` without ``dir_fd``: each component is checked with ``lstat`` first."""
    _walk_by_path(root, relative, parts, folder=False)
    try:
        fd = os.open(root.joinpath(*parts), _FILE_FLAGS)
    except OSError as exc:
        raise _refusal(exc, relative, relative, "", folder=False) from None
    return _regular(fd, relative)


def _walk_by_path(root: Path, relative: str, parts: tuple[str, ...], *, folder: bool) -> None:
    """Refuse a link or a non-folder on the path, and a last component of the wrong kind."""
    for depth in range(1, len(parts) + 1):
        shown, last = "/".join(parts[:depth]), depth == len(parts)
        try:
            kind = _kind(os.lstat(root.joinpath(*parts[:depth])).st_mode)
        except OSError as exc:
            raise _refusal(exc, relative, shown, "", folder=folder or not last) from None
        if kind == "symlink":
            raise _symlink(relative, shown, folder=folder or not last)
        if (folder or not last) and kind != "folder":
            raise SubmissionFileError(
                f"{shown}{_where(relative, shown)} is a {kind}, not a "
                "folder: make it a folder or fix the path"
            )
        if last and not folder and kind != "file":
            raise _not_regular(relative, kind)


def _read_capped(fd: int, relative: str, cap: int) -> bytes:
    if os.fstat(fd).st_size > cap:
        raise _too_large(relative, cap)
    chunks, total = [], 0
    while total <= cap:  # the size can change after fstat: never read more than cap + 1
        try:
            chunk = os.read(fd, min(_CHUNK, cap + 1 - total))
        except OSError as exc:
            raise SubmissionFileError(
                f"{relative} cannot be read ({exc.strerror}): commit it "
                "as an ordinary readable file"
            ) from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > cap:
        raise _too_large(relative, cap)
    return b"".join(chunks)


def _kind_at(folder: int, name: str) -> str:
    """What ``name`` is in ``folder`` without following it; "" when it cannot be seen."""
    try:
        return _kind(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return ""


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "device"),
        (stat.S_ISBLK, "device"),
    )
    return next((kind for test, kind in kinds if test(mode)), "special file")


def _refusal(
    exc: OSError, relative: str, shown: str, kind: str, *, folder: bool
) -> SubmissionFileError:
    """The error for an ``os.open`` that failed on ``shown`` (``relative`` or a folder on it)."""
    where = _where(relative, shown)
    if kind == "symlink" or exc.errno in (errno.ELOOP, errno.EMLINK):
        return _symlink(relative, shown, folder=folder)
    if exc.errno == errno.ENOENT:
        return MissingSubmissionFile(f"{relative} is missing: add it and commit it")
    if folder and exc.errno == errno.ENOTDIR:
        return SubmissionFileError(
            f"{shown}{where} is a {kind or 'file'}, not a folder: make it a folder or fix the path"
        )
    return SubmissionFileError(
        f"{shown}{where} cannot be opened ({exc.strerror}): commit it as an ordinary readable file"
    )


def _where(relative: str, shown: str) -> str:
    return "" if shown == relative else f" (on the path {relative})"


def _symlink(relative: str, shown: str, *, folder: bool) -> SubmissionFileError:
    return SubmissionFileError(
        f"{shown}{_where(relative, shown)} is a symlink: the grader follows no links, so "
        f"commit the {'folder' if folder else 'file'} itself"
    )


def _not_regular(relative: str, kind: str) -> SubmissionFileError:
    return SubmissionFileError(
        f"{relative} is not a regular file (it is a {kind}): commit an ordinary file in its place"
    )


def _too_large(relative: str, cap: int) -> SubmissionFileError:
    size = (
        f"{cap // _MIB} MiB"
        if cap and cap % _MIB == 0
        else f"{cap // _KIB} KiB"
        if cap and cap % _KIB == 0
        else f"{cap} byte{'s' * (cap != 1)}"
    )
    return SubmissionFileError(
        f"{relative} is larger than {size}, the most the grader reads: make it smaller"
    )
