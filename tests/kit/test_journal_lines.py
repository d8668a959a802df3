"""The journal's lines: the bytes ``json.dumps`` writes, however a prompt must be escaped.

The Recorder writes each answer's line with a fast path (``json_string``: a text that
needs no escape skips the escaper); these tests hold it to the format the reader has
always read, and drive a real recording child through a kill -9 with prompts of every
kind of character a JSON string escapes.

It tests the kit's private journal on purpose (``gradekit._store``'s ``Journal`` and
``json_string``, ``gradekit._cassette``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gradekit import CassetteMiss, FakeProvider, Recorder, Replay, prompt_key
from gradekit._cassette import CASSETTE, Entry
from gradekit._store import Journal, journal_path, json_string, read_journal

REPO = Path(__file__).resolve().parents[2]

# Long texts with each character a JSON string escapes (or keeps as it is) somewhere in them:
# the fast path only runs from 64 characters on.
_FILLER = "Grade the answer against the rubric and explain each point. "
_SPECIAL = ['"', "\\", "\n", "\t", "\r", "\x00", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "/"]
HOSTILE = [
    f"{_FILLER * 2}{special} and after it {number}" for number, special in enumerate(_SPECIAL)
]
long_texts = st.builds(lambda head, tail: _FILLER + head + tail, st.text(), st.text())


def _dumps(key: str, entry: Entry) -> bytes:
    """The line as ``json.dumps`` writes it: what the journal format has always been."""
    fields = {
        "key": key,
        "prompt": entry.prompt,
        "provider": entry.provider,
        "recorded_at": entry.recorded_at,
        "response": entry.response,
    }
    return (json.dumps(fields, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


@given(st.text() | long_texts)
@example("")
@example("x" * 63 + '"')
@example("x" * 64 + '"')
@example("x" * 200 + "\x00")
def test_a_json_string_is_what_json_dumps_writes(text: str) -> None:
    assert json_string(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")
    assert json.loads(json_string(text)) == text


@pytest.mark.parametrize("text", HOSTILE)
def test_each_character_a_json_string_escapes_is_escaped_in_a_long_text(text: str) -> None:
    assert json_string(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")


@given(
    key=st.text(),
    prompt=st.none() | st.text() | long_texts,
    response=st.text() | long_texts,
    provider=st.text(),
    recorded_at=st.text(),
    later=st.tuples(st.text(), st.text()),
)
def test_a_journal_line_is_the_json_line_the_reader_reads(
    tmp_path_factory: pytest.TempPathFactory,
    key: str,
    prompt: str | None,
    response: str,
    provider: str,
    recorded_at: str,
    later: tuple[str, str],
) -> None:
    """Each line, whatever it holds; a provider or a time that changes between lines (the
    journal quotes them once for the lines that share them) shows in the line after."""
    path = tmp_path_factory.mktemp("journal") / "c.json.journal"
    entry = Entry(prompt, response, provider, recorded_at)
    third = Entry(prompt, response, *later)
    journal = Journal(path)
    journal.append(key, entry)
    journal.append("second", entry)
    journal.append("third", third)
    journal.append("fourth", entry)
    journal.close()
    assert path.read_bytes() == b"".join(
        [
            _dumps(key, entry),
            _dumps("second", entry),
            _dumps("third", third),
            _dumps("fourth", entry),
        ]
    )
    assert read_journal(path, CASSETTE) == [
        (key, entry),
        ("second", entry),
        ("third", third),
        ("fourth", entry),
    ]


def test_a_journal_reopened_appends_after_what_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "c.json.journal"
    first, second = (Entry(text, text[::-1], "fake", "now") for text in HOSTILE[:2])
    journal = Journal(path)
    journal.append("first", first)
    journal.close()
    journal = Journal(path)
    journal.append("second", second)
    journal.close()
    assert path.read_bytes() == _dumps("first", first) + _dumps("second", second)
    assert read_journal(path, CASSETTE) == [("first", first), ("second", second)]


def test_a_text_utf8_cannot_hold_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "c.json.journal"
    journal = Journal(path)
    with pytest.raises(UnicodeEncodeError):
        journal.append("k", Entry(_FILLER + "\ud800", "answer", "fake", "now"))
    journal.close()
    assert path.read_bytes() == b""


def test_hostile_prompts_and_answers_round_trip_through_a_closed_recording(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    with Recorder(FakeProvider(lambda prompt: prompt[::-1]), path) as recorder:
        for text in HOSTILE:
            recorder.complete(text)
    replay = Replay(path)
    assert [replay.complete(text) for text in HOSTILE] == [text[::-1] for text in HOSTILE]


CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from gradekit import Recorder

    cassette, prompts, stop = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])

    class Live:
        name = "fake:mirror"
        def complete(self, prompt):
            if prompt == prompts[stop]:
                print("blocked", flush=True)
                time.sleep(600)
            return prompt[::-1]

    recorder = Recorder(Live(), cassette)
    for number, prompt in enumerate(prompts):
        recorder.complete(prompt)
        print(f"answered {number}", flush=True)
    recorder.close()
    """
)


def _mirror(asked: list[str]) -> Callable[[str], str]:
    """A live model that answers each prompt reversed and notes that it was asked."""

    def complete(prompt: str) -> str:
        asked.append(prompt)
        return prompt[::-1]

    return complete


def _killed_mid_run(tmp_path: Path, prompts: list[str], stop: int) -> list[str]:
    """Record ``prompts`` in a child until the live call for ``prompts[stop]``, kill -9 it;
    what it printed as answered."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "c.json"), json.dumps(prompts), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert child.stdout is not None
    answered = []
    for line in child.stdout:
        if line.strip() == "blocked":
            break
        answered.append(line.strip())
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    return answered


def test_kill_9_mid_run_loses_no_completed_call_and_reopening_appends(tmp_path: Path) -> None:
    stop = 9
    answered = _killed_mid_run(tmp_path, HOSTILE, stop)
    assert answered == [f"answered {number}" for number in range(stop)]
    journal = journal_path(tmp_path / "c.json")
    assert [key for key, _ in read_journal(journal, CASSETTE)] == [
        prompt_key(text) for text in HOSTILE[:stop]
    ]
    # The next run folds what the killed one answered, serves it, records the rest.
    asked: list[str] = []
    with Recorder(FakeProvider(_mirror(asked)), tmp_path / "c.json") as again:
        assert [again.complete(text) for text in HOSTILE] == [text[::-1] for text in HOSTILE]
    assert asked == HOSTILE[stop:]
    assert (again.served, again.recorded) == (stop, len(HOSTILE) - stop)
    assert not journal.exists()
    replay = Replay(tmp_path / "c.json")
    assert [replay.complete(text) for text in HOSTILE] == [text[::-1] for text in HOSTILE]


def test_a_torn_last_line_is_dropped_and_the_lines_before_it_are_kept(tmp_path: Path) -> None:
    answered = _killed_mid_run(tmp_path, HOSTILE, 4)
    assert len(answered) == 4
    journal = journal_path(tmp_path / "c.json")
    whole = journal.read_bytes()
    # A write cut short by the kill: part of a fifth line, without its newline.
    line = _dumps(prompt_key(HOSTILE[4]), Entry(HOSTILE[4], HOSTILE[4][::-1], "fake:mirror", ""))
    with journal.open("ab") as handle:
        handle.write(line[: len(line) // 2])
    assert [key for key, _ in read_journal(journal, CASSETTE)] == [
        prompt_key(text) for text in HOSTILE[:4]
    ]
    asked: list[str] = []
    with Recorder(FakeProvider(_mirror(asked)), tmp_path / "c.json") as again:
        assert again.complete(HOSTILE[4]) == HOSTILE[4][::-1]  # never answered: asked again
        assert again.complete(HOSTILE[0]) == HOSTILE[0][::-1]
    assert asked == [HOSTILE[4]]
    assert whole.count(b"\n") == 4


@pytest.mark.parametrize("mode", ["once", "rerecord"])
def test_a_closed_recorder_records_nothing_more(
    tmp_path: Path, mode: Literal["once", "rerecord"]
) -> None:
    """The hot path records a new prompt without asking the policy only while the journal
    is open: after ``close`` a new prompt is a miss, and the file is left as it was."""
    path = tmp_path / "c.json"
    recorder = Recorder(FakeProvider(lambda prompt: "answer"), path, mode=mode)
    assert recorder.complete(HOSTILE[0]) == "answer"
    recorder.close()
    written = path.read_bytes()
    with pytest.raises(CassetteMiss):
        recorder.complete(HOSTILE[1])
    assert recorder.complete(HOSTILE[0]) == "answer"  # what it recorded is still served
    assert path.read_bytes() == written and not journal_path(path).exists()
