"""Small cohorts for the copy detector: agents written from scratch, each in its own style,
a disguised copy of one of them, and a hand-out module every student keeps.

Every agent answers without calling its provider, so a batch grades it in about a second;
what the detector compares is the code, the failure log and the cassettes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = [
    "ALICE",
    "CAROL",
    "DAVE",
    "ERIN",
    "FAILURES",
    "HANDOUT",
    "MALLORY",
    "cassette",
    "submission",
]

# Alice: split the task into sentences, rank them by the words they share, keep the best.
ALICE = '''"""Alice's agent: split the task into sentences, rank them, answer from the best."""

import re

STOP = {"the", "a", "an", "of", "to", "and", "in", "is", "for", "on", "with"}


def sentences(text):
    parts = re.split(r"(?<=[.!?])\\s+", text.strip())
    return [part for part in parts if part]


def keywords(sentence):
    words = re.findall(r"[a-z']+", sentence.lower())
    return [word for word in words if word not in STOP and len(word) > 2]


def score(sentence, wanted):
    found = keywords(sentence)
    if not found:
        return 0.0
    hits = sum(1 for word in found if word in wanted)
    return hits / len(found) + 0.1 * min(len(found), 10)


def summarise(text, limit=3):
    wanted = set()
    for sentence in sentences(text):
        wanted.update(keywords(sentence))
    ranked = sorted(sentences(text), key=lambda s: score(s, wanted), reverse=True)
    chosen = ranked[:limit]
    return " ".join(sorted(chosen, key=text.find))


def run(provider, task, tools=None):
    answer = summarise(task)
    if len(answer) > 600:
        answer = answer[:597] + "..."
    return answer or "I could not find anything to say about this task."
'''

# Mallory: Alice's agent with every name changed, the functions in another order, other
# comments and docstrings, and other spacing. Nothing else.
MALLORY = '''# my agent for the bootcamp (mallory)
import re


def run(prov, question, toolbox=None):
    """Entry point."""
    result = condense(question)   # main work
    if len(result) > 600:
        result = result[:597] + "..."
    return result or "I could not find anything to say about this task."


def condense(body, keep=3):
    """Keep the most central sentences."""
    vocab = set()
    for line in split_up(body):
        vocab.update(terms(line))
    order = sorted(split_up(body), key=lambda item: rate(item, vocab), reverse=True)
    best = order[:keep]
    return " ".join(sorted(best, key=body.find))


def rate(line, vocab):
    # fraction of known terms, plus a bonus for length
    got = terms(line)
    if not got:
        return 0.0
    count = sum(1 for t in got if t in vocab)
    return count / len(got) + 0.1 * min(len(got), 10)


IGNORED = {"the", "a", "an", "of", "to", "and", "in", "is", "for", "on", "with"}


def terms(line):
    tokens = re.findall(r"[a-z']+", line.lower())
    return [t for t in tokens if t not in IGNORED and len(t) > 2]


def split_up(body):
    pieces = re.split(r"(?<=[.!?])\\s+", body.strip())
    return [p for p in pieces if p]
'''

# Carol: a writer object that picks a canned opening by topic and pads the reply.
CAROL = '''"""Carol's agent: a small table of canned openings, picked by what the task mentions."""

OPENINGS = (
    ("refund", "Refunds follow the course policy on dates of purchase."),
    ("incident", "An incident note names what broke, who it hit and what comes next."),
    ("sql", "The query groups rows and counts each group."),
)


class Writer:
    def __init__(self, task):
        self.task = task
        self.lines = []

    def opening(self):
        lowered = self.task.lower()
        for word, line in OPENINGS:
            if word in lowered:
                self.lines.append(line)
                return True
        return False

    def body(self):
        count = len(self.task.split())
        self.lines.append(f"The task has {count} words; here is a short reply.")
        while len(self.lines) < 3:
            self.lines.append("More detail would need the recorded model answer.")

    def text(self):
        return "\\n".join(self.lines)


def run(provider, task, tools=None):
    writer = Writer(task)
    if not writer.opening():
        writer.lines.append("This task is outside the table of known topics.")
    writer.body()
    return writer.text()
'''

# Dave: a tiny state machine over the task's characters that counts what it sees.
DAVE = '''"""Dave's agent: walk the task once, count what kinds of text it holds, report that."""

from collections import Counter


def classify(char):
    if char.isdigit():
        return "digit"
    if char.isupper():
        return "capital"
    if char in ".,;:!?":
        return "punctuation"
    return "other" if not char.isalpha() else "letter"


def tally(task):
    counts = Counter()
    state, runs = None, 0
    for char in task:
        kind = classify(char)
        counts[kind] += 1
        if kind != state:
            runs += 1
            state = kind
    return counts, runs


def run(provider, task, tools=None):
    counts, runs = tally(task)
    listed = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    return f"The task changes kind {runs} times: {listed}."
'''

# Erin: build a nested outline recursively from the task's clauses.
ERIN = '''"""Erin's agent: turn the task into a numbered outline, clause by clause."""


def clauses(text, marks=(";", ",", " and ")):
    if not marks:
        return [text.strip()] if text.strip() else []
    head, rest = marks[0], marks[1:]
    found = []
    for piece in text.split(head):
        found.extend(clauses(piece, rest))
    return found


def outline(items, depth=0, number=1):
    if not items:
        return []
    first, *others = items
    line = "  " * depth + f"{number}. {first[:80]}"
    return [line, *outline(others, depth + (len(first) > 60), number + 1)]


def run(provider, task, tools=None):
    lines = outline(clauses(task)[:8])
    return "Outline of the task:\\n" + "\\n".join(lines)
'''

# The hand-out: a helper module the starter ships, which every student keeps as it is.
HANDOUT = '''"""Helpers the starter ships: text clean-up and a word budget for answers."""

import re
import textwrap

BUDGET = 120
_SPACES = re.compile(r"\\s+")


def clean(text):
    """One line of text, runs of white space made one space."""
    return _SPACES.sub(" ", text).strip()


def within_budget(text, budget=BUDGET):
    """The first ``budget`` words of ``text``, with an ellipsis when it was cut."""
    words = clean(text).split(" ")
    if len(words) <= budget:
        return " ".join(words)
    return " ".join(words[:budget]) + " ..."


def wrapped(text, width=72):
    """The text wrapped at ``width`` columns, paragraphs kept apart."""
    paragraphs = [clean(p) for p in text.split("\\n\\n") if p.strip()]
    return "\\n\\n".join(textwrap.fill(p, width) for p in paragraphs)


def bullet_list(items, marker="-"):
    """Each item on a line of its own, after ``marker``."""
    return "\\n".join(f"{marker} {clean(item)}" for item in items if clean(item))


def first_sentence(text):
    """The text up to its first full stop, question or exclamation mark."""
    match = re.search(r"[.!?]", text)
    return clean(text[:match.end()]) if match else clean(text)
'''

FAILURES = """\
# Failures

## The answer was cut in the middle of a word
- Symptom: the reply to the refund case ended with "purch" and the grader marked it short.
- Cause: I cut the answer at a fixed number of characters instead of at a word boundary,
  so a long policy sentence lost its last word and the full stop after it.
- Fix: the agent now cuts at the last space before the budget and adds an ellipsis.

## Boundaries
- What this lab cannot measure: whether the answer is kind to the student who asked.
"""


def cassette(case: str, answers: dict[str, str]) -> bytes:
    """A cassette (``gradekit.cassette/1``) whose prompts are the keys of ``answers``."""
    entries = {
        f"{number:016x}": {
            "prompt": prompt,
            "response": answer,
            "provider": "test",
            "recorded_at": "2026-01-01T00:00:00Z",
        }
        for number, (prompt, answer) in enumerate(sorted(answers.items()))
    }
    return (
        json.dumps(
            {"format": "gradekit.cassette/1", "case": case, "entries": entries},
            indent=2,
            sort_keys=True,
        ).encode("utf-8")
        + b"\n"
    )


def submission(
    root: Path,
    agent: str,
    *,
    handout: bool = False,
    failures: str = "",
    cassettes: dict[str, bytes] | None = None,
) -> Path:
    """A submission at ``root`` (made anew): ``lab.agent:run`` is ``agent``; with
    ``handout``, ``lab/helpers.py`` is the hand-out's; a FAILURES.md and cassettes when
    given."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "lab").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8")
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(agent, "utf-8")
    if handout:
        (root / "lab" / "helpers.py").write_text(HANDOUT, "utf-8")
    if failures:
        (root / "FAILURES.md").write_text(failures, "utf-8")
    for name, data in (cassettes or {}).items():
        (root / "cassettes").mkdir(exist_ok=True)
        (root / "cassettes" / name).write_bytes(data)
    return root
