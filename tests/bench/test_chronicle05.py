"""agent-chronicle 0.5.0 beside 1.x: its own environment, a child that prints JSON, the rows.

The runs that need 0.5.0 itself use the environment ``make bench`` builds
(``.venv-chronicle05``) and are skipped where it was never built.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import _chronicle05
from bench._cutpoint import _overhead, _ratio_row
from bench._data import prompts
from bench._timing import Reps, Stats

TINY = Reps(samples=3, inner=4, warmup=1)
needs_05 = pytest.mark.skipif(
    not (_chronicle05.VENV / "bin" / "python").exists(),
    reason="no .venv-chronicle05: make bench builds it",
)


@needs_05
def test_the_child_times_both_stores_of_0_5_0_on_the_prompts_given() -> None:
    measured = _chronicle05.overhead(TINY, prompts(TINY.calls, tag="test"))
    assert isinstance(measured, _chronicle05.Overhead), measured
    assert measured.name == "agent-chronicle 0.5.0"
    for stats in (measured.jsonl, measured.memory):
        assert stats.samples == TINY.samples
        assert 0 < stats.median_ns <= stats.p90_ns
    rows = measured.rows("16")
    assert [row.operation.split(",")[2].strip() for row in rows] == [
        "JSONL store: each crossing written to a file before the call returns",
        "no store: kept in memory only",
    ]


def test_a_missing_environment_is_said_not_raised(tmp_path: Path) -> None:
    missing = tmp_path / ".venv-chronicle05"
    said = _chronicle05.overhead(TINY, prompts(TINY.calls), venv=missing)
    assert said == "not installed: .venv-chronicle05 is missing (make bench builds it)"


def test_too_few_prompts_fail_in_the_child_and_say_why(tmp_path: Path) -> None:
    if not (_chronicle05.VENV / "bin" / "python").exists():
        pytest.skip("no .venv-chronicle05: make bench builds it")
    with pytest.raises(RuntimeError, match=r"per_call needs 16 inputs, got 3"):
        _chronicle05.overhead(TINY, prompts(3))


def _stats(median_ns: float) -> Stats:
    return Stats(median_ns, median_ns, 1)


@pytest.mark.parametrize(
    ("ours_ns", "shown", "verdict"),
    [
        (3_300, "1.1.1 x10.0 · 0.5.0 JSONL x9.4 · 0.5.0 no store x4.8", "meets"),
        (3_400, "1.1.1 x9.7 · 0.5.0 JSONL x9.1 · 0.5.0 no store x4.7", "misses"),
    ],
)
def test_the_ratio_row_shows_both_versions_and_judges_against_1_x(
    ours_ns: float,
    shown: str,
    verdict: str,
) -> None:
    peers = [
        ("1.1.1", _stats(33_000)),
        ("0.5.0 JSONL", _stats(31_000)),
        ("0.5.0 no store", _stats(16_000)),
    ]
    row = _ratio_row("gradekit Recorder", _stats(ours_ns), peers, "5 150")
    assert (row.median, row.target, row.verdict) == (shown, ">= x10 against 1.x", verdict)


def test_without_1_x_the_ratio_row_shows_0_5_0_and_judges_nothing() -> None:
    row = _ratio_row("gradekit Recorder", _stats(1_000), [("0.5.0 JSONL", _stats(31_000))], "1")
    assert (row.median, row.verdict) == ("0.5.0 JSONL x31.0", "—")


def test_the_cut_point_overhead_rows_name_the_recorder_and_each_version(tmp_path: Path) -> None:
    rows, notes = _overhead(TINY, tmp_path)
    names = [row.operation for row in rows]
    assert names[0].startswith("gradekit Recorder.complete, new prompt, RECORD overhead")
    assert names[1].startswith("gradekit IncidentRecorder model crossing")
    assert any(name.startswith("agent-chronicle 1.") for name in names)  # a row or 'not measured'
    if (_chronicle05.VENV / "bin" / "python").exists():
        assert sum(name.startswith("agent-chronicle 0.5.0 wrap_llm") for name in names) == 2
        ratios = [row for row in rows if row.operation.startswith("agent-chronicle / ")]
        assert [row.operation.split(" / ")[1].split(" recording")[0] for row in ratios] == [
            "gradekit Recorder",
            "gradekit IncidentRecorder, model crossing",
        ]
        assert all("0.5.0 JSONL x" in row.median for row in ratios)
        assert notes and "0.5.0" in notes[0]


def test_an_environment_without_the_package_is_said_not_raised(tmp_path: Path) -> None:
    venv = tmp_path / ".venv-chronicle05"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    said = _chronicle05.overhead(TINY, prompts(TINY.calls), venv=venv)
    assert said == (
        "not installed in .venv-chronicle05 (No module named 'chronicle'; make bench installs it)"
    )
