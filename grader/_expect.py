"""A case's expectation snapshot, and the small fact oracle that judges a run against it.

An expectation says what a run of the case must come to: the business ``goal`` it serves
(a text for people; without one the case cannot pass), its ``outcome`` (``answer``:
``run()`` returns a str; ``raise``: it raises, as for a task the agent must refuse), the
expected ``decision`` (a fact the answer must state), ``forbidden_actions`` (tools it must
never call), and the fact oracle's assertions: facts that must (``mentions``) or must not
(``never_mentions``) appear in the answer, information it must name as ``missing``,
whether it must state a ``negation``, and the ``intent`` the case expresses (kept and
shown, never judged: an agent's answer is free text, with no intent to compare). A rubric
writes one as ``[case.expect]``; a regression set stores one per item. Everything here is
pure.

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
    "NEGATIONS",
    "OUTCOMES",
    "Expectation",
    "Observed",
    "Told",
    "expectation_document",
    "judge",
    "laid_over",
    "mentioned",
    "met",
    "normalised",
    "parse_expectation",
]

OUTCOMES = ("answer", "raise")  # run() returns a str / run() raises
_KEYS = ("forbidden_actions", "mentions", "never_mentions", "outcome")  # always written
_ORACLE = ("decision", "goal", "intent", "missing", "negation")  # written when given
# What "states a negation" means to the oracle: one of these words, as a whole word.
NEGATIONS = ("no", "not", "never", "none", "nothing", "nor", "neither", "cannot", "can't",
             "won't", "don't", "doesn't", "isn't", "aren't", "wasn't", "shouldn't", "without")
_TOOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_SPACE = re.compile(r"\s+")
_LONGEST_FACT = 200  # characters: a fact is a phrase, not a paragraph
_LONGEST_TEXT = 500  # characters of a goal or an intent: one line


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a run of a case must come to; ``outcome`` "" when none was given."""

    outcome: Literal["answer", "raise", ""] = ""
    mentions: tuple[str, ...] = ()
    never_mentions: tuple[str, ...] = ()
    forbidden_actions: tuple[str, ...] = ()
    goal: str = ""  # the business goal; "" when none was given (the case cannot pass)
    decision: str = ""  # the expected decision: a fact the answer must state
    intent: str = ""  # the intent the task expresses: kept and shown, never judged
    missing: tuple[str, ...] = ()  # information the answer must name as missing
    negation: bool = False  # the answer must state a negation


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
    unknown = sorted(set(raw) - {*_KEYS, *_ORACLE})
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)} in an expectation; "
                         f"the valid ones are {', '.join(sorted({*_KEYS, *_ORACLE}))}")
    outcome = raw.get("outcome", "")
    if outcome not in ("", *OUTCOMES):
        raise UsageError(f"{where}: outcome = {outcome!r}; use \"answer\" (run() returns a "
                         "str) or \"raise\" (run() raises)")
    facts = {key: _texts(raw.get(key, []), f"{where}: {key}") for key in _KEYS[:3]}
    for tool in facts["forbidden_actions"]:
        if not _TOOL.fullmatch(tool):
            raise UsageError(f"{where}: forbidden_actions holds {tool!r}, which is not a tool "
                             "name")
    facts["missing"] = _texts(raw.get("missing", []), f"{where}: missing")
    texts = {key: _text(raw.get(key, ""), f"{where}: {key}") for key in ("decision", "goal",
                                                                         "intent")}
    for key in ("mentions", "never_mentions", "missing"):
        for fact in facts[key]:
            _fact(fact, f"{where}: {key} holds {fact!r}")
    if texts["decision"]:
        _fact(texts["decision"], f"{where}: decision = {texts['decision']!r}")
    unwanted = {normalised(f) for f in facts["never_mentions"]}
    for key, values in (("mentions", facts["mentions"]), ("missing", facts["missing"]),
                        ("decision", (texts["decision"],))):
        both = sorted({normalised(f) for f in values if f} & unwanted)
        if both:
            raise UsageError(f"{where}: {both[0]!r} is in both {key} and never_mentions; "
                             "keep it in one")
    negation = raw.get("negation", False)
    if not isinstance(negation, bool):
        raise UsageError(f"{where}: negation = {negation!r}; use true (the answer must state a "
                         "negation) or false")
    return Expectation(outcome, facts["mentions"], facts["never_mentions"],
                       facts["forbidden_actions"], texts["goal"], texts["decision"],
                       texts["intent"], facts["missing"], negation)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or (value and not value.strip()) or "\n" in value \
            or len(value) > _LONGEST_TEXT:
        raise UsageError(f"{where} must be one line of text, at most {_LONGEST_TEXT} "
                         "characters")
    return value


def _fact(fact: str, where: str) -> None:
    if not normalised(fact) or len(fact) > _LONGEST_FACT:
        raise UsageError(f"{where}: a fact is a phrase of 1 to {_LONGEST_FACT} visible "
                         "characters")


@dataclass(frozen=True, slots=True)
class Told:
    """An expectation as a command's flags give it, to lay over a base one (``laid_over``):
    "", () and None are "not given"."""

    outcome: str = ""
    mentions: tuple[str, ...] = ()
    never_mentions: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    goal: str = ""
    decision: str = ""
    intent: str = ""
    missing: tuple[str, ...] = ()
    negation: bool | None = None


def laid_over(base: Expectation | None, told: Told, where: str) -> Expectation:
    """``base`` (a rubric case's, a case's; None: none) with ``told`` over it: a value given
    replaces the base's, facts and actions given are added, and a fact given to mentions
    leaves the base's never_mentions, and the reverse. A ``UsageError`` naming ``where``
    when the result is no expectation."""
    base = base or Expectation()
    wanted = {normalised(fact) for fact in (*told.mentions, *told.missing, told.decision) if fact}
    unwanted = {normalised(fact) for fact in told.never_mentions}
    raw: dict[str, Any] = {
        "outcome": told.outcome or base.outcome,
        "mentions": [f for f in base.mentions if normalised(f) not in unwanted]
        + list(told.mentions),
        "never_mentions": [f for f in base.never_mentions if normalised(f) not in wanted]
        + list(told.never_mentions),
        "forbidden_actions": [*base.forbidden_actions, *told.forbid],
        "goal": told.goal or base.goal, "decision": told.decision or base.decision,
        "intent": told.intent or base.intent,
        "missing": [f for f in base.missing if normalised(f) not in unwanted]
        + list(told.missing),
        "negation": base.negation if told.negation is None else told.negation}
    return parse_expectation(raw, where)


def _texts(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{where} must be a list of strings, e.g. [\"full refund\"]")
    return tuple(dict.fromkeys(value))


def expectation_document(expect: Expectation) -> dict[str, Any]:
    """The expectation as JSON: the four core keys always, each of the oracle's only when
    given (so the snapshot of an expectation that gives none is what it always was)."""
    document: dict[str, Any] = {
        "forbidden_actions": list(expect.forbidden_actions),
        "mentions": list(expect.mentions), "never_mentions": list(expect.never_mentions),
        "outcome": expect.outcome}
    given = {"decision": expect.decision, "goal": expect.goal, "intent": expect.intent,
             "missing": list(expect.missing), "negation": expect.negation}
    return {**document, **{key: value for key, value in given.items() if value}}


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
        if expect.decision and not mentioned(answer, expect.decision):
            problems.append(f"the answer does not state the decision {expect.decision!r}")
        problems += [f"the answer does not mention {fact!r}" for fact in expect.mentions
                     if not mentioned(answer, fact)]
        problems += [f"the answer does not name the missing {fact!r}" for fact in expect.missing
                     if not mentioned(answer, fact)]
        if expect.negation and not any(mentioned(answer, word) for word in NEGATIONS):
            problems.append("the answer states no negation (no, not, never, cannot, ...)")
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
    if expect.decision:
        parts.append(f"the decision {expect.decision!r}")
    if expect.mentions:
        parts.append("mentions " + ", ".join(repr(f) for f in expect.mentions))
    if expect.never_mentions:
        parts.append("none of " + ", ".join(repr(f) for f in expect.never_mentions))
    if expect.missing:
        parts.append("names the missing " + ", ".join(repr(f) for f in expect.missing))
    if expect.negation:
        parts.append("a negation")
    if expect.forbidden_actions:
        parts.append("no call of " + ", ".join(expect.forbidden_actions))
    return "met: " + "; ".join([*parts, *shown])
