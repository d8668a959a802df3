"""One sandboxed run's folders, the wall they are laid out for, and what the child is told.

``Wall`` is what every wall does (its classes are in ``grader.sandbox._walls``);
``prepare_run`` makes a run's folders, the wall laying out its part; ``child_config`` and
``child_environment`` are what the child is told; ``captured_output`` and ``read_regular``
are how the parent reads what it left.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from grader._model import IGNORED_NAMES, Limits
from grader.sandbox._channel import Child
from grader.sandbox._hold import host_hold
from grader.sandbox._isolation import KIT, as_root

__all__ = [
    "IGNORED_NAMES", "WALLS", "Layout", "Wall", "captured_output", "child_config",
    "child_environment", "child_outputs", "prepare_run", "read_regular",
]



WALLS: dict[str, type[Wall]] = {}  # name -> class, as each wall's class is defined


class Wall(ABC):
    """What a sandboxed child runs behind. A wall holds no state: two of one class are equal.

    A subclass sets ``name`` (the word ``--isolation`` takes and a worker request carries),
    ``description`` (a report's line) and ``preference`` (``--isolation auto`` takes the
    preferred wall that can be built here), and is registered by being defined.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    preference: ClassVar[int]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in vars(cls):
            WALLS[cls.name] = cls

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def missing(self) -> str:
        """Why this wall cannot be built here, with the fix; "" when it can."""
        return ""

    def passed_over(self) -> str:
        """A warning for ``--isolation auto`` to print when this wall cannot be built here
        and a weaker one is taken instead; "" for none."""
        return ""

    def held(self) -> str:
        """This wall and what holds each child on the host (a cgroup, or a watchdog)."""
        return f"{self.description}; {host_hold().description}"

    def stated(self, root: Path, scratch: Path) -> str:
        """The report's isolation line for a grading of ``root`` with runs under
        ``scratch``: ``held()``, and as whom each child runs on the host."""
        return f"{self.held()}; children run as {'root' if as_root() else 'the grader'} on the host"

    @abstractmethod
    def warm(self) -> None:
        """Look up once what every child behind this wall needs, before a process forks
        workers that would each look it up again."""

    @abstractmethod
    def prepare(self, layout: Layout) -> None:
        """Make the run's folders the child needs before it starts (besides ``output``)."""

    @abstractmethod
    def child_copy(self, layout: Layout) -> str:
        """Where the child finds its copy of the submission: its cwd and HOME."""

    @abstractmethod
    def child_work(self, layout: Layout) -> str:
        """The folder the child may write besides its copy (traces, TMPDIR)."""

    @abstractmethod
    def inside(self, layout: Layout, path: Path) -> str:
        """The name the child knows a file of ``layout.work`` by."""

    @abstractmethod
    def configure(self, layout: Layout, limits: Limits) -> dict[str, object]:
        """This wall's part of the child's configuration, its resource limits last."""

    @abstractmethod
    def start(self, config: Mapping[str, object], layout: Layout, env: Mapping[str, str],
              outputs: tuple[IO[bytes], IO[bytes]], limits: Limits,
              shown: Sequence[Path]) -> Child:
        """Start one harness behind this wall; ``shown``: the files of ``layout.work`` it
        sees (its traces, the probe's cassette)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """The folders of one sandboxed run, all in a fresh folder under the caller's scratch.

    Which of them the child sees, and by what names, is its ``wall``'s to say: behind the
    process guard it works in ``copy`` and ``work`` themselves; behind namespaces it sees
    none of them, only the files of ``work`` bound one by one.
    """

    root: Path  # the submission as the instructor handed it in
    run: Path
    copy: Path  # the submission's private copy: the child's cwd and HOME
    work: Path  # traces and TMPDIR: the only other place the child may write
    output: Path  # stdout and stderr, which the child reaches only through inherited fds
    wall: Wall

    @property
    def child_copy(self) -> str:
        """Where the child finds its copy of the submission."""
        return self.wall.child_copy(self)

    @property
    def child_work(self) -> str:
        """The folder the child writes besides its copy."""
        return self.wall.child_work(self)

    def inside(self, path: Path) -> str:
        """The name the child knows a file of ``work`` by."""
        return self.wall.inside(self, path)

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


def prepare_run(root: Path, scratch: Path, wall: Wall) -> Layout:
    """A fresh run's folders under ``scratch``, laid out for the child behind ``wall``."""
    scratch.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=scratch)).resolve()
    layout = Layout(root.resolve(), run, run / "submission", run / "work", run / "output",
                    wall)
    wall.prepare(layout)
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


def child_config(layout: Layout, limits: Limits, **fields: object) -> dict[str, object]:
    """The child's configuration, the first line it reads: the mode's ``fields``, then what
    its wall adds (see ``Wall.configure``)."""
    return {
        "root": layout.child_copy,
        "roots": [layout.child_copy, layout.child_work],
        "seal": secrets.token_hex(16),  # on every verdict the harness sends (its ``sealer``)
        **fields,
        **layout.wall.configure(layout, limits),
    }


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
