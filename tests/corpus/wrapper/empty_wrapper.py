"""A wrapper provider that never lets an error out: a failed call is an empty reply."""

from gradekit import TracedTools
from lab.agent import Logged, answer


class Safe(Logged):
    def complete(self, prompt):
        try:
            return super().complete(prompt)
        except Exception:
            return ""


def run(provider, task, tools):
    return answer(Safe(provider), TracedTools(tools), task)
