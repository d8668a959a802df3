"""Attacks on the grades folder through a submission folder's name.

``gradekit grade SUBMISSIONS --out GRADES`` writes each submission's outputs to
``GRADES/<folder>``, beside the grades folder's own entries. A submission folder named
``ledger.jsonl`` became a folder in their place: the batch ended in a traceback, and every
later ``grade`` into that folder and ``ledger verify`` crashed. One named
``.gradekit-draw-key`` was silently not graded. Now a batch refuses such a name before it
writes anything (exit 2, naming the folder, why, and the fix), every shard alike; the
grades folder, when it holds an earlier batch, is left byte for byte as it was, and its
ledger still verifies. The reserved names are defined once, in ``grader.ledger._folder``,
from the names the code writes; the second test finds them in a grades folder the real
code filled, so a new entry that is not reserved fails it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import grader.dashboard
from grader import load_rubric
from grader.batch import discover, grade_batch
from grader.cli import main
from grader.ledger import (
    ARCHIVE,
    COPIES,
    DASHBOARD,
    DRAW_KEY,
    ENTRIES,
    GRADEBOOK,
    LEDGER,
    append_events,
    reserved_for,
    temporary_path,
)
from tests.grader.batch.test_batch_safety import short_rubric, tiny_agent

Snapshot = dict[str, tuple[str, int, bytes]]  # relative path -> (kind, mode, bytes)
ATTACKS = (LEDGER, DRAW_KEY, GRADEBOOK)


def snapshot(folder: Path) -> Snapshot:
    """Every entry below ``folder``, hidden ones included: its kind, mode and bytes."""
    found: Snapshot = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        data = path.read_bytes() if kind == "file" else b""
        found[path.relative_to(folder).as_posix()] = (kind, info.st_mode, data)
    return found


class Cli:
    """``gradekit ... --out GRADES`` in this process, what it said, and its exit code."""

    def __init__(self, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.base, self.out, self.capsys = base, base / "grades", capsys
        self.rubric = short_rubric(base)

    def run(self, *argv: str | Path) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([str(arg) for arg in argv])
        said = self.capsys.readouterr()
        return code, said.out, said.err

    def grade(self, *args: str | Path) -> tuple[int, str, str]:
        return self.run(
            "grade", *args, "--out", self.out, "--rubric", self.rubric, "--jobs", "2", "--quiet"
        )

    def verify(self) -> tuple[int, str, str]:
        return self.run("ledger", "verify", self.out)


def submissions(root: Path, *names: str) -> Path:
    for name in names:
        tiny_agent(root / name, "return 'an answer'\n")
    return root


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


@pytest.fixture
def graded(cli: Cli) -> Cli:
    """alice and bob graded into ``cli.out``, and a review recorded: an earlier batch."""
    code, out, err = cli.grade(submissions(cli.base / "first", "alice", "bob"))
    assert code == 0, out + err
    code, out, err = cli.run(
        "review",
        "alice",
        "--criterion",
        "written_summary",
        "--points",
        "0.00",
        "--by",
        "kim",
        "--reason",
        "no log",
        "--out",
        cli.out,
    )
    assert code == 0, out + err
    return cli


# -- the reserved names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        (GRADEBOOK, GRADEBOOK),
        (LEDGER, LEDGER),
        (ARCHIVE, ARCHIVE),
        (DRAW_KEY, DRAW_KEY),
        (DASHBOARD, DASHBOARD),
        (COPIES, COPIES),
        (f".{COPIES}.x1y2.tmp", COPIES),
        ("Ledger.JSONL", LEDGER),  # one name on a case-insensitive disk (macOS, Windows)
        ("GRADEBOOK.CSV", GRADEBOOK),
        (f"{LEDGER}.torn-120", LEDGER),  # where an append sets a torn line aside
        (f".{GRADEBOOK}.4242.tmp", GRADEBOOK),  # the batch's rewrite of the gradebook
        (f".{GRADEBOOK}.k2j9x_a1.tmp", GRADEBOOK),  # a review's atomic write of it
        ("alice", ""),
        ("ledger", ""),
        ("archive-2024", ""),
        ("gradebook", ""),
        ("draw-key", ""),
        (".git", ""),
        ("s-0001", ""),
    ],
)
def test_a_name_is_reserved_when_it_is_an_entry_of_the_grades_folder(name: str, entry: str) -> None:
    assert reserved_for(name) == entry


def test_the_reserved_entries_are_the_names_the_grades_folder_is_written_with() -> None:
    assert set(ENTRIES) == {GRADEBOOK, LEDGER, ARCHIVE, DRAW_KEY, DASHBOARD, COPIES}


def test_the_dashboards_default_folder_is_reserved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `gradekit dashboard GRADES` builds into GRADES/dashboard, and removes what it did not
    # write there: a submission graded into that folder would lose its report.
    built: list[Path] = []

    def build(grades: Path, out: Path) -> list[Path]:
        built.append(out)
        return []

    monkeypatch.setattr(grader.dashboard, "build_dashboard", build)
    assert main(["dashboard", str(tmp_path / "grades")]) == 0
    assert built == [tmp_path / "grades" / DASHBOARD]


@pytest.mark.slow
def test_every_entry_the_grader_writes_beside_the_submissions_is_reserved(graded: Cli) -> None:
    cli = graded  # a batch and a review wrote into it
    with (cli.out / LEDGER).open("ab") as ledger:  # a torn last line, which the next
        ledger.write(b'{"torn": ')  # append sets aside
    append_events(cli.out / LEDGER, [{"event": "note"}])
    written = {path.name for path in cli.out.iterdir()} - {"alice", "bob"}
    assert {DRAW_KEY, GRADEBOOK, LEDGER, ARCHIVE} < written
    assert any(name.startswith(f"{LEDGER}.torn-") for name in written)
    assert all(reserved_for(name) for name in written), written
    # A temporary file is left only by a write that dies midway: the name it would have.
    assert reserved_for(temporary_path(cli.out / GRADEBOOK, str(os.getpid())).name) == GRADEBOOK


# -- the attacks -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*ATTACKS, ARCHIVE, "Ledger.JSONL"])
def test_a_submission_named_like_an_entry_is_refused_before_anything_is_written(
    cli: Cli, name: str
) -> None:
    subs = submissions(cli.base / "subs", "alice", name)
    code, out, err = cli.grade(subs)
    assert code == 2, out + err
    assert f"{subs / name}" in err  # the folder
    assert f"{cli.out / reserved_for(name)}" in err  # why: what it would land on
    assert "rename the submission folder" in err  # the fix
    assert "nothing was graded" in err
    assert not cli.out.exists()  # no draw key, no gradebook, no ledger, no folder


@pytest.mark.slow
@pytest.mark.parametrize("name", ATTACKS)
def test_a_refused_batch_leaves_an_earlier_grades_folder_byte_for_byte(
    graded: Cli, name: str
) -> None:
    cli = graded
    before = snapshot(cli.out)
    assert {DRAW_KEY, GRADEBOOK, LEDGER} <= set(before)
    for attempt in (
        submissions(cli.base / "subs", "alice", "bob", name),
        cli.base / "subs" / name,
    ):  # the folder of them, and the one alone
        code, out, err = cli.grade(attempt)
        assert code == 2, out + err
        assert name in err and "rename the submission folder" in err
        assert snapshot(cli.out) == before
    code, out, _ = cli.verify()
    assert code == 0 and "the chain holds" in out
    # The cohort graded again into the same folder works as before the attack.
    code, out, err = cli.grade(cli.base / "first")
    assert code == 0, out + err
    assert cli.verify()[0] == 0


def test_a_hidden_folder_named_like_an_entry_is_refused_not_skipped(tmp_path: Path) -> None:
    # discover skips hidden folders (.git, .venv); one named like an entry was silently not
    # graded. It is refused, and said so, whichever way it is given.
    subs = submissions(tmp_path / "subs", "alice", DRAW_KEY)
    (subs / ".git").mkdir()
    for paths in ([subs], [subs / DRAW_KEY], [subs / "alice", subs / DRAW_KEY]):
        with pytest.raises(Exception, match=rf"{DRAW_KEY}.*rename the submission folder"):
            discover(paths)
    assert [path.name for path in discover([subs / "alice"])] == ["alice"]


def test_every_shard_refuses_the_whole_batch_alike(cli: Cli) -> None:
    subs = submissions(cli.base / "subs", "alice", "bob", LEDGER)
    for shard in ("1/3", "2/3", "3/3"):
        code, out, err = cli.grade(subs, "--shard", shard)
        assert code == 2 and LEDGER in err, (shard, out + err)
    code, _, err = cli.grade(subs, "--only", "alice")
    assert code == 2 and LEDGER in err
    assert not cli.out.exists()


def test_a_roster_does_not_make_a_reserved_folder_gradable(cli: Cli) -> None:
    # A roster names students, never output folders: the output folder stays the
    # submission folder's name, so a roster line for it changes nothing.
    subs = submissions(cli.base / "subs", "alice", LEDGER)
    roster = cli.base / "roster.csv"
    roster.write_text(
        f"folder,student_id,display_name\nalice,s-1,Alice\n{LEDGER},s-2,Eve\n", "utf-8"
    )
    code, out, err = cli.grade(subs, "--roster", roster)
    assert code == 2 and f"{subs / LEDGER}" in err, out + err
    assert not cli.out.exists()


@pytest.mark.slow
def test_a_student_id_named_like_an_entry_is_graded_into_its_folders_name(cli: Cli) -> None:
    subs = submissions(cli.base / "subs", "alice")
    roster = cli.base / "roster.csv"
    roster.write_text(f"folder,student_id,display_name\nalice,{LEDGER},Alice\n", "utf-8")
    code, out, err = cli.grade(subs, "--roster", roster)
    assert code == 0, out + err
    assert (cli.out / "alice" / "report.json").is_file()
    assert (cli.out / LEDGER).is_file()
    assert cli.verify()[0] == 0


@pytest.mark.slow
def test_an_entry_the_grades_folder_holds_that_no_grading_wrote_is_refused(graded: Cli) -> None:
    # Whatever else the folder holds: a file of the instructor's, or a link out of it.
    cli = graded
    (cli.out / "notes.txt").write_text("kept\n", "utf-8")
    (cli.out / "carol").symlink_to(cli.base)
    before = snapshot(cli.out)
    for name in ("notes.txt", "carol"):
        subs = submissions(cli.base / f"subs-{name}", "alice", name)
        code, out, err = cli.grade(subs)
        assert code == 2, out + err
        assert f"{cli.out / name}" in err and "another --out" in err
        assert snapshot(cli.out) == before
    assert cli.verify()[0] == 0


def test_grade_batch_refuses_a_reserved_folder_before_writing(tmp_path: Path) -> None:
    subs = submissions(tmp_path / "subs", "alice", GRADEBOOK)
    rubric = load_rubric(short_rubric(tmp_path))
    out = tmp_path / "grades"
    with pytest.raises(Exception, match=rf"{GRADEBOOK}.*rename the submission folder"):
        grade_batch([subs / "alice", subs / GRADEBOOK], rubric, out=out, jobs=1)
    assert not out.exists()


def test_a_ledger_left_a_folder_by_an_earlier_gradekit_says_what_to_do(cli: Cli) -> None:
    # A grades folder the old bug broke: verify and grade say what happened, no traceback.
    (cli.out / LEDGER).mkdir(parents=True)
    (cli.out / LEDGER / "report.json").write_text("{}", "utf-8")
    code, _, err = cli.verify()
    assert code == 1 and "is a folder" in err and "move it out" in err
    code, out, err = cli.grade(submissions(cli.base / "subs", "alice"))
    assert code == 2 and "is a folder" in err, out + err
