"""Cases with an expectation snapshot, the fact oracle that judges a run against it, and
the degraded verdict: a check the rubric leaves open scores nothing and says so
(``evaluation.contract``), in the report, the gradebook and on the command line.

It tests ``grader._expect``'s helpers on purpose: the fact oracle is a base module, below
every room's door."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import re
from pathlib import Path

import pytest

from gradekit import UsageError
from grader._expect import (
    Expectation,
    Observed,
    Shortfall,
    Told,
    expectation_document,
    judge,
    laid_over,
    mentioned,
    met,
    normalised,
    parse_expectation,
)
from grader.cli import main
from grader.dashboard import build_dashboard
from grader.ledger import CALLS, GRADEBOOK, MARKDOWN, REPORT, RESULTS
from grader.outputs import canonical, verify_report
from grader.rubric import RubricError, parse_rubric
from grader.scoring import contract_gaps
from tests.submissions import REFERENCE, make_submission

KIT = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")

# The kit's rubric with a sixth criterion: each case judged against its [case.expect].
# The facts are what a good answer must say; SmolLM2's real recorded answers say some.
EXPECTING = (
    KIT.replace("weight = 30", "weight = 15", 1)
    + """
[[criterion]]
id = "expectations"
title = "Expected outcomes"
weight = 15
check = "expectations"
full = "Every case comes to what the rubric expects of it"
typical_loss = "An answer that misses the facts the task is about"
"""
)
EXPECTS = {
    "refund-policy": '[case.expect]\ngoal = "the student knows what refund they get"\n'
    'outcome = "answer"\nmentions = ["refund"]\n'
    'never_mentions = ["guaranteed"]\n',
    "incident-summary": '[case.expect]\ngoal = "on-call knows what happened"\n'
    'outcome = "answer"\nmentions = ["unbounded"]\n',
    "sql-explain": '[case.expect]\ngoal = "a beginner reads the query"\noutcome = "answer"\n'
    'mentions = ["GROUP BY", "full table scan"]\n'
    'forbidden_actions = ["query_db"]\n',
    # flaky-grade: no expectation at all, so its check cannot be evaluated
}


def _with_expectations(text: str) -> str:
    for case, table in EXPECTS.items():
        head = f'[[case]]\nid = "{case}"\n'
        start = text.index(head)
        end = text.index("\n\n", start)  # the case's task ends at the first blank line
        text = text[: end + 1] + table + text[end + 1 :]
    return text


# -- the fact oracle ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "fact", "found"),
    [
        ("A FULL refund within 14 days.", "full refund", True),
        ("a full\n\trefund", "full refund", True),  # any whitespace is one space
        ("refunds are possible", "refund", False),  # whole words only
        ("within 140 days", "14 days", False),
        ("no re\u200bfund", "no refund", True),  # a zero-width space hides nothing
        ("no re\u2060fund", "no refund", True),  # nor a word joiner
        ("\uff4e\uff4f refund", "no refund", True),  # fullwidth letters are NFKC's letters
        ("STRASSE", "straße", True),  # case folding, not lowering
        ("GROUP BY student", "group by", True),
        ("COUNT(*) counts", "COUNT(*)", True),  # a fact may end in punctuation
    ],
)
def test_a_fact_is_found_as_a_reader_would_find_it(answer: str, fact: str, found: bool) -> None:
    assert mentioned(answer, fact) is found


def test_normalised_drops_format_characters_and_folds_case() -> None:
    assert normalised("  \uff2eo\u200d  RE\u202efund ") == "no refund"


def _said(problems: list[Shortfall]) -> list[str]:
    return [str(problem) for problem in problems]


def test_judge_names_every_shortfall_in_the_order_the_run_went() -> None:
    expect = Expectation("answer", ("14 days",), ("no refund",), ("issue_refund",))
    run = Observed("returned", "No refund, sorry.", ("refund_terms", "issue_refund"))
    assert _said(judge(expect, run)) == [
        "called the forbidden action issue_refund (1 time(s))",
        "the answer does not mention '14 days'",
        "the answer mentions 'no refund', which it must not",
    ]
    assert judge(expect, Observed("returned", "A full refund within 14 days.")) == []
    assert str(judge(expect, Observed("raised", None))[0]) == "expected an answer, but run() raised"
    assert _said(judge(Expectation("raise"), Observed("returned", "ok"))) == [
        "expected run() to raise, but it returned an answer"
    ]
    assert judge(Expectation("raise"), Observed("raised", None)) == []
    # A forbidden call comes before the outcome it led to: it is where the run first left.
    crashed = Observed("raised", None, ("issue_refund",))
    assert [p.at for p in judge(expect, crashed)] == ["call 1 (issue_refund)", "outcome"]


def test_the_first_point_of_divergence_names_the_call_and_both_sides() -> None:
    expect = Expectation("answer", (), ("refunded",), ("issue_refund", "send_email"), goal="g")
    # Two provider calls, a read, then the forbidden write: call 4 among all the calls.
    run = Observed(
        "returned",
        "Your order was refunded today.",
        ("lookup_order", "send_email", "issue_refund", "issue_refund"),
        ("", "lookup_order", "", "send_email", "issue_refund", "issue_refund"),
    )
    first, second, answer = judge(expect, run)
    assert (first.at, first.expected, first.observed) == (
        "call 4 (send_email)",
        "no call of send_email",
        "send_email called 1 time(s), first as call 4",
    )
    assert (second.at, second.observed) == (
        "call 5 (issue_refund)",
        "issue_refund called 2 time(s), first as call 5",
    )
    assert (answer.at, answer.expected) == ("answer", "no mention of 'refunded'")
    assert "was refunded today" in answer.observed
    # A long answer is shown around the fact it must not mention, not from its head.
    long = "x" * 300 + " it was refunded " + "y" * 300
    shown = judge(expect, Observed("returned", long))[0].observed
    assert "it was refunded" in shown and shown.startswith("the answer '...")
    assert (
        judge(Expectation("answer", ("policy",)), Observed("returned", ""))[0].observed
        == "an empty answer"
    )


def test_the_oracle_judges_the_decision_the_missing_information_and_a_negation() -> None:
    expect = Expectation(
        "answer",
        ("policy",),
        ("refunded",),
        (),
        goal="no refund on day 73",
        decision="not eligible",
        missing=("purchase date",),
        negation=True,
        intent="refund_request",
    )
    assert _said(judge(expect, Observed("returned", "Refunded in full: policy says yes."))) == [
        "the answer does not state the decision 'not eligible'",
        "the answer does not name the missing 'purchase date'",
        "the answer states no negation (no, not, never, cannot, ...)",
        "the answer mentions 'refunded', which it must not",
    ]
    good = "Not eligible under the policy: we cannot refund without the purchase date."
    assert judge(expect, Observed("returned", good)) == []
    assert met(expect) == (
        "met: the expected answer; the decision 'not eligible'; mentions "
        "'policy'; none of 'refunded'; names the missing 'purchase date'; "
        "a negation"
    )
    # "nothing" and "cannot" are negations as whole words; "knot" and "nobody" are not.
    negating = Expectation("answer", negation=True, goal="g")
    assert judge(negating, Observed("returned", "nothing to pay")) == []
    assert judge(negating, Observed("returned", "a knot for nobody")) != []
    # The intent is kept and shown, never judged; the goal is for people.
    assert judge(Expectation("answer", goal="g", intent="x"), Observed("returned", "y")) == []


def test_an_oracles_keys_are_written_only_when_given() -> None:
    plain = parse_expectation({"outcome": "answer", "mentions": ["refund"]}, "here")
    assert expectation_document(plain) == {
        "forbidden_actions": [],
        "mentions": ["refund"],
        "never_mentions": [],
        "outcome": "answer",
    }
    full = {
        "outcome": "answer",
        "goal": "g",
        "decision": "no refund",
        "intent": "ask",
        "missing": ["date"],
        "negation": True,
    }
    expect = parse_expectation(full, "here")
    assert parse_expectation(expectation_document(expect), "again") == expect
    assert {k: v for k, v in expectation_document(expect).items() if k in full} == full


def test_flags_lay_an_expectation_over_a_base_one() -> None:
    base = Expectation(
        "answer",
        ("14 days",),
        ("full refund",),
        ("query_db",),
        goal="base",
        missing=("date",),
        negation=True,
    )
    told = Told(
        mentions=("full refund",),
        never_mentions=("date",),
        forbid=("issue_refund",),
        decision="half",
        negation=False,
    )
    assert laid_over(base, told, "here") == Expectation(
        "answer",
        ("14 days", "full refund"),
        ("date",),
        ("query_db", "issue_refund"),
        goal="base",
        decision="half",
        missing=(),
        negation=False,
    )
    assert laid_over(None, Told(goal="g"), "here") == Expectation(goal="g")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"outcome": "yes"}, "outcome = 'yes'; use \"answer\""),
        ({"outcome": "answer", "mention": ["x"]}, "unknown key(s) mention"),
        ({"outcome": "answer", "mentions": "refund"}, "mentions must be a list of strings"),
        ({"outcome": "answer", "mentions": ["\u200b "]}, "a fact is a phrase of 1 to 200"),
        (
            {"outcome": "answer", "mentions": ["Refund"], "never_mentions": ["refund"]},
            "'refund' is in both mentions and never_mentions",
        ),
        ({"outcome": "answer", "forbidden_actions": ["rm -rf"]}, "is not a tool name"),
        ({"outcome": "answer", "negation": "yes"}, "negation = 'yes'; use true"),
        ({"outcome": "answer", "goal": "two\nlines"}, "goal must be one line of text"),
        (
            {"outcome": "answer", "decision": "no refund", "never_mentions": ["No refund"]},
            "'no refund' is in both decision and never_mentions",
        ),
        ({"outcome": "answer", "missing": ["\u200b"]}, "a fact is a phrase of 1 to 200"),
    ],
)
def test_a_bad_expectation_says_what_to_change(raw: object, message: str) -> None:
    with pytest.raises(UsageError, match="here: ") as caught:
        parse_expectation(raw, "here")
    assert message in str(caught.value)


# -- the rubric -------------------------------------------------------------------------------


def test_a_case_without_a_business_goal_cannot_pass() -> None:
    text = _with_expectations(EXPECTING).replace('goal = "on-call knows what happened"\n', "")
    rubric = parse_rubric(text.encode(), source="x.toml")
    gaps = contract_gaps(rubric)
    assert (
        "expectations/incident-summary: case incident-summary has no business goal: add "
        'goal = "what the run is for" to its [case.expect]' in gaps[0]
    )
    assert [gap.partition(":")[0] for gap in gaps] == [
        "expectations/incident-summary",
        "expectations/flaky-grade",
    ]


def test_a_bad_case_expect_or_criterion_param_is_a_rubric_error_at_its_line() -> None:
    text = _with_expectations(EXPECTING).replace(
        'mentions = ["unbounded"]', 'mentions = ["unbounded"]\noutcom = "answer"'
    )
    with pytest.raises(
        RubricError,
        match=r"x\.toml:\d+: \[case\.expect\] of 'incident-summary'"
        r": unknown key\(s\) outcom",
    ):
        parse_rubric(text.encode(), source="x.toml")
    text = EXPECTING + '[criterion.params]\nset = "refunds@1"\n'
    with pytest.raises(
        RubricError,
        match=r"x\.toml:\d+: unknown parameter of expectations "
        r"set; the valid ones are \(none",
    ):
        parse_rubric(text.encode(), source="x.toml")


def test_cases_keep_their_expectations_through_the_worker_request(tmp_path: Path) -> None:
    from grader.batch._worker import WorkerRequest, decode_request, encode_request

    rubric = parse_rubric(_with_expectations(EXPECTING).encode(), source="x.toml")
    request = WorkerRequest(
        parent=1,
        root=tmp_path,
        folder="a",
        student="a",
        out=tmp_path,
        scratch=tmp_path,
        label=None,
        isolation="process",
        rubric=rubric,
        check_folders={},
    )
    assert decode_request(encode_request(request)).rubric == rubric
    assert rubric.cases[2].expect == Expectation(
        "answer",
        ("GROUP BY", "full table scan"),
        (),
        ("query_db",),
        goal="a beginner reads the query",
    )
    assert rubric.cases[3].expect is None


# -- grading ----------------------------------------------------------------------------------


def _grade(tmp_path: Path, rubric_text: str) -> tuple[int, Path]:
    subs = tmp_path / "subs"
    if not subs.exists():
        make_submission(subs / "alice")
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(rubric_text, "utf-8")
    out = tmp_path / "grades"
    code = main(
        [
            "grade",
            str(subs),
            "--out",
            str(out),
            "--rubric",
            str(rubric),
            "--wall",
            "process",
            "--quiet",
        ]
    )
    return code, out


@pytest.mark.slow
def test_each_case_is_judged_against_its_expectation_and_an_open_one_is_degraded(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _grade(tmp_path, _with_expectations(EXPECTING))
    shown = capsys.readouterr()
    assert code == 1  # a degraded grade is no final grade
    assert "warning: the rubric's contract is incomplete (evaluation.contract)" in shown.err
    assert "expectations/flaky-grade: case flaky-grade has no expected outcome" in shown.err

    report = json.loads((out / "alice" / REPORT).read_bytes())
    criterion = next(c for c in report["criteria"] if c["id"] == "expectations")
    checks = {check["id"]: check for check in criterion["checks"]}
    assert checks["refund-policy"]["passed"] and checks["refund-policy"]["points"] == "3.75"
    assert checks["refund-policy"]["detail"] == (
        "met: the expected answer; mentions 'refund'; none of 'guaranteed'"
    )
    assert checks["incident-summary"]["passed"]
    assert not checks["sql-explain"]["passed"] and checks["sql-explain"]["points"] == "0.00"
    assert checks["sql-explain"]["detail"] == (
        "called the forbidden action query_db (1 time(s)); the answer does not mention "
        "'full table scan'"
    )
    # The failing case's verdict and where it first left its expectation: the query_db
    # call, at its place among every call the grader served the case (calls.json).
    calls = json.loads((out / "alice" / CALLS).read_bytes())
    asked = next(c for c in calls["cases"] if c["case"] == "sql-explain")["calls"]
    place = 1 + [call.get("tool") for call in asked].index("query_db")
    sql = checks["sql-explain"]
    assert (sql["verdict"], sql["divergence"], sql["expected"], sql["observed"]) == (
        "failed",
        f"call {place} (query_db)",
        "no call of query_db",
        f"query_db called 1 time(s), first as call {place}",
    )
    assert (checks["refund-policy"]["verdict"], "divergence" in checks["refund-policy"]) == (
        "passed",
        False,
    )
    flaky = checks["flaky-grade"]
    assert (flaky["verdict"], flaky["divergence"], flaky["passed"], flaky["points"]) == (
        "degraded",
        "evaluation.contract",
        False,
        "0.00",
    )
    assert "add [case.expect] with outcome" in flaky["detail"]
    assert (criterion["verdict"], report["verdict"], report["divergence"]) == (
        "degraded",
        "degraded",
        "evaluation.contract",
    )
    assert "verdict" not in next(c for c in report["criteria"] if c["id"] == "tracing")
    assert report["total"] == "92.50"  # 85 of the kit's criteria at 15/30, and 7.50 of 15

    row = next(csv.DictReader(io.StringIO((out / GRADEBOOK).read_text("utf-8"))))
    assert row["status"] == "degraded"
    assert row["reason"].startswith(
        "degraded (evaluation.contract): 3.75 points not "
        "evaluated, the rubric is incomplete: expectations/"
        "flaky-grade: case flaky-grade has no expected outcome"
    )
    markdown = (out / "alice" / MARKDOWN).read_text("utf-8")
    assert "**Degraded (evaluation.contract): 3.75 points could not be evaluated**" in markdown
    results = json.loads((out / "alice" / RESULTS).read_bytes())
    flaky_test = next(
        t
        for t in results["tests"]
        if t["name"].endswith(": flaky-grade") and t["tags"] == ["expectations"]
    )
    assert flaky_test["output"].startswith("Degraded (evaluation.contract): not evaluated")
    diverged = (
        f"verdict failed; first divergence at call {place} (query_db): expected no "
        f"call of query_db; observed query_db called 1 time(s), first as call {place}"
    )
    sql_test = next(
        t
        for t in results["tests"]
        if t["name"].endswith(": sql-explain") and t["tags"] == ["expectations"]
    )
    assert sql_test["output"].splitlines()[1] == diverged
    assert "  - " + diverged.replace("_", "\\_") in markdown.splitlines()  # Markdown-escaped
    assert (
        main(["report", "verify", str(out / "alice" / REPORT), str(out / "alice" / RESULTS)]) == 0
    )


@pytest.mark.slow
def test_a_degraded_check_edited_into_points_fails_verification(tmp_path: Path) -> None:
    """The attack: give the degraded check its points, or take the verdict off one part,
    and recompute every sum and the digest, as anyone holding the file could."""
    _, out = _grade(tmp_path, _with_expectations(EXPECTING))
    path = out / "alice" / REPORT
    original = json.loads(path.read_bytes())

    def forged(edit: str) -> bytes:
        document = json.loads(json.dumps(original))
        criterion = next(c for c in document["criteria"] if c["id"] == "expectations")
        flaky = next(c for c in criterion["checks"] if c["id"] == "flaky-grade")
        if edit == "points":
            flaky.update(points="3.75", passed=True)
            criterion["points"] = "11.25"
            document["total"] = "96.25"
        else:  # the check still degraded, its criterion no longer said to be
            criterion.pop("verdict")
            criterion.pop("divergence")
        document.pop("digest")
        document["digest"] = hashlib.sha256(canonical(document)).hexdigest()
        return canonical(document) + b"\n"

    for edit, why in (
        ("points", "criteria[5] ('expectations').checks[3] is degraded but scores 3.75 or passed"),
        ("verdict", "criteria[5] ('expectations') is not marked degraded, but one of its parts is"),
    ):
        path.write_bytes(forged(edit))
        ok, message = verify_report(path.read_bytes())
        assert not ok and why in message
        assert main(["report", "verify", str(path)]) == 1


@pytest.mark.slow
def test_a_rubric_without_expectations_grades_as_before(tmp_path: Path) -> None:
    """No [case.expect] and no expectations criterion: no verdict key anywhere, so the
    kit's rubric gives the report it gave before this check existed."""
    code, out = _grade(tmp_path, KIT)
    report = json.loads((out / "alice" / REPORT).read_bytes())
    assert code == 0 and report["total"] == "100.00"
    assert "verdict" not in report and all("verdict" not in c for c in report["criteria"])


@pytest.mark.slow
def test_history_names_the_case_whose_expectation_a_new_rubric_version_changed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A corrected expectation is a new rubric version: the old grade keeps saying which
    version graded it, and history names the case that changed and what it changed."""
    first = _with_expectations(EXPECTING)
    _grade(tmp_path, first)
    second = first.replace('"full table scan"', '"COUNT"').replace(
        "version = 2", 'version = 3\nchanges = "sql-explain must mention COUNT"'
    )
    _grade(tmp_path, second)
    capsys.readouterr()
    assert main(["history", "alice", "--out", str(tmp_path / "grades")]) == 0
    shown = capsys.readouterr().out
    assert "changed: rubric provider-swap-lab v2 -> v3 (cases changed: sql-explain)\n" in shown
    assert (
        'first divergence: expectations/sql-explain: 0.00 "called the forbidden action '
        "query_db (1 time(s)); the answer does not mention 'full table scan'\" -> 0.00 "
        '"called the forbidden action query_db (1 time(s))"'
    ) in shown
    # Each grade says which judged checks it failed, and where each first diverged.
    failed = [line for line in shown.splitlines() if line.startswith("    failed: ")]
    assert len(failed) == 2 and all(
        line.startswith("    failed: expectations/sql-explain: first divergence at call ")
        for line in failed
    )
    assert failed[0].endswith(
        "expected no call of query_db; observed query_db called 1 "
        "time(s), first as call " + failed[0].split("call ")[1][0]
    )
    build_dashboard(tmp_path / "grades", tmp_path / "site")
    page = html.unescape((tmp_path / "site" / "students" / "alice.html").read_text("utf-8"))
    assert [line.strip().replace("failed: ", "Failed: ", 1) for line in failed] == re.findall(
        r"Failed: expectations/sql-explain: [^<]*", page
    )
