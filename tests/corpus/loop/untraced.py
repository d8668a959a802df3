"""A loop on the bare provider: only the glossary call is traced."""

from gradekit import TracedTools
from lab.agent import CRITIQUE, DRAFT, IMPROVE, is_done, subject


def run(provider, task, tools):
    facts = TracedTools(tools).call("glossary", term=subject(task))["meaning"]
    draft = provider.complete(DRAFT.format(facts=facts, task=task))
    rounds = 0
    while rounds < 2:
        rounds += 1
        critique = provider.complete(CRITIQUE.format(n=rounds, task=task, draft=draft))
        if is_done(critique):
            break
        draft = provider.complete(IMPROVE.format(draft=draft, critique=critique))
    return draft
