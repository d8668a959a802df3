"""The openai SDK, async: a plan, a glossary lookup, then the answer streamed."""

import asyncio

import openai

from gradekit import Traced, TracedTools

BASE_URL = "http://127.0.0.1:8080/v1"
MODEL = "course-model"
PLAN = "Make a two-step plan for this task, do not answer it yet:\n\n{task}"
ANSWER = "Follow your plan.\n\nGlossary: {meaning}\n\nWrite the answer in under 100 words."


def glossary_term(task):
    found = [term for term in ("sql", "refund", "incident", "grader") if term in task.lower()]
    return found[0] if found else "cassette"


async def ask(client, messages):
    reply = await client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
    return reply.choices[0].message.content or ""


async def stream(client, messages):
    chunks = await client.chat.completions.create(
        model=MODEL, messages=messages, temperature=0, stream=True
    )
    return "".join(
        [chunk.choices[0].delta.content or "" async for chunk in chunks if chunk.choices]
    )


def connect(llm):
    return openai.AsyncOpenAI(
        base_url=BASE_URL,
        api_key="unused",
        max_retries=0,
        http_client=llm.async_http_client("httpx2"),
    )


def follow_up(task, plan, tools):
    meaning = TracedTools(tools).call("glossary", term=glossary_term(task))["meaning"]
    return [
        {"role": "user", "content": PLAN.format(task=task)},
        {"role": "assistant", "content": plan},
        {"role": "user", "content": ANSWER.format(meaning=meaning)},
    ]


async def solve(provider, task, tools):
    async with connect(Traced(provider)) as client:
        plan = await ask(client, [{"role": "user", "content": PLAN.format(task=task)}])
        return await stream(client, follow_up(task, plan, tools))


def run(provider, task, tools):
    return asyncio.run(solve(provider, task, tools))
