"""The walls a sandboxed child runs behind, one class each, behind ``Wall`` (in ``_layout``).

``ProcessWall`` is the audit-hook guard alone: the child works in a private copy of the
submission on this machine. ``NamespacesWall`` is the operating system's wall, bubblewrap
(its command line and seccomp filter are in ``grader.sandbox._namespaces``). Each owns what
differs between them: how a run's folders are laid out, the names the child knows its
folders and files by, what its configuration adds, how it is started, and how a report
names it. A third wall (a container, say) is one more subclass: it registers itself under
its ``name``, so ``--wall`` offers it and the batch's worker request can carry it.

``choose_wall`` turns the command line's ``--wall`` into a wall, once per grading
process, before any submission runs; ``wall_named`` turns the name a worker request
carries back into one.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import py_compile
import shutil
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

import gradekit
from gradekit import UsageError
from grader._model import Limits
from grader.sandbox._channel import HARNESS, PYTHON_FLAGS, Child, settle_children
from grader.sandbox._harness import copy_submission
from grader.sandbox._hold import Budget, Cell, host_hold
from grader.sandbox._host import (
    SHOWN,
    Host,
    Hosts,
    hosts_unavailable,
    process_wall_request,
    refuse_hosts,
    run_request,
    share,
    spawning,
)
from grader.sandbox._layout import IGNORED_NAMES, compile_tree, readable
from grader.sandbox._namespaces import (
    ALLOW_HOST_ROOT,
    INSTALL_HINT,
    KIT,
    SANDBOX,
    Bind,
    as_root,
    bubblewrap,
    bwrap_argv,
    host_user,
    interpreter,
    package_folders,
    process_interpreter,
)
from grader.sandbox._scratch import scratch_folder
from grader.sandbox._seccomp import filter_pipe
from grader.sandbox._wall import WALLS, Layout, Wall

__all__ = [
    "PROCESS_WALL",
    "NamespacesWall",
    "ProcessWall",
    "choose_wall",
    "harness_code",
    "share_hosts",
    "wall_named",
    "wall_requests",
    "warm_walls",
]

# The kit the agent runs on: the grader's own gradekit, whatever copy the submission ships
# (the harness's ``Library`` finds it first); shown read-only behind the namespaces wall.
LIBRARY = Path(gradekit.__file__).resolve().parent
LIBRARY_INSIDE = f"{KIT}/library/gradekit"
# The resource limits every wall sets on its child (the rubric's [limits] of those names).
_LIMITS = ("memory_mb", "cpu_s", "file_mb", "open_files")
HARNESS_INSIDE = f"{KIT}/harness.pyc"  # the compiled harness, behind namespaces


@functools.cache
def _kit_folder() -> Path:
    """This process's folder of compiled kit code, readable by every user (uid 65534 reads
    it behind namespaces as root) and removed when the process that made it exits (not
    when a worker forked from it does)."""
    folder = scratch_folder("gradekit-kit-")
    os.chmod(folder, 0o755)
    atexit.register(_remove_by, os.getpid(), folder)
    return folder


def _remove_by(maker: int, folder: Path) -> None:
    if os.getpid() == maker:
        shutil.rmtree(folder, ignore_errors=True)


@functools.cache
def harness_code(filename: str = f"{KIT}/harness.py") -> Path:
    """The harness compiled once per grader process, for children that know its source as
    ``filename`` (their tracebacks name it): a child runs the bytecode file instead of
    compiling the source at every start. The file's name keeps ``_harness.py`` in every
    child's command line."""
    folder = _kit_folder() / f"harness-{hashlib.sha256(filename.encode()).hexdigest()[:16]}"
    folder.mkdir(mode=0o755)
    code = folder / "_harness.pyc"
    py_compile.compile(
        str(HARNESS),
        cfile=str(code),
        dfile=filename,
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    os.chmod(folder, 0o755)
    os.chmod(code, 0o644)
    return code


@functools.cache
def library_code() -> Path:
    """The grader's ``gradekit`` as the namespaces wall shows it: copied once per grader
    process, its bytecode compiled beside it (checked-hash pycs). A child cannot write
    bytecode, so without this every child compiled each module of the library whose
    ``__pycache__`` was missing or older than its source (a fresh checkout, an edit)."""
    library = _kit_folder() / "library" / "gradekit"
    copy_submission(str(LIBRARY), str(library), IGNORED_NAMES)
    compile_tree(library)
    readable(library.parent)
    return library


class ProcessWall(Wall):
    """The audit-hook guard alone, where bubblewrap is missing: the child works in a private
    copy under the scratch folder on this machine, with resource limits, and asks Linux to
    die with the grader. A grading's runs fork from the hosts it started ahead (one per
    hash seed, ``serve_process_host``); any other run starts an interpreter of its own."""

    name = "process"
    copies = True  # libc's fork, the copy dying with the run (``process_copier``)
    description = "process guard only (no bubblewrap: resource limits and an audit hook)"
    preference = 0

    def missing(self) -> str:
        return _refused(lambda: _process_user(()))

    def warm(self) -> None:
        package_folders()
        host_hold()
        harness_code(str(HARNESS))
        if as_root():
            library_code()
            with contextlib.suppress(UsageError):
                _process_user(())  # as root: whether uid 65534 can run the kit, looked once

    def stated(self, root: Path, scratch: Path) -> str:
        return f"{self.held()}; {_process_user((str(scratch),))[1]}"

    def ahead(
        self,
        hosts: Hosts,
        seeds: Sequence[int],
        preload: Sequence[str] = (),
        shipped: Collection[str] = (),
    ) -> None:
        # Runs fork from hosts only where a grading started them (here, or a batch's
        # zygote): a lone run (a test's, a tool's) starts its interpreter, as it always did.
        if hosts.scratch is None or hosts_unavailable():
            return
        hosts.shipped = frozenset(shipped)
        hosts.preload = tuple(name for name in preload if name not in hosts.shipped)
        hosts.scratch.mkdir(parents=True, exist_ok=True)
        try:
            user, _ = _process_user((str(hosts.scratch),))
        except UsageError:
            return  # the first run says why, as it would have
        hosts.start(seeds, user, **_process_kit())

    def prepare(self, layout: Layout) -> None:
        # Links stay links: a write through one is judged by where it points, and copying
        # never follows one out of the submission.
        copy_submission(str(layout.source), str(layout.copy), layout.ignored)
        (layout.work / "tmp").mkdir(parents=True)
        if as_root():  # uid 65534 works in its copy, and passes through the run's folder
            os.chmod(layout.run, 0o711)
            user, _ = _process_user((str(layout.run),))
            if user is not None:
                _own(layout.copy, user)
                _own(layout.work, user)

    def child_copy(self, layout: Layout) -> str:
        return str(layout.copy)

    def child_work(self, layout: Layout) -> str:
        return str(layout.work)

    def inside(self, layout: Layout, path: Path) -> str:
        return str(path)

    def configure(self, layout: Layout, limits: Limits) -> dict[str, object]:
        return {
            "site": list(process_interpreter()[2]),
            "library": str(library_code() if as_root() else LIBRARY),
            "parent": os.getpid(),  # the harness asks to die with this process
            "hooked": True,  # the hook is this wall: one switched off is a finding
            "limits": {name: getattr(limits, name) for name in _LIMITS},
        }

    def start(
        self,
        config: Mapping[str, object],
        layout: Layout,
        env: Mapping[str, str],
        outputs: tuple[IO[bytes], IO[bytes]],
        limits: Limits,
        shown: Sequence[Path],
    ) -> Child:
        python, extra, _ = process_interpreter()
        user, _ = _process_user((str(layout.run),))  # its folders are its own (``prepare``)
        host = _host_of(layout, env, user, process_wall=True)
        if host is not None and layout.hosts is not None:
            try:
                return Child(
                    config,
                    layout.copy,
                    env,
                    outputs,
                    cell=_cell(limits),
                    spawn=spawning(host, process_wall_request(env, layout.copy, user)),
                )
            except OSError as exc:  # no run of this process forks from a host again
                layout.hosts.drop(host)
                refuse_hosts(f"a host could not start a run ({type(exc).__name__}: {exc})")
        command = [python, *PYTHON_FLAGS, str(harness_code(str(HARNESS)))]
        return Child(
            config,
            layout.copy,
            {**env, **extra},
            outputs,
            command=command,
            cell=_cell(limits),
            user=user,
        )


def _process_user(search: Sequence[str]) -> tuple[int | None, str]:
    """Whom the process wall's child runs as (``host_user``): uid 65534 for a root grader,
    which reads the interpreter (or its readable copy), the packages, the harness and the
    library, and passes through ``search``."""
    python, _, folders = process_interpreter()
    kit = (
        python,
        *folders,
        str(harness_code(str(HARNESS))),
        str(library_code() if as_root() else LIBRARY),
    )
    return host_user(kit, search, bubblewrapped=False)


def _refused(user: Callable[[], object]) -> str:
    """Why a wall will not run submissions here as root, or "" (``host_user``'s refusal)."""
    try:
        user()
    except UsageError as exc:
        return str(exc)
    return ""


_owned: set[Path] = set()  # laid-out copies given to their runs' uid, in this process


def _own_laid_out(source: Path, user: int) -> None:
    """Give a grading's laid-out copy to the uid its runs take on the host (a root grader's
    uid 65534), once: a forked run's copy is an overlay over it, and the kernel copies a
    file up into the run's layer only where the file's owner is mapped in the run's user
    namespace (root's is not). Without it every run copied the submission instead (6-7 ms
    of CPU each). No run reaches the laid-out copy itself: each sees it read-only, below
    its overlay, and never by its path on the host."""
    if source not in _owned:
        _own(source, user)
        _owned.add(source)


def _own(top: Path, user: int) -> None:
    """Give ``top`` and everything under it (links themselves, never followed) to ``user``:
    ``top`` itself last, so that a copy whose top is ``user``'s is wholly ``user``'s."""
    for here, folders, files in os.walk(top):
        for name in (*folders, *files):
            os.chown(os.path.join(here, name), user, user, follow_symlinks=False)
    os.chown(top, user, user, follow_symlinks=False)


class NamespacesWall(Wall):
    """Bubblewrap: the child runs as ``nobody`` in its own user, pid, network, ipc and uts
    namespaces and sees none of the run's folders. The submission, laid out once for the
    grading (``LaidOut``), is shown read-only at ``/gradekit/original``, and the child's
    writable copy in its ``/sandbox`` tmpfs is an overlay of it (or a copy the harness
    makes); of ``work`` it sees only the files bound one by one (traces, the probe's
    cassette). The child is a fork of the host for its hash seed (``grader.sandbox._host``,
    whose forks build these walls themselves), or, where hosts cannot run, a bubblewrap of
    its own running the harness's compiled bytecode."""

    name = "namespaces"
    copies = True  # a host's runs fork their copies (the filter lets that one fork through)
    description = (
        "namespaces (bubblewrap: own user, pid, network, ipc and uts namespaces, "
        "no capabilities, read-only view)"
    )
    preference = 1

    def missing(self) -> str:
        path, why = bubblewrap()
        if path is not None:
            return _refused(lambda: host_user(_kit()))
        return (
            f"{why}; {INSTALL_HINT}, or pass --wall process to grade behind the "
            "in-process guard only"
        )

    def passed_over(self) -> str:
        if as_root():
            why = bubblewrap()[1] or self.missing()
            return (
                f"warning: grading as root without namespaces: {why}. "
                "Submission code runs behind the in-process guard only"
                + (f"; {INSTALL_HINT}." if bubblewrap()[0] is None else ".")
            )
        return ""

    def warm(self) -> None:
        bubblewrap()
        interpreter()
        host_hold()
        harness_code()
        library_code()
        with contextlib.suppress(UsageError):
            host_user(_kit())  # as root: whether uid 65534 can run the kit, probed once

    def stated(self, root: Path, scratch: Path) -> str:
        return f"{self.held()}; {host_user(_kit(), (str(scratch),))[1]}"

    def ahead(
        self,
        hosts: Hosts,
        seeds: Sequence[int],
        preload: Sequence[str] = (),
        shipped: Collection[str] = (),
    ) -> None:
        if hosts.scratch is None or hosts_unavailable() or bubblewrap()[0] is None:
            return
        hosts.shipped = frozenset(shipped)
        hosts.preload = tuple(name for name in preload if name not in hosts.shipped)
        hosts.scratch.mkdir(parents=True, exist_ok=True)
        try:
            user, _ = host_user(_kit(), (str(hosts.scratch),))
        except UsageError:
            return  # the first run says why, as it would have
        hosts.start(seeds, user, **_kit_paths())

    def prepare(self, layout: Layout) -> None:
        layout.work.mkdir()
        if as_root():  # uid 65534 finds the files it is shown through the run's folder
            os.chmod(layout.run, 0o711)

    def child_copy(self, layout: Layout) -> str:
        return f"{SANDBOX}/submission"

    def child_work(self, layout: Layout) -> str:
        return SANDBOX

    def inside(self, layout: Layout, path: Path) -> str:
        return f"{SANDBOX}/{path.name}" if path.suffix == ".jsonl" else f"{SHOWN}/{path.name}"

    def configure(self, layout: Layout, limits: Limits) -> dict[str, object]:
        return {
            "copy": {
                "from": f"{KIT}/original",
                "to": self.child_copy(layout),
                "ignore": list(layout.ignored),
            },
            "site": list(interpreter()[2]),
            "library": LIBRARY_INSIDE,
            # Processes are capped only here: outside a user namespace RLIMIT_NPROC counts
            # every process of the grading user, not just this run's.
            "limits": {name: getattr(limits, name) for name in (*_LIMITS, "processes")},
        }

    def start(
        self,
        config: Mapping[str, object],
        layout: Layout,
        env: Mapping[str, str],
        outputs: tuple[IO[bytes], IO[bytes]],
        limits: Limits,
        shown: Sequence[Path],
    ) -> Child:
        bwrap_path, why = bubblewrap()
        if bwrap_path is None:
            raise UsageError(f"namespaces isolation was chosen, but {why}: {INSTALL_HINT}")
        for path in shown:
            path.touch()  # a bind needs its file
        # The laid-out copy is readable by every user by construction (``LaidOut``): uid
        # 65534 needs only to pass through to it and to the run's files.
        user, _ = host_user(_kit(), (str(layout.source), str(layout.work)))
        if user is not None and layout.source != layout.root:
            _own_laid_out(layout.source, user)
        if user is not None:
            for path in shown:
                if path.suffix == ".jsonl":  # the traces it writes
                    os.chown(path, user, user)
        host = _host_of(layout, env, user)
        if host is not None and layout.hosts is not None:
            request = run_request(
                env,
                limits.disk_mb,
                layout.source,
                host.scratch,
                [(p, self.inside(layout, p), p.suffix == ".jsonl") for p in shown],
            )
            # RLIMIT_NPROC counts a uid's tasks across the host's whole user namespace, so
            # one run holding its threads would take another's: its cell alone counts them.
            own = {name: getattr(limits, name) for name in _LIMITS}
            try:
                return Child(
                    {**config, "limits": own},
                    layout.run,
                    env,
                    outputs,
                    cell=_cell(limits),
                    spawn=spawning(host, request),
                )
            except OSError as exc:  # no run of this process forks from a host again
                layout.hosts.drop(host)
                refuse_hosts(f"a host could not start a run ({type(exc).__name__}: {exc})")
        python, binds, _ = interpreter()
        binds += (
            Bind(str(layout.source), f"{KIT}/original"),
            Bind(str(harness_code()), HARNESS_INSIDE),
            Bind(str(library_code()), LIBRARY_INSIDE),
        )
        binds += tuple(
            Bind(str(p), self.inside(layout, p), writable=p.suffix == ".jsonl") for p in shown
        )
        with filter_pipe() as read_end:
            argv = bwrap_argv(bwrap_path, binds, disk_mb=limits.disk_mb, seccomp_fd=read_end)
            command = [*argv, python, *PYTHON_FLAGS, HARNESS_INSIDE]
            fds = () if read_end is None else (read_end,)
            return Child(
                config,
                layout.run,
                env,
                outputs,
                command=command,
                pass_fds=fds,
                cell=_cell(limits),
                user=user,
            )


def _cell(limits: Limits) -> Cell:
    """A new child's cell: the one the last child of this budget handed back when there is
    one (settled first, so that it can be), else a new one (``grader.sandbox._hold``)."""
    settle_children()
    return host_hold().cell(Budget.of(limits))


def share_hosts(
    root: Path, seeds: Sequence[int], preload: Sequence[str] = (), wall: str = NamespacesWall.name
) -> None:
    """Start a batch's hosts (``grader.sandbox._host.share``) behind ``wall`` (the name of
    the wall it grades behind) where it can be built: in the zygote, before it forks the
    workers that use them; each imports ``preload``."""
    if wall == ProcessWall.name:
        if ProcessWall().missing():
            return
        ProcessWall().warm()
        share(root, seeds, _process_user((str(root),))[0], preload=preload, **_process_kit())
        return
    if NamespacesWall().missing():
        return
    NamespacesWall().warm()
    share(root, seeds, host_user(_kit(), (str(root),))[0], preload=preload, **_kit_paths())


def _kit_paths() -> dict[str, Any]:
    return {
        "harness": harness_code(),
        "library": library_code(),
        "library_inside": LIBRARY_INSIDE,
        "harness_inside": HARNESS_INSIDE,
    }


def _process_kit() -> dict[str, Any]:
    """The process wall's host's kit (``Host(..., process_wall=True)``): what its own run
    would start with (``ProcessWall.configure`` and ``start``), by the host's own paths."""
    harness = harness_code(str(HARNESS))
    library = library_code() if as_root() else LIBRARY
    return {
        "harness": harness,
        "library": library,
        "library_inside": str(library),
        "harness_inside": str(harness),
        "process_wall": True,
    }


def _host_of(
    layout: Layout, env: Mapping[str, str], user: int | None, *, process_wall: bool = False
) -> Host | None:
    """The host of the grading that forks this run under its hash seed, or None: the run
    starts its own bubblewrap or interpreter (no hosts given, a run outside the grading's
    scratch, hosts cannot run here, or, behind the process wall, none started ahead)."""
    hosts = layout.hosts
    if (
        hosts is None
        or hosts.scratch is None
        or hosts_unavailable()
        or not layout.run.is_relative_to(hosts.scratch)
        or not layout.source.is_relative_to(hosts.scratch)
    ):
        return None
    seed = int(env["PYTHONHASHSEED"])
    return (
        hosts.host(seed, user, started=True, **_process_kit())
        if process_wall
        else hosts.host(seed, user, **_kit_paths())
    )


def _kit() -> tuple[str, ...]:
    """What a child behind namespaces reads besides the submission: the interpreter, the
    packages, the harness and the library."""
    python, binds, _ = interpreter()
    shown = next(
        (
            os.path.join(b.source, os.path.relpath(python, b.dest))
            for b in binds
            if python.startswith(b.dest.rstrip("/") + "/")
        ),
        python,
    )  # as the host has it
    return (shown, *(bind.source for bind in binds), str(harness_code()), str(library_code()))


PROCESS_WALL: Final[Wall] = ProcessWall()  # the default where a caller names no wall


def _preferred() -> list[type[Wall]]:
    return sorted(WALLS.values(), key=lambda wall: -wall.preference)


def wall_requests() -> tuple[str, ...]:
    """What ``--wall`` takes: ``auto``, then every wall's name, the preferred first."""
    return ("auto", *(wall.name for wall in _preferred()))


def choose_wall(requested: str, *, allow_host_root: bool = False) -> Wall:
    """Resolve ``--wall``: ``auto`` takes the preferred wall that can be built here
    (bubblewrap when it works, else the process wall); a wall named but missing here is a
    usage error that says how to install it. A wall whose children would run as root on
    the host is missing unless ``allow_host_root`` (``--allow-host-root``): then every
    process of this grading (a batch's zygote and workers inherit it) may run them so."""
    if allow_host_root:
        os.environ[ALLOW_HOST_ROOT] = "1"
    requests = wall_requests()
    if requested not in requests:
        raise UsageError(f"--wall {requested!r}: use one of {', '.join(requests)}")
    if requested != "auto":
        wall = WALLS[requested]()
        missing = wall.missing()
        if missing:
            raise UsageError(f"--wall {requested}: {missing}")
        return wall
    reasons = []
    for kind in _preferred():
        wall = kind()
        missing = wall.missing()
        if not missing:
            return wall
        reasons.append(f"{wall.name}: {missing}")
        warning = wall.passed_over()
        if warning:
            print(warning, file=sys.stderr)
    raise UsageError(f"--wall auto: no wall can be built here ({'; '.join(reasons)})")


def wall_named(name: str) -> Wall:
    """The wall whose ``name`` this is (as a batch's worker request carries it)."""
    wall = WALLS.get(name)
    if wall is None:
        raise ValueError(f"no wall is named {name!r}: name one of {', '.join(WALLS)}")
    return wall()


def warm_walls() -> None:
    """``Wall.warm`` of every wall: for a process that forks workers before it learns which
    wall they grade behind."""
    for wall in WALLS.values():
        wall().warm()
