"""A cohort graded in shards on a CI matrix is the cohort graded in one job, byte for byte.

The README's recipe ("A cohort in CI, in shards") is what runs here: its ``run:`` lines,
read from the README, each in a job folder of its own through bash, as GitHub runs
them, with ``.venv/bin/gradekit`` this checkout's grader; ``make`` stands in for nothing
but the install (``make dashboard ARGS=...`` runs ``gradekit dashboard ...``). Four grade
jobs grade a varied cohort (the reference, failing agents, one that special-cases the
drawn provider label, one ungradable folder) into four folders; the merge job merges
them and builds the dashboard. The same cohort graded once with ``--jobs 2`` must give
the same gradebook, reports, results, archive and dashboard, and the same ledger but
for the merge's own event.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from grader.ledger import ARCHIVE, GRADEBOOK, LEDGER, MARKDOWN, REPORT, RESULTS
from tests.submissions import (
    Context,
    make_submission,
    never_calls_model,
    set_in_answer,
    signs_with_label,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
KEY = "a-shared-ci-secret-for-every-shard"  # the recipe's GRADEKIT_SIGNING_KEY secret
SHARDS = 4
GUARD_S = 600  # a hang guard only: no time is asserted
GRADED = ("alice", "bob", "carol", "dave", "erin", "gus")  # frank is no submission


def _cohort(root: Path) -> Path:
    """Seven folders: two reference copies, three mutated, a tiny failing agent, and a
    folder with no submission in it (a zip wrapped one folder deeper, without the lab)."""
    unused = cast(Context, None)  # these mutations touch only the submission
    for name in ("alice", "gus"):
        make_submission(root / name)
    for name, mutate in (
        ("bob", never_calls_model),
        ("carol", signs_with_label),
        ("dave", set_in_answer),
    ):
        mutate(make_submission(root / name), unused)
    erin = root / "erin"
    erin.mkdir()
    (erin / "pyproject.toml").write_text('[tool.gradekit]\nagent = "agent:run"\n', "utf-8")
    (erin / "agent.py").write_text(
        "def run(provider, task, tools=None):\n    return 'hello'\n", "utf-8"
    )
    (root / "frank" / "inner").mkdir(parents=True)
    (root / "frank" / "inner" / "notes.txt").write_text("no lab here\n", "utf-8")
    return root


def _recipe() -> tuple[str, list[str], list[str]]:
    """The recipe's grade-job environment block and each job's ``run:`` lines."""
    text = README.read_text("utf-8")
    section = text[text.index("### A cohort in CI, in shards") :]
    block = section[section.index("```yaml\n") : section.index("\n```\n")]
    grade, merge = block.split("\n  merge:\n")
    runs = [
        [
            line.strip().removeprefix("- run: ")
            for line in job.splitlines()
            if line.strip().startswith("- run: ")
        ]
        for job in (grade, merge)
    ]
    return grade, runs[0], runs[1]


def _job(root: Path, cohort: Path) -> Path:
    """A job's checkout: ``.venv/bin/gradekit`` runs this checkout's grader, and the
    cohort is at ``submissions/``."""
    gradekit = root / ".venv" / "bin" / "gradekit"
    gradekit.parent.mkdir(parents=True)
    gradekit.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m grader "$@"\n', "utf-8")
    gradekit.chmod(0o755)
    (root / "submissions").symlink_to(cohort, target_is_directory=True)
    return root


def _run(line: str, cwd: Path, *, key: bool, shard: int = 0) -> subprocess.CompletedProcess[str]:
    """One ``run:`` line as GitHub runs it (bash -eo pipefail), ``make`` aside."""
    if line == "make .venv/.installed-dev":
        return subprocess.CompletedProcess(line, 0, "", "")  # the test's .venv is installed
    dashboard = re.fullmatch(r'make dashboard ARGS="([^"]*)"', line)
    if dashboard:
        line = f".venv/bin/gradekit dashboard {dashboard.group(1)}"
    line = line.replace("${{ matrix.shard }}", str(shard))
    assert "${{" not in line, line
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEKIT_")}
    # The batch's time, for the ledger: one instant on every machine, as the recipe sets it
    # for a ledger that is one job's byte for byte.
    env["SOURCE_DATE_EPOCH"] = "1767225600"
    if key:
        env["GRADEKIT_SIGNING_KEY"] = KEY
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    return done


def _tree(folder: Path, *, leave_out: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.relative_to(folder).as_posix() not in leave_out
    }


def _same(one: dict[str, bytes], other: dict[str, bytes]) -> list[str]:
    return sorted(name for name in one.keys() | other.keys() if one.get(name) != other.get(name))


def test_shards_on_a_ci_matrix_merge_into_the_one_job_folder(tmp_path: Path) -> None:
    grade_job, grade_runs, merge_runs = _recipe()
    assert "GRADEKIT_SIGNING_KEY: ${{ secrets.GRADEKIT_SIGNING_KEY }}" in grade_job
    [grading] = [line for line in grade_runs if " grade " in line]
    assert f"--shard ${{{{ matrix.shard }}}}/{SHARDS} --out grades" in grading
    assert any("ledger merge shards/*/ --out grades" in line for line in merge_runs)
    cohort = _cohort(tmp_path / "cohort")

    # One job, the whole cohort: the recipe's grading without --shard, two workers.
    single = _job(tmp_path / "single", cohort)
    _run(
        grading.replace(f" --shard ${{{{ matrix.shard }}}}/{SHARDS}", " --jobs 2"), single, key=True
    )
    _run(".venv/bin/gradekit dashboard grades --out site", single, key=False)

    # The matrix: each grade job in its own checkout, its grades uploaded as an artifact
    # (upload-artifact leaves hidden files out), downloaded by the merge job into shards/.
    merge = tmp_path / "merge"
    for shard in range(1, SHARDS + 1):
        job = _job(tmp_path / f"grade-{shard}", cohort)
        for line in grade_runs:
            _run(line, job, key=True, shard=shard)
        shutil.copytree(
            job / "grades",
            merge / "shards" / f"grades-{shard}",
            ignore=shutil.ignore_patterns(".*"),
        )
    _job(merge, cohort)
    for line in merge_runs:
        _run(line, merge, key=False)

    expected = _tree(single / "grades", leave_out=(LEDGER,))
    merged = _tree(merge / "grades", leave_out=(LEDGER,))
    assert _same(expected, merged) == []
    for name in GRADED:  # nothing above passed for want of files
        for file in (REPORT, MARKDOWN, RESULTS):
            assert f"{name}/{file}" in merged
    assert sum(name.startswith(f"{ARCHIVE}/") for name in merged) == len(GRADED)
    rows = {
        row["submission"]: row
        for row in csv.DictReader(io.StringIO(merged[GRADEBOOK].decode("utf-8")))
    }
    assert {name: row["status"] for name, row in rows.items()} == {
        **dict.fromkeys(GRADED, "graded"),
        "frank": "ungradable",
    }
    assert rows["alice"]["total"] == "100.00" and rows["erin"]["total"] != "100.00"
    assert _same(_tree(single / "site"), _tree(merge / "site")) == []
    assert (merge / "site" / "index.html").is_file()

    # The ledger: the one job's, line for line, then the merge's own event.
    one = (single / "grades" / LEDGER).read_bytes().splitlines()
    lines = (merge / "grades" / LEDGER).read_bytes().splitlines()
    assert lines[:-1] == one
    batch = json.loads(one[0])
    assert batch["event"] == "batch" and "shard" not in batch
    assert batch["selection"] == sorted([*GRADED, "frank"])
    last = json.loads(lines[-1])
    assert last["event"] == "merge" and len(last["sources"]) == SHARDS
    for name in ("carol", "frank"):  # history reads past the merge event
        history = f".venv/bin/gradekit history {name} --out grades"
        assert _run(history, merge, key=False).stdout == _run(history, single, key=False).stdout

    # The folders in another order, and again: the same bytes.
    order = " ".join(f"shards/grades-{shard}/" for shard in range(SHARDS, 0, -1))
    _run(f".venv/bin/gradekit ledger merge {order} --out again", merge, key=False)
    assert _same(_tree(merge / "grades"), _tree(merge / "again")) == []


def test_a_tampered_or_missing_shard_is_refused_with_nothing_written(tmp_path: Path) -> None:
    _, grade_runs, _ = _recipe()
    cohort = tmp_path / "cohort"
    for name in ("alice", "bob", "carol"):
        make_submission(cohort / name)
    shards = tmp_path / "shards"
    for shard in (1, 2, 3):
        job = _job(tmp_path / f"grade-{shard}", cohort)
        for line in grade_runs:
            _run(line.replace(f"/{SHARDS} ", "/3 "), job, key=True, shard=shard)
        shutil.copytree(job / "grades", shards / f"grades-{shard}")
    merge = _job(tmp_path / "merge", cohort)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEKIT_")}
    # The batch's time, for the ledger: one instant on every machine, as the recipe sets it
    # for a ledger that is one job's byte for byte.
    env["SOURCE_DATE_EPOCH"] = "1767225600"

    def merge_of(*folders: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "grader",
                "ledger",
                "merge",
                *(str(shards / f) for f in folders),
                "--out",
                "grades",
            ],
            cwd=merge,
            env=env,
            capture_output=True,
            text=True,
            timeout=GUARD_S,
        )

    missing = merge_of("grades-1", "grades-3")
    assert missing.returncode == 2, missing.stderr
    assert "shard(s) 2 of 3 are missing" in missing.stderr
    assert not (merge / "grades").exists()

    ledger = shards / "grades-2" / LEDGER
    first, rest = ledger.read_bytes().split(b"\n", 1)
    forged = first.replace(b'"counts":{', b'"counts":{"forged":1,')
    assert forged != first
    ledger.write_bytes(forged + b"\n" + rest)
    tampered = merge_of("grades-1", "grades-2", "grades-3")
    assert tampered.returncode == 2, tampered.stderr
    assert f"{ledger}:2: the chain breaks here" in tampered.stderr
    assert not (merge / "grades").exists()
    assert sorted(p.name for p in merge.iterdir()) == [".venv", "submissions"]
