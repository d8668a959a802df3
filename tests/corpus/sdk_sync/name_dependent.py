"""The openai SDK; the reply tells the student which vendor answered."""

from lab import agent


def run(provider, task, tools):
    vendor = provider.name.partition(":")[0]
    return f"{agent.run(provider, task, tools)}\n\n(via {vendor})"
