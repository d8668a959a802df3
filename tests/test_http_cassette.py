"""HTTP cassettes: the request key, the format, and the transport that records and replays.

The live side is httpx's own ``MockTransport`` (a handler that counts what reached it) or,
for streams, a real ``http.server`` on loopback: never a mock of gradekit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gradekit import CassetteMiss, CassetteTransport, HttpCassette, request_key
from gradekit._http import HTTP_CASSETTE

URL = "http://127.0.0.1:8080/v1/chat/completions"


def chat(temperature: float = 0.2, content: str = "hi", **extra: object) -> dict[str, object]:
    return {"model": "m", "temperature": temperature,
            "messages": [{"role": "user", "content": content}], **extra}


class Live:
    """The network: answers every request with a chat completion echoing its content."""

    def __init__(self) -> None:
        self.asked: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(request)
        body = json.loads(request.content)
        asked = body["messages"][-1]["content"] if "messages" in body else "?"
        text = f"answer {len(self.asked)} to {asked}"
        return httpx.Response(200, headers={"x-request-id": "req_1", "set-cookie": "s=1"},
                              json={"choices": [{"message": {"content": text}}]})

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
    assert len(live.asked) == 1 and recorded.json()["choices"][0]["message"]["content"] \
        == "answer 1 to hi"
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
    assert interaction["response"]["headers"] == {"content-type": "application/json",
                                                  "x-request-id": "req_1"}


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
        assert post(transport, chat(content="a")).json()["choices"][0]["message"]["content"] \
            == "answer 1 to a"
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
    assert f"POST {URL} (key {request_key('POST', URL, json.dumps(chat(0.7, 'a')).encode())})" \
        in message
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
    assert request_key("POST", URL, spaced) != request_key("POST", URL,
                                                           json.dumps(chat(0.3)).encode())
    assert request_key("post", "HTTP://127.0.0.1:8080/v1/chat/completions", spaced) \
        == request_key("POST", URL, spaced)
    assert request_key("GET", "https://API.example.com:443/v1/models?b=2&a=1", b"") \
        == request_key("GET", "https://api.example.com/v1/models?a=1&b=2", b"")


def test_importing_gradekit_imports_no_http_library() -> None:
    code = "import sys, gradekit; print(sorted({'httpx', 'httpx2'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_an_http_cassette_value_counts_its_interactions() -> None:
    assert len(HttpCassette("c")) == 0
