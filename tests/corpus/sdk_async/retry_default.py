"""The async SDK with an async retry helper that gives a default answer at the end."""

import asyncio

import openai

from gradekit import Traced, TracedTools
from lab.agent import ANSWER, PLAN, connect, glossary_term, stream


async def with_retry(make_call, retries=3, default="The model is unavailable, sorry."):
    for attempt in range(retries):
        try:
            return await make_call()
        except openai.APIConnectionError:
            await asyncio.sleep(0.01 * (attempt + 1))
    return default


async def main(provider, task, tools):
    client = connect(Traced(provider))
    term = glossary_term(task)
    talk = [{"role": "user", "content": PLAN.format(task=task)}]
    plan = await with_retry(lambda: stream(client, talk))
    meaning = TracedTools(tools).call("glossary", term=term)["meaning"]
    talk = [
        *talk,
        {"role": "assistant", "content": plan},
        {"role": "user", "content": ANSWER.format(meaning=meaning)},
    ]
    return await with_retry(lambda: stream(client, talk))


def run(provider, task, tools):
    return asyncio.run(main(provider, task, tools))
