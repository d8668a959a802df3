"""The fixture codec and the files it is stored in: canonical bytes, loud corruption.

The last part covers what fixtures and cassettes share, two codecs over one store: the
same messages, with each format's own names, for a file or a journal line it cannot read.

It tests the kit's private codecs and store on purpose (``gradekit._fixtures``,
``_cassette``, ``_codec``, ``_store``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gradekit import CassetteCorrupt, FixtureCorrupt
from gradekit._cassette import CASSETTE
from gradekit._codec import Codec
from gradekit._fixtures import (
    FIXTURE,
    FORMAT,
    Fixture,
    ToolCall,
    decode_fixture,
    encode_fixture,
    journal_entry,
    tool_key,
)
from gradekit._store import Journal, fold, journal_path, read, write_atomic

T0, T1, T2 = "2026-01-05T09:00:00Z", "2026-02-10T17:30:00Z", "2026-03-01T08:00:00Z"


def call(tool: str, args: dict[str, Any], response: Any) -> tuple[str, ToolCall]:
    return tool_key(tool, args), ToolCall(tool, args, response)


def sample() -> Fixture:
    return Fixture(
        "refund-policy",
        T0,
        dict(
            [
                call("search_docs", {"query": "refund", "limit": 2}, {"hits": ["ünïcode ✓", 1.5]}),
                call("query_db", {"sql": "SELECT 1"}, [[1]]),
                call("read_docs", {}, None),
            ]
        ),
    )


def test_round_trip_keeps_every_field() -> None:
    fixture = sample()
    assert decode_fixture(encode_fixture(fixture), source="x.json") == fixture


def test_the_bytes_are_exactly_the_canonical_form() -> None:
    fixture = Fixture(
        "c",
        T0,
        dict([call("b_tool", {"z": 1, "a": [True]}, "é"), call("a_tool", {}, {"y": None, "x": 0})]),
    )
    assert encode_fixture(fixture).decode("utf-8") == (
        "{\n"
        '  "calls": [\n'
        "    {\n"
        '      "args": {},\n'
        '      "response": {\n'
        '        "x": 0,\n'
        '        "y": null\n'
        "      },\n"
        '      "tool": "a_tool"\n'
        "    },\n"
        "    {\n"
        '      "args": {\n'
        '        "a": [\n'
        "          true\n"
        "        ],\n"
        '        "z": 1\n'
        "      },\n"
        '      "response": "é",\n'
        '      "tool": "b_tool"\n'
        "    }\n"
        "  ],\n"
        '  "case": "c",\n'
        f'  "format": "{FORMAT}",\n'
        f'  "recorded_at": "{T0}"\n'
        "}\n"
    )


def test_bytes_do_not_depend_on_insertion_order_and_calls_are_sorted_by_key() -> None:
    forward = sample()
    backward = Fixture(
        forward.case,
        T0,
        {
            key: ToolCall(c.tool, dict(reversed(list(c.args.items()))), c.response)
            for key, c in reversed(list(forward.calls.items()))
        },
    )
    assert encode_fixture(forward) == encode_fixture(backward)
    tools = [c["tool"] for c in json.loads(encode_fixture(forward))["calls"]]
    assert tools == ["query_db", "read_docs", "search_docs"]
    assert "ünïcode ✓".encode() in encode_fixture(forward)  # readable UTF-8, not \u escapes


def test_calls_of_one_tool_are_sorted_by_their_canonical_arguments() -> None:
    fixture = Fixture("c", T0, dict([call("t", {"q": "b"}, 2), call("t", {"q": "a"}, 1)]))
    calls = json.loads(encode_fixture(fixture))["calls"]
    assert [c["args"] for c in calls] == [{"q": "a"}, {"q": "b"}]


def test_a_case_with_no_tool_call_is_an_empty_list_not_an_absent_one() -> None:
    document = json.loads(encode_fixture(Fixture("quiet", T0)))
    assert document == {"format": FORMAT, "case": "quiet", "recorded_at": T0, "calls": []}
    quiet = Fixture("quiet", T0)
    assert decode_fixture(encode_fixture(quiet), source="q.json") == quiet


def head(**members: Any) -> bytes:
    document = {"format": FORMAT, "case": "c", "recorded_at": T0, "calls": []}
    document.update(members)
    return json.dumps({k: v for k, v in document.items() if v is not None}, indent=2).encode()


@pytest.mark.parametrize(
    ("data", "location", "fragment"),
    [
        (b"[1, 2]", "1:1", "a fixture is a JSON object"),
        (head(format="gradekit.fixtures/2"), "2:13", "newer gradekit"),
        (head(format="gradekit.cassette/1"), "2:13", "unknown fixture format"),
        (json.dumps({"case": "c", "calls": []}).encode(), "1:1", "no 'format'"),
        (head(calls={}), "5:12", "an array 'calls'"),
        (head(case=3), "3:11", "a string 'case'"),
        (head(recorded_at="last tuesday"), "4:18", "a UTC time to the second"),
        (head(calls=[{"tool": "t", "args": {}}]), "6:5", "call 0 must be an object with"),
        (head(calls=[1]), "6:5", "call 0 must be an object"),
        (head(calls=[{"tool": "a b", "args": {}, "response": 1}]), "6:5", "call 0 needs a 'tool'"),
        (head(calls=[{"tool": "t", "args": [], "response": 1}]), "6:5", "call 0 needs 'args'"),
        (b"\xff\xfe", "1", "not UTF-8"),
    ],
)
def test_bad_shapes_are_errors_with_a_location_never_empty(
    data: bytes, location: str, fragment: str
) -> None:
    with pytest.raises(FixtureCorrupt) as caught:
        decode_fixture(data, source="c.json")
    assert str(caught.value).startswith(f"c.json:{location}: ")
    assert fragment in str(caught.value)


def test_a_bad_second_call_is_located_at_its_own_line() -> None:
    good = {"tool": "t", "args": {"q": "ok"}, "response": {"calls": [1, 2]}}
    data = head(calls=[good, {"tool": "t", "args": "q=bad", "response": 1}])
    line = data.decode().splitlines().index("    {", 7) + 1  # the second call's opening brace
    with pytest.raises(FixtureCorrupt, match=rf"^c\.json:{line}:5: call 1 needs 'args'"):
        decode_fixture(data, source="c.json")


def test_nan_or_infinity_is_an_error_at_the_call_that_holds_it() -> None:
    text = head(
        calls=[{"tool": "t", "args": {}, "response": 1}, {"tool": "u", "args": {}, "response": 2}]
    ).decode()
    text = text.replace('"response": 2', '"response": NaN')
    line = text.splitlines().index("    {", 7) + 1
    with pytest.raises(FixtureCorrupt, match=rf"^c\.json:{line}:5: NaN is not a JSON value"):
        decode_fixture(text.encode(), source="c.json")


def test_one_key_twice_with_different_responses_is_an_error_at_the_second() -> None:
    first = {"tool": "t", "args": {"a": 1, "b": 2}, "response": "one"}
    second = {"tool": "t", "args": {"b": 2, "a": 1}, "response": "two"}  # the same key
    data = head(calls=[first, second])
    line = data.decode().splitlines().index("    {", 7) + 1
    with pytest.raises(FixtureCorrupt) as caught:
        decode_fixture(data, source="c.json")
    message = str(caught.value)
    assert message.startswith(f"c.json:{line}:5: repeats an earlier call")
    assert 't {"a":1,"b":2}' in message


def test_one_key_twice_with_the_same_response_is_one_call() -> None:
    same = {"tool": "t", "args": {"a": 1}, "response": [1.0]}
    fixture = decode_fixture(head(calls=[same, dict(same)]), source="c.json")
    assert fixture.calls == dict([call("t", {"a": 1}, [1.0])])


def test_a_response_differing_only_in_json_type_is_a_different_response() -> None:
    one = {"tool": "t", "args": {}, "response": 1}
    with pytest.raises(FixtureCorrupt, match="repeats an earlier call"):
        decode_fixture(head(calls=[one, {**one, "response": True}]), source="c.json")


def test_fixture_corruption_is_cassette_corruption() -> None:
    assert issubclass(FixtureCorrupt, CassetteCorrupt)


# --- files: load, journal, fold


def write(path: Path, fixture: Fixture) -> Path:
    write_atomic(path, encode_fixture(fixture))
    return path


def journal(path: Path, *recorded: tuple[str, Any, Any, str]) -> None:
    """Append (tool, args, response, recorded_at) lines the way a recorder does."""
    lines = Journal(journal_path(path))
    for tool, args, response, stamp in recorded:
        lines.append(tool_key(tool, args), journal_entry(tool, json.dumps(response), stamp))
    lines.close()


def test_load_of_a_missing_file_is_none_and_of_a_corrupt_file_an_error(tmp_path: Path) -> None:
    assert read(tmp_path / "absent.json", FIXTURE) is None
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(FixtureCorrupt, match=r"bad\.json:1:2"):
        read(tmp_path / "bad.json", FIXTURE)


def test_load_adds_journalled_calls_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", Fixture("c", T1, dict([call("t", {"q": 1}, "old")])))
    journal(path, ("t", {"q": 2}, ["new"], T2))
    with journal_path(path).open("a", encoding="utf-8") as torn:
        torn.write('{"key": "t {\\"q\\":3}", "prom')  # cut short by a crash
    loaded = read(path, FIXTURE)
    assert loaded == Fixture(
        "c", T1, dict([call("t", {"q": 1}, "old"), call("t", {"q": 2}, ["new"])])
    )


def test_an_unreadable_journal_line_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    journal(path, ("t", {"q": 1}, "fine", T0))
    with journal_path(path).open("a", encoding="utf-8") as bad:
        bad.write(
            json.dumps(
                {
                    "key": "t {}",
                    "prompt": None,
                    "provider": "t",
                    "recorded_at": "soon",
                    "response": "1",
                }
            )
            + "\n"
        )
    with pytest.raises(FixtureCorrupt, match=r"c\.json\.journal:2: unreadable"):
        read(path, FIXTURE)


def test_fold_writes_calls_and_removes_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    journal(path, ("t", {"q": 1}, "a", T1), ("t", {"q": 2}, "b", T0))
    folded = fold(path, FIXTURE, case="c", now=T2)
    assert folded.recorded_at == T0  # the oldest recording, not the first line or now
    assert decode_fixture(path.read_bytes(), source="c.json") == folded
    assert not journal_path(path).exists()


def test_fold_of_nothing_writes_an_empty_fixture_stamped_now(tmp_path: Path) -> None:
    path = tmp_path / "quiet.json"
    assert fold(path, FIXTURE, case="quiet", now=T2) == Fixture("quiet", T2)
    assert json.loads(path.read_bytes())["calls"] == []


def test_fold_keeps_the_older_stamp_when_adding_calls(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", Fixture("c", T0, dict([call("t", {"q": 1}, "a")])))
    journal(path, ("t", {"q": 2}, "b", T1))
    assert fold(path, FIXTURE, case="c", now=T2).recorded_at == T0


def test_fold_with_keep_drops_stale_calls_and_their_age(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.json",
        Fixture("c", T0, dict([call("t", {"q": 1}, "a"), call("t", {"q": 2}, "b")])),
    )
    journal(path, ("t", {"q": 1}, "a again", T1))
    folded = fold(path, FIXTURE, case="c", now=T2, keep=frozenset({tool_key("t", {"q": 1})}))
    assert folded == Fixture("c", T1, dict([call("t", {"q": 1}, "a again")]))
    emptied = fold(path, FIXTURE, case="c", now=T2, keep=frozenset())
    assert emptied == Fixture("c", T2)


def test_fold_never_treats_a_corrupt_fixture_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"format": "gradekit.fixtures/9", "calls": []}', encoding="utf-8")
    journal(path, ("t", {}, "x", T0))
    with pytest.raises(FixtureCorrupt, match="newer gradekit"):
        fold(path, FIXTURE, case="c", now=T2)
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == "gradekit.fixtures/9"
    assert journal_path(path).exists()


# --- what both formats share: one store, two codecs

BOTH = pytest.mark.parametrize("codec", [CASSETTE, FIXTURE], ids=["cassette", "fixture"])
FIX = {
    CASSETTE: "make record ARGS='--case refund-policy'",
    FIXTURE: "make record ARGS='--case refund-policy --rerecord --reason \"the recorded "
    "results changed\"'",
}


@pytest.mark.parametrize(
    ("codec", "data", "location"),
    [
        (CASSETTE, b'{\n  "format": "gradekit.cassette/1",\n  "entries": {,}\n}\n', "3:15"),
        (FIXTURE, b'{\n  "format": "gradekit.fixtures/1",\n  "calls": [,]\n}\n', "3:13"),
    ],
    ids=["cassette", "fixture"],
)
def test_malformed_json_names_file_line_column_and_the_fix(
    codec: Codec[Any], data: bytes, location: str
) -> None:
    source = f"{codec.noun}s/refund-policy.json"
    with pytest.raises(CassetteCorrupt) as caught:
        codec.decode(data, source=source, case="refund-policy")
    message = str(caught.value)
    assert type(caught.value) is codec.error
    assert message.startswith(f"{source}:{location}: not valid JSON")
    assert f"git checkout -- {source}" in message
    assert f"`{FIX[codec]}`" in message


@BOTH
def test_bytes_that_are_not_utf8_name_their_line_and_the_fix(codec: Codec[Any]) -> None:
    with pytest.raises(CassetteCorrupt) as caught:
        codec.decode(b'{\n  "case": "\xff"}', source="c.json", case="refund-policy")
    assert type(caught.value) is codec.error
    assert str(caught.value) == (
        f"c.json:2: not UTF-8 text (byte 13). {codec.noun.capitalize()}s are UTF-8 JSON. "
        f"Restore it with `git checkout -- c.json`, or delete it and run `{FIX[codec]}`."
    )


@BOTH
def test_a_newer_format_asks_for_an_upgrade(codec: Codec[Any]) -> None:
    newer = codec.format.replace("/1", "/2")
    with pytest.raises(CassetteCorrupt) as caught:
        codec.decode(json.dumps({"format": newer}).encode(), source="c.json")
    assert type(caught.value) is codec.error
    assert str(caught.value).endswith(
        f": unknown {codec.noun} format {newer!r}; it was written by a newer gradekit: "
        "upgrade with `pip install -U gradekit`."
    )


@BOTH
def test_an_unreadable_journal_line_is_the_formats_own_corruption(
    tmp_path: Path, codec: Codec[Any]
) -> None:
    path = tmp_path / "c.json"
    journal_path(path).write_text('{"key": "k", "prompt": nu\n', encoding="utf-8")
    with pytest.raises(CassetteCorrupt) as caught:
        read(path, codec)
    assert type(caught.value) is codec.error
    message = str(caught.value)
    assert message.startswith(f"{journal_path(path)}:1: unreadable journal line (")
    assert f"recorded but not yet folded into the {codec.noun}: fix or delete" in message
