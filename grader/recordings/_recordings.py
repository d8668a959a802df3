"""Recordings of either kind, cassettes and tool fixtures, reduced to what a re-recording's
reader needs: what was asked and answered, and when.

``decode_recording`` reads either kind through its codec (``gradekit.internal``'s
``decode_cassette`` and ``decode_fixture``) into one shape, ``Recording``: what was asked
and answered, by key, and when. Staleness (``grader.recordings._stale``), diffs
(``grader.recordings._diff``) and the change log (``grader.recordings._changelog``) are
built on it. Errors::

    GradekitError
    ├── UsageError             (gradekit) a bad age, mixed kinds, no reason, not a recording
    └── RecordingError         a recording file that cannot be read as one
        └── ChangeLogCorrupt   DATASET_CHANGES.md is not in the format gradekit writes
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from gradekit import UsageError
from gradekit.internal import HTTP_CASSETTE, HttpRequest, commands, decode_cassette, decode_fixture
from grader._errors import RecordingError

__all__ = [
    "KINDS",
    "Kind",
    "Recorded",
    "Recording",
    "RecordingError",
    "decode_recording",
    "is_http_cassette",
    "kind_of",
    "read_bytes",
    "read_json",
    "restore_hint",
]

Kind = Literal["cassette", "fixture", "http"]
# What a change log entry names (grader.recordings._changelog): the recordings
# `gradekit record` writes, an SDK lab's HTTP cassettes (<case>.http.json) included.
KINDS: tuple[Kind, ...] = ("cassette", "fixture", "http")
_HTTP_PREFIX = "gradekit.http-cassette/"
_PREFIXES: Mapping[str, Kind] = {
    "gradekit.cassette/": "cassette",
    "gradekit.fixtures/": "fixture",
    _HTTP_PREFIX: "http",
}


@dataclass(frozen=True, slots=True)
class Recorded:
    """One recording: what was asked, the answer as text, and when ("" if the file does not say)."""

    label: str  # the prompt, or ``<tool> <canonical args>``
    response: str  # a tool's JSON response pretty-printed, so it diffs by line
    recorded_at: str


@dataclass(frozen=True, slots=True)
class Recording:
    """A cassette or fixture file reduced to what was asked and answered, by key."""

    kind: Kind
    case: str
    recorded: Mapping[str, Recorded]
    recorded_at: str = ""  # a fixture file's own time; "" for cassettes


def decode_recording(data: bytes, *, source: str) -> Recording:
    """Read cassette, fixture or HTTP cassette bytes; anything else is a ``UsageError`` naming
    ``source``."""
    document = read_json(data, source)
    kind = kind_of(document)
    if kind is None:
        raise UsageError(
            f"{source} is neither a cassette nor a fixture file: pass files written by "
            f"`{commands.RECORD()}` (cassettes/<case>.json or fixtures/<case>.json) or HTTP "
            "cassettes (<case>.http.json)"
        )
    if kind == "fixture":
        return _decode_fixture(data, source)
    if kind == "http":
        return _decode_http(data, source)
    cassette = decode_cassette(data, source=source, case=Path(source).stem)
    recorded = {
        key: Recorded(
            entry.prompt or "(prompt not kept: flat cassette)", entry.response, entry.recorded_at
        )
        for key, entry in cassette.entries.items()
    }
    return Recording("cassette", cassette.case, MappingProxyType(recorded))


def read_json(data: bytes, source: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordingError(
            f"{source}: not UTF-8 JSON ({exc}). Restore it with `git checkout -- {source}` "
            "or record it again."
        ) from exc


def kind_of(document: Any) -> Kind | None:
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


def _decode_http(data: bytes, source: str) -> Recording:
    """Each recording under its ``<key>#<n>``: the request as its label, the response as
    pretty JSON, so it diffs by line. The response is its ``stable_json``: an id, a
    timestamp or a request id that differs on every call is not a changed answer."""
    cassette = HTTP_CASSETTE.decode(data, source=source)
    recorded = {
        name: Recorded(
            _request_label(i.request),
            json.dumps(i.response.stable_json(), indent=2, sort_keys=True, ensure_ascii=False),
            i.recorded_at,
        )
        for name, i in cassette.slots().items()
    }
    return Recording("http", cassette.case, MappingProxyType(recorded))


def _request_label(request: HttpRequest) -> str:
    body = request.to_json()[request.form]
    shown = body if isinstance(body, str) else json.dumps(body, sort_keys=True, ensure_ascii=False)
    return f"{request.method} {request.url} {shown}"


def is_http_cassette(data: bytes, path: Path) -> bool:
    """Whether a file is an HTTP cassette (``gradekit._http.cassette``): by its ``format``, or
    by its name, ``*.http.json``, when no ``format`` can be read from it."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError, ValueError):
        return path.name.endswith(".http.json")
    version = document.get("format") if isinstance(document, dict) else None
    if isinstance(version, str):
        return version.startswith(_HTTP_PREFIX)
    return path.name.endswith(".http.json")


def _decode_fixture(data: bytes, source: str) -> Recording:
    fixture = decode_fixture(data, source=source, case=Path(source).stem)
    recorded = {
        key: Recorded(
            key,
            json.dumps(call.response, indent=2, sort_keys=True, ensure_ascii=False),
            fixture.recorded_at,
        )
        for key, call in fixture.calls.items()
    }
    return Recording("fixture", fixture.case, MappingProxyType(recorded), fixture.recorded_at)


def restore_hint(source: str) -> str:
    return f"Restore it with `git checkout -- {source}`, or re-record the case."


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror}): check the path") from exc
