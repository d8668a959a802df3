"""A wrapper provider used for the reply only; the plan goes to the provider directly."""

from gradekit import TracedTools
from lab.agent import Logged, search_word


def run(provider, task, tools):
    found = TracedTools(tools).call("search_notes", word=search_word(task), limit=2)
    plan = provider.complete(f"Plan a reply in two steps to: {task}\nNotes: {found}")
    return Logged(provider).complete(f"Task: {task}\nPlan: {plan}\nWrite the reply.")
