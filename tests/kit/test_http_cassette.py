"""HTTP cassettes: the request key, the format, and the transport that records and replays.

The live side is httpx's own ``MockTransport`` (a handler that counts what reached it) or,
for streams, a real ``http.server`` on loopback: never a mock of gradekit.

It tests ``gradekit._http.cassette`` on purpose: the format's volatile keys and its response
type.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gradekit import (
    AsyncCassetteTransport,
    CassetteCorrupt,
    CassetteMiss,
    CassetteTransport,
    HttpCassette,
    SecretLeak,
    request_key,
)
from gradekit._http.cassette import HTTP_CASSETTE, VOLATILE, HttpResponse
from grader.cli import main

URL = "http://127.0.0.1:8080/v1/chat/completions"


def chat(temperature: float = 0.2, content: str = "hi", **extra: object) -> dict[str, object]:
    return {
        "model": "m",
        "temperature": temperature,
        "messages": [{"role": "user", "content": content}],
        **extra,
    }


class Live:
    """The network: answers every request with a chat completion echoing its content."""

    def __init__(self) -> None:
        self.asked: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(request)
        body = json.loads(request.content)
        asked = body["messages"][-1]["content"] if "messages" in body else "?"
        text = f"answer {len(self.asked)} to {asked}"
        return httpx.Response(
            200,
            headers={"x-request-id": "req_1", "set-cookie": "s=1"},
            json={"choices": [{"message": {"content": text}}]},
        )

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def post(transport: CassetteTransport, body: object, url: str = URL) -> httpx.Response:
    """One request through a client that leaves ``transport`` open (closing is the test's)."""
    client = httpx.Client(transport=transport)
    return client.post(url, json=body, headers={"authorization": "Bearer sk-test-123456"})


def post_once(transport: CassetteTransport, body: object, url: str = URL) -> httpx.Response:
    """One request through a client that closes ``transport``, folding the cassette."""
    with httpx.Client(transport=transport) as client:
        return client.post(url, json=body, headers={"authorization": "Bearer sk-test-123456"})


def test_once_records_what_is_missing_and_none_replays_it_without_the_network(
    tmp_path: Path,
) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    recorded = post_once(CassetteTransport(path, mode="once", inner=live.transport()), chat())
    assert (
        len(live.asked) == 1
        and recorded.json()["choices"][0]["message"]["content"] == "answer 1 to hi"
    )
    replayed = post(CassetteTransport(path), chat())
    assert len(live.asked) == 1
    assert replayed.status_code == 200 and replayed.content == recorded.content
    assert replayed.headers["x-request-id"] == "req_1"
    document = json.loads(path.read_bytes())
    assert document["format"] == "gradekit.http-cassette/1"
    assert document["key_scheme"] == "gradekit.http-key/1"
    assert document["case"] == "chat"
    key = request_key("POST", URL, json.dumps(chat()).encode())
    [interaction] = document["interactions"][key]
    assert interaction["request"] == {"method": "POST", "url": URL, "body": chat()}
    assert interaction["response"]["headers"] == {
        "content-type": "application/json",
        "x-request-id": "req_1",
    }


def test_the_file_is_deterministic_and_never_holds_a_credential_header(tmp_path: Path) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    post_once(CassetteTransport(path, mode="once", inner=live.transport()), chat())
    data = path.read_bytes()
    assert data == HTTP_CASSETTE.encode(HTTP_CASSETTE.decode(data, source="x"))
    assert data.endswith(b"}\n") and not data.endswith(b"\n\n") and b'\n  "case"' in data
    assert b"sk-test-123456" not in data and b"set-cookie" not in data.lower()
    assert b"authorization" not in data.lower()


def test_once_serves_what_is_recorded_and_records_only_the_new_request(tmp_path: Path) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    post_once(CassetteTransport(path, mode="once", inner=live.transport()), chat(content="a"))
    with CassetteTransport(path, mode="once", inner=live.transport()) as transport:
        assert (
            post(transport, chat(content="a")).json()["choices"][0]["message"]["content"]
            == "answer 1 to a"
        )
        post(transport, chat(content="b"))
    assert [json.loads(r.content)["messages"][0]["content"] for r in live.asked] == ["a", "b"]
    assert len(HTTP_CASSETTE.decode(path.read_bytes(), source="x")) == 2


def test_none_is_the_default_and_a_missing_cassette_misses_loudly(tmp_path: Path) -> None:
    path = tmp_path / "absent.http.json"
    with pytest.raises(CassetteMiss) as caught:
        post(CassetteTransport(path), chat())
    assert caught.value.key == request_key("POST", URL, json.dumps(chat()).encode())
    message = str(caught.value)
    assert "does not exist yet" in message and 'mode="once"' in message
    assert "--gradekit-record-mode once" in message
    assert not path.exists()


def test_a_miss_names_the_closest_request_and_the_json_paths_that_differ(tmp_path: Path) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    with CassetteTransport(path, mode="once", inner=live.transport()) as transport:
        post(transport, chat(temperature=0.7, content="a"))
        post(transport, {"other": True}, url="http://127.0.0.1:8080/v1/embeddings")
    with pytest.raises(CassetteMiss) as caught:
        post(CassetteTransport(path), chat(temperature=0.2, content="b"))
    message = str(caught.value)
    assert (
        f"POST {URL} (key {request_key('POST', URL, json.dumps(chat(0.7, 'a')).encode())})"
        in message
    )
    assert 'messages[0].content: "b" != "a"' in message
    assert "temperature: 0.2 != 0.7" in message


def test_unplayed_names_what_this_run_never_asked(tmp_path: Path) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    with CassetteTransport(path, mode="once", inner=live.transport()) as transport:
        post(transport, chat(content="a"))
        post(transport, chat(content="b"))
    replay = CassetteTransport(path)
    key_b = request_key("POST", URL, json.dumps(chat(content="b")).encode())
    post(replay, chat(content="a"))
    assert replay.unplayed() == [f"{key_b}#1"]


def test_the_key_ignores_json_layout_and_headers_but_not_what_is_asked() -> None:
    body = chat()
    spaced = json.dumps(body, indent=4).encode()
    reordered = json.dumps(dict(reversed(list(body.items())))).encode()
    assert request_key("POST", URL, spaced) == request_key("POST", URL, reordered)
    assert request_key("POST", URL, spaced) != request_key(
        "POST", URL, json.dumps(chat(0.3)).encode()
    )
    assert request_key("post", "HTTP://127.0.0.1:8080/v1/chat/completions", spaced) == request_key(
        "POST", URL, spaced
    )
    assert request_key("GET", "https://API.example.com:443/v1/models?b=2&a=1", b"") == request_key(
        "GET", "https://api.example.com/v1/models?a=1&b=2", b""
    )


def test_importing_gradekit_imports_no_http_library() -> None:
    code = "import sys, gradekit; print(sorted({'httpx', 'httpx2'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_an_http_cassette_value_counts_its_interactions() -> None:
    assert len(HttpCassette("c")) == 0


# -- repeats, rerecord, bodies that are not JSON ----------------------------------------------


def answer_of(response: httpx.Response) -> str:
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


def test_a_repeated_request_replays_in_recorded_order_and_one_more_is_a_miss_every_time(
    tmp_path: Path,
) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    with CassetteTransport(path, mode="once", inner=live.transport()) as transport:
        assert [answer_of(post(transport, chat())) for _ in range(2)] == [
            "answer 1 to hi",
            "answer 2 to hi",
        ]
    replay = CassetteTransport(path)
    assert [answer_of(post(replay, chat())) for _ in range(2)] == [
        "answer 1 to hi",
        "answer 2 to hi",
    ]
    key = request_key("POST", URL, json.dumps(chat()).encode())
    for _ in range(3):  # a client's retries: each one misses again, none is served
        with pytest.raises(CassetteMiss, match=f"{key}#3") as caught:
            post(replay, chat())
        assert "asked:   3 times; recorded twice" in str(caught.value)
    assert replay.unplayed() == []


def test_a_failed_live_call_gives_its_place_back_so_the_retry_is_recorded_first(
    tmp_path: Path,
) -> None:
    path, live, calls = tmp_path / "chat.http.json", Live(), []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        return live(request)

    with CassetteTransport(path, mode="once", inner=httpx.MockTransport(flaky)) as transport:
        with pytest.raises(httpx.ConnectError):
            post(transport, chat())
        post(transport, chat())
    key = request_key("POST", URL, json.dumps(chat()).encode())
    assert list(HTTP_CASSETTE.decode(path.read_bytes(), source="x").slots()) == [f"{key}#1"]


def test_rerecord_asks_again_keeps_the_previous_file_and_drops_what_was_not_asked(
    tmp_path: Path,
) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    with CassetteTransport(path, mode="once", inner=live.transport()) as transport:
        post(transport, chat(content="a"))
        post(transport, chat(content="b"))
    before = path.read_bytes()
    with CassetteTransport(path, mode="rerecord", inner=live.transport()) as transport:
        assert answer_of(post(transport, chat(content="a"))) == "answer 3 to a"
    assert (tmp_path / "chat.http.previous.json").read_bytes() == before
    cassette = HTTP_CASSETTE.decode(path.read_bytes(), source="x")
    [(_, [interaction])] = cassette.interactions.items()
    assert interaction.response.content["choices"][0]["message"]["content"] == "answer 3 to a"


def test_text_and_binary_bodies_are_kept_as_text_and_base64(tmp_path: Path) -> None:
    path = tmp_path / "raw.http.json"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.content == b"\xff\x00":
            return httpx.Response(
                200, headers={"content-type": "image/png"}, content=b"\x89PNG\xff"
            )
        return httpx.Response(
            201, headers={"content-type": "text/plain"}, content=b"got " + request.content
        )

    with CassetteTransport(path, mode="once", inner=httpx.MockTransport(handler)) as transport:
        client = httpx.Client(transport=transport)
        client.post("http://h/t", content=b"plain {not json")
        client.post("http://h/b", content=b"\xff\x00")
    interactions = [i[0] for i in json.loads(path.read_bytes())["interactions"].values()]
    kept = {
        (
            i["request"]["url"],
            *sorted(set(i["request"]) - {"method", "url"}),
            *sorted(set(i["response"]) - {"status", "headers"}),
        )
        for i in interactions
    }
    assert kept == {("http://h/t", "text", "text"), ("http://h/b", "base64", "base64")}
    client = httpx.Client(transport=CassetteTransport(path))
    text = client.post("http://h/t", content=b"plain {not json")
    assert (text.status_code, text.text) == (201, "got plain {not json")
    assert client.post("http://h/b", content=b"\xff\x00").content == b"\x89PNG\xff"


def test_a_get_without_a_body_is_recorded_and_its_query_order_does_not_matter(
    tmp_path: Path,
) -> None:
    path, seen = tmp_path / "get.http.json", []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": [{"id": "m"}]})

    with CassetteTransport(path, mode="once", inner=httpx.MockTransport(handler)) as transport:
        httpx.Client(transport=transport).get("http://h/v1/models?b=2&a=1")
    response = httpx.Client(transport=CassetteTransport(path)).get("http://h/v1/models?a=1&b=2")
    assert response.json() == {"data": [{"id": "m"}]} and len(seen) == 1


# -- streams, on a real server on loopback ----------------------------------------------------

EVENTS = [f'data: {{"delta": "part {n}"}}' for n in range(3)] + ["data: [DONE]"]


class Streaming(BaseHTTPRequestHandler):
    """Sends ``EVENTS`` one by one; after the first it waits for the client to have read it."""

    server: StreamingServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        if self.server.cuts:
            self.server.cuts -= 1
            return self.cut_off()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("x-request-id", "req_s")
        self.end_headers()
        for n, event in enumerate(EVENTS):
            self.wfile.write(f"{event}\r\n\r\n".encode())
            self.wfile.flush()
            if n == 0:
                self.server.handed_on.append(self.server.first_read.wait(5))
        self.close_connection = True

    def cut_off(self) -> None:
        """The first event in a chunked body, then the connection drops mid-answer."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        first = f"{EVENTS[0]}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(first), first))
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test output is the test's."""


class StreamingServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Streaming)
        self.first_read = threading.Event()
        self.handed_on: list[bool] = []
        self.cuts = 0  # how many answers to cut off before answering whole
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1/chat/completions"


@pytest.fixture
def streaming() -> Iterator[StreamingServer]:
    server = StreamingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def read_stream(client: Any, url: str, server: StreamingServer | None = None) -> list[str]:
    """The non-blank lines of a streamed answer; the server learns when the first arrived."""
    lines = []
    with client.stream("POST", url, json=chat(stream=True)) as response:
        for line in response.iter_lines():
            lines.append(line)
            if server is not None:
                server.first_read.set()
    return [line for line in lines if line]


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_a_stream_is_handed_on_event_by_event_recorded_whole_and_replayed_as_a_stream(
    tmp_path: Path,
    streaming: StreamingServer,
    library: str,
) -> None:
    path, client = tmp_path / "stream.http.json", importlib.import_module(library).Client
    with CassetteTransport(path, mode="once") as transport:
        recorded = read_stream(client(transport=transport), streaming.url, streaming)
    assert streaming.handed_on == [True]  # the first event reached the client before the rest
    assert recorded == EVENTS
    [interaction] = json.loads(path.read_bytes())["interactions"].popitem()[1]
    assert interaction["response"]["events"] == EVENTS
    assert interaction["response"]["headers"]["x-request-id"] == "req_s"
    streaming.shutdown()
    replay = client(transport=CassetteTransport(path))
    with replay.stream("POST", streaming.url, json=chat(stream=True)) as response:
        chunks = list(response.iter_bytes())
    assert chunks == [f"{event}\n\n".encode() for event in EVENTS]
    assert read_stream(client(transport=CassetteTransport(path)), streaming.url) == EVENTS


def test_a_stream_left_early_is_still_recorded_whole(
    tmp_path: Path,
    streaming: StreamingServer,
) -> None:
    path = tmp_path / "stream.http.json"
    streaming.first_read.set()
    with (
        CassetteTransport(path, mode="once") as transport,
        httpx.Client(transport=transport).stream(
            "POST", streaming.url, json=chat(stream=True)
        ) as response,
    ):
        next(response.iter_lines())
    [interaction] = json.loads(path.read_bytes())["interactions"].popitem()[1]
    assert interaction["response"]["events"] == EVENTS


# -- httpx2, async -----------------------------------------------------------------------------


def test_an_httpx2_request_is_answered_with_an_httpx2_response(tmp_path: Path) -> None:
    import httpx2

    path, seen = tmp_path / "two.http.json", []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={"content": [{"type": "text", "text": "hi"}]})

    with CassetteTransport(path, mode="once", inner=httpx2.MockTransport(handler)) as transport:
        recorded = httpx2.Client(transport=transport).post("http://h/v1/messages", json=chat())
    replayed = httpx2.Client(transport=CassetteTransport(path)).post(
        "http://h/v1/messages", json=chat()
    )
    assert type(replayed) is httpx2.Response and replayed.json() == recorded.json()
    # One cassette serves both libraries: the key is the request's, not the client's.
    assert (
        httpx.Client(transport=CassetteTransport(path))
        .post("http://h/v1/messages", json=chat())
        .json()
        == recorded.json()
    )
    assert len(seen) == 1


def test_httpx2_is_imported_only_when_an_httpx2_request_arrives(tmp_path: Path) -> None:
    code = f"""
import sys, httpx, gradekit
handler = lambda request: httpx.Response(200, json={{}})
with gradekit.CassetteTransport({str(tmp_path / "x.http.json")!r}, mode="once",
                                inner=httpx.MockTransport(handler)) as transport:
    httpx.Client(transport=transport).post("http://h/", json={{}})
print("httpx2" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_the_async_transport_records_and_replays_bodies_and_streams(tmp_path: Path) -> None:
    path, live = tmp_path / "async.http.json", Live()

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            body = "".join(f"{event}\n\n" for event in EVENTS).encode()
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        return live(request)

    async def run(transport: AsyncCassetteTransport) -> tuple[str, list[str]]:
        async with httpx.AsyncClient(transport=transport) as client:
            answer = answer_of(await client.post(URL, json=chat()))
            async with client.stream("POST", URL, json=chat(stream=True)) as response:
                lines = [line async for line in response.aiter_lines() if line]
        return answer, lines

    recorded = asyncio.run(
        run(AsyncCassetteTransport(path, mode="once", inner=httpx.MockTransport(handler)))
    )
    assert recorded == ("answer 1 to hi", EVENTS)
    assert asyncio.run(run(AsyncCassetteTransport(path))) == recorded
    with pytest.raises(CassetteMiss):
        asyncio.run(run(AsyncCassetteTransport(tmp_path / "absent.http.json")))


def test_the_async_transport_serves_httpx2_too(tmp_path: Path) -> None:
    import httpx2

    path = tmp_path / "async2.http.json"
    handler = lambda request: httpx2.Response(200, json={"ok": True})  # noqa: E731

    async def run(transport: AsyncCassetteTransport) -> object:
        async with httpx2.AsyncClient(transport=transport) as client:
            response = await client.post("http://h/v1/messages", json=chat())
            assert type(response) is httpx2.Response
            return response.json()

    assert asyncio.run(
        run(AsyncCassetteTransport(path, mode="once", inner=httpx2.MockTransport(handler)))
    ) == {"ok": True}
    assert asyncio.run(run(AsyncCassetteTransport(path))) == {"ok": True}


# -- credentials, corruption, verify ----------------------------------------------------------

SECRET = "sk-live-0123456789abcdef"


def test_a_credential_anywhere_in_an_interaction_refuses_the_write_and_keeps_the_file(
    tmp_path: Path,
) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    post_once(CassetteTransport(path, mode="once", inner=live.transport()), chat(content="a"))
    before = path.read_bytes()

    def leaky(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"echo": f"your key is {SECRET}"})

    env = {"OPENAI_API_KEY": SECRET}
    with CassetteTransport(path, mode="once", inner=httpx.MockTransport(leaky), env=env) as t:
        with pytest.raises(SecretLeak, match="OPENAI_API_KEY") as caught:
            post(t, chat(content="b"))
        assert SECRET not in str(caught.value)
        assert post(t, chat(content="a")).status_code == 200  # what is recorded still serves
    assert path.read_bytes() == before
    assert not (tmp_path / "chat.http.json.journal").exists()


def test_a_request_header_credential_echoed_back_is_refused_without_any_environment(
    tmp_path: Path,
) -> None:
    path = tmp_path / "echo.http.json"

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": f"bad key {request.headers['x-api-key']}"})

    with (
        CassetteTransport(path, mode="once", inner=httpx.MockTransport(echo), env={}) as t,
        pytest.raises(SecretLeak, match="x-api-key header"),
    ):
        httpx.Client(transport=t).post(URL, json=chat(), headers={"x-api-key": SECRET})
    assert SECRET.encode() not in path.read_bytes()


def recorded_file(tmp_path: Path) -> Path:
    path, live = tmp_path / "chat.http.json", Live()
    post_once(CassetteTransport(path, mode="once", inner=live.transport()), chat())
    return path


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (
            lambda text: text.replace('"model": "m"', '"model": "m",', 1),
            r"chat\.http\.json:\d+:\d+: not valid JSON",
        ),
        (
            lambda text: text.replace("http-cassette/1", "http-cassette/2"),
            r"chat\.http\.json:\d+:\d+: unknown cassette format .*upgrade",
        ),
        (
            lambda text: text.replace("http-key/1", "http-key/0"),
            r"chat\.http\.json:\d+:\d+: unknown key scheme",
        ),
        (
            lambda text: text.replace('"temperature": 0.2', '"temperature": 0.9'),
            r"chat\.http\.json:5:5: interaction [0-9a-f]{16}#1 holds a request whose key is",
        ),
        (
            lambda text: text.replace('"status": 200', '"status": "200"'),
            r"chat\.http\.json:5:5: interaction [0-9a-f]{16}#1 needs a 'response'",
        ),
    ],
)
def test_a_corrupt_file_is_an_error_naming_file_line_and_column_never_an_empty_cassette(
    tmp_path: Path,
    edit: Callable[[str], str],
    found: str,
) -> None:
    path = recorded_file(tmp_path)
    path.write_text(edit(path.read_text("utf-8")), "utf-8")
    with pytest.raises(CassetteCorrupt, match=found):
        CassetteTransport(path)
    with pytest.raises(CassetteCorrupt, match=found):
        CassetteTransport(path, mode="once")  # folding what a killed run left reads it too


def test_cassette_verify_reads_http_cassettes_by_their_format(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = recorded_file(tmp_path)
    assert main(["cassette", "verify", str(path)]) == 0
    assert "(1 interaction)" in capsys.readouterr().out
    monkeypatch.setenv("LEAKED_TOKEN", "answer 1 to hi")
    assert main(["cassette", "verify", str(path)]) == 1
    assert "contains the value of LEAKED_TOKEN" in capsys.readouterr().err
    monkeypatch.delenv("LEAKED_TOKEN")
    document = json.loads(path.read_bytes())
    next(iter(document["interactions"].values()))[0]["response"]["headers"]["set-cookie"] = "s"
    path.write_text(json.dumps(document), "utf-8")
    assert main(["cassette", "verify", str(path)]) == 1
    assert "keeps the headers set-cookie" in capsys.readouterr().err
    path.write_text("{", "utf-8")
    assert main(["cassette", "verify", str(path)]) == 1
    assert "chat.http.json:1:2: not valid JSON" in capsys.readouterr().err


# -- the key, as properties --------------------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
BODIES = st.dictionaries(st.text(max_size=8), JSON, max_size=5)


def reordered(value: object, flip: bool) -> object:
    """``value`` with every object's keys in another order."""
    if isinstance(value, dict):
        items = [(k, reordered(v, flip)) for k, v in value.items()]
        return dict(reversed(items) if flip else sorted(items))
    if isinstance(value, list):
        return [reordered(item, flip) for item in value]
    return value


@given(
    BODIES,
    st.booleans(),
    st.sampled_from([None, 0, 2]),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,", " :  ")]),
)
def test_the_key_is_stable_under_key_order_and_whitespace(
    body: dict[str, object],
    flip: bool,
    indent: int | None,
    separators: tuple[str, str],
) -> None:
    plain = json.dumps(body).encode()
    other = json.dumps(
        reordered(body, flip), indent=indent, separators=separators, ensure_ascii=flip
    ).encode()
    assert request_key("POST", URL, plain) == request_key("POST", URL, other)


@given(
    BODIES, st.sampled_from(["temperature", "seed", "n", "model", "stream", "tools"]), JSON, JSON
)
def test_another_value_of_what_changes_the_answer_gives_another_key(
    body: dict[str, object],
    field: str,
    one: object,
    other: object,
) -> None:
    assume(json.dumps(one, sort_keys=True) != json.dumps(other, sort_keys=True))
    first, second = {**body, field: one}, {**body, field: other}
    assert request_key("POST", URL, json.dumps(first).encode()) != request_key(
        "POST", URL, json.dumps(second).encode()
    )


@given(BODIES, st.sampled_from(sorted(VOLATILE)), JSON)
def test_the_volatile_fields_leave_the_key_alone(
    body: dict[str, object],
    field: str,
    value: object,
) -> None:
    without = {k: v for k, v in body.items() if k not in VOLATILE}
    assert request_key("POST", URL, json.dumps({**without, field: value}).encode()) == request_key(
        "POST", URL, json.dumps(without).encode()
    )


# -- the SDKs' retries ---------------------------------------------------------------------------


def completion(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "hello"},
                }
            ],
        },
    )


class Counted(CassetteTransport):
    """Records the key of every miss it raises: what the SDK's retries asked."""

    def __init__(self, cassette: Path) -> None:
        super().__init__(cassette)
        self.missed: list[str] = []

    def handle_request(self, request: Any) -> Any:
        try:
            return super().handle_request(request)
        except CassetteMiss as miss:
            self.missed.append(miss.key)
            raise


def test_a_miss_is_also_the_request_librarys_transport_error(tmp_path: Path) -> None:
    import httpx2

    for library in (httpx, httpx2):
        client = library.Client(transport=CassetteTransport(tmp_path / "absent.http.json"))
        with pytest.raises(CassetteMiss) as caught:
            client.get("http://h/")
        assert isinstance(caught.value, library.TransportError)
        assert caught.value.request.url == "http://h/"
        assert type(caught.value).__name__ == "CassetteMiss"


def test_an_openai_miss_is_retried_missed_again_each_time_and_in_the_chain(
    tmp_path: Path,
) -> None:
    import openai

    path = tmp_path / "openai.http.json"

    def ask(transport: CassetteTransport, temperature: float) -> str | None:
        # openai 3.57 types http_client as httpx2's, and takes httpx's too (the spec's way).
        client = openai.OpenAI(
            api_key="k",
            base_url="http://127.0.0.1:9/v1",
            max_retries=1,
            http_client=httpx.Client(transport=transport),  # type: ignore[arg-type]
        )
        reply = client.chat.completions.create(
            model="m", temperature=temperature, messages=[{"role": "user", "content": "hi"}]
        )
        return reply.choices[0].message.content

    with CassetteTransport(path, mode="once", inner=httpx.MockTransport(completion)) as t:
        assert ask(t, 0.7) == "hello"
    replay = Counted(path)
    with pytest.raises(openai.APIConnectionError) as caught:
        ask(replay, 0.2)
    miss = _miss_in(caught.value)
    assert "temperature: 0.2 != 0.7" in str(miss)
    assert replay.missed == [miss.key, miss.key]  # the first ask and its retry, both missed
    assert ask(replay, 0.7) == "hello"  # and the misses took no recording's place


def test_an_anthropic_miss_is_in_the_chain_of_what_the_sdk_raises_after_its_retries(
    tmp_path: Path,
) -> None:
    import anthropic
    import httpx2

    transport = Counted(tmp_path / "anthropic.http.json")
    client = anthropic.Anthropic(
        api_key="k",
        base_url="http://127.0.0.1:9",
        max_retries=1,
        http_client=httpx2.Client(transport=transport),
    )
    with pytest.raises(anthropic.APIConnectionError) as caught:
        client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    miss = _miss_in(caught.value)
    assert "does not exist yet" in str(miss)
    assert transport.missed == [miss.key, miss.key]


def _miss_in(error: BaseException) -> CassetteMiss:
    """The ``CassetteMiss`` in ``error``'s chain (its cause or context), or a failed test."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, CassetteMiss):
            return seen
        seen = seen.__cause__ or seen.__context__
    pytest.fail(f"no CassetteMiss in the chain of {error!r}")


def test_what_a_killed_recording_left_in_the_journal_is_replayed_and_folded_next_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.http.json"
    killed = f"""
import os, httpx, gradekit
answer = {{"choices": [{{"message": {{"content": "kept"}}}}]}}
reply = lambda request: httpx.Response(200, json=answer)
transport = gradekit.CassetteTransport({str(path)!r}, mode="once",
                                       inner=httpx.MockTransport(reply))
httpx.Client(transport=transport).post({URL!r}, json={chat()!r})
os._exit(0)  # killed before close: nothing folded
"""
    subprocess.run([sys.executable, "-c", killed], check=True)
    assert b'"kept"' not in path.read_bytes()  # the file holds nothing yet; the journal does
    assert answer_of(post(CassetteTransport(path), chat())) == "kept"
    with CassetteTransport(path, mode="once", inner=Live().transport()):
        pass
    assert b'"kept"' in path.read_bytes()
    assert not (tmp_path / "chat.http.json.journal").exists()


def test_a_stream_holding_a_credential_is_refused_when_it_ends(
    tmp_path: Path,
    streaming: StreamingServer,
) -> None:
    path = tmp_path / "stream.http.json"
    streaming.first_read.set()
    env = {"STREAM_TOKEN": '"part 2"}'}
    with (
        CassetteTransport(path, mode="once", env=env) as transport,
        pytest.raises(SecretLeak, match="STREAM_TOKEN"),
    ):
        read_stream(httpx.Client(transport=transport), streaming.url)
    assert json.loads(path.read_bytes())["interactions"] == {}


def test_the_closest_request_is_one_of_the_same_method_and_path_before_a_likelier_body(
    tmp_path: Path,
) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    elsewhere = "http://127.0.0.1:8080/v1/responses"
    with CassetteTransport(path, mode="once", inner=live.transport()) as transport:
        post(transport, chat(temperature=0.2, seed=1), url=elsewhere)  # the very same body
        post(transport, chat(temperature=0.7, seed=2, top_p=0.5))
    with pytest.raises(CassetteMiss) as caught:
        post(CassetteTransport(path), chat(temperature=0.2, seed=1))
    differs = next(line for line in str(caught.value).splitlines() if "differs:" in line)
    assert (
        differs.split("differs:")[1].strip()
        == "seed: 1 != 2; temperature: 0.2 != 0.7; top_p: (absent) != 0.5 (asked != recorded)"
    )


def test_a_journal_line_no_recorder_wrote_is_an_error_naming_its_line(tmp_path: Path) -> None:
    path = recorded_file(tmp_path)
    journal = tmp_path / "chat.http.json.journal"
    journal.write_text(
        '{"key": "0123456789abcdef#1", "prompt": "{}", "provider": "http", '
        '"recorded_at": "", "response": "{}"}\n',
        "utf-8",
    )
    with pytest.raises(CassetteCorrupt, match=r"chat\.http\.json\.journal:1: unreadable"):
        CassetteTransport(path)
    assert json.loads(path.read_bytes())["interactions"]  # the file itself is left alone


def test_cassette_diff_and_stale_read_http_cassettes_after_a_rerecord(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, live = tmp_path / "chat.http.json", Live()
    post_once(
        CassetteTransport(
            path, mode="once", inner=live.transport(), clock=lambda: "2026-01-01T00:00:00Z"
        ),
        chat(),
    )
    with CassetteTransport(
        path, mode="rerecord", inner=live.transport(), clock=lambda: "2026-02-01T00:00:00Z"
    ) as transport:
        post(transport, chat())
    previous = tmp_path / "chat.http.previous.json"
    assert main(["cassette", "diff", str(previous), str(path)]) == 0
    shown = capsys.readouterr().out
    key = request_key("POST", URL, json.dumps(chat()).encode())
    assert "http diff" in shown and "0 added, 0 removed, 1 changed, 0 unchanged" in shown
    assert f"~ changed {key}#1  POST {URL}" in shown
    assert '-          "content": "answer 1 to hi"' in shown
    assert '+          "content": "answer 2 to hi"' in shown
    assert main(["cassette", "stale", str(tmp_path)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if "chat.http.json" in line]
    assert "http" in row and "2026-02-01" in row


@pytest.mark.parametrize("leave_early", [False, True])
def test_a_stream_the_network_cut_off_is_not_recorded_and_the_retry_takes_its_place(
    tmp_path: Path,
    streaming: StreamingServer,
    leave_early: bool,
) -> None:
    path, streaming.cuts = tmp_path / "stream.http.json", 1
    streaming.first_read.set()
    with CassetteTransport(path, mode="once") as transport:
        client = httpx.Client(transport=transport)
        if leave_early:  # the consumer stops after one line; the rest cannot be read
            with client.stream("POST", streaming.url, json=chat(stream=True)) as response:
                assert next(response.iter_lines()) == EVENTS[0]
        else:
            with pytest.raises(httpx.RemoteProtocolError):
                read_stream(client, streaming.url)
        assert read_stream(client, streaming.url) == EVENTS
    key = request_key("POST", streaming.url, json.dumps(chat(stream=True)).encode())
    interactions = json.loads(path.read_bytes())["interactions"]
    assert list(interactions) == [key] and len(interactions[key]) == 1  # key#1, the whole one
    assert interactions[key][0]["response"]["events"] == EVENTS


# -- what differs on every call is not a changed answer ------------------------------------------


class Volatile:
    """The network as a real API is: the same answer every time, under a new id, ``created``,
    ``system_fingerprint`` and request id; ``answer`` and ``stream`` say what it answers."""

    def __init__(self) -> None:
        self.calls, self.answer, self.stream = 0, "same answer", False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        n = self.calls
        if self.stream:
            opening = {
                "type": "message_start",
                "message": {"id": f"msg_{n}", "role": "assistant", "content": []},
            }
            chunk = {
                "id": f"chatcmpl-{n}",
                "created": 1000 + n,
                "system_fingerprint": f"fp_{n}",
                "choices": [{"delta": {"content": self.answer}}],
            }
            events = (
                f"event: message_start\ndata: {json.dumps(opening)}\n\n"
                f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
            )
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream", "request-id": f"req_{n}"},
                content=events.encode(),
            )
        return httpx.Response(
            200,
            headers={"x-request-id": f"req_{n}"},
            json={
                "id": f"chatcmpl-{n}",
                "created": 1000 + n,
                "system_fingerprint": f"fp_{n}",
                "choices": [{"message": {"content": self.answer}}],
            },
        )


@pytest.mark.parametrize("stream", [False, True])
def test_a_rerecord_that_gets_the_same_answer_under_new_ids_keeps_the_file_byte_for_byte(
    tmp_path: Path,
    stream: bool,
) -> None:
    path, live = tmp_path / "chat.http.json", Volatile()
    live.stream = stream
    clock = iter(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"])
    with CassetteTransport(
        path, mode="once", inner=httpx.MockTransport(live), clock=lambda: next(clock)
    ) as transport:
        post(transport, chat(stream=stream)).read()
    before = path.read_bytes()
    assert b"chatcmpl-1" in before and b"req_1" in before  # the file keeps them all
    with CassetteTransport(
        path, mode="rerecord", inner=httpx.MockTransport(live), clock=lambda: next(clock)
    ) as transport:
        post(transport, chat(stream=stream)).read()
    assert live.calls == 2 and path.read_bytes() == before  # asked again, nothing changed
    live.answer = "another answer"
    with CassetteTransport(
        path, mode="rerecord", inner=httpx.MockTransport(live), clock=lambda: next(clock)
    ) as transport:
        post(transport, chat(stream=stream)).read()
    assert b"another answer" in path.read_bytes() and b"chatcmpl-3" in path.read_bytes()


def test_the_stable_form_leaves_out_ids_times_and_request_ids_and_keeps_the_answer() -> None:
    body = HttpResponse(
        200,
        {"content-type": "application/json", "x-request-id": "req_1", "x-should-retry": "false"},
        "body",
        {
            "id": "chatcmpl-1",
            "created": 1,
            "system_fingerprint": "fp_1",
            "request_id": "req_1",
            "model": "m",
            "choices": [{"id": "kept"}],
        },
    )
    assert body.stable_json() == {
        "status": 200,
        "headers": {"content-type": "application/json", "x-should-retry": "false"},
        "body": {"model": "m", "choices": [{"id": "kept"}]},
    }  # only the top level's id goes
    events = HttpResponse(
        200,
        {"content-type": "text/event-stream", "request-id": "req_1"},
        "events",
        [
            'event: message_start\ndata: {"message": {"id": "msg_1", '
            '"model": "m"}, "type": "message_start"}',
            'data: {"created_at": 5, "response": {"id": "resp_1", "n": 1}}',
            "data: [DONE]",
            ": a comment",
        ],
    )
    assert events.stable_json()["events"] == [
        'event: message_start\ndata: {"message":{"model":"m"},"type":"message_start"}',
        'data: {"response":{"n":1}}',
        "data: [DONE]",
        ": a comment",
    ]
    assert events.stable_json()["headers"] == {"content-type": "text/event-stream"}
    text = HttpResponse(200, {}, "text", '{"id": 1}')
    assert text.stable_json() == text.to_json()  # a text body is compared as it is
