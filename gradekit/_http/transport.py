"""Record and replay the official SDKs at their HTTP transport, with no monkeypatching.

``CassetteTransport`` (and ``AsyncCassetteTransport``) is given to the SDK's
own client, ``httpx.Client(transport=...)`` for ``openai`` and
``httpx2.Client(transport=...)`` for ``anthropic``. One class serves both
libraries: it answers a request with a response of the request's own library,
so neither is imported here until a request of it arrives.

The policy, the lock, the journal and the fold are the Recorder's
(``gradekit._journal.JournaledRecording``); the format is ``gradekit._http.cassette``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, Self, overload

from gradekit._exceptions import CassetteMiss, UsageError
from gradekit._http.cassette import (
    HTTP_CASSETTE,
    KEPT_HEADERS,
    HttpCassette,
    HttpCassetteCodec,
    HttpRequest,
    HttpResponse,
    Interaction,
    slot,
)
from gradekit._http.client import AsyncTransportBase, SyncTransportBase
from gradekit._http.miss import http_miss
from gradekit._journal import JournaledRecording, Mode, utc_now
from gradekit._secrets import refuse_secrets

__all__ = ["AsyncCassetteTransport", "CassetteTransport", "async_twin"]

if TYPE_CHECKING:
    import httpx
    import httpx2

_LIBRARIES = ("httpx", "httpx2")
# Request headers whose value is a credential: never written, and refused anywhere else.
_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "cookie")
_SCHEMES = ("Bearer ", "Basic ", "bearer ", "basic ")
_MIN_SECRET_LENGTH = 8


def _library(request: object) -> ModuleType:
    """The HTTP library ``request`` belongs to (already imported: it made the request)."""
    name = type(request).__module__.partition(".")[0]
    if name not in _LIBRARIES:
        raise UsageError(
            f"a CassetteTransport serves httpx and httpx2 requests, not {type(request).__name__} "
            f"from {name}: give it to httpx.Client(transport=...) or httpx2.Client(transport=...)"
        )
    return importlib.import_module(name)


_MISSES: dict[str, type[CassetteMiss]] = {}


def _missed(library: ModuleType, miss: CassetteMiss, request: object) -> CassetteMiss:
    """``miss`` as also the request library's ``TransportError``.

    The SDKs retry a transport error and wrap it (``openai.APIConnectionError``), with the
    miss as its cause; any other exception openai lets through unwrapped. Each retry is
    asked again, and misses again. ``except CassetteMiss`` still catches it.
    """
    if library.__name__ not in _MISSES:
        named = {
            "__module__": "gradekit",
            "__qualname__": "CassetteMiss",
            "__doc__": CassetteMiss.__doc__,
        }
        _MISSES[library.__name__] = type(
            "CassetteMiss", (CassetteMiss, library.TransportError), named
        )
    error = _MISSES[library.__name__](
        str(miss), cassette=miss.cassette, key=miss.key, prompt=miss.prompt
    )
    error.request = request  # type: ignore[attr-defined]  # httpx's RequestError has it
    return error


def _is_stream(headers: Any) -> bool:
    return str(headers.get("content-type", "")).split(";")[0].strip().lower() == "text/event-stream"


def _credentials(request: Any) -> dict[str, str]:
    """The credential header values of ``request``, mapped to what names them in an error."""
    found: dict[str, str] = {}
    for name in _CREDENTIAL_HEADERS:
        value = str(request.headers.get(name, ""))
        for scheme in _SCHEMES:
            value = value.removeprefix(scheme)
        if len(value.strip()) >= _MIN_SECRET_LENGTH:
            found[value.strip()] = f"the request's {name} header"
    return found


def _case_of(path: Path) -> str:
    """A cassette's case by default: its name less ``.http.json``."""
    return path.name.removesuffix(".json").removesuffix(".http")


class _Recording(JournaledRecording[HttpCassette]):
    """The transports' shared core: which slot a request is, what it is served, what is
    kept. No I/O with the network: the transports do that."""

    def __init__(
        self,
        cassette: str | Path,
        *,
        mode: Mode,
        case: str | None,
        env: Mapping[str, str] | None,
        clock: Callable[[], str],
        command: str | None = None,
    ) -> None:
        named = case if case is not None else _case_of(Path(cassette))
        self._codec = HttpCassetteCodec(command) if command else HTTP_CASSETTE
        super().__init__(self._codec, cassette, mode=mode, case=named, clock=clock, env=env)
        loaded = self._open()
        self._cassette = loaded or HttpCassette(self.case)
        self._slots = self._cassette.slots()
        self._next: dict[str, int] = {}
        self._bodies: dict[str, bytes] = {}
        self._counting = threading.Lock()  # threads or tasks asking the same request at once

    def reserve(
        self, asked: HttpRequest, missed: Callable[[CassetteMiss], CassetteMiss]
    ) -> tuple[str, Interaction | None]:
        """The slot ``asked`` takes and its recording to serve (None: record it).

        A miss raises ``missed(CassetteMiss)`` and takes no slot, so a retry of it misses
        again.
        """
        if self.mode != "none" and self._journal is None:
            raise UsageError(
                f"this CassetteTransport for {self.path} is closed (closing its client closes "
                "it, and folds the cassette): make a new one for the next client"
            )
        key = asked.key
        with self._counting:
            n = self._next.get(key, 0) + 1
            name = slot(key, n)
            served = self._served(name, self._slots.get(name), lambda: missed(self._miss(asked, n)))
            self._next[key] = n
        return name, served

    def release(self, name: str) -> None:
        """Give back a slot whose live call failed: the retry records in it instead."""
        key, _, n = name.partition("#")
        with self._counting:
            if self._next.get(key) == int(n):
                self._next[key] = int(n) - 1

    def _miss(self, asked: HttpRequest, n: int) -> CassetteMiss:
        return http_miss(
            self._cassette, asked, n, source=str(self.path), exists=self._exists, codec=self._codec
        )

    def keep(
        self, name: str, asked: HttpRequest, response: HttpResponse, credentials: Mapping[str, str]
    ) -> None:
        """Journal a new interaction; one holding a credential is refused, nothing written."""
        interaction = Interaction(asked, response, self._clock())
        refuse_secrets(
            interaction.texts(),
            {**self._secrets, **credentials},
            where=f"the interaction {name} into {self.path}",
        )
        self._slots[name] = interaction
        self._append(name, interaction.entry())

    def unplayed(self) -> list[str]:
        """Recorded slots this run never asked."""
        return [name for name in self._cassette.slots() if name not in self._asked]

    def replayed(self, library: ModuleType, name: str, served: Interaction, sync: bool) -> Any:
        """The recording in slot ``name`` as a response of ``library``; its bytes are encoded
        once (a test asks again)."""
        data = self._bodies.get(name)
        if data is None:
            data = self._bodies[name] = served.response.body()
        return _answer(library, served.response, sync, body=data)

    def keeper(
        self, name: str, asked: HttpRequest, live: Any, request: Any
    ) -> Callable[[bytes], HttpResponse]:
        """What records ``live``'s body, once read whole, in slot ``name``."""
        credentials = _credentials(request)

        def keep(data: bytes) -> HttpResponse:
            response = HttpResponse.of(live.status_code, live.headers.multi_items(), data)
            self.keep(name, asked, response, credentials)
            return response

        return keep


def _answer(
    library: ModuleType, response: HttpResponse, sync: bool, body: bytes | None = None
) -> Any:
    """``response`` as a response of ``library`` (``body``: its bytes, when known); a stream
    replays event by event."""
    if response.form != "events":
        return library.Response(
            response.status,
            headers=dict(response.headers),
            content=response.body() if body is None else body,
        )
    events = _streamed(library, sync)(iter([f"{e}\n\n".encode() for e in response.events]))
    return library.Response(response.status, headers=dict(response.headers), stream=events)


class _Chunks:
    """A body handed out chunk by chunk, mixed into each library's stream class.

    ``done`` (a recording) is called once with the whole body when it ends. A
    consumer that stops early does not cut the recording short: ``close`` reads
    the rest first, so a later replay serves what the server sent, not what one
    client happened to read. A body the network cut off is never recorded:
    ``abandon`` is called instead, and the retry records in its place.
    """

    def __init__(
        self,
        chunks: Iterator[bytes] | AsyncIterator[bytes],
        done: Callable[[bytes], None] | None = None,
        close: Callable[[], Any] | None = None,
        abandon: Callable[[], None] | None = None,
    ) -> None:
        self._chunks, self._done, self._close, self._abandon = chunks, done, close, abandon
        self._seen: list[bytes] = []

    def _finish(self, whole: bool) -> None:
        done, abandon, self._done, self._abandon = self._done, self._abandon, None, None
        if whole and done is not None:
            done(b"".join(self._seen))
        elif not whole and abandon is not None:
            abandon()

    def __iter__(self) -> Iterator[bytes]:
        assert isinstance(self._chunks, Iterator)
        try:
            for chunk in self._chunks:
                self._seen.append(chunk)
                yield chunk
        except Exception:
            self._finish(whole=False)
            raise
        self._finish(whole=True)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if isinstance(self._chunks, Iterator):  # a replay's events: already in memory
            for chunk in self._chunks:
                yield chunk
            return
        try:
            async for chunk in self._chunks:
                self._seen.append(chunk)
                yield chunk
        except Exception:
            self._finish(whole=False)
            raise
        self._finish(whole=True)

    def close(self) -> None:
        try:
            if self._done is not None:
                assert isinstance(self._chunks, Iterator)
                self._finish(whole=_drained(self._seen, self._chunks))
        finally:
            if self._close is not None:
                self._close()

    async def aclose(self) -> None:
        try:
            if self._done is not None:
                assert isinstance(self._chunks, AsyncIterator)
                self._finish(whole=await _adrained(self._seen, self._chunks))
        finally:
            if self._close is not None:
                await self._close()


def _drained(seen: list[bytes], chunks: Iterator[bytes]) -> bool:
    """Read the rest of a body its consumer left; False when the network cut it off (the
    consumer is done with it, so that is not its error: nothing is recorded)."""
    try:
        seen.extend(chunks)
    except Exception:
        return False
    return True


async def _adrained(seen: list[bytes], chunks: AsyncIterator[bytes]) -> bool:
    """``_drained`` for an async body."""
    try:
        seen.extend([chunk async for chunk in chunks])
    except Exception:
        return False
    return True


_STREAMS: dict[tuple[str, bool], type[_Chunks]] = {}


def _streamed(library: ModuleType, sync: bool) -> type[_Chunks]:
    """``_Chunks`` as a stream class of ``library`` (its responses check the class)."""
    key = (library.__name__, sync)
    if key not in _STREAMS:
        base = library.SyncByteStream if sync else library.AsyncByteStream
        _STREAMS[key] = type(f"{library.__name__}Chunks", (_Chunks, base), {})
    return _STREAMS[key]


class _Live:
    """The live transport: the one given, or each library's own, made on first need.

    The async default keeps no connection alive: a pooled connection belongs to the event
    loop that opened it, and a client used under two ``asyncio.run`` calls (a test, an
    agent that runs a loop per case) would find it on a closed loop. Recording is rare
    and slow anyway; replay never opens one.
    """

    def __init__(self, given: object | None, default: str) -> None:
        self._given, self._default = given, default
        self._made: dict[str, Any] = {}
        self._making = threading.Lock()  # threads' first requests at once: make one, not many

    def of(self, library: ModuleType) -> Any:
        """What sends ``library``'s requests to the network."""
        if self._given is not None:
            return self._given
        with self._making:
            if library.__name__ not in self._made:
                made = getattr(library, self._default)
                self._made[library.__name__] = (
                    made()
                    if self._default == "HTTPTransport"
                    else made(limits=library.Limits(max_keepalive_connections=0))
                )
            return self._made[library.__name__]

    def opened(self) -> list[Any]:
        """Every live transport there is to close."""
        return [self._given] if self._given is not None else list(self._made.values())


class _Counted:
    """What both transports tell of their recording."""

    _recording: _Recording

    @property
    def path(self) -> Path:
        """The cassette's file."""
        return self._recording.path

    @property
    def recorded(self) -> int:
        """Responses recorded live so far (a stream's once it has ended)."""
        return self._recording.recorded

    @property
    def served(self) -> int:
        """Requests served from the cassette so far."""
        return self._recording.served

    def unplayed(self) -> list[str]:
        """Recorded request keys, with their ``#n``, that this run never asked."""
        return self._recording.unplayed()


class CassetteTransport(_Counted, SyncTransportBase):
    """An httpx / httpx2 transport that answers from an HTTP cassette (``*.http.json``).

    ``mode`` is the Recorder's: ``none`` (the default) replays only and a request
    the cassette does not hold raises ``CassetteMiss`` (also the request library's
    ``TransportError``: an SDK retries it, each retry misses again, and raises its
    connection error with the miss as its cause); ``once`` asks ``inner`` (the
    live transport; default the request's library's ``HTTPTransport()``) for what is
    missing and records it; ``rerecord`` asks again for everything and keeps
    ``<name>.previous.json``. ``close()`` (or the client's, or a ``with`` block)
    folds what was recorded into the cassette. Credentials are never written.
    ``record_command`` is what a miss tells to run (default: the pytest plugin's flag).
    """

    def __init__(
        self,
        cassette: str | Path,
        *,
        mode: Mode = "none",
        inner: object | None = None,
        case: str | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], str] = utc_now,
        record_command: str | None = None,
    ) -> None:
        self._recording = _Recording(
            cassette, mode=mode, case=case, env=env, clock=clock, command=record_command
        )
        self._live = _Live(inner, "HTTPTransport")

    @overload
    def handle_request(self, request: httpx.Request) -> httpx.Response: ...
    @overload
    def handle_request(self, request: httpx2.Request) -> httpx2.Response: ...
    def handle_request(self, request: Any) -> Any:
        """Serve ``request`` from the cassette, or (recording modes) live, recording it."""
        library = _library(request)
        asked = HttpRequest.of(request.method, str(request.url), request.read())
        name, served = self._recording.reserve(asked, lambda miss: _missed(library, miss, request))
        if served is not None:
            return self._recording.replayed(library, name, served, sync=True)
        try:
            return self._record(library, request, asked, name)
        except BaseException:
            self._recording.release(name)
            raise

    def _record(self, library: ModuleType, request: Any, asked: HttpRequest, name: str) -> Any:
        live = self._live.of(library).handle_request(request)
        keep = self._recording.keeper(name, asked, live, request)

        if not _is_stream(live.headers):
            try:
                data = live.read()
            finally:
                live.close()
            return _answer(library, keep(data), sync=True)
        return _tee(library, live, keep, lambda: self._recording.release(name), sync=True)

    def close(self, *, prune: bool = True) -> None:
        """Fold what was recorded into the cassette and close the live transport.

        A ``rerecord`` drops what it did not ask again, unless ``prune`` is false (a
        ``with`` block left by an exception).
        """
        try:
            self._recording.close(prune=prune)
        finally:
            for inner in self._live.opened():
                inner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        self.close(prune=exc is None)


def _tee(
    library: ModuleType,
    live: Any,
    keep: Callable[[bytes], HttpResponse],
    release: Callable[[], None],
    *,
    sync: bool,
) -> Any:
    """A live stream handed on as it arrives, recorded once it ends whole."""

    def done(data: bytes) -> None:
        try:
            keep(data)
        except BaseException:
            release()
            raise

    chunks = live.iter_bytes() if sync else live.aiter_bytes()
    headers = {k.lower(): v for k, v in live.headers.items() if k.lower() in KEPT_HEADERS}
    stream = _streamed(library, sync)(chunks, done, live.close if sync else live.aclose, release)
    return library.Response(live.status_code, headers=headers, stream=stream)


class AsyncCassetteTransport(_Counted, AsyncTransportBase):
    """``CassetteTransport`` for async clients (``httpx.AsyncClient``,
    ``httpx2.AsyncClient``): the same cassette, modes and rules."""

    def __init__(
        self,
        cassette: str | Path,
        *,
        mode: Mode = "none",
        inner: object | None = None,
        case: str | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], str] = utc_now,
        record_command: str | None = None,
    ) -> None:
        self._recording = _Recording(
            cassette, mode=mode, case=case, env=env, clock=clock, command=record_command
        )
        self._live = _Live(inner, "AsyncHTTPTransport")

    @overload
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response: ...
    @overload
    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response: ...
    async def handle_async_request(self, request: Any) -> Any:
        """Serve ``request`` from the cassette, or (recording modes) live, recording it."""
        library = _library(request)
        asked = HttpRequest.of(request.method, str(request.url), await request.aread())
        name, served = self._recording.reserve(asked, lambda miss: _missed(library, miss, request))
        if served is not None:
            return self._recording.replayed(library, name, served, sync=False)
        try:
            return await self._record(library, request, asked, name)
        except BaseException:
            self._recording.release(name)
            raise

    async def _record(
        self, library: ModuleType, request: Any, asked: HttpRequest, name: str
    ) -> Any:
        live = await self._live.of(library).handle_async_request(request)
        keep = self._recording.keeper(name, asked, live, request)

        if not _is_stream(live.headers):
            try:
                data = await live.aread()
            finally:
                await live.aclose()
            return _answer(library, keep(data), sync=False)
        return _tee(library, live, keep, lambda: self._recording.release(name), sync=False)

    async def aclose(self, *, prune: bool = True) -> None:
        """Fold what was recorded into the cassette and close the live transport."""
        try:
            self._recording.close(prune=prune)
        finally:
            for inner in self._live.opened():
                await inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        await self.aclose(prune=exc is None)


def async_twin(transport: CassetteTransport) -> AsyncCassetteTransport:
    """An async transport on ``transport``'s recording: one lock, one journal, one count of
    each request's slots. ``transport.close()`` folds what both recorded; the twin's live
    side keeps no connection to close."""
    twin = AsyncCassetteTransport.__new__(AsyncCassetteTransport)
    twin._recording = transport._recording
    twin._live = _Live(None, "AsyncHTTPTransport")
    return twin
