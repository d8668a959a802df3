"""The trust boundary: untrusted agent code runs in a child process behind a wall, and the
parent alone decides what it did.

- The child side is the harness (``_harness.py``: standard library only, run by its file
  path, compiled once per grader process: ``_walls.harness_code``), which talks to the
  parent over a private pair of pipes (``_channel.py``).
- The walls, one class each (``_walls.py``) behind ``Wall`` (``_layout.py``, beside the
  folders of a run that a wall lays out): ``NamespacesWall`` (bubblewrap's namespaces, built
  in ``_isolation.py``) and ``ProcessWall`` (the audit-hook guard alone). ``choose_wall``
  turns ``--wall`` into one; ``wall_named`` turns the name a worker request carries back
  into one. A third wall is one more subclass of ``Wall``, and nothing else.
- On the host, behind either wall: a cgroup per child, or a watchdog where none can be made
  (``_hold.py``); an unprivileged uid for a root grader's children (``_isolation.py``); an
  allow-list system call filter behind namespaces (``_seccomp.py``). What each holds, and
  what a determined student can still do: ``docs/sandbox.md``.
- ``Sandbox``: a submission's root, a scratch folder, the rubric's limits and a wall. Its
  methods are the runs made through them: a run of cases (``run``, with a ``RunPlan``),
  a regression set's items (``replay``), the own-Replay probe (``probe_replay``) and the
  cut-point test (``run_cut_point_test``).

Besides the kit (``gradekit``), the sandbox imports only the grader's base modules.

May import: base.
"""

from __future__ import annotations

from grader.sandbox._channel import HARNESS
from grader.sandbox._cutpoint import cut_point_problem
from grader.sandbox._host import Hosts
from grader.sandbox._isolation import package_folders
from grader.sandbox._layout import (
    BOUNDS,
    DEFAULT_LIMITS,
    LAID_AHEAD,
    LaidOut,
    SubmissionTooLarge,
    copy_caps,
)
from grader.sandbox._sandbox import (
    CLOCK,
    Answer,
    CaseServer,
    RunPlan,
    Sandbox,
    Serving,
    ToolAnswer,
)
from grader.sandbox._scratch import scratch_folder, scratch_root
from grader.sandbox._wall import Wall
from grader.sandbox._walls import (
    PROCESS_WALL,
    NamespacesWall,
    ProcessWall,
    choose_wall,
    share_hosts,
    wall_named,
    wall_requests,
    warm_walls,
)

__all__ = [
    "BOUNDS",
    "CLOCK",
    "DEFAULT_LIMITS",
    "HARNESS",
    "LAID_AHEAD",
    "PROCESS_WALL",
    "Answer",
    "CaseServer",
    "Hosts",
    "LaidOut",
    "NamespacesWall",
    "ProcessWall",
    "RunPlan",
    "Sandbox",
    "Serving",
    "SubmissionTooLarge",
    "ToolAnswer",
    "Wall",
    "choose_wall",
    "copy_caps",
    "cut_point_problem",
    "package_folders",
    "scratch_folder",
    "scratch_root",
    "share_hosts",
    "wall_named",
    "wall_requests",
    "warm_walls",
]
