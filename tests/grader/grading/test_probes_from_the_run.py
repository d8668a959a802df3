"""Probes taken from the run itself: a withheld answer meets the agent where its real run
stood, reads as any other miss, and a call already on its way when it came is no step after.

Each agent here is written from scratch in its own student's style (a memo that outlives a
case, a thread pool, code that looks for the grader's probe), recorded once with the kit's
recorder against a deterministic provider and graded in one batch; the tests read the
loud-failure criterion of each report. The sandbox-level tests at the end pin the two
facts the verdicts rest on: the withheld miss is the missing recording's miss, word for
word, and no run can read the recordings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gradekit import Entry, prompt_key
from grader import Withhold
from grader.rubric import load_rubric
from grader.sandbox import PROCESS_WALL, LaidOut, RunPlan, Sandbox, Serving
from tests.submissions import (
    CASES,
    REFERENCE,
    echo_provider,
    gradekit_in_process,
    record_in_process,
)

pytestmark = pytest.mark.slow
LIMITS = load_rubric(REFERENCE / "rubric" / "bootcamp.toml").limits

MANIFEST = """\
[project]
name = "{name}"
version = "0.1.0"

[tool.gradekit]
agent = "lab.agent:run"
replay = "{replay}"
"""
# The provider every agent here is recorded with: its answer quotes the question's head.
ECHO = echo_provider("You asked: ", 48)

# Dana keeps the last good answer "in case the model is down": a miss in a later case gets
# an earlier case's answer. The first case has nothing to fall back on and raises.
LAST_GOOD = """
from gradekit import CassetteMiss, Traced

_last_good = None


def run(provider, task):
    global _last_good
    llm = Traced(provider)
    try:
        outline = llm.complete("Outline an answer to: " + task)
        reply = llm.complete("Write the reply from this outline:\\n" + outline)
    except CassetteMiss:
        if _last_good is None:
            raise
        return _last_good
    _last_good = reply
    return reply
"""

# Eli memoises every prompt for the whole process; a miss is never stored and always raised.
MEMO = """
from gradekit import Traced

MEMO = {}


def ask(llm, prompt):
    if prompt not in MEMO:
        MEMO[prompt] = llm.complete(prompt)
    return MEMO[prompt]


def run(provider, task):
    llm = Traced(provider)
    first = ask(llm, "Outline an answer to: " + task)
    return ask(llm, "Write the reply from this outline:\\n" + first)
"""

# Fay drafts two answers at once from a thread pool, then asks which is better.
THREADS = """
from concurrent.futures import ThreadPoolExecutor

from gradekit import Traced


def run(provider, task):
    llm = Traced(provider)
    styles = ("formal", "friendly")
    with ThreadPoolExecutor(max_workers=2) as pool:
        drafts = [pool.submit(llm.complete, f"Draft a {style} reply to: {task}")
                  for style in styles]
        texts = [draft.result() for draft in drafts]
    return llm.complete("Pick the better draft:\\n1. " + texts[0] + "\\n2. " + texts[1])
"""

# Gus re-raises only what he recognises as the grader checking him: a key his own cassette
# holds, or a message that says it was withheld. Every other miss gets an apology.
PROBE_AWARE = """
import json
import pathlib

from gradekit import CassetteMiss, Traced

SORRY = "Sorry, the assistant is unavailable right now."


def _recorded(case):
    path = pathlib.Path("cassettes") / (case + ".json")
    try:
        return set(json.loads(path.read_text("utf-8"))["entries"])
    except (OSError, ValueError, KeyError):
        return set()


def run(provider, task):
    llm = Traced(provider)
    try:
        return llm.complete("Answer briefly: " + task)
    except CassetteMiss as miss:
        text = str(miss).lower()
        if "withheld" in text or "on purpose" in text or "probe" in text:
            raise
        if getattr(miss, "key", None) in _recorded(getattr(miss, "cassette", "")):
            raise
        return SORRY
"""

# Gus's Replay: it raises only on the grader's probe cassette, as he guessed it is named.
PROBE_REPLAY = """
from gradekit import CassetteMiss, Replay as _Replay


class Replay(_Replay):
    def complete(self, prompt):
        try:
            return super().complete(prompt)
        except CassetteMiss:
            if self._cassette.case == "probe" or "probe" in str(self._file):
                raise
            return ""
"""

# Ivy traces by hand, and forgot the second call.
ONE_UNTRACED = """
import json
import os
import time


def _log(key, label, started, ok, error=None):
    record = {"key": key, "provider": label, "ok": ok,
              "latency_ms": round((time.perf_counter() - started) * 1000, 3)}
    if error:
        record["error"] = error
    if "GRADEKIT_TRACE" in os.environ:  # recording live: nowhere to write
        with open(os.environ["GRADEKIT_TRACE"], "a", encoding="utf-8") as trace:
            trace.write(json.dumps(record) + "\\n")


def _key(prompt):
    import hashlib
    return hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()[:16]


def run(provider, task):
    first = "Outline an answer to: " + task
    started = time.perf_counter()
    try:
        outline = provider.complete(first)
    except Exception as miss:
        _log(_key(first), provider.name, started, False, type(miss).__name__)
        raise
    _log(_key(first), provider.name, started, True)
    return provider.complete("Write the reply from this outline:\\n" + outline)
"""

# Jo's agent reads its API key the way the SDKs do, and the sandbox gives it none.
NEEDS_A_KEY = """
import os

from gradekit import Traced


class SetupError(Exception):
    pass


def run(provider, task):
    llm = Traced(provider)
    answer = llm.complete("Answer briefly: " + task)
    try:
        os.environ["OPENAI_API_KEY"]
    except KeyError as missing:
        raise SetupError("api_key must be set: export OPENAI_API_KEY") from missing
    return answer
"""

# Kai recorded with one prompt, then reworded it and did not record again.
REWORDED = MEMO.replace("Outline an answer to: ", "Sketch an answer to: ")

AGENTS: dict[str, tuple[str, str]] = {  # name -> (lab/agent.py, the manifest's replay)
    "last_good": (LAST_GOOD, "gradekit:Replay"),
    "memo": (MEMO, "gradekit:Replay"),
    "threads": (THREADS, "gradekit:Replay"),
    "probe_aware": (PROBE_AWARE, "lab.replay:Replay"),
    "one_untraced": (ONE_UNTRACED, "gradekit:Replay"),
    "needs_a_key": (NEEDS_A_KEY, "gradekit:Replay"),
    "reworded": (MEMO, "gradekit:Replay"),  # recorded so, then reworded (REWORDED)
}


def _submission(root: Path, name: str) -> Path:
    agent, replay = AGENTS[name]
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(agent.lstrip(), "utf-8")
    (root / "lab" / "replay.py").write_text(PROBE_REPLAY.lstrip(), "utf-8")
    (root / "echo.py").write_text(ECHO, "utf-8")
    (root / "pyproject.toml").write_text(MANIFEST.format(name=name, replay=replay), "utf-8")
    (root / "FAILURES.md").write_bytes((REFERENCE / "FAILURES.md").read_bytes())
    return root


RUBRIC = REFERENCE / "rubric" / "bootcamp.toml"


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The submissions, and each one's report, from one batch graded behind the process
    guard."""
    top = tmp_path_factory.mktemp("probes")
    subs, out = top / "subs", top / "grades"
    for name in AGENTS:
        root = _submission(subs / name, name)
        os.environ["OPENAI_API_KEY"] = "sk-jo-at-home"  # Jo has one where Jo records
        try:
            assert record_in_process(root, RUBRIC, "echo:provider") == 0, name
        finally:
            del os.environ["OPENAI_API_KEY"]
    (subs / "reworded" / "lab" / "agent.py").write_text(REWORDED.lstrip(), "utf-8")
    assert (
        gradekit_in_process(
            "grade",
            str(subs),
            "--out",
            str(out),
            "--rubric",
            str(RUBRIC),
            "--wall",
            "process",
            "--jobs",
            "2",
            "--quiet",
        )
        == 0
    )
    return subs, {name: json.loads((out / name / "report.json").read_bytes()) for name in AGENTS}


@pytest.fixture(scope="module")
def loud(graded: tuple[Path, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each agent's loud-failure criterion."""
    return {name: _criterion(report, "loud_failure") for name, report in graded[1].items()}


def _criterion(report: dict[str, Any], criterion: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in report["criteria"] if c["id"] == criterion)
    return found


def _details(criterion: dict[str, Any]) -> dict[str, str]:
    return {check["id"]: check["detail"] for check in criterion["checks"]}


def test_a_memo_of_an_earlier_case_answering_a_miss_loses_every_later_case(
    loud: dict[str, dict[str, Any]],
) -> None:
    details = _details(loud["last_good"])
    assert details[CASES[0]].startswith("the miss"), details  # nothing to fall back on yet
    for case in CASES[1:]:
        assert "run() returned 'You asked:" in details[case], details
        assert "after the miss: a miss must raise" in details[case]


def test_a_memo_that_never_hides_a_miss_keeps_every_case(loud: dict[str, dict[str, Any]]) -> None:
    assert all(
        detail.startswith("the miss")
        for case, detail in _details(loud["memo"]).items()
        if case in CASES
    ), loud["memo"]
    assert loud["memo"]["points"] == loud["memo"]["max"]


def test_two_drafts_sent_at_once_are_not_going_on_after_the_miss(
    loud: dict[str, dict[str, Any]],
) -> None:
    """The second draft is already on its way when the first one's miss comes back: the
    agent re-raises at ``result()``, and that is as loud as a one-call agent."""
    assert loud["threads"]["points"] == loud["threads"]["max"], loud["threads"]


def test_an_agent_that_looks_for_the_probe_cannot_tell_it_from_a_real_miss(
    loud: dict[str, dict[str, Any]],
) -> None:
    details = _details(loud["probe_aware"])
    for case in CASES:
        assert "run() returned 'Sorry, the assistant" in details[case], details
    assert (
        details["own_replay"] == "your Replay answered an unrecorded prompt instead of raising"
    ), details


# -- a case that stops at its first miss, and a call that was not traced ---------------------


def test_the_untraced_call_is_named_by_case_position_key_and_head(
    graded: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    tracing = _criterion(graded[1]["one_untraced"], "tracing")
    assert tracing["points"] != tracing["max"]
    first = tracing["advice"][0]
    assert first.startswith(f"{CASES[0]}: provider call 2 (key ")
    assert "'Write the reply from this outline: You asked: Outline an an…')" in first
    assert "trace it as the case's other calls are traced" in first
    assert "Wrap the provider in Traced" not in " ".join(tracing["advice"])


def test_what_run_raised_is_shown_with_its_message_and_its_cause(
    graded: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    stability = _criterion(graded[1]["needs_a_key"], "contract_stability")
    assert stability["advice"][0] == (
        f"{CASES[0]}: run() must return a str: it raised SetupError: api_key must be set: "
        "export OPENAI_API_KEY, raised from builtins.KeyError"
    )


def test_a_reworded_prompt_gets_the_one_command_its_miss_printed_and_its_leftovers_named(
    graded: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    report = graded[1]["reworded"]
    advice = _criterion(report, "contract_stability")["advice"]
    for case, said in zip(CASES, advice, strict=True):
        assert said.startswith(
            f"{case}: record case {case} again: `make record ARGS='--case "
            f"{case}'`; the prompt asked first differs"
        ), said
        assert "--rerecord" not in said
    assert not any(
        "holds" in finding and "no run asked" in finding for finding in report["findings"]
    )  # its runs missed: nothing to say yet


def test_recordings_no_run_asks_are_reported_once_the_case_runs(tmp_path: Path) -> None:
    """Kai records the reworded prompt as told (plain ``record``, which asks only what is
    missing): the cases run again, and the outline his agent no longer asks is named."""
    root = _submission(tmp_path / "kai", "memo")
    assert record_in_process(root, RUBRIC, "echo:provider") == 0
    (root / "lab" / "agent.py").write_text(REWORDED.lstrip(), "utf-8")
    assert record_in_process(root, RUBRIC, "echo:provider") == 0
    out = tmp_path / "grades"
    assert (
        gradekit_in_process(
            "grade",
            str(root),
            "--out",
            str(out),
            "--rubric",
            str(RUBRIC),
            "--wall",
            "process",
            "--quiet",
        )
        == 0
    )
    report = json.loads((out / "kai" / "report.json").read_bytes())
    assert (
        report["total"] == "100.00" or _criterion(report, "contract_stability")["points"] == "30.00"
    )
    left = [f for f in report["findings"] if "no run asked" in f]
    assert [f.partition(" holds")[0] for f in left] == [f"cassettes/{case}.json" for case in CASES]
    # The outline and the reply it led to: both prompts changed with the rewording.
    assert all("holds 2 recording(s)" in f and "--rerecord" in f for f in left), left


# -- the facts the verdicts rest on ---------------------------------------------------------

# Hana's agent reports what a miss looks like, and which recordings it can see.
LOOK = """
import os

from gradekit import CassetteMiss


def run(provider, task):
    seen = sorted(os.listdir("cassettes")) if os.path.isdir("cassettes") else []
    try:
        provider.complete("What is a cassette?")
    except CassetteMiss as miss:
        return f"{type(miss).__module__}.{type(miss).__qualname__}|{miss}|{seen}"
    return f"served|{seen}"
"""


def test_a_withheld_answer_reads_as_the_missing_recording_and_no_run_sees_the_files(
    tmp_path: Path,
) -> None:
    root = _submission(tmp_path / "hana", "memo")
    (root / "lab" / "agent.py").write_text(LOOK, "utf-8")
    (root / "cassettes").mkdir()
    (root / "cassettes" / f"{CASES[0]}.json").write_text("{}", "utf-8")
    asked = "What is a cassette?"
    held = {CASES[0]: {prompt_key(asked): Entry(asked, "A recorded answer.")}}
    served = Serving(answer=lambda case, prompt: "A recorded answer.", recorded=held)
    unrecorded = Serving(answer=lambda case, prompt: None, recorded={CASES[0]: {}})
    withheld = RunPlan("openai:gpt-4o-mini", 1, served, withhold=Withhold("provider", 1, CASES[0]))
    answers = []
    for n, plan in enumerate(
        (
            withheld,
            RunPlan("openai:gpt-4o-mini", 1, unrecorded),
            RunPlan("openai:gpt-4o-mini", 1, served),
        )
    ):
        sandbox = Sandbox(
            root,
            tmp_path / f"scratch-{n}",
            LIMITS,
            PROCESS_WALL,
            LaidOut(hidden=(f"cassettes/{CASES[0]}.json",)),
        )
        try:
            result = sandbox.run("lab.agent:run", [(CASES[0], "a task")], plan)
        finally:
            sandbox.close()
        answers.append(result.outcomes[CASES[0]].answer)
    assert answers[0] == answers[1]
    assert answers[0] is not None and "|[]" in answers[0] and "CassetteMiss" in answers[0]
    assert f"no recording for this prompt in cassettes/{CASES[0]}.json" in answers[0]
    assert answers[2] == "served|[]"  # the folder is there, its recording is not
    assert (root / "cassettes" / f"{CASES[0]}.json").exists()  # the original is untouched


def test_checkpoint_three_fails_while_a_case_misses(
    graded: tuple[Path, dict[str, dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Two gradings that miss alike agree on a digest: that is no pass. The reworded
    agent's every case misses, and checkpoint 3 says so, with the one command to run."""
    root = graded[0] / "reworded"
    assert (
        gradekit_in_process("check", str(root), "--rubric", str(RUBRIC), "--wall", "process") == 1
    )
    shown = capsys.readouterr().out
    third = next(line for line in shown.splitlines() if "3. Two providers" in line)
    assert third.startswith("FAIL  3.")
    assert f"case {CASES[0]}: asked 1 prompt(s) the cassette does not hold" in third, third
    # Its folder has no Makefile: the command is gradekit's own.
    assert f"`gradekit record --case {CASES[0]}`" in third


# Ivo's agent goes looking for the recordings where the grader keeps the submission.
SNOOP = """
def run(provider, task):
    found = []
    for path in ({original!r}, "cassettes/{case}.json"):
        try:
            with open(path, "rb") as recording:
                found.append(len(recording.read()))
        except OSError as error:
            found.append(type(error).__name__)
    return repr(found)
"""


def test_behind_namespaces_no_path_reaches_the_recordings(tmp_path: Path) -> None:
    """Neither the copy nor the original's own path: behind namespaces the run sees only
    what is bound, and the recordings are not (behind the guard alone the original stays
    as readable as the host makes it: docs/sandbox.md, "What gets through")."""
    from grader.sandbox import NamespacesWall
    from tests.conftest import require_namespaces

    require_namespaces()
    root = _submission(tmp_path / "ivo", "memo")
    original = root / "cassettes" / f"{CASES[0]}.json"
    original.parent.mkdir()
    original.write_text("{}", "utf-8")
    (root / "lab" / "agent.py").write_text(
        SNOOP.format(original=str(original), case=CASES[0]), "utf-8"
    )
    sandbox = Sandbox(
        root,
        tmp_path / "scratch",
        LIMITS,
        NamespacesWall(),
        LaidOut(hidden=(f"cassettes/{CASES[0]}.json",)),
    )
    try:
        result = sandbox.run(
            "lab.agent:run",
            [(CASES[0], "a task")],
            RunPlan("openai:gpt-4o-mini", 1, Serving(lambda c, p: None)),
        )
    finally:
        sandbox.close()
    assert result.outcomes[CASES[0]].answer == "['FileNotFoundError', 'FileNotFoundError']"
