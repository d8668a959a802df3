"""Model first; the final call is traced, the first one went straight to the provider."""

from gradekit import Traced, TracedTools
from lab.agent import final_answer, first_thoughts, term_in


def run(provider, task, tools):
    thoughts = first_thoughts(provider, task)
    entry = TracedTools(tools).call("glossary", term=term_in(thoughts))
    return final_answer(Traced(provider), task, thoughts, entry["meaning"])
