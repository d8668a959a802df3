"""The evaluation assets: cases, and the path by which a failure becomes a regression item.

They live in the **asset ledger**, ``SETS/ledger.jsonl`` beside the regression sets (so
beside the rubric, in the course's repository): cases and sets outlive a cohort's grades
folder, and a grades folder may be sharded and merged. It has the grades ledger's format
(one canonical JSON event per line, hash-chained, appended under a lock), and
``gradekit ledger verify SETS`` checks it. Nothing in it reaches a report's digest.

A **case** is the article's Evaluation Case: an input snapshot (the task, the agent asked,
the world of tool calls it starts from, the run it came from) and an expectation snapshot
(goal, outcome, decision, facts, forbidden actions, the fact oracle), with the rubric it
was written against (``configuration``), its ``source`` (``run``, ``manual``, ``ai_draft``;
a rubric's own ``[[case]]`` is a read-only ``template``), coverage layers and admission
reason, and a ``version``, the case it ``supersedes`` and a ``status`` (``active``,
``archived``). Every change is a new event: revising archives the old case and writes a new
one; nothing is edited.

The **promotion path**: ``investigate`` a case (one from a failing run, or one written by
hand or drafted), then a ``disposition`` (a person's review of the investigation, never
overwritten), which makes a **candidate** only when it is ``regression_candidate``; a
person ``approve``s the candidate, and only an approved candidate is published into a set
(``regression promote --candidate``).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar, cast

from gradekit import UsageError
from gradekit.internal import commands
from grader._expect import (
    Expectation,
    Told,
    expectation_document,
    laid_over,
    normalised,
    parse_expectation,
)
from grader.assets._promote import FromRun, default_item_id
from grader.ledger import append_events, read_ledger, verify_ledger
from grader.regression import PAYLOAD_CAP, Item, decode_world, valid_name
from grader.rubric import Rubric

__all__ = [
    "ASSETS",
    "DISPOSITIONS",
    "SOURCES",
    "Assets",
    "StoredCase",
    "append_case_batch",
    "approve",
    "archive",
    "candidate_item",
    "case_batch",
    "case_item",
    "dispose",
    "investigate",
    "new_case",
    "read_assets",
    "revise",
    "save_from_run",
]

ASSETS = "ledger.jsonl"  # in the sets folder: the asset ledger
WORLDS = "_worlds"  # SETS/_worlds/<sha256>.json: the worlds cases start from (no set name)
SOURCES = ("run", "manual", "ai_draft")  # and "template": a rubric's [[case]], read-only
DISPOSITIONS = (
    "provider_fault",
    "false_alarm",
    "grader_defect",
    "student_error",
    "regression_candidate",
)
_LAYER = re.compile(r"[a-z0-9][a-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class StoredCase:
    """One version of a case, as its ``case`` event holds it; ``status`` as of now."""

    id: str
    version: int
    supersedes: str | None
    source: str
    source_run: Mapping[str, Any] | None
    kind: str  # "case" or "incident": what a published item says it came from
    name: str  # the default id of an item that publishes it
    task: str
    agent: str | None
    world: str | None  # the sha256 of its world (SETS/cases/<sha256>.json)
    expect: Expectation
    configuration: Mapping[str, Any]
    coverage: tuple[str, ...]
    admission: str
    by: str
    at: str
    seq: int
    status: str = "active"


@dataclass(frozen=True, slots=True)
class Assets:
    """What the asset ledger holds, folded: each case by id, and each step of the path."""

    cases: Mapping[str, StoredCase] = field(default_factory=dict)
    investigations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dispositions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by inv.
    candidates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    approvals: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by candidate
    promotions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by candidate


_LOCK = ".ledger.lock"  # in the sets folder: one reader-then-writer of the assets at a time
F = TypeVar("F", bound=Callable[..., Any])


def _serialised(change: F) -> F:
    """Run ``change(sets, ...)`` under the assets' lock: what it reads (the next id, whether
    a step was taken) is still true when it appends, whoever else changes the assets."""

    @functools.wraps(change)
    def locked(sets: Path, *args: Any, **kwargs: Any) -> Any:
        sets.mkdir(parents=True, exist_ok=True)
        fd = os.open(sets / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return change(sets, *args, **kwargs)
        finally:
            os.close(fd)  # closing releases the lock

    return cast(F, locked)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_assets(sets: Path) -> Assets:
    """The asset ledger of ``sets``, its chain verified (none yet: no assets); a
    ``UsageError`` naming the line where it breaks."""
    path = sets / ASSETS
    if not path.exists():
        return Assets()
    holds, message = verify_ledger(path)
    if not holds:
        raise UsageError(
            f"{message}; the assets rest on its chain: restore the file from git "
            f"(`{commands.LEDGER_VERIFY(grades=str(sets))}` says where it breaks)"
        )
    cases: dict[str, StoredCase] = {}
    steps: dict[str, dict[str, Mapping[str, Any]]] = {
        "investigation": {},
        "disposition": {},
        "candidate": {},
        "approval": {},
        "promote": {},
    }
    keys = {
        "investigation": "investigation",
        "disposition": "investigation",
        "candidate": "candidate",
        "approval": "candidate",
        "promote": "candidate",
    }
    for event in read_ledger(path).events:
        kind = event.get("event")
        if kind == "case":
            stored = _stored(event)
            cases[stored.id] = stored
        elif kind == "case_archived" and event.get("case") in cases:
            cases[event["case"]] = replace(cases[event["case"]], status="archived")
        elif kind in steps:
            steps[kind][str(event.get(keys[kind]))] = event
    return Assets(
        cases,
        steps["investigation"],
        steps["disposition"],
        steps["candidate"],
        steps["approval"],
        steps["promote"],
    )


def _stored(event: Mapping[str, Any]) -> StoredCase:
    return StoredCase(
        id=str(event["case"]),
        version=int(event["version"]),
        supersedes=event["supersedes"],
        source=str(event["source"]),
        source_run=event["source_run"],
        kind=str(event["kind"]),
        name=str(event["name"]),
        task=str(event["task"]),
        agent=event["agent"],
        world=event["world"],
        expect=parse_expectation(event["expect"], f"case {event['case']}"),
        configuration=MappingProxyType(dict(event["configuration"])),
        coverage=tuple(event["coverage"]),
        admission=str(event["admission"]),
        by=str(event["by"]),
        at=str(event["at"]),
        seq=int(event["seq"]),
    )


def _case_event(stored: StoredCase) -> dict[str, Any]:
    return {
        "event": "case",
        "case": stored.id,
        "version": stored.version,
        "supersedes": stored.supersedes,
        "status": "active",
        "source": stored.source,
        "source_run": None if stored.source_run is None else dict(stored.source_run),
        "kind": stored.kind,
        "name": stored.name,
        "task": stored.task,
        "agent": stored.agent,
        "world": stored.world,
        "expect": expectation_document(stored.expect),
        "configuration": dict(stored.configuration),
        "coverage": list(stored.coverage),
        "admission": stored.admission,
        "by": stored.by,
        "at": stored.at,
    }


def _configuration(rubric: Rubric) -> dict[str, Any]:
    """The rubric a case was written against: the article's configurationRevision."""
    return {"rubric": rubric.id, "version": rubric.version, "sha256": rubric.sha256}


def _next_id(prefix: str, taken: Sequence[str]) -> str:
    return f"{prefix}-{len(taken) + 1}"


def _text(value: str, flag: str) -> str:
    if not value.strip() or "\n" in value:
        raise UsageError(f"{flag} must be one line of text: say who and why")
    return value


def _coverage(layers: Sequence[str]) -> tuple[str, ...]:
    for layer in layers:
        if not _LAYER.fullmatch(layer) or len(layer) > 40:
            raise UsageError(
                f"--coverage {layer!r} is not a layer name: lowercase letters, "
                "digits, '-' and '_' (e.g. policy, tool-use, facts)"
            )
    return tuple(dict.fromkeys(layers))


def _judgeable(expect: Expectation) -> Expectation:
    if not expect.outcome:
        raise UsageError(
            "give --outcome answer (run() must return a str) or --outcome raise "
            "(it must raise): a case without an expected outcome cannot pass"
        )
    if not expect.goal:
        raise UsageError(
            'give --goal "what the run is for": a case without a business goal cannot pass'
        )
    return expect


def _store_world(sets: Path, world: bytes | None) -> str | None:
    """Write a case's world under its digest, once; its sha256 (None: no world)."""
    if world is None:
        return None
    if len(world) > PAYLOAD_CAP:
        raise UsageError(f"the world is larger than {PAYLOAD_CAP} bytes: make it smaller")
    decode_world(world, "the case's world")
    sha = hashlib.sha256(world).hexdigest()
    path = sets / WORLDS / f"{sha}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(world)
        temporary.replace(path)
    return sha


def world_bytes(sets: Path, case: StoredCase) -> bytes | None:
    """A case's world, its digest checked; a ``UsageError`` with the fix when it is gone."""
    if case.world is None:
        return None
    path = sets / WORLDS / f"{case.world}.json"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"{path} is missing (the world of case {case.id}): restore it from git (`git checkout`)"
        ) from None
    if hashlib.sha256(data).hexdigest() != case.world:
        raise UsageError(
            f"{path}: its bytes are not the world case {case.id} names: it was "
            f"edited; restore it with `git checkout -- {path}`"
        )
    return data


# -- cases -------------------------------------------------------------------------------------


@_serialised
def save_from_run(
    sets: Path, saved: FromRun, rubric: Rubric, *, coverage: Sequence[str], admission: str, by: str
) -> tuple[StoredCase, bool]:
    """A case from a failing run (``source`` run); the same run and file saved again gives
    the case already saved (and False: nothing appended)."""
    assets = read_assets(sets)
    link = saved.source_run
    twin = next(
        (
            case
            for case in assets.cases.values()
            if case.source_run is not None
            and (case.source_run["report"], case.source_run["path"])
            == (link["report"], link["path"])
        ),
        None,
    )
    if twin is not None:
        return twin, False
    stored = StoredCase(
        id=_next_id("case", list(assets.cases)),
        version=1,
        supersedes=None,
        source="run",
        source_run=link,
        kind=saved.kind,
        name=saved.stem,
        task=saved.task,
        agent=saved.agent,
        world=_store_world(sets, saved.world),
        expect=_judgeable(saved.expect),
        configuration=_configuration(rubric),
        coverage=_coverage(coverage),
        admission=_text(admission, "--reason"),
        by=_text(by, "--by"),
        at=_now(),
        seq=-1,
    )
    return _appended(sets, [_case_event(stored)], stored), True


@_serialised
def new_case(
    sets: Path,
    rubric: Rubric,
    *,
    task: str,
    world: bytes | None,
    agent: str | None,
    told: Told,
    source: str,
    name: str,
    coverage: Sequence[str],
    admission: str,
    by: str,
) -> StoredCase:
    """A case written by hand (``manual``) or drafted by a model (``ai_draft``). A task that
    an active case or a rubric case already asks (once normalised) is refused, naming it."""
    if source not in SOURCES[1:]:
        raise UsageError(f"--source {source!r}: a case written here is manual or ai_draft")
    if not task.strip():
        raise UsageError("--task is empty: give the task the agent is asked")
    assets = read_assets(sets)
    _not_asked_yet(task, assets, rubric)
    stored = StoredCase(
        id=_next_id("case", list(assets.cases)),
        version=1,
        supersedes=None,
        source=source,
        source_run=None,
        kind="case",
        name=valid_name(name, "--name"),
        task=task,
        agent=agent,
        world=_store_world(sets, world),
        expect=_judgeable(laid_over(None, told, "the case's expectation")),
        configuration=_configuration(rubric),
        coverage=_coverage(coverage),
        admission=_text(admission, "--reason"),
        by=_text(by, "--by"),
        at=_now(),
        seq=-1,
    )
    return _appended(sets, [_case_event(stored)], stored)


def _not_asked_yet(task: str, assets: Assets, rubric: Rubric, *, but: str = "") -> None:
    wanted = normalised(task)
    for case in assets.cases.values():
        if case.status == "active" and case.id != but and normalised(case.task) == wanted:
            revise = commands.CASE_REVISE(case=case.id, by="NAME", reason="TEXT")
            raise UsageError(
                f"case {case.id} (version {case.version}) already asks this task "
                "(the same once case and spacing are folded): revise it "
                f"(`{revise}`) or give another task"
            )
    for template in rubric.cases:
        if normalised(template.task) == wanted:
            raise UsageError(
                f"the rubric's case {template.id} already asks this task: it is "
                "a template, read-only; give another task"
            )


@_serialised
def revise(
    sets: Path,
    rubric: Rubric,
    case_id: str,
    *,
    task: str,
    told: Told,
    coverage: Sequence[str],
    by: str,
    reason: str,
) -> StoredCase:
    """A new version of an active case: the old one archived, the new one superseding it,
    the flags laid over its expectation. A rubric's own case is a read-only template."""
    assets = read_assets(sets)
    old = _active(assets, rubric, case_id)
    if task:
        _not_asked_yet(task, assets, rubric, but=old.id)
    new = replace(
        old,
        id=_next_id("case", list(assets.cases)),
        version=old.version + 1,
        supersedes=old.id,
        task=task or old.task,
        expect=_judgeable(laid_over(old.expect, told, "the case's expectation")),
        configuration=_configuration(rubric),
        coverage=_coverage(coverage) if coverage else old.coverage,
        admission=_text(reason, "--reason"),
        by=_text(by, "--by"),
        at=_now(),
        seq=-1,
        status="active",
    )
    archived = {
        "event": "case_archived",
        "case": old.id,
        "by": by,
        "reason": reason,
        "superseded_by": new.id,
        "at": new.at,
    }
    return _appended(sets, [archived, _case_event(new)], new)


@_serialised
def archive(sets: Path, rubric: Rubric, case_id: str, *, by: str, reason: str) -> StoredCase:
    """Archive an active case: it stays in the ledger, and is no longer investigated,
    approved or published."""
    old = _active(read_assets(sets), rubric, case_id)
    append_events(
        sets / ASSETS,
        [
            {
                "event": "case_archived",
                "case": old.id,
                "by": _text(by, "--by"),
                "reason": _text(reason, "--reason"),
                "superseded_by": None,
                "at": _now(),
            }
        ],
    )
    return replace(old, status="archived")


def _active(assets: Assets, rubric: Rubric, case_id: str) -> StoredCase:
    case = assets.cases.get(case_id)
    if case is None:
        if any(template.id == case_id for template in rubric.cases):
            raise UsageError(
                f"{case_id} is a case of the rubric: a template, read-only. Edit "
                "the rubric and bump its version, or save a case of your own "
                "(`case new`)"
            )
        known = ", ".join(sorted(assets.cases)) or "none yet"
        raise UsageError(f"no case {case_id!r} in the asset ledger (its cases: {known})")
    if case.status != "active":
        newer = [c.id for c in assets.cases.values() if c.supersedes == case.id]
        raise UsageError(
            f"case {case_id} is archived"
            + (f" (superseded by {newer[0]}): use that one" if newer else ": save a new case")
        )
    return case


def _appended(sets: Path, events: list[dict[str, Any]], stored: StoredCase) -> StoredCase:
    written = append_events(sets / ASSETS, events)
    return replace(stored, seq=int(written[-1]["seq"]))


# -- the promotion path ------------------------------------------------------------------------


@_serialised
def investigate(
    sets: Path, rubric: Rubric, case_id: str, *, by: str, reason: str
) -> Mapping[str, Any]:
    """Open an investigation of an active case."""
    assets = read_assets(sets)
    case = _active(assets, rubric, case_id)
    [event] = append_events(
        sets / ASSETS,
        [
            {
                "event": "investigation",
                "investigation": _next_id("inv", list(assets.investigations)),
                "case": case.id,
                "by": _text(by, "--by"),
                "reason": _text(reason, "--reason"),
                "at": _now(),
            }
        ],
    )
    return event


@_serialised
def dispose(
    sets: Path, investigation: str, disposition: str, *, by: str, reason: str
) -> list[dict[str, Any]]:
    """A person's review of an investigation, with its disposition: never overwritten. A
    ``regression_candidate`` disposition makes a candidate of the investigated case."""
    assets = read_assets(sets)
    opened = assets.investigations.get(investigation)
    if opened is None:
        known = ", ".join(sorted(assets.investigations)) or "none yet"
        raise UsageError(f"no investigation {investigation!r} (the ledger's: {known})")
    if disposition not in DISPOSITIONS:
        raise UsageError(f"disposition {disposition!r} is not one of {', '.join(DISPOSITIONS)}")
    done = assets.dispositions.get(investigation)
    if done is not None:
        raise UsageError(
            f"{investigation} was reviewed already (asset ledger event "
            f"{done.get('seq')}: {done.get('disposition')} by {done.get('by')}): "
            "a review is never overwritten; open a new investigation"
        )
    at = _now()
    events: list[dict[str, Any]] = [
        {
            "event": "disposition",
            "investigation": investigation,
            "case": opened["case"],
            "disposition": disposition,
            "by": _text(by, "--by"),
            "reason": _text(reason, "--reason"),
            "at": at,
        }
    ]
    if disposition == "regression_candidate":
        events.append(
            {
                "event": "candidate",
                "candidate": _next_id("cand", list(assets.candidates)),
                "investigation": investigation,
                "case": opened["case"],
                "reviewed_by": by,
                "at": at,
            }
        )
    return append_events(sets / ASSETS, events)


@_serialised
def approve(
    sets: Path, rubric: Rubric, candidate: str, *, by: str, reason: str
) -> Mapping[str, Any]:
    """A person's approval of a candidate: what lets it be published. Once per candidate;
    an archived case is not approved, and a drafting model never approves its own draft."""
    assets = read_assets(sets)
    proposed = _candidate(assets, candidate)
    done = assets.approvals.get(candidate)
    if done is not None:
        raise UsageError(
            f"{candidate} was approved already (asset ledger event "
            f"{done.get('seq')}, by {done.get('by')})"
        )
    case = _active(assets, rubric, str(proposed["case"]))
    drafter = _drafter(assets, case) if case.source == "ai_draft" else ""
    if drafter and normalised(by) == normalised(drafter):
        raise UsageError(
            f"case {case.id} was drafted by {drafter!r}: its draft is approved by "
            "a person, never by who drafted it"
        )
    [event] = append_events(
        sets / ASSETS,
        [
            {
                "event": "approval",
                "candidate": candidate,
                "case": case.id,
                "by": _text(by, "--by"),
                "reason": _text(reason, "--reason"),
                "at": _now(),
            }
        ],
    )
    return event


def _candidate(assets: Assets, candidate: str) -> Mapping[str, Any]:
    proposed = assets.candidates.get(candidate)
    if proposed is None:
        known = ", ".join(sorted(assets.candidates)) or "none yet"
        raise UsageError(
            f"no candidate {candidate!r} (the ledger's: {known}); a candidate is "
            "made only by a regression_candidate disposition of an investigation"
        )
    return proposed


def candidate_item(
    sets: Path, rubric: Rubric, candidate: str, item_id: str | None
) -> tuple[Item, StoredCase]:
    """The item an approved candidate publishes: its case's snapshots (``added_in`` is the
    set's to give), and its origin: the case's source, and for a model's draft the label
    that filed it (version 1's ``by``: a revision is a person's, the draft stays the
    model's). A ``UsageError`` when it is not approved, or its case is archived."""
    assets = read_assets(sets)
    proposed = _candidate(assets, candidate)
    approval = assets.approvals.get(candidate)
    if approval is None:
        approve_it = commands.APPROVE(candidate=candidate, by="NAME", reason="TEXT")
        raise UsageError(
            f"{candidate} is not approved: only an approved candidate is "
            f"published; a person approves it first (`{approve_it}`)"
        )
    case = _active(assets, rubric, str(proposed["case"]))
    source: dict[str, Any] = {
        "case": case.id,
        "version": case.version,
        "candidate": candidate,
        "approved_by": str(approval["by"]),
        "origin": case.source,
        "run": None if case.source_run is None else dict(case.source_run),
    }
    if case.source == "ai_draft":
        source["by"] = _drafter(assets, case)
    item = Item(
        id=default_item_id(item_id, case.name),
        kind="incident" if case.kind == "incident" else "case",
        task=case.task,
        agent=case.agent,
        expect=case.expect,
        added_in=0,
        source=MappingProxyType(source),
        reviewed_by=str(proposed["reviewed_by"]),
        reason=case.admission,
        world=world_bytes(sets, case),
    )
    return item, case


def _drafter(assets: Assets, case: StoredCase) -> str:
    """Who filed a model's draft: its first version's ``by`` (a revision is a person's, the
    draft stays the model's)."""
    first, seen = case, {case.id}
    while first.supersedes in assets.cases and first.supersedes not in seen:
        first = assets.cases[str(first.supersedes)]
        seen.add(first.id)
    return first.by


# -- running saved cases before any is promoted ------------------------------------------------


def case_item(sets: Path, rubric: Rubric, case_id: str) -> tuple[Item, StoredCase]:
    """A saved case (any status but archived) as an item to run: its task, agent, world and
    expectation, published nowhere. A ``UsageError`` naming the ledger's cases when there is
    no such case, or it is archived."""
    case = _active(read_assets(sets), rubric, case_id)
    return Item(
        id=case.id,
        kind="incident" if case.kind == "incident" else "case",
        task=case.task,
        agent=case.agent,
        expect=case.expect,
        added_in=0,
        source=MappingProxyType({"case": case.id, "version": case.version}),
        reviewed_by="",
        reason=case.admission,
        world=world_bytes(sets, case),
    ), case


def case_batch(sets: Path, key: str) -> Mapping[str, Any] | None:
    """The case batch the asset ledger holds under idempotency ``key``, if any."""
    path = sets / ASSETS
    if not key or not path.exists():
        return None
    return next(
        (
            event
            for event in read_ledger(path).events
            if event.get("event") == "case_batch" and event.get("idempotency_key") == key
        ),
        None,
    )


@_serialised
def append_case_batch(
    sets: Path,
    *,
    cases: Sequence[StoredCase],
    results: Sequence[Mapping[str, Any]],
    requested: int,
    by: str,
    key: str,
) -> tuple[Mapping[str, Any], bool]:
    """Append one batch of saved cases run against submissions (``results``: one per
    submission and case, with its ``verdict``), with its status, operator, time and
    idempotency ``key``; never a grade. A batch already recorded under ``key`` is returned
    as it is, with False: the same key submitted twice is one batch."""
    earlier = case_batch(sets, key)
    if earlier is not None:
        return earlier, False
    done = sum(1 for result in results if result["verdict"] != "not_run")
    status = "completed" if done == requested else "partial" if done else "failed"
    taken = (
        [e for e in read_ledger(sets / ASSETS).events if e.get("event") == "case_batch"]
        if (sets / ASSETS).exists()
        else []
    )
    verdicts = {
        verdict: sum(1 for r in results if r["verdict"] == verdict)
        for verdict in ("passed", "failed", "degraded", "not_run")
    }
    [event] = append_events(
        sets / ASSETS,
        [
            {
                "event": "case_batch",
                "batch": f"batch-{len(taken) + 1}",
                "status": status,
                "operator": _text(by, "--by"),
                "at": _now(),
                "idempotency_key": key or None,
                "cases": [{"case": case.id, "version": case.version} for case in cases],
                "requested": requested,
                "completed": done,
                **verdicts,
                "results": [dict(result) for result in results],
            }
        ],
    )
    return event, True
