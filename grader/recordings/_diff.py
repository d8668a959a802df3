"""What a re-recording changed: per key, added, removed or changed, with a unified diff of
each changed answer (``gradekit cassette diff``, and ``record --rerecord``'s summary)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gradekit import UsageError
from gradekit.internal import previous_path
from grader.recordings._recordings import Kind, decode_recording, read_bytes

__all__ = [
    "KeyDiff",
    "RecordingDiff",
    "diff_files",
    "diff_recordings",
    "render_diff",
    "rerecord_summary",
]


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

    def keys(self, status: Literal["added", "removed", "changed"] | None = None) -> tuple[str, ...]:
        """Keys that differ (added, removed or changed), or only those with ``status``."""
        return tuple(d.key for d in self.differences if status in (None, d.status))


def diff_recordings(old: bytes, new: bytes, *, old_name: str, new_name: str) -> RecordingDiff:
    """Compare two cassettes or two fixture files; a changed key is one whose response differs."""
    before = decode_recording(old, source=old_name)
    after = decode_recording(new, source=new_name)
    if before.kind != after.kind:
        raise UsageError(
            f"{old_name} is a {before.kind} and {new_name} is a {after.kind}: diff "
            "two cassettes or two fixture files, e.g. cassettes/CASE.previous.json "
            "cassettes/CASE.json"
        )
    differences, unchanged = [], 0
    for key in sorted(before.recorded.keys() | after.recorded.keys()):
        was, now = before.recorded.get(key), after.recorded.get(key)
        if was is not None and now is not None and was.response == now.response:
            unchanged += 1
            continue
        label = now.label if now is not None else was.label if was is not None else ""
        differences.append(
            KeyDiff(
                key,
                label,
                None if was is None else was.response,
                None if now is None else now.response,
            )
        )
    return RecordingDiff(before.kind, old_name, new_name, tuple(differences), unchanged)


def diff_files(old: Path, new: Path) -> RecordingDiff:
    """``diff_recordings`` of two files."""
    return diff_recordings(read_bytes(old), read_bytes(new), old_name=str(old), new_name=str(new))


def rerecord_summary(recording: Path) -> RecordingDiff | None:
    """What the last ``rerecord`` changed in ``recording``; None when it kept no previous file."""
    previous = previous_path(recording)
    return diff_files(previous, recording) if previous.exists() else None


def render_diff(diff: RecordingDiff) -> str:
    """Counts, then per differing key its prompt (or tool call) and a unified diff."""
    counts = ", ".join(f"{len(diff.keys(s))} {s}" for s in ("added", "removed", "changed"))
    lines = [
        f"{diff.kind} diff {diff.old_name} -> {diff.new_name}: {counts}, {diff.unchanged} unchanged"
    ]
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
