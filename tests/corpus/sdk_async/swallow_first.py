"""The async SDK; a failed plan ends the run with a polite message."""

import asyncio

import openai

from gradekit import Traced
from lab.agent import PLAN, ask, connect, follow_up, stream


async def solve(provider, task, tools):
    client = connect(Traced(provider))
    try:
        plan = await ask(client, [{"role": "user", "content": PLAN.format(task=task)}])
    except openai.APIConnectionError:
        return "Our assistant is busy; your question has been noted."
    answer = await stream(client, follow_up(task, plan, tools))
    await client.close()
    return answer


def run(provider, task, tools):
    return asyncio.run(solve(provider, task, tools))
