"""The bench's CPU-a-grade comparison: each side measured alike, in a process of its own,
and a clone without the baseline told how to get it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import _baseline
from bench._grader_data import REPO
from tests.submissions import REFERENCE, make_submission


def test_a_clone_without_the_baseline_says_how_to_fetch_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_baseline, "BASELINE", "0" * 40)
    rows = _baseline.baseline_rows(REFERENCE, tmp_path, "process", 1)
    assert len(rows) == 1 and "git fetch --unshallow" in rows[0].median
    assert not (tmp_path / f"baseline-{'0' * 40}").exists() or not any(
        (tmp_path / f"baseline-{'0' * 40}").iterdir()
    )


@pytest.mark.slow
def test_a_grade_measured_in_its_own_process_counts_its_children(tmp_path: Path) -> None:
    tmp_path.chmod(0o711)
    lab = make_submission(tmp_path / "lab")
    got = _baseline._measure(REPO, lab, tmp_path / "scratch", "process", 1)
    assert not isinstance(got, str), got
    spent, children = got
    assert len(spent) == 1 and spent[0] > 1e6  # a grade of dozens of runs: milliseconds
    assert len(children) == 1 and children[0] > 5
