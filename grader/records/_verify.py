"""``gradekit report verify``: one verdict per file, for report.json and results.json alike.

The file's kind is read from its content (a ``tests`` list and a ``score``: Gradescope's
results.json; otherwise a report), never from its name, so a renamed file is still
checked as what it is. Three layers, each failing on its own:

- the digest and canonical bytes (``grader.outputs._report.verify_report``), and for results.json
  its canonical bytes;
- the sums: a report's total, max and criteria against its checks; a results.json's score
  against its tests, and, when a ``report.json`` lies next to it, its digest, score and
  every test against that report (which must verify too): the tests are the report's
  checks in its order, except that a criterion with a human review in ``extra_data.review``
  is one test worth the reviewed points;
- a results.json's reviews against the ledger of its grades folder (``../ledger.jsonl``),
  when there is one: exactly the current reviews of its report, as recorded;
- the signature, when a key is given (``grader.outputs._signing``); without one the verdict says
  it was not checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from gradekit import GradekitError
from grader.outputs import (
    REPORTED,
    SCHEMA,
    GradebookRow,
    Kind,
    cents_of,
    error_row,
    parse_canonical,
    points_text,
    review_document,
    reviewed_test_name,
    sign_file,
    signature_problem,
    verify_report,
)
from grader.records._ledger import LEDGER, read_ledger
from grader.records._reviews import current_reviews

__all__ = ["Verdict", "kind_of", "sign_outputs", "verify_file", "verify_results"]

_CENT = Decimal("0.01")
_REWRITE = "the file was edited or is out of date; run gradekit grade again to write it anew"


@dataclass(frozen=True, slots=True)
class _Expected:
    """What one test of a results.json must be, by the report and its reviews: a check's
    score, max and tag, or a reviewed criterion's points, name and status too."""

    label: str  # the test as a verdict names it
    tag: str
    score: Decimal
    max: Decimal
    fields: dict[str, object]  # further fields that must match exactly


@dataclass(frozen=True, slots=True)
class Verdict:
    """One file's verdict: ``ok`` and the sentence that says why."""

    ok: bool
    message: str


def kind_of(document: dict[str, object]) -> Kind:
    """Gradescope's results.json has a score and tests; anything else is read as a report."""
    return "results" if "tests" in document and "score" in document else "report"


def verify_file(path: Path, key: bytes | None, *, ledger: bool = True) -> Verdict:
    """Verify one report.json or results.json; ``key`` None: the signature is not checked.
    ``ledger`` False: a results.json's reviews are not compared with the ledger (a grading
    signs its fresh, unreviewed files before it brings them up to date)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return Verdict(False, f"cannot read it ({exc.strerror}): check the path")
    document, problem = parse_canonical(data, "report.json or results.json")
    if document is None:
        return Verdict(False, problem)
    kind = kind_of(document)
    if kind == "report":
        ok, message = verify_report(data)
    else:
        ok, message = verify_results(data, path.with_name("report.json"), ledger=ledger)
    if not ok:
        return Verdict(False, message)
    wrong, note = signature_problem(kind, document, key)
    if wrong:
        return Verdict(False, wrong)
    return Verdict(True, f"{message}; {note}")


def verify_results(data: bytes, report_path: Path, *, ledger: bool = True) -> tuple[bool, str]:
    """Whether ``data`` is a results.json as gradekit wrote it, checked against the
    report.json at ``report_path`` when there is one, and its reviews against the ledger
    of the grades folder above it when there is one (and ``ledger``)."""
    document, problem = parse_canonical(data, "results.json")
    if document is None or problem:
        return False, problem
    try:
        score = _cents(document.get("score"), "score")
        tests = document.get("tests")
        if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
            return False, "tests is not a list of objects: not a gradekit results.json"
        scores = [_cents(t.get("score"), f"tests[{n}].score") for n, t in enumerate(tests)]
        maxima = [_cents(t.get("max_score"), f"tests[{n}].max_score")
                  for n, t in enumerate(tests)]
    except ValueError as exc:
        return False, f"{exc}: the file was edited; grade the submission again"
    if score != sum(scores, Decimal(0)):
        return False, (f"score is {score} but its tests' scores sum to {sum(scores, Decimal(0))}"
                       ": the file was edited; grade the submission again")
    extra = document.get("extra_data")
    digest = extra.get("digest") if isinstance(extra, dict) else None
    if not isinstance(digest, str) or not isinstance(extra, dict) \
            or extra.get("schema") != SCHEMA:
        return False, f"extra_data has no digest or its schema is not {SCHEMA!r}: not a " \
                      "gradekit results.json, or it was edited"
    if not report_path.is_file():
        return True, (f"its tests add up to its score {score}; no report.json next to it, so "
                      "its digest and tests were not compared with the report")
    problem = _against_report(report_path, digest, score, tests, scores, maxima,
                              extra.get("review"))
    if problem:
        return False, problem
    problem, compared = _against_ledger(report_path.parent.parent / LEDGER, digest,
                                        extra.get("review")) if ledger else ("", "")
    if problem:
        return False, problem
    return True, (f"its tests add up to its score {score} and agree with the report.json next "
                  f"to it (digest {digest}){compared}")


def _against_report(report_path: Path, digest: str, score: Decimal, tests: list[dict[str, object]],
                    scores: list[Decimal], maxima: list[Decimal], reviews: object) -> str:
    """What disagrees between a results.json and the report.json next to it, or ""."""
    report_data = report_path.read_bytes()
    ok, why = verify_report(report_data)
    if not ok:
        return f"the report.json next to it does not verify ({why})"
    parsed, _ = parse_canonical(report_data, "report.json")
    report: Any = parsed  # verify_report checked its shape
    if digest != report["digest"]:
        return (f"extra_data.digest is {digest} but the report.json next to it has digest "
                f"{report['digest']}: they are from different gradings; grade it again")
    total = cents_of(report["total"], "total")
    entries, deltas, problem = _review_entries(report, reviews)
    if problem:
        return problem
    final = total + sum(deltas, Decimal(0))
    if score != final:
        return f"score is {score} but the report's total is {total}" + (
            f" and its reviews make it {final}" if entries else "")
    expected = _expected_tests(report, entries)
    if len(expected) != len(tests):
        checks = sum(len(criterion["checks"]) for criterion in report["criteria"])
        return f"it has {len(tests)} tests but the report has {checks} checks" + (
            f", which make {len(expected)} tests with each reviewed criterion "
            f"({', '.join(str(e['criterion']) for e in entries)}) as one test: {_REWRITE}"
            if entries else "")
    for number, (want, test) in enumerate(zip(expected, tests, strict=True)):
        problem = _test_problem(f"tests[{number}] ({want.label})", want, test,
                                scores[number], maxima[number])
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
            expected += [_Expected(f"{criterion['id']}: {check['id']}", criterion["id"],
                                   cents_of(check["points"], "points"),
                                   cents_of(check["max"], "max"), {})
                         for check in criterion["checks"]]
            continue
        points = entry.get("points")  # _review_entries checked both are cents
        final = cents_of(entry["automated"] if points is None else points, "points")
        most = cents_of(criterion["max"], "max")
        name = reviewed_test_name(criterion["title"], str(entry.get("by")))
        expected.append(_Expected(f"{criterion['id']}: reviewed", criterion["id"], final, most,
                                  {"name": name, "status": "passed" if final >= most
                                   else "failed"}))
    return expected


def _test_problem(name: str, want: _Expected, test: dict[str, object], score: Decimal,
                  most: Decimal) -> str:
    """How one test differs from what the report (and its review) says, or ""."""
    source = "the report and its review make it" if want.fields else "the report says"
    for field, got, expected in (("score", score, want.score), ("max_score", most, want.max)):
        if got != expected:
            return f"{name}.{field} is {got} but {source} {points_text(expected)}" + (
                f": {_REWRITE}" if want.fields else "")
    if test.get("tags") != [want.tag]:
        return f"{name}.tags is {test.get('tags')!r}, not [{want.tag!r}]"
    for field, value in want.fields.items():
        if test.get(field) != value:
            return f"{name}.{field} is {test.get(field)!r}, not {value!r}: {_REWRITE}"
    return ""


def _review_entries(report: Any, reviews: object
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
                return [], [], (f"{name}.criterion {entry.get('criterion')!r} is not a "
                                "criterion of the report: the file was edited")
            automated = cents_of(entry.get("automated"), f"{name}.automated")
            if automated != cents_of(criterion["points"], "points"):
                return [], [], (f"{name}.automated is {automated} but the report gives "
                                f"{criterion['id']} {criterion['points']}")
            points = entry.get("points")
            final = automated if points is None else cents_of(points, f"{name}.points")
            if not 0 <= final <= cents_of(criterion["max"], "max"):
                return [], [], (f"{name}.points is {final}, outside 0.00 to {criterion['id']}'s "
                                f"max {criterion['max']}")
            deltas.append(final - automated)
            events.append(entry.get("event"))
    except ValueError as exc:
        return [], [], f"{exc}: the file was edited"
    ids = [entry.get("criterion") for entry in reviews]
    if len(set(ids)) != len(ids) or not all(isinstance(e, int) for e in events) \
            or events != sorted(set(events)):
        return [], [], ("extra_data.review holds two reviews of one criterion or is not in "
                        "ledger order: only each criterion's latest review counts")
    return reviews, deltas, ""


def _against_ledger(path: Path, digest: str, reviews: object) -> tuple[str, str]:
    """``(problem, note)``: the results.json's reviews must be exactly the current reviews
    of its report in the ledger at ``path``, when there is one."""
    if not path.is_file():
        return "", (f"; its reviews were not compared with a ledger (none at {path})"
                    if reviews else "")
    try:
        expected = [review_document(r) for r in current_reviews(read_ledger(path).events,
                                                                digest)]
    except GradekitError as exc:
        return f"the ledger beside its grades folder does not read ({exc})", ""
    if reviews is None:
        reviews = []
    if reviews != expected:
        return (f"extra_data.review is {_events(reviews)} but the ledger {path} holds the "
                f"current reviews {_events(expected)} of report {digest[:12]}: the file was "
                "edited or is out of date; run gradekit grade again to write it anew"), ""
    return "", f" and the ledger's current reviews ({_events(expected)})" if expected else ""


def _events(reviews: object) -> str:
    """Reviews named by their ledger events, and whether they confirm or set points."""
    if not isinstance(reviews, list) or not reviews:
        return "none"
    return ", ".join(f"{r.get('criterion')} {r.get('points') or 'confirmed'} (event "
                     f"{r.get('event')})" if isinstance(r, dict) else "?" for r in reviews)


def _cents(value: object, field: str) -> Decimal:
    """A results.json number as exact cents; ``ValueError`` naming the field."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise ValueError(f"{field} is {value!r}, not a number")
    exact = Decimal(repr(value))
    if exact.quantize(_CENT) != exact:
        raise ValueError(f"{field} is {value!r}, not exact to the cent")
    return exact.quantize(_CENT)


def sign_outputs(row: GradebookRow, out: Path, key: bytes | None) -> GradebookRow:
    """Sign a graded row's report.json and results.json in ``out/<folder>``, once both
    verify; the row itself, or an error row when they do not verify or cannot be signed.

    Called by the batch, the one process that holds the key, after the worker wrote them.
    """
    if key is None or row.status not in REPORTED:
        return row
    folder = out / row.submission
    try:
        for name in ("report.json", "results.json"):
            verdict = verify_file(folder / name, None, ledger=False)
            if not verdict.ok:
                raise ValueError(f"{name} does not verify before signing: {verdict.message}")
        sign_file(folder / "report.json", "report", key)
        sign_file(folder / "results.json", "results", key)
    except (OSError, ValueError) as exc:
        return error_row(row.submission, row.student, (
            f"its outputs could not be signed ({exc}): nothing was scored; grade it again, and "
            "report a grader bug if it happens again"))
    return row
