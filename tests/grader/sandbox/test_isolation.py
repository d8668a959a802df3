"""The wall, attacked: a submission that switches the audit hook off meets the operating system.

Every hostile agent here first switches the in-process guard off the way a
determined student did (``gc`` reaches the hook's closure, and adding its own
thread to the hook's "busy" set makes the hook wave everything through), then
attacks. Behind the process guard alone some attacks land, and one test shows
that, so the attack code is known to work; behind namespaces (bubblewrap) none
may. Each test runs real children on real files, sockets and processes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gradekit import UsageError
from grader._model import Limits, RunResult
from grader.sandbox import (
    NamespacesWall,
    ProcessWall,
    RunPlan,
    Sandbox,
    Serving,
    Wall,
    choose_isolation,
    isolation_requests,
    wall_named,
)
from grader.sandbox._isolation import bubblewrap, no_new_processes_filter
from grader.sandbox._layout import WALLS
from tests.conftest import require_namespaces

pytestmark = pytest.mark.slow

HOSTILE = '''
import gc, json, os, signal, socket, subprocess, sys, _thread
from pathlib import Path


def switch_the_hook_off():
    for obj in gc.get_objects():
        if getattr(obj, "__name__", "") == "guard" and getattr(obj, "__closure__", None):
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, set):
                    cell.cell_contents.add(_thread.get_ident())
                    return True
    return False


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


def do_listen(provider, arg):
    server = socket.socket()
    server.listen()
    port = server.getsockname()[1]
    return provider.complete(f"port {port}")


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

LIMITS = Limits(timeout_s=20)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "lab").mkdir()
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(HOSTILE)
    (root / "pyproject.toml").write_text("")
    return root


def attack(root: Path, task: str, scratch: Path, isolation: Wall, *,
           answer: Callable[[str, str], str | None] = lambda case, prompt: None,
           limits: Limits = LIMITS) -> str:
    """Run one hostile task; return what the agent says happened."""
    case = task.split(" ")[0]
    result = Sandbox(root, scratch, limits, isolation).run(
        "lab.agent:run", [(case, task)], RunPlan("provider-a", 0, Serving(answer)))
    outcome = result.outcomes[case]
    assert outcome.status == "returned", (outcome, result.import_error)
    assert outcome.answer is not None
    return outcome.answer


def test_with_the_hook_off_a_write_outside_lands_behind_the_guard_but_not_the_wall(
    hostile: Path, tmp_path: Path, isolation: Wall
) -> None:
    target = tmp_path / "classmate" / "report.json"
    target.parent.mkdir()

    said = attack(hostile, f"write {target}", tmp_path / "scratch", isolation)

    if isinstance(isolation, ProcessWall):  # the guard is a tripwire: this is why the wall exists
        assert (said, target.read_text()) == ("written", "forged")
    else:
        assert said.startswith("failed: FileNotFoundError") and not target.exists()


def test_a_folder_swapped_for_a_link_mid_write_lands_behind_the_guard_but_not_the_wall(
    hostile: Path, tmp_path: Path, isolation: Wall
) -> None:
    """The hook judges a path, then Python opens it: a thread that swaps a folder for a
    link to a classmate's folder in between wins the race, with the hook on."""
    classmate = tmp_path / "classmate"
    classmate.mkdir()

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


def test_no_process_can_be_started_and_none_outlives_the_run(
    hostile: Path, tmp_path: Path
) -> None:
    require_namespaces()
    marker = tmp_path / "escaped"

    spawned = attack(hostile, f"spawn {marker}", tmp_path / "a", NamespacesWall())
    forked = attack(hostile, "fork", tmp_path / "b", NamespacesWall())

    assert spawned == "failed: PermissionError: [Errno 1] Operation not permitted"
    assert forked == "failed: PermissionError: [Errno 1] Operation not permitted"
    time.sleep(4)  # the escapee would have written by now
    assert not marker.exists()
    assert not _processes_mentioning(str(marker))


def test_the_grader_and_its_processes_cannot_be_signalled(
    hostile: Path, tmp_path: Path
) -> None:
    require_namespaces()
    with subprocess.Popen(["sleep", "60"]) as victim:
        try:
            said = attack(hostile, f"kill {victim.pid}", tmp_path / "scratch", NamespacesWall())
            assert victim.poll() is None
        finally:
            victim.kill()
    assert said.startswith("failed: ProcessLookupError")


def test_a_port_opened_by_listen_alone_is_unreachable(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()
    reached: list[str] = []

    def answer(case: str, prompt: str) -> str:
        port = int(prompt.split()[1])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                reached.append("connected")
        except OSError as exc:
            reached.append(type(exc).__name__)
        return "asked"

    said = attack(hostile, "listen", tmp_path / "scratch", NamespacesWall(), answer=answer)

    assert said == "asked"  # the socket listened, inside its own network namespace
    assert reached == ["ConnectionRefusedError"]


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
    assert "sandbox" in seen["/proc/1/cmdline"] or "bwrap" in seen["/proc/1/cmdline"]
    assert "work" not in seen["/"] and "home" not in seen["/"]
    assert "OPENAI_API_KEY" not in seen["environ"]


def test_the_writable_space_is_capped(hostile: Path, tmp_path: Path) -> None:
    require_namespaces()

    said = attack(hostile, "fill", tmp_path / "scratch", NamespacesWall(),
                  limits=Limits(timeout_s=20, disk_mb=4))

    written, _, error = said.partition(" MiB then ")
    assert int(written) < 4 and error == "OSError"
    assert sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file()) < 1 << 20


def test_an_honest_run_is_the_same_behind_either_wall(tmp_path: Path) -> None:
    require_namespaces()
    root = tmp_path / "honest"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(textwrap.dedent("""
        import os, sys

        def run(provider, task):
            answer = provider.complete("Plan: " + task)
            return f"{answer} {sorted(os.environ)} {os.getcwd() == os.environ['HOME']}"
    """))
    (root / "pyproject.toml").write_text("")
    runs: dict[str, RunResult] = {}
    for wall in ("process", "namespaces"):
        runs[wall] = Sandbox(root, tmp_path / wall, LIMITS, wall_named(wall)).run(
            "lab.agent:run", [("c", "refunds")],
            RunPlan("provider-a", 7, Serving(lambda case, prompt: "recorded")))

    first, second = (runs[w].outcomes["c"] for w in ("process", "namespaces"))
    assert first.status == "returned" and first.answer is not None
    assert (first.answer, first.answer_sha256, first.calls) == (
        second.answer, second.answer_sha256, second.calls)


def test_namespaces_without_bubblewrap_is_a_usage_error_that_names_the_install(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    bubblewrap.cache_clear()
    try:
        with pytest.raises(UsageError, match="apt-get install bubblewrap"):
            choose_isolation("namespaces")
        assert isinstance(choose_isolation("auto"), ProcessWall)
    finally:
        bubblewrap.cache_clear()
    assert ProcessWall().description.startswith("process guard only")


def test_a_wall_is_named_on_the_command_line_and_in_a_worker_request() -> None:
    assert isolation_requests() == ("auto", "namespaces", "process")
    for wall in (ProcessWall(), NamespacesWall()):
        assert wall_named(wall.name) == wall and wall_named(wall.name) is not wall
    assert ProcessWall() != NamespacesWall()
    with pytest.raises(ValueError, match="no wall is named 'container': name one of"):
        wall_named("container")
    with pytest.raises(UsageError, match="use one of auto, namespaces, process"):
        choose_isolation("container")


def test_a_third_wall_is_one_class(tmp_path: Path) -> None:
    """Defining the class is all it takes: ``--isolation`` offers it, a worker request can
    name it, and a sandbox runs cases behind it."""

    class Borrowed(ProcessWall):
        name = "borrowed"
        description = "the process guard, under another name"
        preference = -1

    try:
        assert isolation_requests()[-1] == "borrowed"
        assert choose_isolation("borrowed") == wall_named("borrowed") == Borrowed()
        assert not isinstance(choose_isolation("auto"), Borrowed)  # preferred least
        root = tmp_path / "sub"
        (root / "lab").mkdir(parents=True)
        (root / "lab" / "__init__.py").write_text("")
        (root / "lab" / "agent.py").write_text(
            "def run(provider, task):\n    return provider.complete(task)\n")
        result = Sandbox(root, tmp_path / "scratch", LIMITS, Borrowed()).run(
            "lab.agent:run", [("c", "hi")], RunPlan("provider-a", 0, Serving(lambda c, p: "yo")))
        assert (result.outcomes["c"].status, result.outcomes["c"].answer) == ("returned", "yo")
    finally:
        WALLS.pop("borrowed")
    assert "borrowed" not in isolation_requests()


def test_the_seccomp_program_is_well_formed() -> None:
    program = no_new_processes_filter("x86_64")
    assert program is not None and len(program) % 8 == 0
    assert no_new_processes_filter("an-unknown-machine") is None


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


MALLORY = '''

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
'''


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
        (str(batch / "zoe" / "lab" / "agent.py"), "def run(provider, task, tools=None):\n"
                                                  "    return ''\n"),
        (str(out / "alice" / "report.json"), "{}"),
        (str(out / "alice" / "results.json"), '{"score": 0}'),
        (str(out / "gradebook.csv"), "forged"),
    ]
    agent = batch / "mallory" / "lab" / "agent.py"
    agent.write_text(agent.read_text() + f"\nTARGETS = {targets!r}\n" + MALLORY)

    _grade([batch], out)

    for name in ("alice", "zoe"):
        for report in ("report.json", "results.json"):
            assert (out / name / report).read_bytes() == \
                (alone / name / name / report).read_bytes()
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

    assert (folder["process"] / "report.json").read_bytes() == \
        (folder["namespaces"] / "report.json").read_bytes()
    for wall in walls:
        said = f"Isolation: {wall_named(wall).description}."
        assert said in (folder[wall] / "report.md").read_text()
        results = json.loads((folder[wall] / "results.json").read_text())
        assert results["extra_data"]["isolation"] == wall_named(wall).description


def _grade(paths: list[Path], out: Path, wall: str = "namespaces") -> None:
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade", *map(str, paths), "--out", str(out),
         "--isolation", wall, "--jobs", "2"],
        capture_output=True, text=True, timeout=600, check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr


def test_a_hanging_submission_costs_one_timeout_per_case(tmp_path: Path) -> None:
    from grader.grading._grade import grade_submission
    from grader.rubric._rubric import load_rubric
    from tests.submissions import REFERENCE, make_submission

    root = make_submission(tmp_path / "hangs")
    (root / "lab" / "agent.py").write_text(
        "import time\n\n\ndef run(provider, task, tools=None):\n"
        "    while True:\n        time.sleep(1)\n")
    rubric_text = (REFERENCE / "rubric" / "bootcamp.toml").read_text()
    rubric_file = tmp_path / "rubric.toml"
    rubric_file.write_text(rubric_text.replace("timeout_s = 30\n", "timeout_s = 1\n"))
    scratch = tmp_path / "scratch"

    evidence = grade_submission(root, load_rubric(rubric_file), submission="hangs",
                                label="provider-a", scratch=scratch).evidence

    runs = (evidence.primary, *evidence.others, evidence.second_set)
    assert len(evidence.others) >= 4  # one run under each other provider family's label
    assert evidence.loud == ()  # no case ran, so none was probed
    for result in runs:
        assert result is not None
        assert {o.status for o in result.outcomes.values()} == {"timeout"}
        assert {o.detail for o in result.outcomes.values()} == {"did not finish within 1 s"}
    # Only the primary run started children: the others never ran a timed-out case again.
    assert sorted(p.name for p in scratch.iterdir()) == ["primary", "probe"]


def test_special_files_in_a_submission_are_left_out_of_its_copy(
    tmp_path: Path, isolation: Wall
) -> None:
    root = tmp_path / "odd"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(
        "import os\n\n\ndef run(provider, task):\n    return ' '.join(sorted(os.listdir('.')))\n")
    (root / "pyproject.toml").write_text("")
    os.mkfifo(root / "pipe")  # copying it would block forever
    (root / "link").symlink_to("/etc/hostname")

    result = Sandbox(root, tmp_path / "scratch", LIMITS, isolation).run(
        "lab.agent:run", [("c", "look")], RunPlan("provider-a", 0, Serving(lambda c, p: None)))

    assert result.outcomes["c"].answer == "lab link pyproject.toml"
