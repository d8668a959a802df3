"""A case's expectation snapshot, and the small fact oracle that judges a run against it.

An expectation says what a run of the case must come to: its ``outcome`` (``answer``:
``run()`` returns a str; ``raise``: it raises, as for a task the agent must refuse),
``forbidden_actions`` (tools it must never call), and facts that must (``mentions``) or
must not (``never_mentions``) appear in the answer. A rubric writes one as ``[case.expect]``;
a regression set stores one per item. Everything here is pure.

Facts are matched as a reader would: the answer and the fact are both brought to NFKC,
format characters (zero-width spaces and joiners, bidi marks) are dropped, case is folded
and every run of whitespace is one space; a fact then matches where it stands as whole
words (``14 days`` is not found in ``140 days``). So ``no re\\u200bfund`` still counts
as ``no refund``, and a forbidden fact cannot be hidden by an invisible character.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gradekit import UsageError

__all__ = [
    "OUTCOMES",
    "Expectation",
    "Observed",
    "expectation_document",
    "judge",
    "mentioned",
    "met",
    "normalised",
    "parse_expectation",
]

OUTCOMES = ("answer", "raise")  # run() returns a str / run() raises
_KEYS = ("forbidden_actions", "mentions", "never_mentions", "outcome")
_TOOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_SPACE = re.compile(r"\s+")
_LONGEST_FACT = 200  # characters: a fact is a phrase, not a paragraph


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a run of a case must come to; ``outcome`` "" when none was given."""

    outcome: Literal["answer", "raise", ""] = ""
    mentions: tuple[str, ...] = ()
    never_mentions: tuple[str, ...] = ()
    forbidden_actions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Observed:
    """What the grader saw of one run: how it ended, the answer it kept, and the tools the
    agent called (by name, in order; every call, served or not)."""

    status: str  # "returned", "raised", "timeout", "crashed", "not_run"
    answer: str | None
    tools: tuple[str, ...] = ()


def parse_expectation(raw: object, where: str) -> Expectation:
    """An expectation from a TOML table or a JSON object; ``UsageError`` naming ``where``
    and the fix when it is not one."""
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}: an expectation is a table of {', '.join(_KEYS)}")
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)} in an expectation; "
                         f"the valid ones are {', '.join(_KEYS)}")
    outcome = raw.get("outcome", "")
    if outcome not in ("", *OUTCOMES):
        raise UsageError(f"{where}: outcome = {outcome!r}; use \"answer\" (run() returns a "
                         "str) or \"raise\" (run() raises)")
    facts = {key: _texts(raw.get(key, []), f"{where}: {key}") for key in _KEYS[:3]}
    for tool in facts["forbidden_actions"]:
        if not _TOOL.fullmatch(tool):
            raise UsageError(f"{where}: forbidden_actions holds {tool!r}, which is not a tool "
                             "name")
    for key in ("mentions", "never_mentions"):
        for fact in facts[key]:
            if not normalised(fact) or len(fact) > _LONGEST_FACT:
                raise UsageError(f"{where}: {key} holds {fact!r}: a fact is a phrase of 1 to "
                                 f"{_LONGEST_FACT} visible characters")
    both = sorted({normalised(f) for f in facts["mentions"]}
                  & {normalised(f) for f in facts["never_mentions"]})
    if both:
        raise UsageError(f"{where}: {both[0]!r} is in both mentions and never_mentions; "
                         "keep it in one")
    return Expectation(outcome, facts["mentions"], facts["never_mentions"],
                       facts["forbidden_actions"])


def _texts(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{where} must be a list of strings, e.g. [\"full refund\"]")
    return tuple(dict.fromkeys(value))


def expectation_document(expect: Expectation) -> dict[str, Any]:
    """The expectation as JSON, every key present (a regression set's bytes are fixed)."""
    return {"forbidden_actions": list(expect.forbidden_actions),
            "mentions": list(expect.mentions), "never_mentions": list(expect.never_mentions),
            "outcome": expect.outcome}


def normalised(text: str) -> str:
    """``text`` as facts are compared: NFKC, no format characters, case folded, one space."""
    folded = "".join(char for char in unicodedata.normalize("NFKC", text)
                     if unicodedata.category(char) != "Cf").casefold()
    return _SPACE.sub(" ", folded).strip()


def mentioned(answer: str, fact: str) -> bool:
    """Whether ``fact`` stands in ``answer`` as whole words, once both are ``normalised``."""
    wanted = normalised(fact)
    pattern = rf"(?<!\w){re.escape(wanted)}(?!\w)"
    return re.search(pattern, normalised(answer)) is not None


def judge(expect: Expectation, run: Observed) -> list[str]:
    """Where ``run`` falls short of ``expect``, in a fixed order (the outcome, then
    forbidden actions, missing facts, forbidden facts): its first item is the first point
    of divergence. Empty when the run meets every expectation. The outcome must be given
    (``expect.outcome``); a caller checks that first, since without it nothing is judged."""
    problems = []
    if expect.outcome == "answer" and not (run.status == "returned" and run.answer is not None):
        problems.append(f"expected an answer, but run() {_ended(run)}")
    if expect.outcome == "raise" and run.status != "raised":
        problems.append(f"expected run() to raise, but it {_ended(run)}")
    called = [tool for tool in expect.forbidden_actions if tool in run.tools]
    problems += [f"called the forbidden action {tool} ({run.tools.count(tool)} time(s))"
                 for tool in called]
    answer = run.answer or ""
    if expect.outcome == "answer" and run.answer is not None:
        problems += [f"the answer does not mention {fact!r}" for fact in expect.mentions
                     if not mentioned(answer, fact)]
    problems += [f"the answer mentions {fact!r}, which it must not"
                 for fact in expect.never_mentions if mentioned(answer, fact)]
    return problems


def _ended(run: Observed) -> str:
    if run.status == "returned":
        return "returned an answer" if run.answer is not None else "returned no str"
    return {"raised": "raised", "timeout": "timed out", "crashed": "crashed"}.get(
        run.status, "was not run")


def met(expect: Expectation, shown: Sequence[str] = ()) -> str:
    """The detail of a run that meets ``expect``."""
    parts = [f"the expected {expect.outcome}"]
    if expect.mentions:
        parts.append("mentions " + ", ".join(repr(f) for f in expect.mentions))
    if expect.never_mentions:
        parts.append("none of " + ", ".join(repr(f) for f in expect.never_mentions))
    if expect.forbidden_actions:
        parts.append("no call of " + ", ".join(expect.forbidden_actions))
    return "met: " + "; ".join([*parts, *shown])
