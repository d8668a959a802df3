"""The evaluation assets on the command line: cases written by hand or drafted by a model,
revised and archived, never edited; duplicates caught; templates read-only; and a draft
that reaches a set only through a person's approval. Every step is an event of the asset
ledger beside the sets, whose chain ``ledger verify`` checks."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import Expectation
from grader.assets import ASSETS, read_assets
from grader.cli import main
from grader.ledger import read_ledger
from grader.regression import load_set, world_json
from grader.rubric import load_rubric
from tests.submissions import REFERENCE

KIT = REFERENCE / "rubric" / "bootcamp.toml"
TASK = "Student dana asks for a refund 40 days after buying her seat."
TRUTH = (
    "--goal",
    "dana learns the policy gives nothing after day 30",
    "--outcome",
    "answer",
    "--decision",
    "no refund",
    "--mention",
    "30 days",
    "--negation",
    "--intent",
    "refund_request",
    "--missing",
    "purchase id",
    "--forbid",
    "issue_refund",
)


@pytest.fixture
def sets(tmp_path: Path) -> Path:
    return tmp_path / "regression"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def place(sets: Path) -> list[str]:
    return ["--sets", str(sets), "--rubric", str(KIT)]


def new(sets: Path, *flags: str, task: str = TASK, by: str = "kim") -> tuple[int, str, str]:
    return run(
        "case",
        "new",
        "--task",
        task,
        "--name",
        "refund-day-40",
        *TRUTH,
        "--coverage",
        "policy",
        "--by",
        by,
        "--reason",
        "a question the lab never asks",
        *flags,
        *place(sets),
    )


def test_a_case_written_by_hand_holds_every_field_of_the_article(
    sets: Path,
    tmp_path: Path,
) -> None:
    world = tmp_path / "world.json"
    world.write_bytes(world_json([("refund_terms", {"student": "dana"}, {"day": 40})]))
    code, out, err = new(
        sets, "--world", str(world), "--agent", "lab.refunds:run", "--reference", str(REFERENCE)
    )
    assert (code, out) == (0, "case-1: a manual case; investigate it next\n"), err
    [case] = read_assets(sets).cases.values()
    assert (case.id, case.version, case.supersedes, case.status, case.source) == (
        "case-1",
        1,
        None,
        "active",
        "manual",
    )
    assert (case.task, case.agent, case.source_run, case.coverage) == (
        TASK,
        "lab.refunds:run",
        None,
        ("policy",),
    )
    assert case.expect == Expectation(
        "answer",
        ("30 days",),
        (),
        ("issue_refund",),
        goal="dana learns the policy gives nothing after day 30",
        decision="no refund",
        intent="refund_request",
        missing=("purchase id",),
        negation=True,
    )
    assert dict(case.configuration)["rubric"] == "provider-swap-lab"
    assert (case.by, case.admission) == ("kim", "a question the lab never asks")
    assert case.at.endswith("Z") and case.world is not None
    assert (sets / "_worlds" / f"{case.world}.json").read_bytes() == world.read_bytes()
    # The world folder is no set: verify and show see none.
    assert run("regression", "verify", "--sets", str(sets))[0] == 2


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--goal", ""), 'give --goal "what the run is for"'),
        (
            ("--agent", "lab.dana_only:run", "--reference", str(REFERENCE)),
            "--agent lab.dana_only:run cannot apply to another student",
        ),
        (("--coverage", "Policy Layer"), "--coverage 'Policy Layer' is not a layer name"),
    ],
)
def test_a_case_that_could_not_be_judged_or_applied_is_refused(
    sets: Path,
    flags: tuple[str, ...],
    says: str,
) -> None:
    code, _, err = new(sets, *flags)
    assert code == 2 and says in err, err
    assert not (sets / ASSETS).exists()


def test_a_task_asked_already_is_refused_and_a_template_is_read_only(sets: Path) -> None:
    assert new(sets)[0] == 0
    code, _, err = new(
        sets, task="  student DANA asks for a refund 40 days after buying her seat.  "
    )
    assert code == 2
    assert (
        "case case-1 (version 1) already asks this task (the same once case and spacing "
        "are folded): revise it (`.venv/bin/gradekit case revise case-1 --by NAME --reason "
        "TEXT`)" in err
    )
    template_task = next(c.task for c in load_rubric(KIT).cases if c.id == "refund-policy")
    code, _, err = new(sets, task=template_task.upper())
    assert code == 2 and "the rubric's case refund-policy already asks this task" in err
    code, _, err = run(
        "case",
        "revise",
        "refund-policy",
        "--goal",
        "g",
        "--by",
        "kim",
        "--reason",
        "r",
        *place(sets),
    )
    assert code == 2 and "refund-policy is a case of the rubric: a template, read-only" in err
    code, out, _ = run("case", "show", *place(sets))
    assert "refund-policy template (rubric provider-swap-lab v2), read-only" in out
    assert "case-1       active   v1 manual" in out
    assert [e["event"] for e in read_ledger(sets / ASSETS).events] == ["case"]


def test_a_revision_archives_the_old_case_and_supersedes_it(sets: Path) -> None:
    assert new(sets)[0] == 0
    code, out, err = run(
        "case",
        "revise",
        "case-1",
        "--decision",
        "nothing back",
        "--by",
        "lee",
        "--reason",
        "the policy says nothing",
        *place(sets),
    )
    assert (code, out) == (
        0,
        "case-2: version 2 of the case, superseding case-1 (archived); "
        "investigate it to publish it\n",
    ), err
    assets = read_assets(sets)
    old, revised = assets.cases["case-1"], assets.cases["case-2"]
    assert (old.status, revised.status, revised.version, revised.supersedes) == (
        "archived",
        "active",
        2,
        "case-1",
    )
    assert old.expect.decision == "no refund"  # the old truth is kept, never edited
    assert revised.expect.decision == "nothing back" and revised.expect.goal == old.expect.goal
    assert revised.task == old.task and revised.admission == "the policy says nothing"
    # An archived case is neither revised, investigated nor archived again.
    for argv in (
        ("case", "revise", "case-1", "--by", "lee", "--reason", "r"),
        ("investigate", "case-1", "--by", "lee", "--reason", "r"),
        ("case", "archive", "case-1", "--by", "lee", "--reason", "r"),
    ):
        code, _, err = run(*argv, *place(sets))
        assert code == 2 and "case case-1 is archived (superseded by case-2): use that one" in err
    assert (
        run("case", "archive", "case-2", "--by", "lee", "--reason", "retired", *place(sets))[0] == 0
    )
    assert read_assets(sets).cases["case-2"].status == "archived"
    events = read_ledger(sets / ASSETS).events
    assert [e["event"] for e in events] == ["case", "case_archived", "case", "case_archived"]
    assert events[0] == {**events[0], "task": TASK, "version": 1}  # unchanged, in place
    code, out, _ = run("case", "show", "case-2", *place(sets))
    assert "case-2: version 2, archived, manual (case)" in out
    assert "  supersedes  case-1" in out
    code, out, _ = run("ledger", "verify", str(sets))
    assert code == 0


def test_an_ai_draft_reaches_a_set_only_through_a_persons_approval(sets: Path) -> None:
    assert new(sets, "--source", "ai_draft", by="model:gpt-4o-mini")[0] == 0
    assert (
        run("investigate", "case-1", "--by", "kim", "--reason", "is it right?", *place(sets))[0]
        == 0
    )
    promote = [
        "regression",
        "promote",
        "refunds",
        "--candidate",
        "cand-1",
        "--by",
        "kim",
        *place(sets),
    ]
    # No review yet: no candidate, nothing to publish.
    code, _, err = run(*promote)
    assert code == 2 and "a candidate is made only by a regression_candidate disposition" in err
    assert (
        run(
            "disposition",
            "inv-1",
            "regression_candidate",
            "--by",
            "kim",
            "--reason",
            "a real gap",
            *place(sets),
        )[0]
        == 0
    )
    code, _, err = run(*promote)
    assert code == 2 and "cand-1 is not approved" in err
    code, _, err = run(
        "approve", "cand-1", "--by", "Model:GPT-4o-mini", "--reason", "mine", *place(sets)
    )
    assert (
        code == 2
        and "drafted by 'model:gpt-4o-mini': its draft is approved by a "
        "person, never by who drafted it"
        in err
    )
    assert not (sets / "refunds").exists()
    assert (
        run(
            "approve",
            "cand-1",
            "--by",
            "kim",
            "--reason",
            "checked against the policy",
            *place(sets),
        )[0]
        == 0
    )
    code, out, err = run(*promote)
    assert code == 0, err
    assert out.startswith("refunds@1: 1 item (0 inherited, 1 new: refund-day-40)")
    loaded = load_set(sets, "refunds", 1)
    assert loaded is not None
    [item] = loaded.items
    assert dict(item.source) == {
        "case": "case-1",
        "version": 1,
        "candidate": "cand-1",
        "approved_by": "kim",
        "run": None,
        "origin": "ai_draft",
        "by": "model:gpt-4o-mini",
    }
    assert item.expect.negation and item.expect.missing == ("purchase id",)
    public = json.loads((sets / "refunds" / "v1.public.json").read_bytes())
    assert public["items"][0]["expect"]["decision"] == "no refund"
    code, out, _ = run("case", "show", "case-1", *place(sets))
    assert "  inv-1: opened by kim" in out
    assert "    disposition regression_candidate by kim" in out
    assert "    cand-1: promoted into refunds@1 as item refund-day-40" in out


@pytest.mark.parametrize(
    "disposition", ["provider_fault", "false_alarm", "grader_defect", "student_error"]
)
def test_only_a_regression_candidate_disposition_makes_a_candidate(
    sets: Path,
    disposition: str,
) -> None:
    assert new(sets)[0] == 0
    assert run("investigate", "case-1", "--by", "kim", "--reason", "r", *place(sets))[0] == 0
    code, out, _ = run(
        "disposition", "inv-1", disposition, "--by", "kim", "--reason", "r", *place(sets)
    )
    assert (code, out) == (0, f"inv-1: {disposition}; no candidate\n")
    assert read_assets(sets).candidates == {}


def test_an_edited_asset_ledger_is_refused_naming_the_line(sets: Path) -> None:
    assert new(sets)[0] == 0
    assert run("investigate", "case-1", "--by", "kim", "--reason", "r", *place(sets))[0] == 0
    ledger = sets / ASSETS
    ledger.write_text(
        ledger.read_text("utf-8").replace('"decision":"no refund"', '"decision":"a full refund"'),
        "utf-8",
    )
    code, _, err = run(
        "disposition", "inv-1", "regression_candidate", "--by", "kim", "--reason", "r", *place(sets)
    )
    assert code == 2 and f"{ledger}:2: the chain breaks here" in err


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_two_cases_written_at_once_get_two_ids(sets: Path) -> None:
    """Each change reads the assets (the next id) and appends under one lock: two TAs
    writing a case at the same moment get case-1 and case-2, never one id twice."""
    sets.mkdir(parents=True)
    fd = os.open(sets / ".ledger.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # both writers must wait here, at the same time
    script = "import sys; from grader.cli import main; raise SystemExit(main(sys.argv[1:]))"
    try:
        writers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    script,
                    "case",
                    "new",
                    "--task",
                    f"task {n}",
                    "--name",
                    f"task-{n}",
                    *TRUTH,
                    "--by",
                    f"ta-{n}",
                    "--reason",
                    "r",
                    *place(sets),
                ],
                cwd=REFERENCE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in (1, 2)
        ]
        deadline = time.monotonic() + 60
        inode = os.fstat(fd).st_ino
        while (
            sum(
                "->" in line and f":{inode} " in line
                for line in Path("/proc/locks").read_text().splitlines()
            )
            < 2
        ):
            assert time.monotonic() < deadline, "the writers never waited for the lock"
            assert all(w.poll() is None for w in writers), "a writer did not wait"
            time.sleep(0.05)
    finally:
        os.close(fd)
    for writer in writers:
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
    cases = read_assets(sets).cases
    assert sorted(cases) == ["case-1", "case-2"]
    assert sorted(case.by for case in cases.values()) == ["ta-1", "ta-2"]
