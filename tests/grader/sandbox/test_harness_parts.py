"""The run hosts' serving loop in ``grader/sandbox/_harness.py``, as named parts.

This reads a private file on purpose: the harness is one standard-library file, run by
path inside the sandbox, and its hosts' loop (set up once, fork a run per request, report
each one's end) used to be one 320-line function of twelve closures (``serve_runs``). The
issue that split it asks that it stay split: every part of the loop named below exists,
is under 60 lines and has a McCabe complexity of at most 15. The parts are named here, not
found, so that a part renamed or merged away is a decision this test is updated for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from grader.sandbox import HARNESS

MOST_LINES = 60  # a part has fewer
MOST_COMPLEXITY = 15

# The serving loop's parts: module functions by name, methods as "Class.method".
SERVING = (
    "host_setup",
    "forker",
    "take_descriptors",
    "join",
    "request_of",
    "reaped",
    "refuse_run",
    "report_started",
    "report_end",
    "RunHost.__init__",
    "RunHost.serve",
    "RunHost.take_request",
    "RunHost.watch",
    "RunHost.unwatch_go",
    "RunHost.start",
    "RunHost.let_go",
    "RunHost.ended",
    "serve_process_host",
    "ProcessWallHost.__init__",
    "ProcessWallHost.start",
    "ProcessWallHost.start_run",
    "ProcessWallHost.let_go",
    "ProcessWallHost.ended",
    "serve_host",
    "raw_copier",
    "seccomp_filter",
    "pid1_clone",
    "NamespacesHost.__init__",
    "NamespacesHost.check",
    "NamespacesHost.mount",
    "NamespacesHost.copy_call",
    "NamespacesHost.new_pid_namespace",
    "NamespacesHost.fork_in_own_pid_namespace",
    "NamespacesHost.network",
    "NamespacesHost.walls",
    "NamespacesHost.mount_proc",
    "NamespacesHost.writable_space",
    "NamespacesHost.mount_shown",
    "NamespacesHost.drop_privileges",
    "NamespacesHost.confine",
    "NamespacesHost.start_run",
    "NamespacesHost.pid1",
    "NamespacesHost.trials",
    "NamespacesHost.trial",
    "NamespacesHost.trial_pid1",
    "NamespacesHost.start",
    "NamespacesHost.let_go",
    "NamespacesHost.ended",
    "NamespacesHost.ran",
)
# The one part whose product is a closure: the fork it returns.
RETURNS_A_CLOSURE = frozenset({"forker"})

# What adds a path, as McCabe counts it (mccabe, ruff's C901), and a little more: a
# conditional expression, a comprehension and each of its ``if``s, and each operand of
# ``and``/``or`` past the first. A function nested in a part counts toward the part, as
# ruff counts it.
BRANCHES = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ExceptHandler,
    ast.IfExp,
    ast.comprehension,
    ast.match_case,
)

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _tree() -> ast.Module:
    return ast.parse(HARNESS.read_text(encoding="utf-8"))


def _parts(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every module function and class method of ``body``, by its qualified name."""
    for node in body:
        if isinstance(node, Function):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _parts(node.body, f"{prefix}{node.name}.")


def complexity(function: Function) -> int:
    """McCabe's cyclomatic complexity of ``function``: 1, plus one a branch (``BRANCHES``),
    one a comprehension's ``if``, one a ``try``'s ``else``, and one an operand of a boolean
    operation past the first."""
    paths = 1
    for node in ast.walk(function):
        if isinstance(node, BRANCHES):
            paths += 1
        if isinstance(node, ast.comprehension):
            paths += len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            paths += len(node.values) - 1
        elif isinstance(node, ast.Try | ast.TryStar) and node.orelse:
            paths += 1
    return paths


PARTS = dict(_parts(_tree().body))


def test_serve_runs_is_gone_in_favour_of_named_parts() -> None:
    named = {node.name for node in ast.walk(_tree()) if isinstance(node, Function)}

    assert "serve_runs" not in named
    assert sorted(set(SERVING) - set(PARTS)) == []


@pytest.mark.parametrize("name", SERVING)
def test_each_part_of_the_serving_loop_is_short_and_simple(name: str) -> None:
    part = PARTS[name]
    assert part.end_lineno is not None
    lines = part.end_lineno - part.lineno + 1

    assert lines < MOST_LINES, f"{name} is {lines} lines"
    assert complexity(part) <= MOST_COMPLEXITY, f"{name}'s complexity is {complexity(part)}"
    assert ast.get_docstring(part), f"{name} says nothing of what it is"


@pytest.mark.parametrize("name", sorted(set(SERVING) - RETURNS_A_CLOSURE))
def test_no_part_of_the_serving_loop_hides_a_closure(name: str) -> None:
    part = PARTS[name]
    nested = [
        node.name for node in ast.walk(part) if isinstance(node, Function) and node is not part
    ]

    assert nested == [], f"{name} defines {nested}: make them parts of their own"


def test_the_complexity_counts_as_mccabe_does() -> None:
    source = """
def f(a, b):
    if a and b or a:
        return [x for x in a if x]
    for x in a:
        while x:
            x = 1 if b else 0
    try:
        pass
    except OSError:
        pass
    else:
        pass
"""
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    # 1 + if + 2 operands past the first + comprehension and its if + for + while + ifexp
    # + except + else
    assert complexity(function) == 11
