"""The network wall of a replay-only test: one audit hook, no patches.

``blocked(test, hosts)`` refuses DNS lookups (``getaddrinfo``, ``gethostbyname``),
``connect`` and ``sendto`` to anything but ``hosts`` while the block lasts, so it covers
``socket.create_connection`` and every HTTP library built on the socket module. Unix
sockets are not network and pass.
"""

from __future__ import annotations

import shlex
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import pytest

__all__ = ["RECORD", "blocked"]

RECORD: Final = "pytest --gradekit-record-mode once"
"""The command that records what a replay-only run is missing."""


@dataclass(frozen=True)
class _Block:
    """One replay-only test's wall: every host and port but ``allowed`` is refused."""

    test: str
    allowed: frozenset[tuple[str, int | None]]

    def check(self, event: str, host: str, port: int | None) -> None:
        if (host, None) in self.allowed or (host, port) in self.allowed:
            return
        where = host if port is None else f"{host}:{port}"
        pytest.fail(
            f"gradekit blocked the network ({event} {where}) in {self.test}: "
            "--gradekit-record-mode none replays cassettes and never reaches the network. "
            f"Record what is missing with `{RECORD} {shlex.quote(self.test)}`; a local "
            "server the test itself needs goes in the gradekit_allowed_hosts fixture, "
            'e.g. return ("127.0.0.1:8000",)'
        )


class _Guard:
    """The one audit hook (``sys.addaudithook``), installed on first use, and the wall it
    applies while a replay-only test runs.

    The wall is process-wide, not a context variable: a thread (a pool running an
    agent's tools, asyncio's resolver) starts with an empty context and would pass
    it. A hook cannot be removed, so between tests it is one ``None`` check. It fails
    the test with ``pytest.fail``, a BaseException, so neither an SDK's retry loop nor
    an ``except Exception`` in the code under test can swallow or retry it.
    """

    def __init__(self) -> None:
        self.block: _Block | None = None
        self._installed = False

    def install(self) -> None:
        if not self._installed:
            sys.addaudithook(self._audit)
            self._installed = True

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        block = self.block
        if block is None or not event.startswith("socket."):
            return
        target = _target(event, args)
        if target is not None:
            block.check(event, *target)


_GUARD = _Guard()


@contextmanager
def blocked(test: str, hosts: tuple[str, ...]) -> Iterator[None]:
    """Refuse the network, all but ``hosts``, to everything this process does in the
    block, failing ``test`` with how to record."""
    _GUARD.install()
    outer, _GUARD.block = _GUARD.block, _Block(test, _allowed(hosts))
    try:
        yield
    finally:
        _GUARD.block = outer


def _target(event: str, args: tuple[Any, ...]) -> tuple[str, int | None] | None:
    """The host and port a socket event reaches for, None when it reaches no network
    (a passive lookup, a Unix socket)."""
    if event in ("socket.getaddrinfo", "socket.gethostbyname"):
        host = args[0]
        if host is None:
            return None
        return _host(host), _port(args[1]) if len(args) > 1 else None
    if event in ("socket.connect", "socket.sendto"):
        sock, address = args[0], args[1]
        family = getattr(sock, "family", None)
        if family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
            return None
        return _host(address[0]), _port(address[1])
    return None


def _host(value: object) -> str:
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return text.strip("[]").lower()


def _port(value: object) -> int | None:
    if isinstance(value, int):
        return value
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return int(text) if text.isdigit() else None


def _allowed(hosts: tuple[str, ...]) -> frozenset[tuple[str, int | None]]:
    """``("127.0.0.1:8000", "localhost", "[::1]:80")`` as (host, port) pairs; no port: any."""
    pairs: set[tuple[str, int | None]] = set()
    for entry in hosts:
        host, port = entry, None
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = _port(rest.removeprefix(":")) if rest else None
        elif entry.count(":") == 1:
            host, _, number = entry.partition(":")
            port = _port(number)
        pairs.add((_host(host), port))
    return frozenset(pairs)
