"""A lab whose agent is the official openai SDK with its default retries, for the bench's
``gradekit check`` row: recorded once against a loopback server that speaks the chat
completions protocol, then checked offline like any submission.

Every answer the grader withholds (a probe) makes the SDK retry twice with its back-off
(0.5 s to 8 s, jittered) before it raises; the row shows what that costs a student's
``make check``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench._loopback import serve

__all__ = ["build_sdk_lab"]

AGENT = '''\
"""An honest agent on the openai SDK, as a student writes it: default retries."""

import openai

from gradekit import Traced

BASE_URL = "{url}"


def run(provider, task):
    client = openai.OpenAI(base_url=BASE_URL, api_key="unused",
                           http_client=Traced(provider).http_client("httpx2"))
    reply = client.chat.completions.create(
        model="course-model", messages=[{{"role": "user", "content": task}}], temperature=0)
    return reply.choices[0].message.content or ""
'''
MANIFEST = """\
[project]
name = "sdk-lab"
version = "0.1.0"

[tool.gradekit]
agent = "lab.agent:run"
replay = "gradekit:Replay"
"""
FAILURES = """\
# Failures

## The SDK retried a missing answer
- Symptom: `make check` said case refund-policy waited on retries before the miss escaped.
- Cause: openai.OpenAI retries a transport error twice by default.
- Fix: nothing to fix: the miss still escapes run(), as APIConnectionError's cause.

## The answers quoted the question
- Symptom: every answer of case sql-explain began with "About:".
- Cause: the course server answers by quoting the last message.
- Fix: nothing in lab/agent.py: the lab records what the server says.

## Boundaries
- What this lab cannot measure: whether the model's answer is right.
"""


def _answer(body: bytes) -> bytes:
    """A chat completion quoting the question, so each case's answer is its own."""
    asked = json.loads(body)["messages"][-1]["content"]
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "course-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"About: {asked[:60]}"},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


def build_sdk_lab(root: Path) -> Path:
    """The lab at ``root``, recorded for the kit's rubric; ``RuntimeError`` if recording
    fails."""
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "pyproject.toml").write_text(MANIFEST, "utf-8")
    (root / "FAILURES.md").write_text(FAILURES, "utf-8")
    with serve(_answer, "/v1") as base_url:
        (root / "lab" / "agent.py").write_text(AGENT.format(url=base_url), "utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "grader", "record", "--root", str(root), "--quiet"],
            capture_output=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(
            f"recording the SDK lab failed ({done.returncode}):\n"
            f"{done.stderr.decode('utf-8', 'replace')}"
        )
    return root
