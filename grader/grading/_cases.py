"""Saved evaluation cases run against one submission before any of them is promoted: the
article's evaluation batch over selected case ids (``gradekit case run``).

A case is run as a regression item is (its task, the agent it asks, the world of tool
reads it starts from), in the sandbox, served from the submission's own recordings of
its task, and judged against the case's expectation as an item is. Its recordings are the
submission's recordings of the rubric case that asks the same task, where one does (a
case saved from a run of a rubric case), else ``cases/<case-id>`` (``make record
ARGS='--case cases/<case-id>'`` records it). Nothing here reaches a grade: the caller
keeps the verdicts in the asset ledger, never in the grades folder.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

from grader._model import CheckResult, Divergence
from grader.grading._draws import draw
from grader.grading._inputs import _recording_names
from grader.grading._reading import _item_recordings
from grader.grading._regression import run_items
from grader.regression import Item
from grader.rubric import Case, Rubric
from grader.sandbox import PROCESS_WALL, LaidOut, Sandbox, Wall, scratch_root
from grader.scoring import judged_item
from grader.submission import ManifestError, load_manifest

__all__ = ["CASES", "case_recording", "run_cases"]

CASES = "cases"  # a saved case's recordings: <cassettes>/cases/<case-id>.json, and fixtures


def case_recording(item: Item, rubric: Rubric) -> str:
    """The name the submission's recordings of a case go by: the rubric case that asks the
    same task (its recordings answer the same prompts), else ``cases/<case-id>``."""
    same = next((case.id for case in rubric.cases if case.task == item.task), None)
    return same or f"{CASES}/{item.id}"


def run_cases(
    root: Path, items: Sequence[Item], rubric: Rubric, *, wall: Wall = PROCESS_WALL
) -> dict[str, CheckResult]:
    """Each case (as an ``Item``) run against the submission at ``root`` behind ``wall``
    and judged: case id -> its check (``verdict``, and where it failed its first point of
    divergence). A submission whose manifest cannot be read runs nothing: every case says
    so, with the fix."""
    try:
        manifest = load_manifest(root)
    except ManifestError as exc:
        return {item.id: _not_run(item.id, str(exc)) for item in items}
    names = {item.id: case_recording(item, rubric) for item in items}
    asked = tuple(
        Case(name, item.task) for item, name in ((item, names[item.id]) for item in items)
    )
    recordings, _ = _item_recordings(root, manifest, asked)  # a bad file: a miss says so
    drawn = draw(None, "case run")
    with tempfile.TemporaryDirectory(
        prefix="gradekit-cases-", dir=scratch_root(), ignore_cleanup_errors=True
    ) as folder:
        scratch = Path(folder)
        scratch.chmod(0o711)  # searchable, not listable: a root grader's children are 65534
        hidden = tuple(_recording_names(manifest, (*rubric.cases, *asked)))
        sandbox = Sandbox(root, scratch / "cases", rubric.limits, wall, LaidOut(hidden=hidden))
        try:
            runs = run_items(
                sandbox,
                items,
                names,
                manifest.agent,
                recordings,
                label=drawn.labels[0],
                hashseed=drawn.seeds[0],
                clock=drawn.clock,
                what="case",
            )
        finally:
            sandbox.close()
    return {item.id: judged_item(item, runs.get(item.id)) for item in items}


def _not_run(case_id: str, why: str) -> CheckResult:
    return CheckResult(
        case_id,
        False,
        Decimal("0.00"),
        Decimal("0.00"),
        why,
        judged=True,
        divergence=Divergence("run", "a run of the case", why),
    )
