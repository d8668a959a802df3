"""Model first, with the first call guarded: "if the model is down, say so politely"."""

from gradekit import CassetteMiss, Traced, TracedTools
from lab.agent import final_answer, first_thoughts, term_in


def run(provider, task, tools):
    llm = Traced(provider)
    try:
        thoughts = first_thoughts(llm, task)
    except CassetteMiss:
        return "The model is not reachable right now; please try again in a minute."
    meaning = TracedTools(tools).call("glossary", term=term_in(thoughts))["meaning"]
    return final_answer(llm, task, thoughts, meaning)
