"""Model first; when the first call fails it guesses the topic itself and carries on."""

from gradekit import Traced, TracedTools
from lab.agent import final_answer, first_thoughts, term_in


def run(provider, task, tools):
    llm = Traced(provider)
    try:
        thoughts = first_thoughts(llm, task)
    except Exception:
        thoughts = "This looks like a question about the refund policy."
    meaning = TracedTools(tools).call("glossary", term=term_in(thoughts))["meaning"]
    return final_answer(llm, task, thoughts, meaning)
