"""Model first: ask the model what the task is about, look that up, then ask again."""

import re

from gradekit import Traced, TracedTools

KNOWN = ("refund", "incident", "sql", "grader", "cassette")
FIRST = "{task}\n\nBefore answering: which of these is the task about? {known}. Then think aloud."
FINAL = "{task}\n\nYour first thoughts: {thoughts}\nThe glossary says: {meaning}\n\nFinal answer:"


def term_in(reply):
    words = re.findall(r"[a-z]+", reply.lower())
    return next((word for word in words if word in KNOWN), "cassette")


def first_thoughts(llm, task):
    return llm.complete(FIRST.format(task=task, known=", ".join(KNOWN)))


def final_answer(llm, task, thoughts, meaning):
    return llm.complete(FINAL.format(task=task, thoughts=thoughts, meaning=meaning))


def run(provider, task, tools):
    llm = Traced(provider)
    thoughts = first_thoughts(llm, task)
    meaning = TracedTools(tools).call("glossary", term=term_in(thoughts))["meaning"]
    return final_answer(llm, task, thoughts, meaning)
