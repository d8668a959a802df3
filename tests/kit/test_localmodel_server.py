"""The keyless model's HTTP server, driven by the official ``openai`` SDK over loopback.

The engine is a script (the server is what is under test): it turns the last message
into tokens and answers with ``PIECES``, one token at a time. The real engine is tested
in test_localmodel_engine.py and, with the real model, in tests/e2e/test_localmodel.py.

It tests ``gradekit._localmodel``'s server and its threads setting on purpose.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager

import httpx
import openai
import pytest

from gradekit._localmodel._server import CREATED, ModelServer, Sampling

PIECES = (b"Hello", b" there", b",", b" student", b".", b" Bye", b" now")
EURO = "\u20ac".encode()  # three bytes, sent split across two tokens below


class ScriptedEngine:
    """Answers every prompt with ``pieces``; records what it was asked."""

    description = "a scripted engine"
    fingerprint = "fp_scripted"
    context_length = 64

    def __init__(self, pieces: Sequence[bytes] = PIECES, delay: float = 0.0) -> None:
        self.pieces, self.delay = pieces, delay
        self.prompts: list[list[int]] = []
        self.samplings: list[Sampling] = []
        self.running = 0
        self.most_at_once = 0

    def prompt(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        return [len(word) for message in messages for word in message["content"].split()]

    def generate(self, prompt: Sequence[int], sampling: Sampling) -> Generator[bytes, None, None]:
        self.prompts.append(list(prompt))
        self.samplings.append(sampling)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            for piece in self.pieces:
                time.sleep(self.delay)
                yield piece
        finally:
            self.running -= 1


@contextmanager
def serving(engine: ScriptedEngine) -> Iterator[ModelServer]:
    server = ModelServer(engine, alias="smollm2", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def client(server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)


def ask(server: ModelServer, text: str = "Say hello", **options: object) -> object:
    return client(server).chat.completions.create(  # type: ignore[call-overload]
        model="smollm2", messages=[{"role": "user", "content": text}], **options
    )


def test_a_chat_completion_through_the_openai_sdk() -> None:
    engine = ScriptedEngine()
    with serving(engine) as server:
        reply = client(server).chat.completions.create(
            model="smollm2",
            temperature=0,
            seed=7,
            max_tokens=100,
            messages=[
                {"role": "system", "content": "Be brief"},
                {"role": "user", "content": "Say hello"},
            ],
        )
    assert reply.choices[0].message.content == "Hello there, student. Bye now"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "smollm2" and reply.created == CREATED
    assert reply.system_fingerprint == "fp_scripted"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, len(PIECES))
    assert engine.prompts == [[2, 5, 3, 5]]  # both messages reached the engine
    assert engine.samplings == [Sampling(temperature=0.0, seed=7)]


def test_a_streamed_completion_arrives_token_by_token_and_ends() -> None:
    with serving(ScriptedEngine()) as server:
        stream = client(server).chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "Say hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices]
    assert deltas[0] == "" and chunks[0].choices[0].delta.role == "assistant"
    assert deltas[1:-1] == [piece.decode() for piece in PIECES]
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(PIECES)
    assert len({c.id for c in chunks}) == 1


def test_the_raw_stream_is_server_sent_events_ending_in_done() -> None:
    with serving(ScriptedEngine()) as server:
        response = httpx.post(
            f"{server.url}/chat/completions",
            json={
                "model": "smollm2",
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line for line in response.text.split("\n\n") if line]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[-2].removeprefix("data: "))["choices"][0]["finish_reason"] == "stop"


def test_max_tokens_cuts_the_answer_with_finish_reason_length() -> None:
    with serving(ScriptedEngine()) as server:
        reply = ask(server, max_tokens=2)
        streamed = list(
            client(server).chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": "hi"}],
                max_tokens=3,
                stream=True,
            )
        )
    assert reply.choices[0].message.content == "Hello there"  # type: ignore[attr-defined]
    assert reply.choices[0].finish_reason == "length"  # type: ignore[attr-defined]
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == "Hello there,"
    assert streamed[-1].choices[0].finish_reason == "length"


def test_a_stop_sequence_ends_the_answer_before_it_even_across_tokens() -> None:
    with serving(ScriptedEngine()) as server:
        reply = ask(server, stop=["ent."])
        streamed = list(
            client(server).chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": "hi"}],
                stop="ere, st",
                stream=True,
            )
        )
    assert reply.choices[0].message.content == "Hello there, stud"  # type: ignore[attr-defined]
    assert reply.choices[0].finish_reason == "stop"  # type: ignore[attr-defined]
    text = [c.choices[0].delta.content for c in streamed if c.choices[0].delta.content]
    assert "".join(text) == "Hello th"  # " there" was held back, then cut
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_a_character_split_across_tokens_is_sent_whole() -> None:
    engine = ScriptedEngine((b"cost: 5", EURO[:1], EURO[1:], b"!"))
    with serving(engine) as server:
        reply = ask(server)
        streamed = list(
            client(server).chat.completions.create(
                model="smollm2", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
    assert reply.choices[0].message.content == "cost: 5\u20ac!"  # type: ignore[attr-defined]
    pieces = [c.choices[0].delta.content for c in streamed if c.choices[0].delta.content]
    assert pieces == ["cost: 5", "\u20ac", "!"]


def test_the_same_request_gets_the_same_bytes_and_another_request_another_id() -> None:
    with serving(ScriptedEngine()) as server:
        body = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}]}
        first = httpx.post(f"{server.url}/chat/completions", json=body)
        again = httpx.post(f"{server.url}/chat/completions", json=body)
        other = httpx.post(f"{server.url}/chat/completions", json={**body, "seed": 1})
        streams = [
            httpx.post(f"{server.url}/chat/completions", json={**body, "stream": True}).content
            for _ in range(2)
        ]
    assert first.content == again.content
    assert first.json()["id"].startswith("chatcmpl-")
    assert first.json()["id"] != other.json()["id"]
    assert streams[0] == streams[1]
    assert "x-request-id" not in first.headers


def test_models_lists_the_alias() -> None:
    with serving(ScriptedEngine()) as server:
        models = client(server).models.list()
        missing = httpx.get(f"{server.url}/embeddings")
    assert [model.id for model in models] == ["smollm2"]
    assert missing.status_code == 404
    assert "POST /v1/chat/completions" in missing.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"model": "smollm2"}', "messages: required"),
        (b'{"model": "smollm2", "messages": [{"content": "hi"}]}', "string role"),
        (
            b'{"model": "smollm2", "messages": [{"role": "user", "content": "x"}], '
            b'"max_tokens": 0}',
            "max_tokens",
        ),
        (
            b'{"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "stop": [1]}',
            "stop",
        ),
        (
            b'{"model": "smollm2", "messages": [{"role": "user", "content": "x"}],'
            b' "temperature": -1}',
            "temperature",
        ),
    ],
)
def test_a_bad_request_is_a_400_that_says_what_to_send(body: bytes, said: str) -> None:
    engine = ScriptedEngine()
    with serving(engine) as server:
        response = httpx.post(
            f"{server.url}/chat/completions",
            content=body,
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400
    assert said in response.json()["error"]["message"]
    assert engine.prompts == []


def test_a_bad_request_raises_the_sdks_bad_request_error() -> None:
    with (
        serving(ScriptedEngine()) as server,
        pytest.raises(openai.BadRequestError, match="at least 1"),
    ):
        ask(server, max_tokens=0)


def test_a_prompt_longer_than_the_context_is_refused() -> None:
    with (
        serving(ScriptedEngine()) as server,
        pytest.raises(openai.BadRequestError, match="send shorter messages"),
    ):
        ask(server, text="word " * 80)


def test_two_concurrent_requests_are_both_answered_one_at_a_time() -> None:
    engine = ScriptedEngine(delay=0.02)
    answers: list[str] = []
    with serving(engine) as server:

        def one(text: str) -> None:
            reply = ask(server, text=text)
            answers.append(reply.choices[0].message.content)  # type: ignore[attr-defined]

        threads = [threading.Thread(target=one, args=(t,)) for t in ("first", "second one")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert answers == ["Hello there, student. Bye now"] * 2
    assert sorted(engine.prompts) == [[5], [6, 3]]
    assert engine.most_at_once == 1  # the lock: never two generations at once


def test_each_answer_prints_one_line_with_its_head_tokens_and_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A student recording on a slow machine sees each answer land, whole or streamed: the
    asked message's head, the tokens each way and why it ended."""
    with serving(ScriptedEngine()) as server:
        ask(
            server,
            "Summarise the incident in two sentences, then say what to check first "
            "tomorrow morning",
        )
        list(
            client(server).chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": "Say\n  hello"}],
                stream=True,
                max_tokens=2,
            )
        )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    assert re.fullmatch(
        r"answered 'Summarise the incident in two sentences, then s\u2026': "
        rf"\d+ prompt \+ {len(PIECES)} answer tokens in \d+\.\d s \(stop\)",
        lines[0],
    ), lines[0]
    assert re.fullmatch(
        r"answered 'Say hello': \d+ prompt \+ 2 answer tokens in \d+\.\d s "
        r"\(length\)",
        lines[1],
    ), lines[1]


_THREADS_OF_NUMPY = """
import os, sys
from gradekit._localmodel.__main__ import blas_threads
if sys.argv[1] == "ours":
    os.environ.update(blas_threads(None, os.environ))
import numpy
numpy.ones((64, 64)) @ numpy.ones((64, 64))
print(len(os.listdir("/proc/self/task")))
"""


def test_the_keyless_model_runs_its_blas_on_one_thread_unless_told_otherwise() -> None:
    """OpenBLAS starts a thread a CPU when numpy loads; the server sets one first, which is
    faster for a 135M model on a quiet machine and many times faster on a busy one. A count
    the user gave (``--threads``, or one of the variables) stands."""
    import subprocess
    import sys

    pytest.importorskip("numpy", reason="numpy is missing: `make test` installs the dev extra")
    from gradekit._localmodel.__main__ import BLAS_THREADS, blas_threads

    assert blas_threads(None, {}) == dict.fromkeys(BLAS_THREADS, "1")
    assert blas_threads(None, {"OMP_NUM_THREADS": "4"}) == {}  # the user's word
    assert blas_threads(None, {"OMP_NUM_THREADS": ""}) == dict.fromkeys(BLAS_THREADS, "1")
    assert blas_threads(3, {"OMP_NUM_THREADS": "4"}) == dict.fromkeys(BLAS_THREADS, "3")

    env = {key: value for key, value in os.environ.items() if key not in BLAS_THREADS}
    counts = {
        way: int(
            subprocess.run(
                [sys.executable, "-c", _THREADS_OF_NUMPY, way],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for way in ("ours", "numpy's")
    }
    assert counts["ours"] == 1, counts
    if (os.cpu_count() or 1) > 1:  # where numpy's own default shares, ours is what stops it
        assert counts["numpy's"] > 1, counts
