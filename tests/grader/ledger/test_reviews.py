"""Human review of automated grades (gradekit review): an override or a confirmation, tied
to its report's digest in the ledger; the gradebook, results.json and history show it; a
new report leaves it behind; results.json cannot be edited to change it."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from grader import CheckResult
from grader.cli import main
from grader.ledger import (
    GRADEBOOK,
    LEDGER,
    MARKDOWN,
    REPORT,
    RESULTS,
    append_events,
    archive_path,
    read_ledger,
)
from grader.outputs import (
    KEY_ENV,
    KEY_FILE_ENV,
    PENDING,
    Kind,
    canonical,
    inline_markdown,
    read_gradebook,
    render_gradescope,
    render_markdown,
    render_report_json,
    report_from_document,
    sign_file,
    verify_report,
)
from tests.grader.handout.test_gradescope import shown_right
from tests.grader.outputs.test_report import sample
from tests.submissions import make_submission

REASON = "entries 3 and 4 describe the same failure"
KEY = "a-course-signing-key-0123456789abcdef"


@dataclass(frozen=True)
class Graded:
    """alice's submission and the grades folder gradekit grade wrote for it."""

    subs: Path
    out: Path

    @property
    def folder(self) -> Path:
        return self.out / "alice"

    @property
    def results(self) -> Path:
        return self.folder / RESULTS

    @property
    def ledger(self) -> Path:
        return self.out / LEDGER

    @property
    def digest(self) -> str:
        digest: str = json.loads((self.folder / REPORT).read_bytes())["digest"]
        return digest

    def events(self) -> list[dict[str, Any]]:
        return [dict(event) for event in read_ledger(self.ledger).events]

    def row(self) -> dict[str, str]:
        rows = list(csv.DictReader(io.StringIO((self.out / GRADEBOOK).read_text("utf-8"))))
        assert len(rows) == 1
        return rows[0]

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.results.read_bytes())
        return document


def grade(graded: Graded, *extra: str) -> int:
    return main(
        [
            "grade",
            str(graded.subs),
            "--out",
            str(graded.out),
            "--wall",
            "process",
            "--quiet",
            *extra,
        ]
    )


def review(graded: Graded, *args: str, student: str = "alice") -> int:
    return main(["review", student, *args, "--out", str(graded.out)])


def override(graded: Graded, points: str = "12", *extra: str) -> int:
    return review(
        graded,
        "--criterion",
        "written_summary",
        "--points",
        points,
        "--by",
        "kim",
        "--reason",
        REASON,
        *extra,
    )


def verify(*paths: Path, key: Path | None = None) -> int:
    return main(["report", "verify", *map(str, paths), *(["--key-file", str(key)] if key else [])])


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One grading of the reference lab (100.00), copied for each test."""
    root = tmp_path_factory.mktemp("graded")
    make_submission(root / "subs" / "alice")
    assert grade(Graded(root / "subs", root / "grades")) == 0
    return root


@pytest.fixture
def graded(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Graded:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    shutil.copytree(template, tmp_path / "work")
    return Graded(tmp_path / "work" / "subs", tmp_path / "work" / "grades")


def rewrite(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    """Edit a results.json as a student could: then recompute its score from its tests."""
    document = json.loads(path.read_bytes())
    edit(document)
    document["score"] = sum(test["score"] for test in document["tests"])
    path.write_bytes(canonical(document) + b"\n")


def _review_test(document: dict[str, Any], criterion: str = "written_summary") -> dict[str, Any]:
    """The one test a reviewed criterion is."""
    tests: list[dict[str, Any]] = [t for t in document["tests"] if t["tags"] == [criterion]]
    [test] = tests
    assert ": reviewed by " in test["name"]
    return test


def _entry(document: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = document["extra_data"]["review"][0]
    return entry


def _automated(graded: Graded) -> dict[str, Any]:
    """The results.json the grading wrote before any review, rebuilt from the archive."""
    report = report_from_document(json.loads(_archive(graded).read_bytes()))
    isolation = graded.document()["extra_data"]["isolation"]
    document: dict[str, Any] = json.loads(
        render_gradescope(report, graded.digest, isolation=isolation)
    )
    return document


def _collapse(document: dict[str, Any], criterion: str, test: dict[str, Any]) -> None:
    """``criterion``'s tests replaced by ``test``, where they were."""
    tests = document["tests"]
    at = next(n for n, t in enumerate(tests) if t["tags"] == [criterion])
    document["tests"] = [*tests[:at], test, *(t for t in tests[at:] if t["tags"] != [criterion])]


def _raised(document: dict[str, Any]) -> None:
    """The review's points raised to full, in the entry and the test alike."""
    _entry(document).update(points="15.00")
    _review_test(document).update(score=15.0, status="passed")


def _dropped(document: dict[str, Any], automated: dict[str, Any]) -> None:
    """The review gone: its criterion's automated tests back, its entry removed."""
    document["tests"] = automated["tests"]
    document["extra_data"].pop("review")


def _invented(document: dict[str, Any]) -> None:
    """A confirmation of tracing that nobody made, consistent with the report."""
    _collapse(
        document,
        "tracing",
        {
            **_review_test(document),
            "name": "Tracing: reviewed by kim",
            "score": 20.0,
            "max_score": 20.0,
            "status": "passed",
            "tags": ["tracing"],
        },
    )
    document["extra_data"]["review"].append(
        {
            **_entry(document),
            "criterion": "tracing",
            "automated": "20.00",
            "points": None,
            "event": _entry(document)["event"] + 1,
        }
    )


# -- attacks on a reviewed results.json: each edit, then the score recomputed ----------------

STRUCTURAL = [
    pytest.param(
        lambda d: _review_test(d).update(score=15.0, status="passed"),
        "score is 100.00 but the report's total is 100.00 and its reviews make it 97.00",
        id="erase-the-penalty",
    ),
    pytest.param(
        lambda d: _entry(d).update(points="16.00"),
        "extra_data.review[0].points is 16.00, outside 0.00 to written_summary's max 15.00",
        id="points-above-max",
    ),
    pytest.param(
        lambda d: _entry(d).update(automated="18.00", points="15.00"),
        "extra_data.review[0].automated is 18.00 but the report gives written_summary 15.00",
        id="automated-points-moved",
    ),
    pytest.param(
        lambda d: d["tests"].append({**_review_test(d), "score": 0.0}),
        "with each reviewed criterion (written_summary) as one test: the file was "
        "edited or is out of date",
        id="a-test-without-a-review",
    ),
    pytest.param(
        lambda d: _review_test(d).update(max_score=12.0, status="passed"),
        "(written_summary: reviewed).max_score is 12.00 but the report and its review "
        "make it 15.00",
        id="a-review-worth-less",
    ),
    pytest.param(
        lambda d: _review_test(d).update(status="passed"),
        "(written_summary: reviewed).status is 'passed', not 'failed'",
        id="points-taken-but-passed",
    ),
    pytest.param(
        lambda d: _review_test(d).update(name="Written summary: reviewed by lee"),
        ".name is 'Written summary: reviewed by lee', not 'Written summary: reviewed by kim'",
        id="another-reviewer-named",
    ),
    pytest.param(
        lambda d: _review_test(d).update(tags=["tracing"]),
        ".tags is ['tracing'], not ['written_summary']",
        id="retagged",
    ),
    pytest.param(
        lambda d: d["extra_data"]["review"].append(_entry(d)),
        "extra_data.review holds two reviews of one criterion",
        id="the-review-twice",
    ),
]
# Consistent with the report: only the ledger (or a signature) tells them from the truth.
# Each edit gets the document and the automated results.json, before any review.
AGAINST_LEDGER = [
    pytest.param(lambda d, _: _raised(d), id="raise-the-reviewed-points"),
    pytest.param(_dropped, id="drop-the-review"),
    pytest.param(lambda d, _: _invented(d), id="a-review-nobody-made"),
    pytest.param(
        lambda d, _: (
            _entry(d).update(by="the professor"),
            _review_test(d).update(name="Written summary: reviewed by the professor"),
        ),
        id="another-reviewer",
    ),
]


@pytest.fixture
def reviewed(graded: Graded) -> Graded:
    assert override(graded) == 0
    assert verify(graded.results) == 0
    return graded


@pytest.mark.parametrize(("edit", "says"), STRUCTURAL)
@pytest.mark.slow  # on a real grading (the module's template)
def test_an_edited_review_that_does_not_add_up_fails_verify_with_or_without_the_ledger(
    reviewed: Graded,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], object],
    says: str,
) -> None:
    download = tmp_path / "download"  # results.json and report.json, no grades folder
    download.mkdir()
    for name in (RESULTS, REPORT):
        shutil.copy(reviewed.folder / name, download / name)
    for results in (reviewed.results, download / RESULTS):
        rewrite(results, edit)
        capsys.readouterr()
        assert verify(results) == 1
        assert says in capsys.readouterr().err


@pytest.mark.parametrize("edit", AGAINST_LEDGER)
@pytest.mark.slow  # on a real grading (the module's template)
def test_an_edited_review_fails_verify_against_the_ledger_of_its_grades_folder(
    reviewed: Graded,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any], dict[str, Any]], object],
) -> None:
    automated = _automated(reviewed)
    rewrite(reviewed.results, lambda d: edit(d, automated))
    capsys.readouterr()
    assert verify(reviewed.results) == 1
    error = capsys.readouterr().err
    assert (
        f"but the ledger {reviewed.ledger} holds the current reviews written_summary "
        "12.00 (event 2) of report" in error
    )
    assert "grade again to write it anew (`make grade ARGS='SUBMISSIONS --out " in error


# -- gradekit review ---------------------------------------------------------------------------


@pytest.mark.slow  # on a real grading (the module's template)
def test_an_override_is_tied_to_its_report_and_reaches_every_output(
    graded: Graded,
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = (REPORT, MARKDOWN, RESULTS)
    before = {name: (graded.folder / name).read_bytes() for name in names}
    capsys.readouterr()
    assert override(graded) == 0

    run, event = graded.events()[1], graded.events()[-1]
    assert capsys.readouterr().out == (
        f"alice: written_summary 15.00 -> 12.00 by kim (ledger event {event['seq']}); final "
        "97.00 / 100.00 (automated 100.00)\n"
    )
    assert {k: v for k, v in event.items() if k not in ("seq", "prev")} == {
        "event": "review",
        "student": "alice",
        "submission": "alice",
        "report": graded.digest,
        "run": run["seq"],
        "criterion": "written_summary",
        "automated": "15.00",
        "max": "15.00",
        "points": "12.00",
        "by": "kim",
        "reason": REASON,
    }
    assert run["event"] == "run" and run["report"] == graded.digest
    for name in (REPORT, MARKDOWN):  # the automated grade is never edited
        assert (graded.folder / name).read_bytes() == before[name]

    row = graded.row()
    assert (row["total"], row["review"], row["final"]) == (
        "100.00",
        "written_summary 15.00->12.00 by kim; pending: stretch_goal",
        "97.00",
    )

    results, automated = graded.document(), json.loads(before[RESULTS])
    shown_right(results)
    assert results["score"] == 97.0
    checks = [t for t in automated["tests"] if t["tags"] == ["written_summary"]]
    at = automated["tests"].index(checks[0])
    assert results["tests"] == [
        *automated["tests"][:at],
        _review_test(results),
        *automated["tests"][at + len(checks) :],
    ]  # the rest as it was
    test = _review_test(results)
    assert {
        k: test[k]
        for k in ("name", "number", "score", "max_score", "status", "tags", "output_format")
    } == {
        "name": "Written summary: reviewed by kim",
        "number": checks[0]["number"],
        "score": 12.0,
        "max_score": 15.0,
        "status": "failed",
        "tags": ["written_summary"],
        "output_format": "text",
    }
    assert test["output"].startswith(
        f"Reviewed by kim (ledger event {event['seq']}): changed the points from 15.00 to "
        f"12.00, so this criterion scores 12.00 / 15.00. Reason: {REASON}\n\nThe automated "
        "checks gave 15.00 / 15.00:\n- "
    )
    for check in checks:  # each automated check's points and detail, as it was shown
        name = check["name"].removeprefix("Written summary: ")
        assert (
            f"- {name}: passed, {check['score']:.2f} / {check['max_score']:.2f}: "
            f"{check['output'].split(chr(10))[0]}"
        ) in test["output"]
    assert results["extra_data"]["review"] == [
        {
            "criterion": "written_summary",
            "automated": "15.00",
            "points": "12.00",
            "by": "kim",
            "reason": REASON,
            "event": event["seq"],
        }
    ]

    output = results["output"]
    assert "**Final after human review: 97.00 / 100.00** (automated 100.00)" in output
    assert (
        f"- Written summary: 15.00 -> 12.00 by kim (ledger event {event['seq']}): "
        f"{inline_markdown(REASON)}" in output.split("## Human review\n\n")[1]
    )
    assert "**Pending human review: 10.00 points** (Stretch goal 10.00 / 10.00)" in output
    written_summary = output.split("## Written summary: 15.00 / 15.00\n\n")[1].split("## ")[0]
    assert written_summary.startswith(
        f"Reviewed by kim (ledger event {event['seq']}): 12.00 / 15.00 stand"
    )
    assert PENDING not in written_summary and PENDING in output.split("## Stretch goal")[1]

    assert verify(graded.results, graded.folder / REPORT) == 0
    assert (
        "and the ledger's current reviews (written_summary 12.00 (event 2))"
        in capsys.readouterr().out
    )
    assert main(["history", "alice", "--out", str(graded.out)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[2].startswith("    batch: ledger event 0, completed (1 of 1 graded), by ")
    assert shown[3] == (
        f"    review (ledger event {event['seq']}): written_summary 15.00 -> 12.00 by kim: "
        f'"{REASON}"'
    )


@pytest.mark.slow  # on a real grading (the module's template)
def test_a_confirmation_keeps_the_points_and_a_later_review_supersedes_an_earlier_one(
    graded: Graded,
    capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    assert (
        review(
            graded,
            "--criterion",
            "stretch_goal",
            "--by",
            "kim",
            "--reason",
            "the write-up names the second provider",
        )
        == 0
    )
    confirmed = graded.events()[-1]
    assert confirmed["points"] is None and confirmed["automated"] == "10.00"
    assert capsys.readouterr().out == (
        f"alice: stretch_goal 10.00 confirmed by kim (ledger event {confirmed['seq']}); final "
        "100.00 / 100.00 (automated 100.00)\n"
    )
    confirmation = _review_test(graded.document(), "stretch_goal")
    assert (
        confirmation["name"],
        confirmation["score"],
        confirmation["max_score"],
        confirmation["status"],
    ) == ("Stretch goal: reviewed by kim", 10.0, 10.0, "passed")
    assert confirmation["output"].startswith(
        f"Reviewed by kim (ledger event {confirmed['seq']}): confirmed the automated points, "
        "so this criterion scores 10.00 / 10.00. Reason: the write-up names the second provider"
    )
    shown_right(graded.document())

    assert override(graded, "12") == 0
    first = graded.events()[-1]
    assert (
        review(
            graded,
            "--criterion",
            "written_summary",
            "--points",
            "14.5",
            "--by",
            "lee",
            "--reason",
            "on a second reading, entry 4 adds the cause",
        )
        == 0
    )
    latest = graded.events()[-1]
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"alice: written_summary 15.00 -> 14.50 by lee (ledger event {latest['seq']}, "
        f"superseding ledger event {first['seq']}); final 99.50 / 100.00 (automated 100.00)"
    )

    row = graded.row()
    assert (row["review"], row["final"]) == (
        "stretch_goal 10.00 confirmed by kim; written_summary 15.00->14.50 by lee",
        "99.50",
    )
    results = graded.document()
    assert results["score"] == 99.5
    assert [
        (e["criterion"], e["points"], e["by"], e["event"]) for e in results["extra_data"]["review"]
    ] == [
        ("stretch_goal", None, "kim", confirmed["seq"]),
        ("written_summary", "14.50", "lee", latest["seq"]),
    ]
    shown_right(results)
    assert [
        (t["name"], t["score"], t["max_score"])
        for t in results["tests"]
        if ": reviewed by " in t["name"]
    ] == [  # in the report's order
        ("Written summary: reviewed by lee", 14.5, 15.0),
        ("Stretch goal: reviewed by kim", 10.0, 10.0),
    ]
    latest_test = _review_test(results)["output"]
    assert f"(ledger event {latest['seq']})" in latest_test and "kim" not in latest_test
    assert "Pending human review" not in results["output"].split("## Contract stability")[0]
    assert verify(graded.results) == 0

    assert main(["history", "alice", "--out", str(graded.out)]) == 0
    reviews = [line for line in capsys.readouterr().out.splitlines() if "review (" in line]
    assert [line.split(":")[1] for line in reviews] == [
        " stretch_goal 10.00 confirmed by kim",
        " written_summary 15.00 -> 12.00 by kim",
        " written_summary 15.00 -> 14.50 by lee",
    ]


@pytest.mark.slow
def test_grading_again_keeps_a_review_of_the_same_report_and_leaves_it_behind_on_a_new_one(
    graded: Graded,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert override(graded) == 0
    old, event = graded.digest, graded.events()[-1]["seq"]
    capsys.readouterr()

    assert grade(graded) == 0  # unchanged inputs: the same digest, so the review applies
    said = capsys.readouterr().out
    assert (
        "alice: final 97.00 / 100.00 after human review (automated 100.00): "
        "written_summary 15.00->12.00 by kim\n" in said
    )
    # the table says which points a person changed and which still wait for one
    assert "Written summary            15.00   15.00  reviewed: 15.00 -> 12.00 by kim\n" in said
    assert "Stretch goal               10.00   10.00  pending review\n" in said
    assert "final                      97.00  100.00  after human review\n" in said
    assert "pending human review: 10.00 of these points (Stretch goal):" in said
    assert (graded.row()["final"], graded.document()["score"]) == ("97.00", 97.0)
    assert verify(graded.results) == 0

    failures = graded.subs / "alice" / "FAILURES.md"
    failures.write_text(failures.read_text("utf-8") + "\n", "utf-8")
    assert grade(graded) == 0
    assert graded.digest != old
    assert (
        f"alice: NEEDS A NEW REVIEW: written_summary was reviewed on report {old[:12]} "
        f"(ledger event {event}); the submission changed since"
    ) in capsys.readouterr().out
    row = graded.row()
    assert (row["total"], row["final"], row["review"]) == (
        "100.00",
        "100.00",
        (
            f"NEEDS A NEW REVIEW: written_summary was reviewed on report {old[:12]} (ledger event "
            f"{event}), not this one; pending: stretch_goal"
        ),
    )
    results = graded.document()
    assert results["score"] == 100.0 and "review" not in results["extra_data"]
    assert not [t for t in results["tests"] if ": reviewed by " in t["name"]]
    assert verify(graded.results) == 0
    assert main(["history", "alice", "--out", str(graded.out)]) == 0
    assert (
        f"    stale: the review of written_summary (ledger event {event}) was of report "
        f"{old[:12]}; review again"
    ) in capsys.readouterr().out.splitlines()

    assert override(graded, "13") == 0  # a review of the new report
    assert (graded.row()["review"], graded.row()["final"]) == (
        "written_summary 15.00->13.00 by kim; pending: stretch_goal",
        "98.00",
    )
    capsys.readouterr()
    assert override(graded, "10", "--report", old[:8]) == 0  # the old one, by its prefix
    shown = capsys.readouterr()
    assert "final 95.00 / 100.00 (automated 100.00)" in shown.out
    assert f"report {old[:12]} is not alice's latest grade" in shown.err
    assert (graded.row()["final"], graded.document()["score"]) == ("98.00", 98.0)
    assert verify(graded.results) == 0


def _archive(graded: Graded) -> Path:
    return archive_path(graded.out, graded.digest)


def _two_reports_alike(graded: Graded) -> None:
    run = graded.events()[1]
    append_events(
        graded.ledger,
        [
            {
                **{k: v for k, v in run.items() if k not in ("seq", "prev")},
                "report": f"abcdef12{n * 56}",
            }
            for n in "01"
        ],
    )


def _tampered_archive(graded: Graded) -> None:
    path = _archive(graded)
    path.write_bytes(path.read_bytes().replace(b'"total":"100.00"', b'"total":"90.00"'))


BASE = ["--criterion", "written_summary", "--by", "kim", "--reason", "r"]


def _with(**changed: str) -> list[str]:
    """BASE with flags changed or added (``points="12"`` is ``--points 12``)."""
    flags = dict(zip(BASE[::2], BASE[1::2], strict=True))
    flags |= {f"--{name}": value for name, value in changed.items()}
    return [part for flag, value in flags.items() for part in (flag, value)]


ERRORS = [
    pytest.param("bob", BASE, None, "no graded report of student 'bob' in", id="unknown-student"),
    pytest.param(
        "alice",
        _with(criterion="clarity"),
        None,
        "'clarity' is not a criterion of report",
        id="no-such-criterion",
    ),
    pytest.param(
        "alice",
        _with(points="15.01"),
        None,
        "--points 15.01 is more than written_summary's max 15.00: give a decimal from 0 to 15.00",
        id="points-above-max",
    ),
    pytest.param(
        "alice",
        _with(points="12.345"),
        None,
        "--points '12.345' is not exact "
        "points: give a decimal from 0 to 15.00 with at most two places",
        id="finer-than-a-cent",
    ),
    pytest.param(
        "alice", _with(points="-1"), None, "--points '-1' is not exact points", id="negative"
    ),
    pytest.param(
        "alice", _with(points="NaN"), None, "--points 'NaN' is not exact points", id="nan"
    ),
    pytest.param("alice", _with(by=" "), None, "--by must be one line", id="empty-reviewer"),
    pytest.param(
        "alice",
        _with(by="kim\u202e"),
        None,
        "without control or invisible characters",
        id="hidden-character",
    ),
    pytest.param(
        "alice", _with(reason="a\nb"), None, "--reason must be one line", id="two-line-reason"
    ),
    pytest.param(
        "alice",
        _with(report="xyz"),
        None,
        "--report 'xyz' is not a report digest: give 8 to 64 hex digits",
        id="not-a-digest",
    ),
    pytest.param(
        "alice",
        _with(report="00000000"),
        None,
        "alice has no graded report "
        "00000000: give one that `.venv/bin/gradekit history alice --out ",
        id="no-such-report",
    ),
    pytest.param(
        "alice",
        _with(report="abcdef12"),
        _two_reports_alike,
        "--report abcdef12 is the start of 2 reports of alice",
        id="ambiguous-prefix",
    ),
    pytest.param(
        "alice", BASE, lambda g: _archive(g).unlink(), "is not archived", id="archive-missing"
    ),
    pytest.param(
        "alice", BASE, _tampered_archive, "does not verify (digest mismatch", id="archive-edited"
    ),
]


@pytest.mark.parametrize(("student", "args", "setup", "says"), ERRORS)
@pytest.mark.slow  # on a real grading (the module's template)
def test_every_error_says_the_fix_and_appends_nothing(
    graded: Graded,
    capsys: pytest.CaptureFixture[str],
    student: str,
    args: list[str],
    setup: Callable[[Graded], None] | None,
    says: str,
) -> None:
    if setup is not None:
        setup(graded)
    outputs = [graded.ledger, graded.out / GRADEBOOK, graded.results]
    before = [path.read_bytes() for path in outputs]
    capsys.readouterr()
    assert review(graded, *args, student=student) == 2
    error = capsys.readouterr().err
    assert error.startswith("UsageError: ") and says in error, error
    assert [path.read_bytes() for path in outputs] == before


@pytest.mark.slow  # on a real grading (the module's template)
def test_the_errors_name_what_to_do(
    graded: Graded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert review(graded, "--criterion", "x", "--by", "k", "--reason", "r", student="bob") == 2
    assert (
        f"name the student as the student column of {graded.out / 'gradebook.csv'} does"
        in capsys.readouterr().err
    )
    assert review(graded, "--criterion", "clarity", "--by", "k", "--reason", "r") == 2
    assert (
        "give --criterion one of contract_stability, loud_failure, tracing, "
        "written_summary, stretch_goal" in capsys.readouterr().err
    )
    _archive(graded).unlink()
    assert review(graded, "--criterion", "tracing", "--by", "k", "--reason", "r") == 2
    assert "grade the submission again to archive its report" in capsys.readouterr().err
    empty = Graded(graded.subs, tmp_path / "nothing")
    assert review(empty, "--criterion", "tracing", "--by", "k", "--reason", "r") == 2
    assert f"no ledger in {empty.out}: grade first" in capsys.readouterr().err
    assert not empty.ledger.exists()


@pytest.mark.slow
def test_a_signed_results_json_is_reviewed_only_with_its_key_and_signed_again(
    graded: Graded,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key, other = tmp_path / "grading.key", tmp_path / "other.key"
    key.write_text(KEY + "\n", "utf-8")
    other.write_text(KEY[::-1], "utf-8")
    assert grade(graded, "--key-file", str(key)) == 0
    assert "signature" in graded.document()["extra_data"]
    before = (graded.ledger.read_bytes(), graded.results.read_bytes())
    capsys.readouterr()

    assert override(graded) == 2
    assert (
        "is signed, and no signing key was given to sign it again: pass --key-file FILE"
        in capsys.readouterr().err
    )
    assert override(graded, "12", "--key-file", str(other)) == 2
    assert "the signature does not match" in capsys.readouterr().err
    assert (graded.ledger.read_bytes(), graded.results.read_bytes()) == before

    assert override(graded, "12", "--key-file", str(key)) == 0
    assert graded.document()["score"] == 97.0
    assert verify(graded.results, graded.folder / REPORT, key=key) == 0
    assert "signature valid" in capsys.readouterr().out

    # Without the ledger, an edit consistent with the report is caught by the key alone.
    download = tmp_path / "download"
    download.mkdir()
    for name in (RESULTS, REPORT):
        shutil.copy(graded.folder / name, download / name)
    rewrite(download / RESULTS, _raised)
    capsys.readouterr()
    assert verify(download / RESULTS, key=key) == 1
    assert "the signature does not match" in capsys.readouterr().err
    assert verify(download / RESULTS) == 0
    assert (
        f"its reviews were not compared with a ledger (none at {tmp_path / LEDGER})"
        in capsys.readouterr().out
    )


@pytest.mark.slow
def test_a_regrade_writes_results_json_with_its_reviews_and_signs_it_once(
    graded: Graded,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = tmp_path / "grading.key"
    key.write_text(KEY + "\n", "utf-8")
    assert grade(graded, "--key-file", str(key)) == 0
    assert override(graded, "12", "--key-file", str(key)) == 0
    reviewed = graded.results.read_bytes()  # as gradekit review wrote and signed it
    signed: list[tuple[str, str]] = []

    def counted(path: Path, kind: Kind, key: bytes) -> None:
        signed.append((path.name, kind))
        sign_file(path, kind, key)

    def rewrite_results(*args: object) -> bool:
        raise AssertionError("results.json was rendered again after the grading")

    monkeypatch.setattr("grader.ledger._folder.sign_file", counted)
    monkeypatch.setattr("grader.ledger._reviews.rewrite_results", rewrite_results)
    assert grade(graded, "--key-file", str(key)) == 0  # unchanged: the review applies again
    assert signed == [(REPORT, "report"), (RESULTS, "results")]  # each once, reviews in
    assert graded.results.read_bytes() == reviewed
    assert graded.document()["score"] == 97.0 and graded.row()["final"] == "97.00"
    assert verify(graded.results, key=key) == 0


@pytest.mark.slow  # on a real grading (the module's template)
def test_reviewer_text_is_inert_in_the_gradebook_and_in_results_json(
    graded: Graded,
    capsys: pytest.CaptureFixture[str],
) -> None:
    by = '=HYPERLINK("http://x") **kim**'
    reason = "see [this](http://evil.example) <img src=x> | # not a heading `code` @all"
    assert (
        review(
            graded,
            "--criterion",
            "written_summary",
            "--points",
            "12.5",
            "--by",
            by,
            "--reason",
            reason,
        )
        == 0
    )

    data = (graded.out / GRADEBOOK).read_bytes()
    assert (
        read_gradebook(data)[1][0].review
        == f"written_summary 15.00->12.50 by {by}; pending: stretch_goal"
    )
    for cells in csv.reader(io.StringIO(data.decode("utf-8"))):
        assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@"))]

    results = graded.document()
    output = results["output"]
    assert inline_markdown(by) in output and inline_markdown(reason) in output
    for raw in ("**kim**", "[this](", "| #", " @all"):
        assert raw not in output, raw
    # backticks make a code span, which is inert (no link, tag or emphasis inside one)
    assert "`code`" in output
    assert "\\<img" in output and not re.search(r"(?<!\\)<img", output)
    test = _review_test(results)  # plain text: shown as written
    assert by in test["name"] and by in test["output"] and reason in test["output"]
    assert verify(graded.results) == 0


@pytest.mark.slow  # on a real grading (the module's template)
def test_a_report_rebuilt_from_its_archive_renders_the_bytes_the_grader_wrote(
    graded: Graded,
) -> None:
    data = archive_path(graded.out, graded.digest).read_bytes()
    assert verify_report(data)[0]
    report = report_from_document(json.loads(data))
    isolation = graded.document()["extra_data"]["isolation"]
    assert (
        render_gradescope(report, graded.digest, isolation=isolation) == graded.results.read_bytes()
    )
    assert render_markdown(report, isolation=isolation) == (graded.folder / MARKDOWN).read_text(
        "utf-8"
    )
    edited = json.loads(data) | {"submission": "mallory"}
    with pytest.raises(ValueError, match="has another digest"):
        report_from_document(edited)


def test_every_part_of_a_report_survives_its_rebuild() -> None:
    """A degraded check, pinned sets, findings and advice: what reference grading lacks."""
    report = sample()
    stable = report.criteria[0]
    degraded = CheckResult(
        "sql-explain", False, Decimal(0), Decimal("7.50"), "no expected outcome", degraded=True
    )
    criteria = (
        replace(
            stable,
            checks=(*stable.checks[:1], degraded, *stable.checks[2:]),
            points=stable.points - Decimal("7.50"),
        ),
        *report.criteria[1:],
    )
    report = replace(report, criteria=criteria, sets={"smoke@1": "cd" * 32})
    data = render_report_json(report)
    assert verify_report(data)[0] and b'"verdict":"degraded"' in data and b"smoke@1" in data
    rebuilt = report_from_document(json.loads(data))
    assert render_report_json(rebuilt) == data
    assert rebuilt == report
