"""The student passes the task's long words as keywords, deduplicated with a set."""

from gradekit import Traced, TracedTools
from lab.agent import WRITE, word_for

PLAN = "Plan a reply in two short steps about: {keywords}.\nNotes: {notes}\nTask: {task}"


def keywords(task):
    words = {word.strip(".,;:?()*'\"").lower() for word in task.split()}
    return ", ".join(word for word in words if len(word) > 6)


def run(provider, task, tools):
    llm = Traced(provider)
    notes = TracedTools(tools).call("search_notes", word=word_for(task), limit=2)
    plan = llm.complete(PLAN.format(keywords=keywords(task), notes=" ".join(notes), task=task))
    return llm.complete(WRITE.format(plan=plan, task=task))
