"""What holds one sandboxed child on the host: a cgroup of its own, or a watchdog.

The rubric's ``[limits]`` cap one process (RLIMIT_AS, RLIMIT_NPROC); a cgroup caps the whole
child. Its ``memory.max`` counts every page the child holds, the pages of its in-memory
scratch included; its ``pids.max`` counts every task, threads included, even as root, where
RLIMIT_NPROC does not apply; its CPU is one core at most. ``host_hold()`` decides once per
process which of three holds here:

- ``CgroupV2``: the unified hierarchy, where this process's own cgroup is a subtree it may
  write (a container with its own cgroup namespace and a writable ``/sys/fs/cgroup``, a
  systemd unit with ``Delegate=yes``);
- ``CgroupV1``: the legacy memory and pids hierarchies (and cpu, where mounted), where they
  are writable (as root);
- ``Watchdog``: neither. The parent counts the child's tasks and resident memory every tenth
  of a second and kills it past the limits: it stops a child after the fact, where a cgroup
  refuses the task or the page.

Each child gets a ``Cell``: made before it starts, entered by the forked child before it
runs anything (``enter``, from ``Child``'s ``preexec_fn``), watched while it runs, read
after it ends (``over``: why the kernel or the watchdog stopped it), then emptied and
removed (``close``), or handed back (``release``). A cgroup handed back is emptied and kept
for the next child of the same budget in this process (``cell`` takes it again), since a
grading's dozen children run one after another and making and removing a cgroup costs more
than the rest of the child's bookkeeping; ``close_spare_cells`` removes what is kept (a
sandbox does when it closes). A kept cgroup holds no task, and its out-of-memory count is
read from where it stood when it was taken again. The threat model is in docs/sandbox.md.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import itertools
import os
import re
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from grader._model import Limits

__all__ = [
    "Budget",
    "Cell",
    "CgroupV1",
    "CgroupV2",
    "Hold",
    "Watchdog",
    "close_spare_cells",
    "host_hold",
]

_CPU_PERIOD_US = 100_000  # a quota of one period per period: one core
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_NAMES = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Budget:
    """What one child may hold on the host, whatever holds it."""

    memory_mb: int  # its memory and its in-memory scratch together
    tasks: int  # processes and threads at once

    @classmethod
    def of(cls, limits: Limits) -> Budget:
        return cls(limits.memory_mb + limits.disk_mb, limits.processes)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb << 20

    def memory_over(self) -> str:
        return (
            f"killed: it held more than its {self.memory_mb} MiB of host memory "
            "(memory_mb and disk_mb together)"
        )

    def tasks_over(self) -> str:
        return f"killed: it ran more than its {self.tasks} tasks (processes, threads included)"


class Cell:
    """One child's place in its hold."""

    watched: ClassVar[bool] = False  # the parent calls ``watch`` while the child runs

    def enter(self) -> None:
        """Join this cell; run by the forked child before it execs (async-signal-safe
        enough: opens, writes and closes, no allocation worth naming)."""

    def admit(self, pid: int) -> None:
        """Move the child ``pid`` into this cell: a child this process did not start
        itself (a host forked it), before it is told anything."""

    def entries(self) -> list[int]:
        """Files, opened for writing here, to which a single-threaded child writes ``0`` to
        join this cell itself (a host's forked run); the caller closes them. Empty where
        only ``admit`` can put it there."""
        return []

    def watch(self, pid: int) -> str:
        """While the child runs: "" within its budget, else why it must be killed."""
        return ""

    def over(self) -> str:
        """After it ended: why the kernel stopped it, "" when nothing did."""
        return ""

    def close(self) -> None:
        """End whatever is left in the cell and remove it."""

    def release(self) -> None:
        """The child is done with the cell: ``close`` it, unless it can be kept for the
        next child (a cgroup's, ``_CgroupCell.release``)."""
        self.close()


class Hold(ABC):
    """What holds children on this host; ``description`` goes in the isolation line."""

    description: str

    @abstractmethod
    def cell(self, budget: Budget) -> Cell:
        """A new cell for one child."""


# -- cgroups -----------------------------------------------------------------------------


class _CgroupCell(Cell):
    """A cgroup directory per controller hierarchy (one in v2), made and set by the parent.

    ``own``: the file in each through which a task moves itself alone, or "" for none.
    Moving a whole process (``cgroup.procs``, or another task's id) takes the kernel's global
    lock on every thread group, and entering it costs an RCU grace period: about 8 ms on a
    2-CPU virtual machine, and a grading starts 13 children. A thread that writes ``0`` to
    v1's ``tasks`` skips that lock; a child still single-threaded takes its process along.
    """

    def __init__(
        self,
        folders: Sequence[Path],
        settings: Sequence[tuple[str, str]],
        own: str = "",
        budget: Budget | None = None,
    ) -> None:
        self.folders = tuple(folders)
        self.budget = budget or Budget(0, 0)
        self._kills = 0  # the out-of-memory kills counted before this child's (a kept cell)
        made: list[Path] = []
        try:
            for folder in self.folders:
                folder.mkdir()
                made.append(folder)
            for name, value in settings:
                for folder in self.folders:
                    _set(f"{folder}/{name}", value.encode("ascii"))
        except BaseException:
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        self._procs = [str(folder / "cgroup.procs") for folder in self.folders]
        self._own = [str(folder / own) for folder in self.folders] if own else []

    def enter(self) -> None:  # 0: the writer itself, its only thread in a preexec_fn
        self._join(b"0", self._own or self._procs)

    def admit(self, pid: int) -> None:
        self._join(str(pid).encode("ascii"), self._procs)

    def entries(self) -> list[int]:
        opened: list[int] = []
        try:
            for path in self._own:
                opened.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
        except BaseException:
            for fd in opened:
                os.close(fd)
            raise
        return opened

    @staticmethod
    def _join(pid: bytes, paths: Sequence[str]) -> None:
        for path in paths:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def over(self) -> str:
        return self.budget.memory_over() if self._oom_kills() > self._kills else ""

    def _oom_kills(self) -> int:
        """The kernel's count of tasks it killed in this cgroup for memory, ever."""
        return 0

    def release(self) -> None:
        """Kept for the next child of its budget when every folder is empty within a moment
        (what the child left is killed first); closed otherwise."""
        if all(_empty(folder) for folder in self.folders):
            self._kills = self._oom_kills()
            with _SPARE_LOCK:
                _SPARE.setdefault(self.budget, []).append(self)
        else:
            self.close()

    def close(self) -> None:
        for folder in self.folders:
            _empty(folder)
            for _ in range(200):  # a killed task leaves its cgroup a moment after it dies
                try:
                    folder.rmdir()
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOENT:
                        break
                    if exc.errno != errno.EBUSY:
                        raise
                    time.sleep(0.005)


def _set(path: str, value: bytes) -> None:
    """Write a cgroup's setting, where its hierarchy has the file (a v1 cell's settings are
    each in one of its folders): plain system calls, 13 cells a grading."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return
    try:
        os.write(fd, value)
    finally:
        os.close(fd)


def _empty(folder: Path) -> bool:
    """Kill every task left in a cgroup (each, or ``cgroup.kill`` where the kernel has it);
    whether it holds none now (within about 0.2 s)."""
    kill = folder / "cgroup.kill"
    for turn in range(100):
        try:
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except OSError:
            return False
        if not pids:
            return True
        if turn == 0 and kill.exists():
            with contextlib.suppress(OSError):
                kill.write_text("1")
        else:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)
    return False


# Cells handed back (``_CgroupCell.release``), by budget: the next child's, in this process.
_SPARE: dict[Budget, list[_CgroupCell]] = {}
_SPARE_LOCK = threading.Lock()


def close_spare_cells() -> None:
    """Remove every cell kept for a next child: when a sandbox closes, and at exit."""
    with _SPARE_LOCK:
        spare = [cell for cells in _SPARE.values() for cell in cells]
        _SPARE.clear()
    for cell in spare:
        cell.close()


def _forget_spare_cells() -> None:
    """In a forked child: the cells kept are its parent's, never its own to take."""
    global _SPARE_LOCK
    _SPARE_LOCK = threading.Lock()  # a lock another thread held at the fork stays held
    _SPARE.clear()


atexit.register(close_spare_cells)
os.register_at_fork(after_in_child=_forget_spare_cells)


def _spare(budget: Budget) -> _CgroupCell | None:
    with _SPARE_LOCK:
        cells = _SPARE.get(budget)
        return cells.pop() if cells else None


def _counter(path: Path, name: str) -> int:
    """A named count in a cgroup's key-value file (``memory.events``, ``oom_control``)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


class _V2Cell(_CgroupCell):
    def __init__(self, folder: Path, budget: Budget) -> None:
        super().__init__(
            [folder],
            [
                ("memory.max", str(budget.memory_bytes)),
                ("memory.swap.max", "0"),
                ("memory.oom.group", "1"),
                ("pids.max", str(budget.tasks)),
                ("cpu.max", f"{_CPU_PERIOD_US} {_CPU_PERIOD_US}"),
            ],
            budget=budget,
        )

    def _oom_kills(self) -> int:
        return _counter(self.folders[0] / "memory.events", "oom_kill")


class _V1Cell(_CgroupCell):
    def __init__(self, folders: Sequence[Path], budget: Budget) -> None:
        # memsw (memory and swap) after the memory limit: the kernel keeps it the larger.
        super().__init__(
            folders,
            [
                ("memory.limit_in_bytes", str(budget.memory_bytes)),
                ("memory.memsw.limit_in_bytes", str(budget.memory_bytes)),
                ("pids.max", str(budget.tasks)),
                ("cpu.cfs_period_us", str(_CPU_PERIOD_US)),
                ("cpu.cfs_quota_us", str(_CPU_PERIOD_US)),
            ],
            own="tasks",
            budget=budget,
        )

    def _oom_kills(self) -> int:
        return _counter(self.folders[0] / "memory.oom_control", "oom_kill")


class CgroupV2(Hold):
    """Children in cgroups under this process's own, in the unified hierarchy."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.bases = (base,)
        self.description = f"a cgroup per child (v2: memory, pids, cpu) under {base}"

    def cell(self, budget: Budget) -> Cell:
        return _spare(budget) or _V2Cell(self.base / _fresh_name(), budget)

    @classmethod
    def find(cls, mounts: str, own: str) -> CgroupV2 | str:
        """The hold, or why there is none: ``mounts`` is /proc/self/mountinfo's text,
        ``own`` /proc/self/cgroup's."""
        path = next((line[3:] for line in own.splitlines() if line.startswith("0::")), None)
        mount = _mount_point(mounts, "cgroup2", None)
        if path is None or mount is None:
            return "no cgroup v2 hierarchy"
        base = Path(mount + path.rstrip("/"))
        try:
            controllers = set((base / "cgroup.controllers").read_text().split())
        except OSError:
            return f"{base} cannot be read"
        if not {"memory", "pids"} <= controllers:
            return f"{base} has no memory and pids controllers"
        if not os.access(base, os.W_OK) or not os.access(base / "cgroup.procs", os.W_OK):
            return f"{base} is not delegated to this user"
        wanted = {"memory", "pids", "cpu"} & controllers
        enabled = set((base / "cgroup.subtree_control").read_text().split())
        if not wanted <= enabled:
            why = _enable(base, wanted - enabled)
            if why:
                return why
        return cls(base)


def _enable(base: Path, controllers: set[str]) -> str:
    """Enable ``controllers`` for ``base``'s children. A cgroup with processes in it cannot
    (the kernel's no-internal-processes rule): when this process is alone there, it moves
    into a leaf of its own first; another process there makes the subtree unusable."""
    wanted = " ".join(f"+{c}" for c in sorted(controllers))
    try:
        (base / "cgroup.subtree_control").write_text(wanted)
        return ""
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            return f"{base}: the controllers cannot be enabled ({exc.strerror})"
    others = set((base / "cgroup.procs").read_text().split()) - {str(os.getpid())}
    if others:
        return f"{base} holds other processes, so no child cgroup can have a controller"
    leaf = base / f"gradekit-grader-{os.getpid()}"
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text("0")
        (base / "cgroup.subtree_control").write_text(wanted)
    except OSError as exc:
        return f"{base}: the controllers cannot be enabled ({exc.strerror})"
    return ""


class CgroupV1(Hold):
    """Children in cgroups under this process's own, one per legacy hierarchy."""

    def __init__(self, bases: Sequence[tuple[str, Path]]) -> None:
        self.bases = tuple(base for _, base in bases)
        named = ", ".join(controller for controller, _ in bases)
        self.description = f"a cgroup per child (v1: {named})"

    def cell(self, budget: Budget) -> Cell:
        kept = _spare(budget)
        if kept is not None:
            return kept
        name = _fresh_name()  # the same in every hierarchy
        return _V1Cell([base / name for base in self.bases], budget)

    @classmethod
    def find(cls, mounts: str, own: str) -> CgroupV1 | str:
        """The hold, or why there is none (arguments as ``CgroupV2.find``)."""
        paths = {}
        for line in own.splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(","):
                paths[name] = path
        bases = []
        for controller in ("memory", "pids", "cpu"):
            mount = _mount_point(mounts, "cgroup", controller)
            if mount is None or controller not in paths:
                if controller == "cpu":
                    continue  # a share of the CPU is kept where it can be, not required
                return f"no cgroup v1 {controller} hierarchy"
            base = Path(mount + paths[controller].rstrip("/"))
            if not os.access(base, os.W_OK):
                if controller == "cpu":
                    continue
                return f"{base} is not writable by this user"
            bases.append((controller, base))
        return cls(bases)


def _mount_point(mounts: str, kind: str, controller: str | None) -> str | None:
    """Where a cgroup filesystem of ``kind`` (with ``controller`` among its options) is
    mounted, from /proc/self/mountinfo's text."""
    for line in mounts.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        after = fields[fields.index("-") + 1 :]
        if len(after) < 3 or after[0] != kind:
            continue
        if controller is None or controller in after[2].split(","):
            return fields[4]
    return None


def _fresh_name() -> str:
    return f"gradekit-{os.getpid()}-{next(_NAMES)}"


# -- the watchdog ------------------------------------------------------------------------


class Watchdog(Hold):
    """No cgroup here: the parent watches each child's process tree itself."""

    def __init__(self, why: str) -> None:
        self.description = f"a watchdog in the grader, no cgroup ({why})"

    def cell(self, budget: Budget) -> Cell:
        return _Watched(budget)


class _Watched(Cell):
    watched = True

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def watch(self, pid: int) -> str:
        tasks = memory = 0
        for member in _tree(pid):
            try:
                with open(f"/proc/{member}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue  # it ended meanwhile
            tasks += int(fields[17])  # num_threads
            memory += int(fields[21]) * _PAGE  # rss, in pages
        if tasks > self.budget.tasks:
            return self.budget.tasks_over()
        if memory > self.budget.memory_bytes:
            return self.budget.memory_over()
        return ""


def _tree(root: int) -> Iterator[int]:
    """``root`` and every process descended from it, from /proc's parent links."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    pending = [root]
    while pending:
        pid = pending.pop()
        yield pid
        pending += children.get(pid, [])


@functools.cache
def host_hold() -> Hold:
    """The hold this host offers this process: cgroup v2, else v1, else the watchdog."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text()
        own = Path("/proc/self/cgroup").read_text()
    except OSError:
        return Watchdog("/proc/self/cgroup cannot be read")
    reasons = []
    for found in (CgroupV2.find(mounts, own), CgroupV1.find(mounts, own)):
        if isinstance(found, str):
            reasons.append(found)
        elif why := _tried(found):
            reasons.append(why)
        else:
            _sweep(found.bases)
            return found
    return Watchdog("; ".join(reasons))


_LEFT = re.compile(r"gradekit-([0-9]+)-[0-9]+")  # a cell, named for the grader that made it


def _sweep(bases: Sequence[Path]) -> None:
    """Remove the cells a grader left behind when it was killed before it could (a batch
    worker that died mid-run): each named for a process that no longer runs. A cell that
    still holds a task cannot be removed (EBUSY), and stays."""
    for base in bases:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            match = _LEFT.fullmatch(name)
            if match is None or _running(int(match[1])):
                continue
            with contextlib.suppress(OSError):
                (base / name).rmdir()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: running
    return True


def _tried(hold: Hold) -> str:
    """Why no cell can be made, set, entered by a process and removed in ``hold``; "" once
    one was."""
    try:
        cell = hold.cell(Budget(64, 8))
    except OSError as exc:
        return f"{hold.description} cannot be set up ({exc.filename}: {exc.strerror})"
    try:
        subprocess.run(
            ["true"],
            preexec_fn=cell.enter,
            check=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{hold.description} cannot be entered ({type(exc).__name__})"
    finally:
        cell.close()
    return ""
