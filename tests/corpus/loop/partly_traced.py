"""A loop whose critic is a separate, untraced function the student wrote later."""

from gradekit import Traced, TracedTools
from lab.agent import CRITIQUE, DRAFT, IMPROVE, MAX_ROUNDS, is_done, subject


def critic(provider, n, task, draft):
    return provider.complete(CRITIQUE.format(n=n, task=task, draft=draft))


def run(provider, task, tools):
    llm = Traced(provider)
    found = TracedTools(tools).call("glossary", term=subject(task))
    draft = llm.complete(DRAFT.format(facts=found["meaning"], task=task))
    for n in range(1, MAX_ROUNDS + 1):
        verdict = critic(provider, n, task, draft)
        if is_done(verdict):
            break
        draft = llm.complete(IMPROVE.format(draft=draft, critique=verdict))
    return draft
