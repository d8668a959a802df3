"""A run's tool calls as the parent served them, and the two things an expectation asks of
them: a required call (``requires``: the state a run must leave, as ``TOOL`` or ``TOOL
{JSON}``) and a citation (``cites``: ``TOOL: FACT``, a fact the answer must state as a
result of that tool returned it). Pure: the forms, their canonical text and the tests on a
call; ``grader._expect`` judges a run with them.

Everything here is the parent's evidence: the arguments it read off the child's request and
the result it answered with, as canonical JSON. The child's own account of its calls (its
trace) never counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gradekit import UsageError
from grader._facts import mentioned
from grader._shortfall import HEAD, Located, Shortfall, answer_side

__all__ = [
    "TOOL_NAME",
    "Cite",
    "Required",
    "ToolCall",
    "cite",
    "cited_tool",
    "required",
    "required_tool",
    "short_of_citation",
    "short_of_required",
    "strings",
]

TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_REQUIRED = re.compile(r"(?P<tool>[^\s{]+)\s*(?P<args>\{.*)?", re.DOTALL)
_LONGEST = 500  # characters of a required call or a citation: one line


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the parent saw it: where it stood among all the run's calls
    (``step``, 1-based, provider calls counted), the tool, whether the parent served it
    (False: it answered a miss, so the call returned nothing and changed nothing), and the
    arguments and result as canonical JSON ("" for a miss's result)."""

    step: int
    tool: str
    served: bool
    args: str = "{}"
    result: str = ""

    def holds(self, wanted: Mapping[str, Any]) -> bool:
        """Whether the call's arguments hold ``wanted``: every key, with an equal value (a
        table's keys in turn; other values compared as JSON, so ``true`` is not ``1``)."""
        try:
            given = json.loads(self.args or "{}")
        except ValueError:
            return False
        return _holds(given, dict(wanted))


def _holds(given: object, wanted: object) -> bool:
    if isinstance(wanted, dict):
        return isinstance(given, dict) and all(
            key in given and _holds(given[key], value) for key, value in wanted.items()
        )
    return _canonical(given) == _canonical(wanted)


@dataclass(frozen=True, slots=True)
class Required:
    """A call the run must make and the parent serve: the tool, and the arguments it must
    carry (a subset of the call's; empty: any)."""

    tool: str
    args: Mapping[str, Any]

    def __str__(self) -> str:
        return f"{self.tool} {_canonical(self.args)}" if self.args else self.tool


@dataclass(frozen=True, slots=True)
class Cite:
    """A fact the answer must state, and the tool whose served result must have held it."""

    tool: str
    fact: str

    def __str__(self) -> str:
        return f"{self.tool}: {self.fact}"


_REQUIRE_FIX = (
    "write it as TOOL or TOOL {JSON object of the arguments it must carry}, e.g. "
    '\'create_ticket {"priority": "high"}\''
)


def required(text: str, where: str) -> Required:
    """``TOOL`` or ``TOOL {JSON}`` (as ``requires`` and ``--require`` give it) read; a
    ``UsageError`` naming ``where`` and the fix when it is not one."""
    found = _REQUIRED.fullmatch(text.strip())
    if len(text) > _LONGEST or found is None or not TOOL_NAME.fullmatch(found["tool"]):
        raise UsageError(f"{where} holds {text!r}: {_REQUIRE_FIX}")
    args: object = {}
    if found["args"]:
        try:
            args = json.loads(found["args"], parse_constant=_no_constant)
        except ValueError as exc:
            raise UsageError(
                f"{where} holds {text!r}, whose arguments are not JSON ({exc}): {_REQUIRE_FIX}"
            ) from exc
    if not isinstance(args, dict):
        raise UsageError(
            f"{where} holds {text!r}, whose arguments are not a JSON object: {_REQUIRE_FIX}"
        )
    return Required(found["tool"], args)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def cite(text: str, where: str) -> Cite:
    """``TOOL: FACT`` (as ``cites`` and ``--cite`` give it) read, the fact stripped; a
    ``UsageError`` naming ``where`` and the fix when it is not one. The fact itself is
    checked as every fact is (``grader._expect``)."""
    tool, colon, fact = text.partition(":")
    if (
        len(text) > _LONGEST
        or not colon
        or not TOOL_NAME.fullmatch(tool.strip())
        or "\n" in fact
        or not fact.strip()
    ):
        raise UsageError(
            f"{where} holds {text!r}: write a citation as TOOL: FACT, the tool "
            'whose result must hold the fact, e.g. "web_search: 30 days"'
        )
    return Cite(tool.strip(), fact.strip())


def required_tool(text: str) -> str:
    """The tool a ``requires`` entry names, read leniently (no check): "" when none."""
    found = _REQUIRED.fullmatch(text.strip())
    return found["tool"] if found else ""


def cited_tool(text: str) -> str:
    """The tool a ``cites`` entry names, read leniently (no check)."""
    return text.partition(":")[0].strip()


def strings(result: str) -> Iterator[str]:
    """Every string value in a served result's canonical JSON (the keys are the tool's
    names, not what it returned); text that is not JSON is one string."""
    try:
        value = json.loads(result)
    except ValueError:
        yield result
        return
    yield from _strings(value)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def short_of_required(text: str, calls: Sequence[ToolCall], tools: Sequence[str]) -> Located | None:
    """Where a run (its tool ``calls``, and every tool it called) falls short of one
    required call (``text``, canonical): the first such call the parent answered with a
    miss (it changed nothing), else the tool's first call with other arguments, else the
    state the run left (step 0: no call of the tool at all). None when a served call of
    the tool carries the arguments."""
    need = required(text, "requires")
    own = [call for call in calls if call.tool == need.tool]
    matching = [call for call in own if call.holds(need.args)]
    if any(call.served for call in matching):
        return None
    wanted = f"a call of {need}, served"
    if matching:
        first = matching[0]
        return first.step, Shortfall(
            f"call {first.step} ({need.tool})",
            wanted,
            f"call {first.step} ({need.tool}) answered with a miss",
            f"the required call {need} was answered with a miss (call {first.step}), so it "
            "changed nothing",
        )
    if own:
        first = own[0]
        return first.step, Shortfall(
            f"call {first.step} ({need.tool})",
            wanted,
            f"{need.tool} called {len(own)} "
            f"time(s), never so; first as call {first.step} with {first.args}",
            f"no call of {need}: {need.tool} was called {len(own)} time(s), first with "
            f"{first.args}",
        )
    instead = ", ".join(dict.fromkeys(tools))
    observed = f"the run called {instead} instead" if instead else "the run called no tool"
    return 0, Shortfall(
        "state", wanted, observed, f"the run never called the required {need.tool} ({observed})"
    )


def short_of_citation(text: str, calls: Sequence[ToolCall], answer: str) -> Located | None:
    """Where ``answer`` falls short of one citation (``text``, canonical): it does not
    state the fact, or states it although no served result of the tool this run held it
    (at the tool's first call when every call of it was a miss; step 0: at the answer).
    None when a served result held the fact the answer states."""
    want = cite(text, "cites")
    expected = f"states {want.fact!r} as a {want.tool} result this run returned it"
    if not mentioned(answer, want.fact):
        return 0, Shortfall(
            "answer",
            expected,
            answer_side(answer),
            f"the answer does not state {want.fact!r}, which it must cite from {want.tool}",
        )
    own = [call for call in calls if call.tool == want.tool]
    served = [call for call in own if call.served]
    if any(mentioned(value, want.fact) for call in served for value in strings(call.result)):
        return None
    claim = f"the answer states {want.fact!r} but no {want.tool} result this run returned it"
    if own and not served:
        return own[0].step, Shortfall(
            f"call {own[0].step} ({want.tool})",
            f"a served {want.tool} result holding {want.fact!r}",
            f"{want.tool} called {len(own)} time(s), each answered with a miss: no result",
            f"{claim} (every call of {want.tool} was a miss)",
        )
    side = answer_side(answer, want.fact)
    if not own:
        return 0, Shortfall(
            "answer",
            expected,
            f"{side}; no call of {want.tool}",
            f"{claim} ({want.tool} was never called)",
        )
    steps = ", ".join(str(call.step) for call in served)
    head = served[0].result
    head = head if len(head) <= HEAD else head[:HEAD] + "..."
    return 0, Shortfall(
        "answer",
        expected,
        f"{side}; {want.tool} results (call(s) {steps}) without it: {head}",
        f"{claim} (its {len(served)} result(s) say otherwise)",
    )
