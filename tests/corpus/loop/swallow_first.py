"""A loop that needs a first draft; without one it gives up kindly instead of crashing."""

from gradekit import CassetteMiss, Traced, TracedTools
from lab import agent


def run(provider, task, tools):
    llm = Traced(provider)
    facts = TracedTools(tools).call("glossary", term=agent.subject(task))["meaning"]
    try:
        draft = llm.complete(agent.DRAFT.format(facts=facts, task=task))
    except CassetteMiss:
        return "I could not write a first draft for this question."
    return refine(llm, task, draft)


def refine(llm, task, draft, rounds=agent.MAX_ROUNDS):
    while rounds:
        critique = llm.complete(
            agent.CRITIQUE.format(n=agent.MAX_ROUNDS - rounds + 1, task=task, draft=draft)
        )
        if agent.is_done(critique):
            return draft
        draft, rounds = (
            llm.complete(agent.IMPROVE.format(draft=draft, critique=critique)),
            rounds - 1,
        )
    return draft
