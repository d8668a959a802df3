"""SDK agents graded end to end: recorded with the real openai and anthropic SDKs against the
loopback server (tests/loopback.py), the server stopped, then graded offline.

One module fixture records every submission below once (``gradekit record``, no provider
configured, a fake API key in the environment), stops the server, and grades them all in
one ``gradekit grade`` batch. Each submission is the openai-sdk example or a variant of it
with one property: another SDK, async, an edited request, a swallowed error, a broken or
linked HTTP cassette, a second cassette set. The sandbox's HTTP side (misses in the SDK's
exception chain, retries, repeated requests) runs one "zoo" agent through ``Sandbox.run``,
and the parent's ``_serve_http`` is driven directly with requests a harness never sends.

It drives the sandbox's private ``_Case``, ``_Run`` and ``_Talk``
(``grader.sandbox._sandbox``) on purpose: no harness sends the requests that test the
parent's HTTP side.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest

from gradekit import FakeProvider, HttpCassette, Recorder
from gradekit.internal import HTTP_CASSETTE, HttpRequest
from grader import Limits, RunResult
from grader.cli import main
from grader.grading._reading import _http_cassettes
from grader.rubric import KIT_RUBRIC, load_cases
from grader.sandbox import Child, Layout, ProtocolError, RunPlan, Sandbox, Serving, wall_named
from grader.sandbox._sandbox import _Case, _Run, _Talk
from tests.conftest import require_namespaces
from tests.loopback import Loopback, echo
from tests.submissions import kept_modules

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "openai-sdk"
EXAMPLE_URL = "http://127.0.0.1:8080/v1"  # the example's BASE_URL constant
CASES = tuple(case.id for case in load_cases(KIT_RUBRIC))
FULL = {"contract_stability": "30.00", "loud_failure": "25.00", "tracing": "20.00"}
FAILURES = """\
# Failures

## The grader's SDK requests missed after I changed the temperature
- Symptom: every case lost contract stability with a CassetteMiss in its exception chain.
- Cause: the sampling settings are part of each request's key, so the edit changed the keys.
- Fix: re-recorded the cases with `gradekit record --rerecord` and committed the cassettes.

## Boundaries
The recordings come from the loopback server, not a real model.
"""

# ---- the submissions -------------------------------------------------------------------

MANIFEST = """\
[project]
name = "sdk-agent"
version = "0.1.0"

[tool.gradekit]
agent = "lab.agent:run"
cassettes = "cassettes"
replay = "gradekit:Replay"
failures = "FAILURES.md"
"""

ANTHROPIC_AGENT = '''\
"""The lab's plan-then-answer loop on the official anthropic SDK."""

import os

import anthropic

from gradekit import Traced

BASE_URL = "{url}"


def run(provider, task):
    llm = Traced(provider)
    client = anthropic.Anthropic(base_url=BASE_URL,
                                 api_key=os.environ.get("ANTHROPIC_API_KEY") or "not-needed",
                                 http_client=llm.http_client("httpx2"), max_retries=0)
    plan = _say(client, "Plan, in three steps, the answer to: " + task)
    return _say(client, "Task: " + task + "\\nPlan: " + plan + "\\nNow answer it.")


def _say(client, text):
    reply = client.messages.create(model="claude-loopback", max_tokens=200,
                                   messages=[{{"role": "user", "content": text}}])
    return "".join(block.text for block in reply.content if block.type == "text").strip()
'''

ASYNC_AGENT = '''\
"""The lab's loop on openai.AsyncOpenAI: a plan, then the answer streamed."""

import asyncio
import os

import openai

from gradekit import Traced

BASE_URL = "{url}"


def run(provider, task):
    return asyncio.run(_run(provider, task))


async def _run(provider, task):
    llm = Traced(provider)
    client = openai.AsyncOpenAI(base_url=BASE_URL,
                                api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                                http_client=llm.async_http_client(), max_retries=0)
    talk = [{{"role": "user", "content": "Plan the answer to: " + task}}]
    reply = await client.chat.completions.create(model="m", messages=talk, temperature=0.0)
    talk += [{{"role": "assistant", "content": reply.choices[0].message.content}},
             {{"role": "user", "content": "Now answer it."}}]
    stream = await client.chat.completions.create(model="m", messages=talk, temperature=0.0,
                                                  stream=True)
    parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    return "".join(parts).strip()
'''

SWALLOWING_AGENT = '''\
"""Hides every SDK error behind a friendly answer: a miss looks like success."""

import openai

from lab.sdk import run as _run


def run(provider, task):
    try:
        return _run(provider, task)
    except openai.APIError:
        return "Sorry, the assistant is unavailable right now."
'''

HYBRID_AGENT = '''\
"""Plans with provider.complete, answers through the openai SDK: both cassettes count."""

import os

import openai

from gradekit import Traced

BASE_URL = "{url}"


def run(provider, task):
    llm = Traced(provider)
    plan = llm.complete("Plan, in three steps, the answer to: " + task).strip()
    client = openai.OpenAI(base_url=BASE_URL,
                           api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                           http_client=llm.http_client(), max_retries=0)
    reply = client.chat.completions.create(
        model="m", temperature=0.0,
        messages=[{{"role": "user", "content": "Task: " + task + "\\nPlan: " + plan}}])
    return (reply.choices[0].message.content or "").strip()
'''

PLAIN_AGENT = """\
def run(provider, task):
    return provider.complete("Answer: " + task)
"""


def _example(root: Path, url: str) -> Path:
    """A copy of the example's agent and manifest (only those: the shared tree's example
    may hold recordings of its own), asking ``url``, with a failure log."""
    shutil.copytree(EXAMPLE / "lab", root / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(EXAMPLE / "pyproject.toml", root / "pyproject.toml")
    agent = root / "lab" / "agent.py"
    source = agent.read_text("utf-8")
    assert source.count(EXAMPLE_URL) == 1
    agent.write_text(source.replace(EXAMPLE_URL, url), "utf-8")
    (root / "FAILURES.md").write_text(FAILURES, "utf-8")
    return root


def _own_agent(root: Path, source: str, *, manifest: str = "") -> Path:
    """An agent of our own as ``lab.agent:run``, with a manifest (plus ``manifest``'s lines)
    and the failure log."""
    root.mkdir(parents=True)
    (root / "lab").mkdir()
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(source, "utf-8")
    (root / "pyproject.toml").write_text(MANIFEST + manifest, "utf-8")
    (root / "FAILURES.md").write_text(FAILURES, "utf-8")
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new), "utf-8")


# ---- running the command line in this process ------------------------------------------


@dataclass(frozen=True)
class Said:
    code: int
    out: str
    err: str


def gradekit(*argv: str) -> Said:
    """``gradekit ARGV`` in this process: its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with kept_modules(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Said(code, out.getvalue(), err.getvalue())


def record(root: Path, *extra: str) -> Said:
    said = gradekit("record", "--root", str(root), "--rubric", str(KIT_RUBRIC), *extra)
    assert said.code == 0, said.err
    return said


# ---- the module's one recording and one grading ----------------------------------------


@dataclass(frozen=True)
class World:
    root: Path
    submissions: Path
    grades: Path
    secret: str
    graded: Said
    recorded: Mapping[str, Said]  # what `gradekit record` said, by submission
    headers: tuple[Mapping[str, str], ...]  # of every request the server received
    zoo: Path
    zoo_cassette: HttpCassette
    url: str  # the loopback server's OpenAI base URL, now closed

    def report(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.grades / name / "report.json").read_bytes())
        return data


ZOO_AGENT = '''\
"""One behaviour per case, named by the task's first word."""

import openai

import gradekit

BASE_URL = "{url}"
QUESTION = [{{"role": "user", "content": "What is the refund policy?"}}]
OTHER = [{{"role": "user", "content": "What is the shipping policy?"}}]


def run(provider, task):
    return globals()["do_" + task.split()[0]](provider)


def client(provider, retries):
    return openai.OpenAI(base_url=BASE_URL, api_key="sk-zoo-not-a-secret",
                         http_client=gradekit.Traced(provider).http_client(),
                         max_retries=retries)


def ask(client, messages=QUESTION):
    reply = client.chat.completions.create(model="m", messages=messages, temperature=0.2)
    return reply.choices[0].message.content


def do_cause(provider):
    try:
        ask(client(provider, 0))
    except openai.APIConnectionError as exc:
        return ("cause=" + type(exc.__cause__).__name__ + " is_miss="
                + str(isinstance(exc.__cause__, gradekit.CassetteMiss)))
    return "answered"


def do_retries(provider):
    return ask(client(provider, 3), OTHER)


def do_twice(provider):
    sdk = client(provider, 0)
    return ask(sdk) + " | " + ask(sdk)


def do_thrice(provider):
    sdk = client(provider, 0)
    return ask(sdk) + " | " + ask(sdk) + " | " + ask(sdk)
'''


def _record_zoo(root: Path, url: str) -> HttpCassette:
    """The zoo's one cassette: its question, asked and recorded twice."""
    path = root / "cassettes" / "zoo.json"
    with Recorder(FakeProvider([]), path, case="zoo") as recorder:
        client = openai.OpenAI(
            base_url=url,
            api_key="sk-zoo-not-a-secret",
            max_retries=0,
            http_client=recorder.http_client(),
        )
        for _ in range(2):
            client.chat.completions.create(
                model="m",
                temperature=0.2,
                messages=[{"role": "user", "content": "What is the refund policy?"}],
            )
    source = path.with_name("zoo.http.json")
    return HTTP_CASSETTE.decode(source.read_bytes(), source=source.name)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("sdk-grading")
    subs, grades, outside = root / "submissions", root / "grades", root / "outside"
    outside.mkdir()
    secret = "sk-test-" + secrets.token_hex(20)  # 40 characters after the prefix
    recorded: dict[str, Said] = {}
    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith("GRADEKIT_")]:
            env.delenv(name)
        env.setenv("OPENAI_API_KEY", secret)
        env.setenv("ANTHROPIC_API_KEY", secret)
        with Loopback(default=echo()) as server:
            url = server.openai_url
            for name in ("openai-sdk", "temperature", "corrupt-http", "linked-http"):
                recorded[name] = record(_example(subs / name, url))
            recorded["anthropic-sdk"] = record(
                _own_agent(subs / "anthropic-sdk", ANTHROPIC_AGENT.format(url=server.url))
            )
            recorded["async-sdk"] = record(
                _own_agent(subs / "async-sdk", ASYNC_AGENT.format(url=url))
            )
            swallows = _example(subs / "swallows", url)
            (swallows / "lab" / "agent.py").rename(swallows / "lab" / "sdk.py")
            (swallows / "lab" / "agent.py").write_text(SWALLOWING_AGENT, "utf-8")
            recorded["swallows"] = record(swallows)
            two = 'stretch = ["two-providers"]\nsecond_cassettes = "cassettes-llm"\n'
            for name in ("two-providers", "two-providers-no-http", "two-providers-copied-http"):
                hybrid = _own_agent(subs / name, HYBRID_AGENT.format(url=url), manifest=two)
                live = ("--provider", "openai-compatible", "--base-url", url)
                recorded[name] = record(hybrid, *live, "--model", "first")
                record(hybrid, *live, "--model", "second", "--cassettes", "cassettes-llm")
            zoo = root / "zoo"
            _own_agent(zoo, ZOO_AGENT.format(url=url))
            zoo_cassette = _record_zoo(zoo, url)
            headers = tuple(request.headers for request in server.requests)
        # The server is gone from here on: everything below is offline.
        _edit(
            subs / "temperature" / "lab" / "agent.py",
            "TEMPERATURE, SEED, MAX_TOKENS = 0.0,",
            "TEMPERATURE, SEED, MAX_TOKENS = 0.7,",
        )
        broken = subs / "corrupt-http" / "cassettes"
        (broken / "refund-policy.http.json").write_bytes(b"{not json at all")
        _edit(
            broken / "incident-summary.http.json",
            '"format": "gradekit.http-cassette/1"',
            '"format": "gradekit.http-cassette/9"',
        )
        linked = subs / "linked-http" / "cassettes" / "sql-explain.http.json"
        linked.rename(outside / "sql-explain.http.json")
        linked.symlink_to(outside / "sql-explain.http.json")
        for path in (subs / "anthropic-sdk" / "cassettes").glob("*.json"):
            if not path.name.endswith(".http.json"):
                path.unlink()  # an SDK-only agent needs no provider cassettes
        for path in (subs / "two-providers-no-http" / "cassettes-llm").glob("*.http.json"):
            path.unlink()
        copied = subs / "two-providers-copied-http"
        for path in (copied / "cassettes").glob("*.http.json"):
            shutil.copy(path, copied / "cassettes-llm" / path.name)
        jobs = str(min(4, max(2, os.cpu_count() or 1)))
        graded = gradekit("grade", str(subs), "--out", str(grades), "--jobs", jobs, "--quiet")
        yield World(root, subs, grades, secret, graded, recorded, headers, zoo, zoo_cassette, url)


def points(report: Mapping[str, Any]) -> dict[str, str]:
    return {c["id"]: c["points"] for c in report["criteria"]}


def criterion(report: Mapping[str, Any], criterion_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in report["criteria"] if c["id"] == criterion_id)
    return found


def details(report: Mapping[str, Any], criterion_id: str) -> dict[str, str]:
    return {k["id"]: k["detail"] for k in criterion(report, criterion_id)["checks"]}


def assert_full(report: Mapping[str, Any], *criteria: str) -> None:
    earned = points(report)
    for criterion_id in criteria:
        assert earned[criterion_id] == FULL[criterion_id], (
            criterion_id,
            details(report, criterion_id),
            criterion(report, criterion_id),
        )


def written(root: Path) -> list[Path]:
    return [path for path in sorted(root.rglob("*")) if path.is_file()]


def stream_text(cassette: HttpCassette) -> list[str]:
    """The text of every streamed answer in ``cassette``, read from its recorded events."""
    texts = []
    for recorded in cassette.interactions.values():
        for interaction in recorded:
            events = interaction.response.events
            if not events:
                continue
            parts = []
            for event in events:
                data = event.removeprefix("data: ").strip()
                if data and data != "[DONE]":
                    chunk = json.loads(data)
                    parts += [c["delta"].get("content") or "" for c in chunk["choices"]]
            texts.append("".join(parts).strip())
    return texts


# ---- 1. the openai-sdk example --------------------------------------------------------


def test_the_example_records_without_a_provider_and_grades_offline_at_full_points(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    said = world.recorded["openai-sdk"]
    assert "unconfigured" not in said.err and " answers " not in said.err  # no complete()
    assert (
        f"{3 * len(CASES)} SDK requests recorded live, 0 served from cassettes (base URL "
        f"{world.url})" in said.err
    )
    assert world.graded.code == 0, world.graded.err
    report = world.report("openai-sdk")
    assert_full(report, "contract_stability", "loud_failure", "tracing")
    assert report["findings"] == []
    cassettes = world.submissions / "openai-sdk" / "cassettes"
    files = [cassettes / f"{case}.http.json" for case in CASES]
    monkeypatch.setenv("OPENAI_API_KEY", world.secret)  # verify looks for it in every file
    said = gradekit("cassette", "verify", *map(str, files))
    assert said.code == 0, said.err
    assert said.out.splitlines() == [f"ok   {path} (3 interactions)" for path in files]
    leaked = tmp_path / "leaked.http.json"  # and it would have said so
    leaked.write_text(files[0].read_text("utf-8").replace("You asked: ", world.secret, 1))
    assert gradekit("cassette", "verify", str(leaked)).code == 1
    for case, path in zip(CASES, files, strict=True):
        decoded = HTTP_CASSETTE.decode(path.read_bytes(), source=path.name)
        assert decoded.case == case
        assert {i.request.url for recorded in decoded.interactions.values() for i in recorded} == {
            f"{world.url}/chat/completions"
        }


def test_the_api_key_was_sent_but_is_written_nowhere(world: World) -> None:
    sent = {
        (h.get("user-agent", "").partition("/")[0], h.get("authorization")) for h in world.headers
    }
    bearer = f"Bearer {world.secret}"
    assert {("OpenAI", bearer), ("Anthropic", bearer)} <= sent  # both SDKs sent it
    files = written(world.submissions) + written(world.grades) + written(world.root / "outside")
    assert len(files) > 50
    assert [path for path in files if world.secret.encode() in path.read_bytes()] == []
    assert world.secret not in world.graded.out + world.graded.err
    assert all(world.secret not in said.err for said in world.recorded.values())


def test_the_report_lists_every_http_cassette_with_its_sha256(world: World) -> None:
    for name in ("openai-sdk", "anthropic-sdk", "async-sdk"):
        inputs = world.report(name)["inputs"]
        for case in CASES:
            relative = f"cassettes/{case}.http.json"
            data = (world.submissions / name / relative).read_bytes()
            assert inputs[relative] == hashlib.sha256(data).hexdigest(), (name, relative)


# ---- 2. and 3. other SDKs and async ----------------------------------------------------


def test_an_anthropic_agent_on_httpx2_is_traced_and_stable(world: World) -> None:
    report = world.report("anthropic-sdk")
    assert_full(report, "contract_stability", "loud_failure", "tracing")
    # No cassettes/<case>.json at all: the HTTP cassettes are the whole recording.
    assert report["findings"] == []
    assert not [
        name
        for name in report["inputs"]
        if name.endswith(".json") and not name.endswith(".http.json")
    ]
    assert f"{2 * len(CASES)} SDK requests recorded live" in world.recorded["anthropic-sdk"].err


def test_an_async_agent_gets_full_marks(world: World) -> None:
    report = world.report("async-sdk")
    assert_full(report, "contract_stability", "loud_failure", "tracing")
    assert report["findings"] == []


# ---- 4. and 8. streamed answers, graded and run ----------------------------------------


def _graded_answers(world: World, name: str, scratch: Path) -> RunResult:
    """The submission's cases run in the sandbox as the grader runs them."""
    root = world.submissions / name
    cases = load_cases(KIT_RUBRIC)
    http = _http_cassettes(root, "cassettes", tuple(cases))
    assert http.problems == {} and sorted(http.by_case) == sorted(http.present) == sorted(CASES)
    serving = Serving(lambda case, prompt: None, http=http.by_case)
    return Sandbox(root, scratch, Limits(timeout_s=20)).run(
        "lab.agent:run", [(c.id, c.task) for c in cases], RunPlan("openai:gpt-4o-mini", 1, serving)
    )


def test_a_streamed_answer_grades_as_it_was_recorded(world: World, tmp_path: Path) -> None:
    result = _graded_answers(world, "openai-sdk", tmp_path / "scratch")
    for case in CASES:
        path = world.submissions / "openai-sdk" / "cassettes" / f"{case}.http.json"
        streamed = stream_text(HTTP_CASSETTE.decode(path.read_bytes(), source=path.name))
        outcome = result.outcomes[case]
        assert outcome.status == "returned", outcome
        assert len(streamed) == 1 and streamed[0].startswith("You asked: Follow the plan")
        assert outcome.answer == streamed[0]
        assert [(c.served, c.http) for c in outcome.calls] == [(True, True)] * 3


def test_run_replays_the_example_offline_and_prints_each_answer(world: World) -> None:
    root = world.submissions / "openai-sdk"
    said = gradekit("run", "--root", str(root), "--rubric", str(KIT_RUBRIC))
    assert said.code == 0, said.err
    expected = ""
    for case in CASES:
        path = root / "cassettes" / f"{case}.http.json"
        (answer,) = stream_text(HTTP_CASSETTE.decode(path.read_bytes(), source=path.name))
        expected += f"## {case}\n{answer}\n\n"
    assert said.out == expected


# ---- 5. loud failure and misses --------------------------------------------------------


@dataclass(frozen=True)
class Zoo:
    result: RunResult
    cassette: HttpCassette


@pytest.fixture(scope="module", params=["process", "namespaces"])
def zoo(
    world: World, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Zoo:
    """The zoo's cases in one sandboxed run: only twice and thrice have its cassette."""
    if request.param == "namespaces":
        require_namespaces()
    cases = [(name, name) for name in ("cause", "retries", "twice", "thrice")]
    held = {name: world.zoo_cassette for name in ("retries", "twice", "thrice")}
    sandbox = Sandbox(
        world.zoo,
        tmp_path_factory.mktemp("zoo-scratch"),
        Limits(timeout_s=20),
        wall_named(request.param),
    )
    result = sandbox.run(
        "lab.agent:run",
        cases,
        RunPlan("openai:gpt-4o-mini", 3, Serving(lambda c, p: None, http=held)),
    )
    return Zoo(result, world.zoo_cassette)


def test_an_unanswerable_request_is_a_cassette_miss_in_the_sdks_exception_chain(zoo: Zoo) -> None:
    outcome = zoo.result.outcomes["cause"]
    assert (outcome.status, outcome.answer) == ("returned", "cause=CassetteMiss is_miss=True")
    assert [(c.served, c.http) for c in outcome.calls] == [(False, True)]


def test_a_swallowed_sdk_error_loses_loud_failure_only(world: World) -> None:
    report, baseline = world.report("swallows"), world.report("openai-sdk")
    assert Decimal(points(report)["loud_failure"]) < Decimal(points(baseline)["loud_failure"])
    lost = details(report, "loud_failure")
    for case in CASES:  # the first request (its last message's head) already swallowed
        assert re.fullmatch(
            r"call 1 of [23] \('.+'\): run\(\) returned 'Sorry, the "
            r"assistant is unavailable right now\.' after the miss: a miss "
            r"must raise",
            lost[case],
        ), (case, lost[case])
    assert_full(report, "contract_stability", "tracing")


def test_retries_cannot_turn_a_miss_into_a_success_or_a_hang(zoo: Zoo) -> None:
    outcome = zoo.result.outcomes["retries"]
    assert (outcome.status, outcome.exception, outcome.miss_escaped) == (
        "raised",
        "APIConnectionError",
        True,
    )
    assert len(outcome.calls) == 4  # the request and its three retries
    assert {c.key for c in outcome.calls} == {outcome.calls[0].key}
    assert outcome.calls[0].key not in zoo.cassette.interactions
    assert all(not c.served and c.http for c in outcome.calls)
    assert "temperature" not in outcome.calls[0].asked  # only the question differs
    assert (
        'messages[0].content: "What is the shipping policy?" != '
        '"What is the refund policy?"' in outcome.calls[0].asked
    )


def test_each_asking_gets_the_next_recording_and_one_more_is_a_miss(zoo: Zoo) -> None:
    ((key, recorded),) = zoo.cassette.interactions.items()
    assert len(recorded) == 2
    answers = [json.loads(i.response.body())["choices"][0]["message"]["content"] for i in recorded]
    assert answers[0] != answers[1]  # the server numbers its answers
    twice = zoo.result.outcomes["twice"]
    assert (twice.status, twice.answer) == ("returned", " | ".join(answers))
    assert [(c.key, c.served, c.http) for c in twice.calls] == [(key, True, True)] * 2
    thrice = zoo.result.outcomes["thrice"]
    assert (thrice.status, thrice.exception, thrice.miss_escaped) == (
        "raised",
        "APIConnectionError",
        True,
    )
    assert [(c.key, c.served, c.http) for c in thrice.calls] == [
        (key, True, True),
        (key, True, True),
        (key, False, True),
    ]
    assert thrice.calls[-1].asked.startswith("3 times; recorded twice.")


# ---- 6. a miss names the divergence ----------------------------------------------------


def test_an_edited_request_is_a_miss_that_names_the_field_and_the_fix(world: World) -> None:
    report = world.report("temperature")
    assert points(report)["contract_stability"] == "0.00"
    advice = criterion(report, "contract_stability")["advice"]
    assert len(advice) == len(CASES)
    for case, said in zip(CASES, advice, strict=True):
        assert said.startswith(f"{case}: ")
        assert f"`make record ARGS='--case {case}'`" in said  # as the miss's own message
        assert "temperature: 0.7 != 0.0" in said
    for case, detail in details(report, "contract_stability").items():
        assert "SDK request(s) the HTTP cassette does not hold" in detail, (case, detail)


# One request the HTTP cassette cannot serve, and the SDK's retry of it: one request.
RETRIED = "asked 1 SDK request(s) the HTTP cassette does not hold (sent 2 times: the SDK's retries)"


# ---- 7. attacks on the parent ----------------------------------------------------------


class FakeChild:
    """What ``_Run`` sends a child, kept."""

    replying = False

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


def _parent(world: World, tmp_path: Path) -> tuple[_Run, _Talk, FakeChild]:
    serving = Serving(lambda case, prompt: None, http={"zoo": world.zoo_cassette})
    run = _Run(RunPlan("openai:gpt-4o-mini", 0, serving), Limits(), cast(Layout, None))
    case = _Case("zoo", "task", tmp_path / "trace.jsonl")
    talk = _Talk([case], ready=True, current=case)
    return run, talk, FakeChild()


def _asking(world: World) -> dict[str, Any]:
    """The zoo's recorded request as a harness sends it."""
    (recorded,) = world.zoo_cassette.interactions.values()
    request = recorded[0].request
    body = json.dumps(request.content).encode()
    assert HttpRequest.of(request.method, request.url, body).key == request.key
    return {
        "op": "http",
        "case": "zoo",
        "method": request.method,
        "url": request.url,
        "body": base64.b64encode(body).decode("ascii"),
    }


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"body": None}, "an HTTP request without a method, a URL and a body"),
        ({"method": 7}, "an HTTP request without a method, a URL and a body"),
        ({"url": ["http://127.0.0.1/"]}, "an HTTP request without a method, a URL and a body"),
        ({"body": "not base64!"}, "an HTTP request that cannot be read"),
        (
            {"url": "http://127.0.0.1:notaport/v1/chat/completions"},
            "an HTTP request that cannot be read",
        ),
        ({"case": "another"}, "an unexpected message"),
    ],
)
def test_a_malformed_http_request_breaks_the_protocol_and_is_never_answered(
    world: World, tmp_path: Path, change: dict[str, Any], why: str
) -> None:
    run, talk, child = _parent(world, tmp_path)
    with pytest.raises(ProtocolError) as caught:
        run._handle(cast(Child, child), talk, {**_asking(world), **change})
    assert str(caught.value) == why
    assert (child.sent, talk.calls) == ([], [])


def test_the_parent_serves_recordings_in_order_then_a_miss_naming_the_fix(
    world: World, tmp_path: Path
) -> None:
    run, talk, child = _parent(world, tmp_path)
    ((key, recorded),) = world.zoo_cassette.interactions.items()
    for _ in range(3):
        assert run._handle(cast(Child, child), talk, _asking(world)) is False
    assert [base64.b64decode(m["http"]["body"]) for m in child.sent[:2]] == [
        i.response.body() for i in recorded
    ]
    assert child.sent[2]["key"] == key
    assert "cassettes/zoo.http.json" in child.sent[2]["miss"]
    assert "make record ARGS='--case zoo'" in child.sent[2]["miss"]
    assert [c.served for c in talk.calls] == [True, True, False]
    # A request before start, or while a reply is unread, is never served.
    talk.current = None
    with pytest.raises(ProtocolError):
        run._handle(cast(Child, child), talk, _asking(world))
    talk.current, child.replying = talk.pending[0], True
    with pytest.raises(ProtocolError, match="before the last reply was read"):
        run._handle(cast(Child, child), talk, _asking(world))
    assert len(child.sent) == 3


def test_a_corrupt_http_cassette_is_a_finding_with_the_fix_and_the_rest_grades(
    world: World,
) -> None:
    report = world.report("corrupt-http")
    findings = report["findings"]
    broken = "cassettes/refund-policy.http.json"
    (said,) = [f for f in findings if f.startswith(f"{broken} cannot be used: ")]
    assert said.startswith(
        f"{broken} cannot be used: {broken}:1:2: not valid JSON (Expecting "
        f"property name enclosed in double quotes). Restore it with "
        f"`git checkout -- {broken}`"
    ), said
    newer = "cassettes/incident-summary.http.json"
    assert (
        f"{newer} cannot be used: {newer}:3:3: unknown cassette format "
        "'gradekit.http-cassette/9'; it was written by a newer gradekit: upgrade with "
        "`pip install -U gradekit`." in findings
    )
    stable = details(report, "contract_stability")
    for case in ("refund-policy", "incident-summary"):  # never served from a broken file
        assert stable[case] == RETRIED
    for case in ("sql-explain", "flaky-grade"):  # the other cases grade as ever
        assert stable[case] == "identical under every provider label and hash seed"
        for criterion_id in ("loud_failure", "tracing"):
            check = next(c for c in criterion(report, criterion_id)["checks"] if c["id"] == case)
            assert check["passed"], (criterion_id, check)
    for case in ("refund-policy", "incident-summary"):  # never ran: nothing to probe or trace
        assert (
            details(report, "loud_failure")[case]
            == f"not probed: its primary run {RETRIED}; record them first"
        )


def test_a_linked_http_cassette_is_refused_and_never_served(world: World) -> None:
    report = world.report("linked-http")
    relative = "cassettes/sql-explain.http.json"
    assert (
        f"{relative} is a symlink: the grader follows no links, so commit the file "
        "itself" in report["findings"]
    )
    assert relative not in report["inputs"]
    assert (world.root / "outside" / "sql-explain.http.json").is_file()  # the real recording
    stable = details(report, "contract_stability")
    assert stable["sql-explain"] == RETRIED
    assert [case for case in CASES if not stable[case].startswith("identical")] == ["sql-explain"]


@pytest.mark.parametrize(
    ("name", "case"),
    [
        ("corrupt-http", "refund-policy"),
        ("corrupt-http", "incident-summary"),
        ("linked-http", "sql-explain"),
    ],
)
def test_a_broken_http_cassettes_advice_names_it_not_a_missing_provider_cassette(
    world: World, name: str, case: str
) -> None:
    report = world.report(name)
    assert not [f for f in report["findings"] if f.startswith(f"cassettes/{case}.json ")]
    (advice,) = [
        a for a in criterion(report, "contract_stability")["advice"] if a.startswith(f"{case}: ")
    ]
    assert advice.startswith(f"{case}: cassettes/{case}.http.json "), advice


def test_a_corrupt_http_cassettes_fix_is_the_record_command_that_made_it(world: World) -> None:
    (said,) = [
        f
        for f in world.report("corrupt-http")["findings"]
        if f.startswith("cassettes/refund-policy.http.json cannot be used: ")
    ]
    assert "make record ARGS='--case refund-policy'" in said, said


def test_two_providers_needs_the_second_sets_own_http_cassettes(world: World) -> None:
    honest = details(world.report("two-providers"), "stretch_goal")
    assert honest["two-providers: evidence"].startswith("the evidence holds"), honest
    assert_full(world.report("two-providers"), "contract_stability", "loud_failure", "tracing")
    for name in ("two-providers-no-http", "two-providers-copied-http"):
        report = world.report(name)
        evidence = details(report, "stretch_goal")["two-providers: evidence"]
        assert evidence.startswith("case refund-policy on the second cassette set: asked "), (
            name,
            evidence,
        )
        assert "SDK request(s) the HTTP cassette does not hold" in evidence
        # The first set is untouched: everything else still grades in full.
        assert_full(report, "contract_stability", "loud_failure", "tracing")


def test_the_two_providers_evidence_names_only_keys_its_files_hold(world: World) -> None:
    """As tests/e2e/test_grading.py checks it for the reference lab: a reviewer can check each
    file the evidence names for the keys it names."""
    detail = details(world.report("two-providers"), "stretch_goal")["two-providers: evidence"]
    named = dict(
        part.split(": ", 1)
        for part in detail.removeprefix("the evidence holds: prompts served from ").split("; ")
    )
    # Its prompts in <case>.json, its SDK requests in <case>.http.json: each file named
    # holds the keys named with it.
    assert sorted(named) == sorted(
        f"cassettes-llm/{case}{suffix}" for case in CASES for suffix in (".json", ".http.json")
    )
    for name, keys in named.items():
        document = json.loads((world.submissions / "two-providers" / name).read_bytes())
        held = document["interactions" if name.endswith(".http.json") else "entries"]
        assert set(keys.split(", ")) <= set(held), (name, keys, sorted(held))


# ---- 9. record with no provider configured ---------------------------------------------


def test_record_without_a_provider_tells_a_plain_agent_how_to_configure_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("GRADEKIT_")]:
        monkeypatch.delenv(name)
    root = _own_agent(tmp_path / "plain", PLAIN_AGENT)
    said = gradekit("record", "--root", str(root), "--rubric", str(KIT_RUBRIC))
    assert said.code == 2, said
    assert "\nProviderConfigError: No provider configured." in said.err, said.err
    for hint in ("GRADEKIT_PROVIDER / --provider", "make local-model"):
        assert hint in said.err
    assert "[2/4]" not in said.err  # it stops at the first case that asks
    assert list(root.rglob("*.json")) == []  # and leaves no cassette behind
