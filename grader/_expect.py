"""A case's expectation snapshot, and the small fact oracle that judges a run against it.

An expectation says what a run of the case must come to: the business ``goal`` it serves
(a text for people; without one the case cannot pass), its ``outcome`` (``answer``:
``run()`` returns a str; ``raise``: it raises, as for a task the agent must refuse), the
expected ``decision`` (a fact the answer must state), ``forbidden_actions`` (tools it must
never call), and the fact oracle's assertions: facts that must (``mentions``) or must not
(``never_mentions``) appear in the answer, information it must name as ``missing``,
whether it must state a ``negation``, and the ``intent`` the case expresses (kept and
shown, never judged: an agent's answer is free text, with no intent to compare). Three
more are judged on what the parent served: the ``reply_template`` the answer must follow
(``grader._reply``), the calls the run ``requires`` (the state it must leave) and the facts
it ``cites`` from a tool's served result (``grader._calls``). A rubric writes one as
``[case.expect]``; a regression set stores one per item. Everything here is pure.

Facts are matched as a reader would (``grader._facts``): NFKC, no format characters, case
folded, whitespace runs one space, whole words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gradekit import UsageError
from grader._calls import (
    TOOL_NAME,
    ToolCall,
    cite,
    cited_tool,
    required,
    required_tool,
    short_of_citation,
    short_of_required,
)
from grader._facts import mentioned, normalised
from grader._reply import check_template, departure
from grader._shortfall import Located, Shortfall, answer_side

__all__ = [
    "NEGATIONS",
    "OUTCOMES",
    "Expectation",
    "Observed",
    "Shortfall",
    "Told",
    "ToolCall",
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
_EVIDENCE = ("cites", "reply_template", "requires")  # on what the parent served; when given
# What "states a negation" means to the oracle: one of these words, as a whole word.
NEGATIONS = (
    "no",
    "not",
    "never",
    "none",
    "nothing",
    "nor",
    "neither",
    "cannot",
    "can't",
    "won't",
    "don't",
    "doesn't",
    "isn't",
    "aren't",
    "wasn't",
    "shouldn't",
    "without",
)
_KNOWN = sorted({*_KEYS, *_ORACLE, *_EVIDENCE})
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
    reply_template: str = ""  # the answer must follow it ("Decision: {decision}.")
    requires: tuple[str, ...] = ()  # calls the run must make, served: "TOOL" / "TOOL {JSON}"
    cites: tuple[str, ...] = ()  # "TOOL: FACT": stated, as a served TOOL result held it


@dataclass(frozen=True, slots=True)
class Observed:
    """What the grader saw of one run: how it ended, the answer it kept, the tools the
    agent called (by name, in order; every call, served or not), where each call stood
    among all of them (``steps``; empty: the tools are all the calls), and each tool call
    as the parent served it (``calls``: its arguments and result)."""

    status: str  # "returned", "raised", "timeout", "crashed", "not_run"
    answer: str | None
    tools: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()  # every call in order: a tool's name, "" for a provider's
    calls: tuple[ToolCall, ...] = ()


def parse_expectation(raw: object, where: str) -> Expectation:
    """An expectation from a TOML table or a JSON object; ``UsageError`` naming ``where``
    and the fix when it is not one."""
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}: an expectation is a table of {', '.join(_KEYS)}")
    unknown = sorted(set(raw) - set(_KNOWN))
    if unknown:
        raise UsageError(
            f"{where}: unknown key(s) {', '.join(unknown)} in an expectation; "
            f"the valid ones are {', '.join(_KNOWN)}"
        )
    outcome = raw.get("outcome", "")
    if outcome not in ("", *OUTCOMES):
        raise UsageError(
            f'{where}: outcome = {outcome!r}; use "answer" (run() returns a '
            'str) or "raise" (run() raises)'
        )
    facts = {key: _texts(raw.get(key, []), f"{where}: {key}") for key in _KEYS[:3]}
    for tool in facts["forbidden_actions"]:
        if not TOOL_NAME.fullmatch(tool):
            raise UsageError(f"{where}: forbidden_actions holds {tool!r}, which is not a tool name")
    facts["missing"] = _texts(raw.get("missing", []), f"{where}: missing")
    texts = {
        key: _text(raw.get(key, ""), f"{where}: {key}") for key in ("decision", "goal", "intent")
    }
    for key in ("mentions", "never_mentions", "missing"):
        for fact in facts[key]:
            _fact(fact, f"{where}: {key} holds {fact!r}")
    if texts["decision"]:
        _fact(texts["decision"], f"{where}: decision = {texts['decision']!r}")
    template, requires, cites = _evidence(raw, where, facts["forbidden_actions"])
    unwanted = {normalised(f) for f in facts["never_mentions"]}
    for key, values in (
        ("mentions", facts["mentions"]),
        ("missing", facts["missing"]),
        ("decision", (texts["decision"],)),
        ("cites", tuple(map(_cited_fact, cites))),
    ):
        both = sorted({normalised(f) for f in values if f} & unwanted)
        if both:
            raise UsageError(
                f"{where}: {both[0]!r} is in both {key} and never_mentions; keep it in one"
            )
    negation = raw.get("negation", False)
    if not isinstance(negation, bool):
        raise UsageError(
            f"{where}: negation = {negation!r}; use true (the answer must state a "
            "negation) or false"
        )
    return Expectation(
        outcome,
        facts["mentions"],
        facts["never_mentions"],
        facts["forbidden_actions"],
        texts["goal"],
        texts["decision"],
        texts["intent"],
        facts["missing"],
        negation,
        template,
        requires,
        cites,
    )


def _evidence(
    raw: Mapping[str, Any], where: str, forbidden: Sequence[str]
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The reply template, the required calls and the citations, each in its canonical
    form; none with a tool that is also forbidden."""
    template = _text(raw.get("reply_template", ""), f"{where}: reply_template")
    if template:
        check_template(template, f"{where}: reply_template")
    requires = tuple(
        dict.fromkeys(
            str(required(text, f"{where}: requires"))
            for text in _texts(raw.get("requires", []), f"{where}: requires", '"create_ticket"')
        )
    )
    cites = tuple(
        dict.fromkeys(
            str(cite(text, f"{where}: cites"))
            for text in _texts(raw.get("cites", []), f"{where}: cites", '"web_search: 30 days"')
        )
    )
    for text in cites:
        _fact(_cited_fact(text), f"{where}: cites holds {text!r}")
    for key, tools in (
        ("requires", map(required_tool, requires)),
        ("cites", map(cited_tool, cites)),
    ):
        both = sorted(set(tools) & set(forbidden))
        if both:
            raise UsageError(
                f"{where}: {both[0]} is in both {key} and forbidden_actions; keep it in one"
            )
    return template, requires, cites


def _cited_fact(text: str) -> str:
    """The fact of a ``cites`` entry, read leniently (no check)."""
    return text.partition(":")[2].strip()


def _text(value: object, where: str) -> str:
    if (
        not isinstance(value, str)
        or (value and not value.strip())
        or "\n" in value
        or len(value) > _LONGEST_TEXT
    ):
        raise UsageError(f"{where} must be one line of text, at most {_LONGEST_TEXT} characters")
    return value


def _fact(fact: str, where: str) -> None:
    if not normalised(fact) or len(fact) > _LONGEST_FACT:
        raise UsageError(f"{where}: a fact is a phrase of 1 to {_LONGEST_FACT} visible characters")


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
    reply_template: str = ""
    requires: tuple[str, ...] = ()
    cites: tuple[str, ...] = ()


def laid_over(base: Expectation | None, told: Told, where: str) -> Expectation:
    """``base`` (a rubric case's, a case's; None: none) with ``told`` over it: a value given
    replaces the base's, facts, actions and calls given are added; a fact given to mentions
    (or cited) leaves the base's never_mentions, and the reverse; a tool given to forbid
    leaves the base's requires and cites, and the reverse. A ``UsageError`` naming
    ``where`` when the result is no expectation."""
    base = base or Expectation()
    cited = list(map(_cited_fact, told.cites))
    wanted = {
        normalised(fact) for fact in (*told.mentions, *told.missing, told.decision, *cited) if fact
    }
    unwanted = {normalised(fact) for fact in told.never_mentions}
    needed = {*map(required_tool, told.requires), *map(cited_tool, told.cites)}
    raw: dict[str, Any] = {
        "outcome": told.outcome or base.outcome,
        "mentions": [f for f in base.mentions if normalised(f) not in unwanted]
        + list(told.mentions),
        "never_mentions": [f for f in base.never_mentions if normalised(f) not in wanted]
        + list(told.never_mentions),
        "forbidden_actions": [t for t in base.forbidden_actions if t not in needed]
        + list(told.forbid),
        "goal": told.goal or base.goal,
        "decision": told.decision or base.decision,
        "intent": told.intent or base.intent,
        "missing": [f for f in base.missing if normalised(f) not in unwanted] + list(told.missing),
        "negation": base.negation if told.negation is None else told.negation,
        "reply_template": told.reply_template or base.reply_template,
        "requires": [c for c in base.requires if required_tool(c) not in told.forbid]
        + list(told.requires),
        "cites": [
            c
            for c in base.cites
            if cited_tool(c) not in told.forbid and normalised(_cited_fact(c)) not in unwanted
        ]
        + list(told.cites),
    }
    return parse_expectation(raw, where)


def _texts(value: object, where: str, example: str = '"full refund"') -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{where} must be a list of strings, e.g. [{example}]")
    return tuple(dict.fromkeys(value))


def expectation_document(expect: Expectation) -> dict[str, Any]:
    """The expectation as JSON: the four core keys always, each of the others only when
    given (so the snapshot of an expectation that gives none is what it always was)."""
    document: dict[str, Any] = {
        "forbidden_actions": list(expect.forbidden_actions),
        "mentions": list(expect.mentions),
        "never_mentions": list(expect.never_mentions),
        "outcome": expect.outcome,
    }
    given = {
        "decision": expect.decision,
        "goal": expect.goal,
        "intent": expect.intent,
        "missing": list(expect.missing),
        "negation": expect.negation,
        "cites": list(expect.cites),
        "reply_template": expect.reply_template,
        "requires": list(expect.requires),
    }
    return {**document, **{key: value for key, value in given.items() if value}}


def judge(expect: Expectation, run: Observed) -> list[Shortfall]:
    """Where ``run`` falls short of ``expect``, in the order the run went: at the calls (a
    forbidden action where it was first called, a required call made with other arguments
    or answered with a miss, a cited tool whose every call was a miss), then the outcome,
    then the state the run left (a required call never made), then what the answer states
    or must not (the reply template, decision, mentions, missing, negation, citations,
    forbidden facts). Its first item is the first point of divergence. Empty when the run
    meets every expectation. The outcome must be given (``expect.outcome``); a caller
    checks that first, since without it nothing is judged."""
    answered = expect.outcome == "answer" and run.answer is not None
    answer = run.answer or ""
    needed = [
        found
        for text in expect.requires
        if (found := short_of_required(text, run.calls, run.tools))
    ]
    cited = [
        found
        for text in expect.cites
        if answered and (found := short_of_citation(text, run.calls, answer))
    ]
    at_calls = sorted(
        (found for found in (*_forbidden(expect, run), *needed, *cited) if found[0]),
        key=lambda found: found[0],
    )
    problems = [problem for _, problem in at_calls] + _outcome(expect, run)
    problems += [problem for step, problem in needed if not step]
    if answered:
        problems += _stated(expect, answer)
    problems += [problem for step, problem in cited if not step]
    problems += [
        Shortfall(
            "answer",
            f"no mention of {fact!r}",
            answer_side(answer, fact),
            f"the answer mentions {fact!r}, which it must not",
        )
        for fact in expect.never_mentions
        if mentioned(answer, fact)
    ]
    return problems


def _forbidden(expect: Expectation, run: Observed) -> list[Located]:
    steps = run.steps or run.tools
    found = []
    for tool in (t for t in expect.forbidden_actions if t in run.tools):
        count, first = run.tools.count(tool), steps.index(tool) + 1
        found.append(
            (
                first,
                Shortfall(
                    f"call {first} ({tool})",
                    f"no call of {tool}",
                    f"{tool} called {count} time(s), first as call {first}",
                    f"called the forbidden action {tool} ({count} time(s))",
                ),
            )
        )
    return found


def _outcome(expect: Expectation, run: Observed) -> list[Shortfall]:
    if expect.outcome == "answer" and not (run.status == "returned" and run.answer is not None):
        return [
            Shortfall(
                "outcome",
                "run() returns an answer",
                f"run() {_ended(run)}",
                f"expected an answer, but run() {_ended(run)}",
            )
        ]
    if expect.outcome == "raise" and run.status != "raised":
        return [
            Shortfall(
                "outcome",
                "run() raises",
                f"run() {_ended(run)}",
                f"expected run() to raise, but it {_ended(run)}",
            )
        ]
    return []


def _stated(expect: Expectation, answer: str) -> list[Shortfall]:
    """What a returned answer falls short of: its form, then the facts it must state."""
    said, problems = answer_side(answer), []
    template = expect.reply_template
    if template and (gap := departure(template, answer)):
        problems.append(
            Shortfall(
                "answer",
                f"follows the reply template {template!r}",
                f"{said}: {gap}",
                f"the answer does not follow the reply template {template!r}: {gap}",
            )
        )
    if expect.decision and not mentioned(answer, expect.decision):
        problems.append(
            Shortfall(
                "answer",
                f"states the decision {expect.decision!r}",
                said,
                f"the answer does not state the decision {expect.decision!r}",
            )
        )
    problems += [
        Shortfall("answer", f"mentions {fact!r}", said, f"the answer does not mention {fact!r}")
        for fact in expect.mentions
        if not mentioned(answer, fact)
    ]
    problems += [
        Shortfall(
            "answer",
            f"names the missing {fact!r}",
            said,
            f"the answer does not name the missing {fact!r}",
        )
        for fact in expect.missing
        if not mentioned(answer, fact)
    ]
    if expect.negation and not any(mentioned(answer, word) for word in NEGATIONS):
        problems.append(
            Shortfall(
                "answer",
                "a negation (no, not, never, cannot, ...)",
                said,
                "the answer states no negation (no, not, never, cannot, ...)",
            )
        )
    return problems


def _ended(run: Observed) -> str:
    if run.status == "returned":
        return "returned an answer" if run.answer is not None else "returned no str"
    return {"raised": "raised", "timeout": "timed out", "crashed": "crashed"}.get(
        run.status, "was not run"
    )


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
    if expect.reply_template:
        parts.append(f"follows the reply template {expect.reply_template!r}")
    if expect.requires:
        parts.append("a served call of " + ", ".join(expect.requires))
    if expect.cites:
        parts.append(
            "cites "
            + ", ".join(f"{_cited_fact(c)!r} from a {cited_tool(c)} result" for c in expect.cites)
        )
    return "met: " + "; ".join([*parts, *shown])
