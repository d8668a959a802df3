"""Class based; a review that fails to come back is taken as an OK."""

from gradekit import CassetteMiss
from lab.agent import Agent


class TrustingAgent(Agent):
    def review(self, task, draft):
        try:
            return super().review(task, draft)
        except CassetteMiss:
            return "OK"


def run(provider, task, tools):
    return TrustingAgent(provider, tools).answer(task)
