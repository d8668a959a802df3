"""The growth bench's pieces: the synthetic cohort (bench/_cohort.py) is a grades folder the
grader's own commands accept, byte for byte the same every time, and the growth section
(bench/_growth.py) runs end to end through bench/grader.py, printing a row per step."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench._cohort import synthetic_grades
from bench._growth import BASE, FASTER, LINEAR, Cost, Step, _median, verdict
from grader.cli import main
from grader.ledger import apply_reviews, read_ledger
from grader.outputs import read_gradebook

REPO = Path(__file__).resolve().parents[2]
TIME = re.compile(r"(≤ )?[0-9.]+ (ns|µs|ms|s)( \((≤ 0|[0-9.]+ (ns|µs|ms|s))\))?")
SIZE = 20  # a cohort of 20 has one of each kind of row: ungradable, reviewed, stale, regraded


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_the_synthetic_cohort_verifies_with_the_grader_s_own_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grades = tmp_path / "grades"
    synthetic_grades(grades, SIZE)
    assert main(["ledger", "verify", str(grades)]) == 0
    reviewed = sorted(
        {
            str(e["submission"])
            for e in read_ledger(grades / "ledger.jsonl").events
            if e.get("event") == "review"
        }
    )
    sample = sorted({*reviewed, "student-00000", "student-00019"})
    files = [
        grades / folder / name for folder in sample for name in ("report.json", "results.json")
    ]
    files += sorted((grades / "archive").glob("*.json"))
    assert main(["report", "verify", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok  ") == len(files) + 1, out

    rows = list(csv.DictReader(io.StringIO((grades / "gradebook.csv").read_text("utf-8"))))
    assert [row["submission"] for row in rows] == [f"student-{n:05d}" for n in range(SIZE)]
    assert {row["status"] for row in rows} == {"graded", "ungradable"}
    assert len({row["total"] for row in rows if row["status"] == "graded"}) > 5  # varied
    reviews = " ".join(row["review"] for row in rows)
    for kind in ("confirmed by", "->", "NEEDS A NEW REVIEW", "pending: written_summary"):
        assert kind in reviews, kind
    runs: dict[str, int] = {}
    for event in read_ledger(grades / "ledger.jsonl").events:
        if event.get("event") == "run":
            runs[str(event["student"])] = runs.get(str(event["student"]), 0) + 1
    assert sorted(runs.values())[-1] == 2 and len(runs) == SIZE  # some graded twice

    # The review and final cells are what `gradekit grade` brings them up to date to.
    before = (grades / "gradebook.csv").read_bytes()
    apply_reviews(grades, read_gradebook(before)[1])
    assert (grades / "gradebook.csv").read_bytes() == before


def test_the_synthetic_cohort_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    synthetic_grades(tmp_path / "here", SIZE)
    script = (
        "import sys; from pathlib import Path; from bench._cohort import synthetic_grades; "
        "synthetic_grades(Path(sys.argv[1]), int(sys.argv[2]))"
    )
    environment = {
        **os.environ,
        "PYTHONHASHSEED": "12345",
        "TZ": "Pacific/Kiritimati",
        "LC_ALL": "C",
    }
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "there"), str(SIZE)],
        cwd=REPO,
        env=environment,
        check=True,
    )
    here, there = _tree(tmp_path / "here"), _tree(tmp_path / "there")
    assert len(here) > 5 * SIZE
    assert sorted(here) == sorted(there)
    assert [name for name in here if here[name] != there[name]] == []


def test_a_cohort_is_written_into_a_new_folder_only(tmp_path: Path) -> None:
    synthetic_grades(tmp_path / "grades", 3)
    before = _tree(tmp_path / "grades")
    with pytest.raises(ValueError, match="already holds a ledger"):
        synthetic_grades(tmp_path / "grades", 3)
    assert _tree(tmp_path / "grades") == before


def _step(*cpu: float, graded: int = 0) -> Step:
    costs = tuple(Cost(wall_ns=value, cpu_ns=value) for value in cpu)
    return Step(
        "merge",
        "gradekit gradebook merge",
        "cohort submission",
        (200, 2_000, 10_000),
        costs[1:],
        costs[0],
        graded,
    )


def test_the_verdict_takes_the_start_up_off_and_tells_linear_from_faster() -> None:
    start = 400e6  # a command's fixed cost, timed on the cohort of BASE submissions
    linear = [start + 1e6 * (size - BASE) for size in (200, 2_000, 10_000)]
    assert verdict(_step(start, *linear)) == LINEAR
    quadratic = [start + 1e3 * (size - BASE) ** 2 for size in (200, 2_000, 10_000)]
    assert verdict(_step(start, *quadratic)) == FASTER
    # Start-up included, the quadratic step's cost per submission would fall from 200 to
    # 2 000: only with the fixed cost taken off does it show.
    assert quadratic[1] / 2_000 < quadratic[0] / 200
    # Under the noise floor, a difference is the floor: no verdict from noise at 200.
    assert verdict(_step(start, start + 1e6, start + 60e6, start + 300e6)) == LINEAR
    stopped = _step(start, *linear)
    stopped = Step(
        stopped.key,
        stopped.name,
        stopped.item,
        stopped.sizes,
        (*stopped.costs[:2], Cost(problem="stopped after 600 s")),
        stopped.base,
    )
    assert verdict(stopped) == FASTER
    # A graded submission's cost may not grow with the cohort at all.
    assert verdict(_step(0, 4e9, 4.4e9, 4.8e9, graded=4)) == LINEAR
    assert verdict(_step(0, 4e9, 4.4e9, 8e9, graded=4)) == FASTER


def test_a_step_timed_one_run_at_a_time_takes_each_figure_s_median() -> None:
    # grade and dashboard change what they write to, so each run is timed alone (a fresh
    # copy, an empty folder): one run caught by the machine's noise must not be the figure.
    runs = [
        Cost(wall_ns=9e9, cpu_ns=1e9, own_ns=5e8),
        Cost(wall_ns=2e9, cpu_ns=7e9, own_ns=1e8),
        Cost(wall_ns=3e9, cpu_ns=2e9, own_ns=9e8),
    ]
    assert _median(runs) == Cost(wall_ns=3e9, cpu_ns=2e9, own_ns=5e8)
    assert _median([*runs, Cost(problem="stopped after 600 s")]).problem == "stopped after 600 s"


@pytest.mark.slow
def test_the_growth_section_runs_end_to_end_and_prints_every_step(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "grader.py"),
            "--growth",
            "--quick",
            "--sizes",
            "5,10,20",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header[2:5] == ["at 5", "at 10", "at 20"] and header[-1] == "children a grade"
    steps = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert steps[0][-1].isdigit() and int(steps[0][-1]) > 5, steps[0]  # grade's own runs
    assert all(cells[-1] == "—" for cells in steps[1:]), steps
    names = [cells[0] for cells in steps]
    expected = (
        "gradekit grade:",
        "its own process (gradebook, ledger, reviews)",
        "gradekit ledger verify",
        "gradekit history student-",
        "gradekit gradebook merge (",
        "gradekit dashboard",
        "gradekit review student-",
        "gradekit history student-",
    )
    assert len(names) == len(expected) and names[-1].endswith(" ÷ ledger verify"), names
    assert all(name.startswith(step) for name, step in zip(names, expected, strict=True)), names
    for cells in steps[:7]:  # every step ran at every size: a time in each cell, no error
        assert len(cells) == len(header)
        unavailable = cells[0] == "gradekit dashboard" and "gradekit[dashboard]" in cells[2]
        assert unavailable or all(TIME.fullmatch(cell) for cell in cells[2:5]), cells
    assert "Problems:" not in done.stdout
    assert not list(tmp_path.iterdir())  # everything it wrote was in its temporary folder
