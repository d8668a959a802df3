"""The student stamps each answer with the time it was written, as their help desk does."""

import time

from lab import agent


def run(provider, task, tools):
    answer = agent.run(provider, task, tools)
    return f"{answer}\n\n(answered at {time.strftime('%H:%M:%S')})"
