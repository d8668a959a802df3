"""report.md through a real CommonMark renderer: GitHub's own cmark-gfm (``cmarkgfm``).

Text in a report may come from the student, so each string is escaped once: what the
renderer shows is the string as written, backtick spans as code (the grader's advice sets
its commands so), and nothing a student writes opens a link, image, HTML tag, heading,
list, emphasis, strikethrough or table cell. Each page is rendered twice: as GitHub does
(tables, autolinks, strikethrough) and as plain CommonMark, what other renderers
(Gradescope's among them) agree on. Raw HTML is let through, so an injected tag shows.

It tests private helpers on purpose: ``grader._text``'s ``quote`` and its limits, and
``grader.outputs._render``'s ``_inline``.
"""

from __future__ import annotations

import re
from decimal import Decimal
from html.parser import HTMLParser

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader import CheckResult, CriterionResult, Report
from grader._text import QUOTE_LIMIT, TEXT_LIMIT, quote
from grader.outputs._render import _inline, inline_markdown, render_markdown

GFM = ("table", "autolink", "strikethrough")

# Pieces a student string is built from: each can open markup somewhere.
ATTACKS = (
    "`",
    "``",
    "```",
    "|",
    "<script>alert(1)</script>",
    "[x](http://e.example)",
    "![i](http://e.example/p.gif)",
    "@a.b",
    "x@a.b",
    "mailto:x@a.b",
    "www.x.y",
    "http://x.y",
    "<http://x.y>",
    "**",
    "__",
    "*",
    "_",
    "~~",
    "#",
    "# ",
    "- ",
    "+ ",
    "1. ",
    "2) ",
    "---",
    "===",
    "> ",
    "&amp;",
    "&#64;",
    "\\",
    "\\`",
    "[^1]",
    "$x$",
    " ",
    "a",
    "b.c",
    "7.50",
    ":",
    "!",
    "<",
    ">",
    "{",
    "}",
    "^",
    "=",
    "(",
    ")",
)
STUDENT = (
    st.lists(st.sampled_from(ATTACKS) | st.text(max_size=3), max_size=14)
    .map("".join)
    .filter(str.split)
)  # an empty list item is not one: the grader writes no empty text

# Tags report.md itself uses; a student string may add code spans, nothing else.
OWN = frozenset(
    {
        "h1",
        "h2",
        "p",
        "strong",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "ul",
        "li",
        "code",
        "hr",
    }
)


def rendered(markdown: str, *, gfm: bool = True) -> str:
    """HTML as GitHub (``gfm``) or plain CommonMark renders ``markdown``, raw HTML kept."""
    return str(
        cmarkgfm.markdown_to_html_with_extensions(
            markdown, options=Options.CMARK_OPT_UNSAFE, extensions=GFM if gfm else ()
        )
    )


class _Page(HTMLParser):
    """The tags of a page in order, and the text of each element of some tags."""

    def __init__(self, collect: tuple[str, ...] = ()) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.texts: dict[str, list[str]] = {tag: [] for tag in collect}
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in self.texts and tag not in self._open:
            self.texts[tag].append("")
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            self._open.remove(tag)

    def handle_data(self, data: str) -> None:
        for tag in self._open:
            self.texts[tag][-1] += data


def page(markup: str, *collect: str) -> _Page:
    parsed = _Page(collect)
    parsed.feed(markup)
    parsed.close()
    return parsed


def shown(line: str, *, gfm: bool = True) -> tuple[list[str], str]:
    """The tags and the text a renderer makes of one escaped line."""
    parsed = page(rendered(line, gfm=gfm), "p")
    return parsed.tags, "".join(parsed.texts["p"])


def as_written(text: str, limit: int = TEXT_LIMIT) -> str:
    """What ``text`` should read as once rendered: quoted, one line, and each backtick
    span as CommonMark shows code (fence dropped, one space stripped from each end when
    both ends have one and it is not all spaces). Independent of the renderer under test."""
    text = " ".join(quote(text, limit).split())
    runs = list(re.finditer(r"`+", text))
    out, plain, at = [], 0, 0
    while at < len(runs):
        fence = runs[at][0]
        ends = [later for later in range(at + 1, len(runs)) if runs[later][0] == fence]
        if not ends:
            at += 1
            continue
        inner = text[runs[at].end() : runs[ends[0]].start()]
        if inner.startswith(" ") and inner.endswith(" ") and inner.strip(" "):
            inner = inner[1:-1]
        out += [text[plain : runs[at].start()], inner]
        plain, at = runs[ends[0]].end(), ends[0] + 1
    return "".join([*out, text[plain:]])


def report_of(student: str, advice: str | None = None) -> Report:
    """A report whose submission, criterion title, a check's id and detail, advice and a
    finding are all ``student``."""
    checks = (
        CheckResult(student, False, Decimal("0.00"), Decimal("5.00"), student),
        CheckResult("fine", True, Decimal("5.00"), Decimal("5.00"), "ok"),
    )
    criterion = CriterionResult(
        "stretch_goal",
        student,
        Decimal("5.00"),
        Decimal("10.00"),
        checks,
        advice=(advice if advice is not None else student,),
    )
    return Report(
        submission=student,
        rubric_id="lab",
        rubric_version=1,
        rubric_sha256="ab" * 32,
        inputs={},
        criteria=(criterion,),
        findings=(student,),
    )


# -- commands the grader writes in backticks render as code ---------------------------------


@pytest.mark.parametrize("gfm", [True, False])
@pytest.mark.parametrize(
    "command",
    [
        "make record ARGS='--case refund-policy'",
        "make record ARGS='--rerecord --reason \"the model changed\"'",
        ".venv/bin/gradekit regression check --set sets/a.json",
        "make grade ARGS='--out grades/x|y'",
    ],
)
def test_a_command_in_backticks_renders_as_code_exactly(command: str, gfm: bool) -> None:
    advice = f"Record the case: `{command}`, then commit cassettes/refund-policy.json."
    tags, text = shown(_inline(advice), gfm=gfm)
    assert tags == ["p", "code"]
    assert page(rendered(_inline(advice), gfm=gfm), "code").texts["code"] == [command]
    assert text == advice.replace("`", "")


def test_the_report_shows_advice_commands_as_code_and_file_names_without_backslashes() -> None:
    command = "make record ARGS='--case refund-policy'"
    report = report_of(
        "refund-policy.json (CassetteMiss) escaped run() at 7.50",
        advice=f"record it with `{command}` and commit it",
    )
    markdown = render_markdown(report)
    assert f"- record it with `{command}` and commit it" in markdown.splitlines()
    assert "refund-policy\\.json (CassetteMiss) escaped run() at 7.50" in markdown
    parsed = page(rendered(markdown), "code", "li")
    assert command in parsed.texts["code"]
    assert "- refund-policy.json" not in "".join(parsed.texts["li"])
    assert "\\" not in "".join(parsed.texts["li"])


def test_a_pipe_in_a_code_span_in_the_table_stays_in_its_cell() -> None:
    report = report_of("`a|b` | c")
    markdown = render_markdown(report)
    parsed = page(rendered(markdown), "td")
    assert parsed.texts["td"][:4] == ["a|b | c", "5.00", "10.00", "lost: a|b | c"]


def test_inline_markdown_is_the_same_escaping_for_other_modules() -> None:
    text = "grading stopped: run `make grade ARGS='--jobs 1'` <b>"
    assert inline_markdown(text) == _inline(text)
    assert shown(inline_markdown(text)) == (["p", "code"], text.replace("`", ""))


# -- whatever the student writes opens nothing ----------------------------------------------


@settings(max_examples=400, deadline=None)
@given(STUDENT)
@example("[x](http://e.example) `code` | cell # h **b** www.x.y mail@a.b ~~s~~")
@example("`x`@a.b and a@`b`.c and `x`mail@a.b")
@example("1. one")
@example("- - -")
@example("a`b@c.d")
@example("x`` y `z` ``@q.r")
def test_a_student_line_renders_as_written_and_opens_no_markup(student: str) -> None:
    line = _inline(student)
    assert "\n" not in line
    for gfm in (True, False):
        tags, text = shown(line, gfm=gfm)
        assert set(tags) <= {"p", "code"}, (line, tags)
        assert text == as_written(student), line


@settings(max_examples=200, deadline=None)
@given(STUDENT)
@example("| a | b |\n|---|---|")
@example("`|` \\| `\\|`")
def test_a_student_report_has_only_its_own_structure(student: str) -> None:
    markdown = render_markdown(report_of(student))
    expected = render_markdown(report_of("plain"))
    for gfm in (True, False):
        own = [tag for tag in page(rendered(expected, gfm=gfm)).tags if tag != "code"]
        parsed = page(rendered(markdown, gfm=gfm), "td", "li", "h1", "h2")
        tags = [tag for tag in parsed.tags if tag != "code"]
        assert tags == own, markdown
        assert set(parsed.tags) <= OWN
        assert parsed.texts["h1"] == [f"Grade report: {as_written(student, QUOTE_LIMIT)}"]
        assert parsed.texts["h2"][0] == f"{as_written(student)}: 5.00 / 10.00"
        if gfm:  # one row of exactly four cells, the student's text in its own
            assert parsed.texts["td"] == [
                as_written(student),
                "5.00",
                "10.00",
                f"lost: {as_written(student, QUOTE_LIMIT)}",
            ]
        assert (
            f"{as_written(student, QUOTE_LIMIT)} (0.00 / 5.00): {as_written(student)}"
            in parsed.texts["li"]
        )
