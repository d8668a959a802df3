"""A lab's own stretch goal under the stretch criterion: known beside the kit's four (in the
advice and in an unknown claim's detail), judged by the rubric's functions, their words
quoted, and a function that breaks its contract stops the grading with the fix."""

from __future__ import annotations

import dataclasses
import sys
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from grader.rubric import Rubric, RubricError, load_rubric, parse_rubric
from grader.scoring import stretch_goal, stretch_goals
from tests.grader.rubric.test_rubric import BASE, SOURCE
from tests.grader.scoring.test_stretch_goal import RUBRIC, evidence

KIT_FOUR = "rerecord-review, tool-fixtures, cut-point, two-providers"
# An entry naming the lab's goal by one of its names, not its id.
WRITTEN = """# Failures

## The retry loop that never stopped
- Symptom: a case asked the model forty times before the budget ran out.
- Cause: the agent retried every refusal, with no retry budget at all.
- Fix: three retries at most, then the miss propagates to the caller.

## Boundaries
- What this lab cannot measure: answer quality.
"""


@pytest.fixture
def module() -> Iterator[str]:
    name = f"lab_goals_{uuid.uuid4().hex}"
    yield name
    sys.modules.pop(name, None)


def _rubric(folder: Path, module: str, evidence_body: str, *, basis: bool = False) -> Rubric:
    code = (
        f"def evidence(found):\n    {evidence_body}\n\n\ndef basis(found):\n"
        '    return f"{len(found.cases)} case(s) looked at"\n'
    )
    (folder / f"{module}.py").write_text(code, "utf-8")
    table = (
        f'\n[[stretch]]\nid = "retry-budget"\nnames = ["retry budget"]\n'
        f'evidence = "{module}:evidence"\n'
    )
    table += f'basis = "{module}:basis"\n' if basis else ""
    path = folder / "rubric.toml"
    path.write_text(BASE + table, "utf-8")
    return load_rubric(path)


def test_the_kits_rubric_knows_the_kits_four_goals_alone() -> None:
    assert ", ".join(stretch_goals(RUBRIC)) == KIT_FOUR
    result = stretch_goal(
        evidence(()), RUBRIC, next(c for c in RUBRIC.criteria if c.check == "stretch_goal")
    )
    assert result.advice == (f"Finish one of: {KIT_FOUR}.",)


def test_the_advice_and_an_unknown_claims_detail_name_the_labs_goal_too(
    tmp_path: Path, module: str
) -> None:
    rubric = _rubric(tmp_path, module, "return None")
    criterion = next(c for c in rubric.criteria if c.check == "stretch_goal")
    unclaimed = stretch_goal(evidence(()), rubric, criterion)
    assert unclaimed.advice == (f"Finish one of: {KIT_FOUR}, retry-budget.",)
    unknown = stretch_goal(evidence(("retry-budgets",)), rubric, criterion)
    assert [c.detail for c in unknown.checks] == [
        f"unknown stretch goal 'retry-budgets'; known: {KIT_FOUR}, retry-budget"
    ]


def test_a_labs_goal_scores_by_its_evidence_and_a_write_up_naming_it(
    tmp_path: Path, module: str
) -> None:
    rubric = _rubric(tmp_path, module, "return None", basis=True)
    criterion = next(c for c in rubric.criteria if c.check == "stretch_goal")
    result = stretch_goal(evidence(("retry-budget",), failures=WRITTEN), rubric, criterion)
    assert (result.points, result.review) == (Decimal("10.00"), True)
    assert [(c.id, c.passed, c.detail) for c in result.checks] == [
        ("retry-budget: evidence", True, "the evidence holds: 1 case(s) looked at"),
        ("retry-budget: write-up", True, "FAILURES.md has an entry naming it"),
    ]
    unwritten = stretch_goal(evidence(("retry-budget",)), rubric, criterion)
    assert unwritten.points == Decimal("6.00")
    assert unwritten.checks[1].detail == "no FAILURES.md entry names 'retry-budget'"


def test_without_a_basis_the_detail_names_the_function_that_found_nothing_missing(
    tmp_path: Path, module: str
) -> None:
    rubric = _rubric(tmp_path, module, "return None")
    criterion = next(c for c in rubric.criteria if c.check == "stretch_goal")
    result = stretch_goal(evidence(("retry-budget",)), rubric, criterion)
    assert result.checks[0].detail == f"the evidence holds: {module}:evidence found nothing missing"


def test_the_reason_the_evidence_fails_is_quoted_and_the_best_claim_still_scores(
    tmp_path: Path, module: str
) -> None:
    rubric = _rubric(tmp_path, module, 'return "case one\\x1b[31m retried " + "x" * 600')
    criterion = next(c for c in rubric.criteria if c.check == "stretch_goal")
    result = stretch_goal(evidence(("retry-budget", "tool-fixtures")), rubric, criterion)
    failed = next(c for c in result.checks if c.id == "retry-budget: evidence")
    assert not failed.passed and failed.points == Decimal("0.00")
    assert failed.detail.startswith(
        "not scored (only the best claimed goal, tool-fixtures, "
        "scores): case one\\x1b[31m retried xxx"
    )
    assert failed.detail.endswith("more characters]")
    assert result.points == Decimal("10.00")  # tool-fixtures holds and is written up


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("return False", "returned False: return None when the evidence holds, else a str"),
        ('return "  "', "returned '  ': return None when the evidence holds, else a str"),
    ],
)
def test_an_evidence_function_that_breaks_its_contract_stops_the_grading_with_the_fix(
    tmp_path: Path, module: str, body: str, said: str
) -> None:
    rubric = _rubric(tmp_path, module, body)
    criterion = next(c for c in rubric.criteria if c.check == "stretch_goal")
    with pytest.raises(RubricError) as caught:
        stretch_goal(evidence(("retry-budget",)), rubric, criterion)
    assert str(caught.value).startswith(f"stretch goal retry-budget: {module}:evidence {said}")


def test_a_rubric_only_parsed_cannot_judge_a_labs_goal_and_says_so() -> None:
    text = BASE + '\n[[stretch]]\nid = "retry-budget"\nevidence = "nowhere:evidence"\n'
    rubric = parse_rubric(text.encode(), source=SOURCE)
    criterion = next(c for c in rubric.criteria if c.check == "stretch_goal")
    # Unclaimed, it is only a name in the advice; claimed, its code is needed.
    assert "retry-budget" in stretch_goal(evidence(()), rubric, criterion).advice[0]
    with pytest.raises(
        RubricError,
        match='evidence = "nowhere:evidence" was never imported: '
        "grade with the rubric load_rubric read",
    ):
        stretch_goal(evidence(("retry-budget",)), rubric, criterion)
    loaded_elsewhere = dataclasses.replace(rubric, stretch_code={})
    assert loaded_elsewhere == rubric  # the code is no part of the rubric's identity
