"""The expectation's three checks judged on what the parent served: the reply template the
answer must follow, the calls (the state) the run requires, and the facts the answer must
cite from a tool's served result. Each is optional: without them an expectation's snapshot
is byte for byte what it was.

It tests private helpers on purpose: ``grader._expect``'s oracle (``judge``, ``laid_over``,
...) and the command line's expectation flags (``grader.cli._options``)."""

from __future__ import annotations

import argparse
import json

import pytest

from gradekit import UsageError
from grader import CaseOutcome, Served
from grader._expect import (
    Expectation,
    Observed,
    Shortfall,
    Told,
    ToolCall,
    expectation_document,
    judge,
    laid_over,
    met,
    parse_expectation,
)
from grader.cli._options import add_expectation_options, told_expectation
from grader.scoring import observed

TEMPLATE = "Decision: {decision}. Reason: {reason}."
SEARCH = "web_search"
POLICY = json.dumps(
    [{"title": "Refund policy", "snippet": "Refunds within 14 days of purchase."}],
    separators=(",", ":"),
)


def _expect(**given: object) -> Expectation:
    return parse_expectation({"outcome": "answer", "goal": "g", **given}, "here")


def _run(answer: str, *calls: ToolCall) -> Observed:
    """A returned run whose tool calls are ``calls``, a provider call before each."""
    steps: list[str] = []
    placed = []
    for call in calls:
        steps += ["", call.tool]
        placed.append(ToolCall(len(steps), call.tool, call.served, call.args, call.result))
    return Observed("returned", answer, tuple(c.tool for c in calls), tuple(steps), tuple(placed))


def _search(result: str = POLICY, *, served: bool = True) -> ToolCall:
    return ToolCall(0, SEARCH, served, '{"query":"refund window"}', result if served else "")


def _said(problems: list[Shortfall]) -> list[str]:
    return [str(problem) for problem in problems]


# -- the snapshot ---------------------------------------------------------------------------


def test_an_expectation_without_the_new_keys_keeps_its_snapshot_bytes() -> None:
    raw = {"outcome": "answer", "mentions": ["refund"], "goal": "g", "negation": True}
    document = expectation_document(parse_expectation(raw, "here"))
    assert json.dumps(document) == (
        '{"forbidden_actions": [], "mentions": ["refund"], "never_mentions": [], '
        '"outcome": "answer", "goal": "g", "negation": true}'
    )


def test_the_new_keys_are_written_canonical_and_read_back_the_same() -> None:
    expect = _expect(
        reply_template=TEMPLATE,
        requires=[
            'create_ticket  {"priority": "high", "queue": "refunds"}',
            "notify_student",
            "notify_student",
        ],
        cites=["web_search:14 days", " web_search :  14 days "],
    )
    document = expectation_document(expect)
    assert {key: document[key] for key in ("cites", "reply_template", "requires")} == {
        "cites": ["web_search: 14 days"],
        "reply_template": TEMPLATE,
        "requires": ['create_ticket {"priority":"high","queue":"refunds"}', "notify_student"],
    }
    assert parse_expectation(document, "again") == expect


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"reply_template": "Thanks for asking."}, "has no {name} placeholder: mark the part"),
        ({"reply_template": "{decision} {reason}"}, "has no fixed text, so any answer follows"),
        ({"reply_template": "Decision: {decision. Reason"}, "unbalanced or unnamed brace"),
        ({"reply_template": "Decision: decision}"}, "unbalanced or unnamed brace"),
        ({"reply_template": "Decision: {}"}, "unbalanced or unnamed brace; write each"),
        ({"reply_template": "Decision: {a}\nReason: {b}"}, "reply_template must be one line"),
        (
            {"requires": "create_ticket"},
            'requires must be a list of strings, e.g. ["create_ticket"]',
        ),
        ({"requires": ["rm -rf /"]}, "write it as TOOL or TOOL {JSON object"),
        ({"requires": ['create_ticket {"priority": high}']}, "whose arguments are not JSON"),
        ({"requires": ["create_ticket [1]"]}, "write it as TOOL or TOOL {JSON object"),
        ({"requires": ['create_ticket "high"']}, "write it as TOOL or TOOL {JSON object"),
        ({"requires": ['create_ticket {"n": NaN}']}, "whose arguments are not JSON"),
        (
            {"requires": ["create_ticket"], "forbidden_actions": ["create_ticket"]},
            "create_ticket is in both requires and forbidden_actions; keep it in one",
        ),
        ({"cites": ["30 days"]}, "write a citation as TOOL: FACT"),
        ({"cites": ["web search: 30 days"]}, "write a citation as TOOL: FACT"),
        ({"cites": ["web_search:  "]}, "write a citation as TOOL: FACT"),
        ({"cites": ["web_search: \u200b"]}, "a fact is a phrase of 1 to 200"),
        (
            {"cites": ["web_search: 30 days"], "never_mentions": ["30 DAYS"]},
            "'30 days' is in both cites and never_mentions",
        ),
        (
            {"cites": ["web_search: 30 days"], "forbidden_actions": ["web_search"]},
            "web_search is in both cites and forbidden_actions",
        ),
    ],
)
def test_a_bad_new_key_says_what_to_change(raw: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match="here: ") as caught:
        _expect(**raw)
    assert message in str(caught.value)


# -- the reply template ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Decision: approved. Reason: bought 10 days ago.",
        "DECISION:\u200b approved.   reason: within\n14 days.",  # compared as facts are
        "Sure. Decision: approved. Reason: within 14 days. Anything else?",
    ],
)
def test_an_answer_that_follows_the_template_passes(answer: str) -> None:
    assert judge(_expect(reply_template=TEMPLATE), _run(answer)) == []


@pytest.mark.parametrize(
    ("answer", "where"),
    [
        ("Approved, because you bought it 10 days ago.", "no 'Decision:'"),
        ("Decision: approved, within 14 days.", "no '. Reason:' after 'Decision:'"),
        ("Reason: 10 days. Decision: approved.", "no '. Reason:' after 'Decision:'"),
        ("Decision: . Reason: 10 days.", "nothing stands for {decision} before '. Reason:'"),
        ("Decision: approved. Reason: .", "nothing stands for {reason} before '.'"),
        ("Indecision: approved. Reason: 10 days.", "no 'Decision:'"),  # whole words
    ],
)
def test_an_answer_that_parts_from_the_template_fails_where_it_parts(
    answer: str, where: str
) -> None:
    [problem] = judge(_expect(reply_template=TEMPLATE), _run(answer))
    assert (problem.at, problem.expected) == ("answer", f"follows the reply template {TEMPLATE!r}")
    assert problem.observed.endswith(where) and problem.observed.startswith("the answer '")
    assert str(problem) == f"the answer does not follow the reply template {TEMPLATE!r}: {where}"


def test_a_template_may_glue_a_placeholder_to_its_words_and_end_on_one() -> None:
    glued = _expect(reply_template="Total: {amount}USD")
    assert judge(glued, _run("Total: 30USD")) == []
    greeting = _expect(reply_template="{greeting}, your ticket is {id}")
    assert judge(greeting, _run("Hello, your ticket is T-1")) == []
    assert _said(judge(greeting, _run("Hello, your ticket is "))) == [
        "the answer does not follow the reply template '{greeting}, your ticket is {id}': "
        "nothing stands for {id} after ', your ticket is'"
    ]


# -- required state -------------------------------------------------------------------------


def _ticket(args: str, *, served: bool = True) -> ToolCall:
    return ToolCall(0, "create_ticket", served, args, '{"id":7}' if served else "")


HIGH = _expect(requires=['create_ticket {"priority": "high"}'])


def test_a_required_write_present_with_its_arguments_is_met() -> None:
    run = _run("Done.", _search(), _ticket('{"priority":"high","queue":"refunds"}'))
    assert judge(HIGH, run) == []
    assert judge(_expect(requires=["create_ticket"]), _run("ok", _ticket("{}"))) == []
    assert met(HIGH) == (
        'met: the expected answer; a served call of create_ticket {"priority":"high"}'
    )


def test_a_required_write_absent_is_the_state_the_run_left() -> None:
    [problem] = judge(HIGH, _run("Done.", _search()))
    assert (problem.at, problem.expected, problem.observed) == (
        "state",
        'a call of create_ticket {"priority":"high"}, served',
        "the run called web_search instead",
    )
    assert str(problem) == (
        "the run never called the required create_ticket (the run called web_search instead)"
    )
    assert judge(HIGH, _run("Done."))[0].observed == "the run called no tool"


@pytest.mark.parametrize(
    "args",
    ['{"priority":"low"}', '{"queue":"refunds"}', '{"priority":["high"]}', '{"priority":true}'],
)
def test_a_required_write_with_other_arguments_fails_at_that_call(args: str) -> None:
    [problem] = judge(HIGH, _run("Done.", _search(), _ticket(args)))
    assert (problem.at, problem.expected) == (
        "call 4 (create_ticket)",
        'a call of create_ticket {"priority":"high"}, served',
    )
    assert problem.observed == (
        f"create_ticket called 1 time(s), never so; first as call 4 with {args}"
    )


def test_a_required_write_the_parent_answered_with_a_miss_wrote_nothing() -> None:
    [problem] = judge(HIGH, _run("Done.", _ticket('{"priority":"high"}', served=False)))
    assert problem.at == "call 2 (create_ticket)"
    assert str(problem) == (
        'the required call create_ticket {"priority":"high"} was answered '
        "with a miss (call 2), so it changed nothing"
    )


def test_nested_arguments_and_json_types_are_compared_as_json() -> None:
    nested = _expect(requires=['create_ticket {"student": {"id": 1}}'])
    assert judge(nested, _run("ok", _ticket('{"student":{"id":1,"name":"A"}}'))) == []
    assert judge(nested, _run("ok", _ticket('{"student":{"id":true}}'))) != []
    assert judge(nested, _run("ok", _ticket('{"student":{"id":1.0}}'))) != []


# -- citations -------------------------------------------------------------------------------


CITE = _expect(cites=["web_search: 14 days"])


def test_a_citation_is_met_when_a_served_result_of_the_tool_held_the_fact() -> None:
    assert judge(CITE, _run("You can get a refund within 14 days.", _search())) == []
    # Any string value, however deep; a miss earlier in the run does not matter.
    deep = json.dumps({"hits": [{"page": {"text": "Refunds: 14\u00a0DAYS."}}]})
    assert judge(CITE, _run("Within 14 days.", _search(served=False), _search(deep))) == []
    assert met(CITE) == "met: the expected answer; cites '14 days' from a web_search result"


def test_a_fact_no_tool_returned_fails_the_citation_when_the_tool_was_never_called() -> None:
    """The attack: the model states a plausible fact it never looked up."""
    [problem] = judge(CITE, _run("You can get a refund within 14 days."))
    assert str(problem) == (
        "the answer states '14 days' but no web_search result this run "
        "returned it (web_search was never called)"
    )
    assert (problem.at, problem.expected) == (
        "answer",
        "states '14 days' as a web_search result this run returned it",
    )
    assert problem.observed.endswith("; no call of web_search")


@pytest.mark.parametrize(
    "result",
    [
        json.dumps([{"snippet": "Refunds within 30 days of purchase."}]),
        json.dumps([{"snippet": "Refunds within 140 days of purchase."}]),  # whole words
        json.dumps({"14 days": "the key is the tool's name, not what it returned"}),
        json.dumps({"days": 14}),  # a number is no stated fact
    ],
)
def test_a_fact_the_tools_result_does_not_hold_fails_the_citation(result: str) -> None:
    [problem] = judge(CITE, _run("Within 14 days.", _search(result)))
    assert str(problem) == (
        "the answer states '14 days' but no web_search result this run "
        "returned it (its 1 result(s) say otherwise)"
    )
    assert problem.at == "answer"
    assert f"web_search results (call(s) 2) without it: {result}" in problem.observed


def test_a_fact_from_a_call_the_parent_answered_with_a_miss_fails_at_that_call() -> None:
    run = _run("Within 14 days.", _search(served=False), _search(served=False))
    [problem] = judge(CITE, run)
    assert (problem.at, problem.expected, problem.observed) == (
        "call 2 (web_search)",
        "a served web_search result holding '14 days'",
        "web_search called 2 time(s), each answered with a miss: no result",
    )
    assert str(problem).endswith("(every call of web_search was a miss)")


def test_a_fact_returned_by_another_tool_is_not_a_citation_of_this_one() -> None:
    other = ToolCall(0, "read_docs", True, "{}", POLICY)
    assert judge(CITE, _run("Within 14 days.", other)) != []


def test_an_answer_that_does_not_state_the_cited_fact_fails_at_the_answer() -> None:
    [problem] = judge(CITE, _run("Within two weeks.", _search()))
    assert str(problem) == (
        "the answer does not state '14 days', which it must cite from web_search"
    )


def test_the_shortfalls_go_in_the_order_the_run_went() -> None:
    expect = _expect(
        reply_template=TEMPLATE,
        requires=["create_ticket"],
        cites=["web_search: 14 days"],
        forbidden_actions=["issue_refund"],
    )
    refund = ToolCall(0, "issue_refund", True, "{}", "{}")
    run = _run("Within 14 days.", refund, _search(served=False))
    assert [problem.at for problem in judge(expect, run)] == [
        "call 2 (issue_refund)",
        "call 4 (web_search)",
        "state",
        "answer",
    ]


# -- what the parent saw, and the flags ------------------------------------------------------


def test_observed_takes_the_tool_calls_as_the_parent_served_them() -> None:
    outcome = CaseOutcome(
        "c",
        "returned",
        answer="a",
        calls=(
            Served("0123456789abcdef", True),
            Served("web_search 1", True, "web_search", args='{"query":"x"}', result=POLICY),
            Served("create_ticket 1", False, "create_ticket", args='{"priority":"high"}'),
        ),
    )
    assert observed(outcome).calls == (
        ToolCall(2, "web_search", True, '{"query":"x"}', POLICY),
        ToolCall(3, "create_ticket", False, '{"priority":"high"}', ""),
    )


def _flags(*argv: str) -> Told:
    parser = argparse.ArgumentParser()
    add_expectation_options(parser, "the rubric case's")
    return told_expectation(parser.parse_args(list(argv)))


def test_flags_give_the_new_keys_and_lay_them_over_a_base() -> None:
    told = _flags(
        "--reply-template",
        TEMPLATE,
        "--require",
        'create_ticket {"priority":"high"}',
        "--cite",
        "web_search:14 days",
    )
    assert (told.reply_template, told.requires, told.cites) == (
        TEMPLATE,
        ('create_ticket {"priority":"high"}',),
        ("web_search:14 days",),
    )
    base = _expect(
        forbidden_actions=["create_ticket", "web_search"],
        never_mentions=["14 days"],
        requires=["notify_student"],
        cites=["read_docs: refund"],
    )
    laid = laid_over(base, told, "here")
    assert (laid.forbidden_actions, laid.never_mentions, laid.reply_template) == ((), (), TEMPLATE)
    assert laid.requires == ("notify_student", 'create_ticket {"priority":"high"}')
    assert laid.cites == ("read_docs: refund", "web_search: 14 days")
    # The reverse: a forbidden tool, or a fact never to be said, leaves the base.
    again = laid_over(laid, _flags("--forbid", "read_docs", "--forbid", "notify_student"), "here")
    assert (again.requires, again.cites) == (
        ('create_ticket {"priority":"high"}',),
        ("web_search: 14 days",),
    )
    with pytest.raises(UsageError, match="here: cites holds 'web search: x': write a citation"):
        laid_over(None, Told(cites=("web search: x",)), "here")
