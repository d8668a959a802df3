"""Reviews applied to a whole gradebook at once (issue 25): the ledger's review events are
indexed once per call, and the index gives exactly what reading every event for every row
gives; rows kept from earlier batches are written as they were."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from grader.ledger import GRADEBOOK, LEDGER, ReviewIndex, append_events, apply_reviews, review_state
from grader.outputs import GradebookRow, gradebook_csv

STUDENTS = ("alice", "bob", "carol", "dave")
REPORTS = ("a" * 64, "b" * 64, "c" * 64, "d" * 64)
IDS = ("written_summary", "tracing")


def review(
    student: str, report: str, criterion: str, points: str | None, seq: int
) -> dict[str, Any]:
    return {
        "event": "review",
        "student": student,
        "submission": student,
        "report": report,
        "run": 0,
        "criterion": criterion,
        "automated": "10.00",
        "max": "15.00",
        "points": points,
        "by": "kim",
        "reason": "read it",
        "seq": seq,
    }


EVENTS = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(STUDENTS),
            st.sampled_from(REPORTS),
            st.sampled_from(IDS),
            st.sampled_from([None, "0.00", "12.50"]),
        ),
        st.just(None),  # a run or batch event: not a review
    ),
    max_size=40,
)


def ledger(drawn: list[tuple[str, str, str, str | None] | None]) -> list[Mapping[str, Any]]:
    return [
        review(*item, seq) if item is not None else {"event": "run", "seq": seq}
        for seq, item in enumerate(drawn)
    ]


def row(student: str, digest: str, total: str = "10.00") -> GradebookRow:
    return GradebookRow(
        submission=student,
        student=student,
        status="graded",
        total=total,
        max="25.00",
        criteria={"written_summary": "10.00", "tracing": "0.00"},
        digest=digest,
        reason="",
    )


@settings(max_examples=300)
@given(
    drawn=EVENTS,
    student=st.sampled_from(STUDENTS),
    digest=st.sampled_from(REPORTS),
    marked=st.lists(st.sampled_from(IDS), unique=True),
)
def test_the_index_gives_each_row_what_the_whole_ledger_gives(
    drawn: list[tuple[str, str, str, str | None] | None],
    student: str,
    digest: str,
    marked: list[str],
) -> None:
    events = ledger(drawn)
    bearing = ReviewIndex(events).bearing_on(row(student, digest))
    assert review_state(bearing, student, digest, marked) == review_state(
        events, student, digest, marked
    )
    # Only what bears on the row: its student's reviews and its report's, in ledger order.
    assert bearing == [
        e
        for e in events
        if e["event"] == "review" and (e["student"] == student or e["report"] == digest)
    ]


def test_apply_reviews_reviews_the_graded_rows_and_writes_the_kept_ones_as_they_were(
    tmp_path: Path,
) -> None:
    append_events(
        tmp_path / LEDGER,
        [
            {
                k: v
                for k, v in review("alice", REPORTS[0], "written_summary", "12.50", 0).items()
                if k != "seq"
            },
            {
                k: v
                for k, v in review("carol", REPORTS[2], "written_summary", "0.00", 0).items()
                if k != "seq"
            },
        ],
    )
    # carol's row is kept from an earlier batch: its cells are not computed again (its
    # review cell here is not what the ledger would give, and it must stay so).
    kept = replace(row("carol", REPORTS[2]), review="as it was", final="3.00")
    (tmp_path / GRADEBOOK).write_bytes(gradebook_csv([kept], IDS))
    applied = apply_reviews(tmp_path, [row("alice", REPORTS[0]), row("bob", REPORTS[1])], [kept])
    assert [(r.submission, r.final) for r in applied.rows] == [("alice", "12.50"), ("bob", "10.00")]
    assert applied.rows[0].review == "written_summary 10.00->12.50 by kim"
    written = (tmp_path / GRADEBOOK).read_bytes()
    assert written == gradebook_csv([*applied.rows, kept], IDS)
    assert b"\ncarol,carol,,graded,10.00,as it was,,,3.00," in written
