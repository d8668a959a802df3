"""A wrapper provider: Logged wraps the provider and writes the trace records by hand."""

import hashlib
import json
import os
import time

from gradekit import TracedTools


class Logged:
    """The provider, with one JSON line per call in $GRADEKIT_TRACE (see docs/formats.md)."""

    def __init__(self, provider):
        self.provider = provider
        self.name = provider.name

    def complete(self, prompt):
        key = hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()[:16]
        started = time.perf_counter()
        try:
            reply = self.provider.complete(prompt)
        except Exception as error:
            self.log(key, started, error)
            raise
        self.log(key, started, None)
        return reply

    def log(self, key, started, error):
        record = {
            "key": key,
            "provider": self.name,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
            "ok": error is None,
            "error": type(error).__name__ if error else None,
        }
        path = os.environ.get("GRADEKIT_TRACE")
        if path:
            with open(path, "a", encoding="utf-8") as trace:
                trace.write(json.dumps(record) + "\n")


def search_word(task):
    for word in task.replace(",", " ").replace(".", " ").split():
        if word.lower() in ("refund", "incident", "sql", "grader"):
            return word
    return "retry"


def answer(llm, toolbox, task):
    found = toolbox.call("search_notes", word=search_word(task), limit=2)
    plan = llm.complete(f"Plan the reply in two steps.\nTask: {task}\nNotes: {found}")
    return llm.complete(f"Task: {task}\nPlan: {plan}\nWrite the reply.")


def run(provider, task, tools):
    return answer(Logged(provider), TracedTools(tools), task)
