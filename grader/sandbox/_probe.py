"""The parent's side of the own-Replay probe (``Sandbox.probe_replay``): the cassette the
submission's ``Replay`` is tried on, and the verdict on what it did with a recorded prompt
and an unknown one."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from gradekit import Cassette, Entry, prompt_key
from gradekit.internal import encode_cassette
from grader._model import Limits, ReplayProbe
from grader.sandbox._channel import (
    Child,
    Event,
    ProtocolError,
    child_ending,
    child_name,
    child_text,
    replaced_names,
)
from grader.sandbox._wall import Layout

__all__ = ["ProbeTalk", "probe_cassette"]


def probe_cassette(
    layout: Layout,
    recorded: Mapping[str, str],
    unknown: str | None,
    case: str = "case",
    folder: str = "cassettes",
) -> tuple[Path, dict[str, object], str | None]:
    """Write ``recorded`` (prompt -> response) as ``case``'s cassette in the run's ``work``,
    for the child to put at ``<folder>/<case>.json`` in its copy, where the submission keeps
    its own (nothing in its name, its place or its content says it is a probe);
    return its path, what the child is told to ask (one recorded prompt wrapped in extra
    whitespace, and ``unknown`` or another prompt never recorded), and the answer the
    recorded prompt must get (None when nothing was recorded)."""
    entries = {prompt_key(p): Entry(p.strip(), r) for p, r in sorted(recorded.items())}
    cassette = layout.work / "cassette.json"
    cassette.write_bytes(encode_cassette(Cassette(case=case, entries=entries)))
    first = min(recorded, default=None)
    expected = None if first is None else entries[prompt_key(first)].response
    probe: dict[str, object] = {
        "cassette": layout.inside(cassette),
        "as": f"{folder}/{case}.json",
        "hit": None if first is None else f"  \n\t{first.strip()}\n  ",
        "miss": _unknown_prompt(entries, unknown),
    }
    return cassette, probe, expected


class ProbeTalk:
    """The parent's side of one probe's child: it waits for the verdict and judges it."""

    def __init__(self, layout: Layout, limits: Limits, expected: str | None, seal: str) -> None:
        self._layout, self._limits, self._expected, self._seal = layout, limits, expected, seal
        self._loaded = False

    def converse(self, child: Child) -> ReplayProbe:
        """Wait for the probe's verdict, however the child ends."""
        deadline = time.monotonic() + self._limits.timeout_s
        while True:
            try:
                event = child.receive(deadline)
            except ProtocolError as exc:
                return self._failed(f"broke the grader's protocol: {exc}")
            if isinstance(event, Event):
                return self._failed(child_ending(child, event, deadline, self._limits)[1])
            op = event["op"]
            if op == "refused":
                continue
            if op == "ready" and not self._loaded:
                self._loaded, deadline = True, time.monotonic() + self._limits.timeout_s
            elif op == "import_error" and not self._loaded:
                detail = self._layout.scrub(child_text(event.get("error")))
                return ReplayProbe(False, False, False, detail=detail or "could not be loaded")
            elif op in ("probe", "tampered") and event.get("seal") != self._seal:
                return self._tampered(
                    f"a {op} message that the harness did not send: written "
                    "on the grader's channel by the submission"
                )
            elif op == "tampered":
                return self._tampered(
                    f"the submission replaced the harness's code ({replaced_names(event)})"
                )
            elif op == "probe" and self._loaded:
                return self._judge(event.get("hit"), event.get("miss"))
            else:
                return self._failed("broke the grader's protocol: an unexpected message")

    def _tampered(self, what: str) -> ReplayProbe:
        return ReplayProbe(
            self._loaded, False, False, detail="the probe's verdict was forged", tampering=what
        )

    def _failed(self, why: str) -> ReplayProbe:
        return ReplayProbe(self._loaded, False, False, detail=f"the probe {why}")

    def _judge(self, hit: object, miss: object) -> ReplayProbe:
        if not isinstance(miss, dict) or not (hit is None or isinstance(hit, dict)):
            return self._failed("broke the grader's protocol: a malformed verdict")
        exception = child_name(miss.get("exception"))
        notes = []
        if self._expected is None:
            notes.append("nothing was recorded, so the whitespace probe was skipped")
        whitespace_hit = hit is not None and hit.get("answer") == self._expected
        if self._expected is not None and not whitespace_hit:
            raised = child_name(hit.get("exception")) if hit is not None else None
            got = f"raised {raised}" if raised else "got a different answer"
            notes.append(f"a recorded prompt with extra outer whitespace {got}")
        if exception is None:
            returned = child_name(miss.get("returned_type")) or "a value"
            notes.append(f"an unknown prompt returned {returned} instead of raising")
        classes = miss.get("classes")
        raised_miss = isinstance(classes, list) and "CassetteMiss" in classes
        return ReplayProbe(
            True, whitespace_hit, exception is not None, exception, "; ".join(notes), raised_miss
        )


def _unknown_prompt(entries: Mapping[str, Entry], unknown: str | None) -> str:
    prompt = unknown or "gradekit sandbox probe: a prompt that was never recorded"
    while prompt_key(prompt) in entries:
        prompt += "!"
    return prompt
