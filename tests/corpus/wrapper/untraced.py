"""A wrapper provider that logs to the console instead of the trace file."""

from gradekit import TracedTools
from lab.agent import Logged, answer


class Printed(Logged):
    def log(self, key, started, error):
        print("call", key, "failed" if error else "ok")


def run(provider, task, tools):
    return answer(Printed(provider), TracedTools(tools), task)
