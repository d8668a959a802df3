"""The hand-out's own tests on agents built on the official SDKs, written here from scratch.

Each agent below replaces the hand-out's ``lab/agent.py`` and the hand-out's
``tests/test_lab.py`` runs on it, as the student runs it: scripted answers from
``FakeProvider``, whose HTTP side answers the SDK in its protocol, the network closed.
The honest agents (the hand-out README's own example, openai streamed, anthropic async,
openai's Responses API) pass every test; each faulty one (swallows the miss, names the
provider in its system prompt, calls the SDK around ``Traced``) fails the test that names
its fault, and only that one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import main
from tests.grader.handout.starters import copy_reference

pytest.importorskip("openai")
pytest.importorskip("anthropic")

pytestmark = pytest.mark.slow  # runs the hand-out's own suite in a process

HEAD = '''\
"""An agent on the official SDK."""

from __future__ import annotations

'''

OPENAI_STREAMED = (
    HEAD
    + """\
import openai

from gradekit import Provider, Traced

URL = "http://127.0.0.1:8080/v1"


def run(provider: Provider, task: str) -> str:
    client = openai.OpenAI(base_url=URL, api_key="not-needed",
                           http_client=Traced(provider).http_client("httpx2"), max_retries=0)
    plan = client.chat.completions.create(
        model="smollm2", temperature=0,
        messages=[{"role": "user", "content": f"Plan an answer to: {task}"}])
    chunks = client.chat.completions.create(
        model="smollm2", temperature=0, stream=True,
        messages=[{"role": "user", "content": f"Task: {task}"},
                  {"role": "assistant", "content": plan.choices[0].message.content or ""},
                  {"role": "user", "content": "Now answer it."}])
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
"""
)

ANTHROPIC_ASYNC = (
    HEAD
    + """\
import asyncio

import anthropic

from gradekit import Provider, Traced


async def _ask(client: anthropic.AsyncAnthropic, text: str) -> str:
    reply = await client.messages.create(
        model="claude-test", max_tokens=200, system="Be brief.",
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}])
    return "".join(block.text for block in reply.content if block.type == "text")


async def _run(provider: Provider, task: str) -> str:
    client = anthropic.AsyncAnthropic(
        api_key="not-needed", max_retries=0,
        http_client=Traced(provider).async_http_client("httpx2"))
    draft = await _ask(client, task)
    verdict = await _ask(client, f"Is this right? {draft}")
    return draft if verdict.upper().startswith("YES") else await _ask(client, "Again: " + task)


def run(provider: Provider, task: str) -> str:
    return asyncio.run(_run(provider, task))
"""
)

OPENAI_RESPONSES = (
    HEAD
    + """\
from openai import OpenAI

from gradekit import Provider, Traced


def run(provider: Provider, task: str) -> str:
    with OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="k",
                http_client=Traced(provider).http_client()) as client:
        return client.responses.create(model="m", input=task).output_text
"""
)

SWALLOWS = (
    HEAD
    + """\
import openai

from gradekit import Provider, Traced


def run(provider: Provider, task: str) -> str:
    client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="k",
                           http_client=Traced(provider).http_client(), max_retries=0)
    try:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": task}])
    except openai.APIError:
        return "The model is unavailable right now."
    return reply.choices[0].message.content or ""
"""
)

NAMES_THE_PROVIDER = (
    HEAD
    + """\
import openai

from gradekit import Provider, Traced


def run(provider: Provider, task: str) -> str:
    client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="k",
                           http_client=Traced(provider).http_client(), max_retries=0)
    reply = client.chat.completions.create(model="m", messages=[
        {"role": "system", "content": f"You are served by {provider.name}."},
        {"role": "user", "content": task}])
    return reply.choices[0].message.content or ""
"""
)

UNTRACED = (
    HEAD
    + """\
import openai

from gradekit import Provider


def run(provider: Provider, task: str) -> str:
    http = provider.http_client()  # type: ignore[attr-defined]
    client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="k", http_client=http,
                           max_retries=0)
    reply = client.chat.completions.create(model="m", messages=[
        {"role": "user", "content": task}])
    return reply.choices[0].message.content or ""
"""
)

TESTS = (
    "test_the_agent_answers_with_a_string_from_the_provider",
    "test_the_answer_does_not_depend_on_the_provider_name",
    "test_a_miss_escapes_the_agent",
    "test_every_provider_call_is_traced_after_it_returns",
    "test_the_replay_ignores_outer_whitespace",
    "test_the_replay_raises_on_a_miss",
)


@pytest.fixture(scope="module")
def hand_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reference = copy_reference(tmp_path_factory.mktemp("reference") / "lab")
    out = tmp_path_factory.mktemp("starter") / "lab"
    assert main(["starter", "--from", str(reference), "--out", str(out), "--no-grade"]) == 0
    return out


def _failed(hand_out: Path, tmp_path: Path, agent: str) -> set[str]:
    """The hand-out's tests that fail with ``agent`` as its lab/agent.py (none skip)."""
    lab = tmp_path / "lab"
    shutil.copytree(hand_out, lab)
    (lab / "lab" / "agent.py").write_text(agent, "utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rA",
            "tests/test_lab.py",
        ],
        cwd=lab,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    passed = set(re.findall(r"^PASSED tests/test_lab\.py::(\w+)", done.stdout, re.MULTILINE))
    failed = set(re.findall(r"^FAILED tests/test_lab\.py::(\w+)", done.stdout, re.MULTILINE))
    assert passed | failed == set(TESTS), done.stdout  # each ran: none skipped, none errored
    return failed


def test_the_hand_out_readmes_sdk_example_passes_its_own_tests(
    hand_out: Path, tmp_path: Path
) -> None:
    readme = (hand_out / "README.md").read_text("utf-8")
    section = readme.split("## An agent on the official SDKs\n", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "Traced(provider).http_client()" in example
    assert _failed(hand_out, tmp_path, example) == set()


@pytest.mark.parametrize(
    "agent",
    [OPENAI_STREAMED, ANTHROPIC_ASYNC, OPENAI_RESPONSES],
    ids=["openai-streamed", "anthropic-async", "openai-responses"],
)
def test_an_honest_sdk_agent_passes_the_hand_outs_own_tests(
    hand_out: Path, tmp_path: Path, agent: str
) -> None:
    assert _failed(hand_out, tmp_path, agent) == set()


@pytest.mark.parametrize(
    ("agent", "fails"),
    [
        (SWALLOWS, "test_a_miss_escapes_the_agent"),
        (NAMES_THE_PROVIDER, "test_the_answer_does_not_depend_on_the_provider_name"),
        (UNTRACED, "test_every_provider_call_is_traced_after_it_returns"),
    ],
    ids=["swallows-the-miss", "names-the-provider", "untraced"],
)
def test_a_faulty_sdk_agent_fails_the_test_that_names_its_fault(
    hand_out: Path, tmp_path: Path, agent: str, fails: str
) -> None:
    assert _failed(hand_out, tmp_path, agent) == {fails}
