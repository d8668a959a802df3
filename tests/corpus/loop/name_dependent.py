"""A loop whose length depends on the model: the big hosted models get one round only."""

from lab import agent


def run(provider, task, tools):
    if provider.name.startswith(("openai:", "anthropic:")):
        agent.MAX_ROUNDS = 1  # they are good enough after one critique
    else:
        agent.MAX_ROUNDS = 2
    return agent.run(provider, task, tools)
