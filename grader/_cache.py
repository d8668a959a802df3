"""What a grading derives from a file's bytes alone, kept for the rest of a batch: ``Derived``.

A cohort's submissions start from one hand-out, so most of their files are byte for byte
the same: the modules a student never touched, the tests, the packages. Two things a
grading does to a file depend on nothing but its bytes (and the grader, which does not
change inside a batch): the tamper scan's reading of a ``.py`` file, and its bytecode.
A batch keeps both here, keyed by the SHA-256 of what they were made from, so each
distinct file is scanned and compiled once however many submissions hold it, and every
submission gets exactly what a grading of its own would have made.

The folder is the batch's own (mode 0700, never shown to a sandboxed run: the runs' hosts
see only the batch's scratch folder) and is removed with it. An entry is written whole
under a private name and renamed into place, so a worker reads an entry whole or not at
all; two workers making the same entry at once write the same bytes. An entry that cannot
be read or written is made again: the cache only ever saves work.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Derived", "content_key"]


def content_key(*parts: bytes) -> str:
    """The SHA-256 of ``parts``, each length-prefixed (two splits of one byte string are
    two keys)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Derived:
    """One batch's store of what was derived from content: ``kind`` names what (``scan``,
    ``pyc``), ``key`` the content (``content_key``). ``folder`` None: this process's memory
    alone (a single grading, a check's two gradings).

    A process also keeps each store's entries in its memory (by the store's folder), up
    to ``MEMORY_CAP`` bytes over all of them, the oldest let go first: a worker grades many
    submissions, and an entry read once is not read from disk again."""

    folder: Path | None = None

    def read(self, kind: str, key: str) -> bytes | None:
        """The entry, or None when there is none (or it cannot be read)."""
        path = self._path(kind, key)
        kept = _MEMORY.get((self.folder, kind, key))
        if kept is not None or path is None:
            return kept
        try:
            with open(path, "rb") as entry:
                data = entry.read()
        except OSError:
            return None
        _remember((self.folder, kind, key), data)
        return data

    def write(self, kind: str, key: str, data: bytes) -> None:
        """Keep ``data`` as the entry (best effort: a full disk only costs the saving)."""
        path = self._path(kind, key)
        _remember((self.folder, kind, key), data)
        if path is None:
            return
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            with open(temporary, "xb") as entry:
                entry.write(data)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)

    def _path(self, kind: str, key: str) -> str | None:
        if not kind.isalpha() or len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a cache entry: {kind!r} {key!r}")
        return None if self.folder is None else os.path.join(self.folder, kind, key)


MEMORY_CAP = 64 << 20  # bytes of entries a process keeps in memory, over all its stores
_MEMORY: dict[tuple[Path | None, str, str], bytes] = {}
_held = [0]  # bytes in _MEMORY


def _remember(entry: tuple[Path | None, str, str], data: bytes) -> None:
    """Keep an entry in this process's memory (in place of what it held), the oldest let
    go past ``MEMORY_CAP``."""
    _held[0] -= len(_MEMORY.pop(entry, b""))
    if len(data) > MEMORY_CAP // 4:  # one entry never lets most of the others go
        return
    _MEMORY[entry] = data
    _held[0] += len(data)
    while _held[0] > MEMORY_CAP:
        _held[0] -= len(_MEMORY.pop(next(iter(_MEMORY))))
