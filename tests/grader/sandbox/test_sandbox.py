"""The trust boundary, tested with real child processes and real submissions in tmp folders.

Most tests run one "zoo" agent whose task names a behaviour (``"connect 4242"``,
``"hang"``): a well-behaved agent, agents that mishandle a miss, and agents
that try to reach past the sandbox.

It reaches ``_sandbox``, ``_walls`` and ``_hold`` on purpose: the refused events, each
child's cell and the host's hold are those modules' own.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import shutil
import socket
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gradekit
import lab
from gradekit import CassetteMiss, Replay, ToolReplay, prompt_key
from gradekit.internal import decode_fixture
from grader import Limits, Refusal, RunResult, Served, TraceRecord, load_cases
from grader.sandbox import (
    HARNESS,
    NamespacesWall,
    RunPlan,
    Sandbox,
    Serving,
    Wall,
    _sandbox,
    _walls,
)
from grader.sandbox._hold import Cell, Watchdog, host_hold
from grader.submission import takes_tools
from lab.agent import run as reference_run

pytestmark = pytest.mark.slow

ZOO_AGENT = """
import hashlib, json, os, resource, signal, socket, subprocess, sys, tempfile, time
from pathlib import Path

import gradekit
import lab


def run(provider, task):
    name, _, arg = task.partition(" ")
    return globals()["do_" + name](provider, arg)


def traced(provider, prompt):
    ok = False
    try:
        answer = provider.complete(prompt)
        ok = True
        return answer
    finally:
        key = hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()[:16]
        record = {"key": key, "provider": provider.name, "latency_ms": 0.5, "ok": ok}
        with open(os.environ["GRADEKIT_TRACE"], "a", encoding="utf-8") as trace:
            trace.write(json.dumps(record) + "\\n")


def do_answer(provider, arg):
    plan = traced(provider, "  Plan: " + arg + "\\n")
    return traced(provider, "Answer: " + plan)


def do_label(provider, arg):
    return provider.name


def do_hash(provider, arg):
    return str(hash("x"))


def do_packages(provider, arg):
    import builtins, importlib.util
    found = {name: importlib.util.find_spec(name) is not None for name in ("grader", "httpx")}
    return json.dumps({**found, "exit": hasattr(builtins, "exit")})


def do_miss(provider, arg):
    return provider.complete("never recorded")


def do_miss_own_class(provider, arg):
    try:
        provider.complete("never recorded")
    except lab.CassetteMiss as miss:
        return type(miss).__module__ + "." + type(miss).__qualname__


def do_miss_from(provider, arg):
    try:
        provider.complete("never recorded")
    except Exception as miss:
        raise RuntimeError("wrapped") from miss


def do_miss_context(provider, arg):
    try:
        provider.complete("never recorded")
    except Exception:
        raise RuntimeError("while handling a miss")


def do_miss_group(provider, arg):
    try:
        provider.complete("never recorded")
    except Exception as miss:
        raise ExceptionGroup("several", [ValueError("other"), miss])


def do_miss_from_none(provider, arg):
    try:
        provider.complete("never recorded")
    except Exception:
        raise RuntimeError("a fresh error") from None


def do_miss_empty(provider, arg):
    try:
        return provider.complete("never recorded")
    except Exception:
        return ""


def do_miss_none(provider, arg):
    try:
        return provider.complete("never recorded")
    except Exception:
        return None


def do_exit_call(provider, arg):
    sys.exit(0)


def do_big(provider, arg):
    return provider.complete("big")


def do_hang(provider, arg):
    while True:
        time.sleep(0.05)


def do_spin(provider, arg):
    while True:
        pass


def do_big_file(provider, arg):
    Path("big.bin").write_bytes(bytes(2 << 20))


def do_flood(provider, arg):
    try:
        socket.getaddrinfo("localhost", 80)
    except PermissionError:
        pass
    line = json.dumps({"op": "refused", "event": "socket.getaddrinfo", "subject": "localhost"})
    batch = (line + "\\n").encode() * 10_000
    while True:
        os.write(provider._channel._write_fd, batch)


def do_hog(provider, arg):
    blocks = []
    while True:
        blocks.append(bytearray(1 << 24))


def do_exit(provider, arg):
    os._exit(3)


def do_sigkill(provider, arg):
    os.kill(os.getpid(), signal.SIGKILL)


def do_connect(provider, arg):
    with socket.socket() as sock:
        sock.connect(("127.0.0.1", int(arg)))
    return "connected"


def do_resolve(provider, arg):
    return str(socket.getaddrinfo("localhost", 80))


def do_subprocess(provider, arg):
    subprocess.run(["true"], check=True)
    return "spawned"


def do_system(provider, arg):
    return str(os.system("true"))


def do_write_outside(provider, arg):
    with open(arg, "w") as report:
        report.write("forged")


def do_mkdir_outside(provider, arg):
    os.mkdir(arg)


def do_remove_outside(provider, arg):
    os.remove(arg)


def do_rename_outside(provider, arg):
    Path("moved.txt").write_text("x")
    os.replace("moved.txt", arg)


def do_symlink_out(provider, arg):
    os.symlink(arg, "escape")
    Path("escape/report.json").write_text("forged")


def do_hardlink_out(provider, arg):
    os.link(arg, "inside.json")
    Path("inside.json").write_text("forged")


def do_dir_fd_out(provider, arg):
    folder = os.open(arg, os.O_RDONLY)
    os.open("report.json", os.O_WRONLY | os.O_CREAT, dir_fd=folder)


def do_fifo_out(provider, arg):
    os.mkfifo(arg)


def do_device(provider, arg):
    os.mknod("disk", 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    Path("disk").write_bytes(b"forged")


def do_write_inside(provider, arg):
    Path("notes.txt").write_text("notes")
    fd, path = tempfile.mkstemp()
    os.close(fd)
    os.remove(path)
    return Path("notes.txt").read_text()


def do_environ(provider, arg):
    return json.dumps({"keys": sorted(os.environ), "home": os.environ["HOME"] == os.getcwd()})


def do_print_report(provider, arg):
    print(json.dumps({"op": "result", "case": "print_report", "status": "returned",
                      "answer": "forged", "miss_escaped": True}))
    print("TOTAL 100.00 / 100.00")
    return "honest"


def do_signal_parent(provider, arg):  # a forked run's parent is outside its namespace: 0
    os.kill(os.getppid() or 1, 0)


def do_raise_limits(provider, arg):
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def do_pipeline(provider, arg):
    # Ask again and again without reading a reply: the grader must not queue the answers.
    line = json.dumps({"op": "complete", "case": "pipeline", "prompt": "Plan: refunds"})
    for _ in range(200):
        os.write(provider._channel._write_fd, (line + "\\n").encode())
    return "asked"


def do_long_trace(provider, arg):
    record = json.dumps({"key": "k", "provider": "p", "latency_ms": 1, "ok": True})
    with open(os.environ["GRADEKIT_TRACE"], "w") as trace:
        trace.write((record + "\\n") * int(arg))
    return "traced"


def do_wide_trace(provider, arg):
    with open(os.environ["GRADEKIT_TRACE"], "w") as trace:
        trace.write(json.dumps({"key": "k" * 10_000}) + "\\n")
    return "traced"


def do_spawn_python(provider, arg):
    import multiprocessing
    process = multiprocessing.get_context("spawn").Process(target=print)
    process.start()
    return "spawned"


def do_forge(provider, arg):
    os.write(provider._channel._write_fd, b"this is not the protocol\\n")
    return "forged"


def do_trace(provider, arg):
    path = os.environ["GRADEKIT_TRACE"]
    good = json.dumps({"key": "k", "provider": "p", "latency_ms": 1, "ok": True})
    if arg == "symlink":
        os.symlink("/etc/hostname", path)
    elif arg == "fifo":
        os.mkfifo(path)
    else:
        lines = {"json": [good, "{not json"], "object": [good, "[1, 2]"], "nan": ['{"ok": NaN}']}
        Path(path).write_text("\\n".join(lines[arg]) + "\\n")
    return arg
"""

MISS_CLASS = "class CassetteMiss(Exception):\n    pass\n"
EMPTY_REPLAY = """
import json


class Replay:
    def __init__(self, path):
        with open(path, encoding="utf-8") as cassette:
            entries = json.load(cassette)["entries"].values()
        self._answers = {e["prompt"].strip(): e["response"] for e in entries}

    def complete(self, prompt):
        return self._answers.get(prompt.strip(), "")
"""
EXACT_REPLAY = EMPTY_REPLAY.replace(
    'self._answers.get(prompt.strip(), "")', "self._answers[prompt]"
).replace('e["prompt"].strip()', 'e["prompt"]')

ANSWERS = {"Plan: refunds": "1. read the policy", "Answer: 1. read the policy": "Refunds: 30 days."}
LIMITS = Limits(timeout_s=10)
NO_ANSWERS = Serving(answer=lambda case, prompt: None)  # every prompt misses


def at(snippet: str) -> str:
    """Where the zoo agent makes the call ``snippet``, as a refusal names it."""
    lines = textwrap.dedent(ZOO_AGENT).splitlines()
    return f"lab/agent.py:{next(n for n, line in enumerate(lines, 1) if snippet in line)}"


def write_submission(root: Path, files: Mapping[str, str]) -> Path:
    """A submission folder holding ``files`` (relative path -> source)."""
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(source), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {"lab/__init__.py": MISS_CLASS, "lab/agent.py": ZOO_AGENT, "pyproject.toml": ""}
    return write_submission(tmp_path_factory.mktemp("zoo"), files)


Run = Callable[..., RunResult]


@pytest.fixture
def run(zoo: Path, tmp_path: Path, isolation: Wall) -> Run:
    """Run the zoo agent (or ``root``) on tasks; each task's case id is its behaviour's name."""

    def run(
        tasks: Sequence[str],
        *,
        root: Path = zoo,
        answers: Mapping[str, str] = ANSWERS,
        label: str = "provider-a",
        hashseed: int = 0,
        limits: Limits = LIMITS,
    ) -> RunResult:
        cases = [(task.split(" ")[0], task) for task in tasks]
        serving = Serving(answer=lambda case, prompt: answers.get(prompt.strip()))
        return Sandbox(root, tmp_path / "scratch", limits, isolation).run(
            "lab.agent:run", cases, RunPlan(label, hashseed, serving)
        )

    return run


def test_a_well_behaved_agent_returns_its_answer_with_calls_and_trace(run: Run) -> None:
    outcome = run(["answer refunds"]).outcomes["answer"]

    keys = [prompt_key("Plan: refunds"), prompt_key("Answer: 1. read the policy")]
    assert (outcome.status, outcome.answer, outcome.returned_type) == (
        "returned",
        "Refunds: 30 days.",
        "str",
    )
    # The first record was in the trace when the second call was answered.
    assert outcome.calls == (
        Served(keys[0], True, head="Plan: refunds"),
        Served(keys[1], True, trace_lines=1, head="Answer: 1. read the policy"),
    )
    assert outcome.trace == tuple(TraceRecord(key, "provider-a", 0.5, True) for key in keys)
    assert (outcome.trace_error, outcome.exception, outcome.miss_escaped) == (None, None, False)


def test_a_sandbox_counts_the_children_its_runs_start_within_it_too(
    zoo: Path, tmp_path: Path, isolation: Wall
) -> None:
    """What a grade costs is counted where it is spent: a run of two cases is one child, a
    case that times out costs a fresh child for the cases after it, and the runs of a
    sandbox ``within`` another count in the same place."""
    sandbox = Sandbox(zoo, tmp_path / "scratch", Limits(timeout_s=2), isolation)
    serving = Serving(answer=lambda case, prompt: ANSWERS.get(prompt.strip()))
    plan = RunPlan("provider-a", 0, serving)
    try:
        sandbox.within("one").run("lab.agent:run", [("a", "answer x"), ("b", "label x")], plan)
        assert sandbox.laid.children == 1
        sandbox.within("two").run("lab.agent:run", [("h", "hang x"), ("c", "answer y")], plan)
        assert sandbox.laid.children == 3
    finally:
        sandbox.close()


def test_the_reference_agent_replays_its_real_cassette(tmp_path: Path) -> None:
    kit = Path(lab.__file__).parent.parent
    root = tmp_path / "kit"
    shutil.copytree(kit / "lab", root / "lab", ignore=shutil.ignore_patterns("__py*"))
    case = load_cases(kit / "rubric" / "bootcamp.toml")[0]
    replay = Replay(kit / "cassettes" / f"{case.id}.json")
    fixture = kit / "fixtures" / f"{case.id}.json"
    recorded = decode_fixture(fixture.read_bytes(), source=fixture.name).calls

    def serve(case_id: str, prompt: str) -> str | None:
        try:
            return replay.complete(prompt)
        except CassetteMiss:
            return None

    def serve_tool(case_id: str, key: str) -> tuple[bool, object]:
        return (True, recorded[key].response) if key in recorded else (False, None)

    result = Sandbox(root, tmp_path / "scratch", LIMITS).run(
        "lab.agent:run",
        [(case.id, case.task)],
        RunPlan("provider-a", 1, Serving(answer=serve, tools=serve_tool)),
    )

    outcome = result.outcomes[case.id]
    expected = reference_run(replay, case.task, ToolReplay(fixture))
    assert (outcome.status, outcome.answer) == ("returned", expected)
    assert outcome.calls and all(call.served for call in outcome.calls)
    assert outcome.calls[0].tool == "read_docs"
    assert [r.key for r in outcome.trace] == [call.key for call in outcome.calls]
    assert {r.provider for r in outcome.trace if r.tool is None} == {"provider-a"}
    assert result.refusals == ()


def test_a_run_plan_takes_only_a_hash_seed_python_takes() -> None:
    assert RunPlan("provider-a", 2**32 - 1, NO_ANSWERS).hashseed == 2**32 - 1
    for seed in (-1, 2**32):
        with pytest.raises(
            ValueError, match=f"hashseed must be between 0 and 4294967295, got {seed}"
        ):
            RunPlan("provider-a", seed, NO_ANSWERS)


def test_the_label_arrives_as_provider_name(run: Run) -> None:
    assert run(["label"], label="provider-b").outcomes["label"].answer == "provider-b"


def test_each_run_gets_the_hash_seed_it_asks_for(run: Run) -> None:
    first, second, again = (run(["hash"], hashseed=seed).outcomes["hash"] for seed in (1, 2, 1))
    assert first.answer != second.answer
    assert first.answer == again.answer


def test_the_agent_gets_the_packages_but_not_the_grader(run: Run) -> None:
    """The environment's packages are importable; its .pth files do not run, so the grader's
    own editable install stays out; exit() is there, as under a normal start."""
    seen = json.loads(run(["packages"]).outcomes["packages"].answer or "{}")
    assert seen == {"grader": False, "httpx": True, "exit": True}


def test_the_same_run_twice_gives_equal_results(run: Run) -> None:
    tasks = ["answer refunds", "miss", "print_report", "subprocess"]
    assert run(tasks) == run(tasks)


def test_a_miss_raises_the_submissions_own_cassette_miss(run: Run) -> None:
    result = run(["miss", "miss_own_class"])

    miss = result.outcomes["miss"]
    assert (miss.status, miss.exception, miss.miss_escaped) == ("raised", "CassetteMiss", True)
    assert miss.calls == (
        Served(prompt_key("never recorded"), False, asked="never recorded", head="never recorded"),
    )
    assert result.outcomes["miss_own_class"].answer == "lab.CassetteMiss"


def test_a_miss_built_from_the_kits_lab_carries_its_fields(tmp_path: Path) -> None:
    root = tmp_path / "kit"
    shutil.copytree(Path(lab.__file__).parent, root / "lab", ignore=shutil.ignore_patterns("__py*"))
    agent = """
        from gradekit import CassetteMiss

        def run(provider, task):
            try:
                provider.complete("  never recorded ")
            except CassetteMiss as miss:
                return f"{miss.key} {miss.prompt!r} {miss.cassette}"
    """
    write_submission(root, {"miss_agent.py": agent})
    result = Sandbox(root, tmp_path / "scratch", LIMITS).run(
        "miss_agent:run", [("refunds", "")], RunPlan("provider-a", 0, NO_ANSWERS)
    )
    key = prompt_key("never recorded")
    # The fields the kit's Replay gives its miss: the cassette is the file's path.
    assert result.outcomes["refunds"].answer == f"{key} '  never recorded ' cassettes/refunds.json"


@pytest.mark.parametrize(
    ("task", "exception", "escaped"),
    [
        ("miss_from", "RuntimeError", True),
        ("miss_context", "RuntimeError", True),
        ("miss_group", "ExceptionGroup", True),
        ("miss_from_none", "RuntimeError", False),
        ("exit_call", "SystemExit", False),
    ],
)
def test_whether_a_miss_escaped_follows_the_exception_chain(
    run: Run, task: str, exception: str, escaped: bool
) -> None:
    outcome = run([task]).outcomes[task]
    assert (outcome.status, outcome.exception, outcome.miss_escaped) == (
        "raised",
        exception,
        escaped,
    )


@pytest.mark.parametrize(
    ("task", "answer", "returned_type"),
    [("miss_empty", "", "str"), ("miss_none", None, "NoneType")],
)
def test_a_swallowed_miss_is_a_return(
    run: Run, task: str, answer: str | None, returned_type: str
) -> None:
    outcome = run([task]).outcomes[task]
    assert (outcome.status, outcome.answer, outcome.returned_type) == (
        "returned",
        answer,
        returned_type,
    )
    assert (outcome.exception, outcome.miss_escaped) == (None, False)
    assert outcome.calls == (
        Served(prompt_key("never recorded"), False, asked="never recorded", head="never recorded"),
    )


def test_a_submission_without_cassette_miss_gets_the_harness_one(tmp_path: Path) -> None:
    agent = "def run(provider, task):\n    return provider.complete('never recorded')\n"
    root = write_submission(tmp_path / "bare", {"lab/__init__.py": "", "lab/agent.py": agent})
    result = Sandbox(root, tmp_path / "scratch", LIMITS).run(
        "lab.agent:run", [("refunds", "")], RunPlan("provider-a", 0, NO_ANSWERS)
    )
    outcome = result.outcomes["refunds"]
    assert (outcome.status, outcome.exception, outcome.miss_escaped) == (
        "raised",
        "CassetteMiss",
        True,
    )


def test_a_large_answer_crosses_the_pipe_intact_and_only_its_head_is_kept(run: Run) -> None:
    big = "x" * 300_000 + "é"
    outcome = run(["big"], answers={"big": big}).outcomes["big"]
    assert outcome.answer_sha256 == hashlib.sha256(big.encode("utf-8")).hexdigest()
    kept = LIMITS.answer_kb * 1024
    assert outcome.answer == "x" * kept + f"… [cut: {300_000 + 2 - kept} more bytes]"


def test_a_hang_times_out_and_the_next_case_still_runs(run: Run) -> None:
    result = run(["hang", "label"], limits=Limits(timeout_s=1))

    hang = result.outcomes["hang"]
    assert (hang.status, hang.detail) == ("timeout", "did not finish within 1 s")
    assert result.outcomes["label"].answer == "provider-a"


def test_a_flood_of_messages_still_times_out(run: Run) -> None:
    result = run(["flood"], limits=Limits(timeout_s=1))

    assert result.outcomes["flood"].status == "timeout"
    assert result.refusals == (
        Refusal(
            "flood",
            "socket.getaddrinfo",
            "resolve a host name (" + at('getaddrinfo("localhost", 80)') + ")",
        ),
        Refusal("flood", "socket.getaddrinfo", "resolve a host name"),  # the made-up ones
    )


def test_memory_exhaustion_costs_only_that_case(run: Run) -> None:
    result = run(["hog", "label"], limits=Limits(timeout_s=10, memory_mb=256))

    hog = result.outcomes["hog"]
    assert hog.status == "crashed" or (hog.status, hog.exception) == ("raised", "MemoryError")
    assert result.outcomes["label"].answer == "provider-a"


def test_the_cpu_limit_ends_a_busy_loop(run: Run) -> None:
    result = run(["spin", "label"], limits=Limits(timeout_s=10, cpu_s=1))

    spin = result.outcomes["spin"]
    assert spin.status == "crashed" and spin.detail in ("killed by SIGXCPU", "killed by SIGKILL")
    assert result.outcomes["label"].answer == "provider-a"


def test_the_file_size_limit_stops_a_large_write(run: Run) -> None:
    result = run(["big_file"], limits=Limits(timeout_s=10, file_mb=1))

    big = result.outcomes["big_file"]
    assert (big.status, big.exception) == ("raised", "OSError")


@pytest.mark.parametrize(
    ("task", "detail"), [("exit", "exited with status 3"), ("sigkill", "killed by SIGKILL")]
)
def test_a_crash_costs_only_that_case(run: Run, task: str, detail: str) -> None:
    result = run([task, "label"])

    assert (result.outcomes[task].status, result.outcomes[task].detail) == ("crashed", detail)
    assert result.outcomes["label"].answer == "provider-a"


def test_a_connection_to_a_live_loopback_server_is_refused(run: Run) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as probe:  # the port does answer
            server.accept()[0].close()
            probe.close()
        result = run([f"connect {port}"])
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing from the child ever arrived

    outcome = result.outcomes["connect"]
    assert (outcome.status, outcome.exception) == ("raised", "PermissionError")
    assert result.refusals == (
        Refusal(
            "connect", "socket.__new__", "open a network socket (" + at("socket.socket()") + ")"
        ),
    )


def test_a_host_name_lookup_is_refused(run: Run) -> None:
    result = run(["resolve"])

    assert result.outcomes["resolve"].exception == "PermissionError"
    assert result.refusals == (
        Refusal(
            "resolve",
            "socket.getaddrinfo",
            "resolve a host name (" + at("return str(socket.getaddrinfo") + ")",
        ),
    )


@pytest.mark.parametrize(
    ("task", "event"), [("subprocess", "subprocess.Popen"), ("system", "os.system")]
)
def test_starting_a_process_is_refused(run: Run, task: str, event: str) -> None:
    result = run([task])

    assert result.outcomes[task].exception == "PermissionError"
    called = {"subprocess": "subprocess.run([", "system": "os.system("}[task]
    assert result.refusals == (Refusal(task, event, f"start a process ({at(called)})"),)


def test_signalling_the_grader_is_refused(run: Run) -> None:
    result = run(["signal_parent"])

    assert result.outcomes["signal_parent"].exception == "PermissionError"
    assert result.refusals == (
        Refusal(
            "signal_parent",
            "os.kill",
            "signal another process (" + at("os.getppid() or 1, 0") + ")",
        ),
    )


def test_raising_the_resource_limits_is_refused(run: Run) -> None:
    result = run(["raise_limits"])

    assert result.outcomes["raise_limits"].exception == "PermissionError"
    assert [r.event for r in result.refusals] == ["resource.setrlimit"]


def test_writing_outside_the_copy_is_refused(run: Run, tmp_path: Path) -> None:
    grades = tmp_path / "grades"
    grades.mkdir()
    (grades / "keep.json").write_text("{}")

    result = run(
        [
            f"write_outside {grades / 'report.json'}",
            f"mkdir_outside {grades / 'sub'}",
            f"remove_outside {grades / 'keep.json'}",
            f"rename_outside {grades / 'moved.txt'}",
        ]
    )

    assert {o.exception for o in result.outcomes.values()} == {"PermissionError"}
    assert sorted(p.name for p in grades.iterdir()) == ["keep.json"]
    assert result.refusals == (
        Refusal(
            "write_outside",
            "open",
            "write a file outside the submission (" + at('with open(arg, "w")') + ")",
        ),
        Refusal(
            "mkdir_outside",
            "os.mkdir",
            "create a folder outside the submission (" + at("os.mkdir(arg)") + ")",
        ),
        Refusal(
            "remove_outside",
            "os.remove",
            "delete outside the submission (" + at("os.remove(arg)") + ")",
        ),
        Refusal(
            "rename_outside",
            "os.rename",
            "move a file outside the submission (" + at('os.replace("moved.txt", arg)') + ")",
        ),
    )


def test_links_and_folder_fds_do_not_lead_outside(
    run: Run, tmp_path: Path, isolation: Wall
) -> None:
    grades = tmp_path / "grades"
    grades.mkdir()
    (grades / "keep.json").write_text("{}")

    result = run(
        [
            f"symlink_out {grades}",
            f"hardlink_out {grades / 'keep.json'}",
            f"dir_fd_out {grades}",
            f"fifo_out {grades / 'report.json'}",
        ]
    )

    assert sorted(p.name for p in grades.iterdir()) == ["keep.json"]
    assert (grades / "keep.json").read_text() == "{}"
    if isinstance(isolation, NamespacesWall):  # the folder is not even there: nothing to refuse
        assert {o.status for o in result.outcomes.values()} == {"raised"}
        return
    assert {o.exception for o in result.outcomes.values()} == {"PermissionError"}
    assert result.refusals == (
        Refusal(
            "symlink_out",
            "open",
            "write a file outside the submission (" + at('Path("escape/report.json")') + ")",
        ),
        Refusal(
            "hardlink_out",
            "os.link",
            "create a link outside the submission (" + at("os.link(arg") + ")",
        ),
        Refusal(
            "dir_fd_out",
            "open",
            "open a folder outside the submission (" + at("folder = os.open(arg") + ")",
        ),
        Refusal(
            "fifo_out",
            "os.mkfifo",
            "create a special file outside the submission (" + at("os.mkfifo(arg)") + ")",
        ),
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a device node")
def test_a_device_node_is_not_writable_even_inside_the_copy(run: Run, isolation: Wall) -> None:
    result = run(["device"])

    assert result.outcomes["device"].exception == "PermissionError"
    # No child has the capability to make the node: under namespaces none is left, and
    # behind the guard a root grader's child is uid 65534 (only a child allowed to run as
    # root on the host could make it, and the hook would then refuse the write).
    assert result.refusals == ()


def test_writing_inside_the_copy_and_its_temp_folder_works(run: Run) -> None:
    result = run(["write_inside"])

    assert result.outcomes["write_inside"].answer == "notes"
    assert result.refusals == ()


def test_the_child_sees_no_credentials_from_the_parent(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")

    seen = json.loads(run(["environ"]).outcomes["environ"].answer or "{}")

    assert seen == {
        "home": True,
        "keys": [
            "GRADEKIT_TRACE",
            "HOME",
            "LANG",
            "LC_ALL",
            "PATH",
            "PYTHONDONTWRITEBYTECODE",
            "PYTHONIOENCODING",
            "TMPDIR",
            "TZ",
        ],
    }


def test_printed_output_is_kept_but_never_trusted(run: Run) -> None:
    result = run(["print_report"])

    outcome = result.outcomes["print_report"]
    assert (outcome.answer, outcome.miss_escaped) == ("honest", False)
    assert "TOTAL 100.00 / 100.00" in result.stdout
    assert '"answer": "forged"' in result.stdout


def test_output_is_capped(run: Run) -> None:
    result = run(["print_report"], limits=Limits(timeout_s=10, output_kb=0))
    assert (result.stdout, result.outcomes["print_report"].answer) == ("", "honest")


def test_a_line_forged_on_the_pipe_costs_only_that_case(run: Run) -> None:
    result = run(["forge", "label"])

    forged = result.outcomes["forge"]
    assert (forged.status, forged.detail) == (
        "crashed",
        "broke the grader's protocol: a line that is not JSON",
    )
    assert result.outcomes["label"].answer == "provider-a"


@pytest.mark.parametrize(
    ("kind", "records", "error"),
    [
        ("json", 1, "line 2: not valid JSON"),
        ("object", 1, "line 2: not a JSON object"),
        ("nan", 0, "line 1: not valid JSON"),
        ("symlink", 0, "not a regular file"),
        ("fifo", 0, "not a regular file"),
    ],
)
def test_a_broken_trace_keeps_the_records_before_the_break(
    run: Run, kind: str, records: int, error: str, isolation: Wall
) -> None:
    outcome = run([f"trace {kind}"]).outcomes["trace"]

    if isinstance(isolation, NamespacesWall) and kind in ("symlink", "fifo"):
        # The trace file is bound into the sandbox: it cannot be replaced at all.
        assert (outcome.exception, outcome.trace, outcome.trace_error) == (
            "FileExistsError",
            (),
            None,
        )
        return

    assert outcome.answer == kind
    assert (len(outcome.trace), outcome.trace_error) == (records, error)


def test_an_import_failure_runs_no_case(tmp_path: Path, run: Run) -> None:
    agent = "import not_a_module_anywhere\n"
    root = write_submission(tmp_path / "broken", {"lab/__init__.py": "", "lab/agent.py": agent})

    result = run(["label", "hash"], root=root)

    assert result.import_error == (
        "ModuleNotFoundError: No module named 'not_a_module_anywhere' (lab/agent.py, line 1)"
    )
    assert {o.status for o in result.outcomes.values()} == {"not_run"}
    assert list(result.outcomes) == ["label", "hash"]


def test_a_syntax_error_says_its_file_and_line(tmp_path: Path, run: Run) -> None:
    agent = "def run(provider, task):\n    return 'ok'\n\n\ndef broken(:\n    pass\n"
    root = write_submission(tmp_path / "broken", {"lab/__init__.py": "", "lab/agent.py": agent})

    result = run(["label"], root=root)

    assert result.import_error is not None
    assert result.import_error.startswith("SyntaxError: ")
    assert result.import_error.endswith(" (lab/agent.py, line 5)")


def test_a_refusal_at_import_time_belongs_to_no_case(tmp_path: Path, run: Run) -> None:
    agent = """
        import socket

        try:
            socket.getaddrinfo("example.com", 443)
        except PermissionError:
            pass

        def run(provider, task):
            return "imported"
    """
    root = write_submission(tmp_path / "eager", {"lab/agent.py": agent})

    result = run(["label"], root=root)

    assert result.outcomes["label"].answer == "imported"
    assert result.refusals == (
        Refusal("", "socket.getaddrinfo", "resolve a host name (lab/agent.py:5)"),
    )


def test_probe_replay_passes_the_kits_own_replay(tmp_path: Path) -> None:
    root = tmp_path / "kit"
    shutil.copytree(Path(lab.__file__).parent, root / "lab", ignore=shutil.ignore_patterns("__py*"))

    probe = Sandbox(root, tmp_path / "s", LIMITS).probe_replay(
        "lab:Replay", {"What is 2+2?": "4", "Zed": "Z"}
    )

    assert (probe.loaded, probe.whitespace_hit, probe.miss_raised) == (True, True, True)
    assert (probe.exception, probe.detail) == ("CassetteMiss", "")


@pytest.mark.parametrize(
    ("replay", "whitespace_hit", "miss_raised", "exception"),
    [(EMPTY_REPLAY, True, False, None), (EXACT_REPLAY, False, True, "KeyError")],
)
def test_probe_replay_judges_a_students_replay(
    tmp_path: Path, replay: str, whitespace_hit: bool, miss_raised: bool, exception: str | None
) -> None:
    root = write_submission(tmp_path / "sub", {"lab/__init__.py": replay})

    probe = Sandbox(root, tmp_path, LIMITS).probe_replay("lab:Replay", {"What is 2+2?": "4"})

    assert (probe.loaded, probe.whitespace_hit, probe.miss_raised, probe.exception) == (
        True,
        whitespace_hit,
        miss_raised,
        exception,
    )
    assert probe.detail


def test_probe_replay_reports_a_replay_that_cannot_load(tmp_path: Path) -> None:
    root = write_submission(tmp_path / "sub", {"lab/__init__.py": EMPTY_REPLAY})

    probe = Sandbox(root, tmp_path, LIMITS).probe_replay("lab:Missing", {"a": "b"})

    assert (probe.loaded, probe.whitespace_hit, probe.miss_raised) == (False, False, False)
    assert probe.detail == "AttributeError: module 'lab' has no attribute 'Missing'"


def _harness_module() -> Any:
    spec = importlib.util.spec_from_file_location("gradekit_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_HARNESS = _harness_module()


def test_the_harness_and_the_parent_agree_on_what_is_refused() -> None:
    refusable = getattr(_harness_module(), "REFUSABLE")  # noqa: B009
    assert refusable == frozenset(_sandbox._REFUSED)


def test_the_harness_imports_only_the_standard_library() -> None:
    tree = ast.parse(HARNESS.read_text(encoding="utf-8"))
    imported = {
        (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= sys.stdlib_module_names | {"__future__"}
    assert not imported & {"lab", "grader"}


def test_requests_that_never_read_a_reply_cost_only_that_case(run: Run) -> None:
    big = {**ANSWERS, "Plan: refunds": "x" * (1 << 20)}  # more than a pipe holds

    result = run(["pipeline", "answer refunds"], answers=big)

    assert (result.outcomes["pipeline"].status, result.outcomes["pipeline"].detail) == (
        "crashed",
        "broke the grader's protocol: a request before the last reply was read",
    )
    after = result.outcomes["answer"]  # a fresh child ran the next case: its plan was served
    assert after.status == "raised" and after.calls[0].served


def test_a_trace_is_read_only_up_to_its_record_cap(run: Run) -> None:
    limits = Limits(timeout_s=10, trace_records=50)

    long = run(["long_trace 5000"], limits=limits).outcomes["long_trace"]
    wide = run(["wide_trace"], limits=limits).outcomes["wide_trace"]

    assert (len(long.trace), long.trace_error) == (
        50,
        "more than 50 records; the rest was not read (trace_records in the rubric's [limits])",
    )
    assert (wide.trace, wide.trace_error) == ((), "line 1: longer than 4096 bytes")


def test_a_spawned_python_without_the_hook_never_starts(run: Run) -> None:
    outcome = run(["spawn_python"]).outcomes["spawn_python"]

    assert (outcome.status, outcome.exception) == ("raised", "PermissionError")


# -- the harness's deliberate copies (it may import only the standard library) ---------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_the_harness_keys_a_prompt_as_prompt_key_does(prompt: str) -> None:
    try:
        expected = prompt_key(prompt)
    except UnicodeEncodeError:  # a lone surrogate: the harness refuses it before keying
        return
    miss = _HARNESS.make_miss("m", "case", prompt)
    assert miss.key == expected


AGENTS: list[tuple[Callable[..., object], bool]] = [
    (lambda provider, task: "", False),
    (lambda provider, task, tools: "", True),
    (lambda provider, task, tools=None: "", True),
    (lambda *args: "", True),
    (lambda provider, *, task: "", False),
    (lambda provider, task, /, tools: "", True),
    (max, False),  # no signature to read
]


@pytest.mark.parametrize(("agent", "expected"), AGENTS)
def test_the_harness_tells_a_tools_agent_as_the_grader_does(
    agent: Callable[..., object], expected: bool
) -> None:
    assert takes_tools(agent) is expected
    assert _HARNESS.takes_tools(agent) is expected


SHIPS_ITS_OWN_KIT = """
import gradekit


def run(provider, task):
    try:
        with open(gradekit.__file__, "a", encoding="utf-8") as library:
            library.write("# the submission was here\\n")
        wrote = "wrote"
    except Exception as exc:
        wrote = "refused"
    return f"{getattr(gradekit, 'SHIPPED', 'kit')} {wrote} {gradekit.Replay.__module__}"
"""


def test_the_agent_runs_on_the_graders_own_gradekit_and_cannot_change_it(
    tmp_path: Path, isolation: Wall
) -> None:
    """A submission that ships (and edits) a gradekit of its own still runs on the grader's,
    which it can read but not write."""
    root = write_submission(
        tmp_path / "sub",
        {
            "lab/__init__.py": "",
            "lab/agent.py": SHIPS_ITS_OWN_KIT,
            "gradekit/__init__.py": "SHIPPED = 'own'\nclass Replay: pass\n",
        },
    )
    library = Path(gradekit.__file__)
    before = library.read_bytes()
    result = Sandbox(root, tmp_path / "scratch", LIMITS, isolation).run(
        "lab.agent:run", [("kit", "")], RunPlan("provider-a", 0, NO_ANSWERS)
    )
    assert result.outcomes["kit"].answer == "kit refused gradekit"
    assert library.read_bytes() == before


def test_a_grading_s_children_take_turns_in_one_cgroup(
    zoo: Path, tmp_path: Path, isolation: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Making and removing a cgroup costs more than the rest of a child's bookkeeping, and a
    grading's children run one after another: each hands its cell back, emptied, and the
    next takes it; the sandbox removes it when it closes. A crash in one is still its own."""
    if isinstance(host_hold(), Watchdog):
        pytest.skip(f"no cgroup here: {host_hold().description}")
    taken: list[Cell] = []
    made = _walls._cell

    def recorded(limits: Limits) -> Cell:
        taken.append(made(limits))
        return taken[-1]

    monkeypatch.setattr("grader.sandbox._walls._cell", recorded)
    plan = RunPlan("provider-a", 0, Serving(answer=lambda case, prompt: ANSWERS.get(prompt)))
    sandbox = Sandbox(zoo, tmp_path / "scratch", LIMITS, isolation)
    try:
        first = sandbox.run("lab.agent:run", [("exit", "exit"), ("label", "label")], plan)
        again = sandbox.within("again").run("lab.agent:run", [("label", "label")], plan)
    finally:
        sandbox.close()
    assert (first.outcomes["exit"].status, first.outcomes["exit"].detail) == (
        "crashed",
        "exited with status 3",
    )
    assert first.outcomes["label"].answer == again.outcomes["label"].answer == "provider-a"
    assert len(taken) == 3 and all(cell is taken[0] for cell in taken)
    folders = getattr(taken[0], "folders", ())
    assert folders and not any(folder.exists() for folder in folders)
