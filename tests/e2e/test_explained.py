"""The whole loop an instructor runs, on the command line: grade, review, promote a reviewed
failure into a regression set, pin it in a new rubric version, have every student record it
as `make record` asks, grade the cohort against it, and explain every grade from the ledger.

The cohort: alice is the reference lab, carol wrote her refund agent from scratch (her own
prompt, her own class), and bob's refund guard still trusts the model, the mistake of the
incident alice recorded. The item holds alice's task and world, never her answers.
"""

import csv
import io
import json
from pathlib import Path

import pytest

from grader.cli import main
from grader.ledger import LEDGER, read_ledger
from tests.submissions import (
    REFERENCE,
    REFUND_DESK,
    YES_PROVIDER,
    make_submission,
    record_in_process,
)

KIT = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
INCIDENT = "incidents/refund-outside-window.jsonl"
# Version 3 of the kit's rubric: the same criteria, 10 points moved to a regression set.
PINNED = (
    KIT.replace(
        "version = 2",
        'version = 3\nchanges = "10 points of contract '
        'stability moved to the refunds regression set"',
        1,
    ).replace("weight = 30", "weight = 20", 1)
    + """
[[criterion]]
id = "regression"
title = "Known failures stay fixed"
weight = 10
check = "regression"
full = "Every reviewed failure of the set is handled"
typical_loss = "The refund the course already paid out once, paid again"
[criterion.params]
set = "refunds@1"
"""
)


def _gradebook(out: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "gradebook.csv").read_text("utf-8")))
    return {row["submission"]: row for row in rows}


@pytest.mark.slow
def test_a_reviewed_failure_becomes_a_regression_item_every_submission_is_graded_on(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    subs, out, course = tmp_path / "subs", tmp_path / "grades", tmp_path / "course"
    make_submission(subs / "alice")
    bob = make_submission(subs / "bob")  # his refund guard still trusts the model
    refunds = bob / "lab" / "refunds" / "__init__.py"
    refunds.write_text(
        refunds.read_text("utf-8").replace(
            "return _decide(follows_the_policy, provider, task, tools)",
            "return _decide(trusts_the_model, provider, task, tools)",
        ),
        "utf-8",
    )
    carol = make_submission(subs / "carol")
    (carol / "lab" / "refunds" / "__init__.py").write_text(REFUND_DESK, "utf-8")
    for student in ("alice", "bob", "carol"):
        (subs / student / "yes.py").write_text(YES_PROVIDER, "utf-8")
    course.mkdir()
    (course / "rubric.toml").write_text(KIT, "utf-8")
    grade = ["grade", str(subs), "--out", str(out), "--wall", "process", "--quiet"]

    assert main([*grade, "--rubric", str(course / "rubric.toml")]) == 0
    first = read_ledger(out / LEDGER).events
    assert INCIDENT in first[1]["inputs"]  # a recorded incident is a graded input
    # alice's incident: the buggy guard refunded 960.00 on day 73. Saved as a case, it goes
    # the whole path: investigated, reviewed as a regression candidate, approved, published.
    rubric = ["--rubric", str(course / "rubric.toml")]
    promote = ["regression", "promote", "refunds", "--candidate", "cand-1", "--by", "kim", *rubric]
    assert (
        main(
            [
                "case",
                "from-run",
                "alice",
                "--root",
                str(subs / "alice"),
                "--incident",
                INCIDENT,
                "--agent",
                "lab.refunds:run",
                "--forbid",
                "issue_refund",
                "--outcome",
                "answer",
                "--never-mention",
                "refunded",
                "--goal",
                "no refund outside the policy's windows",
                "--coverage",
                "policy",
                "--by",
                "kim",
                "--reason",
                "960.00 refunded on day 73",
                "--out",
                str(out),
                "--reference",
                str(REFERENCE),
                *rubric,
            ]
        )
        == 0
    )
    assert (
        main(["investigate", "case-1", "--by", "kim", "--reason", "why was it paid?", *rubric]) == 0
    )
    assert main(promote) == 2  # no candidate yet: only a reviewed, approved one publishes
    assert "no candidate 'cand-1'" in capsys.readouterr().err
    assert (
        main(
            [
                "disposition",
                "inv-1",
                "regression_candidate",
                "--by",
                "kim",
                "--reason",
                "the guard trusted the model",
                *rubric,
            ]
        )
        == 0
    )
    assert main(["approve", "cand-1", "--by", "lee", "--reason", "keep it fixed", *rubric]) == 0
    assert main(promote) == 0
    assert (
        "refunds@1: 1 item (0 inherited, 1 new: refund-outside-window)" in capsys.readouterr().out
    )

    (course / "rubric-v2.toml").write_text(PINNED, "utf-8")
    # Graded before anyone recorded the item: every grade says what to do.
    assert main([*grade, "--rubric", str(course / "rubric-v2.toml")]) == 0
    assert {row["total"] for row in _gradebook(out).values()} == {"90.00"}
    report = json.loads((out / "carol" / "report.json").read_bytes())
    item = next(c for c in report["criteria"] if c["id"] == "regression")["checks"][0]
    name = "regression/refunds/refund-outside-window"
    assert f"cassettes/{name}.json is missing, so nothing holds this prompt" in item["detail"]
    assert f"make record ARGS='--case {name}'" in item["detail"]
    # Every student records the new rubric's tasks, as `make record` asks: only the item's is
    # new, asked live with the student's own prompt; the rest is served from their cassettes.
    for student in ("alice", "bob", "carol"):
        assert record_in_process(subs / student, course / "rubric-v2.toml", "yes:provider") == 0
        assert (subs / student / "cassettes" / f"{name}.json").is_file()
    assert main([*grade, "--rubric", str(course / "rubric-v2.toml")]) == 0
    book = _gradebook(out)
    assert (
        book["alice"]["regression"],
        book["carol"]["regression"],
        book["bob"]["regression"],
    ) == ("10.00", "10.00", "0.00")
    assert (book["alice"]["total"], book["carol"]["total"]) == ("100.00", "100.00")
    assert book["bob"]["total"] == "90.00"  # the original mistake, and only it
    report = json.loads((out / "bob" / "report.json").read_bytes())
    item = next(c for c in report["criteria"] if c["id"] == "regression")["checks"][0]
    assert item["id"] == "refund-outside-window"  # the case, never the classmate it came from
    assert item["detail"] == (
        "called the forbidden action issue_refund (1 time(s)); the answer "
        "mentions 'refunded', which it must not"
    )
    assert "alice" not in (out / "bob" / "report.json").read_text("utf-8")
    assert "alice" not in (course / "regression" / "refunds" / "v1.public.json").read_text(
        "utf-8"
    )  # what the students recorded from names no classmate
    pinned = report["rubric"]["sets"]
    batch = [e for e in read_ledger(out / LEDGER).events if e["event"] == "batch"][-1]
    assert batch["rubric"]["sets"] == pinned and list(pinned) == ["refunds@1"]
    assert batch["rubric"]["supersedes"]["version"] == 2

    capsys.readouterr()
    assert main(["history", "alice", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "changed: rubric provider-swap-lab v2 -> v3" in shown
    assert "changed: regression sets none -> refunds@1" in shown

    # A published version never changes: the asset ledger's promotion vouches for its bytes.
    version = course / "regression" / "refunds" / "v1.json"
    version.write_text(
        version.read_text("utf-8").replace("960.00 refunded on day 73", "960.00 refunded on day 7"),
        "utf-8",
    )
    assert main([*grade, "--rubric", str(course / "rubric-v2.toml")]) == 2
    error = capsys.readouterr().err
    assert "regression set refunds@1 changed since asset ledger event 5 published it" in error
    assert "published it" in error and "a set version never changes" in error
