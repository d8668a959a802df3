"""The reference lab's agent: plan, answer, self-check, and revise once if the check says no.

It follows the submission contract: it talks only to the provider it is
given, traces every call, lets ``CassetteMiss`` propagate, never looks at
``provider.name``, and returns a ``str``. Given the same cassette it makes the
same calls in the same order, so its output is byte-identical on every replay.
"""

from __future__ import annotations

from lab._provider import Provider
from lab._tracing import Traced

__all__ = ["run"]

PLAN = (
    "You are a teaching assistant in an agent-engineering bootcamp.\n"
    "Task: {task}\n\n"
    "Write a short plan of at most three numbered steps for answering this task. "
    "Do not answer it yet."
)
ANSWER = (
    "Task: {task}\n\n"
    "Plan:\n{plan}\n\n"
    "Follow the plan and write the final answer in at most 120 words."
)
CHECK = (
    "Task: {task}\n\n"
    "Answer:\n{answer}\n\n"
    "Does this answer address the task? Reply YES or NO, then one sentence why."
)
REVISE = (
    "Task: {task}\n\n"
    "Draft answer:\n{answer}\n\n"
    "Reviewer's note: {verdict}\n\n"
    "Rewrite the answer so that it addresses the task, in at most 120 words."
)


def run(provider: Provider, task: str) -> str:
    """Answer ``task`` with three or four traced provider calls."""
    llm = Traced(provider)
    plan = llm.complete(PLAN.format(task=task)).strip()
    answer = llm.complete(ANSWER.format(task=task, plan=plan)).strip()
    verdict = llm.complete(CHECK.format(task=task, answer=answer)).strip()
    if _says_no(verdict):
        answer = llm.complete(REVISE.format(task=task, answer=answer, verdict=verdict)).strip()
    return answer


def _says_no(verdict: str) -> bool:
    """A verdict is a no when its first word is NO, in any case or punctuation."""
    words = verdict.split()
    return bool(words) and words[0].strip(".,:;!*").upper() == "NO"
