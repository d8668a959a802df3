"""Determinism is the product: the same submission grades to the same bytes everywhere.

Every grade here runs in its own ``python -m grader`` process, so the hash seed,
the time zone, the locale, the provider label and the submission's absolute path
and folder name all really differ between runs. None of them may reach a digest.
Who the submission is does reach it (the report's ``submission``): it comes from the
instructor's side, here a roster that names every folder as one student, never from
the manifest's ``student``.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What a student's copy of the kit holds: the repository without caches, builds or grades.
COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "__pycache__",
    "*.pyc",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "build",
    "grades",
)
STUDENT_LINE = 'student = "gradekit-reference"'
STUDENT_ID = "s-0042"  # the roster's name for every folder of the twenty runs
COMMAND_TIMEOUT_S = 600  # a hang guard only; no time is asserted

RUNS = 20
SEEDS = ("0", "1", "42", "4294967295", "random")  # 5 seeds x 4 zones: 20 distinct pairs
ZONES = ("UTC", "Asia/Shanghai", "America/Los_Angeles", "Pacific/Chatham")
LABELS = (
    "provider-a",
    "provider-b",  # the second run then uses provider-a: the labels swap roles
    "openai-compatible:gpt-4o-mini",
    "anthropic:claude-3-5-haiku-latest",
    "ollama:llama3.1:8b",
    "provider-ü",
)
FOLDERS = ("reference", "alice", "übung 3", "lab.v2", "x")
WANTED_LOCALES = ("C.UTF-8", "en_US.UTF-8", "tr_TR.UTF-8", "C")
# Variables that would pin what the runs are meant to vary, or leak a provider into them.
DROPPED = re.compile(
    r"^(PYTHONHASHSEED|PYTHONUTF8|PYTHONIOENCODING|TZ|LANG|LANGUAGE|LC_\w+"
    r"|GRADEKIT_\w+|OPENAI_API_KEY|ANTHROPIC_API_KEY)$"
)


@dataclass(frozen=True, slots=True)
class Setting:
    """One grading process's surroundings."""

    seed: str
    zone: str
    locale: str
    label: str

    def environment(self) -> dict[str, str]:
        env = {name: value for name, value in os.environ.items() if not DROPPED.match(name)}
        env |= {
            "PYTHONHASHSEED": self.seed,
            "TZ": self.zone,
            "LANG": self.locale,
            "LC_ALL": self.locale,
        }
        return env

    def __str__(self) -> str:
        return (
            f"PYTHONHASHSEED={self.seed} TZ={self.zone} LC_ALL={self.locale} --label {self.label}"
        )


def _normalized(locale: str) -> str:
    return locale.lower().replace("-", "")


def available_locales() -> tuple[str, ...]:
    """The wanted locales this machine has; ``C`` always exists."""
    try:
        listed = subprocess.run(
            ["locale", "-a"], capture_output=True, text=True, check=True, timeout=30
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        listed = []
    have = {_normalized(name) for name in listed} | {"c"}
    return tuple(name for name in WANTED_LOCALES if _normalized(name) in have)


LOCALES = available_locales()


def setting(number: int) -> Setting:
    return Setting(
        SEEDS[number % len(SEEDS)],
        ZONES[number % len(ZONES)],
        LOCALES[number % len(LOCALES)],
        LABELS[number % len(LABELS)],
    )


def gradekit(
    args: Sequence[str | Path], *, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m grader ARGS`` in a fresh process; ``cwd`` is never a submission, so the
    grader under test is this checkout's and not a copy's."""
    return subprocess.run(
        [sys.executable, "-m", "grader", *map(str, args)],
        cwd=cwd,
        env=dict(env) if env is not None else None,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=COMMAND_TIMEOUT_S,
    )


def succeeded(done: subprocess.CompletedProcess[str], what: str) -> None:
    assert done.returncode == 0, (
        f"{what}: exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One snapshot of the reference lab; every copy is made from it, so edits to the
    checkout while the tests run cannot make two copies differ."""
    snapshot = tmp_path_factory.mktemp("snapshot") / "reference"
    shutil.copytree(REPO, snapshot, ignore=COPY_IGNORE)
    assert STUDENT_LINE in (snapshot / "pyproject.toml").read_text("utf-8")
    return snapshot


@dataclass(frozen=True, slots=True)
class Graded:
    setting: Setting
    submission: Path
    report: Path


@pytest.fixture(scope="module")
def twenty(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Graded]:
    """The reference graded ``RUNS`` times, two processes at a time, each set up differently."""
    base = tmp_path_factory.mktemp("twenty")

    def grade(number: int) -> Graded:
        where = base / f"run-{number:02d}"
        parent = where.joinpath(*["deeper"] * (number % 3))
        submission = parent / FOLDERS[number % len(FOLDERS)]
        shutil.copytree(reference, submission)
        out, cwd = where / "out", where / "cwd"
        cwd.mkdir()
        roster = where / "roster.csv"
        roster.write_text(
            f'folder,student_id,display_name\n"{submission.name}",{STUDENT_ID},The Reference\n',
            "utf-8",
        )
        chosen = setting(number)
        done = gradekit(
            ["grade", submission, "--out", out, "--label", chosen.label, "--roster", roster],
            cwd=cwd,
            env=chosen.environment(),
        )
        succeeded(done, f"run {number} ({chosen}) of {submission}")
        return Graded(chosen, submission, out / submission.name / "report.json")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(grade, range(RUNS)))


def test_the_runs_really_differ_in_seed_zone_locale_label_path_and_folder(
    twenty: list[Graded],
) -> None:
    assert len({g.setting for g in twenty}) == RUNS
    assert len({g.submission for g in twenty}) == RUNS
    assert len({g.submission.name for g in twenty}) == len(FOLDERS)
    assert {g.setting.seed for g in twenty} == set(SEEDS)
    assert {g.setting.zone for g in twenty} == set(ZONES)
    assert {g.setting.label for g in twenty} == set(LABELS)
    assert {g.setting.locale for g in twenty} == set(LOCALES)


SEEN_BY_PYTHON = (
    "import locale, sys, time; "
    "print(time.strftime('%z'), locale.setlocale(locale.LC_ALL, ''), hash('gradekit'))"
)


def test_each_setting_really_reaches_python(tmp_path: Path) -> None:
    """Without a time-zone database or a locale, the runs would only look different."""
    seen = []
    for number in range(RUNS):
        done = subprocess.run(
            [sys.executable, "-c", SEEN_BY_PYTHON],
            cwd=tmp_path,
            env=setting(number).environment(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=True,
        )
        offset, locale, hashed = done.stdout.split()
        seen.append((setting(number), offset, locale, hashed))
    assert len({offset for _, offset, _, _ in seen}) == len(ZONES), seen
    assert {s.locale for s, _, locale, _ in seen if s.locale == locale} == set(LOCALES), seen
    assert len({hashed for _, _, _, hashed in seen}) >= len(SEEDS), seen


def test_twenty_processes_give_one_digest_and_byte_identical_reports(
    twenty: list[Graded],
) -> None:
    by_bytes: dict[bytes, list[Graded]] = {}
    for graded in twenty:
        by_bytes.setdefault(graded.report.read_bytes(), []).append(graded)
    digests = {json.loads(data)["digest"] for data in by_bytes}
    assert len(by_bytes) == 1 and len(digests) == 1, _explain(by_bytes)
    document = json.loads(next(iter(by_bytes)))
    # Guard against a vacuous pass: twenty identical crashes would also be "deterministic".
    assert document["total"] == document["max"] == "100.00", document["findings"]
    assert document["submission"] == STUDENT_ID  # the roster's, not a manifest's claim
    # What the student and Gradescope read is written from the same report: the same too.
    for beside in ("report.md", "results.json"):
        versions = {g.report.with_name(beside).read_bytes() for g in twenty}
        assert len(versions) == 1, f"{beside}: {len(versions)} different versions"


def _explain(by_bytes: Mapping[bytes, list[Graded]]) -> str:
    """Which settings gave which bytes, and how the first two versions differ."""
    lines = [f"{len(by_bytes)} different report.json files:"]
    for number, (data, group) in enumerate(by_bytes.items(), 1):
        digest = json.loads(data).get("digest")
        lines.append(f"version {number}, digest {digest}:")
        lines += [f"  {g.setting}  {g.submission}" for g in group]
    first, second, *_ = [*by_bytes, b"{}"]
    pretty = [
        json.dumps(json.loads(d), indent=1, sort_keys=True, ensure_ascii=False)
        for d in (first, second)
    ]
    lines += difflib.unified_diff(
        pretty[0].splitlines(), pretty[1].splitlines(), "version 1", "version 2", lineterm="", n=1
    )
    return "\n".join(lines)


BATCH = ("alice", "bob", "carol", "dave")
NO_FAILURES = "carol"  # her FAILURES.md is missing, so she scores less


def claim(submission: Path, student: str) -> None:
    """Make the manifest claim to be ``student``: it must change nothing."""
    manifest = submission / "pyproject.toml"
    text = manifest.read_text("utf-8")
    assert text.count(STUDENT_LINE) == 1
    manifest.write_text(text.replace(STUDENT_LINE, f'student = "{student}"'), encoding="utf-8")


def make_batch(reference: Path, folder: Path) -> Path:
    """Four students, each named by the folder; every manifest claims to be alice."""
    batch = folder / "submissions"
    for name in BATCH:
        shutil.copytree(reference, batch / name)
        claim(batch / name, "alice")
    (batch / NO_FAILURES / "FAILURES.md").unlink()
    return batch


def test_one_job_two_jobs_and_merged_shards_give_the_same_gradebook(
    reference: Path, tmp_path: Path
) -> None:
    batch = make_batch(reference, tmp_path)
    runs = {
        "jobs1": ["--jobs", "1"],
        "jobs2": ["--jobs", "2"],
        "shard1": ["--jobs", "1", "--shard", "1/2"],
        "shard2": ["--jobs", "2", "--shard", "2/2"],
    }

    def grade(item: tuple[int, tuple[str, list[str]]]) -> None:
        number, (name, extra) = item
        chosen = setting(number * 7 + 3)
        done = gradekit(
            ["grade", batch, "--out", tmp_path / name, "--label", chosen.label, *extra],
            cwd=tmp_path,
            env=chosen.environment(),
        )
        succeeded(done, f"grade {name} ({chosen})")

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(grade, enumerate(runs.items())))
    parts = [tmp_path / "shard1" / "gradebook.csv", tmp_path / "shard2" / "gradebook.csv"]
    for order, merged in ((parts, "merged.csv"), (parts[::-1], "merged-reversed.csv")):
        succeeded(
            gradekit(["gradebook", "merge", *order, "--out", tmp_path / merged], cwd=tmp_path),
            f"merge into {merged}",
        )

    one_job = (tmp_path / "jobs1" / "gradebook.csv").read_bytes()
    assert (tmp_path / "jobs2" / "gradebook.csv").read_bytes() == one_job
    assert (tmp_path / "merged.csv").read_bytes() == one_job
    assert (tmp_path / "merged-reversed.csv").read_bytes() == one_job

    rows = list(csv.DictReader(io.StringIO(one_job.decode("utf-8"))))
    assert [row["submission"] for row in rows] == sorted(BATCH)
    assert {row["status"] for row in rows} == {"graded"}
    totals = {row["submission"]: row["total"] for row in rows}
    assert totals[NO_FAILURES] != totals["alice"] == totals["bob"] == totals["dave"]
    assert [row["student"] for row in rows] == sorted(BATCH)  # the folders, not the claims
    assert len({row["digest"] for row in rows}) == len(BATCH)  # the student name is an input
    # Every report, not only the gradebook, is the same however the batch was split.
    for name in BATCH:
        shard = "shard1" if sorted(BATCH).index(name) % 2 == 0 else "shard2"
        reports = {
            (tmp_path / run / name / "report.json").read_bytes()
            for run in ("jobs1", "jobs2", shard)
        }
        assert len(reports) == 1, name


def test_report_verify_passes_on_a_fresh_report_and_fails_after_one_changed_character(
    twenty: list[Graded], tmp_path: Path
) -> None:
    fresh = twenty[0].report
    succeeded(gradekit(["report", "verify", fresh], cwd=tmp_path), "verify a fresh report")

    data = fresh.read_bytes()
    found = re.search(rb'"points":"(\d)', data)
    assert found is not None, "the report has no points value"
    at = found.start(1)
    digit = b"1" if data[at : at + 1] != b"1" else b"2"
    edited = data[:at] + digit + data[at + 1 :]
    assert sum(a != b for a, b in zip(data, edited, strict=True)) == 1
    (tmp_path / "report.json").write_bytes(edited)
    done = gradekit(["report", "verify", tmp_path / "report.json"], cwd=tmp_path)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "FAIL" in done.stderr
