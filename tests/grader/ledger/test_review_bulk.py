"""Bulk confirmation (gradekit review --criterion C --pending [--passed]): one event per
report, all appended at once, and the very ledger, gradebook and results.json that single
``gradekit review`` calls in gradebook order leave.

It reaches private modules on purpose: ``grader.ledger._reviews``, whose functions it
watches being called, and ``FLAGGED`` from ``grader._text``."""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader._text import FLAGGED
from grader.cli import main
from grader.ledger import GRADEBOOK, LEDGER, REPORT, RESULTS, _reviews, archive_path, read_ledger
from grader.outputs import read_gradebook
from grader.scoring import EXAMPLE_ENTRY
from tests.submissions import TEMPLATE_FAILURES, make_submission

STUDENTS = ("alice", "bob", "carol", "dave")  # bob's FAILURES.md is the template: 0 / 15
REASON = "read every write-up in the cohort"
KEY = "a-course-signing-key-0123456789abcdef"


@dataclass(frozen=True)
class Cohort:
    """Four submissions and the grades folder one gradekit grade wrote for them."""

    subs: Path
    out: Path

    def files(self) -> dict[str, bytes]:
        """Everything a review may write, and the reports it must not."""
        names = [LEDGER, GRADEBOOK, *(f"{s}/{n}" for s in STUDENTS for n in (RESULTS, REPORT))]
        return {name: (self.out / name).read_bytes() for name in names}

    def cells(self) -> dict[str, tuple[str, str]]:
        """Each student's gradebook review and final cells."""
        rows = read_gradebook((self.out / GRADEBOOK).read_bytes())[1]
        return {row.student: (row.review, row.final) for row in rows}

    def events(self) -> list[dict[str, Any]]:
        return [dict(event) for event in read_ledger(self.out / LEDGER).events]

    def digest(self, student: str) -> str:
        rows = read_gradebook((self.out / GRADEBOOK).read_bytes())[1]
        return next(row.digest for row in rows if row.student == student)


def grade(cohort: Cohort, *extra: str) -> int:
    return main(
        [
            "grade",
            str(cohort.subs),
            "--out",
            str(cohort.out),
            "--wall",
            "process",
            "--quiet",
            *extra,
        ]
    )


def review(cohort: Cohort, *args: str) -> int:
    return main(["review", *args, "--out", str(cohort.out)])


def bulk(cohort: Cohort, *extra: str, by: str = "kim") -> int:
    return review(
        cohort,
        "--criterion",
        "written_summary",
        "--pending",
        "--by",
        by,
        "--reason",
        REASON,
        *extra,
    )


def build_cohort(root: Path) -> Path:
    """Grade the four submissions once (a module's template, copied for each test)."""
    for student in STUDENTS:
        make_submission(root / "subs" / student)
    (root / "subs" / "bob" / "FAILURES.md").write_text(TEMPLATE_FAILURES, "utf-8")
    assert grade(Cohort(root / "subs", root / "grades")) == 0
    return root


def copy_cohort(template: Path, to: Path) -> Cohort:
    shutil.copytree(template, to)
    return Cohort(to / "subs", to / "grades")


@pytest.fixture
def twin(template: Path, tmp_path: Path) -> Cohort:
    """A second copy, for the same reviews one by one."""
    return copy_cohort(template, tmp_path / "twin")


def counting(
    monkeypatch: pytest.MonkeyPatch, name: str, seen: list[Any], what: Callable[..., Any]
) -> None:
    """Let ``_reviews.name`` run as it is, noting ``what(*args)`` of each call."""
    real = getattr(_reviews, name)

    def noted(*args: Any) -> Any:
        seen.append(what(*args))
        return real(*args)

    monkeypatch.setattr(_reviews, name, noted)


@pytest.mark.slow  # on a real grading (the module's template)
def test_bulk_confirmation_appends_once_and_leaves_the_bytes_of_single_reviews(
    cohort: Cohort,
    twin: Cohort,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    appended: list[list[str]] = []
    written: list[str] = []
    results: list[str] = []
    counting(
        monkeypatch, "append_events", appended, lambda _, events: [e["student"] for e in events]
    )
    counting(monkeypatch, "write_atomic", written, lambda path, _: path.name)
    counting(monkeypatch, "rewrite_results", results, lambda folder, *_: folder.name)
    capsys.readouterr()
    assert bulk(cohort) == 0
    shown = capsys.readouterr().out.splitlines()
    assert appended == [list(STUDENTS)]  # one append: one lock, one fsync
    assert written == [GRADEBOOK] and results == list(STUDENTS)  # each written once
    assert shown[-1] == "confirmed written_summary on 4 reports"

    monkeypatch.undo()
    for student in STUDENTS:  # the gradebook's order
        assert (
            review(
                twin, student, "--criterion", "written_summary", "--by", "kim", "--reason", REASON
            )
            == 0
        )
    assert shown[:-1] == capsys.readouterr().out.splitlines()
    assert cohort.files() == twin.files()  # the ledger too: the same events, in order
    assert {student: cell[0] for student, cell in cohort.cells().items()} == {
        student: f"written_summary {'0.00' if student == 'bob' else '15.00'} confirmed by "
        "kim; pending: stretch_goal"
        for student in STUDENTS
    }
    assert main(["ledger", "verify", str(cohort.out)]) == 0


@pytest.mark.slow  # grades the cohort again
def test_passed_leaves_a_failed_check_and_a_stale_review_to_a_person(
    cohort: Cohort,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        review(
            cohort, "carol", "--criterion", "written_summary", "--by", "lee", "--reason", "read it"
        )
        == 0
    )
    assert (
        review(
            cohort,
            "dave",
            "--criterion",
            "written_summary",
            "--points",
            "12",
            "--by",
            "lee",
            "--reason",
            "two entries alike",
        )
        == 0
    )
    old = cohort.digest("dave")
    failures = cohort.subs / "dave" / "FAILURES.md"
    failures.write_text(failures.read_text("utf-8") + "\n", "utf-8")
    assert grade(cohort) == 0  # dave's new report: his review is of the old one
    before = cohort.files()
    capsys.readouterr()

    assert bulk(cohort, "--passed", "--dry-run") == 0
    assert cohort.files() == before
    assert capsys.readouterr().out.splitlines()[0] == (
        f"alice: would confirm written_summary 15.00 / 15.00 (report {cohort.digest('alice')[:12]})"
    )

    assert bulk(cohort, "--passed") == 0
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == 2 and shown[0].startswith("alice: written_summary 15.00 confirmed by kim")
    assert shown[1] == (
        "confirmed written_summary on 1 report; 1 still pending, a check of written_summary "
        "not passed: bob; 1 need a new review, never confirmed in bulk (the criterion was "
        "reviewed on an earlier report): dave; review each (`.venv/bin/gradekit review dave "
        f"--criterion written_summary --by NAME --reason TEXT --out {cohort.out}`) or in a "
        "review sheet (`.venv/bin/gradekit reviews export --out "
        f"{cohort.out} --criterion written_summary --pending --sheet SHEET.csv`)"
    )
    cells = cohort.cells()
    assert cells["alice"] == (
        "written_summary 15.00 confirmed by kim; pending: stretch_goal",
        "100.00",
    )
    assert cells["bob"] == ("pending: written_summary, stretch_goal", "81.00")
    assert cells["carol"][0] == "written_summary 15.00 confirmed by lee; pending: stretch_goal"
    assert cells["dave"][0].startswith(
        f"NEEDS A NEW REVIEW: written_summary was reviewed on report {old[:12]}"
    )

    assert bulk(cohort, "--passed") == 0  # nothing left that passed: nothing appended
    assert capsys.readouterr().out.startswith(
        f"nothing to confirm: no report in {cohort.out} has written_summary pending with every "
        "check passed; 1 still pending, a check of written_summary not passed: bob; "
    )
    assert bulk(cohort) == 0  # without --passed, bob's too
    assert cohort.cells()["bob"] == (
        "written_summary 0.00 confirmed by kim; pending: stretch_goal",
        "81.00",
    )
    assert main(["ledger", "verify", str(cohort.out)]) == 0


def _unarchived_bob(cohort: Cohort) -> None:
    archive_path(cohort.out, cohort.digest("bob")).unlink()


PENDING = ["--criterion", "written_summary", "--by", "kim", "--reason", "r"]
ERRORS = [
    pytest.param(
        ["alice", "--pending", *PENDING],
        None,
        "give STUDENT (alice) or --pending, not both",
        id="both",
    ),
    pytest.param(
        PENDING, None, "name the STUDENT whose report you review, or pass --pending", id="neither"
    ),
    pytest.param(
        ["--pending", "--points", "12", *PENDING],
        None,
        "--pending only confirms the automated points: override one report at a time",
        id="points-in-bulk",
    ),
    pytest.param(
        ["--pending", "--report", "abcdef12", *PENDING], None, "drop --report", id="report-in-bulk"
    ),
    pytest.param(
        ["alice", "--passed", *PENDING],
        None,
        "--passed goes with --pending only",
        id="passed-alone",
    ),
    pytest.param(
        ["alice", "--dry-run", *PENDING],
        None,
        "--dry-run goes with --pending only",
        id="dry-run-alone",
    ),
    pytest.param(
        ["--pending", "--criterion", "clarity", "--by", "k", "--reason", "r"],
        None,
        "'clarity' is not a criterion of",
        id="no-such-criterion",
    ),
    pytest.param(
        ["--pending", "--criterion", "tracing", "--by", " ", "--reason", "r"],
        None,
        "--by must be one line",
        id="empty-reviewer",
    ),
    pytest.param(
        ["--pending", *PENDING],
        _unarchived_bob,
        "1 report with written_summary pending cannot be confirmed, so none was",
        id="an-archive-missing",
    ),
]


@pytest.mark.parametrize(("args", "setup", "says"), ERRORS)
@pytest.mark.slow  # on a real grading (the module's template)
def test_every_bulk_error_says_the_fix_and_appends_nothing(
    cohort: Cohort,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    setup: Callable[[Cohort], None] | None,
    says: str,
) -> None:
    if setup is not None:
        setup(cohort)
    before = cohort.files()
    capsys.readouterr()
    assert review(cohort, *args) == 2
    error = capsys.readouterr().err
    assert error.startswith("UsageError: ") and says in error, error
    assert cohort.files() == before


@pytest.mark.slow  # grades the cohort again, signed
def test_a_signed_cohort_is_confirmed_only_with_its_key(
    cohort: Cohort,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = tmp_path / "grading.key"
    key.write_text(KEY + "\n", "utf-8")
    assert grade(cohort, "--key-file", str(key)) == 0
    before = cohort.files()
    capsys.readouterr()
    assert bulk(cohort) == 2
    assert "is signed, and no signing key was given to sign it again" in capsys.readouterr().err
    assert cohort.files() == before

    assert bulk(cohort, "--key-file", str(key)) == 0
    results = [str(cohort.out / s / RESULTS) for s in STUDENTS]
    capsys.readouterr()
    assert main(["report", "verify", *results, "--key-file", str(key)]) == 0
    assert capsys.readouterr().out.count("signature valid") == len(STUDENTS)


@pytest.mark.slow  # grades the cohort again
def test_a_summary_repeating_the_hand_outs_example_is_left_for_a_person(
    cohort: Cohort,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Carol pastes the hand-out's example entry under her own: the grading flags her row
    for review, naming the entry, and confirming in bulk (even without --passed) leaves her
    report to a person and says so; the review sheet carries the flag."""
    failures = cohort.subs / "carol" / "FAILURES.md"
    log = failures.read_text("utf-8")
    cut = log.index("\n## ")
    failures.write_text(log[:cut] + "\n\n" + EXAMPLE_ENTRY + log[cut:], "utf-8")
    assert grade(cohort) == 0
    reasons = {
        row.student: row.reason for row in read_gradebook((cohort.out / GRADEBOOK).read_bytes())[1]
    }
    assert reasons["carol"] == (
        f"{FLAGGED}FAILURES.md 'The answer changed with the provider's name' (line "
        f"{log[:cut].count(chr(10)) + 3}) repeats the hand-out's example"
    )
    assert [student for student, reason in reasons.items() if reason] == ["carol"]
    capsys.readouterr()

    assert bulk(cohort) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[-1].startswith(
        "confirmed written_summary on 3 reports; 1 left for a person, never confirmed in "
        "bulk (the gradebook's reason flags the submission for review: a copy, a repeated "
        "entry, tampering): carol; read each, then review it (`.venv/bin/gradekit review carol "
    )
    assert cohort.cells()["carol"][0] == "pending: written_summary, stretch_goal"
    sheet = cohort.out.parent / "sheet.csv"
    assert (
        main(["reviews", "export", "--out", str(cohort.out), "--pending", "--sheet", str(sheet)])
        == 0
    )
    rows = list(csv.DictReader(io.StringIO(sheet.read_text("utf-8"))))
    carol = [row for row in rows if row["student"] == "carol"]
    assert carol and all("repeats the hand-out's example" in row["flagged"] for row in carol)
    assert "repeats the hand-out's example, so it is not counted" in next(
        row["evidence"] for row in carol if row["criterion"] == "written_summary"
    )
