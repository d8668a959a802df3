"""The written summary: FAILURES.md scored by structure, each loss explained."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gradekit import UsageError
from grader import CriterionResult
from grader.grading._grounds import grounds
from grader.rubric import load_rubric
from grader.scoring import find_placeholders, parse_failures, score_written_summary

REPO = Path(__file__).resolve().parents[3]
POINTS = {
    "entries": Decimal("6.00"),
    "boundaries": Decimal("4.00"),
    "no_placeholders": Decimal("5.00"),
}

TEMPLATE = """\
# Failures
## Whitespace made a new prompt
- Symptom: ...
- Cause: ...
- Fix: ...            (or "Status: open")
## Boundaries
- What this lab cannot measure: ...
"""

GOOD_ENTRY = """\
## The replay answered an empty string
- Symptom: a missing recording looked like a successful empty answer.
- Cause: the agent caught every exception and returned "".
- Fix: the bare except is gone; CassetteMiss now propagates out of run().
"""

SECOND_ENTRY = """\
## Two labels gave two scores
- Symptom: the grade went from 30 to 12 points when the provider label changed.
- Cause: the prompt included provider.name, so the key changed with it.
- Status: open. The label is still in one prompt; removing it needs a re-recording.
"""

BOUNDARIES = """\
## Boundaries
- What this lab cannot measure: answer quality and latency under a live model.
"""


def score(text: str | None) -> CriterionResult:
    return score_written_summary(text, points=POINTS, weight=Decimal(15))


def checks(result: CriterionResult) -> dict[str, tuple[bool, Decimal, str]]:
    return {c.id: (c.passed, c.points, c.detail) for c in result.checks}


def test_the_reference_labs_failure_log_scores_full_marks() -> None:
    cases = load_rubric(REPO / "rubric" / "bootcamp.toml").cases
    result = score_written_summary(
        (REPO / "FAILURES.md").read_text(encoding="utf-8"),
        points=POINTS,
        weight=Decimal(15),
        grounds=grounds(REPO, cases, ()),
    )
    assert result.points == result.max == Decimal(15)
    assert all(check.passed and check.points == check.max for check in result.checks)
    scored, shown = result.checks[:3], result.checks[3:]
    assert [c.id for c in scored] == ["entries", "boundaries", "no_placeholders"]
    # Then a check per entry, worth nothing: what the grader found and what it says.
    assert [c.id for c in shown] == [f"entry {n}" for n in range(1, 11)]
    assert all(c.max == 0 and c.detail.startswith("counts; '") for c in shown), shown
    assert result.advice == ()
    assert result.review is True


def test_the_design_template_loses_entries_and_no_placeholders() -> None:
    result = score(TEMPLATE)
    found = checks(result)
    assert found["entries"][:2] == (False, Decimal("0.00"))
    assert "Symptom is template text" in found["entries"][2]
    assert found["no_placeholders"][:2] == (False, Decimal("0.00"))
    assert "line 3: '...'" in found["no_placeholders"][2]
    assert found["boundaries"][:2] == (False, Decimal("0.00"))
    assert result.points == 0
    assert any("Replace every placeholder" in advice for advice in result.advice)


def test_a_missing_file_scores_zero_and_says_what_to_write() -> None:
    result = score(None)
    assert result.points == 0 and result.max == 15 and result.review
    assert all(not c.passed and "FAILURES.md is missing" in c.detail for c in result.checks)
    assert len(result.advice) == 1
    for needed in ("# Failures", "Symptom", "Cause", "Fix", "Status", "## Boundaries"):
        assert needed in result.advice[0]


def test_one_good_entry_earns_half_of_entries_and_advice_to_write_another() -> None:
    result = score(f"# Failures\n{GOOD_ENTRY}{BOUNDARIES}")
    found = checks(result)
    assert found["entries"][:2] == (False, Decimal("3.00"))
    assert "1 complete entry of the 2 needed" in found["entries"][2]
    assert result.points == Decimal("12.00")
    assert any("at least two complete failure entries" in advice for advice in result.advice)


def test_two_good_entries_without_boundaries_lose_only_boundaries() -> None:
    result = score(f"# Failures\n{GOOD_ENTRY}{SECOND_ENTRY}")
    found = checks(result)
    assert found["boundaries"] == (False, Decimal("0.00"), "no '## Boundaries' section")
    assert found["entries"][0] and found["no_placeholders"][0]
    assert result.points == Decimal("11.00")
    assert any("## Boundaries" in advice for advice in result.advice)


def test_a_boundaries_heading_without_a_named_limit_earns_nothing() -> None:
    result = score(f"# Failures\n{GOOD_ENTRY}{SECOND_ENTRY}## Boundaries\n\nNone really.\n")
    assert checks(result)["boundaries"][:2] == (False, Decimal("0.00"))
    assert "no bullet naming something" in checks(result)["boundaries"][2]


def test_a_short_field_is_not_counted_and_the_detail_says_which_and_why() -> None:
    short = GOOD_ENTRY.replace('the agent caught every exception and returned "".', "bug")
    result = score(f"# Failures\n{short}{SECOND_ENTRY}{BOUNDARIES}")
    detail = checks(result)["entries"][2]
    assert "Cause says nothing ('bug'): say what happened" in detail
    assert "'The replay answered an empty string' (line 2)" in detail
    assert checks(result)["entries"][1] == Decimal("3.00")


def test_an_entry_without_fix_or_status_is_not_complete() -> None:
    no_fix = "\n".join(line for line in GOOD_ENTRY.splitlines() if "Fix" not in line) + "\n"
    result = score(f"# Failures\n{no_fix}{SECOND_ENTRY}{BOUNDARIES}")
    assert "Fix or Status is missing" in checks(result)["entries"][2]


def test_an_incomplete_third_entry_costs_nothing_but_is_named() -> None:
    third = "## Also\n- Symptom: it broke\n"
    result = score(f"# Failures\n{GOOD_ENTRY}{SECOND_ENTRY}{third}{BOUNDARIES}")
    passed, points, detail = checks(result)["entries"]
    assert passed and points == Decimal("6.00")
    assert "not counted: 'Also'" in detail


def test_a_field_may_continue_on_indented_lines() -> None:
    wrapped = (
        "## Wrapped\n- Symptom: the first answer\n  was empty every time.\n"
        "- Cause: an exception was\n  swallowed by the agent.\n"
        "- Fix: the exception now\n  reaches the caller as CassetteMiss.\n"
    )
    log = parse_failures(f"# Failures\n{wrapped}{GOOD_ENTRY}")
    assert log.entries[0].fields["symptom"] == "the first answer was empty every time."
    assert checks(score(f"# Failures\n{wrapped}{GOOD_ENTRY}{BOUNDARIES}"))["entries"][0]


def test_one_log_is_parsed_once_and_what_a_parse_gives_cannot_be_changed() -> None:
    # A grading reads FAILURES.md for the written summary and for each stretch goal: the
    # parse is kept, so whatever one reader did to it would reach the next.
    text = f"# Failures\n{GOOD_ENTRY}{SECOND_ENTRY}{BOUNDARIES}"
    log = parse_failures(text)
    assert parse_failures("".join(text)) is log
    with pytest.raises(TypeError):
        log.entries[0].fields["symptom"] = "rewritten"  # type: ignore[index]
    assert parse_failures(text).entries[0].fields["symptom"].startswith("a missing recording")
    assert parse_failures(text + "\n") is not log


def test_todo_and_template_tokens_are_found_outside_code_only() -> None:
    text = (
        "# Failures\n## A\n- Fix: TODO write it\n- Cause: `TODO` in code is fine\n"
        "```\nFIXME inside a fence is fine\n```\n- Symptom: <describe the symptom> and lorem "
        "ipsum\n- Status: it waited... then <br> broke\n"
    )
    assert find_placeholders(text) == [
        (3, "TODO"),
        (8, "<describe the symptom>"),
        (8, "lorem ipsum"),
    ]


def test_an_empty_file_earns_nothing_for_having_no_placeholders() -> None:
    result = score("")
    assert result.points == 0
    assert "nothing to credit" in checks(result)["no_placeholders"][2]


def test_parse_failures_exposes_titles_fields_text_and_boundaries_in_file_order() -> None:
    log = parse_failures(f"# Failures\n{GOOD_ENTRY}{SECOND_ENTRY}{BOUNDARIES}")
    assert [e.title for e in log.entries] == [
        "The replay answered an empty string",
        "Two labels gave two scores",
    ]
    assert list(log.entries[1].fields) == ["symptom", "cause", "status"]
    assert log.entries[0].text.startswith("- Symptom: a missing recording")
    assert log.entries[0].line == 2
    assert log.boundaries == (
        "What this lab cannot measure: answer quality and latency under a live model.",
    )


def test_the_criterion_id_and_title_come_from_the_caller() -> None:
    result = score_written_summary(
        None, points=POINTS, weight=Decimal(15), criterion_id="log", title="Failure log"
    )
    assert (result.id, result.title) == ("log", "Failure log")


def test_points_that_do_not_match_the_weight_are_a_programming_error() -> None:
    with pytest.raises(UsageError, match="summing to 20"):
        score_written_summary("", points=POINTS, weight=Decimal(20))


def test_text_quoted_from_the_log_is_capped_and_shown_not_hidden() -> None:
    title = "\x1b[2J" + "[x](http://evil.example) " * 2000  # 50 000 characters of title
    boundaries = BOUNDARIES.replace("answer", title)
    result = score(f"# Failures\n## {title}\n- Symptom: short\n{boundaries}")
    for detail in (checks(result)["entries"][2], checks(result)["boundaries"][2]):
        assert "… [cut: " in detail and "\\x1b[2J[x](http://evil.example)" in detail
        assert "\x1b" not in detail and len(detail) < 1000
    assert all("\x1b" not in advice and len(advice) < 2000 for advice in result.advice)


# -- as a person reads it: a path's pattern and code are not template text --------------------


@pytest.mark.parametrize(
    "line",
    [
        "- Fix: every case now has fixtures/<case>.json beside its cassette.",
        "- Fix: re-recorded cassettes/<case-id>.http.json for each case.",
        "- Fix: <case>.previous.json keeps the old answers for review.",
        "- Fix: the grader reads <root>/cassettes now, not the working folder.",
        "- Fix: on Windows the file is C:\\<user>\\lab\\agent.py, with backslashes.",
        "- Fix: the note moved from TODO.md into the README.",
        "- Fix: the agent lives in lab/.../agent.py, under a package of its own.",
    ],
)
def test_a_token_that_is_part_of_a_path_is_no_placeholder(line: str) -> None:
    assert find_placeholders(line) == []
    entry = (
        "## Paths\n- Symptom: the lab wrote 3 files where nobody looked.\n"
        f"- Cause: the grader read a path relative to the caller.\n{line}\n"
    )
    result = score(f"# Failures\n{GOOD_ENTRY}{entry}{BOUNDARIES}")
    assert checks(result)["no_placeholders"][:2] == (True, Decimal("5.00"))
    assert checks(result)["entries"][:2] == (True, Decimal("6.00"))
    assert checks(result)["entries"][2].startswith("2 complete entries")


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("- Fix: <describe the fix>", "<describe the fix>"),
        ("- Fix: <what failed>.json was never written", "<what failed>"),  # spaces: a gap
        ("- Fix: <describe>.", "<describe>"),  # a sentence's full stop, not an extension
        ("- Fix: <describe>. Then record again.", "<describe>"),
        ("- Fix: \\<describe> (Markdown shows the escaped bracket)", "<describe>"),
        ("- Fix: the lab reads / <describe> from it", "<describe>"),  # a space from the slash
        ("- Fix: TODO.", "TODO"),
        ("- Fix: see the folder at cassettes/ ...", "..."),
    ],
)
def test_the_same_token_outside_a_path_is_still_template_text(line: str, found: str) -> None:
    assert find_placeholders(line) == [(1, found)]
    entry = (
        "## Paths\n- Symptom: the lab wrote 3 files where nobody looked.\n"
        f"- Cause: the grader read a path relative to the caller.\n{line}\n"
    )
    result = score(f"# Failures\n{GOOD_ENTRY}{entry}{BOUNDARIES}")
    assert checks(result)["no_placeholders"][:2] == (False, Decimal("0.00"))
    assert f"Fix or Status is template text ({found})" in checks(result)["entries"][2]


def test_an_indented_block_after_a_blank_line_is_code() -> None:
    text = (
        "# Failures\n## A\nThe run printed:\n\n    CassetteMiss: no recording for <prompt>\n"
        "    TODO in the agent's own output\n\nand then it stopped.\n"
        "not code, a paragraph goes on:\n    <describe it>\n"
    )
    assert find_placeholders(text) == [(10, "<describe it>")]


def test_in_a_list_item_code_is_indented_four_past_the_bullets_text() -> None:
    # "- " puts a bullet's text at column 2: four spaces in is a paragraph of the item, as
    # GitHub shows it, and six is code. So a template's gap cannot hide as "code".
    template = "## A\n- Symptom: the agent answered nothing at all.\n- Fix:\n\n    <describe>\n"
    quoted = (
        "## B\n- Symptom: the replay stopped on the second prompt with\n\n"
        "      CassetteMiss: no recording for <prompt>\n\n"
        "- Cause: the prompt had a trailing space after an edit.\n"
        "- Fix: prompts are stripped before the agent sends them.\n"
    )
    assert find_placeholders(template) == [(5, "<describe>")]
    assert find_placeholders(quoted) == []
    result = score(f"# Failures\n{template}{quoted}{GOOD_ENTRY}{BOUNDARIES}")
    detail = checks(result)["entries"][2]
    assert "'A' (line 2): Cause is missing, Fix or Status is template text (<describe>)" in detail
    # its quoted output counts as the symptom's text, not a gap
    assert "'B'" not in detail.partition("not counted:")[2]
    assert checks(result)["no_placeholders"][2] == "template text left in: line 6: '<describe>'"


def test_a_fields_fenced_or_indented_code_is_code_inside_the_field_too() -> None:
    fenced = "- Symptom: it printed\n\n  ```\n  TODO <prompt> `x`\n  ```\n"
    indented = "- Symptom: it printed\n\n      TODO <prompt> ``x``\n"
    for symptom in (fenced, indented):
        log = parse_failures(f"# Failures\n## A\n{symptom}")
        assert "TODO <prompt>" in log.entries[0].fields["symptom"]
        assert find_placeholders(log.entries[0].fields["symptom"]) == []
