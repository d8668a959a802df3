"""The async SDK; the plan used a client made before Traced was added, the answer is traced."""

import asyncio

from gradekit import Traced
from lab import agent


async def solve(provider, task, tools):
    async with agent.connect(provider) as planner:
        plan = await agent.ask(planner, [{"role": "user", "content": agent.PLAN.format(task=task)}])
    async with agent.connect(Traced(provider)) as client:
        return await agent.stream(client, agent.follow_up(task, plan, tools))


def run(provider, task, tools):
    return asyncio.run(solve(provider, task, tools))
