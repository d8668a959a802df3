"""The official openai and anthropic SDKs, recorded and replayed by gradekit's cassette transport.

Each test drives an SDK exactly as a student would, against the real loopback
server (tests/loopback.py): record with ``mode="once"``, stop the server, replay
with ``mode="none"``, and the SDK must hand back byte-identical objects. Each
runs sync and async on each HTTP library it takes: openai an ``httpx`` client (and,
since 3.x, an ``httpx2`` one), anthropic only an ``httpx2`` one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import threading
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import anthropic
import httpx
import httpx2
import openai
import pytest
from anthropic.types import MessageParam, ToolParam
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from gradekit import (
    AsyncCassetteTransport,
    CassetteMiss,
    CassetteTransport,
    SecretLeak,
    request_key,
)
from tests.loopback import Loopback, Reply, answer, cut, echo, error, raw, slow, tool_call

Sdk = Literal["openai", "anthropic"]
Stack = Literal["openai+httpx", "openai+httpx2", "anthropic+httpx2"]
Scenario = Literal["chat", "tool", "stream", "stream-tool"]
SDKS: list[Sdk] = ["openai", "anthropic"]
STACKS: list[Stack] = ["openai+httpx", "openai+httpx2", "anthropic+httpx2"]
SCENARIOS: list[Scenario] = ["chat", "tool", "stream", "stream-tool"]
VENDOR_KEY = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
MODEL = "loopback-model"
QUESTION = "What is the refund policy?"
OTHER_QUESTION = "What is the shipping policy?"
ANSWER = ("Refunds are issued ", "within 30 days.")
LOOKUP = {"query": "refund policy", "limit": 3}
PREAMBLE = "Let me check."
OPENAI_TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Search the policy documents.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            },
        },
    }
]
ANTHROPIC_TOOLS: list[ToolParam] = [
    {
        "name": "lookup",
        "description": "Search the policy documents.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        },
    }
]

SyncClient = openai.OpenAI | anthropic.Anthropic
AsyncClient = openai.AsyncOpenAI | anthropic.AsyncAnthropic


@dataclass(frozen=True)
class Result:
    """What a student's code sees of one call: the text, the tool calls, every object's JSON."""

    text: str
    calls: tuple[tuple[str, str], ...]
    dump: str


@pytest.fixture
def key() -> str:
    """A key distinctive enough that finding it in a file can only mean a leak."""
    return f"sk-test-{uuid.uuid4()}"


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    return tmp_path / "cassettes" / "sdk.http.json"


# ---- what the server says and what the student reads ---------------------------------


def reply(scenario: Scenario) -> Reply:
    if "tool" in scenario:
        return tool_call("lookup", LOOKUP, text=PREAMBLE)
    return answer(*ANSWER)


def expected(scenario: Scenario) -> tuple[str, tuple[tuple[str, str], ...]]:
    if "tool" in scenario:
        return PREAMBLE, (("lookup", json.dumps(LOOKUP, sort_keys=True)),)
    return "".join(ANSWER), ()


def _arguments(text: str) -> str:
    return json.dumps(json.loads(text), sort_keys=True)


def final(dump: str, *dumps: str) -> Result:
    """Read a ChatCompletion's or a Message's JSON (``dump``); ``dumps`` are what came before."""
    data = json.loads(dump)
    joined = "\n".join([*dumps, dump])
    if data.get("object") == "chat.completion":
        message = data["choices"][0]["message"]
        calls = tuple(
            (call["function"]["name"], _arguments(call["function"]["arguments"]))
            for call in message.get("tool_calls") or []
        )
        return Result(message["content"] or "", calls, joined)
    text = "".join(block["text"] for block in data["content"] if block["type"] == "text")
    calls = tuple(
        (block["name"], json.dumps(block["input"], sort_keys=True))
        for block in data["content"]
        if block["type"] == "tool_use"
    )
    return Result(text, calls, joined)


def openai_messages(question: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "user", "content": question}]


def anthropic_messages(question: str) -> list[MessageParam]:
    return [{"role": "user", "content": question}]


# ---- sync calls -----------------------------------------------------------------------


def openai_call(client: openai.OpenAI, scenario: Scenario, question: str) -> Result:
    messages = openai_messages(question)
    if scenario == "chat":
        done = client.chat.completions.create(model=MODEL, messages=messages, temperature=0.2)
        return final(done.model_dump_json())
    if scenario == "tool":
        done = client.chat.completions.create(model=MODEL, messages=messages, tools=OPENAI_TOOLS)
        return final(done.model_dump_json())
    if scenario == "stream":
        chunks = list(
            client.chat.completions.create(
                model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        return Result(text, (), "\n".join(chunk.model_dump_json() for chunk in chunks))
    with client.chat.completions.stream(
        model=MODEL, messages=messages, tools=OPENAI_TOOLS
    ) as stream:
        events = [event.model_dump_json() for event in stream]
        return final(stream.get_final_completion().model_dump_json(), *events)


def anthropic_call(client: anthropic.Anthropic, scenario: Scenario, question: str) -> Result:
    messages = anthropic_messages(question)
    tools = ANTHROPIC_TOOLS if "tool" in scenario else anthropic.omit
    if scenario in ("chat", "tool"):
        done = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=tools)
        return final(done.model_dump_json())
    with client.messages.stream(
        model=MODEL, max_tokens=64, messages=messages, tools=tools
    ) as stream:
        if scenario == "stream":
            seen = list(stream.text_stream)
        else:
            seen = [event.model_dump_json() for event in stream]
        return final(stream.get_final_message().model_dump_json(), *seen)


def sdk_of(stack: Stack) -> Sdk:
    return "openai" if stack.startswith("openai") else "anthropic"


def legacy(client: httpx.Client) -> httpx2.Client:
    """openai 3.x declares ``httpx2.Client`` but still takes an ``httpx`` one, as students pass."""
    return cast(httpx2.Client, client)


def alegacy(client: httpx.AsyncClient) -> httpx2.AsyncClient:
    """``legacy`` for the async client."""
    return cast(httpx2.AsyncClient, client)


def sync_client(
    stack: Stack,
    url: str,
    transport: httpx.BaseTransport | httpx2.BaseTransport,
    key: str,
    retries: int = 0,
) -> SyncClient:
    """The SDK as a student builds it, its HTTP client carrying ``transport``."""
    if stack == "openai+httpx":
        assert isinstance(transport, httpx.BaseTransport | CassetteTransport)
        return openai.OpenAI(
            api_key=key,
            base_url=f"{url}/v1",
            max_retries=retries,
            http_client=legacy(httpx.Client(transport=transport)),
        )
    assert isinstance(transport, httpx2.BaseTransport | CassetteTransport)
    if stack == "openai+httpx2":
        return openai.OpenAI(
            api_key=key,
            base_url=f"{url}/v1",
            max_retries=retries,
            http_client=httpx2.Client(transport=transport),
        )
    return anthropic.Anthropic(
        api_key=key,
        base_url=url,
        max_retries=retries,
        http_client=httpx2.Client(transport=transport),
    )


def sync_call(client: SyncClient, scenario: Scenario, question: str = QUESTION) -> Result:
    if isinstance(client, openai.OpenAI):
        return openai_call(client, scenario, question)
    return anthropic_call(client, scenario, question)


def sync_run(
    stack: Stack, url: str, transport: CassetteTransport, key: str, scenario: Scenario
) -> Result:
    """One call; leaving the client closes the transport, which folds the journal."""
    with transport, sync_client(stack, url, transport, key) as client:
        return sync_call(client, scenario)


# ---- async calls ----------------------------------------------------------------------


async def openai_acall(client: openai.AsyncOpenAI, scenario: Scenario, question: str) -> Result:
    messages = openai_messages(question)
    if scenario == "chat":
        done = await client.chat.completions.create(model=MODEL, messages=messages, temperature=0.2)
        return final(done.model_dump_json())
    if scenario == "tool":
        done = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=OPENAI_TOOLS
        )
        return final(done.model_dump_json())
    if scenario == "stream":
        stream = await client.chat.completions.create(
            model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        return Result(text, (), "\n".join(chunk.model_dump_json() for chunk in chunks))
    async with client.chat.completions.stream(
        model=MODEL, messages=messages, tools=OPENAI_TOOLS
    ) as events:
        seen = [event.model_dump_json() async for event in events]
        return final((await events.get_final_completion()).model_dump_json(), *seen)


async def anthropic_acall(
    client: anthropic.AsyncAnthropic, scenario: Scenario, question: str
) -> Result:
    messages = anthropic_messages(question)
    tools = ANTHROPIC_TOOLS if "tool" in scenario else anthropic.omit
    if scenario in ("chat", "tool"):
        done = await client.messages.create(
            model=MODEL, max_tokens=64, messages=messages, tools=tools
        )
        return final(done.model_dump_json())
    async with client.messages.stream(
        model=MODEL, max_tokens=64, messages=messages, tools=tools
    ) as stream:
        if scenario == "stream":
            seen = [text async for text in stream.text_stream]
        else:
            seen = [event.model_dump_json() async for event in stream]
        return final((await stream.get_final_message()).model_dump_json(), *seen)


def async_client(
    stack: Stack,
    url: str,
    transport: httpx.AsyncBaseTransport | httpx2.AsyncBaseTransport,
    key: str,
    retries: int = 0,
) -> AsyncClient:
    if stack == "openai+httpx":
        assert isinstance(transport, httpx.AsyncBaseTransport | AsyncCassetteTransport)
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=f"{url}/v1",
            max_retries=retries,
            http_client=alegacy(httpx.AsyncClient(transport=transport)),
        )
    assert isinstance(transport, httpx2.AsyncBaseTransport | AsyncCassetteTransport)
    if stack == "openai+httpx2":
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=f"{url}/v1",
            max_retries=retries,
            http_client=httpx2.AsyncClient(transport=transport),
        )
    return anthropic.AsyncAnthropic(
        api_key=key,
        base_url=url,
        max_retries=retries,
        http_client=httpx2.AsyncClient(transport=transport),
    )


async def async_call(client: AsyncClient, scenario: Scenario, question: str = QUESTION) -> Result:
    if isinstance(client, openai.AsyncOpenAI):
        return await openai_acall(client, scenario, question)
    return await anthropic_acall(client, scenario, question)


def async_run(
    stack: Stack, url: str, transport: AsyncCassetteTransport, key: str, scenario: Scenario
) -> Result:
    async def run() -> Result:
        async with transport, async_client(stack, url, transport, key) as client:
            return await async_call(client, scenario)

    return asyncio.run(run())


# ---- what was written -------------------------------------------------------------------


def written(root: Path) -> Iterator[Path]:
    return (path for path in sorted(root.rglob("*")) if path.is_file())


def assert_key_nowhere(root: Path, key: str, *, expect_files: bool = True) -> None:
    """Neither ``key`` nor its uuid is in any byte of any file under ``root``."""
    files = list(written(root))
    assert files or not expect_files, "nothing was written, so nothing was checked"
    needles = [key.encode(), key[-36:].encode()]
    leaks = [str(path) for path in files for needle in needles if needle in path.read_bytes()]
    assert leaks == []


def interactions(cassette: Path) -> list[dict[str, Any]]:
    document = json.loads(cassette.read_text())
    assert document["format"] == "gradekit.http-cassette/1"
    return [one for recorded in document["interactions"].values() for one in recorded]


def assert_sent_key(server: Loopback, key: str) -> None:
    """The key really went over the wire, so not finding it in a file means something."""
    for request in server.requests:
        sent = request.headers.get("x-api-key") or request.headers["authorization"]
        assert sent.removeprefix("Bearer ") == key


def chain(error: BaseException) -> list[BaseException]:
    """``error`` and what it was raised from or while handling, as a traceback shows them."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        shown = current.__cause__ is not None or not current.__suppress_context__
        current = current.__cause__ or (current.__context__ if shown else None)
    return found


# ---- record, stop the server, replay: byte-identical ------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("stack", STACKS)
def test_sync_replay_is_byte_identical(
    stack: Stack, scenario: Scenario, cassette: Path, tmp_path: Path, key: str
) -> None:
    env = {VENDOR_KEY[sdk_of(stack)]: key}
    with Loopback(reply(scenario)) as server:
        recorded = sync_run(
            stack, server.url, CassetteTransport(cassette, mode="once", env=env), key, scenario
        )
    assert len(server.requests) == 1
    assert_sent_key(server, key)
    assert (recorded.text, recorded.calls) == expected(scenario)

    replayed = sync_run(
        stack, server.url, CassetteTransport(cassette, mode="none", env=env), key, scenario
    )
    assert replayed == recorded
    assert len(server.requests) == 1
    [stored] = interactions(cassette)
    assert ("events" in stored["response"]) == scenario.startswith("stream")
    assert_key_nowhere(tmp_path, key)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("stack", STACKS)
def test_async_replay_is_byte_identical(
    stack: Stack, scenario: Scenario, cassette: Path, tmp_path: Path, key: str
) -> None:
    env = {VENDOR_KEY[sdk_of(stack)]: key}
    with Loopback(reply(scenario)) as server:
        recording = AsyncCassetteTransport(cassette, mode="once", env=env)
        recorded = async_run(stack, server.url, recording, key, scenario)
    assert len(server.requests) == 1
    assert_sent_key(server, key)
    assert (recorded.text, recorded.calls) == expected(scenario)

    replaying = AsyncCassetteTransport(cassette, mode="none", env=env)
    assert async_run(stack, server.url, replaying, key, scenario) == recorded
    assert len(server.requests) == 1
    assert_key_nowhere(tmp_path, key)


@pytest.mark.parametrize("stack", STACKS)
def test_sync_recording_replays_async_and_back(stack: Stack, cassette: Path, key: str) -> None:
    # One cassette format: what the sync transport wrote, the async one serves.
    with Loopback(reply("stream")) as server:
        recorded = sync_run(
            stack, server.url, CassetteTransport(cassette, mode="once"), key, "stream"
        )
    replayed = async_run(stack, server.url, AsyncCassetteTransport(cassette), key, "stream")
    assert replayed == recorded


def chat_object(client: SyncClient) -> tuple[str | None, str]:
    """One chat's ``_request_id`` (read from a response header) and its JSON."""
    if isinstance(client, openai.OpenAI):
        done = client.chat.completions.create(model=MODEL, messages=openai_messages(QUESTION))
        return done._request_id, done.model_dump_json()
    message = client.messages.create(
        model=MODEL, max_tokens=64, messages=anthropic_messages(QUESTION)
    )
    return message._request_id, message.model_dump_json()


@pytest.mark.parametrize("stack", STACKS)
def test_request_ids_replay_from_the_protocols_header(
    stack: Stack, cassette: Path, key: str
) -> None:
    with (
        Loopback(reply("chat")) as server,
        CassetteTransport(cassette, mode="once") as transport,
        sync_client(stack, server.url, transport, key) as client,
    ):
        recorded = chat_object(client)
    with (
        CassetteTransport(cassette) as transport,
        sync_client(stack, server.url, transport, key) as client,
    ):
        assert chat_object(client) == recorded
    assert recorded[0] == "req_loopback1"  # an SDK user quotes it in a bug report


@pytest.mark.parametrize("scenario", ["chat", "tool"])
@pytest.mark.parametrize("stack", STACKS)
def test_gzipped_answers_replay(stack: Stack, scenario: Scenario, cassette: Path, key: str) -> None:
    with Loopback(reply(scenario), gzip=True) as server:
        recorded = sync_run(
            stack, server.url, CassetteTransport(cassette, mode="once"), key, scenario
        )
    assert "gzip" in server.requests[0].headers["accept-encoding"]  # so it was compressed
    assert (recorded.text, recorded.calls) == expected(scenario)
    [stored] = interactions(cassette)
    assert stored["response"]["body"]["model"] == MODEL  # kept as JSON, not as gzip bytes
    assert sync_run(stack, server.url, CassetteTransport(cassette), key, scenario) == recorded


def read_first_piece(client: SyncClient) -> str:
    """Stop reading a stream after its first piece of text, as a student's loop may."""
    if isinstance(client, openai.OpenAI):
        with client.chat.completions.create(
            model=MODEL,
            messages=openai_messages(QUESTION),
            stream=True,
            stream_options={"include_usage": True},
        ) as chunks:
            for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    return chunk.choices[0].delta.content
    else:
        with client.messages.stream(
            model=MODEL, max_tokens=64, messages=anthropic_messages(QUESTION)
        ) as stream:
            for text in stream.text_stream:
                return text
    raise AssertionError("the stream had no text")


@pytest.mark.parametrize("stack", STACKS)
def test_a_stream_left_early_is_recorded_whole(stack: Stack, cassette: Path, key: str) -> None:
    with (
        Loopback(reply("stream")) as server,
        CassetteTransport(cassette, mode="once") as transport,
        sync_client(stack, server.url, transport, key) as client,
    ):
        first = read_first_piece(client)
    assert "".join(ANSWER).startswith(first) and first
    with (
        CassetteTransport(cassette) as transport,
        sync_client(stack, server.url, transport, key) as client,
    ):
        assert read_first_piece(client) == first
    replayed = sync_run(stack, server.url, CassetteTransport(cassette), key, "stream")
    assert replayed.text == "".join(ANSWER)  # the rest was recorded though nobody read it


async def aread_first_piece(client: AsyncClient) -> str:
    """``read_first_piece`` for the async clients."""
    if isinstance(client, openai.AsyncOpenAI):
        chunks = await client.chat.completions.create(
            model=MODEL,
            messages=openai_messages(QUESTION),
            stream=True,
            stream_options={"include_usage": True},
        )
        async with chunks:
            async for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    return chunk.choices[0].delta.content
    else:
        async with client.messages.stream(
            model=MODEL, max_tokens=64, messages=anthropic_messages(QUESTION)
        ) as stream:
            async for text in stream.text_stream:
                return text
    raise AssertionError("the stream had no text")


@pytest.mark.parametrize("stack", STACKS)
def test_an_async_stream_left_early_is_recorded_whole(
    stack: Stack, cassette: Path, key: str
) -> None:
    async def first_piece(transport: AsyncCassetteTransport, url: str) -> str:
        async with transport, async_client(stack, url, transport, key) as client:
            return await aread_first_piece(client)

    with Loopback(reply("stream")) as server:
        first = asyncio.run(first_piece(AsyncCassetteTransport(cassette, mode="once"), server.url))
    assert first and "".join(ANSWER).startswith(first)
    assert asyncio.run(first_piece(AsyncCassetteTransport(cassette), server.url)) == first
    replayed = async_run(stack, server.url, AsyncCassetteTransport(cassette), key, "stream")
    assert replayed.text == "".join(ANSWER)


@pytest.mark.parametrize("stack", STACKS)
def test_a_timed_out_attempt_is_not_recorded_and_its_retry_is(
    stack: Stack, cassette: Path, key: str
) -> None:
    with Loopback(slow(5, *ANSWER), reply("chat")) as server:
        transport = CassetteTransport(cassette, mode="once")
        client = sync_client(stack, server.url, transport, key, retries=1)
        with transport, client.with_options(timeout=0.5) as impatient:
            recorded = sync_call(impatient, "chat")
    assert len(server.requests) == 2 and recorded.text == "".join(ANSWER)
    assert len(interactions(cassette)) == 1
    assert sync_run(stack, server.url, CassetteTransport(cassette), key, "chat") == recorded


def test_a_cassette_recorded_through_httpx_replays_through_httpx2(cassette: Path, key: str) -> None:
    # openai 3.x moved from httpx to httpx2: a course's cassettes must survive the upgrade.
    with Loopback(reply("tool")) as server:
        recorded = sync_run(
            "openai+httpx", server.url, CassetteTransport(cassette, mode="once"), key, "tool"
        )
    for stack in STACKS[:2]:
        assert sync_run(stack, server.url, CassetteTransport(cassette), key, "tool") == recorded


@pytest.mark.parametrize("stack", STACKS)
def test_a_retried_rate_limit_replays_the_same_answer(
    stack: Stack, cassette: Path, key: str
) -> None:
    with (
        Loopback(error(429, "slow down", retry_after="0"), reply("chat")) as server,
        CassetteTransport(cassette, mode="once") as transport,
        sync_client(stack, server.url, transport, key, retries=1) as client,
    ):
        recorded = sync_call(client, "chat")
    assert len(server.requests) == 2 and recorded.text == "".join(ANSWER)
    with (
        CassetteTransport(cassette) as transport,
        sync_client(stack, server.url, transport, key, retries=1) as client,
    ):
        assert sync_call(client, "chat") == recorded


@pytest.mark.parametrize("stack", STACKS)
def test_replay_needs_no_real_key(stack: Stack, cassette: Path, key: str) -> None:
    # Headers are not in the request key: a grader replays with no credential at all.
    with Loopback(reply("tool")) as server:
        recorded = sync_run(
            stack, server.url, CassetteTransport(cassette, mode="once"), key, "tool"
        )
    replayed = sync_run(stack, server.url, CassetteTransport(cassette), "not-a-key", "tool")
    assert replayed == recorded


@pytest.mark.parametrize("stack", STACKS)
def test_rerecord_asks_again_and_keeps_the_previous(stack: Stack, cassette: Path, key: str) -> None:
    with Loopback(answer("old answer"), answer("new answer")) as server:
        sync_run(stack, server.url, CassetteTransport(cassette, mode="once"), key, "chat")
        again = sync_run(
            stack, server.url, CassetteTransport(cassette, mode="rerecord"), key, "chat"
        )
    assert again.text == "new answer"
    assert sync_run(stack, server.url, CassetteTransport(cassette), key, "chat") == again
    previous = cassette.with_name("sdk.http.previous.json")
    assert "old answer" in previous.read_text() and "old answer" not in cassette.read_text()


def failure(call: Callable[[], object]) -> BaseException:
    """What ``call`` raised; a call that returns fails the test."""
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError(f"{call} was expected to fail")


# What a student's call raises when the connection drops mid-answer, by SDK and library.
CUT_OFF = (openai.APIError, anthropic.APIError, httpx.TransportError, httpx2.TransportError)
CUTS = [
    pytest.param("stream", cut(3, *ANSWER), id="stream"),
    pytest.param("chat", cut(0, *ANSWER), id="chat"),
]


def assert_cut_not_recorded(
    stack: Stack, scenario: Scenario, cassette: Path, key: str, retried: Result
) -> None:
    assert retried.text == "".join(ANSWER)
    stored = interactions(cassette)
    assert len(stored) == 1, "the answer cut off was recorded too"
    assert ("events" in stored[0]["response"]) == (scenario == "stream")
    assert (
        sync_run(stack, server_url(cassette), CassetteTransport(cassette), key, scenario) == retried
    )


def server_url(cassette: Path) -> str:
    """The server a cassette was recorded from (gone now; the replay must not need it)."""
    url = interactions(cassette)[0]["request"]["url"]
    return "/".join(str(url).split("/")[:3])


@pytest.mark.parametrize(("scenario", "dropped"), CUTS)
@pytest.mark.parametrize("stack", STACKS)
def test_an_answer_cut_off_while_recording_is_not_recorded(
    stack: Stack, scenario: Scenario, dropped: Reply, cassette: Path, key: str
) -> None:
    # The connection drops mid-answer; the student's code tries again and gets it whole.
    with (
        Loopback(dropped, reply(scenario)) as server,
        CassetteTransport(cassette, mode="once") as transport,
        sync_client(stack, server.url, transport, key) as client,
    ):
        failure(lambda: sync_call(client, scenario))
        retried = sync_call(client, scenario)
    assert len(server.requests) == 2
    assert_cut_not_recorded(stack, scenario, cassette, key, retried)


@pytest.mark.parametrize(("scenario", "dropped"), CUTS)
@pytest.mark.parametrize("stack", STACKS)
def test_an_answer_cut_off_while_recording_async_is_not_recorded(
    stack: Stack, scenario: Scenario, dropped: Reply, cassette: Path, key: str
) -> None:
    async def ask_twice(url: str) -> Result:
        transport = AsyncCassetteTransport(cassette, mode="once")
        async with transport, async_client(stack, url, transport, key) as client:
            with pytest.raises(CUT_OFF):
                await async_call(client, scenario)
            return await async_call(client, scenario)

    with Loopback(dropped, reply(scenario)) as server:
        retried = asyncio.run(ask_twice(server.url))
    assert len(server.requests) == 2
    assert_cut_not_recorded(stack, scenario, cassette, key, retried)


@pytest.mark.parametrize("scenario", ["chat", "stream"])
@pytest.mark.parametrize("stack", STACKS)
def test_non_ascii_questions_and_answers_replay(
    stack: Stack, scenario: Scenario, cassette: Path, key: str
) -> None:
    question, said = "¿Cuál es la política de reembolso? 🧾", ("Reembolsos ", "en 30 días ✅")

    def ask(transport: CassetteTransport) -> Result:
        with transport, sync_client(stack, server.url, transport, key) as client:
            return sync_call(client, scenario, question)

    with Loopback(answer(*said)) as server:
        recorded = ask(CassetteTransport(cassette, mode="once"))
    assert recorded.text == "".join(said)
    assert server.requests[0].body["messages"][0]["content"] == question
    assert ask(CassetteTransport(cassette)) == recorded
    assert "✅" in cassette.read_text(encoding="utf-8") or "\\u2705" in cassette.read_text()


def api_error(call: Callable[[], object]) -> tuple[str, str, int]:
    error = failure(call)
    assert isinstance(error, openai.APIStatusError | anthropic.APIStatusError)
    return type(error).__name__, str(error), error.status_code


@pytest.mark.parametrize("stack", STACKS)
def test_a_proxys_html_error_page_replays_as_the_same_error(
    stack: Stack, cassette: Path, key: str
) -> None:
    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"

    def ask(transport: CassetteTransport) -> tuple[str, str, int]:
        with transport, sync_client(stack, server.url, transport, key) as client:
            return api_error(lambda: sync_call(client, "chat"))

    with Loopback(raw(page, status=502, content_type="text/html")) as server:
        recorded = ask(CassetteTransport(cassette, mode="once"))
    assert recorded[0] == "InternalServerError" and recorded[2] == 502
    assert ask(CassetteTransport(cassette)) == recorded
    [stored] = interactions(cassette)
    assert stored["response"]["text"] == page.decode()


def test_azure_openai_api_key_header_is_never_written(
    cassette: Path, tmp_path: Path, key: str
) -> None:
    def ask(transport: CassetteTransport) -> str:
        with (
            transport,
            openai.AzureOpenAI(
                api_key=key,
                azure_endpoint=server.url,
                api_version="2024-10-21",
                max_retries=0,
                http_client=legacy(httpx.Client(transport=transport)),
            ) as client,
        ):
            done = client.chat.completions.create(
                model="gpt-deployment", messages=openai_messages(QUESTION)
            )
            return done.model_dump_json()

    env = {"AZURE_OPENAI_API_KEY": key}
    with Loopback(reply("chat")) as server:
        recorded = ask(CassetteTransport(cassette, mode="once", env=env))
    [sent] = server.requests
    assert sent.headers["api-key"] == key and "authorization" not in sent.headers
    assert sent.path.startswith("/openai/deployments/gpt-deployment/chat/completions?")
    assert ask(CassetteTransport(cassette, env=env)) == recorded
    assert_key_nowhere(tmp_path, key)


QUESTIONS = [f"Question {n}: what is policy {n}?" for n in range(4)]


def answered(question: str, text: str) -> bool:
    """Whether ``text`` is the loopback's ``echo()`` of ``question``."""
    return text.startswith(f"You asked: {question} (request ")


async def ask_together(
    stack: Stack, url: str, transport: AsyncCassetteTransport, key: str, questions: list[str]
) -> list[str]:
    async with transport, async_client(stack, url, transport, key) as client:
        results = await asyncio.gather(
            *(async_call(client, "chat", question) for question in questions)
        )
    return [result.text for result in results]


@pytest.mark.parametrize("stack", STACKS)
def test_concurrent_async_calls_replay_each_its_own(stack: Stack, cassette: Path, key: str) -> None:
    # Four questions and one of them three times more, all in flight at once.
    asked = [*QUESTIONS, QUESTION, QUESTION, QUESTION]
    with Loopback(default=echo()) as server:
        recording = AsyncCassetteTransport(cassette, mode="once")
        recorded = asyncio.run(ask_together(stack, server.url, recording, key, asked))
    assert all(answered(question, text) for question, text in zip(asked, recorded, strict=True))
    assert len(set(recorded)) == len(asked)  # the three equal asks got three recordings
    replaying = AsyncCassetteTransport(cassette)
    replayed = asyncio.run(ask_together(stack, server.url, replaying, key, asked))
    assert replayed[:4] == recorded[:4]
    assert sorted(replayed[4:]) == sorted(recorded[4:])  # which equal ask gets which is free


def ask_in_threads(
    stack: Stack, url: str, transport: CassetteTransport, key: str, questions: list[str]
) -> list[str]:
    """``questions`` from four threads sharing one client, the first four sent together."""
    start = threading.Barrier(4)

    def ask(question: str) -> str:
        with contextlib.suppress(threading.BrokenBarrierError):
            start.wait(timeout=5)
        return sync_call(client, "chat", question).text

    with (
        transport,
        sync_client(stack, url, transport, key) as client,
        ThreadPoolExecutor(max_workers=4) as pool,
    ):
        return list(pool.map(ask, questions))


def live_transport(stack: Stack) -> httpx.HTTPTransport | httpx2.HTTPTransport:
    return httpx2.HTTPTransport() if "httpx2" in stack else httpx.HTTPTransport()


@pytest.mark.parametrize("stack", STACKS)
def test_threads_sharing_one_client_replay_each_its_own(
    stack: Stack, cassette: Path, key: str
) -> None:
    asked = QUESTIONS * 2
    with Loopback(default=echo()) as server:
        recording = CassetteTransport(cassette, mode="once", inner=live_transport(stack))
        recorded = ask_in_threads(stack, server.url, recording, key, asked)
    assert all(answered(question, text) for question, text in zip(asked, recorded, strict=True))
    replayed = ask_in_threads(stack, server.url, CassetteTransport(cassette), key, asked)
    assert sorted(replayed) == sorted(recorded) and len(set(replayed)) == 8


@pytest.mark.parametrize("stack", STACKS)
def test_threads_recording_at_once_close_every_connection(
    stack: Stack, cassette: Path, key: str
) -> None:
    # The leaked sockets are caught here, so their warnings cannot fail a later test instead.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Loopback(default=echo()) as server:
            ask_in_threads(
                stack, server.url, CassetteTransport(cassette, mode="once"), key, QUESTIONS
            )
        gc.collect()
    assert [
        str(warning.message) for warning in caught if issubclass(warning.category, ResourceWarning)
    ] == []


# ---- a miss: the SDK's own error, CassetteMiss in its chain, every retry a miss ---------


R = TypeVar("R")


class Attempts:
    """Each request the SDK's retries made, and what the transport did with it."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        self.outcomes: list[BaseException | str] = []

    def serve(self, request: httpx.Request | httpx2.Request, answer: Callable[[], R]) -> R:
        self.requests.append((request.method, str(request.url), request.read()))
        try:
            response = answer()
        except Exception as exc:
            self.outcomes.append(exc)
            raise
        self.outcomes.append("answered")
        return response

    async def aserve(
        self, request: httpx.Request | httpx2.Request, answer: Callable[[], Awaitable[R]]
    ) -> R:
        self.requests.append((request.method, str(request.url), await request.aread()))
        try:
            response = await answer()
        except Exception as exc:
            self.outcomes.append(exc)
            raise
        self.outcomes.append("answered")
        return response

    def misses(self) -> list[CassetteMiss]:
        return [outcome for outcome in self.outcomes if isinstance(outcome, CassetteMiss)]


# Pass-throughs that note each attempt; the SDK sees the cassette transport's answers.
class SeenByHttpx(httpx.BaseTransport):
    def __init__(self, inner: CassetteTransport, attempts: Attempts) -> None:
        self.inner, self.attempts = inner, attempts

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.attempts.serve(request, lambda: self.inner.handle_request(request))

    def close(self) -> None:
        self.inner.close()


class SeenByHttpx2(httpx2.BaseTransport):
    def __init__(self, inner: CassetteTransport, attempts: Attempts) -> None:
        self.inner, self.attempts = inner, attempts

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self.attempts.serve(request, lambda: self.inner.handle_request(request))

    def close(self) -> None:
        self.inner.close()


class AsyncSeenByHttpx(httpx.AsyncBaseTransport):
    def __init__(self, inner: AsyncCassetteTransport, attempts: Attempts) -> None:
        self.inner, self.attempts = inner, attempts

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.attempts.aserve(request, lambda: self.inner.handle_async_request(request))

    async def aclose(self) -> None:
        await self.inner.aclose()


class AsyncSeenByHttpx2(httpx2.AsyncBaseTransport):
    def __init__(self, inner: AsyncCassetteTransport, attempts: Attempts) -> None:
        self.inner, self.attempts = inner, attempts

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self.attempts.aserve(request, lambda: self.inner.handle_async_request(request))

    async def aclose(self) -> None:
        await self.inner.aclose()


def connection_error(stack: Stack) -> type[Exception]:
    """The error the SDK raises when its transport fails."""
    return openai.APIConnectionError if stack.startswith("openai") else anthropic.APIConnectionError


def assert_miss_explained(
    error: BaseException, attempts: Attempts, key: str, cassette: Path
) -> None:
    """Three attempts (max_retries=2), each a miss on one key, the last in ``error``'s chain,
    naming the one recorded request as the closest and where the two part."""
    misses = attempts.misses()
    assert len(attempts.outcomes) == 3 and len(misses) == 3
    assert misses[-1] in chain(error)
    method, url, body = attempts.requests[-1]
    assert {miss.key for miss in misses} == {request_key(method, url, body)}
    message = str(misses[-1])
    [recorded] = json.loads(cassette.read_text())["interactions"]
    assert recorded in message and "messages[0].content" in message
    assert QUESTION in message and OTHER_QUESTION in message  # recorded, then asked
    assert 'mode="once"' in message  # how to record it
    assert key not in message and key not in str(error)


def record_chat(stack: Stack, server: Loopback, cassette: Path, key: str) -> None:
    sync_run(stack, server.url, CassetteTransport(cassette, mode="once"), key, "chat")
    assert len(server.requests) == 1


@pytest.mark.parametrize("stack", STACKS)
def test_sync_miss_is_the_sdks_error_caused_by_cassette_miss(
    stack: Stack, cassette: Path, key: str
) -> None:
    with Loopback(reply("chat")) as server:
        record_chat(stack, server, cassette, key)
        attempts, inner = Attempts(), CassetteTransport(cassette, mode="none")
        seen = SeenByHttpx2(inner, attempts) if "httpx2" in stack else SeenByHttpx(inner, attempts)
        with (
            sync_client(stack, server.url, seen, key, retries=2) as client,
            pytest.raises(connection_error(stack)) as caught,
        ):
            sync_call(client, "chat", OTHER_QUESTION)
        assert server.requests[1:] == []  # a miss never goes live, however often retried
    assert_miss_explained(caught.value, attempts, key, cassette)


@pytest.mark.parametrize("stack", STACKS)
def test_async_miss_is_the_sdks_error_caused_by_cassette_miss(
    stack: Stack, cassette: Path, key: str
) -> None:
    attempts = Attempts()

    async def ask(url: str) -> None:
        inner = AsyncCassetteTransport(cassette, mode="none")
        seen = (
            AsyncSeenByHttpx2(inner, attempts)
            if "httpx2" in stack
            else AsyncSeenByHttpx(inner, attempts)
        )
        async with async_client(stack, url, seen, key, retries=2) as client:
            await async_call(client, "chat", OTHER_QUESTION)

    with Loopback(reply("chat")) as server:
        record_chat(stack, server, cassette, key)
        with pytest.raises(connection_error(stack)) as caught:
            asyncio.run(ask(server.url))
        assert server.requests[1:] == []
    assert_miss_explained(caught.value, attempts, key, cassette)


def chat_as(client: SyncClient, who: str, *, warmer: bool = False) -> str:
    """A chat tagged with the end user, as a course's grader might tag each student;
    ``warmer`` changes a sampling setting (anthropic 2.x has no temperature: max_tokens)."""
    if isinstance(client, openai.OpenAI):
        return client.chat.completions.create(
            model=MODEL,
            messages=openai_messages(QUESTION),
            user=who,
            temperature=0.7 if warmer else 0.2,
        ).model_dump_json()
    return client.messages.create(
        model=MODEL,
        max_tokens=128 if warmer else 64,
        messages=anthropic_messages(QUESTION),
        metadata={"user_id": who},
    ).model_dump_json()


@pytest.mark.parametrize("stack", STACKS)
def test_who_asked_is_not_in_the_key_but_sampling_is(
    stack: Stack, cassette: Path, key: str
) -> None:
    with (
        Loopback(reply("chat")) as server,
        CassetteTransport(cassette, mode="once") as transport,
        sync_client(stack, server.url, transport, key) as client,
    ):
        recorded = chat_as(client, "student-1")
    with (
        CassetteTransport(cassette) as transport,
        sync_client(stack, server.url, transport, key) as client,
    ):
        assert chat_as(client, "student-2") == recorded  # user / metadata are volatile
        with pytest.raises(connection_error(stack)) as caught:
            chat_as(client, "student-1", warmer=True)
    [miss] = [error for error in chain(caught.value) if isinstance(error, CassetteMiss)]
    differs = "temperature: 0.7 != 0.2" if stack.startswith("openai") else "max_tokens: 128 != 64"
    assert differs in str(miss)


@pytest.mark.parametrize("stack", STACKS)
def test_no_cassette_is_a_miss_not_a_recording(stack: Stack, cassette: Path, key: str) -> None:
    # vcrpy records live when the cassette is absent; replay-only must say so and stop.
    with Loopback(reply("chat")) as server:
        transport = CassetteTransport(cassette)
        with (
            sync_client(stack, server.url, transport, key) as client,
            pytest.raises(connection_error(stack)) as caught,
        ):
            sync_call(client, "chat")
        assert server.requests == []
    [miss] = [error for error in chain(caught.value) if isinstance(error, CassetteMiss)]
    assert str(cassette) in str(miss) and 'mode="once"' in str(miss)
    assert not cassette.exists()


@pytest.mark.parametrize("stack", STACKS)
def test_asking_more_often_than_recorded_is_a_miss(stack: Stack, cassette: Path, key: str) -> None:
    with Loopback(answer("first"), answer("second")) as server:
        with (
            CassetteTransport(cassette, mode="once") as transport,
            sync_client(stack, server.url, transport, key) as client,
        ):
            recorded = [sync_call(client, "chat"), sync_call(client, "chat")]
        assert [one.text for one in recorded] == ["first", "second"]
        with (
            CassetteTransport(cassette) as transport,
            sync_client(stack, server.url, transport, key) as client,
        ):
            assert [sync_call(client, "chat"), sync_call(client, "chat")] == recorded
            with pytest.raises(connection_error(stack)) as caught:
                sync_call(client, "chat")
        assert len(server.requests) == 2
    assert any(isinstance(error, CassetteMiss) for error in chain(caught.value))


@pytest.mark.parametrize("stack", STACKS)
def test_unplayed_names_what_the_run_never_asked(stack: Stack, cassette: Path, key: str) -> None:
    with Loopback(default=answer(*ANSWER)) as server:
        with (
            CassetteTransport(cassette, mode="once") as transport,
            sync_client(stack, server.url, transport, key) as client,
        ):
            sync_call(client, "chat")
            sync_call(client, "chat", OTHER_QUESTION)
        [first, second] = [request.body for request in server.requests]
    replay = CassetteTransport(cassette)
    with replay, sync_client(stack, server.url, replay, key) as client:
        sync_call(client, "chat", OTHER_QUESTION)
        path = "/v1/chat/completions" if stack.startswith("openai") else "/v1/messages"
        never = request_key("POST", f"{server.url}{path}", json.dumps(first).encode())
        assert replay.unplayed() == [f"{never}#1"]
    assert second["messages"][0]["content"] == OTHER_QUESTION


# ---- the key ------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["header", "env"])
@pytest.mark.parametrize("stack", STACKS)
def test_a_secret_in_an_answer_is_refused_not_written(
    stack: Stack, source: str, cassette: Path, tmp_path: Path, key: str
) -> None:
    # A model that repeats a secret: the key the SDK sent (the transport sees it in the
    # request's headers, with no env), or a value it knows only from env=.
    secret, env = key, {}
    if source == "env":
        secret = f"db-{uuid.uuid4()}"
        env = {"LAB_DB_PASSWORD": secret}
    with Loopback(answer(f"Your secret is {secret}.")) as server:
        try:
            sync_run(
                stack, server.url, CassetteTransport(cassette, mode="once", env=env), key, "chat"
            )
        except Exception as exc:
            raised: BaseException = exc
        else:
            pytest.fail("a cassette holding a secret was written without complaint")
    [leak] = [error for error in chain(raised) if isinstance(error, SecretLeak)]
    assert secret not in str(leak)
    assert source == "header" or "LAB_DB_PASSWORD" in str(leak)
    assert_key_nowhere(tmp_path, secret, expect_files=False)


# ---- the double is honest: the SDKs parse its tool calls and streams without gradekit ----


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("sdk", SDKS)
def test_sdks_parse_the_doubles_tool_calls_and_streams(sdk: Sdk, scenario: Scenario) -> None:
    with Loopback(reply(scenario)) as server:
        if sdk == "openai":
            with openai.OpenAI(api_key="k", base_url=server.openai_url, max_retries=0) as gpt:
                result = openai_call(gpt, scenario, QUESTION)
        else:
            with anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as claude:
                result = anthropic_call(claude, scenario, QUESTION)
        [request] = server.requests
    assert (result.text, result.calls) == expected(scenario)
    assert request.body.get("stream", False) == scenario.startswith("stream")


def test_the_doubles_streams_end_as_the_real_apis_do() -> None:
    with Loopback(default=tool_call("lookup", LOOKUP)) as server:
        body = {
            "model": MODEL,
            "max_tokens": 8,
            "stream": True,
            "messages": [{"role": "user", "content": QUESTION}],
        }
        headers = {"anthropic-version": "2023-06-01"}
        gpt = httpx.post(f"{server.openai_url}/chat/completions", json=body)
        claude = httpx.post(f"{server.url}/v1/messages", json=body, headers=headers)
    assert gpt.headers["content-type"].startswith("text/event-stream")
    assert gpt.headers["transfer-encoding"] == "chunked"
    assert gpt.text.endswith("data: [DONE]\n\n")
    assert '"finish_reason": "tool_calls"' in gpt.text
    names = [
        line.removeprefix("event: ")
        for line in claude.text.splitlines()
        if line.startswith("event: ")
    ]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert '"stop_reason": "tool_use"' in claude.text
