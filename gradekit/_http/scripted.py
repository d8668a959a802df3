"""The HTTP side of ``FakeProvider``: scripted answers in the official SDKs' own protocols.

An agent built on ``openai`` or ``anthropic`` hands the SDK ``Traced(provider).http_client()``.
Given a ``FakeProvider``, that client's requests never leave the process: each is answered
here, in the shape its SDK expects, with the script's answer to the request's prompt (the
text of its last message). So an SDK agent is tested on scripted answers exactly like an
agent that calls ``complete()``.

It speaks what the lab's SDK agents send:

- ``POST .../chat/completions`` (OpenAI and every OpenAI-compatible server), whole or
  streamed (``"stream": true``: server-sent events ending in ``data: [DONE]``);
- ``POST .../messages`` (Anthropic), whole or streamed (``message_start`` ...
  ``message_stop``);
- ``POST .../responses`` (OpenAI's Responses API), whole.

Anything else, and a script that has no answer, is answered with a 400 in the protocol's
error shape, whose message says what to do: an SDK raises it as its ``BadRequestError``
and never retries it (a transport error would be retried, asking the script again).
Every response is a function of the request and the answer: no clock, no random id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from gradekit._exceptions import UsageError
from gradekit._http.cassette import HttpResponse, request_key
from gradekit._http.client import AsyncTransportBase, SyncTransportBase
from gradekit._http.transport import _answer, _library

__all__ = ["AsyncScriptedTransport", "ScriptedTransport", "speak"]

Answerer = Callable[[str, str], str]  # (prompt, request key) -> the answer
CREATED: Final = 1767225600  # 2026-01-01T00:00:00Z, as the local model's server says
_JSON = "application/json"
_EVENTS = "text/event-stream; charset=utf-8"
_SPOKEN = (
    "POST .../chat/completions (OpenAI, whole or streamed), POST .../messages "
    "(Anthropic, whole or streamed) and POST .../responses (OpenAI, not streamed)"
)


class _Refused(Exception):
    """A request the script cannot answer: a 400 whose message says why."""


def speak(method: str, url: str, body: bytes, answer: Answerer) -> HttpResponse:
    """The response to one request: the protocol its path names, the script's answer in it."""
    path = url.split("?", 1)[0].rstrip("/")
    anthropic = path.endswith("/messages")
    try:
        if method.upper() != "POST":
            raise _Refused(
                f"a FakeProvider answers {_SPOKEN}, not {method} {path}: script a "
                "Recorder or Replay for anything else"
            )
        data = _json(body)
        key = request_key(method, url, body)
        if path.endswith("/chat/completions"):
            return _chat(data, answer(_prompt(data.get("messages")), key), key)
        if anthropic:
            return _message(data, answer(_prompt(data.get("messages")), key), key)
        if path.endswith("/responses"):
            if data.get("stream"):
                raise _Refused(
                    "a FakeProvider answers the Responses API whole, not streamed: "
                    "test with stream=False, or use chat.completions"
                )
            return _response(data, answer(_prompt(data.get("input")), key), key)
        raise _Refused(f"a FakeProvider answers {_SPOKEN}, not {path}: call one of those")
    except (_Refused, UsageError) as exc:
        return _refusal(str(exc), anthropic=anthropic)


class ScriptedTransport(SyncTransportBase):
    """The transport of a ``FakeProvider``'s sync SDK clients (httpx or httpx2)."""

    def __init__(self, answer: Answerer) -> None:
        self._answer = answer

    def handle_request(self, request: Any) -> Any:
        spoken = speak(request.method, str(request.url), request.read(), self._answer)
        return _answer(_library(request), spoken, sync=True)

    def close(self) -> None:
        """Nothing to close: no connection is ever opened."""


class AsyncScriptedTransport(AsyncTransportBase):
    """``ScriptedTransport`` for async clients."""

    def __init__(self, answer: Answerer) -> None:
        self._answer = answer

    async def handle_async_request(self, request: Any) -> Any:
        spoken = speak(request.method, str(request.url), await request.aread(), self._answer)
        return _answer(_library(request), spoken, sync=False)

    async def aclose(self) -> None:
        """Nothing to close: no connection is ever opened."""


# ---- the request --------------------------------------------------------------------------


def _json(body: bytes) -> Mapping[str, Any]:
    try:
        data = json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Refused(
            f"the request's body is not JSON ({exc}): send the SDK's own request"
        ) from None
    if not isinstance(data, dict):
        raise _Refused("the request's body is not a JSON object: send the SDK's own request")
    return data


def _prompt(value: object) -> str:
    """The prompt of a request: its input when that is a string, else the text of its last
    message (a string, or the text parts of a list)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value or not isinstance(value[-1], Mapping):
        raise _Refused("the request has no messages: send at least one")
    content = value[-1].get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and "text" in part
        )
    raise _Refused("the last message has no text content: a FakeProvider answers text")


# ---- the answers --------------------------------------------------------------------------


def _usage(data: Mapping[str, Any], text: str) -> tuple[int, int]:
    """Token counts a test can read: words each way."""
    return len(json.dumps(data, sort_keys=True).split()), len(text.split())


def _id(prefix: str, key: str) -> str:
    return prefix + hashlib.sha256(key.encode()).hexdigest()[:24]


def _model(data: Mapping[str, Any]) -> str:
    return str(data.get("model", "fake"))


def _chat(data: Mapping[str, Any], text: str, key: str) -> HttpResponse:
    asked, said = _usage(data, text)
    head = {
        "id": _id("chatcmpl-", key),
        "created": CREATED,
        "model": _model(data),
        "system_fingerprint": "fake",
    }
    usage = {"prompt_tokens": asked, "completion_tokens": said, "total_tokens": asked + said}
    if not data.get("stream"):
        return _whole(
            {
                **head,
                "object": "chat.completion",
                "usage": usage,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
            }
        )

    def chunk(delta: Mapping[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    options = data.get("stream_options")
    last = (
        [{**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}]
        if isinstance(options, Mapping) and options.get("include_usage")
        else []
    )
    events = [
        chunk({"role": "assistant", "content": ""}, None),
        chunk({"content": text}, None),
        chunk({}, "stop"),
        *last,
    ]
    return _stream([f"data: {_dumps(event)}" for event in events] + ["data: [DONE]"])


def _message(data: Mapping[str, Any], text: str, key: str) -> HttpResponse:
    asked, said = _usage(data, text)
    message = {
        "id": _id("msg_", key),
        "type": "message",
        "role": "assistant",
        "model": _model(data),
        "stop_reason": "end_turn",
        "stop_sequence": None,
    }
    if not data.get("stream"):
        return _whole(
            {
                **message,
                "content": [{"type": "text", "text": text}],
                "usage": {"input_tokens": asked, "output_tokens": said},
            }
        )
    events: Iterator[tuple[str, Mapping[str, Any]]] = iter(
        [
            (
                "message_start",
                {
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": asked, "output_tokens": 0},
                    }
                },
            ),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"index": 0}),
            (
                "message_delta",
                {
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": said},
                },
            ),
            ("message_stop", {}),
        ]
    )
    return _stream(
        [f"event: {name}\ndata: {_dumps({'type': name, **fields})}" for name, fields in events]
    )


def _response(data: Mapping[str, Any], text: str, key: str) -> HttpResponse:
    asked, said = _usage(data, text)
    return _whole(
        {
            "id": _id("resp_", key),
            "object": "response",
            "created_at": CREATED,
            "status": "completed",
            "model": _model(data),
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "message",
                    "id": _id("msg_", key),
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "usage": {"input_tokens": asked, "output_tokens": said, "total_tokens": asked + said},
        }
    )


def _refusal(message: str, *, anthropic: bool) -> HttpResponse:
    error: dict[str, Any] = (
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        if anthropic
        else {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
    )
    return HttpResponse(400, {"content-type": _JSON}, "body", error)


def _whole(body: Mapping[str, Any]) -> HttpResponse:
    return HttpResponse(200, {"content-type": _JSON}, "body", dict(body))


def _stream(events: list[str]) -> HttpResponse:
    return HttpResponse(200, {"content-type": _EVENTS}, "events", events)


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
