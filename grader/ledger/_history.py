"""Why a grade changed: a student's grades in ledger order, and between two of them what
changed (the rubric, the grader, which input files) and the first point of divergence,
the first criterion and sub-check whose result differs.

``gradekit history STUDENT`` reads ``grades/ledger.jsonl`` and the reports archived under
their digests (``grades/archive/``), and shows each human review where it was made and
each grade whose new report left a review behind (``grader.ledger._reviews``); ``gradekit report
diff A B`` compares any two report.json files the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grader._late import late_from_document
from grader._text import quote
from grader.ledger._folder import LEDGER
from grader.ledger._ledger import archived, read_ledger
from grader.ledger._reviews import review_of, review_state
from grader.outputs import REPORTED, review_verdict

__all__ = ["case_snapshots", "causes", "first_divergence", "history_lines", "verdict_lines"]


def first_divergence(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The first criterion, and in it the first sub-check, whose result differs between two
    reports (in the newer report's order); "" when every result is the same."""
    before = {c.get("id"): c for c in _criteria(old)}
    for criterion in _criteria(new):
        was = before.get(criterion.get("id"))
        if was is None:
            return f"{criterion.get('id')}: a criterion the earlier rubric did not have"
        checks = {k.get("id"): k for k in _checks(was)}
        for check in _checks(criterion):
            earlier = checks.get(check.get("id"))
            now = (check.get("points"), check.get("detail"))
            if earlier is None or (earlier.get("points"), earlier.get("detail")) != now:
                if earlier is not None and earlier.get("detail") == check.get("detail"):
                    return (
                        f"{criterion.get('id')}/{check.get('id')}: the same result, "
                        f'"{check.get("detail")}", worth {earlier.get("points")} -> '
                        f"{check.get('points')} (the rubric's weights changed)"
                    )
                shown = (
                    "(not checked)"
                    if earlier is None
                    else f'{earlier.get("points")} "{earlier.get("detail")}"'
                )
                return (
                    f"{criterion.get('id')}/{check.get('id')}: {shown} -> "
                    f'{check.get("points")} "{check.get("detail")}"'
                )
        if (was.get("points"), was.get("max")) != (criterion.get("points"), criterion.get("max")):
            return (
                f"{criterion.get('id')}: {was.get('points')} / {was.get('max')} -> "
                f"{criterion.get('points')} / {criterion.get('max')}"
            )
    return ""


def causes(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    rubrics: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """What differs between two run events (or reports): rubric (and, when ``rubrics``
    holds each rubric digest's record as batch events keep it, which of its cases and
    weights changed, and the reason the new version gives), the regression sets it pins,
    the grader, input files."""
    found = []
    if (old.get("rubric_version"), old.get("rubric")) != (
        new.get("rubric_version"),
        new.get("rubric"),
    ):
        before, after = (
            _mapping((rubrics or {}).get(str(event.get("rubric")))) for event in (old, new)
        )
        found.append(
            f"rubric {old.get('rubric_id', '')} v{old.get('rubric_version')} -> "
            f"v{new.get('rubric_version')}"
            + _cases_changed(_mapping(before.get("cases")), _mapping(after.get("cases")))
        )
        found += _weights_changed(_mapping(before.get("criteria")), _mapping(after.get("criteria")))
        why = after.get("changes")
        if why:
            found.append(f"why (the rubric says): {quote(str(why))}")
        elif after and "changes" not in after:  # a batch's record: it keeps the reason given
            found.append(
                'why: the new rubric gives no reason (add changes = "..." to its [rubric] table)'
            )
    sets_before, sets_after = _mapping(old.get("sets")), _mapping(new.get("sets"))
    if sets_before != sets_after:
        found.append(
            f"regression sets {', '.join(sorted(sets_before)) or 'none'} -> "
            f"{', '.join(sorted(sets_after)) or 'none'}"
        )
    if old.get("grader") != new.get("grader"):
        found.append(f"grader {old.get('grader')} -> {new.get('grader')}")
    found += _late_changed(_mapping(old.get("late")), _mapping(new.get("late")))
    before, after = _mapping(old.get("inputs")), _mapping(new.get("inputs"))
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    if changed:
        found.append("inputs changed: " + ", ".join(changed))
    return found


def _late_changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """How the late policy's verdict changed between two runs, and what moved it."""
    if before == after:
        return []
    if not after:
        return ["late policy: none now (the penalty no longer applies)"]
    moved = [
        f"{key} {before.get(key) or '-'} -> {after.get(key) or '-'}"
        for key in ("submitted", "due", "extension")
        if before.get(key) != after.get(key)
    ]
    return [
        f"late penalty {before.get('penalty', 'none')} -> {after.get('penalty')}"
        + (f" ({'; '.join(moved)})" if moved else "")
    ]


def _late_line(run: Mapping[str, Any]) -> list[str]:
    """The late policy's verdict on a run, as one line; none without a policy."""
    late = run.get("late")
    if not isinstance(late, dict):
        return []
    try:
        return [f"    late: {late_from_document(late).cell()}"]
    except ValueError as exc:
        return [f"    late: unreadable ({exc})"]


def _cases_changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """Which cases two rubric versions differ in (their task or their expectation)."""
    if not before or not after:
        return ""
    parts = [
        f"{what}: {', '.join(ids)}"
        for what, ids in (
            ("cases changed", [c for c in after if c in before and before[c] != after[c]]),
            ("cases added", [c for c in after if c not in before]),
            ("cases removed", [c for c in before if c not in after]),
        )
        if ids
    ]
    return f" ({'; '.join(parts)})" if parts else ""


def _weights_changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Each criterion weight and named sub-check's points two rubric versions differ in,
    old -> new, in the new version's order."""
    if not before or not after:
        return []
    changed = []
    for criterion, now in after.items():
        was = _mapping(before.get(criterion))
        now = _mapping(now)
        if not was:
            changed.append(f"{criterion} (weight {now.get('weight')}): a new criterion")
            continue
        if was.get("weight") != now.get("weight"):
            changed.append(f"{criterion} {was.get('weight')} -> {now.get('weight')}")
        points_before, points_after = _mapping(was.get("points")), _mapping(now.get("points"))
        changed += [
            f"{criterion}/{name} {points_before.get(name, '-')} -> {points_after.get(name, '-')}"
            for name in sorted(points_before.keys() | points_after.keys())
            if points_before.get(name) != points_after.get(name)
        ]
    changed += [f"{criterion}: removed" for criterion in before if criterion not in after]
    return [f"weights: {'; '.join(changed)}"] if changed else []


def case_snapshots(events: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each rubric digest's record (its case digests, its criteria's weights, its reason),
    as the ledger's batch events recorded it."""
    found: dict[str, Mapping[str, Any]] = {}
    for event in events:
        rubric = _mapping(event.get("rubric")) if event.get("event") == "batch" else {}
        if isinstance(rubric.get("cases"), dict):
            found[str(rubric.get("sha256"))] = rubric
    return found


def history_lines(out: Path, student: str) -> list[str]:
    """The lines ``gradekit history`` prints for ``student`` from the grades folder ``out``:
    each grade and each review, in ledger order."""
    events = read_ledger(out / LEDGER).events
    runs = [e for e in events if e.get("event") == "run" and e.get("student") == student]
    if not runs:
        return [f"{student}: no grade in {out / LEDGER}"]
    lines = [f"{student}: {len(runs)} grade(s) in {out / LEDGER}"]
    snapshots = case_snapshots(events)
    previous: Mapping[str, Any] | None = None
    for index, event in enumerate(events):
        if event.get("student") != student:
            continue
        if event.get("event") == "review":
            lines.append(_review_line(event, previous))
        elif event.get("event") == "run":
            lines += _run_lines(
                out, runs.index(event) + 1, event, previous, events[:index], snapshots
            )
            previous = event
    return lines


def _run_lines(
    out: Path,
    number: int,
    run: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    before: Sequence[Mapping[str, Any]],
    snapshots: Mapping[str, Mapping[str, str]],
) -> list[str]:
    total = run.get("total") or str(run.get("status"))
    lines = [
        f"#{number}  ledger event {run.get('seq')}: {total}  (rubric "
        f"{run.get('rubric_id', '')} v{run.get('rubric_version')}, grader "
        f"{run.get('grader')}, report {str(run.get('report'))[:12]})"
    ]
    lines += _late_line(run)
    batch = next((e for e in reversed(before) if e.get("event") == "batch"), None)
    if batch is not None and "status" in batch:
        key = f", key {batch['idempotency_key']}" if "idempotency_key" in batch else ""
        lines.append(
            f"    batch: ledger event {batch.get('seq')}, {batch.get('status')} "
            f"({batch.get('completed')} of {batch.get('requested')} graded), by "
            f"{quote(str(batch.get('operator')))} at {batch.get('at')}{key}"
        )
    report = archived(out, str(run.get("report")))
    if previous is not None:
        for cause in causes(previous, run, snapshots) or ["nothing the ledger holds changed"]:
            lines.append(f"    changed: {cause}")
        old = archived(out, str(previous.get("report")))
        if old is not None and report is not None:
            lines.append(
                "    first divergence: "
                + (first_divergence(old, report) or "none: every result is the same")
            )
    lines += verdict_lines(report or {})
    if run.get("status") in REPORTED:
        state = review_state(before, str(run.get("student")), str(run.get("report")))
        lines += [
            f"    stale: the review of {stale.criterion} (ledger event {stale.event}) was "
            f"of report {stale.report[:12]}; review again"
            for stale in state.stale
        ]
    return lines


def verdict_lines(report: Mapping[str, Any], label: str = "    failed: ") -> list[str]:
    """Each judged check the report failed (a case's expectation, a regression item),
    after ``label``: where the run first left what it expected, both sides."""
    lines = []
    for criterion in _criteria(report):
        for check in _checks(criterion):
            if check.get("verdict") == "failed" and "expected" in check:
                lines.append(
                    f"{label}{criterion.get('id')}/{check.get('id')}: "
                    f"first divergence at {check.get('divergence')}: expected "
                    f"{check.get('expected')}; observed {check.get('observed')}"
                )
    return lines


def _review_line(event: Mapping[str, Any], run: Mapping[str, Any] | None) -> str:
    """A review as history shows it; its report is named when it is not the grade above."""
    review = review_of(event)
    report = str(event.get("report"))
    of = "" if run is not None and run.get("report") == report else f" of report {report[:12]}"
    return (
        f"    review (ledger event {review.event}){of}: {review.criterion} "
        f'{review_verdict(review)}: "{quote(review.reason)}"'
    )


def _criteria(report: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    found = report.get("criteria")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def _checks(criterion: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    found = criterion.get("checks")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
