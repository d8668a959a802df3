"""The async SDK on the provider's own async client: no trace of the requests."""

import asyncio

from gradekit import TracedTools
from lab import agent


def run(provider, task, tools):
    meaning = TracedTools(tools).call("glossary", term=agent.glossary_term(task))["meaning"]
    prompt = f"{task}\n\nGlossary: {meaning}\n\nAnswer in under 100 words."
    return asyncio.run(answer(provider, prompt))


async def answer(provider, prompt):
    async with agent.connect(provider) as client:
        return await agent.stream(client, [{"role": "user", "content": prompt}])
