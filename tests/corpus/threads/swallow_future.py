"""Threads; a draft that failed becomes "", since the other draft is enough to merge."""

from concurrent.futures import ThreadPoolExecutor

from gradekit import Traced, TracedTools
from lab.agent import DRAFT, MERGE, STYLES, term


def result_or_empty(future):
    try:
        return future.result()
    except Exception as error:
        print(f"a draft failed ({type(error).__name__}), merging without it")
        return ""


def run(provider, task, tools):
    llm = Traced(provider)
    facts = TracedTools(tools).call("glossary", term=term(task))["meaning"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(llm.complete, DRAFT.format(style=style, facts=facts, task=task))
            for style in STYLES
        ]
        a, b = (result_or_empty(future) for future in futures)
    return llm.complete(MERGE.format(a=a, b=b))
