"""A cohort graded through the batch room's door, as ``gradekit grade`` and the Gradescope
autograder grade it (``grade_cohort``): the ledger's batch event and runs, the reviews it
holds brought into the gradebook, a rubric changed without a new version refused, a batch
asked again under its idempotency key reused, Ctrl-C's finished rows appended, and the
Gradescope run keeping its grades folder's ledger with results.json as it was.

The submissions are small real ones (agents that answer without their provider: grading
one takes about a second), graded behind the process wall.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gradekit import UsageError
from grader.batch import (
    BatchInterrupted,
    CohortInterrupted,
    CohortListener,
    Comparison,
    Earlier,
    GradedCohort,
    grade_batch,
    grade_cohort,
)
from grader.handout import run as gradescope_run
from grader.handout import submitted
from grader.ledger import (
    DRAW_KEY,
    GRADEBOOK,
    LEDGER,
    RESULTS,
    ReviewRequest,
    append_review,
    read_ledger,
)
from grader.outputs import GradebookRow, read_gradebook
from grader.rubric import Rubric, load_rubric
from grader.sandbox import Wall, wall_named
from grader.submission import Identity, Roster
from tests.grader.batch.cohorts import ALICE, CAROL, FAILURES, submission
from tests.grader.batch.test_batch_safety import short_rubric

KEY = "week3-final"


class Heard(CohortListener):
    """Each step the listener heard, by name, in order."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    def loaded(self, rubric: Rubric) -> None:
        self.steps.append("loaded")

    def walled(self, wall: Wall) -> None:
        self.steps.append(f"walled {wall.name}")

    def compared(self, comparison: Comparison, compared: int, seconds: float) -> None:
        self.steps.append(f"compared {compared}")

    def selected(self, identities: Sequence[Identity], roster: Roster | None) -> None:
        self.steps.append(f"selected {','.join(i.folder for i in identities)}")

    def found(self, earlier: Earlier) -> None:
        self.steps.append(f"found {earlier.mode} kept {','.join(earlier.kept)}")


def cohort_at(root: Path) -> tuple[Path, Path, Path]:
    """alice and bob, two agents written apart, and the short rubric: (subs, rubric, out)."""
    submission(root / "subs" / "alice", ALICE, failures=FAILURES)
    submission(root / "subs" / "bob", CAROL, failures=FAILURES)
    return root / "subs", short_rubric(root), root / "grades"


def grade(subs: Path, rubric: Path, out: Path, **given: Any) -> GradedCohort:
    return grade_cohort([subs], rubric, out=out, jobs=2, wall="process", **given)


def events(out: Path) -> list[dict[str, Any]]:
    return [dict(event) for event in read_ledger(out / LEDGER).events]


def gradebook(out: Path) -> list[GradebookRow]:
    return read_gradebook((out / GRADEBOOK).read_bytes())[1]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GradedCohort, list[str]]:
    """The cohort graded once under the key ``KEY``: its folder, what grade_cohort gave,
    and what its listener heard."""
    root = tmp_path_factory.mktemp("cohort")
    subs, rubric, out = cohort_at(root)
    heard = Heard()
    graded = grade(subs, rubric, out, operator="ta-lee", idempotency_key=KEY, listener=heard)
    return root, graded, heard.steps


@pytest.fixture
def copied(
    template: tuple[Path, GradedCohort, list[str]], tmp_path: Path
) -> tuple[Path, Path, Path]:
    """A copy of the graded cohort, for a test that grades into it again."""
    shutil.copytree(template[0], tmp_path / "work")
    root = tmp_path / "work"
    return root / "subs", root / "rubric.toml", root / "grades"


@pytest.mark.slow
def test_the_ledger_gets_the_batch_event_and_a_run_per_submission(
    template: tuple[Path, GradedCohort, list[str]],
) -> None:
    root, graded, heard = template
    out = root / "grades"
    assert heard == [
        "loaded",
        "walled process",
        "compared 2",
        "selected alice,bob",
        "found update kept ",
    ]
    assert [(row.submission, row.status) for row in graded.rows] == [
        ("alice", "graded"),
        ("bob", "graded"),
    ]
    assert graded.all_graded and graded.reused is None and graded.unchanged == {}
    assert graded.wall is not None and graded.wall.name == "process"
    assert graded.kept == 0 and graded.notes == ()
    # The gradebook is the reviewed rows (pending review cells and finals filled).
    assert sorted(gradebook(out), key=lambda row: row.submission) == list(graded.reviewed)
    assert all(row.review.startswith("pending: ") for row in graded.reviewed)
    batch, *runs = events(out)
    assert {
        key: batch[key]
        for key in (
            "event",
            "seq",
            "status",
            "requested",
            "completed",
            "failed",
            "operator",
            "idempotency_key",
            "selection",
            "unchanged",
            "mode",
        )
    } == {
        "event": "batch",
        "seq": 0,
        "status": "completed",
        "requested": 2,
        "completed": 2,
        "failed": 0,
        "operator": "ta-lee",
        "idempotency_key": KEY,
        "selection": ["alice", "bob"],
        "unchanged": [],
        "mode": "update",
    }
    assert [(run["event"], run["submission"], run["report"]) for run in runs] == [
        ("run", row.submission, row.digest) for row in graded.rows
    ]


@pytest.mark.slow
def test_the_same_idempotency_key_returns_the_earlier_batch_and_grades_nothing(
    copied: tuple[Path, Path, Path],
) -> None:
    subs, rubric, out = copied
    before = {name: (out / name).read_bytes() for name in (LEDGER, GRADEBOOK)}
    heard = Heard()
    again = grade(subs, rubric, out, operator="kim", idempotency_key=KEY, listener=heard)
    assert again.reused is not None
    assert {key: again.reused[key] for key in ("seq", "idempotency_key", "status", "operator")} == {
        "seq": 0,
        "idempotency_key": KEY,
        "status": "completed",
        "operator": "ta-lee",
    }
    assert again.rows == () and again.reviewed == () and heard.steps == []
    assert {name: (out / name).read_bytes() for name in before} == before
    # Another key grades again: the same inputs, so no new run, and the batch says so.
    other = grade(subs, rubric, out, idempotency_key="week3-regrade")
    assert other.reused is None and other.unchanged == {"alice": "1", "bob": "2"}
    assert [event["event"] for event in events(out)] == ["batch", "run", "run", "batch"]
    assert events(out)[-1]["unchanged"] == ["alice", "bob"]


@pytest.mark.slow
def test_a_review_in_the_ledger_applies_to_the_gradebook_when_graded_again(
    copied: tuple[Path, Path, Path],
) -> None:
    subs, rubric, out = copied
    [alice] = [row for row in gradebook(out) if row.submission == "alice"]
    append_review(
        out,
        ReviewRequest("alice", "written_summary", "1.00", "kim", "the entries repeat one failure"),
        None,
    )
    graded = grade(subs, rubric, out, only=["alice"])
    assert [row.submission for row in graded.rows] == ["alice"]
    assert graded.unchanged == {"alice": "1"}  # the same inputs as its first run
    assert graded.kept == 1 and graded.earlier.kept == ("bob",)
    [state] = graded.states
    assert [(review.criterion, review.points, review.by) for review in state.current] == [
        ("written_summary", Decimal("1.00"), "kim")
    ]
    [reviewed] = graded.reviewed
    lost = Decimal(alice.criteria["written_summary"]) - Decimal(1)
    assert reviewed.final == f"{Decimal(alice.total) - lost:.2f}"
    assert reviewed.review.startswith("written_summary ") and "by kim" in reviewed.review
    assert graded.notes == (
        f"alice: final {reviewed.final} / {reviewed.max} after human "
        f"review (automated {reviewed.total}): {state.done()[0]}",
    )
    book = {row.submission: row for row in gradebook(out)}
    assert book["alice"] == reviewed and book["bob"].final  # bob's row kept as it was
    results = json.loads((out / "alice" / RESULTS).read_bytes())
    assert [review["by"] for review in results["extra_data"]["review"]] == ["kim"]
    batch = events(out)[-1]
    assert (batch["event"], batch["selection"], batch["kept"], batch["unchanged"]) == (
        "batch",
        ["alice"],
        ["bob"],
        ["alice"],
    )


@pytest.mark.slow
def test_a_rubric_changed_without_a_new_version_is_refused_before_anything_is_graded(
    copied: tuple[Path, Path, Path],
) -> None:
    subs, rubric, out = copied
    before = {name: (out / name).read_bytes() for name in (LEDGER, GRADEBOOK)}
    text = rubric.read_text("utf-8")
    rubric.write_text(text.replace("timeout_s = 5\n", "timeout_s = 6\n"), "utf-8")
    heard = Heard()
    with pytest.raises(
        UsageError,
        match=r"rubric provider-swap-lab version 2 changed since "
        r"ledger event 0 graded with it .*bump \[rubric\] version",
    ):
        grade(subs, rubric, out, listener=heard)
    assert heard.steps == []  # refused before it was even told the rubric was loaded
    assert {name: (out / name).read_bytes() for name in before} == before
    # With its version bumped, it grades, and the batch says what it supersedes.
    rubric.write_text(
        text.replace("timeout_s = 5\n", "timeout_s = 6\n").replace(
            "\nversion = 2\n", '\nversion = 3\nchanges = "a longer timeout"\n'
        ),
        "utf-8",
    )
    graded = grade(subs, rubric, out, only=["bob"])
    assert [row.status for row in graded.rows] == ["graded"]
    first = events(out)[0]["rubric"]
    assert events(out)[-2]["rubric"]["supersedes"] == {"version": 2, "sha256": first["sha256"]}


def test_ctrl_c_appends_the_finished_rows_and_names_the_rest_interrupted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    subs, rubric, out = cohort_at(tmp_path)

    def stopped(identities: Sequence[Identity], *args: Any, **kwargs: Any) -> list[GradebookRow]:
        raise BatchInterrupted([], [identity.folder for identity in identities])

    monkeypatch.setattr("grader.batch._cohort.grade_batch", stopped)  # no worker: Ctrl-C at once
    with pytest.raises(CohortInterrupted) as caught:
        grade(subs, rubric, out, operator="ta-lee")
    assert (caught.value.rows, caught.value.not_graded) == ([], ["alice", "bob"])
    assert caught.value.earlier.mode == "update" and caught.value.earlier.kept_rows == ()
    [batch] = events(out)
    assert {
        key: batch[key] for key in ("status", "requested", "completed", "interrupted", "operator")
    } == {
        "status": "failed",
        "requested": 2,
        "completed": 0,
        "interrupted": ["alice", "bob"],
        "operator": "ta-lee",
    }


@pytest.mark.slow
def test_the_gradescope_run_appends_to_its_grades_folder_ledger_and_results_stay_the_same(
    tmp_path: Path,
) -> None:
    rubric = short_rubric(tmp_path)
    key = "0123456789abcdef" * 4 + "\n"  # the build's draw key: the same draws both ways
    root = tmp_path / "autograder"
    submission(root / "submission", ALICE, failures=FAILURES)
    (root / "source").mkdir()
    (root / "source" / DRAW_KEY).write_text(key, "ascii")
    assert gradescope_run(root, rubric, "process")
    grades = root / "grades"
    results = (root / "results" / RESULTS).read_bytes()
    assert (grades / "submission" / RESULTS).read_bytes() == results
    batch, run = events(grades)
    digest = json.loads(results)["extra_data"]["digest"]
    assert {
        k: batch[k] for k in ("event", "status", "requested", "completed", "operator", "selection")
    } == {
        "event": "batch",
        "status": "completed",
        "requested": 1,
        "completed": 1,
        "operator": "gradescope",
        "selection": ["submission"],
    }
    assert (run["event"], run["submission"], run["report"]) == ("run", "submission", digest)
    [row] = gradebook(grades)
    assert row.digest == digest and row.review.startswith("pending: ")
    # grade_batch alone, as run graded before: the very results.json, byte for byte.
    alone = tmp_path / "alone"
    alone.mkdir(mode=0o700)
    descriptor = os.open(alone / DRAW_KEY, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(key)
    who = submitted(root / "submission", root / "submission_metadata.json")
    grade_batch([who], load_rubric(rubric), out=alone, jobs=1, wall=wall_named("process"))
    assert (alone / "submission" / RESULTS).read_bytes() == results
    # Run again in the same container: the same inputs, so the ledger says unchanged.
    assert gradescope_run(root, rubric, "process")
    assert (root / "results" / RESULTS).read_bytes() == results
    assert [event["event"] for event in events(grades)] == ["batch", "run", "batch"]
    assert events(grades)[-1]["unchanged"] == ["submission"]
