"""Replay: recorded answers only; a miss is loud and says how to fix it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradekit import Cassette, CassetteCorrupt, CassetteMiss, Entry, Provider, Replay, prompt_key
from gradekit.internal import encode_cassette, write_atomic

TASK = "Reply to a student who asks for a refund ten days after buying a seat. " * 3


def cassette_file(tmp_path: Path, prompts: dict[str, str], case: str = "refund-policy") -> Path:
    entries = {prompt_key(p): Entry(p.strip(), r, "fake:m", "") for p, r in prompts.items()}
    path = tmp_path / f"{case}.json"
    write_atomic(path, encode_cassette(Cassette(case, entries)))
    return path


def test_replay_serves_the_recorded_answer_whatever_the_outer_whitespace(tmp_path: Path) -> None:
    replay = Replay(cassette_file(tmp_path, {"plan it": "1. read the policy"}), name="x")
    assert replay.complete("\n  plan it \t") == "1. read the policy"
    assert isinstance(replay, Provider)
    assert replay.name == "x"


def test_a_miss_names_cassette_key_prompt_closest_and_command(tmp_path: Path) -> None:
    path = cassette_file(tmp_path, {TASK: "recorded", "something unrelated": "other"})
    asked = TASK.replace("ten", "eleven")
    with pytest.raises(CassetteMiss) as caught:
        Replay(path).complete(asked)
    error = caught.value
    message = str(error)
    assert (error.cassette, error.key, error.prompt) == (str(path), prompt_key(asked), asked)
    assert str(path) in message
    assert prompt_key(asked) in message
    assert json.dumps(asked[:80])[:-1] in message  # the first 80 characters, then an ellipsis
    assert asked[:81] not in message
    assert f"closest: {json.dumps(TASK.strip()[:80])[:-1]}" in message
    assert f"key {prompt_key(TASK)}" in message
    assert "`make record ARGS='--case refund-policy'`" in message


def test_a_miss_is_never_an_empty_answer_or_none(tmp_path: Path) -> None:
    replay = Replay(cassette_file(tmp_path, {"known": ""}))
    assert replay.complete("known") == ""  # an empty recorded answer is still an answer
    with pytest.raises(CassetteMiss):
        replay.complete("unknown")


def test_a_missing_file_misses_on_every_prompt_and_says_so(tmp_path: Path) -> None:
    replay = Replay(tmp_path / "sql-explain.json")
    with pytest.raises(CassetteMiss, match="does not exist yet") as caught:
        replay.complete("anything")
    assert "`make record ARGS='--case sql-explain'`" in str(caught.value)


def test_a_corrupt_file_is_an_error_at_construction_not_an_empty_cassette(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"format": "gradekit.cassette/1", "entries": {', encoding="utf-8")
    with pytest.raises(CassetteCorrupt, match=r"c\.json:1:"):
        Replay(path)


def test_the_flat_form_replays(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({prompt_key("hi"): "hello"}), encoding="utf-8")
    replay = Replay(path)
    assert replay.complete(" hi ") == "hello"
    with pytest.raises(CassetteMiss, match="no recorded prompts"):
        replay.complete("bye")


def test_an_in_memory_cassette_replays() -> None:
    replay = Replay(Cassette("c", {prompt_key("q"): Entry("q", "a")}))
    assert replay.complete("q") == "a"
    assert len(replay) == 1


def test_a_miss_shows_where_the_prompt_first_differs_from_the_closest_one() -> None:
    """Two long prompts that differ late look the same in an 80-character head."""
    recorded = "You are a teaching assistant. " * 4 + "Explain the refund policy in two lines."
    replay = Replay(Cassette("c", {prompt_key(recorded): Entry(recorded, "ok")}))
    with pytest.raises(CassetteMiss) as caught:
        replay.complete("  " + recorded.replace("two lines", "three lines"))
    differs = [line for line in str(caught.value).splitlines() if "differs:" in line]
    at = len("You are a teaching assistant. " * 4 + "Explain the refund policy in t") + 1
    assert differs == [
        f'  differs: at character {at}: asked "…e refund policy in three lines.", '
        'recorded "…e refund policy in two lines."'
    ]
