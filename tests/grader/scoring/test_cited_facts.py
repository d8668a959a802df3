"""The citation check end to end: a rubric case that cites a fact from web_search, graded
by the built-in ``expectations`` check, fails an answer that states the fact when no
web_search result of the run returned it, and passes the honest one. The fast test builds
the parent's record by hand; the slow one runs two small agents in the sandbox, whose parent
serves the search and records what it answered."""

from __future__ import annotations

import json
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from grader import CaseOutcome, CriterionResult, Limits, RunResult, Served
from grader.rubric import Rubric, parse_rubric
from grader.sandbox import RunPlan, Sandbox, Serving
from grader.scoring import Evidence, expectations

RUBRIC = parse_rubric(
    b"""
[rubric]
id = "search-lab"
version = 1
title = "Say only what you found"

[[case]]
id = "refund-window"
task = "How long is the refund window?"
[case.expect]
goal = "the student learns the refund window the policy page gives"
outcome = "answer"
cites = ["web_search: 14 days"]

[[criterion]]
id = "expectations"
title = "Expected outcomes"
weight = 100
check = "expectations"
full = "Every case comes to what the rubric expects of it"
typical_loss = "An answer that states what no tool returned"
""",
    source="search.toml",
)
FOUND = [{"title": "Refund policy", "snippet": "Refunds are accepted within 14 days."}]
SEARCHED = Served(
    'web_search {"query":"refund window"}',
    True,
    "web_search",
    args='{"query":"refund window"}',
    result=json.dumps(FOUND),
)


def _graded(rubric: Rubric, outcome: CaseOutcome) -> CriterionResult:
    evidence = Evidence(
        cases=rubric.cases,
        label="p",
        primary=RunResult({outcome.case: outcome}),
        others=(),
        loud=(),
        probe=None,
        failures=None,
        stretch=(),
        second_set=None,
    )
    return expectations(evidence, rubric, rubric.criteria[0])


def test_the_rubric_case_keeps_its_citation() -> None:
    assert RUBRIC.cases[0].expect is not None
    assert RUBRIC.cases[0].expect.cites == ("web_search: 14 days",)


def test_the_check_passes_the_honest_answer_and_fails_the_unfounded_one() -> None:
    answer = "Refunds are accepted within 14 days."
    honest = _graded(
        RUBRIC, CaseOutcome("refund-window", "returned", answer=answer, calls=(SEARCHED,))
    )
    [check] = honest.checks
    assert (check.passed, check.verdict, check.points) == (True, "passed", Decimal("100.00"))
    assert check.detail == "met: the expected answer; cites '14 days' from a web_search result"

    unfounded = _graded(RUBRIC, CaseOutcome("refund-window", "returned", answer=answer))
    [check] = unfounded.checks
    assert (check.passed, check.verdict, check.points) == (False, "failed", Decimal("0.00"))
    assert (
        "the answer states '14 days' but no web_search result this run returned it" in check.detail
    )
    assert check.divergence is not None and check.divergence.at == "answer"


ASKS = """
def run(provider, task, tools):
    hits = tools.call("web_search", query="refund window")
    return "From the policy page: " + hits[0]["snippet"]
"""
GUESSES = """
def run(provider, task, tools):
    return "Refunds are accepted within 14 days."  # what the model believes, looked up nowhere
"""
MISSES = """
def run(provider, task, tools):
    try:
        tools.call("web_search", query="refund policy, please")
    except Exception:
        pass
    return "Refunds are accepted within 14 days."
"""


@pytest.mark.slow
def test_in_the_sandbox_only_a_served_search_result_founds_the_cited_fact(tmp_path: Path) -> None:
    root = tmp_path / "sub"
    for name, source in (
        ("__init__", ""),
        ("asks", ASKS),
        ("guesses", GUESSES),
        ("misses", MISSES),
    ):
        (root / "lab").mkdir(parents=True, exist_ok=True)
        (root / "lab" / f"{name}.py").write_text(textwrap.dedent(source), "utf-8")

    def search(case: str, key: str) -> tuple[bool, object]:
        return (True, FOUND) if key == SEARCHED.key else (False, None)

    plan = RunPlan("p", 0, Serving(answer=lambda case, prompt: None, tools=search))
    sandbox = Sandbox(root, tmp_path / "scratch", Limits(timeout_s=10))
    results = {}
    try:
        for agent in ("asks", "guesses", "misses"):
            ran = sandbox.within(agent).run(
                f"lab.{agent}:run", [("refund-window", RUBRIC.cases[0].task)], plan
            )
            [check] = _graded(RUBRIC, ran.outcomes["refund-window"]).checks
            results[agent] = check
    finally:
        sandbox.close()
    assert results["asks"].passed, results["asks"].detail
    assert results["guesses"].detail == (
        "the answer states '14 days' but no web_search result this run returned it "
        "(web_search was never called)"
    )
    missed = results["misses"]
    assert not missed.passed and missed.divergence is not None
    assert (missed.divergence.at, missed.divergence.observed) == (
        "call 1 (web_search)",
        "web_search called 1 time(s), each answered with a miss: no result",
    )
