"""Tool fixtures, format ``gradekit.fixtures/1``: the call key and the codec.

A fixture holds one case's read-only tool calls, each under its key: the
tool's name and its canonical arguments, never the call's position in the
run. Written bytes are deterministic (UTF-8, keys sorted, two-space indent,
calls sorted by key, one trailing newline), so a re-recording is a clean git
diff. A file that cannot be read is an error naming where it broke; it is
never treated as empty.

Fixtures are kept in the cassettes' store (``gradekit._store``): each call is
journalled as an ``Entry`` whose key is the call's key, whose ``provider`` is
the tool's name and whose ``response`` is the response's JSON text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradekit._codec import Codec, Entry, Fold
from gradekit._exceptions import FixtureCorrupt, UsageError
from gradekit._store import journal_path

__all__ = [
    "FIXTURE",
    "FORMAT",
    "Fixture",
    "FixtureCodec",
    "ToolCall",
    "canonical_json",
    "decode_fixture",
    "encode_fixture",
    "is_stamp",
    "journal_entry",
    "response_texts",
    "round_trip",
    "tool_key",
]

FORMAT = "gradekit.fixtures/1"
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_NAME = re.compile(r"\S+")
_JSON_TYPES = "objects with string keys, arrays, strings, finite numbers, true, false and null"


def tool_key(name: str, args: Mapping[str, Any]) -> str:
    """Return ``"<name> <canonical JSON of args>"``: what makes two tool calls the same call.

    Object keys are sorted at every depth and separators are compact, so
    ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are one key. Anything that
    is not a JSON value (NaN, a set, a tuple, an object) is a ``UsageError``.
    """
    if type(name) is not str or not _NAME.fullmatch(name):
        raise UsageError(f"a tool name is a non-empty string without spaces, not {name!r}")
    plain = args if type(args) is dict else dict(args)
    return f"{name} {canonical_json(plain, what=f'{name} args')}"


def canonical_json(value: object, *, what: str) -> str:
    """The compact, key-sorted JSON of ``value``; ``UsageError`` naming ``what`` if it is
    not a JSON value (``search_docs args``, ``query_db's result``).
    """
    try:
        text = _dump(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(_not_json(value, what, exc)) from exc
    # json.dumps quietly writes a tuple as an array and the key 1 as "1": the text would then
    # describe something other than what the tool was given.
    if not _plain(value):
        raise UsageError(_not_json(value, what, None))
    return text


def round_trip(value: object, *, what: str) -> tuple[str, Any]:
    """``canonical_json(value)`` and a fresh copy of ``value`` read back from it."""
    text = canonical_json(value, what=what)
    return text, json.loads(text)


# One encoder, built once: json.dumps with options builds a new one on every call.
_dump = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: object) -> bool:
    """Whether ``value`` is made of JSON's own types only (exact types: it runs on every call)."""
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _SCALARS and not _plain(item)):
                return False
        return True
    if type(value) is list:
        return all(type(item) in _SCALARS or _plain(item) for item in value)
    return type(value) in _SCALARS


def _not_json(value: object, what: str, exc: Exception | None) -> str:
    try:
        problem = _first_problem(value, what)
    except RecursionError:  # a list that contains itself: json.dumps said so already
        problem = None
    found = problem or f"{what}: {exc}"
    return f"{found}. Tool arguments and results are JSON values: {_JSON_TYPES}."


def _first_problem(value: object, where: str) -> str | None:
    """The first non-JSON part of ``value``, as ``args['tags'][0] is a set``; or None."""
    if type(value) is float and not math.isfinite(value):
        return f"{where} is {value!r}"
    if type(value) in _SCALARS:
        return None
    if type(value) is list:
        found = (_first_problem(item, f"{where}[{i}]") for i, item in enumerate(value))
        return next((p for p in found if p), None)
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"{where} has the key {key!r} ({type(key).__name__}), not a string"
            problem = _first_problem(item, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    hint = " (use a list)" if isinstance(value, tuple | set | frozenset) else ""
    return f"{where} is of type {type(value).__name__}{hint}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One recorded read-only tool call: the tool, its arguments, its JSON response."""

    tool: str
    args: Mapping[str, Any]
    response: Any


@dataclass(frozen=True, slots=True)
class Fixture:
    """A case's recorded tool calls, keyed by ``tool_key``.

    ``recorded_at`` is the time of the oldest recording (ISO 8601 UTC, to the
    second); a fixture recorded by a run that called no tool has no calls.
    """

    case: str
    recorded_at: str
    calls: Mapping[str, ToolCall] = field(default_factory=dict)


class _Constant(Exception):
    """NaN or Infinity in a file: Python's json reads them, JSON does not have them."""


def _reject_constant(name: str) -> Any:
    raise _Constant(name)


class FixtureCodec(Codec[Fixture]):
    """Tool fixtures: a case's read-only tool calls, each under its ``tool_key``.

    A call is made again only by a re-recording, so the fix for a miss or a
    bad file is ``gradekit record --case <case> --rerecord``.
    """

    document, format, error = Fixture, FORMAT, FixtureCorrupt
    noun, things, rerecord = "fixture", "calls", True
    asked, fix = "of this tool call", "record it with the real tools"
    then = "review the fixture's diff and commit it. Graded runs never call a tool live."

    def encode(self, document: Fixture) -> bytes:
        """Return the canonical bytes of a fixture, its calls sorted by key."""
        return self.canonical(
            {
                "format": FORMAT,
                "case": document.case,
                "recorded_at": document.recorded_at,
                "calls": [
                    {"tool": call.tool, "args": call.args, "response": call.response}
                    for _, call in sorted(document.calls.items())
                ],
            }
        )

    def decode(self, data: bytes, *, source: str, case: str = "") -> Fixture:
        """Parse fixture bytes; ``source`` names the file in every error, ``case`` the fix."""
        text = self.text(data, source=source, case=case)
        try:
            document = self.json_object(
                text, source=source, case=case, parse_constant=_reject_constant
            )
        except _Constant as exc:
            problem = f"{exc} is not a JSON value."
            raise self.corrupt(source, text, _constant_at(text), problem) from exc
        return self._decode_document(document, text, source, case)

    def answers(self, document: Fixture) -> Mapping[str, object]:
        """Each key's JSON response."""
        return {key: call.response for key, call in document.calls.items()}

    def merge(self, base: Fixture | None, fold: Fold) -> Fixture:
        """``base`` with the journalled calls on top; a later answer to one key replaces it.

        ``recorded_at`` becomes the oldest recording kept, or the run's time
        when none is.
        """
        calls = dict(base.calls) if base else {}
        stamps = dict.fromkeys(calls, base.recorded_at if base else fold.now)
        journal = journal_path(fold.path)
        for line, (key, entry) in enumerate(fold.pending, 1):
            calls[key], stamps[key] = self._journalled(key, entry, journal, line), entry.recorded_at
        calls = fold.kept(calls)
        oldest = min((stamps[key] for key in calls), default=None)
        fallback = base.recorded_at if base is not None and fold.keep is None else fold.now
        return Fixture(base.case if base else fold.case, oldest or fallback, calls)

    def _decode_document(
        self, document: dict[str, Any], text: str, source: str, case: str
    ) -> Fixture:
        version = document.get("format")
        if version != FORMAT:
            problem = (
                f'no \'format\': a fixture file starts with "format": "{FORMAT}".'
                if version is None
                else self.format_problem(version, reads=" here")
            )
            raise self.corrupt(source, text, _member_at(text, "format"), problem)
        named, stamp = document.get("case"), document.get("recorded_at")
        calls = document.get("calls")
        if not isinstance(named, str) or not isinstance(calls, list):
            where = _member_at(text, "calls" if isinstance(named, str) else "case")
            problem = "a fixture needs a string 'case' and an array 'calls'."
            raise self.corrupt(source, text, where, f"{problem} {self.restore_hint(source, case)}")
        if not isinstance(stamp, str) or not _STAMP.fullmatch(stamp):
            problem = "'recorded_at' must be a UTC time to the second, like 2026-01-31T09:30:00Z."
            raise self.corrupt(source, text, _member_at(text, "recorded_at"), problem)
        return Fixture(named, stamp, self._decode_calls(calls, text, source, case or named))

    def _decode_calls(
        self, calls: list[Any], text: str, source: str, case: str
    ) -> dict[str, ToolCall]:
        decoded: dict[str, ToolCall] = {}
        for index, raw in enumerate(calls):
            problem = _call_problem(raw)
            if problem is not None:
                # Locating the call rescans the text: on the error path only.
                hint = self.restore_hint(source, case)
                raise self.corrupt(
                    source, text, _call_at(text, index), f"call {index} {problem} {hint}"
                )
            key = f"{raw['tool']} {_dump(raw['args'])}"
            call = ToolCall(raw["tool"], raw["args"], raw["response"])
            # Responses are compared as JSON text (1, 1.0 and true differ), and only on a repeat.
            if key in decoded and _dump(decoded[key].response) != _dump(call.response):
                raise self.corrupt(source, text, _call_at(text, index), _duplicate(key))
            decoded[key] = call
        return decoded

    def _journalled(self, key: str, entry: Entry, journal: Path, line: int) -> ToolCall:
        """The call a journal line holds; a line a recorder could not have written is an error."""
        tool, _, args = key.partition(" ")
        try:
            arguments, response = json.loads(args), json.loads(entry.response)
        except json.JSONDecodeError:
            arguments = response = None
        intact = tool == entry.provider and type(arguments) is dict
        if not intact or not _STAMP.fullmatch(entry.recorded_at):
            raise self.journal_problem(journal, line, f"unreadable journalled tool call {key!r}")
        return ToolCall(tool, arguments, response)


def _call_problem(raw: object) -> str | None:
    """What is wrong with one call's shape, or None. Cheap: it runs on every call."""
    if type(raw) is not dict or "response" not in raw:
        return "must be an object with 'tool', 'args' and 'response'."
    tool = raw.get("tool")
    if type(tool) is not str or not _NAME.fullmatch(tool):
        return "needs a 'tool': the tool's name, a string without spaces."
    if type(raw.get("args")) is not dict:
        return "needs 'args': an object of the call's arguments."
    return None


def _duplicate(key: str) -> str:
    return (
        f"repeats an earlier call ({key}) with a different response. One call has one "
        "answer: this is usually a bad merge. Keep one of them, or re-record the case."
    )


_DECODER = json.JSONDecoder()
_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
_SPACE = re.compile(r"[ \t\n\r]*")


def _member_at(text: str, name: str) -> int:
    """Offset of a top-level member's value, else 0 (error path only)."""
    return _members(text).get(name, 0)


def _call_at(text: str, index: int) -> int:
    """Offset of ``calls[index]`` in a document that parsed (error path only)."""
    starts = _call_starts(text)
    return starts[index] if index < len(starts) else 0


def _constant_at(text: str) -> int:
    """Offset of the first call holding NaN or Infinity, else 0 (error path only)."""
    for start in _call_starts(text):
        try:
            _STRICT.raw_decode(text, start)
        except _Constant:
            return start
    return 0


def _call_starts(text: str) -> list[int]:
    at = _members(text).get("calls")
    return [] if at is None or text[at : at + 1] != "[" else _elements(text, at + 1)


def _members(text: str) -> dict[str, int]:
    """Offsets of the top-level members' values, found by walking the object."""
    members: dict[str, int] = {}
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        return members
    at = _skip(text, at + 1)
    while text[at : at + 1] == '"':
        name, at = _DECODER.raw_decode(text, at)
        at = _skip(text, _skip(text, at) + 1)  # past the colon
        members[name] = at
        at = _past_comma(text, _raw_end(text, at))
    return members


def _elements(text: str, at: int) -> list[int]:
    starts: list[int] = []
    at = _skip(text, at)
    while at < len(text) and text[at] != "]":
        starts.append(at)
        at = _past_comma(text, _raw_end(text, at))
    return starts


def _past_comma(text: str, at: int) -> int:
    at = _skip(text, at)
    return _skip(text, at + 1) if text[at : at + 1] == "," else at


def _raw_end(text: str, at: int) -> int:
    try:
        return _DECODER.raw_decode(text, at)[1]
    except ValueError:  # a NaN the lenient decoder reads; anything else cannot happen here
        return len(text)


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def journal_entry(tool: str, response_json: str, recorded_at: str) -> Entry:
    """One recorded call in the shape ``gradekit._store.Journal`` appends (its key: the call's)."""
    return Entry(None, response_json, tool, recorded_at)


def response_texts(fixture: Fixture | None) -> dict[str, str]:
    """Each call's key and the JSON text of its response: what a replay serves from."""
    return {key: _dump(call.response) for key, call in fixture.calls.items()} if fixture else {}


def is_stamp(text: object) -> bool:
    """Whether ``text`` is a UTC time to the second, the way fixtures store ``recorded_at``."""
    return isinstance(text, str) and _STAMP.fullmatch(text) is not None


FIXTURE = FixtureCodec()
encode_fixture = FIXTURE.encode
decode_fixture = FIXTURE.decode
