"""The ``cut-point`` stretch goal's evidence: the submission's incident test, run in the
sandbox twice.

A submission claims it with a recorded incident and a cut-point test (manifest
``incident_test = "package.module:function"``, a function of no arguments that passes
when it returns) and names the live guard the test relies on (``guard =
"package.module:function"``). The evidence holds when the test passes on the submission's
own code, and fails once that guard is replaced by one that lets every action through:
a test that passes either way checks only its stubs. ``Sandbox.run_cut_point_test`` runs
it; this module reads the child's verdict and judges the evidence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from grader._model import Limits
from grader.sandbox._channel import Child, Event, ProtocolError, child_ending, child_text
from grader.sandbox._wall import Layout

__all__ = ["CutPointRun", "cut_point_problem", "cut_point_verdict"]


@dataclass(frozen=True, slots=True)
class CutPointRun:
    """One run of a cut-point test: passed, or why not (``detail``); ``tampering`` names a
    verdict the harness did not send."""

    passed: bool
    detail: str = ""
    tampering: str = ""


def cut_point_verdict(child: Child, layout: Layout, limits: Limits, seal: str) -> CutPointRun:
    """Wait for the cut-point test's verdict from ``child``, however it ends."""
    deadline, loaded = time.monotonic() + limits.timeout_s, False
    while True:
        try:
            event = child.receive(deadline)
        except ProtocolError as exc:
            return CutPointRun(False, f"broke the grader's protocol: {exc}")
        if isinstance(event, Event):
            return CutPointRun(False, f"the test {child_ending(child, event, deadline, limits)[1]}")
        op = event["op"]
        if op == "refused":
            continue
        if op == "ready" and not loaded:
            loaded, deadline = True, time.monotonic() + limits.timeout_s
        elif op == "import_error" and not loaded:
            return CutPointRun(
                False,
                "could not be loaded: "
                + (layout.scrub(child_text(event.get("error"))) or "an error"),
            )
        elif op in ("cut_point", "tampered") and event.get("seal") != seal:
            return CutPointRun(
                False,
                "its verdict was forged",
                tampering=f"a {op} message that "
                "the harness did not send, written on the grader's channel",
            )
        elif op == "tampered":
            return CutPointRun(
                False,
                "its verdict was forged",
                tampering="the submission replaced the harness's code",
            )
        elif op == "cut_point" and loaded:
            error = layout.scrub(child_text(event.get("error")))
            return CutPointRun(event.get("passed") is True and not error, error)
        else:
            return CutPointRun(False, "broke the grader's protocol: an unexpected message")


def cut_point_problem(
    own: CutPointRun | None, allowing: CutPointRun | None, *, test: str, guard: str
) -> str | None:
    """None when the evidence holds; else why not, with the fix."""
    if not test or not guard:
        return (
            'declare incident_test = "package.module:function" (your cut-point test) and '
            'guard = "package.module:function" (the live guard it checks) in '
            "[tool.gradekit]"
        )
    if own is None or allowing is None:
        return "the cut-point test was not run"
    if not own.passed:
        return (
            f"your cut-point test {test} fails on your own code ({own.detail}): fix the "
            "guard, or the test"
        )
    if allowing.passed:
        return (
            f"your cut-point test {test} still passes when {guard} allows every action: "
            "it cannot fail, so it tests nothing; run the action live in the replay plan "
            "and assert it did not run"
        )
    return None
