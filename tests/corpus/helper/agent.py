"""One helper: every model call goes through ask(llm, prompt)."""

from gradekit import Traced, TracedTools

OUTLINE = "Outline an answer in three bullets.\nTask: {task}\nCourse notes:\n{notes}"
WRITE = "Write the answer from this outline, for a beginner.\nOutline:\n{outline}"
SHORTEN = "Shorten this to at most 80 words, keep every number:\n{text}"


def ask(llm, prompt):
    return llm.complete(prompt).strip()


KEYWORDS = {"refund": "refund", "incident": "incident", "SELECT": "SQL", "grader": "grader"}


def keyword(task):
    return next((word for cue, word in KEYWORDS.items() if cue in task), "cassette")


def notes(tools, task):
    return "\n".join(TracedTools(tools).call("search_notes", word=keyword(task), limit=3))


def run(provider, task, tools):
    llm = Traced(provider)
    outline = ask(llm, OUTLINE.format(task=task, notes=notes(tools, task)))
    text = ask(llm, WRITE.format(outline=outline))
    return ask(llm, SHORTEN.format(text=text))
