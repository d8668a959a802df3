"""The HTTP side of the kit's providers: the clients ``Recorder``, ``Replay`` and ``Traced``
hand to the official SDKs, with the real ``openai`` and ``anthropic`` packages against the
loopback server; and the shipped SDK example, graded offline from its real recording.

It builds the pytest plugin's private ``_PlayedReplay`` (``gradekit._pytest``) on purpose:
the replay a test gets, not a case's."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import anthropic
import openai
import pytest

from gradekit import (
    Cassette,
    CassetteMiss,
    FakeProvider,
    Recorder,
    Replay,
    SecretLeak,
    Traced,
    UsageError,
    request_key,
)
from grader.cli import main
from tests.loopback import Loopback, answer

MODEL = "loopback-model"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "openai-sdk"
RUBRIC = ROOT / "rubric" / "bootcamp.toml"


pytestmark = pytest.mark.usefixtures("kit_lab_restored")  # the example has its own lab


def _ask(client: openai.OpenAI, question: str, **options: object) -> str:
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": question}], **options
    )  # type: ignore[call-overload]
    return str(reply.choices[0].message.content)


def _openai(url: str, http_client: object, **options: object) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=url,
        api_key="sk-local",
        http_client=http_client,  # type: ignore[arg-type]
        max_retries=0,
        **options,  # type: ignore[arg-type]
    )


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_recorder_records_sdk_requests_beside_its_cassette_and_a_replay_serves_them(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "cassettes" / "refund.json"
    with Loopback(answer("Refunds ", "within 30 days."), answer("Shipping is free.")) as server:
        with Recorder(FakeProvider(str.upper), cassette) as recorder:
            client = _openai(server.openai_url, recorder.http_client())
            live = [_ask(client, "refunds?"), _ask(client, "shipping?", temperature=0.2)]
        asked = len(server.requests)
    http = tmp_path / "cassettes" / "refund.http.json"
    document = json.loads(http.read_text())
    assert document["format"] == "gradekit.http-cassette/1" and document["case"] == "refund"
    assert len(document["interactions"]) == asked == 2
    assert not cassette.exists()  # nothing asked of complete(): no empty cassette left behind
    replayed = _openai(server.openai_url, Replay(cassette).http_client())
    assert [_ask(replayed, "refunds?"), _ask(replayed, "shipping?", temperature=0.2)] == live


def test_a_recorder_keeps_a_cassette_that_was_there_even_when_nothing_was_recorded(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "case.json"
    with Recorder(FakeProvider(str.upper), cassette) as recorder:
        recorder.complete("a prompt")
    before = cassette.read_bytes()
    with Recorder(FakeProvider(str.upper), cassette):
        pass
    assert cassette.read_bytes() == before
    assert not (tmp_path / "case.http.json").exists()  # no SDK client: no HTTP cassette


def test_closing_a_client_leaves_the_recorders_transport_open_for_the_next_one(
    tmp_path: Path,
) -> None:
    """``with openai.OpenAI(...)`` per call must not end the recording."""
    cassette = tmp_path / "case.json"
    with (
        Loopback(answer("one"), answer("two")) as server,
        Recorder(FakeProvider(str.upper), cassette) as recorder,
    ):
        with _openai(server.openai_url, recorder.http_client()) as first:
            assert _ask(first, "first?") == "one"
        with _openai(server.openai_url, recorder.http_client()) as second:
            assert _ask(second, "second?") == "two"
    interactions = json.loads((tmp_path / "case.http.json").read_text())["interactions"]
    assert len(interactions) == 2


def test_sync_and_async_clients_of_one_recorder_count_one_request_together(tmp_path: Path) -> None:
    """The same request asked once sync and once async is its first and second recording."""
    cassette = tmp_path / "case.json"

    async def ask_async(client: openai.AsyncOpenAI) -> str:
        reply = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "again?"}]
        )
        return str(reply.choices[0].message.content)

    with (
        Loopback(answer("first"), answer("second")) as server,
        Recorder(FakeProvider(str.upper), cassette) as recorder,
    ):
        assert _ask(_openai(server.openai_url, recorder.http_client()), "again?") == "first"
        async_client = openai.AsyncOpenAI(
            base_url=server.openai_url,
            api_key="sk-local",
            http_client=recorder.async_http_client("httpx2"),
            max_retries=0,
        )
        assert asyncio.run(ask_async(async_client)) == "second"
    (recorded,) = json.loads((tmp_path / "case.http.json").read_text())["interactions"].values()
    assert len(recorded) == 2
    replay = Replay(cassette)
    async_replay = openai.AsyncOpenAI(
        base_url=server.openai_url,
        api_key="sk-local",
        http_client=replay.async_http_client("httpx2"),
        max_retries=0,
    )
    assert asyncio.run(ask_async(async_replay)) == "first"
    assert _ask(_openai(server.openai_url, replay.http_client()), "again?") == "second"
    with pytest.raises(openai.APIConnectionError) as raised:
        _ask(_openai(server.openai_url, replay.http_client()), "again?")
    assert isinstance(raised.value.__cause__, CassetteMiss)
    assert "asked:   3 times; recorded twice" in str(raised.value.__cause__)


def test_a_replay_miss_reaches_the_sdk_caller_as_a_cassette_miss_naming_the_record_command(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "sql-explain.json"
    with (
        Loopback(answer("recorded")) as server,
        Recorder(FakeProvider(str.upper), cassette) as recorder,
    ):
        _ask(_openai(server.openai_url, recorder.http_client()), "q", temperature=0.2)
    client = _openai(server.openai_url, Replay(cassette).http_client())
    with pytest.raises(openai.APIConnectionError) as raised:
        _ask(client, "q", temperature=0.7)
    miss = raised.value.__cause__
    assert isinstance(miss, CassetteMiss)
    assert "temperature: 0.7 != 0.2" in str(miss)
    assert "`make record ARGS='--case sql-explain'`" in str(miss)
    assert "--gradekit-record-mode" not in str(miss)


def test_anthropic_records_and_replays_through_the_httpx2_client(tmp_path: Path) -> None:
    cassette = tmp_path / "case.json"

    def ask(http_client: object) -> str:
        claude = anthropic.Anthropic(
            base_url=server.url,
            api_key="sk-ant-local",
            http_client=http_client,  # type: ignore[arg-type]
            max_retries=0,
        )
        message = claude.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi?"}]
        )
        return "".join(block.text for block in message.content if block.type == "text")

    with (
        Loopback(answer("Hello ", "there.")) as server,
        Recorder(FakeProvider(str.upper), cassette) as recorder,
    ):
        live = ask(recorder.http_client("httpx2"))
    assert ask(Replay(cassette).http_client("httpx2")) == live == "Hello there."


def test_traced_writes_one_record_per_request_keyed_by_what_was_sent(tmp_path: Path) -> None:
    cassette, trace = tmp_path / "case.json", tmp_path / "trace.jsonl"
    with Loopback(answer("yes")) as server, Recorder(FakeProvider(str.upper), cassette) as recorder:
        _ask(_openai(server.openai_url, Traced(recorder, trace).http_client()), "q")
        sent = server.requests[0]
    llm = Traced(Replay(cassette, name="replayed"), trace)
    client = _openai(server.openai_url, llm.http_client())
    assert _ask(client, "q") == "yes"
    with pytest.raises(openai.APIConnectionError):
        _ask(client, "another")
    first, served, missed = _records(trace)
    expected = request_key(
        "POST", f"{server.openai_url}/chat/completions", json.dumps(sent.body).encode()
    )
    assert first["key"] == served["key"] == expected
    assert (first["provider"], served["provider"]) == ("fake", "replayed")
    assert served["ok"] is True and served["error"] is None
    assert missed["ok"] is False and missed["error"] == "CassetteMiss"
    assert missed["key"] != expected


class _CompleteOnly:
    """A provider of the student's own: ``complete`` and a name, no HTTP side."""

    name = "own"

    def complete(self, prompt: str) -> str:
        return prompt.upper()


def test_a_provider_without_an_http_side_is_told_which_ones_have_one() -> None:
    with pytest.raises(UsageError, match=r"no HTTP side .*record, run and grade all have one"):
        Traced(_CompleteOnly()).http_client()


def test_clients_are_httpx_or_httpx2_and_the_transport_is_the_providers(tmp_path: Path) -> None:
    replay = Replay(tmp_path / "case.json")
    with pytest.raises(UsageError, match="not 'requests'"):
        replay.http_client("requests")  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="sets the transport itself"):
        replay.http_client(transport=object())
    with pytest.raises(UsageError, match="a Cassette value, not a file"):
        Replay(Cassette(case="x")).http_client()


def test_a_recorder_refuses_to_write_its_live_providers_key_in_a_request(tmp_path: Path) -> None:
    key = f"sk-live-{uuid.uuid4()}"

    class Keyed(FakeProvider):
        def credentials(self) -> tuple[str, ...]:
            return (key,)

    cassette = tmp_path / "case.json"
    with (
        Loopback(answer("ok")) as server,
        Recorder(Keyed(str.upper), cassette) as recorder,
        pytest.raises(SecretLeak, match="the live provider's API key"),
    ):
        _ask(_openai(server.openai_url, recorder.http_client()), f"my key is {key}")
    http = tmp_path / "case.http.json"
    assert not http.exists() or key not in http.read_text()


def test_the_shipped_sdk_example_replays_offline_from_its_real_recording(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``gradekit run`` on examples/openai-sdk: no server on 127.0.0.1:8080 is needed, and
    every answer is a recorded SmolLM2 message."""
    assert main(["run", "--root", str(EXAMPLE), "--rubric", str(RUBRIC)]) == 0
    printed = capsys.readouterr().out
    recorded = set()
    for path in sorted((EXAMPLE / "cassettes").glob("*.http.json")):
        for interactions in json.loads(path.read_text())["interactions"].values():
            for interaction in interactions:
                response = interaction["response"]
                assert response["headers"]["content-type"].startswith(
                    ("application/json", "text/event-stream")
                )
                if "body" in response:
                    recorded.add(response["body"]["choices"][0]["message"]["content"].strip())
                    assert response["body"]["model"] == "smollm2"
    sections = [part.split("\n", 1) for part in printed.split("## ")[1:]]
    assert len(sections) == len(list((EXAMPLE / "cassettes").glob("*.http.json"))) == 4
    assert all(answer_text.strip() for _, answer_text in sections)
    assert recorded  # the plans and verdicts came from the model, not from a hand


def _example_copy(copy: Path) -> Path:
    for path in EXAMPLE.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = copy / path.relative_to(EXAMPLE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return copy


def test_an_sdk_wrapped_miss_is_reported_as_the_miss_with_its_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = _example_copy(tmp_path / "sdk")
    agent = copy / "lab" / "agent.py"
    agent.write_text(
        agent.read_text().replace("http://127.0.0.1:8080/v1", "https://api.openai.com/v1")
    )
    assert (
        main(["run", "--root", str(copy), "--rubric", str(RUBRIC), "--case", "refund-policy"]) == 3
    )
    said = capsys.readouterr().err
    assert said.startswith("CassetteMiss (raised as openai.APIConnectionError): ")
    assert 'host: "api.openai.com" != "127.0.0.1:8080"' in said
    assert "`gradekit record --case refund-policy`" in said  # the example has no Makefile


@pytest.mark.slow
def test_the_shipped_sdk_example_grades_offline_with_one_digest_under_two_labels(
    tmp_path: Path,
) -> None:
    """The real recording, served through the grader's parent: the same report whatever the
    provider is called, and every SDK request of the primary run served and traced."""
    digests, totals = [], []
    for label in ("smollm2-local", "another-vendor"):
        out = tmp_path / label
        assert (
            main(
                [
                    "grade",
                    str(EXAMPLE),
                    "--rubric",
                    str(RUBRIC),
                    "--out",
                    str(out),
                    "--label",
                    label,
                    "--quiet",
                ]
            )
            == 0
        )
        report = json.loads((out / "openai-sdk" / "report.json").read_text())
        digests.append(report["digest"])
        totals.append(report["total"])
        points = {c["id"]: c["points"] for c in report["criteria"]}
        assert (points["contract_stability"], points["loud_failure"], points["tracing"]) == (
            "30.00",
            "25.00",
            "20.00",
        )
        assert report["findings"] == []
        assert sorted(name for name in report["inputs"] if name.endswith(".http.json")) == [
            f"cassettes/{case}.http.json"
            for case in ("flaky-grade", "incident-summary", "refund-policy", "sql-explain")
        ]
    assert digests[0] == digests[1]
    assert totals[0] == totals[1]


def test_the_pytest_plugins_provider_names_its_own_flag_in_an_http_miss(tmp_path: Path) -> None:
    """``gradekit_provider``'s replay is a test's, not a case's: its misses say how pytest
    records, never `make record ARGS='--case <test name>'`."""
    from gradekit._pytest import _PlayedReplay

    client = _openai(
        "http://127.0.0.1:9/v1", _PlayedReplay(tmp_path / "test_x.json", set()).http_client()
    )
    with pytest.raises(openai.APIConnectionError) as raised:
        _ask(client, "q")
    said = str(raised.value.__cause__)
    assert "`pytest --gradekit-record-mode once`" in said
    assert "record ARGS=" not in said and "--case" not in said


@pytest.mark.slow
def test_an_sdk_only_agent_is_told_why_it_cannot_claim_two_providers(tmp_path: Path) -> None:
    """HTTP cassettes do not name who answered: a second folder of them (here, a copy of the
    first) earns nothing, and the evidence says why instead of calling it a copy."""
    copy = _example_copy(tmp_path / "sdk")
    manifest = copy / "pyproject.toml"
    manifest.write_text(
        manifest.read_text().replace(
            'student = "gradekit-reference-sdk"',
            'student = "gradekit-reference-sdk"\nstretch = ["two-providers"]\n'
            'second_cassettes = "cassettes-llm"',
        )
    )
    (copy / "cassettes-llm").mkdir()
    for path in (copy / "cassettes").glob("*.http.json"):
        (copy / "cassettes-llm" / path.name).write_bytes(path.read_bytes())
    out = tmp_path / "grades"
    assert main(["grade", str(copy), "--rubric", str(RUBRIC), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "sdk" / "report.json").read_text())
    stretch = next(c for c in report["criteria"] if c["id"] == "stretch_goal")
    assert stretch["points"] == "0.00"
    details = " ".join(check["detail"] for check in stretch["checks"])
    assert "holds only HTTP cassettes" in details
    assert not any("is missing" in finding for finding in report["findings"])
