"""Reports: canonical bytes and digest, verification, student feedback, Gradescope.

It tests private helpers on purpose: ``grader._text``'s ``quote`` and ``FLAGGED``, and
``grader.outputs._render``'s ``_inline``."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradekit import UsageError
from grader import CheckResult, CriterionResult, Report
from grader._text import FLAGGED, quote
from grader.outputs import (
    canonical,
    points_text,
    render_report_json,
    report_digest,
    report_document,
    verify_report,
)
from grader.outputs._render import _inline, render_gradescope, render_markdown
from tests.grader.outputs.test_render_commonmark import as_written
from tests.grader.sandbox.test_parent_bounds import live, unescape

LOST_DETAIL = "returned '' on a miss <script>"


def sample(inputs: dict[str, str] | None = None) -> Report:
    stable = CriterionResult(
        id="contract_stability",
        title="Contract stability",
        points=Decimal("22.5"),
        max=Decimal("30"),
        checks=(
            CheckResult("refund-policy", True, Decimal("7.5"), Decimal("7.5"), "identical"),
            CheckResult("sql-explain", True, Decimal("7.50"), Decimal("7.50"), "identical"),
            CheckResult("flaky-grade", True, Decimal("7.50"), Decimal("7.50"), "identical"),
            CheckResult("incident-summary", False, Decimal("0"), Decimal("7.50"), LOST_DETAIL),
        ),
        advice=("Let CassetteMiss propagate out of run().",),
    )
    summary = CriterionResult(
        id="written_summary",
        title="Written summary",
        points=Decimal("15"),
        max=Decimal("15"),
        checks=(CheckResult("entries", True, Decimal("15"), Decimal("15"), "5 complete entries"),),
        review=True,
    )
    return Report(
        submission="alice",
        rubric_id="provider-swap-lab",
        rubric_version=1,
        rubric_sha256="ab" * 32,
        inputs=inputs or {"FAILURES.md": "11" * 32, "cassettes/refund-policy.json": "22" * 32},
        criteria=(stable, summary),
        findings=("network connect refused in case sql-explain",),
    )


def test_points_are_strings_with_exactly_two_decimals() -> None:
    assert [points_text(Decimal(v)) for v in ("7.5", "30", "0", "-0", "8.33", "1E+1")] == [
        "7.50",
        "30.00",
        "0.00",
        "0.00",
        "8.33",
        "10.00",
    ]
    document = report_document(sample())
    criterion = document["criteria"][0]  # type: ignore[index]
    assert (criterion["points"], criterion["max"]) == ("22.50", "30.00")
    assert criterion["checks"][0]["points"] == "7.50"
    assert (document["total"], document["max"]) == ("37.50", "45.00")
    assert "7.5," not in render_report_json(sample()).decode()


def test_points_finer_than_a_cent_are_refused_not_rounded() -> None:
    with pytest.raises(UsageError, match="not exact to the cent"):
        points_text(Decimal(25) / 3)


def test_the_document_follows_the_design_schema() -> None:
    document = json.loads(render_report_json(sample()))
    assert set(document) == {
        "schema",
        "submission",
        "rubric",
        "inputs",
        "criteria",
        "findings",
        "total",
        "max",
        "digest",
    }
    assert document["schema"] == "gradekit.report/1"
    assert document["rubric"] == {"id": "provider-swap-lab", "version": 1, "sha256": "ab" * 32}
    assert set(document["criteria"][0]) == {
        "id",
        "title",
        "points",
        "max",
        "review",
        "checks",
        "advice",
    }
    assert set(document["criteria"][0]["checks"][0]) == {"id", "passed", "points", "max", "detail"}
    assert document["criteria"][1]["review"] is True


def test_the_digest_is_sha256_of_the_canonical_document_without_it() -> None:
    data = render_report_json(sample())
    document = json.loads(data)
    digest = document.pop("digest")
    assert digest == hashlib.sha256(canonical(document)).hexdigest() == report_digest(sample())
    assert data == canonical({**document, "digest": digest}) + b"\n"


def test_the_bytes_do_not_depend_on_dict_insertion_order() -> None:
    forward = {"FAILURES.md": "11" * 32, "cassettes/a.json": "22" * 32, "lab/agent.py": "33" * 32}
    backward = dict(reversed(list(forward.items())))
    assert list(forward) != list(backward)
    assert render_report_json(sample(forward)) == render_report_json(sample(backward))


def test_canonical_json_is_sorted_compact_and_utf8() -> None:
    assert canonical({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()


def test_a_written_report_verifies() -> None:
    ok, message = verify_report(render_report_json(sample()))
    assert ok, message
    assert report_digest(sample()) in message


def test_a_report_that_lost_its_final_newline_still_verifies() -> None:
    assert verify_report(render_report_json(sample()).rstrip(b"\n"))[0]


def test_an_edited_report_fails_verification_as_edited() -> None:
    data = render_report_json(sample()).replace(b'"total":"37.50"', b'"total":"45.00"')
    ok, message = verify_report(data)
    assert not ok
    assert "digest mismatch" in message and "edited" in message


def test_a_reformatted_report_with_a_matching_digest_still_fails() -> None:
    document = json.loads(render_report_json(sample()))
    ok, message = verify_report(json.dumps(document, indent=2).encode())
    assert not ok
    assert "not canonical" in message


def test_a_duplicate_key_cannot_hide_an_edit() -> None:
    data = render_report_json(sample()).replace(b'{"criteria"', b'{"total":"99.00","criteria"')
    ok, message = verify_report(data)
    assert not ok and "not canonical" in message


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"not json", "not JSON"),
        (b"\xff", "not JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"schema": "gradekit.report/1"}', "no digest"),
        (b'{"a": NaN, "digest": "x"}', "not JSON"),
    ],
)
def test_verification_says_what_is_wrong(data: bytes, says: str) -> None:
    ok, message = verify_report(data)
    assert not ok
    assert says in message


def test_markdown_gives_the_total_a_table_each_lost_check_its_advice_and_the_digest() -> None:
    text = render_markdown(sample())
    assert "**Total: 37.50 / 45.00**" in text
    assert "| Contract stability | 22.50 | 30.00 | lost: incident-summary |" in text
    assert "| Written summary | 15.00 | 15.00 | full marks; marked for review |" in text
    lost = text.split("Lost points:")[1]
    assert "- incident-summary (0.00 / 7.50): returned '' on a miss \\<script\\>" in lost
    assert "Let CassetteMiss propagate out of run()." in text
    assert "- refund-policy (7.50 / 7.50)" in text.split("Lost points:")[0]
    assert "- network connect refused in case sql-explain" in text
    assert report_digest(sample()) in text
    assert render_markdown(sample()) == text


def test_gradescope_results_have_the_autograder_keys() -> None:
    data = render_gradescope(sample(), "d" * 64)
    results = json.loads(data)
    assert results["score"] == 37.5
    assert results["extra_data"]["digest"] == "d" * 64
    assert len(results["tests"]) == 5
    lost = results["tests"][3]
    assert lost["name"] == "Contract stability: incident-summary"
    assert (lost["score"], lost["max_score"], lost["status"]) == (0.0, 7.5, "failed")
    assert LOST_DETAIL in lost["output"] and "Let CassetteMiss propagate" in lost["output"]
    assert results["tests"][0]["status"] == "passed"
    assert all(test["visibility"] == "visible" for test in results["tests"])
    assert "Pending human review" in results["tests"][4]["output"]
    assert "Pending human review" not in results["tests"][0]["output"]
    assert data == render_gradescope(sample(), "d" * 64)


def test_gradescope_declares_markdown_and_says_which_points_await_a_person() -> None:
    results = json.loads(render_gradescope(sample(), "d" * 64))
    assert (results["output_format"], results["test_output_format"]) == ("md", "md")
    assert (
        "**Pending human review: 15.00 points** (Written summary 15.00 / 15.00)"
        in results["output"]
    )
    assert "Flagged for review" not in results["output"]
    flagged = replace(sample(), findings=(f"{FLAGGED}a verdict without the seal in case x",))
    output = json.loads(render_gradescope(flagged, "d" * 64))["output"]
    assert (
        "**Flagged for review:** 1 finding(s) below ask a person to look at the whole "
        "submission" in output
    )
    plain = replace(sample(), criteria=sample().criteria[:1], findings=())
    assert "review" not in json.loads(render_gradescope(plain, "d" * 64))["output"].lower()


def test_a_flagged_finding_is_counted_by_the_report_and_sorted_by_the_dashboard() -> None:
    from grader.dashboard import finding_kind

    finding = f"{FLAGGED}the own-Replay probe: a verdict came without the seal"
    assert finding_kind(finding) == "flagged for review"
    assert finding_kind(finding.replace(FLAGGED, "")) != "flagged for review"


# -- forged reports: every edit whose digest was recomputed must still fail ---------------


def forged(edit: Callable[[dict[str, Any]], None], report: Report | None = None) -> bytes:
    """``report`` (default: the sample) edited by ``edit``, with its digest recomputed:
    what anyone can do without the instructor's key."""
    document = json.loads(render_report_json(report or sample()))
    del document["digest"]
    edit(document)
    document["digest"] = hashlib.sha256(canonical(document)).hexdigest()
    return canonical(document) + b"\n"


def test_a_forged_total_with_a_recomputed_digest_fails_naming_both_numbers() -> None:
    def inflate(document: dict[str, Any]) -> None:
        document["total"] = "96.00"

    ok, message = verify_report(forged(inflate))
    assert not ok
    assert "total is 96.00 but the criteria's points sum to 37.50" in message


def test_a_forged_criterion_and_total_fail_on_the_criterion_s_checks() -> None:
    def inflate(document: dict[str, Any]) -> None:
        document["criteria"][0]["points"] = "30.00"
        document["total"] = "45.00"

    ok, message = verify_report(forged(inflate))
    assert not ok
    assert (
        "criteria[0] ('contract_stability').points is 30.00 but its checks' points sum to "
        "22.50" in message
    )
    assert "total" not in message  # the total does add up to the forged criteria


def test_forged_maxima_fail_like_forged_points() -> None:
    def shrink(document: dict[str, Any]) -> None:
        document["criteria"][0]["max"] = "22.50"
        document["max"] = "37.50"

    ok, message = verify_report(forged(shrink))
    assert (
        not ok
        and "criteria[0] ('contract_stability').max is 22.50 but its checks' max sum to 30.00"
        in message
    )

    def total_max(document: dict[str, Any]) -> None:
        document["max"] = "40.00"

    ok, message = verify_report(forged(total_max))
    assert not ok and "max is 40.00 but the criteria's max sum to 45.00" in message


def test_a_check_given_more_than_its_max_fails_even_when_everything_adds_up() -> None:
    def inflate(document: dict[str, Any]) -> None:
        document["criteria"][0]["checks"][3]["points"] = "15.00"
        document["criteria"][0]["points"] = "37.50"
        document["total"] = "52.50"

    ok, message = verify_report(forged(inflate))
    assert not ok
    assert (
        "criteria[0] ('contract_stability').checks[3].points is 15.00, outside 0.00 to its "
        "max 7.50" in message
    )


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda d: d["criteria"][1].update(checks=[]),
            "checks is not a list of at least one check",
        ),
        (
            lambda d: d["criteria"][1].update(points=15),
            "criteria[1] ('written_summary').points is 15, not points with two decimal places",
        ),
        (lambda d: d.update(total="37.5"), "total is '37.5', not points with two decimal places"),
        (lambda d: d.update(criteria={}), "criteria is not a list of objects"),
    ],
)
def test_a_malformed_forgery_fails_naming_the_field(
    edit: Callable[[dict[str, Any]], None], says: str
) -> None:
    ok, message = verify_report(forged(edit))
    assert not ok and says in message


def test_a_check_that_carries_no_points_adds_up() -> None:
    free = CheckResult("note", True, Decimal("0"), Decimal("0"), "no points here")
    report = replace(
        sample(),
        criteria=(
            replace(sample().criteria[0], checks=(*sample().criteria[0].checks, free)),
            sample().criteria[1],
        ),
    )
    assert verify_report(render_report_json(report))[0]


def test_the_grader_refuses_to_write_a_report_that_would_not_verify() -> None:
    stable = sample().criteria[0]
    report = replace(sample(), criteria=(replace(stable, points=Decimal("30")),))
    with pytest.raises(
        UsageError,
        match=r"points is 30\.00 but its checks' points sum to "
        r"22\.50; a check must return",
    ):
        render_report_json(report)
    with pytest.raises(UsageError, match="at least one"):
        render_report_json(replace(sample(), criteria=(replace(stable, checks=()),)))


@settings(deadline=None)
@given(st.text())
def test_any_text_renders_as_itself_and_opens_no_markup(text: str) -> None:
    line = _inline(text)
    assert "\n" not in line and live(line) == []
    assert unescape(line) == as_written(text)


@settings(deadline=None)
@given(st.text(), st.integers(min_value=60, max_value=3000))
def test_quote_is_bounded_visible_and_idempotent(text: str, limit: int) -> None:
    shown = quote(text, limit)
    assert len(shown) <= limit and quote(shown, limit) == shown
    assert not [
        c for c in shown if c not in "\t\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs")
    ]
    assert (shown == text) or ("\\" in shown) or shown.endswith(" more characters]")
