"""``gradekit gradescope try``: the README's Gradescope recipe run as written, a dry run
that lays a submission out as Gradescope does and never touches the machine, and the
autograder's secret (its draw key) kept out of git, out of ``results/`` and 0600."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.handout import try_autograder
from grader.ledger import DRAW_KEY, REPORT, RESULTS
from grader.outputs import KEY_ENV, KEY_FILE_ENV
from tests.submissions import REFERENCE, copy_from_reference

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
README = REFERENCE / "README.md"
BIN = str(Path(sys.executable).parent)


def _env(**extra: str) -> dict[str, str]:
    """This shell with the checkout's ``gradekit`` first on PATH and no key of its own."""
    env = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, KEY_FILE_ENV)}
    return {**env, "PATH": f"{BIN}{os.pathsep}{env['PATH']}", **extra}


def _sh(script: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=_env(**extra),
        text=True,
        capture_output=True,
        timeout=600,
        check=False,
    )


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], text=True, capture_output=True, check=True
    ).stdout


def _repo(folder: Path, *, kit_ignores: bool = True) -> Path:
    """A git work tree; with the kit's .gitignore, as a clone of the kit has."""
    folder.mkdir(parents=True, exist_ok=True)
    if kit_ignores:
        shutil.copy2(REFERENCE / ".gitignore", folder / ".gitignore")
    _git(folder, "init", "-q")
    return folder


def _lab(folder: Path) -> Path:
    """A copy of the reference lab: what a student submits."""
    return copy_from_reference(folder, SUBMITTED)


def _recipe() -> str:
    """The README's Gradescope block, exactly as written."""
    section = README.read_text("utf-8").split("### On Gradescope", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "the README's Gradescope section lost its sh block"
    return block.group(1)


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built") / "autograder"
    done = _sh(f"gradekit gradescope build --out {out}", REFERENCE)
    assert done.returncode == 0, done.stderr
    return out


# -- the secret -----------------------------------------------------------------------------


def test_git_lists_nothing_of_a_built_autograder_and_the_build_names_its_secret(
    tmp_path: Path,
) -> None:
    course = _repo(tmp_path / "course", kit_ignores=False)  # an instructor's own repository
    done = _sh(
        "gradekit gradescope build --out autograder/ --rubric "
        f"{REFERENCE / 'rubric' / 'bootcamp.toml'}",
        course,
    )
    assert done.returncode == 0, done.stderr
    key = course / "autograder" / DRAW_KEY
    assert key.stat().st_mode & 0o777 == 0o600
    assert f"{DRAW_KEY} is a secret" in done.stdout
    assert _git(course, "status", "--porcelain", "--untracked-files=all") == ""
    # The kit's own .gitignore also covers the zip the README makes (it holds the key too).
    kit = _repo(tmp_path / "kit")
    (kit / "autograder.zip").write_bytes(b"")
    assert _git(kit, "check-ignore", "autograder.zip") == "autograder.zip\n"


def test_a_dry_run_of_something_that_is_no_autograder_or_no_submission_says_what_to_do(
    tmp_path: Path, autograder: Path
) -> None:
    (tmp_path / "lab").mkdir()
    nowhere = _sh("gradekit gradescope try lab --autograder autograder", tmp_path)
    assert nowhere.returncode == 2
    assert "build one with `gradekit gradescope build --out autograder`" in nowhere.stderr
    missing = _sh(f"gradekit gradescope try gone --autograder {autograder}", tmp_path)
    assert missing.returncode == 2 and "gone does not exist" in missing.stderr
    (tmp_path / "notes.txt").write_text("not a zip", "utf-8")
    text = _sh(f"gradekit gradescope try notes.txt --autograder {autograder}", tmp_path)
    assert text.returncode == 2 and "neither a folder nor a zip" in text.stderr
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "kept").write_text("", "utf-8")
    full = _sh(f"gradekit gradescope try lab --autograder {autograder} --root root", tmp_path)
    assert full.returncode == 2 and "pass --root a new folder" in full.stderr
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["kept"]  # nothing lost


# -- the dry run ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_readmes_recipe_runs_as_written_and_grades_the_lab(tmp_path: Path) -> None:
    lab = _repo(tmp_path / "lab")
    copy_from_reference(tmp_path / "copy", SUBMITTED)
    shutil.copytree(tmp_path / "copy", lab, dirs_exist_ok=True)
    done = _sh(_recipe(), lab)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "laid out as Gradescope does" in done.stdout
    assert "results.json: 100.00 points" in done.stdout
    assert "pending human review: Written summary, Stretch goal" in done.stdout
    with zipfile.ZipFile(lab / "autograder.zip") as upload:
        names = set(upload.namelist())
    assert {"setup.sh", "run_autograder", "kit/pyproject.toml", "rubric/bootcamp.toml"} <= names
    listed = _git(lab, "status", "--porcelain", "--untracked-files=all")
    assert "autograder" not in listed and DRAW_KEY not in listed, listed


@pytest.mark.slow
def test_a_dry_run_never_runs_setup_sh_and_takes_none_of_the_shells_secrets(
    tmp_path: Path, autograder: Path
) -> None:
    built = tmp_path / "autograder"
    shutil.copytree(autograder, built)
    touched = tmp_path / "setup-ran"
    (built / "setup.sh").write_text(f"#!/usr/bin/env bash\ntouch {touched}\n", "utf-8")
    lab = _lab(tmp_path / "lab")
    root = tmp_path / "gradescope"
    done = _sh(
        f"gradekit gradescope try {lab} --autograder {built} --root {root}",
        tmp_path,
        **{KEY_ENV: "an-instructors-signing-key-0123"},
    )
    assert done.returncode == 0, done.stderr
    assert not touched.exists()  # nothing installed: setup.sh is Gradescope's build step
    results = json.loads((root / "results" / RESULTS).read_bytes())
    assert results["score"] == 100.0
    assert "signature" not in results["extra_data"]  # Gradescope has no key of this shell's
    # results/ holds what Gradescope reads and the report beside it; the draw key stays in
    # the grading's own folder, readable by its owner only.
    assert sorted(p.name for p in (root / "results").iterdir()) == [REPORT, RESULTS]
    used = root / "grades" / DRAW_KEY
    assert used.read_bytes() == (built / DRAW_KEY).read_bytes()
    assert used.stat().st_mode & 0o777 == 0o600
    secret = (built / DRAW_KEY).read_bytes().strip()
    for path in (root / "results").rglob("*"):
        assert secret not in path.read_bytes(), path
    assert f"kept in {root}/" in done.stdout


@pytest.mark.slow
def test_a_zip_of_the_lab_folder_grades_one_folder_down_and_its_folder_goes_afterwards(
    tmp_path: Path, autograder: Path
) -> None:
    lab = _lab(tmp_path / "my-lab")
    upload = tmp_path / "upload.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        for path in sorted(lab.rglob("*")):
            archive.write(path, path.relative_to(tmp_path))
    seen: list[Path] = []
    with try_autograder(
        upload, autograder, None, lambda root, uploaded: seen.append(root)
    ) as tried:
        assert tried.graded, tried.results
        assert tried.uploaded == "the zip's contents"
        assert (tried.root / "submission" / "my-lab" / "pyproject.toml").is_file()
        assert tried.results["score"] == 100.0
    assert seen == [tried.root] and not tried.root.exists()


@pytest.mark.slow
def test_an_autograder_built_inside_the_lab_is_no_part_of_its_submission(tmp_path: Path) -> None:
    for name, made in (("repo", _repo), ("plain", lambda folder: folder)):
        lab = _lab(made(tmp_path / name) / "lab") if name == "repo" else _lab(tmp_path / name)
        if name == "repo":
            shutil.copy2(REFERENCE / ".gitignore", lab / ".gitignore")
            (lab / "grades").mkdir()
            (lab / "grades" / "ignored.csv").write_text("", "utf-8")  # the kit ignores grades/
        built = _sh("gradekit gradescope build --out autograder", lab)
        assert built.returncode == 0, built.stderr
        root = tmp_path / f"{name}-root"
        done = _sh(f"gradekit gradescope try . --root {root}", lab)
        assert done.returncode == 0, done.stderr
        assert not (root / "submission" / "autograder").exists(), name
        assert not list((root / "submission").rglob(DRAW_KEY)), name
        assert (root / "submission" / "lab" / "agent.py").is_file(), name
        expected = (
            "the files `git add -A` would commit" if name == "repo" else "the folder without .git"
        )
        assert expected in done.stdout, name
        if name == "repo":
            assert not (root / "submission" / "grades").exists()


@pytest.mark.slow
def test_a_submission_that_cannot_be_graded_fails_the_dry_run_saying_why(
    tmp_path: Path, autograder: Path
) -> None:
    lab = copy_from_reference(tmp_path / "lab", ("lab", "FAILURES.md"))  # no pyproject.toml
    done = _sh(f"gradekit gradescope try {lab} --autograder {autograder}", tmp_path)
    assert done.returncode == 1
    assert "NOT GRADED: no pyproject.toml at the top of the submission" in done.stderr


LATE = """\
[late]
due = 2026-12-01T23:59:00-08:00
penalty = 10
per = "day"
"""


def _metadata(path: Path, created: str, *, own_due: str | None = None) -> Path:
    """A submission_metadata.json as Gradescope writes it, with what the late policy reads."""
    user: dict[str, object] = {"name": "Ana Lee", "email": "ana@example.edu"}
    if own_due is not None:
        user["assignment"] = {"due_date": own_due}
    path.write_text(
        json.dumps(
            {
                "id": 1,
                "created_at": created,
                "users": [user],
                "assignment": {"title": "Lab 1", "due_date": "2026-12-01T23:59:00-08:00"},
            }
        ),
        "utf-8",
    )
    return path


@pytest.mark.slow
def test_a_dry_run_with_gradescopes_metadata_applies_the_labs_late_policy(tmp_path: Path) -> None:
    rubric = tmp_path / "course" / "rubric"
    shutil.copytree(REFERENCE / "rubric", rubric)
    (rubric / "late.toml").write_text(LATE, "utf-8")
    built = _sh(
        f"gradekit gradescope build --out autograder --rubric {rubric / 'bootcamp.toml'}",
        tmp_path / "course",
    )
    assert built.returncode == 0, built.stderr
    lab = _lab(tmp_path / "lab")
    late = _metadata(tmp_path / "late.json", "2026-12-03T10:00:00-08:00")  # 2 days started
    done = _sh(
        f"gradekit gradescope try {lab} --autograder course/autograder --metadata "
        f"{late} --root root",
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "results.json: 80.00 points" in done.stdout, done.stdout
    assert "failed: Late penalty (-20.0 / 0.0)" in done.stdout, done.stdout
    results = json.loads((tmp_path / "root" / "results" / RESULTS).read_bytes())
    assert results["extra_data"]["late"]["penalty"] == "20.00"
    assert (tmp_path / "root" / "submission_metadata.json").read_bytes() == late.read_bytes()

    # A day's extension granted in Gradescope (the user's own due date): one day less.
    extended = _metadata(
        tmp_path / "extended.json", "2026-12-03T10:00:00-08:00", own_due="2026-12-02T23:59:00-08:00"
    )
    again = _sh(
        f"gradekit gradescope try {lab} --autograder course/autograder --metadata {extended}",
        tmp_path,
    )
    assert "results.json: 90.00 points" in again.stdout, again.stdout
    # No metadata: no time, so no penalty (and the dry run says nothing is late).
    plain = _sh(f"gradekit gradescope try {lab} --autograder course/autograder", tmp_path)
    assert "results.json: 100.00 points" in plain.stdout, plain.stdout

    (tmp_path / "bad.json").write_text('{"users": []}', "utf-8")
    bad = _sh(
        f"gradekit gradescope try {lab} --autograder course/autograder --metadata bad.json",
        tmp_path,
    )
    assert bad.returncode == 2 and 'it needs a JSON object with "created_at"' in bad.stderr
