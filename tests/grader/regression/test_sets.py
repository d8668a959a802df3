"""Regression sets: only a failing run's case, investigated, reviewed as a regression
candidate and approved, is published, with the bytes it was graded on; each version is
written once and chained to the one before, and an edit to any file of a set is caught
(``load_set``, ``gradekit regression verify``).

A graded run is made without grading (a ledger run event over the sha256 of a real copy of
the reference lab, and its report archived, built by the grader's own report encoder),
except in the one test that grades for real. ``promote`` takes a run through the whole
path, as an instructor runs its five commands.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from gradekit import UsageError, decode_incident
from gradekit.internal import decode_fixture
from grader import CheckResult, CriterionResult, Expectation, Report
from grader.assets import ASSETS
from grader.cli import main
from grader.ledger import ARCHIVE, LEDGER, append_events, read_ledger
from grader.outputs import render_report_json
from grader.regression import (
    Item,
    RegressionSet,
    decode_item,
    load_set,
    parse_ref,
    public_json,
    set_document,
    set_json,
    version_numbers,
)
from tests.submissions import CASES, REFERENCE, make_submission

CASE = "refund-policy"
INCIDENT = "incidents/refund-outside-window.jsonl"
GOAL = ("--goal", "the student learns what the policy gives them")
CASE_FLAGS = ("--case", CASE, "--outcome", "answer", "--mention", "refund", *GOAL)
INCIDENT_FLAGS = (
    "--incident",
    INCIDENT,
    "--agent",
    "lab.refunds:run",
    *GOAL,
    "--forbid",
    "issue_refund",
    "--outcome",
    "answer",
)
SHARE = Decimal("7.50")


@dataclass(frozen=True, slots=True)
class Run:
    """A graded run in a ledger: the submission, the grades folder, its seq and report."""

    root: Path
    out: Path
    student: str
    seq: int
    report: str


def submission(tmp_path: Path, student: str = "alice") -> Path:
    """A copy of the reference lab, its incident included."""
    root = make_submission(tmp_path / "subs" / student)
    assert (root / INCIDENT).is_file()
    return root


def graded(
    root: Path,
    out: Path,
    *,
    failing: Sequence[str] = (CASE,),
    degraded: Sequence[str] = (),
    student: str = "",
) -> Run:
    """A run event as ``gradekit grade`` appends it, over the files as they are now."""
    student = student or root.name
    inputs = {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for folder in ("cassettes", "fixtures", "incidents")
        for path in sorted((root / folder).glob("*.json*"))
    }
    data = _report(student, inputs, failing, degraded)
    digest = json.loads(data)["digest"]
    (out / ARCHIVE).mkdir(parents=True, exist_ok=True)
    (out / ARCHIVE / f"{digest}.json").write_bytes(data)
    [event] = append_events(
        out / LEDGER,
        [
            {
                "event": "run",
                "student": student,
                "submission": root.name,
                "status": "graded",
                "report": digest,
                "inputs": inputs,
                "total": json.loads(data)["total"],
            }
        ],
    )
    return Run(root, out, student, event["seq"], digest)


def _report(
    student: str, inputs: dict[str, str], failing: Sequence[str], degraded: Sequence[str]
) -> bytes:
    checks = tuple(
        CheckResult(
            case,
            case not in failing and case not in degraded,
            Decimal("0.00") if case in (*failing, *degraded) else SHARE,
            SHARE,
            "the answer differs under the second label",
            degraded=case in degraded,
        )
        for case in CASES
    )
    criterion = CriterionResult(
        "contract_stability",
        "Contract stability",
        sum((check.points for check in checks), Decimal(0)),
        SHARE * len(CASES),
        checks,
    )
    return render_report_json(
        Report(student, "provider-swap-lab", 1, "0" * 64, inputs, (criterion,))
    )


def review(run: Run, *, points: str | None = None, by: str = "kim") -> int:
    """A person's review of the run's report, as ``gradekit review`` appends it; its seq. A
    case is saved from a run without one: one that gives a failing criterion full marks
    makes it no failure."""
    [event] = append_events(
        run.out / LEDGER,
        [
            {
                "event": "review",
                "student": run.student,
                "submission": run.root.name,
                "report": run.report,
                "run": run.seq,
                "criterion": "contract_stability",
                "automated": "22.50",
                "max": "30.00",
                "points": points,
                "by": by,
                "reason": "the answer changes with the provider's label",
            }
        ],
    )
    seq: int = event["seq"]
    return seq


def promote(run: Run, sets: Path, *flags: str, name: str = "refunds") -> int:
    """The run's failure through the whole path, as an instructor runs it: ``case from-run``
    (with ``flags``, but ``--item``, which is the promotion's), ``investigate``, a
    ``regression_candidate`` disposition, ``approve`` and ``regression promote``. The first
    step that fails returns its code; only the promotion's output reaches stdout."""
    at = {
        i for i, f in enumerate(flags) if f.startswith("--item") or (i and flags[i - 1] == "--item")
    }
    item = [f for i, f in enumerate(flags) if i in at]
    saving = [f for i, f in enumerate(flags) if i not in at]
    case = _step(
        [
            "case",
            "from-run",
            run.student,
            "--root",
            str(run.root),
            "--out",
            str(run.out),
            "--sets",
            str(sets),
            "--by",
            "ta-lee",
            "--reason",
            "a label changed the answer",
            "--reference",
            str(REFERENCE),
            *saving,
        ]
    )
    if isinstance(case, int):
        return case
    candidate = approved(sets, case)
    if isinstance(candidate, int):
        return candidate
    return main(
        [
            "regression",
            "promote",
            "--candidate",
            candidate,
            "--sets",
            str(sets),
            "--by",
            "ta-lee",
            *item,
            "--",
            name,
        ]
    )


def approved(sets: Path, case: str, *, by: str = "kim") -> str | int:
    """``case`` investigated, reviewed as a regression candidate and approved by ``by``:
    the candidate's id (or the code of the step that failed)."""
    place = ["--sets", str(sets)]
    investigation = _step(["investigate", case, "--by", "kim", "--reason", "why", *place])
    if isinstance(investigation, int):
        return investigation
    candidate = _step(
        [
            "disposition",
            investigation,
            "regression_candidate",
            "--by",
            "kim",
            "--reason",
            "a real failure",
            *place,
        ],
        word=2,
    )
    if isinstance(candidate, int):
        return candidate
    code = _step(["approve", candidate, "--by", by, "--reason", "keep it fixed", *place])
    return candidate if isinstance(code, str) else code


def _step(argv: list[str], *, word: int = 0) -> str | int:
    """Run one command, its stdout kept from the test's; the id it printed first (its
    ``word``-th word) or its exit code when it failed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    if code:
        return code
    words = out.getvalue().replace(";", " ").replace(":", " ").split()
    return words[1] if words[0] == "already" else words[word]


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes: what "nothing written" compares."""
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def sets(tmp_path: Path) -> Path:
    return tmp_path / "sets"


# -- only approved candidates ---------------------------------------------------------------


def test_only_an_approved_candidate_is_published_and_every_step_is_an_event(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    place = ["--sets", str(sets)]
    case = _step(
        [
            "case",
            "from-run",
            "alice",
            "--root",
            str(run.root),
            "--out",
            str(run.out),
            *CASE_FLAGS,
            "--by",
            "ta-lee",
            "--reason",
            "a label changed the answer",
            *place,
        ]
    )
    assert case == "case-1"
    # A false alarm makes no candidate; a review is never overwritten.
    assert main(["investigate", "case-1", "--by", "kim", "--reason", "look", *place]) == 0
    assert (
        main(["disposition", "inv-1", "false_alarm", "--by", "kim", "--reason", "flaky", *place])
        == 0
    )
    assert "inv-1: false_alarm; no candidate" in capsys.readouterr().out
    assert (
        main(
            [
                "disposition",
                "inv-1",
                "regression_candidate",
                "--by",
                "lee",
                "--reason",
                "no, real",
                *place,
            ]
        )
        == 2
    )
    assert (
        "inv-1 was reviewed already (asset ledger event 2: false_alarm by kim): a review "
        "is never overwritten; open a new investigation" in capsys.readouterr().err
    )
    assert main(["investigate", "case-1", "--by", "kim", "--reason", "again", *place]) == 0
    assert (
        main(
            [
                "disposition",
                "inv-2",
                "regression_candidate",
                "--by",
                "kim",
                "--reason",
                "a real failure",
                *place,
            ]
        )
        == 0
    )
    assert (
        "cand-1 is a candidate for a regression set: a person approves it next"
        in capsys.readouterr().out
    )
    # Not approved yet: nothing is published.
    promote_it = [
        "regression",
        "promote",
        "refunds",
        "--candidate",
        "cand-1",
        "--by",
        "lee",
        *place,
    ]
    assert main(promote_it) == 2
    assert (
        "cand-1 is not approved: only an approved candidate is published; a person "
        "approves it first (`.venv/bin/gradekit approve cand-1 --by NAME --reason TEXT`)"
        in capsys.readouterr().err
    )
    assert not (sets / "refunds").exists()
    assert main(["approve", "cand-1", "--by", "lee", "--reason", "keep it fixed", *place]) == 0
    assert main(["approve", "cand-1", "--by", "lee", "--reason", "twice", *place]) == 2
    assert main(promote_it) == 0
    events = read_ledger(sets / ASSETS).events
    assert [e["event"] for e in events] == [
        "case",
        "investigation",
        "disposition",
        "investigation",
        "disposition",
        "candidate",
        "approval",
        "promote",
    ]
    assert (
        events[-1]["candidate"],
        events[-1]["set"],
        events[-1]["version"],
        events[-1]["sha256"],
    ) == ("cand-1", "refunds", 1, sha256(sets / "refunds" / "v1.json"))
    item = _loaded(sets, 1).items[0]
    assert dict(item.source) == {
        "case": "case-1",
        "version": 1,
        "candidate": "cand-1",
        "approved_by": "lee",
        "origin": "run",
        "run": {
            "student": "alice",
            "submission": "alice",
            "seq": run.seq,
            "report": run.report,
            "path": f"cassettes/{CASE}.json",
        },
    }
    assert (item.reviewed_by, item.reason) == ("kim", "a label changed the answer")
    capsys.readouterr()
    assert main(["ledger", "verify", str(sets)]) == 0  # the asset ledger's chain holds
    # The grades folder is only read: no event of the path is in its ledger.
    assert [e["event"] for e in read_ledger(run.out / LEDGER).events] == ["run"]


def test_a_saved_case_can_come_from_an_older_run_and_is_saved_once(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = submission(tmp_path)
    old = graded(root, tmp_path / "grades")
    new = graded(root, tmp_path / "grades", failing=(CASE, "sql-explain"))
    assert new.report != old.report
    saving = [
        "case",
        "from-run",
        "alice",
        "--root",
        str(root),
        "--out",
        str(old.out),
        *CASE_FLAGS,
        "--by",
        "ta-lee",
        "--reason",
        "r",
        "--sets",
        str(sets),
        "--report",
        old.report,
    ]
    assert main(saving) == 0
    assert main(saving) == 0  # the same run saved again
    assert (
        "already case-1 (version 1, active), saved from the same run: nothing appended"
        in capsys.readouterr().out
    )
    assert [e["event"] for e in read_ledger(sets / ASSETS).events] == ["case"]
    assert promote(old, sets, *CASE_FLAGS, "--report", old.report) == 0
    item = _loaded(sets, 1).items[0]
    assert (item.source["run"]["seq"], item.source["run"]["report"]) == (old.seq, old.report)


@pytest.mark.parametrize(
    ("path", "edit", "says"),
    [
        ("fixtures/refund-policy.json", "append", "changed (sha256 "),
        ("fixtures/refund-policy.json", "delete", "is gone"),
    ],
)
def test_a_payload_changed_since_the_run_is_refused(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
    path: str,
    edit: str,
    says: str,
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    file = run.root / path
    if edit == "append":
        file.write_bytes(file.read_bytes() + b"\n")  # still a valid recording
    else:
        file.unlink()
    ledger = (run.out / LEDGER).read_bytes()
    assert promote(run, sets, *CASE_FLAGS) == 2
    err = capsys.readouterr().err
    assert f"{path} {says}" in err and f"since run {run.seq} graded it" in err
    assert "grade the submission again, then save the case from that run" in err
    assert (run.out / LEDGER).read_bytes() == ledger and not sets.exists()


def test_a_changed_incident_is_refused(
    tmp_path: Path, sets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    incident = run.root / INCIDENT
    incident.write_bytes(incident.read_bytes().replace(b"960.00", b"480.00"))
    assert promote(run, sets, *INCIDENT_FLAGS) == 2
    assert f"{INCIDENT} changed (sha256 " in capsys.readouterr().err
    assert not sets.exists()


def test_a_forged_review_breaks_the_ledger_chain_and_is_refused(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = submission(tmp_path)
    old = graded(root, tmp_path / "grades")
    review(old)
    new = graded(root, tmp_path / "grades", failing=(CASE, "sql-explain"))
    ledger = new.out / LEDGER
    text = ledger.read_text("utf-8").splitlines(keepends=True)
    forged = json.loads(text[1])
    forged["report"] = new.report  # the old review, made to name the new report
    text[1] = json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n"
    ledger.write_text("".join(text), "utf-8")
    assert promote(new, sets, *CASE_FLAGS) == 2
    err = capsys.readouterr().err
    assert f"{ledger}:3: the chain breaks here" in err
    assert f"`.venv/bin/gradekit ledger verify {ledger.parent}`" in err
    assert not sets.exists()


# -- only failing runs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failing", "degraded", "points", "says"),
    [
        (("sql-explain",), (), None, "no check of it failed in its report"),
        ((), (CASE,), None, "a degraded check was never evaluated"),
        ((CASE,), (), "30.00", "a reviewer gave full marks to every criterion where it failed"),
    ],
)
def test_a_case_the_run_did_not_fail_is_refused(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
    failing: tuple[str, ...],
    degraded: tuple[str, ...],
    points: str | None,
    says: str,
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades", failing=failing, degraded=degraded)
    review(run, points=points)
    assert promote(run, sets, *CASE_FLAGS) == 2
    err = capsys.readouterr().err
    assert f"run {run.seq} of alice shows no failure of case {CASE} to guard against" in err
    assert says in err and not sets.exists()


@pytest.mark.parametrize(
    ("forbid", "says"),
    [
        (
            "refund_terms",
            "none of refund_terms ran in incidents/refund-outside-window.jsonl "
            "(actions that ran: issue_refund)",
        ),
        ("delete_student", "none of delete_student ran"),
    ],
)
def test_an_incident_whose_forbidden_action_never_ran_is_refused(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
    forbid: str,
    says: str,
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    assert (
        promote(
            run,
            sets,
            "--incident",
            INCIDENT,
            "--agent",
            "lab.refunds:run",
            *GOAL,
            "--forbid",
            forbid,
            "--outcome",
            "answer",
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "shows no failure to guard against" in err and says in err
    assert not sets.exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--case", CASE), "give --outcome answer (run() must return a str) or --outcome raise"),
        (INCIDENT_FLAGS[:-2], "give --outcome answer"),
        (
            ("--incident", INCIDENT, "--outcome", "answer", "--forbid", "issue_refund"),
            "--agent package.module:function is required with --incident",
        ),
        (("--case", CASE, "--outcome", "answer"), 'give --goal "what the run is for"'),
        (
            ("--incident", INCIDENT, "--agent", "lab.refunds:run", "--outcome", "answer", *GOAL),
            "give --forbid TOOL: an incident item guards against an action that ran (in "
            "incidents/refund-outside-window.jsonl: issue_refund)",
        ),
        (
            (*INCIDENT_FLAGS[:2], "--agent", "lab.alice_only:run", *INCIDENT_FLAGS[4:]),
            "--agent lab.alice_only:run cannot apply to another student: the reference lab (",
        ),
        ((*CASE_FLAGS, "--agent", "lab.mine:run"), "has no lab/mine.py or lab/mine/__init__.py"),
        ((*INCIDENT_FLAGS[:4], "--agent", "lab/refunds.py"), 'must look like "package.module:'),
        (("--case", "no-such-case", "--outcome", "answer"), "has no case 'no-such-case'"),
        ((*CASE_FLAGS, "--never-mention", "refund"), "is in both mentions and never_mentions"),
    ],
)
def test_an_item_that_could_never_be_judged_is_refused(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
    flags: tuple[str, ...],
    says: str,
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    assert promote(run, sets, *flags) == 2
    assert says in capsys.readouterr().err
    assert not sets.exists()


# -- versions: written once, chained -------------------------------------------------------


def _two_students(tmp_path: Path) -> tuple[Run, Run]:
    out = tmp_path / "grades"
    alice = graded(submission(tmp_path, "alice"), out)
    bob = graded(submission(tmp_path, "bob"), out)
    return alice, bob


def _loaded(sets: Path, version: int) -> RegressionSet:
    loaded = load_set(sets, "refunds", version)
    assert loaded is not None
    return loaded


def test_promotion_writes_v1_then_v2_that_inherits_v1_unchanged(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, bob = _two_students(tmp_path)
    assert promote(alice, sets, *CASE_FLAGS) == 0
    assert capsys.readouterr().out == (
        "refunds@1: 1 item (0 inherited, 1 new: refund-policy); pin it in a rubric: "
        '[criterion.params] set = "refunds@1"\n'
    )
    assert promote(bob, sets, *INCIDENT_FLAGS) == 0
    assert capsys.readouterr().out == (
        "refunds@2: 2 items (1 inherited, 1 new: refund-outside-window); pin it in a "
        'rubric: [criterion.params] set = "refunds@2"\n'
    )
    v1, v2 = (sets / "refunds" / "v1.json"), (sets / "refunds" / "v2.json")
    first, second = json.loads(v1.read_bytes()), json.loads(v2.read_bytes())
    assert first["supersedes"] is None and first["format"] == "gradekit.regression/2"
    assert second["supersedes"] == {"version": 1, "sha256": sha256(v1)}
    assert second["items"][0] == first["items"][0]
    assert [i["added_in"] for i in second["items"]] == [1, 2]
    for path in (v1, v2):  # deterministic bytes, nothing of this machine in them
        data = path.read_bytes()
        assert (
            data
            == (
                json.dumps(json.loads(data), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
            ).encode()
        )
        assert str(tmp_path).encode() not in data
    loaded = load_set(sets, "refunds", 2)
    assert loaded is not None and loaded.ref == "refunds@2" and loaded.sha256 == sha256(v2)
    case, incident = loaded.items
    # The case's world is the tool reads of alice's graded fixture; her answers stay hers.
    fixture = decode_fixture((alice.root / "fixtures" / f"{CASE}.json").read_bytes(), source="f")
    assert case.reads() == {key: call.response for key, call in fixture.calls.items()}
    assert case.reads()  # the reference's refund-policy reads the docs
    assert (case.kind, case.agent, case.expect, case.reviewed_by) == (
        "case",
        None,
        Expectation("answer", ("refund",), goal=GOAL[1]),
        "kim",
    )
    assert dict(case.source) == {
        "case": "case-1",
        "version": 1,
        "candidate": "cand-1",
        "approved_by": "kim",
        "origin": "run",
        "run": {
            "student": "alice",
            "submission": "alice",
            "seq": alice.seq,
            "report": alice.report,
            "path": f"cassettes/{CASE}.json",
        },
    }
    assert (
        sorted(key.partition(" ")[0] for key in incident.reads())
        == ["issue_refund", "refund_terms"]
        and not incident.missing
    )
    promotes = [e for e in read_ledger(sets / ASSETS).events if e["event"] == "promote"]
    assert [
        (e["version"], e["sha256"], e["item"], e["case"], e["candidate"], e["by"]) for e in promotes
    ] == [
        (1, sha256(v1), "refund-policy", "case-1", "cand-1", "ta-lee"),
        (2, sha256(v2), "refund-outside-window", "case-2", "cand-2", "ta-lee"),
    ]


def test_versions_are_never_rewritten(
    tmp_path: Path, sets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, bob = _two_students(tmp_path)
    assert promote(alice, sets, *CASE_FLAGS) == 0
    assert promote(bob, sets, *CASE_FLAGS) == 0
    before = files(sets / "refunds")
    assert promote(alice, sets, *INCIDENT_FLAGS) == 0
    assert version_numbers(sets, "refunds") == [1, 2, 3]
    after = files(sets / "refunds")
    assert {path: after[path] for path in before} == before  # v1, v2, their payloads
    assert main(["regression", "verify", "--sets", str(sets)]) == 0
    out = capsys.readouterr().out
    assert f"ok   {sets / 'refunds' / 'v3.json'}: 3 items (2 inherited), sha256 " in out


def _edit(path: Path, change: str) -> None:
    document = json.loads(path.read_bytes())
    if change == "reformatted":
        path.write_text(json.dumps(document, indent=4), "utf-8")
        return
    document["items"][0]["reason"] = "edited afterwards"
    path.write_text(json.dumps(document, sort_keys=True, indent=2) + "\n", "utf-8")


@pytest.mark.parametrize(
    ("version", "change", "failing", "says"),
    [
        (1, "canonical", 1, "supersedes"),
        (1, "reformatted", 1, "the bytes are not canonical"),
        (2, "canonical", 2, "does not hold the 1 item of v1 unchanged and in order"),
    ],
)
def test_an_edited_version_is_caught(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
    version: int,
    change: str,
    failing: int,
    says: str,
) -> None:
    alice, bob = _two_students(tmp_path)
    assert promote(alice, sets, *CASE_FLAGS) == 0
    assert promote(bob, sets, *CASE_FLAGS) == 0
    _edit(sets / "refunds" / f"v{version}.json", change)
    capsys.readouterr()
    assert main(["regression", "verify", "refunds", "--sets", str(sets)]) == 1
    shown = capsys.readouterr()
    blamed = sets / "refunds" / f"v{failing}.json"
    assert f"FAIL {blamed}: " in shown.err and says in shown.err
    assert "git checkout -- " in shown.err and f"ok   {blamed}" not in shown.out
    if version == 1:  # the edited file itself is refused, naming it
        with pytest.raises(UsageError, match=r"v1\.json: .*git checkout"):
            load_set(sets, "refunds", 1)
    # nothing is built on a chain that does not verify
    carol = graded(submission(tmp_path, "carol"), alice.out)
    assert promote(carol, sets, *CASE_FLAGS) == 2
    assert "nothing is added to a set that does not verify" in capsys.readouterr().err
    assert version_numbers(sets, "refunds") == [1, 2]


def test_an_edited_payload_is_caught(
    tmp_path: Path, sets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    assert promote(run, sets, *INCIDENT_FLAGS) == 0
    payload = sets / "refunds" / "items" / f"{_item(sets).digests['world']}.json"
    payload.write_bytes(payload.read_bytes().replace(b'"day": 73', b'"day": 7'))
    with pytest.raises(UsageError, match=f"{payload}: its bytes hash to .* it was edited"):
        load_set(sets, "refunds", 1)
    assert main(["regression", "verify", "--sets", str(sets)]) == 1
    assert f"FAIL {payload}: its bytes hash to" in capsys.readouterr().err


def test_a_deleted_payload_leaves_the_item_missing(
    tmp_path: Path, sets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, bob = _two_students(tmp_path)
    assert promote(alice, sets, *CASE_FLAGS) == 0
    assert promote(bob, sets, *INCIDENT_FLAGS) == 0
    digest = _loaded(sets, 2).items[0].digests["world"]
    world = sets / "refunds" / "items" / f"{digest}.json"
    world.unlink()
    loaded = load_set(sets, "refunds", 2)
    assert loaded is not None
    case, incident = loaded.items
    assert case.world is None
    assert case.missing == (
        f"refunds/items/{digest}.json is missing from the set (the "
        "world of item refund-policy): restore it from git "
        "(`git checkout`), or promote the item again"
    )
    assert str(tmp_path) not in case.missing  # a report quotes it: no machine's path
    assert incident.missing == "" and incident.world is not None  # the rest still grades
    capsys.readouterr()
    assert main(["regression", "verify", "--sets", str(sets)]) == 1
    assert (
        f"FAIL {sets / 'refunds' / 'v2.json'}: refunds/items/{digest}.json is missing"
        in capsys.readouterr().err
    )
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 0
    assert f"    MISSING   refunds/items/{digest}.json is missing" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_two_concurrent_promotions_make_one_chain(tmp_path: Path, sets: Path) -> None:
    out = tmp_path / "grades"
    runs = [graded(submission(tmp_path, student), out) for student in ("alice", "bob", "carol")]
    assert promote(runs[0], sets, *CASE_FLAGS) == 0
    candidates = []
    for run in runs[1:]:
        case = _step(
            [
                "case",
                "from-run",
                run.student,
                "--root",
                str(run.root),
                "--out",
                str(out),
                *CASE_FLAGS,
                "--by",
                "ta-lee",
                "--reason",
                "r",
                "--sets",
                str(sets),
            ]
        )
        candidates.append(approved(sets, str(case)))
    lock = sets / "refunds" / ".lock"
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # both promotions must wait here, at the same time
    try:
        writers = [_promoting(str(candidate), sets) for candidate in candidates]
        _wait_for_waiters(os.fstat(fd).st_ino, 2, writers)
    finally:
        os.close(fd)
    for writer in writers:
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
    assert version_numbers(sets, "refunds") == [1, 2, 3]
    assert main(["regression", "verify", "refunds", "--sets", str(sets)]) == 0
    v2, v3 = _loaded(sets, 2), _loaded(sets, 3)
    # Default ids name the case, never the student; another run's is numbered.
    assert [item.id for item in v3.items] == ["refund-policy", "refund-policy-2", "refund-policy-3"]
    assert {item.source["run"]["student"] for item in v3.items[1:]} == {"bob", "carol"}
    promotes = [e for e in read_ledger(sets / ASSETS).events if e["event"] == "promote"]
    assert [e["version"] for e in promotes] == [1, 2, 3]  # the ledger in version order
    assert promotes[1]["item"] == v2.items[-1].id


def _promoting(candidate: str, sets: Path) -> subprocess.Popen[str]:
    args = [
        "regression",
        "promote",
        "refunds",
        "--candidate",
        candidate,
        "--sets",
        str(sets),
        "--by",
        "ta-lee",
    ]
    script = "import sys; from grader.cli import main; raise SystemExit(main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], cwd=REFERENCE, stderr=subprocess.PIPE, text=True
    )


def _wait_for_waiters(inode: int, count: int, writers: list[subprocess.Popen[str]]) -> None:
    """Until ``count`` processes are blocked on the lock of ``inode`` (``/proc/locks``
    lists a blocked request with ``->``)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = Path("/proc/locks").read_text().splitlines()
        if sum("->" in line and f":{inode} " in line for line in lines) >= count:
            return
        assert all(writer.poll() is None for writer in writers), "a promotion did not wait"
        time.sleep(0.05)
    pytest.fail("the promotions never waited for the set's lock")


# -- one source, one item ------------------------------------------------------------------


def test_the_same_source_promoted_twice_adds_nothing(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    assert promote(run, sets, *CASE_FLAGS) == 0
    capsys.readouterr()
    before, ledger = files(sets / "refunds"), (run.out / LEDGER).read_bytes()
    for again in ((), ("--item", "another-id")):
        assert promote(run, sets, *CASE_FLAGS, *again) == 0  # the same case, approved again
        assert capsys.readouterr().out == (
            "already in refunds@1 as item refund-policy (case case-1, version 1): nothing written\n"
        )
    assert files(sets / "refunds") == before and (run.out / LEDGER).read_bytes() == ledger
    assert [e["event"] for e in read_ledger(sets / ASSETS).events].count("promote") == 1


def test_a_default_id_another_source_holds_is_numbered_and_a_given_one_refused(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = submission(tmp_path)
    first = graded(root, tmp_path / "grades")
    assert promote(first, sets, *CASE_FLAGS) == 0
    second = graded(root, tmp_path / "grades", failing=(CASE, "sql-explain"))
    assert promote(second, sets, *CASE_FLAGS, "--item", "refund-policy") == 2
    assert (
        "item refund-policy is already in refunds@1, from case case-1 version 1: give "
        "this one another id with --item"
    ) in capsys.readouterr().err
    assert promote(second, sets, *CASE_FLAGS) == 0
    assert "1 new: refund-policy-2" in capsys.readouterr().out
    assert [item.id for item in _loaded(sets, 2).items] == ["refund-policy", "refund-policy-2"]


# -- what comes from outside is bounded ----------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "A", "", "a/b", "-x", "x" * 65, "refunds\n", "."])
def test_hostile_names_are_refused(
    tmp_path: Path, sets: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    case = _step(
        [
            "case",
            "from-run",
            "alice",
            "--root",
            str(run.root),
            "--out",
            str(run.out),
            *CASE_FLAGS,
            "--by",
            "ta-lee",
            "--reason",
            "r",
            "--sets",
            str(sets),
        ]
    )
    candidate = approved(sets, str(case))
    assert isinstance(candidate, str)
    before = files(tmp_path)
    promote_it = [
        "regression",
        "promote",
        "--candidate",
        candidate,
        "--sets",
        str(sets),
        "--by",
        "ta-lee",
    ]
    assert main([*promote_it, "--", name]) == 2
    assert main([*promote_it, f"--item={name}", "--", "refunds"]) == 2
    err = capsys.readouterr().err
    assert f"{name!r} is not a name: use 1 to 64 lowercase letters" in err
    assert files(tmp_path) == before
    with pytest.raises(UsageError, match="is not a name"):
        load_set(sets, name, 1)
    assert main(["regression", "show", "--sets", str(sets), "--", f"{name}@1"]) == 2


def test_an_item_never_names_the_student_whatever_their_name(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An item's id is a check of every classmate's report it grades: it must not say
    whose failure it was. A name that is no id at all changes nothing either."""
    run = graded(submission(tmp_path, "Alice_Ames"), tmp_path / "grades")
    assert promote(run, sets, *CASE_FLAGS) == 0
    assert "1 new: refund-policy);" in capsys.readouterr().out
    item = _loaded(sets, 1).items[0]
    assert item.id == "refund-policy" and item.source["run"]["student"] == "Alice_Ames"


@pytest.mark.parametrize(
    "text",
    ["refunds", "refunds@0", "refunds@x", "refunds@2@3", "@2", "../x@1", "Refunds@1", "refunds@02"],
)
def test_a_malformed_reference_says_how_to_write_one(text: str) -> None:
    with pytest.raises(UsageError, match=r"NAME@VERSION|is not a name"):
        parse_ref(text)


def test_a_reference_names_a_set_and_a_version() -> None:
    assert parse_ref("refunds@2") == ("refunds", 2)
    assert parse_ref("a-1@10") == ("a-1", 10)


def _deep(root: Path) -> bytes:
    header = (root / INCIDENT).read_bytes().splitlines(keepends=True)[0]
    return header + b"[" * 200_000 + b"]" * 200_000 + b"\n"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (
            lambda root: b"this is not JSON\n",
            "is not an incident gradekit can replay (incidents/evil.jsonl:1: not a JSON line",
        ),
        (lambda root: b"{}" * (1024 * 1024), "is larger than 1 MiB, the most the grader reads"),
        (
            _deep,
            "is not an incident gradekit can replay (incidents/evil.jsonl:2: nested too deep "
            "to be a JSON line",
        ),
        (lambda root: (root / INCIDENT).read_bytes()[:-1], "was cut off while it was written"),
        (
            lambda root: (root / INCIDENT).read_bytes().replace(b'"index":2', b'"index":7'),
            "not envelope 2 of an incident",
        ),
        (lambda root: b"", "has no header line"),
    ],
)
def test_a_hostile_incident_is_refused_with_a_clear_message(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
    make: object,
    says: str,
) -> None:
    root = submission(tmp_path)
    assert callable(make)
    (root / "incidents" / "evil.jsonl").write_bytes(make(root))
    run = graded(root, tmp_path / "grades")
    assert promote(run, sets, "--incident", "incidents/evil.jsonl", *INCIDENT_FLAGS[2:]) == 2
    err = capsys.readouterr().err
    assert err.startswith("UsageError: ") and says in err, err
    assert not sets.exists()


def test_a_linked_incident_is_refused(
    tmp_path: Path, sets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = submission(tmp_path)
    (root / "incidents" / "evil.jsonl").symlink_to(REFERENCE / INCIDENT)
    run = graded(root, tmp_path / "grades")
    assert promote(run, sets, "--incident", "incidents/evil.jsonl", *INCIDENT_FLAGS[2:]) == 2
    assert "incidents/evil.jsonl is a symlink" in capsys.readouterr().err


def test_a_students_text_is_shown_without_driving_the_terminal(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = submission(tmp_path)
    incident = root / INCIDENT
    lines = incident.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["task"] = "\x1b[2J\rrm -rf /\n" + header["task"]
    incident.write_bytes(
        json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        + b"\n"
        + b"".join(lines[1:])
    )
    run = graded(root, tmp_path / "grades")
    assert promote(run, sets, *INCIDENT_FLAGS) == 0
    capsys.readouterr()
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "    task      \\x1b[2J\\x0drm -rf /\\nStudent chen asks" in out


# -- the reference incident, as an item ----------------------------------------------------


def test_the_reference_incident_becomes_an_item_that_keeps_its_world_not_its_answers(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    assert promote(run, sets, *INCIDENT_FLAGS, "--never-mention", "refunded") == 0
    assert "1 new: refund-outside-window" in capsys.readouterr().out
    item = _item(sets)
    incident = decode_incident((REFERENCE / INCIDENT).read_bytes(), source=INCIDENT)
    assert (item.kind, item.agent, item.task) == ("incident", "lab.refunds:run", incident.task)
    assert item.expect == Expectation("answer", (), ("refunded",), ("issue_refund",), goal=GOAL[1])
    assert item.source["run"]["path"] == INCIDENT
    # Its world: the read (the policy's terms on day 73) and the action's recorded result.
    assert item.reads() == {e.key: e.output for e in incident.envelopes if e.kind != "model"}
    # Never the model's answer: every student's run is served from their own recording.
    model = next(e for e in incident.envelopes if e.kind == "model")
    held = b"".join(files(sets).values())
    assert str(model.output).encode() not in held
    assert json.dumps(model.input["prompt"])[1:-1].encode() not in held


def test_the_public_view_is_what_a_student_may_see_and_a_hand_out_reads(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = graded(submission(tmp_path, "alice-ames"), tmp_path / "grades")
    assert promote(run, sets, *INCIDENT_FLAGS) == 0
    full = _item(sets)
    public = sets / "refunds" / "v1.public.json"
    document = json.loads(public.read_bytes())
    assert document["format"] == "gradekit.regression-public/1"
    assert document["sha256"] == sha256(sets / "refunds" / "v1.json")
    [shown] = document["items"]
    assert (
        set(shown) == {"id", "kind", "added_in", "task", "agent", "world", "expect", "origin"}
        and shown["origin"] == "run"
    )
    assert b"alice-ames" not in public.read_bytes() and b"ta-lee" not in public.read_bytes()
    assert b"a label changed the answer" not in public.read_bytes()
    # A hand-out holds only the view: the set reads from it, with the same items to record.
    (sets / "refunds" / "v1.json").unlink()
    viewed = _loaded(sets, 1)
    assert viewed.public and viewed.sha256 == document["sha256"]
    [item] = viewed.items
    assert (item.id, item.task, item.agent, item.expect, item.reads()) == (
        full.id,
        full.task,
        full.agent,
        full.expect,
        full.reads(),
    )
    assert dict(item.source) == {"origin": "run"} and item.reviewed_by == ""


def test_a_missing_public_view_is_caught_and_written_again_an_edited_one_refused(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    assert promote(run, sets, *INCIDENT_FLAGS) == 0
    public = sets / "refunds" / "v1.public.json"
    written = public.read_bytes()
    public.unlink()  # a promotion cut off between its two files
    capsys.readouterr()
    assert main(["regression", "verify", "--sets", str(sets)]) == 1
    err = capsys.readouterr().err
    assert (
        f"FAIL {public}: is missing (what every student records the items from): write "
        f"it again: `.venv/bin/gradekit regression public refunds --sets {sets}`" in err
    )
    assert main(["regression", "public", "refunds", "--sets", str(sets)]) == 0
    assert capsys.readouterr().out == f"wrote {public}\n"
    assert public.read_bytes() == written
    assert main(["regression", "public", "refunds", "--sets", str(sets)]) == 0
    assert "nothing written" in capsys.readouterr().out
    public.write_bytes(written.replace(b"issue_refund", b"issue_refunds"))
    assert main(["regression", "verify", "--sets", str(sets)]) == 1
    assert f"FAIL {public}: does not hold the public view of v1.json" in capsys.readouterr().err


def test_a_set_of_the_retired_format_is_refused_with_the_fix(tmp_path: Path, sets: Path) -> None:
    run = graded(submission(tmp_path), tmp_path / "grades")
    assert promote(run, sets, *INCIDENT_FLAGS) == 0
    version = sets / "refunds" / "v1.json"
    version.write_bytes(
        version.read_bytes().replace(b"gradekit.regression/2", b"gradekit.regression/1")
    )
    with pytest.raises(
        UsageError,
        match=r"it is a gradekit.regression/1 set, which this "
        r"gradekit no longer grades: its case items replay the one student's "
        r"model answers .* promote those failures again into a new set",
    ):
        load_set(sets, "refunds", 1)


def _item(sets: Path) -> Item:
    loaded = load_set(sets, "refunds", 1)
    assert loaded is not None
    [item] = loaded.items
    return item


# -- where sets live, show, verify, and a real grading -------------------------------------


def test_a_case_item_takes_the_rubric_case_expectation_and_lives_beside_the_rubric(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rubric = tmp_path / "course" / "bootcamp.toml"
    rubric.parent.mkdir()
    text = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
    end = 'Write the reply to the student."""\n'
    assert text.count(end) == 1
    rubric.write_text(
        text.replace(
            end,
            end + '[case.expect]\noutcome = "answer"\nmentions = '
            '["14 days"]\nnever_mentions = ["full refund"]\n',
        ),
        "utf-8",
    )
    run = graded(submission(tmp_path), tmp_path / "grades")
    sets = rubric.parent / "regression"  # the default: beside the rubric
    case = _step(
        [
            "case",
            "from-run",
            "alice",
            "--root",
            str(run.root),
            "--out",
            str(run.out),
            "--rubric",
            str(rubric),
            "--case",
            CASE,
            "--mention",
            "full refund",
            "--forbid",
            "issue_refund",
            *GOAL,
            "--by",
            "ta-lee",
            "--reason",
            "promised a full refund on day 10",
        ]
    )
    assert case == "case-1" and (sets / ASSETS).is_file()
    candidate = approved(sets, case)
    assert (
        main(
            [
                "regression",
                "promote",
                "refunds",
                "--candidate",
                str(candidate),
                "--by",
                "ta-lee",
                "--rubric",
                str(rubric),
            ]
        )
        == 0
    )
    item = _item(sets)
    # the flag's fact overrides the case's opposite one; the outcome is the case's
    assert item.expect == Expectation(
        "answer", ("14 days", "full refund"), (), ("issue_refund",), goal=GOAL[1]
    )
    assert item.task.startswith("A student bought a bootcamp seat 10 days ago")
    assert main(["regression", "verify", "--rubric", str(rubric)]) == 0
    assert f"ok   {sets / 'refunds' / 'v1.json'}: 1 item (0 inherited)" in capsys.readouterr().out


def test_show_prints_every_key_of_an_items_expectation(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, _ = _two_students(tmp_path)
    assert (
        promote(
            alice,
            sets,
            *CASE_FLAGS,
            "--reply-template",
            "Refund: {decision}.",
            "--decision",
            "14 days",
            "--require",
            'read_docs {"query":"refund"}',
            "--cite",
            "read_docs:14 days",
        )
        == 0
    )
    capsys.readouterr()
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 0
    expect = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("    expect    ")
    ]
    assert expect == [
        "    expect    outcome answer; mentions 'refund'; never mentions -; forbids -; goal "
        "'the student learns what the policy gives them'; decision '14 days'; reply template "
        "'Refund: {decision}.'; requires 'read_docs {\"query\":\"refund\"}'; cites "
        "'read_docs: 14 days'"
    ]


def test_show_prints_the_chain_and_the_chosen_versions_items(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, bob = _two_students(tmp_path)
    assert promote(alice, sets, *CASE_FLAGS) == 0
    assert promote(bob, sets, *INCIDENT_FLAGS) == 0
    capsys.readouterr()
    v1, v2 = sha256(sets / "refunds" / "v1.json"), sha256(sets / "refunds" / "v2.json")
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 0
    shown = capsys.readouterr().out
    lines = shown.splitlines()
    assert lines[:4] == [
        "refunds: 2 versions",
        f"  v1   sha256 {v1[:12]}  supersedes -                created by ta-lee",
        f"  v2   sha256 {v2[:12]}  supersedes v1 {v1[:12]}  created by ta-lee",
        f"refunds@2: 2 items, sha256 {v2}",
    ]
    assert "  refund-policy (case, added in v1)" in lines
    assert (
        f"    source    case case-1 version 1, candidate cand-1; from a run of alice "
        f"(submission alice, run {alice.seq}), report {alice.report[:12]}, "
        "cassettes/refund-policy.json; approved by kim" in lines
    )
    assert (
        "    expect    outcome answer; mentions 'refund'; never mentions -; forbids -; goal "
        "'the student learns what the policy gives them'" in lines
    )
    assert "  refund-outside-window (incident, added in v2)" in lines
    assert "    agent     each submission's own (its manifest's agent)" in lines  # the case's
    assert "    agent     lab.refunds:run" in lines
    worlds = [line for line in lines if line.startswith("    world     ")]
    assert len(worlds) == 2 and worlds[1].startswith("    world     2 tool call(s) answered")
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 0
    assert capsys.readouterr().out == shown  # the same files, the same text
    assert main(["regression", "show", "refunds@1", "--sets", str(sets)]) == 0
    first = capsys.readouterr().out
    assert "refund-outside-window" not in first and f"refunds@1: 1 item, sha256 {v1}" in first
    assert main(["regression", "show", "refunds@3", "--sets", str(sets)]) == 2
    assert "refunds has no version 3; its versions: v1 to v2" in capsys.readouterr().err


def test_verify_without_a_set_says_where_it_looked(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["regression", "verify", "--sets", str(sets)]) == 2
    assert f"no regression set in {sets}: pass --sets DIR" in capsys.readouterr().err
    (sets / "other").mkdir(parents=True)
    assert main(["regression", "verify", "refunds", "--sets", str(sets)]) == 1
    assert f"FAIL {sets / 'refunds'}: no such regression set" in capsys.readouterr().err
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 2


@pytest.mark.slow
def test_a_real_grading_reviewed_then_promoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run event and archived report `gradekit grade` writes are what promote reads: an
    agent that stops tracing fails tracing in every case."""
    root = submission(tmp_path)
    agent = root / "lab" / "agent.py"
    text = agent.read_text("utf-8")
    for old, new in (
        ("    llm = Traced(provider)\n", "    llm = provider\n"),
        ("_look_up(TracedTools(tools), task)", "_look_up(tools, task)"),
    ):
        assert text.count(old) == 1
        text = text.replace(old, new)
    agent.write_text(text, "utf-8")
    out, sets = tmp_path / "grades", tmp_path / "sets"
    assert main(["grade", str(root), "--out", str(out)]) == 0
    [event] = [e for e in read_ledger(out / LEDGER).events if e["event"] == "run"]
    assert INCIDENT in event["inputs"] and f"cassettes/{CASE}.json" in event["inputs"]
    run = Run(root, out, "alice", event["seq"], event["report"])
    append_events(
        out / LEDGER,
        [
            {
                "event": "review",
                "student": "alice",
                "submission": "alice",
                "report": run.report,
                "run": run.seq,
                "criterion": "tracing",
                "automated": "0.00",
                "max": "20.00",
                "points": None,
                "by": "kim",
                "reason": "no trace at all",
            }
        ],
    )
    capsys.readouterr()
    assert promote(run, sets, *CASE_FLAGS) == 0
    assert promote(run, sets, *INCIDENT_FLAGS) == 0
    assert (
        "refunds@2: 2 items (1 inherited, 1 new: refund-outside-window)" in capsys.readouterr().out
    )
    assert main(["regression", "verify", "--sets", str(sets)]) == 0


# -- where an item came from: a run, a person, or a model's draft -------------------------

DRAFTER = "model:gpt-4o-mini"
DRAFT_TASK = "Student dana asks for a refund 40 days after buying her seat."
HAND_TASK = "Student eli asks whether a seat can move to the next cohort."
TRUTH = (
    "--goal",
    "the student learns what the policy gives them",
    "--outcome",
    "answer",
    "--mention",
    "policy",
)
BEFORE_ORIGIN = Path(__file__).parent / "before_origin"  # a set promoted by gradekit 2.x
BEFORE_SHA256 = "4d8e0cc3dd867485461d54f820ac242cc26240a9217bf774395f1344033c1e3a"


def written(sets: Path, task: str, name: str, *flags: str, by: str) -> str | int:
    """``case new``, as an instructor (or a model's pipeline) files it: the case's id."""
    return _step(
        [
            "case",
            "new",
            "--task",
            task,
            "--name",
            name,
            *TRUTH,
            "--by",
            by,
            "--reason",
            "a question the lab never asks",
            "--sets",
            str(sets),
            *flags,
        ]
    )


def published(sets: Path, case: str | int, *, name: str = "refunds") -> None:
    """``case`` investigated, a regression candidate, approved by kim, promoted by lee."""
    candidate = approved(sets, str(case))
    assert isinstance(candidate, str), candidate
    after = len(version_numbers(sets, name)) + 1
    assert (
        _step(
            [
                "regression",
                "promote",
                name,
                "--candidate",
                candidate,
                "--by",
                "lee",
                "--sets",
                str(sets),
            ]
        )
        == f"{name}@{after}"
    )


def _origins(path: Path) -> list[object]:
    return [item.get("origin") for item in json.loads(path.read_bytes())["items"]]


def test_an_ai_draft_stays_ai_drafted_in_every_version_its_public_view_and_show(
    tmp_path: Path,
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The attack: a model's draft, once a person approved it, must not pass for a case a
    person wrote, in the set, in what students get, or in what `show` prints; and every
    later version keeps saying so."""
    alice = graded(submission(tmp_path), tmp_path / "grades")
    draft = written(sets, DRAFT_TASK, "refund-day-40", "--source", "ai_draft", by=DRAFTER)
    assert draft == "case-1"
    published(sets, draft)  # refunds@1
    published(sets, written(sets, HAND_TASK, "seat-move", by="lee"))  # refunds@2
    assert promote(alice, sets, *CASE_FLAGS) == 0  # refunds@3
    folder = sets / "refunds"
    drafted = {
        "case": "case-1",
        "version": 1,
        "candidate": "cand-1",
        "approved_by": "kim",
        "run": None,
        "origin": "ai_draft",
        "by": DRAFTER,
    }
    first = json.loads((folder / "v1.json").read_bytes())
    assert first["items"][0]["source"] == drafted
    third = json.loads((folder / "v3.json").read_bytes())
    assert third["items"][0] == first["items"][0]  # inherited unchanged, origin and all
    assert third["items"][1]["source"] == {
        "case": "case-2",
        "version": 1,
        "candidate": "cand-2",
        "approved_by": "kim",
        "run": None,
        "origin": "manual",
    }
    assert third["items"][2]["source"]["origin"] == "run"
    inherited = _loaded(sets, 3).items[0]
    assert (dict(inherited.source), inherited.origin) == (drafted, "ai_draft")
    # What students get marks the draft as one, and names no one.
    assert _origins(folder / "v1.public.json") == ["ai_draft"]
    assert _origins(folder / "v2.public.json") == ["ai_draft", "manual"]
    assert _origins(folder / "v3.public.json") == ["ai_draft", "manual", "run"]
    view = (folder / "v3.public.json").read_bytes()
    for name in (b"alice", b"kim", b"lee", DRAFTER.encode()):
        assert name not in view
    hand_out = tmp_path / "hand-out" / "refunds"
    hand_out.mkdir(parents=True)
    shutil.copy(folder / "v3.public.json", hand_out)
    viewed = load_set(hand_out.parent, "refunds", 3)
    assert viewed is not None and viewed.public
    assert [item.origin for item in viewed.items] == ["ai_draft", "manual", "run"]
    # `show` says which is which, in the newest version and the first.
    capsys.readouterr()
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "    source    case case-1 version 1, candidate cand-1; drafted by a model "
        f"(ai_draft, filed by {DRAFTER}), approved by kim" in lines
    )
    assert (
        "    source    case case-2 version 1, candidate cand-2; written by hand, approved "
        "by kim" in lines
    )
    assert (
        "    source    case case-3 version 1, candidate cand-3; from a run of alice "
        f"(submission alice, run {alice.seq}), report {alice.report[:12]}, "
        "cassettes/refund-policy.json; approved by kim" in lines
    )
    assert not [line for line in lines if "written by hand" in line and "case-1" in line]
    assert main(["regression", "show", "refunds@1", "--sets", str(sets)]) == 0
    assert (
        f"drafted by a model (ai_draft, filed by {DRAFTER}), approved by kim"
        in capsys.readouterr().out
    )
    kept = (folder / "v1.json").read_bytes()
    (folder / "v1.json").unlink()  # then v1 is read from its public view: it names no one
    assert main(["regression", "show", "refunds@1", "--sets", str(sets)]) == 0
    assert (
        "    source    drafted by a model (ai_draft); public view"
        in capsys.readouterr().out.splitlines()
    )
    (folder / "v1.json").write_bytes(kept)
    assert main(["regression", "verify", "--sets", str(sets)]) == 0


def test_a_revised_draft_still_names_the_label_that_filed_it(
    sets: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A person's revision of a model's draft is still the model's draft: the item names
    the label that filed version 1, not the reviser."""
    assert (
        written(sets, DRAFT_TASK, "refund-day-40", "--source", "ai_draft", by=DRAFTER) == "case-1"
    )
    assert (
        main(
            [
                "case",
                "revise",
                "case-1",
                "--mention",
                "30 days",
                "--by",
                "lee",
                "--reason",
                "the policy's window",
                "--sets",
                str(sets),
            ]
        )
        == 0
    )
    published(sets, "case-2")
    [item] = _loaded(sets, 1).items
    assert (item.origin, item.source["by"], item.source["case"]) == ("ai_draft", DRAFTER, "case-2")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"origin": "template"}, "origin 'template' is not one of run, manual, ai_draft"),
        ({"origin": "manual", "by": "kim"}, "source holds by only for an ai_draft"),
        ({"origin": "ai_draft"}, "an ai_draft's source names the label that filed it (by)"),
        ({"origin": "ai_draft", "by": " "}, "an ai_draft's source names the label that filed it"),
        ({"origin": "run"}, "origin run, but its run is null"),
        ({"by": DRAFTER}, "source holds by only for an ai_draft"),
    ],
)
def test_an_origin_promotion_never_writes_is_refused(
    tmp_path: Path,
    change: dict[str, object],
    says: str,
) -> None:
    """A hand-made item whose origin contradicts itself (a draft passed off as a person's,
    a run with no run) reads as no item at all, saying what to do."""
    sets = tmp_path / "sets"
    shutil.copytree(BEFORE_ORIGIN, sets)
    document = json.loads((sets / "refunds" / "v1.json").read_bytes())["items"][0]
    document["source"].update(change)
    with pytest.raises(UsageError, match=re.escape(says)):
        decode_item(document, 1)
    (sets / "refunds" / "v1.json").write_bytes(
        set_json({**json.loads((sets / "refunds" / "v1.json").read_bytes()), "items": [document]})
    )
    with pytest.raises(UsageError, match=re.escape(says) + ".*restore it with `git checkout"):
        load_set(sets, "refunds", 1)


def test_a_set_promoted_before_items_kept_their_origin_reads_and_writes_the_same_bytes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A version written before the origin was recorded (a model's draft, then shown as
    written by hand) is read as it is, re-written to the same bytes and the same digest,
    its public view too; promotion carries it over unchanged and records the new one's."""
    sets = tmp_path / "sets"
    shutil.copytree(BEFORE_ORIGIN, sets)
    folder = sets / "refunds"
    old, old_view = (folder / "v1.json").read_bytes(), (folder / "v1.public.json").read_bytes()
    assert sha256(folder / "v1.json") == BEFORE_SHA256  # the ledger's promote event's too
    loaded = _loaded(sets, 1)
    assert loaded.sha256 == BEFORE_SHA256 and loaded.items[0].origin is None
    assert set_json(set_document(loaded)) == old and public_json(loaded) == old_view
    (folder / "v1.public.json").unlink()
    assert main(["regression", "public", "refunds", "--sets", str(sets)]) == 0
    assert (folder / "v1.public.json").read_bytes() == old_view
    hand_out = tmp_path / "hand-out" / "refunds"
    hand_out.mkdir(parents=True)
    shutil.copy(folder / "v1.public.json", hand_out)
    viewed = load_set(hand_out.parent, "refunds", 1)
    assert viewed is not None and viewed.public and viewed.items[0].origin is None
    capsys.readouterr()
    assert main(["regression", "show", "refunds", "--sets", str(sets)]) == 0
    assert (
        "    source    case case-1 version 1, candidate cand-1; written by hand or drafted "
        "by a model (not recorded: v1 predates items that record it; case case-1 of the "
        "asset ledger says which), approved by kim" in capsys.readouterr().out.splitlines()
    )
    # The next version carries the old item over as it was, and records the new one's.
    published(
        sets, written(sets, HAND_TASK, "seat-move", "--source", "ai_draft", by="model:claude")
    )
    assert (folder / "v1.json").read_bytes() == old
    assert (folder / "v1.public.json").read_bytes() == old_view
    second = json.loads((folder / "v2.json").read_bytes())
    assert second["items"][0] == json.loads(old)["items"][0]
    assert second["items"][1]["source"]["origin"] == "ai_draft"
    assert second["items"][1]["source"]["by"] == "model:claude"
    assert _origins(folder / "v2.public.json") == [None, "ai_draft"]
    assert main(["regression", "verify", "--sets", str(sets)]) == 0
