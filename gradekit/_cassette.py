"""The cassette codec, format ``gradekit.cassette/1``. Pure: bytes in, values out.

Reading accepts v1 and the flat form of earlier labs (key -> response
string). Writing always produces v1 with deterministic bytes: UTF-8, keys
sorted, two-space indent, one trailing newline, so a re-recording is a clean
git diff. A file that cannot be read is an error naming where it broke; it is
never treated as empty.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gradekit._exceptions import CassetteCollision, CassetteCorrupt
from gradekit._keys import prompt_key

__all__ = ["FORMAT", "Cassette", "Entry", "decode", "encode", "merge_entry"]

FORMAT = "gradekit.cassette/1"
_FORMAT_PREFIX = "gradekit.cassette/"


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded answer. ``prompt`` is None only for entries read from the flat form."""

    prompt: str | None
    response: str
    provider: str = ""
    recorded_at: str = ""


@dataclass(frozen=True, slots=True)
class Cassette:
    """A case's recordings, keyed by ``prompt_key``."""

    case: str
    entries: Mapping[str, Entry] = field(default_factory=dict)


def encode(cassette: Cassette) -> bytes:
    """Return the canonical v1 bytes of ``cassette``."""
    document = {
        "format": FORMAT,
        "case": cassette.case,
        "entries": {
            key: {
                "prompt": entry.prompt,
                "provider": entry.provider,
                "recorded_at": entry.recorded_at,
                "response": entry.response,
            }
            for key, entry in cassette.entries.items()
        },
    }
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def decode(data: bytes, *, source: str, case: str = "", verify_keys: bool = True) -> Cassette:
    """Parse cassette bytes; ``source`` names the file in every error.

    ``case`` is used for the flat form, which does not carry one. With
    ``verify_keys`` (the default) every key is checked against its prompt;
    replay skips that, since it looks answers up by the key of the prompt asked.
    """
    text = _utf8(data, source)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CassetteCorrupt(
            f"{source}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}). "
            f"{_restore_hint(source, case)}"
        ) from exc
    if not isinstance(document, dict):
        raise CassetteCorrupt(
            f"{source}:1:1: a cassette is a JSON object, found {type(document).__name__}. "
            f"{_restore_hint(source, case)}"
        )
    if "format" in document:
        return _decode_v1(document, text, source, verify_keys)
    return _decode_flat(document, text, source, case)


def merge_entry(entries: dict[str, Entry], key: str, entry: Entry, *, source: str) -> None:
    """Put ``entry`` under ``key``; a different prompt already there is a collision."""
    old = entries.get(key)
    if old is not None and None not in (old.prompt, entry.prompt) and old.prompt != entry.prompt:
        raise CassetteCollision(
            f"{source}: key {key} is already recorded for a different prompt.\n"
            f"  recorded: {_clip(old.prompt or '')}\n"
            f"  new:      {_clip(entry.prompt or '')}\n"
            "Two prompts sharing a 16-hex-digit key is almost always a hand-edited file: "
            "restore the cassette from git, or delete the entry and record again."
        )
    entries[key] = entry


def _decode_v1(document: dict[str, Any], text: str, source: str, verify_keys: bool) -> Cassette:
    version = document["format"]
    if version != FORMAT:
        hint = (
            "it was written by a newer gradekit: upgrade with `pip install -U gradekit`"
            if isinstance(version, str) and version.startswith(_FORMAT_PREFIX)
            else f"gradekit reads {FORMAT!r} and the flat form of earlier labs"
        )
        raise CassetteCorrupt(
            f"{source}:{_line_of(text, 'format')}: unknown cassette format {version!r}; {hint}."
        )
    case, entries = document.get("case", ""), document.get("entries")
    if not isinstance(case, str) or not isinstance(entries, dict):
        raise CassetteCorrupt(
            f"{source}: a {FORMAT} cassette needs a string 'case' and an object 'entries'. "
            f"{_restore_hint(source, case if isinstance(case, str) else '')}"
        )
    decoded: dict[str, Entry] = {}
    for key, raw in entries.items():
        problem = _entry_problem(key, raw, verify_keys)
        if problem is not None:
            # Locating the entry scans the text: on the error path only, or loading is quadratic.
            raise CassetteCorrupt(f"{source}:{_line_of(text, key)}: entry {key} {problem}")
        decoded[key] = Entry(
            raw["prompt"], raw["response"], raw.get("provider", ""), raw.get("recorded_at", "")
        )
    return Cassette(case=case, entries=decoded)


def _entry_problem(key: str, raw: object, verify_key: bool) -> str | None:
    """What is wrong with one v1 entry, or None. Pure and cheap: it runs on every entry."""
    if type(raw) is not dict:
        return "must be an object with 'prompt' and 'response'."
    prompt = raw.get("prompt", 0)
    if type(raw.get("response")) is not str or not (prompt is None or type(prompt) is str):
        return "needs a string 'prompt' and a string 'response'."
    if type(raw.get("provider", "")) is not str or type(raw.get("recorded_at", "")) is not str:
        return "has a 'provider' or 'recorded_at' that is not a string."
    if verify_key and prompt is not None and prompt_key(prompt) != key:
        return (
            f"does not match its prompt (the prompt hashes to {prompt_key(prompt)}). "
            "The prompt or key was edited by hand: restore the file from git or record again."
        )
    return None


def _decode_flat(document: dict[str, Any], text: str, source: str, case: str) -> Cassette:
    entries: dict[str, Entry] = {}
    for key, response in document.items():
        if not isinstance(response, str):
            raise CassetteCorrupt(
                f"{source}:{_line_of(text, key)}: entry {key}: a flat cassette maps keys to "
                f"response strings, found {type(response).__name__}. A v1 cassette needs "
                f'"format": "{FORMAT}".'
            )
        entries[key] = Entry(None, response)
    return Cassette(case=case, entries=entries)


def _utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CassetteCorrupt(
            f"{source}:{line}: not UTF-8 text (byte {exc.start}). Cassettes are UTF-8 JSON: "
            "restore the file from git or record it again."
        ) from exc


def _line_of(text: str, needle: str) -> str:
    """Best-effort 'line:column' of a JSON member name, for shape errors."""
    at = text.find(json.dumps(needle, ensure_ascii=False))
    if at < 0:
        return "1:1"
    line = text.count("\n", 0, at) + 1
    return f"{line}:{at - text.rfind(chr(10), 0, at)}"


def _restore_hint(source: str, case: str) -> str:
    record = f"gradekit record --case {case}" if case else "gradekit record"
    return f"Restore it with `git checkout -- {source}`, or delete it and run `{record}`."


def _clip(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat if len(flat) <= limit else flat[: limit - 1] + "…", ensure_ascii=False)
