"""What each case of a graded run asked, as the grader observed it: ``calls.json``.

Written beside report.json for people and the dashboard (``gradekit dashboard``), never
graded and never part of the report's digest. For each case of the primary run: how it
ended, every call in the order the parent served it (a prompt, a tool call or an SDK's
HTTP request: its key, whether a recording answered it, and which trace record names it)
and the trace records the agent wrote. Only what the grader saw or parsed, and nothing that
differs between two gradings of the same inputs: no latencies, no paths, no times.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grader._model import CaseOutcome, RunResult, Served, TraceRecord
from grader.scoring import pair_records

__all__ = ["FORMAT", "calls_document", "read_calls", "render_calls"]

FORMAT = "gradekit.calls/1"
_TEXT = 200  # characters kept of a text the agent wrote into its trace


def calls_document(run: RunResult | None, cases: tuple[str, ...]) -> dict[str, Any]:
    """The ``calls.json`` document of ``run`` (None: the agent never ran)."""
    outcomes = run.outcomes if run is not None else {}
    return {
        "format": FORMAT,
        "import_error": run.import_error if run is not None else None,
        "cases": [_case(case, outcomes.get(case)) for case in cases],
    }


def _case(case: str, outcome: CaseOutcome | None) -> dict[str, Any]:
    if outcome is None:
        return {
            "case": case,
            "status": "not_run",
            "detail": "",
            "calls": [],
            "trace": [],
            "trace_error": None,
        }
    pairing = pair_records(outcome.calls, outcome.trace)
    return {
        "case": case,
        "status": outcome.status,
        "detail": outcome.detail or outcome.exception or "",
        "calls": [
            _call(call, record, number in pairing.early)
            for number, (call, record) in enumerate(
                zip(outcome.calls, pairing.records, strict=True)
            )
        ],
        "trace": [_trace_record(record) for record in outcome.trace],
        "trace_error": outcome.trace_error,
    }


def _call(call: Served, record: int | None, early: bool) -> dict[str, Any]:
    """A call as served, with the index of the trace record that names it (paired by key:
    ``grader.scoring._traces``), or null."""
    kind = "tool" if call.tool is not None else "http" if call.http else "prompt"
    found: dict[str, Any] = {"kind": kind, "key": call.key, "served": call.served, "record": record}
    if call.tool is not None:
        found["tool"] = call.tool
    if call.write:  # a write tool's: the child ran it on the case run's store
        found["write"] = True
    if early:
        found["traced_early"] = True
    return found


def _trace_record(record: TraceRecord) -> dict[str, Any]:
    """A trace record as the agent wrote it, its texts cut short and anything else dropped."""
    key = record.key if isinstance(record.key, str) else None  # whole: one trace line at most
    return {
        "key": key,
        "provider": _text(record.provider),
        "tool": _text(record.tool),
        "ok": record.ok if isinstance(record.ok, bool) else None,
        "error": _text(record.error),
    }


def _text(value: object) -> str | None:
    return value[:_TEXT] if isinstance(value, str) else None


def render_calls(document: Mapping[str, Any]) -> bytes:
    """Canonical bytes: keys sorted, two-space indent, one trailing newline."""
    return (json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def read_calls(path: Path) -> dict[str, Any] | None:
    """The ``calls.json`` at ``path``, or None when there is none or it is not one."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if (
        not isinstance(document, dict)
        or document.get("format") != FORMAT
        or not isinstance(document.get("cases"), list)
    ):
        return None
    return document
