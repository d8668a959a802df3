"""The memo with functools.lru_cache: a tone guide every case asks for is fetched once, by
the first case, and served from the cache to every later case (the cached helper reads the
provider from a module global, since lru_cache cannot hash it well)."""

import functools

from gradekit import Traced, TracedTools
from lab.agent import ANSWER, term_in

TONE = "In one sentence: what tone should a course assistant use with bootcamp students?"
LLM = None


@functools.lru_cache(maxsize=64)
def ask(prompt):
    return LLM.complete(prompt)


def run(provider, task, tools):
    global LLM
    LLM = Traced(provider)
    meaning = TracedTools(tools).call("glossary", term=term_in(task))["meaning"]
    tone = ask(TONE)
    return ask(ANSWER.format(background=f"{tone} {meaning}", task=task))
