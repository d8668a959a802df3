"""The cassette codec and the files it is stored in.

It tests the kit's private modules on purpose (``gradekit._cassette``, ``gradekit._store``):
the codec and the store beneath the kit's surfaces."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gradekit import FORMAT, Cassette, CassetteCollision, CassetteCorrupt, Entry, prompt_key
from gradekit._cassette import decode_cassette, encode_cassette, merge_entry
from gradekit._store import load, write_atomic


def entry(prompt: str, response: str = "answer") -> tuple[str, Entry]:
    return prompt_key(prompt), Entry(prompt, response, "fake:model", "2026-11-29T21:00:00Z")


def sample() -> Cassette:
    return Cassette("refund-policy", dict([entry("zeta"), entry("alpha", "ünïcode ✓")]))


def test_round_trip_keeps_every_field() -> None:
    cassette = sample()
    assert decode_cassette(encode_cassette(cassette), source="x.json") == cassette


def test_bytes_are_canonical_whatever_the_insertion_order() -> None:
    forward = sample()
    backward = Cassette(forward.case, dict(reversed(list(forward.entries.items()))))
    data = encode_cassette(forward)
    assert data == encode_cassette(backward)
    assert data.endswith(b"}\n") and not data.endswith(b"\n\n")
    assert (
        data.decode()
        == json.dumps(json.loads(data), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    )
    assert "ünïcode ✓".encode() in data  # readable UTF-8 in diffs, not \u escapes


def test_v1_document_has_format_case_and_entries() -> None:
    document = json.loads(encode_cassette(sample()))
    assert document["format"] == FORMAT == "gradekit.cassette/1"
    assert document["case"] == "refund-policy"
    key, _ = entry("alpha", "ünïcode ✓")
    assert document["entries"][key] == {
        "prompt": "alpha",
        "response": "ünïcode ✓",
        "provider": "fake:model",
        "recorded_at": "2026-11-29T21:00:00Z",
    }


def test_flat_form_of_earlier_labs_is_read() -> None:
    key = prompt_key("hello")
    data = json.dumps({key: "hi there"}).encode()
    cassette = decode_cassette(data, source="old.json", case="old")
    assert cassette.case == "old"
    assert cassette.entries[key].response == "hi there"
    assert cassette.entries[key].prompt is None


def test_flat_form_is_written_back_as_v1() -> None:
    key = prompt_key("hello")
    cassette = decode_cassette(json.dumps({key: "hi"}).encode(), source="old.json", case="old")
    again = decode_cassette(encode_cassette(cassette), source="new.json")
    assert json.loads(encode_cassette(cassette))["format"] == FORMAT
    assert again.entries[key].response == "hi"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"[1, 2]", "a cassette is a JSON object"),
        (b'{"format": "gradekit.cassette/2", "case": "", "entries": {}}', "newer gradekit"),
        (b'{"format": "vcr", "case": "", "entries": {}}', "unknown cassette format"),
        (b'{"format": "gradekit.cassette/1", "case": "", "entries": []}', "object 'entries'"),
        (b'{"format": "gradekit.cassette/1", "case": "", "entries": {"k": 1}}', "entry k"),
        (b'{"abc": 3}', "flat cassette maps keys to response strings"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_shapes_are_errors_never_empty(data: bytes, fragment: str) -> None:
    with pytest.raises(CassetteCorrupt, match=fragment):
        decode_cassette(data, source="c.json")


def test_entry_whose_key_does_not_match_its_prompt_is_rejected_with_its_line() -> None:
    key, recorded = entry("original prompt")
    document = json.loads(encode_cassette(Cassette("c", {key: recorded})))
    document["entries"][key]["prompt"] = "edited by hand"
    data = json.dumps(document, indent=2).encode()
    with pytest.raises(CassetteCorrupt, match=rf"c.json:\d+:\d+: entry {key} does not match"):
        decode_cassette(data, source="c.json")


def test_same_key_with_a_different_prompt_is_a_collision_not_an_overwrite() -> None:
    key, recorded = entry("first")
    entries = {key: recorded}
    impostor = Entry("second", "other answer")
    with pytest.raises(CassetteCollision, match=key):
        merge_entry(entries, key, impostor, source="c.json")
    assert entries[key] is recorded


def test_same_key_same_prompt_replaces_the_answer() -> None:
    key, recorded = entry("first")
    entries = {key: recorded}
    newer = Entry("first", "newer answer")
    merge_entry(entries, key, newer, source="c.json")
    assert entries[key] is newer


def test_write_atomic_replaces_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "c.json"
    target.write_bytes(b"old")
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["c.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "c.json"
    target.write_bytes(b"old")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["c.json"]


def test_load_of_a_missing_file_is_none_and_of_a_corrupt_file_an_error(tmp_path: Path) -> None:
    assert load(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(CassetteCorrupt, match=r"bad\.json:1:2"):
        load(tmp_path / "bad.json")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested too deep"),
        ('{"entries": ' + "9" * 5000 + "}", "a number too long"),
    ],
)
def test_a_hostile_cassette_is_corrupt_not_a_crash(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "hostile.json").write_text(text, encoding="utf-8")
    with pytest.raises(CassetteCorrupt, match=rf"hostile\.json: not valid JSON \({why}\)"):
        load(tmp_path / "hostile.json")
