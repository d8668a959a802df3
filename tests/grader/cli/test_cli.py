"""The gradekit command line: messages and exit codes.

It reaches private modules on purpose: the exit table (``grader._exits``), the error trees
the docstrings of ``grader._errors`` and ``gradekit._exceptions`` draw, the parser
``grader.cli._main`` builds and the rubric ``grader.cli._options`` resolves."""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import gradekit._exceptions as exceptions_module
import grader
import grader._errors as errors_module
from gradekit import (
    CassetteMiss,
    GradekitError,
    ProviderConfigError,
    ProviderTimeout,
    prompt_key,
)
from gradekit.internal import journal_path
from grader._exits import EXIT_TABLE
from grader.cli import main
from grader.cli._options import resolve_rubric
from grader.grading import MissingPackage
from grader.recordings import RecordingError
from grader.rubric import KIT_RUBRIC
from grader.sandbox import host_hold
from tests.loopback import Loopback, answer
from tests.submissions import make_submission

REPO = Path(__file__).resolve().parents[3]
GRADEKIT_VARIABLES = (
    "GRADEKIT_PROVIDER",
    "GRADEKIT_MODEL",
    "GRADEKIT_BASE_URL",
    "GRADEKIT_API_KEY",
    "GRADEKIT_TRACE",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GRADEKIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    """A student's copy: manifest, rubric and the kit's Makefile; the agent is the kit's own
    lab.agent."""
    root = tmp_path / "alice"
    (root / "rubric").mkdir(parents=True)
    shutil.copy(REPO / "rubric" / "bootcamp.toml", root / "rubric" / "bootcamp.toml")
    shutil.copy(REPO / "Makefile", root / "Makefile")
    (root / "pyproject.toml").write_text(
        '[tool.gradekit]\nagent = "lab.agent:run"\n', encoding="utf-8"
    )
    return root


def record(root: Path, *extra: str) -> int:
    return main(["record", "--root", str(root), "--case", "sql-explain", *extra])


def test_record_writes_a_cassette_then_serves_it_and_run_replays_it(
    submission: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with Loopback(default=answer("Counts passing submissions per student.")) as server:
        monkeypatch.setenv("GRADEKIT_PROVIDER", "openai-compatible")
        monkeypatch.setenv("GRADEKIT_BASE_URL", server.openai_url)
        monkeypatch.setenv("GRADEKIT_MODEL", "tiny")
        assert record(submission) == 0
        first = capsys.readouterr().err
        assert record(submission) == 0
        second = capsys.readouterr().err
        asked = len(server.requests)
    cassette = json.loads((submission / "cassettes" / "sql-explain.json").read_text("utf-8"))
    assert asked == len(cassette["entries"]) == 3
    assert {e["provider"] for e in cassette["entries"].values()} == {"openai-compatible:tiny"}
    assert "[1/1] sql-explain: 3 live, 0 from cassette" in first
    assert "[1/1] sql-explain: 0 live, 3 from cassette" in second
    assert main(["run", "--root", str(submission), "--case", "sql-explain"]) == 0
    assert capsys.readouterr().out == "## sql-explain\nCounts passing submissions per student.\n\n"


def test_record_without_a_provider_exits_2_and_shows_how_to_configure(
    submission: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's first ``complete`` is where it is told: an agent on the official SDKs
    records with no provider configured (tests/e2e/test_sdk_grading.py)."""
    assert record(submission) == 2
    err = capsys.readouterr().err
    assert "\nProviderConfigError: " in err
    for hint in ("GRADEKIT_PROVIDER", "--provider", "llamacpp", "make local-model"):
        assert hint in err
    cassettes = submission / "cassettes"
    assert not cassettes.exists() or not any(cassettes.iterdir())  # no file written


def test_record_with_an_unknown_case_exits_2(
    submission: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRADEKIT_PROVIDER", "llamacpp")
    assert main(["record", "--root", str(submission), "--case", "nope"]) == 2
    assert "unknown case nope" in capsys.readouterr().err


def test_run_on_an_unrecorded_case_exits_3_with_the_miss(
    submission: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--root", str(submission), "--case", "flaky-grade"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("CassetteMiss: no recording for this prompt in ")
    assert "`make record ARGS='--case flaky-grade'`" in captured.err
    # A lab without the kit's Makefile (an instructor's own) is told the gradekit command.
    (submission / "Makefile").unlink()
    assert main(["run", "--root", str(submission), "--case", "flaky-grade"]) == 3
    assert "`gradekit record --case flaky-grade`" in capsys.readouterr().err


def test_run_without_a_manifest_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--root", str(tmp_path)]) == 2
    assert "[tool.gradekit]" in capsys.readouterr().err


def write_cassette(path: Path, prompt: str, response: str) -> None:
    document = {
        "format": "gradekit.cassette/1",
        "case": path.stem,
        "entries": {
            prompt_key(prompt): {
                "prompt": prompt,
                "response": response,
                "provider": "p",
                "recorded_at": "",
            }
        },
    }
    path.write_text(json.dumps(document), encoding="utf-8")


def test_replay_prints_the_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_cassette(tmp_path / "c.json", "hello", "world")
    assert main(["replay", "--cassette", str(tmp_path / "c.json"), "--prompt", " hello"]) == 0
    assert capsys.readouterr().out == "world\n"


def test_replay_miss_exits_3_with_nothing_on_stdout_in_a_real_process(tmp_path: Path) -> None:
    write_cassette(tmp_path / "c.json", "hello", "world")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "replay", "--cassette", str(tmp_path / "c.json")],
        input="goodbye",
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert (done.returncode, done.stdout) == (3, "")
    assert "CassetteMiss: no recording for this prompt" in done.stderr
    assert f"key:     {prompt_key('goodbye')}" in done.stderr
    assert "Traceback" not in done.stderr


def test_key_prints_the_prompt_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["key", "  some prompt\n"]) == 0
    assert capsys.readouterr().out == prompt_key("some prompt") + "\n"


def test_verify_passes_good_cassettes_and_fails_each_kind_of_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good, corrupt, leaky, pending = (tmp_path / f"{n}.json" for n in ("good", "bad", "leak", "j"))
    write_cassette(good, "q", "a")
    corrupt.write_text("{oops", encoding="utf-8")
    write_cassette(leaky, "q", "the key is sk-live-abcdefgh12345")
    write_cassette(pending, "q", "a")
    journal_path(pending).write_text("", encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefgh12345")
    assert main(["cassette", "verify", str(good)]) == 0
    assert f"ok   {good} (1 entry)" in capsys.readouterr().out
    for path, fragment in (
        (corrupt, "bad.json:1:2"),
        (leaky, "value of OPENAI_API_KEY"),
        (pending, "not yet folded"),
    ):
        assert main(["cassette", "verify", str(good), str(path)]) == 1
        err = capsys.readouterr().err
        assert f"FAIL {path}" in err and fragment in err
        assert "sk-live" not in err


def test_verify_reads_every_kind_of_recording_the_kit_writes_and_walks_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folders = [
        REPO / name
        for name in ("cassettes", "cassettes-llm", "fixtures", "examples/openai-sdk/cassettes")
    ]
    assert main(["cassette", "verify", *map(str, folders)]) == 0
    out = capsys.readouterr().out.splitlines()
    files = sorted(p for folder in folders for p in folder.rglob("*.json"))
    assert len(out) == len(files) and all(line.startswith("ok   ") for line in out)
    nouns = {line.split(" (")[0].removeprefix("ok   "): line.rsplit(" ", 1)[1] for line in out}
    for path in files:
        kind = json.loads(path.read_bytes())["format"].split("/")[0]
        assert (
            nouns[str(path)]
            in {
                "gradekit.cassette": ("entry)", "entries)"),
                "gradekit.fixtures": ("call)", "calls)"),
                "gradekit.http-cassette": ("interaction)", "interactions)"),
            }[kind]
        ), path

    # A fixture file's own faults: a leaked key, an unfolded journal, a corrupt file.
    lab = tmp_path / "fixtures"
    lab.mkdir()
    leaky, pending, corrupt = (lab / f"{n}.json" for n in ("leak", "pending", "corrupt"))
    shutil.copy2(REPO / "fixtures" / "refund-policy.json", pending)
    journal_path(pending).write_text("", encoding="utf-8")
    document = json.loads((REPO / "fixtures" / "refund-policy.json").read_bytes())
    call = next(iter(document["calls"]))
    call["response"] = {"note": "sk-live-abcdefgh12345"}
    leaky.write_text(json.dumps(document), "utf-8")
    corrupt.write_text(json.dumps({**document, "calls": "nope"}), "utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefgh12345")
    (lab / "notes.json").write_text("[1, 2]", "utf-8")  # in the folder, and no recording
    assert main(["cassette", "verify", str(lab)]) == 1
    err = capsys.readouterr().err
    for path, fragment in (
        (leaky, "contains the value of OPENAI_API_KEY"),
        (pending, "tool results not yet folded in"),
        (corrupt, "corrupt.json"),
        (lab / "notes.json", "notes.json"),
    ):
        assert f"FAIL {path}" in err and fragment in err, (path, err)
    assert "sk-live" not in err and "unknown cassette format 'gradekit.fixtures" not in err


def test_verify_checks_every_key_against_its_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.json"
    write_cassette(path, "q", "a")
    path.write_text(path.read_text("utf-8").replace('"prompt": "q"', '"prompt": "edited"'), "utf-8")
    assert main(["cassette", "verify", str(path)]) == 1
    assert "does not match its prompt" in capsys.readouterr().err


def reference_copy(tmp_path: Path, name: str = "alice") -> Path:
    """The reference lab as a submission folder of its own."""
    root = tmp_path / name
    for part in ("lab", "cassettes", "cassettes-llm", "fixtures", "rubric"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "FAILURES.md"):
        shutil.copy(REPO / part, root / part)
    return root


@pytest.mark.slow
def test_grade_prints_the_table_and_digest_and_writes_verifiable_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = reference_copy(tmp_path)
    assert main(["grade", str(root), "--out", str(tmp_path / "grades"), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    report = tmp_path / "grades" / "alice" / "report.json"
    digest = json.loads(report.read_bytes())["digest"]
    assert f"alice: 100.00 / 100.00  digest {digest}" in out
    assert "Contract stability         30.00   30.00\n" in out
    assert "Written summary            15.00   15.00  pending review\n" in out
    assert (
        "pending human review: 25.00 of these points (Written summary, Stretch goal): "
        "a person confirms" in out
    )
    assert main(["report", "verify", str(report)]) == 0
    report.write_bytes(report.read_bytes().replace(b'"total":"100.00"', b'"total":"100.01"'))
    assert main(["report", "verify", str(report)]) == 1
    assert "FAIL" in capsys.readouterr().err


@pytest.mark.slow
def test_check_passes_the_reference_and_fails_a_quiet_miss_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = reference_copy(tmp_path)
    assert main(["check", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["PASS", "PASS", "PASS"]
    assert "digest " in lines[2]
    assert lines[-1].startswith("PASS  in ")
    agent = root / "lab" / "agent.py"
    agent.write_text(
        agent.read_text("utf-8").replace(
            "    llm = Traced(provider)\n",
            "    try:\n        return _run(provider, task, tools)\n    except Exception:\n"
            "        return ''\n\n\ndef _run(provider: Provider, task: str, tools: Toolbox | None) "
            "-> str:\n    llm = Traced(provider)\n",
        ),
        "utf-8",
    )
    assert main(["check", str(root)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("FAIL  2. A miss is loud")
    assert lines[1].endswith(
        "case refund-policy, call 1 of 3 ('You are a teaching assistant in "
        "an agent-engineering bootca…'): run() returned '' after the miss: "
        "a miss must raise"
    )


def test_grade_with_a_broken_rubric_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric = tmp_path / "r.toml"
    rubric.write_text(
        (REPO / "rubric" / "bootcamp.toml")
        .read_text("utf-8")
        .replace("weight = 30", "weight = 31"),
        "utf-8",
    )
    assert main(["grade", str(tmp_path), "--rubric", str(rubric)]) == 2
    assert "101" in capsys.readouterr().err


def tiny_submission(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "agent:run"\n', "utf-8")
    (root / "agent.py").write_text("def run(provider, task):\n    return 'hi'\n", "utf-8")
    return root


def gradekit(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_grade_says_which_isolation_it_uses_and_refuses_namespaces_without_bubblewrap(
    tmp_path: Path,
) -> None:
    root = tiny_submission(tmp_path / "alice")
    # --isolation: the flag's earlier name, still taken (scripts written before --wall)
    done = gradekit(["grade", str(root), "--out", "out", "--isolation", "process"], tmp_path)
    assert done.returncode == 0, done.stderr  # graded (points lost are no failure)
    assert done.stderr.splitlines()[0] == (
        "isolation: process guard only (no bubblewrap: resource limits and an audit hook); "
        f"{host_hold().description}"
    )
    assert (tmp_path / "out" / "alice" / "report.json").is_file()
    # No bwrap on PATH (python itself is started by its full path).
    done = gradekit(
        ["grade", str(root), "--out", "none", "--wall", "namespaces"],
        tmp_path,
        PATH=str(tmp_path / "empty"),
    )
    assert done.returncode == 2
    assert "--wall namespaces: bubblewrap (bwrap) is not installed" in done.stderr
    assert "sudo apt-get install bubblewrap" in done.stderr
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("command", ["record", "run", "check", "grade"])
def test_every_command_resolves_the_rubric_alike_and_says_so(
    command: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One resolver: the rubric given, else the one the lab names, else the kit's; never
    one a graded submission names (``tests/grader/cli/test_lab_rubric.py`` runs each)."""
    parser_default = {name: action.default for name, action in _subcommand_options(command).items()}
    assert parser_default["--rubric"] is None  # resolved after parsing, by resolve_rubric
    args = _subcommand_parser(command).parse_args([])
    assert callable(args.rubric_lab)
    args.rubric = None
    resolve_rubric(args)  # the lab here, this checkout, names none: the kit's
    assert args.rubric == KIT_RUBRIC
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a rubric a graded submission names or ships is never read" in text


def _subcommand_parser(command: str) -> argparse.ArgumentParser:
    from grader.cli._main import _parser

    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = commands.choices[command]
    return parser


def _subcommand_options(command: str) -> dict[str, argparse.Action]:
    from grader.cli._main import _parser

    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {
        option: action
        for action in commands.choices[command]._actions
        for option in action.option_strings
    }


def test_gradebook_merge_refuses_mismatched_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = "submission,student,status,total,review,final,max"
    (tmp_path / "a.csv").write_text(f"{head},x,digest,reason\n")
    (tmp_path / "b.csv").write_text(f"{head},y,digest,reason\n")
    code = main(
        [
            "gradebook",
            "merge",
            str(tmp_path / "a.csv"),
            str(tmp_path / "b.csv"),
            "--out",
            str(tmp_path / "m.csv"),
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.startswith("GradebookError: gradebook 2 has criteria y")
    assert not (tmp_path / "m.csv").exists()


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    commands = (
        ["record"],
        ["run"],
        ["replay"],
        ["key"],
        ["cassette", "verify"],
        ["grade"],
        ["check"],
        ["report", "verify"],
        ["gradebook", "merge"],
    )
    for command in commands:
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--help"])
        assert exit_.value.code == 0
        assert "usage: gradekit" in capsys.readouterr().out


@pytest.mark.parametrize("shard", ["3/2", "0/2", "two"])
def test_a_bad_shard_is_a_usage_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shard: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["grade", str(tmp_path), "--shard", shard])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --shard: use K/N with 1 <= K <= N, e.g. --shard 2/4" in err
    assert "Traceback" not in err


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"gradekit {version('gradekit')}\n"


# The one exit-code table, as the README and docs/formats.md print it.
EXIT_CODES = {
    "CassetteMiss": 3,
    "MissingFixtureError": 3,
    "ProviderAuthError": 4,
    "ProviderRateLimited": 4,
    "ProviderServerError": 4,
    "ProviderTimeout": 4,
    "ProviderConnectionError": 4,
    "ProviderResponseError": 4,
    "ProviderError": 4,
    "ProviderConfigError": 2,
    "UsageError": 2,
    "CassetteCorrupt": 2,
    "FixtureCorrupt": 2,
    "CassetteCollision": 2,
    "CassetteLocked": 2,
    "SecretLeak": 2,
    "ManifestError": 2,
    "RubricError": 2,
    "GradebookError": 2,
    "RecordingError": 2,
    "ChangeLogCorrupt": 2,
    "DashboardUnavailable": 2,
    "SubmissionFileError": 2,
    "MissingSubmissionFile": 2,
    "CassetteError": 1,
    "GradekitError": 1,
    "IncidentCorrupt": 2,
    "IncidentDivergence": 3,
    "LedgerCorrupt": 2,
    "MissingPackage": 1,
    "HandOutRefused": 1,
    "SubmissionTooLarge": 1,
}


def _error_classes() -> dict[str, type[GradekitError]]:
    """Every GradekitError class defined in gradekit and grader, by name.

    A class is counted where its module names it: the CassetteMiss that is also an HTTP
    library's TransportError, made at run time by the transports, is the kit's one error.
    """
    for package in (importlib.import_module("gradekit"), grader):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    found: dict[str, type[GradekitError]] = {}
    stack: list[type[GradekitError]] = [GradekitError]
    while stack:
        cls = stack.pop()
        if getattr(sys.modules[cls.__module__], cls.__qualname__, None) is cls:
            found[cls.__name__] = cls
        stack += cls.__subclasses__()
    return found


# A drawn tree's line: rails, a branch, the class, its exit code, then what it means.
_DRAWN = re.compile(
    r"^    (?P<rails>(?:[│ ]   )*)(?P<branch>[├└]── )?(?P<name>[A-Z]\w*) +"
    r"(?P<code>\d+)  "
)


def drawn_tree(doc: str) -> dict[str, tuple[str | None, int]]:
    """Each class a docstring's tree draws -> (its drawn parent, its drawn exit code)."""
    drawn: dict[str, tuple[str | None, int]] = {}
    path: list[str] = []
    for line in doc.splitlines():
        match = _DRAWN.match(line)
        if match is None:
            continue
        depth = len(match["rails"]) // 4 + (1 if match["branch"] else 0)
        assert depth <= len(path), f"{line!r} hangs from no parent"
        del path[depth:]
        drawn[match["name"]] = (path[-1] if path else None, int(match["code"]))
        path.append(match["name"])
    return drawn


def test_every_error_has_its_exit_code() -> None:
    classes = _error_classes()
    assert set(classes) == set(EXIT_CODES)  # a new error class needs its row here
    for name, cls in classes.items():
        assert "exit_code" in vars(cls), f"{name} must choose its own exit code"
        assert cls.exit_code == EXIT_CODES[name], name
    assert set(EXIT_CODES.values()) <= {code for code, _ in EXIT_TABLE}


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (RecordingError("stale"), 2),
        (MissingPackage("openai", packages={}), 1),
        (CassetteMiss("miss", cassette="c.json", key="k", prompt="p"), 3),
        (ProviderTimeout("slow"), 4),
        (ProviderConfigError("no key"), 2),
    ],
)
def test_the_command_line_exits_with_the_error_s_own_code(
    error: GradekitError,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def fail(args: argparse.Namespace) -> int:
        raise error

    parser = argparse.ArgumentParser()
    parser.set_defaults(handler=fail)  # a command whose handler raises ``error``
    monkeypatch.setattr("grader.cli._main._parser", lambda: parser)
    assert main([]) == code
    assert capsys.readouterr().err.startswith(f"{type(error).__name__}: ")


def test_every_error_is_drawn_under_its_real_parent_with_its_code() -> None:
    """The kit's tree (gradekit._exceptions) draws its errors, the grader's
    (grader._errors) the grader's: each class, its real parent and its exit code."""
    classes = _error_classes()
    kit, grader_tree = (
        drawn_tree(exceptions_module.__doc__ or ""),
        drawn_tree(errors_module.__doc__ or ""),
    )
    assert {n for n, c in classes.items() if c.__module__.partition(".")[0] == "gradekit"} == set(
        kit
    )  # the kit draws only its own
    for name in set(kit) & set(grader_tree):  # the kit's, drawn where the grader hangs on
        assert grader_tree[name] == kit[name], name
    drawn = {**kit, **grader_tree}
    assert set(drawn) == set(classes)
    for name, (parent, code) in drawn.items():
        cls = classes[name]
        real = [base.__name__ for base in cls.__bases__ if issubclass(base, GradekitError)]
        assert real == ([parent] if parent else []), f"{name} is drawn under {parent}"
        assert code == cls.exit_code, f"{name} is drawn with {code}, exits {cls.exit_code}"
        assert cls.exit_code in {code for code, _ in EXIT_TABLE}, name


def test_one_exit_code_table_in_help_readme_and_docs(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[3]
    readme = (root / "README.md").read_text("utf-8")
    formats = (root / "docs" / "formats.md").read_text("utf-8")
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for code, meaning in EXIT_TABLE:
        assert f"| {code} | {meaning} |" in readme
        assert f"| {code} | {meaning} |" in formats
        assert f"{code} {meaning}" in shown


def test_nothing_points_at_a_document_outside_the_repository() -> None:
    """Messages students read once said "see DESIGN's format", a file they do not have."""
    root = Path(__file__).resolve().parents[3]
    folders = ("grader", "gradekit", "lab", "docs", "rubric")
    files = [
        p
        for folder in folders
        for p in (root / folder).rglob("*")
        if p.suffix in (".py", ".md", ".toml")
    ] + [root / "README.md"]
    assert [p.name for p in files if "DESIGN" in p.read_text("utf-8")] == []
    assert (root / "docs" / "formats.md").is_file()


@pytest.mark.slow
def test_a_folder_that_is_no_submission_is_ungradable_and_the_batch_exits_1(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A zip download's wrapper folder was once "graded" 0.00 with exit 0."""
    batch = tmp_path / "batch"
    make_submission(batch / "alice")
    make_submission(batch / "bob" / "bob-main")  # the zip's wrapper folder
    (batch / "carol").mkdir()
    (batch / "carol" / "notes.txt").write_text("no code here\n", "utf-8")
    out = tmp_path / "out"

    assert main(["grade", str(batch), "--out", str(out), "--jobs", "1"]) == 1

    shown = capsys.readouterr().out
    rows = {
        row["submission"]: row
        for row in csv.DictReader((out / "gradebook.csv").read_text("utf-8").splitlines())
    }
    assert {name: row["status"] for name, row in rows.items()} == {
        "alice": "graded",
        "bob": "ungradable",
        "carol": "ungradable",
    }
    assert rows["alice"]["total"] == "100.00"
    assert "one folder deeper, in bob/bob-main/" in rows["bob"]["reason"]
    assert "not a submission" in rows["carol"]["reason"]
    assert rows["bob"]["total"] == rows["carol"]["total"] == ""
    assert "bob: UNGRADABLE: no pyproject.toml: the submission seems to be one folder" in shown
    assert not (out / "bob").exists() and not (out / "carol").exists()


def test_the_command_lines_docstring_names_every_command_and_its_module() -> None:
    """A reader of ``grader/cli/_main.py`` finds each command and where it lives."""
    import grader.cli._main as main_module
    from grader.cli._main import _parser

    doc = main_module.__doc__ or ""
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert [name for name in commands.choices if name not in doc] == []
    groups = sorted(
        p.stem
        for p in Path(main_module.__file__).parent.glob("_*.py")
        if p.stem not in ("__init__", "_main")
    )
    assert [g for g in groups if f"``{g}``" not in doc] == []


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_grade_runs_one_worker_more_than_the_cores_it_may_use() -> None:
    """--jobs defaults to the CPUs this process may run on (not the machine's), plus one."""
    probe = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from grader.cli._main import _parser; "
        "print(_parser().parse_args(['grade']).jobs)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2"]
