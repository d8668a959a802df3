"""Scoring a submission's failure log (``FAILURES.md``): the ``written_summary`` criterion.

The format (docs/formats.md): ``# Failures``, then ``## <title>`` entries with bullets
``- Symptom: ...``, ``- Cause: ...`` and ``- Fix: ...`` or ``- Status: ...`` (a field may go
on over indented lines), and a ``## Boundaries`` section whose bullets name what the lab
cannot measure.

Sub-checks, with maxima from the rubric's points table:

- ``entries``: full points for two or more complete entries, half for one, none for zero.
  An entry is complete when Symptom, Cause and Fix-or-Status each hold at least
  ``MIN_FIELD`` characters and no placeholder. Incomplete entries beside two complete ones
  are named in the detail but cost nothing: an extra honest note must not lower a grade.
- ``boundaries``: a Boundaries section with at least one bullet that names something.
- ``no_placeholders``: no TODO, TBD, FIXME, lorem ipsum, free-standing "..." or
  ``<describe>``-style template text outside code; a file with no entry earns nothing
  here, since nothing was written to judge.

What counts is what a person reads, as GitHub shows the file: code spans, fenced blocks and
indented blocks (four columns past the margin, or past a bullet's text inside a list item,
after a blank line) are code, and a one-word token that is part of a path
(``fixtures/<case>.json``, ``lab/.../agent.py``, ``TODO.md``) names a file, not a gap.

A written summary is always marked for review by a person. Text from the log that a
detail or advice quotes (a title, a bullet, a placeholder) goes through ``quote``.
"""

from __future__ import annotations

import collections
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from types import MappingProxyType

from gradekit import UsageError
from grader._model import (
    BOUNDARIES,
    CENT,
    ENTRIES,
    NO_PLACEHOLDERS,
    CheckResult,
    CriterionResult,
)
from grader._text import quote
from grader.scoring._summary import Grounds, claims, repeats

__all__ = [
    "MIN_WORDS",
    "FailureEntry",
    "FailureLog",
    "Judged",
    "counted_entries",
    "find_placeholders",
    "judge_entries",
    "parse_failures",
    "repeated_entries",
    "score_written_summary",
]

_EXCERPT = 300  # characters of an entry's text its check shows
MIN_WORDS = 2  # words a Symptom, Cause or Fix needs to say something; a Status, one ("open")
_NOTHING = (
    "names nothing the grader can check: a case, a file of the submission, an "
    "error, a command, a recorded key or a number"
)
SUBCHECK_IDS = (ENTRIES, BOUNDARIES, NO_PLACEHOLDERS)
_REQUIRED = (("symptom",), ("cause",), ("fix", "status"))
_FIELD_LABEL = {("symptom",): "Symptom", ("cause",): "Cause", ("fix", "status"): "Fix or Status"}

_ATX = re.compile(r" {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-{2,})[ \t]*")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TITLES = frozenset({"failures", "failure log", "failure", "failures log"})
_FIELD_NAMES = frozenset({"symptom", "cause", "fix", "status"})
_FIELD_LINE = re.compile(
    r"[ \t]*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?[*_]{0,2}(symptom|cause|fix|status)[*_]{0,2}"
    r"[ \t]*:[*_]{0,2}[ \t]*(.*)",
    re.IGNORECASE,
)
_BULLET = re.compile(r" ?[-*+][ \t]+(.*)")
_FIELD = re.compile(r"[*_]*([A-Za-z][A-Za-z ]*?)[*_]*[ \t]*:[*_]*[ \t]*(.*)")
_OPTION = re.compile(r"--[\w-]+[ \t]*$")  # "--reason ...": a command's elided argument
_CALL = re.compile(r"\((?:\.\.\.|…)\)")  # "sorted(...)": a call's arguments left out
_FENCE = re.compile(r"[ \t]*(```|~~~)")
_ITEM = re.compile(r"[ \t]*(?:[-*+]|[0-9]{1,9}[.)])(?:[ \t]+|$)")
_PATH_BEFORE = re.compile(r"(?:/|\S\\)$")  # a bare "\<" is Markdown's escape, not a path
_PATH_AFTER = re.compile(r"[/\\]|\.[A-Za-z0-9]")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_HTML_TAGS = frozenset(
    (
        "a",
        "b",
        "br",
        "code",
        "del",
        "details",
        "em",
        "hr",
        "i",
        "img",
        "kbd",
        "p",
        "pre",
        "s",
        "small",
        "span",
        "strong",
        "sub",
        "summary",
        "sup",
        "u",
    )
)
_PLACEHOLDERS = (
    re.compile(r"\b(?:TODO|TBD|FIXME)\b"),
    re.compile(r"\blorem ipsum\b", re.IGNORECASE),
    re.compile(r"(?<![\w.])(?:\.\.\.|…)(?![\w.])"),
    re.compile(r"<[A-Za-z][A-Za-z0-9 _-]*>"),
)

_HOW_TO = (
    "each '## <what failed>' entry needs '- Symptom:', '- Cause:' and '- Fix:' (or "
    "'- Status:') lines, and names something the grader can check: a case, a file of the "
    "submission, an error, a command, a recorded key or a number"
)


@dataclass(frozen=True, slots=True)
class FailureEntry:
    """One ``## <title>`` section of the failure log other than Boundaries."""

    title: str
    line: int  # 1-based line of the heading
    fields: Mapping[str, str]  # lower-case field name -> its text, lines joined by a space
    text: str  # everything under the heading, as written


@dataclass(frozen=True, slots=True)
class FailureLog:
    """A parsed failure log: its entries in file order and its Boundaries bullets."""

    entries: tuple[FailureEntry, ...]
    boundaries: tuple[str, ...] | None  # None: no Boundaries section at all


def parse_failures(text: str) -> FailureLog:
    """Split a failure log into entries and the Boundaries bullets; never raises.

    A grading reads one log for its written summary and again for each stretch goal's
    write-up: the last few texts' parses are kept (the log is immutable, its fields
    read-only), so each is parsed once.
    """
    return _parsed(text)


@functools.lru_cache(maxsize=4)
def _parsed(text: str) -> FailureLog:
    lines = _without_comments(text).splitlines()
    code = _code(lines)
    entries: list[FailureEntry] = []
    boundaries: list[str] | None = None
    for title, line, start, end in _sections(lines, code):
        if title.lower().startswith("boundar"):
            boundaries = [*(boundaries or []), *_bullets(lines[start:end], code[start:end])]
        else:
            body = "\n".join(lines[start:end]).strip()
            entries.append(
                FailureEntry(
                    title=title,
                    line=line,
                    fields=MappingProxyType(_fields(lines[start:end], code[start:end])),
                    text=body,
                )
            )
    return FailureLog(
        entries=tuple(entries), boundaries=None if boundaries is None else tuple(boundaries)
    )


def _without_comments(text: str) -> str:
    """``text`` with its HTML comments blanked, line ends kept: a reader never sees them."""
    return _COMMENT.sub(lambda m: "\n" * m[0].count("\n"), text)


def find_placeholders(text: str) -> list[tuple[int, str]]:
    """Template text outside code, as (line, what) in reading order."""
    lines = text.splitlines()
    found = []
    for number, (line, code) in enumerate(zip(lines, _code(lines), strict=True), 1):
        if code:
            continue
        prose = _CODE_SPAN.sub(" ", line)
        hits = [m for pattern in _PLACEHOLDERS for m in pattern.finditer(prose)]
        for match in sorted(hits, key=lambda m: m.start()):
            if match[0].startswith("<") and match[0][1:-1].lower() in _HTML_TAGS:
                continue
            if _in_path(prose, match) or (
                match[0] in ("...", "…")
                and (
                    _OPTION.search(prose, 0, match.start())
                    or (
                        _CALL.match(prose, max(match.start() - 1, 0))
                        and re.search(r"\w$", prose[: match.start() - 1])
                    )
                )
            ):
                continue
            found.append((number, match[0]))
    return found


def _in_path(prose: str, match: re.Match[str]) -> bool:
    """Whether a one-word token is part of a path: right after ``/`` (or a ``\\`` that
    follows a character), or right before ``/``, ``\\`` or an extension such as ``.json``.
    ``<describe the fix>`` has spaces and ``Fix: <describe>.`` ends a sentence: still gaps."""
    if " " in match[0]:
        return False
    return bool(
        _PATH_BEFORE.search(prose, 0, match.start()) or _PATH_AFTER.match(prose, match.end())
    )


def score_written_summary(
    text: str | None,
    *,
    points: Mapping[str, Decimal],
    weight: Decimal,
    criterion_id: str = "written_summary",
    title: str = "Written summary",
    filename: str = "FAILURES.md",
    grounds: Grounds | None = None,
) -> CriterionResult:
    """Score a failure log; ``text=None`` means the file is missing or unreadable.
    ``grounds``: what its entries' claims are checked against (``Grounds``; None: the
    kit's example only, no case, file or key of a submission)."""
    if set(points) != set(SUBCHECK_IDS) or sum(points.values(), Decimal(0)) != weight:
        raise UsageError(
            f"written_summary needs points for {', '.join(SUBCHECK_IDS)} summing to {weight}, "
            f"got {dict(sorted(points.items()))}; pass the rubric criterion's points"
        )
    if text is None:
        scored = _missing(points, filename)
    else:
        log = parse_failures(text)
        scored = [
            _entries(log, points[ENTRIES], grounds or Grounds()),
            _boundaries(log, points[BOUNDARIES]),
            _no_placeholders(log, find_placeholders(text), points[NO_PLACEHOLDERS], filename),
        ]
    checks = tuple(check for check, _ in scored) + (
        _each_entry(parse_failures(text), grounds or Grounds()) if text is not None else ()
    )
    return CriterionResult(
        id=criterion_id,
        title=title,
        points=sum((c.points for c in checks), Decimal(0)),
        max=weight,
        checks=checks,
        review=True,
        advice=tuple(advice for _, advice in scored if advice),
    )


Scored = tuple[CheckResult, str]


def _missing(points: Mapping[str, Decimal], filename: str) -> list[Scored]:
    detail = f"{filename} is missing or could not be read as UTF-8 text"
    advice = (
        f"Add {filename} at the root of your submission: '# Failures', at least two "
        "'## <what failed>' entries with '- Symptom:', '- Cause:' and '- Fix:' (or "
        "'- Status:') lines, and a '## Boundaries' section with '- What this lab cannot "
        "measure: ...'."
    )
    checks = [
        CheckResult(name, False, Decimal("0.00"), points[name], detail) for name in SUBCHECK_IDS
    ]
    return [(checks[0], advice), *((check, "") for check in checks[1:])]


@dataclass(frozen=True, slots=True)
class Judged:
    """One entry as the written summary judged it: counted when ``problems`` is empty."""

    entry: FailureEntry
    problems: tuple[str, ...]
    names: str = ""  # the first thing it names that holds, for the detail

    @property
    def where(self) -> str:
        return f"'{quote(self.entry.title)}' (line {self.entry.line})"


def judge_entries(log: FailureLog, grounds: Grounds) -> list[Judged]:
    """Each entry of ``log``, judged: its fields there and filled in, not a repeat of the
    hand-out's example or of an earlier counted entry, naming something that holds and
    nothing that does not (``grader.scoring._summary``).

    A grading judges one log for its written summary, its findings and each stretch goal's
    write-up: the last few judgements are kept, by the log and grounds they were of."""
    for kept_log, kept_grounds, judged in _JUDGED:
        if kept_log is log and kept_grounds is grounds:
            return list(judged)
    made = _judge(log, grounds)
    _JUDGED.append((log, grounds, tuple(made)))
    return made


_JUDGED: collections.deque[tuple[FailureLog, Grounds, tuple[Judged, ...]]] = collections.deque(
    maxlen=4
)


def _judge(log: FailureLog, grounds: Grounds) -> list[Judged]:
    examples = [
        ("the hand-out's example", _said(entry))
        for text in grounds.examples
        for entry in parse_failures(text).entries
    ]
    judged: list[Judged] = []
    for entry in log.entries:
        problems = _entry_problems(entry)
        names = ""
        if not problems:
            said = _said(entry)
            earlier = [(j.where, _said(j.entry)) for j in judged if not j.problems]
            same = repeats(said, [*examples, *earlier])
            held, broken = claims(said, grounds)
            if same:
                problems = [f"repeats {same}, so it is not counted; a person reviews both"]
            elif broken:
                problems = [f"names {quote(broken[0])}"]
            elif not held:
                problems = [_NOTHING]
            else:
                names = quote(held[0])
        judged.append(Judged(entry, tuple(problems), names))
    return judged


def repeated_entries(
    text: str | None, grounds: Grounds, filename: str = "FAILURES.md"
) -> list[str]:
    """Each entry of a failure log that repeats the hand-out's example or another of its
    entries, in words a finding shows: it asks a person to look, and moves no point."""
    if text is None:
        return []
    return [
        f"{filename} {j.where} {problem.partition(',')[0]}"
        for j in judge_entries(parse_failures(text), grounds)
        for problem in j.problems
        if problem.startswith("repeats")
    ]


def counted_entries(text: str | None, grounds: Grounds) -> list[FailureEntry]:
    """The entries of a failure log that count (``judge_entries``)."""
    if text is None:
        return []
    return [j.entry for j in judge_entries(parse_failures(text), grounds) if not j.problems]


def _entries(log: FailureLog, most: Decimal, grounds: Grounds) -> Scored:
    judged = judge_entries(log, grounds)
    counted = [j for j in judged if not j.problems]
    faults = [f"{j.where}: {', '.join(j.problems)}" for j in judged if j.problems]
    complete = len(counted)
    earned = (most * min(complete, 2) / 2).quantize(CENT, rounding=ROUND_DOWN)
    named = "; ".join(f"{j.where} names {j.names}" for j in counted[:4])
    counted_text = f"{complete} complete {'entry' if complete == 1 else 'entries'}"
    named_text = f" ({named})" if named else ""
    not_counted = f"; not counted: {'; '.join(faults)}" if faults else ""
    if complete >= 2:
        return CheckResult(
            ENTRIES, True, earned, most, f"{counted_text}{named_text}{not_counted}"
        ), ""
    detail = f"{counted_text} of the 2 needed ({_HOW_TO}){named_text}{not_counted}"
    advice = f"Write at least two complete failure entries: {_HOW_TO}."
    if faults:
        advice += f" Complete these: {'; '.join(faults)}."
    return CheckResult(ENTRIES, False, earned, most, detail), advice


def _each_entry(log: FailureLog, grounds: Grounds) -> tuple[CheckResult, ...]:
    """A check per entry, worth nothing, for the person who reviews the summary: what the
    grader found and what the entry says. An entry that repeats the hand-out's example or
    another entry is not passed, so that confirming in bulk leaves it for a person."""
    return tuple(
        CheckResult(
            f"entry {number}",
            not any(p.startswith("repeats") for p in j.problems),
            Decimal("0.00"),
            Decimal("0.00"),
            f"{'counts' if not j.problems else 'not counted: ' + ', '.join(j.problems)}"
            f"; {j.where}: {quote(' '.join(j.entry.text.split()), _EXCERPT)}",
        )
        for number, j in enumerate(judge_entries(log, grounds), 1)
    )


def _said(entry: FailureEntry) -> str:
    """What an entry says: its title and its fields' text."""
    return "\n".join([entry.title, *entry.fields.values()])


def _entry_problems(entry: FailureEntry) -> list[str]:
    problems = []
    for names in _REQUIRED:
        label = _FIELD_LABEL[names]
        value = " ".join(entry.fields[n] for n in names if n in entry.fields).strip()
        least = 1 if "status" in entry.fields and names == ("fix", "status") else MIN_WORDS
        if not value:
            problems.append(f"{label} is missing")
        elif find_placeholders(value):
            problems.append(f"{label} is template text ({quote(find_placeholders(value)[0][1])})")
        elif len(value.split()) < least:
            problems.append(f"{label} says nothing ({quote(value)!r}): say what happened")
    return problems


def _boundaries(log: FailureLog, most: Decimal) -> Scored:
    named = [b for b in log.boundaries or () if _names_something(b)]
    if named:
        detail = f"the Boundaries section names a limit: '{quote(named[0])}'"
        return CheckResult(BOUNDARIES, True, most, most, detail), ""
    if log.boundaries is None:
        detail = "no '## Boundaries' section"
    else:
        detail = "the '## Boundaries' section has no bullet naming something"
    advice = (
        "Add a '## Boundaries' section with a bullet such as '- What this lab cannot "
        "measure: <the things a replayed cassette cannot tell you>' filled in with real ones."
    )
    return CheckResult(BOUNDARIES, False, Decimal("0.00"), most, detail), advice


def _names_something(bullet: str) -> bool:
    field = _FIELD.fullmatch(bullet)
    named = field[2] if field else bullet
    return bool(re.search(r"[^\W\d_]{3,}", named)) and not find_placeholders(named)


def _no_placeholders(
    log: FailureLog, found: Sequence[tuple[int, str]], most: Decimal, filename: str
) -> Scored:
    if not log.entries:
        detail = f"{filename} has no '## ' entry yet, so there is nothing to credit"
        advice = "Write your failure entries; this part is earned by finished text."
        return CheckResult(NO_PLACEHOLDERS, False, Decimal("0.00"), most, detail), advice
    if not found:
        detail = "no template text (TODO, TBD, FIXME, '...', lorem ipsum, <describe>)"
        return CheckResult(NO_PLACEHOLDERS, True, most, most, detail), ""
    listed = ", ".join(f"line {line}: {quote(what)!r}" for line, what in found)
    detail = f"template text left in: {listed}"
    advice = (
        "Replace every placeholder with what actually happened (quote real output in "
        "`backticks` if it contains '...')."
    )
    return CheckResult(NO_PLACEHOLDERS, False, Decimal("0.00"), most, detail), advice


def _code(lines: Sequence[str]) -> list[bool]:
    """Which lines a reader sees as code: fenced blocks and indented ones."""
    fenced = _fenced(lines)
    return [f or i for f, i in zip(fenced, _indented_code(lines, fenced), strict=True)]


def _indented_code(lines: Sequence[str], fenced: Sequence[bool]) -> list[bool]:
    """Indented code blocks as CommonMark (and so GitHub) reads them: after a blank line,
    four columns past the margin, where inside a list item the margin is where the item's
    text starts. So a bullet's text continued four spaces in stays prose, as it renders."""
    marks: list[bool] = []
    margins: list[int] = []  # the text columns of the list items the line may be inside
    may_open = True  # a code block may start here: at the top, after a blank line or code
    for line, fence in zip(lines, fenced, strict=True):
        expanded = line.expandtabs(4)
        indent = len(expanded) - len(expanded.lstrip())
        blank = not line.strip()
        code = not (fence or blank) and may_open and indent >= (margins or [0])[-1] + 4
        marks.append(code)
        if not (fence or blank or code):
            item = _ITEM.match(expanded)
            if item or may_open or line.startswith("#"):  # not a lazy continuation line
                margins = [m for m in margins if m <= indent]
            if item:
                margins.append(item.end())
        may_open = not fence and (blank or code)
    return marks


def _fenced(lines: Sequence[str]) -> list[bool]:
    """Which lines are fenced code (the fences included)."""
    inside, marks = "", []
    for line in lines:
        fence = _FENCE.match(line)
        if fence and (not inside or fence[1] == inside):
            marks.append(True)
            inside = "" if inside else fence[1]
        else:
            marks.append(bool(inside))
    return marks


def _headings(lines: Sequence[str], code: Sequence[bool]) -> list[tuple[int, int, str]]:
    """Every heading a reader sees, as (line index, level, title): ``#`` to ``######``
    (up to three spaces in), and a line underlined with ``===`` (1) or ``---`` (2)."""
    found = []
    for number, line in enumerate(lines):
        if code[number]:
            continue
        atx = _ATX.fullmatch(line)
        if atx:
            found.append((number, len(atx[1]), atx[2].strip()))
        elif (
            number + 1 < len(lines)
            and not code[number + 1]
            and line.strip()
            and (under := _SETEXT.fullmatch(lines[number + 1]))
            and not _ITEM.match(line)
            and not _FIELD_LINE.fullmatch(line)
        ):
            found.append((number + 1, 1 if under[1].startswith("=") else 2, line.strip()))
    return found


def _plain(title: str) -> str:
    return re.sub(r"[^a-z ]", "", title.lower()).strip()


def _sections(lines: Sequence[str], code: Sequence[bool]) -> list[tuple[str, int, int, int]]:
    """Each entry or Boundaries section as (title, its heading's line, first body line index,
    end index): the
    headings of the log's entry level (its shallowest heading other than a title such as
    ``# Failures`` and a field's own, ``### Symptom``); deeper headings are inside one."""
    headings = [
        (number, level, title)
        for number, level, title in _headings(lines, code)
        if _plain(title) not in _TITLES and _plain(title) not in _FIELD_NAMES
    ]
    if len(headings) > 1 and headings[0][1] < min(level for _, level, _ in headings[1:]):
        headings = headings[1:]  # the log's own title, over the entries: "What broke"
    if not headings:
        return []
    level = min(level for _, level, _ in headings)
    starts = [(title, number) for number, depth, title in headings if depth <= level]
    ends = [number - _underlined(lines, number) for _, number in starts[1:]] + [len(lines)]
    return [
        (title, start + 1 - _underlined(lines, start), start + 1, end)
        for (title, start), end in zip(starts, ends, strict=True)
    ]


def _underlined(lines: Sequence[str], number: int) -> int:
    """1 where the heading at ``number`` is an underline (its title is the line before)."""
    return int(bool(_SETEXT.fullmatch(lines[number])) and number > 0)


def _bullets(lines: Sequence[str], fenced: Sequence[bool]) -> list[str]:
    """Top-level bullets with their continuation lines joined by one space; a line of code
    joins as a code span, so a field's code is code to ``find_placeholders`` too."""
    bullets: list[list[str]] = []
    state = "none"  # "item": just read bullet text; "gap": a blank line inside a bullet
    for line, code in zip(lines, fenced, strict=True):
        indented = line[:1].isspace()
        bullet = None if code else _BULLET.fullmatch(line)
        if bullet:
            bullets.append([bullet[1].strip()])
            state = "item"
        elif not line.strip():
            state = "gap" if state != "none" else "none"
        elif (state == "item" and (indented or not (code or line.startswith("#")))) or (
            state == "gap" and indented
        ):
            bullets[-1].append(_as_code_span(line.strip()) if code else line.strip())
            state = "item"
        else:
            state = "none"
    return [" ".join(parts).strip() for parts in bullets]


def _fields(lines: Sequence[str], code: Sequence[bool]) -> dict[str, str]:
    """An entry's Symptom, Cause, Fix and Status, as a reader finds them: on a line of their
    own, bulleted, numbered or not, the label bold or not (``**Cause:**``), or as a heading
    (``### Fix``) over its paragraph; a field goes on over the lines after it up to a
    blank line (an indented line after one still belongs), another field or a heading."""
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    gap = False
    for line, is_code in zip(lines, code, strict=True):
        field = None if is_code else _FIELD_LINE.fullmatch(line)
        found = [] if is_code else _headings([line, ""], [False, False])
        heading = _plain(found[0][2]) if found else None
        if field or heading in _FIELD_NAMES:
            name = (field[1] if field else heading or "").lower()
            current = fields.setdefault(name, [])
            current.append(field[2].strip() if field else "")
            gap = False
        elif heading is not None or current is None:
            current = None
        elif not line.strip():
            gap = True
        elif gap and not line[:1].isspace() and any(current):
            current, gap = None, False
        else:
            text = _BULLET.fullmatch(line)
            current.append(
                _as_code_span(line.strip()) if is_code else (text[1] if text else line).strip()
            )
            gap = False
    return {
        name: " ".join(part for part in parts if part).strip() for name, parts in fields.items()
    }


def _as_code_span(text: str) -> str:
    """``text`` as one Markdown code span, delimited by a longer run of backticks than any
    it holds (a fence line too, so its backticks stay inside)."""
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{ticks} {text} {ticks}"
