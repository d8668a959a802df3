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
its SHA-256 and kept only up to ``answer_kb``.

The wall, ``isolation="namespaces"`` (bubblewrap, see ``grader._isolation``): the
child runs in its own user, pid, network, ipc and uts namespaces as ``nobody``, with
no capabilities, no new user namespaces, ``--die-with-parent`` and a new session; a
seccomp filter refuses every new process (threads still work). It sees a read-only
view of the system's ``/usr``, the interpreter, the grader environment's packages
(not the environment itself), the harness and the original submission, which the
harness copies into a tmpfs of ``disk_mb`` before any student code runs; only that
tmpfs and its own trace files are writable. The grader's kit, its virtual
environment, the output folder, the rubric, other submissions and other processes
are not there at all. Everything the child started dies with its pid namespace.

``isolation="process"`` is the fallback where bubblewrap is missing (a Mac, a
container without user namespaces): the child works in a private copy under
``scratch`` with resource limits, asks Linux to die with the grader, and an audit hook
refuses sockets, new processes, signals, ctypes and writes outside its copy. Under
namespaces the same hook only explains refusals; behind it alone, a determined
student can still (each shown in ``tests/test_isolation.py``):

- Switch the hook off from inside: ``gc`` reaches its closure, and then anything the
  grading user may do is open: write anywhere it can (a classmate's copy, the
  grader's reports, a ``.pth`` file in the grader's environment), start processes
  that outlive the run, signal the grader, listen on a port, read other submissions,
  the rubric and ``/proc``.
- As root, do all of that as root.
- Forge results: the pipe fds are in ``sys.argv``; outcomes are the child's claims,
  checked for shape, order and case id (the next issue moves verdicts to what the
  parent observed).
- Behave differently when graded: timing, ``provider.name``, the absent network.
- Use up disk (many files under ``file_mb``) and threads.

Under namespaces, what remains: forged outcomes and detecting the grading (as above);
as root, threads are capped by memory only (``RLIMIT_NPROC`` does not count processes
that map to root outside), while new processes are refused by seccomp on x86_64 and
aarch64 (elsewhere only by the hook); files the child may read are the system's and
the packages' (public), never another submission's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import signal
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from grader._channel import HARNESS, PYTHON_FLAGS, Child, Event, ProtocolError, strict_loads
from grader._harness import copy_submission
from grader._isolation import (
    INSTALL_HINT,
    KIT,
    SANDBOX,
    Bind,
    Isolation,
    bubblewrap,
    bwrap_argv,
    interpreter,
    no_new_processes_filter,
)
from grader._model import Call, CaseOutcome, Limits, Refusal, ReplayProbe, RunResult, TraceRecord
from lab import GradekitError, UsageError, prompt_key
from lab._cassette import Cassette, Entry, encode
from lab._fixtures import tool_key

__all__ = ["probe_replay", "run_cases"]

# Not -I: it implies -E, and -E makes the child ignore PYTHONHASHSEED. The environment is
# built from nothing instead, so the only PYTHON* variables the child sees are ours.
# Never part of a submission: version control, environments, caches, build output.
IGNORED_NAMES = (
    ".git", ".venv*", "__pycache__", "*.pyc", "grades", "*.egg-info", "build",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", "node_modules",
)
_MAX_REFUSALS = 100
TRACE_LINE = 4096  # bytes of one trace record: a record is a few short fields
_MIB = 1 << 20
_MAX_SEED = 2**32 - 1

_OUT = "outside the submission"
_REFUSED: dict[str, str] = {
    event: phrase
    for phrase, events in (
        ("bind a network address", "socket.bind"),
        ("connect to a network address", "socket.connect"),
        ("send to a network address", "socket.sendmsg socket.sendto"),
        ("resolve a host name", "socket.getaddrinfo socket.gethostbyname socket.gethostbyname_ex"),
        ("look up a network address", "socket.gethostbyaddr socket.getnameinfo"),
        ("start a process", "os.exec os.posix_spawn os.spawn os.system pty.spawn subprocess.Popen "
         "_posixsubprocess.fork_exec"),
        ("fork the process", "os.fork os.forkpty"),
        ("load a C library", "ctypes.dlopen"),
        ("signal another process",
         "os.kill os.killpg os.pidfd_open signal.pidfd_send_signal"),
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


def run_cases(
    root: Path,
    agent: str,
    cases: Sequence[tuple[str, str]],
    *,
    answer: Callable[[str, str], str | None],
    label: str,
    hashseed: int,
    limits: Limits,
    scratch: Path,
    tools: ToolAnswer | None = None,
    isolation: Isolation = "process",
) -> RunResult:
    """Run ``agent`` (``"package.module:function"``) on each ``(case_id, task)`` in a sandbox.

    ``answer(case_id, prompt)`` is the recorded response, or None for a miss;
    ``tools(case_id, tool_key)`` is ``(True, result)`` for a recorded tool call
    or ``(False, None)`` for a missing fixture (no ``tools``: every tool call
    misses). Every call is recorded as the parent served it. A case that times out or
    crashes costs only itself: a fresh child runs the cases after it. ``isolation``
    is the wall: ``namespaces`` (bubblewrap) or ``process`` (the guard alone).
    """
    if not 0 <= hashseed <= _MAX_SEED:
        raise ValueError(f"hashseed must be between 0 and {_MAX_SEED}, got {hashseed}")
    ids = [case_id for case_id, _ in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"case ids must be unique, got {ids}")
    layout = _prepare(root, scratch, isolation)
    planned = [_Case(case_id, task, layout.work / f"trace-{n:03d}.jsonl")
               for n, (case_id, task) in enumerate(cases)]
    if isolation == "namespaces":
        for case in planned:
            case.trace.touch()  # bound into the sandbox: a bind needs its file
    run = _Run(answer, tools or _no_tools, limits, layout)
    config = _config(layout, limits, mode="run", agent=agent, label=label)
    env = _environment(layout, hashseed)
    with _outputs(layout) as outputs:
        while run.import_error is None and (pending := run.pending(planned)):
            cases_config = [{"id": c.id, "task": c.task, "trace": layout.inside(c.trace)}
                            for c in pending]
            with _start({**config, "cases": cases_config}, layout, env, outputs, limits,
                        [c.trace for c in planned]) as child:
                run.converse(child, pending)
    return run.result(planned, _captured(layout, limits))


ToolAnswer = Callable[[str, str], tuple[bool, object]]


def _no_tools(case: str, key: str) -> tuple[bool, object]:
    """No fixtures: every tool call misses."""
    return False, None


def probe_replay(
    root: Path, replay: str, recorded: Mapping[str, str], *, limits: Limits, scratch: Path,
    isolation: Isolation = "process",
) -> ReplayProbe:
    """Probe the submission's own replay class (``"package.module:Class"``) in a sandbox.

    The parent writes ``recorded`` (prompt -> response) as a cassette, the
    child constructs ``cls(path)`` and asks one recorded prompt wrapped in
    extra whitespace and one prompt never recorded; the parent judges.
    """
    layout = _prepare(root, scratch, isolation)
    entries = {prompt_key(p): Entry(p.strip(), r) for p, r in sorted(recorded.items())}
    cassette = layout.work / "probe-cassette.json"
    cassette.write_bytes(encode(Cassette(case="probe", entries=entries)))
    first = min(recorded, default=None)
    expected = None if first is None else entries[prompt_key(first)].response
    probe = {
        "cassette": layout.inside(cassette),
        "hit": None if first is None else f"  \n\t{first.strip()}\n  ",
        "miss": _unknown_prompt(entries),
    }
    config = _config(layout, limits, mode="probe_replay", replay=replay, probe=probe)
    env = _environment(layout, 0)
    with _outputs(layout) as outputs, _start(config, layout, env, outputs, limits,
                                             [cassette]) as child:
        return _Probe(layout, limits, expected).converse(child)


@dataclass(frozen=True, slots=True)
class _Layout:
    """The folders of one sandboxed run, all in a fresh folder under the caller's scratch.

    Under ``process`` the child works in ``copy`` and ``work`` on this machine. Under
    ``namespaces`` it sees none of them: the original submission is shown read-only at
    ``/gradekit/original`` and the harness copies it into its own ``/sandbox`` tmpfs;
    of ``work`` it sees only the files bound one by one (traces, the probe's cassette).
    """

    root: Path  # the submission as the instructor handed it in
    run: Path
    copy: Path  # the submission's private copy: the child's cwd and HOME
    work: Path  # traces and TMPDIR: the only other place the child may write
    output: Path  # stdout and stderr, which the child reaches only through inherited fds
    isolation: Isolation

    @property
    def child_copy(self) -> str:
        """Where the child finds its copy of the submission."""
        return f"{SANDBOX}/submission" if self.isolation == "namespaces" else str(self.copy)

    @property
    def child_work(self) -> str:
        """The folder the child writes besides its copy."""
        return SANDBOX if self.isolation == "namespaces" else str(self.work)

    def inside(self, path: Path) -> str:
        """The name the child knows a file of ``work`` by."""
        if self.isolation == "process":
            return str(path)
        if path.suffix == ".jsonl":
            return f"{SANDBOX}/{path.name}"
        return f"{KIT}/{path.name}"

    def scrub(self, text: str) -> str:
        """``text`` with this machine's paths replaced by stable names."""
        names = [(self.child_copy, "<submission>"), (self.child_work, "<scratch>"),
                 (str(self.copy), "<submission>"), (str(self.run), "<scratch>"),
                 (f"{KIT}/original", "<submission>")]
        spelled = {spelling: name for path, name in names
                   for spelling in (path, os.path.realpath(path))}
        for spelling in sorted(spelled, key=len, reverse=True):
            text = text.replace(spelling, spelled[spelling])
        return text


@dataclass(frozen=True, slots=True)
class _Case:
    id: str
    task: str
    trace: Path


def _prepare(root: Path, scratch: Path, isolation: Isolation) -> _Layout:
    scratch.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=scratch)).resolve()
    layout = _Layout(root.resolve(), run, run / "submission", run / "work", run / "output",
                     isolation)
    if isolation == "process":
        # symlinks=True: a link in the submission stays a link, so writes through it are
        # judged by where it points, and copying never follows it out of the submission.
        copy_submission(str(root), str(layout.copy), IGNORED_NAMES)
        (layout.work / "tmp").mkdir(parents=True)
    else:
        layout.work.mkdir()
    layout.output.mkdir()
    return layout


def _environment(layout: _Layout, hashseed: int) -> dict[str, str]:
    """The child's whole environment: nothing inherited, so no credentials and no proxies."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": layout.child_copy,
        "TMPDIR": f"{layout.child_work}/tmp",
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": str(hashseed),
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _start(config: Mapping[str, object], layout: _Layout, env: Mapping[str, str],
           outputs: tuple[IO[bytes], IO[bytes]], limits: Limits,
           shown: Sequence[Path]) -> Child:
    """Start one harness behind the layout's wall; ``shown``: the files of ``work`` it sees."""
    if layout.isolation == "process":
        return Child(config, layout.copy, env, outputs)
    bwrap_path, why = bubblewrap()
    if bwrap_path is None:
        raise UsageError(f"namespaces isolation was chosen, but {why}: {INSTALL_HINT}")
    python, binds, _ = interpreter()
    binds += (Bind(str(layout.root), f"{KIT}/original"), Bind(str(HARNESS), f"{KIT}/harness.py"))
    binds += tuple(Bind(str(p), layout.inside(p), writable=p.suffix == ".jsonl") for p in shown)
    program = no_new_processes_filter(platform.machine())
    read_end = None
    if program is not None:
        read_end, write_end = os.pipe()
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(program)  # a few hundred bytes: far below a pipe's buffer
    try:
        argv = bwrap_argv(bwrap_path, binds, disk_mb=limits.disk_mb, seccomp_fd=read_end)
        command = [*argv, python, *PYTHON_FLAGS, f"{KIT}/harness.py"]
        fds = () if read_end is None else (read_end,)
        return Child(config, layout.run, env, outputs, command=command, pass_fds=fds)
    finally:
        if read_end is not None:
            os.close(read_end)


def _config(layout: _Layout, limits: Limits, **fields: object) -> dict[str, object]:
    kept = ["memory_mb", "cpu_s", "file_mb", "open_files"]
    config: dict[str, object] = {
        "root": layout.child_copy,
        "roots": [layout.child_copy, layout.child_work],
        **fields,
    }
    if layout.isolation == "namespaces":
        # Processes are capped only here: outside a user namespace RLIMIT_NPROC counts every
        # process of the grading user, not just this run's.
        kept.append("processes")
        config["copy"] = {"from": f"{KIT}/original", "to": layout.child_copy,
                          "ignore": list(IGNORED_NAMES)}
        config["site"] = list(interpreter()[2])
    else:
        config["parent"] = os.getpid()  # the harness asks to die with this process
    config["limits"] = {name: getattr(limits, name) for name in kept}
    return config


@contextlib.contextmanager
def _outputs(layout: _Layout) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """The child's stdout and stderr files, shared by every child of one run."""
    with open(layout.output / "stdout", "wb") as out, open(layout.output / "stderr", "wb") as err:
        yield out, err


def _captured(layout: _Layout, limits: Limits) -> tuple[str, str]:
    """What the children printed, capped and scrubbed; for feedback, never parsed."""
    cap = limits.output_kb * 1024

    def text(name: str) -> str:
        data = _read_regular(layout.output / name, cap) or b""
        return layout.scrub(data[:cap].decode("utf-8", "replace"))

    return text("stdout"), text("stderr")


def _read_regular(path: Path, cap: int) -> bytes | None:
    """Up to ``cap + 1`` bytes of a regular file; None if it is missing or anything else.

    The child may plant a symlink or a FIFO where the parent reads: neither may
    steer the parent elsewhere or stall it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read(cap + 1)


def _read_trace(path: Path, limits: Limits) -> tuple[tuple[TraceRecord, ...], str | None]:
    """The case's trace records, and where the file stopped being valid JSONL.

    At most ``limits.trace_records`` lines of at most ``TRACE_LINE`` bytes are read:
    the parent's memory and time stay bounded whatever the child wrote.
    """
    cap = min(limits.file_mb * _MIB, limits.trace_records * (TRACE_LINE + 1))
    data = _read_regular(path, cap)
    if data is None:
        return (), None if not os.path.lexists(path) else "not a regular file"
    lines = data[:cap].split(b"\n", limits.trace_records)
    if lines[-1] == b"":
        lines.pop()
    records: list[TraceRecord] = []
    for number, raw in enumerate(lines, start=1):
        if number > limits.trace_records:
            return tuple(records), (f"more than {limits.trace_records} records; the rest "
                                    "was not read (trace_records in the rubric's [limits])")
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
        fields = (record.get(name) for name in ("key", "provider", "latency_ms", "ok", "tool"))
        records.append(TraceRecord(*fields))
    return tuple(records), None


@dataclass
class _Talk:
    """How far one child got through its pending cases."""

    pending: Sequence[_Case]
    ready: bool = False
    done: int = 0
    current: _Case | None = None
    calls: list[Call] = field(default_factory=list)

    def next_case(self) -> _Case:
        return self.pending[self.done]


class _Run:
    """The parent's record of one ``run_cases``: built only from what it observed or checked."""

    def __init__(self, answer: Callable[[str, str], str | None], tools: ToolAnswer,
                 limits: Limits, layout: _Layout):
        self.outcomes: dict[str, CaseOutcome] = {}
        self.refusals: list[Refusal] = []
        self.import_error: str | None = None
        self._answer, self._tools, self._limits, self._layout = answer, tools, limits, layout

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
        return RunResult(outcomes, tuple(self.refusals), self.import_error, *output)

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
                    return self._lose(talk, *_ending(child, event, deadline, self._limits))
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
            if not talk.ready:
                error = self._layout.scrub(_text(message.get("error")))
                self.import_error = error or "the agent could not be imported"
        elif talk.ready and current is None and op == "start" and case == talk.next_case().id:
            talk.current = talk.next_case()
        elif op in ("complete", "tool") and child.replying:
            # A well-behaved harness reads each reply before it asks again; one that does
            # not would make the grader hold every answer it sends in memory.
            raise ProtocolError("a request before the last reply was read")
        elif current is not None and op == "complete" and case == current.id:
            self._serve(child, talk, current, message.get("prompt"))
            return False
        elif current is not None and op == "tool" and case == current.id:
            self._serve_tool(child, talk, current, message.get("tool"), message.get("args"))
            return False
        elif current is not None and op == "result" and case == current.id:
            self._record(talk, current, *_claims(message, self._limits.answer_kb * 1024))
        else:
            raise ProtocolError("an unexpected message")
        return True

    def _serve(self, child: Child, talk: _Talk, case: _Case, prompt: object) -> None:
        if not isinstance(prompt, str):
            raise ProtocolError("a request without a prompt")
        try:
            key = prompt_key(prompt)
        except UnicodeEncodeError as exc:
            raise ProtocolError("a prompt that is not UTF-8") from exc
        response = self._answer(case.id, prompt)
        talk.calls.append(Call(key=key, served=response is not None))
        child.send({"response": response} if response is not None else {"miss": _miss(case, key)})

    def _serve_tool(self, child: Child, talk: _Talk, case: _Case, tool: object,
                    args: object) -> None:
        if not isinstance(tool, str) or not isinstance(args, dict):
            raise ProtocolError("a tool call without a tool name and arguments")
        try:
            key = tool_key(tool, args)
        except GradekitError as exc:
            raise ProtocolError("tool arguments that are not JSON") from exc
        found, result = self._tools(case.id, key)
        talk.calls.append(Call(key=key, served=found, tool=tool))
        child.send({"response": result} if found else {"missing": _missing(case, tool, args)})

    def _refused(self, case: str, message: dict[str, Any]) -> None:
        event, subject, target = (message.get(k) for k in ("event", "subject", "target"))
        if not isinstance(event, str):
            raise ProtocolError("a refusal without an event")
        phrase = _REFUSED.get(event) or ("use ctypes" if event.startswith("ctypes.") else None)
        if phrase is None:  # not an event the harness refuses: the child made it up
            event, phrase = _name(event) or "unknown", "do something the sandbox refuses"
        if event == "open" and target in _OPEN_TARGETS:
            phrase = _OPEN_TARGETS[target]
        shown = _name(os.path.basename(subject)) if isinstance(subject, str) else None
        refusal = Refusal(case, event, f"{phrase}: {shown}" if shown else phrase)
        if refusal not in self.refusals and len(self.refusals) < _MAX_REFUSALS:
            self.refusals.append(refusal)

    def _lose(self, talk: _Talk, status: Literal["timeout", "crashed"], detail: str) -> None:
        """Charge a lost child to what it was doing: the import, the case, or the next case."""
        if not talk.ready:
            self.import_error = f"importing the agent: {detail}"
        elif talk.current is not None:
            self._record(talk, talk.current, status, detail=detail)
        elif talk.done == 0:  # lost between cases without finishing one: charge the next
            self._record(talk, talk.next_case(), status, detail=detail)

    def _record(
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

    def _deadline(self) -> float:
        return time.monotonic() + self._limits.timeout_s


def _claims(message: Mapping[str, Any],
            keep: int) -> tuple[Literal["returned", "raised"], dict[str, Any]]:
    """What the child says run() did, checked for shape and made consistent.

    A returned str is compared whole (by its SHA-256) but kept only up to ``keep`` bytes.
    """
    status, escaped = message.get("status"), message.get("miss_escaped")
    answer, kind, exception = (message.get(k) for k in ("answer", "returned_type", "exception"))
    strings = all(value is None or isinstance(value, str) for value in (answer, kind, exception))
    if not strings or not isinstance(escaped, bool):
        raise ProtocolError("a malformed result")
    if status == "returned" and isinstance(kind, str):
        kept: dict[str, Any] = {"returned_type": _name(kind)}
        if answer is not None:
            whole = _clean(answer).encode("utf-8")
            kept["answer_sha256"] = hashlib.sha256(whole).hexdigest()
            kept["answer"] = _cut(whole, keep)
        return "returned", kept
    if status == "raised" and isinstance(exception, str):
        return "raised", {"exception": _name(exception), "miss_escaped": escaped}
    raise ProtocolError("a malformed result")


class _Probe:
    """The parent's side of ``probe_replay``."""

    def __init__(self, layout: _Layout, limits: Limits, expected: str | None) -> None:
        self._layout, self._limits, self._expected = layout, limits, expected
        self._loaded = False

    def converse(self, child: Child) -> ReplayProbe:
        """Wait for the probe's verdict, however the child ends."""
        deadline = time.monotonic() + self._limits.timeout_s
        while True:
            try:
                event = child.receive(deadline)
            except ProtocolError as exc:
                return self._failed(f"broke the grader's protocol: {exc}")
            if isinstance(event, Event):
                return self._failed(_ending(child, event, deadline, self._limits)[1])
            op = event["op"]
            if op == "refused":
                continue
            if op == "ready" and not self._loaded:
                self._loaded, deadline = True, time.monotonic() + self._limits.timeout_s
            elif op == "import_error" and not self._loaded:
                detail = self._layout.scrub(_text(event.get("error")))
                return ReplayProbe(False, False, False, detail=detail or "could not be loaded")
            elif op == "probe" and self._loaded:
                return self._judge(event.get("hit"), event.get("miss"))
            else:
                return self._failed("broke the grader's protocol: an unexpected message")

    def _failed(self, why: str) -> ReplayProbe:
        return ReplayProbe(self._loaded, False, False, detail=f"the probe {why}")

    def _judge(self, hit: object, miss: object) -> ReplayProbe:
        if not isinstance(miss, dict) or not (hit is None or isinstance(hit, dict)):
            return self._failed("broke the grader's protocol: a malformed verdict")
        exception = _name(miss.get("exception"))
        notes = []
        if self._expected is None:
            notes.append("nothing was recorded, so the whitespace probe was skipped")
        whitespace_hit = hit is not None and hit.get("answer") == self._expected
        if self._expected is not None and not whitespace_hit:
            raised = _name(hit.get("exception")) if hit is not None else None
            got = f"raised {raised}" if raised else "got a different answer"
            notes.append(f"a recorded prompt with extra outer whitespace {got}")
        if exception is None:
            returned = _name(miss.get("returned_type")) or "a value"
            notes.append(f"an unknown prompt returned {returned} instead of raising")
        return ReplayProbe(True, whitespace_hit, exception is not None, exception, "; ".join(notes))


def _unknown_prompt(entries: Mapping[str, Entry]) -> str:
    prompt = "gradekit sandbox probe: a prompt that was never recorded"
    while prompt_key(prompt) in entries:
        prompt += "!"
    return prompt


def _miss(case: _Case, key: str) -> str:
    return (
        f"no recording for this prompt in case {case.id} (key {key}). Record it once with a "
        f"live provider: `gradekit record --case {case.id}`, then commit the cassette. "
        "Graded runs never call a live provider."
    )


def _missing(case: _Case, tool: str, args: Mapping[str, object]) -> str:
    shown = json.dumps(args, sort_keys=True, ensure_ascii=False)[:300]
    return (
        f"no fixture for tool {tool} with arguments {shown} in fixtures/{case.id}.json. "
        f"Record it with the real tool: `gradekit record --case {case.id} --rerecord`, then "
        "commit the fixture. Graded runs never call a real tool."
    )


def _ending(
    child: Child, event: Event, deadline: float, limits: Limits
) -> tuple[Literal["timeout", "crashed"], str]:
    """End a child that stopped talking; say why, deterministically."""
    if event is Event.TIMED_OUT:
        child.finish(time.monotonic())
        return "timeout", f"did not finish within {limits.timeout_s:g} s"
    return "crashed", _exit_detail(*child.finish(deadline))


def _exit_detail(code: int, killed: bool) -> str:
    """Why a child ended, without PIDs or times.

    bubblewrap passes a signal death on as status 128 + the signal's number.
    """
    if killed:
        return "closed its channel to the grader and had to be killed"
    if code > 128 and code - 128 in signal.valid_signals():
        code = 128 - code
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _cut(data: bytes, keep: int) -> str:
    """UTF-8 ``data`` as text, cut at a character boundary to ``keep`` bytes with a marker."""
    if len(data) <= keep:
        return data.decode("utf-8")
    head = data[:keep].decode("utf-8", "ignore")
    return f"{head}… [cut: {len(data) - keep} more bytes]"


def _clean(text: str) -> str:
    """``text`` as valid UTF-8: lone surrogates become '?'."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _text(value: object, limit: int = 300) -> str:
    """The first line of a child's string, bounded; '' for anything else."""
    lines = _clean(value).strip().splitlines() if isinstance(value, str) else []
    return lines[0][:limit] if lines else ""


def _name(value: object) -> str | None:
    """A short printable name from the child, or None."""
    if not isinstance(value, str) or not value:
        return None
    return "".join(c if c.isprintable() else "?" for c in _clean(value)[:100])
