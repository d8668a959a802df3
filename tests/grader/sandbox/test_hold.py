"""What holds a child on the host, decided from /proc's text: cgroup v2 where this process's
own cgroup is delegated, else the v1 hierarchies where writable, else a watchdog.

The kernel's cgroup filesystems cannot be mounted for a test, so these tests give
``find`` the text of /proc/self/mountinfo and /proc/self/cgroup, pointing at a folder that
stands for the hierarchy; ``test_isolation.py`` runs children in the real cgroups of this
machine (whatever hold it has) and attacks them.

It tests ``grader.sandbox._hold``'s private helpers on purpose (``_sweep``, ``_tried``),
with ``_channel``'s children: the hold is decided inside the module.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import Limits
from grader.sandbox._channel import Child, settle_children
from grader.sandbox._hold import (
    Budget,
    Cell,
    CgroupV1,
    CgroupV2,
    Watchdog,
    _sweep,
    _tried,
    close_spare_cells,
    host_hold,
)

V2_ONLY = "30 23 0:26 / {mount} rw,nosuid - cgroup2 cgroup2 rw\n"
V1 = "".join(
    f"3{n} 23 0:3{n} / {{mount}}/{c} rw - cgroup cgroup rw,{c}\n"
    for n, c in enumerate(("memory", "pids", "cpu"))
)


def _v2_tree(tmp_path: Path, controllers: str, enabled: str = "") -> Path:
    own = tmp_path / "user.slice" / "grader.service"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text(controllers + "\n")
    (own / "cgroup.subtree_control").write_text(enabled + "\n")
    (own / "cgroup.procs").write_text("")
    return own


def test_a_v2_cell_writes_the_budget_into_the_kernels_files(tmp_path: Path) -> None:
    own = _v2_tree(tmp_path, "cpuset cpu io memory pids", "cpu memory pids")
    hold = CgroupV2.find(V2_ONLY.format(mount=tmp_path), "0::/user.slice/grader.service\n")
    assert isinstance(hold, CgroupV2) and hold.base == own
    names = (
        "memory.max",
        "memory.swap.max",
        "memory.oom.group",
        "pids.max",
        "cpu.max",
        "memory.events",
        "cgroup.procs",
    )
    original_mkdir = Path.mkdir

    def mkdir_with_files(self: Path, *args: object, **kwargs: object) -> None:
        original_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.parent == own:  # what the kernel puts in a new cgroup
            for name in names:
                (self / name).write_text("")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "mkdir", mkdir_with_files)
        cell = hold.cell(Budget.of(Limits(memory_mb=256, disk_mb=16, processes=32)))
    (folder,) = [p for p in own.iterdir() if p.is_dir()]
    assert folder.name.startswith(f"gradekit-{os.getpid()}-")

    written = {name: (folder / name).read_text() for name in names[:5]}
    assert written == {
        "memory.max": str(272 << 20),
        "memory.swap.max": "0",
        "memory.oom.group": "1",
        "pids.max": "32",
        "cpu.max": "100000 100000",
    }
    assert cell.over() == ""
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cell.over() == (
        "killed: it held more than its 272 MiB of host memory (memory_mb and disk_mb together)"
    )
    for name in names:
        (folder / name).unlink()  # what rmdir removes in the kernel's filesystem
    cell.close()
    assert not folder.exists()


@pytest.mark.parametrize(
    ("mounts", "own", "why"),
    [
        ("", "0::/\n", "no cgroup v2 hierarchy"),
        (V2_ONLY, "1:memory:/x\n", "no cgroup v2 hierarchy"),
    ],
)
def test_no_v2_hierarchy_is_said(tmp_path: Path, mounts: str, own: str, why: str) -> None:
    assert CgroupV2.find(mounts.format(mount=tmp_path), own) == why


def test_a_v2_cgroup_without_memory_and_pids_is_not_a_hold(tmp_path: Path) -> None:
    own = _v2_tree(tmp_path, "cpu io")
    found = CgroupV2.find(V2_ONLY.format(mount=tmp_path), "0::/user.slice/grader.service\n")
    assert found == f"{own} has no memory and pids controllers"


def test_v2_controllers_are_enabled_for_the_children_when_they_are_not_yet(tmp_path: Path) -> None:
    own = _v2_tree(tmp_path, "cpu memory pids", "")
    hold = CgroupV2.find(V2_ONLY.format(mount=tmp_path), "0::/user.slice/grader.service\n")
    assert isinstance(hold, CgroupV2)
    assert (own / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"


def test_the_v1_hierarchies_hold_memory_pids_and_cpu_where_writable(tmp_path: Path) -> None:
    for controller in ("memory", "pids", "cpu"):
        (tmp_path / controller / "grading").mkdir(parents=True)
    own = "4:memory:/grading\n8:pids:/grading\n1:cpu,cpuacct:/grading\n0::/\n"

    hold = CgroupV1.find(V1.format(mount=tmp_path), own)

    assert isinstance(hold, CgroupV1)
    assert hold.bases == tuple(tmp_path / c / "grading" for c in ("memory", "pids", "cpu"))
    assert hold.description == "a cgroup per child (v1: memory, pids, cpu)"
    cell = hold.cell(Budget(64, 8))
    made = sorted(p.relative_to(tmp_path).parts[0] for p in tmp_path.glob("*/grading/*"))
    assert made == ["cpu", "memory", "pids"]
    cell.close()
    assert list(tmp_path.glob("*/grading/*")) == []


def test_v1_without_a_pids_hierarchy_is_not_a_hold(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    mounts = "".join(
        line for line in V1.format(mount=tmp_path).splitlines(True) if not line.endswith(",pids\n")
    )
    assert CgroupV1.find(mounts, "4:memory:/\n8:pids:/\n") == "no cgroup v1 pids hierarchy"


def test_the_watchdog_counts_a_process_tree_against_its_budget() -> None:
    cell = Watchdog("no cgroup here").cell(Budget(1 << 20, 10_000))
    assert cell.watched
    assert cell.watch(os.getpid()) == ""  # this process: within a huge budget
    tight = Watchdog("no cgroup here").cell(Budget(1, 10_000))
    assert tight.watch(os.getpid()).startswith("killed: it held more than its 1 MiB")
    few = Watchdog("no cgroup here").cell(Budget(1 << 20, 0))
    assert few.watch(os.getpid()) == (
        "killed: it ran more than its 0 tasks (processes, threads included)"
    )


def test_this_machine_has_a_hold_and_says_which() -> None:
    hold = host_hold()
    assert hold.description.startswith(
        (
            "a cgroup per child (v2",
            "a cgroup per child (v1",
            "a watchdog in the grader, no cgroup (",
        )
    )


def test_a_cgroup_where_no_cell_can_be_made_or_entered_is_not_a_hold(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    plain = CgroupV1([("memory", tmp_path / "memory")])  # no kernel: no cgroup.procs to join
    assert _tried(plain) == ("a cgroup per child (v1: memory) cannot be entered (SubprocessError)")
    gone = CgroupV1([("memory", tmp_path / "memory"), ("pids", tmp_path / "gone")])
    why = _tried(gone)
    assert why.startswith("a cgroup per child (v1: memory, pids) cannot be set up (")
    assert why.endswith(": No such file or directory)")
    assert list((tmp_path / "memory").iterdir()) == []  # every half-made cell is removed


def test_this_machines_cgroup_takes_a_process_and_lets_it_go() -> None:
    hold = host_hold()
    if isinstance(hold, Watchdog):
        pytest.skip(f"no cgroup here: {hold.description}")
    assert _tried(hold) == ""


def test_cells_left_by_a_grader_that_no_longer_runs_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])  # a pid that has just ended
    dead.wait()
    left = tmp_path / f"gradekit-{dead.pid}-3"
    mine = tmp_path / f"gradekit-{os.getpid()}-1"  # this process runs: kept
    busy = tmp_path / f"gradekit-{dead.pid}-4"  # cannot be removed: kept (a file in it)
    other = tmp_path / "gradekit-grader-1"  # not a cell's name: kept
    for folder in (left, mine, busy, other):
        folder.mkdir()
    (busy / "cgroup.procs").write_text("")

    _sweep([tmp_path, tmp_path / "missing"])

    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (mine, busy, other))


class _OneKill(Cell):
    """A cell whose kernel says it killed its child, until the cell is removed (as a
    cgroup's ``memory.events`` goes with its folder)."""

    def __init__(self) -> None:
        self.closed = False

    def over(self) -> str:
        return "" if self.closed else Budget.of(Limits(memory_mb=64)).memory_over()

    def close(self) -> None:
        self.closed = True


@pytest.mark.slow
def test_why_the_kernel_stopped_a_child_is_read_before_its_cell_goes(tmp_path: Path) -> None:
    cell = _OneKill()
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        child = Child(
            {},
            tmp_path,
            {},
            (out, err),
            cell=cell,
            command=[sys.executable, "-c", "import os, sys; os._exit(9)"],
        )
        code, killed = child.finish(time.monotonic() + 30)
    assert (code, killed) == (9, False)
    assert (
        child.stopped == "killed: it held more than its 128 MiB of host memory (memory_mb "
        "and disk_mb together)"
    )
    settle_children()  # the cell goes once the child's last traces are gone
    assert cell.closed


@pytest.mark.slow
def test_a_child_that_cannot_be_waited_on_does_not_outlive_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []

    def exhausted(pid: int, flags: int = 0) -> int:  # every descriptor taken
        started.append(pid)
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "pidfd_open", exhausted)
    with (
        open(tmp_path / "out", "wb") as out,
        open(tmp_path / "err", "wb") as err,
        pytest.raises(OSError, match="Too many open files"),
    ):
        Child(
            {},
            tmp_path,
            {},
            (out, err),
            command=[sys.executable, "-c", "import time; time.sleep(600)"],
        )
    assert len(started) == 1
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(started[0], 0)


# -- a grading's children take turns in one cgroup -----------------------------------------

CELL_FILES = (
    "memory.max",
    "memory.swap.max",
    "memory.oom.group",
    "pids.max",
    "cpu.max",
    "memory.events",
    "cgroup.procs",
)  # what the kernel puts in a new v2 cgroup


def test_a_cell_handed_back_is_the_next_childs_and_counts_only_its_kills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept cgroup's out-of-memory count is cumulative in the kernel: the next child is
    judged on the kills after it took the cell, never on its predecessor's."""
    close_spare_cells()  # none kept by an earlier test's real children is taken here
    own = _v2_tree(tmp_path, "cpu memory pids", "cpu memory pids")
    hold = CgroupV2.find(V2_ONLY.format(mount=tmp_path), "0::/user.slice/grader.service\n")
    assert isinstance(hold, CgroupV2)
    names = CELL_FILES
    original_mkdir = Path.mkdir

    def mkdir_with_files(self: Path, *args: object, **kwargs: object) -> None:
        original_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.parent == own:
            for name in names:
                (self / name).write_text("")

    monkeypatch.setattr(Path, "mkdir", mkdir_with_files)
    budget, other = Budget(256, 32), Budget(512, 32)
    first = hold.cell(budget)
    (folder,) = [p for p in own.iterdir() if p.is_dir()]
    (folder / "memory.events").write_text("oom 1\noom_kill 1\n")
    assert first.over().startswith("killed: it held more than its 256 MiB")
    first.release()
    second = hold.cell(budget)
    assert second is first and [p for p in own.iterdir() if p.is_dir()] == [folder]
    assert second.over() == ""  # the kill before it took the cell is not its own
    assert hold.cell(other) is not first  # another budget: a cgroup of its own
    (folder / "memory.events").write_text("oom 2\noom_kill 2\n")
    assert second.over().startswith("killed: it held more than its 256 MiB")
    second.release()
    for made in own.iterdir():
        if made.is_dir():
            for name in names:
                (made / name).unlink()  # what rmdir removes in the kernel's filesystem
    close_spare_cells()
    assert not folder.exists()
    assert hold.cell(budget) is not first  # nothing kept once the spares are closed


def test_a_forked_child_never_takes_its_parents_kept_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell kept in a process is that process's: a child forked from it (a zygote's
    worker, say) starts with none, so two processes never take one cgroup at once."""
    close_spare_cells()  # none kept by an earlier test's real children is taken here
    own = _v2_tree(tmp_path, "cpu memory pids", "cpu memory pids")
    hold = CgroupV2.find(V2_ONLY.format(mount=tmp_path), "0::/user.slice/grader.service\n")
    assert isinstance(hold, CgroupV2)
    monkeypatch.setattr(Path, "mkdir", lambda self, *a, **k: os.mkdir(self))
    budget = Budget(256, 32)
    cell = hold.cell(budget)
    (next(p for p in own.iterdir() if p.is_dir()) / "cgroup.procs").write_text("")
    cell.release()
    child = os.fork()
    if child == 0:  # the child: a new cell, not the parent's
        os._exit(0 if hold.cell(budget) is not cell else 1)
    assert os.waitpid(child, 0)[1] == 0
    assert hold.cell(budget) is cell  # the parent's is still its own


def test_a_cell_that_cannot_be_emptied_is_closed_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    close_spare_cells()  # none kept by an earlier test's real children is taken here
    own = _v2_tree(tmp_path, "cpu memory pids", "cpu memory pids")
    hold = CgroupV2.find(V2_ONLY.format(mount=tmp_path), "0::/user.slice/grader.service\n")
    assert isinstance(hold, CgroupV2)
    monkeypatch.setattr(Path, "mkdir", lambda self, *a, **k: os.mkdir(self))
    cell = hold.cell(Budget(256, 32))
    (folder,) = [p for p in own.iterdir() if p.is_dir()]
    (folder / "cgroup.procs").write_text("999999999\n")  # a task no signal removes
    closed: list[Cell] = []
    monkeypatch.setattr(type(cell), "close", lambda self: closed.append(self))
    cell.release()
    assert closed == [cell]
    assert hold.cell(Budget(256, 32)) is not cell


@pytest.mark.slow
def test_what_a_child_left_in_its_cell_is_killed_before_the_next_child_takes_it(
    tmp_path: Path,
) -> None:
    hold = host_hold()
    if isinstance(hold, Watchdog):
        pytest.skip(f"no cgroup here: {hold.description}")
    budget = Budget.of(Limits())
    cell = hold.cell(budget)
    left = tmp_path / "left"
    leave = (
        "import subprocess, sys; p = subprocess.Popen(['sleep', '600'], "
        "start_new_session=True); open(sys.argv[1], 'w').write(str(p.pid))"
    )
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        child = Child(
            {},
            tmp_path,
            {},
            (out, err),
            cell=cell,
            command=[sys.executable, "-c", leave, str(left)],
        )
        child.finish(time.monotonic() + 30)
    sleeper = int(left.read_text())
    os.kill(sleeper, 0)  # it outlived the child, in the child's cell
    try:
        settle_children()  # the cell is handed back: emptied, then kept
        assert hold.cell(budget) is cell
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(sleeper, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)
        else:
            pytest.fail(f"the process the child left ({sleeper}) still runs")
        cell.release()
    finally:
        close_spare_cells()
    assert not any(folder.exists() for folder in cell.folders)  # type: ignore[attr-defined]
