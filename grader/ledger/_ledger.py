"""The grading ledger: an append-only record of every batch and every run, beside the grades.

``GRADES/ledger.jsonl`` holds one event per line, canonical JSON (keys sorted, compact),
readable with jq. Every event carries ``seq`` (its place, from 0) and ``prev``, the
SHA-256 of the previous line's bytes (64 zeros for the first), so an edited, removed or
reordered event breaks the chain where it happened (``gradekit ledger verify``).

Appending takes an exclusive ``flock`` on the file, so two graders appending at once each
chain onto the other's last event; every line is fsynced before the lock is released. A
crash mid-append can leave a torn last line (no final newline): reading reports it and
keeps every earlier event; the next append sets the torn bytes aside in
``ledger.jsonl.torn-<offset>`` (never a complete event: nothing was recorded by it) and
chains onto the last complete one.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import write_atomic
from grader._errors import LedgerCorrupt
from grader._expect import expectation_document
from grader.ledger._folder import REPORT, RESULTS, archive_path, read_document, torn_path
from grader.outputs import REPORTED, GradebookRow, verify_report
from grader.rubric import Rubric

__all__ = [
    "GENESIS",
    "BatchInfo",
    "Ledger",
    "LedgerCorrupt",
    "append_events",
    "append_grading",
    "archived",
    "batch_status",
    "batch_time",
    "case_digests",
    "grader_version",
    "keyed_batch",
    "pinned_sets",
    "read_ledger",
    "rubric_lineage",
    "verified_archive",
    "verify_ledger",
]

GENESIS = "0" * 64  # the ``prev`` of the first event
_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def grader_version() -> str:
    """The installed gradekit's version, as ledger events and ``--version`` name it."""
    try:
        return importlib.metadata.version("gradekit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


@dataclass(frozen=True, slots=True)
class Ledger:
    """The events of a ledger, in order, and what was wrong with its tail, if anything."""

    events: tuple[Mapping[str, Any], ...]
    torn: str = ""  # a last line cut off mid-append, left out


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


@contextmanager
def _locked(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def append_events(path: Path, events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Append ``events`` (without ``seq`` and ``prev``) in order, under the file's lock; return
    them as written."""
    written: list[dict[str, Any]] = []
    with _locked(path) as fd:
        data = _whole(fd)
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):
            aside = torn_path(path, len(complete))
            aside.write_bytes(data[len(complete) :])
            os.ftruncate(fd, len(complete))
        lines = complete.splitlines()
        seq, prev = len(lines), _digest(lines[-1]) if lines else GENESIS
        out = bytearray()
        for event in events:
            if "seq" in event or "prev" in event:
                raise ValueError("seq and prev are the ledger's to set")
            chained = {**event, "prev": prev, "seq": seq}
            line = _ENCODE(chained).encode("utf-8")
            out += line + b"\n"
            written.append(chained)
            seq, prev = seq + 1, _digest(line)
        os.write(fd, bytes(out))
        os.fsync(fd)
    return written


def _whole(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


def read_ledger(path: Path) -> Ledger:
    """Every complete event, in order (none when there is no ledger yet). A torn last line
    is reported in ``torn``; a line that is not JSON elsewhere is a ``LedgerCorrupt``.

    The last ledger read is kept with the file's identity, size and change time, and a
    read of the same unchanged file returns it: one grading reads the ledger five times
    (the rubric's lineage, the reviews its workers get, the runs already recorded, the
    reviews applied after), which at 10 000 submissions cost more than grading's own
    bookkeeping. Any append changes the size, so nothing stale is ever returned; the
    events are read-only mappings, shared by the callers.
    """
    try:
        with open(path, "rb") as file:
            stat = os.fstat(file.fileno())
            stamp = (
                os.path.abspath(path),
                stat.st_dev,
                stat.st_ino,
                stat.st_size,
                stat.st_mtime_ns,
                stat.st_ctime_ns,
            )
            kept = _LAST_READ.get(stamp)
            if kept is not None:
                return kept
            data = file.read()
    except FileNotFoundError:
        return Ledger(())
    except IsADirectoryError:
        raise LedgerCorrupt(_a_folder(path)) from None
    lines = data.split(b"\n")
    torn = ""
    if lines[-1]:
        torn = (
            f"{path}: line {len(lines)} was cut off mid-append and is left out; the "
            "next append sets it aside"
        )
    events = tuple(_event(path, number, line) for number, line in enumerate(lines[:-1], 1))
    ledger = Ledger(events, torn)
    if len(data) == stat.st_size:  # read whole as stamped (an append since: not kept)
        _LAST_READ.clear()
        _LAST_READ[stamp] = ledger
    return ledger


_LAST_READ: dict[tuple[object, ...], Ledger] = {}  # the last whole read, by its stamp


def _event(path: Path, number: int, line: bytes) -> Mapping[str, Any]:
    try:
        event = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LedgerCorrupt(
            f"{path}:{number}: not a JSON event ({exc}); the ledger is "
            "append-only: restore it from a backup, never by hand"
        ) from None
    if not isinstance(event, dict):
        raise LedgerCorrupt(f"{path}:{number}: not a JSON object")
    return event


def _a_folder(path: Path) -> str:
    """What to do about a ledger that is a folder: what an earlier gradekit left when it
    graded a submission folder of the ledger's name into a grades folder without one."""
    return (
        f"{path} is a folder, not the ledger: a submission folder named {path.name} was "
        f"graded into {path.parent} (gradekit now refuses that name); move it out of the "
        "grades folder, rename the submission folder and grade it again"
    )


def verify_ledger(path: Path) -> tuple[bool, str]:
    """Whether the chain holds from the first event to the last; the message says where it
    breaks (the first line whose ``prev`` or ``seq`` does not follow) or how many hold."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False, f"{path}: no ledger (gradekit grade writes one beside its reports)"
    except IsADirectoryError:
        return False, _a_folder(path)
    lines = data.split(b"\n")
    tail = lines.pop()
    prev = GENESIS
    for number, line in enumerate(lines, 1):
        try:
            event = _event(path, number, line)
        except LedgerCorrupt as exc:
            return False, str(exc)
        if event.get("seq") != number - 1 or event.get("prev") != prev:
            return False, (
                f"{path}:{number}: the chain breaks here (seq {event.get('seq')!r}, "
                f"prev {str(event.get('prev'))[:12]}... where seq {number - 1}, prev "
                f"{prev[:12]}... follow): an event before it was edited, removed or "
                "reordered"
            )
        prev = _digest(line)
    torn = f"; a torn last line ({len(tail)} bytes) is left out" if tail else ""
    # The last event has no successor to vouch for it: its digest, kept elsewhere (a
    # course's notes, an email), is what proves the newest event untouched later.
    return True, f"{path}: {len(lines)} events, the chain holds, head {prev}{torn}"


def case_digests(rubric: Rubric) -> dict[str, str]:
    """Each case's snapshot (its task and its expectation), by id, as SHA-256: what tells
    which cases a new rubric version changed."""
    return {
        case.id: hashlib.sha256(
            _ENCODE(
                {
                    "expect": None if case.expect is None else expectation_document(case.expect),
                    "id": case.id,
                    "task": case.task,
                }
            ).encode()
        ).hexdigest()
        for case in rubric.cases
    }


def criteria_weights(rubric: Rubric) -> dict[str, dict[str, Any]]:
    """Each criterion's weight and named sub-check points, by id: what tells which weights a
    new rubric version changed."""
    return {
        c.id: {
            "points": {name: str(value) for name, value in sorted(c.points.items())},
            "weight": c.weight,
        }
        for c in rubric.criteria
    }


def pinned_sets(rubric: Rubric) -> dict[str, str]:
    """The regression sets the rubric pins and finds, ``name@version`` -> SHA-256."""
    return {ref: pinned.sha256 for ref, pinned in sorted(rubric.sets.items()) if pinned is not None}


def rubric_lineage(path: Path, rubric: Rubric) -> dict[str, Any] | None:
    """What this rubric version supersedes in the ledger at ``path`` (the latest earlier
    version of the same rubric id), or None. A rubric whose content changed while its
    version did not is a ``UsageError`` naming the event that graded with the old content:
    old grades must always say which version graded them. So is a pinned regression set
    whose bytes changed since a batch graded with it: a set version never changes."""
    latest: dict[str, Any] | None = None
    sets = pinned_sets(rubric)
    for event in read_ledger(path).events:
        if event.get("event") == "promote":
            # The newest version has no successor to vouch for it: its promotion does.
            published = {f"{event.get('set')}@{event.get('version')}": event.get("sha256")}
            _same_sets(sets, published, event)
        used = event.get("rubric") if event.get("event") == "batch" else None
        if not isinstance(used, dict):
            continue
        _same_sets(sets, used.get("sets"), event)
        if used.get("id") != rubric.id:
            continue
        if used.get("version") == rubric.version and used.get("sha256") != rubric.sha256:
            raise UsageError(
                f"rubric {rubric.id} version {rubric.version} changed since ledger event "
                f"{event.get('seq')} graded with it (sha256 {str(used.get('sha256'))[:12]}... "
                f"then, {rubric.sha256[:12]}... now): bump [rubric] version to a new number, "
                "so that old grades keep saying which rubric graded them"
            )
        version = used.get("version")
        if (
            isinstance(version, int)
            and version != rubric.version
            and (latest is None or version > latest["version"])
        ):
            latest = {"version": version, "sha256": used.get("sha256")}
    return latest


def _same_sets(sets: Mapping[str, str], used: object, event: Mapping[str, Any]) -> None:
    for ref, digest in used.items() if isinstance(used, dict) else ():
        if ref in sets and sets[ref] != digest:
            done = "published it" if event.get("event") == "promote" else "graded with it"
            raise UsageError(
                f"regression set {ref} changed since ledger event {event.get('seq')} {done} "
                f"(sha256 {str(digest)[:12]}... then, {sets[ref][:12]}... now): a set "
                "version never changes; restore it (`git checkout`), or promote into a new "
                "version and pin that"
            )


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What a batch's ledger event says of the batch itself, never part of any report:
    who ran it (a label, not an authenticated identity), when it started, and the
    idempotency key it was asked under ("" when none)."""

    operator: str
    started: str
    key: str = ""


def batch_time() -> str:
    """Now, UTC to the second; ``SOURCE_DATE_EPOCH``'s time when it is set (the
    reproducible-builds convention), so that a rebuilt ledger can be the same bytes."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def batch_status(requested: int, completed: int, interrupted: bool) -> str:
    """``completed`` (every submission asked for has a report), ``failed`` (none has),
    or ``partial``."""
    if completed == requested and not interrupted:
        return "completed"
    return "failed" if completed == 0 else "partial"


def keyed_batch(path: Path, key: str) -> Mapping[str, Any] | None:
    """The batch event recorded under idempotency key ``key``, if there is one."""
    if not key or not path.exists():
        return None
    return next(
        (
            event
            for event in read_ledger(path).events
            if event.get("event") == "batch" and event.get("idempotency_key") == key
        ),
        None,
    )


def append_grading(
    path: Path,
    rubric: Rubric,
    rows: Sequence[GradebookRow],
    out: Path,
    grader: str,
    *,
    interrupted: Sequence[str] = (),
    mode: str = "update",
    kept: Sequence[str] = (),
    absent: Sequence[str] = (),
    dropped: Sequence[str] = (),
    shard: str = "",
    info: BatchInfo | None = None,
) -> dict[str, str]:
    """Append one batch event and a run event per submission; return, per folder, "" or
    the ``seq`` of the earlier run whose inputs, rubric and grader were the same.
    ``interrupted`` names the folders a Ctrl-C kept from finishing: the batch event lists
    them, and the rows that did finish are recorded as any others.

    The batch event also says what the batch did to the gradebook it found: ``mode``
    ("update" or "replace"), always; ``kept``, the folders of rows kept without being
    graded now; ``absent``, those of them the batch's paths no longer hold; ``dropped``,
    those ``replace`` removed; ``shard``, ``K/N`` (each only when there is one).

    A run is known by its idempotency key: the SHA-256 of the student, the rubric's
    digest, the grader's version and the digest of every graded input. Grading the same
    inputs again appends no second run event: the ledger says "unchanged".
    """
    seen = {
        event.get("key"): event.get("seq")
        for event in read_ledger(path).events
        if event.get("event") == "run"
    }
    unchanged: dict[str, str] = {}
    runs: list[dict[str, Any]] = []
    sets = pinned_sets(rubric)
    for row in rows:
        reported = row.status in REPORTED
        inputs = _inputs(out / row.submission / REPORT) if reported else {}
        identity: dict[str, Any] = {
            "grader": grader,
            "inputs": inputs,
            "rubric": rubric.sha256,
            "status": row.status,
            "student": row.student,
        }
        if sets:  # a key without sets stays the key it was before there were sets
            identity["sets"] = sets
        late = _late(out / row.submission / RESULTS, row.digest) if reported else None
        if late is not None:  # an extension granted or a time corrected is a new run
            identity["late"] = late
        key = hashlib.sha256(_ENCODE(identity).encode()).hexdigest()
        if reported and key in seen:
            unchanged[row.submission] = str(seen[key])
            continue
        if reported and row.digest:
            _archive(out / row.submission / REPORT, archive_path(out, row.digest))
        runs.append(
            {
                "event": "run",
                "grader": grader,
                "inputs": inputs,
                "key": key,
                "reason": row.reason,
                "report": row.digest,
                "rubric": rubric.sha256,
                "rubric_id": rubric.id,
                "rubric_version": rubric.version,
                "status": row.status,
                "student": row.student,
                "submission": row.submission,
                "total": row.total,
                **({"sets": sets} if sets else {}),
                **({"late": late} if late is not None else {}),
            }
        )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    used: dict[str, Any] = {
        "cases": case_digests(rubric),
        "criteria": criteria_weights(rubric),
        "id": rubric.id,
        "sha256": rubric.sha256,
        "version": rubric.version,
        **({"sets": sets} if sets else {}),
        **({"changes": rubric.changes} if rubric.changes else {}),
    }
    supersedes = rubric_lineage(path, rubric)
    if supersedes is not None:
        used["supersedes"] = supersedes
    batch: dict[str, Any] = {
        "event": "batch",
        "grader": grader,
        "counts": counts,
        "rubric": used,
        "selection": sorted(row.submission for row in rows),
        "unchanged": sorted(unchanged),
    }
    if interrupted:
        batch["interrupted"] = sorted(interrupted)
    batch["mode"] = mode
    if rubric.late is not None:  # the policy the batch graded late work by
        batch["late"] = rubric.late.document()
    for name, folders in (("kept", kept), ("absent", absent), ("dropped", dropped)):
        if folders:
            batch[name] = sorted(set(folders))
    if shard:
        batch["shard"] = shard
    if info is not None:
        completed = sum(row.status in REPORTED for row in rows)
        requested = len(rows) + len(interrupted)
        batch.update(
            requested=requested,
            completed=completed,
            failed=len(rows) - completed,
            status=batch_status(requested, completed, bool(interrupted)),
            operator=info.operator,
            started=info.started,
            at=batch_time(),
        )
        if info.key:
            batch["idempotency_key"] = info.key
    append_events(path, [batch, *runs])
    return unchanged


def _archive(report: Path, kept: Path) -> None:
    """Keep the report under its digest (``kept``): a later grading overwrites
    ``report.json``, never this copy, so every graded run's criteria stay there to compare."""
    if not kept.exists():
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(kept, report.read_bytes())


def verified_archive(out: Path, digest: str) -> Mapping[str, Any]:
    """The archived report of ``digest``: it must be kept, verify and be that digest's (a
    review and a promotion rest on it); a ``UsageError`` saying what to do otherwise."""
    path = archive_path(out, digest)
    try:
        data = path.read_bytes()
    except OSError:
        raise UsageError(
            f"the report {digest[:12]} is not archived ({path} is missing): grade "
            "the submission again to archive its report"
        ) from None
    ok, why = verify_report(data)
    document = json.loads(data) if ok else None
    if not isinstance(document, dict) or document.get("digest") != digest:
        problem = f"does not verify ({why})" if not ok else f"is not the report {digest[:12]}"
        raise UsageError(
            f"the archived report {path} {problem}: restore the archive from a "
            "backup, or grade the submission again"
        )
    return document


def archived(out: Path, digest: str) -> Mapping[str, Any] | None:
    """The archived report of ``digest`` in the grades folder ``out``, if it is kept."""
    return read_document(archive_path(out, digest))


def _late(results: Path, digest: str) -> dict[str, Any] | None:
    """What the late policy made of a graded run, as its results.json keeps it; None
    without a policy."""
    document = read_document(results)
    extra = document.get("extra_data") if document is not None else None
    if not isinstance(extra, dict) or extra.get("digest") != digest:
        return None
    late = extra.get("late")
    return dict(late) if isinstance(late, dict) else None


def _inputs(report: Path) -> dict[str, str]:
    document = read_document(report)
    inputs = document.get("inputs") if document is not None else None
    return dict(sorted(inputs.items())) if isinstance(inputs, dict) else {}
