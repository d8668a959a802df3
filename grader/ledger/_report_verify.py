"""``gradekit report verify``: one verdict per file, for report.json and results.json alike.

The file's kind is read from its content (a ``tests`` list and a ``score``: Gradescope's
results.json; otherwise a report), never from its name, so a renamed file is still
checked as what it is. Its neighbours are found through the grades folder's home
(``grader.ledger._folder``). Four layers, each failing on its own:

- the digest and canonical bytes (``grader.outputs._report.verify_report``), and for results.json
  its canonical bytes;
- the sums: a report's total, max and criteria against its checks; a results.json's score
  against its tests, and, when a ``report.json`` lies next to it, its digest, score and
  every test against that report (which must verify too): the tests are the report's
  checks in its order, except that a criterion with a human review in ``extra_data.review``
  is one test worth the reviewed points (``grader.outputs._results.verify_results``);
- a results.json's reviews against the ledger of its grades folder (``../ledger.jsonl``),
  when there is one: exactly the current reviews of its report, as recorded;
- the signature, when a key is given (``grader.outputs._signing``); without one the verdict says
  it was not checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradekit import GradekitError
from gradekit.internal import commands
from grader.ledger._folder import ledger_above, report_beside
from grader.ledger._ledger import read_ledger
from grader.ledger._reviews import current_reviews
from grader.outputs import (
    Kind,
    parse_canonical,
    review_document,
    signature_problem,
    verify_report,
    verify_results,
)

__all__ = ["ReportVerdict", "kind_of", "verify_file"]


@dataclass(frozen=True, slots=True)
class ReportVerdict:
    """One file's verdict: ``ok`` and the sentence that says why."""

    ok: bool
    message: str


def kind_of(document: dict[str, object]) -> Kind:
    """Gradescope's results.json has a score and tests; anything else is read as a report."""
    return "results" if "tests" in document and "score" in document else "report"


def verify_file(path: Path, key: bytes | None) -> ReportVerdict:
    """Verify one report.json or results.json; ``key`` None: the signature is not checked."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return ReportVerdict(False, f"cannot read it ({exc.strerror}): check the path")
    document, problem = parse_canonical(data, "report.json or results.json")
    if document is None:
        return ReportVerdict(False, problem)
    kind = kind_of(document)
    if kind == "report":
        ok, message = verify_report(data)
    else:
        ok, message = _verify_results(path, data, document)
    if not ok:
        return ReportVerdict(False, message)
    wrong, note = signature_problem(kind, document, key)
    if wrong:
        return ReportVerdict(False, wrong)
    return ReportVerdict(True, f"{message}; {note}")


def _verify_results(path: Path, data: bytes, document: dict[str, Any]) -> tuple[bool, str]:
    """A results.json against the report.json beside it, when there is one, and then its
    reviews against the ledger of the grades folder above it, when there is one."""
    report = report_beside(path)
    beside = report.read_bytes() if report.is_file() else None
    ok, message = verify_results(data, beside)
    if not ok or beside is None:
        return ok, message
    extra = document["extra_data"]  # verify_results found it, with a digest
    problem, compared = _against_ledger(
        ledger_above(path), str(extra["digest"]), extra.get("review")
    )
    if problem:
        return False, problem
    return True, message + compared


def _against_ledger(path: Path, digest: str, reviews: object) -> tuple[str, str]:
    """``(problem, note)``: the results.json's reviews must be exactly the current reviews
    of its report in the ledger at ``path``, when there is one."""
    if not path.is_file():
        return "", (
            f"; its reviews were not compared with a ledger (none at {path})" if reviews else ""
        )
    try:
        expected = [review_document(r) for r in current_reviews(read_ledger(path).events, digest)]
    except GradekitError as exc:
        return f"the ledger beside its grades folder does not read ({exc})", ""
    if reviews is None:
        reviews = []
    if reviews != expected:
        return (
            f"extra_data.review is {_events(reviews)} but the ledger {path} holds the "
            f"current reviews {_events(expected)} of report {digest[:12]}: the file was "
            "edited or is out of date; grade again to write it anew "
            f"(`{commands.GRADE_INTO(submissions='SUBMISSIONS', out=str(path.parent))}`)"
        ), ""
    return "", f" and the ledger's current reviews ({_events(expected)})" if expected else ""


def _events(reviews: object) -> str:
    """Reviews named by their ledger events, and whether they confirm or set points."""
    if not isinstance(reviews, list) or not reviews:
        return "none"
    return ", ".join(
        f"{r.get('criterion')} {r.get('points') or 'confirmed'} (event {r.get('event')})"
        if isinstance(r, dict)
        else "?"
        for r in reviews
    )
