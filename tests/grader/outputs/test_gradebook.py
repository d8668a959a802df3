"""The gradebook: stable bytes, byte-exact round trips and merges, clear errors."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import pytest

from grader.outputs import (
    GradebookError,
    GradebookRow,
    gradebook_csv,
    merge_gradebooks,
    read_gradebook,
)

IDS = ["contract_stability", "written_summary"]


def graded(name: str, student: str = "", total: str = "45.00") -> GradebookRow:
    return GradebookRow(
        submission=name,
        student=student or name,
        status="graded",
        total=total,
        max="45.00",
        criteria={"written_summary": "15.00", "contract_stability": "30.00"},
        digest=name[0] * 64,
        reason="",
    )


def failed(name: str, reason: str) -> GradebookRow:
    return GradebookRow(
        submission=name,
        student="",
        status="error",
        total="",
        max="",
        criteria={},
        digest="",
        reason=reason,
    )


ROWS = [
    graded("carol"),
    failed("bob", "the grader failed: timeout, after 30 s"),
    graded("alice", student='Alice "Al" Smith'),
    graded("dave", student='=HYPERLINK("http://x")'),
]


def test_columns_are_fixed_around_the_criteria_and_rows_sorted_by_submission() -> None:
    lines = gradebook_csv(ROWS, IDS).decode("utf-8").split("\n")
    assert lines[0] == (
        "submission,student,name,status,total,review,late,penalty,final,max,contract_stability,"
        "written_summary,digest,reason"
    )
    assert [line.split(",")[0] for line in lines[1:-1]] == ["alice", "bob", "carol", "dave"]
    assert lines[-1] == ""  # one trailing newline, no carriage returns
    assert "\r" not in gradebook_csv(ROWS, IDS).decode()


def test_cells_are_quoted_by_the_csv_module_and_error_rows_leave_points_empty() -> None:
    text = gradebook_csv(ROWS, IDS).decode()
    assert '"Alice ""Al"" Smith"' in text
    assert 'bob,,,error,,,,,,,,,,"the grader failed: timeout, after 30 s"' in text


def test_final_is_the_total_until_a_review_changes_it_and_errors_have_none() -> None:
    reviewed = replace(graded("erin"), review="written_summary 15.00->12.00 by kim", final="42.00")
    _, rows = read_gradebook(gradebook_csv([*ROWS, reviewed], IDS))
    by_name = {row.submission: (row.total, row.review, row.final) for row in rows}
    assert by_name["carol"] == ("45.00", "", "45.00")
    assert by_name["bob"] == ("", "", "")
    assert by_name["erin"] == ("45.00", "written_summary 15.00->12.00 by kim", "42.00")


def test_a_late_penalty_comes_off_the_final_never_below_zero_and_names_round_trip() -> None:
    late = replace(
        graded("erin"), name="Erin O'Neil", late="2 days late: -20.00 (...)", penalty="20.00"
    )
    gone = replace(graded("finn", total="12.00"), late="after the cutoff", penalty="45.00")
    _, rows = read_gradebook(gradebook_csv([late, gone], IDS))
    by_name = {row.submission: row for row in rows}
    assert (by_name["erin"].final, by_name["erin"].penalty) == ("25.00", "20.00")
    assert by_name["erin"].name == "Erin O'Neil"
    assert by_name["erin"].late == "2 days late: -20.00 (...)"
    assert by_name["finn"].final == "0.00"


def test_a_gradebook_written_before_names_and_late_policies_reads_with_them_empty() -> None:
    earlier = (
        b"submission,student,status,total,review,final,max,contract_stability,"
        b"written_summary,digest,reason\n"
        b"alice,s-1,graded,45.00,written_summary 15.00->12.00 by kim,42.00,45.00,30.00,"
        b"15.00," + b"a" * 64 + b",\n"
    )
    ids, rows = read_gradebook(earlier)
    assert ids == IDS
    assert (
        rows[0].student,
        rows[0].name,
        rows[0].late,
        rows[0].penalty,
        rows[0].final,
        rows[0].criteria["written_summary"],
    ) == ("s-1", "", "", "", "42.00", "15.00")
    again = gradebook_csv(rows, ids)
    assert read_gradebook(again)[1] == rows  # written anew in the current columns, unchanged


def test_a_review_cell_a_spreadsheet_would_run_is_defused_too() -> None:
    row = replace(graded("erin"), review="=cmd|' /C calc'!A0", final="45.00")
    data = gradebook_csv([row], IDS)
    header, cells = csv.reader(io.StringIO(data.decode()))
    assert cells[header.index("review")] == "'=cmd|' /C calc'!A0"
    assert read_gradebook(data)[1][0].review == "=cmd|' /C calc'!A0"


def test_a_cell_a_spreadsheet_would_run_is_defused_and_the_round_trip_is_exact() -> None:
    data = gradebook_csv([*ROWS, failed("eve", "'quoted"), failed("-x", "@sum")], IDS)
    assert "\n'-x," in data.decode() and ",\"'=HYPERLINK(" in data.decode()
    ids, rows = read_gradebook(data)
    by_name = {row.submission: row for row in rows}
    assert by_name["dave"].student == '=HYPERLINK("http://x")'
    assert by_name["eve"].reason == "'quoted"
    assert by_name["-x"].reason == "@sum"
    assert gradebook_csv(rows, ids) == data


def test_reading_gives_back_the_criterion_ids_and_rows() -> None:
    ids, rows = read_gradebook(gradebook_csv(ROWS, IDS))
    assert ids == IDS
    alice = rows[0]
    assert (alice.submission, alice.student, alice.status) == (
        "alice",
        'Alice "Al" Smith',
        "graded",
    )
    assert dict(alice.criteria) == {"contract_stability": "30.00", "written_summary": "15.00"}


def test_merging_shards_gives_the_bytes_of_grading_everything_at_once() -> None:
    whole = gradebook_csv(ROWS, IDS)
    shards = [
        gradebook_csv(ROWS[2:], IDS),
        gradebook_csv(ROWS[:1], IDS),
        gradebook_csv(ROWS[1:2], IDS),
    ]
    assert merge_gradebooks(shards) == whole
    assert merge_gradebooks([whole]) == whole


def test_rows_of_one_name_are_written_in_a_stable_order() -> None:
    twins = [failed("x", "the grader failed"), graded("x")]
    assert gradebook_csv(twins, IDS) == gradebook_csv(list(reversed(twins)), IDS)


def test_merging_gradebooks_of_different_rubrics_is_refused() -> None:
    other = gradebook_csv([failed("zoe", "crashed")], ["contract_stability"])
    with pytest.raises(GradebookError, match="gradebook 2 has criteria contract_stability but"):
        merge_gradebooks([gradebook_csv(ROWS, IDS), other])


def test_a_submission_in_two_shards_is_refused() -> None:
    with pytest.raises(GradebookError, match="'carol' is in gradebook 1 and gradebook 2"):
        merge_gradebooks([gradebook_csv(ROWS, IDS), gradebook_csv([graded("carol")], IDS)])


def test_merging_nothing_is_refused() -> None:
    with pytest.raises(GradebookError, match="at least one"):
        merge_gradebooks([])


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "empty"),
        (b"name,score\n", "not a gradekit gradebook"),
        (
            b"submission,student,status,total,review,final,max,digest,reason\na,b\n",
            "row 2 has 2 cells",
        ),
        (
            b"submission,student,status,total,review,final,max,digest,reason\na,a,done,,,,,,\n",
            "status 'done'",
        ),
        (
            b"submission,student,status,total,max,digest,reason\n",
            "an earlier gradekit's, without "
            "the review and final columns: grade the submissions again",
        ),
        (b"\xff", "not UTF-8"),
    ],
)
def test_reading_a_broken_gradebook_says_what_is_wrong(data: bytes, says: str) -> None:
    with pytest.raises(GradebookError, match=says):
        read_gradebook(data)


def test_points_for_a_criterion_without_a_column_are_refused() -> None:
    with pytest.raises(GradebookError, match="not a column"):
        gradebook_csv([graded("alice")], ["contract_stability"])


def test_a_criterion_id_that_clashes_with_a_fixed_column_is_refused() -> None:
    with pytest.raises(GradebookError, match="differ from the gradebook's own columns"):
        gradebook_csv([], ["total"])
