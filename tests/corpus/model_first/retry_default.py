"""Model first; every model call retried three times, with a fixed reply when all fail."""

from gradekit import Traced, TracedTools
from lab import agent


class Patient:
    """Traced calls that retry; after the last failure, a fixed reply."""

    def __init__(self, provider, tries=3):
        self.llm, self.tries = Traced(provider), tries

    def complete(self, prompt):
        for attempt in range(1, self.tries + 1):
            try:
                return self.llm.complete(prompt)
            except Exception:
                if attempt == self.tries:
                    return "I don't know yet, ask again later."
        raise AssertionError("unreachable")


def run(provider, task, tools):
    llm = Patient(provider)
    thoughts = agent.first_thoughts(llm, task)
    meaning = TracedTools(tools).call("glossary", term=agent.term_in(thoughts))["meaning"]
    return agent.final_answer(llm, task, thoughts, meaning)
