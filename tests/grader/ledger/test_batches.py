"""A batch as the ledger keeps it: its status, the counts it was asked for and got, who ran
it and when (labels, outside every report's digest), and an idempotency key whose repeat
reuses the batch instead of grading again. ``history`` and the dashboard show it, and a
merge of shards says it of the whole grading.

It tests the private ``_itself`` (``grader.ledger._merge``) on purpose: the counts a merge
of shards says of the whole grading."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from grader.cli import main
from grader.dashboard import load_cohort
from grader.ledger import (
    GRADEBOOK,
    LEDGER,
    REPORT,
    BatchInfo,
    append_grading,
    batch_status,
    read_ledger,
)
from grader.ledger._merge import _itself
from grader.outputs import read_gradebook
from grader.rubric import KIT_RUBRIC, load_rubric
from tests.submissions import make_submission

EPOCH = "1767225600"  # 2026-01-01T00:00:00Z


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cohort(tmp_path: Path) -> Path:
    """alice and bob, each a copy of the reference lab."""
    subs = tmp_path / "subs"
    for student in ("alice", "bob"):
        make_submission(subs / student)
    return subs


def grade(subs: Path, out: Path, *flags: str) -> tuple[int, str, str]:
    return run("grade", str(subs), "--out", str(out), "--wall", "process", "--quiet", *flags)


def batches(out: Path) -> list[dict[str, object]]:
    return [dict(e) for e in read_ledger(out / LEDGER).events if e["event"] == "batch"]


@pytest.mark.slow
def test_a_batch_says_its_status_counts_operator_and_time_outside_every_digest(
    cohort: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    monkeypatch.setenv("GRADEKIT_OPERATOR", "ta-lee")
    first, second = tmp_path / "one", tmp_path / "two"
    assert grade(cohort, first)[0] == 0
    [batch] = batches(first)
    assert {
        key: batch[key]
        for key in ("status", "requested", "completed", "failed", "operator", "started", "at")
    } == {
        "status": "completed",
        "requested": 2,
        "completed": 2,
        "failed": 0,
        "operator": "ta-lee",
        "started": "2026-01-01T00:00:00Z",
        "at": "2026-01-01T00:00:00Z",
    }
    assert "idempotency_key" not in batch
    # Another operator, another time: the reports are the same bytes, the digests the same.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(EPOCH) + 86400))
    assert grade(cohort, second, "--operator", "kim")[0] == 0
    assert (first / "alice" / REPORT).read_bytes() == (second / "alice" / REPORT).read_bytes()
    [other] = batches(second)
    assert (other["operator"], other["at"]) == ("kim", "2026-01-02T00:00:00Z")
    assert {k: v for k, v in other.items() if k not in ("operator", "at", "started")} == {
        k: v for k, v in batch.items() if k not in ("operator", "at", "started")
    }
    # history and the dashboard show it.
    code, shown, _ = run("history", "alice", "--out", str(first))
    assert (
        code == 0
        and "    batch: ledger event 0, completed (2 of 2 graded), by ta-lee at "
        "2026-01-01T00:00:00Z"
        in shown
    )
    # A batch cut off by Ctrl-C: what finished is recorded, and the batch is partial.
    rubric = load_rubric(KIT_RUBRIC)
    [alice] = [
        row
        for row in read_gradebook((first / GRADEBOOK).read_bytes())[1]
        if row.submission == "alice"
    ]
    append_grading(
        first / LEDGER,
        rubric,
        [alice],
        first,
        "test",
        interrupted=["bob"],
        info=BatchInfo("ta-lee", "2026-01-01T00:00:00Z", "cut"),
    )
    cut = batches(first)[-1]
    assert (
        cut["status"],
        cut["requested"],
        cut["completed"],
        cut["failed"],
        cut["idempotency_key"],
    ) == ("partial", 2, 1, 0, "cut")
    rows = load_cohort(first).batches
    assert [
        (r.seq, r.status, r.completed, r.requested, r.failed, r.operator, r.key) for r in rows
    ] == [
        (cut["seq"], "partial", 1, 2, 0, "ta-lee", "cut"),
        (0, "completed", 2, 2, 0, "ta-lee", ""),
    ]
    assert run("dashboard", str(first), "--out", str(tmp_path / "site"))[0] == 0
    page = (tmp_path / "site" / "index.html").read_text("utf-8")
    assert (
        '<tr data-status="completed"><td>0</td><td>completed</td><td>2 of 2</td><td>0'
        "</td><td>ta-lee</td><td>2026-01-01T00:00:00Z</td><td>-</td></tr>" in page
    )


@pytest.mark.slow
def test_a_batch_asked_again_under_its_key_appends_nothing(
    cohort: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "grades"
    (cohort / "bob").rename(tmp_path / "bob-aside")  # only alice, this time
    assert grade(cohort, out, "--idempotency-key", "week3-final")[0] == 0
    [batch] = batches(out)
    assert (batch["status"], batch["idempotency_key"]) == ("completed", "week3-final")
    ledger, report = (out / LEDGER).read_bytes(), (out / "alice" / REPORT).read_bytes()
    # The same key again, even with a changed cohort: the batch is reused, nothing is graded.
    (tmp_path / "bob-aside").rename(cohort / "bob")
    code, out_text, _ = grade(cohort, out, "--idempotency-key", "week3-final")
    assert code == 0
    assert out_text == (
        f"batch week3-final is ledger event 0 of {out / LEDGER}: completed, "
        f"1 of 1 graded, by {batch['operator']} at {batch['at']}; nothing "
        "graded, nothing appended (another key grades again)\n"
    )
    assert (out / LEDGER).read_bytes() == ledger
    assert (out / "alice" / REPORT).read_bytes() == report and not (out / "bob").exists()
    # Another key grades.
    assert grade(cohort, out, "--idempotency-key", "week3-late")[0] == 0
    assert [b["idempotency_key"] for b in batches(out)] == ["week3-final", "week3-late"]
    assert (out / "bob" / REPORT).is_file()


@pytest.mark.parametrize("key", [" x", "a b", "x" * 129, "-x", "caf\u00e9"])
def test_a_key_that_is_no_name_is_refused_before_anything_is_graded(
    tmp_path: Path,
    key: str,
) -> None:
    flags = (f"--idempotency-key={key}",)
    code, _, err = grade(tmp_path / "none", tmp_path / "grades", *flags)
    assert code == 2 and "--idempotency-key" in err and "use 1 to 128 letters" in err
    assert not (tmp_path / "grades").exists()


def test_a_status_is_the_counts_and_a_merge_says_it_of_the_whole_grading() -> None:
    assert [
        batch_status(3, 3, False),
        batch_status(3, 0, False),
        batch_status(3, 2, False),
        batch_status(3, 3, True),
    ] == ["completed", "failed", "partial", "partial"]
    shards = [
        {
            "requested": 2,
            "completed": 2,
            "failed": 0,
            "status": "completed",
            "operator": "ci",
            "started": "2026-01-01T00:00:05Z",
            "at": "2026-01-01T00:01:00Z",
        },
        {
            "requested": 3,
            "completed": 1,
            "failed": 2,
            "status": "partial",
            "operator": "ci-2",
            "started": "2026-01-01T00:00:01Z",
            "at": "2026-01-01T00:00:50Z",
        },
    ]
    assert _itself(shards) == {
        "requested": 5,
        "completed": 3,
        "failed": 2,
        "status": "partial",
        "operator": "ci, ci-2",
        "started": "2026-01-01T00:00:01Z",
        "at": "2026-01-01T00:01:00Z",
    }
    assert _itself([{"counts": {}}, {"counts": {}}]) == {}  # an older gradekit's: none
    assert json.dumps(_itself(shards[:1]), sort_keys=True) == json.dumps(
        {k: v for k, v in shards[0].items()}, sort_keys=True
    )
