"""Model first; the student traced the tool (the stretch goal asks for it) but not the model."""

from gradekit import TracedTools
from lab.agent import final_answer, first_thoughts, term_in


def run(provider, task, tools):
    thoughts = first_thoughts(provider, task)
    found = TracedTools(tools).call("glossary", term=term_in(thoughts))
    return final_answer(provider, task, thoughts, found["meaning"])
