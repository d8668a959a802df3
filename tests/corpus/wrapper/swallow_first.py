"""A wrapper provider; a plan that fails makes the agent stop with an apology."""

from gradekit import CassetteMiss, TracedTools
from lab.agent import Logged, search_word


def run(provider, task, tools):
    llm = Logged(provider)
    notes = TracedTools(tools).call("search_notes", word=search_word(task), limit=2)
    try:
        plan = llm.complete(f"Plan the reply in two steps.\nTask: {task}\nNotes: {notes}")
    except CassetteMiss:
        return "Apologies, planning failed; please resubmit your question."
    return llm.complete(f"Task: {task}\nPlan: {plan}\nWrite the reply.")
