"""Work a batch does at the idle priority: laying out the next submissions, removing the
graded ones' scratch folders.

Every grading copies its submission once (``grader.sandbox.LaidOut``: ignored names left
out, every file readable by the runs) and leaves a scratch folder behind: for a submission
the size of the hand-out (410 files, 4.6 MB) the copy costs about 18 ms of CPU and the
removal about 5 ms. A worker paid the first and the batch's slot the second, between one
worker and the next. Meanwhile the CPUs idle for moments at a time, whenever every
grading waits on the kernel.

``IdleHelper`` is a process of its own under Linux's ``SCHED_IDLE`` policy: it runs only
when nothing else wants a CPU. It takes orders, in order, on a pipe:

- ``lay``: copy a submission that is about to be graded into its scratch folder, as
  ``LaidOut`` would, under a temporary name renamed to ``LAID_AHEAD`` once whole. A
  grading that finds it there uses it; one that does not (the helper had no idle time
  yet) copies the submission itself, as before. Like ``LaidOut``, the helper first
  counts what the copy would hold (``grader.sandbox._bounds``, loaded by its path as the
  harness is) and copies nothing past the rubric's caps (``copy_caps``): it lays out no
  such submission, and its grading, finding none, refuses it with the reason.
- ``remove``: remove a graded submission's scratch folder.

An order the pipe cannot take at once is done in place (a removal) or dropped (a copy,
which the grading then makes). What the helper has not removed when the batch ends goes
with the batch's scratch folder. Where the policy does not exist (not Linux) or the
helper cannot start, every order is done in place or dropped the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from grader._model import Limits
from grader.sandbox import BOUNDS, DEFAULT_LIMITS, HARNESS, LAID_AHEAD, copy_caps

__all__ = ["IdleHelper"]

# The whole helper: the harness's own copy and the walk that bounds it (files of the
# standard library only), then one JSON order a line, each done in turn, until the pipe ends.
_PROGRAM = """\
import importlib.util, json, os, shutil, sys
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
harness = load("gradekit_harness", sys.argv[1])
bounds = load("gradekit_bounds", sys.argv[2])
pending = b""
while chunk := os.read(0, 65536):
    *orders, pending = (pending + chunk).split(b"\\n")
    for order in orders:
        kind, *paths = json.loads(order)
        if kind == "remove":
            shutil.rmtree(paths[0], ignore_errors=True)
            continue
        source, target, ignored, caps = paths
        laying = target + ".laying"
        try:
            if bounds.measure(source, ignored, **caps) is not None:
                continue  # past a cap: nothing copied; the grading says why
            os.mkdir(laying, 0o700)
            os.chmod(laying, 0o755)
            harness.copy_submission(source, os.path.join(laying, "copy"), ignored, shared=True)
            os.rename(laying, target)
        except Exception:
            shutil.rmtree(laying, ignore_errors=True)
"""


class IdleHelper:
    """A process at the idle priority that lays out and removes folders; ``close`` ends it."""

    def __init__(self) -> None:
        self._pid = -1
        self._write = -1
        idle = getattr(os, "SCHED_IDLE", None)
        if idle is None or not hasattr(os, "posix_spawn"):
            return
        read, write = os.pipe()
        try:
            self._pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", "-c", _PROGRAM, str(HARNESS), str(BOUNDS)],
                {},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,
            )  # not the terminal's: a Ctrl-C stops the batch, which ends it
        except OSError:
            os.close(write)
            return
        finally:
            os.close(read)
        self._write = write
        try:  # posix_spawn's own scheduler= takes the POSIX policies only
            os.sched_setscheduler(self._pid, idle, os.sched_param(0))
        except OSError:
            self.close()
            return
        os.set_blocking(write, False)

    def lay_out(
        self, root: Path, scratch: Path, ignored: Sequence[str], *, limits: Limits = DEFAULT_LIMITS
    ) -> None:
        """Have the submission at ``root`` laid out in ``scratch`` (an empty scratch folder
        of a grading to come) as ``scratch / LAID_AHEAD``, when the helper gets to it,
        unless the copy would pass a cap of ``limits`` (the rubric's, as its grading's
        ``LaidOut`` is given them; ``copy_caps``): then none is."""
        self._order(
            [
                "lay",
                str(root.absolute()),
                str(scratch / LAID_AHEAD),
                list(ignored),
                copy_caps(limits),
            ]
        )

    def remove(self, folder: Path) -> None:
        """Have ``folder`` removed: by the helper when it takes the order, else now."""
        if not self._order(["remove", str(folder)]):
            shutil.rmtree(folder, ignore_errors=True)

    def _order(self, order: list[object]) -> bool:
        """Whether the helper took ``order`` (one write, whole or refused: PIPE_BUF)."""
        line = (json.dumps(order, ensure_ascii=True) + "\n").encode("ascii")
        if self._write < 0 or len(line) > select.PIPE_BUF:
            return False
        try:
            os.write(self._write, line)
        except (BlockingIOError, BrokenPipeError):
            return False
        return True

    def close(self) -> None:
        """End the helper now: what it has not done goes with the batch's scratch folder."""
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        if self._pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
            self._pid = -1
