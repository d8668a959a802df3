"""One trace record per provider call, as JSONL in ``$GRADEKIT_TRACE``: per ``complete``,
per tool call, and per HTTP request of an SDK client the provider handed out."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gradekit._exceptions import GradekitError
from gradekit._fixtures import tool_key
from gradekit._http.cassette import request_key
from gradekit._http.client import (
    AsyncTransportBase,
    HttpClients,
    SyncTransportBase,
    http_transports,
)
from gradekit._keys import prompt_key
from gradekit._provider import Provider
from gradekit._toolbox import Toolbox

__all__ = [
    "AsyncTracedTransport",
    "JsonlSink",
    "Sink",
    "Traced",
    "TracedTools",
    "TracedTransport",
    "sink_from_env",
]

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
        raise TypeError(
            f"a trace sink is a path or a callable taking a record, not "
            f"{type(sink).__name__}: pass Traced(provider, 'trace.jsonl')"
        )
    return sink


def sink_from_env(env: Mapping[str, str] | None = None) -> Sink:
    """A ``JsonlSink`` on ``$GRADEKIT_TRACE``, or a sink that discards when it is unset."""
    path = (os.environ if env is None else env).get(TRACE_VARIABLE, "")
    return JsonlSink(path) if path else _discard


class Traced(HttpClients):
    """Wrap a provider so every call, failed or not, writes one trace record.

    A record: ``key``, ``provider`` (the wrapped provider's name),
    ``latency_ms`` (>= 0), ``ok`` and ``error`` (the exception's class name).
    The exception itself always propagates unchanged.

    The clients ``http_client()`` and ``async_http_client()`` hand out (the
    wrapped provider's, see ``gradekit._http.client``) trace each HTTP request
    the same way, keyed by ``request_key``: an SDK's retries are each a call.
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

    def http_transport(self) -> TracedTransport:
        """The wrapped provider's transport, traced."""
        return TracedTransport(
            http_transports(self.provider)[0](), self.name, self.sink, clock=self._clock
        )

    def async_http_transport(self) -> AsyncTracedTransport:
        """The wrapped provider's async transport, traced."""
        return AsyncTracedTransport(
            http_transports(self.provider)[1](), self.name, self.sink, clock=self._clock
        )


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


def _traced(
    sink: Sink, clock: Callable[[], float], fields: Mapping[str, object], call: Callable[[], T]
) -> T:
    """Run ``call`` and write one record: ``fields``, then latency, ok and error."""
    started = clock()
    error: str | None = None
    try:
        return call()
    except BaseException as exc:
        error = type(exc).__name__
        raise
    finally:
        _write(sink, fields, started, clock(), error)


def _write(
    sink: Sink, fields: Mapping[str, object], started: float, ended: float, error: str | None
) -> None:
    """One record: ``fields``, then the latency from ``started`` to ``ended``, ok and error."""
    elapsed = max(0.0, (ended - started) * 1000.0)
    sink({**fields, "latency_ms": round(elapsed, 3), "ok": error is None, "error": error})


def _tool_key_or_none(name: str, args: Mapping[str, Any]) -> str | None:
    """The call's key; None when the arguments are not JSON (the call itself fails then)."""
    try:
        return tool_key(name, args)
    except GradekitError:
        return None


class TracedTransport(SyncTransportBase):
    """Write one trace record per request, as ``Traced`` does per ``complete``: ``key`` is
    the request's key (``gradekit.request_key``), ``provider`` the provider's name."""

    def __init__(
        self, inner: Any, name: str, sink: Sink, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._inner, self._name, self._sink, self._clock = inner, name, sink, clock

    def handle_request(self, request: Any) -> Any:
        fields = {
            "key": request_key(request.method, str(request.url), request.read()),
            "provider": self._name,
        }
        started, error = self._clock(), None
        try:
            return self._inner.handle_request(request)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            _write(self._sink, fields, started, self._clock(), error)

    def close(self) -> None:
        """The provider closes the transport it owns, not a client's view of it."""


class AsyncTracedTransport(AsyncTransportBase):
    """``TracedTransport`` for async clients."""

    def __init__(
        self, inner: Any, name: str, sink: Sink, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._inner, self._name, self._sink, self._clock = inner, name, sink, clock

    async def handle_async_request(self, request: Any) -> Any:
        fields = {
            "key": request_key(request.method, str(request.url), await request.aread()),
            "provider": self._name,
        }
        started, error = self._clock(), None
        try:
            return await self._inner.handle_async_request(request)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            _write(self._sink, fields, started, self._clock(), error)

    async def aclose(self) -> None:
        """The provider closes the transport it owns, not a client's view of it."""
