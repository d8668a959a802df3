"""Runs forked from a host: behind namespaces, runs share one interpreter per hash seed
instead of each starting bubblewrap and Python.

A run behind namespaces used to cost about 69 ms of CPU before its first case: bubblewrap
(16), the interpreter's start (14), the harness's imports (14), the copy of the submission
(7) and the import of the agent with the kit (19); a grading makes 13 of them. A **host**
pays for bubblewrap, the interpreter, the harness and the kit once: an interpreter under one
hash seed (a fork cannot change ``PYTHONHASHSEED``) that never runs student code. For each
run it forks the run into a pid namespace of its own (``serve_host`` in ``_harness.py``),
and the run builds its own walls before its agent exists:

- pid 2 of a pid namespace of its own, with its own ``/proc``; its pid 1 only waits (a
  clone sharing the host's memory, made without copying it), so the run sees and signals
  no host, no grader and no other run;
- its own mount, ipc and uts namespaces: one tmpfs of ``disk_mb`` for ``/sandbox`` and the
  run's copy of the submission (an overlay of the laid-out copy, or a copy where an overlay
  cannot be mounted), its trace files and the probe's cassette bound one by one, and the
  scratch folder the host sees unmounted;
- a session of its own; every capability dropped (the bounding set too), ``no_new_privs``,
  then the same system call filter bubblewrap loads for a child of its own.

The grader admits the run to its cell (``Cell.admit``) before its agent exists, holds it
by a pidfd, and keeps a pipe ("go") open while it holds the run: the host kills the run
when the pipe closes, so a run dies with the process that started it, as a child of its
own bubblewrap does. A run never returns to the host's loop.

Behind the process wall the same hosts fork runs with no walls (``serve_process_host``,
``Host(..., process_wall=True)``), only where a grading or a batch started them ahead: the host
stays the grader's user and is not dumpable, each run takes the run's uid (a root grader's:
65534) as it forks, so no run signals, traces or reads its host.

A batch's zygote starts one host per seed of the draw key's pool (``share``) and its workers
inherit them; a grading elsewhere starts the hosts it needs (``Hosts``) and ends them. The
host keeps CAP_SYS_ADMIN, CAP_DAC_OVERRIDE and CAP_SETPCAP in its own user namespace only.
Where the kernel refuses any of it (a container without nested namespaces, say), the first
host's trial run says why, and every run of this process starts its own bubblewrap as
before (so does every run after a host could not start one: ``refuse_hosts``).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import secrets
import select
import signal
import socket
import subprocess
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from grader.sandbox._channel import PYTHON_FLAGS, Process, Spawn
from grader.sandbox._hold import Cell
from grader.sandbox._namespaces import (
    KIT,
    Bind,
    become,
    bubblewrap,
    bwrap_argv,
    interpreter,
    process_interpreter,
)
from grader.sandbox._seccomp import allow_list_filter

__all__ = [
    "HOST_SCRATCH",
    "SHOWN",
    "Host",
    "Hosts",
    "end_shared",
    "hosts_unavailable",
    "process_wall_request",
    "refuse_hosts",
    "run_request",
    "share",
    "spawning",
]

HOST_SCRATCH = f"{KIT}/scratch"  # the grading's scratch folder, as a host sees it
SHOWN = f"{KIT}/shown"  # the read-only files a run is shown (the probe's cassette)
_READY_S = 60.0  # a host that has not answered by then is not going to
_unavailable: list[str] = []  # why hosts cannot run here, once one said so


def hosts_unavailable() -> str:
    """Why runs cannot fork from hosts in this process ("" while they can)."""
    return _unavailable[0] if _unavailable else ""


def refuse_hosts(why: str) -> None:
    """From now on, every run of this process starts its own bubblewrap, because of ``why``
    (a host that could not start a run: a cgroup that would not admit it, a host that
    died), rather than pay for a host that fails again."""
    _unavailable.append(why)


class Host:
    """One host: bubblewrap, an interpreter under ``hashseed``, the harness and the kit
    loaded (and ``preload``, the packages its runs import), seeing ``scratch``; it forks a
    run each time ``spawn`` asks, from any process that holds it (a batch's workers share
    the zygote's)."""

    def __init__(
        self,
        scratch: Path,
        hashseed: int,
        user: int | None,
        harness: Path,
        library: Path,
        library_inside: str,
        harness_inside: str,
        *,
        wait: bool = True,
        preload: Sequence[str] = (),
        process_wall: bool = False,
    ) -> None:
        """``process_wall``: the process wall's host (``serve_process_host``), no bubblewrap:
        it runs as this process's user, and each run takes ``user`` as it forks
        (``process_wall_request``)."""
        setup: dict[str, object] = {"preload": list(preload)}
        if process_wall:
            python, extra, site = process_interpreter()
            argv = [python, *PYTHON_FLAGS, str(harness), "process"]
            env, user = {**_host_environment(hashseed), **extra}, None
            setup |= {"site": list(site), "library": str(library), "parent": os.getpid()}
        else:
            bwrap_path, why = bubblewrap()
            if bwrap_path is None:
                raise OSError(why)
            python, binds, site = interpreter()
            binds += (
                Bind(str(harness), harness_inside),
                Bind(str(library), library_inside),
                Bind(str(scratch), HOST_SCRATCH, writable=True),
            )
            argv = [
                *bwrap_argv(bwrap_path, binds, disk_mb=1, seccomp_fd=None, host=True),
                python,
                *PYTHON_FLAGS,
                harness_inside,
                "host",
            ]
            env = _host_environment(hashseed)
            cookie = secrets.randbits(64)  # the one fork its runs may make: copy_case's
            program = allow_list_filter(platform.machine(), copy_cookie=cookie)
            setup |= {
                "site": list(site),
                "library": library_inside,
                "scratch": HOST_SCRATCH,
                "seccomp": program.hex() if program else "",
                "copy_cookie": cookie,
                # The run's copy is an overlay: the laid-out files are its own (the
                # grader's, or given to uid 65534 for a root grader's runs:
                # ``_own_laid_out``).
                "overlay": True,
            }
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._link = ours
        self.scratch = scratch
        try:
            self._proc = subprocess.Popen(
                [*argv, str(theirs.fileno())],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                preexec_fn=None if user is None else (lambda: become(user)),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._link.settimeout(_READY_S)
        self._told: OSError | None = None
        try:
            self._link.send(json.dumps(setup).encode("ascii"))
        except OSError as exc:
            self._told = exc
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait for the host's word that it forks runs; ``OSError``, the host ended, when it
        cannot. ``Host(..., wait=False)`` then ``ready``: hosts start side by side."""
        try:
            if self._told is not None:
                raise self._told
            said = self._receive()
        except OSError as exc:
            said = {"op": "unavailable", "why": f"the host did not answer ({exc})"}
        if said.get("op") != "ready":
            self.close()
            raise OSError(str(said.get("why") or "the host ended before it was ready"))
        self._link.settimeout(None)

    def spawn(
        self, request: Mapping[str, object], fds: Sequence[int], cell: Cell | None
    ) -> Process:
        """Fork one run, told ``request`` and handed ``fds`` (the channel's two ends, its
        stdout and stderr), in ``cell`` before it starts: the run joins the cell itself
        where the cell allows (``Cell.entries``), else this process admits it. The run then
        waits for its configuration on the channel. Safe from several processes at once:
        the answers come on a socket of this run's own."""
        reply, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        go_read, go_write = os.pipe()
        entries = cell.entries() if cell is not None else []
        handles: list[int] = []
        try:
            try:
                socket.send_fds(
                    self._link,
                    [json.dumps(request).encode("ascii")],
                    [*fds, go_read, theirs.fileno(), *entries],
                )
            finally:
                for fd in (go_read, *entries):
                    os.close(fd)
                theirs.close()
            waiting = {"started", "joined"} if entries else {"started"}
            while waiting:  # the host's word and the run's, in either order
                message, got, _, _ = socket.recv_fds(reply, 1 << 16, 1)
                handles += got
                said = _said(message)
                if said.get("op") not in waiting or (said["op"] == "started") != bool(got):
                    why = said.get("why") or "the host did not fork the run"
                    raise OSError(f"the run did not start: {why}")
                waiting.discard(said["op"])
        except BaseException:
            for handle in handles:
                os.close(handle)
            reply.close()
            os.close(go_write)
            raise
        forked = _Forked(reply, handles[0], go_write)
        try:
            if cell is not None and not entries:
                cell.admit(forked.pid)
            os.write(go_write, b"!")
        except BaseException:
            forked.kill()
            forked.settle()
            raise
        return forked

    def close(self) -> None:
        """End the host (and any run it still holds)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self._link.close()

    def _receive(self) -> dict[str, Any]:
        return _said(self._link.recv(1 << 16))


class _Forked:
    """A run a host forked: its pidfd (pid 2 of its own pid namespace), the socket the host
    and the run answer on, and ``go``, which the run dies without.

    The run is over once the host says "ran" (the run, and everything it held, is gone) or
    "ended" (its pid 1 ended too), or the socket ends. ``wait`` returns then; ``settle``
    waits for the pid 1's end, which ends its pid namespace (a few RCU
    grace periods), and which nothing of the grading needs to wait for."""

    _LET_GO_S = 5.0  # how long the host has to end the run once let go, before it is killed

    def __init__(self, reply: socket.socket, pidfd: int, go: int) -> None:
        self._reply, self._pidfd, self._go = reply, pidfd, go
        self.pid = _pid_of(pidfd)
        self._code: int | None = None  # the run's status, once it is over
        self._ended = False  # the host reaped the run's pid 1, or is gone

    def exited(self, within: float = 0.0) -> bool:
        return self._hear(within)

    def kill(self) -> None:
        """Let go of the run (``go`` closes): the host kills it, reaps it and says so."""
        if self._go >= 0:
            os.close(self._go)
            self._go = -1

    def wait(self) -> int:
        if self._code is None and not self._hear(self._LET_GO_S if self._go < 0 else None):
            with contextlib.suppress(ProcessLookupError):  # a host that did not end it
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            self._hear(None)
        assert self._code is not None
        return self._code

    def settle(self) -> None:
        self.wait()
        if self._reply.fileno() < 0:  # settled already
            return
        while not self._ended:
            self._take(self._reply.recv(1 << 16))
        self._reply.close()
        os.close(self._pidfd)
        self.kill()

    def _hear(self, within: float | None) -> bool:
        """Whether the run is over, reading what the socket says within ``within`` seconds
        (None: as long as it takes)."""
        while self._code is None:
            if not select.select([self._reply], [], [], within)[0]:
                return False
            self._take(self._reply.recv(1 << 16))
        return True

    def _take(self, raw: bytes) -> None:
        said = _said(raw)
        status = said.get("status")
        if said.get("op") != "ran":  # "ended", or nothing: the host is gone
            self._ended = True
        if self._code is None:
            self._code = status if isinstance(status, int) else -int(signal.SIGKILL)


def _said(raw: bytes) -> dict[str, Any]:
    """A host's message (an empty one: it ended)."""
    try:
        said = json.loads(raw) if raw else {}
    except ValueError:
        said = {}
    return said if isinstance(said, dict) else {}


def _pid_of(pidfd: int) -> int:
    """The pid of a pidfd's process, as this process's pid namespace numbers it."""
    with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as info:
        for line in info:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise OSError("the run's pidfd names no process")


def _host_environment(hashseed: int) -> dict[str, str]:
    """A host's whole environment; each run replaces it with its own."""
    return {
        "PATH": "/usr/bin:/bin",
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": str(hashseed),
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


# A host's key: its hash seed, its runs' user, and whether it is the process wall's.
_Key = tuple[int, int | None, bool]
_shared: dict[_Key, Host] = {}  # a batch's hosts, by hash seed and user
_shared_root: list[Path] = []  # the folder every grading of the batch has its scratch in
_shared_preload: set[str] = set()  # the packages the batch's hosts imported before forking


def share(
    root: Path, seeds: Sequence[int], user: int | None, *, preload: Sequence[str] = (), **kit: Any
) -> None:
    """Start the hosts every grading of a batch forks from: one per seed of the draw key's
    pool, seeing ``root``, the folder the batch gives each worker a scratch folder in, each
    having imported ``preload`` (the rubric's packages some submission of the batch
    imports). Run by the batch's zygote before it forks workers, which inherit them; they
    end with it."""
    _shared_root[:] = [root.resolve()]
    _shared_preload.clear()
    _shared_preload.update(preload)
    starting: dict[_Key, Host] = {}
    process_wall = bool(kit.get("process_wall"))
    for seed in seeds:  # all started, then each waited for: they start side by side
        if (seed, user, process_wall) not in _shared and not _unavailable:
            try:
                starting[(seed, user, process_wall)] = Host(
                    root.resolve(), seed, user, **kit, wait=False, preload=preload
                )
            except OSError as exc:
                refuse_hosts(str(exc) or type(exc).__name__)
    for key, host in starting.items():
        if _unavailable:  # one could not start: runs start their own bubblewrap instead
            host.close()
            continue
        try:
            host.ready()
            _shared[key] = host
        except OSError as exc:
            refuse_hosts(str(exc) or type(exc).__name__)


def end_shared() -> None:
    """End the hosts ``share`` started (a batch's end does, by ending its zygote)."""
    _close_all(_shared)
    _shared_root.clear()


class Hosts:
    """The hosts of one grading: one per hash seed and host user, the batch's where it
    shares one (``share``), else started as its runs need them, all seeing the grading's
    scratch folder; its own are ended by ``close`` (or when this object is collected).

    Gradings in threads of one process may share one (``check``'s two gradings, under one
    scratch folder, draw the same seeds): a host is started once, whichever asks first."""

    def __init__(self) -> None:
        self.scratch: Path | None = None
        # The packages every host of the grading imports before it forks (``Host``'s
        # ``preload``): the grading's, set before its first host starts.
        self.preload: tuple[str, ...] = ()
        # The rubric's packages the submission ships a folder or module of itself: its runs
        # import its own, so none of them forks from a host that imported the installed one.
        self.shipped: frozenset[str] = frozenset()
        self._hosts: dict[_Key, Host] = {}
        self._starting: dict[_Key, Host] = {}  # ``start``'s, not waited for
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _close_all, self._hosts, self._starting)

    def start(self, seeds: Sequence[int], user: int | None, **kit: Any) -> None:
        """Start the hosts for ``seeds`` side by side, not waiting for them (``host`` waits
        for each as its first run needs it): a grading's runs then wait for one start of
        five, while the grading reads and lays out the submission, not five in a row."""
        if _unavailable or self.scratch is None:
            return
        self.scratch.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._start(self.scratch, seeds, user, kit)

    def _start(
        self, scratch: Path, seeds: Sequence[int], user: int | None, kit: Mapping[str, Any]
    ) -> None:
        for seed in dict.fromkeys(seeds):
            key = (seed, user, bool(kit.get("process_wall")))
            if key in self._hosts or key in self._starting or self._shares(key):
                continue
            try:
                self._starting[key] = Host(
                    scratch, seed, user, **kit, wait=False, preload=self.preload
                )
            except OSError as exc:
                refuse_hosts(str(exc) or type(exc).__name__)
                return

    def _shares(self, key: _Key) -> bool:
        """Whether the batch's host for ``key`` serves this grading's runs: where it
        imported every package the grading's runs would, and none the submission ships
        itself (a grading the batch's scan did not foresee has hosts of its own)."""
        return (
            key in _shared
            and self.scratch is not None
            and bool(_shared_root)
            and self.scratch.is_relative_to(_shared_root[0])
            and _shared_preload.issuperset(self.preload)
            and _shared_preload.isdisjoint(self.shipped)
        )

    def host(
        self, hashseed: int, user: int | None, *, started: bool = False, **kit: Any
    ) -> Host | None:
        """The host for ``hashseed`` (started on first use, unless ``started``: then only
        one started already, by ``start`` or the batch), or None where hosts cannot run
        here (then the run starts its own bubblewrap or interpreter)."""
        if _unavailable or self.scratch is None:
            return None
        key = (hashseed, user, bool(kit.get("process_wall")))
        if self._shares(key):
            return _shared[key]
        with self._lock:  # another grading's thread waits for the host this one starts
            if started and key not in self._hosts and key not in self._starting:
                return None
            return self._host(self.scratch, key, kit)

    def _host(self, scratch: Path, key: _Key, kit: Mapping[str, Any]) -> Host | None:
        hashseed, user, _ = key
        found = self._hosts.get(key)
        if found is None:
            try:
                started = self._starting.pop(key, None)
                if started is None:
                    found = Host(scratch, hashseed, user, **kit, preload=self.preload)
                else:
                    found = started
                    started.ready()
            except OSError as exc:
                refuse_hosts(str(exc) or type(exc).__name__)
                return None
            self._hosts[key] = found
        return found

    def drop(self, host: Host) -> None:
        """Forget ``host``, which could not start a run, ending it if it is this grading's
        own (the batch's zygote ends the batch's)."""
        for key in [key for key, found in _shared.items() if found is host]:
            del _shared[key]
        for key in [key for key, found in self._hosts.items() if found is host]:
            del self._hosts[key]
            host.close()

    def close(self) -> None:
        self._finalizer()


def _close_all(*hosts: dict[_Key, Host]) -> None:
    for each in hosts:
        for host in each.values():
            host.close()
        each.clear()


def run_request(
    env: Mapping[str, str],
    disk_mb: int,
    source: Path,
    scratch: Path,
    shown: Sequence[tuple[Path, str, bool]],
) -> dict[str, object]:
    """What a host is told to fork a run with: its environment, its tmpfs's size, the
    laid-out submission and the files it is shown, as paths under ``scratch``."""
    return {
        "op": "run",
        "env": dict(env),
        "disk_mb": disk_mb,
        "source": str(source.relative_to(scratch)),
        "shown": [
            [str(path.relative_to(scratch)), inside, writable] for path, inside, writable in shown
        ],
    }


def process_wall_request(env: Mapping[str, str], cwd: Path, user: int | None) -> dict[str, object]:
    """What the process wall's host is told to fork a run with: its environment, its
    working folder (its copy of the submission) and the uid it takes (None: the host's)."""
    return {"op": "run", "env": dict(env), "cwd": str(cwd), "user": user}


def spawning(host: Host, request: Mapping[str, object]) -> Spawn:
    """``Child``'s ``spawn`` for a run forked by ``host``."""

    def spawn(
        read: int, write: int, outputs: tuple[IO[bytes], IO[bytes]], cell: Cell | None
    ) -> Process:
        return host.spawn(request, (read, write, outputs[0].fileno(), outputs[1].fileno()), cell)

    return spawn
