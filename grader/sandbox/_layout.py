"""One sandboxed run's folders and how its child is started behind the chosen wall.

``prepare_run`` makes the run's folders; ``start_child`` starts one harness, either as
a plain child (the process guard) or inside bubblewrap (namespaces, see
``grader.sandbox._isolation``); ``child_config`` and ``child_environment`` are what it is told.
"""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import gradekit
from gradekit import UsageError
from grader._model import Limits
from grader.sandbox._channel import HARNESS, PYTHON_FLAGS, Child
from grader.sandbox._harness import copy_submission
from grader.sandbox._isolation import (
    INSTALL_HINT,
    KIT,
    SANDBOX,
    Bind,
    Isolation,
    bubblewrap,
    bwrap_argv,
    interpreter,
    no_new_processes_filter,
    package_folders,
)

__all__ = [
    "IGNORED_NAMES", "Layout", "captured_output", "child_config", "child_environment",
    "child_outputs", "prepare_run", "read_regular", "start_child",
]

# Never part of a submission: version control, environments, caches, build output.
IGNORED_NAMES = (
    ".git", ".venv*", "__pycache__", "*.pyc", "grades", "*.egg-info", "build",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", "node_modules",
)

# The kit the agent runs on: the grader's own gradekit, whatever copy the submission ships
# (the harness's ``Library`` finds it first); shown read-only behind the namespaces wall.
LIBRARY = Path(gradekit.__file__).resolve().parent
LIBRARY_INSIDE = f"{KIT}/library/gradekit"


@dataclass(frozen=True, slots=True)
class Layout:
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

def prepare_run(root: Path, scratch: Path, isolation: Isolation) -> Layout:
    scratch.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=scratch)).resolve()
    layout = Layout(root.resolve(), run, run / "submission", run / "work", run / "output",
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


def child_environment(layout: Layout, hashseed: int) -> dict[str, str]:
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


def start_child(config: Mapping[str, object], layout: Layout, env: Mapping[str, str],
           outputs: tuple[IO[bytes], IO[bytes]], limits: Limits,
           shown: Sequence[Path]) -> Child:
    """Start one harness behind the layout's wall; ``shown``: the files of ``work`` it sees."""
    if layout.isolation == "process":
        return Child(config, layout.copy, env, outputs)
    bwrap_path, why = bubblewrap()
    if bwrap_path is None:
        raise UsageError(f"namespaces isolation was chosen, but {why}: {INSTALL_HINT}")
    python, binds, _ = interpreter()
    binds += (Bind(str(layout.root), f"{KIT}/original"), Bind(str(HARNESS), f"{KIT}/harness.py"),
              Bind(str(LIBRARY), LIBRARY_INSIDE))
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


def child_config(layout: Layout, limits: Limits, **fields: object) -> dict[str, object]:
    kept = ["memory_mb", "cpu_s", "file_mb", "open_files"]
    config: dict[str, object] = {
        "root": layout.child_copy,
        "roots": [layout.child_copy, layout.child_work],
        "seal": secrets.token_hex(16),  # on every verdict the harness sends (its ``sealer``)
        **fields,
    }
    if layout.isolation == "namespaces":
        # Processes are capped only here: outside a user namespace RLIMIT_NPROC counts every
        # process of the grading user, not just this run's.
        kept.append("processes")
        config["copy"] = {"from": f"{KIT}/original", "to": layout.child_copy,
                          "ignore": list(IGNORED_NAMES)}
        config["site"] = list(interpreter()[2])
        config["library"] = LIBRARY_INSIDE
    else:
        config["site"] = list(package_folders())
        config["library"] = str(LIBRARY)
        config["parent"] = os.getpid()  # the harness asks to die with this process
    config["limits"] = {name: getattr(limits, name) for name in kept}
    return config


@contextlib.contextmanager
def child_outputs(layout: Layout) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """The child's stdout and stderr files, shared by every child of one run."""
    with open(layout.output / "stdout", "wb") as out, open(layout.output / "stderr", "wb") as err:
        yield out, err


def captured_output(layout: Layout, limits: Limits) -> tuple[str, str]:
    """What the children printed, capped and scrubbed; for feedback, never parsed."""
    cap = limits.output_kb * 1024

    def text(name: str) -> str:
        data = read_regular(layout.output / name, cap) or b""
        return layout.scrub(data[:cap].decode("utf-8", "replace"))

    return text("stdout"), text("stderr")


def read_regular(path: Path, cap: int, *, offset: int = 0) -> bytes | None:
    """Up to ``cap + 1`` bytes of a regular file, from ``offset``; None if it is missing or
    anything else.

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
        handle.seek(offset)
        return handle.read(cap + 1)
