"""The review sheet (gradekit reviews export / import): a CSV a TA fills in a spreadsheet
comes back as the reviews single ``gradekit review`` calls make; every bad row is listed
and nothing is appended; cells a spreadsheet would run are escaped and read back exactly.

It compares the private ``_FORMULA_START`` of ``grader.ledger._sheet`` and
``grader.outputs._gradebook`` on purpose: the sheet escapes cells as the gradebook does."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.cli import main
from grader.ledger import COLUMNS, RESULTS, _sheet, sheet_csv, sheet_rows
from grader.outputs import _gradebook
from tests.grader.ledger.test_review_bulk import (
    STUDENTS,
    Cohort,
    copy_cohort,
    grade,
    review,
)

Row = dict[str, str]


def export(cohort: Cohort, sheet: Path, *extra: str) -> int:
    return main(["reviews", "export", "--out", str(cohort.out), "--sheet", str(sheet), *extra])


def load(cohort: Cohort, sheet: Path, *extra: str) -> int:
    return main(["reviews", "import", str(sheet), "--out", str(cohort.out), *extra])


def rows_of(sheet: Path) -> list[Row]:
    return list(csv.DictReader(io.StringIO(sheet.read_bytes().decode("utf-8"), newline="")))


def write(sheet: Path, rows: list[Row], *, excel: bool = False) -> None:
    """The sheet as a spreadsheet saves it (``excel``: a byte-order mark and CRLF)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, lineterminator="\r\n" if excel else "\n")
    writer.writeheader()
    writer.writerows(rows)
    sheet.write_bytes(("\ufeff" if excel else "").encode() + buffer.getvalue().encode("utf-8"))


def decide(rows: list[Row], student: str, criterion: str, **cells: str) -> None:
    [row] = [r for r in rows if (r["student"], r["criterion"]) == (student, criterion)]
    row.update(cells)


@pytest.mark.slow  # on a real grading (the module's template)
def test_a_filled_sheet_records_what_single_reviews_record(
    cohort: Cohort,
    template: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sheet = tmp_path / "sheet.csv"
    capsys.readouterr()
    assert export(cohort, sheet) == 0
    assert capsys.readouterr().out == (
        f"wrote {sheet}: 8 rows of 4 reports (8 pending, 0 needing a new review); fill decision "
        "(confirm, or override with points), by and reason, then `.venv/bin/gradekit reviews "
        f"import {sheet} --by NAME --out {cohort.out}`\n"
    )
    rows = rows_of(sheet)
    assert [(r["student"], r["criterion"]) for r in rows] == [
        (s, c) for s in STUDENTS for c in ("written_summary", "stretch_goal")
    ]
    bob = rows[2]
    assert (bob["submission"], bob["report"], bob["automated"], bob["max"], bob["marked"]) == (
        "bob",
        cohort.digest("bob"),
        "0.00",
        "15.00",
        "pending",
    )
    assert bob["evidence"].startswith("entries: failed, 0.00 / 6.00: 0 complete entries")
    assert "no_placeholders: failed, 0.00 / 5.00" in bob["evidence"]
    assert all(r[c] == "" for r in rows for c in ("decision", "points", "by", "reason"))

    # The TA sorts the sheet by student, descending, and fills it in a spreadsheet, which
    # saves it with a byte-order mark and CRLF.
    decide(rows, "alice", "written_summary", decision="confirm", reason="read it")
    decide(
        rows,
        "bob",
        "written_summary",
        decision="Override",
        points="7.5",
        by="lee",
        reason="'=SUM(A1) is not a failure log, but two entries are real",
    )
    decide(
        rows,
        "carol",
        "stretch_goal",
        decision="override",
        points="0",
        by="'@lee",
        reason="no write-up",
    )
    decide(rows, "dave", "written_summary", by="kim")  # no decision: skipped
    write(sheet, rows[::-1], excel=True)
    before = cohort.files()
    assert load(cohort, sheet, "--by", "kim") == 0
    shown = capsys.readouterr().out.splitlines()
    assert (
        shown[-1] == f"recorded {sheet}: 1 confirmed, 2 overridden, 5 without a decision, skipped"
    )

    twin = copy_cohort(template, tmp_path / "twin")
    for args in (
        ["alice", "--criterion", "written_summary", "--by", "kim", "--reason", "read it"],
        [
            "bob",
            "--criterion",
            "written_summary",
            "--points",
            "7.5",
            "--by",
            "lee",
            "--reason",
            "=SUM(A1) is not a failure log, but two entries are real",
        ],
        [
            "carol",
            "--criterion",
            "stretch_goal",
            "--points",
            "0",
            "--by",
            "@lee",
            "--reason",
            "no write-up",
        ],
    ):
        assert review(twin, *args) == 0
    assert shown[:-1] == capsys.readouterr().out.splitlines()
    assert cohort.files() == twin.files() != before  # the ledger too
    assert main(["ledger", "verify", str(cohort.out)]) == 0

    after = cohort.files()
    capsys.readouterr()
    assert load(cohort, sheet, "--by", "kim") == 0  # the same sheet again: nothing new
    assert capsys.readouterr().out == (
        f"nothing to record: no new decision in {sheet}: 0 confirmed, 0 overridden, 5 without "
        "a decision, skipped, 3 recorded already, not again\n"
    )
    assert cohort.files() == after

    again = tmp_path / "again.csv"
    assert export(cohort, again, "--pending") == 0
    assert [(r["student"], r["criterion"], r["marked"]) for r in rows_of(again)] == [
        ("alice", "stretch_goal", "pending"),
        ("bob", "stretch_goal", "pending"),
        ("carol", "written_summary", "pending"),
        ("dave", "written_summary", "pending"),
        ("dave", "stretch_goal", "pending"),
    ]
    assert export(cohort, again, "--criterion", "stretch_goal") == 2  # never over a sheet
    assert f"{again} exists" in capsys.readouterr().err
    alone = tmp_path / "carol.csv"
    assert export(cohort, alone, "--criterion", "stretch_goal") == 0
    assert [r["marked"] for r in rows_of(alone) if r["student"] == "carol"] == [
        "reviewed: 10.00 -> 0.00 by @lee (ledger event 7)"
    ]


def _bad_rows(cohort: Cohort, rows: list[Row]) -> list[tuple[Row, str]]:
    """Rows that each break one rule, and what the error says about each."""
    rows = [row | {"by": "kim"} for row in rows]
    alice, bob = rows[0], rows[2]
    return [
        (alice | {"decision": "yes"}, "decision 'yes' is neither confirm nor override"),
        (
            alice | {"criterion": "stretch_goal", "decision": "confirm", "points": "10"},
            "a confirmation keeps the automated points, but points is 10; clear points",
        ),
        (
            bob | {"decision": "override"},
            "an override needs points; write the points that stand, 0 to 15.00",
        ),
        (
            bob | {"decision": "override", "points": "15.01", "reason": "r"},
            "points 15.01 is more than written_summary's max 15.00: give a decimal from 0 to 15.00",
        ),
        (
            bob
            | {
                "criterion": "stretch_goal",
                "decision": "override",
                "points": "12,5",
                "reason": "r",
            },
            "points '12,5' is not exact points",
        ),
        (
            alice
            | {"student": "carol", "submission": "carol", "decision": "confirm", "reason": "r"},
            f"carol has no graded report {cohort.digest('alice')}",
        ),
        (
            rows[4] | {"report": cohort.digest("carol")[:12], "decision": "confirm", "reason": "r"},
            "is not a full report digest (64 hex digits)",
        ),
        (
            rows[5] | {"criterion": "clarity", "decision": "confirm", "reason": "r"},
            "'clarity' is not a criterion of report",
        ),
        (
            rows[6] | {"decision": "confirm", "by": "", "reason": "r"},
            "by is empty and no --by was given; write who reviewed it, or pass --by NAME",
        ),
        (rows[7] | {"decision": "confirm", "by": "kim", "reason": " "}, "reason must be one line"),
        (
            rows[7] | {"decision": "confirm", "by": "kim", "reason": "r"},
            "decides stretch_goal of report",
        ),  # the same report and criterion twice
        (
            rows[4] | {"submission": "mallory", "decision": "confirm", "reason": "r"},
            "submission 'mallory' is not the submission of report",
        ),
        (rows[3] | {"points": "3"}, "points 3 without a decision; write override"),
    ]


@pytest.mark.slow  # on a real grading (the module's template)
def test_every_bad_row_is_listed_with_its_line_and_nothing_is_appended(
    cohort: Cohort,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sheet = tmp_path / "sheet.csv"
    assert export(cohort, sheet) == 0
    rows = rows_of(sheet)
    bad = _bad_rows(cohort, rows)
    good = rows[1] | {"decision": "confirm", "by": "kim", "reason": "fine"}
    write(sheet, [good, *(row for row, _ in bad)])
    before = cohort.files()
    capsys.readouterr()
    assert load(cohort, sheet) == 2
    error = capsys.readouterr().err
    assert error.startswith(
        f"UsageError: {sheet}: {len(bad)} rows cannot be appended, so "
        "nothing was; fix each and import the sheet again:\n"
    )
    lines = error.splitlines()[1:]
    assert len(lines) == len(bad)
    for number, (line, (_, says)) in enumerate(zip(lines, bad, strict=True), 3):
        assert line.startswith(f"{sheet}:{number}: ") and says in line, (line, says)
    assert cohort.files() == before

    for data, says in (
        (b"student;submission\n", "save it as CSV with commas"),
        (b"\xff\xfe", "byte 0 is not UTF-8; save the sheet as CSV UTF-8"),
        (b"", "the header is nothing"),
    ):
        sheet.write_bytes(data)
        assert load(cohort, sheet) == 2
        assert says in capsys.readouterr().err
    assert load(cohort, tmp_path / "missing.csv") == 2
    assert "cannot read the review sheet" in capsys.readouterr().err
    assert export(cohort, tmp_path / "x.csv", "--criterion", "clarity") == 2
    assert "give --criterion one of contract_stability" in capsys.readouterr().err
    assert cohort.files() == before


@pytest.mark.slow  # grades the cohort again
def test_a_sheet_from_before_a_regrade_is_recorded_against_its_report(
    cohort: Cohort,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sheet = tmp_path / "sheet.csv"
    assert export(cohort, sheet, "--criterion", "written_summary") == 0
    old = cohort.digest("carol")
    failures = cohort.subs / "carol" / "FAILURES.md"
    failures.write_text(failures.read_text("utf-8") + "\n", "utf-8")
    assert grade(cohort) == 0
    results = (cohort.out / "carol" / RESULTS).read_bytes()
    rows = rows_of(sheet)
    decide(
        rows,
        "carol",
        "written_summary",
        decision="override",
        points="11",
        by="kim",
        reason="one entry is a copy",
    )
    write(sheet, rows)
    capsys.readouterr()
    assert load(cohort, sheet) == 0
    shown = capsys.readouterr()
    assert shown.out.startswith("carol: written_summary 15.00 -> 11.00 by kim (ledger event ")
    assert f"note: report {old[:12]} is not carol's latest grade" in shown.err
    seq = cohort.events()[-1]["seq"]
    assert cohort.cells()["carol"] == (
        f"NEEDS A NEW REVIEW: written_summary was reviewed on report {old[:12]} (ledger event "
        f"{seq}), not this one; pending: stretch_goal",
        "100.00",
    )
    assert (cohort.out / "carol" / RESULTS).read_bytes() == results  # the latest's, as it was
    assert main(["ledger", "verify", str(cohort.out)]) == 0


CELLS = st.text(st.characters(codec="utf-8"), max_size=8)


@given(
    st.lists(
        st.lists(CELLS, min_size=len(COLUMNS), max_size=len(COLUMNS)).filter(
            lambda row: any(cell.strip() for cell in row)
        ),
        max_size=4,
    )
)
def test_a_sheet_reads_back_every_cell_exactly_and_never_holds_a_formula(
    rows: list[list[str]],
) -> None:
    assert _sheet._FORMULA_START == _gradebook._FORMULA_START  # the gradebook's escaping
    data = sheet_csv(rows)
    written = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))[1:]
    assert not [cell for row in written for cell in row if cell.startswith(("=", "+", "-", "@"))]
    back = sheet_rows(Path("s.csv"), data)
    assert [[cells[c] for c in COLUMNS] for _, cells in back] == rows
    bom = sheet_rows(Path("s.csv"), b"\xef\xbb\xbf" + data)  # as Excel saves it
    assert [[cells[c] for c in COLUMNS] for _, cells in bom] == rows
