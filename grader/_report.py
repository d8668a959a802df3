"""Reports: the canonical ``report.json`` and its digest, ``report.md``, Gradescope's file.

Everything here is pure: a ``Report`` in, bytes or text out. ``report.json`` is the
canonical JSON of ``report_document`` plus ``digest``, the SHA-256 of the canonical bytes
of the document without it, then one newline. Points are strings exact to the cent.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import NoReturn

from grader._model import CheckResult, CriterionResult, Report
from lab import UsageError

__all__ = [
    "SCHEMA",
    "canonical",
    "points_text",
    "render_gradescope",
    "render_markdown",
    "render_report_json",
    "report_digest",
    "report_document",
    "verify_report",
]

SCHEMA = "gradekit.report/1"
_CENT = Decimal("0.01")


def canonical(obj: object) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8 without escapes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def points_text(value: Decimal) -> str:
    """``Decimal("7.5")`` as ``"7.50"``; points finer than a cent are a grader bug."""
    exact = value.quantize(_CENT)
    if exact != value:
        raise UsageError(f"points {value} are not exact to the cent; round them in the check")
    return f"{abs(exact) if exact == 0 else exact:f}"


def report_document(report: Report) -> dict[str, object]:
    """The schema of DESIGN.md "Report", without ``digest``."""
    return {
        "schema": SCHEMA,
        "submission": report.submission,
        "rubric": {
            "id": report.rubric_id,
            "version": report.rubric_version,
            "sha256": report.rubric_sha256,
        },
        "inputs": dict(report.inputs),
        "criteria": [_criterion_document(c) for c in report.criteria],
        "findings": list(report.findings),
        "total": points_text(report.total),
        "max": points_text(report.max),
    }


def report_digest(report: Report) -> str:
    """SHA-256 hex of the canonical document without ``digest``."""
    return hashlib.sha256(canonical(report_document(report))).hexdigest()


def render_report_json(report: Report) -> bytes:
    """The bytes of ``report.json``: canonical document with its digest, one newline."""
    document = report_document(report)
    document["digest"] = hashlib.sha256(canonical(document)).hexdigest()
    return canonical(document) + b"\n"


def verify_report(data: bytes) -> tuple[bool, str]:
    """Whether ``data`` is a ``report.json`` exactly as gradekit wrote it, and why not."""
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        return False, f"not JSON ({exc}): pass the report.json file gradekit wrote"
    if not isinstance(document, dict):
        return False, "not a report: the JSON is not an object"
    digest = document.pop("digest", None)
    if not isinstance(digest, str):
        return False, "no digest field: not a gradekit report, or it was cut short"
    expected = hashlib.sha256(canonical(document)).hexdigest()
    if digest != expected:
        return False, (
            f"digest mismatch: the report says {digest} but its content hashes to {expected}; "
            "it was edited after grading: grade the submission again"
        )
    body = canonical({**document, "digest": digest})
    if data not in (body, body + b"\n"):  # a lost final newline is not an edit
        return False, (
            "the digest matches but the bytes are not canonical (reformatted, or a key given "
            "twice); use the file exactly as gradekit wrote it"
        )
    if document.get("schema") != SCHEMA:
        schema = document.get("schema")
        return False, f"schema {schema!r} is not {SCHEMA!r}: verify it with a matching gradekit"
    return True, f"digest {digest} matches the content"


def render_markdown(report: Report) -> str:
    """``report.md``: the total, a table of criteria, then what to do about each loss."""
    lines = [
        f"# Grade report: {_inline(report.submission)}",
        "",
        f"**Total: {points_text(report.total)} / {points_text(report.max)}**",
        "",
        f"Rubric `{report.rubric_id}` version {report.rubric_version}.",
        "",
        "| Criterion | Points | Max | Result |",
        "|---|---:|---:|---|",
        *(_table_row(c) for c in report.criteria),
        "",
    ]
    for criterion in report.criteria:
        lines += _criterion_section(criterion)
    if report.findings:
        lines += ["## Findings", "", *(f"- {_inline(f)}" for f in report.findings), ""]
    lines += ["---", "", f"Report digest (SHA-256): `{report_digest(report)}`", ""]
    return "\n".join(lines)


def render_gradescope(report: Report, digest: str) -> bytes:
    """Gradescope's autograder ``results.json``: one test per check, feedback on top."""
    tests = []
    for number, criterion in enumerate(report.criteria, 1):
        checks = criterion.checks or (
            CheckResult(criterion.id, _earned_all(criterion), criterion.points, criterion.max, ""),
        )
        for sub, check in enumerate(checks, 1):
            tests.append(_gradescope_test(criterion, check, f"{number}.{sub}"))
    document = {
        "score": float(report.total),
        "output": render_markdown(report),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"digest": digest, "schema": SCHEMA},
        "tests": tests,
    }
    return canonical(document) + b"\n"


def _criterion_document(criterion: CriterionResult) -> dict[str, object]:
    return {
        "id": criterion.id,
        "title": criterion.title,
        "points": points_text(criterion.points),
        "max": points_text(criterion.max),
        "review": criterion.review,
        "checks": [
            {
                "id": check.id,
                "passed": check.passed,
                "points": points_text(check.points),
                "max": points_text(check.max),
                "detail": check.detail,
            }
            for check in criterion.checks
        ],
        "advice": list(criterion.advice),
    }


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _lost(check: CheckResult) -> bool:
    return not check.passed or check.points < check.max


def _earned_all(criterion: CriterionResult) -> bool:
    return criterion.points >= criterion.max


def _inline(text: str) -> str:
    """One line of Markdown that shows ``text`` as written: no raw HTML, no line breaks."""
    return " ".join(text.split()).replace("<", "\\<")


def _table_row(criterion: CriterionResult) -> str:
    lost = [check.id for check in criterion.checks if _lost(check)]
    result = "full marks" if _earned_all(criterion) else f"lost: {', '.join(lost) or 'points'}"
    if criterion.review:
        result += "; marked for review"
    title = _inline(criterion.title).replace("|", "\\|")
    cells = (title, points_text(criterion.points), points_text(criterion.max), result)
    return "| " + " | ".join(cells) + " |"


def _criterion_section(criterion: CriterionResult) -> list[str]:
    lines = [
        f"## {_inline(criterion.title)}: "
        f"{points_text(criterion.points)} / {points_text(criterion.max)}",
        "",
    ]
    if criterion.review:
        lines += ["Marked for review by a person: these points may still change.", ""]
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
    return f"- `{check.id}` ({score}){detail}"


def _gradescope_test(criterion: CriterionResult, check: CheckResult, number: str) -> object:
    output = check.detail
    if _lost(check) and criterion.advice:
        output += "\n\nWhat to do:\n" + "\n".join(f"- {a}" for a in criterion.advice)
    if criterion.review:
        output += "\n\nMarked for review by a person: these points may still change."
    return {
        "name": f"{criterion.title}: {check.id}",
        "number": number,
        "score": float(check.points),
        "max_score": float(check.max),
        "status": "passed" if check.passed else "failed",
        "output": output.strip(),
        "tags": [criterion.id],
        "visibility": "visible",
    }
