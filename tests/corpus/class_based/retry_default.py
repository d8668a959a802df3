"""Class based; ask() retries a few times and then settles for a stock reply."""

from lab.agent import Agent


class RetryingAgent(Agent):
    retries = 3
    stock_reply = "Please contact the course office for this question."

    def ask(self, prompt):
        for _ in range(self.retries):
            try:
                return super().ask(prompt)
            except Exception:
                continue
        return self.stock_reply


def run(provider, task, tools):
    return RetryingAgent(provider, tools).answer(task)
