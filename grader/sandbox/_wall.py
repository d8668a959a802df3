"""The wall: what a sandboxed child runs behind (``Wall``, the one abstract class every wall
implements; its classes are in ``grader.sandbox._walls``), the registry ``--wall`` chooses
from (``WALLS``), and the folders of one run, laid out for its wall (``Layout``).
"""

from __future__ import annotations

import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from grader._model import IGNORED_NAMES, Limits
from grader.sandbox._channel import Child
from grader.sandbox._hold import host_hold
from grader.sandbox._host import Hosts
from grader.sandbox._namespaces import KIT, as_root

__all__ = ["WALLS", "Layout", "Wall"]

WALLS: dict[str, type[Wall]] = {}  # name -> class, as each wall's class is defined


class Wall(ABC):
    """What a sandboxed child runs behind. A wall holds no state: two of one class are equal.

    A subclass sets ``name`` (the word ``--wall`` takes and a worker request carries),
    ``description`` (a report's line) and ``preference`` (``--wall auto`` takes the
    preferred wall that can be built here), and is registered by being defined.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    preference: ClassVar[int]
    # Whether a run behind it can copy itself at a case's start (``RunPlan.copies``): where
    # it can, a grading's loud-failure probes are copies of one run.
    copies: ClassVar[bool] = False

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
        """A warning for ``--wall auto`` to print when this wall cannot be built here
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

    def ahead(
        self,
        hosts: Hosts,
        seeds: Sequence[int],
        preload: Sequence[str] = (),
        shipped: Collection[str] = (),
    ) -> None:
        """Start, without waiting, what a grading's runs under the hash ``seeds`` will fork
        from (``hosts``' own, under its scratch), having imported the packages ``preload``
        names, and never one of ``shipped`` (the submission's own); nothing where each run
        starts its own."""
        return None

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
    def start(
        self,
        config: Mapping[str, object],
        layout: Layout,
        env: Mapping[str, str],
        outputs: tuple[IO[bytes], IO[bytes]],
        limits: Limits,
        shown: Sequence[Path],
    ) -> Child:
        """Start one harness behind this wall; ``shown``: the files of ``layout.work`` it
        sees (its traces, the probe's cassette)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """The folders of one sandboxed run, all in a fresh folder under the caller's scratch.

    Which of them the child sees, and by what names, is its ``wall``'s to say: behind the
    process wall it works in ``copy`` and ``work`` themselves; behind namespaces it sees
    none of them, only the files of ``work`` bound one by one.
    """

    root: Path  # the submission as the instructor handed it in
    source: Path  # its copy laid out once for the grading's runs: what each run copies
    run: Path
    copy: Path  # the submission's private copy: the child's cwd and HOME
    work: Path  # traces and TMPDIR: the only other place the child may write
    output: Path  # stdout and stderr, which the child reaches only through inherited fds
    wall: Wall
    hosts: Hosts | None = None  # the grading's hosts, which a wall may fork the run from

    @property
    def child_copy(self) -> str:
        """Where the child finds its copy of the submission."""
        return self.wall.child_copy(self)

    @property
    def child_work(self) -> str:
        """The folder the child writes besides its copy."""
        return self.wall.child_work(self)

    @property
    def ignored(self) -> tuple[str, ...]:
        """The names a run's copy leaves out: none from a laid-out copy, which has none of
        them (its ``__pycache__`` folders are the grader's compiled code)."""
        return IGNORED_NAMES if self.source == self.root else ()

    def inside(self, path: Path) -> str:
        """The name the child knows a file of ``work`` by."""
        return self.wall.inside(self, path)

    def scrub(self, text: str) -> str:
        """``text`` with this machine's paths replaced by stable names."""
        for spelling, name in _spellings(
            self.child_copy, self.child_work, str(self.copy), str(self.run)
        ):
            text = text.replace(spelling, name)
        return text


@functools.lru_cache(maxsize=64)
def _spellings(
    child_copy: str, child_work: str, copy: str, run: str
) -> tuple[tuple[str, str], ...]:
    """``Layout.scrub``'s replacements, the longest first: each path as given and as
    resolved (looked up once a run, not once a text)."""
    names = [
        (child_copy, "<submission>"),
        (child_work, "<scratch>"),
        (copy, "<submission>"),
        (run, "<scratch>"),
        (f"{KIT}/original", "<submission>"),
    ]
    spelled = {
        spelling: name for path, name in names for spelling in (path, os.path.realpath(path))
    }
    return tuple(
        (spelling, spelled[spelling]) for spelling in sorted(spelled, key=len, reverse=True)
    )
