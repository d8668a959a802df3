"""Loud-failure probes as copies of one run: the same verdicts and reports as probes in runs
of their own, at a fraction of the children, and no point for code that tells them apart.

A grading runs every case once more and copies that run at each probed case's start, one
copy per probe (``grader.grading._probes._loud_probes``), behind either wall; before, each
probe was a run of its own, which made the cases before it again (a grading still does so
for a case it cannot copy). The agents here, written from scratch in their students' styles
(a memo that outlives a case, a thread kept across cases, a process that exits on a miss, a
spin on a miss, code that compares its process id), are recorded once and graded behind
both walls with copies, and with every probe a run of its own; each report must be the same
byte for byte, except that the agent that tells a copy from a run loses what it hoped to
keep and is flagged.
"""

from __future__ import annotations

import hashlib
import socket
from dataclasses import replace
from pathlib import Path

import pytest

from grader.grading import grade_submission
from grader.grading._grade import Graded
from grader.outputs import render_report_json
from grader.rubric import Rubric, load_rubric
from grader.sandbox import PROCESS_WALL, NamespacesWall, ProcessWall, Wall
from tests.grader.grading.test_probes_from_the_run import ECHO, LAST_GOOD, MANIFEST
from tests.submissions import CASES, REFERENCE, record_in_process

pytestmark = pytest.mark.slow
RUBRIC = REFERENCE / "rubric" / "bootcamp.toml"

# Lee keeps a log-flushing thread alive from the first case on: a run with a second thread
# cannot be copied (a fork keeps only the calling thread), so its later cases are probed in
# runs of their own.
KEPT_THREAD = """
import queue
import threading

from gradekit import Traced

_lines = queue.Queue()
_flusher = None


def _flush():
    while True:
        _lines.get()


def run(provider, task):
    global _flusher
    if _flusher is None:
        _flusher = threading.Thread(target=_flush, daemon=True)
        _flusher.start()
    llm = Traced(provider)
    answer = llm.complete("Answer briefly: " + task)
    _lines.put(answer)
    return answer
"""

# Max gives up hard: a miss ends the process with status 3, which is no loud failure.
EXITS = """
import os

from gradekit import CassetteMiss, Traced


def run(provider, task):
    llm = Traced(provider)
    try:
        outline = llm.complete("Outline an answer to: " + task)
        return llm.complete("Write the reply from this outline:\\n" + outline)
    except CassetteMiss:
        os._exit(3)
"""

# Nia read the grader's source: behind namespaces a probe is a copy of the run, with a
# process id of its own. She raises a miss there and apologises for it everywhere else.
PID_AWARE = """
import os

from gradekit import CassetteMiss, Traced

_BORN = os.getpid()


def run(provider, task):
    llm = Traced(provider)
    try:
        return llm.complete("Answer briefly: " + task)
    except CassetteMiss:
        if os.getpid() != _BORN:
            raise
        return "Sorry, the assistant is unavailable right now."
"""

# Ola plans, drafts and polishes, and lets every miss go.
THREE_STEPS = """
from gradekit import Traced


def run(provider, task):
    llm = Traced(provider)
    plan = llm.complete("Plan an answer to: " + task)
    draft = llm.complete("Draft it from this plan:\\n" + plan)
    return llm.complete("Polish this draft:\\n" + draft)
"""

AGENTS = {
    "three_steps": THREE_STEPS,
    "last_good": LAST_GOOD,
    "kept_thread": KEPT_THREAD,
    "exits": EXITS,
    "pid_aware": PID_AWARE,
}


def _submission(root: Path, name: str) -> Path:
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(AGENTS[name].lstrip(), "utf-8")
    (root / "echo.py").write_text(ECHO, "utf-8")
    (root / "pyproject.toml").write_text(
        MANIFEST.format(name=name, replay="gradekit:Replay"), "utf-8"
    )
    (root / "FAILURES.md").write_bytes((REFERENCE / "FAILURES.md").read_bytes())
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Graded]]:
    """Each agent, recorded once, graded behind namespaces and behind the process wall."""
    missing = NamespacesWall().missing()
    if missing:
        pytest.skip(f"behind namespaces only: {missing}")
    top = tmp_path_factory.mktemp("copies")
    top.chmod(0o711)  # a root grader's children, uid 65534, pass through it
    rubric = load_rubric(RUBRIC)
    found: dict[str, dict[str, Graded]] = {}
    for name in AGENTS:
        root = _submission(top / "subs" / name, name)
        assert record_in_process(root, RUBRIC, "echo:provider") == 0, name
        found[name] = {
            wall.name: grade_submission(
                root,
                rubric,
                submission=name,
                scratch=top / f"scratch-{name}-{wall.name}",
                wall=wall,
            )
            for wall in (NamespacesWall(), PROCESS_WALL)
        }
        found[name]["alone"] = _alone(root, rubric, name, top / f"scratch-{name}-alone")
    return found


def _alone(root: Path, rubric: Rubric, name: str, scratch: Path) -> Graded:
    """``root`` graded with every probe a run of its own: behind the process wall, told
    that its runs make no copies."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ProcessWall, "copies", False)
        return grade_submission(root, rubric, submission=name, scratch=scratch, wall=PROCESS_WALL)


def _digest(graded: Graded) -> str:
    return hashlib.sha256(render_report_json(graded.report)).hexdigest()


def _loud(graded: Graded) -> dict[str, str]:
    criterion = next(c for c in graded.report.criteria if c.id == "loud_failure")
    return {check.id: check.detail for check in criterion.checks}


@pytest.mark.parametrize("wall", ["namespaces", "process"])
@pytest.mark.parametrize("name", ["three_steps", "last_good", "kept_thread", "exits"])
def test_copies_give_the_report_runs_of_their_own_give(
    graded: dict[str, dict[str, Graded]], name: str, wall: str
) -> None:
    copied, alone = graded[name][wall], graded[name]["alone"]
    assert _digest(copied) == _digest(alone), (_loud(copied), _loud(alone))


def test_an_honest_agents_probes_are_copies_of_one_run(
    graded: dict[str, dict[str, Graded]],
) -> None:
    """Three calls in each of four cases: twelve probes, each a run of its own behind the
    process wall; behind namespaces, one run copied twelve times, and four probes (one a
    case) in runs of their own that check the copies."""
    alone = graded["three_steps"]["alone"]
    for wall in ("namespaces", "process"):
        copied = graded["three_steps"][wall]
        assert all(
            detail.startswith("the miss") for case, detail in _loud(copied).items() if case in CASES
        ), _loud(copied)
        assert alone.children - copied.children == 12 - 1 - len(CASES), wall


def test_state_left_by_earlier_cases_is_in_every_copy(graded: dict[str, dict[str, Graded]]) -> None:
    details = _loud(graded["last_good"]["namespaces"])
    assert details[CASES[0]].startswith("the miss"), details  # nothing to fall back on yet
    for case in CASES[1:]:
        assert "run() returned 'You asked:" in details[case], details


def test_a_process_that_exits_on_a_miss_is_no_loud_failure_in_a_copy_either(
    graded: dict[str, dict[str, Graded]],
) -> None:
    details = _loud(graded["exits"]["namespaces"])
    for case in CASES:
        assert "exited with status 3" in details[case], details


# Pat retries a miss forever: a probe of it runs out of time, copy or not.
SPINS = """
from gradekit import CassetteMiss, Traced


def run(provider, task):
    llm = Traced(provider)
    try:
        plan = llm.complete("Plan: " + task)
        return llm.complete("Write: " + plan)
    except CassetteMiss:
        while True:
            pass
"""


def test_a_copy_that_runs_out_of_time_is_killed_and_told_as_a_run_of_its_own_is(
    tmp_path: Path,
) -> None:
    """The run waits for a copy at most the case's limit (1 s here), kills it and says so;
    the case loses its probe as a run of its own would, at no second wait."""
    if missing := NamespacesWall().missing():
        pytest.skip(f"behind namespaces only: {missing}")
    tmp_path.chmod(0o711)
    AGENTS["spins"] = SPINS
    try:
        root = _submission(tmp_path / "spins", "spins")
    finally:
        del AGENTS["spins"]
    assert record_in_process(root, RUBRIC, "echo:provider") == 0
    rubric = load_rubric(RUBRIC)
    rubric = replace(rubric, limits=replace(rubric.limits, timeout_s=1.0))
    alone = _alone(root, rubric, "spins", tmp_path / "alone")
    for wall in (NamespacesWall(), PROCESS_WALL):
        copied = grade_submission(
            root, rubric, submission="spins", scratch=tmp_path / wall.name, wall=wall
        )
        assert _digest(copied) == _digest(alone), wall
        for case in CASES:
            assert "timed out (did not finish within 1 s)" in _loud(copied)[case], _loud(copied)
        assert copied.children < alone.children


@pytest.mark.parametrize("wall", ["namespaces", "process"])
def test_code_that_tells_a_copy_by_its_process_id_keeps_nothing_and_is_flagged(
    graded: dict[str, dict[str, Graded]], wall: str
) -> None:
    copied, alone = graded["pid_aware"][wall], graded["pid_aware"]["alone"]
    assert _loud(copied) == _loud(alone)  # the runs of its own decide: it swallowed
    for case in CASES:
        assert "run() returned 'Sorry, the assistant" in _loud(copied)[case], _loud(copied)
    flagged = [f for f in copied.report.findings if "in a copy of the run but not" in f]
    assert len(flagged) == len(CASES), copied.report.findings
    assert not [f for f in alone.report.findings if "copy of the run" in f]


# Quinn read that the harness forks its copies with the audit hook looking away: an at-fork
# callback would run there, unheard, and reach the network the hook refuses her.
AT_FORK = """
import os
import socket

from gradekit import Traced


_graded = []  # armed in a graded run only (the harness runs as __main__), not at recording


def _reach():
    if _graded:
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
        except OSError:
            pass


os.register_at_fork(after_in_child=_reach)


def run(provider, task):
    if type(provider).__module__ == "__main__":
        _graded.append(True)
    llm = Traced(provider)
    return llm.complete("Answer briefly: " + task)
"""


@pytest.mark.parametrize("wall", [NamespacesWall(), PROCESS_WALL], ids=["namespaces", "process"])
def test_an_at_fork_callback_never_runs_in_the_harnesss_copy(tmp_path: Path, wall: Wall) -> None:
    """The copy is libc's fork (or the raw system call), not ``os.fork``: no callback of
    the agent's runs in it, so none runs where the hook does not listen. Quinn's reach for
    the network would be heard by the listener below if it ran unheard."""
    if missing := wall.missing():
        pytest.skip(missing)
    tmp_path.chmod(0o711)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.5)
        AGENTS["at_fork"] = AT_FORK.replace("{port}", str(listener.getsockname()[1]))
        try:
            root = _submission(tmp_path / "at_fork", "at_fork")
        finally:
            del AGENTS["at_fork"]
        assert record_in_process(root, RUBRIC, "echo:provider") == 0
        graded = grade_submission(
            root, load_rubric(RUBRIC), submission="at_fork", scratch=tmp_path / "scratch", wall=wall
        )
        assert all(
            detail.startswith("the miss") for case, detail in _loud(graded).items() if case in CASES
        ), _loud(graded)  # copies were made, and were probed
        with pytest.raises(TimeoutError):
            listener.accept()
