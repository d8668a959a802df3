"""Reports: the canonical ``report.json``, its digest and its verification.

Everything here is pure: a ``Report`` in, bytes out, and back. ``report.json`` is the
canonical JSON of ``report_document`` plus ``digest``, the SHA-256 of the canonical bytes
of the document without it, then one newline. Points are strings exact to the cent.

Any text in a report may come from the submission (an answer, an exception's name, a
FAILURES.md title, a stretch goal's id), so every text goes through ``quote``: invisible
and control characters are written as escapes and the length is capped, with a marker.
What a person reads of it, report.md and results.json, is ``grader.outputs._render``'s.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NoReturn

from gradekit import UsageError
from gradekit.internal import commands
from grader._model import CENT, CONTRACT, CheckResult, CriterionResult, Divergence, Report
from grader._text import QUOTE_LIMIT, TEXT_LIMIT, quote

__all__ = [
    "SCHEMA",
    "canonical",
    "cents_of",
    "parse_canonical",
    "points_text",
    "render_report_json",
    "report_digest",
    "report_document",
    "report_from_document",
    "sum_problems",
    "verify_report",
]

SCHEMA = "gradekit.report/1"


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
        raise UsageError(
            f"the report of {report.submission!r} does not add up: "
            f"{'; '.join(problems)}; a check must return a CriterionResult whose "
            "points and max are the sums of its (at least one) checks'"
        )
    document["digest"] = hashlib.sha256(canonical(document)).hexdigest()
    return canonical(document) + b"\n"


def verify_report(data: bytes) -> tuple[bool, str]:
    """Whether ``data`` is a ``report.json`` exactly as gradekit wrote it, and why not.

    The digest proves the file is self-consistent, and the sums that its points add up;
    neither proves who wrote it: that is the signature's job (``grader.outputs._signing``).
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
            submission=document["submission"],
            rubric_id=rubric["id"],
            rubric_version=rubric["version"],
            rubric_sha256=rubric["sha256"],
            sets=dict(rubric.get("sets", {})),
            inputs=dict(document["inputs"]),
            criteria=tuple(_criterion_of(c) for c in document["criteria"]),
            findings=tuple(document["findings"]),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a report document ({type(exc).__name__}: {exc})") from exc
    if report_digest(report) != document.get("digest"):
        raise ValueError(
            "the report rebuilt from the document has another digest: verify "
            f"it with `{commands.REPORT_VERIFY(path='report.json')}` in its "
            "folder, or grade the submission again"
        )
    return report


def _criterion_of(document: Mapping[str, Any]) -> CriterionResult:
    return CriterionResult(
        id=document["id"],
        title=document["title"],
        points=cents_of(document["points"], "points"),
        max=cents_of(document["max"], "max"),
        checks=tuple(
            CheckResult(
                id=c["id"],
                passed=c["passed"],
                points=cents_of(c["points"], "points"),
                max=cents_of(c["max"], "max"),
                detail=c["detail"],
                degraded=_is_degraded(c),
                judged=c.get("verdict") in ("passed", "failed"),
                divergence=_divergence_of(c),
            )
            for c in document["checks"]
        ),
        review=document["review"],
        advice=tuple(document["advice"]),
    )


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
            if (
                not isinstance(checks, list)
                or not checks
                or not all(isinstance(c, dict) for c in checks)
            ):
                problems.append(f"{name}.checks is not a list of at least one check")
                continue
            for n, check in enumerate(checks):
                points = cents_of(check.get("points"), f"{name}.checks[{n}].points")
                most = cents_of(check.get("max"), f"{name}.checks[{n}].max")
                if not 0 <= points <= most:
                    problems.append(
                        f"{name}.checks[{n}].points is {points}, outside 0.00 to its max {most}"
                    )
                if _is_degraded(check) and (points or check.get("passed") is not False):
                    problems.append(
                        f"{name}.checks[{n}] is degraded but scores {points} or "
                        "passed: a degraded check scores nothing"
                    )
            problems += _verdict_problems(criterion, checks, name)
            for field in ("points", "max"):
                own = cents_of(criterion.get(field), f"{name}.{field}")
                added = sum(
                    (
                        cents_of(check.get(field), f"{name}.checks[{n}].{field}")
                        for n, check in enumerate(checks)
                    ),
                    Decimal(0),
                )
                sums[field] += own
                if own != added:
                    problems.append(
                        f"{name}.{field} is {own} but its checks' {field} sum to {added}"
                    )
        for field, key in (("points", "total"), ("max", "max")):
            stated = cents_of(document.get(key), key)
            if stated != sums[field]:
                problems.append(
                    f"{key} is {stated} but the criteria's {field} sum to {sums[field]}"
                )
        problems += _verdict_problems(document, criteria, "the report")
    except ValueError as exc:
        return [str(exc)]
    return problems


def _is_degraded(part: Mapping[str, object]) -> bool:
    return part.get("verdict") == "degraded"


def _verdict_problems(
    whole: Mapping[str, object], parts: list[dict[str, object]], name: str
) -> list[str]:
    """A report or criterion is degraded exactly when one of its parts is, and says where
    it diverged (``CONTRACT``)."""
    expected = any(_is_degraded(part) for part in parts)
    if _is_degraded(whole) != expected or (expected and whole.get("divergence") != CONTRACT):
        return [
            f"{name} is {'' if _is_degraded(whole) else 'not '}marked degraded, but "
            f"{'one' if expected else 'none'} of its parts is"
        ]
    return []


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
    """A check; a judged one (a case's expectation, a regression item) says its verdict,
    and where it failed, its first point of divergence with both sides. A core check has
    neither key, so its bytes are those of a report before judged checks had them."""
    judged: dict[str, object] = {"verdict": check.verdict} if check.judged else {}
    if check.divergence is not None:
        judged |= {
            "divergence": quote(check.divergence.at, QUOTE_LIMIT),
            "expected": quote(check.divergence.expected, TEXT_LIMIT),
            "observed": quote(check.divergence.observed, TEXT_LIMIT),
        }
    return {
        **(_DEGRADED if check.degraded else judged),
        "id": quote(check.id),
        "passed": check.passed,
        "points": points_text(check.points),
        "max": points_text(check.max),
        "detail": quote(check.detail, TEXT_LIMIT),
    }


def _divergence_of(check: Mapping[str, Any]) -> Divergence | None:
    if "expected" not in check:
        return None
    return Divergence(check["divergence"], check["expected"], check["observed"])


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")
