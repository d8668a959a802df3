"""The async SDK; answers from local models are cut to their first paragraph."""

from lab import agent

LOCAL = ("ollama", "llamacpp")


def run(provider, task, tools):
    answer = agent.run(provider, task, tools)
    if provider.name.split(":")[0] in LOCAL:
        answer = answer.split("\n\n")[0]
    return answer
