"""The students' README: ``handout/README.md`` with its criteria line replaced by a table of
the rubric's criteria, rendered by GitHub's own CommonMark renderer (``cmarkgfm``) to read
the table as a student sees it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from gradekit import PRESETS, UsageError
from grader.handout import CRITERIA_LINE, student_readme
from grader.rubric import KIT_RUBRIC, Rubric, load_rubric, parse_rubric
from grader.scoring import STRETCH_GOALS

REFERENCE = Path(__file__).resolve().parents[3]
SOURCE = (REFERENCE / "handout" / "README.md").read_text("utf-8")
RUBRIC = load_rubric(KIT_RUBRIC)
# Words of the instructor's material: none of them belongs in a student's README.
INSTRUCTOR_WORDS = (
    "reference solution",
    "reference lab",
    "signing",
    "signature",
    "signed",
    "roster",
    "ledger",
    "regression set",
    "scores 100",
    "100.00",
    "draw key",
    "gradescope build",
    "instructor",
    "solution region",
    "begin solution",
    "answer key",
)


class _Tables(HTMLParser):
    """The rows of every table of a page: each row its cells' text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table_rows(markdown: str, header: str = "Criterion") -> list[list[str]]:
    """The rows (header first) of the table whose first header cell is ``header``, as
    GitHub renders ``markdown``."""
    html = cmarkgfm.markdown_to_html_with_extensions(
        markdown, options=Options.CMARK_OPT_UNSAFE, extensions=("table", "autolink")
    )
    parser = _Tables()
    parser.feed(html)
    start = next(n for n, row in enumerate(parser.rows) if row[:1] == [header])
    rows = [parser.rows[start]]
    for row in parser.rows[start + 1 :]:
        if len(row) != len(rows[0]):
            break
        rows.append(row)
    return rows


def test_the_table_lists_every_criterion_of_the_default_rubric_with_its_weight() -> None:
    readme = student_readme(SOURCE, RUBRIC)
    assert CRITERIA_LINE not in readme
    assert table_rows(readme) == [
        ["Criterion", "Points", "Full marks need", "Typical loss"],
        [
            "Contract stability",
            "30",
            "The same score under two providers",
            "Passes only on the model it happened to use",
        ],
        [
            "Loud failure",
            "25 (own_replay 5)",
            "CassetteMiss propagates and the CLI exits non-zero",
            "Returns an empty string and looks like success",
        ],
        [
            "Tracing",
            "20",
            "Every call traced with key, provider and latency",
            "Only the final answer is logged",
        ],
        [
            "Written summary",
            "15 (entries 6, boundaries 4, no_placeholders 5)",
            "An honest write-up of what failed and why",
            "Only says that it works",
        ],
        [
            "Stretch goal",
            "10 (evidence 6, write_up 4)",
            "One stretch goal finished, with the failure it found written up",
            "Three started, none finished",
        ],
        ["Total", "100", "", ""],
    ]
    # the table sits where the line was: under "What is graded", before the next heading
    graded = readme.split("## What is graded\n", 1)[1].split("\n## ", 1)[0]
    assert "| Contract stability | 30 |" in graded


def test_the_table_follows_a_custom_rubric_cell_for_cell() -> None:
    """Other criteria, other weights, fractional points, and rubric text holding a pipe,
    an escaped pipe and a line break: each criterion one row, each text one cell."""
    text = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
    text = (
        text.split("[[criterion]]", 1)[0]
        + '''
[[criterion]]
id = "answers"
title = "Answers | sources"
weight = 55
check = "contract_stability"
full = """Every answer cites a source
 (a | b)"""
typical_loss = "Cites \\\\| nothing"

[[criterion]]
id = "misses"
title = "Loud misses"
weight = 45
check = "loud_failure"
full = "A miss escapes"
typical_loss = "A miss returns None"
[criterion.points]
own_replay = 2.5
'''
    )
    rubric = parse_rubric(text.encode(), source="custom.toml")
    rows = table_rows(student_readme(SOURCE, rubric))
    assert rows[1:] == [
        ["Answers | sources", "55", "Every answer cites a source (a | b)", "Cites | nothing"],
        ["Loud misses", "45 (own_replay 2.50)", "A miss escapes", "A miss returns None"],
        ["Total", "100", "", ""],
    ]
    assert {row[0] for row in rows} >= {c.title for c in rubric.criteria}


def test_the_readme_holds_no_instructor_material() -> None:
    readme = student_readme(SOURCE, RUBRIC).lower()
    found = [word for word in INSTRUCTOR_WORDS if word in readme]
    assert found == []


def test_the_readme_is_short() -> None:
    readme = student_readme(SOURCE, RUBRIC)
    assert len(readme.splitlines()) <= 200
    assert readme.endswith("\n") and not readme.endswith("\n\n")


def test_a_source_without_the_criteria_line_is_refused_with_the_fix() -> None:
    source = SOURCE.replace(CRITERIA_LINE + "\n", "")
    with pytest.raises(UsageError) as caught:
        student_readme(source, RUBRIC, name="handout/README.md")
    assert str(caught.value) == (
        "handout/README.md has no line <!-- gradekit:criteria -->: add it, on a line of its "
        "own, where the table of the rubric's criteria goes (under a heading such as "
        "'## What is graded')"
    )
    # inside other text, the line does not count: it must be alone on its line
    with pytest.raises(UsageError, match="has no line"):
        student_readme(f"# Lab\n\nsee {CRITERIA_LINE} here\n", RUBRIC)


def test_the_criteria_line_twice_is_refused_naming_both_lines() -> None:
    with pytest.raises(UsageError) as caught:
        student_readme(f"# Lab\n{CRITERIA_LINE}\n\n  {CRITERIA_LINE}  \n", RUBRIC)
    assert "2 times (lines 2, 4): keep one" in str(caught.value)


def test_only_the_line_changes_and_its_line_ending_is_kept() -> None:
    source = f"# Lab\r\n\r\n{CRITERIA_LINE}\r\n\r\nAfter.\r\n"
    readme = student_readme(source, RUBRIC)
    before, after = readme.split("| Criterion |", 1)
    assert before == "# Lab\r\n\r\n"
    assert after.endswith("| **Total** | **100** | | |\r\n\r\nAfter.\r\n")
    assert "\n" not in readme.replace("\r\n", "")  # every line ends the same way


# -- what the README names is what the kit has ----------------------------------------------


def _prose(readme: str) -> str:
    return " ".join(readme.split())


def test_every_make_target_the_readme_names_is_one_of_the_makefile() -> None:
    targets = set(re.findall(r"^([a-z-]+):", (REFERENCE / "Makefile").read_text("utf-8"), re.M))
    named = set(re.findall(r"\bmake ([a-z-]+)", SOURCE))
    assert named == {"local-model", "record", "check", "grade", "test"}
    assert named <= targets


def test_every_preset_and_stretch_goal_is_named() -> None:
    """The with-a-key table names each GRADEKIT_PROVIDER value, and the stretch goals are
    every goal the grader knows: the README cannot drift from the kit."""
    presets = set(re.findall(r"^\| `([a-z-]+)` \|", SOURCE, re.M))
    assert presets == set(PRESETS)
    goals = set(re.findall(r"^  - `([a-z-]+)`:", SOURCE, re.M))
    assert goals == set(STRETCH_GOALS)


def test_the_failure_log_rules_are_the_graders() -> None:
    prose = _prose(SOURCE)
    assert "naming something the grader can check" in prose
    assert "repeats the example below, earns nothing" in prose
    for bullet in ("`- Symptom:`", "`- Cause:`", "`- Fix:`", "`- Status: open`", "`## Boundaries`"):
        assert bullet in prose


def test_every_kit_path_the_readme_names_exists() -> None:
    """Paths the hand-out has from the kit; ``lab/replay.py`` is named only as a maybe, and
    the recordings' folders, ``grades/`` and the change log are the student's to make."""
    named = set(re.findall(r"`((?:lab|docs|rubric)/[\w./-]*)`", SOURCE))
    assert {
        "lab/agent.py",
        "lab/tools.py",
        "rubric/bootcamp.toml",
        "docs/formats.md",
        "lab/refunds/regression.py",
    } <= named
    missing = [
        path for path in sorted(named - {"lab/replay.py"}) if not (REFERENCE / path).exists()
    ]
    assert missing == []


def test_the_rendered_readme_renders_every_heading_and_no_stray_marker() -> None:
    readme = student_readme(SOURCE, RUBRIC)
    html = cmarkgfm.markdown_to_html_with_extensions(
        readme, options=Options.CMARK_OPT_UNSAFE, extensions=("table",)
    )
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings == [
        "What to build",
        "The loop: record, check, submit",
        "Recording without a key",
        "Recording with a key",
        "An agent on the official SDKs",
        "What is graded",
        "FAILURES.md",
        "Where things are",
    ]
    assert "<!--" not in html


def _rubric_of(criteria: int) -> Rubric:
    """A rubric of ``criteria`` criteria of equal weight, each with long texts."""
    text = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8").split("[[criterion]]")[0]
    for n in range(criteria):
        text += (
            f'\n[[criterion]]\nid = "c{n}"\ntitle = "Criterion {n}"\n'
            f"weight = {100 // criteria + (100 % criteria if n == 0 else 0)}\n"
            f'check = "tracing"\nfull = "{"full marks " * 20}"\n'
            f'typical_loss = "{"a loss " * 20}"\n'
        )
    return parse_rubric(text.encode(), source="many.toml")


def test_a_rubric_of_many_criteria_adds_one_line_each() -> None:
    base = len(student_readme(SOURCE, _rubric_of(1)).splitlines())
    assert len(student_readme(SOURCE, _rubric_of(5)).splitlines()) == base + 4


def test_the_readmes_state_the_labs_boundaries_and_the_quota_warning() -> None:
    """The bootcamp article's stated boundaries: a grading rig, not a production evaluation,
    and a free tier's quota checked on the day of recording."""
    student = " ".join(student_readme(SOURCE, RUBRIC).split())
    kit = " ".join((REFERENCE / "README.md").read_text("utf-8").split())
    for text in (student, kit):
        assert "not a production evaluation" in text or "not an evaluation platform" in text
        assert "quota" in text and "on the day you record" in text
