"""Gradescope's ``results.json`` checked against the ``report.json`` it was rendered from.

Pure: bytes in, a verdict out. A results.json is canonical JSON whose score is the sum of
its tests; with its report beside it, its digest is the report's, its score the report's
total with its reviews' changes, and its tests the report's checks in report order,
except that a criterion with a human review in ``extra_data.review`` is one test worth
the reviewed points. Whether those reviews are the ledger's current ones is the
records' question (``grader.ledger._report_verify``); who signed it, the signature's
(``grader.outputs._signing``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from gradekit.internal import commands
from grader._late import late_from_document
from grader.outputs._render import reviewed_test_name
from grader.outputs._report import SCHEMA, cents_of, parse_canonical, points_text, verify_report

__all__ = ["verify_results"]

_CENT = Decimal("0.01")
_REWRITE = (
    "the file was edited or is out of date; grade again to write it anew "
    f"(`{commands.GRADE_INTO(submissions='SUBMISSIONS', out='GRADES')}`)"
)


@dataclass(frozen=True, slots=True)
class _Expected:
    """What one test of a results.json must be, by the report and its reviews: a check's
    score, max and tag, or a reviewed criterion's points, name and status too."""

    label: str  # the test as a verdict names it
    tag: str
    score: Decimal
    max: Decimal
    fields: dict[str, object]  # further fields that must match exactly


def verify_results(data: bytes, report: bytes | None) -> tuple[bool, str]:
    """Whether ``data`` is a results.json as gradekit wrote it, and why not; checked
    against ``report``, the bytes of the report.json beside it, when there is one."""
    document, problem = parse_canonical(data, "results.json")
    if document is None or problem:
        return False, problem
    try:
        score = _cents(document.get("score"), "score")
        tests = document.get("tests")
        if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
            return False, "tests is not a list of objects: not a gradekit results.json"
        scores = [_cents(t.get("score"), f"tests[{n}].score") for n, t in enumerate(tests)]
        maxima = [_cents(t.get("max_score"), f"tests[{n}].max_score") for n, t in enumerate(tests)]
    except ValueError as exc:
        return False, f"{exc}: the file was edited; grade the submission again"
    if score != sum(scores, Decimal(0)):
        return False, (
            f"score is {score} but its tests' scores sum to {sum(scores, Decimal(0))}"
            ": the file was edited; grade the submission again"
        )
    extra = document.get("extra_data")
    digest = extra.get("digest") if isinstance(extra, dict) else None
    if not isinstance(digest, str) or not isinstance(extra, dict) or extra.get("schema") != SCHEMA:
        return (
            False,
            f"extra_data has no digest or its schema is not {SCHEMA!r}: not a "
            "gradekit results.json, or it was edited",
        )
    if report is None:
        return True, (
            f"its tests add up to its score {score}; no report.json next to it, so "
            "its digest and tests were not compared with the report"
        )
    problem = _against_report(
        report, digest, score, tests, scores, maxima, extra.get("review"), extra.get("late")
    )
    if problem:
        return False, problem
    return True, (
        f"its tests add up to its score {score} and agree with the report.json next "
        f"to it (digest {digest})"
    )


def _against_report(
    report_data: bytes,
    digest: str,
    score: Decimal,
    tests: list[dict[str, object]],
    scores: list[Decimal],
    maxima: list[Decimal],
    reviews: object,
    late: object = None,
) -> str:
    """What disagrees between a results.json and the report.json next to it, or ""."""
    ok, why = verify_report(report_data)
    if not ok:
        return f"the report.json next to it does not verify ({why})"
    parsed, _ = parse_canonical(report_data, "report.json")
    report: Any = parsed  # verify_report checked its shape
    if digest != report["digest"]:
        return (
            f"extra_data.digest is {digest} but the report.json next to it has digest "
            f"{report['digest']}: they are from different gradings; grade it again"
        )
    total = cents_of(report["total"], "total")
    entries, deltas, problem = _review_entries(report, reviews)
    if problem:
        return problem
    final = total + sum(deltas, Decimal(0))
    penalty, problem = _late(late, final, cents_of(report["max"], "max"))
    if problem:
        return problem
    if score != final - penalty:
        return (
            f"score is {score} but the report's total is {total}"
            + (f" and its reviews make it {final}" if entries else "")
            + (f", less a late penalty of {points_text(penalty)}" if penalty else "")
        )
    expected = _expected_tests(report, entries)
    if penalty and isinstance(late, dict):
        cell = late_from_document(late).cell()
        expected.append(
            _Expected(
                "late penalty",
                "late",
                -penalty,
                Decimal(0),
                {"name": "Late penalty", "output": cell},
            )
        )
    if len(expected) != len(tests):
        checks = sum(len(criterion["checks"]) for criterion in report["criteria"])
        return f"it has {len(tests)} tests but the report has {checks} checks" + (
            f", which make {len(expected)} tests with each reviewed criterion "
            f"({', '.join(str(e['criterion']) for e in entries)}) as one test: {_REWRITE}"
            if entries
            else ""
        )
    for number, (want, test) in enumerate(zip(expected, tests, strict=True)):
        problem = _test_problem(
            f"tests[{number}] ({want.label})", want, test, scores[number], maxima[number]
        )
        if problem:
            return problem
    return ""


def _expected_tests(report: Any, entries: list[dict[str, Any]]) -> list[_Expected]:
    """The tests the report and its reviews make, in order: a reviewed criterion's checks
    are one test worth the reviewed points."""
    reviewed = {entry["criterion"]: entry for entry in entries}
    expected = []
    for criterion in report["criteria"]:
        entry = reviewed.get(criterion["id"])
        if entry is None:
            expected += [
                _Expected(
                    f"{criterion['id']}: {check['id']}",
                    criterion["id"],
                    cents_of(check["points"], "points"),
                    cents_of(check["max"], "max"),
                    {},
                )
                for check in criterion["checks"]
            ]
            continue
        points = entry.get("points")  # _review_entries checked both are cents
        final = cents_of(entry["automated"] if points is None else points, "points")
        most = cents_of(criterion["max"], "max")
        name = reviewed_test_name(criterion["title"], str(entry.get("by")))
        expected.append(
            _Expected(
                f"{criterion['id']}: reviewed",
                criterion["id"],
                final,
                most,
                {"name": name, "status": "passed" if final >= most else "failed"},
            )
        )
    return expected


def _test_problem(
    name: str, want: _Expected, test: dict[str, object], score: Decimal, most: Decimal
) -> str:
    """How one test differs from what the report (and its review) says, or ""."""
    source = "the report and its review make it" if want.fields else "the report says"
    for field, got, expected in (("score", score, want.score), ("max_score", most, want.max)):
        if got != expected:
            return f"{name}.{field} is {got} but {source} {points_text(expected)}" + (
                f": {_REWRITE}" if want.fields else ""
            )
    if test.get("tags") != [want.tag]:
        return f"{name}.tags is {test.get('tags')!r}, not [{want.tag!r}]"
    for field, value in want.fields.items():
        if test.get(field) != value:
            return f"{name}.{field} is {test.get(field)!r}, not {value!r}: {_REWRITE}"
    return ""


def _late(late: object, reviewed: Decimal, most: Decimal) -> tuple[Decimal, str]:
    """The points ``extra_data.late`` takes from the ``reviewed`` total, and what is wrong
    with it ("" when nothing): its penalty must be its percent of the report's ``most``."""
    if late is None:
        return Decimal(0), ""
    if not isinstance(late, dict):
        return Decimal(0), "extra_data.late is not a late-policy entry: the file was edited"
    try:
        policy = late_from_document(late)
    except ValueError as exc:
        return Decimal(0), f"extra_data.late: {exc}: the file was edited"
    owed = (most * policy.percent / 100).quantize(_CENT, rounding=ROUND_HALF_UP)
    if policy.penalty != owed:
        return Decimal(0), (
            f"extra_data.late.penalty is {policy.penalty} but {policy.percent}% "
            f"of the report's {most} is {owed}: the file was edited"
        )
    return min(policy.penalty, max(reviewed, Decimal(0))), ""


def _review_entries(
    report: Any, reviews: object
) -> tuple[list[dict[str, Any]], list[Decimal], str]:
    """``extra_data.review`` checked against the report: each entry a criterion of it, at
    most one per criterion, in ledger order, ``automated`` the report's points, ``points``
    null or within 0 to the max; the entries and each one's change to the score."""
    if reviews is None:
        return [], [], ""
    if not isinstance(reviews, list) or not all(isinstance(r, dict) for r in reviews):
        return [], [], "extra_data.review is not a list of reviews: the file was edited"
    criteria = {c["id"]: c for c in report["criteria"]}
    deltas, events = [], []
    try:
        for number, entry in enumerate(reviews):
            name = f"extra_data.review[{number}]"
            criterion = criteria.get(entry.get("criterion"))
            if criterion is None:
                return (
                    [],
                    [],
                    (
                        f"{name}.criterion {entry.get('criterion')!r} is not a "
                        "criterion of the report: the file was edited"
                    ),
                )
            automated = cents_of(entry.get("automated"), f"{name}.automated")
            if automated != cents_of(criterion["points"], "points"):
                return (
                    [],
                    [],
                    (
                        f"{name}.automated is {automated} but the report gives "
                        f"{criterion['id']} {criterion['points']}"
                    ),
                )
            points = entry.get("points")
            final = automated if points is None else cents_of(points, f"{name}.points")
            if not 0 <= final <= cents_of(criterion["max"], "max"):
                return (
                    [],
                    [],
                    (
                        f"{name}.points is {final}, outside 0.00 to {criterion['id']}'s "
                        f"max {criterion['max']}"
                    ),
                )
            deltas.append(final - automated)
            events.append(entry.get("event"))
    except ValueError as exc:
        return [], [], f"{exc}: the file was edited"
    ids = [entry.get("criterion") for entry in reviews]
    if (
        len(set(ids)) != len(ids)
        or not all(isinstance(e, int) for e in events)
        or events != sorted(set(events))
    ):
        return (
            [],
            [],
            (
                "extra_data.review holds two reviews of one criterion or is not in "
                "ledger order: only each criterion's latest review counts"
            ),
        )
    return reviews, deltas, ""


def _cents(value: object, field: str) -> Decimal:
    """A results.json number as exact cents; ``ValueError`` naming the field."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{field} is {value!r}, not a number")
    exact = Decimal(repr(value))
    if exact.quantize(_CENT) != exact:
        raise ValueError(f"{field} is {value!r}, not exact to the cent")
    return exact.quantize(_CENT)
