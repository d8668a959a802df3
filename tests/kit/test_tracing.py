"""Traced: one JSONL record per call, failed calls included."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gradekit import (
    CassetteMiss,
    FakeProvider,
    JsonlSink,
    Replay,
    Traced,
    TracedTools,
    prompt_key,
    tool_key,
)


def ticking(step: float) -> Iterator[float]:
    now = 100.0
    while True:
        yield now
        now += step


def test_every_call_writes_one_record_in_the_trace_format() -> None:
    records: list[Mapping[str, Any]] = []
    clock = ticking(0.0025)
    traced = Traced(
        FakeProvider(["a", "b"], name="provider-a"), records.append, clock=lambda: next(clock)
    )
    assert traced.complete(" first ") == "a"
    assert traced.complete("second") == "b"
    assert records == [
        {
            "key": prompt_key("first"),
            "provider": "provider-a",
            "latency_ms": 2.5,
            "ok": True,
            "error": None,
        },
        {
            "key": prompt_key("second"),
            "provider": "provider-a",
            "latency_ms": 2.5,
            "ok": True,
            "error": None,
        },
    ]
    assert traced.name == "provider-a"


def test_a_failed_call_is_traced_and_the_exception_propagates_unchanged(tmp_path: Path) -> None:
    records: list[Mapping[str, Any]] = []
    traced = Traced(Replay(tmp_path / "c.json", name="provider-b"), records.append)
    with pytest.raises(CassetteMiss):
        traced.complete("never recorded")
    assert len(records) == 1
    assert records[0]["ok"] is False
    assert records[0]["error"] == "CassetteMiss"
    assert records[0]["latency_ms"] >= 0


def test_a_clock_that_goes_backwards_still_gives_a_non_negative_latency() -> None:
    records: list[Mapping[str, Any]] = []
    clock = ticking(-1.0)
    Traced(FakeProvider(["a"]), records.append, clock=lambda: next(clock)).complete("x")
    assert records[0]["latency_ms"] == 0.0


def test_the_default_sink_appends_jsonl_to_gradekit_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("GRADEKIT_TRACE", str(trace))
    Traced(FakeProvider(["a"], name="p")).complete("one")
    Traced(FakeProvider(["b"], name="p")).complete("two")
    lines = trace.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["key"] for line in lines] == [prompt_key("one"), prompt_key("two")]
    assert all(
        set(json.loads(line)) == {"key", "provider", "latency_ms", "ok", "error"} for line in lines
    )


def test_without_gradekit_trace_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRADEKIT_TRACE", raising=False)
    monkeypatch.chdir(tmp_path)
    Traced(FakeProvider(["a"])).complete("one")
    assert list(tmp_path.iterdir()) == []


def test_jsonl_sink_keeps_unicode_readable(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "t.jsonl")
    sink({"provider": "modèle"})
    assert (tmp_path / "t.jsonl").read_text(encoding="utf-8") == '{"provider": "modèle"}\n'


class FakeToolbox:
    def call(self, name: str, /, **args: Any) -> Any:
        return {"found": args}


@pytest.mark.parametrize("as_path", [str, Path])
def test_a_path_is_a_jsonl_sink(tmp_path: Path, as_path: Callable[[str], object]) -> None:
    """``Traced(provider, "trace.jsonl")`` used to fail only at the first call, with
    "'PosixPath' object is not callable"."""
    trace = tmp_path / "trace.jsonl"
    traced = Traced(FakeProvider(["a"], name="p"), as_path(str(trace)))  # type: ignore[arg-type]
    tools = TracedTools(FakeToolbox(), as_path(str(trace)))  # type: ignore[arg-type]
    assert traced.complete("x") == "a"
    tools.call("lookup", q="refunds")
    records = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    assert [(r["key"], r.get("provider"), r.get("tool"), r["ok"]) for r in records] == [
        (prompt_key("x"), "p", None, True),
        (tool_key("lookup", {"q": "refunds"}), None, "lookup", True),
    ]


def test_a_sink_that_is_neither_a_path_nor_callable_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match="a trace sink is a path or a callable"):
        Traced(FakeProvider(["a"]), 42)  # type: ignore[arg-type]
