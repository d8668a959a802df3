"""A loop whose every call retries; a call that never succeeds gives a placeholder draft."""

import time

from gradekit import Traced, TracedTools
from lab.agent import CRITIQUE, DRAFT, IMPROVE, MAX_ROUNDS, is_done, subject

PLACEHOLDER = "(the model did not answer; keeping the previous text)"


def call(llm, prompt, attempts=3):
    for attempt in range(attempts):
        try:
            return llm.complete(prompt)
        except Exception:
            time.sleep(0.01 * attempt)
    return PLACEHOLDER


def run(provider, task, tools):
    llm = Traced(provider)
    facts = TracedTools(tools).call("glossary", term=subject(task))["meaning"]
    draft = call(llm, DRAFT.format(facts=facts, task=task))
    for n in range(MAX_ROUNDS):
        critique = call(llm, CRITIQUE.format(n=n + 1, task=task, draft=draft))
        if is_done(critique):
            break
        draft = call(llm, IMPROVE.format(draft=draft, critique=critique))
    return draft
