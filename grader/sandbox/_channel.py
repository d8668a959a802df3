"""The pipe between the grader and one harness process: JSON lines, never pickle.

The parent's writes never block (a child that stops reading cannot stall the
grader), reads are bounded per line, and everything the child says is a claim
that the sandbox checks before believing it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, Protocol

from grader._model import Limits
from grader.sandbox._hold import Cell
from grader.sandbox._namespaces import become

__all__ = [
    "HARNESS",
    "PYTHON_FLAGS",
    "Child",
    "Event",
    "Process",
    "ProtocolError",
    "Spawn",
    "child_ending",
    "child_name",
    "child_text",
    "clean_text",
    "decode_line",
    "exit_detail",
    "replaced_names",
    "settle_children",
    "strict_loads",
]

HARNESS = Path(__file__).with_name("_harness.py")
# -S: no site at start; the harness puts the package folders on the path itself. Not -I: it
# implies -E, and -E makes the child ignore PYTHONHASHSEED. The environment is built from
# nothing instead, so the only PYTHON* variables the child sees are ours.
PYTHON_FLAGS = ("-S", "-P", "-B")
_MAX_LINE = 32 << 20  # above the largest recording (16 MiB): a bound, not a budget
_WATCH_EVERY_S = 0.1  # how often a watchdog's cell looks at a running child


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# Built once: json.loads with a parse_constant builds a new decoder on every message.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def strict_loads(raw: bytes) -> object:
    """Strict JSON: NaN and Infinity are not JSON, and would break equality of what is kept."""
    return _DECODER.decode(raw.decode("utf-8"))


class Event(Enum):
    ENDED = "ended"
    TIMED_OUT = "timed out"


# Children gone but not yet settled: a forked run's pid 1 still ending (its pid namespace
# torn down), its cell still there. Settled before the next child starts and when a sandbox
# closes, so the grader goes on meanwhile; never more than a child or two behind.
_ending: list[tuple[Process, Cell | None]] = []
_ending_lock = threading.Lock()


def settle_children() -> None:
    """Wait for every ended child's last traces to go (``Process.settle``), then hand its
    cell back (``Cell.release``: kept for the next child, or closed): before a new child
    takes a cell, when a sandbox closes, and at exit."""
    while True:
        with _ending_lock:
            if not _ending:
                return
            proc, cell = _ending.pop(0)
        try:
            proc.settle()
        finally:
            if cell is not None:
                cell.release()


atexit.register(settle_children)


class ProtocolError(Exception):
    """The child said something the protocol does not allow."""


class Child:
    """One harness process and its pipes. Everything it says is a claim to be checked."""

    def __init__(
        self,
        config: Mapping[str, object],
        cwd: Path,
        env: Mapping[str, str],
        outputs: tuple[IO[bytes], IO[bytes]],
        *,
        command: Sequence[str] = (),
        pass_fds: Sequence[int] = (),
        cell: Cell | None = None,
        user: int | None = None,
        spawn: Spawn | None = None,
    ) -> None:
        """Start ``command`` (default: this interpreter on the harness) with two pipe fds.

        ``command`` ends with the harness's path; the fds are appended as its arguments.
        The child joins ``cell`` (its hold on the host: a cgroup, or a watchdog's watch)
        before it execs, then takes ``user`` as its uid and gid when one is given; the cell
        is closed when the child is finished.

        ``spawn``, when given, starts the child instead (a run forked by a host, which is
        handed the two fds and the outputs) and admits it to ``cell`` before it runs.
        """
        settle_children()
        their_read, self._to_child = os.pipe()
        self._from_child, their_write = os.pipe()
        start = list(command) or [sys.executable, *PYTHON_FLAGS, str(HARNESS)]
        self._cell = cell
        self.stopped = ""  # why the watchdog or the kernel stopped the child, once it did
        self._next_watch = time.monotonic() + _WATCH_EVERY_S
        try:
            if spawn is not None:
                self.proc: Process = spawn(their_read, their_write, outputs, cell)
            else:
                self.proc = _Started(
                    subprocess.Popen(
                        [*start, str(their_read), str(their_write)],
                        cwd=cwd,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=outputs[0],
                        stderr=outputs[1],
                        pass_fds=(*pass_fds, their_read, their_write),
                        start_new_session=True,  # its own process group: one killpg ends it all
                        preexec_fn=_joining(cell, user) if cell or user is not None else None,
                    )
                )
        except BaseException:
            os.close(self._to_child)
            os.close(self._from_child)
            if cell is not None:
                cell.close()
            raise
        finally:
            os.close(their_read)
            os.close(their_write)
        os.set_blocking(self._to_child, False)  # a child that never reads cannot block the parent
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._from_child, selectors.EVENT_READ)
        self._inbox, self._scanned, self._outbox = bytearray(), 0, bytearray()
        self._eof = self._finished = False
        self.send(config)

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.finish(time.monotonic())

    def send(self, message: Mapping[str, object]) -> None:
        """Queue one line for the child; written as the pipe accepts it."""
        self._outbox += (json.dumps(message, ensure_ascii=True) + "\n").encode("ascii")
        self._flush()

    @property
    def replying(self) -> bool:
        """Part of the last reply is still unsent: the child has not read it yet."""
        return bool(self._outbox)

    def receive(self, deadline: float) -> dict[str, Any] | Event:
        """The next message, or ENDED once the child closed its pipe, or TIMED_OUT."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:  # before every message: a child that keeps talking still times out
                return Event.TIMED_OUT
            self._watch()
            line = self._take_line()
            if line is not None:
                return decode_line(line)
            if self._eof:
                return Event.ENDED
            watching = self._cell is not None and self._cell.watched
            for key, _ in self._selector.select(
                min(remaining, _WATCH_EVERY_S) if watching else remaining
            ):
                if key.fd == self._from_child:
                    self._read()
                else:
                    self._flush()

    def finish(self, deadline: float) -> tuple[int, bool]:
        """Give the child until ``deadline`` to exit, kill its group, reap it.

        Returns its exit status and whether the parent had to kill it.
        """
        if self._finished:
            return self.proc.wait(), False
        self._finished = True
        exited = self._exits_by(deadline)
        self._kill()
        code = self.proc.wait()
        self._selector.close()
        os.close(self._to_child)
        os.close(self._from_child)
        if self._cell is not None:
            self.stopped = self.stopped or self._cell.over()  # read while the cell exists
        with _ending_lock:
            _ending.append((self.proc, self._cell))
        return code, not exited

    def _kill(self) -> None:
        self.proc.kill()

    def _watch(self) -> None:
        """The watchdog's look at a running child, every tenth of a second at most; past
        its budget, it is killed and ``stopped`` says why."""
        if self._cell is None or not self._cell.watched or self.stopped:
            return
        now = time.monotonic()
        if now < self._next_watch:
            return
        self._next_watch = now + _WATCH_EVERY_S
        self.stopped = self._cell.watch(self.proc.pid)
        if self.stopped:
            self._kill()

    def _exits_by(self, deadline: float) -> bool:
        """Wait for the exit without reaping, so the group id cannot be reused meanwhile:
        woken by the exit itself, and by the watchdog's turn while it watches."""
        while True:
            remaining = max(deadline - time.monotonic(), 0.0)
            watching = self._cell is not None and self._cell.watched and not self.stopped
            if self.proc.exited(min(remaining, _WATCH_EVERY_S) if watching else remaining):
                return True
            if time.monotonic() >= deadline:
                return False
            self._watch()

    def _read(self) -> None:
        chunk = os.read(self._from_child, 1 << 16)
        if chunk:
            self._inbox += chunk
            return
        self._eof = True
        self._selector.unregister(self._from_child)

    def _take_line(self) -> bytes | None:
        end = self._inbox.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self._inbox)
            if self._scanned > _MAX_LINE:
                raise ProtocolError("a message longer than 32 MiB")
            return None
        line = bytes(self._inbox[:end])
        del self._inbox[: end + 1]
        self._scanned = 0
        return line

    def _flush(self) -> None:
        try:
            sent = os.write(self._to_child, self._outbox) if self._outbox else 0
        except BlockingIOError:
            sent = 0
        except BrokenPipeError:
            sent = len(self._outbox)  # the child is gone; its end of file follows
        del self._outbox[:sent]
        waiting = self._to_child in self._selector.get_map()
        if self._outbox and not waiting:
            self._selector.register(self._to_child, selectors.EVENT_WRITE)
        elif waiting and not self._outbox:
            self._selector.unregister(self._to_child)


class Process(Protocol):
    """A started child as ``Child`` holds it: its pid on this host, and how it ends."""

    pid: int

    def exited(self, within: float = 0.0) -> bool:
        """Whether it has exited, or does within ``within`` seconds, without reaping it (so
        its pid cannot be reused)."""

    def kill(self) -> None:
        """Kill it and everything it started."""

    def wait(self) -> int:
        """Wait until it is gone: its exit status, or minus the signal that killed it
        (every later call returns the same)."""

    def settle(self) -> None:
        """After ``wait``: wait until nothing of it is left on the host (a forked run's init
        ends after the run), and let go of it."""


# (the channel's two ends for the child, its outputs, its cell) -> it, in its cell before it
# runs anything
Spawn = Callable[[int, int, tuple[IO[bytes], IO[bytes]], Cell | None], Process]


class _Started:
    """A child this process started itself (``subprocess.Popen``), in a session of its own."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        try:
            self._pidfd = os.pidfd_open(popen.pid)  # readable once it exits: not reaped yet
        except OSError:
            self.kill()  # no way to wait for it: it does not outlive the error
            popen.wait()
            raise

    def exited(self, within: float = 0.0) -> bool:
        return self._pidfd < 0 or bool(select.select([self._pidfd], [], [], within)[0])

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # its unreaped zombie still holds the group

    def wait(self) -> int:
        code = self._popen.wait()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
        return code

    def settle(self) -> None:
        self.wait()  # reaped: its session held all of it


def _joining(cell: Cell | None, user: int | None) -> Callable[[], None]:
    """What the forked child runs before it execs: join its cell as the grader's user (a
    cgroup's files are the grader's to write), then become ``user``."""

    def join() -> None:
        if cell is not None:
            cell.enter()
        if user is not None:
            become(user)

    return join


def decode_line(line: bytes) -> dict[str, Any]:
    try:
        message = strict_loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError("a line that is not JSON") from exc
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a message without an op")
    return message


def child_ending(
    child: Child, event: Event, deadline: float, limits: Limits
) -> tuple[Literal["timeout", "crashed"], str]:
    """End a child that stopped talking; say why, deterministically."""
    timed_out = event is Event.TIMED_OUT
    code, killed = child.finish(time.monotonic() if timed_out else deadline)
    if child.stopped:  # the watchdog or the kernel, past the child's budget
        return "crashed", child.stopped
    if timed_out:
        return "timeout", f"did not finish within {limits.timeout_s:g} s"
    return "crashed", exit_detail(code, killed)


def exit_detail(code: int, killed: bool) -> str:
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


def clean_text(text: str) -> str:
    """``text`` as valid UTF-8: lone surrogates become '?'."""
    return text.encode("utf-8", "replace").decode("utf-8")


def child_text(value: object, limit: int = 300) -> str:
    """The first line of a child's string, bounded; '' for anything else."""
    lines = clean_text(value).strip().splitlines() if isinstance(value, str) else []
    return lines[0][:limit] if lines else ""


def child_name(value: object) -> str | None:
    """A short printable name from the child, or None."""
    if not isinstance(value, str) or not value:
        return None
    return "".join(c if c.isprintable() else "?" for c in clean_text(value)[:100])


def replaced_names(message: Mapping[str, Any]) -> str:
    """The harness functions a ``tampered`` message names, made safe to show."""
    replaced = message.get("replaced")
    if not isinstance(replaced, list):
        return "?"
    return ", ".join(child_name(name) or "?" for name in replaced)
