"""Model first; if the final call fails, the first thoughts are a good enough answer."""

from gradekit import Traced, TracedTools
from lab.agent import final_answer, first_thoughts, term_in


def run(provider, task, tools):
    llm = Traced(provider)
    thoughts = first_thoughts(llm, task)
    glossary = TracedTools(tools).call("glossary", term=term_in(thoughts))
    try:
        return final_answer(llm, task, thoughts, glossary["meaning"])
    except Exception:
        return thoughts
