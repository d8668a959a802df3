"""Copies across a cohort, as a batch shows them: ``copies.json``, the gradebook's reason on
both rows, the review sheet, the dashboard; and no report or digest that moves.

The issue: a late submission byte-identical to a classmate's was graded with no finding.
Each test drives the real command line on small real submissions (agents that answer
without their provider: grading one takes about a second).
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest

from grader.cli import main
from grader.ledger import COLUMNS, COPIES, GRADEBOOK, REPORT
from grader.outputs import read_copies
from tests.grader.batch.cohorts import ALICE, CAROL, DAVE, ERIN, submission
from tests.grader.batch.test_batch_safety import short_rubric

ALICE_NOTE = "similar to bob's agent code (100%): flagged for review"
BOB_NOTE = "similar to alice's agent code (100%): flagged for review"


class Cli:
    """``gradekit ... --out OUT`` in this process; ``grade`` with the short rubric."""

    def __init__(self, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.base, self.capsys, self.rubric = base, capsys, short_rubric(base)

    def grade(self, out: Path, *args: str | Path) -> tuple[int, str]:
        self.capsys.readouterr()
        code = main(
            [
                "grade",
                *map(str, args),
                "--out",
                str(out),
                "--rubric",
                str(self.rubric),
                "--jobs",
                "2",
                "--quiet",
            ]
        )
        said = self.capsys.readouterr()
        return code, said.out + said.err

    def run(self, *args: str | Path) -> int:
        return main([*map(str, args)])


def reasons(out: Path) -> dict[str, str]:
    rows = csv.DictReader(io.StringIO((out / GRADEBOOK).read_text("utf-8"), newline=""))
    return {row["submission"]: row["reason"] for row in rows}


def lines(out: Path) -> dict[str, str]:
    return {
        line.partition(",")[0]: line
        for line in (out / GRADEBOOK).read_text("utf-8").splitlines()[1:]
    }


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


def classmates(subs: Path) -> Path:
    """alice, carol and dave: three agents written apart, each with the hand-out's helpers."""
    for name, agent in (("alice", ALICE), ("carol", CAROL), ("dave", DAVE)):
        submission(subs / name, agent, handout=True)
    return subs


@pytest.mark.slow
def test_a_copy_is_flagged_on_both_rows_the_sheet_and_the_dashboard_and_no_digest_moves(
    cli: Cli, tmp_path: Path
) -> None:
    honest = classmates(tmp_path / "honest")
    code, said = cli.grade(tmp_path / "without", honest)
    assert code == 0, said
    assert reasons(tmp_path / "without") == {"alice": "", "carol": "", "dave": ""}
    assert not (tmp_path / "without" / COPIES).exists()  # nothing to say: no file
    subs = classmates(tmp_path / "subs")
    shutil.copytree(subs / "alice", subs / "bob")  # byte for byte
    out = tmp_path / "grades"
    code, said = cli.grade(out, subs)
    assert code == 0, said
    assert "copies: 4 submissions compared" in said and "1 pair flagged for review" in said
    assert "alice: 0.00 / 100.00" in said and f"({ALICE_NOTE})" in said
    assert reasons(out) == {"alice": ALICE_NOTE, "bob": BOB_NOTE, "carol": "", "dave": ""}
    copies = (out / COPIES).read_text("utf-8")
    assert '"a":"alice","b":"bob"' in copies and "carol" not in copies
    # No report knows of the copy: each classmate's report is byte for byte the one a
    # batch without bob wrote, digest and all.
    for name in ("alice", "carol", "dave"):
        assert (out / name / REPORT).read_bytes() == (
            tmp_path / "without" / name / REPORT
        ).read_bytes()
    assert lines(out)["carol"] == lines(tmp_path / "without")["carol"]
    assert cli.run("report", "verify", out / "alice" / REPORT) == 0

    # The review sheet says it on both rows, in a column of its own.
    sheet = tmp_path / "sheet.csv"
    assert cli.run("reviews", "export", "--out", out, "--sheet", sheet) == 0
    rows = list(csv.DictReader(io.StringIO(sheet.read_text("utf-8"), newline="")))
    flags = {row["submission"]: row["flagged"] for row in rows}
    assert flags == {"alice": ALICE_NOTE, "bob": BOB_NOTE, "carol": "", "dave": ""}
    # A sheet saved before that column existed is read all the same.
    earlier = [column for column in COLUMNS if column != "flagged"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, earlier, lineterminator="\r\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(
        {**row, "decision": "confirm", "by": "kim", "reason": "read it"}
        for row in rows
        if row["submission"] == "carol"
    )
    (tmp_path / "old.csv").write_text(buffer.getvalue(), "utf-8")
    assert cli.run("reviews", "import", tmp_path / "old.csv", "--out", out) == 0
    assert "by kim" in lines(out)["carol"]
    assert reasons(out)["alice"] == ALICE_NOTE  # a review rewrites the gradebook, notes kept

    # The dashboard lists the pair, and puts both rows first in what waits for a person.
    pytest.importorskip("jinja2")
    from grader.dashboard import build_dashboard

    build_dashboard(out, tmp_path / "site")
    page = (tmp_path / "site" / "index.html").read_text("utf-8")
    assert 'data-pair="alice/bob"' in page and 'data-stat="copies">1<' in page
    waiting = page[page.index('id="review-list"') :].split('<li data-submission="')[1:]
    assert [item.partition('"')[0] for item in waiting][:2] == ["alice", "bob"]
    student = (tmp_path / "site" / "students" / "bob.html").read_text("utf-8")
    assert 'data-other="alice"' in student and "def summarise(text, limit=3):" in student


@pytest.mark.slow
def test_a_late_copy_graded_alone_is_compared_with_its_classmates_and_names_them(
    cli: Cli, tmp_path: Path
) -> None:
    subs = classmates(tmp_path / "subs")
    out = tmp_path / "grades"
    assert cli.grade(out, subs)[0] == 0
    before = lines(out)
    report = (out / "alice" / REPORT).read_bytes()
    # bob hands in a copy of alice's work two days late; only he is graded.
    shutil.copytree(subs / "alice", subs / "bob")
    code, said = cli.grade(out, subs, "--only", "bob")
    assert code == 0, said
    assert reasons(out) == {"alice": ALICE_NOTE, "bob": BOB_NOTE, "carol": "", "dave": ""}
    # alice's row was kept, not graded: its reason alone gains the note.
    assert lines(out)["alice"] == before["alice"] + ALICE_NOTE
    assert lines(out)["carol"] == before["carol"]
    assert (out / "alice" / REPORT).read_bytes() == report
    # Graded once more, the same pair gives the same note, not a second one.
    assert cli.grade(out, subs, "--only", "bob")[0] == 0
    assert lines(out)["alice"] == before["alice"] + ALICE_NOTE
    # bob writes his own agent after all: the pair, and both notes, are gone.
    submission(subs / "bob", ERIN, handout=True)
    assert cli.grade(out, subs, "--only", "bob")[0] == 0
    assert reasons(out) == {"alice": "", "bob": "", "carol": "", "dave": ""}
    assert lines(out)["alice"] == before["alice"]
    assert '"pairs":[]' in (out / COPIES).read_text("utf-8")


@pytest.mark.slow
def test_a_batch_whose_paths_hold_one_folder_keeps_the_pairs_of_the_others(
    cli: Cli, tmp_path: Path
) -> None:
    subs = classmates(tmp_path / "subs")
    shutil.copytree(subs / "alice", subs / "bob")
    out = tmp_path / "grades"
    assert cli.grade(out, subs)[0] == 0
    pairs = read_copies((out / COPIES).read_bytes()).pairs
    # carol regraded from a folder of her own: the paths hold neither alice nor bob, so
    # their pair, and their notes, stay as they were.
    (tmp_path / "late").mkdir()
    shutil.copytree(subs / "carol", tmp_path / "late" / "carol")
    assert cli.grade(out, tmp_path / "late")[0] == 0
    assert read_copies((out / COPIES).read_bytes()).pairs == pairs
    assert [(pair.a, pair.b) for pair in pairs] == [("alice", "bob")]
    assert reasons(out) == {"alice": ALICE_NOTE, "bob": BOB_NOTE, "carol": "", "dave": ""}


def test_a_hand_out_that_is_no_lab_is_refused_before_anything_is_written(
    cli: Cli, tmp_path: Path
) -> None:
    subs = classmates(tmp_path / "subs")
    (tmp_path / "starter").mkdir()  # the starter's folder, but not the lab inside it
    out = tmp_path / "grades"
    code, said = cli.grade(out, subs, "--handout", tmp_path / "starter")
    assert code == 2, said
    assert f"--handout {tmp_path / 'starter'}: no pyproject.toml there" in said
    assert not out.exists()
