"""Steps that retry: a step asks the same prompt again twice, then re-raises the last miss."""

import time

from gradekit import CassetteMiss, Traced, TracedTools
from lab import agent

RETRIES = 2


def ask(llm, prompt):
    for attempt in range(RETRIES + 1):
        try:
            return llm.complete(prompt)
        except CassetteMiss as miss:
            last = miss
            time.sleep(0.01 * attempt)
    raise last


def run(provider, task, tools):
    llm, toolbox = Traced(provider), TracedTools(tools)
    found = {"task": task, "meaning": toolbox.call("glossary", term=agent.subject(task))["meaning"]}
    for name, template in agent.STEPS:
        found[name] = ask(llm, template.format(**found))
    return found["reply"]
