"""Deadlines and late work (issue 44): the lab's ``late.toml`` beside its rubric, each
student's time and extension from the roster (or Gradescope's metadata), the penalty its
own line in the gradebook, results.json, history and the exports, never in a report.

The policy's arithmetic is tested on its own (``lateness`` is pure: no clock); one cohort
of real reference submissions is graded through the command line to show the whole path:
an on-time student, one two days late and one as late with a one-day extension.

It tests ``grader._late``'s functions on purpose: the policy's arithmetic is a base
module's, below every room's door.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from decimal import Decimal
from pathlib import Path

import pytest

from gradekit import UsageError
from grader._late import late_from_document, lateness, parse_late_policy
from grader.cli import main
from grader.dashboard import load_cohort
from grader.handout import submitted
from grader.ledger import GRADEBOOK, REPORT, RESULTS
from grader.outputs import (
    GradebookRow,
    canonical,
    export_gradebook,
    read_gradebook,
    verify_results,
)
from grader.submission import parse_roster
from tests.grader.batch.test_batch_safety import short_rubric
from tests.submissions import make_submission

POLICY = b"""[late]
due = 2026-12-01T23:59:00-08:00
grace = "15m"
penalty = 10
per = "day"
cap = 50
cutoff = 2026-12-08T23:59:00-08:00
"""
HUNDRED = Decimal(100)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def test_ten_percent_a_started_day_past_due_with_grace_cap_cutoff_and_extension() -> None:
    policy = parse_late_policy(POLICY, source="late.toml")
    cases = [  # submitted, extension, (units, percent, penalty, cutoff)
        ("2026-12-01T22:00:00-08:00", 0, (0, "0", "0.00", False)),
        ("2026-12-02T00:14:00-08:00", 0, (0, "0", "0.00", False)),  # inside the grace
        ("2026-12-02T00:15:01-08:00", 0, (1, "10", "10.00", False)),  # past it: a day
        ("2026-12-03T18:00:00Z", 0, (2, "20", "20.00", False)),  # 1 d 10 h late: 2 days
        ("2026-12-03T18:00:00Z", 86400, (1, "10", "10.00", False)),  # with a day more
        ("2026-12-08T20:00:00-08:00", 0, (7, "50", "50.00", False)),  # capped at 50 %
        ("2026-12-09T08:00:00Z", 0, (0, "100", "100.00", True)),  # past the cutoff
        ("2026-12-09T08:00:00Z", 86400, (7, "50", "50.00", False)),  # not past theirs
    ]
    for when, extension, expected in cases:
        late = lateness(policy, HUNDRED, at(when), extension, "roster")
        got = (late.units, str(late.percent), f"{late.penalty:.2f}", late.cutoff)
        assert got == expected, when
        assert late_from_document(late.document()) == late
    # Times are compared as instants: the same moment in another offset is the same verdict.
    assert lateness(policy, HUNDRED, at("2026-12-03T10:00:00-08:00")) == lateness(
        policy, HUNDRED, at("2026-12-04T03:00:00+09:00")
    )
    # Out of other possible points the percent is of those.
    assert lateness(policy, Decimal(45), at("2026-12-03T18:00:00Z")).penalty == Decimal("9.00")


def test_the_verdict_reads_as_a_sentence_and_an_unknown_time_costs_nothing() -> None:
    policy = parse_late_policy(POLICY, source="late.toml")
    late = lateness(policy, HUNDRED, at("2026-12-03T18:00:00Z"), 86400, "roster")
    assert late.cell() == (
        "1 day late: -10.00 (10% of the possible points; submitted "
        "2026-12-03T18:00:00Z, due 2026-12-03T07:59:00Z with a 1d extension)"
    )
    unknown = lateness(policy, HUNDRED, None)
    assert unknown.penalty == 0
    assert unknown.cell().startswith("no submission time, so no late penalty")
    assert "after the cutoff: -100.00" in lateness(policy, HUNDRED, at("2027-01-01T00:00Z")).cell()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (b"[late]\npenalty = 10\nper = 'day'\n", "needs due"),
        (b"[late]\ndue = 2026-12-01T23:59:00\npenalty = 10\nper = 'day'\n", "no time zone offset"),
        (b"[late]\ndue = 2026-12-01T23:59:00Z\npenalty = 10\nper = 'week'\n", 'write "day" or'),
        (b"[late]\ndue = 2026-12-01T23:59:00Z\npenalty = 110\nper = 'day'\n", "from 0 to 100"),
        (
            b"[late]\ndue = 2026-12-01T23:59:00Z\npenalty = 10\nper = 'day'\ngrace = 'soon'\n",
            "not a duration",
        ),
        (
            b"[late]\ndue = 2026-12-01T23:59:00Z\npenalty = 10\nper = 'day'\ncutof = 1\n",
            "no key 'cutof'",
        ),
        (
            b"[late]\ndue = 2026-12-01T23:59:00Z\npenalty = 10\nper = 'day'\n"
            b"cutoff = 2026-11-01T00:00:00Z\n",
            "is before due",
        ),
    ],
)
def test_a_policy_that_cannot_mean_one_thing_is_refused_with_the_fix(
    text: bytes, says: str
) -> None:
    with pytest.raises(UsageError, match=says):
        parse_late_policy(text, source="late.toml")


def test_the_roster_carries_times_and_extensions_and_refuses_unknown_columns() -> None:
    roster = parse_roster(
        b"folder,student_id,display_name,extension,submitted_at\n"
        b"cy,s-3,Cy Young,1d,2026-12-03T18:00:00Z\nana,s-1,Ana,,\n",
        source="roster.csv",
    )
    cy, ana = roster.students["cy"], roster.students["ana"]
    assert (cy.extension, cy.submitted_at) == (86400, at("2026-12-03T18:00:00+00:00"))
    assert (ana.extension, ana.submitted_at) == (0, None)
    with pytest.raises(UsageError, match="then optionally submitted_at and extension"):
        parse_roster(b"folder,student_id,display_name,submited_at\n", source="roster.csv")
    with pytest.raises(UsageError, match=r"line 2, submitted_at.*no time zone offset"):
        parse_roster(
            b"folder,student_id,display_name,submitted_at\ncy,s-3,Cy,2026-12-03 18:00\n",
            source="roster.csv",
        )


def test_gradescope_metadata_gives_the_time_the_names_and_an_extension(tmp_path: Path) -> None:
    folder = tmp_path / "submission"
    folder.mkdir()
    metadata = tmp_path / "submission_metadata.json"
    metadata.write_text(
        json.dumps(
            {
                "id": 1,
                "created_at": "2026-12-03T10:00:00.365935-08:00",
                "assignment": {
                    "due_date": "2026-12-01T23:59:00.000000-08:00",
                    "late_due_date": None,
                },
                "users": [
                    {
                        "name": "Cy Young",
                        "email": "cy@example.com",
                        "id": 3,
                        "assignment": {"due_date": "2026-12-02T23:59:00.000000-08:00"},
                    },
                    {"name": "Dee Dee", "email": "dee@example.com", "id": 4},
                ],
            }
        ),
        "utf-8",
    )
    who = submitted(folder, metadata)
    assert (who.display_name, who.extension, who.submitted_from) == (
        "Cy Young, Dee Dee",
        86400,
        "gradescope",
    )
    assert who.submitted_at == at("2026-12-03T18:00:00.365935+00:00")
    metadata.write_text("{", "utf-8")
    assert submitted(folder, metadata).submitted_at is None  # unreadable: no time, no penalty


def _graded(out: Path) -> dict[str, GradebookRow]:
    _, rows = read_gradebook((out / GRADEBOOK).read_bytes())
    return {row.submission: row for row in rows}


@pytest.mark.slow
def test_a_cohort_gets_each_students_penalty_shown_explained_and_the_same_any_day(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab"
    lab.mkdir()
    rubric = short_rubric(lab)
    (lab / "late.toml").write_bytes(POLICY)
    subs = tmp_path / "subs"
    for name in ("ana", "cy", "dee"):
        make_submission(subs / name)
    roster = tmp_path / "roster.csv"
    lines = [
        "folder,student_id,display_name,submitted_at,extension",
        "ana,s-1,Ana Alves,2026-12-01T22:00:00-08:00,",
        "cy,s-3,Cy Young,2026-12-03T18:00:00Z,",
        "dee,s-4,Dee Dee,2026-12-03T10:00:00-08:00,1d",
    ]
    roster.write_text("\n".join(lines) + "\n", "utf-8")
    out = tmp_path / "grades"

    def grade(*args: str | Path, into: Path = out) -> str:
        capsys.readouterr()
        code = main(
            [
                "grade",
                *map(str, args),
                "--roster",
                str(roster),
                "--out",
                str(into),
                "--rubric",
                str(rubric),
                "--jobs",
                "2",
                "--quiet",
            ]
        )
        said = capsys.readouterr()
        assert code == 0, said.out + said.err
        return said.out

    said = grade(subs)
    rows = _graded(out)
    cells = {name: (row.name, row.total, row.penalty, row.final) for name, row in rows.items()}
    assert cells == {
        "ana": ("Ana Alves", "100.00", "", "100.00"),
        "cy": ("Cy Young", "100.00", "20.00", "80.00"),
        "dee": ("Dee Dee", "100.00", "10.00", "90.00"),
    }
    assert rows["ana"].late.startswith("on time (submitted 2026-12-02T06:00:00Z")
    assert rows["cy"].late.startswith("2 days late: -20.00 (20% of the possible points")
    assert "due 2026-12-03T07:59:00Z with a 1d extension" in rows["dee"].late
    assert "cy (Cy Young): 100.00 / 100.00" in said and "late: -20.00, final 80.00" in said

    # results.json (what Gradescope shows) takes the penalty off as its own test, and
    # verifies against the report, which knows nothing of lateness.
    results = (out / "cy" / RESULTS).read_bytes()
    report = (out / "cy" / REPORT).read_bytes()
    document = json.loads(results)
    assert document["score"] == 80.0
    assert document["tests"][-1]["name"] == "Late penalty"
    assert document["tests"][-1]["score"] == -20.0
    assert "2 days late" in document["output"]
    assert "late" not in json.loads(report)
    assert verify_results(results, report)[0]
    forged = dict(document, score=100.0, tests=document["tests"][:-1])
    forged["extra_data"] = dict(
        document["extra_data"], late=dict(document["extra_data"]["late"], penalty="0.00")
    )
    # A penalty written off, or a penalty test dropped, no longer agrees with what it says.
    ok, why = verify_results(canonical(forged) + b"\n", report)
    assert (ok, why) == (
        False,
        "extra_data.late.penalty is 0.00 but 20% of the report's "
        "100.00 is 20.00: the file was edited",
    )
    dropped = dict(forged, extra_data=document["extra_data"])
    ok, why = verify_results(canonical(dropped) + b"\n", report)
    assert not ok and why.startswith(
        "score is 100.00 but the report's total is 100.00, less a late penalty of 20.00"
    )

    capsys.readouterr()
    assert main(["history", "s-3", "--out", str(out)]) == 0
    assert "    late: 2 days late: -20.00" in capsys.readouterr().out

    # cy is granted a day: only cy's grade moves, and history says why.
    roster.write_text("\n".join([*lines[:2], lines[2] + "1d", lines[3]]) + "\n", "utf-8")
    grade(subs / "cy")
    again = _graded(out)
    assert (again["cy"].penalty, again["cy"].final) == ("10.00", "90.00")
    assert again["ana"] == rows["ana"] and again["dee"] == rows["dee"]
    capsys.readouterr()
    assert main(["history", "s-3", "--out", str(out)]) == 0
    history = capsys.readouterr().out
    assert (
        "changed: late penalty 20.00 -> 10.00 (due 2026-12-02T07:59:00Z -> "
        "2026-12-03T07:59:00Z; extension 0 -> 1d)"
    ) in history

    # The platforms' imports carry the final grade under the roster's id and name.
    canvas = export_gradebook(list(again.values()), "canvas", "Lab 3")
    assert canvas.decode().splitlines()[2] == "Cy Young,,s-3,,,90.00"
    assert (
        main(
            ["gradebook", "export", str(out / GRADEBOOK), "--to", "moodle", "--assignment", "Lab 3"]
        )
        == 0
    )
    moodle = (out / "moodle.csv").read_text("utf-8").splitlines()
    assert moodle[0] == "ID number,Full name,Lab 3,Feedback"
    assert moodle[2] == (
        's-3,Cy Young,90.00,"automated 100.00 / 100.00; review: pending: '
        f'written_summary, stretch_goal; late: {again["cy"].late}"'
    )
    assert {s.row.submission: s.row.name for s in load_cohort(out).submissions} == {
        "ana": "Ana Alves",
        "cy": "Cy Young",
        "dee": "Dee Dee",
    }
    site = tmp_path / "site"
    assert main(["dashboard", str(out), "--out", str(site)]) == 0
    index = " ".join((site / "index.html").read_text("utf-8").split())
    assert '<td data-column="name">Cy Young</td>' in index
    assert '<td data-column="penalty" class="number" data-value="10.00">10.00</td>' in index
    page = next((site / "students").glob("cy*.html")).read_text("utf-8")
    assert '<dd data-stat="name">Cy Young</dd>' in page
    assert "<strong>Late work:</strong> 1 day late: -10.00" in page

    # Another day, another time zone, another grades folder: the same verdict and grade.
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    try:
        grade(subs / "cy", into=tmp_path / "elsewhere")
    finally:
        monkeypatch.undo()
        time.tzset()
    there = _graded(tmp_path / "elsewhere")["cy"]
    assert (there.late, there.penalty, there.final) == (
        again["cy"].late,
        again["cy"].penalty,
        again["cy"].final,
    )
