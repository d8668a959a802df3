"""The fixture codec and the files it is stored in: canonical bytes, loud corruption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gradekit._exceptions import CassetteCorrupt, FixtureCorrupt
from gradekit._fixtures import (
    FORMAT,
    Call,
    Fixture,
    decode,
    encode,
    fold_fixture,
    journal_entry,
    load_fixture,
    tool_key,
)
from gradekit._store import Journal, journal_path, write_atomic

T0, T1, T2 = "2026-01-05T09:00:00Z", "2026-02-10T17:30:00Z", "2026-03-01T08:00:00Z"


def call(tool: str, args: dict[str, Any], response: Any) -> tuple[str, Call]:
    return tool_key(tool, args), Call(tool, args, response)


def sample() -> Fixture:
    return Fixture("refund-policy", T0, dict([
        call("search_docs", {"query": "refund", "limit": 2}, {"hits": ["ünïcode ✓", 1.5]}),
        call("query_db", {"sql": "SELECT 1"}, [[1]]),
        call("read_docs", {}, None),
    ]))


def test_round_trip_keeps_every_field() -> None:
    fixture = sample()
    assert decode(encode(fixture), source="x.json") == fixture


def test_the_bytes_are_exactly_the_canonical_form() -> None:
    fixture = Fixture("c", T0, dict([call("b_tool", {"z": 1, "a": [True]}, "é"),
                                     call("a_tool", {}, {"y": None, "x": 0})]))
    assert encode(fixture).decode("utf-8") == (
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
    backward = Fixture(forward.case, T0, {
        key: Call(c.tool, dict(reversed(list(c.args.items()))), c.response)
        for key, c in reversed(list(forward.calls.items()))
    })
    assert encode(forward) == encode(backward)
    tools = [c["tool"] for c in json.loads(encode(forward))["calls"]]
    assert tools == ["query_db", "read_docs", "search_docs"]
    assert "ünïcode ✓".encode() in encode(forward)  # readable UTF-8 in diffs, not \u escapes


def test_calls_of_one_tool_are_sorted_by_their_canonical_arguments() -> None:
    fixture = Fixture("c", T0, dict([call("t", {"q": "b"}, 2), call("t", {"q": "a"}, 1)]))
    assert [c["args"] for c in json.loads(encode(fixture))["calls"]] == [{"q": "a"}, {"q": "b"}]


def test_a_case_with_no_tool_call_is_an_empty_list_not_an_absent_one() -> None:
    document = json.loads(encode(Fixture("quiet", T0)))
    assert document == {"format": FORMAT, "case": "quiet", "recorded_at": T0, "calls": []}
    assert decode(encode(Fixture("quiet", T0)), source="q.json") == Fixture("quiet", T0)


def test_malformed_json_names_file_line_and_column() -> None:
    data = b'{\n  "format": "gradekit.fixtures/1",\n  "calls": [,]\n}\n'
    with pytest.raises(FixtureCorrupt) as caught:
        decode(data, source="fixtures/refund-policy.json", case="refund-policy")
    message = str(caught.value)
    assert message.startswith("fixtures/refund-policy.json:3:13: not valid JSON")
    assert "git checkout -- fixtures/refund-policy.json" in message
    assert "gradekit record --case refund-policy --rerecord" in message


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
        decode(data, source="c.json")
    assert str(caught.value).startswith(f"c.json:{location}: ")
    assert fragment in str(caught.value)


def test_a_bad_second_call_is_located_at_its_own_line() -> None:
    good = {"tool": "t", "args": {"q": "ok"}, "response": {"calls": [1, 2]}}
    data = head(calls=[good, {"tool": "t", "args": "q=bad", "response": 1}])
    line = data.decode().splitlines().index('    {', 7) + 1  # the second call's opening brace
    with pytest.raises(FixtureCorrupt, match=rf"^c\.json:{line}:5: call 1 needs 'args'"):
        decode(data, source="c.json")


def test_nan_or_infinity_is_an_error_at_the_call_that_holds_it() -> None:
    text = head(calls=[{"tool": "t", "args": {}, "response": 1},
                       {"tool": "u", "args": {}, "response": 2}]).decode()
    text = text.replace('"response": 2', '"response": NaN')
    line = text.splitlines().index('    {', 7) + 1
    with pytest.raises(FixtureCorrupt, match=rf"^c\.json:{line}:5: NaN is not a JSON value"):
        decode(text.encode(), source="c.json")


def test_one_key_twice_with_different_responses_is_an_error_at_the_second() -> None:
    first = {"tool": "t", "args": {"a": 1, "b": 2}, "response": "one"}
    second = {"tool": "t", "args": {"b": 2, "a": 1}, "response": "two"}  # the same key
    data = head(calls=[first, second])
    line = data.decode().splitlines().index('    {', 7) + 1
    with pytest.raises(FixtureCorrupt) as caught:
        decode(data, source="c.json")
    message = str(caught.value)
    assert message.startswith(f"c.json:{line}:5: repeats an earlier call")
    assert 't {"a":1,"b":2}' in message


def test_one_key_twice_with_the_same_response_is_one_call() -> None:
    same = {"tool": "t", "args": {"a": 1}, "response": [1.0]}
    fixture = decode(head(calls=[same, dict(same)]), source="c.json")
    assert fixture.calls == dict([call("t", {"a": 1}, [1.0])])


def test_a_response_differing_only_in_json_type_is_a_different_response() -> None:
    one = {"tool": "t", "args": {}, "response": 1}
    with pytest.raises(FixtureCorrupt, match="repeats an earlier call"):
        decode(head(calls=[one, {**one, "response": True}]), source="c.json")


def test_fixture_corruption_is_cassette_corruption() -> None:
    assert issubclass(FixtureCorrupt, CassetteCorrupt)


# --- files: load, journal, fold


def write(path: Path, fixture: Fixture) -> Path:
    write_atomic(path, encode(fixture))
    return path


def journal(path: Path, *recorded: tuple[str, Any, Any, str]) -> None:
    """Append (tool, args, response, recorded_at) lines the way a recorder does."""
    lines = Journal(journal_path(path))
    for tool, args, response, stamp in recorded:
        lines.append(tool_key(tool, args), journal_entry(tool, json.dumps(response), stamp))
    lines.close()


def test_load_of_a_missing_file_is_none_and_of_a_corrupt_file_an_error(tmp_path: Path) -> None:
    assert load_fixture(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(FixtureCorrupt, match=r"bad\.json:1:2"):
        load_fixture(tmp_path / "bad.json")


def test_load_adds_journalled_calls_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", Fixture("c", T1, dict([call("t", {"q": 1}, "old")])))
    journal(path, ("t", {"q": 2}, ["new"], T2))
    with journal_path(path).open("a", encoding="utf-8") as torn:
        torn.write('{"key": "t {\\"q\\":3}", "prom')  # cut short by a crash
    loaded = load_fixture(path)
    assert loaded == Fixture("c", T1, dict([call("t", {"q": 1}, "old"),
                                            call("t", {"q": 2}, ["new"])]))


def test_an_unreadable_journal_line_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    journal(path, ("t", {"q": 1}, "fine", T0))
    with journal_path(path).open("a", encoding="utf-8") as bad:
        bad.write(json.dumps({"key": "t {}", "prompt": None, "provider": "t",
                              "recorded_at": "soon", "response": "1"}) + "\n")
    with pytest.raises(FixtureCorrupt, match=r"c\.json\.journal:2: unreadable"):
        load_fixture(path)


def test_fold_writes_calls_and_removes_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    journal(path, ("t", {"q": 1}, "a", T1), ("t", {"q": 2}, "b", T0))
    folded = fold_fixture(path, case="c", now=T2)
    assert folded.recorded_at == T0  # the oldest recording, not the first line or now
    assert decode(path.read_bytes(), source="c.json") == folded
    assert not journal_path(path).exists()


def test_fold_of_nothing_writes_an_empty_fixture_stamped_now(tmp_path: Path) -> None:
    path = tmp_path / "quiet.json"
    assert fold_fixture(path, case="quiet", now=T2) == Fixture("quiet", T2)
    assert json.loads(path.read_bytes())["calls"] == []


def test_fold_keeps_the_older_stamp_when_adding_calls(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", Fixture("c", T0, dict([call("t", {"q": 1}, "a")])))
    journal(path, ("t", {"q": 2}, "b", T1))
    assert fold_fixture(path, case="c", now=T2).recorded_at == T0


def test_fold_with_keep_drops_stale_calls_and_their_age(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", Fixture("c", T0, dict([call("t", {"q": 1}, "a"),
                                                            call("t", {"q": 2}, "b")])))
    journal(path, ("t", {"q": 1}, "a again", T1))
    folded = fold_fixture(path, case="c", now=T2, keep=frozenset({tool_key("t", {"q": 1})}))
    assert folded == Fixture("c", T1, dict([call("t", {"q": 1}, "a again")]))
    emptied = fold_fixture(path, case="c", now=T2, keep=frozenset())
    assert emptied == Fixture("c", T2)


def test_fold_never_treats_a_corrupt_fixture_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"format": "gradekit.fixtures/9", "calls": []}', encoding="utf-8")
    journal(path, ("t", {}, "x", T0))
    with pytest.raises(FixtureCorrupt, match="newer gradekit"):
        fold_fixture(path, case="c", now=T2)
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == "gradekit.fixtures/9"
    assert journal_path(path).exists()
