"""The dataset's change log, ``DATASET_CHANGES.md``: ``append_change`` logs a re-recording
with the SHA-256 of each file after it; ``decode_changes`` reads the log back strictly
(a hand edit is a ``ChangeLogCorrupt``, never a guess); ``change_matches`` says whether a
submission's files still are what an entry recorded."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import NoReturn

from gradekit import UsageError
from gradekit.internal import commands, write_atomic
from grader._errors import ChangeLogCorrupt
from grader.recordings._recordings import KINDS, Kind, read_bytes
from grader.submission import CASSETTE_CAP, SubmissionFileError, read_submission_file

__all__ = [
    "CHANGE_LOG",
    "Change",
    "ChangeLogCorrupt",
    "append_change",
    "change_matches",
    "check_change",
    "decode_changes",
    "digest_file",
    "read_changes",
    "require_reason",
]

CHANGE_LOG = "DATASET_CHANGES.md"


_PREAMBLE = f"""# Dataset changes

Append-only log of re-recordings that changed recorded answers (cassettes, and an SDK
lab's HTTP cassettes) or tool results (fixtures): a changed recording is a change to the
dataset, reviewed like code.
One section per change, written by `{commands.RERECORD(reason="...")}`; its
sha256 lines are the digests of the recording files right after the change.
Never edit or delete an entry; {CHANGE_LOG} is parsed by the grader.
"""
_HEADER = re.compile(r"## (\d{4}-\d{2}-\d{2}) (\S.*)")
_DIGEST = re.compile(r"  - `(.+)` ([0-9a-f]{64})")
_KEYS = re.compile(r"- keys changed \((\d+)\):")


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the change log."""

    date: str
    case: str
    kind: Kind
    reason: str
    changed_keys: tuple[str, ...]
    digests: Mapping[str, str]  # file path, relative to the repository, -> SHA-256 hex


def digest_file(path: Path) -> str:
    """The SHA-256 hex digest of a file's bytes, as the change log records it."""
    return hashlib.sha256(read_bytes(path)).hexdigest()


def change_matches(
    change: Change, root: Path, *, seen: dict[PurePosixPath, str | None] | None = None
) -> bool:
    """Whether every file ``change`` names (under ``root``) has the digest it recorded.

    The files are read as the grader reads a submission (``read_submission_file``): a
    name outside ``root``, through a link, or of anything but a regular file never matches.
    Pass the same ``seen`` for every entry of one log: each file is then read only once,
    however many entries name it.
    """
    cache = {} if seen is None else seen
    return all(
        _submission_digest(root, name, cache) == digest for name, digest in change.digests.items()
    )


def _submission_digest(root: Path, name: str, seen: dict[PurePosixPath, str | None]) -> str | None:
    key = PurePosixPath(name)  # one key for "a//b" and "./a/b": the same file
    if key not in seen:
        try:
            data = read_submission_file(root, name, cap=CASSETTE_CAP)
            seen[key] = hashlib.sha256(data).hexdigest()
        except SubmissionFileError:
            seen[key] = None
    return seen[key]


def require_reason(reason: str | None) -> str:
    """The reason on one line; none is an error. Call it before re-recording, to fail early."""
    text = " ".join((reason or "").split())
    if not text:
        raise UsageError(
            "a re-recording that changes recorded answers is a change to the "
            'dataset and needs a reason: pass --reason "why the answers changed"'
        )
    return text


def append_change(
    log: Path,
    *,
    date: str,
    case: str,
    kind: str,
    changed_keys: Sequence[str],
    reason: str | None,
    digests: Mapping[str, str],
) -> None:
    """Append one entry to the change log ``log`` (created if missing); earlier bytes are kept.

    ``date`` is ``YYYY-MM-DD``; ``digests`` maps each recording file (its path relative
    to the repository) to its SHA-256 after the change. The reason is kept on one line.
    """
    entry = _entry(date, case, kind, sorted(set(changed_keys)), require_reason(reason), digests)
    existing = read_bytes(log) if log.exists() else b""
    if not existing.strip():
        existing = _PREAMBLE.encode()
    elif not existing.endswith(b"\n"):
        existing += b"\n"
    write_atomic(log, existing + b"\n" + entry.encode("utf-8"))


def _entry(
    day: str, case: str, kind: str, keys: list[str], reason: str, digests: Mapping[str, str]
) -> str:
    _valid_entry(day, case, kind, keys, digests)
    lines = [
        f"## {day} {case}",
        "",
        f"- kind: {kind}",
        f"- reason: {reason}",
        "- sha256 after the change:",
    ]
    lines += [f"  - `{name}` {digests[name]}" for name in sorted(digests)]
    lines += [f"- keys changed ({len(keys)}):"] + [f"  - `{key}`" for key in keys]
    return "\n".join(lines) + "\n"


def _valid_entry(
    day: str, case: str, kind: str, keys: list[str], digests: Mapping[str, str]
) -> None:
    problems = []
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) or not _is_date(day):
        problems.append(f"date {day!r} is not YYYY-MM-DD")
    if _HEADER.fullmatch(f"## {day} {case}") is None or case != case.strip():
        problems.append(f"case {case!r} must be one line without surrounding spaces")
    if kind not in KINDS:
        problems.append(f"kind {kind!r} is not one of {_kinds()}")
    if not digests or not all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests.values()):
        problems.append("digests must map each recording file to its lowercase SHA-256 hex")
    if any(_breaks_line(text) for text in [case, *keys, *digests]):
        problems.append("a case, key or file name is empty or contains a line break")
    if problems:
        raise UsageError(f"cannot log the change to {case!r}: {'; '.join(problems)}")


def _kinds() -> str:
    return ", ".join(KINDS[:-1]) + f" or {KINDS[-1]}"


def check_change(*, date: str, case: str, kind: str, reason: str | None) -> None:
    """Raise the ``UsageError`` that ``append_change`` would for this entry, before anything
    is re-recorded: a re-recording whose change cannot be logged should not start."""
    _valid_entry(date, case, kind, ["0" * 16], {"recording.json": "0" * 64})
    require_reason(reason)


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _breaks_line(text: str) -> bool:
    return not text or "\n" in text or "\r" in text


def read_changes(log: Path) -> list[Change]:
    """Every entry of the change log, oldest first; a missing log has none."""
    if not log.exists():
        return []
    return decode_changes(read_bytes(log), log=log)


def decode_changes(data: bytes, *, log: Path) -> list[Change]:
    """Every entry of the change log's bytes ``data``; ``log`` names the file in errors."""
    try:
        text = data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise ChangeLogCorrupt(f"{log}: not UTF-8 text. {_log_fix(log)}") from exc
    changes, section = [], None
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("## "):
            if section is not None:
                changes.append(section.finish())
            section = _Section(log, number, line)
        elif section is not None and line.strip():
            section.add(number, line)
    if section is not None:
        changes.append(section.finish())
    return changes


class _Section:
    """The lines of one change-log entry, read strictly: a hand edit is reported, not guessed."""

    def __init__(self, log: Path, number: int, header: str) -> None:
        match = _HEADER.fullmatch(header)
        self.log, self.number = log, number
        if match is None:
            self._fail(number, "a header is `## YYYY-MM-DD CASE`")
        self.day, self.case = match[1], match[2]
        self.fields: dict[str, str] = {}
        self.digests: dict[str, str] = {}
        self.keys: list[str] = []
        self.declared_keys = -1
        self.list: str | None = None

    def add(self, number: int, line: str) -> None:
        keys = _KEYS.fullmatch(line)
        if line.startswith("  - ") and self.list is not None:
            self._item(number, line)
        elif line.startswith(("- kind: ", "- reason: ")):
            name, value = line[2:].split(": ", 1)
            self._once(number, name)
            self.fields[name], self.list = value, None
        elif line == "- sha256 after the change:":
            self._once(number, "sha256")
            self.list = "sha256"
        elif keys is not None:
            self._once(number, "keys")
            self.declared_keys, self.list = int(keys[1]), "keys"
        else:
            self._fail(number, f"unexpected line {line!r}")

    def _item(self, number: int, line: str) -> None:
        digest = _DIGEST.fullmatch(line)
        if self.list == "sha256" and digest is not None:
            self.digests[digest[1]] = digest[2]
        elif self.list == "keys" and len(line) > 6 and line[4] == "`" and line[-1] == "`":
            self.keys.append(line[5:-1])
        else:
            self._fail(number, f"unreadable {self.list} line {line!r}")

    def _once(self, number: int, name: str) -> None:
        if name in self.fields:
            self._fail(number, f"a second '{name}'")
        self.fields.setdefault(name, "")

    def finish(self) -> Change:
        kind = self.fields.get("kind")
        if (
            kind not in KINDS
            or not self.fields.get("reason")
            or not self.digests
            or "keys" not in self.fields
        ):
            self._fail(
                self.number,
                f"an entry needs a kind ({_kinds()}), a reason, "
                "at least one sha256 line and a 'keys changed' list",
            )
        if len(self.keys) != self.declared_keys:
            self._fail(self.number, f"{len(self.keys)} keys listed, {self.declared_keys} declared")
        return Change(
            self.day,
            self.case,
            kind,
            self.fields["reason"],
            tuple(self.keys),
            MappingProxyType(self.digests),
        )

    def _fail(self, number: int, problem: str) -> NoReturn:
        raise ChangeLogCorrupt(f"{self.log}:{number}: {problem}. {_log_fix(self.log)}")


def _log_fix(log: Path) -> str:
    return (
        f"{log.name} is append-only and written by gradekit: restore it with "
        f"`git checkout -- {log}` and add entries only with "
        f"`{commands.RERECORD(reason='...')}`"
    )
