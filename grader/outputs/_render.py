"""What a person reads of a report: ``report.md``, and Gradescope's ``results.json``.

Pure: a ``Report`` (and the current human reviews of it) in, text or bytes out. Any text
in a report may come from the submission, so beyond ``quote`` (``grader._text``) every such
text in Markdown is escaped once (``_escape``): a span between backticks (the grader's advice
sets commands so) stays a code span, in which CommonMark reads nothing, and the rest is
backslash-escaped where it could open a link, autolink, image, HTML tag, entity, heading,
list, table cell or emphasis. Gradescope's per-test
names and outputs are declared ``"text"``, which Gradescope renders as plain text, so they
are quoted only. Reviews never change report.md's own bytes: only results.json (its score,
a reviewed criterion's test, and its Markdown output) carries them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

from grader._late import Late
from grader._model import CONTRACT, CheckResult, CriterionResult, HumanReview, Report
from grader._text import FLAGGED, QUOTE_LIMIT, TEXT_LIMIT, quote
from grader.outputs._report import SCHEMA, canonical, points_text, report_digest

__all__ = [
    "FINDINGS_SHOWN",
    "PENDING",
    "degraded_lines",
    "diverged_text",
    "inline_markdown",
    "late_deduction",
    "late_test",
    "pending_review",
    "render_gradescope",
    "render_markdown",
    "review_document",
    "review_verdict",
    "reviewed_test_name",
]

FINDINGS_SHOWN = 50  # findings listed in report.md; report.json keeps them all

# Escaped wherever they stand in text that is not code: each can open markup somewhere in
# CommonMark or an extension a renderer may add (emphasis, code, links and images, HTML,
# entities, headings, table cells, strikethrough, math, superscripts, attributes). The
# rest of ASCII punctuation means nothing mid-line, except as below.
_MARKUP = re.compile(r"""([\\`*_\[\]<>&|~!#$^{}])""")
# A ``.`` or ``:`` inside a word is how a bare autolink starts (www.x.y, x.example,
# http://x, mailto:x), so it is escaped there; not before a space or a dot, nor in 7.50.
_LINKY = re.compile(r"(:(?=\S)|\.(?=[^\s.\d])|(?<!\d)\.(?=\d))")
# At the start of a line (a list item's, a heading's) these open a list, a thematic break
# or a setext underline: ``- x``, ``+ x``, ``---``, ``===``, ``1. x``, ``2) x``.
_BLOCK = re.compile(r"^([-+=])|^(\d{1,9})([.)])(?=\s|$)")
_AT = re.compile(r"@+")
_TICKS = re.compile(r"`+")


def render_markdown(
    report: Report,
    *,
    isolation: str = "",
    reviews: Sequence[HumanReview] = (),
    digest: str | None = None,
    late: Late | None = None,
) -> str:
    """``report.md``: the total, a table of criteria, then what to do about each loss.

    ``isolation`` says which wall the code ran behind; it is not part of the digest, so
    an honest submission gets one digest whichever wall the grading machine has.
    ``reviews``, a person's current verdicts (results.json's output; never report.md's
    own bytes), say who reviewed which criterion instead of "pending". ``digest``: the
    report's, where the caller has it already (else it is computed). ``late``: what the
    lab's late policy made of the submission's time (results.json's output, as reviews).
    """
    reviewed = {review.criterion: review for review in reviews}
    lines = [
        f"# Grade report: {_inline(report.submission, QUOTE_LIMIT)}",
        "",
        f"**Total: {points_text(report.total)} / {points_text(report.max)}**",
        "",
        *_final_lines(report, reviews, late),
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
    lines += ["---", "", f"Report digest (SHA-256): `{digest or report_digest(report)}`", ""]
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
    return [
        f"**Degraded ({CONTRACT}): {at_stake} points could not be evaluated**, because "
        "the rubric's contract is incomplete there; they score nothing until the "
        "instructor completes the rubric, bumps its version and grades again. This grade "
        "is not final.",
        "",
        *(
            f"- {_inline(criterion.title)}, {_inline(check.id, QUOTE_LIMIT)}: "
            f"{_inline(check.detail)}"
            for criterion, check in degraded
        ),
        "",
    ]


PENDING = (
    "Pending human review: these points were judged by structure alone; a person "
    "will read the work and may still change them."
)


def pending_review(report: Report, reviews: Sequence[HumanReview] = ()) -> list[str]:
    """Markdown paragraphs that say plainly which points a person may still change (those
    marked for review that no one has reviewed yet), and whether a person must look at the
    whole submission; none when neither applies."""
    lines = []
    done = {r.criterion for r in reviews}
    review = [c for c in report.criteria if c.review and c.id not in done]
    if review:
        at_stake = points_text(sum((c.max for c in review), Decimal(0)))
        listed = ", ".join(
            f"{_inline(c.title)} {points_text(c.points)} / {points_text(c.max)}" for c in review
        )
        lines += [
            f"**Pending human review: {at_stake} points** ({listed}) were judged by "
            "structure alone; a person will read the work and may still change them.",
            "",
        ]
    flagged = sum(f.startswith(FLAGGED) for f in report.findings)
    if flagged:
        lines += [
            f"**Flagged for review:** {flagged} finding(s) below ask a person to look at "
            "the whole submission; this grade is not final until they have.",
            "",
        ]
    return lines


def render_gradescope(
    report: Report,
    digest: str,
    *,
    isolation: str = "",
    reviews: Sequence[HumanReview] = (),
    late: Late | None = None,
) -> bytes:
    """Gradescope's autograder ``results.json``: one test per check, feedback on top.

    The top-level output is ``report.md``'s Markdown (``output_format`` and
    ``test_output_format`` "md"); each test declares its own output and name "text",
    which Gradescope shows as written, since they quote the submission. A criterion one of
    ``reviews`` (in ledger order) judged is one test instead of its checks', worth the
    reviewed points, and an entry of ``extra_data.review``: Gradescope shows the final
    points where the automated ones were, and no test is worth less than nothing. ``late``
    (what the lab's late policy made of the submission's time) is ``extra_data.late``, and a
    penalty is one last test, worth minus the points it takes (``late_deduction``).
    """
    by_criterion = {review.criterion: review for review in reviews}
    tests = []
    for number, criterion in enumerate(report.criteria, 1):
        if criterion.id in by_criterion:
            tests.append(_review_test(criterion, by_criterion[criterion.id], f"{number}.1"))
            continue
        checks = criterion.checks or (
            CheckResult(criterion.id, _earned_all(criterion), criterion.points, criterion.max, ""),
        )
        for sub, check in enumerate(checks, 1):
            tests.append(_gradescope_test(criterion, check, f"{number}.{sub}"))
    reviewed: dict[str, object] = (
        {"review": [review_document(r) for r in reviews]} if reviews else {}
    )
    deduction = late_deduction(report, reviews, late)
    if late is not None and deduction:
        tests.append(late_test(late, deduction, f"{len(report.criteria) + 1}.1"))
    if late is not None:
        reviewed["late"] = late.document()
    document = {
        "score": float(report.total + sum((r.delta for r in reviews), Decimal(0)) - deduction),
        "output": render_markdown(
            report, isolation=isolation, reviews=reviews, digest=digest, late=late
        ),
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "digest": digest,
            "schema": SCHEMA,
            **reviewed,
            **({"isolation": isolation} if isolation else {}),
        },
        "tests": tests,
    }
    return canonical(document) + b"\n"


def _lost(check: CheckResult) -> bool:
    return not check.passed or check.points < check.max


def _earned_all(criterion: CriterionResult) -> bool:
    return criterion.points >= criterion.max


def _inline(text: str, limit: int = TEXT_LIMIT, *, cell: bool = False) -> str:
    """One line of Markdown that shows ``text`` as written: quoted, on one line, escaped
    once, its backtick spans as code (a table ``cell``'s ``|`` escaped in them too)."""
    return _escape(" ".join(quote(text, limit).split()), cell=cell)


def inline_markdown(text: str) -> str:
    """``text`` as one line of Markdown (quoted, escaped once, backtick spans as code):
    for other modules."""
    return _inline(text)


def _escape(text: str, *, cell: bool = False) -> str:
    """``text`` as Markdown that shows it as written, its backtick spans as code.

    The text is split into code spans by CommonMark's rule (a run of n backticks opens
    one, closed by the next run of exactly n; an opener without a closer is literal). A
    code span is kept as written, so a renderer shows what the text's author meant, and
    CommonMark reads no link, HTML, entity or emphasis inside one; in a table ``cell``,
    ``|`` becomes ``\\|``, which GitHub's tables read inside code too. The rest gets a
    backslash before each character that could open markup there (``_MARKUP``,
    ``_LINKY``, ``_BLOCK``); a backslash-escaped ASCII punctuation character is always a
    literal one. GitHub links e-mail addresses after escapes are undone, unless the ``@``
    is in a node of its own, so each run of ``@`` is a code span, or stands next to one.
    """
    pieces = _code_spans(text)
    shown = []
    for number, (code, piece) in enumerate(pieces):
        if code:
            shown.append(piece.replace("|", "\\|") if cell else piece)
            continue
        escaped = _LINKY.sub(r"\\\1", _MARKUP.sub(r"\\\1", piece))
        if number == 0:
            escaped = _BLOCK.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", escaped)
        shown.append(
            _set_apart(escaped, after_code=number > 0, before_code=number < len(pieces) - 1)
        )
    return "".join(shown)


def _set_apart(escaped: str, *, after_code: bool, before_code: bool) -> str:
    """Each run of ``@`` in a node of its own: a code span, unless it already stands next
    to one (two code spans side by side would merge their fences)."""

    def code(at: re.Match[str]) -> str:
        beside = (at.start() == 0 and after_code) or (at.end() == len(escaped) and before_code)
        return at[0] if beside else f"`{at[0]}`"

    return _AT.sub(code, escaped)


def _code_spans(text: str) -> list[tuple[bool, str]]:
    """``text`` as alternating (code?, piece): plain, code, plain, ..., plain.

    Every code piece starts and ends with its backtick fence, as in ``text``; a plain
    piece may be empty, and holds only backticks that open no span."""
    runs = list(_TICKS.finditer(text))
    pieces: list[tuple[bool, str]] = []
    plain, at = 0, 0
    while at < len(runs):
        opener = runs[at]
        closer = next(
            (later for later in range(at + 1, len(runs)) if len(runs[later][0]) == len(opener[0])),
            None,
        )
        if closer is None:
            at += 1
            continue
        pieces += [
            (False, text[plain : opener.start()]),
            (True, text[opener.start() : runs[closer].end()]),
        ]
        plain, at = runs[closer].end(), closer + 1
    return [*pieces, (False, text[plain:])]


def _findings(findings: tuple[str, ...]) -> list[str]:
    """The first ``FINDINGS_SHOWN`` findings as list items, then how many more there are."""
    shown = [f"- {_inline(f)}" for f in findings[:FINDINGS_SHOWN]]
    if len(findings) > FINDINGS_SHOWN:
        shown.append(
            f"- … and {len(findings) - FINDINGS_SHOWN} more findings: fix the ones "
            "above first; report.json lists them all"
        )
    return shown


def _table_row(criterion: CriterionResult, review: HumanReview | None = None) -> str:
    lost = [_inline(check.id, QUOTE_LIMIT, cell=True) for check in criterion.checks if _lost(check)]
    result = "full marks" if _earned_all(criterion) else f"lost: {', '.join(lost) or 'points'}"
    if criterion.degraded:
        result += f"; degraded ({CONTRACT})"
    if review is not None:
        result += f"; reviewed: {points_text(review.final)}"
    elif criterion.review:
        result += "; marked for review"
    cells = (
        _inline(criterion.title, cell=True),
        points_text(criterion.points),
        points_text(criterion.max),
        result,
    )
    return "| " + " | ".join(cells) + " |"


def _criterion_section(criterion: CriterionResult, review: HumanReview | None = None) -> list[str]:
    lines = [
        f"## {_inline(criterion.title)}: "
        f"{points_text(criterion.points)} / {points_text(criterion.max)}",
        "",
    ]
    if review is not None:
        lines += [
            f"Reviewed by {_inline(review.by)} (ledger event {review.event}): "
            f"{points_text(review.final)} / {points_text(criterion.max)} stand "
            f"(automated {points_text(review.automated)}).",
            "",
        ]
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
    line = f"- {_inline(check.id, QUOTE_LIMIT)} ({score}){detail}"
    if check.divergence is not None:
        line += f"\n  - {_inline(diverged_text(check))}"
    return line


def diverged_text(check: CheckResult) -> str:
    """A failed judged check's verdict and first point of divergence, with both sides, on
    one line ("" for any other check)."""
    if check.divergence is None:
        return ""
    at = check.divergence
    return (
        f"verdict {check.verdict}; first divergence at {at.at}: expected "
        f"{at.expected}; observed {at.observed}"
    )


def _gradescope_test(criterion: CriterionResult, check: CheckResult, number: str) -> object:
    """One Gradescope test; its name and output are declared plain text, so only quoted."""
    output = _check_text(check)
    if _lost(check) and criterion.advice:
        output += _advice_text(criterion)
    if criterion.review:
        output += "\n\n" + PENDING
    return _test(
        criterion,
        f"{quote(criterion.title)}: {quote(check.id)}",
        number,
        (check.points, check.max, check.passed),
        output,
    )


def _test(
    criterion: CriterionResult,
    name: str,
    number: str,
    scored: tuple[Decimal, Decimal, bool],
    output: str,
) -> dict[str, object]:
    points, most, passed = scored
    return {
        "name": name,
        "name_format": "text",
        "number": number,
        "score": float(points),
        "max_score": float(most),
        "status": "passed" if passed else "failed",
        "output": output.strip(),
        "output_format": "text",
        "tags": [criterion.id],
        "visibility": "visible",
    }


def _check_text(check: CheckResult) -> str:
    """A check's detail as a test's plain-text output says it."""
    detail = quote(check.detail, TEXT_LIMIT)
    if check.degraded:
        return (
            f"Degraded ({CONTRACT}): not evaluated, because the rubric's contract is "
            f"incomplete here: {detail}"
        )
    if check.divergence is not None:
        return f"{detail}\n{quote(diverged_text(check), TEXT_LIMIT)}"
    return detail


def _advice_text(criterion: CriterionResult) -> str:
    return "\n\nWhat to do:\n" + "\n".join(f"- {quote(a, TEXT_LIMIT)}" for a in criterion.advice)


def review_document(review: HumanReview) -> dict[str, object]:
    """One entry of results.json's ``extra_data.review``; ``points`` null for a
    confirmation, as in the ledger's event."""
    return {
        "criterion": review.criterion,
        "automated": points_text(review.automated),
        "points": None if review.points is None else points_text(review.points),
        "by": review.by,
        "reason": review.reason,
        "event": review.event,
    }


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


def _final_lines(report: Report, reviews: Sequence[HumanReview], late: Late | None) -> list[str]:
    lines = [f"Late work: {_inline(late.cell())}.", ""] if late is not None else []
    deduction = late_deduction(report, reviews, late)
    if not reviews and not deduction:
        return lines
    final = report.total + sum((r.delta for r in reviews), Decimal(0)) - deduction
    after = " and".join(
        part
        for part, given in ((" human review", reviews), (" the late penalty", deduction))
        if given
    )
    return [
        *lines,
        f"**Final after{after}: {points_text(final)} / "
        f"{points_text(report.max)}** (automated {points_text(report.total)})",
        "",
    ]


def late_deduction(report: Report, reviews: Sequence[HumanReview], late: Late | None) -> Decimal:
    """The points the late penalty takes from the reviewed total: never more than it."""
    if late is None:
        return Decimal(0)
    reviewed = report.total + sum((r.delta for r in reviews), Decimal(0))
    return min(late.penalty, max(reviewed, Decimal(0)))


def _human_review_lines(report: Report, reviews: Sequence[HumanReview]) -> list[str]:
    """The "Human review" section: each current review, who made it and why."""
    if not reviews:
        return []
    lines = ["## Human review", ""]
    for review in reviews:
        _, criterion = _reviewed_criterion(report, review)
        verdict = "confirmed" if review.points is None else f"-> {points_text(review.points)}"
        lines.append(
            f"- {_inline(criterion.title)}: {points_text(review.automated)} {verdict} "
            f"by {_inline(review.by)} (ledger event {review.event}): "
            f"{_inline(review.reason)}"
        )
    return [*lines, ""]


def late_test(late: Late, deduction: Decimal, number: str) -> dict[str, object]:
    """The late penalty as Gradescope's last test: minus the points it takes, of none."""
    return {
        "name": "Late penalty",
        "name_format": "text",
        "number": number,
        "score": float(-deduction),
        "max_score": 0.0,
        "status": "failed",
        "output": late.cell(),
        "output_format": "text",
        "tags": ["late"],
        "visibility": "visible",
    }


def reviewed_test_name(title: str, by: str) -> str:
    """The name of a reviewed criterion's one Gradescope test: who judged it, at a glance."""
    return f"{quote(title)}: reviewed by {quote(by)}"


def _review_test(criterion: CriterionResult, review: HumanReview, number: str) -> object:
    """A reviewed criterion as one Gradescope test worth the reviewed points of its max, so
    Gradescope shows the points that stand; its output says who, when (the ledger event)
    and why, then what the automated checks found and gave."""
    what = (
        "confirmed the automated points"
        if review.points is None
        else f"changed the points from {points_text(review.automated)} to "
        f"{points_text(review.points)}"
    )
    lines = [
        f"Reviewed by {quote(review.by)} (ledger event {review.event}): {what}, so this "
        f"criterion scores {points_text(review.final)} / {points_text(criterion.max)}. "
        f"Reason: {quote(review.reason, TEXT_LIMIT)}",
        "",
        f"The automated checks gave {points_text(review.automated)} / "
        f"{points_text(criterion.max)}:",
    ]
    for check in criterion.checks:
        verdict = "passed" if not _lost(check) else "lost points"
        detail = f": {_check_text(check)}" if check.detail else ""
        lines.append(
            f"- {quote(check.id)}: {verdict}, {points_text(check.points)} / "
            f"{points_text(check.max)}{detail}"
        )
    output = "\n".join(lines)
    if review.final < criterion.max and criterion.advice:
        output += _advice_text(criterion)
    return _test(
        criterion,
        reviewed_test_name(criterion.title, review.by),
        number,
        (review.final, criterion.max, review.final >= criterion.max),
        output,
    )
