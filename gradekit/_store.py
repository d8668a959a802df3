"""Cassette files on disk: atomic writes, the crash journal, the recording lock.

A recorder appends every answer to ``<cassette>.journal`` (one JSON line, one
``write`` call) before returning it, so a killed process loses nothing the
operating system was handed. Folding the journal into the cassette is an
atomic replace followed by fsync; only then is the journal removed, so a
crash at any point leaves either the journal or the folded cassette.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from gradekit._cassette import Cassette, Entry, decode, encode, merge_entry
from gradekit._exceptions import CassetteCorrupt, CassetteLocked

__all__ = [
    "Journal",
    "RecordingLock",
    "fold_journal",
    "journal_path",
    "load",
    "read_journal",
    "write_atomic",
]


def journal_path(cassette: Path) -> Path:
    """Where answers wait between being returned and being folded into ``cassette``."""
    return cassette.with_name(cassette.name + ".journal")


def load(
    path: Path, *, case: str = "", with_journal: bool = True, verify_keys: bool = True
) -> Cassette | None:
    """Read ``path`` (None if it does not exist), plus any answers still in its journal."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = None
    cassette = (
        None if data is None else decode(data, source=str(path), case=case, verify_keys=verify_keys)
    )
    pending = read_journal(journal_path(path)) if with_journal else []
    if not pending:
        return cassette
    entries = dict(cassette.entries) if cassette else {}
    for key, entry in pending:
        merge_entry(entries, key, entry, source=str(path))
    return Cassette(case=cassette.case if cassette else case, entries=entries)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file in the same folder, fsync, ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def fold_journal(path: Path, *, case: str, keep: frozenset[str] | None = None) -> Cassette:
    """Fold the journal into the cassette file and remove the journal.

    ``keep``, when given, drops every entry whose key is not in it (a
    re-recording keeps only what was asked this time).
    """
    cassette = load(path, case=case) or Cassette(case=case)
    if keep is not None:
        kept = {k: e for k, e in cassette.entries.items() if k in keep}
        cassette = Cassette(case=cassette.case, entries=kept)
    journal = journal_path(path)
    if journal.exists() or keep is not None or not path.exists():
        write_atomic(path, encode(cassette))
    journal.unlink(missing_ok=True)
    return cassette


def read_journal(path: Path) -> list[tuple[str, Entry]]:
    """Entries appended by a recorder that has not folded them yet, oldest first.

    A last line without its newline is a write cut short by a crash and is
    ignored: its answer was never returned to the agent.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")[:-1]  # the piece after the last newline is torn or empty
    return [_journal_entry(line, path, number) for number, line in enumerate(lines, 1)]


def _journal_entry(line: str, path: Path, number: int) -> tuple[str, Entry]:
    try:
        raw = json.loads(line)
        entry = Entry(raw["prompt"], raw["response"], raw["provider"], raw["recorded_at"])
        return str(raw["key"]), entry
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CassetteCorrupt(
            f"{path}:{number}: unreadable journal line ({exc}). The journal holds answers "
            "recorded but not yet folded into the cassette: fix or delete that line, then "
            "run `gradekit record` again."
        ) from exc


# The C string escaper behind json.dumps, called directly: this line is written on every
# recorded call, and building it by hand costs half of what json.dumps of a dict does.
_quote: Callable[[str], str] = json.encoder.encode_basestring


class Journal:
    """An append-only file of answers, one ``os.write`` per answer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, key: str, entry: Entry) -> None:
        """Hand one answer to the operating system; it survives the process being killed."""
        prompt = "null" if entry.prompt is None else _quote(entry.prompt)
        line = (
            f'{{"key": {_quote(key)}, "prompt": {prompt}, "provider": {_quote(entry.provider)}, '
            f'"recorded_at": {_quote(entry.recorded_at)}, "response": {_quote(entry.response)}}}\n'
        )
        os.write(self._fd, line.encode("utf-8"))

    def close(self) -> None:
        """Close the file; its content stays until folded."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class RecordingLock:
    """An exclusive, non-blocking lock on ``<cassette>.lock``; released by the OS on a crash."""

    def __init__(self, cassette: Path) -> None:
        self.path = cassette.with_name(cassette.name + ".lock")
        while True:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock(self._fd)
            except OSError as exc:
                os.close(self._fd)
                raise CassetteLocked(
                    f"{cassette} is being recorded by another process right now. Wait for it "
                    "to finish (or stop it), then run again: answers it recorded are kept."
                ) from exc
            if self._still_linked():
                return
            os.close(self._fd)  # the holder removed the file as we locked it: lock the new one

    def _still_linked(self) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Unlock and remove the lock file."""
        if self._fd >= 0:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = -1


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _fsync_dir(folder: Path) -> None:
        """Windows cannot open a folder to fsync it; os.replace is durable enough there."""

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _fsync_dir(folder: Path) -> None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
