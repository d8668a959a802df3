"""The pytest plugin, run as a user runs it: ``pytester`` writes a test file, pytest runs it.

The live side is a real HTTP server on 127.0.0.1 (``Live``) that numbers the requests it
answers, so a test sees whether, and how often, the network was asked. Nothing here
reaches beyond loopback; the addresses that must be blocked are TEST-NET-1 (192.0.2.0/24)
and ``.invalid`` names, which go nowhere even when a guard fails.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from tests.loopback import Loopback

pytest_plugins = ["pytester"]

# pytester's in-process runs drop every module a run imported; these stay imported by this
# module, so every run and the transport's per-library miss classes share one copy of each.
SHARED = (anthropic, httpx, httpx2, openai)

# In-process runs find gradekit (a pytest11 plugin, so pytest marks it for assertion
# rewriting) already imported by this session: that warning is the only one let through.
INI = """[pytest]
filterwarnings =
    error
    ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning
"""

ASK = """
import httpx

def test_ask(gradekit_httpx_client: httpx.Client) -> None:
    for content in CONTENTS:
        response = gradekit_httpx_client.post("LIVE/v1/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": content}]})
        assert response.json()["choices"][0]["message"]["content"].startswith("answer ")
"""


class Live:
    """A real HTTP server on loopback answering every POST with a chat completion whose
    text numbers the request: ``answer 3 to hi`` is the third it received."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        live = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the real APIs: pools hold connections

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                live.asked.append(body)
                text = f"answer {len(live.asked)} to {body['messages'][-1]['content']}"
                data = json.dumps(
                    {
                        "id": f"chatcmpl-{len(live.asked)}",
                        "object": "chat.completion",
                        "created": 1767225600,
                        "model": body.get("model", "m"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text},
                            }
                        ],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads ``asked``, not a log."""

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def live() -> Iterator[Live]:
    server = Live()
    yield server
    server.close()


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project whose warnings are errors, as this repository's are."""
    pytester.makeini(INI)
    return pytester


def ask(project: pytest.Pytester, live: Live, *contents: str, name: str = "test_chat") -> None:
    """Write a test module whose ``test_ask`` posts each of ``contents`` through the
    ``gradekit_httpx_client`` fixture."""
    source = ASK.replace("LIVE", live.url).replace("CONTENTS", repr(contents or ("hi",)))
    project.makepyfile(**{name: source})


def run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run the project's tests in this process. Hypothesis's plugin would import hypothesis
    afresh in every run (pytester restores ``sys.modules`` after each): off."""
    return project.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args)


def answers(path: Path) -> list[str]:
    """The recorded answer texts of an HTTP cassette, in key order."""
    document = json.loads(path.read_text())
    return [
        recording["response"]["body"]["choices"][0]["message"]["content"]
        for recordings in document["interactions"].values()
        for recording in recordings
    ]


def http_cassette(
    project: pytest.Pytester, test: str = "test_ask", module: str = "test_chat"
) -> Path:
    return project.path / "cassettes" / module / f"{test}.http.json"


# --- the record modes -------------------------------------------------------------------


def test_once_records_and_then_the_default_replays_with_the_server_gone(
    project: pytest.Pytester,
    live: Live,
) -> None:
    ask(project, live, "hi")
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    assert len(live.asked) == 1
    assert answers(http_cassette(project)) == ["answer 1 to hi"]
    live.close()
    run(project).assert_outcomes(passed=1)
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    assert len(live.asked) == 1


def test_none_misses_loudly_with_the_command_that_records_and_never_asks_the_network(
    project: pytest.Pytester,
    live: Live,
) -> None:
    ask(project, live, "hi")
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*CassetteMiss: no recording*",
            "E * gradekit: record it with "
            "`pytest --gradekit-record-mode once test_chat.py::test_ask`",
        ]
    )
    assert live.asked == []
    assert not http_cassette(project).exists()


def test_a_miss_inside_the_openai_sdk_gets_the_command_on_the_sdks_own_error(
    project: pytest.Pytester,
    live: Live,
) -> None:
    project.makepyfile(
        test_sdk=f"""
        import openai

        def test_sdk(gradekit_httpx_client):
            client = openai.OpenAI(api_key="k", base_url="{live.url}/v1", max_retries=1,
                                   http_client=gradekit_httpx_client)
            messages = [{{"role": "user", "content": "hi"}}]
            client.chat.completions.create(model="m", messages=messages)
    """
    )
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*gradekit.CassetteMiss: no recording for this request in *test_sdk.http.json",
            "E * openai.APIConnectionError: Connection error.",
            "E * gradekit: record it with "
            "`pytest --gradekit-record-mode once test_sdk.py::test_sdk`",
        ]
    )
    assert live.asked == []


def test_rerecord_asks_the_live_side_again_and_keeps_the_previous_file(
    project: pytest.Pytester,
    live: Live,
) -> None:
    ask(project, live, "hi")
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    run(project, "--gradekit-record-mode", "rerecord").assert_outcomes(passed=1)
    assert len(live.asked) == 2
    path = http_cassette(project)
    assert answers(path) == ["answer 2 to hi"]
    assert answers(path.with_name("test_ask.http.previous.json")) == ["answer 1 to hi"]


def test_a_failing_rerecord_keeps_what_it_did_not_reach(
    project: pytest.Pytester,
    live: Live,
) -> None:
    ask(project, live, "a", "b")
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    project.makepyfile(
        test_chat=ASK.replace("LIVE", live.url).replace("CONTENTS", "('a',)")
        + "    raise AssertionError('stopped half-way')\n"
    )
    run(project, "--gradekit-record-mode", "rerecord").assert_outcomes(failed=1)
    assert sorted(answers(http_cassette(project))) == ["answer 2 to b", "answer 3 to a"]


# --- where the cassettes are ------------------------------------------------------------


def test_the_marker_names_the_cassette_and_tests_can_share_it(
    project: pytest.Pytester,
    live: Live,
) -> None:
    project.makepyfile(
        test_marked=f"""
        import pytest

        @pytest.mark.gradekit_cassette("refund-policy")
        def test_first(gradekit_httpx_client):
            gradekit_httpx_client.post("{live.url}/v1", json={{"messages": [{{"content": "a"}}]}})

        @pytest.mark.gradekit_cassette("refund-policy")
        def test_second(gradekit_httpx_client):
            gradekit_httpx_client.post("{live.url}/v1", json={{"messages": [{{"content": "a"}}]}})
    """
    )
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=2)
    path = project.path / "cassettes" / "test_marked" / "refund-policy.http.json"
    assert answers(path) == ["answer 1 to a"] and len(live.asked) == 1
    assert json.loads(path.read_text())["case"] == "refund-policy"


@pytest.mark.parametrize("args", ['"../escape"', '"x.json"', "", '"a", "b"'])
def test_a_marker_without_one_plain_name_is_an_error_with_the_fix(
    project: pytest.Pytester,
    args: str,
) -> None:
    project.makepyfile(
        test_marked=f"""
        import pytest

        @pytest.mark.gradekit_cassette({args})
        def test_it(gradekit_httpx_client):
            pass
    """
    )
    result = run(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ['*UsageError*write @pytest.mark.gradekit_cassette("refund-policy")']
    )


def test_a_parametrized_or_class_test_gets_a_safe_file_name_of_its_own(
    project: pytest.Pytester,
    live: Live,
) -> None:
    project.makepyfile(
        test_names=f"""
        import pytest

        @pytest.mark.parametrize("path", ["a/b c", "x"], ids=["a/b c", "x" * 150])
        def test_it(gradekit_httpx_client, path):
            gradekit_httpx_client.post("{live.url}/v1", json={{"messages": [{{"content": path}}]}})

        class TestGroup:
            def test_it(self, gradekit_httpx_client):
                body = {{"messages": [{{"content": "c"}}]}}
                gradekit_httpx_client.post("{live.url}/v1", json=body)
    """
    )
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=3)
    names = sorted(p.name for p in (project.path / "cassettes" / "test_names").iterdir())
    assert names[:2] == ["TestGroup.test_it.http.json", "test_it[a-b-c].http.json"]
    assert len(names) == 3 and len(names[2]) < 120 and names[2].startswith("test_it[xxx")


def test_the_ini_option_moves_the_cassette_folder(project: pytest.Pytester, live: Live) -> None:
    project.makeini(INI + "gradekit_cassette_dir = recorded\n")
    ask(project, live, "hi")
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    assert (project.path / "recorded" / "test_chat" / "test_ask.http.json").exists()


# --- the network in replay-only mode ----------------------------------------------------


BLOCKED = """
import socket
import threading

import pytest

def test_create_connection(gradekit_network):
    socket.create_connection(("192.0.2.1", 80), timeout=0.5)

def test_dns(gradekit_network):
    socket.getaddrinfo("gradekit-test.invalid", 443)

def test_connect(gradekit_network):
    with socket.socket() as sock:
        sock.settimeout(0.5)
        sock.connect(("192.0.2.1", 80))

def test_loopback(gradekit_network):
    socket.create_connection(("127.0.0.1", PORT), timeout=1).close()

def test_a_thread(gradekit_network):
    caught = []

    def reach():
        try:
            socket.create_connection(("192.0.2.1", 80), timeout=0.5)
        except BaseException as exc:
            caught.append(str(exc))

    thread = threading.Thread(target=reach)
    thread.start()
    thread.join()
    assert caught and caught[0].startswith("gradekit blocked the network"), caught

def test_a_unix_socket_is_not_network(gradekit_network, tmp_path):
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(str(tmp_path / "s"))
        server.listen()
        client.connect(str(tmp_path / "s"))

def test_a_test_without_gradekit_is_left_alone():
    socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
"""


def test_none_mode_blocks_dns_and_connections_with_how_to_record(
    project: pytest.Pytester,
    live: Live,
) -> None:
    project.makepyfile(test_net=BLOCKED.replace("PORT", str(live.port)))
    result = run(project)
    result.assert_outcomes(failed=4, passed=3)
    result.stdout.fnmatch_lines_random(
        [
            "E * Failed: gradekit blocked the network (socket.getaddrinfo 192.0.2.1:80) in "
            "test_net.py::test_create_connection: *Record what is missing with "
            "`pytest --gradekit-record-mode once test_net.py::test_create_connection`*",
            "E * Failed: gradekit blocked the network "
            "(socket.getaddrinfo gradekit-test.invalid:443)*",
            "E * Failed: gradekit blocked the network (socket.connect 192.0.2.1:80)*",
            "E * Failed: gradekit blocked the network "
            f"(socket.getaddrinfo 127.0.0.1:{live.port})*gradekit_allowed_hosts*",
        ]
    )


def test_the_recording_modes_leave_the_network_open(project: pytest.Pytester, live: Live) -> None:
    project.makepyfile(test_net=BLOCKED.replace("PORT", str(live.port)))
    run(project, "--gradekit-record-mode", "once", "-k", "loopback").assert_outcomes(passed=1)


def test_an_allowed_host_and_port_is_reachable_and_no_other_port(
    project: pytest.Pytester,
    live: Live,
) -> None:
    project.makeconftest(f"""
        import pytest

        @pytest.fixture
        def gradekit_allowed_hosts():
            return ("127.0.0.1:{live.port}", "[::1]")
    """)
    project.makepyfile(
        test_net=f"""
        import socket

        def test_allowed(gradekit_network):
            socket.create_connection(("127.0.0.1", {live.port}), timeout=1).close()

        def test_another_port(gradekit_network):
            socket.create_connection(("127.0.0.1", {live.port + 1 if live.port < 65535 else 1}))
    """
    )
    result = run(project)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*gradekit blocked the network (socket.getaddrinfo 127.0.0.1:*"])


# --- unplayed recordings ----------------------------------------------------------------


def test_unplayed_recordings_are_counted_listed_and_fail_when_asked(
    project: pytest.Pytester,
    live: Live,
) -> None:
    ask(project, live, "a", "b")
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    path = http_cassette(project)
    [key_b] = [
        key
        for key, [recorded] in json.loads(path.read_text())["interactions"].items()
        if recorded["request"]["body"]["messages"][0]["content"] == "b"
    ]
    ask(project, live, "a")
    quiet = run(project)
    quiet.assert_outcomes(passed=1)
    quiet.stdout.fnmatch_lines(["gradekit: 1 recording(s) never played; --gradekit-unplayed*"])
    listed = run(project, "--gradekit-unplayed")
    listed.assert_outcomes(passed=1)
    listed.stdout.fnmatch_lines(
        [
            "*= gradekit: 1 recording(s) never played =*",
            f"test_chat.py::test_ask  {path}  {key_b}#1",
        ]
    )
    project.makepyfile(
        test_chat=ASK.replace("LIVE", live.url).replace("CONTENTS", "('a',)")
        + "    raise AssertionError('stopped half-way')\n"
    )
    stopped = run(project, "--gradekit-unplayed")
    stopped.assert_outcomes(failed=1)
    assert "never played" not in stopped.stdout.str()  # it stopped early: no news in that
    ask(project, live, "a")
    failed = run(project, "--gradekit-fail-unplayed")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [
            "*test_chat.py::test_ask left 1 recording(s) unplayed (--gradekit-fail-unplayed):",
            f"*{path}: {key_b}#1",
            "*drop them with `pytest --gradekit-record-mode rerecord test_chat.py::test_ask`",
        ]
    )
    dropped = run(project, "--gradekit-record-mode", "rerecord", "--gradekit-fail-unplayed")
    dropped.assert_outcomes(passed=1)  # what a rerecord leaves unplayed, it drops
    assert "never played" not in dropped.stdout.str()
    assert answers(path) == ["answer 3 to a"] and key_b not in path.read_text()


# --- the provider fixture and the overridable fixtures ----------------------------------


PROVIDER = """
def test_provider(gradekit_provider):
    assert gradekit_provider.complete("hi").startswith("answer ")
"""

PROMPTS = """
def test_provider(gradekit_provider):
    for prompt in PROMPTS:
        gradekit_provider.complete(prompt)
"""

LIVE_PROVIDER = """
import pytest

from gradekit import OpenAICompatible

@pytest.fixture
def gradekit_live_provider():
    return OpenAICompatible(model="m", base_url="LIVE/v1")
"""


def test_the_provider_records_from_the_environment_and_replays_without_it(
    project: pytest.Pytester,
    live: Live,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project.makepyfile(test_agent=PROVIDER)
    monkeypatch.setenv("GRADEKIT_PROVIDER", "openai-compatible")
    monkeypatch.setenv("GRADEKIT_BASE_URL", f"{live.url}/v1")
    monkeypatch.setenv("GRADEKIT_MODEL", "m")
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    path = project.path / "cassettes" / "test_agent" / "test_provider.json"
    [entry] = json.loads(path.read_text())["entries"].values()
    assert entry["response"] == "answer 1 to hi" and len(live.asked) == 1
    for name in ("GRADEKIT_PROVIDER", "GRADEKIT_BASE_URL", "GRADEKIT_MODEL"):
        monkeypatch.delenv(name)
    run(project).assert_outcomes(passed=1)
    assert len(live.asked) == 1


def test_the_provider_misses_in_none_mode_with_the_command_that_records(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_agent=PROVIDER)
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*CassetteMiss: no recording*",
            "E * gradekit: record it with "
            "`pytest --gradekit-record-mode once test_agent.py::test_provider`",
        ]
    )


@pytest.mark.parametrize(
    ("ending", "kept"),
    [("", ["a"]), ("    assert False\n", ["a", "b"])],
    ids=["passing-drops-b", "failing-keeps-b"],
)
def test_a_provider_rerecord_drops_what_it_no_longer_asks_only_when_it_passes(
    project: pytest.Pytester,
    live: Live,
    ending: str,
    kept: list[str],
) -> None:
    project.makeconftest(LIVE_PROVIDER.replace("LIVE", live.url))
    project.makepyfile(test_agent=PROMPTS.replace("PROMPTS", "['a', 'b']"))
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    project.makepyfile(test_agent=PROMPTS.replace("PROMPTS", "['a']") + ending)
    run(project, "--gradekit-record-mode", "rerecord")
    path = project.path / "cassettes" / "test_agent" / "test_provider.json"
    entries = json.loads(path.read_text())["entries"].values()
    assert sorted(entry["prompt"] for entry in entries) == kept


def test_the_configuration_fixtures_can_be_overridden(
    project: pytest.Pytester,
    live: Live,
) -> None:
    project.makeconftest(f"""
        import pytest

        from gradekit import OpenAICompatible

        @pytest.fixture
        def gradekit_record_mode():
            return "once"

        @pytest.fixture
        def gradekit_cassette_path(request):
            return request.config.rootpath / "recordings" / "agent.json"

        @pytest.fixture
        def gradekit_live_provider():
            return OpenAICompatible(model="m", base_url="{live.url}/v1")
    """)
    project.makepyfile(
        test_agent=PROVIDER
        + f"""
def test_http(gradekit_httpx_client):
    gradekit_httpx_client.post("{live.url}/v1", json={{"messages": [{{"content": "x"}}]}})
"""
    )
    run(project).assert_outcomes(passed=2)
    folder = project.path / "recordings"
    assert sorted(p.name for p in folder.iterdir()) == ["agent.http.json", "agent.json"]
    assert json.loads((folder / "agent.json").read_text())["case"] == "agent"
    assert len(live.asked) == 2


def test_provider_recordings_never_played_are_listed(
    project: pytest.Pytester,
    live: Live,
) -> None:
    project.makeconftest(LIVE_PROVIDER.replace("LIVE", live.url))
    project.makepyfile(test_agent=PROMPTS.replace("PROMPTS", "['a', 'b']"))
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    project.makepyfile(test_agent=PROVIDER.replace('"hi"', '"a"'))
    result = run(project, "--gradekit-unplayed")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_agent.py::test_provider  *test_provider.json  *"])


# --- every client fixture ---------------------------------------------------------------


CLIENTS = [
    pytest.param("gradekit_httpx_client", False, id="httpx"),
    pytest.param("gradekit_httpx2_client", False, id="httpx2"),
    pytest.param("gradekit_async_httpx_client", True, id="async-httpx-async-with"),
    pytest.param("gradekit_async_httpx_client", False, id="async-httpx-left-open"),
    pytest.param("gradekit_async_httpx2_client", True, id="async-httpx2-async-with"),
    pytest.param("gradekit_async_httpx2_client", False, id="async-httpx2-left-open"),
]


@pytest.mark.parametrize(("fixture", "closed_in_the_loop"), CLIENTS)
def test_every_client_fixture_records_once_and_replays_offline(
    project: pytest.Pytester,
    live: Live,
    fixture: str,
    closed_in_the_loop: bool,
) -> None:
    body = '{"messages": [{"content": "hi"}]}'
    if "async" in fixture:
        use = "async with client:\n            " if closed_in_the_loop else ""
        source = f"""
import asyncio

def test_ask({fixture}):
    async def go(client):
        {use}response = await client.post("{live.url}/v1", json={body})
        assert response.json()["choices"][0]["message"]["content"] == "answer 1 to hi"

    asyncio.run(go({fixture}))
"""
    else:
        source = f"""
def test_ask({fixture}):
    response = {fixture}.post("{live.url}/v1", json={body})
    assert response.json()["choices"][0]["message"]["content"] == "answer 1 to hi"
"""
    project.makepyfile(test_chat=source)
    run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
    live.close()
    run(project).assert_outcomes(passed=1)
    assert answers(http_cassette(project)) == ["answer 1 to hi"] and len(live.asked) == 1


def test_openai_and_anthropic_in_one_test_share_one_http_cassette(
    project: pytest.Pytester,
) -> None:
    with Loopback() as server:
        project.makepyfile(
            test_two=f"""
            import anthropic
            import openai

            def test_two(gradekit_httpx_client, gradekit_httpx2_client):
                gpt = openai.OpenAI(api_key="k", base_url="{server.openai_url}",
                                    http_client=gradekit_httpx_client, max_retries=0)
                claude = anthropic.Anthropic(api_key="k", base_url="{server.url}",
                                             http_client=gradekit_httpx2_client, max_retries=0)
                said = gpt.chat.completions.create(
                    model="m", messages=[{{"role": "user", "content": "hi"}}])
                wrote = claude.messages.create(
                    model="m", max_tokens=8, messages=[{{"role": "user", "content": "hi"}}])
                assert said.choices[0].message.content == "Hello from loopback."
                assert wrote.content[0].text == "Hello from loopback."
        """
        )
        run(project, "--gradekit-record-mode", "once").assert_outcomes(passed=1)
        assert len(server.requests) == 2
    run(project).assert_outcomes(passed=1)
    path = http_cassette(project, "test_two", "test_two")
    assert len(json.loads(path.read_text())["interactions"]) == 2


def test_the_sync_and_async_transports_do_not_share_a_test(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_both="""
        def test_both(gradekit_httpx_client, gradekit_async_httpx_client):
            pass
    """
    )
    result = run(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*UsageError*use the sync clients or the async ones*"])


def test_the_plugin_is_installed_as_a_pytest11_entry_point(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(
        [
            "gradekit cassettes:",
            "  --gradekit-record-mode={once,rerecord,none}",
            "*--gradekit-unplayed*",
            "*--gradekit-fail-unplayed*",
            "*gradekit_cassette_dir*",
        ]
    )
