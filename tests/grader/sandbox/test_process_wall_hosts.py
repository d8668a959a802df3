"""Runs forked from the process wall's hosts, attacked.

Behind the process wall (no bubblewrap: a laptop, many CI images) a grading's runs fork
from one warmed interpreter per hash seed (``serve_process_host`` in ``_harness.py``), as they
do behind namespaces, instead of each starting an interpreter of its own. There are no
namespaces here: what stands between a run and its host is the kernel's own rules. The
host is not dumpable (no run reads or writes its memory, through ``/proc`` or ptrace), a
root grader's host stays root while its runs become uid 65534 (no run signals it), and a
run holds no descriptor of its host's. What a run changes in its own memory stays in it.

Every hostile agent here first switches the audit hook off (as in ``test_isolation.py``),
so that what holds is the kernel, not the hook; it writes what it observed to a file the
test names (with the hook off a write lands anywhere its uid may write: that is the
guard's known weakness, and the point of the test is what the host keeps regardless).

It reaches ``grader.sandbox._host`` on purpose: the shared hosts a test saves, ends and puts
back are the module's own.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import grader.sandbox._host
from grader import CaseOutcome, Limits
from grader.sandbox import ProcessWall, RunPlan, Sandbox, Serving
from tests.grader.sandbox._unhook import SWITCH_THE_HOOK_OFF, TRIED

pytestmark = pytest.mark.slow

AGENT = (
    SWITCH_THE_HOOK_OFF
    + TRIED
    + '''
import errno, gc, json, os, random, signal, sys, _thread
import gradekit
from pathlib import Path


def run(provider, task):
    name, _, arg = task.partition(" ")
    if name.startswith("off-"):
        assert switch_the_hook_off(), "the hook was not found"
    said = globals()["do_" + name.removeprefix("off-")](provider, arg)
    if name.startswith("off-"):  # the verdict is lost with the hook off: say it by file
        Path(arg).write_text(json.dumps(said))
        return "written"
    return json.dumps(said)


def do_look(provider, arg):
    """What an honest run sees of itself."""
    parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\\0")
    return {"answer": provider.complete("Plan: " + arg), "uid": os.getuid(),
            "gid": os.getgid(), "groups": os.getgroups(), "hash": hash("abc"),
            "env": sorted(os.environ), "home": os.getcwd() == os.environ["HOME"],
            "argv": sys.argv[1:], "parent": "process" in [p.decode() for p in parent],
            "ppid": os.getppid(), "random": random.random(), "pid": os.getpid(),
            "planted": sorted(name for name in vars(sys.modules["gradekit"])
                              if name.startswith("planted")),
            "replay": gradekit.Replay.complete.__name__,
            "random planted": hasattr(random, "planted")}


def do_plant(provider, arg):
    """Change what the next run of the host would find, in this run's memory."""
    import gradekit

    gradekit.planted_by_a_classmate = True
    gradekit.Replay.complete = lambda self, prompt: "forged"
    random.seed(0)
    random.planted = True
    return {"planted": True}


def do_reach(provider, arg):
    """Everything of the host a run could reach: its memory, its environment, ptrace,
    its descriptors, and signals (0: asks only)."""
    host = os.getppid()
    reached = {name: tried(lambda name=name: open(f"/proc/{host}/{name}", "rb").read(1))
               for name in ("mem", "environ", "auxv", "syscall", "stack")}
    reached["write mem"] = tried(lambda: open(f"/proc/{host}/mem", "r+b").close())
    reached["fd"] = tried(lambda: os.listdir(f"/proc/{host}/fd"))
    # PTRACE_SEIZE: the permission PTRACE_ATTACH needs, without stopping a host it got
    reached["seize"] = libc_call("ptrace", 0x4206, host, None, None)
    reached["signal"] = tried(lambda: os.kill(host, 0))
    reached["uid"] = os.getuid()
    return reached


def do_descriptors(provider, arg):
    """Every descriptor the run holds, by what it is."""
    return {fd: tried(lambda fd=fd: os.readlink(f"/proc/self/fd/{fd}"))
            for fd in sorted(os.listdir("/proc/self/fd"), key=int)}


def do_leave(provider, arg):
    """Leave a process behind, in the run's own group, and say its pid."""
    child = os.fork()
    if child == 0:
        while True:
            signal.pause()
    return {"left": child}


def do_hold(provider, arg):
    """Say its pid, then hang."""
    Path(arg).write_text(str(os.getpid()))
    while True:
        signal.pause()


def do_die(provider, arg):
    if arg == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:
        signal.pause()
'''
)

LIMITS = Limits(timeout_s=20)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("agent")
    (root / "lab").mkdir()
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(AGENT)
    (root / "pyproject.toml").write_text("")
    return root


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder every user may pass through (a root grader's runs are uid 65534), with hosts
    allowed in this process whatever an earlier test refused."""
    monkeypatch.setattr(grader.sandbox._host, "_unavailable", [])
    tmp_path.chmod(0o711)
    return tmp_path


@pytest.fixture
def sandbox(agent: Path, folder: Path) -> Iterator[Sandbox]:
    """A sandbox behind the process wall whose runs under hash seeds 3 and 4 fork from the
    hosts it started ahead, as a grading's do."""
    sandbox = Sandbox(agent, folder / "scratch", LIMITS, ProcessWall())
    sandbox.ahead([3, 4])
    try:
        yield sandbox
    finally:
        sandbox.close()


def _outcome(
    sandbox: Sandbox,
    task: str,
    *,
    hashseed: int = 3,
    answer: Callable[[str, str], str | None] = lambda case, prompt: "recorded",
) -> CaseOutcome:
    result = sandbox.within("run").run(
        "lab.agent:run", [("c", task)], RunPlan("provider-a", hashseed, Serving(answer))
    )
    assert result.import_error is None, result.import_error
    return result.outcomes["c"]


def _said(sandbox: Sandbox, task: str, *, hashseed: int = 3) -> Any:
    outcome = _outcome(sandbox, task, hashseed=hashseed)
    assert outcome.status == "returned" and outcome.answer is not None, outcome
    return json.loads(outcome.answer)


def _unhooked(sandbox: Sandbox, folder: Path, name: str, *, hashseed: int = 3) -> Any:
    """What a run with the hook off observed (its verdict is lost, as it should be)."""
    said = folder / f"{name}.json"
    said.parent.chmod(0o777)  # with the hook off, uid 65534 writes here
    outcome = _outcome(sandbox, f"off-{name} {said}", hashseed=hashseed)
    assert outcome.status == "crashed", outcome  # the guard says its hook was switched off
    return json.loads(said.read_text())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _wait(found: Callable[[], Any], seconds: float = 10) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := found()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def test_runs_fork_from_their_seeds_host_and_see_what_a_run_of_its_own_sees(
    agent: Path, folder: Path, sandbox: Sandbox
) -> None:
    forked = [_said(sandbox, "look refunds", hashseed=seed) for seed in (3, 4, 3)]
    alone = Sandbox(agent, folder / "alone", LIMITS, ProcessWall())  # nothing started ahead
    own = [_said(alone, "look refunds", hashseed=seed) for seed in (3, 4)]

    assert [run["parent"] for run in forked] == [True, True, True]
    assert [run["parent"] for run in own] == [False, False]
    assert forked[0]["ppid"] == forked[2]["ppid"] != forked[1]["ppid"]  # one host a seed
    assert len({run["random"] for run in (*forked, *own)}) == 5  # each run its own stream
    if os.geteuid() == 0:  # a root grader's runs: uid 65534, the host staying root
        assert {(run["uid"], run["gid"], tuple(run["groups"])) for run in forked} == {
            (65534, 65534, ())
        }
    volatile = ("ppid", "pid", "random", "parent")
    for run, other in ((forked[0], own[0]), (forked[1], own[1]), (forked[2], own[0])):
        assert {k: v for k, v in run.items() if k not in volatile} == {
            k: v for k, v in other.items() if k not in volatile
        }
    assert forked[0]["hash"] != forked[1]["hash"]  # the seed is the host's, one a seed


def test_what_a_run_changes_in_its_memory_never_reaches_the_next_run_of_its_host(
    sandbox: Sandbox,
) -> None:
    """A classmate's run after this one (a batch's workers share the zygote's hosts) forks
    from the host as it was, not as the last run left its own copy of it."""
    before = _said(sandbox, "look x")
    assert _said(sandbox, "plant x") == {"planted": True}
    after = _said(sandbox, "look x")

    assert after["ppid"] == before["ppid"]  # the same host
    assert after["planted"] == before["planted"] == []
    assert after["replay"] == before["replay"] == "complete"
    assert not after["random planted"] and after["random"] != before["random"]
    assert after["answer"] == "recorded"


def test_a_run_with_the_hook_off_reaches_none_of_its_hosts_memory_nor_traces_it(
    sandbox: Sandbox, folder: Path
) -> None:
    host = _said(sandbox, "look x")["ppid"]
    reached = _unhooked(sandbox, folder, "reach")

    denied = {"PermissionError:EACCES", "PermissionError:EPERM"}
    for name in ("mem", "environ", "auxv", "syscall", "stack", "write mem", "fd"):
        assert reached[name] in denied, (name, reached)
    assert reached["seize"] == "EPERM", reached
    if os.geteuid() == 0:  # the host is root, the run uid 65534: no signal reaches it
        assert reached["uid"] == 65534 and reached["signal"] == "PermissionError:EPERM"
    # (A grader that is not root runs its children as itself: they can signal it, and
    # its hosts, as they always could; "What gets through" in docs/sandbox.md says so.)
    assert _said(sandbox, "look x")["ppid"] == host  # it serves on


def test_a_run_holds_no_descriptor_of_its_host(sandbox: Sandbox) -> None:
    """None of the host's sockets (its link to the grader would let a run ask for forks
    of its own), no other run's pipes: the standard three and the run's channel."""
    held = _said(sandbox, "descriptors x")

    assert sorted(held, key=int)[:3] == ["0", "1", "2"] and held["0"] == "/dev/null"
    rest = {
        fd: what
        for fd, what in held.items()
        if fd not in ("0", "1", "2") and what != "FileNotFoundError:ENOENT"
    }  # the listing's own, closed by then
    assert all(what.startswith("pipe:") for what in rest.values()), json.dumps(held)
    assert len(rest) == 2, held  # what it reads from the grader, and writes to it


def test_a_run_that_dies_or_hangs_leaves_its_host_serving_the_next(
    agent: Path, folder: Path
) -> None:
    sandbox = Sandbox(agent, folder / "scratch", Limits(timeout_s=2), ProcessWall())
    sandbox.ahead([3])
    try:
        host = _said(sandbox, "look x")["ppid"]
        killed = _outcome(sandbox, "die killed")
        hung = _outcome(sandbox, "die hang")
        after = _said(sandbox, "look x")
    finally:
        sandbox.close()
    assert killed.status == "crashed" and hung.status == "timeout", (killed, hung)
    assert after["ppid"] == host and after["answer"] == "recorded"


def test_a_process_a_run_leaves_behind_ends_with_it(sandbox: Sandbox, folder: Path) -> None:
    left = _unhooked(sandbox, folder, "leave")["left"]

    assert _wait(lambda: not _alive(left)), f"pid {left} outlived its run"


def test_closing_the_sandbox_ends_its_hosts(agent: Path, folder: Path) -> None:
    sandbox = Sandbox(agent, folder / "scratch", LIMITS, ProcessWall())
    sandbox.ahead([3, 4])
    hosts = {_said(sandbox, "look x", hashseed=seed)["ppid"] for seed in (3, 4)}
    assert len(hosts) == 2 and all(_alive(pid) for pid in hosts)

    sandbox.close()

    assert _wait(lambda: not any(_alive(pid) for pid in hosts)), hosts


def test_a_submission_importing_ctypes_meets_the_same_fate_forked_or_not(folder: Path) -> None:
    """The host imported ctypes for itself, and a run of its own imports it before its
    agent (to die with the grader): either way the agent finds it imported, and its first
    use of the C library is what the hook refuses."""
    root = folder / "ctypes"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(
        textwrap.dedent("""
        import ctypes

        def run(provider, task):
            return str(ctypes.CDLL(None))
    """)
    )
    (root / "pyproject.toml").write_text("")
    seen = []
    for way in ("forked", "alone"):
        sandbox = Sandbox(root, folder / way, LIMITS, ProcessWall())
        if way == "forked":
            sandbox.ahead([3])
        try:
            result = sandbox.within("run").run(
                "lab.agent:run",
                [("c", "x")],
                RunPlan("provider-a", 3, Serving(lambda case, prompt: None)),
            )
        finally:
            sandbox.close()
        outcome = result.outcomes["c"]
        seen.append(
            (
                result.import_error,
                outcome.status,
                outcome.message,
                [refusal.event for refusal in result.refusals],
            )
        )
    assert seen[0] == seen[1], seen
    assert seen[0][0] is None and seen[0][1] == "raised", seen


def test_a_batchs_workers_fork_from_the_zygotes_hosts_and_a_dead_worker_leaves_no_run(
    agent: Path, folder: Path
) -> None:
    """A batch behind the process wall starts its hosts in the zygote (``share_hosts``),
    before it forks the workers that use them: a worker's runs fork from them with nothing
    started ahead, and a worker killed mid-run (its budget, or a crash) leaves no run
    behind, because the run dies when its "go" pipe closes, not when its host does."""
    from grader.sandbox import share_hosts

    root = (folder / "batch").resolve()
    root.mkdir()
    root.chmod(0o711)
    saved = dict(grader.sandbox._host._shared), list(grader.sandbox._host._shared_root)
    grader.sandbox._host._shared.clear()
    try:
        share_hosts(root, [9], wall="process")
        host = next(iter(grader.sandbox._host._shared.values()))._proc.pid
        said = _said(Sandbox(agent, root / "first", LIMITS, ProcessWall()), "look x", hashseed=9)
        assert (said["ppid"], said["parent"]) == (host, True)

        hung = folder / "hung.pid"
        folder.chmod(0o777)
        worker = os.fork()
        if worker == 0:  # a worker of the batch: its run hangs, after saying its pid
            try:
                Sandbox(agent, root / "worker", LIMITS, ProcessWall()).within("a").run(
                    "lab.agent:run",
                    [("c", f"off-hold {hung}")],
                    RunPlan("provider-a", 9, Serving(lambda case, prompt: None)),
                )
            finally:
                os._exit(0)
        run = int(_wait(lambda: hung.exists() and hung.read_text()) or 0)
        assert run and run in _children(host), "the worker's run never started"
        os.kill(worker, 9)
        os.waitpid(worker, 0)
        assert _wait(lambda: not _alive(run)), f"pid {run} outlived its worker"
        after = _said(Sandbox(agent, root / "next", LIMITS, ProcessWall()), "look x", hashseed=9)
        assert after["ppid"] == host and after["answer"] == "recorded"  # it serves on
    finally:
        grader.sandbox._host.end_shared()
        grader.sandbox._host._shared.update(saved[0])
        grader.sandbox._host._shared_root[:] = saved[1]


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == parent:
                found.append(int(entry.name))
    return found
