"""A shortfall: one place where a run falls short of its expectation, both sides of it,
and how a shortfall shows what the answer said. Pure; ``grader._expect`` re-exports
``Shortfall``."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["HEAD", "Located", "Shortfall", "answer_side"]

_SPACE = re.compile(r"\s+")
HEAD = 120  # characters of an answer (or a result) a shortfall shows as what the run did


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One place where a run falls short of its expectation, both sides of it: where
    (``at``: ``call N (TOOL)``, ``outcome``, ``state`` or ``answer``), what the
    expectation wants there and what the run did. ``str()`` is the sentence a report's
    detail shows."""

    at: str
    expected: str
    observed: str
    text: str

    def __str__(self) -> str:
        return self.text


Located = tuple[int, Shortfall]  # the call a shortfall stands at (1-based); 0: after them


def answer_side(answer: str, fact: str = "") -> str:
    """What the run said, as a shortfall's observed side: around ``fact`` where it stands,
    else the answer's head; one line, cut."""
    flat = _SPACE.sub(" ", answer).strip()
    lowered = flat.lower()
    at = lowered.find(fact.lower()) if fact and len(lowered) == len(flat) else -1
    start = max(0, at - HEAD // 3)
    piece = flat[start : start + HEAD]
    cut = ("..." if start else "") + piece + ("..." if start + HEAD < len(flat) else "")
    return f"the answer {cut!r}" if flat else "an empty answer"
