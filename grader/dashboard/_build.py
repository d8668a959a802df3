"""``gradekit dashboard GRADES --out SITE``: the cohort at a glance, as a static site.

One page for the cohort (``index.html``) and one per submission
(``students/<name>.html``), with the style sheet and scripts beside them in
``assets/``: it opens from the file system, with no server and nothing fetched from
the network. It is rebuilt from the grades folder alone (``grader.dashboard._data``);
the same folder gives byte-identical files. The cohort-wide charts are Vega-Altair specs
rendered to SVG offline (``grader.dashboard._charts``); a student's timeline is drawn in
Python (``grader.dashboard._svg``), so no chart engine starts per page. Pages are Jinja2
templates with autoescaping (``grader.dashboard._site``): both are the
``gradekit[dashboard]`` extra, so grading itself never needs them.

The cohort page stays small whatever the cohort's size: each list on it (every
submission, the students x cases grid, the findings, the review queue, the changed
grades) shows its first ``PAGE_ROWS`` rows, and every row of every list is in
``assets/rows.js``, loaded by a ``<script src>`` (which works from ``file://``, where a
fetch does not), that the page's script pages, filters and sorts in the browser.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import re
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import commands, fsync_folder
from grader._text import flagged
from grader.dashboard._charts import (
    DashboardUnavailable,
    Figure,
    cents,
    findings_by_kind,
    grade_timeline,
    points_lost,
    score_distribution,
)
from grader.dashboard._data import _KINDS, FULL, Cohort, Submission, decimal, load_cohort
from grader.dashboard._site import ROWS_SCRIPT, SCRIPT, STYLE, TEMPLATES
from grader.ledger import GRADEBOOK
from grader.outputs import PART_WORDS, PARTS, REPORTED

__all__ = ["build_dashboard"]

MARKER = "assets/dashboard.css"  # what says a folder is a dashboard this command may rewrite
ROWS = "assets/rows.js"  # every row of every list of the cohort page
PAGE_ROWS = 100  # the rows of a list the cohort page holds, and one page of it in the browser
_NUMERIC = frozenset({"total", "final", "max"})
_PENDING = "pending: "
_STALE = re.compile(r"NEEDS A NEW REVIEW: (\S+) was reviewed")


def build_dashboard(grades: Path, out: Path) -> list[Path]:
    """Write the site for ``grades`` into ``out``; return the files written, in order."""
    jinja2 = _jinja()
    if not (grades / GRADEBOOK).is_file():
        grade = commands.GRADE_INTO(submissions="SUBMISSIONS", out=str(grades))
        raise UsageError(
            f"{grades} has no {GRADEBOOK}: grade first with `{grade}`, then "
            "build the dashboard from that folder"
        )
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: give the folder the site goes into")
    if out.exists() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UsageError(
            f"{out} is not empty and is not a dashboard: give --out a new folder "
            "(the dashboard replaces what it wrote there before, nothing else)"
        )
    try:
        cohort = _read(grades)
        return _build(jinja2, cohort, grades, out)
    finally:
        gc.unfreeze()


def _read(grades: Path) -> Cohort:
    """The cohort, read with the cyclic garbage collector paused, then kept out of its
    sight: at ten thousand submissions it is millions of long-lived objects (parsed JSON,
    no cycles) that each full collection would walk again, a third of the reading's CPU
    time and more of the pages'. The caller unfreezes them when the site is written."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        cohort = load_cohort(grades)
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    return cohort


def _build(jinja2: Any, cohort: Cohort, grades: Path, out: Path) -> list[Path]:
    environment = jinja2.Environment(
        loader=jinja2.DictLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    index, rows = _cohort_page(environment, cohort, grades)
    pages = {Path("index.html"): index}
    for submission in cohort.submissions:
        pages[Path("students") / f"{submission.slug}.html"] = _student_page(
            environment, cohort, submission
        )
    files = {
        Path("assets/dashboard.css"): STYLE.encode("utf-8"),
        Path("assets/dashboard.js"): SCRIPT.encode("utf-8"),
        Path(ROWS): rows.encode("utf-8"),
        **{path: page.encode("utf-8") for path, page in pages.items()},
    }
    folders: set[Path] = set()
    for relative, data in sorted(files.items()):
        target = out / relative
        if target.parent not in folders:
            target.parent.mkdir(parents=True, exist_ok=True)
            folders.add(target.parent)
        if not target.is_file() or target.read_bytes() != data:
            _write(target, data)
    for folder in sorted(folders):
        fsync_folder(folder)
    _forget_others(out, set(files))
    return [out / relative for relative in sorted(files)]


def _write(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` through a temporary file, so a reader never sees
    half a page; without ``write_atomic``'s fsync of each file (ten thousand pages would
    wait on the disk for most of a build): the site is rebuilt from the grades folder, so
    a crash costs a rebuild, never a grade, and the folders are synced once at the end."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)  # a site to share: readable by the web server and the TAs
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jinja() -> Any:
    try:
        return importlib.import_module("jinja2")
    except ImportError:
        raise DashboardUnavailable(
            "the dashboard needs Jinja2 and the chart libraries, the gradekit[dashboard] "
            "extra: pip install 'gradekit[dashboard]' (make test installs it)"
        ) from None


def _forget_others(out: Path, kept: set[Path]) -> None:
    """Remove the pages of an earlier build that this one did not write (a submission that
    is gone): the folder holds exactly this site."""
    students = out / "students"
    for page in sorted(students.glob("*.html")) if students.is_dir() else []:
        if page.relative_to(out) not in kept:
            page.unlink()


def _cohort_page(environment: Any, cohort: Cohort, grades: Path) -> tuple[str, str]:
    """The cohort page and ``assets/rows.js``: every row of its lists, the page holding
    the first ``PAGE_ROWS`` of each."""
    reported = [s for s in cohort.submissions if s.reported]
    finals = [_final(s) for s in reported]
    known = [value for value in finals if value is not None]
    waiting = [(s, why) for s in cohort.submissions if (why := _review_reason(s))]
    # What needs a person now first: a submission flagged for review (it looks copied, an
    # entry of its summary repeats the hand-out's or another, it reaches for the harness),
    # then a stale review or a degraded grade; then the routine reviews the rubric asks
    # for; each in gradebook order.
    copied = {name for pair in cohort.copies for name in (pair.a, pair.b)}
    review = sorted(
        waiting,
        key=lambda item: (
            item[0].row.submission not in copied and not flagged(item[0].row.reason),
            not _urgent(item[0]),
        ),
    )
    changed = [s for s in cohort.submissions if _changed(s, cohort.latest_batch)]
    queue = review_queue(cohort)
    summary = [
        ("Submissions", "submissions", str(len(cohort.submissions))),
        ("Graded", "graded", str(len(reported))),
        ("Not graded", "not-graded", str(len(cohort.submissions) - len(reported))),
        ("Mean final", "mean", cents(sum(known, Decimal(0)) / len(known)) if known else "—"),
        ("Median final", "median", cents(statistics.median(known)) if known else "—"),
        ("Maximum", "max", cents(cohort.maximum)),
        ("To review", "review", str(len(review))),
        ("Act now", "urgent", str(sum(1 for s, _ in review if _urgent(s)))),
        ("Reviews pending", "pending", str(queue.rows)),
        ("Possible copies", "copies", str(len(cohort.copies))),
        ("Changed", "changed", str(len(changed))),
    ]
    # A roster's names and a late policy's penalties are columns where some row has them.
    named = any(s.row.name for s in cohort.submissions)
    late = any(s.row.late for s in cohort.submissions)
    columns = [
        ("submission", "Submission", False),
        ("student", "Student", False),
        *([("name", "Name", False)] if named else []),
        ("status", "Status", False),
        ("total", "Total", True),
        ("review", "Review", False),
        *([("penalty", "Late penalty", True)] if late else []),
        ("final", "Final", True),
        ("max", "Max", True),
        *((cid, title, True) for cid, title, _ in cohort.criteria),
        ("reason", "Reason", False),
    ]
    kinds = [kind for kind, _ in _KINDS] + ["other"]
    found: dict[str, int] = {}
    for kind, _, _ in cohort.findings:
        found[kind] = found.get(kind, 0) + 1
    counts = [(kind, found.get(kind, 0)) for kind in kinds]
    slugs = {s.row.submission: s.slug for s in cohort.submissions}
    macros = environment.get_template("rows.html").make_module(
        {
            "columns": columns,
            "cell": _cell,
            "full": FULL,
            "urgent": _urgent,
            "slugs": slugs,
            "parts": PARTS,
            "words": PART_WORDS,
        }
    )
    lists = {
        "submissions": _rows(macros.submission, [(s,) for s in cohort.submissions]),
        "grid": _rows(macros.grid, [(s,) for s in cohort.submissions]),
        "findings": _rows(macros.finding, list(cohort.findings)),
        "review": _rows(macros.waiting, review),
        "changed": _rows(macros.changed, [(s,) for s in changed]),
    }
    if cohort.copies:  # a list of its own only when there is a pair: rows.js keeps its lists
        lists["copies"] = _rows(macros.copy, [(pair,) for pair in cohort.copies])
    page: str = environment.get_template("cohort.html").render(
        root="",
        cohort=cohort,
        source=os.path.basename(os.path.normpath(grades)) or "grades",
        reported=len(reported),
        summary=summary,
        columns=columns,
        statuses=sorted({s.row.status for s in cohort.submissions}),
        first={name: rows[:PAGE_ROWS] for name, rows in lists.items()},
        total={name: len(rows) for name, rows in lists.items()},
        page_rows=PAGE_ROWS,
        queue=queue,
        distribution=score_distribution(known, cohort.maximum) if cohort.maximum > 0 else None,
        lost=points_lost(_losses(cohort)),
        kinds=findings_by_kind([(kind, n) for kind, n in counts if n]),
    )
    data = json.dumps(
        {name: "".join(rows) for name, rows in lists.items()},
        ensure_ascii=True,
        sort_keys=True,
        separators=(",", ":"),
    )
    return page, ROWS_SCRIPT.format(rows=data)


def _rows(macro: Callable[..., Any], items: Sequence[tuple[Any, ...]]) -> list[str]:
    """Each item's row, as the cohort page and ``rows.js`` both hold it."""
    return [str(macro(*item)) for item in items]


@dataclass(frozen=True, slots=True)
class Queue:
    """What is left to review, per criterion, as the gradebook's review cells say it."""

    criteria: tuple[tuple[str, str, int, int], ...]  # (id, title, pending, to do again)
    rows: int  # the rows with at least one review pending or to do again


def review_queue(cohort: Cohort) -> Queue:
    """Per criterion (rubric order, then any other the cells name, sorted), the rows whose
    ``review`` cell lists it ``pending:`` and those that say it ``NEEDS A NEW REVIEW``."""
    pending: dict[str, int] = {}
    stale: dict[str, int] = {}
    rows = 0
    for submission in cohort.submissions:
        waiting, again = pending_reviews(submission.row.review)
        for cid in waiting:
            pending[cid] = pending.get(cid, 0) + 1
        for cid in again:
            stale[cid] = stale.get(cid, 0) + 1
        rows += bool(waiting or again)
    titles = [(cid, title) for cid, title, _ in cohort.criteria]
    known = {cid for cid, _ in titles}
    titles += [(cid, cid) for cid in sorted((pending.keys() | stale.keys()) - known)]
    return Queue(
        tuple((cid, title, pending.get(cid, 0), stale.get(cid, 0)) for cid, title in titles), rows
    )


def pending_reviews(cell: str) -> tuple[list[str], list[str]]:
    """The criteria a gradebook ``review`` cell lists as pending, and those it says need a
    new review (reviewed on an earlier report only)."""
    waiting: list[str] = []
    again: list[str] = []
    for part in cell.split("; "):
        if part.startswith(_PENDING):
            waiting += [cid for cid in part[len(_PENDING) :].split(", ") if cid]
        elif match := _STALE.match(part):
            again.append(match.group(1))
    return waiting, again


def _student_page(environment: Any, cohort: Cohort, submission: Submission) -> str:
    timeline: Figure | None = None
    if submission.history and cohort.maximum > 0:
        # Each grading's final grade: its total with its report's current reviews, so the
        # latest point is the gradebook's final.
        timeline = grade_timeline(
            [
                (
                    f"#{g.number} (event {g.seq})",
                    g.final,
                    "; ".join(g.causes)
                    or ("first grade" if g.number == 1 else "no change recorded"),
                )
                for g in submission.history
            ],
            cohort.maximum,
            reviewed=[(g.total, g.reviewed) for g in submission.history],
        )
    name = submission.row.submission
    slugs = {s.row.submission: s.slug for s in cohort.submissions}
    copies = [
        (pair.other(name), slugs.get(pair.other(name), ""), pair)
        for pair in cohort.copies
        if name in (pair.a, pair.b)
    ]
    page: str = environment.get_template("student.html").render(
        root="../",
        s=submission,
        report=_report_view(submission.report),
        calls=submission.calls,
        timeline=timeline,
        copies=copies,
        parts=PARTS,
        words=PART_WORDS,
    )
    return page


def _report_view(report: Any) -> dict[str, Any] | None:
    """The report's parts the page shows, with what each criterion lost."""
    if not isinstance(report, dict):
        return None
    criteria = []
    for criterion in report.get("criteria", []):
        if not isinstance(criterion, dict):
            continue
        points, maximum = (decimal(criterion.get(k)) for k in ("points", "max"))
        criteria.append(
            {
                "id": str(criterion.get("id", "")),
                "title": str(criterion.get("title", "")),
                "points": str(criterion.get("points", "")),
                "max": str(criterion.get("max", "")),
                "lost": cents(maximum - points)
                if points is not None and maximum is not None
                else "?",
                "review": criterion.get("review") is True,
                "verdict": str(criterion.get("verdict", "")),
                "advice": [str(a) for a in criterion.get("advice", [])],
                "checks": [
                    {
                        "id": str(k.get("id", "")),
                        "passed": k.get("passed") is True,
                        "points": str(k.get("points", "")),
                        "max": str(k.get("max", "")),
                        "detail": str(k.get("detail", "")),
                    }
                    for k in criterion.get("checks", [])
                    if isinstance(k, dict)
                ],
            }
        )
    return {
        "criteria": criteria,
        "total": str(report.get("total", "")),
        "max": str(report.get("max", "")),
        "findings": [str(f) for f in report.get("findings", [])],
    }


def _cell(submission: Submission, column: str) -> str:
    """A table cell, exactly as the gradebook has it."""
    row = submission.row
    if column in row.criteria:
        return row.criteria[column]
    value: str = getattr(row, column, "")
    return value


def _final(submission: Submission) -> Decimal | None:
    return decimal(submission.row.final or submission.row.total)


def _losses(cohort: Cohort) -> list[tuple[str, str, Decimal, Decimal]]:
    """Per criterion, the points the graded submissions lost and could have had, after
    review: a review's override counts, as it does in the gradebook's final."""
    reported = [s for s in cohort.submissions if s.reported]
    found = []
    for cid, title, maximum in cohort.criteria:
        if maximum <= 0:  # no report says what it was out of: nothing to count against
            found.append((cid, title, Decimal(0), Decimal(0)))
            continue
        got = [s.points(cid) for s in reported]
        lost = sum(
            (max(maximum - points, Decimal(0)) for points in got if points is not None), Decimal(0)
        )
        found.append((cid, title, lost, maximum * len(reported)))
    return found


def _review_reason(submission: Submission) -> str:
    """Why a person must look at this submission, or "" when nobody needs to."""
    row = submission.row
    if row.status == "degraded":
        return f"degraded: {row.reason}" if row.reason else "degraded"
    if row.status in REPORTED and row.reason:
        return row.reason
    if "NEEDS A NEW REVIEW" in row.review or "pending:" in row.review:
        return row.review
    return ""


def _urgent(submission: Submission) -> bool:
    """Not a routine review: a stale review, a degraded grade or one flagged for review."""
    row = submission.row
    return (
        row.status == "degraded"
        or (row.status in REPORTED and bool(row.reason))
        or "NEEDS A NEW REVIEW" in row.review
    )


def _changed(submission: Submission, latest: int | None) -> bool:
    """The latest grade is of the latest batch and differs from the one before it."""
    change = submission.change
    if change is None or latest is None or change.current.seq < latest:
        return False
    return (change.previous.total, change.previous.status) != (
        change.current.total,
        change.current.status,
    )
