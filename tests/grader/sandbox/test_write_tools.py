"""Write tools in a graded run: the child runs them on a store that starts empty each case
run, the parent logs every call in order, and no claim turns a read-only miss into a call.

What the parent trusts: the write tools the registry the manifest names declared when the
first child loaded it (before any case), less every tool name a fixture of the submission
holds. The attacks below are a registry that declares a recorded read-only tool a write
tool, an agent that registers a write tool once its run has begun, and agents that call
without end or with arguments of many megabytes to grow the grader's memory. A loud-failure
probe never withholds a write tool's call: no fixture holds it, so it cannot miss.

It tests the sandbox's private ``_declared_writes`` and its caps
(``grader.sandbox._sandbox``) on purpose: what the parent trusts of a registry, and how much
it keeps.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gradekit import Tools, tool_key
from grader import CaseOutcome, Limits, RunResult, Served, Withhold
from grader.sandbox import HARNESS, ProtocolError, RunPlan, Sandbox, Serving, Wall
from grader.sandbox._sandbox import MAX_CALLS, MAX_KEPT, _declared_writes
from grader.scoring import planned_probes

RECORDED = {tool_key("lookup", {"term": "refund"}): {"meaning": "14 days"}}
TOOLS = """
from gradekit import Tools

TOOLS = Tools()


@TOOLS.read_only("lookup")
def lookup(term):
    return {"meaning": "live, never recorded"}


@TOOLS.write("save_note")
def save_note(store, text):
    notes = store.setdefault("notes", [])
    notes.append(text)
    return {"notes": len(notes), "first": notes[0]}
"""
AGENT = """
import json


def run(provider, task, tools):
    found = tools.call("lookup", term="refund")
    saved = tools.call("save_note", text=task)
    again = tools.call("save_note", text=task + " again")
    return json.dumps([found, saved, again], sort_keys=True)
"""
# The attack: ``lookup`` is what the fixtures hold, declared a write tool so that a call
# with arguments never recorded would run here, live, instead of missing.
FORGED_TOOLS = """
from gradekit import Tools

TOOLS = Tools()


@TOOLS.write("lookup")
def lookup(store, term):
    return {"meaning": "live, never recorded"}
"""
UNRECORDED = """
def run(provider, task, tools):
    return str(tools.call("lookup", term="anything else"))
"""
# The other attack: a write tool registered once the run has begun (after the first case
# saw its task), so the registry's declaration would change with what a run met.
LATE = """
from lab.tools import TOOLS


def run(provider, task, tools):
    TOOLS.write("late_" + task, lambda store: "ran here")
    return str(tools.call("late_" + task))
"""


# Memory: a write tool's arguments, a few megabytes a call, for as long as the case's time
# lasts; and a recorded call asked without end.
HEAVY = """
def run(provider, task, tools):
    big = "x" * (2 << 20)
    while True:
        tools.call("save_note", text=big)
"""
ENDLESS = """
def run(provider, task, tools):
    while True:
        tools.call("lookup", term="refund")
"""
# A write tool is the student's code, run by the harness: the walls hold it as they hold the
# agent. Its body tries the host: a file outside, shared memory, the network, a process.
HOSTILE_TOOLS = """
import os
import socket

from gradekit import Tools

TOOLS = Tools()


def _try(store, name, attempt):
    try:
        attempt()
        store[name] = "done"
    except BaseException as exc:
        store[name] = "refused: " + type(exc).__name__


@TOOLS.write("save_note")
def save_note(store, text):
    _try(store, "outside", lambda: open(text + "/outside", "w").write("x"))
    _try(store, "shm", lambda: open("/dev/shm/gradekit-write-tool", "w").write("x"))
    _try(store, "net", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
    _try(store, "fork", lambda: os.fork() or None)
    return dict(store)
"""
HOSTILE = """
def run(provider, task, tools):
    import json
    return json.dumps(tools.call("save_note", text=task), sort_keys=True)
"""
# A write before the read: the probe of the first tool call withholds the read.
WRITE_FIRST = """
def run(provider, task, tools):
    tools.call("save_note", text=task)
    return str(tools.call("lookup", term="refund"))
"""


def submission(root: Path, agent: str, tools: str = TOOLS) -> Path:
    for name, text in {
        "lab/__init__.py": "",
        "lab/agent.py": agent,
        "lab/tools.py": tools,
        "pyproject.toml": "",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def grade_run(
    root: Path,
    scratch: Path,
    wall: Wall,
    cases: Sequence[str],
    recorded: Mapping[str, object] = RECORDED,
    withhold: Withhold | None = None,
) -> RunResult:
    """A run of ``cases`` (each its own task) served as a grading serves it: the fixtures'
    calls, the registry the manifest names, every tool name a fixture holds."""

    def tools(case: str, key: str) -> tuple[bool, object]:
        return (True, recorded[key]) if key in recorded else (False, None)

    names = frozenset(key.partition(" ")[0] for key in recorded)
    serving = Serving(
        answer=lambda case, prompt: None,
        tools=tools,
        registry="lab.tools:TOOLS",
        recorded_tools=names,
    )
    sandbox = Sandbox(root, scratch, Limits(timeout_s=10), wall)
    try:
        return sandbox.run(
            "lab.agent:run",
            [(case, case) for case in cases],
            RunPlan("provider-a", 0, serving, withhold=withhold),
        )
    finally:
        sandbox.close()


@pytest.mark.slow
def test_a_declared_read_only_tool_still_misses_and_never_runs_here(
    tmp_path: Path, isolation: Wall
) -> None:
    root = submission(tmp_path / "sub", UNRECORDED, FORGED_TOOLS)
    outcome = grade_run(root, tmp_path / "scratch", isolation, ["a"]).outcomes["a"]
    assert (outcome.status, outcome.exception, outcome.miss_escaped) == (
        "raised",
        "MissingFixtureError",
        True,
    )
    key = tool_key("lookup", {"term": "anything else"})
    assert [(c.key, c.served, c.write) for c in outcome.calls] == [(key, False, False)]


@pytest.mark.slow
def test_a_write_tool_registered_after_the_run_began_is_not_one(
    tmp_path: Path, isolation: Wall
) -> None:
    root = submission(tmp_path / "sub", LATE)
    outcome = grade_run(root, tmp_path / "scratch", isolation, ["a"]).outcomes["a"]
    assert (outcome.status, outcome.exception) == ("raised", "MissingFixtureError")
    assert [(c.tool, c.served, c.write) for c in outcome.calls] == [("late_a", False, False)]


@pytest.mark.slow
def test_write_tools_run_in_the_child_on_a_store_empty_at_each_case_run(
    tmp_path: Path, isolation: Wall
) -> None:
    root = submission(tmp_path / "sub", AGENT)
    for n in range(2):  # a second grading run starts clean too
        result = grade_run(root, tmp_path / f"scratch-{n}", isolation, ["one", "two"])
        for case in ("one", "two"):
            outcome = result.outcomes[case]
            assert outcome.status == "returned", outcome
            found, saved, again = json.loads(outcome.answer or "")
            assert found == {"meaning": "14 days"}  # the fixture's, never the live tool's
            assert saved == {"notes": 1, "first": case}  # nothing left by the case before
            assert again == {"notes": 2, "first": case}
            assert outcome.calls == (
                Served(
                    tool_key("lookup", {"term": "refund"}),
                    True,
                    tool="lookup",
                    args='{"term":"refund"}',
                    result='{"meaning":"14 days"}',
                ),
                Served(
                    tool_key("save_note", {"text": case}),
                    True,
                    tool="save_note",
                    args=f'{{"text":"{case}"}}',
                    write=True,
                ),
                Served(
                    tool_key("save_note", {"text": f"{case} again"}),
                    True,
                    tool="save_note",
                    args=f'{{"text":"{case} again"}}',
                    write=True,
                ),
            )


def test_a_child_declares_its_write_tools_as_the_parent_bounds_them() -> None:
    assert _declared_writes(None) == frozenset()
    assert _declared_writes(["save_note"]) == {"save_note"}
    for bad in ("save_note", ["two words"], [""], [1], ["x"] * 65):
        with pytest.raises(ProtocolError, match="write tools"):
            _declared_writes(bad)


def test_the_harness_declares_only_what_the_parent_takes_for_a_write_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The registry's write tools, by name; a read-only tool, a name the parent would refuse
    and a registry that is no ``Tools`` are never declared."""
    spec = importlib.util.spec_from_file_location("gradekit_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    tools = Tools()
    tools.read_only("lookup", lambda term: term)
    tools.write("save_note", lambda store, text: text)

    class Odd:  # a registry of the student's own, with a name no tool key allows
        names = ("two words", "fine")

        def write_tool(self, name: str) -> object:
            return lambda store: None

    module = type(sys)("registry_under_test")
    module.TOOLS, module.ODD, module.LIST = tools, Odd(), ["save_note"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "registry_under_test", module)
    assert sorted(harness.write_tools("registry_under_test:TOOLS")) == ["save_note"]
    assert sorted(harness.write_tools("registry_under_test:ODD")) == ["fine"]
    assert harness.write_tools("registry_under_test:LIST") == {}
    assert harness.write_tools("") == {}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent", "limit"),
    [
        (HEAVY, f"more than {MAX_KEPT >> 20} MiB of tool arguments and results in one case"),
        (ENDLESS, f"more than {MAX_CALLS} calls in one case"),
    ],
)
def test_an_agent_that_floods_its_calls_loses_the_case_not_the_graders_memory(
    tmp_path: Path, isolation: Wall, agent: str, limit: str
) -> None:
    root = submission(tmp_path / "sub", agent)
    outcome = grade_run(root, tmp_path / "scratch", isolation, ["a"]).outcomes["a"]
    assert (outcome.status, outcome.detail) == ("crashed", f"broke the grader's protocol: {limit}")
    assert len(outcome.calls) <= MAX_CALLS
    assert sum(len(call.args) + len(call.result) for call in outcome.calls) <= MAX_KEPT


@pytest.mark.slow
def test_a_loud_failure_probe_withholds_a_read_and_never_a_write(
    tmp_path: Path, isolation: Wall
) -> None:
    root = submission(tmp_path / "sub", WRITE_FIRST)
    primary = grade_run(root, tmp_path / "scratch", isolation, ["a"]).outcomes["a"]
    assert [(c.tool, c.write) for c in primary.calls] == [("save_note", True), ("lookup", False)]
    assert planned_probes(primary) == (Withhold("tool", 1, "a"),)
    probed = grade_run(
        root, tmp_path / "probe", isolation, ["a"], withhold=Withhold("tool", 1, "a")
    ).outcomes["a"]
    assert (probed.status, probed.exception) == ("raised", "MissingFixtureError")
    assert [(c.tool, c.served, c.withheld) for c in probed.calls] == [
        ("save_note", True, False),
        ("lookup", False, True),
    ]


def test_planned_probes_skip_write_calls() -> None:
    calls = (
        Served("k1", True, tool="save_note", write=True),
        Served("k2", True, tool="a"),
        Served("k3", True, tool="save_note", write=True),
        Served("k4", True, tool="b"),
    )
    outcome = CaseOutcome("c", "returned", calls=calls)
    assert planned_probes(outcome) == (Withhold("tool", 1, "c"), Withhold("tool", 2, "c"))


@pytest.mark.slow
def test_a_write_tool_is_walled_as_the_agent_is(tmp_path: Path, isolation: Wall) -> None:
    outside = tmp_path / "host"
    outside.mkdir()
    outside.chmod(0o777)
    shm = Path("/dev/shm/gradekit-write-tool")
    root = submission(tmp_path / "sub", HOSTILE, HOSTILE_TOOLS)
    result = grade_run(root, tmp_path / "scratch", isolation, [str(outside)])
    outcome = result.outcomes[str(outside)]
    assert outcome.status == "returned", outcome
    tried = json.loads(outcome.answer or "")
    assert sorted(tried) == ["fork", "net", "outside", "shm"]
    assert all(value.startswith("refused") for value in tried.values()), tried
    assert list(outside.iterdir()) == [] and not shm.exists()
    assert result.refusals  # the wall says what it refused
