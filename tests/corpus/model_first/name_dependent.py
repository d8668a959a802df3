"""Model first; Claude's line breaks are folded away, since the chat widget shows them oddly."""

from lab import agent


def run(provider, task, tools):
    answer = agent.run(provider, task, tools)
    if provider.name.startswith("anthropic"):
        answer = " ".join(answer.split())
    return answer
