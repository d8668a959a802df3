"""``FakeProvider``'s HTTP side: scripted answers in the official SDKs' own protocols, through
the real ``openai`` and ``anthropic`` clients, with no server and no network.

It calls ``gradekit._http.scripted``'s ``speak`` on purpose: the scripted answers, without a
client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gradekit import FakeProvider, JsonlSink, Traced, prompt_key, request_key
from gradekit._http.scripted import speak

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

URL = "http://127.0.0.1:8080/v1"


def _echo(name: str = "fake") -> FakeProvider:
    return FakeProvider(lambda prompt: f"you said {prompt}", name=name)


def test_openai_chat_whole_and_streamed_answers_the_last_messages_text(
    gradekit_network: None,
) -> None:
    fake = _echo()
    client = openai.OpenAI(base_url=URL, api_key="k", http_client=fake.http_client("httpx2"))
    whole = client.chat.completions.create(
        model="m",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "one"}],
    )
    assert whole.choices[0].message.content == "you said one"
    assert whole.choices[0].finish_reason == "stop" and whole.model == "m"
    chunks = list(
        client.chat.completions.create(
            model="m",
            stream=True,
            stream_options={"include_usage": True},
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "t"}, {"type": "text", "text": "wo"}],
                }
            ],
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "you said two"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    assert fake.calls == ["one", "two"]


def test_anthropic_messages_whole_streamed_and_async(gradekit_network: None) -> None:
    fake = _echo()
    client = anthropic.Anthropic(api_key="k", http_client=fake.http_client("httpx2"))
    reply = client.messages.create(
        model="c", max_tokens=9, system="x", messages=[{"role": "user", "content": "hi"}]
    )
    assert [block.text for block in reply.content if block.type == "text"] == ["you said hi"]
    with client.messages.stream(
        model="c", max_tokens=9, messages=[{"role": "user", "content": "there"}]
    ) as stream:
        assert stream.get_final_text() == "you said there"

    async def ask() -> str:
        aclient = anthropic.AsyncAnthropic(
            api_key="k", http_client=fake.async_http_client("httpx2")
        )
        done = await aclient.messages.create(
            model="c", max_tokens=9, messages=[{"role": "user", "content": "async"}]
        )
        return "".join(block.text for block in done.content if block.type == "text")

    assert asyncio.run(ask()) == "you said async"
    assert fake.calls == ["hi", "there", "async"]


def test_responses_whole_is_answered_and_streamed_is_refused_saying_what_works(
    gradekit_network: None,
) -> None:
    fake = _echo()
    client = openai.OpenAI(base_url=URL, api_key="k", http_client=fake.http_client(), max_retries=0)
    assert client.responses.create(model="m", input="plain").output_text == "you said plain"
    with pytest.raises(openai.BadRequestError, match="not streamed: test with stream=False"):
        list(client.responses.create(model="m", input="plain", stream=True))
    assert fake.calls == ["plain"]


def test_what_the_script_cannot_answer_is_a_400_the_sdk_raises_and_never_retries(
    gradekit_network: None,
) -> None:
    fake = FakeProvider(["only one"])
    client = openai.OpenAI(base_url=URL, api_key="k", http_client=fake.http_client(), max_retries=3)
    ask = [{"role": "user", "content": "q"}]
    assert (
        client.chat.completions.create(model="m", messages=ask).choices[0].message.content
        == "only one"
    )
    with pytest.raises(openai.BadRequestError, match="ran out of scripted answers"):
        client.chat.completions.create(model="m", messages=ask)
    assert len(fake.calls) == 2  # asked once, not once per retry
    with pytest.raises(openai.BadRequestError, match=r"not http://127\.0\.0\.1:8080/v1/embed"):
        client.embeddings.create(model="m", input="x")
    claude = anthropic.Anthropic(api_key="k", http_client=fake.http_client("httpx2"), max_retries=3)
    with pytest.raises(anthropic.BadRequestError, match="has no messages: send at least one"):
        claude.messages.create(model="c", max_tokens=1, messages=[])
    assert len(fake.calls) == 2


@pytest.mark.parametrize(
    ("method", "body", "says"),
    [
        ("GET", b"", "not GET"),
        ("POST", b"{not json", "is not JSON"),
        ("POST", b"[1]", "not a JSON object"),
        ("POST", b'{"messages": [{"role": "user", "content": 3}]}', "no text content"),
    ],
)
def test_a_malformed_request_is_refused_with_its_fix(method: str, body: bytes, says: str) -> None:
    fake = _echo()
    answer = speak(
        method, URL + "/chat/completions", body, lambda prompt, key: fake.complete(prompt)
    )
    assert answer.status == 400 and says in answer.content["error"]["message"]
    assert fake.calls == []


def test_the_same_request_gets_the_same_bytes_and_the_trace_has_its_request_key(
    tmp_path: Path,
    gradekit_network: None,
) -> None:
    body = json.dumps(
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "same"}]}
    ).encode()
    fake = _echo()
    first, second = (
        speak("POST", URL + "/chat/completions", body, lambda prompt, key: fake.complete(prompt))
        for _ in range(2)
    )
    assert first.body() == second.body() and b"data: [DONE]" in first.body()

    trace = tmp_path / "trace.jsonl"
    traced = _echo("provider-a")
    client = openai.OpenAI(
        base_url=URL, api_key="k", http_client=Traced(traced, sink=JsonlSink(trace)).http_client()
    )
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    Traced(traced, sink=JsonlSink(trace)).complete("y")
    records = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    assert [r["key"] for r in records] == traced.keys
    assert traced.keys[1] == prompt_key("y") and traced.keys[0] != prompt_key("x")
    assert len(traced.keys[0]) == len(request_key("POST", URL, b"{}"))
