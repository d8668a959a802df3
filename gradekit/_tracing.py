"""One trace record per provider call, as JSONL in ``$GRADEKIT_TRACE``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gradekit._exceptions import GradekitError
from gradekit._fixtures import tool_key
from gradekit._keys import prompt_key
from gradekit._provider import Provider

if TYPE_CHECKING:
    from gradekit._toolbox import Toolbox

__all__ = ["JsonlSink", "Sink", "Traced", "TracedTools", "sink_from_env"]

Sink = Callable[[Mapping[str, Any]], None]
TRACE_VARIABLE = "GRADEKIT_TRACE"
T = TypeVar("T")


class JsonlSink:
    """Append each record as one JSON line; one ``write`` per record, so lines never interleave."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __call__(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` to the file."""
        line = json.dumps(record, ensure_ascii=False, separators=(", ", ": ")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def _discard(record: Mapping[str, Any]) -> None:
    """The sink when tracing is off."""


def as_sink(sink: Sink | str | os.PathLike[str] | None) -> Sink:
    """A sink from what a caller passes: None (``$GRADEKIT_TRACE``), a path (a
    ``JsonlSink`` on it), or any callable taking a record."""
    if sink is None:
        return sink_from_env()
    if isinstance(sink, str | os.PathLike):
        return JsonlSink(os.fspath(sink))
    if not callable(sink):
        raise TypeError(f"a trace sink is a path or a callable taking a record, not "
                        f"{type(sink).__name__}: pass Traced(provider, 'trace.jsonl')")
    return sink


def sink_from_env(env: Mapping[str, str] | None = None) -> Sink:
    """A ``JsonlSink`` on ``$GRADEKIT_TRACE``, or a sink that discards when it is unset."""
    path = (os.environ if env is None else env).get(TRACE_VARIABLE, "")
    return JsonlSink(path) if path else _discard


class Traced:
    """Wrap a provider so every call, failed or not, writes one trace record.

    A record: ``key``, ``provider`` (the wrapped provider's name),
    ``latency_ms`` (>= 0), ``ok`` and ``error`` (the exception's class name).
    The exception itself always propagates unchanged.
    """

    def __init__(
        self,
        provider: Provider,
        sink: Sink | str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.provider = provider
        self.name = provider.name
        self.sink = as_sink(sink)  # a path is a JSONL file, as with $GRADEKIT_TRACE
        self._clock = clock

    def complete(self, prompt: str) -> str:
        """Call the wrapped provider and trace the call."""
        fields = {"key": prompt_key(prompt), "provider": self.provider.name}
        return _traced(self.sink, self._clock, fields, lambda: self.provider.complete(prompt))


class TracedTools:
    """Wrap a toolbox so every tool call, failed or not, writes one trace record.

    A record: ``key`` (the tool key: name plus canonical arguments), ``tool``,
    ``latency_ms``, ``ok`` and ``error``; in the same file as the provider's
    records, in call order.
    """

    def __init__(
        self,
        toolbox: Toolbox,
        sink: Sink | str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.toolbox = toolbox
        self.sink = as_sink(sink)
        self._clock = clock

    def call(self, name: str, /, **args: Any) -> Any:
        """Call the wrapped toolbox and trace the call."""
        fields = {"key": _tool_key_or_none(name, args), "tool": name}
        return _traced(self.sink, self._clock, fields, lambda: self.toolbox.call(name, **args))


def _traced(sink: Sink, clock: Callable[[], float], fields: Mapping[str, object],
            call: Callable[[], T]) -> T:
    """Run ``call`` and write one record: ``fields``, then latency, ok and error."""
    started = clock()
    error: str | None = None
    try:
        return call()
    except BaseException as exc:
        error = type(exc).__name__
        raise
    finally:
        elapsed = max(0.0, (clock() - started) * 1000.0)
        sink({**fields, "latency_ms": round(elapsed, 3), "ok": error is None, "error": error})


def _tool_key_or_none(name: str, args: Mapping[str, Any]) -> str | None:
    """The call's key; None when the arguments are not JSON (the call itself fails then)."""
    try:
        return tool_key(name, args)
    except GradekitError:
        return None
