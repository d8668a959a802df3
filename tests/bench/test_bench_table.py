"""The benchmark tables' number formats: what a reader quotes from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench._cutpoint import _study
from bench._grader_data import VARIANTS, copy_reference, make_batch
from bench._incidents import CASES, Case, record
from bench._table import fmt_ns


@pytest.mark.parametrize(
    ("ns", "shown"),
    [
        (999_600, "1 ms"),  # rounding up crosses into the next unit: never "1e+03 µs"
        (999_400, "999 µs"),
        (1_234, "1.23 µs"),
        (12.34, "12.3 ns"),
        (2.5e9, "2.5 s"),
    ],
)
def test_a_duration_has_three_significant_digits_in_its_unit(ns: float, shown: str) -> None:
    assert fmt_ns(ns) == shown


def test_the_cohort_bench_still_builds_its_submissions_from_the_reference(tmp_path: Path) -> None:
    """The bench edits the reference's manifest and agent by exact text: a change to the
    reference that moves that text must fail here, not first in `make bench`."""
    reference = copy_reference(tmp_path / "reference")
    made = make_batch(reference, tmp_path / "batch", len(VARIANTS))
    assert sorted(made) == sorted(variant.name for variant in VARIANTS)
    assert set(made.values()) == {1}
    unclaimed = [
        root
        for root in sorted((tmp_path / "batch").iterdir())
        if "\nstretch = []\n" in (root / "pyproject.toml").read_text("utf-8")
    ]
    assert len(unclaimed) == 1


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_mutation_study_measures_a_baseline_that_passes_the_fix(
    case: Case, tmp_path: Path
) -> None:
    """The incident table's comparison is fair: its all-stub baseline passes the guarded
    code, kills no unsafe mutant, and the cut-point test kills every one."""
    study = _study(
        case,
        record(case, tmp_path / "incident.jsonl"),
        record(case, tmp_path / "benign.jsonl", benign=True),
    )
    assert study.stub_on_fix
    assert study.unsafe > 0
    assert (study.cut_kills, study.stub_kills) == (study.unsafe, 0)
    assert not study.strict_on_fix  # why gradekit's strict full replay is shown apart
