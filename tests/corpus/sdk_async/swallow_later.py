"""The async SDK; if the streamed answer breaks, the plan is returned instead."""

import asyncio

import openai

from gradekit import Traced
from lab import agent


async def solve(provider, task, tools):
    client = agent.connect(Traced(provider))
    plan = await agent.ask(client, [{"role": "user", "content": agent.PLAN.format(task=task)}])
    try:
        return await agent.stream(client, agent.follow_up(task, plan, tools))
    except openai.APIError:
        return plan
    finally:
        await client.close()


def run(provider, task, tools):
    return asyncio.run(solve(provider, task, tools))
