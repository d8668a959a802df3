"""Tool fixture lookup: one ``ToolReplay.call`` hit per call, on fixtures of growing size."""

from __future__ import annotations

from typing import Any

from bench._plan import Plan
from bench._table import NO_TARGET, Row, fmt_size, note_row, timed
from bench._timing import Stats, per_call
from gradekit import ToolReplay, tool_key
from gradekit.internal import Fixture, ToolCall

__all__ = ["tool_rows"]

_TOOL = "search_docs"
_RECORDED_AT = "2024-01-01T00:00:00Z"


def tool_rows(plan: Plan) -> list[Row]:
    """``tool_key`` alone, then a hit on fixtures of each of ``plan.cassette_sizes`` calls.

    The fixtures are built in memory: ``ToolReplay(path)`` serves from the
    same dict once the file is read, and reading it is not what is timed.
    """
    probe = _args(0)
    key = per_call(lambda args: tool_key(_TOOL, args), [probe] * plan.fast.calls, plan.fast)
    rows = [timed("gradekit tool_key alone (2 arguments)", "—", key)]
    medians: list[float] = []
    for size in plan.cassette_sizes:
        stats = _hits(size, plan)
        medians.append(stats.median_ns)
        operation = f"gradekit ToolReplay.call, hit ({_TOOL}, 2 arguments)"
        # The brief sets no limit here, only a flat cost: the last row shows the growth.
        rows.append(timed(operation, fmt_size(size), stats, NO_TARGET))
    sizes = f"{fmt_size(plan.cassette_sizes[0])} to {fmt_size(plan.cassette_sizes[-1])}"
    growth = f"x{medians[-1] / medians[0]:.2f}"
    rows.append(note_row("gradekit ToolReplay.call median, largest / smallest", sizes, growth))
    return rows


def _hits(size: int, plan: Plan) -> Stats:
    """The same recorded call, asked over and over: the middle one, not the first."""
    replay, args = ToolReplay(_fixture(size)), _args(size // 2)
    if replay.call(_TOOL, **args) != _response(size // 2):
        raise RuntimeError(f"ToolReplay served the wrong answer from {size} calls")
    return per_call(lambda a: replay.call(_TOOL, **a), [args] * plan.fast.calls, plan.fast)


def _fixture(size: int) -> Fixture:
    calls = {
        tool_key(_TOOL, _args(i)): ToolCall(_TOOL, _args(i), _response(i)) for i in range(size)
    }
    return Fixture(f"bench-tools-{size}", _RECORDED_AT, calls)


def _args(index: int) -> dict[str, Any]:
    return {"query": f"refund window for seat {index:09d}", "limit": 3}


def _response(index: int) -> dict[str, Any]:
    return {"hits": [f"course-docs/refunds.md#{index}-{n}" for n in range(3)], "total": 3}
