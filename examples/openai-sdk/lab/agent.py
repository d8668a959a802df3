"""The reference lab's agent on the official ``openai`` SDK: plan, answer, self-check, revise.

The same loop as the reference lab's ``lab/agent.py``, written the way most
students write it: chat messages through ``openai.OpenAI``, the answer streamed.
The only line that is gradekit's is the client: ``llm.http_client()`` records every
request into ``cassettes/<case>.http.json`` under ``gradekit record``, and replays it
under ``gradekit run`` and ``gradekit grade``, with no network and no key.

The base URL is in the code, not the environment: it is part of every request's
key, so the recording and the grading must ask the same server. It is
``make local-model``'s SmolLM2; any OpenAI-compatible server works.
"""

from __future__ import annotations

import os

import openai
from openai.types.chat import ChatCompletionMessageParam

from gradekit import Provider, Traced

__all__ = ["run"]

BASE_URL = "http://127.0.0.1:8080/v1"
MODEL = "smollm2"
# Everything that changes the answer is in the request, so it is in the key.
TEMPERATURE, SEED, MAX_TOKENS = 0.0, 0, 160
SYSTEM = "You are a teaching assistant in an agent-engineering bootcamp. Be brief and concrete."
PLAN = (
    "Task: {task}\n\nWrite a short plan of at most three numbered steps for answering "
    "this task. Do not answer it yet."
)
ANSWER = "Follow the plan and write the final answer in at most 120 words."
CHECK = (
    "Task: {task}\n\nAnswer:\n{answer}\n\n"
    "Does this answer address the task? Reply YES or NO, then one sentence why."
)
REVISE = "Rewrite the answer so that it addresses the task, in at most 120 words."


def run(provider: Provider, task: str) -> str:
    """Answer ``task`` with three or four traced chat completions, the answer streamed."""
    llm = Traced(provider)
    client = openai.OpenAI(
        base_url=BASE_URL,
        api_key=os.environ.get("OPENAI_API_KEY") or "not-needed-locally",
        http_client=llm.http_client("httpx2"),  # openai 3.x is built on httpx2 (httpx works too)
        max_retries=1,  # each retry is a request the cassette must hold, and a second it waits
    )
    talk: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PLAN.format(task=task)},
    ]
    plan = _say(client, talk)
    talk += [{"role": "assistant", "content": plan}, {"role": "user", "content": ANSWER}]
    answer = _stream(client, talk)
    verdict = _say(
        client,
        [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": CHECK.format(task=task, answer=answer)},
        ],
    )
    if _says_no(verdict):
        talk += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": f"Reviewer's note: {verdict}\n\n{REVISE}"},
        ]
        answer = _say(client, talk)
    return answer


def _say(client: openai.OpenAI, messages: list[ChatCompletionMessageParam]) -> str:
    """One chat completion's text."""
    reply = client.chat.completions.create(
        model=MODEL, messages=messages, temperature=TEMPERATURE, seed=SEED, max_tokens=MAX_TOKENS
    )
    return (reply.choices[0].message.content or "").strip()


def _stream(client: openai.OpenAI, messages: list[ChatCompletionMessageParam]) -> str:
    """One chat completion, streamed: its text, joined from the chunks."""
    chunks = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        stream=True,
        temperature=TEMPERATURE,
        seed=SEED,
        max_tokens=MAX_TOKENS,
    )
    return "".join(
        chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices
    ).strip()


def _says_no(verdict: str) -> bool:
    """A verdict is a no when its first word is NO, in any case or punctuation."""
    words = verdict.split()
    return bool(words) and words[0].strip(".,:;!*").upper() == "NO"
