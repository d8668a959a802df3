"""A real HTTP server on 127.0.0.1 that speaks OpenAI Chat Completions and Anthropic Messages.

Tests script what it answers, one ``Reply`` per request, and read back every
request it received. Bodies follow the real APIs closely enough that the
official ``openai`` and ``anthropic`` SDKs parse them (tests check that), so
an adapter passing against this server is passing against the real wire format.

A request with ``"stream": true`` gets the same answer as server-sent events:
OpenAI ``chat.completion.chunk`` events ending in ``data: [DONE]``, Anthropic's
``message_start`` ... ``message_stop`` with a ``ping``, sent chunked as the
real APIs send them. ``tool_call`` answers with a tool call in either protocol.
Each answer carries its protocol's request id header (``x-request-id`` /
``request-id``: ``req_loopback<n>``); ``Loopback(volatile=True)`` makes the fields a
real API makes anew on every call random instead (the response id, ``created``,
``system_fingerprint`` and the request id header), as a re-recording meets them;
``Loopback(gzip=True)`` compresses JSON
bodies for a client that accepts gzip, as the real APIs do. ``cut`` drops the
connection mid-answer, ``echo`` quotes the question (to tell concurrent calls
apart), and Azure OpenAI's ``/openai/deployments/<name>/chat/completions`` is served.

    with Loopback(error(429, retry_after="2"), answer("hi")) as server:
        OpenAICompatible(model="m", base_url=server.openai_url).complete("hello")
"""

from __future__ import annotations

import gzip
import json
import secrets
import socket
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, cast
from urllib.parse import urlsplit

__all__ = [
    "Loopback",
    "Recorded",
    "Reply",
    "ToolCall",
    "answer",
    "cut",
    "echo",
    "empty",
    "error",
    "no_text",
    "raw",
    "slow",
    "tool_call",
]

Wire = Literal["openai", "anthropic"]
Kind = Literal["text", "empty", "no_text", "raw", "error", "tool", "echo"]

CREATED = 1767225600  # a fixed timestamp keeps bodies identical run to run
EVENT_STREAM = "text/event-stream; charset=utf-8"  # what both real APIs send


@dataclass(frozen=True)
class ToolCall:
    """One call the model asks for; ``arguments`` is JSON text, as OpenAI sends it."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """One scripted answer, rendered in whichever protocol the request spoke."""

    kind: Kind = "text"
    parts: tuple[str, ...] = ("Hello from loopback.",)
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    thinking: str | None = None
    tools: tuple[ToolCall, ...] = ()
    cut_after: int | None = None


def answer(*parts: str, thinking: str | None = None) -> Reply:
    """A 200 whose text is ``parts`` joined (Anthropic: one text block per part)."""
    return Reply(parts=parts or Reply.parts, thinking=thinking)


def cut(after: int, *parts: str) -> Reply:
    """A normal answer whose connection drops mid-body: after ``after`` events of a stream,
    or halfway through a JSON body (``after`` is then ignored)."""
    return Reply(parts=parts or Reply.parts, cut_after=after)


def echo() -> Reply:
    """A 200 quoting the last message and the request's number: tells concurrent calls apart."""
    return Reply(kind="echo")


def error(status: int, message: str = "", *, retry_after: str | None = None) -> Reply:
    """An API error in the protocol's own error shape; ``{key}`` in the message echoes the key."""
    headers = (("retry-after", retry_after),) if retry_after is not None else ()
    return Reply(kind="error", status=status, parts=(message,), headers=headers)


def raw(body: bytes, *, status: int = 200, content_type: str = "application/json") -> Reply:
    """Exactly these bytes, e.g. malformed JSON or a proxy's HTML page."""
    return Reply(kind="raw", status=status, body=body, content_type=content_type)


def slow(seconds: float, *parts: str) -> Reply:
    """A normal answer sent only after ``seconds`` (cut short when the server closes)."""
    return Reply(parts=parts or Reply.parts, delay=seconds)


def empty() -> Reply:
    """A 200 with no choices (OpenAI) or no content blocks (Anthropic)."""
    return Reply(kind="empty")


def no_text() -> Reply:
    """A 200 whose message has no text: content missing (OpenAI), only tool use (Anthropic)."""
    return Reply(kind="no_text")


def tool_call(
    name: str, arguments: Mapping[str, Any], *more: tuple[str, Mapping[str, Any]], text: str = ""
) -> Reply:
    """A 200 asking for tool calls: ``finish_reason: "tool_calls"`` / ``stop_reason: "tool_use"``.

    ``more`` adds further ``(name, arguments)`` calls; ``text`` is said before them.
    """
    calls = ((name, arguments), *more)
    tools = tuple(ToolCall(called, json.dumps(dict(args))) for called, args in calls)
    return Reply(kind="tool", parts=(text,) if text else (), tools=tools)


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it; header names are lower-case."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


# ---- response bodies -------------------------------------------------------------

_OPENAI_ERRORS = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "requests",
}
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _last_message(request: Any) -> str:
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return "?"
    return str(messages[-1].get("content", "?"))


def _openai_error(status: int, message: str) -> dict[str, Any]:
    kind = _OPENAI_ERRORS.get(status, "server_error")
    code = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}
    return {"error": {"message": message, "type": kind, "param": None, "code": code.get(status)}}


def _anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = _ANTHROPIC_ERRORS.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_loopback",
    }


def _usage_words(request: Any) -> int:
    messages = request.get("messages", []) if isinstance(request, dict) else []
    return sum(len(str(m.get("content", "")).split()) for m in messages if isinstance(m, dict))


def _openai_tool_calls(reply: Reply, number: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_loopback{number}_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for index, call in enumerate(reply.tools)
    ]


def _openai_message(reply: Reply, number: int) -> dict[str, Any]:
    text = "".join(reply.parts)
    if reply.kind == "no_text":
        return {"role": "assistant", "refusal": None}
    if reply.kind == "tool":
        return {
            "role": "assistant",
            "content": text or None,
            "refusal": None,
            "tool_calls": _openai_tool_calls(reply, number),
        }
    return {"role": "assistant", "content": text, "refusal": None}


def _openai_body(reply: Reply, request: Any, number: int) -> dict[str, Any]:
    text = "".join(reply.parts)
    finish = "tool_calls" if reply.kind == "tool" else "stop"
    choices = (
        []
        if reply.kind == "empty"
        else [
            {
                "index": 0,
                "message": _openai_message(reply, number),
                "logprobs": None,
                "finish_reason": finish,
            }
        ]
    )
    prompt_tokens, completion_tokens = _usage_words(request), len(text.split())
    return {
        "id": f"chatcmpl-loopback{number}",
        "object": "chat.completion",
        "created": CREATED,
        "model": request.get("model", "?"),
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": "fp_loopback",
    }


def _anthropic_blocks(reply: Reply, number: int) -> list[dict[str, Any]]:
    if reply.kind == "empty":
        return []
    if reply.kind == "no_text":
        return [
            {
                "type": "tool_use",
                "id": "toolu_loopback",
                "name": "lookup",
                "input": {"query": "refund"},
            }
        ]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": part} for part in reply.parts]
    if reply.thinking is not None:
        blocks.insert(0, {"type": "thinking", "thinking": reply.thinking, "signature": "sig"})
    blocks += [
        {
            "type": "tool_use",
            "id": f"toolu_loopback{number:04d}_{index}",
            "name": call.name,
            "input": json.loads(call.arguments),
        }
        for index, call in enumerate(reply.tools)
    ]
    return blocks


def _anthropic_body(reply: Reply, request: Any, number: int) -> dict[str, Any]:
    stop = "tool_use" if reply.kind in ("no_text", "tool") else "end_turn"
    return {
        "id": f"msg_loopback{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "?"),
        "content": _anthropic_blocks(reply, number),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": _usage_words(request),
            "output_tokens": len("".join(reply.parts).split()),
        },
    }


# ---- streamed bodies: the same answer cut into server-sent events ------------------


def _halves(text: str) -> list[str]:
    """``text`` in two deltas (one if short), so a client must join them to read it."""
    cut = len(text) // 2
    return [piece for piece in (text[:cut], text[cut:]) if piece]


def _sse(data: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    named = f"event: {event}\n" if event is not None else ""
    return f"{named}data: {payload}\n\n".encode()


def _openai_deltas(body: Mapping[str, Any], reply: Reply) -> list[tuple[dict[str, Any], Any]]:
    """``(delta, finish_reason)`` per chunk: the role, the text in parts, the tool calls."""
    if not body["choices"]:
        return []
    [choice] = body["choices"]
    message = choice["message"]
    deltas: list[tuple[dict[str, Any], Any]] = [
        (
            {"role": "assistant", "content": "" if reply.kind == "text" else None, "refusal": None},
            None,
        )
    ]
    deltas += [({"content": part}, None) for part in reply.parts if part]
    for index, call in enumerate(message.get("tool_calls", [])):
        function = call["function"]
        deltas.append(
            (
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                },
                None,
            )
        )
        deltas += [
            ({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, None)
            for piece in _halves(function["arguments"])
        ]
    return [*deltas, ({}, choice["finish_reason"])]


def _openai_events(body: Mapping[str, Any], reply: Reply, request: Any) -> list[bytes]:
    usage_asked = bool((request.get("stream_options") or {}).get("include_usage"))
    head = {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
        "system_fingerprint": body["system_fingerprint"],
    }
    extra = {"usage": None} if usage_asked else {}
    events = [
        _sse(
            {
                **head,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
                **extra,
            }
        )
        for delta, finish in _openai_deltas(body, reply)
    ]
    if usage_asked or not body["choices"]:
        events.append(_sse({**head, "choices": [], "usage": body["usage"]}))
    return [*events, _sse("[DONE]")]


def _anthropic_block_events(index: int, block: Mapping[str, Any]) -> list[bytes]:
    kind = block["type"]
    start: dict[str, Any] = {"type": kind}
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        start["text"] = ""
        deltas = [{"type": "text_delta", "text": piece} for piece in _halves(block["text"])]
    elif kind == "thinking":
        start |= {"thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": piece} for piece in _halves(block["thinking"])
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        start |= {"id": block["id"], "name": block["name"], "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in _halves(json.dumps(block["input"]))
        ]
    events = [
        _sse(
            {"type": "content_block_start", "index": index, "content_block": start},
            "content_block_start",
        )
    ]
    events += [
        _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
        for delta in deltas
    ]
    return [*events, _sse({"type": "content_block_stop", "index": index}, "content_block_stop")]


def _anthropic_events(body: Mapping[str, Any], reply: Reply, request: Any) -> list[bytes]:
    usage = body["usage"]
    opening = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
    }
    events = [
        _sse({"type": "message_start", "message": opening}, "message_start"),
        _sse({"type": "ping"}, "ping"),
    ]
    for index, block in enumerate(body["content"]):
        events += _anthropic_block_events(index, block)
    closing = {
        "type": "message_delta",
        "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    return [*events, _sse(closing, "message_delta"), _sse({"type": "message_stop"}, "message_stop")]


def _invalid(protocol: Wire, headers: Mapping[str, str], request: Any) -> str | None:
    """The complaint the real API would answer with 400, or None for a valid request."""
    if not isinstance(request, dict):
        return "the request body must be a JSON object"
    if not isinstance(request.get("model"), str):
        return "model: Field required"
    if not isinstance(request.get("messages"), list) or not request["messages"]:
        return "messages: at least one message is required"
    if protocol == "anthropic" and "anthropic-version" not in headers:
        return "anthropic-version: header is required"
    if protocol == "anthropic" and not isinstance(request.get("max_tokens"), int):
        return "max_tokens: Field required"
    return None


# ---- the server -------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    # Joining handler threads on close is what makes a test end with nothing running.
    daemon_threads = False
    block_on_close = True

    def __init__(self, owner: Loopback) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else headers and body wait out a 40 ms delayed ACK
    timeout = 5.0  # a client that never closes its keep-alive socket cannot hang close()

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: pytest output is for failures."""

    def do_POST(self) -> None:
        """Record the request, then answer with the next scripted reply."""
        owner = cast(_Server, self.server).owner
        data = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            request: Any = json.loads(data)
        except ValueError:
            request = data.decode("utf-8", "replace")
        path = urlsplit(self.path).path
        number = owner.record(Recorded("POST", self.path, headers, request))
        reply = owner.next_reply()
        if reply.delay and owner.stopping.wait(reply.delay):
            return  # the server is closing; nobody is waiting for this answer
        self._answer(path, headers, request, reply, number)

    def _answer(
        self, path: str, headers: Mapping[str, str], request: Any, reply: Reply, number: int
    ) -> None:
        protocol: Wire | None = None
        if path.endswith("/v1/chat/completions"):  # OpenAI itself 404s without /v1
            protocol = "openai"
        elif path.startswith("/openai/deployments/") and path.endswith("/chat/completions"):
            protocol = "openai"  # Azure OpenAI: the deployment is in the path
        elif path.endswith("/v1/messages"):
            protocol = "anthropic"
        if protocol is None:
            self._send(404, {"error": {"message": f"no route for {path}", "type": "not_found"}})
            return
        if reply.kind == "echo":
            reply = Reply(parts=(f"You asked: {_last_message(request)} (request {number})",))
        make_error = _openai_error if protocol == "openai" else _anthropic_error
        named = "x-request-id" if protocol == "openai" else "request-id"
        owner = cast(_Server, self.server).owner
        request_id = f"req_{secrets.token_hex(12)}" if owner.volatile else f"req_loopback{number}"
        sent = ((named, request_id), *reply.headers)
        complaint = _invalid(protocol, headers, request)
        if complaint is not None:
            self._send(400, make_error(400, complaint), sent)
        elif reply.kind == "raw":
            self._send_bytes(reply.status, reply.body, reply.content_type, sent)
        elif reply.kind == "error":
            key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix(
                "Bearer "
            )
            message = reply.parts[0].format(key=key) or f"loopback error {reply.status}"
            self._send(reply.status, make_error(reply.status, message), sent)
        else:
            make_body = _openai_body if protocol == "openai" else _anthropic_body
            body = make_body(reply, request, number)
            if owner.volatile:  # what a real API makes anew on every call
                body["id"] = body["id"].partition("loopback")[0] + secrets.token_hex(12)
                if protocol == "openai":
                    body["created"] = CREATED + secrets.randbelow(10**6)
                    body["system_fingerprint"] = f"fp_{secrets.token_hex(5)}"
            if request.get("stream") is True:
                make_events = _openai_events if protocol == "openai" else _anthropic_events
                self._stream(make_events(body, reply, request), sent, reply.cut_after)
            else:
                self._send(200, body, sent, reply.cut_after is not None)

    def _send(
        self,
        status: int,
        body: dict[str, Any],
        headers: tuple[tuple[str, str], ...] = (),
        cut: bool = False,
    ) -> None:
        self._send_bytes(status, json.dumps(body).encode(), "application/json", headers, cut)

    def _send_bytes(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: tuple[tuple[str, str], ...],
        cut: bool = False,
    ) -> None:
        if cast(_Server, self.server).owner.gzip and "gzip" in self.headers.get(
            "accept-encoding", ""
        ):
            body = gzip.compress(body, mtime=0)
            headers = (("content-encoding", "gzip"), *headers)
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body[: len(body) // 2] if cut else body)
            self.close_connection = self.close_connection or cut
        except OSError:
            pass  # the client gave up (a timeout test); there is no one to answer

    def _stream(
        self,
        events: list[bytes],
        headers: tuple[tuple[str, str], ...],
        cut_after: int | None = None,
    ) -> None:
        """Send ``events`` one HTTP chunk each, as the real APIs stream; ``cut_after``
        events, then drop the connection without the chunk that ends the body."""
        try:
            self.send_response(200)
            self.send_header("content-type", EVENT_STREAM)
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            sent = [*events, b""] if cut_after is None else events[:cut_after]
            for event in sent:  # the empty chunk ends the body
                self.wfile.write(b"%X\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.close_connection = self.close_connection or cut_after is not None
        except OSError:
            pass  # the client stopped reading mid-stream; there is no one to answer


class Loopback:
    """The server: started on construction, stopped by ``close()`` or leaving ``with``.

    ``replies`` are served in order, one per request; when they run out every
    request gets ``default``. ``script()`` adds more replies later. ``gzip``
    compresses every body but a stream's, for a client that accepts it. ``volatile``
    gives each answer a random id, ``created``, ``system_fingerprint`` and request id.
    """

    def __init__(
        self, *replies: Reply, default: Reply = Reply(), gzip: bool = False, volatile: bool = False
    ) -> None:
        self.gzip, self.volatile = gzip, volatile
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque(replies)
        self._requests: list[Recorded] = []
        self._default = default
        self.stopping = threading.Event()
        self._httpd = _Server(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the Anthropic base URL."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI-compatible base URL, which ends in ``/v1`` as real ones do."""
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[Recorded]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def script(self, *replies: Reply) -> None:
        """Queue more replies after those not yet served."""
        with self._lock:
            self._replies.extend(replies)

    def record(self, request: Recorded) -> int:
        """Store one request; returns its 1-based number (used in response ids)."""
        with self._lock:
            self._requests.append(request)
            return len(self._requests)

    def next_reply(self) -> Reply:
        """The next scripted reply, or the default once the script has run out."""
        with self._lock:
            return self._replies.popleft() if self._replies else self._default

    def close(self) -> None:
        """Stop serving, wake any slow reply, and wait for every handler thread."""
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> Loopback:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now (for a server a test starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
