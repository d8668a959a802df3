"""The grader end to end: the reference lab and one bad copy of it per failure, one batch.

Every submission of ``tests.submissions`` is graded once per session, in one
``grade_batch`` with two jobs and a rubric with short limits. Each variant must lose
points on exactly the criteria its one flaw touches, keep the baseline's points on
every other, and the report must say why.

It reads ``grader.sandbox._scratch.MEMORY`` on purpose: the memory folder a scratch lives in
is one of the machine's paths no report may name.
"""

from __future__ import annotations

import csv
import json
import secrets
import socket
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from grader import GradebookRow, load_rubric, verify_report
from grader.batch._batch import discover, grade_batch
from grader.ledger import COPIES, DRAW_KEY
from grader.outputs import copy_notes, read_copies, renoted
from grader.sandbox._scratch import MEMORY
from tests.submissions import (
    BASELINE,
    CASES,
    REFERENCE,
    TIMED_OUT,
    VARIANTS,
    Context,
    Seen,
    criterion,
    details,
    lost,
    make_submission,
    short_rubric,
)

pytestmark = pytest.mark.slow

NAMES = sorted([BASELINE, *VARIANTS])
MACHINE_PATHS = (str(REFERENCE), tempfile.gettempdir() + "/", MEMORY + "/", str(Path.home()) + "/")


@dataclass(frozen=True, slots=True)
class Batch:
    """One graded batch: the gradebook rows and every report, by folder name."""

    rows: Mapping[str, GradebookRow]
    reports: Mapping[str, Mapping[str, Any]]
    order: list[str]  # the rows' submissions as grade_batch returned them
    root: Path  # the session's folder: submissions, outputs, rubric
    out: Path
    context: Context


@pytest.fixture(scope="session")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    root = tmp_path_factory.mktemp("grading")
    submissions, out = root / "submissions", root / "out"
    rubric = load_rubric(short_rubric(root))
    assert (rubric.limits.timeout_s, rubric.limits.memory_mb) == (5, 512)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        context = Context(
            listener, out, "sk-gradekit-" + secrets.token_hex(16), root / "spawned" / "marker"
        )
        context.marker.parent.mkdir()
        make_submission(submissions / BASELINE)
        for name, variant in VARIANTS.items():
            variant.mutate(make_submission(submissions / name), context)
        with pytest.MonkeyPatch.context() as env:  # the grader's own environment has a key
            env.setenv("OPENAI_API_KEY", context.secret)
            rows = grade_batch(discover([submissions]), rubric, out=out, jobs=2)
        reports = {
            row.submission: json.loads((out / row.submission / "report.json").read_bytes())
            for row in rows
            if row.status == "graded"
        }
        yield Batch(
            {row.submission: row for row in rows},
            reports,
            [row.submission for row in rows],
            root,
            out,
            context,
        )


def _points(report: Mapping[str, Any]) -> dict[str, Decimal]:
    return {c["id"]: Decimal(c["points"]) for c in report["criteria"]}


def test_the_baseline_scores_full_marks(batch: Batch) -> None:
    report = batch.reports[BASELINE]
    assert report["total"] == report["max"] == "100.00"
    assert all(
        c["points"] == c["max"] and all(k["passed"] for k in c["checks"])
        for c in report["criteria"]
    )
    assert report["findings"] == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_variant_loses_exactly_what_its_flaw_touches(batch: Batch, name: str) -> None:
    variant = VARIANTS[name]
    assert batch.rows[name].status == "graded", batch.rows[name].reason
    report, baseline = batch.reports[name], _points(batch.reports[BASELINE])
    points = _points(report)
    assert points.keys() == baseline.keys()
    assert variant.loses <= baseline.keys()
    for criterion_id, earned in points.items():
        if criterion_id in variant.loses:
            assert earned < baseline[criterion_id], criterion_id
        else:
            assert earned == baseline[criterion_id], criterion_id
    for output in ("report.json", "report.md", "results.json"):  # no path of this machine
        data = (batch.out / name / output).read_bytes()
        assert not [p for p in (*MACHINE_PATHS, str(batch.root)) if p.encode() in data]
    if variant.extra is not None:
        variant.extra(Seen(name, report, batch.reports, batch.out, batch.context))


@pytest.mark.parametrize("name", NAMES)
def test_every_report_verifies_and_every_output_agrees(batch: Batch, name: str) -> None:
    folder = batch.out / name
    ok, why = verify_report((folder / "report.json").read_bytes())
    assert ok, why
    report = batch.reports[name]
    results = json.loads((folder / "results.json").read_bytes())
    assert Decimal(str(results["score"])) == Decimal(report["total"])
    assert sum(Decimal(str(t["score"])) for t in results["tests"]) == Decimal(report["total"])
    assert results["extra_data"]["digest"] == report["digest"] == batch.rows[name].digest
    assert batch.rows[name].total == report["total"]
    assert f"**Total: {report['total']} / 100.00**" in (folder / "report.md").read_text("utf-8")


def test_a_hanging_submission_never_stops_the_batch(batch: Batch) -> None:
    assert batch.order == NAMES
    assert {row.status for row in batch.rows.values()} == {"graded"}
    assert sorted(batch.reports) == NAMES
    with (batch.out / "gradebook.csv").open(encoding="utf-8", newline="") as file:
        graded = {row["submission"]: row for row in csv.DictReader(file)}
    assert sorted(graded) == NAMES
    assert {name: row["total"] for name, row in graded.items()} == {
        name: report["total"] for name, report in batch.reports.items()
    }
    hung = batch.reports["hangs"]
    assert lost(hung, "contract_stability") == {"refund-policy"}
    assert details(hung, "contract_stability")["refund-policy"] == TIMED_OUT
    assert sorted(p.name for p in batch.out.iterdir()) == sorted(
        [*NAMES, "gradebook.csv", DRAW_KEY, COPIES]
    )


def test_the_stretch_evidence_names_the_files_and_keys_it_rests_on(batch: Batch) -> None:
    """A reviewer can check the two-providers evidence in one look: each file of the second
    set and the keys it served, every one a key that file really holds."""
    report = batch.reports[BASELINE]
    detail = details(report, "stretch_goal")["two-providers: evidence"]
    assert detail.startswith("the evidence holds: prompts served from cassettes-llm/")
    named = dict(
        part.split(": ", 1)
        for part in detail.removeprefix("the evidence holds: prompts served from ").split("; ")
    )
    assert sorted(named) == sorted(f"cassettes-llm/{case}.json" for case in CASES)
    for name, keys in named.items():
        held = json.loads((REFERENCE / name).read_text("utf-8"))["entries"]
        shown = keys.split(" and ")[0].split(", ")
        assert shown and set(shown) <= set(held), (name, keys)
    # Its write-up is judged by structure alone: the report says the points are provisional.
    assert criterion(report, "stretch_goal")["review"] is True


def test_a_forged_verdict_flags_its_gradebook_row_and_nothing_else_is_flagged(batch: Batch) -> None:
    # Two pairs of variants share code that no other variant holds, and say so at the end
    # of their reason: both copy the kit's Replay into lab/replay.py; both put a tracer
    # class of their own where the agent had Traced (a run() alike once names are by kind).
    copies = read_copies((batch.out / COPIES).read_bytes())
    assert [(pair.a, pair.b) for pair in copies.pairs] == [
        ("replay_raises_key_error", "replay_returns_empty"),
        ("traces_before_calls", "wrong_trace_keys"),
    ]
    notes = copy_notes(copies)
    flagged = {
        name for name, row in batch.rows.items() if renoted(row.reason, notes.get(name, ""), "")
    }
    assert flagged == {"forges_outcome_via_main", "forges_result_on_channel"}
    assert all(batch.rows[name].reason.endswith(note) for name, note in notes.items())
    for name in flagged:
        assert batch.rows[name].status == "graded"
        assert batch.rows[name].reason.startswith("flagged for review: "), batch.rows[name]
