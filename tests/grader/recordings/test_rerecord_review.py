"""Review of recordings: staleness, diffs of real re-recordings, the dataset change log."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gradekit import CassetteCorrupt, FakeProvider, Mode, Recorder, UsageError, prompt_key
from gradekit.internal import previous_path
from grader.recordings import (
    Change,
    ChangeLogCorrupt,
    RecordingError,
    append_change,
    change_matches,
    check_change,
    diff_files,
    diff_recordings,
    digest_file,
    parse_age,
    read_changes,
    render_diff,
    render_stale,
    rerecord_summary,
    stale,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DIGEST = "ab" * 32


def record(
    path: Path, answers: dict[str, str], *, at: str = "2026-10-01T00:00:00Z", mode: Mode = "once"
) -> None:
    """Ask every prompt of ``answers`` through a real Recorder over a scripted provider."""
    with Recorder(FakeProvider(answers), path, mode=mode, clock=lambda: at) as recorder:
        for prompt in answers:
            recorder.complete(prompt)


def write_fixture(path: Path, recorded_at: str, calls: list[dict[str, object]]) -> Path:
    document = {
        "format": "gradekit.fixtures/1",
        "case": path.stem,
        "recorded_at": recorded_at,
        "calls": calls,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


# ---------------------------------------------------------------- diffs of re-recordings


@pytest.fixture
def rerecorded(tmp_path: Path) -> Path:
    """A cassette recorded, then re-recorded with one answer changed, one added, one dropped."""
    path = tmp_path / "cassettes" / "refund.json"
    record(path, {"kept": "same answer", "reworded": "old answer", "dropped": "gone"})
    record(
        path,
        {"kept": "same answer", "reworded": "new answer\nsecond line", "added": "fresh"},
        mode="rerecord",
        at="2026-11-01T00:00:00Z",
    )
    return path


def test_rerecord_summary_sorts_every_key_into_added_removed_changed(rerecorded: Path) -> None:
    summary = rerecord_summary(rerecorded)
    assert summary is not None
    assert summary.kind == "cassette"
    assert summary.keys("added") == (prompt_key("added"),)
    assert summary.keys("removed") == (prompt_key("dropped"),)
    assert summary.keys("changed") == (prompt_key("reworded"),)
    assert summary.unchanged == 1
    assert summary.keys() == tuple(sorted(prompt_key(p) for p in ("added", "dropped", "reworded")))
    assert summary.old_name == str(previous_path(rerecorded))


def test_render_diff_shows_the_prompt_and_a_unified_diff_of_the_response(
    rerecorded: Path,
) -> None:
    summary = rerecord_summary(rerecorded)
    assert summary is not None
    old, new = str(previous_path(rerecorded)), str(rerecorded)
    blocks = {
        prompt_key("added"): [f"+ added   {prompt_key('added')}  added"],
        prompt_key("dropped"): [f"- removed {prompt_key('dropped')}  dropped"],
        prompt_key("reworded"): [
            f"~ changed {prompt_key('reworded')}  reworded",
            f"    --- {old}",
            f"    +++ {new}",
            "    @@ -1 +1,2 @@",
            "    -old answer",
            "    +new answer",
            "    +second line",
        ],
    }
    expected = [f"cassette diff {old} -> {new}: 1 added, 1 removed, 1 changed, 1 unchanged"]
    for key in sorted(blocks):
        expected += blocks[key]
    assert render_diff(summary) == "\n".join(expected) + "\n"


def test_no_previous_file_means_no_summary(tmp_path: Path) -> None:
    path = tmp_path / "refund.json"
    record(path, {"q": "a"})
    record(path, {"q": "a", "r": "b"})  # mode once keeps no previous file
    assert rerecord_summary(path) is None


def test_a_rerecord_that_changes_nothing_has_no_differences(tmp_path: Path) -> None:
    path = tmp_path / "refund.json"
    record(path, {"q": "a", "r": "b"})
    record(path, {"q": "a", "r": "b"}, mode="rerecord", at="2026-11-01T00:00:00Z")
    summary = rerecord_summary(path)
    assert summary is not None and summary.keys() == () and summary.unchanged == 2
    assert render_diff(summary).endswith("0 added, 0 removed, 0 changed, 2 unchanged\n")


def test_only_a_trailing_newline_differs_and_the_diff_still_shows_it(tmp_path: Path) -> None:
    path = tmp_path / "refund.json"
    record(path, {"q": "answer"})
    record(path, {"q": "answer\n"}, mode="rerecord")
    summary = rerecord_summary(path)
    assert summary is not None and summary.keys("changed") == (prompt_key("q"),)
    marked = "    -answer\n    \\ No newline at end of response\n    +answer\n"
    assert marked in render_diff(summary)


def test_fixture_diff_keys_by_canonical_args_and_pretty_prints_responses(tmp_path: Path) -> None:
    old = write_fixture(
        tmp_path / "old" / "refund.json",
        "2026-10-01T00:00:00Z",
        [
            {
                "tool": "query_db",
                "args": {"sql": "select 1", "opts": {"b": 2, "a": 1}},
                "response": {"rows": [[1, "a"]]},
            },
            {"tool": "read_docs", "args": {"words": "refund"}, "response": 1},
        ],
    )
    new = write_fixture(
        tmp_path / "new" / "refund.json",
        "2026-11-01T00:00:00Z",
        [
            {"tool": "read_docs", "args": {"words": "refund"}, "response": True},
            {
                "tool": "query_db",
                "args": {"opts": {"a": 1, "b": 2}, "sql": "select 1"},
                "response": {"rows": [[1, "b"]]},
            },
        ],
    )
    diff = diff_files(old, new)
    query = 'query_db {"opts":{"a":1,"b":2},"sql":"select 1"}'
    # Argument order does not make a new key; 1 and true are different answers.
    assert diff.keys("changed") == (query, 'read_docs {"words":"refund"}')
    assert (diff.keys("added"), diff.keys("removed"), diff.unchanged) == ((), (), 0)
    text = render_diff(diff)
    assert f"~ changed {query}\n" in text
    assert '    -      "a"\n    +      "b"\n' in text  # one line per JSON value, indented
    assert "    -1\n    +true\n" in text
    assert "No newline" not in text  # both sides lack one: nothing to point out


def test_diffing_a_cassette_against_a_fixture_is_refused(tmp_path: Path) -> None:
    cassette = tmp_path / "refund.json"
    record(cassette, {"q": "a"})
    fixture = write_fixture(tmp_path / "fixtures" / "refund.json", "2026-10-01T00:00:00Z", [])
    with pytest.raises(UsageError, match=r"is a cassette and .* is a fixture: diff two"):
        diff_files(cassette, fixture)


def test_diff_of_something_that_is_no_recording_says_so(tmp_path: Path) -> None:
    other = tmp_path / "package.json"
    other.write_text('{"name": "x", "version": 1}', encoding="utf-8")
    with pytest.raises(UsageError, match="neither a cassette nor a fixture"):
        diff_recordings(other.read_bytes(), other.read_bytes(), old_name="a", new_name="b")
    with pytest.raises(UsageError, match=r"cannot read .*missing\.json"):
        diff_files(tmp_path / "missing.json", other)


# ---------------------------------------------------------------------------- staleness


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    cassettes = tmp_path / "cassettes"
    record(cassettes / "fresh.json", {"q": "a"}, at="2026-11-20T12:00:00Z")
    record(cassettes / "month.json", {"q": "a"}, at="2026-11-01T00:00:00Z")  # exactly 30 days
    record(cassettes / "mixed.json", {"q": "a"}, at="2026-09-01T00:00:00Z")
    record(cassettes / "mixed.json", {"q": "a", "r": "b"}, at="2026-11-25T00:00:00Z")
    record(cassettes / "mixed.json", {"q": "c"}, mode="rerecord", at="2026-11-30T00:00:00Z")
    (cassettes / "legacy.json").write_text('{"0123456789abcdef": "flat answer"}', "utf-8")
    (cassettes / "notes.json").write_text("[1, 2, 3]", encoding="utf-8")  # not a recording
    write_fixture(
        tmp_path / "fixtures" / "refund.json",
        "2026-10-15T06:00:00Z",
        [
            {"tool": "read_docs", "args": {"words": "a"}, "response": "x"},
            {"tool": "read_docs", "args": {"words": "b"}, "response": "y"},
        ],
    )
    return tmp_path


def rows_of(root: Path, older_than: timedelta | None = None) -> list[tuple[str, str, int, object]]:
    rows = stale([root / "cassettes", root / "fixtures"], now=NOW, older_than=older_than)
    return [
        (r.path.name, r.kind, r.recordings, None if r.age is None else r.age.days) for r in rows
    ]


def test_stale_lists_by_oldest_recording_unknown_first(dataset: Path) -> None:
    # mixed.json was re-recorded on 11-30 asking only "q": one recording, a day old. Its
    # .previous.json (oldest recording 09-01) and notes.json (not a recording) are not listed.
    assert rows_of(dataset) == [
        ("legacy.json", "cassette", 1, None),
        ("refund.json", "fixture", 2, 46),
        ("month.json", "cassette", 1, 30),
        ("fresh.json", "cassette", 1, 10),
        ("mixed.json", "cassette", 1, 1),
    ]


def test_oldest_is_the_minimum_over_entries(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    record(path, {"late": "a"}, at="2026-11-25T00:00:00Z")
    record(path, {"late": "a", "early": "b"}, at="2026-09-01T00:00:00Z")
    [row] = stale([path], now=NOW, older_than=None)
    assert row.oldest == datetime(2026, 9, 1, tzinfo=UTC)
    assert row.age == timedelta(days=91)


def test_older_than_is_strict_and_keeps_unknown_ages(dataset: Path) -> None:
    assert rows_of(dataset, parse_age("30d")) == [
        ("legacy.json", "cassette", 1, None),
        ("refund.json", "fixture", 2, 46),
    ]
    assert [name for name, *_ in rows_of(dataset, parse_age("2w"))] == [
        "legacy.json",
        "refund.json",
        "month.json",
    ]


def test_render_stale_is_a_table_in_days(dataset: Path) -> None:
    rows = stale(
        [dataset / "fixtures", dataset / "cassettes" / "legacy.json"], now=NOW, older_than=None
    )
    fixture, legacy = dataset / "fixtures" / "refund.json", dataset / "cassettes" / "legacy.json"
    assert render_stale(rows, NOW) == (
        "as of 2026-12-01T00:00:00Z: 2 file(s), stalest first\n"
        "AGE      KIND      RECORDINGS  OLDEST                PATH\n"
        f"unknown  cassette  1           -                     {legacy}\n"
        f"46d      fixture   2           2026-10-15T06:00:00Z  {fixture}\n"
    )
    empty = "as of 2026-12-01T00:00:00Z: no cassette or fixture file to list\n"
    assert render_stale([], NOW) == empty


def test_a_file_named_twice_is_listed_once(dataset: Path) -> None:
    fixture = dataset / "fixtures" / "refund.json"
    assert len(stale([fixture, dataset / "fixtures", fixture], now=NOW, older_than=None)) == 1


def test_stale_refuses_what_it_cannot_read(dataset: Path) -> None:
    with pytest.raises(UsageError, match="no such file or folder"):
        stale([dataset / "nowhere"], now=NOW, older_than=None)
    with pytest.raises(UsageError, match="neither a cassette nor a fixture"):
        stale([dataset / "cassettes" / "notes.json"], now=NOW, older_than=None)
    (dataset / "cassettes" / "torn.json").write_text('{"format": "gradekit.cas', "utf-8")
    with pytest.raises(RecordingError, match=r"torn\.json: not UTF-8 JSON"):
        stale([dataset / "cassettes"], now=NOW, older_than=None)  # never skipped as empty


def test_a_cassette_with_a_bad_time_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    record(path, {"q": "a"}, at="last tuesday")
    with pytest.raises(RecordingError, match=r"case\.json: recorded_at 'last tuesday'"):
        stale([path], now=NOW, older_than=None)
    path.write_text('{"format": "gradekit.cassette/1", "case": "x", "entries": []}', "utf-8")
    with pytest.raises(CassetteCorrupt):
        stale([path], now=NOW, older_than=None)


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("2w", timedelta(weeks=2)),
        (" 3D ", timedelta(days=3)),
        ("0d", timedelta(0)),
    ],
)
def test_parse_age(text: str, age: timedelta) -> None:
    assert parse_age(text) == age


@pytest.mark.parametrize("text", ["30", "d", "1.5d", "30m", "-1d", "", "9" * 20 + "w"])
def test_parse_age_refuses_with_an_example(text: str) -> None:
    with pytest.raises(UsageError, match=r"h \(hours\), d \(days\) or w \(weeks\), e.g. 30d"):
        parse_age(text)


# ---------------------------------------------------------------------------- change log


def test_change_log_round_trip_and_format(rerecorded: Path, tmp_path: Path) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    summary = rerecord_summary(rerecorded)
    assert summary is not None
    digest = digest_file(rerecorded)
    assert digest == hashlib.sha256(rerecorded.read_bytes()).hexdigest()
    append_change(
        log,
        date="2026-11-01",
        case="refund",
        kind="cassette",
        changed_keys=summary.keys(),
        reason="  provider upgraded;\n answers reworded ",
        digests={"cassettes/refund.json": digest},
    )
    keys = sorted(prompt_key(p) for p in ("added", "dropped", "reworded"))
    assert read_changes(log) == [
        Change(
            "2026-11-01",
            "refund",
            "cassette",
            "provider upgraded; answers reworded",
            tuple(keys),
            {"cassettes/refund.json": digest},
        )
    ]
    assert log.read_text("utf-8").split("\n## ", 1)[1] == "\n".join(
        [
            "2026-11-01 refund",
            "",
            "- kind: cassette",
            "- reason: provider upgraded; answers reworded",
            "- sha256 after the change:",
            f"  - `cassettes/refund.json` {digest}",
            "- keys changed (3):",
            *[f"  - `{key}`" for key in keys],
            "",
        ]
    )


def test_change_log_is_append_only(tmp_path: Path) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    append_change(
        log,
        date="2026-11-01",
        case="a",
        kind="cassette",
        changed_keys=["k1"],
        reason="first",
        digests={"cassettes/a.json": DIGEST},
    )
    before = log.read_bytes()
    append_change(
        log,
        date="2026-11-02",
        case="b",
        kind="fixture",
        changed_keys=[],
        reason="second",
        digests={"fixtures/b.json": "cd" * 32},
    )
    assert log.read_bytes().startswith(before) and len(log.read_bytes()) > len(before)
    changes = read_changes(log)
    assert [(c.date, c.case, c.kind, c.reason, c.changed_keys) for c in changes] == [
        ("2026-11-01", "a", "cassette", "first", ("k1",)),
        ("2026-11-02", "b", "fixture", "second", ()),
    ]


def test_a_log_without_a_final_newline_gets_one_before_the_entry(tmp_path: Path) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    log.write_text("# Our dataset\nhand-written intro", encoding="utf-8")
    append_change(
        log,
        date="2026-11-01",
        case="a",
        kind="cassette",
        changed_keys=["k"],
        reason="r",
        digests={"a.json": DIGEST},
    )
    expected = "# Our dataset\nhand-written intro\n\n## 2026-11-01 a\n"
    assert log.read_text("utf-8").startswith(expected)
    assert [c.case for c in read_changes(log)] == ["a"]


def test_awkward_keys_and_file_names_round_trip_exactly(tmp_path: Path) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    keys = ['search_docs {"q":"`code` é \u2028 x"}', 'query_db {"sql":"select \'` \'"}']
    digests = {"fixtures/odd ` name.json": DIGEST, "cassettes/a.json": "01" * 32}
    append_change(
        log,
        date="2026-11-01",
        case="a",
        kind="fixture",
        changed_keys=keys,
        reason="r",
        digests=digests,
    )
    [change] = read_changes(log)
    assert change.changed_keys == tuple(sorted(keys)) and dict(change.digests) == digests


def test_change_matches_the_files_it_recorded(rerecorded: Path, tmp_path: Path) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    name = rerecorded.relative_to(tmp_path).as_posix()
    append_change(
        log,
        date="2026-11-01",
        case="refund",
        kind="cassette",
        changed_keys=["k"],
        reason="r",
        digests={name: digest_file(rerecorded)},
    )
    [change] = read_changes(log)
    assert change_matches(change, tmp_path)
    record(rerecorded, {"kept": "edited again"}, mode="rerecord")
    assert not change_matches(change, tmp_path)
    rerecorded.unlink()
    assert not change_matches(change, tmp_path)


@pytest.mark.parametrize("reason", [None, "", " \n\t "])
def test_a_missing_reason_says_to_pass_one_and_writes_nothing(
    tmp_path: Path, reason: str | None
) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    with pytest.raises(UsageError, match='pass --reason "'):
        append_change(
            log,
            date="2026-11-01",
            case="a",
            kind="cassette",
            changed_keys=["k"],
            reason=reason,
            digests={"a.json": DIGEST},
        )
    assert not log.exists()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("date", "2026-13-01", "date '2026-13-01' is not YYYY-MM-DD"),
        ("date", "1 Nov 2026", "is not YYYY-MM-DD"),
        ("case", "two\nlines", "must be one line"),
        ("kind", "model", "kind 'model' is not one of cassette, fixture or http"),
        ("digests", {"a.json": "ABC"}, "lowercase SHA-256 hex"),
        ("digests", {}, "lowercase SHA-256 hex"),
        ("changed_keys", ["tool\n{}"], "contains a line break"),
    ],
)
def test_an_entry_that_could_not_be_read_back_is_refused(
    tmp_path: Path, field: str, value: object, problem: str
) -> None:
    arguments: dict[str, object] = {
        "date": "2026-11-01",
        "case": "a",
        "kind": "cassette",
        "changed_keys": ["k"],
        "digests": {"a.json": DIGEST},
    }
    arguments[field] = value
    log = tmp_path / "DATASET_CHANGES.md"
    with pytest.raises(UsageError, match=problem):
        append_change(log, reason="r", **arguments)  # type: ignore[arg-type]
    assert not log.exists()


def test_a_missing_log_has_no_changes(tmp_path: Path) -> None:
    assert read_changes(tmp_path / "DATASET_CHANGES.md") == []


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda t: t.replace("  - `k2`\n", ""), r":4: 1 keys listed, 2 declared"),
        (
            lambda t: t.replace("- kind: cassette\n", "- kind: cassette\nlooks fine to me\n"),
            r":7: unexpected line 'looks fine to me'",
        ),
        (lambda t: t.replace(DIGEST, DIGEST[:-1]), r":9: unreadable sha256 line"),
        (lambda t: t.replace("- reason: r\n", ""), r":4: an entry needs a kind"),
        (
            lambda t: t.replace("- kind: cassette\n", "- kind: cassette\n- kind: fixture\n"),
            r":7: a second 'kind'",
        ),
        (lambda t: t.replace("## 2026-11-01 a", "## Nov 1 a"), r":4: a header is"),
    ],
)
def test_a_hand_edited_log_is_reported_with_its_line(
    tmp_path: Path, edit: Callable[[str], str], problem: str
) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    log.write_text("# Log\n\n", encoding="utf-8")
    append_change(
        log,
        date="2026-11-01",
        case="a",
        kind="cassette",
        changed_keys=["k1", "k2"],
        reason="r",
        digests={"a.json": DIGEST},
    )
    log.write_text(edit(log.read_text("utf-8")), encoding="utf-8")
    with pytest.raises(ChangeLogCorrupt, match=problem + r".*git checkout -- "):
        read_changes(log)


def test_an_sdk_labs_http_cassette_change_is_logged_and_read_back_as_kind_http(
    tmp_path: Path,
) -> None:
    log = tmp_path / "DATASET_CHANGES.md"
    append_change(
        log,
        date="2026-11-01",
        case="refund-policy",
        kind="http",
        changed_keys=["0123456789abcdef#2"],
        reason="new model",
        digests={"cassettes/refund-policy.http.json": DIGEST},
    )
    [change] = read_changes(log)
    assert (change.kind, change.changed_keys) == ("http", ("0123456789abcdef#2",))
    assert dict(change.digests) == {"cassettes/refund-policy.http.json": DIGEST}
    log.write_text(log.read_text("utf-8").replace("- kind: http", "- kind: model"), "utf-8")
    with pytest.raises(ChangeLogCorrupt, match=r"a kind \(cassette, fixture or http\)"):
        read_changes(log)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("date", "2026-02-30", "is not YYYY-MM-DD"),
        ("case", " padded", "must be one line"),
        ("kind", "model", "is not one of cassette, fixture or http"),
        ("reason", " ", 'pass --reason "'),
    ],
)
def test_check_change_refuses_what_append_change_would_before_anything_is_recorded(
    field: str,
    value: str,
    problem: str,
) -> None:
    arguments = {"date": "2026-11-01", "case": "a", "kind": "http", "reason": "r"}
    check_change(**arguments)  # what record --rerecord logs passes
    with pytest.raises(UsageError, match=problem):
        check_change(**(arguments | {field: value}))
