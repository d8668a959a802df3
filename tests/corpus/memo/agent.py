"""A memo: every answer is kept in a module-level dict keyed by its prompt, so a prompt asked
again (in this case or a later one) costs no second call. Only answers go in, never a failure:
a miss raises before anything is stored."""

from gradekit import Traced, TracedTools

MEMO = {}
TERMS = ("refund", "incident", "sql", "grader")
EXPLAIN = "Explain the course term '{term}' in one sentence.\nGlossary: {meaning}"
ANSWER = "Answer the student in under 100 words.\nBackground: {background}\nTask: {task}"


def term_in(task):
    lowered = task.lower()
    return next((term for term in TERMS if term in lowered), "cassette")


def remembered(llm, prompt):
    if prompt not in MEMO:
        MEMO[prompt] = llm.complete(prompt)
    return MEMO[prompt]


def run(provider, task, tools):
    llm = Traced(provider)
    term = term_in(task)
    meaning = TracedTools(tools).call("glossary", term=term)["meaning"]
    background = remembered(llm, EXPLAIN.format(term=term, meaning=meaning))
    return remembered(llm, ANSWER.format(background=background, task=task))
