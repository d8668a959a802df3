"""A student who times every step: each step's duration goes to stderr, and nothing of the
clock ever goes into a prompt or an answer."""

import sys
import time

from gradekit import Traced, TracedTools

PLAN = "Plan a reply in two short steps, do not write it yet.\nNotes: {notes}\nTask: {task}"
WRITE = "Write the reply from the plan, under 100 words.\nPlan: {plan}\nTask: {task}"


def word_for(task):
    lowered = task.lower()
    return next((w for w in ("refund", "incident", "sql", "grader") if w in lowered), "retry")


def timed(label, step):
    started = time.perf_counter()
    result = step()
    print(f"[{label}] {time.perf_counter() - started:.3f}s", file=sys.stderr)
    return result


def run(provider, task, tools):
    llm = Traced(provider)
    notes = timed(
        "notes", lambda: TracedTools(tools).call("search_notes", word=word_for(task), limit=2)
    )
    plan = timed("plan", lambda: llm.complete(PLAN.format(notes=" ".join(notes), task=task)))
    return timed("write", lambda: llm.complete(WRITE.format(plan=plan, task=task)))
