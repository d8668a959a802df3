"""The copy detector's bench (bench/_copies.py): its synthetic cohort disguises every agent
(no two hold the same agent.py) and plants copies the detector finds, no more; the table
runs end to end in a fresh process and prints a row per measure."""

from __future__ import annotations

from pathlib import Path

from bench._copies import copies_table, synthetic_cohort
from bench._table import render
from grader.batch import find_copies

SIZE = 30
REPO = Path(__file__).resolve().parents[2]


def test_the_synthetic_cohort_plants_copies_the_detector_finds_and_nothing_else(
    tmp_path: Path,
) -> None:
    planted = synthetic_cohort(tmp_path / "cohort", SIZE)
    folders = sorted(path for path in planted.folder.iterdir() if path.is_dir())
    assert len(folders) == SIZE and len(planted.pairs) == 3
    agents = {(path / "lab" / "agent.py").read_bytes() for path in folders}
    assert len(agents) == SIZE  # the copies too are renamed and reordered anew
    helpers = {(path / "lab" / "tools.py").read_bytes() for path in folders}
    assert helpers == {(REPO / "lab" / "tools.py").read_bytes()}  # the hand-out, kept as is
    found = find_copies([(path.name, path) for path in folders])
    assert {(pair.a, pair.b) for pair in found.pairs} == planted.pairs
    for pair in found.pairs:
        assert all(pair.parts[part].flagged for part in ("code", "failures", "cassettes"))


def test_the_table_runs_in_a_fresh_process_and_says_what_it_found(tmp_path: Path) -> None:
    text = render(copies_table((SIZE,), tmp_path))
    assert "| find_copies: read, fingerprint, index, pair (wall) | 30 |" in text
    assert "| 3 of 3 / 0 | — | all / 0 | meets |" in text
