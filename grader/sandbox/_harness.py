"""The child side of gradekit's sandbox: it runs untrusted agent code and talks to the grader.

Standard library only, and run by file path (``python -S -P -B _harness.pyc READ_FD
WRITE_FD``: its bytecode, compiled once per grader process by ``grader.sandbox._walls``
so that no child compiles it again; behind namespaces ``_harness.pyc host FD`` instead, a
host whose forks each become such a child: ``serve_host``, below): it never imports
``lab`` or ``grader``, because the submission ships its own ``lab`` (and often a copy of
``gradekit``), and nothing the grader relies on may depend on code the submission can
shadow or patch. The agent gets the grader's own ``gradekit`` (``Library``), read-only
(a host imports it once, for every run it forks). Everything this process
says is a claim; ``grader.sandbox._sandbox`` (the parent) decides what it is worth.

Protocol: JSON lines, UTF-8, ASCII-escaped, over two inherited pipes (the child reads
READ_FD, writes WRITE_FD). The first line the parent writes is the configuration:

    "mode": "run" | "probe_replay" | "cut_point"
    "root": the submission's copy (first on the import path), "roots": the folders it may
    write, "seal": the secret each verdict is sealed with, "limits": the resource limits
    (memory_mb, cpu_s, file_mb, open_files; processes behind namespaces only),
    "site": the package folders, "library": the grader's own gradekit,
    "parent": the grader's pid to die with (process wall only), "copy": {"from", "to",
    "ignore"}: the read-only original to copy into the tmpfs first (namespaces only)
    "clock": the seconds since the epoch that the run's wall clock starts at (set_clock)
    "sleep_s": the case's time limit, within which a sleep costs no wall time (skip_sleeps)
    run:           "agent": "module:function", "label", "fixtures": the fixtures folder's
                   name, "tools": the manifest's tools registry "module:attr" ("" none),
                   "cases": [{"id", "task", "trace": the case's trace file}],
                   "copies": [ID, ...]: the cases at whose start the run may copy itself
    probe_replay:  "replay": "module:Class", "probe": {"cassette", "as": where in the copy
                   to put it first, "hit": P | null, "miss": P}
    cut_point:     "test", "guard": "module:function" each, "allow_all": BOOL

The child then says, one request at a time (it reads each reply before it asks again):

    {"op": "refused", "event": E, "where": "PATH:LINE" | "", "target": "" | "folder" | "device"}
                                                     the audit hook refused E (any time); PATH:
                                                     the submission's file that made the call
    {"op": "import_error", "error": "Class: first line", "module": NAME | null}   and exits;
                                                     NAME: the module a ModuleNotFoundError
                                                     (in the error's chain) could not find;
                                                     run mode only (the other modes send no
                                                     "module", nor does a copy that failed:
                                                     "the submission is ...")
    {"op": "ready"}                                  the agent (or replay, or test) is loaded;
                                                     run mode adds "writes": [NAME, ...], the
                                                     registry's write tools (an agent that
                                                     takes tools), declared once, before any
                                                     case
    {"op": "copy", "case": ID, "able": BOOL}         before a case of "copies": copy the run?
                                                     (able: it can, with one thread); the
                                                     parent answers {"copy": BOOL}; a copy
                                                     then runs the case alone (start, calls,
                                                     result) and ends, and the run says
    {"op": "copied", "case": ID, "code": N | null, "signal": N | null, "timed_out": BOOL}
                                                     how it ended ("refused": true when no
                                                     copy could be made), then asks again
    {"op": "start", "case": ID}                      before each case: the parent times it
    Each of the three calls below also carries "since": N, the replies the child had read
    when the agent made the call (a call made by another thread while the parent was
    answering, already on its way, is told apart from one made after that answer).
    {"op": "complete", "case": ID, "prompt": P}      the parent answers
                                                     {"response": R} or {"miss": MESSAGE,
                                                     "cassette": PATH}
    {"op": "tool", "case": ID, "tool": NAME, "args": {...}}
                                                     a tool call (agents that take tools);
                                                     the parent answers {"response": RESULT}
                                                     or {"missing": MESSAGE}, or {"write":
                                                     true}: a declared write tool, which the
                                                     child runs on the case run's own store
    {"op": "http", "case": ID, "method": M, "url": U, "body": BASE64}
                                                     an SDK client's request; the parent answers
                                                     {"http": {"status": S, "headers": [[N, V]],
                                                     "body": BASE64}} or {"miss": MESSAGE,
                                                     "key": KEY}
    {"op": "result", "case": ID, "status": "returned" | "raised", "returned_type": T,
     "answer": A | null, "exception": NAME | null, "miss_escaped": BOOL,
     "module": NAME | null, "seal": SEAL}            NAME: as for import_error, when run()
                                                     raised and a ModuleNotFoundError is in
                                                     the chain of what it raised (a lazy import);
                                                     when it raised, also "message": "Class:
                                                     first line" and "chain": what it was
                                                     raised from, ["module.Class" | "miss"]
    {"op": "probe", "hit": OUTCOME | null, "miss": OUTCOME, "seal": SEAL}
                                                     probe_replay mode only; OUTCOME:
                                                     {"returned_type": T, "answer": A | null}
                                                     or {"exception": NAME}, the miss's with
                                                     "classes": its class's MRO names
    {"op": "cut_point", "passed": BOOL, "error": "Class: first line" | null, "seal": SEAL}
                                                     cut_point mode only: the incident test
    {"op": "tampered", "replaced": [NAME, ...], "seal": SEAL}
                                                     just before a verdict, when functions,
                                                     methods or classes of this module (at
                                                     most 20 named) are not those it started
                                                     with

The seal: ``result``, ``probe``, ``cut_point`` and ``tampered`` are the verdicts, and each
carries the configuration's ``seal``, which the harness takes out of the configuration
before any student code runs and keeps only in ``sealer``'s closure. A verdict without it
was written on the pipe by something else; the parent flags it. The child ends with
status 0 once it is done, and with 70 when the parent closes its pipe or died first.

Before any student code is imported it sets hard resource limits on itself and
installs an audit hook that refuses the network, new processes, ctypes,
signals to other processes, raising its limits, and writes outside the
allowed roots. Audit hooks are a tripwire, not a wall: see ``grader.sandbox._sandbox``
for what gets past them.
"""

from __future__ import annotations

import _thread
import base64
import contextlib
import errno
import fnmatch
import gc
import hashlib
import importlib
import inspect
import json
import os
import pathlib
import posix
import re
import resource
import site
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import FrameType
from typing import Any, cast

NETWORK = frozenset(
    {
        "socket.bind",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyaddr",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.getnameinfo",
        "socket.sendmsg",
        "socket.sendto",
    }
)
RESOLVE = frozenset({"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"})
PROCESS = frozenset(
    {
        "os.exec",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "pty.spawn",
        "subprocess.Popen",
        "_posixsubprocess.fork_exec",  # raised by audited_bypasses(): CPython does not
    }
)
SIGNAL = frozenset({"os.kill", "os.killpg", "os.pidfd_open", "signal.pidfd_send_signal"})
SOCKET = "socket.__new__"  # any family but AF_UNIX (asyncio's self-pipe uses that one)
LIMITS = frozenset({"resource.prlimit", "resource.setrlimit"})
# Event -> (index of a path argument, index of its dir_fd argument or -1), for every path it writes.
WRITES: dict[str, tuple[tuple[int, int], ...]] = {
    "open": ((0, -1),),
    "os.chflags": ((0, -1),),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.lchflags": ((0, -1),),
    "os.link": ((0, 2), (1, 3)),  # the source too: a hard link makes an outside file inside
    "os.mkdir": ((0, 2),),
    "os.mkfifo": ((0, 1),),  # raised by audited_special_files(): CPython audits neither
    "os.mknod": ((0, 1),),
    "os.remove": ((0, 1),),
    "os.removexattr": ((0, -1),),
    "os.rename": ((0, 2), (1, 3)),
    "os.replace": ((0, 2), (1, 3)),
    "os.rmdir": ((0, 1),),
    "os.setxattr": ((0, -1),),
    "os.symlink": ((1, 2),),
    "os.truncate": ((0, -1),),
    "os.utime": ((0, 3),),
    "shutil.chown": ((0, -1),),
    "shutil.copyfile": ((1, -1),),
    "shutil.copymode": ((1, -1),),
    "shutil.copystat": ((1, -1),),
    "shutil.copytree": ((1, -1),),
    "shutil.make_archive": ((0, -1),),
    "shutil.move": ((0, -1), (1, -1)),
    "shutil.rmtree": ((0, 1),),
    "shutil.unpack_archive": ((1, -1),),
}
LIBRARY = "ctypes."  # every ctypes event: ctypes can call libc and step around the hook
REFUSABLE = NETWORK | PROCESS | SIGNAL | LIMITS | frozenset(WRITES) | {"ctypes.dlopen", SOCKET}

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
ALWAYS_WRITABLE = frozenset({os.devnull})
EXACT_PATHS = (str, bytes, pathlib.PurePosixPath, pathlib.PosixPath)
SUBJECT_LIMIT = 80
TEXT_LIMIT = 300


class CassetteMiss(Exception):
    """Raised for a miss when the submission has no usable ``lab.CassetteMiss`` of its own."""


class MissingFixtureError(Exception):
    """Raised for a tool call never recorded, when the submission defines none of its own."""


GRACE = 0.05  # seconds a miss waits for the calls other threads were already making


class Channel:
    """The two pipes to the parent: one JSON object per line, each way."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd, self._write_fd = read_fd, write_fd
        self._pending = bytearray()
        self._send_lock = _thread.allocate_lock()  # the audit hook reports from any thread
        self.talk_lock = _thread.allocate_lock()  # one request and its reply at a time
        self.replies = 0  # replies read so far: a request says how many it was made after

    def send(self, message: dict[str, Any]) -> None:
        """Write one line; ``os.write`` is not an audited event, so the hook may call this."""
        data = (json.dumps(message, ensure_ascii=True) + "\n").encode("ascii")
        with self._send_lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._write_fd, view) :]

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read its reply. The request carries ``since``, the replies
        read when it was made (before it waited its turn): a call another thread made
        while the parent was answering this one is told apart from a call made after.

        A miss, while the agent has other threads, counts as read only after ``GRACE``:
        a thread pool's other calls, submitted with this one but not yet at the provider
        (a thread still starting), are on their way, not steps taken after the miss."""
        since = self.replies
        with self.talk_lock:
            self.send({**message, "since": since})
            reply = self.receive()
        if ("miss" in reply or "missing" in reply) and _thread._count():
            held = _thread.allocate_lock()
            held.acquire()
            held.acquire(True, GRACE)  # held already: a sleep that imports nothing
        with self.talk_lock:
            self.replies += 1
        return reply

    def receive(self) -> dict[str, Any]:
        """Read one line; the parent going away ends this process."""
        while b"\n" not in self._pending:
            chunk = os.read(self._read_fd, 1 << 16)
            if not chunk:
                os._exit(70)
            self._pending += chunk
        line, _, rest = bytes(self._pending).partition(b"\n")
        self._pending = bytearray(rest)
        message: dict[str, Any] = json.loads(line)
        return message


HIDDEN = ("PYTHONHASHSEED", "LD_LIBRARY_PATH")  # read at start, hidden from the agent


def forget_environment(names: Iterable[str]) -> None:
    """Blank ``names`` in the environment this process started with, which the kernel keeps
    in its memory and shows in ``/proc/self/environ`` whatever ``os.environ`` says: each
    ``NAME=value`` becomes as many zero bytes, written through ``/proc/self/mem``. Where
    the kernel says nothing of it (no ``/proc``), there is nothing to read either."""
    wanted = tuple(f"{name}=".encode() for name in names)
    try:
        with open("/proc/self/stat", "rb") as status:
            start = int(status.read().rpartition(b")")[2].split()[47])  # env_start
        with open("/proc/self/environ", "rb") as environ:
            block = environ.read()
        memory = os.open("/proc/self/mem", os.O_RDWR | os.O_CLOEXEC)
    except (OSError, ValueError, IndexError):
        return
    try:
        offset = 0
        for entry in block.split(b"\0"):
            if entry.startswith(wanted):
                os.pwrite(memory, bytes(len(entry)), start + offset)
            offset += len(entry) + 1
    except OSError:
        pass
    finally:
        os.close(memory)


def copy_submission(
    source: str, target: str, ignored: Iterable[str], *, shared: bool = False
) -> None:
    """Copy a submission's folders, regular files and links; skip names matching ``ignored``.

    Links stay links (never followed out of the submission); FIFOs, sockets and devices
    are left out, so copying can neither hang nor read a device. Each folder's entries
    are made in name order (a folder lists them as made). Plain system calls, one
    ``sendfile`` a file: every sandboxed child copies its submission, so each call counts.
    ``shared``: every folder and file is made readable by every user (0755, 0644) as it
    is made, whatever the umask.
    """
    patterns = tuple(ignored)
    skipped = (
        re.compile("|".join(fnmatch.translate(p) for p in patterns)).match
        if patterns
        else (lambda name: None)
    )

    def copy_folder(here: str, there: str) -> None:
        os.makedirs(there, exist_ok=True)
        if shared:
            os.chmod(there, 0o755)
        with os.scandir(here) as found:
            entries = sorted(found, key=lambda entry: entry.name)
        for entry in entries:
            if skipped(entry.name):
                continue
            copy = os.path.join(there, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), copy)
            elif entry.is_dir(follow_symlinks=False):
                copy_folder(entry.path, copy)
            elif entry.is_file(follow_symlinks=False):
                copy_file(entry.path, copy, 0o644 if shared else None)

    copy_folder(source, target)


def copy_file(origin: str, copy: str, mode: int | None = None) -> None:
    """Copy one regular file's bytes, as long as it was when opened (a file swapped for a
    FIFO meanwhile is not opened); ``mode``: the copy's, whatever the umask."""
    read = os.open(origin, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        found = os.fstat(read)
        if not stat.S_ISREG(found.st_mode):
            return
        write = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            left = found.st_size
            while left > 0:
                sent = os.sendfile(write, read, None, left)
                if not sent:  # shorter than it was
                    break
                left -= sent
            if mode is not None:
                os.fchmod(write, mode)
        finally:
            os.close(write)
    finally:
        os.close(read)


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when the grader that started it dies.

    Under namespaces bubblewrap does this; under the process wall this is the only
    thread tying the child to the grader. Elsewhere (not Linux) it does nothing.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the grader died before the request took effect
        os._exit(70)


def process_copier() -> Callable[[], int] | None:
    """Under the process wall, the run's copy of itself at a case's start (``copy_case``):
    libc's fork, so that no at-fork callback of the agent's runs (Python's ``os.fork`` would
    run them, inside the hook's ``unheard``); the copy dies with the run (its parent death
    signal), whatever session or group it moves to. None where there is no such call."""
    try:
        import ctypes

        libc = ctypes.PyDLL(None, use_errno=True)  # holds the GIL across the fork
        fork, prctl = libc.fork, libc.prctl
    except (OSError, AttributeError):
        return None
    run = os.getpid()

    def copy() -> int:
        child = int(fork())
        if child == 0:
            prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL when the run ends
            if os.getppid() != run:  # it ended before the request took effect
                os._exit(70)
        return child

    return copy


def set_limits(limits: dict[str, int]) -> None:
    """Soft = hard, so the student's code cannot raise them back (and the hook refuses trying)."""
    mib = 1 << 20
    wanted = {
        resource.RLIMIT_AS: limits["memory_mb"] * mib,
        resource.RLIMIT_CPU: limits["cpu_s"],
        resource.RLIMIT_FSIZE: limits["file_mb"] * mib,
        resource.RLIMIT_NOFILE: limits["open_files"],
        resource.RLIMIT_CORE: 0,
    }
    if "processes" in limits:
        wanted[resource.RLIMIT_NPROC] = limits["processes"]
    for which, value in wanted.items():
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)  # an unprivileged process cannot raise its hard limit
        resource.setrlimit(which, (value, value))


def settle_platform() -> None:
    """Answer ``platform.uname().processor`` before the guard: Python finds it by running
    ``uname -p`` on first use, and the official SDKs ask for it (``platform.platform()``,
    for their headers), so every SDK-based agent would start a process the guard refuses.
    Blank is what ``uname -p`` says on most Linux ("unknown"); no process is started."""
    import platform

    vars(platform.uname())["processor"] = ""


# -- sleeps that cost no wall time (skip_sleeps) -------------------------------------------


def skip_sleeps(budget_s: object) -> Callable[[], None]:
    """Make ``time.sleep`` cost no wall time while the run stays within ``budget_s`` seconds
    (the case's time limit), and return the function that starts a case's budget afresh.

    A sleep that fits is skipped: the run's clocks (``monotonic``, ``perf_counter``, their
    ``_ns`` forms, ``clock_gettime`` of the monotonic clocks, and through them the wall
    clock ``set_clock`` starts) jump ahead by it, and the thread only yields. An SDK's
    retry back-off after a withheld answer, a polite rate limiter and a deliberate pause
    then read the time they asked for, and the grader waits for none of it. A sleep that
    would take the case past its limit (what has passed, skipped sleeps included) sleeps
    for real, so a run that sleeps forever still times out as it did. Determinism is
    unchanged: no clock a verdict rests on reads real time. ``asyncio.sleep`` is skipped
    the same way. A ``budget_s`` that is not a positive number (an older parent's
    configuration) changes nothing.
    """
    if (
        isinstance(budget_s, bool)
        or not isinstance(budget_s, int | float)
        or not 0 < budget_s < 1e9
    ):
        return lambda: None
    import time

    real_sleep, real_ns = time.sleep, time.monotonic_ns
    real_perf_ns, real_gettime_ns = time.perf_counter_ns, time.clock_gettime_ns
    monotonic = frozenset(
        getattr(time, name)
        for name in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW")
        if hasattr(time, name)
    )
    budget = int(budget_s * 1_000_000_000)
    skipped, since = [0], [real_ns(), 0]  # all skipped; this case's start and skipped since

    def restart() -> None:
        since[:] = [real_ns(), 0]

    def skip(secs: Any) -> bool:
        """Whether a sleep of ``secs`` is skipped (and counted as slept)."""
        if type(secs) not in (int, float) or not 0 < secs < budget_s:
            return False  # its errors, its own way; zero and forever for real
        wanted = int(secs * 1_000_000_000)
        if real_ns() - since[0] + since[1] + wanted >= budget:
            return False
        since[1] += wanted
        skipped[0] += wanted
        return True

    def sleep(secs: Any) -> None:
        return real_sleep(0 if skip(secs) else secs)

    def monotonic_ns() -> int:
        return real_ns() + skipped[0]

    def perf_counter_ns() -> int:
        return real_perf_ns() + skipped[0]

    def clock_gettime_ns(clock: int) -> int:
        return real_gettime_ns(clock) + (skipped[0] if clock in monotonic else 0)

    def clock_gettime(clock: int) -> float:
        return clock_gettime_ns(clock) / 1e9

    for name, function in (
        ("sleep", sleep),
        ("monotonic_ns", monotonic_ns),
        ("monotonic", lambda: monotonic_ns() / 1e9),
        ("perf_counter_ns", perf_counter_ns),
        ("perf_counter", lambda: perf_counter_ns() / 1e9),
        ("clock_gettime", clock_gettime),
        ("clock_gettime_ns", clock_gettime_ns),
    ):
        function.__name__ = function.__qualname__ = name
        setattr(time, name, function)
    if "asyncio" in sys.modules:
        skip_async_sleeps(sys.modules["asyncio"], skip)
    else:  # when the agent imports it: importing it here would cost every run its time
        sys.meta_path.insert(0, AsyncioLoaded(skip))
    return restart


def skip_async_sleeps(asyncio: Any, skip: Callable[[Any], bool]) -> None:
    """``asyncio.sleep`` as ``skip_sleeps`` makes ``time.sleep``: a skipped one only yields
    to the loop (anyio's, and so an async SDK client's, is this one). A module of the
    submission's own named ``asyncio`` (without ``sleep`` and ``tasks``) is left as it is."""
    found: Any = getattr(asyncio, "sleep", None)
    tasks: Any = getattr(asyncio, "tasks", None)
    if found is None or getattr(tasks, "sleep", None) is not found:
        return
    real = cast("Callable[..., Any]", found)

    async def sleep(delay: Any, result: Any = None) -> Any:
        return await real(0 if skip(delay) else delay, result)

    sleep.__name__ = sleep.__qualname__ = "sleep"
    asyncio.sleep = tasks.sleep = sleep


class AsyncioLoaded:
    """A finder that, the first time ``asyncio`` is imported, loads it as Python would and
    then makes its sleeps skippable (``skip_async_sleeps``); it leaves ``sys.meta_path``
    as it finds it."""

    def __init__(self, skip: Callable[[Any], bool]) -> None:
        self._skip = skip

    def find_spec(self, name: str, path: object = None, target: object = None) -> Any:
        if name != "asyncio":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        import importlib.util

        spec: Any = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = AsyncioLoader(spec.loader, self._skip)
        return spec


class AsyncioLoader:
    """``asyncio``'s own loader, then ``skip_async_sleeps``."""

    def __init__(self, loader: Any, skip: Callable[[Any], bool]) -> None:
        self._loader, self._skip = loader, skip

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        skip_async_sleeps(module, self._skip)


# -- the grader's clock (set_clock) --------------------------------------------------------


def set_clock(start: object) -> None:
    """Start the run's wall clock at ``start`` (seconds since the epoch); it then advances
    with real elapsed time, however Python reads it: ``time.time()``, ``time.time_ns()``,
    ``time.localtime()``, ``time.strftime(fmt)`` and the rest without a time argument,
    ``datetime.now()``, ``date.today()``. An agent that writes today's date into a prompt
    or an answer must meet the same day on every machine and every regrade, or its
    cassette misses and its grade moves with the calendar: the grading chooses the day.

    The monotonic clocks (``monotonic``, ``perf_counter``, ``process_time``) keep the
    machine's pace: agents time their calls with them (a skipped sleep moves them ahead,
    ``skip_sleeps``, and this wall clock with them). Only the modules' attributes change, so
    a function taken before this (``from time import time`` in a module already imported)
    keeps the machine's clock, and nothing imported afterwards does. A ``start`` that is
    not an int (an older parent's configuration) changes nothing.
    """
    if isinstance(start, bool) or not isinstance(start, int):
        return
    import time

    monotonic_ns, base = time.monotonic_ns, time.monotonic_ns()
    real_localtime, real_gmtime, real_ctime = time.localtime, time.gmtime, time.ctime
    real_asctime, real_strftime = time.asctime, time.strftime
    real_clock_gettime, real_clock_gettime_ns = time.clock_gettime, time.clock_gettime_ns
    realtime = time.CLOCK_REALTIME

    def wall_ns() -> int:
        return start * 1_000_000_000 + monotonic_ns() - base

    def wall() -> float:
        return start + (monotonic_ns() - base) / 1e9

    def now_if_absent(secs: tuple[Any, ...]) -> tuple[Any, ...]:
        """Arguments given pass as they are (errors included); none, or None, is now."""
        return (wall(),) if not secs or (len(secs) == 1 and secs[0] is None) else secs

    def localtime(*secs: Any) -> time.struct_time:
        return real_localtime(*now_if_absent(secs))

    def gmtime(*secs: Any) -> time.struct_time:
        return real_gmtime(*now_if_absent(secs))

    def ctime(*secs: Any) -> str:
        return real_ctime(*now_if_absent(secs))

    def asctime(*t: Any) -> str:  # None is an error here, as it is for the real one
        return real_asctime(*t) if t else real_asctime(localtime())

    def strftime(format: str, *t: Any) -> str:
        return real_strftime(format, *t) if t else real_strftime(format, localtime())

    def clock_gettime(clock: int) -> float:
        return wall() if clock == realtime else real_clock_gettime(clock)

    def clock_gettime_ns(clock: int) -> int:
        return wall_ns() if clock == realtime else real_clock_gettime_ns(clock)

    for name, function in (
        ("time", wall),
        ("time_ns", wall_ns),
        ("localtime", localtime),
        ("gmtime", gmtime),
        ("ctime", ctime),
        ("asctime", asctime),
        ("strftime", strftime),
        ("clock_gettime", clock_gettime),
        ("clock_gettime_ns", clock_gettime_ns),
    ):
        function.__name__ = function.__qualname__ = name
        setattr(time, name, function)
    _clock_datetime(wall)


def _clock_datetime(wall: Callable[[], float]) -> None:
    """Replace ``datetime.datetime`` and ``datetime.date`` (C types, whose ``now`` cannot
    be set) with subclasses whose ``now``, ``utcnow`` and ``today`` read ``wall``, and that
    are otherwise the real classes: calling one makes a real object, and a real object is
    an instance of them (``isinstance``, as freezegun does it), so every object the run
    sees, made by its own code or by code imported before, is the real type. The classes
    are made here, not at module level: an agent may patch them as it could any class of
    its own without that reading as tampering with the harness (``sealer``)."""
    import copyreg
    import datetime

    real_of: dict[type, type] = {}

    class Clocked(type):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return real_of.get(cls, super().__call__)(*args, **kwargs)

        def __instancecheck__(cls, instance: object) -> bool:
            return (
                isinstance(instance, real_of[cls])
                if cls in real_of
                else super().__instancecheck__(instance)
            )

        def __subclasscheck__(cls, subclass: type) -> bool:
            return (
                issubclass(subclass, real_of[cls])
                if cls in real_of
                else super().__subclasscheck__(subclass)
            )

    class ClockedDate(datetime.date, metaclass=Clocked):
        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(wall())

    class ClockedDatetime(datetime.datetime, metaclass=Clocked):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> Any:
            return cls.fromtimestamp(wall(), tz)

        @classmethod
        def utcnow(cls) -> Any:
            return cls.fromtimestamp(wall(), datetime.UTC).replace(tzinfo=None)

        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(wall())

    def by_name(value: datetime.date) -> tuple[type, Any]:
        """pickle names a real object's class "datetime.datetime", and refuses to once that
        name no longer leads to it: pickled by its state under the name, it unpickles as
        the real class, here and in any other interpreter."""
        return getattr(datetime, type(value).__name__), value.__reduce_ex__(4)[1]

    for clocked, real in ((ClockedDate, datetime.date), (ClockedDatetime, datetime.datetime)):
        real_of[clocked] = real
        clocked.__name__ = clocked.__qualname__ = real.__name__
        clocked.__module__ = real.__module__
        copyreg.pickle(real, by_name)
    datetime.date, datetime.datetime = ClockedDate, ClockedDatetime  # type: ignore[misc]


# -- end of the grader's clock ---------------------------------------------------------------


def install_hook(
    channel: Channel, roots: Iterable[str]
) -> tuple[Callable[[], bool], Callable[[Callable[[], Any]], Any]]:
    """Add the audit hook; from here on every refusal is reported and raised as PermissionError.

    The hook judges with private copies of this module's functions and tables
    (``private_namespace``): a run reaches this module's globals through any object of it
    (``type(provider).complete.__globals__``), and a table emptied or replaced there changes
    nothing the hook consults. What it returns tells whether the hook still refuses a write
    outside the run's folders, asked by an audit event whose name only the harness knows
    (``sealer`` asks before every verdict, behind the process wall: there a hook switched
    off is a finding). The second function it returns makes one call of the harness's own
    (its copy of the run, ``copy_case``) unheard by the hook: the thread is in ``busy``
    for the call's length, as when the hook's own work runs.
    """
    allowed = tuple(os.path.realpath(root) for root in roots)
    busy: set[int] = set()  # threads inside the hook: its own work must not re-enter it
    canary = f"gradekit.canary.{os.urandom(8).hex()}"
    outside_write = ("/", "w", WRITE_FLAGS)

    def guard(event: str, args: tuple[Any, ...]) -> None:
        if event == canary:
            if _thread.get_ident() not in busy:
                args[0].append(judge("open", outside_write, allowed) is not None)
            return
        if event not in REFUSABLE and not event.startswith(LIBRARY):
            return
        ident = _thread.get_ident()
        if ident in busy:
            return
        busy.add(ident)
        try:
            try:
                refused = judge(event, args, allowed)
            except Exception:
                refused = ("", "")  # an argument the hook cannot understand is refused
            if refused is None:
                return
            channel.send(
                {
                    "op": "refused",
                    "event": event,
                    "where": caller_in(allowed[0]),
                    "target": refused[1],
                }
            )
        finally:
            busy.discard(ident)
        raise PermissionError(
            f"gradekit's sandbox refused {event} ({reason(event)}): a graded agent may only "
            "call the provider it is given and write inside its own folder"
        )

    import types

    sys.addaudithook(
        types.FunctionType(
            guard.__code__, private_namespace(), guard.__name__, None, guard.__closure__
        )
    )
    audited_bypasses()

    def alive() -> bool:
        answer: list[bool] = []
        sys.audit(canary, answer)
        return answer == [True]

    def unheard(call: Callable[[], Any]) -> Any:
        ident = _thread.get_ident()
        busy.add(ident)
        try:
            return call()
        finally:
            busy.discard(ident)

    return alive, unheard


def private_namespace() -> dict[str, Any]:
    """A copy of this module's globals for the audit hook alone: every function of this
    module rebuilt over the copy, every table a frozen copy. Nothing a run holds leads to
    it but the hook itself, which only ``gc`` finds."""
    import types

    private: dict[str, Any] = {}
    for name, value in globals().items():
        if isinstance(value, dict):
            value = types.MappingProxyType(dict(value))
        elif isinstance(value, (set, list)):
            value = frozenset(value) if isinstance(value, set) else tuple(value)
        elif isinstance(value, types.FunctionType) and value.__module__ == __name__:
            value = types.FunctionType(
                value.__code__, private, value.__name__, value.__defaults__, value.__closure__
            )
        private[name] = value
    return private


def caller_in(root: str) -> str:
    """Where in the submission's own code (under ``root``) the refused call was made, as
    "path:line"; "" when none of its code is on the stack. Never the call's subject (a
    file's or a host's name): a name the submission makes up anew on every run would move
    its report's digest."""
    prefix = root.rstrip("/") + "/"
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = os.path.realpath(frame.f_code.co_filename)
        if name.startswith(prefix):
            return f"{name[len(prefix) :]}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def audited_bypasses() -> None:
    """Make calls that CPython does not audit raise events the hook judges.

    ``os.mkfifo``/``os.mknod`` (a FIFO planted where the grader writes could hang it),
    ``os.pidfd_open``/``signal.pidfd_send_signal`` (signals without ``os.kill``) and
    ``_posixsubprocess.fork_exec`` (a process without ``subprocess.Popen``'s event).
    The originals stay reachable (through ``gc``), so this raises the bar only: under
    namespaces the operating system is the wall, this only explains the refusal.
    """
    import _posixsubprocess
    import signal

    for module, name, event in (
        (posix, "mkfifo", "os.mkfifo"),
        (posix, "mknod", "os.mknod"),
        (posix, "pidfd_open", "os.pidfd_open"),
        (signal, "pidfd_send_signal", "signal.pidfd_send_signal"),
        (_posixsubprocess, "fork_exec", "_posixsubprocess.fork_exec"),
    ):
        original = getattr(module, name, None)
        if original is None:
            continue

        def audited(
            first: Any, *args: Any, _event: str = event, _call: Any = original, **kw: Any
        ) -> Any:
            if _event in ("os.mkfifo", "os.mknod"):
                sys.audit(_event, first, kw.get("dir_fd"))
            else:
                sys.audit(_event, first)
            return _call(first, *args, **kw)

        setattr(module, name, audited)
        if module is posix:
            setattr(os, name, audited)


def judge(event: str, args: tuple[Any, ...], allowed: tuple[str, ...]) -> tuple[str, str] | None:
    """None when the event is allowed, else a short subject ('' for none) and the target kind."""
    if event == "open":
        return opened_outside(args, allowed)
    subject = subject_of(event, args, allowed)
    return None if subject is None else (subject, "")


def subject_of(event: str, args: tuple[Any, ...], allowed: tuple[str, ...]) -> str | None:
    """None when an event other than ``open`` is allowed, else a short subject for the report."""
    if event in WRITES:
        return outside(event, args, allowed)
    if event in SIGNAL:
        return None if targets_self(event, args) else ""
    if event == SOCKET:
        return None if args[1] == getattr(socket_module(), "AF_UNIX", None) else ""
    if event in LIMITS:
        return None if event == "resource.prlimit" and args[2] is None else ""
    if event in RESOLVE:
        return shorten(args[0])
    if event in PROCESS:
        return program(event, args)
    if event == "ctypes.dlopen":
        return shorten(os.path.basename(args[0])) if isinstance(args[0], str) else ""
    return ""


def reason(event: str) -> str:
    """Why an event is refused, for the PermissionError the student sees."""
    if event in NETWORK or event == SOCKET:
        return "no network in a graded run"
    if event in PROCESS:
        return "no new processes in a graded run"
    if event in WRITES:
        return "writes outside the submission's copy and its scratch folder"
    if event in SIGNAL:
        return "no signals to other processes"
    if event in LIMITS:
        return "resource limits are fixed"
    return "no ctypes in a graded run"


def outside(event: str, args: tuple[Any, ...], allowed: tuple[str, ...]) -> str | None:
    """The basename of the first written path outside ``allowed``, or None."""
    for path_at, dir_fd_at in WRITES[event]:
        dir_fd = args[dir_fd_at] if 0 <= dir_fd_at < len(args) else None
        path = resolve(args[path_at], dir_fd)
        if path not in ALWAYS_WRITABLE and not any(inside(path, root) for root in allowed):
            return shorten(os.path.basename(path))
    return None


def opened_outside(args: tuple[Any, ...], allowed: tuple[str, ...]) -> tuple[str, str] | None:
    """Judge an ``open`` event: a write outside, a device, or a folder outside is refused.

    A folder: ``os.open(name, flags, dir_fd=fd)`` raises an event without the
    dir_fd, so a folder fd from outside would let a write outside pass as inside.
    """
    path, mode, flags = args
    if isinstance(path, int):  # an fd opened before, and judged then
        return None
    writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        isinstance(flags, int) and bool(flags & WRITE_FLAGS)
    )
    if not writes and mode is not None:
        return None
    real = resolve(path, None)
    if not writes:
        outside_folder = os.path.isdir(real) and not any(
            real == root or inside(real, root) for root in allowed
        )
        return (shorten(os.path.basename(real)), "folder") if outside_folder else None
    if real in ALWAYS_WRITABLE:
        return None
    if is_device(real):
        return shorten(os.path.basename(real)), "device"
    if not any(inside(real, root) for root in allowed):
        return shorten(os.path.basename(real)), ""
    return None


def is_device(path: str) -> bool:
    """Whether ``path`` is a device node (one made with the unaudited os.mknod, say)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISBLK(mode) or stat.S_ISCHR(mode)


def resolve(path: object, dir_fd: object) -> str:
    """The real absolute path an audited call acts on; unusual path objects raise (refused)."""
    if isinstance(path, int):
        return os.readlink(f"/proc/self/fd/{path}")
    if type(path) not in EXACT_PATHS and not isinstance(path, str | bytes):
        raise TypeError("a path-like object the sandbox will not trust twice")
    text = os.fsdecode(path if isinstance(path, pathlib.PurePath) else _exact(path))
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(text):
        text = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), text)
    return os.path.realpath(text)


def _exact(path: object) -> str | bytes:
    """The plain value of a str or bytes (subclasses could override the methods used later)."""
    return "".join([path]) if isinstance(path, str) else b"".join([path])  # type: ignore[list-item]


def inside(path: str, root: str) -> bool:
    """Whether the real path ``path`` is below ``root``; the root itself may not be moved away."""
    return path.startswith(root.rstrip(os.sep) + os.sep)


def socket_module() -> Any:
    """The socket module, imported only when a socket is made."""
    return sys.modules.get("socket") or importlib.import_module("socket")


def targets_self(event: str, args: tuple[Any, ...]) -> bool:
    """Whether a signal goes to this process or its own process group only."""
    target, group = args[0], os.getpgrp()
    if event == "signal.pidfd_send_signal":  # a pidfd names no process we could check
        return False
    if event == "os.killpg":
        return target in (0, group)
    return target in (0, os.getpid(), -group)


def program(event: str, args: tuple[Any, ...]) -> str:
    """The basename of the program a process event would start."""
    if event in ("os.fork", "os.forkpty"):
        return ""
    candidate: object = {
        "subprocess.Popen": lambda: args[0] or args[1],
        "os.system": lambda: args[0],
        "pty.spawn": lambda: args[0],
        "os.spawn": lambda: args[1],
    }.get(event, lambda: args[0])()
    if isinstance(candidate, list | tuple):
        candidate = candidate[0] if candidate else ""
    if isinstance(candidate, str | bytes | os.PathLike):
        text = os.fsdecode(candidate)
        return shorten(os.path.basename(text.split()[0] if text.split() else text))
    return ""


def shorten(value: object) -> str:
    """A printable, bounded string for a report."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return "".join(c if c.isprintable() else "?" for c in text[:SUBJECT_LIMIT])


def describe(exc: BaseException) -> str:
    """``Class: first line of the message``, bounded; a hostile ``__str__`` cannot break it."""
    try:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except BaseException:
        message = "(the message could not be read)"
    name = type(exc).__name__
    return (f"{name}: {message}" if message else name)[:TEXT_LIMIT]


def located(exc: BaseException, root: str) -> str:
    """``describe(exc)`` and where in the submission it happened: the file (relative to
    ``root``) and line of a SyntaxError, else of the deepest frame in the submission."""
    place: tuple[str, int] | None = None
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        place = exc.filename, exc.lineno
    else:
        trace = exc.__traceback__
        while trace is not None:
            name = trace.tb_frame.f_code.co_filename
            if name.startswith(root + os.sep):
                place = name, trace.tb_lineno
            trace = trace.tb_next
    if place is None or not place[0].startswith(root + os.sep):
        return describe(exc)
    return f"{describe(exc)} ({place[0][len(root) + 1 :]}, line {place[1]})"[:TEXT_LIMIT]


def find(spec: str) -> Any:
    """Import ``package.module:attribute`` from the submission; the attribute, any value."""
    module_name, _, attribute = spec.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    return found


def load(spec: str) -> Any:
    """Import ``package.module:attribute`` from the submission: a callable."""
    found = find(spec)
    if not callable(found):
        raise TypeError(f"{spec} is not callable")
    return found


def flush_output() -> None:
    """Hand buffered prints to the output files before the parent may kill this process."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


class Provider:
    """The provider the agent is given: every prompt goes to the parent, which alone answers.

    Its HTTP side (``http_client()`` and the rest, as gradekit's providers have) hands
    an SDK clients whose every request goes to the parent the same way.
    """

    def __init__(self, channel: Channel, case: str, label: str) -> None:
        self.name = label
        self._channel, self._case = channel, case
        self.misses: list[BaseException] = []
        self._transport = ParentTransport(self)

    def complete(self, prompt: str) -> str:
        """Ask the parent; a miss raises (and is remembered, to see whether it escapes)."""
        if not issubclass(type(prompt), str):
            raise TypeError(f"complete() takes a str prompt, not {type(prompt).__name__}")
        prompt = "".join([prompt])
        prompt.encode("utf-8")  # a lone surrogate raises here, before anything is sent
        reply = self._channel.ask({"op": "complete", "case": self._case, "prompt": prompt})
        if "response" in reply:
            response: str = reply["response"]
            return response
        miss = make_miss(
            str(reply.get("miss", "cassette miss")), str(reply.get("cassette", self._case)), prompt
        )
        self.misses.append(miss)
        raise miss

    def http_transport(self) -> ParentTransport:
        """The transport of every client this provider hands out."""
        return self._transport

    def async_http_transport(self) -> ParentTransport:
        """The same transport: it serves async clients too."""
        return self._transport

    def http_client(self, library: str = "httpx", **options: Any) -> Any:
        """An ``httpx.Client`` (``"httpx2"``: an ``httpx2.Client``) on the parent."""
        return client_of(library, "Client", self._transport, options)

    def async_http_client(self, library: str = "httpx", **options: Any) -> Any:
        """An ``httpx.AsyncClient`` (``"httpx2"``: an ``httpx2.AsyncClient``) on the parent."""
        return client_of(library, "AsyncClient", self._transport, options)

    def http(self, request: Any, body: bytes) -> Any:
        """Ask the parent for ``request``'s response; a miss raises, as ``complete``'s does."""
        library = sys.modules.get(type(request).__module__.partition(".")[0])
        if library is None or library.__name__ not in HTTP_LIBRARIES:
            raise TypeError(
                f"the provider's HTTP clients serve httpx and httpx2 requests, not "
                f"{type(request).__name__}"
            )
        method, url = str(request.method), str(request.url)
        reply = self._channel.ask(
            {
                "op": "http",
                "case": self._case,
                "method": method,
                "url": url,
                "body": base64.b64encode(bytes(body)).decode("ascii"),
            }
        )
        answer = reply.get("http")
        if isinstance(answer, dict):
            return library.Response(
                answer["status"],
                request=request,
                headers=[(str(n), str(v)) for n, v in answer["headers"]],
                content=base64.b64decode(answer["body"]),
            )
        miss = make_http_miss(
            str(reply.get("miss", "cassette miss")),
            library,
            request,
            case=self._case,
            key=str(reply.get("key", "")),
        )
        self.misses.append(miss)
        raise miss


HTTP_LIBRARIES = ("httpx", "httpx2")


class ParentTransport:
    """An SDK client's transport in a graded run (httpx and httpx2, sync and async): each
    request goes to the parent, which answers from the case's HTTP cassette."""

    def __init__(self, provider: Provider) -> None:
        self._provider = provider

    def handle_request(self, request: Any) -> Any:
        return self._provider.http(request, request.read())

    async def handle_async_request(self, request: Any) -> Any:
        return self._provider.http(request, await request.aread())

    def close(self) -> None:
        """Nothing to close: the parent holds the cassette."""

    async def aclose(self) -> None:
        """Nothing to close: the parent holds the cassette."""


def client_of(library: str, kind: str, transport: ParentTransport, options: dict[str, Any]) -> Any:
    """A ``kind`` (Client, AsyncClient) of ``library`` on ``transport``."""
    if library not in HTTP_LIBRARIES or "transport" in options:
        raise TypeError(
            "http_client() makes an httpx or httpx2 client on the grader's "
            "transport: pass 'httpx' (openai) or 'httpx2' (anthropic), and no "
            "transport of your own"
        )
    return getattr(importlib.import_module(library), kind)(transport=transport, **options)


MAX_WRITES = 64  # write tools a registry may declare; the parent refuses more
NAME_LIMIT = 200  # characters of a write tool's name; the parent refuses longer


def write_tools(spec: object) -> dict[str, Callable[..., Any]]:
    """The write tools of the registry ``spec`` names (the manifest's ``tools``, a gradekit
    ``Tools``), by name: the calls this child runs itself. "" or none: an empty dict."""
    if not isinstance(spec, str) or not spec:
        return {}
    registry = find(spec)
    names: Any = getattr(registry, "names", ())
    write_tool: Any = getattr(registry, "write_tool", None)
    found: dict[str, Callable[..., Any]] = {}
    for name in list(names)[:10_000] if callable(write_tool) else ():
        named = (
            type(name) is str and 0 < len(name) <= NAME_LIMIT and not any(c.isspace() for c in name)
        )  # what the parent takes for a tool name
        tool = write_tool(name) if named else None
        if callable(tool) and len(found) < MAX_WRITES:
            found["".join([name])] = tool
    return found


class Toolbox:
    """The tools the agent is given: every call goes to the parent, which serves fixtures,
    or says to run a write tool here, on this toolbox's store: one toolbox per case run, so
    each starts empty."""

    def __init__(
        self,
        channel: Channel,
        case: str,
        misses: list[BaseException],
        fixtures: str = "fixtures",
        writes: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        self._channel, self._case, self.misses = channel, case, misses
        self._fixtures = fixtures  # the folder the manifest names, for the miss's message
        self._writes = writes or {}
        self._store: dict[str, Any] = {}

    def call(self, name: str, **args: Any) -> Any:
        """Ask the parent for the recorded result; a missing fixture raises."""
        if not issubclass(type(name), str):
            raise TypeError(f"call() takes a str tool name, not {type(name).__name__}")
        message = {"op": "tool", "case": self._case, "tool": "".join([name]), "args": args}
        try:
            json.dumps(message, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"tool arguments must be JSON values: {exc}") from None
        reply = self._channel.ask(message)
        if reply.get("write") is True:
            return self._write(name, args)
        if "response" in reply:
            return reply["response"]
        arguments = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        missing = make_error(
            "MissingFixtureError",
            MissingFixtureError,
            str(reply.get("missing", "missing fixture")),
            fixture=f"{self._fixtures}/{self._case}.json",
            case=self._case,
            tool=name,
            arguments=arguments,
            key=f"{name} {arguments}",
        )
        self.misses.append(missing)
        raise missing

    def _write(self, name: str, args: dict[str, Any]) -> Any:
        """Run the write tool ``name`` on this case run's store; its result as JSON reads it
        back, as the kit's toolboxes return it."""
        tool = self._writes.get(name)
        if tool is None:
            raise TypeError(
                f"{name} is not a write tool of the registry the manifest names "
                "(tools in [tool.gradekit]): register it with Tools.write"
            )
        result = tool(self._store, **args)
        try:
            return json.loads(json.dumps(result, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{name}'s result must be JSON values (dict, list, str, number, "
                f"bool, None): return one ({exc})"
            ) from None


def make_miss(message: str, cassette: str, prompt: str) -> BaseException:
    """The submission's ``CassetteMiss`` (``submission_class``) when it can be built, else the
    harness's: with the fields the kit's Replay gives one (``cassette``: the file's path)."""
    key = hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()[:16]
    return make_error(
        "CassetteMiss", CassetteMiss, message, cassette=cassette, key=key, prompt=prompt
    )


MISS_CLASSES: dict[tuple[type[BaseException], str], type[BaseException]] = {}


def make_http_miss(
    message: str, library: Any, request: Any, *, case: str, key: str
) -> BaseException:
    """A miss that is the submission's ``CassetteMiss`` (else the harness's) and the request
    library's ``TransportError``: what an SDK retries, and wraps with the miss as its cause."""
    found = submission_class("CassetteMiss") or CassetteMiss
    combined = MISS_CLASSES.get((found, library.__name__))
    if combined is None:
        for base in (found, CassetteMiss):
            try:
                combined = type(
                    base.__name__,
                    (base, library.TransportError),
                    {"__module__": base.__module__, "__qualname__": base.__qualname__},
                )
                break
            except TypeError:  # a class of the submission's that cannot be combined
                continue
        MISS_CLASSES[(found, library.__name__)] = combined = combined or CassetteMiss
    error = build_error(
        combined,
        CassetteMiss,
        message,
        cassette=case,
        key=key,
        prompt=f"{request.method} {request.url}",
    )
    with contextlib.suppress(Exception):
        error.request = request  # type: ignore[attr-defined]  # httpx's RequestError has it
    return error


def make_error(
    name: str, fallback: type[BaseException], message: str, **fields: Any
) -> BaseException:
    """The submission's ``<name>`` (``submission_class``) when it can be built, else
    ``fallback``."""
    return build_error(submission_class(name), fallback, message, **fields)


def build_error(
    cls: Any, fallback: type[BaseException], message: str, **fields: Any
) -> BaseException:
    """An instance of ``cls`` when one can be built from ``message``, else ``fallback``'s."""
    attempts: tuple[Callable[[], object], ...] = (
        lambda: cls(message, **fields),
        lambda: cls(message),
        lambda: bare(cls, message),  # any constructor: still an instance the agent can catch
    )
    for attempt in attempts if cls is not None else ():
        try:
            error = attempt()
        except Exception:
            continue
        if isinstance(error, BaseException) and issubclass(type(error), BaseException):
            return error
    return fallback(message)


def bare(cls: type[BaseException], message: str) -> BaseException:
    """An instance of ``cls`` built without its own ``__init__``."""
    error = cls.__new__(cls)
    BaseException.__init__(error, message)
    return error


def submission_class(name: str) -> type[BaseException] | None:
    """``<name>`` as the submission's ``lab`` defines it, else as the kit's ``gradekit`` does,
    if it is an exception class: what the agent most likely catches."""
    for package in ("lab", "gradekit"):
        try:
            module = sys.modules.get(package) or importlib.import_module(package)
            cls = getattr(module, name, None)
        except BaseException:
            continue
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return cls
    return None


def takes_tools(agent: Callable[..., object]) -> bool:
    """An agent ``run(provider, task, tools)`` gets a toolbox; ``run(provider, task)`` does not."""
    try:
        parameters = list(inspect.signature(agent).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def chain(exc: BaseException) -> Iterator[BaseException]:
    """Every exception in ``exc``'s chain as Python would print it (causes, contexts not
    suppressed, an exception group's members), the nearest first, each once. The agent's
    own exception classes can raise from these attributes: callers guard the iteration."""
    seen: set[int] = set()
    queue: list[object] = [exc]
    while queue:
        current = queue.pop(0)
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        queue.append(current.__cause__)
        if not current.__suppress_context__:
            queue.append(current.__context__)
        if isinstance(current, BaseExceptionGroup):
            queue.extend(current.exceptions)


def escaped(exc: BaseException, misses: list[BaseException]) -> bool:
    """Whether one of ``misses`` is in ``exc``'s chain as Python would print it."""
    try:
        return any(current is miss for current in chain(exc) for miss in misses)
    except BaseException:
        return False


def causes(exc: BaseException, misses: list[BaseException]) -> list[str]:
    """What ``exc`` was raised from, nearest first (at most 5, itself left out): each
    ``module.Class``, and a miss of this run's as ``miss``, so that feedback can say "an
    SDK's error, caused by the miss" without reading any message."""
    try:
        found = []
        for current in list(chain(exc))[1:6]:
            kind = type(current)
            found.append(
                "miss"
                if any(current is miss for miss in misses)
                else f"{kind.__module__}.{kind.__qualname__}"[:TEXT_LIMIT]
            )
        return found
    except BaseException:
        return []


def missing_module(exc: BaseException) -> str | None:
    """The module that a ``ModuleNotFoundError`` in ``exc``'s chain (the nearest first)
    could not find: its ``name``, or None when there is none. An import the agent, or a
    package it uses, could not make; the parent decides whose."""
    try:
        for current in chain(exc):
            # A str, never a subclass the agent wrote.
            if isinstance(current, ModuleNotFoundError) and type(current.name) is str:
                return current.name[:TEXT_LIMIT]
    except BaseException:
        return None
    return None


def outcome(call: Callable[[], object]) -> tuple[dict[str, Any], BaseException | None]:
    """Run ``call``; describe what it returned or raised (the exception comes back too)."""
    try:
        value = call()
    except BaseException as exc:
        return {"exception": type(exc).__name__}, exc
    is_str = issubclass(type(value), str)
    answer = "".join([value]) if is_str else None  # type: ignore[list-item]
    return {"returned_type": type(value).__name__, "answer": answer}, None


Verdict = Callable[[dict[str, Any]], None]


def run_cases(
    channel: Channel,
    config: dict[str, Any],
    verdict: Verdict,
    restart: Callable[[], None] = lambda: None,
    copying: Copying | None = None,
) -> None:
    """Import the agent, then run every case in order, reporting each through ``verdict``;
    ``restart`` starts each case's sleep budget (``skip_sleeps``). At the start of each
    case in ``config["copies"]``, the parent may first ask for copies of the run
    (``copy_case``; ``copying``: how, where the run can), each of which runs the case
    alone."""
    try:
        agent = load(config["agent"])
        with_tools = takes_tools(agent)
        writes = write_tools(config.get("tools")) if with_tools else {}
    except BaseException as exc:
        channel.send(
            {
                "op": "import_error",
                "error": located(exc, config["root"]),
                "module": missing_module(exc),
            }
        )
        return
    channel.send({"op": "ready", "writes": sorted(writes)})
    copies = frozenset(config.get("copies") or ())

    def run_case(case: dict[str, Any]) -> None:
        os.environ["GRADEKIT_TRACE"] = case["trace"]
        provider = Provider(channel, case["id"], config["label"])
        extra = (
            (
                Toolbox(
                    channel,
                    case["id"],
                    provider.misses,
                    str(config.get("fixtures", "fixtures")),
                    writes,
                ),
            )
            if with_tools
            else ()
        )
        channel.send({"op": "start", "case": case["id"]})
        restart()
        described, error = outcome(lambda: agent(provider, case["task"], *extra))
        result: dict[str, object]
        if error is None:
            result = {"status": "returned", "exception": None, "miss_escaped": False}
        else:
            result = {
                "status": "raised",
                "returned_type": None,
                "answer": None,
                "miss_escaped": escaped(error, provider.misses),
                "module": missing_module(error),
                "message": describe(error),
                "chain": causes(error, provider.misses),
            }
        del error  # its traceback holds the agent's frames
        flush_output()
        verdict({"op": "result", "case": case["id"], **described, **result})

    for case in config["cases"]:
        if case["id"] in copies:
            copy_case(channel, case, run_case, copying, config.get("sleep_s"))
        run_case(case)


# A run's copying: its fork (0 in the copy, the copy's pid here, -1 refused: a host's raw
# clone, or ``process_copier``'s) and the hook's ``unheard``, which the fork, the look at the
# run's threads and the kill of a copy past its limit are made through (the hook refuses
# them to the agent).
Copying = tuple[Callable[[], int], Callable[[Callable[[], Any]], Any]]


def copy_case(
    channel: Channel,
    case: dict[str, Any],
    run_case: Callable[[dict[str, Any]], None],
    copying: Copying | None,
    limit_s: object,
) -> None:
    """At ``case``'s start, as long as the parent asks: copy the run (a fork, where the
    run is alone in its process: a fork keeps only the calling thread) and let the copy
    run the case, then end; wait for it (at most the case's limit, then kill it), and say
    how it ended. The parent serves the copy as it would any run, withholding what a probe
    withholds; the run itself then goes on with the case untouched. A copy runs the case
    as the run would, its trace file included (the parent empties it after each copy).
    The messages, ``copy`` and ``copied``: the module's protocol."""
    while True:
        able = copying is not None and bool(copying[1](alone))
        channel.send({"op": "copy", "case": case["id"], "able": able})
        if not channel.receive().get("copy") or copying is None or not able:
            return
        fork, unheard = copying
        child = int(unheard(fork))
        if child == 0:  # the copy
            try:
                run_case(case)
            finally:
                os._exit(0)
        if child < 0:
            channel.send(
                {
                    "op": "copied",
                    "case": case["id"],
                    "code": None,
                    "signal": None,
                    "timed_out": False,
                    "refused": True,
                }
            )
            return
        channel.send({"op": "copied", "case": case["id"], **waited(child, limit_s, unheard)})


def alone() -> bool:
    """Whether this process has one thread: a copy made now misses nothing of it."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def waited(
    child: int, limit_s: object, unheard: Callable[[Callable[[], Any]], Any]
) -> dict[str, Any]:
    """Wait for ``child`` (a copy) at most ``limit_s`` seconds of real time, then kill it;
    how it ended. Real time: the run's own clocks skip its sleeps (``skip_sleeps``)."""
    limit = (
        float(limit_s)
        if isinstance(limit_s, int | float) and not isinstance(limit_s, bool) and limit_s > 0
        else 60.0
    )
    began, pause, timed_out = os.times().elapsed, 0.0005, False
    pausing = _thread.allocate_lock()
    pausing.acquire()
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            break
        if os.times().elapsed - began > limit:
            timed_out = True
            with contextlib.suppress(OSError):
                unheard(lambda: os.kill(child, 9))
            _, status = os.waitpid(child, 0)
            break
        pausing.acquire(True, pause)  # held already: a sleep that imports nothing
        pause = min(pause * 2, 0.01)
    signal_number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    return {"code": code, "signal": signal_number, "timed_out": timed_out}


def cut_point(channel: Channel, config: dict[str, Any], verdict: Verdict) -> None:
    """Run the submission's cut-point test (a function of no arguments: it passes when it
    returns). With ``allow_all``, the guard it names is first replaced by one that lets
    every action through: a test that still passes then cannot fail."""
    try:
        if config["allow_all"]:
            module_name, _, name = str(config["guard"]).partition(":")
            module = importlib.import_module(module_name)
            if not callable(getattr(module, name, None)):
                raise AttributeError(f"module {module_name!r} has no guard {name!r}")
            setattr(module, name, allow_everything)
        test = load(config["test"])
    except BaseException as exc:
        channel.send({"op": "import_error", "error": located(exc, config["root"])})
        return
    channel.send({"op": "ready"})
    _, error = outcome(test)
    failed = None if error is None else located(error, config["root"])
    del error  # its traceback holds the test's frames
    flush_output()
    verdict({"op": "cut_point", "passed": failed is None, "error": failed})


def allow_everything(*args: object, **kwargs: object) -> bool:
    """The guard a cut-point test is tried against: it lets every action through."""
    return True


def probe_replay(channel: Channel, config: dict[str, Any], verdict: Verdict) -> None:
    """Load the submission's replay on the parent's cassette; ask a hit and a miss. The
    cassette is first put where the submission keeps its own (``probe["as"]``, relative to
    its copy), so the replay is opened as the student's own code opens one."""
    probe = config["probe"]
    cassette = probe["cassette"]
    try:
        if probe.get("as"):
            os.makedirs(os.path.dirname(probe["as"]) or ".", exist_ok=True)
            copy_file(cassette, probe["as"])
            cassette = probe["as"]
        replay = load(config["replay"])(cassette)
    except BaseException as exc:
        channel.send({"op": "import_error", "error": describe(exc)})
        return
    channel.send({"op": "ready"})
    hit = None if probe["hit"] is None else outcome(lambda: replay.complete(probe["hit"]))[0]
    miss, error = outcome(lambda: replay.complete(probe["miss"]))
    if error is not None:  # which classes it is: a CassetteMiss of the submission's or the kit's
        miss["classes"] = [cls.__name__ for cls in type(error).__mro__][:32]
    del error
    flush_output()
    verdict({"op": "probe", "hit": hit, "miss": miss})


def prepare_sandbox(channel: Channel, config: dict[str, Any]) -> None:
    """Under namespaces: copy the read-only submission into the tmpfs, add the packages.

    A submission larger than the tmpfs, or one that cannot be read, ends here with an
    ``import_error`` that says so; nothing of the student's has run yet.
    """
    copy = config["copy"]
    try:
        if not os.path.ismount(copy["to"]):  # a forked run's is an overlay of the original
            copy_submission(copy["from"], copy["to"], copy["ignore"])
        os.makedirs(os.path.join(os.path.dirname(copy["to"]), "tmp"), exist_ok=True)
    except OSError as exc:
        why = (
            "larger than the sandbox's disk (disk_mb)"
            if exc.errno == errno.ENOSPC
            else f"unreadable ({describe(exc)})"
        )
        channel.send({"op": "import_error", "error": f"the submission is {why}"})
        os._exit(0)
    os.chdir(copy["to"])
    os.environ.pop("PWD", None)  # bubblewrap's, absent under the process wall: runs match


class Library:
    """Finds ``gradekit`` in the grader's own copy (read-only), ahead of any copy the
    submission ships: the kit the agent runs on is the one the grade is measured with."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def find_spec(self, name: str, path: object = None, target: object = None) -> Any:
        if name != "gradekit":
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(
            name, os.path.join(self.folder, "__init__.py"), submodule_search_locations=[self.folder]
        )


def add_packages(folders: Iterable[str]) -> None:
    """What ``site`` would have given the agent, short of running ``.pth`` files.

    The child starts with ``-S``: the grader environment's ``.pth`` files (its own
    editable install among them) stay out, and so does their start-up time.
    """
    site.setquit()  # exit() and quit(), which an agent may call
    site.setcopyright()
    site.sethelper()
    sys.path.extend(folder for folder in folders if folder not in sys.path)


def sealer(channel: Channel, seal: str, hook: list[Callable[[], bool]]) -> Verdict:
    """What sends each verdict: sealed with the parent's secret, after a look at whether the
    agent replaced any of the harness's code (``sys.modules["__main__"]`` is this module).

    Both are tripwires for the known ways of forging a verdict: a line written on the pipe
    by anything but this function lacks the seal, and a replaced function of this module
    (``outcome``, ``escaped``, ``Channel.send``...) is named to the parent. The seal and
    the pristine functions live in this closure, not in a module global. ``hook``: where
    the audit hook is the wall (the process wall), the check that it still refuses
    (``install_hook``'s), once installed; a hook switched off is named as ``audit hook``.
    """
    module, code_of, send = sys.modules[__name__], _code_of, Channel.send
    pristine = code_of(module)

    def verdict(message: dict[str, Any]) -> None:
        now = code_of(module)
        replaced = sorted(
            {name for name, code in now.items() if pristine.get(name) is not code}
            | (set(pristine) - set(now))
        )
        if hook and not hook[0]():
            replaced.append("audit hook")
        if replaced:
            send(channel, {"op": "tampered", "replaced": replaced[:20], "seal": seal})
        send(channel, {**message, "seal": seal})

    return verdict


def _code_of(module: Any) -> dict[str, object]:
    """The code of every function of ``module`` and of its classes' methods, by name."""
    found: dict[str, object] = {}
    for name, value in list(vars(module).items()):
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            found[name] = value.__code__
        elif isinstance(value, type) and value.__module__ == module.__name__:
            found[name] = value
            for attribute, member in list(vars(value).items()):
                if inspect.isfunction(member):
                    found[f"{name}.{attribute}"] = member.__code__
    return found


# -- the run host: one interpreter per hash seed, a fork per run ----------------------------
#
# Behind namespaces a grading's runs fork from a host instead of each starting bubblewrap
# and an interpreter (``grader.sandbox._host`` is the grader's side, and says why). The
# host runs only this module and the grader's ``gradekit``, never student code; it keeps
# CAP_SYS_ADMIN in its user namespace only to build each run's walls, and every run drops
# it before it reads its configuration. Protocol, over the one socket the host inherits
# (SOCK_SEQPACKET, one JSON object per message):
#
#     grader: {"site", "library", "scratch", "seccomp": HEX, "overlay": BOOL,
#              "copy_cookie": N}   once, first (N: the secret of the one fork the filter lets
#              a run make, its copy at a case's start: ``copy_case``)
#     host:   {"op": "ready"} | {"op": "unavailable", "why": W}
#     grader: {"op": "run", "env", "disk_mb", "source", "shown": [[FROM, TO, WRITABLE]]}
#             with six fds: the channel's read and write ends, stdout, stderr, "go", and
#             the reply socket (one end of a fresh SOCK_SEQPACKET pair), then the cell's
#             entries, if any (at most _MOST_ENTRIES: files a thread joins it by writing 0)
#     host, on the reply socket: {"op": "started"} with the pidfd of the run, then, once
#             the host reaped it, {"op": "ran", "status": S}, then, once its pid 1 ended,
#             {"op": "ended", "status": S} (or {"op": "refused", "why": W} if it could not
#             fork the run at all)
#     run, on the same socket, before its walls, where entries came:
#             {"op": "joined"} | {"op": "refused", "why": W} (and it ends)
#
# Requests may come from several graders at once (the workers of a batch share its hosts):
# each is one message, and each run's answers go to its own reply socket. The run (pid 2
# of its own pid namespace, whose pid 1 only waits: see ``NamespacesHost.pid1``) joins its
# cell (or the grader moves it there), builds its walls and waits for a byte on "go"
# (written once it is in the cell) before its agent runs, so that all it holds is counted
# in the cell; the host kills it when "go" closes, and says "ran" once it reaped it.
#
# FROM, "source" and the run's folders are paths under "scratch" (the grading's scratch,
# which the host sees and no run does).

_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWIPC, _CLONE_NEWUTS = (
    0x20000,
    0x20000000,
    0x8000000,
    0x4000000,
)
_CLONE_NEWNET = 0x40000000
# The parts of /proc that reach the whole machine (kernel settings, the magic SysRq key,
# interrupts, buses, file systems' settings): read-only in every run, behind both of
# bubblewrap's paths (``grader.sandbox._namespaces.bwrap_argv`` names the same ones).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi", "asound")
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = (
    1,
    4,
    24,
    38,
    22,
)
_LAST_CAP = 63
_CLONE_VM = 0x100
_CLONE_NUMBERS = {"x86_64": 56, "aarch64": 220}  # the clone system call's number
_PID1_STACK = 16384
_MOST_ENTRIES = 4  # a cell's entries: a cgroup v1 hierarchy's each (memory, pids, cpu), one spare
# What the host imports for itself, which a run must import anew, as a run in its own
# bubblewrap does: importing ctypes raises the audit event the guard refuses.
_HOST_ONLY = frozenset({"ctypes", "_ctypes"})


def host_setup(libc: Any, link: Any) -> tuple[dict[str, Any], list[str]]:
    """A host's set-up, behind either wall, before it forks its first run: the grader's
    word (``link``: its socket), the kit and ``preload`` imported once for every run, and
    the host closed to its runs. Returns the word and what the host imported for itself
    alone (``_HOST_ONLY``), which each run forgets."""
    import signal

    setup: dict[str, Any] = json.loads(link.recv(1 << 20))
    add_packages(setup["site"])
    sys.meta_path.insert(0, Library(setup["library"]))
    importlib.import_module("gradekit")  # the kit, imported once for every run of this host
    importlib.import_module("platform")  # settle_platform's, before every run's guard
    importlib.import_module("_posixsubprocess")  # the guard's (audited_bypasses), every run
    importlib.import_module("datetime")  # set_clock's, every run: about 170 pages fewer a run
    # The rubric's packages the submission imports (``preload``): imported once here, not
    # in every run (openai's import is about 450 ms of CPU, anthropic's 1.3 s). One that
    # fails is left for the run, which imports it and says why as it always did.
    for package in setup.get("preload", []):
        with contextlib.suppress(Exception):
            importlib.import_module(package)
    host_only = [n for n in sys.modules if n.partition(".")[0] in _HOST_ONLY]
    forget_environment(HIDDEN)  # every run is a fork: its /proc/self/environ is this one's
    # No handler a run could trip: see NamespacesHost's pid 1, which runs the host's.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Not dumpable: nothing of its own (nor, behind namespaces, of each run's pid 1, which
    # shares its memory) is open to a run through /proc or ptrace, whatever uid the run
    # has; each run makes itself dumpable again.
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        import ctypes

        raise OSError(ctypes.get_errno(), "prctl")
    # Every run's collections skip what the host made, so they copy none of its pages.
    gc.freeze()
    return setup, host_only


def forker() -> Callable[[], int]:
    """A host's fork. It skips Python's own after-fork work (os.fork re-creates the
    runtime's locks and runs every at-fork callback, for threads this host never has):
    about 220 fewer pages copied a fork. PyDLL holds the GIL across the call, as os.fork
    does. The one callback that matters without threads, random's reseed, runs here; a
    host that somehow has a second thread forks the usual way."""
    import ctypes

    bare_fork = (
        ctypes.PyDLL(None, use_errno=True).fork if len(os.listdir("/proc/self/task")) == 1 else None
    )

    def fork() -> int:
        if bare_fork is None:
            return os.fork()
        child = int(bare_fork())
        if child < 0:
            number = ctypes.get_errno()
            raise OSError(number, f"fork: {os.strerror(number)}")
        if child == 0 and "random" in sys.modules:
            sys.modules["random"].seed()  # each run its own stream, as after os.fork
        return child

    return fork


def take_descriptors(fds: list[int], *more: int) -> None:
    """A forked run's first step: its outputs (``fds``: the channel's two ends, stdout,
    stderr, "go", the reply socket, then its cell's entries) on 1 and 2, every other
    descriptor of its host closed (the host's sockets, other runs' among them) but
    ``more``, then into its cell (``join``)."""
    read, write, out, err, go, reply = fds[:6]
    os.dup2(out, 1)
    os.dup2(err, 2)
    keep = sorted({0, 1, 2, read, write, go, reply, *more, *fds[6:]})
    for low, high in zip(keep, [*keep[1:], 1 << 20], strict=True):
        os.closerange(low + 1, high)
    if fds[6:]:
        join(fds[6:], reply)


def join(entries: list[int], reply: int) -> None:
    """Join the run's cell by writing 0 to each of ``entries`` (the run is one thread: it
    moves itself, without the kernel's lock on every process), then say so on ``reply``,
    the socket the grader waits on (one message a write)."""
    said: dict[str, str] = {"op": "joined"}
    try:
        for entry in entries:
            os.write(entry, b"0")
    except OSError as exc:
        said = {"op": "refused", "why": f"the run could not join its cell: {describe(exc)}"}
    for fd in entries:
        os.close(fd)
    os.write(reply, json.dumps(said).encode())
    if said["op"] != "joined":
        os._exit(72)


def request_of(link: Any) -> tuple[dict[str, Any] | None, list[int]]:
    """A host's next request from the grader and the descriptors that came with it (the
    run's channel, outputs, "go", reply socket and cell entries); ``(None, [])`` once the
    grader is gone, and ``({}, [])`` for a message without them (its descriptors closed)."""
    import socket

    message, fds, _, _ = socket.recv_fds(link, 1 << 20, 6 + _MOST_ENTRIES)
    if not message:
        return None, []
    if len(fds) < 6:
        for fd in fds:
            os.close(fd)
        return {}, []
    return json.loads(message), fds


def reaped(run: int, handle: int, go: int, letting: dict[int, int], poller: Any) -> int:
    """Reap a host's ended run (``handle``: its pidfd, which said so, closed here), and stop
    watching its "go" (-1: let go already); its status as the grader reads it (128 + N:
    killed by signal N)."""
    _, status = os.waitpid(run, 0)
    os.close(handle)
    if go >= 0:
        letting.pop(go, None)
        poller.unregister(go)
        os.close(go)
    return (
        128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)
    )


def refuse_run(reply: Any, fds: list[int], why: str) -> None:
    """Tell the grader on ``reply`` why its run never started, and close all it sent."""
    with contextlib.suppress(OSError):
        reply.send(json.dumps({"op": "refused", "why": why}).encode())
    reply.close()
    for fd in (*fds[:5], *fds[6:]):
        os.close(fd)


def report_started(reply: Any, run: int, fds: list[int]) -> int:
    """Close what the forked ``run`` took but its "go" and reply, and say it started."""
    import socket

    for fd in (*fds[:4], *fds[6:]):
        os.close(fd)
    handle = os.pidfd_open(run)
    with contextlib.suppress(OSError):  # a grader gone: the run's go is closed
        socket.send_fds(reply, [b'{"op": "started"}'], [handle])
    return handle


def report_end(reply: Any, code: int) -> None:
    """Say on ``reply`` that the run ended with status ``code``, and close it."""
    with contextlib.suppress(OSError):
        reply.send(json.dumps({"op": "ended", "status": code}).encode())
    reply.close()


class RunHost:
    """A host's loop, behind either wall, once it is set up: it forks a run per request
    of the grader's (``start``), however many run at once, ends each run the grader lets
    go (``let_go``) and reports each one's end on its own reply socket (``ended``). What
    its parts share lives here."""

    def __init__(self, libc: Any, link: Any) -> None:
        """Hold the host's libc and the grader's socket; no run is watched yet."""
        import select

        self.libc, self.link = libc, link
        self.poller = select.poll()
        self.letting: dict[int, int] = {}  # a run's "go" -> the run's pidfd, until let go

    def serve(self) -> None:
        """Say ready, then serve the grader and the runs until the grader is gone."""
        import select

        self.link.send(b'{"op": "ready"}')
        self.poller.register(self.link, select.POLLIN)
        while True:
            # One event a poll: handling one can close a descriptor whose number the next
            # event names (a run's "go" and its end come together), or a new one reuses it.
            for ready, _ in self.poller.poll()[:1]:
                if ready == self.link.fileno():
                    if not self.take_request():
                        return  # the grader is gone
                elif ready in self.letting:  # the grader let go of the run (or died): it ends
                    self.let_go(self.unwatch_go(ready))
                else:
                    self.ended(ready)

    def take_request(self) -> bool:
        """Serve the grader's next request; False once the grader is gone."""
        request, fds = request_of(self.link)
        if request is None:
            return False
        if fds:  # else not the grader's request: nothing to answer it on
            self.start(request, fds)
        return True

    def watch(self, handle: int, go: int) -> None:
        """Watch a started run's end (``handle``: its pidfd) and its "go"'s hang-up."""
        import select

        self.letting[go] = handle
        self.poller.register(handle, select.POLLIN)
        self.poller.register(go, 0)  # its hang-up only: the run reads its byte

    def unwatch_go(self, go: int) -> int:
        """Stop watching a run's "go", which the grader closed, and close it: its pidfd."""
        handle = self.letting.pop(go)
        self.poller.unregister(go)
        os.close(go)
        return handle

    def start(self, request: dict[str, Any], fds: list[int]) -> None:
        """Fork the run ``request`` asks for (``fds``: what came with it, ``request_of``)."""
        raise NotImplementedError

    def let_go(self, handle: int) -> None:
        """End the run (``handle``: its pidfd) whose "go" the grader closed."""
        raise NotImplementedError

    def ended(self, ready: int) -> None:
        """Handle the end that the pidfd ``ready`` says."""
        raise NotImplementedError


def serve_process_host(control: int) -> None:
    """The process wall's host: set up once (``host_setup``), then fork a run per request
    and report each one's end on its own reply socket (``ProcessWallHost``). It builds no walls
    (the guard has none but the audit hook each run installs, as a run of its own does):
    the run takes its folder, its uid (a root grader's runs become uid 65534 here, the host
    staying the grader's, so no run signals, traces or reads it) and its environment, and
    dies with the host, which dies with the process that started it."""
    # Imported here first, in this order, as they always were (their files are read before
    # the host's set-up); each part then imports its own by name, from sys.modules.
    import ctypes
    import select  # noqa: F401
    import signal
    import socket

    libc = ctypes.CDLL(None, use_errno=True)
    link = socket.socket(fileno=control)
    setup, _ = host_setup(libc, link)
    if (
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0
        or os.getppid() != setup["parent"]
    ):  # the grader died before it took effect
        return
    ProcessWallHost(libc, link).serve()


class ProcessWallHost(RunHost):
    """The process wall's host's loop (``serve_process_host``): its runs, each forked as is."""

    def __init__(self, libc: Any, link: Any) -> None:
        """The loop of a host set up and bound to die with the grader."""
        super().__init__(libc, link)
        self.fork, self.host = forker(), os.getpid()
        self.runs: dict[int, tuple[int, Any, int]] = {}  # pidfd -> pid, reply, "go"

    def start(self, request: dict[str, Any], fds: list[int]) -> None:
        """Fork the run and tell the grader it started, or why it did not."""
        import socket

        reply = socket.socket(fileno=fds[5])
        try:
            run = self.fork()
        except OSError as exc:
            refuse_run(reply, fds, describe(exc))
            return
        if run == 0:
            self.start_run(request, fds)
        handle = report_started(reply, run, fds)
        self.runs[handle] = (run, reply, fds[4])
        self.watch(handle, fds[4])

    def start_run(self, request: dict[str, Any], fds: list[int]) -> None:
        """The forked run: into its cell (as the grader's uid, which the cell's files are),
        its folder and its uid, then, once the grader says so (a byte on ``go``), the
        agent. The host kills the run when ``go`` closes."""
        import ctypes
        import signal

        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # the host's is SIG_DFL
            read, write, _, _, go, reply = fds[:6]
            take_descriptors(fds)
            os.setsid()  # its group: the host ends it and whatever it started at once
            os.chdir(request["cwd"])
            user = request.get("user")
            if isinstance(user, int):
                os.setgroups([])
                os.setresgid(user, user, user)
                os.setresuid(user, user, user)
            if os.read(go, 1) != b"!":
                os._exit(70)  # the grader went away before the run began
            os.close(go)
            os.close(reply)
            # After the uid, which clears both: its own /proc, and its death with the host.
            if (
                self.libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0) != 0
                or self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0
            ):
                raise OSError(ctypes.get_errno(), "prctl")
            if os.getppid() != self.host:
                os._exit(70)  # the host died before the request took effect
            # It keeps the host's ctypes (``_HOST_ONLY``): a run of its own imports it before
            # its agent, to die with the grader, so either way the agent finds it imported.
            os.environ.clear()
            os.environ.update(request["env"])
        except BaseException as exc:  # the run never returns to the host's loop
            with contextlib.suppress(BaseException):
                os.write(2, f"gradekit: the run could not start: {describe(exc)}\n".encode())
            os._exit(71)
        main(["run", str(read), str(write)], forked=True)
        os._exit(0)

    def let_go(self, handle: int) -> None:
        """Kill the run the grader let go of, and whatever it started."""
        import signal

        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.runs[handle][0], signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        self.runs[handle] = (*self.runs[handle][:2], -1)

    def ended(self, ready: int) -> None:
        """Reap the run whose pidfd says it ended, end its group, and report its status."""
        import signal

        if ready not in self.runs:
            return
        run, reply, go = self.runs.pop(ready)
        self.poller.unregister(ready)
        # Its group while its zombie still holds the number: what it started ends.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run, signal.SIGKILL)
        report_end(reply, reaped(run, ready, go, self.letting, self.poller))


def serve_host(control: int) -> None:
    """The namespaces wall's host (``_harness.pyc host FD``): set up once
    (``NamespacesHost``), try a run's walls and pid 1 (``NamespacesHost.trials``), then
    fork a run per request (after its pid 1), however many run at once, and report each
    one's end on its own reply socket (``RunHost.serve``)."""
    # Imported here first, in this order, as they always were (their files are read before
    # the host's set-up); each part then imports its own by name, from sys.modules.
    import ctypes
    import select  # noqa: F401
    import signal  # noqa: F401
    import socket

    host = NamespacesHost(ctypes.CDLL(None, use_errno=True), socket.socket(fileno=control))
    refused = host.trials()
    if refused:
        host.link.send(json.dumps({"op": "unavailable", "why": refused}).encode())
        return
    host.serve()


def raw_copier(cookie: object, program: bytes) -> tuple[Any, tuple[object, ...]]:
    """A run's copy of itself at a case's start (``copy_case``): libc's ``syscall``, ready
    to call, and its arguments (None where the run cannot copy itself)."""
    import ctypes
    import signal

    # A plain fork through the raw system call, carrying the host's secret where such a
    # fork ignores an argument, the one fork the run's system call filter lets through
    # (``copy_cookie`` in the grader's ``_seccomp``). PyDLL holds the GIL across it, as
    # os.fork does; the copy skips Python's after-fork work, as the host's own forks do,
    # and keeps the run's random state: it stands where the run stood.
    copy_number = _CLONE_NUMBERS.get(os.uname().machine)
    raw_call = (
        ctypes.PyDLL(None, use_errno=True).syscall
        if isinstance(cookie, int) and copy_number is not None and program
        else None
    )
    if raw_call is not None:
        raw_call.restype = ctypes.c_long
        raw_call.argtypes = [ctypes.c_long, *[ctypes.c_ulong] * 5]
    return raw_call, (copy_number, signal.SIGCHLD, 0, cookie, 0, 0)


def seccomp_filter(program: bytes) -> tuple[Any, Any]:
    """The system call filter as prctl takes it (None where the grader sent none), and the
    buffer it points into, to be kept as long as the host lives."""
    import ctypes

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    # Made once, here: a class made in every run copied ~60 pages in each.
    # ``held`` lives as long as the host: the structure holds its address only.
    held = ctypes.create_string_buffer(program, len(program) or 1)
    filter_program = (
        ctypes.byref(Program(len(program) // 8, ctypes.cast(held, ctypes.c_void_p)))
        if program
        else None
    )
    return filter_program, held


def pid1_clone(libc: Any) -> tuple[Any, int | None, int | None]:
    """What starts each run's pid 1 (``NamespacesHost.pid1``): libc's ``clone``, ready to
    call, the address of libc's ``syscall`` it runs, and the system call that only waits
    (None elsewhere than x86-64)."""
    import ctypes

    clone = libc.clone
    clone.restype = ctypes.c_int
    clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    system_call = ctypes.cast(libc.syscall, ctypes.c_void_p).value
    waiting_call = {"x86_64": 34}.get(os.uname().machine)  # SYS_pause
    return clone, system_call, waiting_call


class NamespacesHost(RunHost):
    """The namespaces wall's host (``serve_host``): set up once, it builds each run's walls
    (mounts, network namespace, capabilities, system call filter) in the run, which it
    forks into a pid namespace of its own, as pid 2 after a pid 1 that only waits."""

    def __init__(self, libc: Any, link: Any) -> None:
        """The host's set-up, once, before its trial runs (``trials``)."""
        import ctypes

        super().__init__(libc, link)
        self.get_errno = ctypes.get_errno  # a run's ``check`` after it forgot ctypes
        self.setup, self.host_only = host_setup(libc, link)
        program = bytes.fromhex(self.setup["seccomp"]) if self.setup["seccomp"] else b""
        self.pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        self.fork = forker()
        self.raw_call, self.copy_arguments = raw_copier(self.setup.get("copy_cookie"), program)
        # Network namespaces: no two runs alive at once share one, so two classmates' runs
        # never meet over an abstract Unix socket (nor pass each other descriptors). Making
        # one for each run and letting the kernel tear it down after cost about 2.7 ms of
        # CPU a run, a sixth of a batch's; so the host keeps those its ended runs were in
        # and hands each to the next run. A run leaves nothing in one: its sockets close as
        # it ends (the host reaped it, and it had no process of its own), and it can change
        # nothing else in it (no capability, netlink and /proc/sys/net refused).
        self.home_network = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self.free_networks: list[int] = []
        self.filter_program, self.held = seccomp_filter(program)
        # Each run's pid 1: a process that only waits, made without copying the host (it
        # shares the host's memory, CLONE_VM, and runs one system call, never Python), so
        # that the run is pid 2 (a pid 1 is spared the signals it sends itself). Its
        # handlers are the host's, all default (``host_setup``): no signal from the run
        # makes it run any code. Elsewhere than x86-64 (no pause system call) it is a fork
        # of the host that pauses.
        self.clone, self.system_call, self.waiting_call = pid1_clone(libc)
        # A run: its pidfd -> its pid, its pid 1's pid and stack, its reply socket, its "go".
        self.runs: dict[int, tuple[int, int, Any, Any, int]] = {}
        self.networks: dict[int, int] = {}  # a run's pidfd -> its network namespace
        self.ending: dict[int, tuple[int, Any, Any, int]] = {}  # a pid 1's pidfd -> ...

    def check(self, result: int, what: str) -> None:
        """Raise what the kernel said where a libc call (``what``) returned other than 0."""
        if result != 0:
            number = self.get_errno()
            raise OSError(number, f"{what}: {os.strerror(number)}")

    def mount(
        self, source: str | None, target: str, kind: str | None, flags: int, data: str | None = None
    ) -> None:
        """mount(2), its failure an OSError that names ``target``."""
        self.check(
            self.libc.mount(
                source and source.encode(),
                target.encode(),
                kind and kind.encode(),
                flags,
                data and data.encode(),
            ),
            f"mount {target}",
        )

    def copy_call(self) -> int:
        """The run's copy of itself (``raw_copier``): the child's pid, 0 in the child."""
        assert self.raw_call is not None
        return int(self.raw_call(*self.copy_arguments))

    def new_pid_namespace(self) -> None:
        """The host's next child is pid 1 of a pid namespace of its own, nested in the
        host's, not in the last run's (unshare alone would nest each in the one before, 32
        deep at most)."""
        self.check(self.libc.setns(self.pid_namespace, _CLONE_NEWPID), "setns")
        self.check(self.libc.unshare(_CLONE_NEWPID), "unshare")

    def fork_in_own_pid_namespace(self) -> int:
        """Fork a child that is pid 1 of a pid namespace of its own."""
        self.new_pid_namespace()
        return self.fork()

    def network(self) -> int:
        """A network namespace no run alive is in, as a descriptor (the host's own)."""
        if self.free_networks:
            return self.free_networks.pop()
        self.check(self.libc.unshare(_CLONE_NEWNET), "unshare")
        try:
            return os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            self.check(self.libc.setns(self.home_network, _CLONE_NEWNET), "setns")

    def walls(self, request: dict[str, Any], net: int) -> None:
        """Build the run's walls, in the run, before its agent exists; ``net``: its network
        namespace (``network``)."""
        scratch = self.setup["scratch"]
        self.check(self.libc.setns(net, _CLONE_NEWNET), "setns")
        os.close(net)
        self.check(self.libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWUTS), "unshare")
        self.mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        self.mount_proc()
        original = "/gradekit/original"
        self.mount(os.path.join(scratch, request["source"]), original, None, _MS_BIND | _MS_REC)
        self.mount(
            None, original, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
        )
        self.writable_space(int(request["disk_mb"]), original)
        self.mount_shown(request["shown"])
        # The grading's scratch: no run sees the rest of it.
        self.check(self.libc.umount2(scratch.encode(), _MNT_DETACH), "umount")
        self.check(self.libc.sethostname(b"sandbox", 7), "sethostname")
        os.setsid()
        self.drop_privileges()

    def mount_proc(self) -> None:
        """The run's own /proc, the parts of it that reach the whole machine read-only."""
        self.mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        for part in PROC_READ_ONLY:  # the host's kernel settings, whatever the run's uid
            path = f"/proc/{part}"
            if os.path.lexists(path):
                self.mount(path, path, None, _MS_BIND | _MS_REC)
                self.mount(
                    None,
                    path,
                    None,
                    _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                )

    def writable_space(self, disk_mb: int, original: str) -> None:
        """The run's only writable space, one tmpfs of ``disk_mb``: ``/sandbox`` is a folder
        of it, and the copy of the submission at ``/sandbox/submission`` an overlay whose
        upper layer is another folder of it (the laid-out original read-only below), so
        the copy costs a mount, not the 6-7 ms of copying every file. The tmpfs's own
        mount is then dropped: the run sees ``/sandbox`` and its copy, nothing else of it.
        Where an overlay cannot be mounted the harness copies the files, as without a host.
        """
        layer = "/gradekit/layer"
        self.mount(
            "tmpfs", layer, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={disk_mb << 20},mode=0700"
        )
        for folder, mode in (("sandbox", 0o700), ("upper", 0o755), ("work", 0o700)):
            os.mkdir(f"{layer}/{folder}", mode)
        self.mount(f"{layer}/sandbox", "/sandbox", None, _MS_BIND)
        os.chdir("/sandbox")  # not the host's own /sandbox, under it: no run reaches that
        os.mkdir("/sandbox/tmp")
        if self.setup["overlay"]:
            os.mkdir("/sandbox/submission", 0o755)
            self.mount(
                "overlay",
                "/sandbox/submission",
                "overlay",
                _MS_NOSUID | _MS_NODEV,
                f"lowerdir={original},upperdir={layer}/upper,workdir={layer}/work,userxattr",
            )
        self.check(self.libc.umount2(layer.encode(), _MNT_DETACH), "umount")

    def mount_shown(self, shown: list[list[Any]]) -> None:
        """The files shown to the run (``[FROM, TO, WRITABLE]``), in a read-only tmpfs."""
        scratch = self.setup["scratch"]
        self.mount(
            "tmpfs", "/gradekit/shown", "tmpfs", _MS_NOSUID | _MS_NODEV, "size=65536,mode=0755"
        )
        for origin, target, writable in shown:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            self.mount(os.path.join(scratch, origin), target, None, _MS_BIND)
            if not writable:
                self.mount(
                    None, target, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
                )
        self.mount(None, "/gradekit/shown", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)

    def drop_privileges(self) -> None:
        """The run's death with the host, and no capability, now or ever after."""
        import ctypes
        import signal

        self.check(self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        for capability in range(_LAST_CAP + 1):
            if (
                self.libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0
                and ctypes.get_errno() != errno.EINVAL
            ):  # EINVAL: past the last one
                self.check(-1, "drop a capability from the bounding set")
        header, data = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()
        self.check(self.libc.capset(header, data), "capset")
        self.check(self.libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")

    def confine(self) -> None:
        """The system call filter, last: it refuses ``fork`` and ``unshare``."""
        if self.filter_program is not None:
            self.check(self.libc.prctl(_PR_SET_SECCOMP, 2, self.filter_program, 0, 0), "seccomp")

    def start_run(self, request: dict[str, Any], fds: list[int], net: int) -> None:
        """The forked run, pid 2 of its own pid namespace (``pid1`` holds pid 1): into its
        cell (by itself where the grader handed it the cell's files, else the grader moves
        it), its walls, then, once the grader says so (a byte on ``go``), the agent. The
        host watches ``go``: when it closes (the grader ended the run, or died) the host
        kills the run."""
        import signal

        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # the host's is SIG_DFL
            read, write, _, _, go, reply = fds[:6]
            take_descriptors(fds, net)
            self.walls(request, net)
            if os.read(go, 1) != b"!":
                os._exit(70)  # the grader went away before the run began
            os.close(go)
            os.close(reply)
            self.check(self.libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl")  # its /proc
            for name in self.host_only:
                del sys.modules[name]  # the host's own: the run imports them afresh
            self.confine()
            self.check(self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
            os.environ.clear()
            os.environ.update(request["env"])
        except BaseException as exc:  # the run never returns to the host's loop
            with contextlib.suppress(BaseException):
                os.write(2, f"gradekit: the run's walls failed: {describe(exc)}\n".encode())
            os._exit(71)
        main(["run", str(read), str(write)], self.copy_call if self.raw_call is not None else None)
        os._exit(0)

    def pid1(self) -> tuple[int, Any]:
        """Start the pid 1 of a new pid namespace, which the host's next child (the run)
        is born in too: its pid and the stack it runs on (kept while it lives)."""
        import ctypes
        import signal

        self.new_pid_namespace()
        if self.waiting_call is None:
            child = self.fork()
            if child == 0:
                while True:
                    signal.pause()
            return child, None
        stack = ctypes.create_string_buffer(_PID1_STACK)
        top = (ctypes.addressof(stack) + _PID1_STACK - 64) & ~15
        child = self.clone(self.system_call, top, _CLONE_VM | signal.SIGCHLD, self.waiting_call)
        if child < 0:
            self.check(child, "clone")
        return child, stack

    def trials(self) -> str:
        """Trial runs: whatever the kernel refuses is known before a real run needs it; ""
        when a run's walls and pid 1 stand, else what the kernel refused."""
        try:
            refused = self.trial() or self.trial_pid1()
            if refused and self.setup["overlay"]:  # the copy, as without a host, where it must
                self.setup["overlay"] = False
                refused = self.trial()
        except OSError as exc:
            refused = describe(exc)
        return refused

    def trial(self) -> str:
        """Build one run's walls and end: "" when they stand, else what the kernel refused."""
        said, told = os.pipe()
        net = self.network()
        child = self.fork_in_own_pid_namespace()
        if child == 0:
            try:
                self.walls({"disk_mb": 1, "source": ".", "shown": []}, net)
                self.confine()
            except BaseException as exc:
                os.write(told, describe(exc).encode()[:500])
                os._exit(1)
            os._exit(0)
        os.close(told)
        os.waitpid(child, 0)
        self.free_networks.append(net)
        with os.fdopen(said, "rb") as why:
            return why.read().decode("utf-8", "replace")

    def trial_pid1(self) -> str:
        """Start one pid 1 and end it: "" when it stands, else what the kernel refused."""
        import signal

        child, _stack = self.pid1()
        handle = os.pidfd_open(child)
        signal.pidfd_send_signal(handle, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(handle)
        return ""

    def start(self, request: dict[str, Any], fds: list[int]) -> None:
        """Fork the run after its pid 1, in a network namespace no run alive is in, and
        tell the grader it started, or why it did not."""
        import signal
        import socket

        reply = socket.socket(fileno=fds[5])
        net = -1
        try:
            net = self.network()
            first, stack = self.pid1()
        except OSError as exc:
            first = -1
            why = describe(exc)
        run = self.fork() if first > 0 else -1
        if run == 0:
            self.start_run(request, fds, net)
        if run < 0:
            if first > 0:
                os.kill(first, signal.SIGKILL)
                os.waitpid(first, 0)
                why = "the host could not fork the run"
            if net >= 0:
                self.free_networks.append(net)
            refuse_run(reply, fds, why)
            return
        handle = report_started(reply, run, fds)
        self.runs[handle] = (run, first, stack, reply, fds[4])
        self.networks[handle] = net
        self.watch(handle, fds[4])

    def let_go(self, handle: int) -> None:
        """Kill the run the grader let go of (its pid 1 then ends as ``ended`` says)."""
        import signal

        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        self.runs[handle] = (*self.runs[handle][:4], -1)

    def ended(self, ready: int) -> None:
        """A run ended (reap it, say so, end its pid 1), or its pid 1 did (report the end)."""
        if ready in self.runs:
            self.ran(ready)
        elif ready in self.ending:
            first, _stack, reply, code = self.ending.pop(ready)
            self.poller.unregister(ready)
            os.waitpid(first, 0)
            os.close(ready)
            report_end(reply, code)

    def ran(self, ready: int) -> None:
        """Reap the run whose pidfd (``ready``) says it ended, say so, and kill its pid 1."""
        import select
        import signal

        run, first, stack, reply, go = self.runs.pop(ready)
        self.poller.unregister(ready)
        code = reaped(run, ready, go, self.letting, self.poller)
        self.free_networks.append(self.networks.pop(ready))  # nothing of the run is left in it
        with contextlib.suppress(OSError):
            reply.send(json.dumps({"op": "ran", "status": code}).encode())
        holder = os.pidfd_open(first)
        signal.pidfd_send_signal(holder, signal.SIGKILL)
        self.ending[holder] = (first, stack, reply, code)
        self.poller.register(holder, select.POLLIN)


def main(
    argv: list[str], copy_call: Callable[[], int] | None = None, *, forked: bool = False
) -> None:
    """Configure, fence, run; then leave without waiting for threads the agent left behind.
    ``copy_call``: a host's run can copy itself (``copy_case``); None elsewhere.
    ``forked``: a run the process wall's host forked, which dies with the host."""
    if argv[1:2] == ["host"]:
        serve_host(int(argv[2]))
        os._exit(0)
    if argv[1:2] == ["process"]:
        serve_process_host(int(argv[2]))
        os._exit(0)
    channel = Channel(int(argv[1]), int(argv[2]))
    del sys.argv[1:]  # the pipes' numbers: nothing the agent needs to know
    config = channel.receive()
    hook: list[Callable[[], bool]] = []
    verdict = sealer(channel, str(config.pop("seal", "")), hook)
    # Read once, at start: the agent need not see which seed this run was given, nor where
    # the loader found the interpreter's library (a root grader's readable copy of it).
    for name in HIDDEN:
        os.environ.pop(name, None)
    forget_environment(HIDDEN)
    if "parent" in config:
        if not forked:
            die_with_parent(config["parent"])
        if copy_call is None and config.get("copies"):
            copy_call = process_copier()
    if "copy" in config:
        prepare_sandbox(channel, config)
    add_packages(config.get("site", []))
    if config.get("library"):
        sys.meta_path.insert(0, Library(config["library"]))
    set_limits(config["limits"])
    settle_platform()
    restart = skip_sleeps(config.get("sleep_s"))  # before the wall clock, which reads it
    set_clock(config.get("clock"))
    alive, unheard = install_hook(channel, config["roots"])
    if config.get("hooked"):
        hook.append(alive)
    sys.path.insert(0, config["root"])
    if config["mode"] == "probe_replay":
        probe_replay(channel, config, verdict)
    elif config["mode"] == "cut_point":
        cut_point(channel, config, verdict)
    else:
        run_cases(
            channel, config, verdict, restart, None if copy_call is None else (copy_call, unheard)
        )
    flush_output()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
