"""Every command a message prints runs as printed, where it is printed: the lab's root.

A bare ``gradekit ...`` is on no PATH outside the lab's virtual environment, so messages
print ``make record ARGS='...'`` (the Makefile's targets pass ARGS on) or
``.venv/bin/gradekit ...``, from one registry, ``gradekit._commands.COMMANDS``. Here:

- no string in gradekit/ or grader/ spells a command by hand (an AST scan);
- the quoting survives the shell and make: any value comes back to gradekit as one
  argument, through the kit's real Makefile;
- every registered command, filled in, runs with ``bash -c`` exactly as printed in a
  copy of the kit whose ``.venv/bin/gradekit`` runs this checkout's grader (and whose
  Makefile stamps are fresh, so make installs nothing): never 127, never an argparse usage
  error, and it exits as documented (the README's exit codes: 0, or 1 / 2 with the
  message named here).

It tests ``gradekit._commands`` on purpose: the registry every printed command comes from.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gradekit._commands import COMMANDS, VENV_GRADEKIT, Command, configured, from_here, shown
from gradekit.internal import recording_settings
from tests.loopback import Loopback
from tests.submissions import REFERENCE, as_installed, copy_from_reference

# What the kit copy holds: enough to record, grade and build from.
KIT = (
    "lab",
    "gradekit",
    "grader",
    "cassettes",
    "cassettes-llm",
    "fixtures",
    "incidents",
    "rubric",
    "FAILURES.md",
    "DATASET_CHANGES.md",
    "pyproject.toml",
    "Makefile",
)

# A command spelt by hand: in backticks, a whole string that is one, or "run gradekit ...".
BY_HAND = re.compile(
    r"`gradekit |^gradekit (?:record|run|replay|key|cassette|grade|check|"
    r"report|gradebook|history|ledger|gradescope|starter|incident|review|"
    r"regression|dashboard|case|investigate|disposition|approve)\b|"
    r"\brun gradekit "
)
# Names the program that wrote a file, in that file's header: nothing to run.
MENTIONS = ("Written by `gradekit gradescope build`",)


# -- no command by hand ---------------------------------------------------------------------


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """Every string constant of ``path`` (f-strings' literal parts too), docstrings aside."""
    tree = ast.parse(path.read_text("utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            yield node.lineno, node.value


def test_no_message_spells_a_command_by_hand() -> None:
    found = []
    files = [p for top in ("gradekit", "grader") for p in sorted((REFERENCE / top).rglob("*.py"))]
    assert len(files) > 100
    for path in files:
        relative = path.relative_to(REFERENCE).as_posix()
        if relative == "gradekit/_commands.py":
            continue
        for line, value in _strings(path):
            text = value
            for mention in MENTIONS:
                text = text.replace(mention, "")
            if BY_HAND.search(text):
                found.append(f"{relative}:{line}: {value[:80]!r}")
    assert found == [], "print it with gradekit._commands instead:\n" + "\n".join(found)


def test_the_scan_finds_a_command_by_hand(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        '"""Run `gradekit record`: a docstring may."""\n'
        'A = f"record it with `gradekit record --case {1}` first"\n'
        'B = "gradekit grade"\nC = "run gradekit grade again"\n'
        'D = "not a gradekit gradebook"\n',
        "utf-8",
    )
    assert sorted(line for line, text in _strings(source) if BY_HAND.search(text)) == [2, 3, 4]


# -- how a command is printed ----------------------------------------------------------------


def test_a_make_target_gets_args_and_any_other_the_venvs_gradekit() -> None:
    assert shown("record") == "make record"
    assert shown("record", "--case", "refund-policy") == "make record ARGS='--case refund-policy'"
    assert (
        shown("record", "--rerecord", "--reason", "the model changed")
        == "make record ARGS='--rerecord --reason \"the model changed\"'"
    )
    assert (
        shown("history", "alice", "--out", "my grades")
        == ".venv/bin/gradekit history alice --out 'my grades'"
    )
    # a value make or the recipe's shell would read: the always-exact form instead
    assert (
        shown("record", "--reason", "it's $HOME")
        == ".venv/bin/gradekit record --reason 'it'\"'\"'s $HOME'"
    )


def test_a_command_names_its_fields_and_wants_each() -> None:
    command = Command("x", ("record", "--case", "{case}", "--reason", "{reason}"))
    assert command.fields == ("case", "reason")
    with pytest.raises(TypeError, match="missing \\['reason'\\]"):
        command(case="a")
    with pytest.raises(TypeError, match="unknown \\['other'\\]"):
        command(case="a", reason="b", other="c")


@pytest.fixture(scope="module")
def echo_kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kit's Makefile beside a ``.venv/bin/gradekit`` that prints its arguments."""
    root = tmp_path_factory.mktemp("echo")
    shutil.copy2(REFERENCE / "pyproject.toml", root / "pyproject.toml")
    as_installed(root)
    (root / VENV_GRADEKIT).write_text(
        f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n", "utf-8"
    )
    return root


VALUES = st.text(
    st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_characters="\x7f"), max_size=12
)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(("record", "grade", "check", "dashboard", "history")),
    st.lists(VALUES, max_size=3),
)
@example("record", ["--reason", 'say "why"'])
@example("grade", ["it's", "$HOME", "a#b", "back\\slash", "`id`", "!x"])
@example("record", ["", " ", "%", "*", "a=b"])
def test_each_value_reaches_gradekit_as_one_argument(
    echo_kit: Path, sub: str, values: list[str]
) -> None:
    argv = [sub, *values]
    line = shown(*argv)
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=echo_kit,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (line, done.stderr)
    assert json.loads(done.stdout.splitlines()[-1]) == argv, line


# -- every registered command runs as printed ------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A registered command filled in for the kit copy, and how it must end."""

    values: Mapping[str, str]
    code: int = 0
    says: str = ""  # what its output must hold (with a non-zero code: the error it names)


# In order: a later command uses what an earlier one wrote (grades-x/, the review); the
# kit is graded before anything re-records its cassettes.
RUNS: dict[str, Run] = {
    "grade-lab": Run({}, says="kit: 100.00 / 100.00"),
    "check": Run({}, says="grade now: 100.00 / 100.00"),
    "grade-into": Run({"submissions": ".", "out": "grades-x"}, says="kit: 100.00 / 100.00"),
    "grade-replace": Run({"submissions": ".", "out": "grades-x"}, says="kit: 100.00 / 100.00"),
    "ledger-verify": Run({"grades": "grades-x"}, says="the chain holds"),
    "report-verify": Run({"path": "grades-x/kit/report.json"}, says="matches the content"),
    "review": Run(
        {
            "student": "kit",
            "criterion": "written_summary",
            "by": "kim",
            "reason": "read it",
            "out": "grades-x",
        },
        says="confirmed by kim",
    ),
    "history": Run({"student": "kit", "out": "grades-x"}, says="confirmed by kim"),
    "reviews-export": Run(
        {"out": "grades-x", "criterion": "stretch_goal", "sheet": "sheet.csv"},
        says="wrote sheet.csv: 1 row of 1 report (1 pending",
    ),
    "reviews-import": Run(
        {"sheet": "sheet.csv", "by": "kim", "out": "grades-x"},
        says="nothing to record: no new decision in sheet.csv",
    ),
    "gradebook-merge": Run(
        {"first": "grades-x/gradebook.csv", "second": "part2.csv", "out": "merged.csv"},
        says="merged 2 gradebooks",
    ),
    # The kit holds no asset ledger: no candidate to publish, no case to revise or approve.
    "regression-promote": Run(
        {"name": "refunds", "candidate": "cand-1", "by": "kim"},
        code=2,
        says="UsageError: no candidate 'cand-1' (the ledger's: none yet)",
    ),
    "case-revise": Run(
        {"case": "case-1", "by": "kim", "reason": "clearer"},
        code=2,
        says="UsageError: no case 'case-1' in the asset ledger",
    ),
    "approve": Run(
        {"candidate": "cand-1", "by": "kim", "reason": "keep it"},
        code=2,
        says="UsageError: no candidate 'cand-1'",
    ),
    # The kit ships no regression set: both say so (a usage error, a failed verification).
    "regression-show": Run(
        {"name": "refunds"}, code=2, says="UsageError: no regression set refunds"
    ),
    "regression-verify": Run(
        {"name": "refunds", "sets": "rubric/regression"},
        code=1,
        says="FAIL rubric/regression/refunds: no such regression set",
    ),
    "regression-public": Run(
        {"name": "refunds", "sets": "rubric/regression"},
        code=2,
        says="UsageError: no regression set refunds",
    ),
    "gradescope-build": Run({"out": "autograder"}, says="wrote the Gradescope autograder"),
    "gradescope-try": Run(
        {"submission": ".", "autograder": "autograder"}, says="results.json: 100.00 points"
    ),
    "incident-show": Run({"path": "incidents/refund-outside-window.jsonl"}, says="#0"),
    "incident-record": Run(
        {
            "agent": "lab.agent:run",
            "tools": "lab.tools:TOOLS",
            "case": "refund-policy",
            "out": "incidents/new.jsonl",
        },
        says="incidents/new.jsonl",
    ),
    "record": Run({}, says="done: "),
    "record-case": Run({"case": "refund-policy"}, says="done: "),
    "record-second": Run({"provider": "llamacpp", "folder": "cassettes-llm"}, says="done: "),
    "rerecord-case": Run({"case": "sql-explain", "reason": "the model changed"}, says="done: "),
    "rerecord": Run({"reason": "the model changed"}, says="done: "),
}


def test_every_registered_command_has_a_run_here() -> None:
    assert list(RUNS) and set(RUNS) == set(COMMANDS)
    for name, run in RUNS.items():
        assert set(run.values) == set(COMMANDS[name].fields), name


def _env(**extra: str) -> dict[str, str]:
    """A student's shell: no kit settings, and not inside make (`make test` runs this test,
    and a make inside it would add "Entering directory" lines and the outer flags)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GRADEKIT_", "PYTHON", "MAKE", "MFLAGS"))
    }
    return {**env, **extra}


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the kit whose ``.venv/bin/gradekit`` runs this checkout's interpreter on the
    copy's own grader, as an installed kit runs it."""
    # the folder's name is the submission's and the student's
    return as_installed(copy_from_reference(tmp_path_factory.mktemp("copy") / "kit", KIT))


@pytest.mark.slow
def test_every_registered_command_runs_as_printed(kit: Path) -> None:
    """Grades the kit twice (``make grade`` and into grades-x/), so it is slow."""
    ran = []
    with Loopback() as server:  # the live provider a (re-)recording asks
        env = _env(GRADEKIT_PROVIDER="llamacpp", GRADEKIT_BASE_URL=server.openai_url)
        for name, run in RUNS.items():
            if name == "gradebook-merge":  # a second shard's gradebook, another student's
                book = (kit / "grades-x" / "gradebook.csv").read_text("utf-8")
                (kit / "part2.csv").write_text(book.replace("\nkit,kit,", "\nkat,kat,"), "utf-8")
            line = COMMANDS[name](**run.values)
            assert line.startswith(("make ", f"{VENV_GRADEKIT} ")), line
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=kit,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            said = done.stdout + done.stderr
            assert done.returncode != 127 and "command not found" not in said, (line, said)
            assert not re.search(r"^usage: gradekit", said, re.M), (line, said)  # argparse's
            assert "No rule to make target" not in said, (line, said)
            assert "pip install" not in said, (line, said)  # the stamps held: nothing installed
            assert (done.returncode, run.says in said) == (run.code, True), (line, said[-2000:])
            ran.append(name)
    assert ran == list(RUNS)


@pytest.mark.slow
def test_the_fix_check_prints_first_after_a_prompt_edit_runs_as_printed(tmp_path: Path) -> None:
    """A prompt edited in every case: ``make check`` names one recording run first, with the
    provider the cassettes were recorded with (the student's shell names none), and that
    command, run as printed, makes every case replay again."""
    lab = as_installed(copy_from_reference(tmp_path / "lab", KIT))
    agent = lab / "lab" / "agent.py"
    old = "You are a teaching assistant in an agent-engineering bootcamp."
    assert old in agent.read_text("utf-8")
    agent.write_text(
        agent.read_text("utf-8").replace(
            old, "You are a patient teaching assistant in an agent-engineering bootcamp."
        ),
        "utf-8",
    )
    with Loopback() as server:  # the keyless model, where GRADEKIT_BASE_URL points
        env = _env(GRADEKIT_BASE_URL=server.openai_url)
        before = subprocess.run(
            ["bash", "-c", COMMANDS["check"]()],
            cwd=lab,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert before.returncode != 0, before.stdout + before.stderr  # make says 2
        first = re.search(
            r"^  fix first: `([^`]+)` records every prompt the cassettes lack",
            before.stdout,
            re.MULTILINE,
        )
        assert first, before.stdout
        assert first.group(1) == "GRADEKIT_PROVIDER=llamacpp make record"
        assert "(cases refund-policy, incident-summary, sql-explain, flaky-grade)" in before.stdout
        fixed = subprocess.run(
            ["bash", "-c", first.group(1)],
            cwd=lab,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        after = subprocess.run(
            ["bash", "-c", COMMANDS["check"]()],
            cwd=lab,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert "fix first" not in after.stdout, after.stdout
    assert "of Contract stability" not in after.stdout, after.stdout


def test_the_provider_a_recording_names_is_told_as_the_settings_that_record_it() -> None:
    llamacpp = {"GRADEKIT_PROVIDER": "llamacpp"}
    assert recording_settings(["openai-compatible:smollm2"] * 2) == llamacpp
    assert recording_settings(["anthropic:claude-3-5-haiku-latest"]) == {
        "GRADEKIT_PROVIDER": "anthropic",
        "GRADEKIT_MODEL": "claude-3-5-haiku-latest",
    }
    # OpenAI's own, Ollama's or a server of the student's: the name holds no base URL
    assert recording_settings(["openai-compatible:gpt-4o-mini"]) is None
    assert recording_settings(["anthropic:m", "openai-compatible:smollm2", "anthropic:m"]) == {
        "GRADEKIT_PROVIDER": "anthropic",
        "GRADEKIT_MODEL": "m",
    }  # what most answers name
    assert recording_settings(["openai-compatible:smollm2", "anthropic:m"]) == {
        "GRADEKIT_PROVIDER": "anthropic",
        "GRADEKIT_MODEL": "m",
    }  # a tie: the first by name
    assert recording_settings([]) is None and recording_settings([""]) is None
    assert (
        configured("make record", {"GRADEKIT_MODEL": "my model"})
        == "GRADEKIT_MODEL='my model' make record"
    )
    assert configured("make record", {}) == "make record"


# -- from where the user stands ---------------------------------------------------------------


def test_a_command_printed_away_from_the_lab_names_the_gradekit_that_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = Path(sys.executable).with_name("gradekit")
    line = COMMANDS["ledger-verify"](form="make", grades="no-such-grades")
    assert line.startswith(VENV_GRADEKIT + " ")
    if (REFERENCE / VENV_GRADEKIT).resolve() == running.resolve():
        assert from_here(line, cwd=REFERENCE) == line  # the lab's own: as printed
    elsewhere = from_here(line, cwd=tmp_path)
    assert elsewhere == f"{shlex.quote(str(running.absolute()))} ledger verify no-such-grades"
    assert from_here(line, cwd=running.parent) == "./gradekit ledger verify no-such-grades"
    assert from_here(line, cwd=running.parent.parent) == "bin/gradekit ledger verify no-such-grades"
    # run as printed from there: gradekit answers (no ledger there: exit 1), never bash's 127
    done = subprocess.run(
        ["bash", "-c", elsewhere],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and "FAIL no-such-grades: no ledger" in done.stderr, done

    bare = COMMANDS["ledger-verify"](form="gradekit", grades="g")
    monkeypatch.setenv("PATH", str(running.parent))
    assert from_here(bare, cwd=tmp_path) == bare  # on PATH, and the one that runs
    monkeypatch.setenv("PATH", str(tmp_path))
    assert (
        from_here(bare, cwd=tmp_path) == f"{shlex.quote(str(running.absolute()))} ledger verify g"
    )
    assert from_here("make record", cwd=tmp_path) == "make record"  # only gradekit's own
