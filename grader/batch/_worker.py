"""One submission's grading in a process of its own, forked by the batch's zygote.

The batch has ``grader.batch._zygote`` fork one worker per submission, each in its own
session, and hands it one JSON request on standard input: where the submission is,
who it is, the rubric as data (``grader.rubric.rubric_document``, checked again on
arrival by the rubric file's own validators), the reviews the ledger holds of the
student's reports, where its outputs go. The worker caps its own address space at the
rubric's ``grader_memory_mb``, grades (the submission's code runs only in the sandbox's
children, never in this process), writes the submission's outputs once through the
grades folder's home (``grader.ledger.write_submission``; results.json with the current
reviews of its report) and answers with one JSON line on standard output: its gradebook
row. Nothing is pickled, and the worker imports grader code only (plus the instructor's
custom checks, from the folders the batch names).

A worker that runs out of memory exits with ``EXIT_OUT_OF_MEMORY`` and no
traceback; any other failure while grading is an error row. ``ps -o comm`` shows a
worker as ``gradekit FOLDER``.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import json
import os
import resource
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any, get_args

from gradekit import GradekitError
from gradekit.internal import commands
from grader._cache import Derived
from grader._late import late_from_document
from grader._model import CONTRACT, Report
from grader._text import FLAGGED, TEXT_LIMIT, quote
from grader.grading import MissingPackage, grade_submission
from grader.ledger import current_reviews, write_submission
from grader.outputs import GradebookRow, Status, error_row, points_text, report_digest
from grader.rubric import Rubric, load_custom_check, rubric_document, rubric_from_document
from grader.sandbox import SubmissionTooLarge, wall_named

__all__ = [
    "CASE",
    "EXIT_BAD_REQUEST",
    "EXIT_ORPHANED",
    "EXIT_OUT_OF_MEMORY",
    "WorkerRequest",
    "decode_request",
    "decode_row",
    "die_with",
    "encode_request",
    "encode_row",
    "grade",
    "limit_memory",
    "main",
]

# A worker's own exit statuses, read only by the batch (not the command line's, grader._exits).
EXIT_BAD_REQUEST = 2
EXIT_OUT_OF_MEMORY = 3
EXIT_ORPHANED = 4
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class WorkerRequest:
    """What the batch asks one worker to do."""

    parent: int  # the pid of the process that started this worker: it dies with it
    root: Path  # the submission folder
    folder: str  # its name: the gradebook's ``submission`` column
    student: str  # its identity, decided by the batch (roster or folder name)
    out: Path  # where this submission's outputs go
    scratch: Path  # a private, empty folder
    label: str | None  # the primary run's label; None: drawn by the worker
    isolation: str  # the name of the wall its code runs behind (grader.sandbox.wall_named)
    rubric: Rubric
    check_folders: Mapping[str, str]  # custom check -> the folder it is imported from
    draw_key: bytes = b""  # the batch's secret for draws (grader.ledger.draw_key); b"":
    # drawn afresh
    # the ledger's review events of this student, in ledger order, as the batch read them
    reviews: Sequence[Mapping[str, Any]] = ()
    derived: Path | None = None  # where the batch keeps what gradings derive from files'
    # bytes (grader._cache.Derived): None, nothing is kept
    # what the lab's late policy made of the submission's time (grader._late.Late's
    # document), decided by the batch; None: the lab has no late policy
    late: Mapping[str, Any] | None = None


def encode_request(request: WorkerRequest) -> bytes:
    """The request as one JSON document."""
    return json.dumps(
        {
            "parent": request.parent,
            "root": str(request.root),
            "folder": request.folder,
            "student": request.student,
            "out": str(request.out),
            "scratch": str(request.scratch),
            "label": request.label,
            "isolation": request.isolation,
            "rubric": rubric_document(request.rubric),
            "check_folders": dict(request.check_folders),
            "draw_key": request.draw_key.hex(),
            "reviews": [dict(event) for event in request.reviews],
            "derived": None if request.derived is None else str(request.derived),
            "late": None if request.late is None else dict(request.late),
        },
        ensure_ascii=True,
    ).encode("ascii")


def decode_request(data: bytes) -> WorkerRequest:
    """The request ``encode_request`` wrote; ``ValueError`` when it is not one."""
    try:
        document = json.loads(data)
        isolation = wall_named(document["isolation"]).name
        return WorkerRequest(
            parent=int(document["parent"]),
            root=Path(document["root"]),
            folder=str(document["folder"]),
            student=str(document["student"]),
            out=Path(document["out"]),
            scratch=Path(document["scratch"]),
            label=_optional_text(document["label"]),
            isolation=isolation,
            rubric=rubric_from_document(document["rubric"]),
            check_folders={str(k): str(v) for k, v in document["check_folders"].items()},
            draw_key=bytes.fromhex(document["draw_key"]),
            reviews=tuple(_reviews(document["reviews"])),
            derived=None if document["derived"] is None else Path(document["derived"]),
            late=None
            if document["late"] is None
            else late_from_document(document["late"]).document(),
        )
    except (ValueError, KeyError, TypeError, AttributeError, GradekitError) as exc:
        raise ValueError(f"not a worker request ({type(exc).__name__}: {exc})") from exc


def _reviews(events: object) -> list[dict[str, Any]]:
    """The request's review events: a list of JSON objects (each one is read as a review
    only where it bears on the report graded)."""
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise ValueError("reviews is not a list of ledger events")
    return events


def encode_row(row: GradebookRow) -> bytes:
    """One gradebook row as one JSON line."""
    document = {field.name: getattr(row, field.name) for field in dataclasses.fields(row)}
    document["criteria"] = dict(row.criteria)
    return (json.dumps({"row": document}, ensure_ascii=True) + "\n").encode("ascii")


def decode_row(data: bytes) -> GradebookRow:
    """The row ``encode_row`` wrote; ``ValueError`` when it is not one."""
    try:
        row = json.loads(data)["row"]
        criteria = row.pop("criteria")
        if row["status"] not in get_args(Status) or not all(
            isinstance(value, str) for value in [*row.values(), *criteria.values()]
        ):
            raise ValueError(f"a row with status {row['status']!r} or a cell that is no text")
        return GradebookRow(**row, criteria=MappingProxyType(dict(criteria)))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a gradebook row ({type(exc).__name__}: {exc})") from exc


CASE = "case"  # in a worker's scratch folder: the case its sandbox runs now


def _running(scratch: Path, case: str) -> None:
    """Say which case runs now, in a file the batch reads for its heartbeat."""
    temporary = scratch / f".{CASE}.tmp"
    temporary.write_text(case, encoding="utf-8")
    os.replace(temporary, scratch / CASE)


def grade(request: WorkerRequest) -> GradebookRow:
    """Grade the requested submission and write its outputs; a failure is an error row."""
    try:
        for check, folder in sorted(request.check_folders.items()):
            load_custom_check(check, rubric_dir=Path(folder))
        graded = grade_submission(
            request.root,
            request.rubric,
            submission=request.student,
            label=request.label,
            scratch=request.scratch,
            wall=wall_named(request.isolation),
            draw_key=request.draw_key or None,
            on_case=functools.partial(_running, request.scratch),
            derived=None if request.derived is None else Derived(request.derived),
        )
        report = graded.report
        isolation = graded.wall.stated(request.root, request.scratch)
        digest = write_submission(
            request.out,
            report,
            graded.evidence,
            isolation=isolation,
            reviews=current_reviews(request.reviews, report_digest(report)),
            late=None if request.late is None else late_from_document(request.late),
        )
    except MemoryError:
        raise
    except MissingPackage as missing:  # no grade: the grader's environment, or the submission
        return error_row(request.folder, request.student, str(missing), status=missing.status)
    except SubmissionTooLarge as large:  # past a cap of [limits]: nothing copied, nothing run
        return error_row(request.folder, request.student, str(large), status=large.status)
    except Exception as exc:  # a grader bug costs this submission's row, not the batch
        return error_row(
            request.folder, request.student, f"the grader failed: {type(exc).__name__}: {exc}"
        )
    return GradebookRow(
        submission=request.folder,
        student=report.submission,
        status="degraded" if report.degraded else "graded",
        total=points_text(report.total),
        max=points_text(report.max),
        criteria={c.id: points_text(c.points) for c in report.criteria},
        # A graded row's reason is empty, unless the grading flagged it for a person or
        # some of its checks could not be evaluated.
        digest=digest,
        reason=quote(
            "; ".join(
                [*_degraded_reason(report), *(f for f in report.findings if f.startswith(FLAGGED))]
            ),
            TEXT_LIMIT,
        ),
    )


def _degraded_reason(report: Report) -> list[str]:
    """The reason of a degraded row: which checks could not be evaluated, and why."""
    degraded = report.degraded
    if not degraded:
        return []
    at_stake = points_text(sum((check.max for _, check in degraded), Decimal(0)))
    where = "; ".join(f"{criterion.id}/{check.id}: {check.detail}" for criterion, check in degraded)
    return [
        f"degraded ({CONTRACT}): {at_stake} points not evaluated, the rubric is incomplete: {where}"
    ]


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)


def limit_memory(megabytes: int) -> None:
    """Cap this process's address space (the soft limit: only grader code runs here)."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = megabytes * _MIB
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


def die_with(parent: int) -> None:
    """Have Linux SIGKILL this process when ``parent`` dies (the batch's own Ctrl-C
    handling kills workers itself; this covers a batch that is killed outright)."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: no such call
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the call above: nobody waits for a row
        os._exit(EXIT_ORPHANED)


def main() -> int:
    """Read one request on stdin, grade, answer with one row on stdout."""
    reply = os.dup(1)
    os.dup2(2, 1)  # whatever else prints goes to stderr and cannot garble the answer
    try:
        request = decode_request(sys.stdin.buffer.read())
    except ValueError as exc:
        print(
            f"gradekit worker: {exc}; it is started by `{commands.GRADE_LAB()}`, not by hand",
            file=sys.stderr,
        )
        return EXIT_BAD_REQUEST
    die_with(request.parent)
    try:
        limit_memory(request.rubric.limits.grader_memory_mb)
        answer = encode_row(grade(request))
    except MemoryError:
        os._exit(EXIT_OUT_OF_MEMORY)  # nothing may allocate now, not even a traceback
    with contextlib.suppress(BrokenPipeError):  # a batch that stopped listening
        while answer:
            answer = answer[os.write(reply, answer) :]
    return 0


if __name__ == "__main__":
    sys.exit(main())
