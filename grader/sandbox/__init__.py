"""The trust boundary: untrusted agent code runs in a child process behind a wall, and the
parent alone decides what it did.

- The child side is the harness (``_harness.py``: standard library only, run by its file
  path, compiled once per grader process: ``_walls.harness_code``), which talks to the
  parent over a private pair of pipes (``_channel.py``).
- The walls, one class each (``_walls.py``) behind ``Wall`` (``_layout.py``, beside the
  folders of a run that a wall lays out): ``NamespacesWall`` (bubblewrap's namespaces, built
  in ``_namespaces.py``) and ``ProcessWall`` (the audit hook alone). ``choose_wall``
  turns ``--wall`` into one; ``wall_named`` turns the name a worker request carries back
  into one. A third wall is one more subclass of ``Wall``, and nothing else.
- On the host, behind either wall: a cgroup per child, or a watchdog where none can be made
  (``_hold.py``); an unprivileged uid for a root grader's children (``_namespaces.py``); an
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

from grader.sandbox._bounds import measure
from grader.sandbox._channel import HARNESS, Child, ProtocolError
from grader.sandbox._cutpoint import cut_point_problem
from grader.sandbox._harness import allow_everything, copy_submission
from grader.sandbox._hold import Watchdog, host_hold
from grader.sandbox._host import Host, Hosts
from grader.sandbox._layout import (
    BOUNDS,
    DEFAULT_LIMITS,
    LAID_AHEAD,
    LaidOut,
    SubmissionTooLarge,
    copy_caps,
    readable,
)
from grader.sandbox._namespaces import (
    ALLOW_HOST_ROOT,
    INSTALL_HINT,
    bubblewrap,
    host_root_refusal,
    package_folders,
)
from grader.sandbox._readable import interpreter_parts, readable_copy
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
from grader.sandbox._wall import Layout, Wall
from grader.sandbox._walls import (
    PROCESS_WALL,
    NamespacesWall,
    ProcessWall,
    choose_wall,
    harness_code,
    share_hosts,
    wall_named,
    wall_requests,
    warm_walls,
)

__all__ = [
    "ALLOW_HOST_ROOT",
    "BOUNDS",
    "CLOCK",
    "DEFAULT_LIMITS",
    "HARNESS",
    "INSTALL_HINT",
    "LAID_AHEAD",
    "PROCESS_WALL",
    "Answer",
    "CaseServer",
    "Child",
    "Host",
    "Hosts",
    "LaidOut",
    "Layout",
    "NamespacesWall",
    "ProcessWall",
    "ProtocolError",
    "RunPlan",
    "Sandbox",
    "Serving",
    "SubmissionTooLarge",
    "ToolAnswer",
    "Wall",
    "Watchdog",
    "allow_everything",
    "bubblewrap",
    "choose_wall",
    "copy_caps",
    "copy_submission",
    "cut_point_problem",
    "harness_code",
    "host_hold",
    "host_root_refusal",
    "interpreter_parts",
    "measure",
    "package_folders",
    "readable",
    "readable_copy",
    "scratch_folder",
    "scratch_root",
    "share_hosts",
    "wall_named",
    "wall_requests",
    "warm_walls",
]
