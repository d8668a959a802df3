"""Gradescope end to end: results.json verification, the generated autograder run with
bash on a simulated ``/autograder`` tree (``GRADEKIT_AUTOGRADER_ROOT``), and its setup.sh
on a simulation of each of Gradescope's Ubuntu images.

It tests ``grader.handout._gradescope``'s own helpers and constants on purpose: the
standalone Pythons it pins, the isolation file, ``find_submission`` and ``failure_results``."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gradekit import UsageError
from grader import HumanReview
from grader.handout._gradescope import (
    ISOLATION_FILE,
    STANDALONE,
    STANDALONE_VERSION,
    failure_results,
    find_submission,
)
from grader.ledger import DRAW_KEY, REPORT, RESULTS, verify_file
from grader.outputs import (
    KEY_ENV,
    KEY_FILE_ENV,
    canonical,
    render_gradescope,
    render_report_json,
    report_digest,
)
from grader.rubric import KIT_RUBRIC
from grader.sandbox import choose_wall, wall_named, wall_requests
from tests.grader.outputs.test_report import sample
from tests.submissions import REFERENCE

SUBMITTED = (
    "lab",
    "cassettes",
    "cassettes-llm",
    "fixtures",
    "incidents",
    "FAILURES.md",
    "DATASET_CHANGES.md",
    "pyproject.toml",
    "rubric",
)
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
    assert (
        f"agree with the report.json next to it (digest {report_digest(sample())})"
        in verdict.message
    )


def test_results_json_is_told_apart_by_content_not_name(tmp_path: Path) -> None:
    results = written(tmp_path)
    renamed = results.rename(tmp_path / "grade.json")
    assert "its tests add up" in verify_file(renamed, None).message


def test_without_a_report_beside_it_only_its_own_sums_are_checked(tmp_path: Path) -> None:
    verdict = verify_file(written(tmp_path, report=False), None)
    assert verdict.ok
    assert "no report.json next to it, so its digest and tests were not compared" in verdict.message


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
    assert (
        "tests[0] (contract_stability: refund-policy).score is 0.00 but the report says "
        "7.50" in verdict.message
    )


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda d: d["tests"][4].update(max_score=20.0, score=20.0),
            "score is 37.50 but its tests' scores sum to 42.50",
        ),
        (
            lambda d: d["tests"][4].update(max_score=20.0),
            ".max_score is 20.00 but the report says 15.00",
        ),
        (
            lambda d: d["tests"][4].update(tags=["contract_stability"]),
            ".tags is ['contract_stability'], not ['written_summary']",
        ),
        (lambda d: d["extra_data"].update(digest="0" * 64), "they are from different gradings"),
        (lambda d: d["tests"].pop(3), "it has 4 tests but the report has 5"),
        (lambda d: d.update(score=True), "score is True, not a number"),
        (lambda d: d.update(score=37.505), "not exact to the cent"),
        (lambda d: d["extra_data"].pop("digest"), "extra_data has no digest"),
    ],
)
def test_results_json_that_disagrees_with_its_report_fails(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], says: str
) -> None:
    results = written(tmp_path)
    rewrite(results, edit)
    verdict = verify_file(results, None)
    assert not verdict.ok and says in verdict.message, verdict.message


def test_a_forged_report_beside_results_json_fails_both(tmp_path: Path) -> None:
    results = written(tmp_path)
    rewrite(tmp_path / REPORT, lambda d: d.update(total="96.00"))
    verdict = verify_file(results, None)
    assert not verdict.ok
    assert (
        "the report.json next to it does not verify (total is 96.00 but the criteria's "
        "points sum to 37.50" in verdict.message
    )


def test_a_reformatted_results_json_fails_as_not_canonical(tmp_path: Path) -> None:
    results = written(tmp_path)
    results.write_text(json.dumps(json.loads(results.read_bytes()), indent=2), "utf-8")
    verdict = verify_file(results, None)
    assert not verdict.ok and "not canonical" in verdict.message


# -- a person's review, as Gradescope shows it -------------------------------------------------

OVERRIDE = HumanReview(
    "written_summary",
    Decimal(15),
    Decimal(12),
    "kim",
    "entries 3 and 4 describe the same failure",
    9,
)
CONFIRMATION = HumanReview(
    "contract_stability", Decimal("22.5"), None, "lee", "the lost case really swallows the miss", 11
)


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
        "name": "Written summary: reviewed by kim",
        "number": "2.1",
        "score": 12.0,
        "max_score": 15.0,
        "status": "failed",
        "tags": ["written_summary"],
    }
    assert test["output"] == (
        "Reviewed by kim (ledger event 9): changed the points from 15.00 to 12.00, so this "
        "criterion scores 12.00 / 15.00. Reason: entries 3 and 4 describe the same failure"
        "\n\nThe automated checks gave 15.00 / 15.00:\n- entries: passed, 15.00 / 15.00: 5 "
        "complete entries"
    )
    assert "Pending human review" not in test["output"]
    assert results["extra_data"]["review"] == [
        {
            "criterion": "written_summary",
            "automated": "15.00",
            "points": "12.00",
            "by": "kim",
            "reason": OVERRIDE.reason,
            "event": 9,
        }
    ]
    verdict = verify_file(tmp_path / RESULTS, None)
    assert verdict.ok, verdict.message


def test_a_confirmation_keeps_the_points_and_still_says_who_and_why(tmp_path: Path) -> None:
    results = reviewed(tmp_path, OVERRIDE, CONFIRMATION)
    shown_right(results)
    assert results["score"] == 34.5
    first, second = results["tests"]
    assert (first["name"], first["score"], first["max_score"], first["status"]) == (
        "Contract stability: reviewed by lee",
        22.5,
        30.0,
        "failed",
    )
    assert first["output"].startswith(
        "Reviewed by lee (ledger event 11): confirmed the automated points, so this criterion "
        "scores 22.50 / 30.00. Reason: the lost case really swallows the miss\n\nThe automated "
        "checks gave 22.50 / 30.00:\n- refund-policy: passed, 7.50 / 7.50: identical\n"
    )
    assert "- incident-summary: lost points, 0.00 / 7.50: " in first["output"]
    assert first["output"].endswith("What to do:\n- Let CassetteMiss propagate out of run().")
    assert second["name"] == "Written summary: reviewed by kim"
    assert [r["event"] for r in results["extra_data"]["review"]] == [9, 11]  # ledger order
    assert verify_file(tmp_path / RESULTS, None).ok


def test_a_review_that_gives_full_points_is_a_passing_test(tmp_path: Path) -> None:
    raised = HumanReview(
        "contract_stability",
        Decimal("22.5"),
        Decimal(30),
        "lee",
        "the lost case is the rubric's mistake",
        3,
    )
    test = reviewed(tmp_path, raised)["tests"][0]
    assert (test["score"], test["max_score"], test["status"]) == (30.0, 30.0, "passed")
    assert "What to do" not in test["output"]  # full points: nothing left to fix


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda d: d["tests"][0].update(status="passed"),
            "tests[0] (contract_stability: reviewed).status is 'passed', not 'failed'",
        ),
        (
            lambda d: d["tests"][0].update(name="Contract stability: reviewed by kim"),
            ".name is 'Contract stability: reviewed by kim', not "
            "'Contract stability: reviewed by lee'",
        ),
        (
            lambda d: d["tests"][0].update(max_score=22.5, status="passed"),
            "tests[0] (contract_stability: reviewed).max_score is 22.50 but the report and "
            "its review make it 30.00: the file was edited",
        ),
        (
            lambda d: d["tests"][1].update(score=15.0),
            "score is 34.50 but its tests' scores sum to 37.50",
        ),
    ],
)
def test_a_reviewed_test_that_disagrees_with_its_review_fails(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], says: str
) -> None:
    reviewed(tmp_path, OVERRIDE, CONFIRMATION)
    rewrite(tmp_path / RESULTS, edit)
    verdict = verify_file(tmp_path / RESULTS, None)
    assert not verdict.ok and says in verdict.message, verdict.message


def test_a_review_as_a_passing_test_worth_negative_points_does_not_verify(tmp_path: Path) -> None:
    """The form results.json had before: the checks' tests kept, the review's change added."""
    results = reviewed(tmp_path, OVERRIDE)
    automated = json.loads(render_gradescope(sample(), report_digest(sample())))
    results["tests"] = [
        *automated["tests"],
        {**results["tests"][-1], "score": -3.0, "max_score": 0.0, "status": "passed"},
    ]
    (tmp_path / RESULTS).write_bytes(canonical(results) + b"\n")
    verdict = verify_file(tmp_path / RESULTS, None)
    assert not verdict.ok
    assert (
        "it has 6 tests but the report has 5 checks, which make 5 tests with each reviewed "
        "criterion (written_summary) as one test" in verdict.message
    )


# -- the autograder folder ----------------------------------------------------------------


def gradekit(
    *args: str | Path,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, KEY_FILE_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "grader", *map(str, args)],
        text=True,
        capture_output=True,
        env={**clean, **(env or {})},
        check=False,
    )


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
    assert (source / "rubric" / "bootcamp.toml").read_bytes() == (
        REFERENCE / "rubric" / "bootcamp.toml"
    ).read_bytes()
    kit = source / "kit"
    assert (kit / "grader" / "outputs" / "_report.py").is_file()
    assert (kit / "gradekit" / "_replay.py").is_file()
    assert (kit / "grader" / "kit_rubric" / "bootcamp.toml").is_file()
    assert not list(kit.rglob("__pycache__"))
    pyproject = (kit / "pyproject.toml").read_text("utf-8")
    assert '"httpx' in pyproject and "pytest" not in pyproject  # runtime requirements only
    assert '--rubric "$ROOT/source/rubric/"bootcamp.toml' in (source / "run_autograder").read_text(
        "utf-8"
    )
    key = source / DRAW_KEY  # regrades in fresh containers draw alike: a key of the build's
    assert key.stat().st_mode & 0o777 == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}\n", key.read_text("ascii"))


@pytest.mark.slow
def test_each_regrade_on_gradescope_draws_with_the_builds_key(tmp_path: Path, source: Path) -> None:
    """Without a signing key, a container's grading keeps the build's draw key: a regrade
    of the same submission then draws the same labels and seeds, unlike a fresh key."""
    root, done = autograder(tmp_path, source, submitted=("lab", "pyproject.toml"))
    assert done.returncode == 0, done.stderr
    used = root / "grades" / DRAW_KEY  # the grading's own folder, never results/
    assert used.read_bytes() == (source / DRAW_KEY).read_bytes()
    assert used.stat().st_mode & 0o777 == 0o600
    assert not list((root / "results").rglob(DRAW_KEY))


def test_build_refuses_a_folder_that_is_not_empty(source: Path) -> None:
    done = gradekit("gradescope", "build", "--out", source)
    assert done.returncode == 2 and "pass --out a new folder" in done.stderr


def autograder(
    tmp_path: Path,
    source: Path,
    submitted: tuple[str, ...] = SUBMITTED,
    env: dict[str, str] | None = None,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A simulated /autograder with ``source`` and a copy of the reference lab, after
    Gradescope's run of ``run_autograder``, with this kit copy on the path."""
    root = tmp_path / "autograder"
    shutil.copytree(source, root / "source")
    (root / "submission").mkdir(parents=True)
    for name in submitted:
        if (REFERENCE / name).is_dir():
            shutil.copytree(
                REFERENCE / name,
                root / "submission" / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        else:
            shutil.copy2(REFERENCE / name, root / "submission" / name)
    clean = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, KEY_FILE_ENV)}
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        text=True,
        capture_output=True,
        check=False,
        cwd=tmp_path,
        env={
            **clean,
            "GRADEKIT_AUTOGRADER_ROOT": str(root),
            "GRADEKIT_PYTHON": sys.executable,
            "PYTHONPATH": str(root / "source" / "kit"),
            **(env or {}),
        },
    )
    return root, done


@pytest.mark.slow
def test_run_autograder_grades_the_reference_lab_to_100_signed(
    tmp_path: Path, source: Path
) -> None:
    root, done = autograder(tmp_path, source, env={KEY_ENV: KEY})
    assert done.returncode == 0, done.stderr
    # the wall, for the instructor (Gradescope shows run_autograder's output to them only)
    assert f"isolation: {choose_wall('auto').held()}\n" in done.stdout
    results = json.loads((root / "results" / RESULTS).read_bytes())
    assert results["score"] == 100.0
    assert sum(test["score"] for test in results["tests"]) == 100.0
    assert all(test["status"] == "passed" for test in results["tests"])
    assert (results["output_format"], results["test_output_format"]) == ("md", "md")
    assert {"score", "output", "tests", "extra_data", "visibility", "stdout_visibility"} <= set(
        results
    )
    assert "**Total: 100.00 / 100.00**" in results["output"]
    assert (
        "**Pending human review: 25.00 points** (Written summary 15.00 / 15.00, Stretch "
        "goal 10.00 / 10.00)" in results["output"]
    )
    review = [t for t in results["tests"] if "Pending human review" in t["output"]]
    assert {t["tags"][0] for t in review} == {"written_summary", "stretch_goal"}
    assert results["extra_data"]["signature"].startswith("hmac-sha256:")
    # the grader that ran is the kit copy in source/, not this checkout
    where = subprocess.run(
        [sys.executable, "-P", "-c", "import grader; print(grader.__file__)"],
        env={"PYTHONPATH": str(root / "source" / "kit")},
        text=True,
        capture_output=True,
        check=True,
    ).stdout
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
    tmp_path: Path, source: Path
) -> None:
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
    assert results["output"] == "**Not graded.** \\[click\\](http\\://evil\\.example)"


# -- setup.sh on Gradescope's Ubuntu images ------------------------------------------------
#
# No container runs here (the docker CLI has no daemon, podman is not installed), so each
# image is simulated: setup.sh runs under bash with PATH set to one folder that holds the
# few system tools it uses (linked to this machine's), stand-ins for the image's Pythons,
# and apt-get / apt-cache scripts that answer as that image's apt does. Pip is real: it
# builds the kit with its own backend and installs it, with the SDKs and their
# requirements, from wheels of this environment's installed copies (``--no-index``).

TOOLS = (
    "bash",
    "sh",
    "env",
    "cat",
    "chmod",
    "cp",
    "cut",
    "dirname",
    "grep",
    "gzip",
    "head",
    "id",
    "ln",
    "ls",
    "mkdir",
    "mktemp",
    "mv",
    "readlink",
    "rm",
    "sed",
    "sha256sum",
    "tar",
    "tr",
    "true",
    "uname",
)
BASE = ("ca-certificates", "python3", "python3-venv")  # what every image's apt installs


@dataclass(frozen=True)
class Image:
    """One of Gradescope's Ubuntu images, as setup.sh meets it."""

    name: str
    python3: str  # the version its python3 reports
    pythons: tuple[str, ...]  # its other pythonX.Y commands
    packages: tuple[str, ...]  # what its apt installs besides BASE
    chosen: str  # what setup.sh says about the Python it took


IMAGES = (
    Image("24.04", "3.12", ("python3.12",), ("curl", "bubblewrap"), "python3.12, the image's"),
    Image(
        "22.04",
        "3.10",
        ("python3.10",),
        ("curl", "bubblewrap", "python3.11", "python3.11-venv"),
        "python3.11, from apt (the image has no Python 3.11+ that makes a venv)",
    ),
    Image("20.04", "3.8", ("python3.8",), ("curl", "bubblewrap"), "the standalone CPython"),
    Image("18.04", "3.6", ("python3.6",), ("curl", "bubblewrap"), "the standalone CPython"),
)


def _wheel_of(name: str, out: Path) -> None:
    """A wheel of the installed distribution ``name``, from its files as installed."""
    dist = importlib.metadata.distribution(name)
    info = next(Path(str(f)).parts[0] for f in dist.files or () if str(f).endswith("METADATA"))
    tags = [
        line.split(": ", 1)[1]
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag: ")
    ]
    tag = "py3-none-any" if "py3-none-any" in tags or not tags else tags[0]
    wheel = out / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in dist.files or ():
            path = str(file)
            if (
                path.startswith("..")
                or "__pycache__" in path
                or path.endswith(".pyc")
                or path
                in {f"{info}/{n}" for n in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
            ):
                continue
            data = Path(str(dist.locate_file(file))).read_bytes()
            archive.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            records.append(f"{path},sha256={digest.decode()},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*records, f"{info}/RECORD,,"]) + "\n")


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of everything the kit and its SDK extra need, made from this environment."""
    requirements = pytest.importorskip("packaging.requirements")
    out = tmp_path_factory.mktemp("wheels")
    todo = [*(importlib.metadata.requires("gradekit") or [])]
    done: set[str] = set()
    while todo:
        requirement = requirements.Requirement(todo.pop())
        if requirement.marker is not None and not any(
            requirement.marker.evaluate({"extra": extra}) for extra in ("", "sdk")
        ):
            continue  # another extra's (dev, dashboard), or another Python's
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if name in done or name == "gradekit":
            continue
        done.add(name)
        _wheel_of(name, out)
        todo += [r for r in importlib.metadata.requires(name) or [] if "extra ==" not in r]
    assert {"httpx", "openai", "anthropic"} <= done
    return out


def with_packages(table: str) -> bytes:
    """The kit's rubric with its [packages] table (its last) replaced by ``table``."""
    kept, found, _ = KIT_RUBRIC.read_text("utf-8").partition("\n[packages]\n")
    assert found, "the kit's rubric has a [packages] table, last"
    return (kept + "\n" + table).encode("utf-8")


def _link(bin_folder: Path, name: str, target: str | None) -> None:
    if target is not None:
        (bin_folder / name).symlink_to(target)


def _script(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def _python(path: Path, version: str, fake: Path) -> None:
    """``path`` runs this interpreter, reporting ``version`` when it is older than 3.11 (a
    sitecustomize sets ``sys.version_info``): an old Python setup.sh must pass over, which
    still downloads with urllib."""
    if tuple(map(int, version.split("."))) >= (3, 11):
        _script(path, f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        return
    (fake / version).mkdir(parents=True, exist_ok=True)
    (fake / version / "sitecustomize.py").write_text(
        f"import sys\nsys.version_info = ({version.replace('.', ', ')}, 0, 'final', 0)\n",
        encoding="utf-8",
    )
    _script(path, f'#!/bin/sh\nPYTHONPATH="{fake / version}" exec "{sys.executable}" "$@"\n')


def image_tree(tmp_path: Path, image: Image, *, drop: tuple[str, ...] = ()) -> Path:
    """A PATH folder that looks like ``image`` to setup.sh: its Pythons, its apt (installing a
    package links its commands in; ``drop`` removes packages from its sources), the tools."""
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    for tool in TOOLS:
        _link(bin_folder, tool, shutil.which(tool))
    for name in ("python3", *image.pythons):
        _python(
            bin_folder / name, image.python3 if name == "python3" else name[6:], tmp_path / "fake"
        )
    available = " ".join(p for p in (*BASE, *image.packages) if p not in drop)
    (tmp_path / "packages").mkdir()
    _python(tmp_path / "packages" / "python3.11", "3.11", tmp_path / "fake")
    commands = {
        "curl": shutil.which("curl"),
        "bubblewrap": shutil.which("bwrap"),
        "python3.11": str(tmp_path / "packages" / "python3.11"),
    }
    installs = "\n".join(
        f'    {package}) ln -sf "{target}" "{bin_folder}/{_command(package)}" ;;'
        for package, target in commands.items()
        if target is not None
    )
    log = tmp_path / "apt.log"
    _script(
        bin_folder / "apt-get",
        f"""#!{shutil.which("bash")}
# apt-get as Ubuntu {image.name}'s answers: it installs only what its sources hold
echo "apt-get $*" >>"{log}"
[ "$1" = update ] && exit 0
for package in "$@"; do
  case "$package" in -*|install) continue ;; esac
  case " {available} " in *" $package "*) ;;
    *) echo "E: Unable to locate package $package" >&2; exit 100 ;; esac
  case "$package" in
{installs}
  esac
done
""",
    )
    _script(
        bin_folder / "apt-cache",
        f"""#!{shutil.which("bash")}
echo "apt-cache $*" >>"{log}"
case " {available} " in *" $2 "*) echo "Package: $2"; exit 0 ;; esac
echo "E: No packages found" >&2
exit 100
""",
    )
    return bin_folder


def _command(package: str) -> str:
    return {"bubblewrap": "bwrap"}.get(package, package)


def standalone_archive(folder: Path) -> tuple[Path, str]:
    """A python-build-standalone-shaped archive (its top folder ``python/``) whose
    ``bin/python3`` runs this interpreter, and its sha256."""
    archive = folder / "cpython-stand-in.tar.gz"
    stub = folder / "python3"
    _script(stub, f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(stub, arcname="python/bin/python3")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def setup_sh(
    tmp_path: Path,
    source: Path,
    bin_folder: Path,
    env: dict[str, str] | None = None,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Gradescope's build of the image: ``source`` in ``ROOT/source``, setup.sh run as root
    with nothing but ``bin_folder`` on PATH and pip pointed at local wheels."""
    root = tmp_path / "autograder"
    shutil.copytree(source, root / "source")
    done = subprocess.run(
        [str(bin_folder / "bash"), str(root / "source" / "setup.sh")],
        text=True,
        capture_output=True,
        check=False,
        cwd=tmp_path,
        timeout=900,
        env={
            "PATH": str(bin_folder),
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "GRADEKIT_AUTOGRADER_ROOT": str(root),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            **(env or {}),
        },
    )
    return root, done


def offline(wheelhouse: Path) -> dict[str, str]:
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    """A loopback HTTP server of a standalone archive: its URL, the file and its sha256."""
    folder = tmp_path_factory.mktemp("download")
    archive, sha256 = standalone_archive(folder)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{archive.name}", archive, sha256
    finally:
        server.shutdown()
        server.server_close()


SHELLCHECK = shutil.which("shellcheck")


@pytest.mark.skipif(
    SHELLCHECK is None,
    reason="shellcheck is not installed (Debian and "
    "Ubuntu: apt-get install shellcheck; .ci/run installs it)",
)
def test_setup_sh_and_run_autograder_are_shellcheck_clean(tmp_path: Path, source: Path) -> None:
    none = tmp_path / "course" / "lab.toml"
    none.parent.mkdir()
    none.write_bytes(with_packages(""))
    assert (
        gradekit("gradescope", "build", "--out", tmp_path / "none", "--rubric", none).returncode
        == 0
    )
    scripts = [source / "setup.sh", source / "run_autograder", tmp_path / "none" / "setup.sh"]
    done = subprocess.run(
        [str(SHELLCHECK), "--severity=style", *map(str, scripts)],
        text=True,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout


def test_setup_sh_pins_a_standalone_cpython_for_each_machine(source: Path) -> None:
    setup = (source / "setup.sh").read_text("utf-8")
    version, build_date = STANDALONE_VERSION.split("+")
    assert set(STANDALONE) == {"x86_64", "aarch64"}
    for machine, (url, sha256) in STANDALONE.items():
        assert url == (
            "https://github.com/astral-sh/python-build-standalone/releases/download/"
            f"{build_date}/cpython-{version}%2B{build_date}-{machine}-unknown-linux-"
            "gnu-install_only_stripped.tar.gz"
        )
        assert re.fullmatch(r"[0-9a-f]{64}", sha256)
        assert f'url="{url}"\n      sha256="{sha256}" ;;' in setup
    assert tuple(map(int, version.split(".")[:2])) >= (3, 11)


def test_on_a_machine_with_no_pinned_standalone_setup_says_what_to_do(
    tmp_path: Path, source: Path
) -> None:
    bin_folder = image_tree(tmp_path, IMAGES[2])
    (bin_folder / "uname").unlink()
    _script(bin_folder / "uname", "#!/bin/sh\necho riscv64\n")
    root, done = setup_sh(tmp_path, source, bin_folder)
    assert done.returncode == 1
    assert (
        "setup.sh: FAILED: no Python 3.11 or newer in the image or its apt sources, and no "
        "standalone CPython is pinned for riscv64: build on an x86_64 or arm64 image" in done.stderr
    )
    assert not (root / "venv").exists()


def test_a_download_that_is_not_the_pinned_archive_is_refused(
    tmp_path: Path, source: Path, served: tuple[str, Path, str]
) -> None:
    """Ubuntu 20.04 without curl: setup.sh downloads with the image's python3 (urllib), and
    refuses the file when its sha256 is not the pinned one (here: the real pin)."""
    url, _, sha256 = served
    bin_folder = image_tree(tmp_path, IMAGES[2], drop=("curl",))
    root, done = setup_sh(tmp_path, source, bin_folder, {"GRADEKIT_PYTHON_URL": url})
    assert done.returncode == 1, done.stderr
    assert (
        f"setup.sh: no Python 3.11+ in the image or its apt sources: downloading {url}"
        in done.stdout
    )
    pinned = STANDALONE[os.uname().machine][1] if os.uname().machine in STANDALONE else ""
    assert (
        f"is not the pinned standalone CPython (sha256 {sha256}, expected {pinned}): "
        f"download {url} again, or set GRADEKIT_PYTHON_SHA256" in done.stderr
    )
    assert "E: Unable to locate package curl" in done.stderr
    assert "apt-get install -y --no-install-recommends python3.11" not in (
        tmp_path / "apt.log"
    ).read_text("utf-8")  # apt-cache said it has none
    assert not (root / "python").exists() and not (root / "venv").exists()


def isolation_of(root: Path) -> list[str]:
    return (root / "source" / ISOLATION_FILE).read_text("utf-8").splitlines()


@pytest.fixture(scope="module")
def light_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An autograder whose rubric lets labs import one small package (sniffio): quicker to
    install than the SDKs, for the images other than Gradescope's default."""
    course = tmp_path_factory.mktemp("light")
    (course / "rubric").mkdir()
    (course / "rubric" / "lab.toml").write_bytes(with_packages('[packages]\nsniffio = "sniffio"\n'))
    done = gradekit(
        "gradescope",
        "build",
        "--out",
        course / "source",
        "--rubric",
        course / "rubric" / "lab.toml",
    )
    assert done.returncode == 0, done.stderr
    return course / "source"


@pytest.mark.slow
@pytest.mark.parametrize("image", IMAGES, ids=[image.name for image in IMAGES])
def test_setup_sh_builds_the_grader_on_each_ubuntu_image(
    tmp_path: Path,
    source: Path,
    light_source: Path,
    wheelhouse: Path,
    served: tuple[str, Path, str],
    image: Image,
) -> None:
    """24.04 has python3.12; 22.04 has 3.10 and apt's python3.11; 20.04 and 18.04 have
    neither, so setup.sh takes the standalone CPython: from GRADEKIT_PYTHON_ARCHIVE on
    20.04, downloaded with curl on 18.04 (from a loopback server standing in for GitHub).
    On 22.04, Gradescope's default image, the rubric is the kit's: both SDKs."""
    url, archive, sha256 = served
    env = {**offline(wheelhouse), "GRADEKIT_PYTHON_SHA256": sha256}
    env.update(
        {
            "20.04": {"GRADEKIT_PYTHON_ARCHIVE": str(archive)},
            "18.04": {"GRADEKIT_PYTHON_URL": url},
        }.get(image.name, {})
    )
    modules = ("openai", "anthropic") if image.name == "22.04" else ("sniffio",)
    built = source if image.name == "22.04" else light_source
    root, done = setup_sh(tmp_path, built, image_tree(tmp_path, image), env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"setup.sh: Python: {image.chosen}" in done.stdout
    apt = (tmp_path / "apt.log").read_text("utf-8")
    assert ("apt-get install -y --no-install-recommends python3.11 python3.11-venv" in apt) is (
        image.name == "22.04"
    )  # only where apt-cache has the package
    standalone = root / "python" / "bin" / "python3"
    assert standalone.is_file() is (image.chosen == "the standalone CPython")
    if image.name == "18.04":
        assert f"downloading {url}" in done.stdout
    shown = subprocess.run(
        [
            str(root / "venv" / "bin" / "python"),
            "-I",
            "-c",
            f"import gradekit, grader, {', '.join(modules)}; import importlib.metadata as m; "
            "print(sorted(m.metadata('gradekit').get_all('Provides-Extra')))",
        ],
        text=True,
        capture_output=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "['sdk']\n"  # `gradekit[sdk]`, as advice says, installs here
    assert f"setup.sh: the rubric's [packages] import here: {', '.join(modules)}\n" in done.stdout
    wall = choose_wall("auto")  # bubblewrap is installed in the image as it is here
    lines = isolation_of(root)
    assert lines[0] == f"wall: {wall.name}"
    assert lines[1].startswith(f"isolation: {wall.held()}; children run as ")
    assert "\n".join(lines) in done.stdout  # echoed too


@pytest.mark.slow
def test_a_rubric_without_packages_skips_the_import_check(tmp_path: Path, wheelhouse: Path) -> None:
    """And an image whose apt has no bubblewrap: setup.sh goes on, and the probe says why the
    grader gets the process wall."""
    rubric = tmp_path / "course" / "lab.toml"
    rubric.parent.mkdir()
    rubric.write_bytes(with_packages(""))
    assert (
        gradekit("gradescope", "build", "--out", tmp_path / "source", "--rubric", rubric).returncode
        == 0
    )
    bin_folder = image_tree(tmp_path, IMAGES[0], drop=("bubblewrap",))
    root, done = setup_sh(tmp_path, tmp_path / "source", bin_folder, offline(wheelhouse))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "setup.sh: apt-get could not install bubblewrap: going on without it" in done.stdout
    assert (
        "setup.sh: the rubric's [packages] lists none: no import to check (labs import "
        "gradekit and the standard library only)" in done.stdout
    )
    assert "import here" not in done.stdout
    assert isolation_of(root)[0] == "wall: process"
    assert isolation_of(root)[2].startswith(
        "passed over: namespaces: bubblewrap (bwrap) is not installed; install bubblewrap"
    )


@pytest.mark.slow
def test_a_package_that_does_not_import_fails_the_build_naming_it(
    tmp_path: Path, wheelhouse: Path
) -> None:
    rubric = tmp_path / "course" / "lab.toml"
    rubric.parent.mkdir()
    rubric.write_bytes(with_packages('[packages]\nidna = "idna"\nnotthere = "sniffio"\n'))
    assert (
        gradekit("gradescope", "build", "--out", tmp_path / "source", "--rubric", rubric).returncode
        == 0
    )
    root, done = setup_sh(
        tmp_path, tmp_path / "source", image_tree(tmp_path, IMAGES[0]), offline(wheelhouse)
    )
    assert done.returncode == 1
    assert (
        "setup.sh: FAILED: notthere (sniffio in the rubric's [packages]) was installed but "
        "does not import in the grader's venv (the output above says why): make the key "
        "the name labs import and the value the pip requirement that provides it, then "
        "build the autograder again" in done.stderr
    )
    assert "No module named 'notthere'" in done.stderr
    assert not (root / "source" / ISOLATION_FILE).exists()


def test_probe_names_the_wall_and_why_each_other_was_passed_over() -> None:
    done = gradekit("gradescope", "walls")
    assert done.returncode == 0, done.stderr
    wall = choose_wall("auto")
    lines = done.stdout.splitlines()
    assert lines[0] == f"wall: {wall.name}"
    assert lines[1].startswith(f"isolation: {wall.held()}; children run as ")
    others = [name for name in wall_requests()[1:] if name != wall.name]
    assert [line.split(":")[1].strip() for line in lines[2:]] == others
    for name, line in zip(others, lines[2:], strict=True):
        if wall_named(name).preference < wall.preference:
            assert line == f"passed over: {name}: {wall.name} is preferred, and it works here"
        else:
            assert line == f"passed over: {name}: {wall_named(name).missing()}"


def test_the_kit_builds_the_same_wheel_twice_with_its_sdk_extra(
    tmp_path: Path, source: Path
) -> None:
    kit = tmp_path / "kit"
    shutil.copytree(source / "kit", kit)
    wheels = []
    for n in (1, 2):
        (tmp_path / str(n)).mkdir()
        done = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                "import sys; sys.path.insert(0, 'grader/handout'); "
                f"import _kit_build; print(_kit_build.build_wheel({str(tmp_path / str(n))!r}))",
            ],
            cwd=kit,
            text=True,
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        wheels.append(tmp_path / str(n) / done.stdout.strip())
    assert wheels[0].name == f"gradekit-{importlib.metadata.version('gradekit')}-py3-none-any.whl"
    assert wheels[0].read_bytes() == wheels[1].read_bytes()
    with zipfile.ZipFile(wheels[0]) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(f"{info}/METADATA").decode()
        assert "grader/kit_rubric/bootcamp.toml" in names and "grader/py.typed" in names
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert names[-1] == f"{info}/RECORD"
        assert (
            "[console_scripts]\ngradekit = grader.cli:main"
            in archive.read(f"{info}/entry_points.txt").decode()
        )
    assert "Provides-Extra: sdk\n" in metadata
    assert 'Requires-Dist: openai<4,>=3.50; extra == "sdk"' in metadata
    assert "Requires-Dist: httpx>=0.27\n" in metadata
