"""Round three against the walls: what a run reaches of the machine beyond its files.

A red-team graded as root found that a run could write the host's kernel settings, take
root's inotify instances, meet a classmate's run over an abstract Unix socket, read the
hash seed the harness hides from ``/proc/self/environ``, and, behind the process wall,
switch the hook off by editing the harness's module globals. Each attack is written here
from scratch, as one agent whose task names the attack, and runs behind each wall (and
behind namespaces both on runs forked from a host and on runs that start their own
bubblewrap), as uid 65534 on the host (what a root grader's children are) and, where the
instructor allowed it by name, as root.

It reaches the sandbox's ``_host``, ``_isolation`` and ``_walls`` on purpose: a batch's
shared hosts are set up and ended as a zygote does, and a root grader's uid is patched.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader import Limits
from grader.sandbox import (
    ALLOW_HOST_ROOT,
    NamespacesWall,
    ProcessWall,
    RunPlan,
    Sandbox,
    Serving,
    Wall,
    _host,
    _namespaces,
    _walls,
)
from tests.conftest import require_namespaces

pytestmark = pytest.mark.slow

AGENT = '''
import errno, gc, json, os, socket, _thread


def hook_off():
    """What a determined student does first: the hook waves through a thread it is
    already busy with, and gc finds its closure."""
    for obj in gc.get_objects():
        if getattr(obj, "__name__", "") == "guard" and getattr(obj, "__closure__", None):
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, set):
                    cell.cell_contents.add(_thread.get_ident())
                    return


def run(provider, task):
    name, _, arg = task.partition(" ")
    if name in ("sysctl", "inotify", "netns", "meet") and not arg.startswith("hook on"):
        hook_off()
    return json.dumps(globals()["attack_" + name](provider, arg))


def attack_sysctl(provider, arg):
    """Write the host's kernel settings, a few ways."""
    said = {}
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/swappiness",
                 "/proc/sys/fs/file-max", "/proc/sysrq-trigger"):
        try:
            with open(path, "r+b", buffering=0) as setting:
                now = setting.read()
                setting.seek(0)
                setting.write(now or b"0")
            said[path] = "written"
        except OSError as exc:
            said[path] = errno.errorcode.get(exc.errno, "?") if exc.errno else type(exc).__name__
    return said


def attack_inotify(provider, arg):
    """Take inotify instances until refused, straight through the C library."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    taken, error = 0, "none"
    while taken < int(arg):
        if libc.inotify_init1(0) < 0:
            error = errno.errorcode.get(ctypes.get_errno(), "?")
            break
        taken += 1
    return {"taken": taken, "error": error}


def attack_netns(provider, arg):
    """An abstract socket bound to meet a classmate on."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(b"\\0gradekit-meet")
    except OSError as exc:
        return {"bind": type(exc).__name__}
    listener.listen(1)
    return {"bind": "bound"}


def attack_meet(provider, arg):
    """Bind the name a classmate binds too, and hold it while the provider answers."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(b"\\0gradekit-meet")
    except OSError as exc:
        return {"bind": errno.errorcode.get(exc.errno, "?")}
    provider.complete("holding the name")
    return {"bind": "bound"}


def attack_environ(provider, arg):
    with open("/proc/self/environ", "rb") as environ:
        block = environ.read()
    return {"names": sorted({entry.split(b"=")[0].decode() for entry in block.split(b"\\0")
                             if b"=" in entry}),
            "seen": sorted(os.environ)}


def attack_globals(provider, arg):
    """Empty the tables the hook consults, through the harness's module globals, then write
    outside the submission."""
    shared = type(provider).complete.__globals__
    shared["REFUSABLE"] = frozenset()
    shared["LIBRARY"] = "nothing."
    shared["WRITES"].clear()
    try:
        with open(arg, "w") as out:
            out.write("forged")
        return {"write": "written"}
    except OSError as exc:
        return {"write": type(exc).__name__}


def attack_overlay(provider, arg):
    """What the run's copy of the submission is mounted as, and whether a file of it can be
    changed (an overlay copies the file up into the run's own layer)."""
    with open("/proc/self/mountinfo") as mounts:
        kinds = [line.split(" - ")[1].split()[0] for line in mounts
                 if line.split()[4] == os.getcwd()]
    with open("lab/__init__.py", "a") as changed:
        changed.write("# changed by the run")
    return {"kinds": kinds, "cwd": os.getcwd()}


def attack_uid(provider, arg):
    with open("/proc/self/status") as status:
        return {"uid": [line.split()[1:] for line in status if line.startswith("Uid:")][0]}
'''

LIMITS = Limits(timeout_s=30)


@pytest.fixture(params=["forked", "own bubblewrap"])
def started(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Behind namespaces, runs forked from a host and runs of their own bubblewrap."""
    if request.param == "own bubblewrap":
        monkeypatch.setattr(_host, "_unavailable", ["each run its own bubblewrap, in this test"])
    return str(request.param)


@pytest.fixture(params=["uid 65534", "root, allowed by name"])
def host_uid(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """As whom a root grader's children run: uid 65534, or root where the instructor allowed
    it by name. A grader that is not root runs them as itself, once."""
    if os.geteuid() != 0:
        if request.param != "uid 65534":
            pytest.skip("only a root grader can run children as root")
        return "the grader's"
    if request.param != "uid 65534":
        monkeypatch.setenv(ALLOW_HOST_ROOT, "1")
        monkeypatch.setattr(
            _namespaces,
            "_unprivileged_missing",
            lambda kit, bubblewrapped=True: "uid 65534 is kept out, in this test",
        )
    return str(request.param)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    root = tmp_path / "attacker"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(AGENT)
    (root / "pyproject.toml").write_text("")
    return root


def attack(agent: Path, scratch: Path, wall: Wall, *tasks: str) -> list[dict[str, Any]]:
    """Run each task once, in one grading: its runs fork from the host it starts ahead for
    their hash seed, behind either wall (where hosts can run)."""
    sandbox = Sandbox(agent, scratch, LIMITS, wall)
    said = []
    try:
        sandbox.ahead([0])
        for number, task in enumerate(tasks):
            case = task.split(" ")[0]
            result = sandbox.within(f"run-{number}").run(
                "lab.agent:run",
                [(case, task)],
                RunPlan("provider-a", 0, Serving(lambda case, prompt: prompt)),
            )
            outcome = result.outcomes[case]
            assert outcome.status == "returned", (outcome, result.import_error)
            assert outcome.answer is not None
            said.append(json.loads(outcome.answer))
    finally:
        sandbox.close()
    return said


def test_kernel_settings_are_read_only_in_every_run_whatever_its_uid(
    agent: Path, tmp_path: Path, started: str, host_uid: str
) -> None:
    require_namespaces()
    before = {
        path: Path(path).read_bytes()
        for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/swappiness")
    }

    [said] = attack(agent, tmp_path / "scratch", NamespacesWall(), "sysctl")
    [uid] = attack(agent, tmp_path / "again", NamespacesWall(), "uid")

    # Root inside reaches the read-only mount itself; uid 65534 is refused by the files'
    # modes before it gets there. The SysRq key is not in a user namespace's /proc at all.
    sysrq = said.pop("/proc/sysrq-trigger")
    assert set(said.values()) == ({"EROFS"} if host_uid.startswith("root") else {"EACCES"}), said
    assert sysrq in ("ENOENT", "EROFS"), sysrq
    assert {path: Path(path).read_bytes() for path in before} == before
    inside = uid["uid"]
    assert inside == ["65534"] * 4  # nobody inside its user namespace, whoever it is outside


def test_the_process_guard_s_child_cannot_write_kernel_settings_as_uid_65534(
    agent: Path, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the grader's own user cannot write kernel settings either")
    [said] = attack(agent, tmp_path / "scratch", ProcessWall(), "sysctl hook on")
    [uid] = attack(agent, tmp_path / "again", ProcessWall(), "uid")

    assert uid == {"uid": ["65534"] * 4}
    # the hook refuses the open first (a finding), and the kernel would refuse uid 65534
    assert set(said.values()) <= {"EACCES", "EPERM", "PermissionError"}, said


def test_a_run_takes_no_inotify_instance_of_the_host(
    agent: Path, tmp_path: Path, started: str, host_uid: str
) -> None:
    require_namespaces()

    [said] = attack(agent, tmp_path / "scratch", NamespacesWall(), "inotify 200")

    assert said == {"taken": 0, "error": "EPERM"}


def test_classmates_runs_alive_at_once_never_share_a_network_namespace(
    agent: Path, tmp_path: Path, host_uid: str
) -> None:
    """Two classmates' runs forked from one host, as a batch's workers share the zygote's,
    once shared its network namespace and so its abstract Unix sockets: a red-team's two
    runs met over one and passed descriptors. Here alice's run binds a name and holds it
    (its provider's answer waits) while bob's run, in another worker, binds the same name:
    in one namespace it could not."""
    require_namespaces()
    batch = tmp_path / "batch"
    batch.mkdir()
    batch.chmod(0o711)
    _walls.share_hosts(batch, [0])  # what a batch's zygote does before it forks workers
    fork = multiprocessing.get_context("fork")
    alice_holds, bob_bound = fork.Event(), fork.Event()
    said = fork.Queue()

    def worker(name: str, answer: Callable[[str, str], str]) -> None:
        sandbox = Sandbox(agent, batch / name, LIMITS, NamespacesWall())
        try:
            result = sandbox.run(
                "lab.agent:run", [("meet", "meet")], RunPlan("provider-a", 0, Serving(answer))
            )
            outcome = result.outcomes["meet"]
            said.put((name, (outcome.status, outcome.answer or outcome.detail)))
        finally:
            sandbox.close()

    def alice(case: str, prompt: str) -> str:
        alice_holds.set()
        bob_bound.wait(30)
        return prompt

    def bob(case: str, prompt: str) -> str:
        bob_bound.set()
        return prompt

    try:
        workers = [fork.Process(target=worker, args=("alice", alice))]
        workers[0].start()
        assert alice_holds.wait(30), "alice's run never bound its name"
        workers.append(fork.Process(target=worker, args=("bob", bob)))
        workers[1].start()
        answers = dict(said.get(timeout=60) for _ in workers)
        for process in workers:
            process.join(30)
    finally:
        _host.end_shared()

    bound = ("returned", json.dumps({"bind": "bound"}))
    assert answers == {"alice": bound, "bob": bound}


def test_a_forked_run_s_copy_is_an_overlay_whatever_its_host_uid(
    agent: Path, tmp_path: Path, host_uid: str
) -> None:
    """A root grader's runs are uid 65534 on the host: its laid-out copy is given to that
    uid, so the kernel can copy a file up into a run's layer, and each run's copy stays a
    mount instead of a copy of every file."""
    require_namespaces()

    first, second = attack(agent, tmp_path / "scratch", NamespacesWall(), "overlay", "overlay")

    assert first == second == {"kinds": ["overlay"], "cwd": "/sandbox/submission"}
    assert (agent / "lab" / "__init__.py").read_text() == ""


def test_behind_the_process_guard_no_unix_socket_is_bound_to_meet_on(
    agent: Path, tmp_path: Path
) -> None:
    """The process wall's runs share the machine's network namespace: the hook refuses
    every bind and connect (a finding), and a hook switched off is a finding too."""
    [said] = attack(agent, tmp_path / "scratch", ProcessWall(), "netns hook on")

    assert said == {"bind": "PermissionError"}


def test_the_hidden_variables_are_not_in_proc_self_environ(
    agent: Path, tmp_path: Path, isolation: Wall
) -> None:
    [said] = attack(agent, tmp_path / "scratch", isolation, "environ")

    assert {"PATH", "TZ"} <= set(said["names"])  # the block the kernel keeps, read whole
    assert "PYTHONHASHSEED" not in said["names"] and "PYTHONHASHSEED" not in said["seen"]
    assert "LD_LIBRARY_PATH" not in said["names"] and "LD_LIBRARY_PATH" not in said["seen"]


def test_emptying_the_harness_s_tables_leaves_the_hook_as_it_was(
    agent: Path, tmp_path: Path, isolation: Wall
) -> None:
    target = tmp_path / "outside.txt"
    sandbox = Sandbox(agent, tmp_path / "scratch", LIMITS, isolation)
    try:
        result = sandbox.run(
            "lab.agent:run",
            [("globals", f"globals {target}")],
            RunPlan("provider-a", 0, Serving(lambda case, prompt: prompt)),
        )
    finally:
        sandbox.close()

    outcome = result.outcomes["globals"]
    assert outcome.status == "returned", outcome
    assert json.loads(outcome.answer or "") == {"write": "PermissionError"}
    assert not target.exists()
    assert [(r.case, r.event) for r in result.refusals] == [("globals", "open")]
