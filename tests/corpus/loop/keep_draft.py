"""A loop that keeps the draft it has when an improvement fails, and stops there."""

from gradekit import Traced, TracedTools
from lab import agent


def run(provider, task, tools):
    llm = Traced(provider)
    meaning = TracedTools(tools).call("glossary", term=agent.subject(task))["meaning"]
    draft = llm.complete(agent.DRAFT.format(facts=meaning, task=task))
    for n in (1, 2):
        critique = llm.complete(agent.CRITIQUE.format(n=n, task=task, draft=draft))
        if agent.is_done(critique):
            break
        try:
            draft = llm.complete(agent.IMPROVE.format(draft=draft, critique=critique))
        except Exception:
            break  # the draft we have is fine
    return draft
