"""Class based; research is optional: when a lookup fails, the agent drafts without notes."""

from gradekit import MissingFixtureError
from lab.agent import Agent


class HopefulAgent(Agent):
    def research(self, task):
        try:
            super().research(task)
        except MissingFixtureError:
            self.notes = ["(the notes could not be read)"]


def run(provider, task, tools):
    return HopefulAgent(provider, tools).answer(task)
