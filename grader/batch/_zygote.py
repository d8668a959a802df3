"""Workers forked from one pre-imported process: how the batch starts them in milliseconds.

Starting a Python and importing the grader costs about 200 ms, a third of what grading one
submission costs. So the batch starts this zygote once (``python -P -m grader.batch
BATCH_PID``, which runs ``main`` here); it imports the grader's code and then, on request,
forks one worker per submission. It never grades anything itself: every worker starts from
the same untouched process, so nothing of one submission's grading reaches another's, and
each worker is still a process of its own, in a session of its own, with its own memory cap
(``grader.batch._worker``).

The protocol is one JSON object per line. The batch writes ``{"fork": SCRATCH, "name":
FOLDER}`` or ``{"kill": PID}`` on the zygote's stdin, and first ``{"hosts": {"root": FOLDER,
"seeds": [SEED, ...], "preload": [PACKAGE, ...], "wall": NAME}}``: behind the wall NAME
(namespaces, or the process wall) the zygote starts one sandbox host per hash seed
(``grader.sandbox._host``), each having imported the
PACKAGEs (the rubric's that some submission imports), seeing FOLDER, which holds every
worker's SCRATCH, and every worker it forks inherits them, so a grading's runs fork from
hosts already started; the zygote answers each fork, in order, with ``{"forked": PID}`` or
``{"failed": WHY}``, and says ``{"exited": PID, "code": STATUS}`` once it has reaped a
worker (a negative status: the signal that killed it). Only the zygote signals its workers,
and only before it has reaped them, so a pid the system has given to another process is
never killed. A worker reads its request from ``SCRATCH/request``, writes its row to
``SCRATCH/row`` and anything else to ``SCRATCH/stderr``. When its stdin closes or the batch
dies, the zygote kills its workers and ends (and their sandboxed children end with them).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import IO, NoReturn

from grader.batch._worker import die_with
from grader.batch._worker import main as worker_main
from grader.sandbox import share_hosts, warm_walls

__all__ = ["REQUEST", "ROW", "STDERR", "Zygote", "ZygoteGone", "main"]

REQUEST, ROW, STDERR = "request", "row", "stderr"  # a worker's files in its scratch folder
_PR_SET_NAME = 15  # from <linux/prctl.h>: the name ps and top show


class ZygoteGone(RuntimeError):
    """The zygote ended while the batch still needed it."""


class Zygote:
    """The batch's side: start the zygote, ask for workers, wait for them, kill them.

    Thread-safe: each of the batch's threads forks and waits for its own workers.
    """

    def __init__(
        self, env: Mapping[str, str], cwd: Path, hosts: Mapping[str, object] | None = None
    ) -> None:
        # Its own session: Ctrl-C reaches the batch, which stops the workers itself.
        self._process = subprocess.Popen(
            [sys.executable, "-P", "-m", "grader.batch", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._stdin: IO[bytes] = self._process.stdin
        self._stdout: IO[bytes] = self._process.stdout
        self._lock = threading.Lock()  # one fork request and its answer at a time
        self._changed = threading.Condition()
        self._forked: list[dict[str, object]] = []
        self._exited: dict[int, int] = {}
        self._gone = False
        self._reader = threading.Thread(
            target=self._read, args=(self._stdout,), name="gradekit-zygote", daemon=True
        )
        self._reader.start()
        if hosts is not None:  # {"root", "seeds"}: the hosts its workers' runs fork from
            with contextlib.suppress(OSError):  # gone already: the first fork says so
                self._send({"hosts": dict(hosts)})

    @property
    def pid(self) -> int:
        """The zygote's pid: the parent its workers die with."""
        return self._process.pid

    def fork(self, scratch: Path, name: str) -> int:
        """A new worker for the request in ``scratch/request``; its pid."""
        with self._lock:
            try:
                self._send({"fork": str(scratch), "name": name})
            except OSError as exc:  # its stdin is closed: it is gone
                raise ZygoteGone("the grader's zygote ended") from exc
            with self._changed:
                self._changed.wait_for(lambda: self._forked or self._gone)
                if not self._forked:
                    raise ZygoteGone("the grader's zygote ended")
                answer = self._forked.pop(0)
        if "failed" in answer:
            raise OSError(str(answer["failed"]))
        return int(str(answer["forked"]))

    def wait(self, pid: int, timeout: float) -> int | None:
        """The worker's exit status once it has ended; None if it still runs at ``timeout``."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exited or self._gone, timeout)
            if pid in self._exited:
                return self._exited.pop(pid)
            if self._gone:
                raise ZygoteGone("the grader's zygote ended")
            return None

    def kill(self, pid: int) -> None:
        """SIGKILL the worker, unless it has already ended."""
        with contextlib.suppress(OSError):
            self._send({"kill": pid})

    def close(self) -> None:
        """End the zygote: it kills whatever worker still runs, then exits."""
        with contextlib.suppress(OSError):
            self._stdin.close()
        self._process.wait()
        self._reader.join()
        self._stdout.close()

    def _send(self, message: Mapping[str, object]) -> None:
        self._stdin.write(json.dumps(message).encode("utf-8") + b"\n")
        self._stdin.flush()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            message = json.loads(line)
            with self._changed:
                if "exited" in message:
                    self._exited[int(message["exited"])] = int(message["code"])
                else:
                    self._forked.append(message)
                self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()


# -- the zygote's side ------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """Fork workers on request until stdin closes; ``argv[1]``: the batch's pid."""
    die_with(int(argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm_walls()  # bubblewrap probed once here, not once per worker: forks inherit the answer
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)  # wakes the selector
    workers: set[int] = set()
    inbox = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(0, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        own = (wake_read, wake_write, selector.fileno())
        while True:
            for key, _ in selector.select():
                if key.fd == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_read, 4096):
                            pass
                    _reap(workers, block=False)
                    continue
                data = os.read(0, 1 << 16)
                if not data:  # the batch is done, or gone
                    for pid in workers:
                        os.kill(pid, signal.SIGKILL)
                    _reap(workers, block=True)
                    return 0
                inbox += data
                while b"\n" in inbox:
                    line, _, rest = bytes(inbox).partition(b"\n")
                    inbox[:] = rest
                    _handle(json.loads(line), workers, own)


def _handle(message: dict[str, object], workers: set[int], own: tuple[int, ...]) -> None:
    if "hosts" in message:  # before the first fork: every worker inherits them
        hosts = message["hosts"]
        assert isinstance(hosts, dict)
        share_hosts(
            Path(str(hosts["root"])),
            [int(seed) for seed in hosts["seeds"]],
            [str(name) for name in hosts.get("preload", [])],
            str(hosts.get("wall", "namespaces")),
        )
        return
    if "kill" in message:
        pid = int(str(message["kill"]))
        if pid in workers:  # not reaped yet, so the pid is still this worker's
            os.kill(pid, signal.SIGKILL)
        return
    try:
        pid = os.fork()
    except OSError as exc:
        _say({"failed": f"{type(exc).__name__}: {exc}"})
        return
    if pid == 0:
        _become_worker(Path(str(message["fork"])), str(message["name"]), own)
    workers.add(pid)
    _say({"forked": pid})


def _reap(workers: set[int], *, block: bool) -> None:
    while workers:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        workers.discard(pid)
        _say({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _say(message: Mapping[str, object]) -> None:
    data = json.dumps(message).encode("utf-8") + b"\n"
    with contextlib.suppress(BrokenPipeError):  # a batch that died: stdin closes next
        while data:
            data = data[os.write(1, data) :]


def _become_worker(scratch: Path, name: str, own: tuple[int, ...]) -> NoReturn:
    """In the forked child: drop the zygote's fds and signals, become a worker, exit."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGINT):
            signal.signal(number, signal.SIG_DFL)
        for fd in own:
            os.close(fd)
        os.setsid()  # its own session: a budget kill reaches the worker and nothing else
        _name(f"gradekit {name}")
        os.chdir(scratch)
        _redirect(0, scratch / REQUEST, os.O_RDONLY)
        _redirect(1, scratch / ROW, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        _redirect(2, scratch / STDERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.argv = ["grader.batch._worker", name]
        code = worker_main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _redirect(fd: int, path: Path, flags: int) -> None:
    opened = os.open(path, flags | os.O_NOFOLLOW, 0o600)
    os.dup2(opened, fd)
    os.close(opened)


def _name(name: str) -> None:
    """What ``ps -o comm`` and ``top`` show for this worker (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
