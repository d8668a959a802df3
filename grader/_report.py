"""Reports: the canonical ``report.json`` and its digest, ``report.md``, Gradescope's file.

Everything here is pure: a ``Report`` in, bytes or text out. ``report.json`` is the
canonical JSON of ``report_document`` plus ``digest``, the SHA-256 of the canonical bytes
of the document without it, then one newline. Points are strings exact to the cent.

Any text in a report may come from the submission (an answer, an exception's name, a
FAILURES.md title, a stretch goal's id), so every text goes through ``quote``: invisible
and control characters are written as escapes and the length is capped, with a marker. In
``report.md`` (and Gradescope's top-level output, which is the same Markdown) every such
text is also backslash-escaped (``_escape``), so it can open no link, image, HTML tag,
entity, heading, table cell, code span or emphasis. Gradescope's per-test names and outputs
are declared ``"text"``, which Gradescope renders as plain text, so they are quoted only.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NoReturn

from gradekit import UsageError
from grader._model import CENT, CONTRACT, CheckResult, CriterionResult, Report

__all__ = [
    "FINDINGS_SHOWN",
    "PENDING",
    "QUOTE_LIMIT",
    "REVIEW_FINDING",
    "SCHEMA",
    "TEXT_LIMIT",
    "HumanReview",
    "canonical",
    "cents_of",
    "degraded_lines",
    "inline_markdown",
    "parse_canonical",
    "pending_review",
    "points_text",
    "quote",
    "render_gradescope",
    "render_markdown",
    "render_report_json",
    "report_digest",
    "report_document",
    "report_from_document",
    "review_document",
    "review_verdict",
    "sum_problems",
    "verify_report",
]

SCHEMA = "gradekit.report/1"

QUOTE_LIMIT = 500  # characters of one piece of submission text inside a sentence
TEXT_LIMIT = 2000  # characters of one detail, finding or advice as a whole
FINDINGS_SHOWN = 50  # findings listed in report.md; report.json keeps them all

# Characters that could be invisible or act on a terminal: checked one by one.
_SUSPECT = re.compile(r"[^\t\n\x20-\x7e]")
_HIDDEN = frozenset(("Cc", "Cf", "Cs"))  # controls, format characters (bidi), surrogates
# Every ASCII punctuation character but " ' , / ; ? % and @ is escaped in Markdown.
# CommonMark (and GitHub's tables, strikethrough and autolinks) give those seven no
# meaning on their own: quotes delimit only link titles and HTML attributes, which need
# an escaped [ or <; ; ends only an entity, which needs an escaped &; , / ? % appear only
# inside links. @ is set in a code span instead: GitHub links e-mail addresses (and
# mailto:, xmpp:) after escapes are undone, unless the @ is in a node of its own.
_MARKUP = re.compile(r"""([!#$&()*+\-.:<=>\[\\\]^_`{|}~])""")
_AT = re.compile(r"@+")


@dataclass(frozen=True, slots=True)
class HumanReview:
    """A person's current verdict on one criterion of a report, as a ledger ``review``
    event records it (``grader._reviews``). The report itself is never edited: a review is
    rendered beside the automated points."""

    criterion: str  # the criterion's id
    automated: Decimal  # the criterion's points in the report
    points: Decimal | None  # None: a confirmation, the automated points stand
    by: str
    reason: str
    event: int  # the ledger event's seq

    @property
    def final(self) -> Decimal:
        """The criterion's points once reviewed."""
        return self.automated if self.points is None else self.points

    @property
    def delta(self) -> Decimal:
        """What the review adds to the automated total (negative when it takes points)."""
        return self.final - self.automated


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` as a report may show it: at most ``limit`` characters, nothing hidden.

    Control, format (bidi, zero-width) and surrogate characters are written as Python
    escapes (``\\x1b``, ``\\u202e``); a longer text is cut and ends with
    ``… [cut: N more characters]``, N counted in ``text``. Quoting quoted text changes
    nothing, so a text may be quoted where it is made and again where it is shown.
    """
    if len(text) <= limit:
        shown = _SUSPECT.sub(_visible, text)
        if len(shown) <= limit:
            return shown
    budget = limit - len(_cut(len(text)))
    pieces, used = [], 0
    for char in text:
        piece = _SUSPECT.sub(_visible, char)
        if used + len(piece) > budget:
            break
        pieces.append(piece)
        used += len(piece)
    return "".join(pieces) + _cut(len(text) - len(pieces))


def _visible(match: re.Match[str]) -> str:
    char = match[0]
    if unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def _cut(count: int) -> str:
    return f"… [cut: {count} more characters]"


def canonical(obj: object) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8 without escapes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def points_text(value: Decimal) -> str:
    """``Decimal("7.5")`` as ``"7.50"``; points finer than a cent are a grader bug."""
    exact = value.quantize(CENT)
    if exact != value:
        raise UsageError(f"points {value} are not exact to the cent; round them in the check")
    return f"{abs(exact) if exact == 0 else exact:f}"


def report_document(report: Report) -> dict[str, object]:
    """The schema of docs/formats.md "Report", without ``digest``.

    A report with a degraded check says so at the top (``verdict``, ``divergence``); a
    report without one has neither key, so its bytes are those of a report before there
    were degraded checks.
    """
    degraded = {"verdict": "degraded", "divergence": CONTRACT} if report.degraded else {}
    return {
        **degraded,
        "schema": SCHEMA,
        "submission": quote(report.submission),
        "rubric": {
            "id": report.rubric_id,
            "version": report.rubric_version,
            "sha256": report.rubric_sha256,
            # the regression sets it pins, by version and digest; none: no key at all
            **({"sets": dict(sorted(report.sets.items()))} if report.sets else {}),
        },
        "inputs": dict(report.inputs),
        "criteria": [_criterion_document(c) for c in report.criteria],
        "findings": [quote(f, TEXT_LIMIT) for f in report.findings],
        "total": points_text(report.total),
        "max": points_text(report.max),
    }


def report_digest(report: Report) -> str:
    """SHA-256 hex of the canonical document without ``digest``."""
    return hashlib.sha256(canonical(report_document(report))).hexdigest()


def render_report_json(report: Report) -> bytes:
    """The bytes of ``report.json``: canonical document with its digest, one newline."""
    document = report_document(report)
    problems = sum_problems(document)
    if problems:  # a custom check's result that verify would reject: never write it
        raise UsageError(f"the report of {report.submission!r} does not add up: "
                         f"{'; '.join(problems)}; a check must return a CriterionResult whose "
                         "points and max are the sums of its (at least one) checks'")
    document["digest"] = hashlib.sha256(canonical(document)).hexdigest()
    return canonical(document) + b"\n"


def verify_report(data: bytes) -> tuple[bool, str]:
    """Whether ``data`` is a ``report.json`` exactly as gradekit wrote it, and why not.

    The digest proves the file is self-consistent, and the sums that its points add up;
    neither proves who wrote it: that is the signature's job (``grader._signing``).
    """
    document, problem = parse_canonical(data, "report.json")
    if document is None:
        return False, problem
    body = dict(document)
    digest = body.pop("digest", None)
    body.pop("signature", None)  # the digest never covers the signature
    if not isinstance(digest, str):
        return False, "no digest field: not a gradekit report, or it was cut short"
    expected = hashlib.sha256(canonical(body)).hexdigest()
    if digest != expected:
        return False, (
            f"digest mismatch: the report says {digest} but its content hashes to {expected}; "
            "it was edited after grading: grade the submission again"
        )
    if problem:
        return False, problem
    if document.get("schema") != SCHEMA:
        schema = document.get("schema")
        return False, f"schema {schema!r} is not {SCHEMA!r}: verify it with a matching gradekit"
    problems = sum_problems(document)
    if problems:
        return False, "; ".join(problems) + ": the report was edited; grade the submission again"
    return True, f"digest {digest} matches the content; the points add up"


def report_from_document(document: Mapping[str, Any]) -> Report:
    """The ``Report`` that a verified ``report.json`` document was written from, to render
    again (with reviews). Its texts are quoted already and quoting quoted text changes
    nothing, so the rebuilt report has the document's digest; ``ValueError`` when it does
    not (another schema, a document that does not verify): render nothing from a report
    other than the one graded."""
    try:
        rubric = document["rubric"]
        report = Report(
            submission=document["submission"], rubric_id=rubric["id"],
            rubric_version=rubric["version"], rubric_sha256=rubric["sha256"],
            sets=dict(rubric.get("sets", {})), inputs=dict(document["inputs"]),
            criteria=tuple(_criterion_of(c) for c in document["criteria"]),
            findings=tuple(document["findings"]))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a report document ({type(exc).__name__}: {exc})") from exc
    if report_digest(report) != document.get("digest"):
        raise ValueError("the report rebuilt from the document has another digest: verify "
                         "it with `gradekit report verify`, or grade the submission again")
    return report


def _criterion_of(document: Mapping[str, Any]) -> CriterionResult:
    return CriterionResult(
        id=document["id"], title=document["title"],
        points=cents_of(document["points"], "points"), max=cents_of(document["max"], "max"),
        checks=tuple(CheckResult(id=c["id"], passed=c["passed"],
                                 points=cents_of(c["points"], "points"),
                                 max=cents_of(c["max"], "max"), detail=c["detail"],
                                 degraded=_is_degraded(c)) for c in document["checks"]),
        review=document["review"], advice=tuple(document["advice"]))


def parse_canonical(data: bytes, name: str) -> tuple[dict[str, object] | None, str]:
    """``data`` as a JSON object, and what is wrong with it.

    ``(None, why)`` when it is no JSON object; ``(document, why)`` when its bytes are not
    the canonical form gradekit writes (reformatted, or a key given twice: a reader that
    keeps the first of two keys would see another file than the one checked).
    """
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"not JSON ({exc}): pass the {name} file gradekit wrote"
    if not isinstance(document, dict):
        return None, f"not a {name}: the JSON is not an object"
    body = canonical(document)
    if data not in (body, body + b"\n"):  # a lost final newline is not an edit
        return document, (
            "the bytes are not canonical (reformatted, or a key given twice); use the file "
            "exactly as gradekit wrote it"
        )
    return document, ""


_POINTS = re.compile(r"-?[0-9]+\.[0-9]{2}")


def cents_of(value: object, field: str) -> Decimal:
    """A report's points string (``"7.50"``) as a Decimal; ``ValueError`` naming the field."""
    if not isinstance(value, str) or not _POINTS.fullmatch(value):
        raise ValueError(f"{field} is {value!r}, not points with two decimal places")
    return Decimal(value)


def sum_problems(document: Mapping[str, object]) -> list[str]:
    """Where a report's points do not add up: the total and max to its criteria's, each
    criterion's points and max to its checks', each check's points from 0 to its max.
    Every criterion needs a check, so no points stand unexplained. Each problem names the
    field and both numbers."""
    criteria = document.get("criteria")
    if not isinstance(criteria, list) or not all(isinstance(c, dict) for c in criteria):
        return ["criteria is not a list of objects"]
    try:
        sums = {"points": Decimal(0), "max": Decimal(0)}
        problems = []
        for number, criterion in enumerate(criteria):
            name = f"criteria[{number}] ({criterion.get('id')!r})"
            checks = criterion.get("checks")
            if not isinstance(checks, list) or not checks \
                    or not all(isinstance(c, dict) for c in checks):
                problems.append(f"{name}.checks is not a list of at least one check")
                continue
            for n, check in enumerate(checks):
                points = cents_of(check.get("points"), f"{name}.checks[{n}].points")
                most = cents_of(check.get("max"), f"{name}.checks[{n}].max")
                if not 0 <= points <= most:
                    problems.append(f"{name}.checks[{n}].points is {points}, outside 0.00 to "
                                    f"its max {most}")
                if _is_degraded(check) and (points or check.get("passed") is not False):
                    problems.append(f"{name}.checks[{n}] is degraded but scores {points} or "
                                    "passed: a degraded check scores nothing")
            problems += _verdict_problems(criterion, checks, name)
            for field in ("points", "max"):
                own = cents_of(criterion.get(field), f"{name}.{field}")
                added = sum((cents_of(check.get(field), f"{name}.checks[{n}].{field}")
                             for n, check in enumerate(checks)), Decimal(0))
                sums[field] += own
                if own != added:
                    problems.append(f"{name}.{field} is {own} but its checks' {field} sum "
                                    f"to {added}")
        for field, key in (("points", "total"), ("max", "max")):
            stated = cents_of(document.get(key), key)
            if stated != sums[field]:
                problems.append(f"{key} is {stated} but the criteria's {field} sum to "
                                f"{sums[field]}")
        problems += _verdict_problems(document, criteria, "the report")
    except ValueError as exc:
        return [str(exc)]
    return problems


def _is_degraded(part: Mapping[str, object]) -> bool:
    return part.get("verdict") == "degraded"


def _verdict_problems(whole: Mapping[str, object], parts: list[dict[str, object]],
                      name: str) -> list[str]:
    """A report or criterion is degraded exactly when one of its parts is, and says where
    it diverged (``CONTRACT``)."""
    expected = any(_is_degraded(part) for part in parts)
    if _is_degraded(whole) != expected or (expected and whole.get("divergence") != CONTRACT):
        return [f"{name} is {'' if _is_degraded(whole) else 'not '}marked degraded, but "
                f"{'one' if expected else 'none'} of its parts is"]
    return []


def render_markdown(report: Report, *, isolation: str = "",
                    reviews: Sequence[HumanReview] = ()) -> str:
    """``report.md``: the total, a table of criteria, then what to do about each loss.

    ``isolation`` says which wall the code ran behind; it is not part of the digest, so
    an honest submission gets one digest whichever wall the grading machine has.
    ``reviews``, a person's current verdicts (results.json's output; never report.md's
    own bytes), say who reviewed which criterion instead of "pending".
    """
    reviewed = {review.criterion: review for review in reviews}
    lines = [
        f"# Grade report: {_inline(report.submission, QUOTE_LIMIT)}",
        "",
        f"**Total: {points_text(report.total)} / {points_text(report.max)}**",
        "",
        *_final_lines(report, reviews),
        f"Rubric `{report.rubric_id}` version {report.rubric_version}.",
        "",
        "| Criterion | Points | Max | Result |",
        "|---|---:|---:|---|",
        *(_table_row(c, reviewed.get(c.id)) for c in report.criteria),
        "",
        *degraded_lines(report),
        *pending_review(report, reviews),
        *_human_review_lines(report, reviews),
    ]
    for criterion in report.criteria:
        lines += _criterion_section(criterion, reviewed.get(criterion.id))
    if report.findings:
        lines += ["## Findings", "", *_findings(report.findings), ""]
    lines += ["---", "", f"Report digest (SHA-256): `{report_digest(report)}`", ""]
    if isolation:
        lines += [f"Isolation: {isolation}.", ""]
    return "\n".join(lines)


def degraded_lines(report: Report) -> list[str]:
    """Markdown that says which points could not be evaluated and why, none when every
    check was: a degraded grade is never shown as a final one."""
    degraded = report.degraded
    if not degraded:
        return []
    at_stake = points_text(sum((check.max for _, check in degraded), Decimal(0)))
    return [f"**Degraded ({CONTRACT}): {at_stake} points could not be evaluated**, because "
            "the rubric's contract is incomplete there; they score nothing until the "
            "instructor completes the rubric, bumps its version and grades again. This grade "
            "is not final.", "",
            *(f"- {_inline(criterion.title)}, {_inline(check.id, QUOTE_LIMIT)}: "
              f"{_inline(check.detail)}" for criterion, check in degraded), ""]


REVIEW_FINDING = "flagged for review: "  # how grader._grade.REVIEW starts a finding
PENDING = ("Pending human review: these points were judged by structure alone; a person "
           "will read the work and may still change them.")


def pending_review(report: Report, reviews: Sequence[HumanReview] = ()) -> list[str]:
    """Markdown paragraphs that say plainly which points a person may still change (those
    marked for review that no one has reviewed yet), and whether a person must look at the
    whole submission; none when neither applies."""
    lines = []
    done = {r.criterion for r in reviews}
    review = [c for c in report.criteria if c.review and c.id not in done]
    if review:
        at_stake = points_text(sum((c.max for c in review), Decimal(0)))
        listed = ", ".join(f"{_inline(c.title)} {points_text(c.points)} / {points_text(c.max)}"
                           for c in review)
        lines += [f"**Pending human review: {at_stake} points** ({listed}) were judged by "
                  "structure alone; a person will read the work and may still change them.",
                  ""]
    flagged = sum(f.startswith(REVIEW_FINDING) for f in report.findings)
    if flagged:
        lines += [f"**Flagged for review:** {flagged} finding(s) below ask a person to look at "
                  "the whole submission; this grade is not final until they have.", ""]
    return lines


def render_gradescope(report: Report, digest: str, *, isolation: str = "",
                      reviews: Sequence[HumanReview] = ()) -> bytes:
    """Gradescope's autograder ``results.json``: one test per check, feedback on top.

    The top-level output is ``report.md``'s Markdown (``output_format`` and
    ``test_output_format`` "md"); each test declares its own output and name "text",
    which Gradescope shows as written, since they quote the submission. Each of
    ``reviews`` (in ledger order) adds a test worth its change to the points, after the
    checks' tests, and an entry of ``extra_data.review``; ``score`` is then the final one.
    """
    tests = []
    for number, criterion in enumerate(report.criteria, 1):
        checks = criterion.checks or (
            CheckResult(criterion.id, _earned_all(criterion), criterion.points, criterion.max, ""),
        )
        for sub, check in enumerate(checks, 1):
            tests.append(_gradescope_test(criterion, check, f"{number}.{sub}"))
    tests += [_review_test(report, review) for review in reviews]
    reviewed = {"review": [review_document(r) for r in reviews]} if reviews else {}
    document = {
        "score": float(report.total + sum((r.delta for r in reviews), Decimal(0))),
        "output": render_markdown(report, isolation=isolation, reviews=reviews),
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"digest": digest, "schema": SCHEMA, **reviewed,
                       **({"isolation": isolation} if isolation else {})},
        "tests": tests,
    }
    return canonical(document) + b"\n"


_DEGRADED = {"verdict": "degraded", "divergence": CONTRACT}


def _criterion_document(criterion: CriterionResult) -> dict[str, object]:
    return {
        **(_DEGRADED if criterion.degraded else {}),
        "id": quote(criterion.id),
        "title": quote(criterion.title),
        "points": points_text(criterion.points),
        "max": points_text(criterion.max),
        "review": criterion.review,
        "checks": [_check_document(check) for check in criterion.checks],
        "advice": [quote(a, TEXT_LIMIT) for a in criterion.advice],
    }


def _check_document(check: CheckResult) -> dict[str, object]:
    return {
        **(_DEGRADED if check.degraded else {}),
        "id": quote(check.id),
        "passed": check.passed,
        "points": points_text(check.points),
        "max": points_text(check.max),
        "detail": quote(check.detail, TEXT_LIMIT),
    }


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _lost(check: CheckResult) -> bool:
    return not check.passed or check.points < check.max


def _earned_all(criterion: CriterionResult) -> bool:
    return criterion.points >= criterion.max


def _inline(text: str, limit: int = TEXT_LIMIT) -> str:
    """One line of Markdown that shows ``text`` as written: quoted, on one line, escaped."""
    return _escape(" ".join(quote(text, limit).split()))


def inline_markdown(text: str) -> str:
    """``text`` as one inert line of Markdown (quoted, escaped): for other modules."""
    return _inline(text)


def _escape(text: str) -> str:
    """``text`` with a backslash before each character Markdown could read as markup.

    A backslash-escaped ASCII punctuation character is always a literal character in
    CommonMark, so no link, image, autolink, HTML, entity, heading, list, table cell, code
    span or emphasis can start: each needs one of the escaped characters to open it.
    GitHub's bare-URL autolinks need an unescaped ``:`` or ``www.``; its e-mail autolinks
    need an ``@`` between text, and each run of ``@`` is a code span of its own.
    """
    return _AT.sub(lambda at: f"`{at[0]}`", _MARKUP.sub(r"\\\1", text))


def _findings(findings: tuple[str, ...]) -> list[str]:
    """The first ``FINDINGS_SHOWN`` findings as list items, then how many more there are."""
    shown = [f"- {_inline(f)}" for f in findings[:FINDINGS_SHOWN]]
    if len(findings) > FINDINGS_SHOWN:
        shown.append(f"- … and {len(findings) - FINDINGS_SHOWN} more findings: fix the ones "
                     "above first; report.json lists them all")
    return shown


def _table_row(criterion: CriterionResult, review: HumanReview | None = None) -> str:
    lost = [_inline(check.id, QUOTE_LIMIT) for check in criterion.checks if _lost(check)]
    result = "full marks" if _earned_all(criterion) else f"lost: {', '.join(lost) or 'points'}"
    if criterion.degraded:
        result += f"; degraded ({CONTRACT})"
    if review is not None:
        result += f"; reviewed: {points_text(review.final)}"
    elif criterion.review:
        result += "; marked for review"
    cells = (_inline(criterion.title), points_text(criterion.points),
             points_text(criterion.max), result)
    return "| " + " | ".join(cells) + " |"


def _criterion_section(criterion: CriterionResult,
                       review: HumanReview | None = None) -> list[str]:
    lines = [
        f"## {_inline(criterion.title)}: "
        f"{points_text(criterion.points)} / {points_text(criterion.max)}",
        "",
    ]
    if review is not None:
        lines += [f"Reviewed by {_inline(review.by)} (ledger event {review.event}): "
                  f"{points_text(review.final)} / {points_text(criterion.max)} stand "
                  f"(automated {points_text(review.automated)}).", ""]
    elif criterion.review:
        lines += [PENDING, ""]
    for heading, chosen in (
        ("Passed:", [c for c in criterion.checks if not _lost(c)]),
        ("Lost points:", [c for c in criterion.checks if _lost(c)]),
    ):
        if chosen:
            lines += [heading, *(_check_line(check) for check in chosen), ""]
    if criterion.advice:
        lines += ["What to do:", *(f"- {_inline(a)}" for a in criterion.advice), ""]
    return lines


def _check_line(check: CheckResult) -> str:
    score = f"{points_text(check.points)} / {points_text(check.max)}"
    detail = f": {_inline(check.detail)}" if check.detail else ""
    return f"- {_inline(check.id, QUOTE_LIMIT)} ({score}){detail}"


def _gradescope_test(criterion: CriterionResult, check: CheckResult, number: str) -> object:
    """One Gradescope test; its name and output are declared plain text, so only quoted."""
    output = quote(check.detail, TEXT_LIMIT)
    if check.degraded:
        output = (f"Degraded ({CONTRACT}): not evaluated, because the rubric's contract is "
                  f"incomplete here: {output}")
    if _lost(check) and criterion.advice:
        output += "\n\nWhat to do:\n" + "\n".join(f"- {quote(a, TEXT_LIMIT)}"
                                                  for a in criterion.advice)
    if criterion.review:
        output += "\n\n" + PENDING
    return {
        "name": f"{quote(criterion.title)}: {quote(check.id)}",
        "name_format": "text",
        "number": number,
        "score": float(check.points),
        "max_score": float(check.max),
        "status": "passed" if check.passed else "failed",
        "output": output.strip(),
        "output_format": "text",
        "tags": [criterion.id],
        "visibility": "visible",
    }


def review_document(review: HumanReview) -> dict[str, object]:
    """One entry of results.json's ``extra_data.review``; ``points`` null for a
    confirmation, as in the ledger's event."""
    return {"criterion": review.criterion, "automated": points_text(review.automated),
            "points": None if review.points is None else points_text(review.points),
            "by": review.by, "reason": review.reason, "event": review.event}


def _reviewed_criterion(report: Report, review: HumanReview) -> tuple[int, CriterionResult]:
    for number, criterion in enumerate(report.criteria, 1):
        if criterion.id == review.criterion:
            return number, criterion
    raise ValueError(f"{review.criterion!r} is not a criterion of the report")


def review_verdict(review: HumanReview) -> str:
    """``15.00 -> 12.00 by kim`` or ``15.00 confirmed by kim``: a review in a few words."""
    if review.points is None:
        return f"{points_text(review.automated)} confirmed by {review.by}"
    return f"{points_text(review.automated)} -> {points_text(review.points)} by {review.by}"


def _final_lines(report: Report, reviews: Sequence[HumanReview]) -> list[str]:
    if not reviews:
        return []
    final = report.total + sum((r.delta for r in reviews), Decimal(0))
    return [f"**Final after human review: {points_text(final)} / {points_text(report.max)}** "
            f"(automated {points_text(report.total)})", ""]


def _human_review_lines(report: Report, reviews: Sequence[HumanReview]) -> list[str]:
    """The "Human review" section: each current review, who made it and why."""
    if not reviews:
        return []
    lines = ["## Human review", ""]
    for review in reviews:
        _, criterion = _reviewed_criterion(report, review)
        verdict = "confirmed" if review.points is None else f"-> {points_text(review.points)}"
        lines.append(f"- {_inline(criterion.title)}: {points_text(review.automated)} {verdict} "
                     f"by {_inline(review.by)} (ledger event {review.event}): "
                     f"{_inline(review.reason)}")
    return [*lines, ""]


def _review_test(report: Report, review: HumanReview) -> object:
    """A review's Gradescope test: worth its change to the points (max 0), plain text."""
    number, criterion = _reviewed_criterion(report, review)
    what = ("confirmed the automated points" if review.points is None else
            f"changed the points from {points_text(review.automated)} to "
            f"{points_text(review.points)}")
    output = (f"Reviewed by {quote(review.by)} (ledger event {review.event}): {what} "
              f"({points_text(review.final)} / {points_text(criterion.max)}). Reason: "
              f"{quote(review.reason, TEXT_LIMIT)}")
    return {
        "name": f"{quote(criterion.title)}: human review",
        "name_format": "text",
        "number": f"{number}.{max(len(criterion.checks), 1) + 1}",
        "score": float(review.delta),
        "max_score": 0.0,
        "status": "passed",
        "output": output,
        "output_format": "text",
        "tags": [criterion.id],
        "visibility": "visible",
    }
