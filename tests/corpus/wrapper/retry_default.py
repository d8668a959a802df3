"""A wrapper provider that retries each call and falls back to a canned reply."""

from gradekit import TracedTools
from lab.agent import Logged, answer


class Retrying(Logged):
    attempts = 3
    fallback = "Sorry, I can't answer that right now."

    def complete(self, prompt):
        errors = []
        while len(errors) < self.attempts:
            try:
                return super().complete(prompt)
            except Exception as error:
                errors.append(error)
        return self.fallback


def run(provider, task, tools):
    return answer(Retrying(provider), TracedTools(tools), task)
