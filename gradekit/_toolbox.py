"""Pin the outside world too: read-only tools recorded once, replayed strictly.

An agent is given one contract, ``Toolbox``: ``call(name, **args)``, JSON
values in and out. ``LiveToolbox`` calls the real tools; ``ToolRecorder``
calls each read-only tool once per distinct key (the tool's name and its
canonical arguments, never the call's position) and records the answer in
the case's fixture; ``ToolReplay`` answers from the fixture only, and a call
it does not hold is a ``MissingFixtureError``, never a live call. Write tools
are never recorded: every toolbox gives them a new, empty store, so every
run starts clean.
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar, overload, runtime_checkable

from gradekit._codec import closest
from gradekit._exceptions import MissingFixtureError, UsageError
from gradekit._fixtures import (
    FIXTURE,
    Fixture,
    canonical_json,
    is_stamp,
    journal_entry,
    response_texts,
    round_trip,
    tool_key,
)
from gradekit._journal import JournaledRecording, Mode, utc_now
from gradekit._secrets import refuse_secrets
from gradekit._store import replayed

__all__ = [
    "LiveToolbox",
    "ToolRecorder",
    "ToolReplay",
    "Toolbox",
    "Tools",
    "missing_fixture",
    "tool_key",
]

F = TypeVar("F", bound=Callable[..., Any])
_SHOWN = 200


@runtime_checkable
class Toolbox(Protocol):
    """What an agent's ``run(provider, task, tools)`` is given: one method, JSON in and out."""

    def call(self, name: str, /, **args: Any) -> Any:
        """Call tool ``name`` with keyword arguments and return its JSON result."""
        ...


class Tools:
    """Tools by name: read-only ones, ``fn(**args)``, recorded per case; write ones,
    ``fn(store, **args)``, run on a fresh ``dict`` store per run and never recorded.

    Both ``read_only(name, fn)`` and ``@read_only(name)`` register; so does ``write``.
    """

    def __init__(self) -> None:
        self._read: dict[str, Callable[..., Any]] = {}
        self._write: dict[str, Callable[..., Any]] = {}

    @overload
    def read_only(self, name: str) -> Callable[[F], F]: ...
    @overload
    def read_only(self, name: str, fn: F) -> F: ...
    def read_only(self, name: str, fn: F | None = None) -> F | Callable[[F], F]:
        """Register ``fn(**args) -> JSON`` as the read-only tool ``name``."""
        return self._register(self._read, name, fn)

    @overload
    def write(self, name: str) -> Callable[[F], F]: ...
    @overload
    def write(self, name: str, fn: F) -> F: ...
    def write(self, name: str, fn: F | None = None) -> F | Callable[[F], F]:
        """Register ``fn(store, **args) -> JSON`` as the write tool ``name``."""
        return self._register(self._write, name, fn)

    def _register(
        self, table: dict[str, Callable[..., Any]], name: str, fn: F | None
    ) -> F | Callable[[F], F]:
        tool_key(name, {})  # the same name rules as keys: a non-empty string without spaces

        def add(tool: F) -> F:
            if not callable(tool):
                raise UsageError(f"tool {name!r} must be a function, not {type(tool).__name__}")
            if name in self:
                raise UsageError(f"a tool named {name!r} is already registered")
            table[name] = tool
            return tool

        return add if fn is None else add(fn)

    def __contains__(self, name: object) -> bool:
        return name in self._read or name in self._write

    @property
    def names(self) -> list[str]:
        """Every registered tool's name, sorted."""
        return sorted([*self._read, *self._write])

    def write_tool(self, name: str) -> Callable[..., Any] | None:
        """The write tool ``name``, or None when ``name`` is not one."""
        return self._write.get(name)

    def read_tool(self, name: str) -> Callable[..., Any]:
        """The read-only tool ``name``; ``UsageError`` naming the known tools otherwise."""
        tool = self._read.get(name)
        if tool is None:
            known = ", ".join(self.names) or "none"
            raise UsageError(f"no read-only tool named {name!r} is registered (tools: {known})")
        return tool

    def for_run(self) -> LiveToolbox:
        """A live toolbox for one run, its write tools on a new, empty store."""
        return LiveToolbox(self)


class _RunTools(ABC):
    """What every toolbox shares: ``call``, and the write tools on a store that starts empty.

    A write tool runs here, on this run's store; a read-only call goes to
    ``_read_only``, which each toolbox answers its own way.
    """

    def __init__(self, tools: Tools | None) -> None:
        self.tools = tools if tools is not None else Tools()
        self.store: dict[str, Any] = {}

    def call(self, name: str, /, **args: Any) -> Any:
        """Call tool ``name`` with keyword arguments and return its JSON result."""
        tool = self.tools.write_tool(name)
        if tool is None:
            return self._read_only(name, args)
        canonical_json(args, what=f"{name} args")  # the argument rules of recorded tools
        return round_trip(tool(self.store, **args), what=f"{name}'s result")[1]

    @abstractmethod
    def _read_only(self, name: str, args: dict[str, Any]) -> Any:
        """The result of the read-only tool ``name`` called with ``args``."""


class LiveToolbox(_RunTools):
    """Calls the real tools. Results are read back from their JSON, as a replay serves them."""

    def __init__(self, tools: Tools) -> None:
        super().__init__(tools)

    def _read_only(self, name: str, args: dict[str, Any]) -> Any:
        tool_key(name, args)  # arguments a recording would refuse are refused live too
        return round_trip(self.tools.read_tool(name)(**args), what=f"{name}'s result")[1]


class ToolReplay(_RunTools):
    """Answers read-only tool calls from a fixture only; a call not recorded raises
    ``MissingFixtureError`` and never reaches the real tool.

    ``fixture`` is a path (calls still in a crashed recorder's journal are
    served too) or a ``Fixture``. A missing file is not an error until a call
    is made. ``tools`` supplies the write tools, each run on a fresh store.
    """

    def __init__(self, fixture: str | Path | Fixture, *, tools: Tools | None = None) -> None:
        super().__init__(tools)
        self.source, self.case, loaded = replayed(fixture, FIXTURE)
        self._exists = loaded is not None
        self._responses = response_texts(loaded)

    def __len__(self) -> int:
        return len(self._responses)

    def for_run(self) -> ToolReplay:
        """The same recorded calls for another run, its write tools on a new, empty store."""
        fresh = copy.copy(self)
        fresh.store = {}
        return fresh

    def _read_only(self, name: str, args: dict[str, Any]) -> Any:
        key = tool_key(name, args)
        text = self._responses.get(key)
        if text is None:
            raise missing_fixture(
                key, self._responses, source=self.source, case=self.case, exists=self._exists
            )
        return json.loads(text)  # a fresh value: an agent that edits it cannot change the next


class ToolRecorder(_RunTools, JournaledRecording[Fixture]):
    """Call each read-only tool once per distinct key and record its result in a fixture.

    Every new result is appended to a journal beside the fixture before
    ``call`` returns it, and ``close`` (or leaving the ``with`` block) folds it
    into the file, written even when no tool was called (``calls: []``). Only
    one recorder may hold a fixture at once. Modes as ``Recorder``: ``once``
    records what is missing; ``rerecord`` calls every tool again, keeps the
    old file as ``<case>.previous.json`` for review and drops calls no longer
    made; ``none`` is strict replay.
    """

    def __init__(
        self,
        tools: Tools,
        fixture: str | Path,
        *,
        case: str | None = None,
        mode: Mode = "once",
        clock: Callable[[], str] = utc_now,
        env: Mapping[str, str] | None = None,
    ) -> None:
        JournaledRecording.__init__(
            self, FIXTURE, fixture, mode=mode, case=case, clock=clock, env=env
        )
        _RunTools.__init__(self, tools)
        # Calls a killed run left in the journal become part of the fixture first; a
        # fixture left with no call is stamped with the time this run started.
        loaded = self._open(now="" if mode == "none" else self._now())
        self._responses = response_texts(loaded)

    def _now(self) -> str:
        stamp = self._clock()
        if not is_stamp(stamp):
            raise UsageError(
                f"the clock returned {stamp!r}, not a UTC time like 2026-01-31T09:30:00Z"
            )
        return stamp

    def _read_only(self, name: str, args: dict[str, Any]) -> Any:
        key = tool_key(name, args)
        text = self._served(key, self._responses.get(key), lambda: self._missing(key))
        return self._record(name, key, args) if text is None else json.loads(text)

    def _missing(self, key: str) -> MissingFixtureError:
        return missing_fixture(
            key, self._responses, source=str(self.path), case=self.case, exists=self._exists
        )

    def _record(self, name: str, key: str, args: dict[str, Any]) -> Any:
        text, result = round_trip(self.tools.read_tool(name)(**args), what=f"{name}'s result")
        refuse_secrets((key, text), self._secrets, where=f"the result of {name} into {self.path}")
        self._append(key, journal_entry(name, text, self._now()))
        self._responses[key] = text
        return result


def missing_fixture(
    key: str, recorded: Collection[str], *, source: str, case: str, exists: bool = True
) -> MissingFixtureError:
    """Build the error for the call ``key`` that the fixture ``source`` does not hold."""
    tool, _, arguments = key.partition(" ")
    found = _closest(tool, arguments, recorded, exists)
    rows = [("tool", tool), ("args", arguments), ("closest", found)]
    return MissingFixtureError(
        FIXTURE.miss_message(source, rows, case=case),
        fixture=source,
        case=case,
        tool=tool,
        arguments=arguments,
        key=key,
    )


def _closest(tool: str, arguments: str, recorded: Collection[str], exists: bool) -> str:
    if not exists:
        return FIXTURE.absent
    prefix = f"{tool} "
    same_tool = [key[len(prefix) :] for key in recorded if key.startswith(prefix)]
    if not same_tool:
        return f"(no call of {tool} is recorded; {len(recorded)} other calls are)"
    best, _ = closest(arguments, same_tool, str)
    shown = best if len(best) <= _SHOWN else best[:_SHOWN] + "…"
    count = len(same_tool)
    return f"{shown} ({count} call{'s' if count != 1 else ''} of {tool} recorded)"
