"""One helper, and a tidy() step for local models, whose replies "ramble on"."""

import textwrap

from lab import agent


def tidy(model, text):
    return textwrap.shorten(text, width=300) if "llama" in model else text


def run(provider, task, tools):
    return tidy(provider.name, agent.run(provider, task, tools))
