"""The trust boundary: untrusted agent code runs in a child process; the parent alone decides.

The parent starts ``_harness.py`` (standard library only, so the submission's own
``lab`` cannot shadow it) with an environment built from nothing, and serves the
recorded answers over a private pair of pipes. The parent therefore knows
every key asked and every miss; it times each case, kills a child that
overruns or dies and starts a fresh one for the cases left, parses the trace
files itself (bounded: ``trace_records`` lines of ``TRACE_LINE`` bytes), and turns
what the child says into values only after checking them. Nothing the child prints
is parsed, no pickle crosses the boundary, a reply must be read before the next
request (so the parent never queues answers), and a returned answer is compared by
its SHA-256 and kept only up to ``answer_kb``. The one call the child answers itself is
a write tool's, on a store that starts empty each case run: the parent still logs it in
order, and takes a name for one only as the first child declared it before any case
ran, never a name a fixture of the submission holds (``_Run.is_write``).

``Sandbox`` is the parent's side: one submission's root, a scratch folder, the rubric's
limits and a wall. Its methods are the runs the grader makes through them (cases, a
regression set's items, the own-Replay probe, the cut-point test); what changes from one
run of cases to the next (label, hash seed, how calls are served) is a ``RunPlan``.

The walls are ``grader.sandbox._walls``'. What each wall stops, and what a determined
student can still do behind each (each shown by a test in ``tests/grader/sandbox/`` or
``tests/grader/batch/test_batch_safety.py``), is the threat model in ``docs/sandbox.md``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from gradekit import Cassette, Entry, GradekitError, HttpCassette, prompt_key, tool_key
from gradekit.internal import LAB_HTTP_CASSETTE, HttpRequest, commands, miss_rows, replay_miss
from grader._cache import Derived, content_key
from grader._model import (
    ASKED_CAP,
    TOOLS_CHANGED,
    CaseOutcome,
    Limits,
    Refusal,
    ReplayProbe,
    RunResult,
    Served,
    TraceRecord,
    Withhold,
)
from grader._text import one_line
from grader.sandbox._channel import (
    Child,
    Event,
    ProtocolError,
    child_ending,
    child_name,
    child_text,
    clean_text,
    exit_detail,
    replaced_names,
    settle_children,
    strict_loads,
)
from grader.sandbox._cutpoint import CutPointRun, cut_point_verdict
from grader.sandbox._hold import close_spare_cells
from grader.sandbox._layout import (
    LAID_AHEAD,
    LaidOut,
    captured_output,
    child_config,
    child_environment,
    child_outputs,
    prepare_run,
    read_regular,
)
from grader.sandbox._probe import ProbeTalk, probe_cassette
from grader.sandbox._wall import Layout, Wall
from grader.sandbox._walls import PROCESS_WALL

__all__ = [
    "CLOCK",
    "Answer",
    "CaseServer",
    "RunPlan",
    "Sandbox",
    "Serving",
    "ToolAnswer",
    "module_name",
    "no_tools",
]

_MAX_REFUSALS = 100
_MAX_WRITES = 64  # write tools a registry may declare
_NAME_CAP = 200  # characters of a declared write tool's name
MAX_CALLS = 10_000  # provider, tool and HTTP calls one case may make
MAX_KEPT = 16 << 20  # bytes of tool arguments and results the parent keeps for one case
TRACE_LINE = 4096  # bytes of one trace record: a record is a few short fields
_MIB = 1 << 20
_MAX_SEED = 2**32 - 1
# What a run's clock reads when it starts, unless its plan says otherwise: a grading draws
# its own (``grader.grading``), so that no grade depends on the day it is made.
CLOCK = 2524608000  # 2050-01-01T00:00:00Z

_OUT = "outside the submission"
_REFUSED: dict[str, str] = {
    event: phrase
    for phrase, events in (
        ("bind a network address", "socket.bind"),
        ("connect to a network address", "socket.connect"),
        ("send to a network address", "socket.sendmsg socket.sendto"),
        ("resolve a host name", "socket.getaddrinfo socket.gethostbyname socket.gethostbyname_ex"),
        ("look up a network address", "socket.gethostbyaddr socket.getnameinfo"),
        (
            "start a process",
            "os.exec os.posix_spawn os.spawn os.system pty.spawn subprocess.Popen "
            "_posixsubprocess.fork_exec",
        ),
        ("fork the process", "os.fork os.forkpty"),
        ("load a C library", "ctypes.dlopen"),
        ("signal another process", "os.kill os.killpg os.pidfd_open signal.pidfd_send_signal"),
        ("open a network socket", "socket.__new__"),
        ("change its resource limits", "resource.prlimit resource.setrlimit"),
        (f"write a file {_OUT}", "open"),
        (f"change permissions {_OUT}", "os.chflags os.chmod os.chown os.lchflags shutil.chown"),
        (f"change file attributes {_OUT}", "os.removexattr os.setxattr"),
        (f"create a link {_OUT}", "os.link os.symlink"),
        (f"create a folder {_OUT}", "os.mkdir"),
        (f"create a special file {_OUT}", "os.mkfifo os.mknod"),
        (f"delete {_OUT}", "os.remove os.rmdir shutil.rmtree"),
        (f"move a file {_OUT}", "os.rename os.replace shutil.move"),
        (f"truncate a file {_OUT}", "os.truncate"),
        (f"change file times {_OUT}", "os.utime"),
        (f"copy {_OUT}", "shutil.copyfile shutil.copymode shutil.copystat shutil.copytree"),
        (f"write an archive {_OUT}", "shutil.make_archive shutil.unpack_archive"),
    )
    for event in events.split()
}

_OPEN_TARGETS = {"folder": f"open a folder {_OUT}", "device": "write to a device file"}
# Where a refused call was made: a file of the submission and a line, nothing a run varies.
_WHERE = re.compile(r"(?!.*\.\.)[\w.\-/]{1,200}\.py:[0-9]{1,7}")


Answer = Callable[[str, str], str | None]  # (case, prompt) -> the recorded response, or None
ToolAnswer = Callable[[str, str], tuple[bool, object]]  # (case, tool key) -> (found, result)


def no_tools(case: str, key: str) -> tuple[bool, object]:
    """No fixtures: every tool call misses."""
    return False, None


@dataclass(frozen=True, slots=True)
class Serving:
    """How the parent answers a run's calls: ``answer`` each prompt, ``tools`` each tool
    call, and ``http[case]`` (the case's ``<cassettes>/<case>.http.json``) each request of
    the SDK clients the provider hands out, with the request's next recording (a case
    without one misses every request). ``fixtures`` and ``cassettes`` are the folders the
    manifest names, so that a miss says where its recording belongs."""

    answer: Answer
    tools: ToolAnswer = no_tools
    http: Mapping[str, HttpCassette] = field(default_factory=dict)
    fixtures: str = "fixtures"
    cassettes: str = "cassettes"
    # case -> key -> entry: what a miss's message compares the prompt with, as the kit's
    # Replay does (the closest recorded prompt, where they part); a case not here has no
    # cassette
    recorded: Mapping[str, Mapping[str, Entry]] = field(default_factory=dict)
    # Where miss messages are kept (in this process's memory too): the same withheld call
    # recurs in a grading's probes, a cohort's agents ask the hand-out's prompts, and a
    # message (the closest recording, where they part) costs milliseconds to make.
    derived: Derived | None = None
    # The manifest's ``tools`` ("module:attr"): the registry whose write tools the child
    # runs itself, each case run on a store that starts empty; "" runs none (every call is
    # then served from fixtures, or misses)
    registry: str = ""
    # Every tool name a fixture of the submission holds (any case's): never a write tool,
    # whatever the child declares (``_Run.is_write``)
    recorded_tools: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What one run of cases is given besides the sandbox: the provider ``label`` the agent
    sees, its ``PYTHONHASHSEED``, how its calls are served, the calls ``withhold`` answers
    with a miss, recorded or not (a loud-failure probe: its miss reads as any other),
    ``on_case(case_id)``, told as each case starts (a batch's heartbeat names it), and the
    ``clock`` its wall clock starts at (``time.time()``, ``datetime.now()``: the day is the
    grader's choice, never the grading machine's)."""

    label: str
    hashseed: int
    serving: Serving
    withhold: Withhold | None = None
    on_case: Callable[[str], None] | None = None
    clock: int = CLOCK  # seconds since the epoch that the run's wall clock starts at
    copies: Copies | None = None  # the run is copied at these cases' starts (``Copies``)

    def __post_init__(self) -> None:
        if not 0 <= self.hashseed <= _MAX_SEED:
            raise ValueError(f"hashseed must be between 0 and {_MAX_SEED}, got {self.hashseed}")


class Copies(Protocol):
    """What a run's copies are for (a grading's loud-failure probes). At the start of each
    case in ``cases`` the run asks whether to copy itself; ``next(case)`` names the
    withheld call of the next copy (None: no more), each copy runs that case alone under
    it, and ``took`` hears its run. ``lost(case)`` hears a case that was not copied as
    asked: the run had other threads then (a fork keeps only the calling one), its wall
    makes no copies, or it ended; the grading probes that case in runs of its own."""

    @property
    def cases(self) -> Collection[str]:
        """The cases at whose start the run is asked to copy itself."""

    def next(self, case: str) -> Withhold | None:
        """The withheld call of the next copy at ``case``'s start, or None."""

    def took(self, withhold: Withhold, result: RunResult) -> None:
        """One copy's run: its one case, under ``withhold``."""

    def lost(self, case: str) -> None:
        """``case`` could not be copied as asked."""


class CaseServer(Protocol):
    """What serves one case of ``Sandbox.replay``: its prompts and its tool calls."""

    def answer(self, prompt: str) -> str | None:
        """The response to ``prompt``, or None for a miss."""

    def tool(self, key: str) -> tuple[bool, object]:
        """``(True, result)`` for the tool call ``key``, or ``(False, None)`` for a miss."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where a submission's code runs: the submission at ``root``, each run's folders in a
    fresh folder under ``scratch``, the rubric's ``limits``, behind ``wall``. What differs
    between the runs of one grading is given to each call. The submission is laid out
    once for all the runs made through one sandbox and the sandboxes ``within`` it
    (``laid``): make a new ``Sandbox`` to see a changed submission."""

    root: Path
    scratch: Path
    limits: Limits
    wall: Wall = PROCESS_WALL
    laid: LaidOut = field(default_factory=LaidOut, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.laid.hosts.scratch is None:  # the first sandbox: every run is under it
            self.laid.hosts.scratch = self.scratch.resolve()
            self.laid.ahead = self.laid.hosts.scratch / LAID_AHEAD

    def ahead(
        self, seeds: Sequence[int], preload: Sequence[str] = (), shipped: Collection[str] = ()
    ) -> None:
        """Start what the runs under the hash ``seeds`` fork from, side by side, not waiting
        (``Wall.ahead``), each having imported the packages ``preload`` names (what the
        submission imports of the rubric's): the grading goes on reading the submission
        meanwhile."""
        self.wall.ahead(self.laid.hosts, seeds, preload, shipped)

    def close(self) -> None:
        """End what this sandbox and those ``within`` it keep between runs (the hosts its
        runs forked from, unless they were lent: ``LaidOut.lent``); a later run starts
        them again."""
        try:
            settle_children()  # every run's init ended and its cell gone, before the hosts
            close_spare_cells()
        finally:
            if not self.laid.lent:
                self.laid.hosts.close()

    def within(self, folder: str) -> Sandbox:
        """The same sandbox, its runs' folders under a fresh folder of ``scratch`` for
        ``folder``. The name is made up: a run can see its folders' paths, and a path
        that said "probe" would tell a probe from the primary run."""
        return replace(self, scratch=self.scratch / f"{secrets.token_hex(6)}")

    def run(self, agent: str, cases: Sequence[tuple[str, str]], plan: RunPlan) -> RunResult:
        """Run ``agent`` (``"package.module:function"``) on each ``(case_id, task)``.

        Every call is recorded as the parent served it. A case that times out or crashes
        costs only itself: a fresh child runs the cases after it.
        """
        ids = [case_id for case_id, _ in cases]
        if len(set(ids)) != len(ids):
            raise ValueError(f"case ids must be unique, got {ids}")
        layout = self._prepare(agent)
        planned = [
            _Case(case_id, task, layout.work / f"trace-{n:03d}.jsonl")
            for n, (case_id, task) in enumerate(cases)
        ]
        run = _Run(plan, self.limits, layout)
        config = child_config(
            layout,
            self.limits,
            mode="run",
            agent=agent,
            label=plan.label,
            fixtures=plan.serving.fixtures,
            clock=plan.clock,
            tools=plan.serving.registry,
        )
        copied = sorted(set(plan.copies.cases) & set(ids)) if plan.copies is not None else []
        if plan.copies is not None:
            config["copies"] = copied
        traces = [case.trace for case in planned]
        with child_outputs(layout) as outputs:
            while run.import_error is None and (pending := run.pending(planned)):
                cases_config = [
                    {"id": c.id, "task": c.task, "trace": layout.inside(c.trace)} for c in pending
                ]
                run.seal = secrets.token_hex(16)  # a fresh child, a fresh seal
                told = {**config, "cases": cases_config, "seal": run.seal}
                with self._child(told, layout, outputs, traces, plan.hashseed) as child:
                    run.converse(child, pending)
                if plan.copies is not None:  # a fresh child would not stand where it stood
                    for case in run.pending(planned):
                        if case.id in copied:
                            plan.copies.lost(case.id)
                    break
        return run.result(planned, captured_output(layout, self.limits))

    def replay(
        self,
        agent: str,
        cases: Sequence[tuple[str, str]],
        servers: Mapping[str, CaseServer],
        *,
        label: str,
        hashseed: int,
        clock: int = CLOCK,
    ) -> RunResult:
        """``run``, each case served by its own server in ``servers`` (a regression set's
        items, each from its own recordings)."""
        serving = Serving(
            answer=lambda case, prompt: servers[case].answer(prompt),
            tools=lambda case, key: servers[case].tool(key),
        )
        return self.run(agent, cases, RunPlan(label, hashseed, serving, clock=clock))

    def probe_replay(
        self,
        replay: str,
        recorded: Mapping[str, str],
        *,
        unknown: str | None = None,
        hashseed: int = 0,
        clock: int = CLOCK,
        case: str = "case",
        cassettes: str = "cassettes",
    ) -> ReplayProbe:
        """Probe the submission's own replay class (``"package.module:Class"``).

        The parent writes ``recorded`` (prompt -> response) as ``case``'s cassette, the child
        puts it at ``<cassettes>/<case>.json`` in its copy, constructs ``cls(path)`` and
        asks one recorded prompt wrapped in extra whitespace and one prompt never recorded
        (``unknown``, when it is not in ``recorded``); the parent judges.
        """
        layout = self._prepare(replay)
        cassette, probe, expected = probe_cassette(layout, recorded, unknown, case, cassettes)
        config = child_config(
            layout, self.limits, mode="probe_replay", replay=replay, probe=probe, clock=clock
        )
        with (
            child_outputs(layout) as outputs,
            self._child(config, layout, outputs, [cassette], hashseed) as child,
        ):
            return ProbeTalk(layout, self.limits, expected, str(config["seal"])).converse(child)

    def run_cut_point_test(
        self, test: str, guard: str, *, allow_all: bool, hashseed: int = 0, clock: int = CLOCK
    ) -> CutPointRun:
        """Run the cut-point ``test`` over the submission; with ``allow_all``, its ``guard``
        replaced first by one that allows everything. ``hashseed``, here and for the
        probe: no verdict depends on it; a grading passes one its runs already use."""
        layout = self._prepare(test, guard)
        config = child_config(
            layout,
            self.limits,
            mode="cut_point",
            test=test,
            guard=guard,
            allow_all=allow_all,
            clock=clock,
        )
        with (
            child_outputs(layout) as outputs,
            self._child(config, layout, outputs, hashseed=hashseed) as child,
        ):
            return cut_point_verdict(child, layout, self.limits, str(config["seal"]))

    def _prepare(self, *specs: str) -> Layout:
        """A fresh run's folders, copying from the laid-out submission, the packages of
        ``specs`` (``package.module:attribute``) compiled there."""
        # The runs import the grader's own gradekit (the harness's ``Library``), never a copy
        # the submission ships: compiling that copy would be work no run reads.
        packages = [
            package
            for spec in specs
            if (package := spec.partition(":")[0].partition(".")[0]) != "gradekit"
        ]
        source = self.laid.source(self.root, self.scratch, packages, self.limits)
        return prepare_run(self.root, self.scratch, self.wall, source, self.laid.hosts)

    @contextmanager
    def _child(
        self,
        config: Mapping[str, object],
        layout: Layout,
        outputs: tuple[IO[bytes], IO[bytes]],
        shown: Sequence[Path] = (),
        hashseed: int = 0,
    ) -> Iterator[Child]:
        """One harness behind the wall, told ``config``, seeing ``shown`` of the run's
        ``work``; ended on leaving."""
        env = child_environment(layout, hashseed)
        self.laid.children += 1
        with self.wall.start(config, layout, env, outputs, self.limits, shown) as child:
            yield child


@dataclass(frozen=True, slots=True)
class _Case:
    id: str
    task: str
    trace: Path


def _trace_cap(limits: Limits) -> int:
    """The most bytes of one case's trace the parent reads: ``trace_records`` full lines."""
    return min(limits.file_mb * _MIB, limits.trace_records * (TRACE_LINE + 1))


def _read_trace(path: Path, limits: Limits) -> tuple[tuple[TraceRecord, ...], str | None]:
    """The case's trace records, and where the file stopped being valid JSONL.

    At most ``limits.trace_records`` lines of at most ``TRACE_LINE`` bytes are read:
    the parent's memory and time stay bounded whatever the child wrote.
    """
    cap = _trace_cap(limits)
    data = read_regular(path, cap)
    if data is None:
        return (), None if not os.path.lexists(path) else "not a regular file"
    lines = data[:cap].split(b"\n", limits.trace_records)
    if lines[-1] == b"":
        lines.pop()
    records: list[TraceRecord] = []
    for number, raw in enumerate(lines, start=1):
        if number > limits.trace_records:
            return tuple(records), (
                f"more than {limits.trace_records} records; the rest "
                "was not read (trace_records in the rubric's [limits])"
            )
        if len(raw) > TRACE_LINE:
            return tuple(records), f"line {number}: longer than {TRACE_LINE} bytes"
        try:
            record = strict_loads(raw)
        except UnicodeDecodeError:
            return tuple(records), f"line {number}: not UTF-8"
        except (ValueError, RecursionError):
            return tuple(records), f"line {number}: not valid JSON"
        if not isinstance(record, dict):
            return tuple(records), f"line {number}: not a JSON object"
        fields = (
            record.get(name) for name in ("key", "provider", "latency_ms", "ok", "tool", "error")
        )
        records.append(TraceRecord(*fields))
    return tuple(records), None


@dataclass
class _Talk:
    """How far one child got through its pending cases."""

    pending: Sequence[_Case]
    ready: bool = False
    done: int = 0
    current: _Case | None = None
    calls: list[Served] = field(default_factory=list)
    trace_read: int = 0  # bytes of the current case's trace read so far
    trace_lines: int = 0  # complete lines in them
    asked: dict[str, int] = field(default_factory=dict)  # HTTP request key -> times served
    positions: dict[str, int] = field(default_factory=dict)  # "provider" / "tool" -> calls
    replies: int = 0  # replies this child was sent to its calls
    missed_at: int = 0  # the number of the reply that was the case's first withheld miss
    kept: int = 0  # bytes of tool arguments and results kept in ``calls``

    def keep(self, served: Served) -> None:
        """Log one call of the current case, within what the parent keeps for a case: an
        agent that calls without end, or with arguments of many megabytes, would otherwise
        grow the grader's memory for as long as its time lasts."""
        self.kept += len(served.args) + len(served.result)
        if len(self.calls) >= MAX_CALLS:
            raise ProtocolError(f"more than {MAX_CALLS} calls in one case")
        if self.kept > MAX_KEPT:
            raise ProtocolError(
                f"more than {MAX_KEPT >> 20} MiB of tool arguments and results in one case"
            )
        self.calls.append(served)

    def next_case(self) -> _Case:
        return self.pending[self.done]

    def asking(self, kind: str) -> int:
        """Count one more call of ``kind`` in the current case; its 1-based position."""
        self.positions[kind] = self.positions.get(kind, 0) + 1
        return self.positions[kind]

    def in_flight(self, since: object) -> bool:
        """Whether a call was made before the agent had the case's first withheld miss:
        ``since`` is how many replies the harness had read when the agent made it."""
        if since is None:  # a harness that does not say: the call came after
            return False
        if not isinstance(since, int) or isinstance(since, bool) or not 0 <= since <= self.replies:
            raise ProtocolError("a call that counts replies it was never sent")
        return self.missed_at > 0 and since < self.missed_at

    def reply(self, child: Child, message: dict[str, Any], *, withheld: bool = False) -> None:
        """Send one reply to a call; remember which one was the case's first withheld miss."""
        self.replies += 1
        if withheld and not self.missed_at:
            self.missed_at = self.replies
        child.send(message)


class _Run:
    """The parent's account of one ``Sandbox.run``: built only from what it observed or
    checked."""

    def __init__(self, plan: RunPlan, limits: Limits, layout: Layout):
        self.outcomes: dict[str, CaseOutcome] = {}
        self.refusals: list[Refusal] = []
        self.import_error: str | None = None
        self.missing_module: str | None = None
        self.tampering: list[str] = []
        self._serving, self._limits, self._layout = plan.serving, limits, layout
        self.seal = ""  # the current child's: its harness signs each verdict with it
        self._plan = plan  # its on_case, its probe's withheld call, its copies
        self.writes: frozenset[str] | None = None  # the write tools the first child declared

    def pending(self, planned: Sequence[_Case]) -> list[_Case]:
        """The cases without an outcome yet, in order."""
        return [case for case in planned if case.id not in self.outcomes]

    def result(self, planned: Sequence[_Case], output: tuple[str, str]) -> RunResult:
        """The run's value; cases never reached are ``not_run``."""
        not_run = "the agent could not be imported"
        outcomes = {
            case.id: self.outcomes.get(case.id) or CaseOutcome(case.id, "not_run", detail=not_run)
            for case in planned
        }
        return RunResult(
            outcomes,
            tuple(self.refusals),
            self.import_error,
            *output,
            tampering=tuple(dict.fromkeys(self.tampering)),
            missing_module=self.missing_module,
        )

    def converse(self, child: Child, pending: Sequence[_Case]) -> None:
        """Serve one child until it ends or its cases are done.

        Afterwards at least one pending case has an outcome or ``import_error``
        is set, so restarting children always makes progress.
        """
        talk, deadline = _Talk(pending), self._deadline()
        while talk.done < len(pending) and self.import_error is None:
            try:
                event = child.receive(deadline)
                if isinstance(event, Event):
                    return self._lose(talk, *child_ending(child, event, deadline, self._limits))
                if self._handle(child, talk, event):
                    deadline = self._deadline()
            except ProtocolError as exc:
                child.finish(time.monotonic())
                return self._lose(talk, "crashed", f"broke the grader's protocol: {exc}")

    def _handle(self, child: Child, talk: _Talk, message: dict[str, Any]) -> bool:
        """Act on one message; True when it starts a new stretch of the clock."""
        op, case = message["op"], message.get("case")
        current = talk.current
        if op == "refused":
            self._refused(current.id if current else "", message)
            return False
        if not talk.ready and op in ("ready", "import_error"):
            talk.ready = op == "ready"
            if talk.ready and self.writes is None:
                self.writes = _declared_writes(message.get("writes"))
            if not talk.ready:
                error = self._layout.scrub(child_text(message.get("error")))
                self.import_error = error or "the agent could not be imported"
                self.missing_module = module_name(message.get("module"))
        elif talk.ready and current is None and op == "start" and case == talk.next_case().id:
            talk.current = talk.next_case()
            if self._plan.on_case is not None:
                self._plan.on_case(talk.current.id)
        elif (
            op == "copy"
            and self._plan.copies is not None
            and talk.ready
            and current is None
            and case == talk.next_case().id
        ):
            self._copy(child, talk, message)
        elif op in ("complete", "tool", "http") and child.replying:
            # A well-behaved harness reads each reply before it asks again; one that does
            # not would make the grader hold every answer it sends in memory.
            raise ProtocolError("a request before the last reply was read")
        elif current is not None and op == "complete" and case == current.id:
            self._serve(child, talk, current, message)
            return False
        elif current is not None and op == "tool" and case == current.id:
            self._serve_tool(child, talk, current, message)
            return False
        elif current is not None and op == "http" and case == current.id:
            self._serve_http(child, talk, current, message)
            return False
        elif op in ("result", "tampered") and message.get("seal") != self.seal:
            what = f"case {current.id}" if current else "no case"
            self.tampering.append(
                f"a {op} message ({what}) that the harness did not send: "
                "written on the grader's channel by the agent"
            )
            raise ProtocolError("a forged verdict")
        elif current is not None and op == "tampered":
            self.tampering.append(
                f"case {current.id}: the agent replaced the harness's code "
                f"({replaced_names(message)})"
            )
            raise ProtocolError("the harness's code was replaced")
        elif current is not None and op == "result" and case == current.id:
            status, claims = _claims(message, self._limits.answer_kb * 1024)
            if claims.get("message"):  # the machine's paths and addresses stay out
                claims["message"] = _ADDRESS.sub("0x…", self._layout.scrub(claims["message"]))
            self._conclude(talk, current, status, claims)
        else:
            raise ProtocolError("an unexpected message")
        return True

    def _copy(self, child: Child, talk: _Talk, message: Mapping[str, Any]) -> None:
        """The run asks, at a case's start, whether to copy itself: answer, and serve the
        copy (a run of that case alone, under the next withheld call) until the run says
        how it ended. A copy is served and judged as any run is, on its own account."""
        copies, case = self._plan.copies, talk.next_case()
        assert copies is not None
        able = message.get("able") is True
        withhold = copies.next(case.id) if able else None
        if not able:
            copies.lost(case.id)
        child.send({"copy": withhold is not None})
        if withhold is None:
            return
        copy = _Run(
            replace(self._plan, withhold=withhold, copies=None, on_case=None),
            self._limits,
            self._layout,
        )
        copy.seal, copy.writes = self.seal, self.writes
        copy_talk = _Talk([case], ready=True, replies=talk.replies)
        deadline = self._deadline() + _COPY_GRACE_S  # the run ends a copy past the limit
        while True:
            event = child.receive(deadline)
            if isinstance(event, Event):
                copies.lost(case.id)
                raise ProtocolError(f"the run ended while its copy ran ({event.name})")
            if event["op"] == "copied" and event.get("case") == case.id:
                break
            if case.id in copy.outcomes:
                continue  # the copy said its verdict: what it says after is nobody's
            try:
                copy._handle(child, copy_talk, event)
            except ProtocolError as exc:
                copy._lose(copy_talk, "crashed", f"broke the grader's protocol: {exc}")
        ending = _copy_ending(event, self._limits)
        if ending is not None and case.id not in copy.outcomes:
            copy._lose(copy_talk, *ending)
        # The case's trace file is the copy's as it is the run's (the same name, nothing
        # that tells them apart): emptied for the next copy, or the run, as it began.
        with contextlib.suppress(OSError):
            os.truncate(case.trace, 0)
        if ending is None:
            copies.lost(case.id)
            return
        copies.took(withhold, copy.result([case], ("", "")))

    def _serve(self, child: Child, talk: _Talk, case: _Case, message: Mapping[str, Any]) -> None:
        prompt = message.get("prompt")
        if not isinstance(prompt, str):
            raise ProtocolError("a request without a prompt")
        try:
            key = prompt_key(prompt)
        except UnicodeEncodeError as exc:
            raise ProtocolError("a prompt that is not UTF-8") from exc
        lines, position = self._trace_lines(talk, case), talk.asking("provider")
        in_flight = talk.in_flight(message.get("since"))
        head = one_line(prompt)
        if self._withholds(case, "provider", position):
            talk.keep(
                Served(
                    key=key,
                    served=False,
                    trace_lines=lines,
                    withheld=True,
                    asked=prompt.strip()[:ASKED_CAP],
                    in_flight=in_flight,
                    head=head,
                )
            )
            talk.reply(child, self._miss(case, prompt, key), withheld=True)
            return
        response = self._serving.answer(case.id, prompt)
        recorded = self._serving.recorded.get(case.id, {})
        talk.keep(
            Served(
                key=key,
                served=response is not None,
                trace_lines=lines,
                asked="" if response is not None else prompt[:ASKED_CAP],
                in_flight=in_flight,
                head=head,
                reordered=response is None
                and _reorders(
                    prompt.strip(),
                    (entry.prompt.strip() for entry in recorded.values() if entry.prompt),
                ),
            )
        )
        talk.reply(
            child, {"response": response} if response is not None else self._miss(case, prompt, key)
        )

    def _miss(self, case: _Case, prompt: str, key: str) -> dict[str, str]:
        """The reply to a prompt the parent does not answer: the kit's Replay's miss for
        the case's cassette without ``key`` (a withheld answer's miss reads as the missing
        recording's), and the cassette it names."""
        source = f"{self._serving.cassettes}/{case.id}.json"
        return {"miss": self._miss_message(case, prompt, key, source), "cassette": source}

    def _miss_message(self, case: _Case, prompt: str, key: str, source: str) -> str:
        """``_miss``'s message, made, or read where ``Serving.derived`` keeps it: it depends
        on the prompt and the recorded prompts alone."""
        entries = self._serving.recorded.get(case.id)
        rest = {k: entry for k, entry in (entries or {}).items() if k != key}
        derived = self._serving.derived
        kept = None
        if derived is not None:
            parts = [
                _MISS_VERSION,
                case.id,
                source,
                "1" if entries is not None else "0",
                prompt,
                *(
                    part
                    for k, entry in rest.items()
                    for part in (k, "" if entry.prompt is None else "+" + entry.prompt)
                ),
            ]
            kept = content_key(*(part.encode("utf-8", "surrogatepass") for part in parts))
            found = derived.read("miss", kept)
            if found is not None:
                return found.decode("utf-8", "surrogatepass")
        message = str(
            replay_miss(Cassette(case.id, rest), prompt, source=source, exists=entries is not None)
        )
        if derived is not None and kept is not None:
            derived.write("miss", kept, message.encode("utf-8", "surrogatepass"))
        return message

    def _serve_tool(
        self, child: Child, talk: _Talk, case: _Case, message: Mapping[str, Any]
    ) -> None:
        tool, args = message.get("tool"), message.get("args")
        if not isinstance(tool, str) or not isinstance(args, dict):
            raise ProtocolError("a tool call without a tool name and arguments")
        try:
            key = tool_key(tool, args)
        except GradekitError as exc:
            raise ProtocolError("tool arguments that are not JSON") from exc
        lines, in_flight = self._trace_lines(talk, case), talk.in_flight(message.get("since"))
        if self.is_write(tool):  # never withheld: no fixture holds it, so it never misses
            talk.keep(
                Served(
                    key=key,
                    served=True,
                    tool=tool,
                    trace_lines=lines,
                    in_flight=in_flight,
                    args=_canonical(args),
                    write=True,
                )
            )
            talk.reply(child, {"write": True})  # the child runs it on the case run's store
            return
        withheld = self._withholds(case, "tool", talk.asking("tool"))
        found, result = (False, None) if withheld else self._serving.tools(case.id, key)
        talk.keep(
            Served(
                key=key,
                served=found,
                tool=tool,
                trace_lines=lines,
                withheld=withheld,
                in_flight=in_flight,
                asked=_shown_args(tool, args)[:ASKED_CAP] if withheld else "",
                args=_canonical(args),
                result=_canonical(result) if found else "",
            )
        )
        if found:
            talk.reply(child, {"response": result})
        else:
            talk.reply(
                child,
                {"missing": _missing(case, tool, args, self._serving.fixtures)},
                withheld=withheld,
            )

    def _serve_http(
        self, child: Child, talk: _Talk, case: _Case, message: Mapping[str, Any]
    ) -> None:
        """An SDK client's request: the next recording of its key in the case's HTTP
        cassette, or a miss that names the closest recorded request and where it parts."""
        method, url, body = (message.get(name) for name in ("method", "url", "body"))
        if not isinstance(method, str) or not isinstance(url, str) or not isinstance(body, str):
            raise ProtocolError("an HTTP request without a method, a URL and a body")
        try:
            asked = HttpRequest.of(method, url, base64.b64decode(body, validate=True))
            key = asked.key
        except (binascii.Error, ValueError) as exc:  # a body not base64, a URL with no port
            raise ProtocolError("an HTTP request that cannot be read") from exc
        lines, position = self._trace_lines(talk, case), talk.asking("provider")
        in_flight = talk.in_flight(message.get("since"))
        cassette = self._serving.http.get(case.id)
        if self._withholds(case, "provider", position):
            # The miss a cassette without this request would give: nothing tells it apart.
            rest = _without(cassette, key) if cassette is not None else None
            rows = miss_rows(rest or HttpCassette(case.id), asked, 1, exists=rest is not None)
            talk.keep(
                Served(
                    key=key,
                    served=False,
                    trace_lines=lines,
                    http=True,
                    withheld=True,
                    asked=request_head(asked)[:ASKED_CAP],
                    in_flight=in_flight,
                    head=one_line(request_head(asked)),
                )
            )
            talk.reply(child, {"miss": self._http_miss(case, rows), "key": key}, withheld=True)
            return
        recorded = cassette.interactions.get(key, ()) if cassette is not None else ()
        n = talk.asked.get(key, 0) + 1
        if n <= len(recorded):
            talk.asked[key] = n
            talk.keep(
                Served(
                    key=key,
                    served=True,
                    trace_lines=lines,
                    http=True,
                    in_flight=in_flight,
                    head=one_line(request_head(asked)),
                )
            )
            response = recorded[n - 1].response
            talk.reply(
                child,
                {
                    "http": {
                        "status": response.status,
                        "headers": sorted(response.headers.items()),
                        "body": base64.b64encode(response.body()).decode("ascii"),
                    }
                },
            )
            return
        rows = miss_rows(cassette or HttpCassette(case.id), asked, n, exists=cassette is not None)
        differs = next((value for label, value in rows if label in ("differs", "asked")), "")
        kept = (
            [one.request for many in cassette.interactions.values() for one in many]
            if cassette is not None
            else []
        )
        talk.keep(
            Served(
                key=key,
                served=False,
                trace_lines=lines,
                http=True,
                asked=differs[:ASKED_CAP],
                in_flight=in_flight,
                head=one_line(request_head(asked)),
                reordered=_reorders(_request_text(asked), map(_request_text, kept)),
            )
        )
        talk.reply(child, {"miss": self._http_miss(case, rows), "key": key})

    def _http_miss(self, case: _Case, rows: Sequence[tuple[str, str]]) -> str:
        """The message of an SDK request's miss: where it parts from the closest recording."""
        relative = f"{self._serving.cassettes}/{case.id}.http.json"
        return LAB_HTTP_CASSETTE.miss_message(relative, rows, case=case.id)

    def is_write(self, tool: str) -> bool:
        """Whether the call of ``tool`` is a write tool's, which the child runs itself.

        The parent trusts the write tools the registry declared when the first child
        loaded it (before any case ran: no task, miss or answer can change them) except a
        name a fixture of the submission holds: that is a read-only tool, served from the
        fixtures or missed, so a claim never turns a read-only miss into a live call."""
        return tool in (self.writes or ()) and tool not in self._serving.recorded_tools

    def _withholds(self, case: _Case, kind: str, position: int) -> bool:
        """Whether this run's probe withholds the ``position``-th call of ``kind`` in ``case``."""
        probe = self._plan.withhold
        return (
            probe is not None
            and probe.kind == kind
            and position >= probe.position
            and probe.case in ("", case.id)
        )

    def _trace_lines(self, talk: _Talk, case: _Case) -> int:
        """The complete lines in the case's trace now, just before a call is answered.

        A record on one of these lines was written before the call was answered: made up
        rather than observed, so it cannot be that call's. Only the new bytes are read each
        time, up to the trace's cap: the cost stays linear in the trace.
        """
        left = _trace_cap(self._limits) - talk.trace_read
        if left > 0:
            new = read_regular(case.trace, left - 1, offset=talk.trace_read) or b""
            talk.trace_read += len(new)
            talk.trace_lines += new.count(b"\n")
        return talk.trace_lines

    def _refused(self, case: str, message: dict[str, Any]) -> None:
        event, where, target = (message.get(k) for k in ("event", "where", "target"))
        if not isinstance(event, str):
            raise ProtocolError("a refusal without an event")
        phrase = _REFUSED.get(event) or ("use ctypes" if event.startswith("ctypes.") else None)
        if phrase is None:  # not an event the harness refuses: the child made it up
            event, phrase = child_name(event) or "unknown", "do something the sandbox refuses"
        if event == "open" and target in _OPEN_TARGETS:
            phrase = _OPEN_TARGETS[target]
        shown = where if isinstance(where, str) and _WHERE.fullmatch(where) else None
        refusal = Refusal(case, event, f"{phrase} ({shown})" if shown else phrase)
        if refusal not in self.refusals and len(self.refusals) < _MAX_REFUSALS:
            self.refusals.append(refusal)

    def _lose(self, talk: _Talk, status: Literal["timeout", "crashed"], detail: str) -> None:
        """Charge a lost child to what it was doing: the import, the case, or the next case."""
        if not talk.ready:
            self.import_error = f"importing the agent: {detail}"
        elif talk.current is not None:
            self._conclude(talk, talk.current, status, detail=detail)
        elif talk.done == 0:  # lost between cases without finishing one: charge the next
            self._conclude(talk, talk.next_case(), status, detail=detail)

    def _conclude(
        self,
        talk: _Talk,
        case: _Case,
        status: Literal["returned", "raised", "timeout", "crashed"],
        claims: Mapping[str, Any] | None = None,
        *,
        detail: str = "",
    ) -> None:
        trace, trace_error = _read_trace(case.trace, self._limits)
        calls = tuple(talk.calls) if case is talk.current else ()
        self.outcomes[case.id] = CaseOutcome(
            case.id,
            status,
            calls=calls,
            trace=trace,
            trace_error=trace_error,
            detail=detail,
            **(claims or {}),
        )
        talk.done, talk.current, talk.calls = talk.done + 1, None, []
        talk.trace_read = talk.trace_lines = 0
        talk.asked, talk.positions, talk.missed_at = {}, {}, 0

    def _deadline(self) -> float:
        return time.monotonic() + self._limits.timeout_s


_COPY_GRACE_S = 2.0  # past a copy's limit: the run kills it and says so first


def _copy_ending(
    message: Mapping[str, Any], limits: Limits
) -> tuple[Literal["timeout", "crashed"], str] | None:
    """How a copy ended, as the run says (``copied``), in the words a run's own end has;
    None when the run could not make it."""
    code, signal_number, timed_out = (message.get(k) for k in ("code", "signal", "timed_out"))
    if message.get("refused") is True:
        return None
    if not all(
        value is None or (isinstance(value, int) and not isinstance(value, bool))
        for value in (code, signal_number)
    ) or not isinstance(timed_out, bool):
        raise ProtocolError("a malformed copy's end")
    if timed_out:
        return "timeout", f"did not finish within {limits.timeout_s:g} s"
    if signal_number is not None:
        return "crashed", exit_detail(-signal_number, False)
    return "crashed", exit_detail(code if code is not None else 0, False)


def _claims(
    message: Mapping[str, Any], keep: int
) -> tuple[Literal["returned", "raised"], dict[str, Any]]:
    """What the child says run() did, checked for shape and made consistent.

    A returned str is compared whole (by its SHA-256) but kept only up to ``keep`` bytes.
    """
    status, escaped = message.get("status"), message.get("miss_escaped")
    answer, kind, exception = (message.get(k) for k in ("answer", "returned_type", "exception"))
    strings = all(value is None or isinstance(value, str) for value in (answer, kind, exception))
    if not strings or not isinstance(escaped, bool):
        raise ProtocolError("a malformed result")
    if status == "returned" and isinstance(kind, str):
        kept: dict[str, Any] = {"returned_type": child_name(kind)}
        if answer is not None:
            whole = clean_text(answer).encode("utf-8")
            kept["answer_sha256"] = hashlib.sha256(whole).hexdigest()
            kept["answer"] = _cut(whole, keep)
        return "returned", kept
    if status == "raised" and isinstance(exception, str):
        chain = message.get("chain")
        causes = (
            tuple(child_name(name) or "?" for name in chain[:5]) if isinstance(chain, list) else ()
        )
        return "raised", {
            "exception": child_name(exception),
            "miss_escaped": escaped,
            "missing_module": module_name(message.get("module")),
            "message": child_text(message.get("message")),
            "causes": causes,
        }
    raise ProtocolError("a malformed result")


_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def module_name(value: object) -> str | None:
    """A module name the child says it could not import (dotted identifiers, ASCII, at most
    200 characters), or None for anything else."""
    if isinstance(value, str) and len(value) <= 200 and _MODULE.fullmatch(value):
        return value
    return None


def _declared_writes(value: object) -> frozenset[str]:
    """The write tools a child's ``ready`` declares: at most ``_MAX_WRITES`` tool names."""
    if value is None:  # a mode that loads no agent, or an older harness: none
        return frozenset()
    if (
        not isinstance(value, list)
        or len(value) > _MAX_WRITES
        or not all(
            isinstance(name, str)
            and 0 < len(name) <= _NAME_CAP
            and not any(c.isspace() for c in name)
            for name in value
        )
    ):
        raise ProtocolError(
            f"a declaration of write tools that is not a list of at most {_MAX_WRITES} tool names"
        )
    return frozenset(value)


def _canonical(value: object) -> str:
    """``value`` (JSON the child sent, or a fixture's result) as canonical JSON: what a
    ``Served`` keeps, so evidence compares the same for every run."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _shown_args(tool: str, args: Mapping[str, object]) -> str:
    return f"{tool} {json.dumps(args, sort_keys=True, ensure_ascii=False)[:300]}"


_MISS_VERSION = "gradekit.miss/1"  # in each kept miss message's key: how it was made

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")  # where an object lives: another in every run


def _reorders(asked: str, recorded: Iterable[str]) -> bool:
    """Whether ``asked`` is one of ``recorded`` in another order: the same characters, as
    many of each, in other places (the words of a set, joined in the order its hash seed
    gives). Another seed may then ask the recording: what ``grade`` tries before it says
    the seed is not the cause."""
    letters = sorted(asked)
    return any(
        other != asked and len(other) == len(asked) and sorted(other) == letters
        for other in recorded
    )


def _request_text(request: HttpRequest) -> str:
    """A request as one text, for ``_reorders``: its method, URL and body, keys sorted."""
    return json.dumps(request.to_json(), sort_keys=True, ensure_ascii=False)


def _without(cassette: HttpCassette, key: str) -> HttpCassette | None:
    """``cassette`` without the recordings of ``key`` (None when it held nothing else)."""
    rest = {other: found for other, found in cassette.interactions.items() if other != key}
    return replace(cassette, interactions=rest) if rest else None


def request_head(request: HttpRequest) -> str:
    """What an SDK's request asked, for feedback: its last message's text when it is a chat
    request (OpenAI's and Anthropic's both keep ``messages``), else its method and URL."""
    content = request.content
    messages = content.get("messages") if isinstance(content, dict) else None
    last = messages[-1] if isinstance(messages, list) and messages else None
    text = last.get("content") if isinstance(last, dict) else None
    if isinstance(text, list):  # content parts: [{"type": "text", "text": ...}, ...]
        text = " ".join(
            part["text"]
            for part in text
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return (
        text.strip()
        if isinstance(text, str) and text.strip()
        else f"{request.method} {request.url}"
    )


def _missing(case: _Case, tool: str, args: Mapping[str, object], folder: str) -> str:
    shown = json.dumps(args, sort_keys=True, ensure_ascii=False)[:300]
    return (
        f"no fixture for tool {tool} with arguments {shown} in {folder}/{case.id}.json. "
        "Record it with the real tool: "
        f"`{commands.RERECORD_CASE(case=case.id, reason=TOOLS_CHANGED)}`, then commit the "
        "fixture. Graded runs never call a real tool."
    )


def _cut(data: bytes, keep: int) -> str:
    """UTF-8 ``data`` as text, cut at a character boundary to ``keep`` bytes with a marker."""
    if len(data) <= keep:
        return data.decode("utf-8")
    head = data[:keep].decode("utf-8", "ignore")
    return f"{head}… [cut: {len(data) - keep} more bytes]"
