"""Class based; the review, added last, talks to the raw provider."""

from lab.agent import Agent


class ReviewedAgent(Agent):
    def __init__(self, provider, tools):
        super().__init__(provider, tools)
        self.reviewer = provider

    def review(self, task, draft):
        return self.reviewer.complete(f"Review for: {task}\n\n{draft}\n\nOK or REWRITE?")


def run(provider, task, tools):
    return ReviewedAgent(provider, tools).answer(task)
