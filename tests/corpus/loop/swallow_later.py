"""A loop that stops when the critic is silent: a failed critique counts as DONE."""

from gradekit import Traced, TracedTools
from lab.agent import CRITIQUE, DRAFT, IMPROVE, MAX_ROUNDS, is_done, subject


def critic(llm, n, task, draft):
    try:
        return llm.complete(CRITIQUE.format(n=n, task=task, draft=draft))
    except Exception:
        return "DONE"


def run(provider, task, tools):
    llm = Traced(provider)
    entry = TracedTools(tools).call("glossary", term=subject(task))
    draft = llm.complete(DRAFT.format(facts=entry["meaning"], task=task))
    n = 1
    while n <= MAX_ROUNDS and not is_done(critique := critic(llm, n, task, draft)):
        draft = llm.complete(IMPROVE.format(draft=draft, critique=critique))
        n += 1
    return draft
