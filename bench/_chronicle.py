"""agent-chronicle 1.x, measured in process: its import name is ``chronicle`` (0.5.0, the
Chronicle paper's version, has the same name: ``bench/_chronicle05.py`` measures it apart).

Chronicle saves recordings to the AgentPlane control plane over HTTP and has
no local store, so the control plane is replaced by an in-memory
``ControlPlaneClient`` (the package's own protocol): recording runs its real
interceptor and background delivery queue, replay runs ``chronicle.replay``
on the delivered envelopes, and the load analogue runs its HTTP client's
read path against ``httpx.MockTransport``. Nothing talks to a server.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import httpx

from bench._data import prompts
from bench._plan import Plan
from bench._table import PeerRows, Row, fmt_size, note_row, timed
from bench._targets import LOAD_TARGET, RECORD_TARGET, REPLAY_TARGET
from bench._timing import Stats, per_call, repeated

__all__ = ["measure"]

_BOUNDARY = "llm.complete"


class _MemoryPlane:
    """A control plane that keeps what it is sent: implements chronicle's ControlPlaneClient."""

    def __init__(self) -> None:
        self.envelopes: list[Any] = []

    def upsert_trace(self, trace: object) -> None:
        """Traces carry no answers: nothing to keep."""

    def upsert_span(self, span: object) -> None:
        """Spans carry no answers: nothing to keep."""

    def append_envelopes(self, envelopes: Sequence[Any]) -> None:
        """Keep the recorded crossings, in delivery order."""
        self.envelopes.extend(envelopes)

    def read_span_envelopes(self, trace_id: str, span_id: str) -> list[Any]:
        """Everything kept: the benchmark records one span."""
        return list(self.envelopes)

    def close(self) -> None:
        """Nothing to release."""


def _dispatch(prompt: str) -> str:
    """The 'live' model, as cheap as the FakeProvider lambda gradekit's Recorder wraps."""
    return "answer"


def measure(plan: Plan) -> PeerRows:
    """Every agent-chronicle row, or 'not installed' rows when it cannot be imported."""
    try:
        chronicle = importlib.import_module("chronicle")
    except ImportError as exc:
        return PeerRows.not_installed("agent-chronicle 1.x", str(exc))
    name = f"agent-chronicle {importlib.metadata.version('agent-chronicle')}"
    try:
        return _measure(chronicle, name, plan)
    finally:
        chronicle.reset()  # stop its delivery thread and forget the in-memory plane


def _measure(chronicle: ModuleType, name: str, plan: Plan) -> PeerRows:
    plane = _MemoryPlane()
    chronicle.configure(client=plane, service_name="gradekit-bench")
    call = chronicle.wrap_llm(_BOUNDARY, _dispatch)
    texts = prompts(plan.record.calls, tag="chronicle")
    overhead = _record(chronicle, call, plane, texts, plan)
    replayed = _replay(chronicle, call, plane.envelopes, texts, plan)
    size = fmt_size(len(texts))
    rows = PeerRows(notes=[_NOTE.format(name=name)])
    operation = f"{name} wrap_llm crossing, RECORD overhead (minus the bare function)"
    rows.record.append(timed(operation, size, overhead, RECORD_TARGET))
    operation = f"{name} wrap_llm crossing, REPLAY stub (by name + call count)"
    rows.replay.append(timed(operation, size, replayed, REPLAY_TARGET))
    rows.load.append(_load_row(chronicle, name, plane.envelopes[: plan.peer_load_size], plan))
    rows.peers.append(_not_measured(name))
    return rows


def _record(
    chronicle: ModuleType, call: Any, plane: _MemoryPlane, texts: list[str], plan: Plan
) -> Stats:
    """Record every text as one crossing of one span; the bare function's cost taken off."""
    bare = per_call(_dispatch, texts, plan.record)
    with chronicle.record("gradekit-bench"):
        gross = per_call(call, texts, plan.record)
    # Leaving the span flushed the queue: every crossing is now in the plane, in call order.
    if len(plane.envelopes) != len(texts):
        raise RuntimeError(f"chronicle delivered {len(plane.envelopes)} of {len(texts)} crossings")
    return gross.minus(bare.median_ns)


_NOTE = (
    "{name}: recorded with a real `chronicle.record` span, `wrap_llm` and its background "
    "delivery queue, delivered to an in-memory ControlPlaneClient instead of the control plane; "
    "replay matches by boundary name and call count, not by prompt."
)


def _replay(
    chronicle: ModuleType, call: Any, envelopes: list[Any], texts: list[str], plan: Plan
) -> Stats:
    """Replay the recorded span: the n-th call gets the n-th recorded answer."""
    with chronicle.replay(envelopes):
        if call(texts[0]) != "answer":  # a fresh replay per block: this one is only a check
            raise RuntimeError("agent-chronicle replay did not return the recorded answer")
    with chronicle.replay(envelopes):
        stats = per_call(call, texts, plan.record)
    return stats


def _load_row(chronicle: ModuleType, name: str, envelopes: list[Any], plan: Plan) -> Row:
    """The closest thing to a cassette load: read a span's envelopes and build the replay index.

    Its real HTTP client parses what the control plane would send; MockTransport hands it
    the bytes, so the time is the client's parsing and validation, not a network.
    """
    client_module = importlib.import_module("chronicle.repositories.http_control_plane_client")
    body = {"envelopes": [e.model_dump(mode="json", exclude_none=True) for e in envelopes]}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=body))
    client = client_module.HttpControlPlaneClient("http://plane.invalid", transport=transport)

    def read_and_index() -> None:
        read = client.read_span_envelopes("trace", "span")
        with chronicle.replay(read):
            pass

    try:
        stats = repeated(read_and_index, plan.load_repeats)
    finally:
        client.close()
    operation = f"{name} read_span_envelopes (MockTransport) + replay index"
    return timed(operation, fmt_size(len(envelopes)), stats, LOAD_TARGET)


def _not_measured(name: str) -> Row:
    operation = (
        f"{name}: saving to and reading from the control plane over HTTP "
        "(needs the AgentPlane server; 1.x has no local store)"
    )
    return note_row(operation)
