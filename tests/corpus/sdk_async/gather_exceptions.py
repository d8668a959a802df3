"""The async SDK, two drafts at once with gather(return_exceptions=True); the longer wins."""

import asyncio

from gradekit import Traced, TracedTools
from lab.agent import ask, connect, glossary_term

STYLES = ("formal", "friendly")


async def drafts(provider, task, meaning):
    async with connect(Traced(provider)) as client:
        return await asyncio.gather(
            *(
                ask(client, [{"role": "user", "content": f"In a {style} tone ({meaning}): {task}"}])
                for style in STYLES
            ),
            return_exceptions=True,
        )


def run(provider, task, tools):
    meaning = TracedTools(tools).call("glossary", term=glossary_term(task))["meaning"]
    results = asyncio.run(drafts(provider, task, meaning))
    texts = [result for result in results if isinstance(result, str)]
    return max(texts, key=len) if texts else "Both drafts failed; please ask again."
