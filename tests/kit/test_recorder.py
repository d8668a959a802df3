"""Recorder: record once, serve after, lose nothing to a crash, refuse to leak a key.

It tests the recorder's private journal on purpose (``gradekit._journal``,
``gradekit._store``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradekit import (
    CassetteCollision,
    CassetteLocked,
    CassetteMiss,
    Entry,
    FakeProvider,
    Recorder,
    Replay,
    SecretLeak,
    UsageError,
    prompt_key,
)
from gradekit._journal import Action, decide, previous_path
from gradekit._store import journal_path, load

REPO = Path(__file__).resolve().parents[2]


def echo(name: str = "fake:echo") -> FakeProvider:
    return FakeProvider(lambda prompt: f"answer to {prompt.strip()}", name=name)


@pytest.mark.parametrize(
    ("mode", "recorded", "asked", "action"),
    [
        ("once", True, False, Action.SERVE),
        ("once", False, False, Action.RECORD),
        ("rerecord", True, False, Action.RECORD),
        ("rerecord", True, True, Action.SERVE),
        ("none", True, False, Action.SERVE),
        ("none", False, False, Action.MISS),
    ],
)
def test_policy(mode: str, recorded: bool, asked: bool, action: Action) -> None:
    assert decide(mode, recorded=recorded, asked_this_run=asked) is action  # type: ignore[arg-type]


def test_a_hit_makes_no_live_call(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    with Recorder(echo(), path) as first:
        first.complete("what is a cassette?")
    live = echo()
    with Recorder(live, path) as second:
        assert second.complete("  what is a cassette?\n") == "answer to what is a cassette?"
    assert live.calls == []
    assert (second.recorded, second.served) == (0, 1)


def test_a_miss_asks_live_records_and_returns(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    live = echo("fake:model-a")
    with Recorder(live, path, clock=lambda: "2026-11-29T21:00:00Z") as recorder:
        assert recorder.complete(" plan the refund ") == "answer to plan the refund"
    assert live.calls == [" plan the refund "]
    cassette = load(path)
    assert cassette is not None
    assert cassette.case == "case"
    assert cassette.entries == {
        prompt_key("plan the refund"): Entry(
            "plan the refund", "answer to plan the refund", "fake:model-a", "2026-11-29T21:00:00Z"
        )
    }
    assert not journal_path(path).exists()


def test_each_answer_is_in_the_journal_before_complete_returns(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    recorder = Recorder(echo(), path)
    recorder.complete("one")
    lines = journal_path(path).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["response"] for line in lines] == ["answer to one"]
    assert Replay(path).complete("one") == "answer to one"  # replay reads the journal too
    recorder.close()


def test_none_mode_is_strict_replay(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    with Recorder(echo(), path) as recorder:
        recorder.complete("known")
    live = echo()
    strict = Recorder(live, path, mode="none")
    assert strict.complete("known") == "answer to known"
    with pytest.raises(CassetteMiss, match="make record ARGS='--case case'"):
        strict.complete("unknown")
    assert live.calls == []


def test_none_mode_on_a_cassette_not_recorded_yet_says_the_file_does_not_exist(
    tmp_path: Path,
) -> None:
    strict = Recorder(echo(), tmp_path / "later.json", mode="none")
    with pytest.raises(CassetteMiss, match=r"closest: \(the cassette file does not exist yet\)"):
        strict.complete("anything")
    assert not (tmp_path / "later.json").exists()


def test_rerecord_asks_again_keeps_the_old_file_and_drops_stale_prompts(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    with Recorder(FakeProvider(["old a", "old b"]), path) as first:
        first.complete("a")
        first.complete("b")
    before = path.read_bytes()
    live = FakeProvider(["new a"])
    with Recorder(live, path, mode="rerecord") as again:
        assert again.complete("a") == "new a"
        assert again.complete("a") == "new a"  # asked this run: served, not asked twice
    assert live.calls == ["a"]
    assert previous_path(path).read_bytes() == before
    replay = Replay(path)
    assert replay.complete("a") == "new a"
    with pytest.raises(CassetteMiss):
        replay.complete("b")


def test_a_rerecord_that_changes_no_answer_leaves_the_cassette_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "case.json"
    with Recorder(
        FakeProvider({"a": "A", "b": "B"}), path, clock=lambda: "2026-11-01T00:00:00Z"
    ) as first:
        first.complete("a")
        first.complete("b")
    before = path.read_bytes()
    live = FakeProvider({"a": "A", "b": "B"})
    with Recorder(live, path, mode="rerecord", clock=lambda: "2026-12-01T00:00:00Z") as again:
        again.complete("b")
        again.complete("a")
    assert live.calls == ["b", "a"]
    assert path.read_bytes() == before
    live = FakeProvider({"a": "A", "b": "B, changed"})
    with Recorder(live, path, mode="rerecord", clock=lambda: "2026-12-01T00:00:00Z") as third:
        third.complete("a")
        third.complete("b")
    assert Replay(path).complete("b") == "B, changed"
    assert previous_path(path).read_bytes() == before


def test_a_failed_rerecord_keeps_what_it_did_not_reach(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    with Recorder(FakeProvider(["old a", "old b"]), path) as first:
        first.complete("a")
        first.complete("b")

    def rerecord_until_it_fails() -> None:
        with Recorder(FakeProvider(["new a"]), path, mode="rerecord") as again:
            again.complete("a")
            again.complete("c")  # the fake has no more answers: the run fails half-way

    with pytest.raises(UsageError, match="ran out"):
        rerecord_until_it_fails()
    replay = Replay(path)
    assert (replay.complete("a"), replay.complete("b")) == ("new a", "old b")


def test_unknown_mode_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="once"):
        Recorder(echo(), tmp_path / "c.json", mode="sometimes")  # type: ignore[arg-type]


def test_a_live_answer_that_is_not_text_is_refused(tmp_path: Path) -> None:
    with (
        pytest.raises(UsageError, match="returned NoneType"),
        Recorder(
            FakeProvider(lambda prompt: None, name="broken"),  # type: ignore[arg-type,return-value]
            tmp_path / "c.json",
        ) as recorder,
    ):
        recorder.complete("x")
    assert Replay(tmp_path / "c.json").__len__() == 0


def test_a_collision_in_the_file_is_reported_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    key = prompt_key("real prompt")
    document = {
        "format": "gradekit.cassette/1",
        "case": "c",
        "entries": {key: {"prompt": "real prompt", "response": "r"}},
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    journal_path(path).write_text(
        json.dumps(
            {"key": key, "prompt": "other", "response": "x", "provider": "", "recorded_at": ""}
        )
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(CassetteCollision, match=key):
        Recorder(echo(), path)
    assert json.loads(path.read_text(encoding="utf-8")) == document


def test_a_credential_in_an_answer_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    secret = "sk-test-0123456789abcdef"
    live = FakeProvider(lambda prompt: f"your key is {secret}" if "key" in prompt else "fine")
    with Recorder(live, path, env={"OPENAI_API_KEY": secret}) as recorder:
        with pytest.raises(SecretLeak) as caught:
            recorder.complete("what is my key?")
        assert recorder.complete("something else") == "fine"  # still usable after a refusal
    assert "OPENAI_API_KEY" in str(caught.value)
    assert secret not in str(caught.value)
    written = path.read_text(encoding="utf-8")
    assert secret not in written and "something else" in written


def test_the_live_adapters_own_key_is_refused_even_when_not_in_the_environment(
    tmp_path: Path,
) -> None:
    class KeyedFake(FakeProvider):
        def credentials(self) -> tuple[str, ...]:
            return ("passed-on-the-command-line-123",)

    live = KeyedFake(lambda prompt: "echo passed-on-the-command-line-123")
    with Recorder(live, tmp_path / "c.json", env={}) as recorder, pytest.raises(SecretLeak):
        recorder.complete("x")
    # Nothing was written: not the answer, and not an empty cassette either.
    assert not (tmp_path / "c.json").exists()


def test_a_second_recorder_on_the_same_cassette_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    first = Recorder(echo(), path)
    with pytest.raises(CassetteLocked, match="another process"):
        Recorder(echo(), path)
    first.complete("kept")
    first.close()
    with Recorder(echo(), path) as second:  # free again once the first closed
        assert second.complete("kept") == "answer to kept"
    assert second.served == 1


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from gradekit import Recorder

    cassette, calls_log, block_on = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    class Live:
        name = "fake:slow"
        def complete(self, prompt):
            with calls_log.open("a") as log:
                log.write(prompt + "\\n")
            if prompt == block_on:
                print("blocked", flush=True)
                time.sleep(600)
            return "answer " + prompt

    recorder = Recorder(Live(), cassette)
    for number in range(10):
        recorder.complete(f"q{number}")
        print(f"answered q{number}", flush=True)
    recorder.close()
    print("done", flush=True)
    """
)


def start_child(tmp_path: Path, block_on: str, script: str = CHILD) -> subprocess.Popen[str]:
    """Run ``script``: a recorder into ``tmp_path / "c.json"`` asked q0 to q9 in turn, which
    logs each question it passes on to ``tmp_path / "calls"`` and blocks on ``block_on``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "c.json"), str(tmp_path / "calls"), block_on],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def kill_and_resume(tmp_path: Path, script: str) -> None:
    """SIGKILL ``script`` (see ``start_child``) while q6 is in flight, then run it again to
    the end: nothing answered is lost or asked twice, and the journal is folded away."""
    child = start_child(tmp_path, "q6", script)
    assert child.stdout is not None
    answered = []
    for line in child.stdout:
        if line.strip() == "blocked":
            break
        answered.append(line.strip())
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert answered == [f"answered q{n}" for n in range(6)]
    assert child.returncode == -signal.SIGKILL

    rerun = start_child(tmp_path, "never", script)
    out, _ = rerun.communicate(timeout=60)
    assert rerun.returncode == 0 and out.endswith("done\n")
    asked = (tmp_path / "calls").read_text().split()
    # q0..q5 were answered before the kill: asked once. q6 was in flight: asked again.
    assert asked == [f"q{n}" for n in range(7)] + [f"q{n}" for n in range(6, 10)]
    assert not journal_path(tmp_path / "c.json").exists()


def test_sigkill_mid_recording_loses_nothing_and_repeats_no_answered_call(tmp_path: Path) -> None:
    kill_and_resume(tmp_path, CHILD)
    replay = Replay(tmp_path / "c.json")
    assert [replay.complete(f"q{n}") for n in range(10)] == [f"answer q{n}" for n in range(10)]


def test_two_recording_processes_at_once_never_corrupt_the_cassette(tmp_path: Path) -> None:
    first = start_child(tmp_path, block_on="q3")
    assert first.stdout is not None
    for line in first.stdout:
        if line.strip() == "blocked":
            break
    second = start_child(tmp_path, block_on="never")
    _, err = second.communicate(timeout=60)
    first.kill()
    first.communicate()
    assert second.returncode == 1
    assert "CassetteLocked" in err and "being recorded by another process" in err
    with Recorder(echo(), tmp_path / "c.json", mode="none") as check:
        assert [check.complete(f"q{n}") for n in range(3)] == [f"answer q{n}" for n in range(3)]


def test_rerecord_of_an_empty_cassette_replaces_an_older_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    with Recorder(FakeProvider(["old"]), path) as first:
        first.complete("a")
    with Recorder(FakeProvider(["new"]), path, mode="rerecord") as again:
        again.complete("b")  # "a" is dropped, previous holds the file with "a"
    with Recorder(FakeProvider([]), path, mode="rerecord"):
        pass  # asks nothing: the cassette becomes empty
    empty = path.read_bytes()
    with Recorder(FakeProvider([]), path, mode="rerecord"):
        pass
    # The previous file is the cassette this run replaced, never an older one.
    assert previous_path(path).read_bytes() == empty
