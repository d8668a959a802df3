"""Class based; the answer says which model wrote it, for transparency."""

from lab.agent import Agent


class SigningAgent(Agent):
    def __init__(self, provider, tools):
        super().__init__(provider, tools)
        self.model = provider.name.split(":")[-1]

    def answer(self, task):
        return f"{super().answer(task)}\n\n(written by {self.model})"


def run(provider, task, tools):
    return SigningAgent(provider, tools).answer(task)
