"""Attacks on the gradebook's and the review sheet's cells: a spreadsheet must never see a
formula, whatever separator it splits the file on, and the files still read back exactly.

A flagged file named ``lab/x;=1+1;.py`` put an unquoted ``;=1+1;`` into the gradebook's
reason cell: a spreadsheet that splits on ``;`` (European locales), on a tab or on ``|``
then saw ``=1+1`` as a cell of its own. Quoting the cell does not help there: the quote
opens after a comma, in the middle of what a ``;`` reader takes for one field (the first
test shows it). What holds is the rule of ``grader.outputs._gradebook``: a cell that starts
like a formula gets a ``'`` in front, and so does a formula start after any separator or
line break inside a cell (after the quotes a reader would strip there); reading removes
exactly those, so every round trip is exact and honest cells keep their bytes.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.ledger import COLUMNS, sheet_csv, sheet_rows
from grader.outputs import GradebookRow, gradebook_csv, merge_gradebooks, read_gradebook

DELIMITERS = (",", ";", "\t", "|")  # what a spreadsheet splits a CSV on, by locale and habit
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # how a cell a spreadsheet would run starts
BREAKS = (*DELIMITERS, "\r", "\n")  # where a spreadsheet may start a cell or a line
IDS = ["contract_stability", "written_summary"]
ATTACK = "flagged for review: lab/x;=1+1;.py"
# Each formula start after each separator or line break, and after the quotes a reader
# strips in front of a field; and at the start of the cell.
HOSTILE = [
    f"x{sep}{quotes}{start}1+1" for sep in BREAKS for start in FORMULA for quotes in ("", '"', '""')
] + [f"{start}1+1" for start in FORMULA]


def honest(name: str, reason: str = "") -> GradebookRow:
    return GradebookRow(
        submission=name,
        student=name,
        status="graded",
        total="45.00",
        max="100.00",
        criteria={"contract_stability": "30.00", "written_summary": "15.00"},
        digest=name[0] * 64,
        reason=reason,
        final="45.00",
    )


def fields(data: bytes, delimiter: str) -> list[str]:
    """Every field of ``data`` as Python's csv module reads it when split on ``delimiter``,
    as a spreadsheet set to that separator reads the file."""
    text = data.decode("utf-8-sig")
    return [
        field
        for record in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        for field in record
    ]


def formulas(data: bytes) -> dict[str, list[str]]:
    """The fields that start like a formula, by the delimiter that split them off."""
    found = {repr(d): [f for f in fields(data, d) if f.startswith(FORMULA)] for d in DELIMITERS}
    return {d: f for d, f in found.items() if f}


def every_column(cell: str, name: str = "mallory") -> GradebookRow:
    """A row with ``cell`` in every column a text can reach (status is the grader's)."""
    return GradebookRow(
        submission=f"{name}{cell}",
        student=cell,
        status="graded",
        total=cell,
        max=cell,
        criteria={"contract_stability": cell, "written_summary": cell},
        digest=cell,
        reason=cell,
        review=cell,
        final=cell,
        name=cell,
        late=cell,
        penalty=cell,
    )


def test_quoting_alone_leaves_the_formula_to_a_semicolon_reader() -> None:
    # Why the cells are escaped and not just quoted: the csv module quotes a cell that holds
    # a comma, and a reader splitting on ";" still cuts "=1+1" out of it.
    line = f'alice,alice,graded,"{ATTACK}, and more"\n'.encode()
    assert "=1+1" in fields(line, ";")


def test_the_flagged_file_name_is_no_formula_under_any_separator() -> None:
    data = gradebook_csv([honest("alice"), honest("mallory", reason=ATTACK)], IDS)
    assert ";'=1+1;" in data.decode()
    assert formulas(data) == {}
    assert read_gradebook(data)[1][1].reason == ATTACK
    assert merge_gradebooks([data]) == data


@pytest.mark.parametrize("cell", HOSTILE)
def test_a_formula_start_after_any_separator_is_defused_in_every_column(cell: str) -> None:
    rows = [honest("alice"), every_column(cell)]
    data = gradebook_csv(rows, IDS)
    assert formulas(data) == {}
    ids, back = read_gradebook(data)
    assert (ids, back) == (IDS, sorted(rows, key=lambda row: row.submission))
    assert gradebook_csv(back, ids) == data
    # Shards merge into the bytes of one run, hostile cells and all.
    assert merge_gradebooks([gradebook_csv(rows[1:], IDS), gradebook_csv(rows[:1], IDS)]) == data


@pytest.mark.parametrize("cell", HOSTILE)
def test_every_review_sheet_cell_is_defused_and_reads_back_exactly(cell: str) -> None:
    rows = [[f"{column}{cell}" if n % 2 else cell for n, column in enumerate(COLUMNS)]]
    data = sheet_csv(rows)
    assert formulas(data) == {}
    back = sheet_rows(Path("week3.csv"), data)
    assert [[cells[c] for c in COLUMNS] for _, cells in back] == rows


def test_a_bare_carriage_return_is_quoted_so_the_gradebook_still_reads() -> None:
    # The csv module quotes a cell that holds "\r" only when it is in the line terminator:
    # under "\n" it left it bare, and reading split the row in two.
    row = honest("mallory", reason="lab/x\r=1+1.py")
    data = gradebook_csv([row], IDS)
    assert b'"lab/x\r\'=1+1.py"' in data
    assert read_gradebook(data)[1] == [row]
    assert formulas(data) == {}


# Text from the characters that matter, and a few that do not.
TEXT = st.text(st.sampled_from([*BREAKS, *FORMULA, "'", '"', " ", "a", "1", "é"]), max_size=12)


@settings(max_examples=400)
@given(st.lists(TEXT, min_size=1, max_size=3))
def test_any_cells_round_trip_exactly_and_never_start_a_formula(cells: list[str]) -> None:
    rows = [every_column(cell, f"s{n}") for n, cell in enumerate(cells)]
    data = gradebook_csv(rows, IDS)
    assert formulas(data) == {}
    ids, back = read_gradebook(data)
    assert back == sorted(rows, key=lambda row: (row.submission, row.student))
    assert gradebook_csv(back, ids) == data
    assert merge_gradebooks([gradebook_csv([row], IDS) for row in rows]) == data
    sheet = sheet_csv([[cell] * len(COLUMNS) for cell in cells])
    assert formulas(sheet) == {}
    assert [[c[k] for k in COLUMNS] for _, c in sheet_rows(Path("s.csv"), sheet)] == [
        [cell] * len(COLUMNS) for cell in cells if cell.strip()
    ]


def _before(rows: list[list[str]], end: str) -> bytes:
    """The bytes the gradebook and the sheet were written with before this rule: the csv
    module's minimal quoting, and a ``'`` in front of a cell that starts like a formula."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=end)
    for row in rows:
        writer.writerow([f"'{c}" if c.startswith((*FORMULA, "'")) else c for c in row])
    return buffer.getvalue().encode("utf-8")


# Honest text: what grader messages hold (separators, quotes, apostrophes, dashes, lists),
# but no formula start right after a separator or a line break, and no bare CR.
HONEST = st.text(
    st.sampled_from([*DELIMITERS, "\n", *FORMULA[:4], "'", '"', " ", "a", "1"]), max_size=12
).filter(
    lambda t: (
        "\r" not in t
        and not any(
            t[i] in BREAKS and t[i + 1 :].lstrip('"').lstrip("'").startswith(FORMULA)
            for i in range(len(t))
        )
    )
)


@given(st.lists(HONEST, min_size=1, max_size=3))
def test_honest_cells_keep_the_bytes_they_had(cells: list[str]) -> None:
    rows = [every_column(cell, f"s{n}") for n, cell in enumerate(cells)]
    data = gradebook_csv(rows, IDS)
    _, _, body = data.partition(b"\n")
    ordered = sorted(rows, key=lambda row: (row.submission, row.student))
    assert body == _before(
        [
            [
                r.submission,
                r.student,
                r.name,
                r.status,
                r.total,
                r.review,
                r.late,
                r.penalty,
                r.final,
                r.max,
                *r.criteria.values(),
                r.digest,
                r.reason,
            ]
            for r in ordered
        ],
        "\n",
    )
    # An exported sheet's last cell (reason) is the TA's to fill: empty.
    sheet = [[cell] * (len(COLUMNS) - 1) + [""] for cell in cells]
    assert sheet_csv(sheet) == _before([list(COLUMNS), *sheet], "\r\n")


def test_a_reason_joined_with_semicolons_keeps_its_bytes() -> None:
    # A degraded or flagged row's reason joins its parts with "; ": honest, unchanged.
    reason = (
        "flagged for review: the own-Replay probe: 'x'; case refund-policy is not "
        "evaluated: no expected outcome | - see report.md, 'a', -1"
    )
    data = gradebook_csv([honest("alice", reason=reason)], IDS)
    assert data.decode().endswith(f',"{reason}"\n')


@pytest.mark.slow
def test_a_real_flagged_file_name_reaches_the_gradebook_and_the_sheet_defused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grader.cli import main
    from tests.grader.batch.test_batch_safety import short_rubric

    root = tmp_path / "subs" / "mallory"
    (root / "lab").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8")
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(
        "def run(provider, task, tools=None):\n    return 'an answer'\n", "utf-8"
    )
    (root / "lab" / "x;=1+1;.py").write_text("import gc\n\ngc.get_objects()\n", "utf-8")
    out = tmp_path / "grades"
    assert (
        main(
            [
                "grade",
                str(root.parent),
                "--out",
                str(out),
                "--rubric",
                str(short_rubric(tmp_path)),
                "--quiet",
            ]
        )
        == 0
    )
    data = (out / "gradebook.csv").read_bytes()
    [row] = read_gradebook(data)[1]
    assert row.reason.startswith("flagged for review: lab/x;=1+1;.py:3")
    assert ";'=1+1;" in data.decode()
    assert formulas(data) == {}
    sheet = tmp_path / "week3.csv"
    assert main(["reviews", "export", "--out", str(out), "--sheet", str(sheet)]) == 0
    assert formulas(sheet.read_bytes()) == {}
    capsys.readouterr()
