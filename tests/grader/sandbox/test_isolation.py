"""The wall, attacked: a submission that switches the audit hook off meets the operating system.

Every hostile agent here first switches the in-process wall off the way a
determined student did (``gc`` reaches the hook's closure, and adding its own
thread to the hook's "busy" set makes the hook wave everything through), then
attacks. Behind the process wall alone some attacks land, and one test shows
that, so the attack code is known to work; behind namespaces (bubblewrap) none
may. Each test runs real children on real files, sockets and processes.

It patches the sandbox's private modules on purpose (``_host``, ``_namespaces``, ``_wall``,
``_walls`` and the ``WALLS`` registry): each attack meets the wall's own mechanism.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from gradekit import UsageError
from grader import Limits, RunResult
from grader.sandbox import (
    NamespacesWall,
    ProcessWall,
    RunPlan,
    Sandbox,
    Serving,
    Wall,
    Watchdog,
    _host,
    _namespaces,
    _wall,
    _walls,
    bubblewrap,
    choose_wall,
    wall_named,
    wall_requests,
)
from grader.sandbox._wall import WALLS
from tests.conftest import require_namespaces
from tests.grader.sandbox._unhook import SWITCH_THE_HOOK_OFF
from tests.submissions import agent_only

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, params=["forked", "own bubblewrap"])
def started(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attack twice behind namespaces: on runs forked from a host, and on runs that
    each start their own bubblewrap (where hosts cannot run)."""
    if request.param == "own bubblewrap":
        monkeypatch.setattr(_host, "_unavailable", ["each run its own bubblewrap, in this test"])


HOSTILE = (
    SWITCH_THE_HOOK_OFF
    + '''
import gc, json, os, signal, socket, subprocess, sys, _thread
from pathlib import Path


def run(provider, task):
    name, _, arg = task.partition(" ")
    if name != "race":  # the race beats the hook while it is on
        assert switch_the_hook_off(), "the hook was not found"
    try:
        return str(globals()["do_" + name](provider, arg))
    except BaseException as exc:
        return f"failed: {type(exc).__name__}: {exc}"


def do_write(provider, arg):
    Path(arg).write_text("forged")
    return "written"


def do_plant(provider, arg):
    results = []
    for folder in [arg, *sorted(str(p) for p in Path("/gradekit").glob("site-*"))]:
        try:
            Path(folder, "zz_gradekit_attack.pth").write_text("import os\\n")
            results.append("planted")
        except OSError as exc:
            results.append(type(exc).__name__)
    return " ".join(results)


def do_spawn(provider, arg):
    proc = subprocess.Popen(["/bin/sh", "-c", f"sleep 3; echo escaped > {arg}"],
                            start_new_session=True)
    return f"started {proc.pid}"


def do_fork(provider, arg):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def do_kill(provider, arg):
    os.kill(int(arg), signal.SIGKILL)
    return "killed"


def do_sockets(provider, arg):
    made = {}
    for name in ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET", "AF_VSOCK"]:
        kind = socket.SOCK_DGRAM if name in ("AF_NETLINK", "AF_PACKET") else socket.SOCK_STREAM
        try:
            socket.socket(getattr(socket, name), kind).close()
            made[name] = "made"
        except OSError as exc:
            made[name] = type(exc).__name__
    return json.dumps(made)


def do_hoard(provider, arg):
    """Write 8 MiB files wherever writable (in-memory filesystems each), then hold them."""
    held = {}
    for folder in ["/dev/shm", "/", "/gradekit", "/tmp", os.getcwd()]:
        mib = 0
        try:
            while mib < int(arg):
                with open(os.path.join(folder, f"hoard-{mib}"), "wb") as out:
                    out.write(b"x" * (8 << 20))
                mib += 8
        except OSError as exc:
            pass
        held[folder] = mib
    return provider.complete("holding " + json.dumps({"held": held,
                                                      "dev": sorted(os.listdir("/dev"))}))


def do_threads(provider, arg):
    """Start threads with the smallest stacks until refused, hold them a while, then ask."""
    import threading, time
    most, hold = arg.split()
    threading.stack_size(32768)
    stop, started = threading.Event(), []
    try:
        while len(started) < int(most):
            thread = threading.Thread(target=stop.wait)
            thread.start()
            started.append(thread)
    except RuntimeError:
        pass
    stop.wait(float(hold))  # a timed wait is real (a time.sleep would cost no wall time)
    try:
        return provider.complete(f"started {len(started)}")
    finally:
        stop.set()


def do_syscalls(provider, arg):
    """Each call straight through the C library, bypassing Python; the errno each gave."""
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    numbers = json.loads(arg)
    said = {}
    for name, number in sorted(numbers.items()):
        ctypes.set_errno(0)
        result = libc.syscall(number, 0, 0, 0, 0, 0, 0)
        said[name] = errno.errorcode.get(ctypes.get_errno(), "ok") if result == -1 else "ok"
    return json.dumps(said)


def do_ask(provider, arg):
    return provider.complete(arg)


def do_look(provider, arg):
    seen = {}
    for path in ["/proc/1/cmdline", arg]:
        try:
            seen[path] = Path(path).read_text(errors="replace")[:200]
        except OSError as exc:
            seen[path] = type(exc).__name__
    seen["/"] = sorted(os.listdir("/"))
    seen["environ"] = sorted(os.environ)
    return json.dumps(seen)


def do_race(provider, arg):
    """Swap two folders between the hook's check of a path and its open: in one, "real" is
    a folder; in the other, a link to ``arg``. Every call names a folder inside the copy."""
    import threading, time
    os.makedirs("A/real")
    os.mkdir("B")
    os.symlink(arg, "B/real")
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            try:
                os.rename("A", "C")
                os.rename("B", "A")
                os.rename("C", "B")
            except OSError:
                pass

    thread = threading.Thread(target=flip)
    thread.start()
    deadline, tries = time.monotonic() + 5, 0
    try:
        while time.monotonic() < deadline:
            tries += 1
            try:
                Path("A/real/forged.txt").write_text("forged")
            except OSError:
                pass
            if os.path.exists(os.path.join(arg, "forged.txt")):
                return f"landed after {tries} tries"
    finally:
        stop.set()
        thread.join()
    return "never landed"


def do_fill(provider, arg):
    written = 0
    try:
        for n in range(64):
            with open(f"fill-{n}", "wb") as out:
                out.write(b"x" * (1 << 20))
            written += 1
    except OSError as exc:
        return f"{written} MiB then {type(exc).__name__}"
    return f"{written} MiB"
'''
)

LIMITS = Limits(timeout_s=20)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_only(tmp_path_factory.mktemp("hostile"), HOSTILE)


def attack(
    root: Path,
    task: str,
    scratch: Path,
    isolation: Wall,
    *,
    answer: Callable[[str, str], str | None] = lambda case, prompt: None,
    limits: Limits = LIMITS,
) -> str:
    """Run one hostile task; return what the agent says happened."""
    case = task.split(" ")[0]
    result = Sandbox(root, scratch, limits, isolation).run(
        "lab.agent:run", [(case, task)], RunPlan("provider-a", 0, Serving(answer))
    )
    outcome = result.outcomes[case]
    assert outcome.status == "returned", (outcome, result.import_error)
    assert outcome.answer is not None
    return outcome.answer


def _classmate(folder: Path) -> Path:
    """A classmate's folder as a run behind the process wall finds it: made, and, for a
    root grader, its copy is uid 65534's, the uid every child of the grading takes."""
    folder.mkdir()
    if os.geteuid() == 0:
        os.chown(folder, _namespaces.UNPRIVILEGED_UID, _namespaces.UNPRIVILEGED_UID)
    return folder


def unhooked(root: Path, task: str, scratch: Path, isolation: Wall) -> RunResult:
    """Run one hostile task behind the process wall, which notices the hook it switched
    off: the case is lost and the grading flagged, whatever the attack did meanwhile."""
    case = task.split(" ")[0]
    result = Sandbox(root, scratch, LIMITS, isolation).run(
        "lab.agent:run", [(case, task)], RunPlan("provider-a", 0, Serving(lambda c, p: None))
    )
    assert (result.outcomes[case].status, result.outcomes[case].detail) == (
        "crashed",
        "broke the grader's protocol: the harness's code was replaced",
    )
    assert result.tampering == (f"case {case}: the agent replaced the harness's code (audit hook)",)
    return result


def test_with_the_hook_off_a_write_outside_lands_behind_the_guard_but_not_the_wall(
    hostile: Path, tmp_path: Path, isolation: Wall
) -> None:
    target = _classmate(tmp_path / "classmate") / "report.json"

    if isinstance(isolation, ProcessWall):  # the guard is a tripwire: this is why the wall exists
        unhooked(hostile, f"write {target}", tmp_path / "scratch", isolation)
        assert target.read_text() == "forged"  # flagged, but landed
        return
    said = attack(hostile, f"write {target}", tmp_path / "scratch", isolation)
    assert said.startswith("failed: FileNotFoundError") and not target.exists()


def test_a_folder_swapped_for_a_link_mid_write_lands_behind_the_guard_but_not_the_wall(
    hostile: Path, tmp_path: Path, isolation: Wall
) -> None:
    """The hook judges a path, then Python opens it: a thread that swaps a folder for a
    link to a classmate's folder in between wins the race, with the hook on."""
    classmate = _classmate(tmp_path / "classmate")

    said = attack(hostile, f"race {classmate}", tmp_path / "scratch", isolation)

    if isinstance(isolation, ProcessWall):  # a tripwire checks a name, not what the name is by then
        assert said.startswith("landed after ")
        assert (classmate / "forged.txt").read_text() == "forged"
    else:
        assert said == "never landed" and list(classmate.iterdir()) == []


def test_the_graders_packages_take_no_planted_pth(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()
    site_packages = Path(next(p for p in sys.path if p.endswith("site-packages")))
    before = sorted(p.name for p in site_packages.iterdir())

    said = attack(hostile, f"plant {site_packages}", tmp_path / "scratch", NamespacesWall())

    host, *shown = said.split()
    assert (host, set(shown)) == ("FileNotFoundError", {"OSError"})  # read-only: EROFS
    assert sorted(p.name for p in site_packages.iterdir()) == before


def test_no_process_can_be_started_and_none_outlives_the_run(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()
    marker = tmp_path / "escaped"

    spawned = attack(hostile, f"spawn {marker}", tmp_path / "a", NamespacesWall())
    forked = attack(hostile, "fork", tmp_path / "b", NamespacesWall())

    assert spawned == "failed: PermissionError: [Errno 1] Operation not permitted"
    assert forked == "failed: PermissionError: [Errno 1] Operation not permitted"
    time.sleep(4)  # the escapee would have written by now
    assert not marker.exists()
    assert not _processes_mentioning(str(marker))


def test_the_grader_and_its_processes_cannot_be_signalled(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()
    with subprocess.Popen(["sleep", "60"]) as victim:
        try:
            said = attack(hostile, f"kill {victim.pid}", tmp_path / "scratch", NamespacesWall())
            assert victim.poll() is None
        finally:
            victim.kill()
    assert said.startswith("failed: ProcessLookupError")


def test_every_socket_family_but_unix_is_refused(
    hostile: Path, tmp_path: Path, isolation: Wall
) -> None:
    if isinstance(isolation, ProcessWall):  # with the hook off, sockets open (and it is seen)
        result = unhooked(hostile, "sockets", tmp_path / "scratch", isolation)
        assert result.outcomes["sockets"].answer is None
        return
    made = json.loads(attack(hostile, "sockets", tmp_path / "scratch", isolation))
    assert made == {
        "AF_UNIX": "made",
        "AF_INET": "PermissionError",
        "AF_INET6": "PermissionError",
        "AF_NETLINK": "PermissionError",
        "AF_PACKET": "PermissionError",
        "AF_VSOCK": "PermissionError",
    }


# x86_64's numbers: the attack runs on the machine the tests run on.
_DANGEROUS = {
    "ptrace": 101,
    "personality": 135,
    "add_key": 248,
    "keyctl": 250,
    "unshare": 272,
    "setns": 308,
    "kcmp": 312,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "perf_event_open": 298,
    "process_vm_readv": 310,
    "mount": 165,
}


def test_the_calls_that_reach_the_kernel_or_other_processes_are_refused(
    hostile: Path, tmp_path: Path
) -> None:
    require_namespaces()
    if platform.machine() != "x86_64":
        pytest.skip("the attack names x86_64's system call numbers")

    said = json.loads(
        attack(
            hostile, f"syscalls {json.dumps(_DANGEROUS)}", tmp_path / "scratch", NamespacesWall()
        )
    )

    assert said == dict.fromkeys(_DANGEROUS, "EPERM")


def _host_memory_in_filesystems() -> int:
    """Bytes in the host's in-memory filesystems (tmpfs and shared memory): Shmem."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) << 10
    raise AssertionError("no Shmem line in /proc/meminfo")


def test_host_memory_from_one_child_stays_within_its_limits(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()
    limits = Limits(timeout_s=60, disk_mb=16, memory_mb=256)
    before = _host_memory_in_filesystems()
    grown: list[int] = []

    def answer(case: str, prompt: str) -> str:
        grown.append(_host_memory_in_filesystems() - before)
        return prompt

    said = attack(
        hostile, "hoard 320", tmp_path / "scratch", NamespacesWall(), answer=answer, limits=limits
    )

    seen = json.loads(said.removeprefix("holding "))
    held = seen["held"]
    assert held["/dev/shm"] == held["/"] == held["/gradekit"] == 0, held
    assert seen["dev"] == ["fd", "null", "stderr", "stdin", "stdout", "urandom", "zero"]
    assert sum(held.values()) <= limits.disk_mb, held
    assert grown and grown[0] < (limits.disk_mb + limits.memory_mb) << 20


def _children_naming(text: str) -> dict[int, tuple[int, int]]:
    """Every process whose command line names ``text`` (a child's bubblewrap) and every
    process under them: pid -> (its tasks, threads included; its host uid)."""
    parents: dict[int, int] = {}
    seen: dict[int, tuple[int, int]] = {}
    roots = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
                named = text.encode() in (entry / "cmdline").read_bytes()
                uid = entry.stat().st_uid  # /proc/PID belongs to the process's euid
            except (OSError, IndexError):
                continue
            pid = int(entry.name)
            parents[pid], seen[pid] = int(fields[1]), (int(fields[17]), uid)
            roots += [pid] if named else []
    under = set(roots)
    while grown := {p for p, parent in parents.items() if parent in under} - under:
        under |= grown

    # A host's runs: only what its forks hold is a child's, not the host's own processes.
    def hosting(pid: int | None) -> bool:  # a host's interpreter, not its bubblewrap
        line = _cmdline(pid) if pid is not None else b""
        return b"\x00host\x00" in line and not line.split(b"\x00")[0].endswith(b"bwrap")

    hosts = {pid for pid in under if hosting(pid) and not hosting(parents.get(pid))}
    # A host's children: each run, and each run's pid 1, which only waits, holding nothing.
    runs = {
        pid
        for pid, parent in parents.items()
        if parent in hosts and pid in under and not _first_in_its_namespace(pid)
    }
    if hosts:
        under = set(runs)
        while grown := {p for p, parent in parents.items() if parent in under} - under:
            under |= grown
    return {pid: seen[pid] for pid in under}


def _first_in_its_namespace(pid: int) -> bool:
    """Whether ``pid`` is pid 1 of its own pid namespace (a forked run's pid 1)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    found = [line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")]
    return bool(found) and found[0][-1] == "1" and len(found[0]) > 1


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_host_tasks_from_one_child_stay_within_its_processes(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()
    limits = Limits(timeout_s=60, processes=32)
    counted: list[int] = []

    def answer(case: str, prompt: str) -> str:
        counted.append(
            sum(tasks for tasks, _ in _children_naming(str(tmp_path / "scratch")).values())
        )
        return prompt

    said = attack(
        hostile,
        "threads 3000 0",
        tmp_path / "scratch",
        NamespacesWall(),
        answer=answer,
        limits=limits,
    )

    started = int(said.removeprefix("started "))
    assert 0 < started < limits.processes
    assert 0 < counted[0] <= limits.processes


def test_the_watchdog_kills_a_child_past_its_tasks_where_no_cgroup_holds_it(
    hostile: Path, tmp_path: Path, isolation: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_walls, "host_hold", lambda: Watchdog("no cgroup in this test"))
    monkeypatch.setattr(_wall, "host_hold", lambda: Watchdog("no cgroup in this test"))
    limits = Limits(timeout_s=60, processes=32)

    result = Sandbox(hostile, tmp_path / "scratch", limits, isolation).run(
        "lab.agent:run",
        [("threads", "threads 3000 5")],
        RunPlan("provider-a", 0, Serving(lambda case, prompt: None)),
    )

    outcome = result.outcomes["threads"]
    stated = isolation.stated(hostile, tmp_path / "scratch")
    assert (outcome.status, outcome.detail) == (
        "crashed",
        "killed: it ran more than its 32 tasks (processes, threads included)",
    )
    assert "a watchdog in the grader" in stated


def test_a_root_grader_runs_its_children_as_an_unprivileged_host_user(
    hostile: Path, tmp_path: Path
) -> None:
    """Even where the interpreter is uid 65534's to read only through its readable copy
    (a Python under /root) and the submission's own files are private: the laid-out copy is
    readable by construction, and the grader's scratch can be passed through."""
    require_namespaces()
    if os.geteuid() != 0:
        pytest.skip("only a grader that runs as root drops its children's uid")
    private = tmp_path / "private"
    shutil.copytree(hostile, private)
    for path in (private, *private.rglob("*")):
        path.chmod(0o700 if path.is_dir() else 0o600)
    uids: dict[str, set[int]] = {}

    def answer(case: str, prompt: str) -> str:
        uids[prompt] = {uid for _, uid in _children_naming(prompt).values()}
        return prompt

    scratch = tmp_path / "scratch"
    assert attack(private, f"ask {scratch}", scratch, NamespacesWall(), answer=answer) == str(
        scratch
    )

    # the child behind bubblewrap, as the host sees it: every process of it, bwrap's too
    assert uids == {str(scratch): {65534}}
    assert (
        NamespacesWall().stated(private, scratch).endswith("children run as uid 65534 on the host")
    )


def test_a_root_grader_refuses_to_run_children_as_root_unless_allowed_by_name(
    hostile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_namespaces()
    if os.geteuid() != 0:
        pytest.skip("only a root grader's children could run as root")
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    hidden.chmod(0o700)
    scratch = hidden / "scratch"  # uid 65534 cannot pass through to its children's files

    with pytest.raises(UsageError) as refused:
        attack(hostile, "ask x", scratch, NamespacesWall())
    said = str(refused.value)
    assert said.startswith(f"submission code would run as root on the host: {scratch.resolve()}/")
    assert " is not searchable by uid 65534. " in said
    assert said.endswith("allow it by name: pass --allow-host-root")

    monkeypatch.setenv(_namespaces.ALLOW_HOST_ROOT, "1")
    uids: dict[str, set[int]] = {}

    def answer(case: str, prompt: str) -> str:
        uids[prompt] = {uid for _, uid in _children_naming(str(scratch)).values()}
        return prompt

    assert attack(hostile, "ask x", scratch, NamespacesWall(), answer=answer) == "x"
    assert uids == {"x": {0}}
    line = NamespacesWall().stated(hostile, scratch)
    assert line.endswith(
        f"children run as root on the host ({scratch} is not searchable by "
        "uid 65534; allowed by --allow-host-root)"
    )


def test_a_submission_s_own_files_are_never_looked_at_for_whom_a_child_runs_as(
    hostile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whom a root grader's children run as does not depend on the submission's files: its
    runs see the laid-out copy, readable by every user whatever the original's modes. (The
    grader used to stat every file of the original, and kept root where one was private.)"""
    require_namespaces()
    looked: list[tuple[str, ...]] = []
    original = _namespaces.unreadable_of

    def counted(paths: Sequence[str]) -> str:
        looked.append(tuple(paths))
        return original(paths)

    monkeypatch.setattr(_namespaces, "unreadable_of", counted)
    _namespaces._unprivileged_missing.cache_clear()
    plan = RunPlan("provider-a", 0, Serving(lambda case, prompt: prompt))
    sandbox = Sandbox(hostile, tmp_path / "grading", LIMITS, NamespacesWall())
    try:
        for run in ("a", "b"):
            result = sandbox.within(run).run("lab.agent:run", [("ask", "ask x")], plan)
            assert result.outcomes["ask"].answer == "x", result
    finally:
        sandbox.close()
    assert not any(str(hostile) in path for paths in looked for path in paths)


def test_the_child_sees_nothing_of_the_grader_or_a_classmate(
    hostile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_namespaces()
    secret = "sk-classmate-secret-0123456789"
    classmate = tmp_path / "alice" / "FAILURES.md"
    classmate.parent.mkdir()
    classmate.write_text(secret)
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    seen = json.loads(attack(hostile, f"look {classmate}", tmp_path / "scratch", NamespacesWall()))

    assert secret not in json.dumps(seen)
    assert seen[str(classmate)] == "FileNotFoundError"
    # pid 1 of its namespace is bubblewrap's, or the run itself (forked by a host): no
    # process of the grader's is there to see
    assert "bwrap" in seen["/proc/1/cmdline"] or "harness.pyc" in seen["/proc/1/cmdline"]
    assert "work" not in seen["/"] and "home" not in seen["/"]
    assert "OPENAI_API_KEY" not in seen["environ"]


def test_the_writable_space_is_capped(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()

    said = attack(
        hostile,
        "fill",
        tmp_path / "scratch",
        NamespacesWall(),
        limits=Limits(timeout_s=20, disk_mb=4),
    )

    written, _, error = said.partition(" MiB then ")
    assert int(written) <= 4 and error == "OSError"  # 4 with a run's overlay: no copy first
    assert sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file()) < 1 << 20


def test_an_honest_run_is_the_same_behind_either_wall(tmp_path: Path) -> None:
    require_namespaces()
    root = tmp_path / "honest"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(
        textwrap.dedent("""
        import os, sys

        def run(provider, task):
            answer = provider.complete("Plan: " + task)
            return f"{answer} {sorted(os.environ)} {os.getcwd() == os.environ['HOME']}"
    """)
    )
    (root / "pyproject.toml").write_text("")
    runs: dict[str, RunResult] = {}
    for wall in ("process", "namespaces"):
        runs[wall] = Sandbox(root, tmp_path / wall, LIMITS, wall_named(wall)).run(
            "lab.agent:run",
            [("c", "refunds")],
            RunPlan("provider-a", 7, Serving(lambda case, prompt: "recorded")),
        )

    first, second = (runs[w].outcomes["c"] for w in ("process", "namespaces"))
    assert first.status == "returned" and first.answer is not None
    assert (first.answer, first.answer_sha256, first.calls) == (
        second.answer,
        second.answer_sha256,
        second.calls,
    )


def test_namespaces_without_bubblewrap_is_a_usage_error_that_names_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    bubblewrap.cache_clear()
    try:
        with pytest.raises(UsageError, match="apt-get install bubblewrap"):
            choose_wall("namespaces")
        assert isinstance(choose_wall("auto"), ProcessWall)
    finally:
        bubblewrap.cache_clear()
    assert ProcessWall().description.startswith("process guard only")


def test_a_wall_is_named_on_the_command_line_and_in_a_worker_request() -> None:
    assert wall_requests() == ("auto", "namespaces", "process")
    for wall in (ProcessWall(), NamespacesWall()):
        assert wall_named(wall.name) == wall and wall_named(wall.name) is not wall
    assert ProcessWall() != NamespacesWall()
    with pytest.raises(ValueError, match="no wall is named 'container': name one of"):
        wall_named("container")
    with pytest.raises(UsageError, match="use one of auto, namespaces, process"):
        choose_wall("container")


def test_a_third_wall_is_one_class(tmp_path: Path) -> None:
    """Defining the class is all it takes: ``--wall`` offers it, a worker request can
    name it, and a sandbox runs cases behind it."""

    class Borrowed(ProcessWall):
        name = "borrowed"
        description = "the process wall, under another name"
        preference = -1

    try:
        assert wall_requests()[-1] == "borrowed"
        assert choose_wall("borrowed") == wall_named("borrowed") == Borrowed()
        assert not isinstance(choose_wall("auto"), Borrowed)  # preferred least
        root = tmp_path / "sub"
        (root / "lab").mkdir(parents=True)
        (root / "lab" / "__init__.py").write_text("")
        (root / "lab" / "agent.py").write_text(
            "def run(provider, task):\n    return provider.complete(task)\n"
        )
        result = Sandbox(root, tmp_path / "scratch", LIMITS, Borrowed()).run(
            "lab.agent:run", [("c", "hi")], RunPlan("provider-a", 0, Serving(lambda c, p: "yo"))
        )
        assert (result.outcomes["c"].status, result.outcomes["c"].answer) == ("returned", "yo")
    finally:
        WALLS.pop("borrowed")
    assert "borrowed" not in wall_requests()


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


MALLORY = """

_honest_run = run


def run(provider, task, tools=None):  # noqa: F811
    import gc, _thread
    from pathlib import Path
    for obj in gc.get_objects():
        if getattr(obj, "__name__", "") == "guard" and getattr(obj, "__closure__", None):
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, set):
                    cell.cell_contents.add(_thread.get_ident())
    for target, text in TARGETS:
        try:
            Path(target).write_text(text)
        except OSError:
            pass
    return _honest_run(provider, task, tools)
"""


def test_a_submission_cannot_move_a_classmates_grade(tmp_path: Path) -> None:
    require_namespaces()
    from tests.submissions import make_submission

    batch, out = tmp_path / "submissions", tmp_path / "grades"
    for name in ("alice", "mallory", "zoe"):
        make_submission(batch / name)
    alone = tmp_path / "alone"
    for name in ("alice", "zoe"):
        _grade([batch / name], alone / name)
    targets = [
        (
            str(batch / "zoe" / "lab" / "agent.py"),
            "def run(provider, task, tools=None):\n    return ''\n",
        ),
        (str(out / "alice" / "report.json"), "{}"),
        (str(out / "alice" / "results.json"), '{"score": 0}'),
        (str(out / "gradebook.csv"), "forged"),
    ]
    agent = batch / "mallory" / "lab" / "agent.py"
    agent.write_text(agent.read_text() + f"\nTARGETS = {targets!r}\n" + MALLORY)

    _grade([batch], out)

    for name in ("alice", "zoe"):
        for report in ("report.json", "results.json"):
            assert (out / name / report).read_bytes() == (alone / name / name / report).read_bytes()
    rows = (out / "gradebook.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows[1:]] == ["alice", "mallory", "zoe"]


def test_each_report_states_its_wall_and_the_digest_does_not_depend_on_it(
    tmp_path: Path,
) -> None:
    require_namespaces()
    from tests.submissions import make_submission

    reference = make_submission(tmp_path / "submissions" / "reference")
    walls = ("process", "namespaces")
    for wall in walls:
        _grade([reference], tmp_path / wall, wall)
    folder = {wall: tmp_path / wall / "reference" for wall in walls}

    assert (folder["process"] / "report.json").read_bytes() == (
        folder["namespaces"] / "report.json"
    ).read_bytes()
    for wall in walls:
        stated = json.loads((folder[wall] / "results.json").read_text())["extra_data"]["isolation"]
        # the wall, then what held each child on the host, then whom it ran as
        assert stated.startswith(f"{wall_named(wall).held()}; children run as ")
        assert f"Isolation: {stated}." in (folder[wall] / "report.md").read_text()


def _grade(paths: list[Path], out: Path, wall: str = "namespaces") -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "grade",
            *map(str, paths),
            "--out",
            str(out),
            "--wall",
            wall,
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr


def test_a_hanging_submission_costs_one_timeout_per_case(tmp_path: Path) -> None:
    from grader.grading._grade import grade_submission
    from grader.rubric import load_rubric
    from tests.submissions import REFERENCE, make_submission

    root = make_submission(tmp_path / "hangs")
    (root / "lab" / "agent.py").write_text(
        "import time\n\n\ndef run(provider, task, tools=None):\n"
        "    while True:\n        time.sleep(1)\n"
    )
    rubric_text = (REFERENCE / "rubric" / "bootcamp.toml").read_text()
    rubric_file = tmp_path / "rubric.toml"
    rubric_file.write_text(rubric_text.replace("timeout_s = 30\n", "timeout_s = 1\n"))
    scratch = tmp_path / "scratch"

    evidence = grade_submission(
        root, load_rubric(rubric_file), submission="hangs", label="provider-a", scratch=scratch
    ).evidence

    runs = (evidence.primary, *evidence.others, evidence.second_set)
    assert len(evidence.others) >= 4  # one run under each other provider family's label
    assert evidence.loud == ()  # no case ran, so none was probed
    for result in runs:
        assert result is not None
        assert {o.status for o in result.outcomes.values()} == {"timeout"}
        assert {o.detail for o in result.outcomes.values()} == {"did not finish within 1 s"}
    # Only the primary run started children: the others never ran a timed-out case again.
    # Two folders: the primary run's and the own-Replay probe's (their names say nothing).
    assert len(list(scratch.iterdir())) == 2


def test_special_files_in_a_submission_are_left_out_of_its_copy(
    tmp_path: Path, isolation: Wall
) -> None:
    root = tmp_path / "odd"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(
        "import os\n\n\ndef run(provider, task):\n    return ' '.join(sorted(os.listdir('.')))\n"
    )
    (root / "pyproject.toml").write_text("")
    os.mkfifo(root / "pipe")  # copying it would block forever
    (root / "link").symlink_to("/etc/hostname")

    result = Sandbox(root, tmp_path / "scratch", LIMITS, isolation).run(
        "lab.agent:run", [("c", "look")], RunPlan("provider-a", 0, Serving(lambda c, p: None))
    )

    assert result.outcomes["c"].answer == "lab link pyproject.toml"


def test_a_writer_of_time_stamped_names_gets_one_digest(tmp_path: Path) -> None:
    require_namespaces()
    from tests.submissions import make_submission

    writer = make_submission(tmp_path / "submissions" / "writer")
    agent = writer / "lab" / "agent.py"
    agent.write_text(
        agent.read_text()
        + textwrap.dedent("""

        import time as _time
        try:  # a new name on every run, outside the copy: refused, and said where
            open(f"/tmp/gradekit-attempt-{_time.time_ns()}.txt", "w").close()
        except OSError:
            pass
    """)
    )
    line = len(agent.read_text().splitlines()) - 2
    for grading in ("first", "second"):
        _grade([writer], tmp_path / grading)

    first, second = (
        (tmp_path / g / "writer" / "report.json").read_bytes() for g in ("first", "second")
    )
    assert first == second
    assert (
        f"sandbox refused open at import: write a file outside the submission (lab/agent.py:{line})"
    ) in json.loads(first)["findings"]
