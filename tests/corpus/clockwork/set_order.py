"""The student passes the task's long words as keywords, deduplicated with a set.

Six letters and more: every case then has six such words or more, an order that a
grading's five hash seeds hardly ever all keep. (A set of two words keeps its order under
half the seeds: five seeds that all ask the recorded order give the case full marks one
grading in 32; five that all ask another order are followed by more seeds until one asks
the recorded order, tests/grader/grading/test_seed_search.py.)"""

from gradekit import Traced, TracedTools
from lab.agent import WRITE, word_for

PLAN = "Plan a reply in two short steps about: {keywords}.\nNotes: {notes}\nTask: {task}"


def keywords(task):
    words = {word.strip(".,;:?()*'\"").lower() for word in task.split()}
    return ", ".join(word for word in words if len(word) > 5)


def run(provider, task, tools):
    llm = Traced(provider)
    notes = TracedTools(tools).call("search_notes", word=word_for(task), limit=2)
    plan = llm.complete(PLAN.format(keywords=keywords(task), notes=" ".join(notes), task=task))
    return llm.complete(WRITE.format(plan=plan, task=task))
