"""Gradescope end to end: results.json verification, and the generated autograder run with
bash on a simulated ``/autograder`` tree (``GRADEKIT_AUTOGRADER_ROOT``)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gradekit import UsageError
from grader._model import HumanReview
from grader.handout._gradescope import failure_results, find_submission
from grader.outputs._render import render_gradescope
from grader.outputs._report import canonical, render_report_json, report_digest
from grader.outputs._signing import KEY_ENV, KEY_FILE_ENV
from grader.records._folder import DRAW_KEY, REPORT, RESULTS
from grader.records._verify import verify_file
from tests.grader.outputs.test_report import sample
from tests.submissions import REFERENCE

SUBMITTED = ("lab", "cassettes", "cassettes-llm", "fixtures", "FAILURES.md",
             "DATASET_CHANGES.md", "pyproject.toml", "rubric")
KEY = "gradescope-course-key-0123456789"


def written(folder: Path, *, report: bool = True) -> Path:
    """The sample's results.json in ``folder``, with its report.json beside it or not."""
    folder.mkdir(parents=True, exist_ok=True)
    if report:
        (folder / REPORT).write_bytes(render_report_json(sample()))
    (folder / RESULTS).write_bytes(render_gradescope(sample(), report_digest(sample())))
    return folder / RESULTS


def shown_right(results: dict[str, Any]) -> None:
    """What Gradescope shows adds up: every test scores from 0 to its max (so none is a
    passing test worth negative points, or worth points with a max of 0), and the tests'
    scores sum to ``score``, exact to the cent."""
    tests = results["tests"]
    assert all(0 <= test["score"] <= test["max_score"] for test in tests), tests
    assert sum(Decimal(repr(test["score"])) for test in tests) == Decimal(repr(results["score"]))


def rewrite(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    document = json.loads(path.read_bytes())
    edit(document)
    if "digest" in document:  # a report: its digest recomputed, as anyone can
        body = {k: v for k, v in document.items() if k != "digest"}
        document["digest"] = hashlib.sha256(canonical(body)).hexdigest()
    path.write_bytes(canonical(document) + b"\n")


# -- results.json verification ---------------------------------------------------------------


def test_a_written_results_json_verifies_against_its_report(tmp_path: Path) -> None:
    verdict = verify_file(written(tmp_path), None)
    assert verdict.ok, verdict.message
    assert f"agree with the report.json next to it (digest {report_digest(sample())})" \
        in verdict.message


def test_results_json_is_told_apart_by_content_not_name(tmp_path: Path) -> None:
    results = written(tmp_path)
    renamed = results.rename(tmp_path / "grade.json")
    assert "its tests add up" in verify_file(renamed, None).message


def test_without_a_report_beside_it_only_its_own_sums_are_checked(tmp_path: Path) -> None:
    verdict = verify_file(written(tmp_path, report=False), None)
    assert verdict.ok
    assert "no report.json next to it, so its digest and tests were not compared" \
        in verdict.message


def test_a_forged_score_fails_naming_both_numbers(tmp_path: Path) -> None:
    results = written(tmp_path, report=False)
    rewrite(results, lambda d: d.update(score=96.0))
    verdict = verify_file(results, None)
    assert not verdict.ok
    assert "score is 96.00 but its tests' scores sum to 37.50" in verdict.message


def test_a_consistent_forgery_of_results_json_fails_against_the_report(tmp_path: Path) -> None:
    results = written(tmp_path)

    def raise_lost_test(document: dict[str, Any]) -> None:
        document["score"] = 45.0
        document["tests"][3].update(score=7.5, status="passed")

    rewrite(results, raise_lost_test)
    verdict = verify_file(results, None)
    assert not verdict.ok
    assert "score is 45.00 but the report's total is 37.50" in verdict.message
    rewrite(results, lambda d: d.update(score=37.5))
    rewrite(results, lambda d: d["tests"][0].update(score=0.0))
    verdict = verify_file(results, None)
    assert "tests[0] (contract_stability: refund-policy).score is 0.00 but the report says " \
        "7.50" in verdict.message


@pytest.mark.parametrize(("edit", "says"), [
    (lambda d: d["tests"][4].update(max_score=20.0, score=20.0),
     "score is 37.50 but its tests' scores sum to 42.50"),
    (lambda d: d["tests"][4].update(max_score=20.0), ".max_score is 20.00 but the report says "
                                                     "15.00"),
    (lambda d: d["tests"][4].update(tags=["contract_stability"]),
     ".tags is ['contract_stability'], not ['written_summary']"),
    (lambda d: d["extra_data"].update(digest="0" * 64), "they are from different gradings"),
    (lambda d: d["tests"].pop(3), "it has 4 tests but the report has 5"),
    (lambda d: d.update(score=True), "score is True, not a number"),
    (lambda d: d.update(score=37.505), "not exact to the cent"),
    (lambda d: d["extra_data"].pop("digest"), "extra_data has no digest"),
])
def test_results_json_that_disagrees_with_its_report_fails(
        tmp_path: Path, edit: Callable[[dict[str, Any]], None], says: str) -> None:
    results = written(tmp_path)
    rewrite(results, edit)
    verdict = verify_file(results, None)
    assert not verdict.ok and says in verdict.message, verdict.message


def test_a_forged_report_beside_results_json_fails_both(tmp_path: Path) -> None:
    results = written(tmp_path)
    rewrite(tmp_path / REPORT, lambda d: d.update(total="96.00"))
    verdict = verify_file(results, None)
    assert not verdict.ok
    assert "the report.json next to it does not verify (total is 96.00 but the criteria's " \
        "points sum to 37.50" in verdict.message


def test_a_reformatted_results_json_fails_as_not_canonical(tmp_path: Path) -> None:
    results = written(tmp_path)
    results.write_text(json.dumps(json.loads(results.read_bytes()), indent=2), "utf-8")
    verdict = verify_file(results, None)
    assert not verdict.ok and "not canonical" in verdict.message


# -- a person's review, as Gradescope shows it -------------------------------------------------

OVERRIDE = HumanReview("written_summary", Decimal(15), Decimal(12), "kim",
                       "entries 3 and 4 describe the same failure", 9)
CONFIRMATION = HumanReview("contract_stability", Decimal("22.5"), None, "lee",
                           "the lost case really swallows the miss", 11)


def reviewed(folder: Path, *reviews: HumanReview) -> dict[str, Any]:
    """The sample's results.json with ``reviews``, written beside its report.json."""
    written(folder)
    data = render_gradescope(sample(), report_digest(sample()), reviews=reviews)
    (folder / RESULTS).write_bytes(data)
    assert data == render_gradescope(sample(), report_digest(sample()), reviews=reviews)
    document: dict[str, Any] = json.loads(data)
    return document


def test_a_reviewed_criterion_is_one_test_worth_the_reviewed_points(tmp_path: Path) -> None:
    results = reviewed(tmp_path, OVERRIDE)
    shown_right(results)
    assert results["score"] == 34.5  # 37.50 automated, 3.00 taken by the review
    automated = json.loads(render_gradescope(sample(), report_digest(sample())))
    assert results["tests"][:4] == automated["tests"][:4]  # contract_stability untouched
    [test] = results["tests"][4:]
    assert {k: test[k] for k in ("name", "number", "score", "max_score", "status", "tags")} == {
        "name": "Written summary: reviewed by kim", "number": "2.1", "score": 12.0,
        "max_score": 15.0, "status": "failed", "tags": ["written_summary"]}
    assert test["output"] == (
        "Reviewed by kim (ledger event 9): changed the points from 15.00 to 12.00, so this "
        "criterion scores 12.00 / 15.00. Reason: entries 3 and 4 describe the same failure"
        "\n\nThe automated checks gave 15.00 / 15.00:\n- entries: passed, 15.00 / 15.00: 5 "
        "complete entries")
    assert "Pending human review" not in test["output"]
    assert results["extra_data"]["review"] == [
        {"criterion": "written_summary", "automated": "15.00", "points": "12.00", "by": "kim",
         "reason": OVERRIDE.reason, "event": 9}]
    verdict = verify_file(tmp_path / RESULTS, None)
    assert verdict.ok, verdict.message


def test_a_confirmation_keeps_the_points_and_still_says_who_and_why(tmp_path: Path) -> None:
    results = reviewed(tmp_path, OVERRIDE, CONFIRMATION)
    shown_right(results)
    assert results["score"] == 34.5
    first, second = results["tests"]
    assert (first["name"], first["score"], first["max_score"], first["status"]) == (
        "Contract stability: reviewed by lee", 22.5, 30.0, "failed")
    assert first["output"].startswith(
        "Reviewed by lee (ledger event 11): confirmed the automated points, so this criterion "
        "scores 22.50 / 30.00. Reason: the lost case really swallows the miss\n\nThe automated "
        "checks gave 22.50 / 30.00:\n- refund-policy: passed, 7.50 / 7.50: identical\n")
    assert "- incident-summary: lost points, 0.00 / 7.50: " in first["output"]
    assert first["output"].endswith("What to do:\n- Let CassetteMiss propagate out of run().")
    assert second["name"] == "Written summary: reviewed by kim"
    assert [r["event"] for r in results["extra_data"]["review"]] == [9, 11]  # ledger order
    assert verify_file(tmp_path / RESULTS, None).ok


def test_a_review_that_gives_full_points_is_a_passing_test(tmp_path: Path) -> None:
    raised = HumanReview("contract_stability", Decimal("22.5"), Decimal(30), "lee",
                         "the lost case is the rubric's mistake", 3)
    test = reviewed(tmp_path, raised)["tests"][0]
    assert (test["score"], test["max_score"], test["status"]) == (30.0, 30.0, "passed")
    assert "What to do" not in test["output"]  # full points: nothing left to fix


@pytest.mark.parametrize(("edit", "says"), [
    (lambda d: d["tests"][0].update(status="passed"),
     "tests[0] (contract_stability: reviewed).status is 'passed', not 'failed'"),
    (lambda d: d["tests"][0].update(name="Contract stability: reviewed by kim"),
     ".name is 'Contract stability: reviewed by kim', not 'Contract stability: reviewed by lee'"),
    (lambda d: d["tests"][0].update(max_score=22.5, status="passed"),
     "tests[0] (contract_stability: reviewed).max_score is 22.50 but the report and its review "
     "make it 30.00: the file was edited"),
    (lambda d: d["tests"][1].update(score=15.0),
     "score is 34.50 but its tests' scores sum to 37.50"),
])
def test_a_reviewed_test_that_disagrees_with_its_review_fails(
        tmp_path: Path, edit: Callable[[dict[str, Any]], None], says: str) -> None:
    reviewed(tmp_path, OVERRIDE, CONFIRMATION)
    rewrite(tmp_path / RESULTS, edit)
    verdict = verify_file(tmp_path / RESULTS, None)
    assert not verdict.ok and says in verdict.message, verdict.message


def test_a_review_as_a_passing_test_worth_negative_points_does_not_verify(tmp_path: Path) -> None:
    """The form results.json had before: the checks' tests kept, the review's change added."""
    results = reviewed(tmp_path, OVERRIDE)
    automated = json.loads(render_gradescope(sample(), report_digest(sample())))
    results["tests"] = [*automated["tests"], {**results["tests"][-1], "score": -3.0,
                                               "max_score": 0.0, "status": "passed"}]
    (tmp_path / RESULTS).write_bytes(canonical(results) + b"\n")
    verdict = verify_file(tmp_path / RESULTS, None)
    assert not verdict.ok
    assert "it has 6 tests but the report has 5 checks, which make 5 tests with each reviewed " \
        "criterion (written_summary) as one test" in verdict.message


# -- the autograder folder ----------------------------------------------------------------


def gradekit(*args: str | Path, env: dict[str, str] | None = None,
             ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, KEY_FILE_ENV)}
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], text=True,
                          capture_output=True, env={**clean, **(env or {})}, check=False)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``gradekit gradescope build`` output: what the instructor zips and uploads."""
    out = tmp_path_factory.mktemp("build") / "source"
    done = gradekit("gradescope", "build", "--out", out)
    assert done.returncode == 0, done.stderr
    assert "zip -r ../autograder.zip ." in done.stdout
    return out


def test_build_writes_both_scripts_the_rubric_and_the_kit(source: Path) -> None:
    for script in ("setup.sh", "run_autograder"):
        path = source / script
        assert os.access(path, os.X_OK), script
        assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    assert (source / "rubric" / "bootcamp.toml").read_bytes() == \
        (REFERENCE / "rubric" / "bootcamp.toml").read_bytes()
    kit = source / "kit"
    assert (kit / "grader" / "outputs" / "_report.py").is_file()
    assert (kit / "gradekit" / "_replay.py").is_file()
    assert (kit / "grader" / "kit_rubric" / "bootcamp.toml").is_file()
    assert not list(kit.rglob("__pycache__"))
    pyproject = (kit / "pyproject.toml").read_text("utf-8")
    assert '"httpx' in pyproject and "pytest" not in pyproject  # runtime requirements only
    assert '--rubric "$ROOT/source/rubric/"bootcamp.toml' in \
        (source / "run_autograder").read_text("utf-8")
    key = source / DRAW_KEY  # regrades in fresh containers draw alike: a key of the build's
    assert key.stat().st_mode & 0o777 == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}\n", key.read_text("ascii"))


@pytest.mark.slow
def test_each_regrade_on_gradescope_draws_with_the_builds_key(tmp_path: Path,
                                                             source: Path) -> None:
    """Without a signing key, a container's grading keeps the build's draw key: a regrade
    of the same submission then draws the same labels and seeds, unlike a fresh key."""
    root, done = autograder(tmp_path, source, submitted=("lab", "pyproject.toml"))
    assert done.returncode == 0, done.stderr
    used = root / "results" / "gradekit" / DRAW_KEY
    assert used.read_bytes() == (source / DRAW_KEY).read_bytes()


def test_build_refuses_a_folder_that_is_not_empty(source: Path) -> None:
    done = gradekit("gradescope", "build", "--out", source)
    assert done.returncode == 2 and "pass --out a new folder" in done.stderr


def autograder(tmp_path: Path, source: Path, submitted: tuple[str, ...] = SUBMITTED,
               env: dict[str, str] | None = None) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A simulated /autograder with ``source`` and a copy of the reference lab, after
    Gradescope's run of ``run_autograder``, with this kit copy on the path."""
    root = tmp_path / "autograder"
    shutil.copytree(source, root / "source")
    (root / "submission").mkdir(parents=True)
    for name in submitted:
        if (REFERENCE / name).is_dir():
            shutil.copytree(REFERENCE / name, root / "submission" / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REFERENCE / name, root / "submission" / name)
    clean = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, KEY_FILE_ENV)}
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")], text=True, capture_output=True,
        check=False, cwd=tmp_path,
        env={**clean, "GRADEKIT_AUTOGRADER_ROOT": str(root), "GRADEKIT_PYTHON": sys.executable,
             "PYTHONPATH": str(root / "source" / "kit"), **(env or {})})
    return root, done


@pytest.mark.slow
def test_run_autograder_grades_the_reference_lab_to_100_signed(tmp_path: Path,
                                                               source: Path) -> None:
    root, done = autograder(tmp_path, source, env={KEY_ENV: KEY})
    assert done.returncode == 0, done.stderr
    results = json.loads((root / "results" / RESULTS).read_bytes())
    assert results["score"] == 100.0
    assert sum(test["score"] for test in results["tests"]) == 100.0
    assert all(test["status"] == "passed" for test in results["tests"])
    assert (results["output_format"], results["test_output_format"]) == ("md", "md")
    assert {"score", "output", "tests", "extra_data", "visibility",
            "stdout_visibility"} <= set(results)
    assert "**Total: 100.00 / 100.00**" in results["output"]
    assert "**Pending human review: 25.00 points** (Written summary 15.00 / 15.00, Stretch " \
           "goal 10.00 / 10.00)" in results["output"]
    review = [t for t in results["tests"] if "Pending human review" in t["output"]]
    assert {t["tags"][0] for t in review} == {"written_summary", "stretch_goal"}
    assert results["extra_data"]["signature"].startswith("hmac-sha256:")
    # the grader that ran is the kit copy in source/, not this checkout
    where = subprocess.run([sys.executable, "-P", "-c", "import grader; print(grader.__file__)"],
                           env={"PYTHONPATH": str(root / "source" / "kit")}, text=True,
                           capture_output=True, check=True).stdout
    assert where.startswith(str(root / "source" / "kit"))
    files = [root / "results" / RESULTS, root / "results" / REPORT]
    verified = gradekit("report", "verify", *files, env={KEY_ENV: KEY})
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.count("signature valid") == 2
    assert "agree with the report.json next to it" in verified.stdout
    unkeyed = gradekit("report", "verify", *files)
    assert unkeyed.returncode == 0 and unkeyed.stdout.count("signature not checked") == 2


@pytest.mark.slow
def test_a_submission_without_a_pyproject_gets_a_results_json_saying_what_to_do(
        tmp_path: Path, source: Path) -> None:
    root, done = autograder(tmp_path, source, submitted=("lab", "FAILURES.md"))
    assert done.returncode == 0, done.stderr  # a results.json was written: Gradescope shows it
    results = json.loads((root / "results" / RESULTS).read_bytes())
    assert (results["score"], results["tests"]) == (0.0, [])
    assert "no pyproject\\.toml at the top of the submission" in results["output"]
    assert not verify_file(root / "results" / RESULTS, None).ok  # it is no grade


def test_the_submission_may_be_one_folder_down(tmp_path: Path) -> None:
    (tmp_path / "submission" / "my-lab").mkdir(parents=True)
    (tmp_path / "submission" / "my-lab" / "pyproject.toml").write_text("", "utf-8")
    assert find_submission(tmp_path / "submission") == tmp_path / "submission" / "my-lab"
    (tmp_path / "submission" / "pyproject.toml").write_text("", "utf-8")
    assert find_submission(tmp_path / "submission") == tmp_path / "submission"
    with pytest.raises(UsageError, match="upload your lab's folder"):
        find_submission(tmp_path / "missing")


def test_failure_results_escape_the_message() -> None:
    results = json.loads(failure_results("[click](http://evil.example)"))
    assert results["output"] == "**Not graded.** \\[click\\]\\(http\\://evil\\.example\\)"
