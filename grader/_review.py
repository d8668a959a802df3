"""Reviewing recordings: how old they are, what a re-recording changed, and the change log.

Cassettes (recorded model answers) and fixtures (recorded read-only tool results)
are the dataset a grade rests on, so a change to them is reviewed like code:
``stale`` lists them by the age of their oldest recording, ``diff_recordings``
shows per key what was added, removed or changed, and ``append_change`` logs a
re-recording in ``DATASET_CHANGES.md`` with the SHA-256 of each file after it.

Everything here is pure (bytes in, values out, the clock passed in) except the
thin file edges ``stale``, ``diff_files``, ``rerecord_summary``, ``digest_file``,
``append_change``, ``read_changes`` and ``change_matches`` (which reads a submission's
files as the grader does, through ``grader._files``). Errors::

    GradekitError
    ├── UsageError             (gradekit) a bad age, mixed kinds, no reason, not a recording
    └── ReviewError            a recording file that cannot be reviewed
        └── ChangeLogCorrupt   DATASET_CHANGES.md is not in the format gradekit writes
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, Literal, NoReturn

from gradekit import GradekitError, UsageError
from gradekit._cassette import decode as decode_cassette
from gradekit._fixtures import decode as decode_fixture
from gradekit._recorder import previous_path
from gradekit._store import write_atomic
from grader._files import CASSETTE_CAP, SubmissionFileError, read_submission_file

__all__ = [
    "CHANGE_LOG",
    "Change",
    "ChangeLogCorrupt",
    "KeyDiff",
    "Kind",
    "Recorded",
    "Recording",
    "RecordingDiff",
    "ReviewError",
    "StaleRow",
    "append_change",
    "change_matches",
    "decode_changes",
    "decode_recording",
    "diff_files",
    "diff_recordings",
    "digest_file",
    "parse_age",
    "read_changes",
    "render_diff",
    "render_stale",
    "require_reason",
    "rerecord_summary",
    "stale",
]

CHANGE_LOG = "DATASET_CHANGES.md"
Kind = Literal["cassette", "fixture"]
_KINDS: tuple[Kind, ...] = ("cassette", "fixture")
_PREFIXES: Mapping[str, Kind] = {"gradekit.cassette/": "cassette", "gradekit.fixtures/": "fixture"}
_DAWN = datetime.min.replace(tzinfo=UTC)


class ReviewError(GradekitError):
    """A recording file that cannot be reviewed; the message names the file and the fix."""


class ChangeLogCorrupt(ReviewError):
    """``DATASET_CHANGES.md`` does not parse: it was edited by hand."""


# ---------------------------------------------------------------- recordings, either kind


@dataclass(frozen=True, slots=True)
class Recorded:
    """One recording: what was asked, the answer as text, and when ("" if the file does not say)."""

    label: str  # the prompt, or ``<tool> <canonical args>``
    response: str  # a tool's JSON response pretty-printed, so it diffs by line
    recorded_at: str


@dataclass(frozen=True, slots=True)
class Recording:
    """A cassette or fixture file reduced to what review needs, by key."""

    kind: Kind
    case: str
    recorded: Mapping[str, Recorded]
    recorded_at: str = ""  # a fixture file's own time; "" for cassettes


def decode_recording(data: bytes, *, source: str) -> Recording:
    """Read cassette or fixture bytes; anything else is a ``UsageError`` naming ``source``."""
    document = _json(data, source)
    kind = _kind_of(document)
    if kind is None:
        raise UsageError(
            f"{source} is neither a cassette nor a fixture file: pass files written by "
            "`gradekit record` (cassettes/<case>.json or fixtures/<case>.json)"
        )
    if kind == "fixture":
        return _decode_fixture(data, source)
    cassette = decode_cassette(data, source=source, case=Path(source).stem)
    recorded = {
        key: Recorded(entry.prompt or "(prompt not kept: flat cassette)", entry.response,
                      entry.recorded_at)
        for key, entry in cassette.entries.items()
    }
    return Recording("cassette", cassette.case, MappingProxyType(recorded))


def _json(data: bytes, source: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReviewError(
            f"{source}: not UTF-8 JSON ({exc}). Restore it with `git checkout -- {source}` "
            "or record it again."
        ) from exc


def _kind_of(document: Any) -> Kind | None:
    """Which kind of recording a parsed JSON file is, or None; a flat legacy cassette counts."""
    if not isinstance(document, dict):
        return None
    version = document.get("format")
    if version is None:
        return "cassette" if all(isinstance(v, str) for v in document.values()) else None
    for prefix, kind in _PREFIXES.items():
        if isinstance(version, str) and version.startswith(prefix):
            return kind
    return None


def _decode_fixture(data: bytes, source: str) -> Recording:
    fixture = decode_fixture(data, source=source, case=Path(source).stem)
    recorded = {
        key: Recorded(key, json.dumps(call.response, indent=2, sort_keys=True,
                                      ensure_ascii=False), fixture.recorded_at)
        for key, call in fixture.calls.items()
    }
    return Recording("fixture", fixture.case, MappingProxyType(recorded), fixture.recorded_at)


def _restore(source: str) -> str:
    return f"Restore it with `git checkout -- {source}`, or re-record the case."


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror}): check the path") from exc


# ---------------------------------------------------------------------------- staleness


@dataclass(frozen=True, slots=True)
class StaleRow:
    """One recording file and the age of its oldest recording (None: unknown, the stalest)."""

    path: Path
    kind: Kind
    recordings: int
    oldest: datetime | None
    age: timedelta | None


def parse_age(text: str) -> timedelta:
    """``"12h"``, ``"30d"`` or ``"2w"`` as a duration."""
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", text, flags=re.IGNORECASE)
    try:
        if match is None:
            raise ValueError(text)
        unit = {"h": "hours", "d": "days", "w": "weeks"}[match[2].lower()]
        return timedelta(**{unit: int(match[1])})
    except (ValueError, OverflowError):
        raise UsageError(f"cannot read the age {text!r}: write a whole number and a unit, "
                         "h (hours), d (days) or w (weeks), e.g. 30d or 12h") from None


def stale(paths: Sequence[Path], *, now: datetime, older_than: timedelta | None) -> list[StaleRow]:
    """Rows for every cassette and fixture under ``paths``, stalest first, then by path.

    A folder means each ``*.json`` in it that is a cassette or fixture, except
    ``*.previous.json``; a file named outright must be one. With ``older_than``,
    only rows older than that (and every row of unknown age) are kept.
    """
    rows = [_stale_row(path, recording, now) for path, recording in _recordings_in(paths)]
    if older_than is not None:
        rows = [row for row in rows if row.age is None or row.age > older_than]
    return sorted(rows, key=lambda r: (r.oldest is not None, r.oldest or _DAWN, str(r.path)))


def _recordings_in(paths: Sequence[Path]) -> Iterator[tuple[Path, Recording]]:
    seen: set[Path] = set()
    for path in paths:
        folder = path.is_dir()
        if not folder and not path.is_file():
            raise UsageError(f"{path}: no such file or folder; pass cassette or fixture files "
                             "or the folders that hold them")
        files = sorted(path.glob("*.json")) if folder else [path]
        for file in files:
            if (folder and file.name.endswith(".previous.json")) or file.resolve() in seen:
                continue
            data = _read(file)
            if folder and _kind_of(_json(data, str(file))) is None:
                continue  # a folder may hold other JSON; a corrupt recording still raises
            seen.add(file.resolve())
            yield file, decode_recording(data, source=str(file))


def _stale_row(path: Path, recording: Recording, now: datetime) -> StaleRow:
    times = [r.recorded_at for r in recording.recorded.values()]
    if recording.kind == "fixture":
        times = [recording.recorded_at]
    oldest = None
    if times and "" not in times:
        oldest = min(_instant(text, path) for text in times)
    age = None if oldest is None else _utc(now) - oldest
    return StaleRow(path, recording.kind, len(recording.recorded), oldest, age)


def _instant(text: str, path: Path) -> datetime:
    try:
        return _utc(datetime.fromisoformat(text))
    except ValueError:
        raise ReviewError(f"{path}: recorded_at {text!r} is not an ISO 8601 time. "
                          f"{_restore(str(path))}") from None


def _utc(moment: datetime) -> datetime:
    """A naive time is taken as UTC: recorders write UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _stamp(moment: datetime) -> str:
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_stale(rows: Sequence[StaleRow], now: datetime) -> str:
    """A table of ``rows`` as of ``now``: age in whole days, oldest recording, path."""
    if not rows:
        return f"as of {_stamp(now)}: no cassette or fixture file to list\n"
    table = [("AGE", "KIND", "RECORDINGS", "OLDEST", "PATH")] + [
        ("unknown" if row.age is None else f"{row.age // timedelta(days=1)}d", row.kind,
         str(row.recordings), "-" if row.oldest is None else _stamp(row.oldest), str(row.path))
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line[:4], widths, strict=True))
             + "  " + line[4] for line in table]
    header = f"as of {_stamp(now)}: {len(rows)} file(s), stalest first"
    return "\n".join([header, *lines]) + "\n"


# --------------------------------------------------------------------------------- diffs


@dataclass(frozen=True, slots=True)
class KeyDiff:
    """One key that differs: ``old`` is None when added, ``new`` is None when removed."""

    key: str
    label: str
    old: str | None
    new: str | None

    @property
    def status(self) -> Literal["added", "removed", "changed"]:
        """What happened to this key."""
        return "added" if self.old is None else "removed" if self.new is None else "changed"


@dataclass(frozen=True, slots=True)
class RecordingDiff:
    """What differs between two recordings of one kind, by key, in key order."""

    kind: Kind
    old_name: str
    new_name: str
    differences: tuple[KeyDiff, ...]
    unchanged: int

    def keys(self, status: Literal["added", "removed", "changed"] | None = None
             ) -> tuple[str, ...]:
        """Keys that differ (added, removed or changed), or only those with ``status``."""
        return tuple(d.key for d in self.differences if status in (None, d.status))


def diff_recordings(old: bytes, new: bytes, *, old_name: str, new_name: str) -> RecordingDiff:
    """Compare two cassettes or two fixture files; a changed key is one whose response differs."""
    before = decode_recording(old, source=old_name)
    after = decode_recording(new, source=new_name)
    if before.kind != after.kind:
        raise UsageError(f"{old_name} is a {before.kind} and {new_name} is a {after.kind}: diff "
                         "two cassettes or two fixture files, e.g. cassettes/CASE.previous.json "
                         "cassettes/CASE.json")
    differences, unchanged = [], 0
    for key in sorted(before.recorded.keys() | after.recorded.keys()):
        was, now = before.recorded.get(key), after.recorded.get(key)
        if was is not None and now is not None and was.response == now.response:
            unchanged += 1
            continue
        label = now.label if now is not None else was.label if was is not None else ""
        differences.append(KeyDiff(key, label, None if was is None else was.response,
                                   None if now is None else now.response))
    return RecordingDiff(before.kind, old_name, new_name, tuple(differences), unchanged)


def diff_files(old: Path, new: Path) -> RecordingDiff:
    """``diff_recordings`` of two files."""
    return diff_recordings(_read(old), _read(new), old_name=str(old), new_name=str(new))


def rerecord_summary(recording: Path) -> RecordingDiff | None:
    """What the last ``rerecord`` changed in ``recording``; None when it kept no previous file."""
    previous = previous_path(recording)
    return diff_files(previous, recording) if previous.exists() else None


def render_diff(diff: RecordingDiff) -> str:
    """Counts, then per differing key its prompt (or tool call) and a unified diff."""
    counts = ", ".join(f"{len(diff.keys(s))} {s}" for s in ("added", "removed", "changed"))
    lines = [f"{diff.kind} diff {diff.old_name} -> {diff.new_name}: "
             f"{counts}, {diff.unchanged} unchanged"]
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for d in diff.differences:
        heading = _short(d.key) if diff.kind == "fixture" else f"{d.key}  {_short(d.label)}"
        lines.append(f"{marks[d.status]} {d.status:<7} {heading}")
        if d.old is not None and d.new is not None:
            lines.extend("    " + line for line in _unified(d.old, d.new, diff))
    return "\n".join(lines) + "\n"


def _unified(old: str, new: str, diff: RecordingDiff) -> list[str]:
    if not old.endswith("\n") and not new.endswith("\n"):
        old, new = old + "\n", new + "\n"  # mark a missing final newline only where it differs
    out: list[str] = []
    for line in difflib.unified_diff(_lines(old), _lines(new), diff.old_name, diff.new_name):
        out.append(line.removesuffix("\n"))
        if not line.endswith("\n"):  # as git shows it: otherwise the change is invisible
            out.append("\\ No newline at end of response")
    return out


def _lines(text: str) -> list[str]:
    """Split on newline only, keeping it: ``str.splitlines`` also splits on U+2028 and kin."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# ---------------------------------------------------------------------------- change log

_PREAMBLE = f"""# Dataset changes

Append-only log of re-recordings that changed recorded answers (cassettes) or tool
results (fixtures): a changed recording is a change to the dataset, reviewed like code.
One section per change, written by `gradekit record --rerecord --reason "..."`; its
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
    return hashlib.sha256(_read(path)).hexdigest()


def change_matches(change: Change, root: Path, *,
                   seen: dict[PurePosixPath, str | None] | None = None) -> bool:
    """Whether every file ``change`` names (under ``root``) has the digest it recorded.

    The files are read as the grader reads a submission (``read_submission_file``): a
    name outside ``root``, through a link, or of anything but a regular file never matches.
    Pass the same ``seen`` for every entry of one log: each file is then read only once,
    however many entries name it.
    """
    cache = {} if seen is None else seen
    return all(_submission_digest(root, name, cache) == digest
               for name, digest in change.digests.items())


def _submission_digest(root: Path, name: str,
                       seen: dict[PurePosixPath, str | None]) -> str | None:
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
        raise UsageError('a re-recording that changes recorded answers is a change to the '
                         'dataset and needs a reason: pass --reason "why the answers changed"')
    return text


def append_change(log: Path, *, date: str, case: str, kind: str, changed_keys: Sequence[str],
                  reason: str | None, digests: Mapping[str, str]) -> None:
    """Append one entry to the change log ``log`` (created if missing); earlier bytes are kept.

    ``date`` is ``YYYY-MM-DD``; ``digests`` maps each recording file (its path relative
    to the repository) to its SHA-256 after the change. The reason is kept on one line.
    """
    entry = _entry(date, case, kind, sorted(set(changed_keys)), require_reason(reason), digests)
    existing = _read(log) if log.exists() else b""
    if not existing.strip():
        existing = _PREAMBLE.encode()
    elif not existing.endswith(b"\n"):
        existing += b"\n"
    write_atomic(log, existing + b"\n" + entry.encode("utf-8"))


def _entry(day: str, case: str, kind: str, keys: list[str], reason: str,
           digests: Mapping[str, str]) -> str:
    _check_entry(day, case, kind, keys, digests)
    lines = [f"## {day} {case}", "", f"- kind: {kind}", f"- reason: {reason}",
             "- sha256 after the change:"]
    lines += [f"  - `{name}` {digests[name]}" for name in sorted(digests)]
    lines += [f"- keys changed ({len(keys)}):"] + [f"  - `{key}`" for key in keys]
    return "\n".join(lines) + "\n"


def _check_entry(day: str, case: str, kind: str, keys: list[str],
                 digests: Mapping[str, str]) -> None:
    problems = []
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) or not _is_date(day):
        problems.append(f"date {day!r} is not YYYY-MM-DD")
    if _HEADER.fullmatch(f"## {day} {case}") is None or case != case.strip():
        problems.append(f"case {case!r} must be one line without surrounding spaces")
    if kind not in _KINDS:
        problems.append(f"kind {kind!r} is not one of {', '.join(_KINDS)}")
    if not digests or not all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests.values()):
        problems.append("digests must map each recording file to its lowercase SHA-256 hex")
    if any(_breaks_line(text) for text in [case, *keys, *digests]):
        problems.append("a case, key or file name is empty or contains a line break")
    if problems:
        raise UsageError(f"cannot log the change to {case!r}: {'; '.join(problems)}")


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
    return decode_changes(_read(log), log=log)


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
        if (kind not in _KINDS or not self.fields.get("reason") or not self.digests
                or "keys" not in self.fields):
            self._fail(self.number, "an entry needs a kind (cassette or fixture), a reason, "
                       "at least one sha256 line and a 'keys changed' list")
        if len(self.keys) != self.declared_keys:
            self._fail(self.number, f"{len(self.keys)} keys listed, {self.declared_keys} declared")
        return Change(self.day, self.case, kind, self.fields["reason"],
                      tuple(self.keys), MappingProxyType(self.digests))

    def _fail(self, number: int, problem: str) -> NoReturn:
        raise ChangeLogCorrupt(f"{self.log}:{number}: {problem}. {_log_fix(self.log)}")


def _log_fix(log: Path) -> str:
    return (f"{log.name} is append-only and written by gradekit: restore it with "
            f"`git checkout -- {log}` and add entries only with "
            '`gradekit record --rerecord --reason "..."`')
