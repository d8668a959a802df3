"""``gradekit cassette verify``: everything that can be wrong with a committed recording of
any kind the kit writes: a cassette, a tool fixture file, an SDK's HTTP cassette, each
wherever it lies (a set item's recordings under ``cassettes/regression/`` too)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from gradekit import CassetteError
from gradekit.internal import (
    HTTP_CASSETTE,
    KEPT_HEADERS,
    commands,
    credential_values,
    decode_cassette,
    decode_fixture,
    find_secret,
    journal_path,
)
from grader.recordings._recordings import kind_of

__all__ = [
    "recording_files",
    "verify_cassette",
    "verify_fixture",
    "verify_http_cassette",
    "verify_recording",
]

NOUNS = {"cassette": "entries", "fixture": "tool calls", "http": "interactions"}
D = TypeVar("D")


def recording_files(paths: Sequence[Path]) -> Iterator[Path]:
    """``paths``, each folder replaced by the ``.json`` files under it, in sorted order."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.json") if p.is_file())
        else:
            yield path


def verify_recording(
    path: Path, env: Mapping[str, str] | None = None
) -> tuple[list[str], int, str]:
    """The problems of the recording at ``path``, whichever kind its ``format`` says (an
    ``*.http.json`` whose format cannot be read is taken as an HTTP cassette), how many
    recordings it holds, and what they are called."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [f"cannot read it ({exc.strerror}); check the path"], 0, NOUNS["cassette"]
    try:
        kind = kind_of(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, RecursionError, ValueError):
        kind = None
    if kind is None and path.name.endswith(".http.json"):
        kind = "http"
    if kind == "fixture":
        return (*verify_fixture(path, env), NOUNS["fixture"])
    if kind == "http":
        return (*verify_http_cassette(path, env), NOUNS["http"])
    return (*verify_cassette(path, env), NOUNS["cassette"])


def verify_fixture(path: Path, env: Mapping[str, str] | None = None) -> tuple[list[str], int]:
    """The problems of the tool fixture file at ``path`` (format, keys, secrets, an unfolded
    journal) and its number of recorded tool calls."""
    fixture = _decoded(path, lambda data: decode_fixture(data, source=str(path), case=path.stem))
    if isinstance(fixture, str):
        return [fixture], 0
    secrets, problems = credential_values(env), []
    for key, call in sorted(fixture.calls.items()):
        texts = (
            call.tool,
            json.dumps(call.args, sort_keys=True, ensure_ascii=False),
            json.dumps(call.response, sort_keys=True, ensure_ascii=False),
        )
        name = find_secret(texts, secrets)
        if name is not None:
            problems.append(
                f"tool call {key} ({call.tool}) contains the value of {name}: "
                "delete it, rotate the credential, and record again"
            )
    problems += _unfolded(path, fixture.case or path.stem, "tool results")
    return problems, len(fixture.calls)


def verify_http_cassette(path: Path, env: Mapping[str, str] | None = None) -> tuple[list[str], int]:
    """The problems of the HTTP cassette at ``path`` (format, keys, credentials, headers,
    an unfolded journal) and its number of interactions."""
    cassette = _decoded(path, lambda data: HTTP_CASSETTE.decode(data, source=str(path)))
    if isinstance(cassette, str):
        return [cassette], 0
    secrets, problems = credential_values(env), []
    for name, interaction in cassette.slots().items():
        found = find_secret(interaction.texts(), secrets)
        if found is not None:
            problems.append(
                f"interaction {name} contains the value of {found}: delete it, "
                "rotate the credential, and record again"
            )
        extra = sorted(set(interaction.response.headers) - KEPT_HEADERS)
        if extra:
            problems.append(
                f"interaction {name} keeps the headers {', '.join(extra)}, which "
                f"gradekit never writes (only {', '.join(sorted(KEPT_HEADERS))}): "
                "delete them"
            )
    if journal_path(path).exists():
        problems.append(
            f"{journal_path(path)} holds interactions not yet folded in: record "
            'once more (mode="once") and close the transport, which folds them '
            "first, then commit the result"
        )
    return problems, len(cassette)


def _decoded(path: Path, decode: Callable[[bytes], D]) -> D | str:
    """The recording at ``path`` as ``decode`` reads it, or why it cannot be read."""
    try:
        return decode(path.read_bytes())
    except OSError as exc:
        return f"cannot read it ({exc.strerror}); check the path"
    except CassetteError as exc:
        return str(exc)


def _unfolded(path: Path, case: str, what: str) -> list[str]:
    """The problem of a journal beside ``path`` that was never folded into it."""
    if not journal_path(path).exists():
        return []
    return [
        f"{journal_path(path)} holds {what} not yet folded in: run "
        f"`{commands.RECORD_CASE(case=case)}` (it folds them first) and commit the result"
    ]


def verify_cassette(path: Path, env: Mapping[str, str] | None = None) -> tuple[list[str], int]:
    """Return the problems found in the cassette at ``path`` and its number of entries."""
    cassette = _decoded(path, lambda data: decode_cassette(data, source=str(path), case=path.stem))
    if isinstance(cassette, str):
        return [cassette], 0
    problems = []
    secrets = credential_values(env)
    for key, entry in cassette.entries.items():
        name = find_secret((entry.prompt or "", entry.response, entry.provider), secrets)
        if name is not None:
            problems.append(
                f"entry {key} contains the value of {name}: delete the entry, rotate the "
                "credential, and record again"
            )
    problems += _unfolded(path, cassette.case or path.stem, "answers")
    return problems, len(cassette.entries)
