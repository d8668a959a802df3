"""Class based; the student swapped Traced out "to make it faster" and kept the tools traced."""

from lab.agent import Agent


class FastAgent(Agent):
    def __init__(self, provider, tools):
        super().__init__(provider, tools)
        self.llm = provider


def run(provider, task, tools):
    return FastAgent(provider, tools).answer(task)
