"""HTTP cassettes, format ``gradekit.http-cassette/1``: the request key, the values, the codec
Pure: bytes in, values out; the transport that serves them is ``gradekit._http.transport``, the
miss that names where a request parted from the recordings ``gradekit._http.miss``.

A request is found by its key (``request_key``, scheme ``gradekit.http-key/1``):
method, host, path with its sorted query, and the body as canonical JSON less
the ``VOLATILE`` fields. Headers are never part of it and never stored, except
the few an SDK's behaviour depends on (``KEPT_HEADERS``). The same request asked
again is the next recording of its key: ``<key>#1``, ``<key>#2``, ... in the
order they were recorded.

The interactions are kept in the store (``gradekit._store``) like cassettes and
fixtures: each one is journalled as an ``Entry`` under ``<key>#<n>`` whose
``prompt`` is the request's canonical JSON and whose ``response`` the response's.

What a response says about itself rather than about the answer (its id, when it was made,
the request id, the build that served it: ``VOLATILE_RESPONSE``) differs on every call.
``HttpResponse.stable_json`` leaves it out, and two recordings are the same answer when
their stable forms are equal: a ``rerecord`` that got the same answers keeps the file's
bytes, and a diff of two recordings shows no change.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from gradekit._codec import Codec, Entry, Fold
from gradekit._commands import RECORD, RECORD_CASE
from gradekit._exceptions import CassetteCollision, CassetteCorrupt
from gradekit._keys import KEY_LENGTH

__all__ = [
    "FORMAT",
    "HTTP_CASSETTE",
    "KEPT_HEADERS",
    "KEY_SCHEME",
    "LAB_HTTP_CASSETTE",
    "VOLATILE",
    "VOLATILE_RESPONSE",
    "HttpCassette",
    "HttpCassetteCodec",
    "HttpRequest",
    "HttpResponse",
    "Interaction",
    "body_form",
    "clip",
    "compact_json",
    "place",
    "request_key",
    "response_form",
    "slot",
]

FORMAT = "gradekit.http-cassette/1"
KEY_SCHEME = "gradekit.http-key/1"
# Top-level body fields that say who asks, never what: they do not change the answer.
# ``stream_options`` is not one: ``include_usage`` adds a chunk to the stream.
VOLATILE = frozenset({"metadata", "user"})
# The only response headers written: what the SDKs read to parse a body, decide a retry
# or name a request in an error. Everything else (cookies, rate-limit counters) is dropped.
KEPT_HEADERS = frozenset({"content-type", "request-id", "x-request-id", "x-should-retry"})
# What a response says about itself, never about the answer: new on every call, so left out
# when two recordings are compared (``HttpResponse.stable_json``). The headers are the
# request ids; the fields are top-level in a JSON body or a server-sent event's JSON data,
# and in the object an event wraps (Anthropic's ``message_start`` ``message``, the OpenAI
# Responses API's ``response``): the id (``chatcmpl-...``, ``msg_...``, ``resp_...``), when
# it was made, the serving build, the request id an error body repeats.
VOLATILE_RESPONSE = frozenset({"id", "created", "created_at", "system_fingerprint", "request_id"})
_VOLATILE_HEADERS = frozenset({"request-id", "x-request-id"})
_WRAPPERS = ("message", "response")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SHOWN = 60

Form = Literal["body", "text", "base64"]
ResponseForm = Literal["body", "text", "base64", "events"]

# One encoder, built once: compact, keys sorted, as every key's text is.
compact_json = _compact = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


class _Constant(ValueError):
    """NaN or Infinity: Python's json reads them, JSON does not have them."""


def _reject_constant(name: str) -> Any:
    raise _Constant(name)


def _json_value(data: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when ``data`` is a JSON text, else ``(False, None)``."""
    try:
        return True, json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, RecursionError, ValueError):
        return False, None


def body_form(data: bytes) -> tuple[Form, Any]:
    """How a request body is kept: ``("body", JSON value)``, ``("text", str)`` or
    ``("base64", str)`` for bytes that are not UTF-8. An empty body is ``("text", "")``."""
    parsed, value = _json_value(data) if data else (False, None)
    if parsed:
        return "body", value
    return _text_or_base64(data)


def _text_or_base64(data: bytes) -> tuple[Literal["text", "base64"], str]:
    """Bytes kept as they are: their text, or base64 when they are not UTF-8."""
    try:
        return "text", data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64", base64.b64encode(data).decode("ascii")


def response_form(content_type: str, data: bytes) -> tuple[ResponseForm, Any]:
    """How a response body is kept, by its content type: JSON, SSE events, text or base64."""
    media = content_type.split(";")[0].strip().lower()
    if media == "text/event-stream":
        try:
            return "events", split_events(data)
        except UnicodeDecodeError:  # not SSE after all: kept byte for byte
            return "base64", base64.b64encode(data).decode("ascii")
    if media == "application/json" or media.endswith("+json"):
        parsed, value = _json_value(data)
        if parsed:
            return "body", value
    return _text_or_base64(data)


def split_events(data: bytes) -> list[str]:
    """The SSE events of a stream, in order, each without its closing blank line."""
    text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    return [event for event in text.split("\n\n") if event.strip("\n")]


def place(url: str) -> tuple[str, str]:
    """``(host, path)``: the lowercase host with a non-default port, the path and its sorted
    query."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS.get(parts.scheme.lower()):
        host = f"{host}:{port}"
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return host, (parts.path or "/") + (f"?{query}" if query else "")


def _keyed_body(form: Form, value: Any) -> Any:
    """What of a body the key sees: a JSON object less its volatile fields, else as kept."""
    if form == "body" and isinstance(value, dict):
        return {name: item for name, item in value.items() if name not in VOLATILE}
    return value


def _material(method: str, url: str, form: Form, value: Any) -> dict[str, Any]:
    host, path = place(url)
    return {"body": _keyed_body(form, value), "host": host, "method": method.upper(), "path": path}


def request_key(method: str, url: str, body: bytes) -> str:
    """The first 16 hex digits of SHA-256 over the canonical JSON of the request's method,
    host, path (with its sorted query) and body (keys sorted, compact, less ``VOLATILE``).

    Two bodies that differ only in key order or whitespace have one key; another
    ``temperature``, ``seed`` or message has another. Headers are never part of it.
    """
    form, value = body_form(body)
    return _digest(_material(method, url, form, value))


def _digest(material: Mapping[str, Any]) -> str:
    return sha256(_compact(material).encode("utf-8")).hexdigest()[:KEY_LENGTH]


def slot(key: str, n: int) -> str:
    """The journal's and ``unplayed``'s name of the ``n``th recording of ``key``."""
    return f"{key}#{n}"


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A request as kept: its method, URL and body (``form`` says how ``content`` holds it)."""

    method: str
    url: str
    form: Form
    content: Any

    @classmethod
    def of(cls, method: str, url: str, body: bytes) -> HttpRequest:
        """The request asked: ``body`` is its bytes."""
        form, value = body_form(body)
        return cls(method.upper(), url, form, value)

    @property
    def key(self) -> str:
        """Its ``request_key``."""
        return _digest(self.material())

    def material(self) -> dict[str, Any]:
        """What the key is taken over."""
        return _material(self.method, self.url, self.form, self.content)

    def to_json(self) -> dict[str, Any]:
        """The request's object in a cassette."""
        return {"method": self.method, "url": self.url, self.form: self.content}


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A response as kept: status, the kept headers, and the body (``form`` says how)."""

    status: int
    headers: Mapping[str, str]
    form: ResponseForm
    content: Any

    @classmethod
    def of(cls, status: int, headers: Sequence[tuple[str, str]], data: bytes) -> HttpResponse:
        """The response received: its status, every header, the decoded body bytes."""
        kept = {name.lower(): value for name, value in headers if name.lower() in KEPT_HEADERS}
        form, value = response_form(kept.get("content-type", ""), data)
        return cls(status, kept, form, value)

    @property
    def events(self) -> list[str]:
        """The SSE events (empty unless ``form`` is ``"events"``)."""
        return list(self.content) if self.form == "events" else []

    def body(self) -> bytes:
        """The bytes an SDK reads: the events of a stream, each closed by a blank line."""
        if self.form == "events":
            return "".join(f"{event}\n\n" for event in self.content).encode("utf-8")
        if self.form == "body":
            return _compact(self.content).encode("utf-8")
        if self.form == "base64":
            return base64.b64decode(self.content)
        return str(self.content).encode("utf-8")

    def to_json(self) -> dict[str, Any]:
        """The response's object in a cassette."""
        return {"status": self.status, "headers": dict(self.headers), self.form: self.content}

    def stable_json(self) -> dict[str, Any]:
        """``to_json`` less what differs on every call (``VOLATILE_RESPONSE``, the request id
        headers): what two recordings of one answer have in common. The file keeps it all."""
        headers = {
            name: value for name, value in self.headers.items() if name not in _VOLATILE_HEADERS
        }
        content: Any = self.content
        if self.form == "body":
            content = _stable(content)
        elif self.form == "events":
            content = [_stable_event(event) for event in self.content]
        return {"status": self.status, "headers": headers, self.form: content}


def _stable(value: Any) -> Any:
    """A JSON object less its volatile fields, and its wrapped object's; anything else as is."""
    if not isinstance(value, dict):
        return value
    kept = {name: item for name, item in value.items() if name not in VOLATILE_RESPONSE}
    for wrapper in _WRAPPERS:
        if isinstance(kept.get(wrapper), dict):
            kept[wrapper] = {
                name: item for name, item in kept[wrapper].items() if name not in VOLATILE_RESPONSE
            }
    return kept


def _stable_event(event: str) -> str:
    """One server-sent event with each ``data:`` line's JSON made ``_stable``; a line that is
    not JSON (``data: [DONE]``, an ``event:`` name) is kept as it is."""
    lines = []
    for line in event.split("\n"):
        field, colon, data = line.partition(":")
        parsed, value = (
            _json_value(data.encode("utf-8")) if colon and field == "data" else (False, None)
        )
        lines.append(f"data: {_compact(_stable(value))}" if parsed else line)
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Interaction:
    """One recorded exchange: the request, its response, and when (UTC, to the second)."""

    request: HttpRequest
    response: HttpResponse
    recorded_at: str = ""

    def entry(self) -> Entry:
        """The journal's line for it."""
        return Entry(
            _compact(self.request.to_json()),
            _compact(self.response.to_json()),
            "http",
            self.recorded_at,
        )

    def texts(self) -> list[str]:
        """Everything of it that is written, as text: where a secret is looked for. Both the
        JSON as written (escaped) and every string in it as it reads (a quote in a
        credential is escaped in the file, and would hide from the written form alone)."""
        written = [_compact(self.request.to_json()), _compact(self.response.to_json())]
        return written + _strings([self.request.to_json(), self.response.to_json()])


def _strings(value: object) -> list[str]:
    """Every string in a JSON value, object keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value.keys(), *(s for item in value.values() for s in _strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@dataclass(frozen=True, slots=True)
class HttpCassette:
    """A case's HTTP interactions: each request key's recordings, in the order asked."""

    case: str
    interactions: Mapping[str, tuple[Interaction, ...]] = field(default_factory=dict)

    def slots(self) -> dict[str, Interaction]:
        """Every recording under its slot, ``<key>#<n>``."""
        return {
            slot(key, n): interaction
            for key, recorded in self.interactions.items()
            for n, interaction in enumerate(recorded, 1)
        }

    def __len__(self) -> int:
        return sum(len(recorded) for recorded in self.interactions.values())


class HttpCassetteCodec(Codec[HttpCassette]):
    """HTTP cassettes: a case's interactions, each list under the key of its request."""

    document, format, error = HttpCassette, FORMAT, CassetteCorrupt
    noun, things, rerecord = "cassette", "interactions", False
    asked, fix = "for this request", 'record it once through the live API (mode="once")'
    then = "commit the cassette. A replay never calls the network."

    def __init__(self, command: str = "pytest --gradekit-record-mode once") -> None:
        self.command = command  # may name ``{case}``

    def record_command(self, case: str) -> str:
        """The command that records what is missing: the pytest plugin's flag (or the
        command a test suite configured, which may name ``{case}``)."""
        return self.command.format(case=case)

    def encode(self, document: HttpCassette) -> bytes:
        """The canonical bytes of an HTTP cassette."""
        return self.canonical(
            {
                "format": FORMAT,
                "key_scheme": KEY_SCHEME,
                "case": document.case,
                "interactions": {
                    key: [
                        {
                            "request": i.request.to_json(),
                            "response": i.response.to_json(),
                            "recorded_at": i.recorded_at,
                        }
                        for i in recorded
                    ]
                    for key, recorded in document.interactions.items()
                },
            }
        )

    def decode(self, data: bytes, *, source: str, case: str = "") -> HttpCassette:
        """Parse HTTP cassette bytes; every error names ``source`` and where it broke."""
        text = self.text(data, source=source, case=case)
        document = self.json_object(text, source=source, case=case)
        for member, wanted in (("format", FORMAT), ("key_scheme", KEY_SCHEME)):
            if document.get(member) != wanted:
                problem = self._version_problem(member, document.get(member), wanted)
                raise self.corrupt(source, text, _at(text, member), problem)
        named, interactions = document.get("case"), document.get("interactions")
        if not isinstance(named, str) or not isinstance(interactions, dict):
            problem = "an HTTP cassette needs a string 'case' and an object 'interactions'."
            raise self.corrupt(
                source,
                text,
                _at(text, "interactions"),
                f"{problem} {self.restore_hint(source, case)}",
            )
        decoded = {
            key: self._recordings(key, raw, text, source, case or named)
            for key, raw in interactions.items()
        }
        return HttpCassette(named, decoded)

    def _version_problem(self, member: str, found: object, wanted: str) -> str:
        if member == "format":
            return self.format_problem(found, reads=" here")
        return (
            f"unknown key scheme {found!r}; gradekit reads {wanted!r}: record the "
            "cassette again with this gradekit."
        )

    def _recordings(
        self, key: str, raw: object, text: str, source: str, case: str
    ) -> tuple[Interaction, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.corrupt(
                source,
                text,
                _at(text, key),
                f"key {key} must be a non-empty array of interactions.",
            )
        recorded: list[Interaction] = []
        for n, item in enumerate(raw, 1):
            interaction, problem = _interaction(item)
            if interaction is not None and interaction.request.key != key:
                problem = (
                    f"holds a request whose key is {interaction.request.key}: the "
                    "request or the key was edited by hand."
                )
                interaction = None
            if interaction is None:
                # Locating the key rescans the text: on the error path only.
                hint = self.restore_hint(source, case)
                raise self.corrupt(
                    source, text, _at(text, key), f"interaction {slot(key, n)} {problem} {hint}"
                )
            recorded.append(interaction)
        return tuple(recorded)

    def answers(self, document: HttpCassette) -> Mapping[str, object]:
        """Each slot's request and response, without when and without what differs on every
        call (``HttpResponse.stable_json``): a ``rerecord`` that got the same answers
        keeps the file's bytes."""
        return {
            name: (_compact(i.request.to_json()), _compact(i.response.stable_json()))
            for name, i in document.slots().items()
        }

    def merge(self, base: HttpCassette | None, fold: Fold) -> HttpCassette:
        """``base`` with the journalled interactions on top, less the slots not kept."""
        slots = base.slots() if base else {}
        journal = fold.path.with_name(fold.path.name + ".journal")
        for line, (name, entry) in enumerate(fold.pending, 1):
            interaction = self._journalled(name, entry, journal, line)
            _merge(slots, name, interaction, source=str(fold.path))
        return HttpCassette(base.case if base else fold.case, _grouped(fold.kept(slots)))

    def _journalled(self, name: str, entry: Entry, journal: Path, line: int) -> Interaction:
        key, _, n = name.partition("#")
        try:
            raw = {
                "request": json.loads(entry.prompt or ""),
                "response": json.loads(entry.response),
                "recorded_at": entry.recorded_at,
            }
        except json.JSONDecodeError:
            raw = {}
        interaction, _ = _interaction(raw)
        if interaction is None or not n.isdigit() or interaction.request.key != key:
            raise self.journal_problem(journal, line, f"unreadable journalled interaction {name!r}")
        return interaction


def _merge(slots: dict[str, Interaction], name: str, new: Interaction, *, source: str) -> None:
    """Put ``new`` in its slot; another request there (same key, other material) collides."""
    old = slots.get(name)
    if old is not None and old.request.material() != new.request.material():
        raise CassetteCollision(
            f"{source}: {name} is already recorded for a different request.\n"
            f"  recorded: {clip(_compact(old.request.material()))}\n"
            f"  new:      {clip(_compact(new.request.material()))}\n"
            "Two requests sharing a 16-hex-digit key is almost always a hand-edited file: "
            "restore the cassette from git, or delete the interaction and record again."
        )
    slots[name] = new


def _grouped(slots: Mapping[str, Interaction]) -> dict[str, tuple[Interaction, ...]]:
    """Slots back into each key's list, in ``#n`` order."""
    numbered = sorted((*_numbered(name), name) for name in slots)
    grouped: dict[str, list[Interaction]] = {}
    for key, _, name in numbered:
        grouped.setdefault(key, []).append(slots[name])
    return {key: tuple(recorded) for key, recorded in grouped.items()}


def _numbered(name: str) -> tuple[str, int]:
    key, _, n = name.partition("#")
    return key, int(n)


def _interaction(raw: object) -> tuple[Interaction | None, str | None]:
    """The interaction ``raw`` holds, or what is wrong with it. Cheap: it runs on each one."""
    if type(raw) is not dict:
        return None, "must be an object with 'request', 'response' and 'recorded_at'."
    request, response = raw.get("request"), raw.get("response")
    if (
        type(request) is not dict
        or type(request.get("method")) is not str
        or type(request.get("url")) is not str
    ):
        return None, "needs a 'request' with a string 'method' and 'url'."
    forms = [name for name in ("body", "text", "base64") if name in request]
    if len(forms) != 1:
        return None, "needs a request with one of 'body', 'text' or 'base64'."
    if (
        type(response) is not dict
        or type(response.get("status")) is not int
        or not _string_map(response.get("headers"))
    ):
        return None, "needs a 'response' with an integer 'status' and string 'headers'."
    body = [name for name in ("body", "text", "base64", "events") if name in response]
    if len(body) != 1 or not _form_ok(body[0], response[body[0]]):
        return None, "needs a response with one of 'body', 'text', 'base64' or 'events'."
    if type(raw.get("recorded_at", "")) is not str:
        return None, "has a 'recorded_at' that is not a string."
    form: Any = forms[0]
    kept: Any = body[0]
    return Interaction(
        HttpRequest(request["method"], request["url"], form, request[form]),
        HttpResponse(response["status"], dict(response["headers"]), kept, response[kept]),
        raw.get("recorded_at", ""),
    ), None


def _string_map(value: object) -> bool:
    return type(value) is dict and all(type(v) is str for v in value.values())


def _form_ok(form: str, value: object) -> bool:
    if form == "events":
        return type(value) is list and all(type(event) is str for event in value)
    return form == "body" or type(value) is str


def _at(text: str, name: str) -> int:
    """Best-effort offset of a JSON member name, for shape errors (the start when not found)."""
    return max(text.find(json.dumps(name, ensure_ascii=False)), 0)


def clip(text: str, limit: int = _SHOWN) -> str:
    """``text``, cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


HTTP_CASSETTE = HttpCassetteCodec()


class _LabHttpCassetteCodec(HttpCassetteCodec):
    """A lab's ``cassettes/<case>.http.json``, which the record command writes: its errors
    name that command as it runs from the lab's root (``make record ARGS='--case ...'``)."""

    def record_command(self, case: str) -> str:
        return RECORD_CASE(case=case) if case else RECORD()


LAB_HTTP_CASSETTE = _LabHttpCassetteCodec()
