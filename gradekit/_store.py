"""One store for every recording format: atomic writes, the crash journal, the lock, the fold.

A recorder appends every answer to ``<file>.journal`` (one JSON line, one
``write`` call) before returning it, so a killed process loses nothing the
operating system was handed. Folding the journal into the file is an atomic
replace followed by fsync; only then is the journal removed, so a crash at
any point leaves either the journal or the folded file.

Cassettes and tool fixtures are both kept here: a format supplies only its
codec (``gradekit._codec.Codec``), and every function that reads or folds a
file is given the codec of the file it is asked about.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gradekit._cassette import CASSETTE, REPLAYED, Cassette, Entry
from gradekit._codec import Codec, Document, Fold
from gradekit._exceptions import CassetteLocked

__all__ = [
    "Journal",
    "RecordingLock",
    "fold",
    "journal_path",
    "load",
    "read",
    "read_journal",
    "replayed",
    "write_atomic",
]

D = TypeVar("D", bound=Document)


def journal_path(path: Path) -> Path:
    """Where answers wait between being returned and being folded into ``path``."""
    return path.with_name(path.name + ".journal")


def read(path: Path, codec: Codec[D], *, case: str = "") -> D | None:
    """Read ``path`` plus what its journal still holds; None if neither holds anything."""
    base = _decoded(path, codec, case)
    pending = read_journal(journal_path(path), codec)
    if not pending:
        return base
    return codec.merge(base, Fold(path, case, pending))


def load(path: Path, *, case: str = "", verify_keys: bool = True) -> Cassette | None:
    """``read`` a cassette; without ``verify_keys``, as a replay does (``REPLAYED``)."""
    return read(path, CASSETTE if verify_keys else REPLAYED, case=case)


def fold(
    path: Path, codec: Codec[D], *, case: str, now: str = "", keep: frozenset[str] | None = None
) -> D:
    """Fold the journal into the file (atomic, fsynced), then remove the journal.

    ``keep``, when given, drops every entry whose key is not in it (a
    re-recording keeps only what was asked this time); ``now`` is the time of
    the recording run. A file that does not exist yet is written, empty if
    nothing was recorded; a corrupt one is an error and stays as it is.
    """
    base = _decoded(path, codec, case)
    journal = journal_path(path)
    folded = codec.merge(base, Fold(path, case, read_journal(journal, codec), now, keep))
    if journal.exists() or keep is not None or base is None:
        write_atomic(path, codec.encode(folded))
    journal.unlink(missing_ok=True)
    return folded


def replayed(recording: str | Path | D, codec: Codec[D]) -> tuple[str, str, D | None]:
    """What a replay serves from: its source (``<in memory>`` for a value), its case and
    its recording, None when the file does not exist yet. A path is read with its journal,
    and its name (without ``.json``) is the case."""
    if isinstance(recording, str | Path):
        path = Path(recording)
        loaded = read(path, codec, case=path.stem)
        return str(path), path.stem if loaded is None else loaded.case, loaded
    return "<in memory>", recording.case, recording


def _decoded(path: Path, codec: Codec[D], case: str) -> D | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return codec.decode(data, source=str(path), case=case)


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
    fsync_folder(path.parent)


def read_journal(path: Path, codec: Codec[D]) -> list[tuple[str, Entry]]:
    """Entries appended by a recorder that has not folded them yet, oldest first.

    A last line without its newline is a write cut short by a crash and is
    ignored: its answer was never returned to the agent.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")[:-1]  # the piece after the last newline is torn or empty
    return [_journal_entry(line, path, number, codec) for number, line in enumerate(lines, 1)]


def _journal_entry(line: str, path: Path, number: int, codec: Codec[D]) -> tuple[str, Entry]:
    try:
        raw = json.loads(line)
        entry = Entry(raw["prompt"], raw["response"], raw["provider"], raw["recorded_at"])
        return str(raw["key"]), entry
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise codec.journal_problem(path, number, f"unreadable journal line ({exc})") from exc


# The C string escaper behind json.dumps, called directly: this line is written on every
# recorded call, and building it by hand costs half of what json.dumps of a dict does.
_quote: Callable[[str], str] = json.encoder.encode_basestring
# Bytes a JSON string must escape (control characters, '"', '\\') map to 0, all others to 1.
_PLAIN = bytes(0 if byte < 0x20 or byte in b'"\\' else 1 for byte in range(256))


def json_string(text: str) -> bytes:
    """``text`` as a JSON string in UTF-8: the bytes of ``_quote(text)``.

    The escaper looks at every character twice (about 2 ns each): 2 µs of every recorded
    call went on a 1 KB prompt. Most texts need no escape at all, which one table pass
    over their UTF-8 bytes proves (in UTF-8 no byte of a non-ASCII character is below
    0x80); the others, and short texts, go through the escaper.
    """
    if len(text) < _SHORT:
        return _quote(text).encode("utf-8")
    data = text.encode("utf-8")
    if 0 in data.translate(_PLAIN):
        return _quote(text).encode("utf-8")
    return b"".join((b'"', data, b'"'))


_SHORT = 64  # shorter texts: the escaper is cheaper than the table pass


class Journal:
    """An append-only file of answers, one ``os.write`` per answer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # The middle of the line, from the provider to the response's start: the same for
        # every answer of one provider within one second, so quoted once for them all.
        self._middle: tuple[str, str, bytes] = ("", "", b"")

    def append(self, key: str, entry: Entry) -> None:
        """Hand one answer to the operating system; it survives the process being killed.

        The line is what ``json.dumps`` of the entry with its key writes (keys sorted,
        non-ASCII kept), byte for byte.
        """
        prompt = b"null" if entry.prompt is None else json_string(entry.prompt)
        provider, recorded_at, middle = self._middle
        if provider != entry.provider or recorded_at != entry.recorded_at or not middle:
            middle = b"".join(
                (
                    b', "provider": ',
                    _quote(entry.provider).encode("utf-8"),
                    b', "recorded_at": ',
                    _quote(entry.recorded_at).encode("utf-8"),
                    b', "response": ',
                )
            )
            self._middle = (entry.provider, entry.recorded_at, middle)
        os.write(
            self._fd,
            b"".join(
                (
                    b'{"key": ',
                    _quote(key).encode("utf-8"),
                    b', "prompt": ',
                    prompt,
                    middle,
                    json_string(entry.response),
                    b"}\n",
                )
            ),
        )

    def close(self) -> None:
        """Close the file; its content stays until folded."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class RecordingLock:
    """An exclusive, non-blocking lock on ``<file>.lock``; released by the OS on a crash."""

    def __init__(self, recording: Path) -> None:
        self.path = recording.with_name(recording.name + ".lock")
        while True:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock(self._fd)
            except OSError as exc:
                os.close(self._fd)
                raise CassetteLocked(
                    f"{recording} is being recorded by another process right now. Wait for it "
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

    def fsync_folder(folder: Path) -> None:
        """Windows cannot open a folder to fsync it; os.replace is durable enough there."""

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def fsync_folder(folder: Path) -> None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
