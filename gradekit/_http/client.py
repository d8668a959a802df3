"""The HTTP side of a provider: clients for the official SDKs, recorded, replayed and traced.

An agent built on ``openai`` or ``anthropic`` passes the SDK a client its provider
hands out, and changes nothing else::

    llm = Traced(provider)
    client = openai.OpenAI(base_url=URL, api_key=KEY, http_client=llm.http_client())
    claude = anthropic.Anthropic(api_key=KEY, http_client=llm.http_client("httpx2"))

Every provider gradekit hands to ``run()`` has this side: the ``Recorder`` of
``gradekit record`` (it records into ``<case>.http.json`` beside ``<case>.json``),
the ``Replay`` of ``gradekit run``, and the grader's sandboxed provider, which asks
the grader for each response. ``Traced`` wraps it, writing one trace record per
request. A provider has it when it has ``http_transport()`` and
``async_http_transport()``; ``HttpClients`` builds the clients from those.

The provider owns its transport: closing a client it handed out (``with
openai.OpenAI(...)``) leaves the transport open for the next one, and the
provider's own ``close`` folds the cassette.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from gradekit._exceptions import UsageError

if TYPE_CHECKING:
    import httpx
    import httpx2

    class SyncTransportBase(httpx.BaseTransport, httpx2.BaseTransport):  # type: ignore[misc]
        """What the type checker sees: a transport for either library's client."""

    class AsyncTransportBase(httpx.AsyncBaseTransport, httpx2.AsyncBaseTransport):  # type: ignore[misc]
        """What the type checker sees: an async transport for either library's client."""

else:
    SyncTransportBase = AsyncTransportBase = object

__all__ = [
    "AsyncTransportBase",
    "HttpClients",
    "Library",
    "SyncTransportBase",
    "http_cassette_path",
    "http_transports",
]

Library = Literal["httpx", "httpx2"]
_LIBRARIES: tuple[Library, ...] = ("httpx", "httpx2")


def http_cassette_path(cassette: str | os.PathLike[str]) -> Path:
    """The HTTP cassette beside a provider cassette: ``cassettes/x.json`` ->
    ``cassettes/x.http.json``."""
    path = Path(cassette)
    return path.with_name(f"{path.name.removesuffix('.json')}.http.json")


class _Borrowed(SyncTransportBase):
    """A client's view of a transport its provider owns: closing the client leaves it open."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def handle_request(self, request: Any) -> Any:
        return self._inner.handle_request(request)

    def close(self) -> None:
        """The provider closes what it owns."""


class _AsyncBorrowed(AsyncTransportBase):
    """``_Borrowed`` for async clients."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def handle_async_request(self, request: Any) -> Any:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """The provider closes what it owns."""


def _client(transport: object, library: str, *, sync: bool, options: dict[str, Any]) -> Any:
    """A client of ``library`` on ``transport``, with the caller's other options."""
    if library not in _LIBRARIES:
        raise UsageError(
            f"http_client() makes an httpx or httpx2 client, not {library!r}: "
            "use 'httpx' for openai, 'httpx2' for anthropic"
        )
    if "transport" in options:
        raise UsageError(
            "http_client() sets the transport itself (it records or replays): "
            "pass the client's other options only"
        )
    module = importlib.import_module(library)
    made = (module.Client if sync else module.AsyncClient)(transport=transport, **options)
    return made


class HttpClients:
    """``http_client()`` and ``async_http_client()`` for a provider with ``http_transport()``
    and ``async_http_transport()``."""

    def http_transport(self) -> Any:
        """The transport every request of this provider's sync clients goes through."""
        raise NotImplementedError

    def async_http_transport(self) -> Any:
        """The transport every request of this provider's async clients goes through."""
        raise NotImplementedError

    @overload
    def http_client(self, library: Literal["httpx"] = "httpx", **options: Any) -> httpx.Client: ...
    @overload
    def http_client(self, library: Literal["httpx2"], **options: Any) -> httpx2.Client: ...
    def http_client(self, library: Library = "httpx", **options: Any) -> Any:
        """An ``httpx.Client`` (``openai.OpenAI``'s ``http_client``), or with ``"httpx2"``
        an ``httpx2.Client`` (``anthropic.Anthropic``'s), whose every request is this
        provider's. ``options`` go to the client (``timeout``, ``headers``...)."""
        return _client(_Borrowed(self.http_transport()), library, sync=True, options=options)

    @overload
    def async_http_client(
        self, library: Literal["httpx"] = "httpx", **options: Any
    ) -> httpx.AsyncClient: ...
    @overload
    def async_http_client(
        self, library: Literal["httpx2"], **options: Any
    ) -> httpx2.AsyncClient: ...
    def async_http_client(self, library: Library = "httpx", **options: Any) -> Any:
        """``http_client()`` for ``openai.AsyncOpenAI`` and ``anthropic.AsyncAnthropic``."""
        return _client(
            _AsyncBorrowed(self.async_http_transport()), library, sync=False, options=options
        )


def http_transports(provider: object) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``provider``'s ``http_transport`` and ``async_http_transport``, or a ``UsageError``
    that says which providers have them."""
    sync, asynchronous = (
        getattr(provider, name, None) for name in ("http_transport", "async_http_transport")
    )
    if not callable(sync) or not callable(asynchronous):
        name = getattr(provider, "name", type(provider).__name__)
        raise UsageError(
            f"provider {name!r} has no HTTP side (http_transport()), so it cannot hand an SDK "
            "a client: use the provider gradekit gives run() (record, run and grade all have "
            "one), or a Recorder or Replay of your own"
        )
    return sync, asynchronous
