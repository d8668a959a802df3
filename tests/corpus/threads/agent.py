"""Threads: two drafts are written at once on a ThreadPoolExecutor, then one call merges
them. future.result() re-raises whatever a draft raised, so a miss ends run()."""

from concurrent.futures import ThreadPoolExecutor

from gradekit import Traced, TracedTools

STYLES = ("short", "step-by-step")
DRAFT = "Write a {style} draft answer for a bootcamp student.\nGlossary: {facts}\nTask: {task}"
MERGE = "Merge the two drafts into one answer of at most 100 words.\nA: {a}\nB: {b}"


def term(task):
    for word in ("refund", "incident", "sql", "grader"):
        if word in task.lower():
            return word
    return "cassette"


def drafts(llm, task, facts):
    with ThreadPoolExecutor(max_workers=len(STYLES)) as pool:
        futures = [
            pool.submit(llm.complete, DRAFT.format(style=style, facts=facts, task=task))
            for style in STYLES
        ]
        return [future.result() for future in futures]


def run(provider, task, tools):
    llm = Traced(provider)
    facts = TracedTools(tools).call("glossary", term=term(task))["meaning"]
    a, b = drafts(llm, task, facts)
    return llm.complete(MERGE.format(a=a, b=b))
