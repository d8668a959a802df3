"""Tool calls for the grader benchmark: a call-loop agent that looks things up, its fixture."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradekit import tool_key
from gradekit.internal import Fixture, ToolCall

__all__ = [
    "LOOKUP",
    "RESULT_BYTES",
    "TOOL_AGENT",
    "ToolLab",
    "build_tool_lab",
    "lookup_args",
    "lookup_result",
]

LOOKUP = "lookup"
RESULT_BYTES = 1024  # each result's compact JSON, exactly
_RECORDED_AT = "2024-01-01T00:00:00Z"  # fixed, so the fixture is the same run to run
_FILLER = "Refunds are granted within fourteen days of the first session, pro rata after. " * 20
_HITS = 3

TOOL_AGENT = '''"""Benchmark agent: N tool calls in a loop; returns the loop's nanoseconds."""

import json
import pathlib
import time

QUERIES = json.loads((pathlib.Path(__file__).parent / "queries.json").read_text("utf-8"))


def run(provider, task, tools):
    calls = int(task)
    began = time.perf_counter_ns()
    for number in range(calls):
        tools.call("lookup", q=QUERIES[number % len(QUERIES)])
    return str(time.perf_counter_ns() - began)
'''


def lookup_args(index: int) -> dict[str, Any]:
    """The ``index``-th distinct arguments of a ``lookup`` call."""
    return {"q": f"refund window for seat {index:09d}"}


def lookup_result(index: int) -> dict[str, Any]:
    """The recorded result of the ``index``-th lookup: a JSON object of ``RESULT_BYTES``."""
    hits: list[dict[str, Any]] = [
        {
            "doc": f"course-docs/refunds.md#{index}-{n}",
            "score": round(0.9 - n / 10, 1),
            "snippet": "",
        }
        for n in range(_HITS)
    ]
    value: dict[str, Any] = {"query": lookup_args(index)["q"], "hits": hits, "total": _HITS}
    room = RESULT_BYTES - len(_compact(value))
    for n, hit in enumerate(hits):
        share = room // _HITS + (1 if n < room % _HITS else 0)
        hit["snippet"] = _FILLER[:share]
    if len(_compact(value)) != RESULT_BYTES:
        raise RuntimeError(f"lookup result {index} is not {RESULT_BYTES} bytes of JSON")
    return value


@dataclass(frozen=True, slots=True)
class ToolLab:
    """A one-module submission whose agent only calls a tool, and the fixture it needs."""

    root: Path
    fixture: Fixture
    results: dict[str, object]  # tool key -> result, as the grader's parent serves them


def build_tool_lab(folder: Path, distinct: int) -> ToolLab:
    """``benchtools.py``, ``queries.json`` (``distinct`` queries) and, in memory, a fixture
    of ``RESULT_BYTES`` results to them."""
    folder.mkdir(parents=True)
    arguments = [lookup_args(number) for number in range(distinct)]
    (folder / "benchtools.py").write_text(TOOL_AGENT, encoding="utf-8")
    (folder / "queries.json").write_text(json.dumps([a["q"] for a in arguments]), encoding="utf-8")
    calls = {
        tool_key(LOOKUP, args): ToolCall(LOOKUP, args, lookup_result(number))
        for number, args in enumerate(arguments)
    }
    fixture = Fixture("loop", _RECORDED_AT, calls)
    # What grader.grading._reading._fixtures keeps of a decoded fixture: key -> recorded response.
    results: dict[str, object] = {key: call.response for key, call in calls.items()}
    return ToolLab(folder, fixture, results)


def _compact(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
