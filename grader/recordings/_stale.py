"""How old the recordings are: ``stale`` lists cassettes and fixtures by the age of their
oldest recording, stalest first (``gradekit cassette stale``). The clock is passed in."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gradekit import UsageError
from grader.recordings._recordings import (
    Kind,
    Recording,
    RecordingError,
    decode_recording,
    kind_of,
    read_bytes,
    read_json,
    restore_hint,
)

__all__ = ["StaleRow", "parse_age", "render_stale", "stale"]

_DAWN = datetime.min.replace(tzinfo=UTC)


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
        raise UsageError(
            f"cannot read the age {text!r}: write a whole number and a unit, "
            "h (hours), d (days) or w (weeks), e.g. 30d or 12h"
        ) from None


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
            raise UsageError(
                f"{path}: no such file or folder; pass cassette or fixture files "
                "or the folders that hold them"
            )
        files = sorted(path.glob("*.json")) if folder else [path]
        for file in files:
            if (folder and file.name.endswith(".previous.json")) or file.resolve() in seen:
                continue
            data = read_bytes(file)
            if folder and kind_of(read_json(data, str(file))) is None:
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
        raise RecordingError(
            f"{path}: recorded_at {text!r} is not an ISO 8601 time. {restore_hint(str(path))}"
        ) from None


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
        (
            "unknown" if row.age is None else f"{row.age // timedelta(days=1)}d",
            row.kind,
            str(row.recordings),
            "-" if row.oldest is None else _stamp(row.oldest),
            str(row.path),
        )
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(4)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line[:4], widths, strict=True)) + "  " + line[4]
        for line in table
    ]
    header = f"as of {_stamp(now)}: {len(rows)} file(s), stalest first"
    return "\n".join([header, *lines]) + "\n"
