"""The student tells the model today's date, "so that it knows the 14-day refund window"."""

import datetime

from gradekit import Traced, TracedTools
from lab.agent import PLAN, WRITE, word_for


def run(provider, task, tools):
    llm = Traced(provider)
    notes = TracedTools(tools).call("search_notes", word=word_for(task), limit=2)
    today = datetime.date.today().isoformat()
    plan = llm.complete(f"Today is {today}.\n" + PLAN.format(notes=" ".join(notes), task=task))
    return llm.complete(WRITE.format(plan=plan, task=task))
