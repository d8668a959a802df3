"""Late work (issue 25): grading into a grades folder that holds a gradebook updates it.

A submission graded again replaces its own row; every other row stays byte for byte,
and the ones whose folder the paths no longer hold are listed as absent, never dropped
in silence. ``--replace`` keeps only the batch's rows and lists the ones it drops;
``--only`` grades some folders among those the paths hold. The ledger's batch event
says what the batch covered. Each test drives the real command line on tiny real
submissions (an agent of two lines: grading one takes about a second).
"""

from __future__ import annotations

import math
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gradekit.internal import commands
from grader.batch._batch import _Gradebook
from grader.cli import main
from grader.dashboard import load_cohort
from grader.ledger import GRADEBOOK, LEDGER, read_ledger
from grader.outputs import GradebookRow, gradebook_csv, read_gradebook
from tests.grader.batch.test_batch_safety import (
    HANGS,
    Grader,
    _wait_for,
    _workers,
    short_rubric,
    tiny_agent,
)

COHORT = ("alice", "bob", "carol")


@dataclass(frozen=True, slots=True)
class Said:
    """What one ``gradekit grade`` said, and the gradebook it left, line by line."""

    code: int
    stdout: str
    stderr: str
    lines: dict[str, str]  # the gradebook's lines by submission (the first cell)

    def explain(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def answering(root: Path, answer: str) -> Path:
    """A submission (made anew) whose agent answers ``answer`` to every case."""
    shutil.rmtree(root, ignore_errors=True)
    return tiny_agent(root, f"return {answer!r}\n")


def lines_of(out: Path) -> dict[str, str]:
    text = (out / GRADEBOOK).read_text("utf-8")
    assert text.endswith("\n")
    return {line.partition(",")[0]: line for line in text.splitlines()[1:]}


SELF = ("status", "requested", "completed", "failed", "operator", "started", "at")


def batch_event(out: Path) -> dict[str, Any]:
    """The ledger's latest batch event, without its chain fields, its rubric and what it
    says of itself (status, counts, operator, times: ``test_batches``)."""
    event = [e for e in read_ledger(out / LEDGER).events if e["event"] == "batch"][-1]
    return {k: v for k, v in event.items() if k not in ("prev", "seq", "rubric", "grader", *SELF)}


class Cli:
    """``gradekit grade ... --out OUT --rubric R --jobs 1 --quiet`` in this process."""

    def __init__(self, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.out, self.capsys = base / "grades", capsys
        self.rubric = short_rubric(base)

    def grade(self, *args: str | Path) -> Said:
        self.capsys.readouterr()
        code = main(
            [
                "grade",
                *map(str, args),
                "--out",
                str(self.out),
                "--rubric",
                str(self.rubric),
                "--jobs",
                "1",
                "--quiet",
            ]
        )
        said = self.capsys.readouterr()
        lines = lines_of(self.out) if (self.out / GRADEBOOK).exists() else {}
        return Said(code, said.out, said.err, lines)


@pytest.fixture
def cohort(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Cli, Path]:
    """alice, bob and carol graded into a grades folder."""
    subs = tmp_path / "subs"
    for name in COHORT:
        answering(subs / name, f"{name} answers")
    cli = Cli(tmp_path, capsys)
    first = cli.grade(subs)
    assert first.code == 0, first.explain()
    assert list(first.lines) == list(COHORT)
    # Into an empty folder, with no flags, the batch event gains only its mode.
    assert batch_event(cli.out) == {
        "event": "batch",
        "mode": "update",
        "counts": {"graded": 3},
        "selection": list(COHORT),
        "unchanged": [],
    }
    return cli, subs


@pytest.mark.slow
def test_late_work_updates_the_cohort_folder_and_lists_the_rest_as_absent(
    tmp_path: Path, cohort: tuple[Cli, Path]
) -> None:
    cli, _ = cohort
    # A reviewed row stays as it was too, review cell and final included.
    assert (
        main(
            [
                "review",
                "alice",
                "--criterion",
                "written_summary",
                "--points",
                "0.00",
                "--by",
                "kim",
                "--reason",
                "no failure log",
                "--out",
                str(cli.out),
            ]
        )
        == 0
    )
    before = lines_of(cli.out)
    assert "by kim" in before["alice"]
    late = answering(tmp_path / "late" / "bob", "bob, two days late")
    said = cli.grade(late)
    assert said.code == 0, said.explain()
    assert list(said.lines) == list(COHORT)
    assert said.lines["alice"] == before["alice"]
    assert said.lines["carol"] == before["carol"]
    assert said.lines["bob"] != before["bob"]
    bob_digest = said.lines["bob"].split(",")[-2]
    assert bob_digest not in before["bob"] and len(bob_digest) == 64
    assert "bob: 0.00 / 100.00" in said.stdout
    assert "(1 row graded now, 2 kept from earlier batches)" in said.stdout
    replace = commands.GRADE_REPLACE(submissions="SUBMISSIONS", out=str(cli.out))
    assert (
        f"note: {cli.out / GRADEBOOK} keeps 2 rows for submissions that {late} does "
        f"not hold: alice, carol."
    ) in said.stderr
    assert f"(`{replace}`)" in said.stderr
    assert batch_event(cli.out) == {
        "event": "batch",
        "mode": "update",
        "counts": {"graded": 1},
        "selection": ["bob"],
        "unchanged": [],
        "kept": ["alice", "carol"],
        "absent": ["alice", "carol"],
    }
    cohort_seen = load_cohort(cli.out)
    assert [s.row.submission for s in cohort_seen.submissions] == list(COHORT)
    assert (
        next(s for s in cohort_seen.submissions if s.row.submission == "bob").row.digest
        == bob_digest
    )


@pytest.mark.slow
def test_only_regrades_the_named_folder_and_keeps_the_others_byte_for_byte(
    cohort: tuple[Cli, Path],
) -> None:
    cli, subs = cohort
    before = lines_of(cli.out)
    for name in COHORT:  # every folder changed: only the one named may be graded again
        answering(subs / name, f"{name} answers anew")
    said = cli.grade(subs, "--only", "carol")
    assert said.code == 0, said.explain()
    assert list(said.lines) == list(COHORT)
    assert (said.lines["alice"], said.lines["bob"]) == (before["alice"], before["bob"])
    assert said.lines["carol"] != before["carol"]
    assert "note:" not in said.stderr  # kept, but nothing is absent
    assert batch_event(cli.out) == {
        "event": "batch",
        "mode": "update",
        "counts": {"graded": 1},
        "selection": ["carol"],
        "unchanged": [],
        "kept": ["alice", "bob"],
    }
    again = cli.grade(subs, "--only", "alice", "--only", "bob", "--only", "alice")
    assert again.code == 0, again.explain()
    assert again.lines["carol"] == said.lines["carol"]
    assert {k: v for k, v in batch_event(cli.out).items() if k in ("selection", "kept")} == {
        "selection": ["alice", "bob"],
        "kept": ["carol"],
    }


@pytest.mark.slow
def test_an_only_name_that_matches_no_folder_is_refused_before_anything_changes(
    cohort: tuple[Cli, Path],
) -> None:
    cli, subs = cohort
    book, ledger = (cli.out / GRADEBOOK).read_bytes(), (cli.out / LEDGER).read_bytes()
    said = cli.grade(subs, "--only", "bobb")
    assert said.code == 2, said.explain()
    assert (
        f"--only bobb: no submission folder of that name among the 3 that {subs} holds "
        "(did you mean bob?)"
    ) in said.stderr
    said = cli.grade(subs, "--only", "zed")
    assert said.code == 2, said.explain()
    assert "(they hold alice, bob, carol)" in said.stderr
    said = cli.grade(subs, "--only", "bob", "--shard", "1/2")
    assert said.code == 2, said.explain()
    assert "--only and --shard do not combine" in said.stderr
    assert ((cli.out / GRADEBOOK).read_bytes(), (cli.out / LEDGER).read_bytes()) == (book, ledger)


@pytest.mark.slow
def test_replace_keeps_only_the_batch_s_rows_and_lists_each_one_it_drops(
    tmp_path: Path, cohort: tuple[Cli, Path]
) -> None:
    cli, _ = cohort
    late = answering(tmp_path / "late" / "bob", "bob, two days late")
    said = cli.grade(late, "--replace")
    assert said.code == 0, said.explain()
    assert list(said.lines) == ["bob"]
    assert (
        f"--replace: 2 rows of {cli.out / GRADEBOOK} that this batch does not grade are "
        "dropped: alice, carol"
    ) in said.stderr
    assert batch_event(cli.out) == {
        "event": "batch",
        "mode": "replace",
        "counts": {"graded": 1},
        "selection": ["bob"],
        "unchanged": [],
        "dropped": ["alice", "carol"],
    }


@pytest.mark.slow
def test_a_folder_that_disappeared_keeps_its_row_and_is_listed_as_absent(
    cohort: tuple[Cli, Path],
) -> None:
    cli, subs = cohort
    before = lines_of(cli.out)
    shutil.rmtree(subs / "carol")
    said = cli.grade(subs)
    assert said.code == 0, said.explain()
    assert said.lines == before  # alice and bob graded again, unchanged; carol kept
    assert (
        f"note: {cli.out / GRADEBOOK} keeps 1 row for submissions that {subs} does not "
        "hold: carol." in said.stderr
    )
    assert batch_event(cli.out) == {
        "event": "batch",
        "mode": "update",
        "counts": {"graded": 2},
        "selection": ["alice", "bob"],
        "unchanged": ["alice", "bob"],
        "kept": ["carol"],
        "absent": ["carol"],
    }


@pytest.mark.slow
def test_shards_graded_into_one_folder_add_up_and_the_ledger_names_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = tmp_path / "subs"
    for name in COHORT:
        answering(subs / name, f"{name} answers")
    cli = Cli(tmp_path, capsys)
    first = cli.grade(subs, "--shard", "1/2")  # alice and carol
    assert (first.code, list(first.lines)) == (0, ["alice", "carol"]), first.explain()
    assert batch_event(cli.out)["shard"] == "1/2"
    assert "kept" not in batch_event(cli.out)
    second = cli.grade(subs, "--shard", "2/2")
    assert (second.code, list(second.lines)) == (0, list(COHORT)), second.explain()
    assert {k: v for k, v in first.lines.items()} == {
        k: v for k, v in second.lines.items() if k != "bob"
    }
    event = batch_event(cli.out)
    assert (event["shard"], event["selection"], event["kept"]) == (
        "2/2",
        ["bob"],
        ["alice", "carol"],
    )
    assert "absent" not in event


@pytest.mark.slow
def test_a_gradebook_of_other_criteria_is_refused_unless_every_row_is_graded_again(
    cohort: tuple[Cli, Path],
) -> None:
    cli, subs = cohort
    book = cli.out / GRADEBOOK
    text = book.read_text("utf-8")
    edited = text.replace(",stretch_goal,", ",stretch,", 1)
    book.write_text(edited, "utf-8")
    said = cli.grade(subs, "--only", "bob")
    assert said.code == 2, said.explain()
    assert (
        "its 2 rows that this batch does not grade (alice, carol) cannot share a "
        "gradebook with this batch's. Grade every submission again" in said.stderr
    )
    assert book.read_text("utf-8") == edited  # untouched: still the edited header
    said = cli.grade(subs, "--replace")
    assert said.code == 0, said.explain()
    assert list(said.lines) == list(COHORT)
    assert "dropped" not in batch_event(cli.out)
    # A new rubric's criteria over the whole cohort (no row kept): an update, no --replace.
    book.write_text(edited, "utf-8")
    said = cli.grade(subs)
    assert said.code == 0, said.explain()
    assert list(said.lines) == list(COHORT)
    assert book.read_text("utf-8").splitlines()[0] == text.splitlines()[0]
    assert batch_event(cli.out)["mode"] == "update"


@pytest.mark.slow
def test_ctrl_c_never_leaves_fewer_rows_than_before(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    for name in COHORT:
        answering(subs / name, f"{name} answers")
    grader = Grader(tmp_path / "batch")
    rubric = short_rubric(tmp_path, timeout_s=60)
    try:
        first = grader.grade(subs, "--jobs", "1", "--rubric", rubric)
        assert first.code == 0, first.explain()
        before = lines_of(grader.out)
        answering(subs / "alice", "alice answers anew")  # graded first: one job, name order
        shutil.rmtree(subs / "bob")
        tiny_agent(subs / "bob", HANGS, imports="import time")  # stopped while it runs
        answering(subs / "dave", "dave answers")  # new, never started
        process = grader.start(subs, "--jobs", "1", "--rubric", rubric)
        _wait_for("bob's worker", lambda: _workers(process.pid, "bob"))
        process.send_signal(signal.SIGINT)
        batch = grader.finish(process)
    finally:
        grader.close()
    assert batch.code == 130, batch.explain()
    after = lines_of(grader.out)
    assert list(after) == ["alice", "bob", "carol", "dave"]
    assert after["alice"] != before["alice"]  # finished: its new row
    assert (after["bob"], after["carol"]) == (before["bob"], before["carol"])
    assert ",interrupted," in after["dave"]
    assert (
        "bob: NOT GRADED: interrupted by Ctrl-C before it finished; its earlier row "
        "stays in the gradebook" in batch.stdout
    )
    assert "dave: NOT GRADED: interrupted by Ctrl-C before it finished\n" in batch.stdout
    assert (
        f"{grader.out / GRADEBOOK} holds the 1 that finished and 2 rows of earlier "
        "batches" in batch.stderr
    )
    event = batch_event(grader.out)
    assert (event["mode"], event["selection"], event["interrupted"]) == (
        "update",
        ["alice"],
        ["bob", "carol", "dave"],
    )
    assert "kept" not in event
    assert grader.leftovers() == []


# -- the gradebook's rewrites: bounded by time, not by rows --------------------------------


IDS = ("contract_stability", "written_summary")


def row(name: str, total: str = "1.00") -> GradebookRow:
    return GradebookRow(
        submission=name,
        student=name,
        status="graded",
        total=total,
        max="2.00",
        criteria={"contract_stability": total, "written_summary": "0.00"},
        digest=name * 2,
        reason="",
    )


class Clock:
    """Monotonic seconds that move ``step`` each time they are read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def finish_rows(book: _Gradebook, count: int) -> dict[int, GradebookRow]:
    finished: dict[int, GradebookRow] = {}
    for number in range(count):
        finished[number] = row(f"s{number:05d}")
        book.finished(finished.values())
    book.write(finished.values())  # the end of the batch
    return finished


@pytest.mark.parametrize(
    ("step", "count"), [(0.0, 10_000), (0.001, 10_000), (0.1, 1000), (1.0, 2000)]
)
def test_a_batch_of_many_rows_rewrites_the_gradebook_a_bounded_number_of_times(
    tmp_path: Path, step: float, count: int
) -> None:
    """Rows that finish in a rush, or one a second (where rewriting at most once a second
    would still rewrite once per row): never one rewrite per row."""
    clock = Clock(step)
    book = _Gradebook(tmp_path / GRADEBOOK, IDS, [row("earlier")], clock=clock)
    book.write([])
    finished = finish_rows(book, count)
    # Besides the one at once, the first finished row's and the last: at most one a
    # second, and at most one each time 1/32 of the rows are new or a minute has passed.
    assert book.writes <= 3 + clock.now / 1.0, (book.writes, clock.now)
    assert book.writes <= 3 + 32 * math.log(count) + clock.now / 60, (book.writes, clock.now)
    assert book.writes >= 3
    expected = gradebook_csv([*finished.values(), row("earlier")], IDS)
    assert (tmp_path / GRADEBOOK).read_bytes() == expected


def test_each_rewrite_holds_every_earlier_row_with_the_finished_ones_over_theirs(
    tmp_path: Path,
) -> None:
    earlier = [row(f"s{number:05d}", "0.00") for number in range(0, 300, 2)]
    earlier.append(row("gone", "0.00"))  # a folder this batch does not grade
    book = _Gradebook(tmp_path / GRADEBOOK, IDS, earlier, clock=Clock(0.2))
    book.write([])
    finished: dict[int, GradebookRow] = {}
    for number in range(300):
        finished[number] = row(f"s{number:05d}")
        book.finished(finished.values())
        _, rows = read_gradebook((tmp_path / GRADEBOOK).read_bytes())
        names = [r.submission for r in rows]
        assert len(names) == len(set(names))  # one row per folder: new over earlier
        assert {r.submission for r in earlier} <= set(names)  # never fewer than before
        done = {r.submission for r in finished.values()}
        assert all(r.submission in done for r in rows if r.total == "1.00")
    assert 2 < book.writes < 300
    _, rows = read_gradebook((tmp_path / GRADEBOOK).read_bytes())
    assert len(rows) < 301  # the last window is not written yet ...
    book.write(finished.values())
    _, rows = read_gradebook((tmp_path / GRADEBOOK).read_bytes())
    assert len(rows) == 301 and sum(r.total == "1.00" for r in rows) == 300  # ... until the end
