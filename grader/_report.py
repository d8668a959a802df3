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
from decimal import Decimal
from typing import NoReturn

from gradekit import UsageError
from grader._model import CENT, CheckResult, CriterionResult, Report

__all__ = [
    "FINDINGS_SHOWN",
    "QUOTE_LIMIT",
    "SCHEMA",
    "TEXT_LIMIT",
    "canonical",
    "points_text",
    "quote",
    "render_gradescope",
    "render_markdown",
    "render_report_json",
    "report_digest",
    "report_document",
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
    """The schema of docs/formats.md "Report", without ``digest``."""
    return {
        "schema": SCHEMA,
        "submission": quote(report.submission),
        "rubric": {
            "id": report.rubric_id,
            "version": report.rubric_version,
            "sha256": report.rubric_sha256,
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


def render_markdown(report: Report, *, isolation: str = "") -> str:
    """``report.md``: the total, a table of criteria, then what to do about each loss.

    ``isolation`` says which wall the code ran behind; it is not part of the digest, so
    an honest submission gets one digest whichever wall the grading machine has.
    """
    lines = [
        f"# Grade report: {_inline(report.submission, QUOTE_LIMIT)}",
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
        lines += ["## Findings", "", *_findings(report.findings), ""]
    lines += ["---", "", f"Report digest (SHA-256): `{report_digest(report)}`", ""]
    if isolation:
        lines += [f"Isolation: {isolation}.", ""]
    return "\n".join(lines)


def render_gradescope(report: Report, digest: str, *, isolation: str = "") -> bytes:
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
        "output": render_markdown(report, isolation=isolation),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"digest": digest, "schema": SCHEMA,
                       **({"isolation": isolation} if isolation else {})},
        "tests": tests,
    }
    return canonical(document) + b"\n"


def _criterion_document(criterion: CriterionResult) -> dict[str, object]:
    return {
        "id": quote(criterion.id),
        "title": quote(criterion.title),
        "points": points_text(criterion.points),
        "max": points_text(criterion.max),
        "review": criterion.review,
        "checks": [
            {
                "id": quote(check.id),
                "passed": check.passed,
                "points": points_text(check.points),
                "max": points_text(check.max),
                "detail": quote(check.detail, TEXT_LIMIT),
            }
            for check in criterion.checks
        ],
        "advice": [quote(a, TEXT_LIMIT) for a in criterion.advice],
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


def _table_row(criterion: CriterionResult) -> str:
    lost = [_inline(check.id, QUOTE_LIMIT) for check in criterion.checks if _lost(check)]
    result = "full marks" if _earned_all(criterion) else f"lost: {', '.join(lost) or 'points'}"
    if criterion.review:
        result += "; marked for review"
    cells = (_inline(criterion.title), points_text(criterion.points),
             points_text(criterion.max), result)
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
    return f"- {_inline(check.id, QUOTE_LIMIT)} ({score}){detail}"


def _gradescope_test(criterion: CriterionResult, check: CheckResult, number: str) -> object:
    """One Gradescope test; its name and output are declared plain text, so only quoted."""
    output = quote(check.detail, TEXT_LIMIT)
    if _lost(check) and criterion.advice:
        output += "\n\nWhat to do:\n" + "\n".join(f"- {quote(a, TEXT_LIMIT)}"
                                                  for a in criterion.advice)
    if criterion.review:
        output += "\n\nMarked for review by a person: these points may still change."
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
