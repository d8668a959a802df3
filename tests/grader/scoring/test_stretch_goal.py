"""The stretch goal criterion: the best claimed goal scores, and every claimed goal's
evidence is shown beside it, worth nothing.

The evidence is built by hand, one goal holding or not at a time; grading the reference
for real (all four goals claimed, each holding) is tests/lab/test_reference_stretch.py.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

from grader import (
    CaseOutcome,
    CheckResult,
    CriterionResult,
    Report,
    RunResult,
    Served,
    TraceRecord,
    render_markdown,
    render_report_json,
    verify_report,
)
from grader.rubric import Case, load_rubric
from grader.scoring import Evidence, stretch_goal

REFERENCE = Path(__file__).resolve().parents[3]
RUBRIC = load_rubric(REFERENCE / "rubric" / "bootcamp.toml")
CRITERION = next(c for c in RUBRIC.criteria if c.check == "stretch_goal")
CASES = (Case("one", "a task"),)
TOOL = Served('read_docs {"query":"x"}', True, "read_docs")
PROMPT = Served("0123456789abcdef", True)
# An entry naming every goal: each one's write-up holds.
FAILURES = """# Failures

## The evidence of every goal
- Symptom: each of tool-fixtures, rerecord-review, two-providers and cut-point was tried.
- Cause: the lab claims four stretch goals and each has a failure behind it.
- Fix: every goal's evidence holds and this entry names each of them.

## Boundaries
- What this lab cannot measure: answer quality.
"""
ZERO = Decimal("0.00")
ALL_FOUR = ("rerecord-review", "tool-fixtures", "two-providers", "cut-point")


def evidence(
    stretch: tuple[str, ...],
    *,
    second_set: bool = True,
    review: bool = True,
    cut_point: bool = True,
    failures: str | None = FAILURES,
) -> Evidence:
    """Evidence where each goal's evidence holds unless switched off."""
    calls = (TOOL, PROMPT)
    trace = tuple(TraceRecord(c.key, None if c.tool else "p", 0.5, True, c.tool) for c in calls)
    primary = RunResult(
        {"one": CaseOutcome("one", "returned", answer="a", calls=calls, trace=trace)}
    )
    second = RunResult(
        {"one": CaseOutcome("one", "returned", answer="b", calls=(PROMPT,), trace=trace[1:])}
    )
    return Evidence(
        cases=CASES,
        label="p",
        primary=primary,
        others=(),
        loud=(),
        probe=None,
        failures=failures,
        stretch=stretch,
        second_set=second if second_set else None,
        second_set_problem="" if second_set else "no second set was declared",
        second_cassettes="cassettes-b",
        rerecording_problem=None if review else "no DATASET_CHANGES.md entry",
        rerecording_basis="DATASET_CHANGES.md entry 2026-11-29 one",
        cut_point_problem=None if cut_point else "the cut-point test was not run",
        incident_test="lab.regression:no_refund",
    )


def checks(result: CriterionResult) -> dict[str, CheckResult]:
    return {check.id: check for check in result.checks}


def test_every_claimed_goal_is_shown_and_only_the_best_one_scores() -> None:
    result = stretch_goal(evidence(ALL_FOUR), RUBRIC, CRITERION)
    assert (result.points, result.max) == (Decimal("10.00"), Decimal("10.00"))
    assert [c.id for c in result.checks] == [
        f"{goal}: {part}" for goal in ALL_FOUR for part in ("evidence", "write-up")
    ]
    scored, shown = result.checks[:2], result.checks[2:]
    assert [(c.points, c.max) for c in scored] == [
        (Decimal("6.00"), Decimal("6.00")),
        (Decimal("4.00"), Decimal("4.00")),
    ]
    assert all(c.passed and (c.points, c.max) == (ZERO, ZERO) for c in shown)
    assert all(
        c.detail.startswith("not scored (only the best claimed goal, rerecord-review, scores): ")
        for c in shown
    )
    by_id = checks(result)
    assert by_id["cut-point: evidence"].detail.endswith(
        "the evidence holds: lab.regression:no_refund passes on the submission's guard and "
        "fails when it allows every action"
    )
    assert by_id["two-providers: evidence"].detail.endswith(
        "the evidence holds: prompts served from cassettes-b/one.json: 0123456789abcdef"
    )
    assert by_id["tool-fixtures: write-up"].detail.endswith("FAILURES.md has an entry naming it")
    assert result.advice == () and result.review


def test_a_goal_whose_evidence_fails_is_shown_failed_beside_the_best_one() -> None:
    """The first claim fails: the second scores in full and comes first; the first is shown
    as it is, failed, worth nothing, so the total does not move."""
    result = stretch_goal(
        evidence(("two-providers", "cut-point"), second_set=False), RUBRIC, CRITERION
    )
    assert [c.id for c in result.checks] == [
        "cut-point: evidence",
        "cut-point: write-up",
        "two-providers: evidence",
        "two-providers: write-up",
    ]
    assert (result.points, result.max) == (Decimal("10.00"), Decimal("10.00"))
    failed = checks(result)["two-providers: evidence"]
    assert (failed.passed, failed.points, failed.max) == (False, ZERO, ZERO)
    assert failed.detail == (
        "not scored (only the best claimed goal, cut-point, scores): no second set was declared"
    )
    assert result.advice == ()  # the best goal is complete: nothing to do for the points


def test_one_claimed_goal_is_scored_alone_as_before() -> None:
    result = stretch_goal(evidence(("cut-point",), cut_point=False), RUBRIC, CRITERION)
    assert [(c.id, c.passed, c.points, c.max) for c in result.checks] == [
        ("cut-point: evidence", False, ZERO, Decimal("6.00")),
        ("cut-point: write-up", True, Decimal("4.00"), Decimal("4.00")),
    ]
    assert result.points == Decimal("4.00")
    assert result.advice == (
        "Finish one stretch goal completely and write up, in FAILURES.md, the failure it found.",
    )


def test_the_best_goal_is_the_first_claimed_of_the_highest_scoring() -> None:
    """Ties keep the claim order; a partly held goal loses to a complete one."""
    tied = stretch_goal(evidence(("cut-point", "tool-fixtures")), RUBRIC, CRITERION)
    assert tied.checks[0].id == "cut-point: evidence"
    partial = stretch_goal(
        evidence(("rerecord-review", "tool-fixtures"), review=False), RUBRIC, CRITERION
    )
    assert partial.checks[0].id == "tool-fixtures: evidence"
    assert checks(partial)["rerecord-review: evidence"].detail.endswith(
        "no DATASET_CHANGES.md entry"
    )


def test_an_unknown_goal_beside_a_known_one_is_shown_unscored() -> None:
    result = stretch_goal(evidence(("teleport", "cut-point")), RUBRIC, CRITERION)
    assert result.points == Decimal("10.00")
    unknown = checks(result)["teleport"]
    assert (unknown.passed, unknown.max) == (False, ZERO)
    assert "unknown stretch goal 'teleport'; known: rerecord-review" in unknown.detail


def test_a_report_with_every_goal_shown_adds_up_and_verifies() -> None:
    """report.json's sums hold (each criterion's max is its checks' maxes), and report.md
    lists every goal's evidence under Passed."""
    result = stretch_goal(evidence(ALL_FOUR), RUBRIC, CRITERION)
    report = Report(
        submission="alice",
        rubric_id=RUBRIC.id,
        rubric_version=RUBRIC.version,
        rubric_sha256=RUBRIC.sha256,
        inputs={},
        criteria=(result,),
    )
    assert verify_report(render_report_json(report))[0]
    markdown = render_markdown(report)
    assert markdown.count("(0.00 / 0.00)") == 6  # three goals shown, two checks each
    assert markdown.count("evidence holds") == 4
    # a failed unscored goal is a lost check of 0.00, never a lost point
    failed = dataclasses.replace(
        result,
        checks=(
            *result.checks[:2],
            CheckResult("cut-point: evidence", False, ZERO, ZERO, "not scored: no test"),
        ),
    )
    assert verify_report(render_report_json(dataclasses.replace(report, criteria=(failed,))))[0]
