"""The gradekit command line: messages and exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import main
from lab import prompt_key
from lab._store import journal_path
from tests.loopback import Loopback, answer

REPO = Path(__file__).resolve().parents[1]
GRADEKIT_VARIABLES = ("GRADEKIT_PROVIDER", "GRADEKIT_MODEL", "GRADEKIT_BASE_URL",
                      "GRADEKIT_API_KEY", "GRADEKIT_TRACE", "OPENAI_API_KEY",
                      "ANTHROPIC_API_KEY")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GRADEKIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    """A student's copy: manifest and rubric; the agent is the kit's own lab.agent."""
    root = tmp_path / "alice"
    (root / "rubric").mkdir(parents=True)
    shutil.copy(REPO / "rubric" / "bootcamp.toml", root / "rubric" / "bootcamp.toml")
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
    assert record(submission) == 2
    err = capsys.readouterr().err
    assert err.startswith("ProviderConfigError: ")
    for hint in ("GRADEKIT_PROVIDER", "--provider", "llamacpp", "make local-model"):
        assert hint in err
    assert not (submission / "cassettes").exists()


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
    assert "gradekit record --case flaky-grade" in captured.err


def test_run_without_a_manifest_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--root", str(tmp_path)]) == 2
    assert "[tool.gradekit]" in capsys.readouterr().err


def write_cassette(path: Path, prompt: str, response: str) -> None:
    document = {"format": "gradekit.cassette/1", "case": path.stem, "entries": {
        prompt_key(prompt): {"prompt": prompt, "response": response, "provider": "p",
                             "recorded_at": ""}}}
    path.write_text(json.dumps(document), encoding="utf-8")


def test_replay_prints_the_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_cassette(tmp_path / "c.json", "hello", "world")
    assert main(["replay", "--cassette", str(tmp_path / "c.json"), "--prompt", " hello"]) == 0
    assert capsys.readouterr().out == "world\n"


def test_replay_miss_exits_3_with_nothing_on_stdout_in_a_real_process(tmp_path: Path) -> None:
    write_cassette(tmp_path / "c.json", "hello", "world")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "replay", "--cassette", str(tmp_path / "c.json")],
        input="goodbye", capture_output=True, text=True, cwd=REPO, check=False,
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
    assert f"ok   {good} (1 entries)" in capsys.readouterr().out
    for path, fragment in ((corrupt, "bad.json:1:2"), (leaky, "value of OPENAI_API_KEY"),
                           (pending, "not yet folded")):
        assert main(["cassette", "verify", str(good), str(path)]) == 1
        err = capsys.readouterr().err
        assert f"FAIL {path}" in err and fragment in err
        assert "sk-live" not in err


def test_verify_checks_every_key_against_its_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.json"
    write_cassette(path, "q", "a")
    path.write_text(path.read_text("utf-8").replace('"prompt": "q"', '"prompt": "edited"'), "utf-8")
    assert main(["cassette", "verify", str(path)]) == 1
    assert "does not match its prompt" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["grade", "check"])
def test_grader_commands_say_they_are_not_built_yet(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command]) == 2
    assert "not built yet" in capsys.readouterr().err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["record"], ["run"], ["replay"], ["key"], ["cassette", "verify"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--help"])
        assert exit_.value.code == 0
        assert "usage: gradekit" in capsys.readouterr().out
