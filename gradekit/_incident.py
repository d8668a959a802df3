"""Cut-point replay: a recorded incident becomes a regression test that runs the new code.

A run's boundary crossings, the model calls, the read-only tool calls and the actions
(write tools), are recorded in order as **envelopes**, one JSON line each, appended and
never rewritten (``IncidentRecorder``). A replay (``IncidentReplay``, or
``replay_incident`` in a test) then cuts the boundaries in two by a ``Plan``: the
crossings it serves from the record rebuild the incident exactly; the boundaries it
names live run through the current code, and they are what the test checks. The
agent's own code between the boundaries, its guard included, always runs live.

Every served crossing is checked against the record: the current input must have the
recorded input's key. A changed input, a crossing the record does not hold (extra) and
one the run never made (missing) are an ``IncidentDivergence`` naming the first point
of divergence, never a stale answer served to a changed agent.

File format (``gradekit.incident/1``): a header line, then one envelope per line::

    {"case":"refund","format":"gradekit.incident/1","provider":"...","task":"..."}
    {"boundary":"model","error":null,"index":0,"input":{"prompt":"..."},
     "key":"3f2a...","kind":"model","output":"..."}
    {"boundary":"issue_refund","error":null,"index":2,"input":{"args":{...}},
     "key":"issue_refund {...}","kind":"action","output":{...},"ran":true}

(each envelope on one line in the file).

Keys are sorted and separators compact, so the same crossings give the same bytes.
"""

from __future__ import annotations

import difflib
import json
import os
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from gradekit._codec import hostile_json
from gradekit._commands import INCIDENT_RECORD
from gradekit._exceptions import IncidentCorrupt, IncidentDivergence, UsageError
from gradekit._fixtures import round_trip, tool_key
from gradekit._keys import prompt_key
from gradekit._provider import Provider
from gradekit._toolbox import Tools

__all__ = [
    "FORMAT",
    "Crossing",
    "Envelope",
    "Incident",
    "IncidentRecorder",
    "IncidentReplay",
    "Plan",
    "Replayed",
    "decode_incident",
    "read_incident",
    "replay_incident",
]

FORMAT = "gradekit.incident/1"
MODEL = "model"  # the provider's boundary; a tool's boundary is the tool's name
Kind = Literal["model", "read", "action"]


@dataclass(frozen=True, slots=True)
class Envelope:
    """One recorded boundary crossing: what went in (and its key), what came out or what
    was raised; for an action, whether it ran."""

    index: int
    boundary: str
    kind: Kind
    input: Mapping[str, Any]
    key: str
    output: Any = None
    error: str | None = None
    ran: bool | None = None  # actions only

    def line(self) -> bytes:
        """The envelope's bytes in the file: canonical JSON and a newline."""
        return _line(
            self.index,
            self.boundary,
            self.kind,
            self.input,
            self.key,
            self.output,
            self.error,
            self.ran,
        )


def _line(
    index: int,
    boundary: str,
    kind: Kind,
    given: Mapping[str, Any],
    key: str,
    output: Any,
    error: str | None,
    ran: bool | None,
) -> bytes:
    document: dict[str, Any] = {
        "boundary": boundary,
        "error": error,
        "index": index,
        "input": given,
        "key": key,
        "kind": kind,
        "output": output,
    }
    if ran is not None:
        document["ran"] = ran
    return _canonical(document) + b"\n"


@dataclass(frozen=True, slots=True)
class Incident:
    """A recorded run: its header (case, task, provider) and its envelopes, in order.
    ``torn`` says why the last line was dropped (a run killed while writing it)."""

    case: str
    task: str
    provider: str
    envelopes: tuple[Envelope, ...]
    torn: str = ""


# One encoder, built once: json.dumps with options builds a new one on every call, which
# was a third of the cost of recording a crossing.
_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def _canonical(value: object) -> bytes:
    return _ENCODE(value).encode("utf-8")


_STRING = json.encoder.encode_basestring  # a JSON string, non-ASCII kept, as _ENCODE writes it


def _model_line(index: int, prompt: str, key: str, answer: str) -> bytes:
    """``_line`` of a model crossing that returned, written out directly: the hot path of
    recording, and byte for byte what ``_line`` gives (tested)."""
    return (
        f'{{"boundary":"model","error":null,"index":{index},"input":{{"prompt":'
        f'{_STRING(prompt)}}},"key":"{key}","kind":"model","output":{_STRING(answer)}}}\n'
    ).encode()


def _described(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


# -- recording --------------------------------------------------------------------------------


class IncidentRecorder:
    """Record one run's crossings into ``path`` (created; an existing file is refused).

    Give the agent ``recorder.provider(live)`` and ``recorder.toolbox(tools)``: they
    behave exactly as the provider and a live toolbox do, and append one envelope per
    crossing before returning, so a run killed mid-way leaves every earlier one readable.
    """

    def __init__(self, path: str | Path, *, case: str, task: str, provider: str = "") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._fd: int | None = os.open(
                self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644
            )
        except FileExistsError:
            raise UsageError(
                f"{self.path} already holds an incident; an incident is never "
                "rewritten: record into a new file, or delete it first"
            ) from None
        self._index = 0
        self._header = {"case": case, "format": FORMAT, "provider": provider, "task": task}
        self._write(_canonical(self._header) + b"\n")

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            raise UsageError(f"the recorder of {self.path} is closed")
        os.write(self._fd, data)  # one write per line: a killed process loses no earlier line

    def _next(self) -> int:
        index, self._index = self._index, self._index + 1
        return index

    def cross(
        self, boundary: str, kind: Kind, given: Mapping[str, Any], key: str, go: Callable[[], Any]
    ) -> Any:
        """Make the crossing (``go``), record it, and return or raise what it did."""
        index = self._next()
        try:
            output = go()
        except Exception as exc:
            self._write(
                _line(
                    index,
                    boundary,
                    kind,
                    given,
                    key,
                    None,
                    _described(exc),
                    False if kind == "action" else None,
                )
            )
            raise
        self._write(
            _line(
                index, boundary, kind, given, key, output, None, True if kind == "action" else None
            )
        )
        return output

    def provider(self, live: Provider) -> Provider:
        """``live`` as the agent sees it, each call recorded on the ``model`` boundary."""
        return _RecordedProvider(self, live)

    def toolbox(self, tools: Tools) -> _Boundaries:
        """A live toolbox over ``tools``: read-only calls and actions (write tools, on a
        store that starts empty) recorded, each on the tool's own boundary."""
        return _Boundaries(self.cross, tools)

    def close(self) -> None:
        """Flush the file to disk; the recorder takes no more crossings."""
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _RecordedProvider:
    def __init__(self, recorder: IncidentRecorder, live: Provider) -> None:
        self.name, self._recorder, self._live = live.name, recorder, live

    def complete(self, prompt: str) -> str:
        recorder, key = self._recorder, prompt_key(prompt)
        try:
            answer = self._live.complete(prompt)
        except Exception as exc:
            recorder._write(
                _line(
                    recorder._next(),
                    MODEL,
                    "model",
                    {"prompt": prompt},
                    key,
                    None,
                    _described(exc),
                    None,
                )
            )
            raise
        if type(answer) is str:
            recorder._write(_model_line(recorder._next(), prompt, key, answer))
        else:  # an odd provider's value: the general path writes it as it is
            recorder._write(
                _line(recorder._next(), MODEL, "model", {"prompt": prompt}, key, answer, None, None)
            )
        return answer


Cross = Callable[[str, Kind, Mapping[str, Any], str, Callable[[], Any]], Any]


class _Boundaries:
    """The toolbox an incident gives the agent: each call crosses the tool's boundary."""

    def __init__(self, cross: Cross, tools: Tools) -> None:
        self._cross, self._tools = cross, tools
        self.store: dict[str, Any] = {}  # the actions' state, empty at the start of a run

    def call(self, name: str, /, **args: Any) -> Any:
        """Call tool ``name`` across its boundary (a registered write tool is an action).
        The tool itself is looked up only when the crossing runs live."""
        key = tool_key(name, args)
        write = self._tools.write_tool(name)
        if write is not None:
            return self._cross(
                name,
                "action",
                {"args": args},
                key,
                lambda: round_trip(write(self.store, **args), what=f"{name}'s result")[1],
            )
        return self._cross(
            name,
            "read",
            {"args": args},
            key,
            lambda: round_trip(self._tools.read_tool(name)(**args), what=f"{name}'s result")[1],
        )


# -- reading ----------------------------------------------------------------------------------


def read_incident(path: str | Path) -> Incident:
    """Read an incident file. A torn last line (a run killed while writing it) is dropped
    and named in ``torn``; any other bad line is an ``IncidentCorrupt``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        command = INCIDENT_RECORD(
            agent="lab.agent:run", tools="lab.tools:TOOLS", case="CASE", out=str(path)
        )
        raise UsageError(f"no incident at {path}: record one with `{command}`") from None
    return decode_incident(data, source=path)


def decode_incident(data: bytes, *, source: str | Path) -> Incident:
    """An incident from its file's bytes, as ``read_incident`` reads them; ``source`` names
    the file in every error."""
    path = Path(source)
    lines = data.split(b"\n")
    torn = ""
    if lines[-1]:  # no final newline: the last line was being written when the run ended
        torn = f"line {len(lines)} was cut off while it was written and is left out"
    lines = lines[:-1]
    if not lines:
        raise IncidentCorrupt(f"{path} has no header line: record the incident again")
    header = _json_line(path, 1, lines[0])
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise IncidentCorrupt(
            f"{path}:1: not a {FORMAT} header; this gradekit reads {FORMAT} "
            "(record the incident again, or use the gradekit that wrote it)"
        )
    envelopes = tuple(
        _envelope(path, number, _json_line(path, number, line), number - 2)
        for number, line in enumerate(lines[1:], 2)
    )
    return Incident(
        str(header.get("case", "")),
        str(header.get("task", "")),
        str(header.get("provider", "")),
        envelopes,
        torn,
    )


def _json_line(path: Path, number: int, line: bytes) -> Any:
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IncidentCorrupt(
            f"{path}:{number}: not a JSON line ({exc}); an incident is "
            "append-only: restore it with `git checkout`"
        ) from None
    except (RecursionError, ValueError) as exc:  # what no recorder writes: a hostile line
        raise IncidentCorrupt(
            f"{path}:{number}: {hostile_json(exc)} to be a JSON line; an "
            "incident is append-only: restore it with `git checkout`"
        ) from None


def _envelope(path: Path, number: int, document: Any, expected: int) -> Envelope:
    try:
        assert isinstance(document, dict)
        envelope = Envelope(
            document["index"],
            document["boundary"],
            document["kind"],
            document["input"],
            document["key"],
            document.get("output"),
            document.get("error"),
            document.get("ran"),
        )
        assert envelope.kind in ("model", "read", "action") and envelope.index == expected
        assert isinstance(envelope.input, dict) and isinstance(envelope.key, str)
    except (AssertionError, KeyError, TypeError) as exc:
        raise IncidentCorrupt(
            f"{path}:{number}: not envelope {expected} of an incident "
            f"({type(exc).__name__}); restore it with `git checkout`"
        ) from None
    return envelope


# -- replaying --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """Which boundaries run live; every other one is served from the record.

    An entry is a boundary (``"issue_refund"``, ``"model"``) or one invocation of it,
    counted from 1 (``"model#2"``). The default plan runs nothing live: a full replay.
    """

    live: frozenset[str] = frozenset()

    @classmethod
    def of(cls, live: Collection[str] = ()) -> Plan:
        """A plan that runs ``live`` through the current code."""
        return cls(frozenset(live))

    def is_live(self, boundary: str, invocation: int) -> bool:
        """Whether this crossing runs live."""
        return bool(self.live) and (
            boundary in self.live or f"{boundary}#{invocation}" in self.live
        )


@dataclass(frozen=True, slots=True)
class Crossing:
    """One crossing of the replayed run, as it happened: served from the record or live."""

    boundary: str
    kind: Kind
    input: Mapping[str, Any]
    key: str
    live: bool
    output: Any = None
    error: str | None = None
    ran: bool | None = None


class IncidentReplay:
    """Replay ``incident`` under ``plan``: give the agent ``replay.provider`` and
    ``replay.toolbox``, then call ``finish()``.

    Served crossings come from the record, each checked against its recorded input's
    key; live ones go to ``provider`` (the model) and ``tools`` (read tools, and actions
    on a store that starts empty). ``crossings`` is what happened, in order.
    """

    def __init__(
        self,
        incident: Incident | str | Path,
        *,
        plan: Plan = Plan(),
        provider: Provider | None = None,
        tools: Tools | None = None,
    ) -> None:
        self.incident = incident if isinstance(incident, Incident) else read_incident(incident)
        self.plan, self._live_provider = plan, provider
        self.crossings: list[Crossing] = []
        self._queues: dict[str, deque[Envelope]] = defaultdict(deque)
        for envelope in self.incident.envelopes:
            self._queues[envelope.boundary].append(envelope)
        self._counts: dict[str, int] = defaultdict(int)
        self.provider: Provider = _ReplayedProvider(self, self.incident.provider or "replay")
        self.toolbox = _Boundaries(self._cross, tools or Tools())

    def _cross(
        self, boundary: str, kind: Kind, given: Mapping[str, Any], key: str, go: Callable[[], Any]
    ) -> Any:
        self._counts[boundary] += 1
        invocation = self._counts[boundary]
        queue = self._queues.get(boundary)
        if self.plan.is_live(boundary, invocation):
            if queue:
                queue.popleft()  # its recorded twin, skipped: later invocations stay aligned
            return self._live(boundary, kind, given, key, go)
        if not queue:
            raise IncidentDivergence(
                f"crossing {boundary} #{invocation} is not in the record: the recorded "
                f"incident crossed {boundary} {invocation - 1} time(s). "
                f"{_fix(boundary)}",
                index=len(self.incident.envelopes),
                boundary=boundary,
            )
        recorded = queue.popleft()
        if recorded.key != key:
            raise IncidentDivergence(
                f"the run left the incident at crossing {recorded.index} ({boundary} "
                f"#{invocation}): its input is not the recorded one\n"
                f"{_input_diff(recorded.input, given)}\n{_fix(boundary)}",
                index=recorded.index,
                boundary=boundary,
            )
        self.crossings.append(
            Crossing(
                boundary,
                recorded.kind,
                given,
                key,
                False,
                recorded.output,
                recorded.error,
                recorded.ran,
            )
        )
        if recorded.error is not None:
            raise _Recorded(recorded.error)
        return recorded.output

    def _live(
        self, boundary: str, kind: Kind, given: Mapping[str, Any], key: str, go: Callable[[], Any]
    ) -> Any:
        try:
            output = go()
        except Exception as exc:
            self.crossings.append(
                Crossing(
                    boundary,
                    kind,
                    given,
                    key,
                    True,
                    None,
                    _described(exc),
                    False if kind == "action" else None,
                )
            )
            raise
        self.crossings.append(
            Crossing(
                boundary, kind, given, key, True, output, None, True if kind == "action" else None
            )
        )
        return output

    def complete(self, prompt: str) -> str:
        """The ``model`` boundary: live through ``provider`` if the plan says so."""

        def ask() -> str:
            if self._live_provider is None:
                raise UsageError(
                    "the plan runs the model live, but no provider was given: "
                    "pass provider= to the replay"
                )
            return self._live_provider.complete(prompt)

        answer: str = self._cross(MODEL, "model", {"prompt": prompt}, prompt_key(prompt), ask)
        return answer

    def finish(self) -> None:
        """Check that every served boundary used all its recorded crossings."""
        missing = sorted(
            (
                queue[0]
                for name, queue in self._queues.items()
                if queue and name not in self.plan.live
            ),
            key=lambda envelope: envelope.index,
        )
        if missing:
            first = missing[0]
            raise IncidentDivergence(
                f"the run ended before crossing {first.index} ({first.boundary}): the "
                f"recorded incident crossed it, this run did not. {_fix(first.boundary)}",
                index=first.index,
                boundary=first.boundary,
            )

    def actions(self, name: str | None = None) -> list[Crossing]:
        """The actions of this run (of tool ``name`` only, if given), in order."""
        return [c for c in self.crossings if c.kind == "action" and name in (None, c.boundary)]


class _Recorded(Exception):
    """A crossing that failed when it was recorded fails the same way in a replay."""


class _ReplayedProvider:
    def __init__(self, replay: IncidentReplay, name: str) -> None:
        self.name, self._replay = name, replay

    def complete(self, prompt: str) -> str:
        return self._replay.complete(prompt)


def _fix(boundary: str) -> str:
    return (
        f"If the change is intended, record the incident again; if the test must run "
        f"{boundary} through the new code, name it live in the plan"
    )


def _input_diff(recorded: Mapping[str, Any], actual: Mapping[str, Any]) -> str:
    before = json.dumps(recorded, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    after = json.dumps(actual, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines = difflib.unified_diff(
        before, after, "recorded input", "this run's input", lineterm="", n=1
    )
    return "\n".join(f"    {line}" for line in lines)


@dataclass(frozen=True, slots=True)
class Replayed:
    """What a replayed incident did: the agent's answer (or what it raised), and every
    crossing in order."""

    answer: object
    error: BaseException | None
    crossings: tuple[Crossing, ...] = field(default=())

    def actions(self, name: str | None = None) -> list[Crossing]:
        """The actions the run took (of tool ``name`` only, if given), in order."""
        return [c for c in self.crossings if c.kind == "action" and name in (None, c.boundary)]

    def live(self) -> Iterator[Crossing]:
        """The crossings that ran through the current code."""
        return (c for c in self.crossings if c.live)


def replay_incident(
    incident: Incident | str | Path,
    agent: Callable[..., object],
    *,
    plan: Plan = Plan(),
    provider: Provider | None = None,
    tools: Tools | None = None,
    task: str | None = None,
) -> Replayed:
    """Run ``agent(provider, task, toolbox)`` on a recorded incident under ``plan``.

    A divergence from the record (``IncidentDivergence``) and a replay set up wrong
    (``UsageError``: a live boundary with nothing to run it) are raised; whatever else
    the agent raises is kept in ``error``, so a test can assert on it. ``task`` defaults to
    the recorded one.
    """
    replay = IncidentReplay(incident, plan=plan, provider=provider, tools=tools)
    asked = replay.incident.task if task is None else task
    try:
        answer: object = agent(replay.provider, asked, replay.toolbox)
    except (IncidentDivergence, UsageError):  # the test's own setup, not the agent's doing
        raise
    except Exception as exc:
        return Replayed(None, exc, tuple(replay.crossings))
    replay.finish()
    return Replayed(answer, None, tuple(replay.crossings))
