"""The pytest plugin: recording clients and providers as fixtures, replay-only by default.

Registered as the ``pytest11`` entry point ``gradekit``, so installing gradekit is enough.
A test asks for a fixture and gets a client over its own cassette::

    def test_refund(gradekit_httpx_client):
        client = openai.OpenAI(api_key="k", base_url=URL, http_client=gradekit_httpx_client)
        ...

``pytest`` replays (``--gradekit-record-mode none``, the default) and never reaches
the network; ``pytest --gradekit-record-mode once`` records what is missing;
``rerecord`` asks again for everything. The cassettes are
``<test dir>/cassettes/<module>/<test>.json`` (provider) and ``<test>.http.json``
(HTTP); ``@pytest.mark.gradekit_cassette("name")`` names them instead.

Configuration is by fixtures a conftest overrides: ``gradekit_record_mode``,
``gradekit_cassette_path``, ``gradekit_live_provider`` and ``gradekit_allowed_hosts``.

httpx and httpx2 are imported only by the fixtures that hand out their clients, as
``import gradekit`` itself leaves httpx out: pytest loads this plugin in every run.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
import shlex
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, get_args

import pytest

from gradekit._cassette import REPLAYED
from gradekit._exceptions import CassetteMiss, UsageError, in_chain
from gradekit._http.transport import AsyncCassetteTransport, CassetteTransport
from gradekit._journal import Mode
from gradekit._keys import prompt_key
from gradekit._provider import Provider
from gradekit._pytest_network import RECORD, blocked
from gradekit._recorder import Recorder
from gradekit._replay import Replay
from gradekit._store import replayed

if TYPE_CHECKING:
    import httpx
    import httpx2

__all__: list[str] = []  # a plugin: pytest finds its hooks and fixtures by name

_MARKER: Final = "gradekit_cassette"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")  # no dot: "x.http" would be x's file
_UNSAFE = re.compile(r"[^A-Za-z0-9._\[\]-]+")
_LONGEST = 100  # characters of a test's name kept in its cassette's file name


def pytest_addoption(parser: pytest.Parser) -> None:
    """The options, in one group."""
    group = parser.getgroup("gradekit", "gradekit cassettes")
    group.addoption(
        "--gradekit-record-mode",
        dest="gradekit_record_mode",
        choices=get_args(Mode),
        default="none",
        help="none (default): replay only, never the network; once: record what is missing; "
        "rerecord: ask the live side again for everything",
    )
    group.addoption(
        "--gradekit-unplayed",
        dest="gradekit_unplayed",
        action="store_true",
        help="list the recordings no test played, in the terminal summary",
    )
    group.addoption(
        "--gradekit-fail-unplayed",
        dest="gradekit_fail_unplayed",
        action="store_true",
        help="fail a test that passes but leaves recordings of its cassettes unplayed",
    )
    parser.addini(
        "gradekit_cassette_dir",
        default="cassettes",
        help="folder of the cassettes, relative to each test file's folder (default: cassettes)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and start the run's list of unplayed recordings."""
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(name): record this test's gradekit fixtures in "
        "cassettes/<module>/<name>.json and <name>.http.json instead of <test>.json",
    )
    config.stash[_UNPLAYED] = []


# --- where a test's cassettes are -------------------------------------------------------


def _cassette_name(request: pytest.FixtureRequest) -> str:
    """The marker's name, else the test's (``Class.test[param]``), made a safe file name."""
    marker = request.node.get_closest_marker(_MARKER)
    if marker is not None:
        return _marked_name(marker)
    name = request.node.name
    if request.cls is not None:
        name = f"{request.cls.__name__}.{name}"
    name = _UNSAFE.sub("-", name)
    if len(name) > _LONGEST:  # long parameter ids: keep a readable head, stay unique
        name = f"{name[: _LONGEST - 9]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return name


def _marked_name(marker: pytest.Mark) -> str:
    name = marker.args[0] if len(marker.args) == 1 and not marker.kwargs else None
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        given = ", ".join(
            [*map(repr, marker.args), *(f"{key}={value!r}" for key, value in marker.kwargs.items())]
        )
        raise UsageError(
            f"@pytest.mark.{_MARKER}({given}): the marker takes one cassette name of at most "
            "100 letters, digits, '_' and '-' (no folder, no .json) - "
            f'write @pytest.mark.{_MARKER}("refund-policy")'
        )
    return name


def _case_of(path: Path) -> str:
    """The case a cassette file holds: its name without ``.json``."""
    return path.name.removesuffix(".json")


def _http_path(path: Path) -> Path:
    """The HTTP cassette beside the provider cassette ``path``: ``<case>.http.json``."""
    return path.with_name(f"{_case_of(path)}.http.json")


# --- configuration fixtures: override any of them in a conftest.py ----------------------


@pytest.fixture
def gradekit_record_mode(request: pytest.FixtureRequest) -> Mode:
    """The record mode: ``--gradekit-record-mode``, ``none`` unless asked."""
    mode: Mode = request.config.getoption("gradekit_record_mode")
    return mode


@pytest.fixture
def gradekit_cassette_path(request: pytest.FixtureRequest) -> Path:
    """The test's provider cassette, ``<test dir>/<gradekit_cassette_dir>/<module>/<name>.json``;
    its HTTP cassette is the ``<name>.http.json`` beside it."""
    folder = request.path.parent / str(request.config.getini("gradekit_cassette_dir"))
    return folder / request.path.stem / f"{_cassette_name(request)}.json"


@pytest.fixture
def gradekit_live_provider() -> Provider:
    """The live side of ``gradekit_provider`` when recording: ``gradekit.live_from_env()``
    (``GRADEKIT_PROVIDER``, ``GRADEKIT_MODEL``, ...). Not built in ``none`` mode."""
    from gradekit._live import live_from_env  # httpx: only when recording

    return live_from_env()


@pytest.fixture
def gradekit_allowed_hosts() -> tuple[str, ...]:
    """Hosts a replay-only test may still reach, ``"host"`` or ``"host:port"``; none.

    Loopback is blocked too: this course's live models run there (llama.cpp on
    127.0.0.1:8080, ollama on 127.0.0.1:11434), so a test that went around its
    cassette would pass only where a model is running. A test that needs a local
    server of its own names it here, port included.
    """
    return ()


class _PlayedReplay(Replay):
    """A ``Replay`` that adds the key of each prompt it answers to ``played``."""

    http_record_command = None  # a miss names the plugin's flag, not the record command

    def __init__(self, cassette: Path, played: set[str]) -> None:
        super().__init__(cassette)
        self._played = played

    def complete(self, prompt: str) -> str:
        answer = super().complete(prompt)
        self._played.add(prompt_key(prompt))
        return answer


class _PlayedRecorder(Recorder):
    """A ``Recorder`` that adds the key of each prompt it answers to ``played``."""

    http_record_command = None

    def __init__(self, live: Provider, cassette: Path, mode: Mode, played: set[str]) -> None:
        super().__init__(live, cassette, mode=mode, case=_case_of(cassette))
        self._played = played

    def complete(self, prompt: str) -> str:
        answer = super().complete(prompt)
        self._played.add(prompt_key(prompt))
        return answer


def _unplayed(path: Path, played: set[str]) -> list[str]:
    """The keys recorded in the provider cassette ``path`` (its journal too) not in ``played``."""
    cassette = replayed(path, REPLAYED)[2]
    return sorted(set(() if cassette is None else cassette.entries) - played)


# --- the recording fixtures -------------------------------------------------------------


@pytest.fixture
def gradekit_network(
    request: pytest.FixtureRequest,
    gradekit_record_mode: Mode,
    gradekit_allowed_hosts: tuple[str, ...],
) -> Iterator[None]:
    """Close the network while the test runs in ``none`` mode (every gradekit fixture uses it).

    DNS (``getaddrinfo``, ``gethostbyname``), ``connect`` and ``sendto`` to anything but
    ``gradekit_allowed_hosts`` fail the test with how to record; Unix sockets are not
    network. The recording modes leave the network open: they need it.
    """
    if gradekit_record_mode != "none":
        yield
        return
    with blocked(request.node.nodeid, gradekit_allowed_hosts):
        yield


@pytest.fixture
def gradekit_provider(
    request: pytest.FixtureRequest,
    gradekit_network: None,
    gradekit_record_mode: Mode,
    gradekit_cassette_path: Path,
) -> Iterator[Provider]:
    """A ``gradekit.Replay`` of the test's provider cassette in ``none`` mode; otherwise a
    ``gradekit.Recorder`` around ``gradekit_live_provider``, folded after the test."""
    played: set[str] = set()
    unplayed = functools.partial(_unplayed, gradekit_cassette_path, played)
    _watch(request, gradekit_record_mode, gradekit_cassette_path, unplayed)
    if gradekit_record_mode == "none":
        yield _PlayedReplay(gradekit_cassette_path, played)
        return
    live = request.getfixturevalue("gradekit_live_provider")
    recorder = _PlayedRecorder(live, gradekit_cassette_path, gradekit_record_mode, played)
    try:
        yield recorder
    finally:
        recorder.close(prune=_passed(request))


@pytest.fixture
def gradekit_http_transport(
    request: pytest.FixtureRequest,
    gradekit_network: None,
    gradekit_record_mode: Mode,
    gradekit_cassette_path: Path,
) -> Iterator[CassetteTransport]:
    """The test's ``CassetteTransport`` over ``<name>.http.json``, for a client of your own;
    the httpx and httpx2 client fixtures share it. Folded after the test."""
    path = _http_path(gradekit_cassette_path)
    _only_sync_or_async(request, "gradekit_async_http_transport")
    transport = CassetteTransport(
        path, mode=gradekit_record_mode, case=_case_of(gradekit_cassette_path)
    )
    _watch(request, gradekit_record_mode, path, transport.unplayed)
    try:
        yield transport
    finally:
        transport.close(prune=_passed(request))


@pytest.fixture
def gradekit_async_http_transport(
    request: pytest.FixtureRequest,
    gradekit_network: None,
    gradekit_record_mode: Mode,
    gradekit_cassette_path: Path,
) -> Iterator[AsyncCassetteTransport]:
    """``gradekit_http_transport`` for async clients (``AsyncCassetteTransport``).

    The cassette is folded after the test in a fresh event loop, so a test may leave
    its client open (``asyncio.run(agent(client))``): recording, the live side keeps no
    connection past its response, none bound to the test's loop once it is closed.
    """
    path = _http_path(gradekit_cassette_path)
    _only_sync_or_async(request, "gradekit_http_transport")
    transport = AsyncCassetteTransport(
        path, mode=gradekit_record_mode, case=_case_of(gradekit_cassette_path)
    )
    _watch(request, gradekit_record_mode, path, transport.unplayed)
    try:
        yield transport
    finally:
        asyncio.run(transport.aclose(prune=_passed(request)))


@pytest.fixture
def gradekit_httpx_client(
    request: pytest.FixtureRequest,
    gradekit_http_transport: CassetteTransport,
) -> Iterator[httpx.Client]:
    """An ``httpx.Client`` recording through the test's HTTP cassette (``openai.OpenAI``'s
    ``http_client``)."""
    import httpx

    with httpx.Client(transport=gradekit_http_transport) as client:
        yield client
        gradekit_http_transport.close(prune=_passed(request))  # before the client's own close


@pytest.fixture
def gradekit_httpx2_client(
    request: pytest.FixtureRequest,
    gradekit_http_transport: CassetteTransport,
) -> Iterator[httpx2.Client]:
    """An ``httpx2.Client`` recording through the test's HTTP cassette
    (``anthropic.Anthropic``'s ``http_client``)."""
    import httpx2

    with httpx2.Client(transport=gradekit_http_transport) as client:
        yield client
        gradekit_http_transport.close(prune=_passed(request))


@pytest.fixture
def gradekit_async_httpx_client(
    request: pytest.FixtureRequest,
    gradekit_async_http_transport: AsyncCassetteTransport,
) -> Iterator[httpx.AsyncClient]:
    """An ``httpx.AsyncClient`` recording through the test's HTTP cassette
    (``openai.AsyncOpenAI``)."""
    import httpx

    client = httpx.AsyncClient(transport=gradekit_async_http_transport)
    yield client
    asyncio.run(_aclose(request, gradekit_async_http_transport, client.aclose))


@pytest.fixture
def gradekit_async_httpx2_client(
    request: pytest.FixtureRequest,
    gradekit_async_http_transport: AsyncCassetteTransport,
) -> Iterator[httpx2.AsyncClient]:
    """An ``httpx2.AsyncClient`` recording through the test's HTTP cassette
    (``anthropic.AsyncAnthropic``)."""
    import httpx2

    client = httpx2.AsyncClient(transport=gradekit_async_http_transport)
    yield client
    asyncio.run(_aclose(request, gradekit_async_http_transport, client.aclose))


async def _aclose(
    request: pytest.FixtureRequest,
    transport: AsyncCassetteTransport,
    close: Callable[[], Any],
) -> None:
    # The transport first, with the test's outcome: the client's close would prune.
    await transport.aclose(prune=_passed(request))
    await close()


def _only_sync_or_async(request: pytest.FixtureRequest, other: str) -> None:
    if other in request.fixturenames:
        raise UsageError(
            f"{request.node.nodeid} uses both the sync and the async gradekit HTTP fixtures, "
            "which would hold one cassette twice: use the sync clients or the async ones"
        )


# --- after the test: the outcome, the unplayed recordings -------------------------------


@dataclass(frozen=True)
class _Watched:
    """A cassette a test uses, and how to ask which of its recordings it never played."""

    path: Path
    unplayed: Callable[[], list[str]]


_WATCHED = pytest.StashKey[list[_Watched]]()
_PASSED = pytest.StashKey[bool]()
_UNPLAYED = pytest.StashKey[list[tuple[str, str, str]]]()  # (test, cassette, key)


def _watch(
    request: pytest.FixtureRequest,
    mode: Mode,
    path: Path,
    unplayed: Callable[[], list[str]],
) -> None:
    """Note a cassette the test uses; a ``rerecord`` drops what it leaves unplayed anyway."""
    if mode != "rerecord":
        request.node.stash.setdefault(_WATCHED, []).append(_Watched(path, unplayed))


def _passed(request: pytest.FixtureRequest) -> bool:
    """Did the test's call pass? A failed ``rerecord`` keeps what it did not reach."""
    passed: bool = request.node.stash.get(_PASSED, False)
    return passed


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Name the command that records a miss; note what a passing test left unplayed."""
    watched = item.stash.get(_WATCHED, [])
    try:
        yield
    except BaseException as exc:
        if watched and in_chain(exc, CassetteMiss) is not None:
            exc.add_note(f"gradekit: record it with `{RECORD} {shlex.quote(item.nodeid)}`")
        raise
    if watched:
        _unplayed_by(item, watched)


def _unplayed_by(item: pytest.Item, watched: list[_Watched]) -> None:
    """Add what a passing test left unplayed to the run's list (a failing one stopped
    early: no news in that), and fail it for them with ``--gradekit-fail-unplayed``."""
    found = [(str(w.path), key) for w in watched for key in w.unplayed()]
    item.config.stash[_UNPLAYED] += [(item.nodeid, path, key) for path, key in found]
    if found and item.config.getoption("gradekit_fail_unplayed"):
        pytest.fail(
            f"{item.nodeid} left {len(found)} recording(s) unplayed (--gradekit-fail-unplayed):\n"
            + "".join(f"  {path}: {key}\n" for path, key in found)
            + "the test no longer asks them: drop them with "
            f"`pytest --gradekit-record-mode rerecord {shlex.quote(item.nodeid)}`",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
    call: pytest.CallInfo[None],
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep the call's outcome for the fixtures' teardown (``rerecord`` prunes on a pass)."""
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """List the recordings no test played (``--gradekit-unplayed``), or count them."""
    found = terminalreporter.config.stash.get(_UNPLAYED, [])
    if not found:
        return
    if not terminalreporter.config.getoption("gradekit_unplayed"):
        terminalreporter.write_line(
            f"gradekit: {len(found)} recording(s) never played; --gradekit-unplayed lists them"
        )
        return
    terminalreporter.write_sep("=", f"gradekit: {len(found)} recording(s) never played")
    for test, cassette, key in found:
        terminalreporter.write_line(f"{test}  {cassette}  {key}")
