"""Tools: one key per call whatever the order, record once, replay strictly, write fresh."""

from __future__ import annotations

import json
import os
import random
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gradekit import (
    CassetteLocked,
    LiveToolbox,
    MissingFixtureError,
    SecretLeak,
    Toolbox,
    ToolRecorder,
    ToolReplay,
    Tools,
    UsageError,
    tool_key,
)
from gradekit.internal import journal_path, previous_path
from tests.kit.test_recorder import kill_and_resume

T0, T1 = "2026-01-05T09:00:00Z", "2026-02-10T17:30:00Z"

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=16,
)
ARGS = st.dictionaries(st.text(max_size=4), JSON, max_size=5)
NAMES = st.from_regex(r"[a-z_]{1,8}", fullmatch=True)


def reordered(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every object's members in a shuffled order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {key: reordered(item, rnd) for key, item in items}
    if isinstance(value, list):
        return [reordered(item, rnd) for item in value]
    return value


def tagged(value: Any) -> Any:
    """A value that is equal for two JSON values exactly when they are the same JSON.

    Python's == says 1 == 1.0 == True and 0.0 == -0.0; JSON and the key do not.
    """
    if isinstance(value, dict):
        return ("object", tuple(sorted((key, tagged(item)) for key, item in value.items())))
    if isinstance(value, list):
        return ("array", tuple(tagged(item) for item in value))
    return (type(value).__name__, repr(value))


@given(args=ARGS, rnd=st.randoms(use_true_random=False))
def test_argument_order_at_any_depth_never_changes_the_key(
    args: dict[str, Any], rnd: random.Random
) -> None:
    assert tool_key("search_docs", reordered(args, rnd)) == tool_key("search_docs", args)


@given(a=ARGS, b=ARGS)
@example(a={"x": 1}, b={"x": True})
@example(a={"x": 1}, b={"x": 1.0})
@example(a={"x": 0.0}, b={"x": -0.0})
@example(a={"x": "1"}, b={"x": 1})
@example(a={"x": []}, b={"x": {}})
@example(a={"x": None}, b={"x": "null"})
@example(a={"x": {"y": 1}}, b={"x": {"y": 1}})
def test_different_values_always_give_different_keys(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert (tool_key("search_docs", a) == tool_key("search_docs", b)) == (tagged(a) == tagged(b))


@given(args=ARGS)
def test_the_key_holds_the_arguments_exactly(args: dict[str, Any]) -> None:
    name, _, text = tool_key("query_db", args).partition(" ")
    assert name == "query_db"
    assert tagged(json.loads(text)) == tagged(args)  # so no two argument sets share a key


@given(first=NAMES, second=NAMES, args=ARGS)
def test_different_tools_never_share_a_key(first: str, second: str, args: dict[str, Any]) -> None:
    assert (tool_key(first, args) == tool_key(second, args)) == (first == second)


def test_the_key_is_the_name_and_compact_sorted_unescaped_json() -> None:
    args = {"z": [{"b": 1, "a": None}], "a": "réponse"}
    assert tool_key("read_docs", args) == 'read_docs {"a":"réponse","z":[{"a":null,"b":1}]}'


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ({"x": float("nan")}, "args['x'] is nan"),
        ({"x": [1, float("inf")]}, "args['x'][1] is inf"),
        ({"x": {1, 2}}, "args['x'] is of type set (use a list)"),
        ({"x": (1, 2)}, "args['x'] is of type tuple (use a list)"),
        ({"x": {"y": object()}}, "args['x']['y'] is of type object"),
        ({"x": {1: "one"}}, "args['x'] has the key 1 (int), not a string"),
        ({"x": b"bytes"}, "args['x'] is of type bytes"),
    ],
)
def test_arguments_that_are_not_json_are_a_usage_error_naming_where(
    args: dict[str, Any], where: str
) -> None:
    with pytest.raises(UsageError) as caught:
        tool_key("search_docs", args)
    assert str(caught.value).startswith(f"search_docs {where}. Tool arguments and results are")


@pytest.mark.parametrize("name", ["", "two words", "tab\there", 3])
def test_a_tool_name_is_a_string_without_spaces(name: Any) -> None:
    with pytest.raises(UsageError, match="without spaces"):
        tool_key(name, {})


# --- a small tool set used below: one read-only tool that counts its calls, two write tools


def docs_tools() -> tuple[Tools, list[tuple[str, int]]]:
    tools, asked = Tools(), []

    @tools.read_only("search_docs")
    def search_docs(query: str, limit: int = 2) -> dict[str, Any]:
        asked.append((query, limit))
        return {"query": query, "hits": [f"{query} #{n}" for n in range(limit)]}

    def save_note(store: dict[str, Any], text: str) -> int:
        store.setdefault("notes", []).append(text)
        return len(store["notes"])

    tools.write("save_note", save_note)
    tools.write("notes")(lambda store: store.get("notes", []))
    return tools, asked


def clock(*stamps: str) -> Callable[[], str]:
    """A clock that returns ``stamps`` in turn, then keeps returning the last one."""
    remaining = list(stamps)
    return lambda: remaining.pop(0) if len(remaining) > 1 else remaining[0]


def document(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result


def test_registering_by_call_and_by_decorator_and_refusing_duplicates() -> None:
    tools, _ = docs_tools()
    assert tools.names == ["notes", "save_note", "search_docs"]
    assert "search_docs" in tools and "query_db" not in tools
    with pytest.raises(UsageError, match="already registered"):
        tools.read_only("save_note", lambda: None)
    with pytest.raises(UsageError, match="must be a function"):
        tools.read_only("query_db", "SELECT 1")  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="without spaces"):
        tools.write("save note")


def test_every_toolbox_satisfies_the_one_contract(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    with ToolRecorder(tools, tmp_path / "c.json") as recorder:
        for box in (tools.for_run(), recorder, ToolReplay(tmp_path / "c.json")):
            assert isinstance(box, Toolbox)


def test_a_tool_may_take_an_argument_called_name(tmp_path: Path) -> None:
    tools = Tools()
    tools.read_only("greet", lambda name: f"hello {name}")
    with ToolRecorder(tools, tmp_path / "c.json") as recorder:
        assert recorder.call("greet", name="Ada") == "hello Ada"
    assert ToolReplay(tmp_path / "c.json").call("greet", name="Ada") == "hello Ada"


def test_recording_calls_each_distinct_key_once_and_serves_the_rest(tmp_path: Path) -> None:
    tools, asked = docs_tools()
    path = tmp_path / "fixtures" / "refund-policy.json"
    opened = "2026-01-01T00:00:00Z"  # the run's start; the calls are recorded at T0 and T1
    with ToolRecorder(tools, path, clock=clock(opened, T0, T1)) as recorder:
        first = recorder.call("search_docs", query="refund", limit=1)
        assert recorder.call("search_docs", limit=1, query="refund") == first
        recorder.call("search_docs", query="seats")
    assert asked == [("refund", 1), ("seats", 2)]
    assert (recorder.recorded, recorder.served) == (2, 1)
    assert document(path) == {
        "format": "gradekit.fixtures/1",
        "case": "refund-policy",
        "recorded_at": T0,
        "calls": [
            {
                "tool": "search_docs",
                "args": {"limit": 1, "query": "refund"},
                "response": {"query": "refund", "hits": ["refund #0"]},
            },
            {
                "tool": "search_docs",
                "args": {"query": "seats"},
                "response": {"query": "seats", "hits": ["seats #0", "seats #1"]},
            },
        ],
    }
    assert not journal_path(path).exists()
    with ToolRecorder(tools, path) as again:  # once: a recorded call is never made again
        assert again.call("search_docs", query="refund", limit=1) == first
    assert len(asked) == 2


def test_each_result_is_in_the_journal_before_call_returns(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    recorder = ToolRecorder(tools, path)
    result = recorder.call("search_docs", query="refund")
    lines = journal_path(path).read_text(encoding="utf-8").splitlines()
    assert [json.loads(json.loads(line)["response"]) for line in lines] == [result]
    assert ToolReplay(path).call("search_docs", query="refund") == result  # journal is read too
    recorder.close()


def test_replay_passes_in_any_order_and_any_number_of_times(tmp_path: Path) -> None:
    tools, asked = docs_tools()
    path = tmp_path / "c.json"
    questions: list[dict[str, Any]] = [
        {"query": "refund", "limit": 1},
        {"query": "seats"},
        {"limit": 3, "query": "x"},
    ]
    with ToolRecorder(tools, path) as recorder:
        recorded = [recorder.call("search_docs", **args) for args in questions]
    replay = ToolReplay(path, tools=tools)
    order = [2, 0, 0, 2, 1, 2]  # reversed, repeated, one question asked three times
    answers = [replay.call("search_docs", **dict(reversed(questions[i].items()))) for i in order]
    assert answers == [recorded[i] for i in order]
    assert replay.call("search_docs", query="seats") == recorded[1]  # fewer calls pass too
    assert len(asked) == 3  # only the recording run called the real tool


def test_the_story_no_tool_call_recorded_then_a_variant_asks_one_question(
    tmp_path: Path,
) -> None:
    tools, asked = docs_tools()
    path = tmp_path / "fixtures" / "refund-policy.json"

    def agent(box: Toolbox) -> str:
        return "Refunds are possible within 14 days."

    def curious_agent(box: Toolbox) -> str:
        hits = box.call("search_docs", query="refund window", limit=1)["hits"]
        return f"Refunds are possible within 14 days ({hits[0]})."

    with ToolRecorder(tools, path, case="refund-policy", clock=clock(T0)) as recorder:
        agent(recorder)
    assert document(path)["calls"] == []
    assert document(path)["recorded_at"] == T0

    with pytest.raises(MissingFixtureError) as caught:
        curious_agent(ToolReplay(path, tools=tools))
    assert asked == []  # the strict replay never fell through to the real tool
    error = caught.value
    assert (error.fixture, error.case, error.tool) == (str(path), "refund-policy", "search_docs")
    assert error.arguments == '{"limit":1,"query":"refund window"}'
    message = str(error)
    assert f"no recording of this tool call in {path}" in message
    assert "  tool:    search_docs\n" in message
    assert '  args:    {"limit":1,"query":"refund window"}\n' in message
    assert (
        "`make record ARGS='--case refund-policy --rerecord --reason \"the recorded "
        "results changed\"'`"
    ) in message

    with ToolRecorder(tools, path, case="refund-policy", mode="rerecord", clock=clock(T1)) as again:
        curious_agent(again)
    assert asked == [("refund window", 1)]
    assert curious_agent(ToolReplay(path)) == (
        "Refunds are possible within 14 days (refund window #0)."
    )
    assert len(asked) == 1
    assert document(previous_path(path))["calls"] == []  # kept for review
    assert document(path)["recorded_at"] == T1


def test_a_miss_shows_the_closest_recorded_call_of_the_same_tool(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path) as recorder:
        recorder.call("search_docs", query="refund window")
        recorder.call("search_docs", query="something else entirely")
    with pytest.raises(MissingFixtureError) as caught:
        ToolReplay(path).call("search_docs", query="refund windows")
    assert 'closest: {"query":"refund window"} (2 calls of search_docs recorded)' in str(
        caught.value
    )
    with pytest.raises(MissingFixtureError, match=r"no call of query_db is recorded; 2 other"):
        ToolReplay(path).call("query_db", sql="SELECT 1")


def test_a_missing_fixture_file_misses_every_call_and_says_so(tmp_path: Path) -> None:
    with pytest.raises(MissingFixtureError, match="does not exist yet") as caught:
        ToolReplay(tmp_path / "sql-explain.json").call("search_docs", query="x")
    assert "`make record ARGS='--case sql-explain --rerecord --reason" in str(caught.value)


def test_none_mode_is_strict_replay(tmp_path: Path) -> None:
    tools, asked = docs_tools()
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path) as recorder:
        recorder.call("search_docs", query="known")
    strict = ToolRecorder(tools, path, mode="none")
    assert strict.call("search_docs", query="known")["query"] == "known"
    with pytest.raises(MissingFixtureError, match="--rerecord"):
        strict.call("search_docs", query="unknown")
    assert asked == [("known", 2)]


def rerecorded(path: Path, queries: list[str]) -> tuple[bytes, list[tuple[str, int]]]:
    """Record queries a and b at T0, then re-record ``queries`` at T1: the first file's
    bytes, and every call the tool really got."""
    tools, asked = docs_tools()
    with ToolRecorder(tools, path, clock=clock(T0)) as first:
        first.call("search_docs", query="a")
        first.call("search_docs", query="b")
    before = path.read_bytes()
    with ToolRecorder(tools, path, mode="rerecord", clock=clock(T1)) as again:
        for query in queries:
            again.call("search_docs", query=query)
    assert previous_path(path).read_bytes() == before
    return before, asked


def test_rerecord_calls_again_keeps_the_old_file_and_drops_stale_calls(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    _, asked = rerecorded(path, ["a", "a"])  # the second a was called this run: served
    assert asked == [("a", 2), ("b", 2), ("a", 2)]
    assert [call["args"] for call in document(path)["calls"]] == [{"query": "a"}]
    assert document(path)["recorded_at"] == T1
    with pytest.raises(MissingFixtureError):
        ToolReplay(path).call("search_docs", query="b")


def test_a_rerecord_that_changes_no_result_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """Re-recording a second provider's cassettes re-runs the tools too: the same results,
    an hour later, must not rewrite the fixture, or the digest DATASET_CHANGES.md holds
    for it no longer matches."""
    path = tmp_path / "c.json"
    before, asked = rerecorded(path, ["b", "a"])
    assert asked == [("a", 2), ("b", 2), ("b", 2), ("a", 2)]  # both were really called again
    assert path.read_bytes() == before


def test_a_failed_rerecord_keeps_what_it_did_not_reach(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path) as first:
        first.call("search_docs", query="a")
        first.call("search_docs", query="b")

    def rerecord_until_it_fails() -> None:
        with ToolRecorder(tools, path, mode="rerecord") as again:
            again.call("search_docs", query="a")
            again.call("query_db", sql="SELECT 1")  # not registered: the run fails half-way

    with pytest.raises(UsageError, match="no read-only tool named 'query_db'"):
        rerecord_until_it_fails()
    replay = ToolReplay(path)
    assert [replay.call("search_docs", query=q)["query"] for q in "ab"] == ["a", "b"]


def test_recorded_at_stays_the_oldest_recording(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path, clock=clock(T0)) as first:
        first.call("search_docs", query="a")
    with ToolRecorder(tools, path, clock=clock(T1)) as second:
        second.call("search_docs", query="b")
    assert document(path)["recorded_at"] == T0
    assert len(document(path)["calls"]) == 2


@pytest.mark.parametrize(
    "make",
    [
        lambda tools, path: tools.for_run(),
        lambda tools, path: LiveToolbox(tools),
        lambda tools, path: ToolRecorder(tools, path),
        lambda tools, path: ToolReplay(path, tools=tools),
    ],
    ids=["for_run", "LiveToolbox", "ToolRecorder", "ToolReplay"],
)
def test_write_tools_get_a_fresh_store_every_run_and_are_never_recorded(
    tmp_path: Path, make: Callable[[Tools, Path], Any]
) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    first = make(tools, path)
    assert [first.call("save_note", text=t) for t in ("a", "b")] == [1, 2]
    assert first.call("notes") == ["a", "b"]
    if isinstance(first, ToolRecorder):
        first.close()
    second = make(tools, path)
    assert second.call("notes") == []  # the next run starts clean
    if isinstance(second, ToolRecorder):
        second.close()
    if path.exists():
        assert document(path)["calls"] == []


def test_a_replay_for_another_run_shares_the_answers_not_the_store(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path) as recorder:
        answer = recorder.call("search_docs", query="a")
    replay = ToolReplay(path, tools=tools)
    replay.call("save_note", text="from run 1")
    again = replay.for_run()
    assert again.call("notes") == []
    assert again.call("search_docs", query="a") == answer
    assert replay.call("notes") == ["from run 1"]


def test_results_are_fresh_values_an_agent_cannot_spoil(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path) as recorder:
        recorder.call("search_docs", query="a")["hits"].append("spoiled")
        assert "spoiled" not in recorder.call("search_docs", query="a")["hits"]
    replay = ToolReplay(path)
    replay.call("search_docs", query="a")["hits"].clear()
    assert replay.call("search_docs", query="a")["hits"] == ["a #0", "a #1"]


def test_a_result_that_is_not_json_is_refused_in_every_mode_and_not_recorded(
    tmp_path: Path,
) -> None:
    tools = Tools()
    tools.read_only("rows", lambda: [(1, "a")])
    tools.write("tags", lambda store: {"x", "y"})
    path = tmp_path / "c.json"
    with pytest.raises(UsageError, match=r"rows's result\[0\] is of type tuple"):
        tools.for_run().call("rows")
    with ToolRecorder(tools, path) as recorder:
        with pytest.raises(UsageError, match=r"rows's result\[0\] is of type tuple"):
            recorder.call("rows")
        with pytest.raises(UsageError, match="tags's result is of type set"):
            recorder.call("tags")
    assert document(path)["calls"] == []


def test_arguments_that_are_not_json_never_reach_a_tool(tmp_path: Path) -> None:
    tools, asked = docs_tools()
    with ToolRecorder(tools, tmp_path / "c.json") as recorder:
        with pytest.raises(UsageError, match=r"search_docs args\['query'\] is of type set"):
            recorder.call("search_docs", query={"a"})
        with pytest.raises(UsageError, match=r"save_note args\['text'\] is of type tuple"):
            recorder.call("save_note", text=("a",))
        assert recorder.store == {}
    with pytest.raises(UsageError, match="is nan"):
        tools.for_run().call("search_docs", query="x", limit=float("nan"))
    assert asked == []


def test_a_credential_in_a_result_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    secret = "db-password-0123456789"
    tools = Tools()
    tools.read_only("config", lambda: {"dsn": f"postgres://app:{secret}@db"})
    tools.read_only("ok", lambda: "fine")
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path, env={"DB_PASSWORD": secret}) as recorder:
        with pytest.raises(SecretLeak, match="DB_PASSWORD"):
            recorder.call("config")
        assert recorder.call("ok") == "fine"
    assert secret not in path.read_text(encoding="utf-8")
    assert [call["tool"] for call in document(path)["calls"]] == ["ok"]


def test_unknown_mode_and_bad_clock_are_usage_errors(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    with pytest.raises(UsageError, match="once"):
        ToolRecorder(tools, tmp_path / "c.json", mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not a UTC time"):
        ToolRecorder(tools, tmp_path / "c.json", clock=lambda: "yesterday")
    assert not (tmp_path / "c.json").exists()
    assert not (tmp_path / "c.json.lock").exists()


def test_a_second_recorder_on_the_same_fixture_is_refused(tmp_path: Path) -> None:
    tools, _ = docs_tools()
    path = tmp_path / "c.json"
    first = ToolRecorder(tools, path)
    with pytest.raises(CassetteLocked, match="another process"):
        ToolRecorder(tools, path)
    first.call("search_docs", query="kept")
    first.close()
    with ToolRecorder(tools, path) as second:
        second.call("search_docs", query="kept")
    assert (second.recorded, second.served) == (0, 1)


def test_a_failed_fold_keeps_the_old_file_and_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools, asked = docs_tools()
    path = tmp_path / "c.json"
    with ToolRecorder(tools, path) as first:
        first.call("search_docs", query="a")
    before = path.read_bytes()
    recorder = ToolRecorder(tools, path)
    recorder.call("search_docs", query="b")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", refuse)
        with pytest.raises(OSError, match="No space"):
            recorder.close()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "c.json.journal"]
    with ToolRecorder(tools, path, mode="none") as check:  # the journal is folded in next time
        assert check.call("search_docs", query="b")["query"] == "b"
    assert asked == [("a", 2), ("b", 2)]


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from gradekit._toolbox import ToolRecorder, Tools

    fixture, calls_log, block_on = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    tools = Tools()

    @tools.read_only("search_docs")
    def search_docs(query):
        with calls_log.open("a") as log:
            log.write(query + "\\n")
        if query == block_on:
            print("blocked", flush=True)
            time.sleep(600)
        return {"hits": ["about " + query]}

    recorder = ToolRecorder(tools, fixture)
    for number in range(10):
        recorder.call("search_docs", query=f"q{number}")
        print(f"answered q{number}", flush=True)
    recorder.close()
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_sigkill_mid_recording_loses_nothing_and_repeats_no_answered_call(tmp_path: Path) -> None:
    kill_and_resume(tmp_path, CHILD)
    replay = ToolReplay(tmp_path / "c.json")
    answers = [replay.call("search_docs", query=f"q{n}") for n in range(10)]
    assert answers == [{"hits": [f"about q{n}"]} for n in range(10)]
