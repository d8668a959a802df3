"""An OpenAI-compatible chat server for one local model, on the standard library alone.

``POST /v1/chat/completions`` (a JSON answer, or server-sent events ending in
``data: [DONE]`` when ``"stream": true``) and ``GET /v1/models``. One generation runs
at a time (a lock): a second request waits for the first. What the answer says is the
``Engine``'s; everything else in it is a function of the request and the engine, so the
same request gets the same bytes back: ``id`` is a digest of the request, ``created``
is fixed and ``system_fingerprint`` names the model file. Re-recording an unchanged
answer then changes nothing in a cassette.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Protocol, cast
from urllib.parse import urlsplit

__all__ = ["CREATED", "Answer", "BadRequest", "Engine", "ModelServer", "Sampling", "answer"]

CREATED: Final = 1767225600  # 2026-01-01T00:00:00Z: fixed, so a re-recorded answer is identical
MAX_STOPS: Final = 4  # what OpenAI accepts
EVENT_STREAM: Final = "text/event-stream; charset=utf-8"


class BadRequest(Exception):
    """A request the server answers with 400; the message says what to send instead."""


@dataclass(frozen=True)
class Sampling:
    """How to pick each token. ``temperature`` 0 is greedy: the same prompt, the same answer.

    The penalties are llama.cpp's, with the defaults llama-cpp-python's server uses, so
    the two engines answer alike: ``repeat_penalty`` divides a positive logit (multiplies
    a negative one) of each token among the last ``repeat_last_n`` generated.
    """

    temperature: float = 0.0
    top_p: float = 0.95
    top_k: int = 40
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int = 0


class Engine(Protocol):
    """A language model the server can drive (the numpy engine, or a test's script)."""

    @property
    def description(self) -> str:
        """What answers, for people: the model and the engine."""

    @property
    def fingerprint(self) -> str:
        """Names the model and the engine (``system_fingerprint``); stable across runs."""

    @property
    def context_length(self) -> int:
        """The most tokens a prompt and its answer may hold together."""

    def prompt(self, messages: Sequence[Mapping[str, str]]) -> Sequence[int]:
        """The chat messages (``role`` and ``content``) as the model's prompt tokens.

        Raises BadRequest when the model's chat template refuses them."""

    def generate(self, prompt: Sequence[int], sampling: Sampling) -> Generator[bytes, None, None]:
        """Each next token's bytes (UTF-8 may split across tokens), until the model ends
        its turn or the context is full. The caller stops reading at ``max_tokens``."""


@dataclass(frozen=True)
class Request:
    """A valid chat request, as the server uses it."""

    model: str
    messages: tuple[Mapping[str, str], ...]
    max_tokens: int | None
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    sampling: Sampling
    digest: str


@dataclass(frozen=True)
class Answer:
    """A finished generation: the text, why it ended, and the token counts."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


# ---- the request ------------------------------------------------------------------------


def parse_request(body: bytes) -> Request:
    """The request in ``body``, or BadRequest saying what is wrong and what to send."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise BadRequest(
            f"the request body is not valid JSON ({exc}): send a JSON object "
            'such as {"model": "smollm2", "messages": [{"role": "user", '
            '"content": "Hello"}]}'
        ) from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object with model and messages")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest('model: required, a string such as "smollm2"')
    stream_options = data.get("stream_options") or {}
    tools = data.get("tools")
    if isinstance(tools, list) and tools:  # the model cannot call them: say so, answer text
        names = ", ".join(
            str((t.get("function") or {}).get("name", "?")) if isinstance(t, dict) else "?"
            for t in tools
        )
        print(
            f"note: {model} cannot call tools; this request offered {len(tools)} ({names}) "
            "and gets a text answer: record with a model that calls tools to exercise "
            "them",
            file=sys.stderr,
            flush=True,
        )
    return Request(
        model=model,
        messages=_messages(data.get("messages")),
        max_tokens=_max_tokens(data),
        stop=_stops(data.get("stop")),
        stream=data.get("stream") is True,
        include_usage=isinstance(stream_options, dict)
        and stream_options.get("include_usage") is True,
        sampling=_sampling(data),
        digest=hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest(),
    )


def _messages(value: Any) -> tuple[Mapping[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise BadRequest(
            'messages: required, a non-empty list of {"role": ..., "content": ...} objects'
        )
    messages = []
    for number, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{number}]: an object with a string role is required")
        messages.append({"role": message["role"], "content": _content(message, number)})
    return tuple(messages)


def _content(message: Mapping[str, Any], number: int) -> str:
    """A message's text: a string, or the text parts of a list joined (images refused)."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        for part in content
    ):
        return "".join(part["text"] for part in content)
    raise BadRequest(
        f"messages[{number}].content: send a string or a list of "
        '{"type": "text", "text": ...} parts (this model reads text only)'
    )


def _max_tokens(data: Mapping[str, Any]) -> int | None:
    value = data.get("max_completion_tokens", data.get("max_tokens"))
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest("max_tokens: a whole number of at least 1, or leave it out")
    return value


def _stops(value: Any) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value if value is not None else []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise BadRequest("stop: a non-empty string or a list of them")
    if len(stops) > MAX_STOPS:
        raise BadRequest(f"stop: at most {MAX_STOPS} sequences")
    return tuple(stops)


def _number(data: Mapping[str, Any], key: str, default: float, low: float) -> float:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or value < low:
        raise BadRequest(f"{key}: a number of at least {low}")
    return float(value)


def _sampling(data: Mapping[str, Any]) -> Sampling:
    seed = data.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise BadRequest("seed: a whole number")
    top_k = data.get("top_k", Sampling.top_k)
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
        raise BadRequest("top_k: a whole number of at least 0 (0 keeps every token)")
    top_p = _number(data, "top_p", Sampling.top_p, 0.0)
    if top_p > 1:
        raise BadRequest("top_p: a number from 0 to 1")
    return Sampling(
        temperature=_number(data, "temperature", 0.0, 0.0),
        top_p=top_p,
        top_k=top_k,
        repeat_penalty=_number(data, "repeat_penalty", Sampling.repeat_penalty, 0.0),
        frequency_penalty=_number(data, "frequency_penalty", 0.0, -2.0),
        presence_penalty=_number(data, "presence_penalty", 0.0, -2.0),
        seed=seed if isinstance(seed, int) else 0,
    )


# ---- the answer --------------------------------------------------------------------------


def answer(engine: Engine, request: Request) -> Generator[str, None, Answer]:
    """Generate: yield each piece of text as it is final, return the Answer.

    Stop sequences end the answer before them; a piece that might begin one is held back
    until the next token shows it does not.
    """
    prompt = engine.prompt(request.messages)
    room = engine.context_length - len(prompt)
    if room < 1:
        raise BadRequest(
            f"the prompt is {len(prompt)} tokens and the context holds "
            f"{engine.context_length}: send shorter messages"
        )
    limit = min(request.max_tokens or room, room)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text, sent, count, finish = "", 0, 0, "length"
    tokens = engine.generate(prompt, request.sampling)
    for piece in tokens:
        count += 1
        text += decoder.decode(piece)
        cut = _first_stop(text, request.stop)
        if cut is not None:
            text, finish = text[:cut], "stop"
            break
        safe = len(text) - _held_back(text, request.stop)
        if safe > sent:
            yield text[sent:safe]
            sent = safe
        if count >= limit:
            break  # a character cut in half by the limit is left out
    else:
        text += decoder.decode(b"", final=True)
        finish = "stop"  # the model ended its turn (the limit never exceeds the context)
    tokens.close()
    if len(text) > sent:
        yield text[sent:]
    return Answer(text, finish, len(prompt), count)


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    found = [text.find(stop) for stop in stops if stop in text]
    return min(found) if found else None


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many characters at the end of ``text`` could be the start of a stop sequence."""
    return max(
        (
            size
            for stop in stops
            for size in range(len(stop) - 1, 0, -1)
            if text.endswith(stop[:size])
        ),
        default=0,
    )


def run(engine: Engine, request: Request) -> tuple[list[str], Answer]:
    """Every piece of the answer, and the Answer."""
    pieces: list[str] = []
    generation = answer(engine, request)
    while True:
        try:
            pieces.append(next(generation))
        except StopIteration as done:
            return pieces, cast(Answer, done.value)


def completion_id(engine: Engine, request: Request) -> str:
    """A digest of the request and the model: the same request, the same id."""
    return (
        "chatcmpl-"
        + hashlib.sha256(f"{engine.fingerprint}\n{request.digest}".encode()).hexdigest()[:29]
    )


def chat_completion(engine: Engine, request: Request, done: Answer) -> dict[str, Any]:
    """The non-streamed body, in OpenAI's shape."""
    return {
        "id": completion_id(engine, request),
        "object": "chat.completion",
        "created": CREATED,
        "model": request.model,
        "system_fingerprint": engine.fingerprint,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": done.text},
                "logprobs": None,
                "finish_reason": done.finish_reason,
            }
        ],
        "usage": _usage(done),
    }


def _usage(done: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": done.prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "total_tokens": done.prompt_tokens + done.completion_tokens,
    }


def chunks(
    engine: Engine,
    request: Request,
    done_with: Callable[[Answer], None] = lambda answer: None,
) -> Iterator[dict[str, Any]]:
    """The streamed answer: a role chunk, one chunk per piece, the finish, the usage;
    ``done_with`` is told the Answer once it is whole."""
    head = {
        "id": completion_id(engine, request),
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": request.model,
        "system_fingerprint": engine.fingerprint,
    }
    extra: dict[str, Any] = {"usage": None} if request.include_usage else {}

    def chunk(delta: Mapping[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }

    yield chunk({"role": "assistant", "content": ""}, None)
    generation = answer(engine, request)
    while True:
        try:
            yield chunk({"content": next(generation)}, None)
        except StopIteration as stopped:
            done = cast(Answer, stopped.value)
            break
    done_with(done)
    yield chunk({}, done.finish_reason)
    if request.include_usage:
        yield {**head, "choices": [], "usage": _usage(done)}


# ---- HTTP ---------------------------------------------------------------------------------


def _error(
    message: str, kind: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


HEAD = 48  # characters of the last message a request's line shows


def told(request: Request, done: Answer, started: float) -> None:
    """One line per answer on the server's terminal, as it is whole, so a student sees
    progress, not a hang: what was asked, how many tokens each way, how long it took."""
    last = " ".join(request.messages[-1].get("content", "").split()) if request.messages else ""
    head = last if len(last) <= HEAD else last[: HEAD - 1] + "\u2026"
    print(
        f"answered {head!r}: {done.prompt_tokens} prompt + {done.completion_tokens} answer "
        f"tokens in {time.monotonic() - started:.1f} s ({done.finish_reason})",
        flush=True,
    )


class ModelServer(ThreadingHTTPServer):
    """Serves ``engine`` as ``alias`` at ``http://host:port/v1``; one generation at a time."""

    daemon_threads = True  # Ctrl-C does not wait for a client that keeps its socket open

    def __init__(
        self, engine: Engine, *, alias: str, host: str = "127.0.0.1", port: int = 8080
    ) -> None:
        super().__init__((host, port), _Handler)
        self.engine, self.alias = engine, alias
        self.generating = threading.Lock()

    @property
    def url(self) -> str:
        """The base URL a client is given: ``http://host:port/v1``."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each streamed token waits out a delayed ACK
    timeout = 300.0

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows a line per answer (``_told``) and errors, not the
        standard library's access log."""

    @property
    def owner(self) -> ModelServer:
        return cast(ModelServer, self.server)

    def do_GET(self) -> None:
        """``/v1/models`` lists the one model; anything else is 404."""
        if urlsplit(self.path).path.rstrip("/") == "/v1/models":
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.owner.alias,
                            "object": "model",
                            "created": CREATED,
                            "owned_by": "gradekit",
                        }
                    ],
                },
            )
        else:
            self._not_found()

    def do_POST(self) -> None:
        """``/v1/chat/completions``: answer the chat, whole or streamed."""
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if urlsplit(self.path).path.rstrip("/") != "/v1/chat/completions":
            self._not_found()
            return
        try:
            request = parse_request(body)
            with self.owner.generating:
                started = time.monotonic()
                if request.stream:
                    self._stream(request, lambda done: told(request, done, started))
                else:
                    _, done = run(self.owner.engine, request)
                    told(request, done, started)
                    self._json(200, chat_completion(self.owner.engine, request, done))
        except BadRequest as exc:
            self._json(400, _error(str(exc)))
        except Exception as exc:  # the engine failed: say so, keep serving
            traceback.print_exc(file=sys.stderr)
            self._json(
                500,
                _error(
                    f"the local model failed: {exc!r}; its traceback is in the server's terminal",
                    "server_error",
                ),
            )

    def _stream(self, request: Request, done_with: Callable[[Answer], None]) -> None:
        events = chunks(self.owner.engine, request, done_with)
        first = next(events)  # a refused prompt raises BadRequest here, before any header
        self.send_response(200)
        self.send_header("content-type", EVENT_STREAM)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._chunk(first)
        for event in events:
            self._chunk(event)
        self._chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, event: Mapping[str, Any] | str) -> None:
        data = event if isinstance(event, str) else json.dumps(event)
        line = f"data: {data}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def _not_found(self) -> None:
        self._json(
            404,
            _error(
                f"no route for {self.command} {self.path}: this server answers "
                "POST /v1/chat/completions and GET /v1/models",
                "not_found_error",
            ),
        )

    def _json(self, status: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
