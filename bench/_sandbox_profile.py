"""Where one grading's CPU goes, per run kind and per phase of a sandboxed child.

    python -m bench._sandbox_profile                 # 5 gradings of the reference lab
    python -m bench._sandbox_profile --gradings 9 --wall process

The sandboxed children's CPU is not this process's children's rusage: the grader kills
each child's group once its run is over, and under namespaces the kernel then discards
the CPU of a sandboxed interpreter that bubblewrap's init had not reaped. So every child
is started in a scratch cgroup of the v1 ``cpuacct`` hierarchy of its own (made here, by
root), whose ``cpuacct.usage`` counts every task that ever ran in it as it runs: bubblewrap,
its init, the interpreter. The grader's own side is this thread's CPU
(``time.thread_time``) around each ``Sandbox`` call and around the whole grading.

Behind namespaces a grading's runs fork from its hosts (``grader.sandbox._host``): each
host starts in one more scratch group (its start, the kit's import, each fork), each run's
init joins its own run's group as the grader admits it to its cell.

The phases: one interpreter behind the same bubblewrap command line as a child
(``NamespacesWall``'s binds, seccomp filter and limits), running the harness's steps
one by one and saying each one's ``time.process_time`` delta; bubblewrap's share is the
cgroup's total less the interpreter's.

Needs root and a writable v1 ``cpuacct`` hierarchy (``/sys/fs/cgroup/cpuacct``); the
phases need bubblewrap. Prints Markdown; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._grader_data import REPO, copy_reference
from grader.grading import seed_pool
from grader.grading._grade import grade_submission
from grader.rubric._rubric import load_rubric
from grader.sandbox import Sandbox, _channel, share_hosts, wall_named
from grader.sandbox._hold import Cell
from grader.sandbox._host import end_shared, refuse_hosts
from grader.sandbox._layout import LaidOut
from grader.sandbox._namespaces import KIT, SANDBOX, Bind, bubblewrap, bwrap_argv, interpreter
from grader.sandbox._seccomp import filter_pipe
from grader.sandbox._walls import LIBRARY_INSIDE, harness_code, library_code

__all__ = ["main"]

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_KEY = b"gradekit-sandbox-profile"  # a fixed draw key: the same labels and seeds every grading
_SERIAL = itertools.count(1)


class _Groups:
    """One scratch cpuacct cgroup per child, under a parent group of this process's."""

    def __init__(self) -> None:
        self.top = CPUACCT / f"gradekit-profile-{os.getpid()}"
        self.top.mkdir()
        self.next: Path | None = None  # the group the next child joins
        self.hosts: Path | None = None  # the group every host joins
        self.usage: dict[str, list[float]] = defaultdict(list)  # run kind -> ns per child

    def fresh(self) -> Path:
        group = self.top / f"child-{next(_SERIAL)}"
        group.mkdir()
        return group

    def close(self) -> None:
        for group in sorted(self.top.iterdir(), reverse=True):
            if group.is_dir():
                _remove(group)
        _remove(self.top)


def _remove(group: Path) -> None:
    for _ in range(200):  # a killed bubblewrap's tasks take a moment to leave
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.01)


def _joiner(group: Path) -> Callable[[], None]:
    """What a forked child runs before it execs: join ``group``."""

    def join() -> None:
        (group / "cgroup.procs").write_text("0")

    return join


def _usage(group: Path) -> float:
    return float((group / "cpuacct.usage").read_text().strip())


class _CountedCell(Cell):
    """A run's cell, and the group that counts its CPU: the init joins both (itself, where
    the cell lets it), or the grader admits it to both."""

    def __init__(self, cell: Cell | None, group: Path | None) -> None:
        self._cell, self._group = cell, group

    def entries(self) -> list[int]:
        inner = self._cell.entries() if self._cell is not None else []
        if inner and self._group is not None:
            inner.append(os.open(self._group / "tasks", os.O_WRONLY | os.O_CLOEXEC))
        return inner

    def admit(self, pid: int) -> None:
        if self._group is not None:
            (self._group / "cgroup.procs").write_text(str(pid))
        if self._cell is not None:
            self._cell.admit(pid)


@contextlib.contextmanager
def _counted(groups: _Groups, parent: dict[str, list[float]]) -> Iterator[None]:
    """Every child in a cgroup of its own, its CPU filed under its run kind (the name of
    the scratch folder its run is laid out in); the grader's CPU per run kind too."""
    joining = _channel._joining

    def counted_joining(cell: Any, user: int | None) -> Callable[[], None]:
        join, group = joining(cell, user), groups.next

        def enter() -> None:
            if group is not None:
                with open(group / "cgroup.procs", "w") as procs:
                    procs.write("0")
            join()

        return enter

    class Counted(_channel.Child):
        _group: Path | None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            groups.next = self._group = group = groups.fresh()
            self._kind = _kind(Path(kwargs.get("cwd", args[1])))
            spawn = kwargs.get("spawn")
            if spawn is not None:  # a run forked by a host: its init joins the group too

                def counted_spawn(read: int, write: int, outputs: Any, cell: Any) -> Any:
                    return spawn(read, write, outputs, _CountedCell(cell, group))

                kwargs["spawn"] = counted_spawn
            super().__init__(*args, **kwargs)

        def finish(self, deadline: float) -> tuple[int, bool]:
            done = super().finish(deadline)
            if self._group is not None:
                groups.usage[self._kind].append(_usage(self._group))
                _remove(self._group)
                self._group = None
            return done

    def timed(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(sandbox: Sandbox, *args: Any, **kwargs: Any) -> Any:
            began = time.thread_time_ns()
            try:
                return method(sandbox, *args, **kwargs)
            finally:
                parent[sandbox.scratch.name].append(time.thread_time_ns() - began)

        return call

    hosts = groups.fresh()  # every host of every grading: start, the kit, each fork
    groups.hosts = hosts
    popen = subprocess.Popen

    def hosted(*args: Any, **kwargs: Any) -> Any:
        before = kwargs.get("preexec_fn")

        def enter() -> None:
            (hosts / "cgroup.procs").write_text("0")
            if before is not None:
                before()

        return popen(*args, **{**kwargs, "preexec_fn": enter})

    users = [
        m
        for name, m in sorted(sys.modules.items())
        if name.startswith("grader.") and getattr(m, "Child", None) is _channel.Child
    ]
    with contextlib.ExitStack() as patches:
        patches.enter_context(mock.patch.object(_channel, "_joining", counted_joining))
        patches.enter_context(mock.patch.object(subprocess, "Popen", hosted))
        for module in users:
            patches.enter_context(mock.patch.object(module, "Child", Counted))
        for name in ("run", "probe_replay", "run_cut_point_test"):
            patches.enter_context(mock.patch.object(Sandbox, name, timed(getattr(Sandbox, name))))
        yield


def _kind(cwd: Path) -> str:
    """The run kind of a child started in ``cwd``: its run's scratch folder's name."""
    run = next((p for p in (cwd, *cwd.parents) if p.name.startswith("run-")), cwd)
    return run.parent.name


def profile_gradings(reference: Path, wall: str, gradings: int, folder: Path) -> str:
    """``gradings`` in-process gradings of ``reference`` (after one warm-up), per run kind."""
    rubric = load_rubric(REPO / "rubric" / "bootcamp.toml")
    groups, parent = _Groups(), defaultdict[str, list[float]](list)
    totals: list[tuple[float, float]] = []  # (grader thread ns, children ns) per grading
    try:
        with _counted(groups, parent), contextlib.ExitStack() as hosts:
            if wall == "namespaces":  # as a batch does: hosts for the key's seeds, once
                share_hosts(folder, seed_pool(_KEY))
                hosts.callback(end_shared)
            for number in range(gradings + 1):
                for store in (groups.usage, parent):
                    store.clear()
                hosted = _usage(groups.hosts) if groups.hosts else 0.0
                began = time.thread_time_ns()
                graded = grade_submission(
                    reference,
                    rubric,
                    submission="ref",
                    scratch=folder / f"grading-{number}",
                    wall=wall_named(wall),
                    draw_key=_KEY,
                )
                grader_ns = time.thread_time_ns() - began
                if number == 0:
                    warm = graded.report.total
                    continue
                if graded.report.total != warm:
                    raise RuntimeError("the same grading gave another total")
                hosted = (_usage(groups.hosts) if groups.hosts else 0.0) - hosted
                totals.append((grader_ns, sum(sum(v) for v in groups.usage.values()) + hosted))
                kinds = {k: (list(v), list(parent.get(k, ()))) for k, v in groups.usage.items()}
                if hosted:
                    kinds["hosts: bubblewrap, interpreter, kit, forks"] = ([hosted], [0.0])
                _collect(kinds)
    finally:
        groups.close()
    return _kinds_table(wall, gradings, totals)


_SEEN: dict[str, list[tuple[float, float, int]]] = defaultdict(list)  # kind -> (child, grader, n)


def _collect(kinds: dict[str, tuple[list[float], list[float]]]) -> None:
    for kind, (children, grader) in kinds.items():
        _SEEN[kind].append((sum(children), sum(grader), len(children)))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f}"


def _kinds_table(wall: str, gradings: int, totals: Sequence[tuple[float, float]]) -> str:
    lines = [
        f"CPU of one grading of the reference lab, --wall {wall}: median of "
        f"{gradings} gradings (ms; children: their cgroups; grader: this thread)",
        "",
        "| run kind | children | CPU per grading, children | per child | grader side |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for kind in sorted(_SEEN, key=lambda k: -statistics.median(x[0] for x in _SEEN[k])):
        seen = _SEEN[kind]
        child = statistics.median(x[0] for x in seen)
        count = statistics.median(x[2] for x in seen)
        lines.append(
            f"| {kind} | {count:g} | {_ms(child)} | {_ms(child / count)} | "
            f"{_ms(statistics.median(x[1] for x in seen))} |"
        )
    grader = statistics.median(t[0] for t in totals)
    children = statistics.median(t[1] for t in totals)
    count = sum(statistics.median(x[2] for x in seen) for seen in _SEEN.values())
    lines += [
        f"| **all runs** | {count:g} | {_ms(children)} | {_ms(children / count)} | "
        f"{_ms(grader)} (whole grading) |",
        "",
        f"CPU per grading, grader and children: {_ms(grader + children)} ms; "
        f"200 submissions at --jobs 2 on 2 cores need at least "
        f"{(grader + children) * 200 / 2 / 1e9:.1f} s of the cores (a forked worker's "
        "start not included).",
    ]
    _SEEN.clear()
    return "\n".join(lines)


# -- the phases of one child behind namespaces --------------------------------------------

_PHASES = r"""
import json, os, sys, time
out = {"start": time.process_time_ns()}
def mark(name):
    global last
    now = time.process_time_ns(); out[name] = now - last; last = now
last = out["start"]
args = json.loads(sys.argv[1])
import marshal
with open(args["harness"], "rb") as f:
    code = marshal.loads(f.read()[16:])
mark("harness: load its bytecode")
harness = {"__name__": "harness"}
exec(code, harness)
mark("harness: its imports and definitions")
copy = args["copy"]
harness["copy_submission"](copy["from"], copy["to"], copy["ignore"])
os.makedirs("/sandbox/tmp", exist_ok=True)
mark("copy the submission into the tmpfs")
os.chdir(copy["to"])
harness["add_packages"](args["site"])
sys.meta_path.insert(0, harness["Library"](args["library"]))
sys.path.insert(0, copy["to"])
import lab.agent
mark("import the agent (lab.agent)")
out["total"] = time.process_time_ns()
os.write(1, json.dumps(out).encode())
"""


def profile_phases(reference: Path, repeats: int, folder: Path) -> str:
    """The phases of one child behind the namespaces wall, ``repeats`` times (median), as
    the wall runs one now: from the submission laid out once (``LaidOut``, ``lab``
    compiled) and the harness's bytecode."""
    bwrap, why = bubblewrap()
    if bwrap is None:
        return f"Phases not measured: {why}."
    python, binds, site = interpreter()
    source = LaidOut().source(reference, folder / "laid", ["lab"])
    binds += (
        Bind(str(source), f"{KIT}/original"),
        Bind(str(library_code()), LIBRARY_INSIDE),
        Bind(str(harness_code()), f"{KIT}/harness"),
    )
    args: dict[str, Any] = {
        "harness": f"{KIT}/harness",
        "copy": {"from": f"{KIT}/original", "to": f"{SANDBOX}/submission", "ignore": []},
        "site": list(site),
        "library": LIBRARY_INSIDE,
    }
    groups = _Groups()
    rows: dict[str, list[float]] = defaultdict(list)
    try:
        for number in range(repeats + 1):
            group = groups.fresh()
            with filter_pipe() as read_end:
                argv = bwrap_argv(bwrap, binds, disk_mb=256, seccomp_fd=read_end)
                done = subprocess.run(
                    [*argv, python, "-S", "-P", "-B", "-c", _PHASES, json.dumps(args)],
                    capture_output=True,
                    check=False,
                    env=_env(),
                    pass_fds=() if read_end is None else (read_end,),
                    preexec_fn=_joiner(group),
                )
            if done.returncode != 0:
                raise RuntimeError(done.stderr.decode("utf-8", "replace")[-3000:])
            said = json.loads(done.stdout)
            whole = _usage(group)
            _remove(group)
            if number == 0:
                continue
            rows["bubblewrap (the cgroup's total less the interpreter's)"].append(
                whole - said["total"]
            )
            rows["interpreter start (-S -P -B)"].append(said["start"])
            for name, ns in said.items():
                if name not in ("start", "total"):
                    rows[name].append(ns)
            rows["whole child"].append(whole)
    finally:
        groups.close()
    lines = [
        f"One child behind namespaces, phase by phase: median of {repeats} (ms CPU)",
        "",
        "| phase | CPU |",
        "| --- | ---: |",
    ]
    lines += [f"| {name} | {_ms(statistics.median(v))} |" for name, v in rows.items()]
    return "\n".join(lines)


def _env() -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": f"{SANDBOX}/submission",
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": f"{SANDBOX}/tmp",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gradings", type=int, default=5)
    parser.add_argument("--phases", type=int, default=15, help="children per phase table")
    parser.add_argument("--wall", default="namespaces")
    parser.add_argument(
        "--own-bubblewrap",
        action="store_true",
        help="no hosts: every run behind namespaces starts its own bubblewrap",
    )
    args = parser.parse_args(argv)
    if args.own_bubblewrap:
        refuse_hosts("--own-bubblewrap")
    if not CPUACCT.is_dir() or not os.access(CPUACCT, os.W_OK):
        print(f"needs root and a writable {CPUACCT}", file=sys.stderr)
        return 2
    print(
        f"Machine: Python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.2f} at start"
    )
    with tempfile.TemporaryDirectory(prefix="gradekit-sandbox-profile-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o711)  # a root grader's children, uid 65534, pass through it
        reference = copy_reference(folder / "reference")
        print(f"\n{profile_gradings(reference, args.wall, args.gradings, folder)}")
        print(f"\n{profile_phases(reference, args.phases, folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
