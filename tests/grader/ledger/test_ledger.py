"""The grading ledger: append-only, hash-chained, safe for two graders at once, and a
re-grading of the same inputs recorded as unchanged."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.cli import main
from grader.ledger import GENESIS, LEDGER, LedgerCorrupt, append_events, read_ledger, verify_ledger
from tests.submissions import make_submission


def test_events_are_chained_in_order_and_readable_as_plain_json(tmp_path: Path) -> None:
    path = tmp_path / LEDGER
    append_events(path, [{"event": "batch", "n": 1}])
    append_events(path, [{"event": "run", "n": 2}, {"event": "run", "n": 3}])
    lines = path.read_bytes().splitlines()
    events = [json.loads(line) for line in lines]  # what jq reads
    assert [(e["seq"], e["n"]) for e in events] == [(0, 1), (1, 2), (2, 3)]
    assert events[0]["prev"] == GENESIS
    assert events[1]["prev"] == hashlib.sha256(lines[0]).hexdigest()
    assert events[2]["prev"] == hashlib.sha256(lines[1]).hexdigest()
    ok, message = verify_ledger(path)
    assert (
        ok and f"3 events, the chain holds, head {hashlib.sha256(lines[2]).hexdigest()}" in message
    )


def test_an_edited_middle_event_breaks_the_chain_at_the_next_line(tmp_path: Path) -> None:
    path = tmp_path / LEDGER
    append_events(
        path,
        [
            {"event": "run", "total": "40.00"},
            {"event": "run", "total": "50.00"},
            {"event": "run", "total": "60.00"},
        ],
    )
    text = path.read_text("utf-8")
    path.write_text(text.replace('"total":"50.00"', '"total":"95.00"'), "utf-8")
    ok, message = verify_ledger(path)
    assert not ok
    assert message.startswith(f"{path}:3: the chain breaks here")
    assert main(["ledger", "verify", str(tmp_path)]) == 1


def test_a_removed_event_breaks_the_chain(tmp_path: Path) -> None:
    path = tmp_path / LEDGER
    append_events(path, [{"event": "run", "n": n} for n in range(3)])
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[2])
    ok, message = verify_ledger(path)
    assert not ok and f"{path}:2: the chain breaks here" in message


def test_a_torn_last_line_is_reported_and_set_aside_by_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / LEDGER
    append_events(path, [{"event": "run", "n": 0}, {"event": "run", "n": 1}])
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"event":"run","n":2,"pr')  # a crash mid-append
    ledger = read_ledger(path)
    assert [e["n"] for e in ledger.events] == [0, 1]
    assert "line 3 was cut off mid-append" in ledger.torn
    ok, message = verify_ledger(path)
    assert ok and "a torn last line (24 bytes) is left out" in message

    append_events(path, [{"event": "run", "n": 3}])
    assert [e["n"] for e in read_ledger(path).events] == [0, 1, 3]
    assert verify_ledger(path)[0]
    assert (tmp_path / f"{LEDGER}.torn-{len(whole)}").read_bytes() == b'{"event":"run","n":2,"pr'


def test_a_ledger_read_again_is_never_stale(tmp_path: Path) -> None:
    """read_ledger keeps its last read of an unchanged file: an append, an edit of the same
    length, a file put in its place or another folder's ledger is read anew."""
    path, other = tmp_path / LEDGER, tmp_path / "other" / LEDGER
    append_events(path, [{"event": "batch", "n": 1}])
    first = read_ledger(path)
    assert read_ledger(path) is first  # unchanged: the same read
    append_events(path, [{"event": "run", "n": 2}])
    assert [e["n"] for e in read_ledger(path).events] == [1, 2]
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"n":2', b'"n":7'))  # same length, edited in place
    assert [e["n"] for e in read_ledger(path).events] == [1, 7]
    path.write_bytes(data.replace(b'"n":2', b'"n":{'))  # the same length again, not JSON
    with pytest.raises(LedgerCorrupt, match=":2: not a JSON event"):
        read_ledger(path)
    replacement = tmp_path / "replacement"
    replacement.write_bytes(data)
    replacement.replace(path)  # another file in its place, of the same bytes
    assert [e["n"] for e in read_ledger(path).events] == [1, 2]
    append_events(other, [{"event": "batch", "n": 3}])
    assert [e["n"] for e in read_ledger(other).events] == [3]
    assert [e["n"] for e in read_ledger(path).events] == [1, 2]


def test_a_line_that_is_not_json_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / LEDGER
    append_events(path, [{"event": "run"}])
    path.write_bytes(b"not json\n" + path.read_bytes())
    with pytest.raises(LedgerCorrupt, match=r"ledger.jsonl:1: not a JSON event"):
        read_ledger(path)


def test_two_graders_appending_at_once_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / LEDGER
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
        from pathlib import Path
        from grader.ledger._ledger import append_events
        for n in range(150):
            append_events(Path({str(path)!r}), [{{"event": "run", "who": sys.argv[1], "n": n}}])
        """)
    writers = [subprocess.Popen([sys.executable, "-c", script, who]) for who in ("a", "b")]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    events = read_ledger(path).events
    assert len(events) == 300
    assert verify_ledger(path)[0]
    for who in ("a", "b"):
        assert [e["n"] for e in events if e["who"] == who] == list(range(150))


@pytest.mark.slow
def test_grading_the_same_inputs_again_is_unchanged_and_adds_no_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    subs = tmp_path / "subs"
    make_submission(subs / "alice")
    out = tmp_path / "grades"
    grade = ["grade", str(subs), "--out", str(out), "--wall", "process", "--quiet"]
    assert main(grade) == 0
    assert main(grade) == 0
    shown = capsys.readouterr().out
    events = read_ledger(out / LEDGER).events
    assert [e["event"] for e in events] == ["batch", "run", "batch"]
    run = events[1]
    assert (run["submission"], run["student"], run["status"], run["total"]) == (
        "alice",
        "alice",
        "graded",
        "100.00",
    )
    assert "cassettes/refund-policy.json" in run["inputs"] and "FAILURES.md" in run["inputs"]
    assert events[2]["unchanged"] == ["alice"]
    assert "(unchanged: the same inputs as ledger event 1)" in shown
    # A changed input is a new run.
    failures = subs / "alice" / "FAILURES.md"
    failures.write_text(failures.read_text("utf-8") + "\n", "utf-8")
    assert main(grade) == 0
    events = read_ledger(out / LEDGER).events
    assert [e["event"] for e in events] == ["batch", "run", "batch", "batch", "run"]
    assert events[4]["inputs"]["FAILURES.md"] != run["inputs"]["FAILURES.md"]
    assert main(["ledger", "verify", str(out)]) == 0


@pytest.mark.slow
def test_history_names_the_cause_of_each_change_and_the_first_divergence(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Four gradings of alice: a code change, a re-recorded cassette and a rubric bump, each
    named as the cause, each with the first criterion and sub-check that changed."""
    subs = tmp_path / "subs"
    alice = make_submission(subs / "alice")
    out = tmp_path / "grades"

    def grade(*extra: str) -> None:
        main(["grade", str(subs), "--out", str(out), "--wall", "process", "--quiet", *extra])

    grade()
    agent = alice / "lab" / "agent.py"
    agent.write_text(
        agent.read_text("utf-8").replace(
            "    return answer\n", '    return answer + "\\n-- " + provider.name\n'
        ),
        "utf-8",
    )
    grade()
    cassette = alice / "cassettes" / "sql-explain.json"
    document = json.loads(cassette.read_bytes())
    entry = next(iter(document["entries"].values()))
    entry["response"] = entry["response"] + " (re-recorded)"
    cassette.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", "utf-8")
    grade()
    rubric = tmp_path / "rubric" / "bootcamp.toml"
    rubric.parent.mkdir()
    text = (Path(__file__).resolve().parents[3] / "rubric" / "bootcamp.toml").read_text("utf-8")
    rubric.write_text(text.replace("version = 2", 'version = 3\nchanges = "a copy"', 1), "utf-8")
    grade("--rubric", str(rubric))
    capsys.readouterr()

    assert main(["history", "alice", "--out", str(out)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == f"alice: 4 grade(s) in {out / LEDGER}"
    grades = [line for line in shown if line.startswith("#")]
    assert [line.split(":")[0] for line in grades] == [
        f"#{n}  ledger event {seq}" for n, seq in ((1, 1), (2, 3), (3, 5), (4, 7))
    ]
    blocks = "\n".join(shown).split("\n#")[1:]
    assert "changed: inputs changed: lab/agent.py\n" in blocks[1] + "\n"
    assert "first divergence: contract_stability/refund-policy: " in blocks[1]
    assert "changed: inputs changed: cassettes/sql-explain.json" in blocks[2]
    assert "first divergence: contract_stability/sql-explain: " in blocks[2]
    assert "changed: rubric provider-swap-lab v2 -> v3" in blocks[3]
    assert "inputs changed" not in blocks[3]
    assert main(["history", "nobody", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("nobody: no grade in")


@pytest.mark.slow
def test_a_weights_only_change_shows_each_weight_old_and_new_and_the_rubrics_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The course moves five points from stability to tracing, and says why: history shows
    both weights, old and new, the reason, and a first divergence that is the same result
    worth another share, not two identical texts."""
    subs = tmp_path / "subs"
    make_submission(subs / "alice")
    out = tmp_path / "grades"
    kit = (Path(__file__).resolve().parents[3] / "rubric" / "bootcamp.toml").read_text("utf-8")
    rubric = tmp_path / "course" / "bootcamp.toml"
    rubric.parent.mkdir()
    rubric.write_text(kit, "utf-8")
    grade = [
        "grade",
        str(subs),
        "--out",
        str(out),
        "--wall",
        "process",
        "--quiet",
        "--rubric",
        str(rubric),
    ]
    assert main(grade) == 0
    reason = "tracing found more broken agents than stability did in week 3"
    moved = kit.replace("version = 2", f'version = 3\nchanges = "{reason}"', 1)
    moved = moved.replace(
        'weight = 30\ncheck = "contract_stability"', 'weight = 25\ncheck = "contract_stability"', 1
    )
    moved = moved.replace('weight = 20\ncheck = "tracing"', 'weight = 25\ncheck = "tracing"', 1)
    assert 'weight = 25\ncheck = "contract_stability"' in moved
    assert 'weight = 25\ncheck = "tracing"' in moved
    rubric.write_text(moved, "utf-8")
    assert main(grade) == 0
    capsys.readouterr()

    assert main(["history", "alice", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "changed: rubric provider-swap-lab v2 -> v3\n" in shown
    assert "changed: weights: contract_stability 30 -> 25; tracing 20 -> 25\n" in shown
    assert f"changed: why (the rubric says): {reason}\n" in shown
    assert (
        'first divergence: contract_stability/refund-policy: the same result, "identical '
        "under every provider label and hash seed\", worth 7.50 -> 6.25 (the rubric's "
        "weights changed)"
    ) in shown
    # Two reports alone show the weights too (a report keeps each criterion's max, not the
    # rubric's reason).
    old, new = sorted(
        (out / "archive").glob("*.json"),
        key=lambda p: json.loads(p.read_bytes())["rubric"]["version"],
    )
    assert main(["report", "diff", str(old), str(new)]) == 0
    compared = capsys.readouterr().out
    assert "  changed: weights: contract_stability 30 -> 25; tracing 20 -> 25\n" in compared
    assert "why" not in compared


@pytest.mark.slow
def test_a_changed_rubric_must_bump_its_version_and_a_new_one_names_what_it_supersedes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    subs = tmp_path / "subs"
    make_submission(subs / "alice")
    out = tmp_path / "grades"
    kit = (Path(__file__).resolve().parents[3] / "rubric" / "bootcamp.toml").read_text("utf-8")
    rubric = tmp_path / "bootcamp.toml"
    rubric.write_text(kit, "utf-8")
    grade = [
        "grade",
        str(subs),
        "--out",
        str(out),
        "--rubric",
        str(rubric),
        "--quiet",
        "--wall",
        "process",
    ]
    assert main(grade) == 0
    first = read_ledger(out / LEDGER).events[0]["rubric"]
    assert 'title = "Pin the contract, not the model"' in kit
    rubric.write_text(
        kit.replace('title = "Pin the contract, not the model"', 'title = "Pin the contract"', 1),
        "utf-8",
    )  # the same version, other content
    capsys.readouterr()
    assert main(grade) == 2
    error = capsys.readouterr().err
    assert (
        "rubric provider-swap-lab version 2 changed since ledger event 0 graded with it" in error
        and "bump [rubric] version" in error
    )
    assert len(read_ledger(out / LEDGER).events) == 2  # nothing graded, nothing recorded
    rubric.write_text(
        rubric.read_text("utf-8").replace(
            "version = 2", 'version = 3\nchanges = "a shorter title"', 1
        ),
        "utf-8",
    )
    assert main(grade) == 0
    bumped = read_ledger(out / LEDGER).events[-2]["rubric"]
    assert (bumped["version"], bumped["supersedes"]) == (
        3,
        {"version": 2, "sha256": first["sha256"]},
    )
