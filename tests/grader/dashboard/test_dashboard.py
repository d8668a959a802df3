"""gradekit dashboard, without a browser: the static site against what it is built from.

One cohort per session (``cohort_site``, shared with test_dashboard_browser.py): the
reference lab and a handful of its bad copies graded with the short rubric, one folder that
is no submission at all, and one submission whose FAILURES.md and trace records carry HTML
and Markdown. Then history: one submission's FAILURES.md is fixed and the cohort graded
again (its grade changes), another's is touched (its grade does not), and the baseline's
written summary is reviewed. Every number on the pages is checked against the gradebook,
the reports and calls.json, computed here independently of grader.dashboard._build*.

It takes ``FLAGGED`` from ``grader._text`` on purpose: the words a flagged finding starts
with, as the pages must show them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from decimal import ROUND_HALF_UP, Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from gradekit import UsageError
from grader._text import FLAGGED
from grader.cli import main
from grader.outputs import REPORTED, GradebookRow, gradebook_csv, read_gradebook
from tests.submissions import (
    BASELINE,
    CASES,
    REFERENCE,
    VARIANTS,
    Context,
    _on_case,
    make_submission,
    short_rubric,
)

pytestmark = pytest.mark.slow

CENT = Decimal("0.01")
FULL = "full marks"
VARIANT_NAMES = (
    "connects",
    "hangs",
    "label_in_prompt",
    "misses_cassette",
    "no_manifest",
    "swallow_miss",
    "template_failures",
    "untraced",
)
INJECTED = "html & md"  # not a safe file name: its page is html---md-<8 hex>.html
UNGRADABLE = "not_a_submission"  # a folder without pyproject.toml
CHANGED = "template_failures"  # its FAILURES.md is fixed before the second grading
TOUCHED = "untraced"  # its FAILURES.md gains a newline: an input changes, the grade does not
REVIEWER = "kim"

SCRIPT_TITLE = "<script>window.__pwned=1</script>"
IMG_BOUNDARY = '<img src=x onerror="window.__pwned=2">'
MARKDOWN = "**bold** [link](javascript:alert(1))"
TRACE_ERROR = "<script>window.__pwned=3</script> **bold**"
TRACE_KEY = '<img src=x onerror="window.__pwned=4">'
REVIEW_REASON = "entries 3 and 4 repeat <script>window.__pwned=5</script>"
INJECTED_TEXTS = (SCRIPT_TITLE, IMG_BOUNDARY, MARKDOWN, TRACE_ERROR, TRACE_KEY)

INJECTED_FAILURES = f"""\
# Failures

## A trailing space made a new prompt
- Symptom: the replay raised CassetteMiss on the first prompt of refund-policy.
- Cause: the prompt kept a trailing space, so its key was never in the cassette.
- Fix: the agent strips every prompt before it sends it; the case was re-recorded.

## The trace file stayed empty after a crash
- Symptom: a case that crashed left no trace records at all in its trace file.
- Cause: the records were kept in memory and written only when run() returned.
- Fix: each record is appended to the trace file as soon as its call returns.

## {SCRIPT_TITLE} {MARKDOWN}
- Symptom: {MARKDOWN}

## Boundaries
- What this lab cannot measure: {IMG_BOUNDARY} answer quality, {MARKDOWN}
"""

# At the start of refund-policy the agent writes a trace record of its own: its key and
# its error are the agent's text, and the page shows both beside the case's first call.
_BOGUS_RECORD = {
    "key": TRACE_KEY,
    "provider": "me",
    "latency_ms": 0,
    "ok": False,
    "error": TRACE_ERROR,
}
_BOGUS_TRACE = f"""\
import json as _json, os as _os
with open(_os.environ["GRADEKIT_TRACE"], "a", encoding="utf-8") as _trace:
    _trace.write(_json.dumps({_BOGUS_RECORD!r}) + "\\n")
"""


# -- the session's cohort ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CohortSite:
    """The graded cohort and the dashboard built from it."""

    root: Path
    submissions: Path
    grades: Path
    site: Path
    rubric: Path
    first_grade: int  # the exit codes of the two gradings
    second_grade: int


_BUILT: dict[str, CohortSite] = {}


def cohort_site(tmp_path_factory: pytest.TempPathFactory) -> CohortSite:
    """The session's cohort and its site, graded and built once for every test file."""
    if "cohort" not in _BUILT:
        _BUILT["cohort"] = _build(tmp_path_factory.mktemp("dashboard"))
    return _BUILT["cohort"]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> CohortSite:
    return cohort_site(tmp_path_factory)


def _build(root: Path) -> CohortSite:
    submissions, grades, site = root / "submissions", root / "grades", root / "site"
    rubric = short_rubric(root)
    grade = [
        "grade",
        str(submissions),
        "--out",
        str(grades),
        "--rubric",
        str(rubric),
        "--jobs",
        "2",
        "--quiet",
    ]
    with socket.create_server(("127.0.0.1", 0)) as listener:
        context = Context(
            listener, grades, "sk-gradekit-" + secrets.token_hex(16), root / "spawned" / "marker"
        )
        context.marker.parent.mkdir()
        make_submission(submissions / BASELINE)
        for name in VARIANT_NAMES:
            VARIANTS[name].mutate(make_submission(submissions / name), context)
        injected = make_submission(submissions / INJECTED)
        (injected / "FAILURES.md").write_text(INJECTED_FAILURES, encoding="utf-8")
        _on_case(injected, "refund-policy", _BOGUS_TRACE, imports="")
        (submissions / UNGRADABLE).mkdir()
        (submissions / UNGRADABLE / "README.md").write_text("# not a lab\n", encoding="utf-8")
        first = main(grade)

        changed = submissions / CHANGED / "FAILURES.md"
        changed.write_text((REFERENCE / "FAILURES.md").read_text("utf-8"), encoding="utf-8")
        touched = submissions / TOUCHED / "FAILURES.md"
        touched.write_text(touched.read_text("utf-8") + "\n", encoding="utf-8")
        assert (
            main(
                [
                    "review",
                    BASELINE,
                    "--criterion",
                    "written_summary",
                    "--points",
                    "12.00",
                    "--by",
                    REVIEWER,
                    "--reason",
                    REVIEW_REASON,
                    "--out",
                    str(grades),
                ]
            )
            == 0
        )
        second = main(grade)
    from grader.dashboard import build_dashboard

    build_dashboard(grades, site)
    return CohortSite(root, submissions, grades, site, rubric, first, second)


# -- reading what was written --------------------------------------------------------------


_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    }
)


@dataclass(eq=False)
class Node:
    """An element of a parsed page."""

    tag: str
    attrs: dict[str, str | None]
    parent: Node | None = None
    children: list[Node | str] = field(default_factory=list)

    def get(self, name: str) -> str:
        value = self.attrs.get(name)
        return "" if value is None else value

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def words(self) -> str:
        return " ".join(self.text().split())

    def iter(self) -> Iterator[Node]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.iter()

    def all(self, tag: str | None = None, **attrs: str | bool) -> list[Node]:
        """Descendants with ``tag`` (any when None) and ``attrs`` (``data_x`` is
        ``data-x``; True: present, whatever its value)."""
        wanted = {name.replace("_", "-"): value for name, value in attrs.items()}
        return [
            node
            for node in self.iter()
            if (tag is None or node.tag == tag)
            and all(
                (name in node.attrs) if value is True else node.attrs.get(name) == value
                for name, value in wanted.items()
            )
        ]

    def one(self, tag: str | None = None, **attrs: str | bool) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]

    def by_id(self, element_id: str) -> Node:
        return self.one(id=element_id)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.open = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.open)
        self.open.children.append(node)
        if tag not in _VOID:
            self.open = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open.children.append(Node(tag, dict(attrs), self.open))

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.open
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"stray </{tag}>"
        self.open = node.parent

    def handle_data(self, data: str) -> None:
        self.open.children.append(data)


def parse(path: Path) -> Node:
    parser = _Parser()
    parser.feed(path.read_text("utf-8"))
    parser.close()
    assert parser.open is parser.root, f"{path.name}: <{parser.open.tag}> is never closed"
    return parser.root


def gradebook(grades: Path) -> tuple[list[str], list[GradebookRow]]:
    return read_gradebook((grades / "gradebook.csv").read_bytes())


def criterion_ids(header: list[str]) -> list[str]:
    fixed = {
        "submission",
        "student",
        "status",
        "total",
        "review",
        "final",
        "max",
        "digest",
        "reason",
    }
    return [column for column in header if column not in fixed]


def report(grades: Path, submission: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((grades / submission / "report.json").read_bytes())
    return found


def calls(grades: Path, submission: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((grades / submission / "calls.json").read_bytes())
    return found


def ledger(grades: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (grades / "ledger.jsonl").read_text("utf-8").splitlines()]


def files(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def cents(value: Decimal) -> str:
    return str(value.quantize(CENT, rounding=ROUND_HALF_UP))


def chart_rows(page: Node, section: str) -> list[list[str]]:
    table = page.by_id(section).one("table", **{"class": "chart-data"})
    return [[td.words() for td in tr.all("td")] for tr in table.one("tbody").all("tr")]


def chart_columns(page: Node, section: str) -> list[str]:
    table = page.by_id(section).one("table", **{"class": "chart-data"})
    return [th.words() for th in table.one("thead").all("th")]


def svg_texts(page: Node, figure: str) -> list[str]:
    """The words an inline chart draws: its marks' labels, axes and legends."""
    svg = page.one("figure", id=figure).one("svg")
    return [node.words() for node in svg.all("text") if node.words()]


def reviewed_points(grades: Path, rows: list[GradebookRow]) -> dict[str, dict[str, Decimal]]:
    """Per graded row, each criterion's points after review, read from the ledger here: the
    latest review of a criterion of the row's report overrides the automated points when it
    gives points; a confirmation (no points) keeps them."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for event in ledger(grades):
        if event["event"] == "review":
            latest[event["report"], event["criterion"]] = event
    found = {}
    for row in rows:
        if row.status not in REPORTED:
            continue
        points = {cid: Decimal(value) for cid, value in row.criteria.items()}
        for (digest, cid), event in latest.items():
            if digest == row.digest and event["points"] is not None:
                points[cid] = Decimal(event["points"])
        found[row.submission] = points
    return found


def row_by_name(rows: list[GradebookRow]) -> dict[str, GradebookRow]:
    return {row.submission: row for row in rows}


def student_page(site: CohortSite, submission: str) -> Path:
    index = parse(site.site / "index.html")
    row = index.by_id("submissions").one("tr", data_submission=submission)
    href = row.one("td", data_column="submission").one("a").get("href")
    return site.site / href


# -- the cohort page ---------------------------------------------------------------------------


def test_the_cohort_is_graded_as_set_up(site: CohortSite) -> None:
    """The fixture is what the other tests assume: two gradings, one row not graded."""
    assert (site.first_grade, site.second_grade) == (1, 1)  # 1: the ungradable folder
    _, rows = gradebook(site.grades)
    statuses = {row.submission: row.status for row in rows}
    assert statuses == {
        **{name: "graded" for name in (BASELINE, INJECTED, *VARIANT_NAMES)},
        UNGRADABLE: "ungradable",
    }
    assert row_by_name(rows)[BASELINE].final == "97.00"


def test_every_cell_of_the_submissions_table_is_the_gradebooks(site: CohortSite) -> None:
    header, rows = gradebook(site.grades)
    table = parse(site.site / "index.html").by_id("submissions")
    columns = [b.get("data-sort") for b in table.one("thead").all("button")]
    # This cohort has no roster and no late policy: no name or penalty column to fill.
    assert not any(row.name or row.late for row in rows)
    assert columns == [
        "submission",
        "student",
        "status",
        "total",
        "review",
        "final",
        "max",
        *criterion_ids(header),
        "reason",
    ]
    numeric = {b.get("data-sort") for b in table.one("thead").all("button", data_numeric=True)}
    assert numeric == {"total", "final", "max", *criterion_ids(header)}
    shown = table.one("tbody").all("tr", data_submission=True)
    assert [tr.get("data-submission") for tr in shown] == [row.submission for row in rows]
    for tr, row in zip(shown, rows, strict=True):
        expected = {
            "submission": row.submission,
            "student": row.student,
            "status": row.status,
            "total": row.total,
            "review": row.review,
            "final": row.final,
            "max": row.max,
            "reason": row.reason,
            **row.criteria,
        }
        cells = {td.get("data-column"): td for td in tr.all("td")}
        assert set(cells) == set(expected)
        for column, value in expected.items():
            assert cells[column].text() == value, (row.submission, column)
            if column in numeric:
                assert cells[column].get("data-value") == value, (row.submission, column)
            else:
                assert "data-value" not in cells[column].attrs
        assert tr.get("data-status") == row.status
        assert (
            tr.get("data-search")
            == f"{row.submission} {row.student} {row.name} {row.status}".lower()
        )


def test_the_summary_counts_and_averages_come_from_the_gradebook(site: CohortSite) -> None:
    _, rows = gradebook(site.grades)
    page = parse(site.site / "index.html")
    summary = {dd.get("data-stat"): dd.text() for dd in page.by_id("summary").all("dd")}
    finals = sorted(Decimal(row.final or row.total) for row in rows if row.status in REPORTED)
    middle = len(finals) // 2
    median = finals[middle] if len(finals) % 2 else (finals[middle - 1] + finals[middle]) / 2
    assert summary == {
        "submissions": str(len(rows)),
        "graded": str(len(finals)),
        "not-graded": str(len(rows) - len(finals)),
        "mean": cents(sum(finals, Decimal(0)) / len(finals)),
        "median": cents(median),
        "max": "100.00",
        "review": str(len(page.by_id("review-list").all("li"))),
        "urgent": str(
            sum(
                1
                for row in rows
                if row.status == "degraded"
                or (row.status in REPORTED and row.reason)
                or "NEEDS A NEW REVIEW" in row.review
            )
        ),
        "pending": str(
            sum(
                1 for row in rows if "pending: " in row.review or "NEEDS A NEW REVIEW" in row.review
            )
        ),
        "copies": "0",  # each is the reference lab with one change: what all hold is common
        "changed": "1",
    }
    assert summary["pending"] != "0"  # the rubric marks criteria for review: some are left
    assert len(finals) == len(rows) - 1 == 10
    # The distribution's caption and its table say the same: ten bins over 0..100.
    figure = page.one("figure", id="chart-distribution")
    assert f"median {cents(median)}" in figure.one("figcaption").text()
    bins = chart_rows(page, "distribution")
    assert len(bins) == 10 and sum(int(count) for _, count in bins) == len(finals)
    for i, (label, count) in enumerate(bins):
        low, high = Decimal(10 * i), Decimal(10 * (i + 1))
        assert label == f"{cents(low)}\N{EN DASH}{cents(high)}"
        inside = [f for f in finals if low <= f < high or (i == 9 and f == high)]
        assert int(count) == len(inside), label


def test_the_points_lost_table_sums_the_gradebook_against_the_reports_maxima(
    site: CohortSite,
) -> None:
    """After people's reviews, as the gradebook's final counts them: kim's review took 3.00
    of the baseline's written summary, so the cohort lost 3.00 more there than the automated
    points say, and the losses add up to what the finals miss of the maxima."""
    header, rows = gradebook(site.grades)
    graded = [row for row in rows if row.status in REPORTED]
    maxima = {
        c["id"]: (c["title"], Decimal(c["max"])) for c in report(site.grades, BASELINE)["criteria"]
    }
    assert list(maxima) == criterion_ids(header)
    reviewed = reviewed_points(site.grades, rows)
    assert reviewed[BASELINE]["written_summary"] == Decimal("12.00")  # not the automated 15
    expected = []
    for cid in criterion_ids(header):
        title, most = maxima[cid]
        lost = sum((most - reviewed[row.submission][cid] for row in graded), Decimal(0))
        possible = most * len(graded)
        percent = (lost * 100 / possible).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
        expected.append([title, cents(lost), cents(possible), f"{percent}%"])
    page = parse(site.site / "index.html")
    assert page.by_id("lost").one("figure").get("id") == "chart-points-lost"
    assert chart_rows(page, "lost") == expected
    assert sum(Decimal(lost) for _, lost, _, _ in expected) > 0
    # The same cohort, counted from the gradebook's finals: nothing lost twice or forgotten.
    lost = sum((Decimal(lost) for _, lost, _, _ in chart_rows(page, "lost")), Decimal(0))
    assert lost == sum((Decimal(row.max) - Decimal(row.final) for row in graded), Decimal(0))
    caption = page.one("figure", id="chart-points-lost").one("figcaption").words()
    assert f"lost {cents(lost)} of" in caption


def test_the_distribution_says_it_plots_final_points(site: CohortSite) -> None:
    """The histogram counts each row's final (after reviews): its axis, its text alternative
    and its table say so, and nothing on it says "total"."""
    page = parse(site.site / "index.html")
    drawn = svg_texts(page, "chart-distribution")
    assert "final points (after reviews)" in drawn
    assert not [text for text in drawn if "total" in text.lower()]
    figure = page.one("figure", id="chart-distribution")
    caption = figure.one("figcaption").words()
    assert caption.startswith("Final grades (after reviews) of 10 graded submissions")
    assert figure.one("svg").get("aria-label") == caption
    assert chart_columns(page, "distribution") == ["Final points", "Submissions"]


def test_each_grid_cell_names_the_first_criterion_that_lost_points_on_its_case(
    site: CohortSite,
) -> None:
    header, rows = gradebook(site.grades)
    grid = parse(site.site / "index.html").by_id("case-grid")
    assert [th.text() for th in grid.one("thead").all("th")] == ["Submission", *CASES]
    lines = grid.one("tbody").all("tr", data_submission=True)
    assert [tr.get("data-submission") for tr in lines] == [row.submission for row in rows]
    losers: set[str] = set()
    for tr, row in zip(lines, rows, strict=True):
        cells = tr.all("td")
        assert [td.get("data-case") for td in cells] == list(CASES)
        for td, case in zip(cells, CASES, strict=True):
            if row.status not in REPORTED:
                assert (td.get("data-criterion"), td.text()) == ("", row.status)
                continue
            by_id = {c["id"]: c for c in report(site.grades, row.submission)["criteria"]}
            first = next(
                (
                    cid
                    for cid in criterion_ids(header)
                    if any(
                        k["id"] == case and Decimal(k["points"]) < Decimal(k["max"])
                        for k in by_id[cid]["checks"]
                    )
                ),
                "",
            )
            label = by_id[first]["title"] if first else FULL
            assert (td.get("data-criterion"), td.text()) == (first, label), (row.submission, case)
            losers.add(first)
    assert {"contract_stability", "loud_failure", "tracing", ""} <= losers  # not vacuous
    hung = grid.one("tr", data_submission="hangs").one("td", data_case="refund-policy")
    assert hung.get("data-criterion") == "contract_stability"


def test_the_review_and_changed_lists_name_the_right_submissions(site: CohortSite) -> None:
    _, rows = gradebook(site.grades)
    page = parse(site.site / "index.html")
    waiting = {li.get("data-submission"): li.words() for li in page.by_id("review-list").all("li")}
    # Every graded row waits for its written summary (always reviewed by a person); the
    # baseline still waits for its stretch goal after kim's review of the written summary.
    assert sorted(waiting) == sorted(row.submission for row in rows if row.status in REPORTED)
    assert all("pending: " in text for text in waiting.values())
    assert f"written_summary 15.00->12.00 by {REVIEWER}" in waiting[BASELINE]
    changed = page.by_id("changed-list").all("li")
    assert [li.get("data-submission") for li in changed] == [CHANGED]  # not TOUCHED
    text = changed[0].words()
    assert "81.00 → 100.00" in text and "FAILURES.md" in text
    assert changed[0].one("a").get("href") == f"students/{CHANGED}.html"


def _with_gradebook(
    site: CohortSite, tmp_path: Path, edit: Callable[[list[GradebookRow]], list[GradebookRow]]
) -> Path:
    """The cohort's grades copied with ``edit`` applied to its gradebook's rows, and the
    dashboard built from them: the site's folder."""
    from grader.dashboard import build_dashboard

    grades = tmp_path / "grades"
    shutil.copytree(site.grades, grades)
    header, rows = gradebook(grades)
    (grades / "gradebook.csv").write_bytes(gradebook_csv(edit(rows), criterion_ids(header)))
    build_dashboard(grades, tmp_path / "site")
    return tmp_path / "site"


def test_every_file_of_the_site_is_readable_by_others(site: CohortSite) -> None:
    """A site is shared (a web server, the teaching assistants): no file is private to its
    builder, as a temporary file's 0600 would leave it."""
    files = sorted(path for path in site.site.rglob("*") if path.is_file())
    assert len(files) > 3
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in files} == {
        path.name: 0o644 for path in files
    }


def test_rows_whose_reports_are_gone_are_shown_without_inventing_their_maxima(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    """A grades folder copied without its report folders (only the gradebook and ledger
    kept): no criterion's maximum is known, so nothing is counted as lost, and the page
    says why there is no report instead of failing."""
    from grader.dashboard import build_dashboard

    grades = tmp_path / "grades"
    shutil.copytree(site.grades, grades)
    for report in grades.glob("*/report.json"):
        report.unlink()
    build_dashboard(grades, tmp_path / "site")
    page = parse(tmp_path / "site" / "index.html")
    lost = page.one("figure", id="chart-points-lost").one("table").all("tr")[1:]
    assert lost and all(row.all("td")[1].text() == "0.00" for row in lost)
    student = parse(tmp_path / "site" / "students" / f"{BASELINE}.html")
    assert "no report.json" in student.by_id("report").text()


def test_what_needs_a_person_now_comes_before_the_routine_reviews(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    """A review made of an earlier report, as `gradekit grade` leaves it in the gradebook,
    is first and marked to act on; the routine "pending:" ones follow."""
    _, rows = gradebook(site.grades)
    last = sorted(row.submission for row in rows if row.status in REPORTED)[-1]
    stale = "NEEDS A NEW REVIEW: written_summary was reviewed on report 0a15dddd2557"
    built = _with_gradebook(
        site,
        tmp_path,
        lambda rows: [
            dataclass_replace(row, review=stale) if row.submission == last else row for row in rows
        ],
    )
    page = parse(built / "index.html")
    items = page.by_id("review-list").all("li")
    assert items[0].get("data-submission") == last and "data-urgent" in items[0].attrs
    assert items[0].words().startswith("act now")
    assert not any("data-urgent" in li.attrs for li in items[1:])
    summary = {dd.get("data-stat"): dd.text() for dd in page.by_id("summary").all("dd")}
    assert summary["urgent"] == "1"


def test_a_submission_flagged_for_review_comes_before_a_stale_review(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    """A row the grading flagged (an entry of its summary repeating the hand-out's example)
    asks a person to read the whole submission: first, ahead of a stale review that comes
    earlier in the gradebook."""
    _, rows = gradebook(site.grades)
    names = sorted(row.submission for row in rows if row.status in REPORTED)
    first, last = names[0], names[-1]
    stale = "NEEDS A NEW REVIEW: written_summary was reviewed on report 0a15dddd2557"
    repeat = (
        f"{FLAGGED}FAILURES.md 'The answer changed with the provider's name' (line 3) "
        "repeats the hand-out's example"
    )
    built = _with_gradebook(
        site,
        tmp_path,
        lambda rows: [
            dataclass_replace(row, review=stale)
            if row.submission == first
            else dataclass_replace(row, reason=repeat)
            if row.submission == last
            else row
            for row in rows
        ],
    )
    items = parse(built / "index.html").by_id("review-list").all("li")
    assert [li.get("data-submission") for li in items[:2]] == [last, first]
    assert all("data-urgent" in li.attrs for li in items[:2])
    assert "repeats the hand-out's example" in items[0].words()


# -- the student pages -------------------------------------------------------------------------


def test_one_page_per_row_linked_from_the_table(site: CohortSite) -> None:
    _, rows = gradebook(site.grades)
    index = parse(site.site / "index.html")
    table = index.by_id("submissions")
    linked = {}
    for row in rows:
        tr = table.one("tr", data_submission=row.submission)
        linked[row.submission] = tr.one("td", data_column="submission").one("a").get("href")
    slug = linked[INJECTED].removeprefix("students/").removesuffix(".html")
    assert re.fullmatch(r"html---md-[0-9a-f]{8}", slug), slug
    assert {name: href for name, href in linked.items() if name != INJECTED} == {
        row.submission: f"students/{row.submission}.html"
        for row in rows
        if row.submission != INJECTED
    }
    assert sorted(p.name for p in (site.site / "students").iterdir()) == sorted(
        href.removeprefix("students/") for href in linked.values()
    )
    for row in rows:
        page = parse(site.site / linked[row.submission])
        assert page.one("h1").text() == row.submission
        summary = {dd.get("data-stat"): dd.words() for dd in page.by_id("summary").all("dd")}
        assert summary == {
            "student": row.student,
            "status": row.status,
            "total": f"{row.total} / {row.max}" if row.total else "—",
            "final": row.final or row.total or "—",
        }
        if row.status in REPORTED:
            shown = {
                tr.get("data-criterion"): [td.text() for td in tr.all("td")[1:3]]
                for tr in page.by_id("criteria").one("tbody").all("tr")
            }
            assert shown == {
                c["id"]: [c["points"], c["max"]]
                for c in report(site.grades, row.submission)["criteria"]
            }
            checks = report(site.grades, row.submission)["criteria"][0]["checks"]
            listed = page.one(id="criterion-contract_stability").one("ul", **{"class": "checks"})
            assert [li.get("data-check") for li in listed.all("li")] == [k["id"] for k in checks]


def test_the_changed_students_page_shows_both_gradings_and_what_changed(site: CohortSite) -> None:
    page = parse(site.site / "students" / f"{CHANGED}.html")
    runs = [e for e in ledger(site.grades) if e["event"] == "run" and e["student"] == CHANGED]
    assert len(runs) == 2
    timeline = page.by_id("timeline").all("li")
    assert [li.get("data-seq") for li in timeline] == [str(e["seq"]) for e in runs]
    assert "FAILURES.md" in timeline[1].words() and "Changed:" in timeline[1].words()
    rows = chart_rows(page, "history")
    assert chart_columns(page, "history") == ["Grading", "Final", "Cause"]  # no review
    assert [total for _, total, _ in rows] == [e["total"] for e in runs] == ["81.00", "100.00"]
    assert rows[0][2] == "first grade" and "FAILURES.md" in rows[1][2]
    svg = page.one("figure", id="chart-timeline").one("svg")
    assert svg.get("role") == "img" and svg.get("aria-label")

    before = json.loads((site.grades / "archive" / f"{runs[0]['report']}.json").read_bytes())
    after = report(site.grades, CHANGED)
    assert after["digest"] == runs[1]["report"]
    old = {c["id"]: c["points"] for c in before["criteria"]}
    differ = [
        (c["id"], c["title"], old[c["id"]], c["points"])
        for c in after["criteria"]
        if old[c["id"]] != c["points"]
    ]
    assert ("written_summary", "Written summary", "0.00", "15.00") in differ
    table = page.by_id("diff-criteria").one("tbody")
    assert [
        (tr.get("data-criterion"), *(td.text() for td in tr.all("td"))) for tr in table.all("tr")
    ] == differ
    then = {(c["id"], k["id"]): k for c in before["criteria"] for k in c["checks"]}
    gone = {"points": "—", "detail": None}  # a check the earlier report did not have
    moved = [
        [
            f"{c['id']}/{k['id']}",
            then.get((c["id"], k["id"]), gone)["points"],
            k["points"],
            " ".join(k["detail"].split()),
        ]
        for c in after["criteria"]
        for k in c["checks"]
        if (
            then.get((c["id"], k["id"]), gone)["points"],
            then.get((c["id"], k["id"]), gone)["detail"],
        )
        != (k["points"], k["detail"])
    ]
    shown = [
        [td.words() for td in tr.all("td")]
        for tr in page.by_id("diff-checks").one("tbody").all("tr")
    ]
    assert shown == moved
    assert shown[0][:3] == ["written_summary/entries", "0.00", "6.00"]


def test_an_unchanged_grade_has_one_grading_and_the_reviewed_one_shows_its_review(
    site: CohortSite,
) -> None:
    hung = parse(site.site / "students" / "hangs.html")
    assert len(hung.by_id("timeline").all("li")) == 1
    assert "no earlier grade" in hung.by_id("diff").words()
    touched = parse(site.site / "students" / f"{TOUCHED}.html")
    assert len(touched.by_id("timeline").all("li")) == 2  # graded again, the same total
    assert "FAILURES.md" in touched.by_id("timeline").all("li")[1].words()
    assert not touched.all(id="diff-criteria")
    baseline = parse(site.site / "students" / f"{BASELINE}.html")
    assert f"by {REVIEWER}: {REVIEW_REASON}" in baseline.by_id("timeline").text()
    assert "written_summary 15.00->12.00" in baseline.by_id("review-state").text()
    assert baseline.one("dd", data_stat="final").text() == "97.00"


def test_a_reviewed_grade_is_plotted_and_listed_at_its_final(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    """A student whose latest grade of 100.00 a person reviewed down to 80.00: the timeline
    draws 80.00 where the gradebook says final 80.00, and its table shows the total, the
    review and the final side by side. The earlier grading's report was not reviewed: its
    final is its total."""
    from grader.dashboard import build_dashboard

    grades = tmp_path / "grades"
    shutil.copytree(site.grades, grades)
    for criterion, points in (("written_summary", "5.00"), ("stretch_goal", "0.00")):
        assert (
            main(
                [
                    "review",
                    CHANGED,
                    "--criterion",
                    criterion,
                    "--points",
                    points,
                    "--by",
                    REVIEWER,
                    "--reason",
                    "the second half is copied",
                    "--out",
                    str(grades),
                ]
            )
            == 0
        )
    build_dashboard(grades, tmp_path / "site")
    row = row_by_name(gradebook(grades)[1])[CHANGED]
    assert (row.total, row.final) == ("100.00", "80.00")

    page = parse(tmp_path / "site" / "students" / f"{CHANGED}.html")
    drawn = svg_texts(page, "chart-timeline")
    assert "80.00" in drawn and "100.00" not in drawn  # the point's label is the final
    assert "final points (after reviews)" in drawn
    assert chart_columns(page, "history") == ["Grading", "Total", "Review", "Final", "Cause"]
    rows = chart_rows(page, "history")
    assert [r[1:4] for r in rows] == [
        ["81.00", "\N{EN DASH}", "81.00"],
        [
            "100.00",
            f"written_summary 15.00->5.00 by {REVIEWER}; stretch_goal 10.00->0.00 by {REVIEWER}",
            "80.00",
        ],
    ]
    figure = page.one("figure", id="chart-timeline")
    assert "latest 80.00 at #2" in figure.one("figcaption").words()
    latest = page.by_id("timeline").all("li")[-1]
    assert latest.one("span", **{"class": "grade"}).text() == "80.00"
    assert "after review (automated total 100.00:" in latest.words()
    first = page.by_id("timeline").all("li")[0]
    assert first.one("span", **{"class": "grade"}).text() == "81.00"
    assert "after review" not in first.words()


# -- calls.json --------------------------------------------------------------------------------


def test_calls_json_lists_every_call_and_whether_a_recording_served_it(
    site: CohortSite,
) -> None:
    document = calls(site.grades, BASELINE)
    assert document["format"] == "gradekit.calls/1" and document["import_error"] is None
    assert [case["case"] for case in document["cases"]] == list(CASES)
    for case in document["cases"]:
        kinds = {call["kind"] for call in case["calls"]}
        assert "prompt" in kinds and kinds <= {"prompt", "tool"}, case["case"]
        assert all(call["served"] is True for call in case["calls"]), case["case"]
        assert all(("tool" in call) == (call["kind"] == "tool") for call in case["calls"])
        assert len(case["trace"]) == len(case["calls"])
        assert case["status"] == "returned"
    missed = calls(site.grades, "misses_cassette")
    by_case = {case["case"]: case for case in missed["cases"]}
    assert [c["served"] for c in by_case["sql-explain"]["calls"]].count(False) == 1
    assert all(
        c["served"] for case in CASES if case != "sql-explain" for c in by_case[case]["calls"]
    )
    for folder in sorted(site.grades.iterdir()):
        if (folder / "calls.json").is_file():
            text = (folder / "calls.json").read_text("utf-8")
            assert "latency" not in text, folder.name
            assert str(site.root) not in text, folder.name


def test_the_trace_section_lists_each_call_of_calls_json(site: CohortSite) -> None:
    _, rows = gradebook(site.grades)
    checked = 0
    for row in rows:
        if not (site.grades / row.submission / "calls.json").is_file():
            assert row.status not in REPORTED
            continue
        page = parse(student_page(site, row.submission)).by_id("traces")
        for case in calls(site.grades, row.submission)["cases"]:
            section = page.one("section", id=f"case-{case['case']}")
            items = [
                li
                for li in section.all("li", **{"class": True})
                if str(li.get("class")).startswith("call ")
            ]  # not the unpaired records
            assert [li.get("class") for li in items] == [
                "call served" if c["served"] else "call missed" for c in case["calls"]
            ]
            assert [li.get("data-kind") for li in items] == [c["kind"] for c in case["calls"]]
            assert [li.one("span", **{"class": "key"}).text() for li in items] == [
                c["key"] for c in case["calls"]
            ]
            checked += len(items)
    assert checked > 100


# -- escaping ----------------------------------------------------------------------------------


def test_submission_text_reaches_the_pages_only_as_text(site: CohortSite) -> None:
    page_path = student_page(site, INJECTED)
    html = page_path.read_text("utf-8")
    text = parse(page_path).text()
    for injected in INJECTED_TEXTS:  # the text arrived, whole
        assert injected in text, injected
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=" in html
    assert REVIEW_REASON in parse(site.site / "students" / f"{BASELINE}.html").text()
    assert INJECTED in parse(site.site / "index.html").text()
    assert "html &amp; md" in (site.site / "index.html").read_text("utf-8")
    for path in sorted(site.site.rglob("*.html")):
        html = path.read_text("utf-8")
        name = path.relative_to(site.site).as_posix()
        assert "<script>" not in html and "<img" not in html, name
        assert "javascript:" not in html.lower().replace("(javascript:alert(1))", ""), name
        page = parse(path)
        scripts = page.all("script")
        assert [s.get("src") for s in scripts] == (
            ["assets/rows.js", "assets/dashboard.js"] if name == "index.html" else []
        ), name
        assert not page.all("img") and not page.all("iframe") and not page.all("object")
        for node in page.iter():
            events = [a for a in node.attrs if a.lower().startswith("on")]
            assert not events, (name, node.tag, events)
            for attribute in ("href", "src", "xlink:href", "action"):
                assert not node.get(attribute).lower().startswith("javascript:"), name
        # Markdown is not rendered: the stars stay, and nothing is made bold or a link.
        for tag in ("strong", "b", "em"):
            assert not [n for n in page.all(tag) if "bold" in n.text()], (name, tag)
        assert not [a for a in page.all("a") if a.text() == "link"], name
    assert "**bold**" in text and "[link](javascript:alert(1))" in text


# -- the same input, the same bytes ------------------------------------------------------------


def test_the_same_grades_give_byte_identical_sites(site: CohortSite, tmp_path: Path) -> None:
    from grader.dashboard import build_dashboard

    built = files(site.site)
    assert len(built) == 3 + len(gradebook(site.grades)[1]) + 1  # assets, students, index
    one, two = tmp_path / "one", tmp_path / "two"
    written = build_dashboard(site.grades, one)
    assert sorted(p.relative_to(one).as_posix() for p in written) == sorted(built)
    build_dashboard(site.grades, two)
    assert files(one) == files(two) == built
    stamps = {path: path.stat().st_mtime_ns for path in one.rglob("*") if path.is_file()}
    assert build_dashboard(site.grades, one) == written  # again into the same folder
    assert files(one) == built
    assert {path: path.stat().st_mtime_ns for path in one.rglob("*") if path.is_file()} == stamps

    three = tmp_path / "three"
    env = {
        **os.environ,
        "PYTHONHASHSEED": "4242",
        "TZ": "Pacific/Chatham",
        "LC_ALL": "C",
        "LANG": "C",
    }
    done = subprocess.run(
        [sys.executable, "-m", "grader", "dashboard", str(site.grades), "--out", str(three)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert f"dashboard: {len(built) - 3} pages in {three}/" in done.stderr
    assert files(three) == built


# -- nothing from the network ------------------------------------------------------------------


_NAMESPACE = re.compile(r'\sxmlns(?::[\w-]+)?="https?://[^"]*"')


def test_no_generated_file_refers_to_the_network(site: CohortSite) -> None:
    for name, data in files(site.site).items():
        text = data.decode("utf-8")
        for namespace in _NAMESPACE.findall(text):
            assert "www.w3.org" in namespace, (name, namespace)
        rest = _NAMESPACE.sub("", text)
        assert "http://" not in rest and "https://" not in rest, name
        assert "@import" not in rest and "url(" not in rest, name


def test_every_link_and_source_stays_inside_the_site(site: CohortSite) -> None:
    for path in sorted(site.site.rglob("*.html")):
        page = parse(path)
        ids = {node.get("id") for node in page.iter() if "id" in node.attrs}
        for node in page.iter():
            for attribute in ("href", "src"):
                if attribute not in node.attrs:
                    continue
                target = urlsplit(node.get(attribute))
                assert not target.scheme and not target.netloc, (path.name, target)
                if not target.path:
                    assert target.fragment in ids, (path.name, target.fragment)
                    continue
                resolved = (path.parent / unquote(target.path)).resolve()
                assert resolved.is_relative_to(site.site.resolve()), (path.name, target)
                assert resolved.is_file(), (path.name, target)
                if target.fragment:
                    assert target.fragment in {
                        n.get("id") for n in parse(resolved).iter() if "id" in n.attrs
                    }
        links = [n.get("href") for n in page.all("link")]
        assert links == [("" if path.parent == site.site else "../") + "assets/dashboard.css"]


# -- errors ------------------------------------------------------------------------------------


def test_no_gradebook_says_to_grade_first(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "grades").mkdir()
    for grades in (tmp_path / "grades", tmp_path / "nowhere"):
        assert main(["dashboard", str(grades), "--out", str(tmp_path / "site")]) == 2
        error = capsys.readouterr().err
        assert error.startswith("UsageError: ") and "grade first" in error
        assert f"`make grade ARGS='SUBMISSIONS --out {grades}'`" in error
        assert not (tmp_path / "site").exists()


def test_an_out_folder_that_is_not_a_dashboard_is_left_alone(
    site: CohortSite,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "mine"
    (out / "assets").mkdir(parents=True)
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    (out / "index.html").write_text("<p>my page</p>\n", encoding="utf-8")
    before = files(out)
    assert main(["dashboard", str(site.grades), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("UsageError: ") and "is not empty and is not a dashboard" in error
    assert files(out) == before
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "assets",
        "index.html",
        "notes.txt",
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["dashboard", str(site.grades), "--out", str(empty)]) == 0  # empty is fine
    assert files(empty) == files(site.site)


@pytest.mark.parametrize("module", ["jinja2", "altair", "vl_convert"])
def test_without_the_extra_the_error_says_what_to_install(
    site: CohortSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    module: str,
) -> None:
    from grader.dashboard import build_dashboard

    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(UsageError) as raised:
        build_dashboard(site.grades, tmp_path / "site")
    assert "pip install 'gradekit[dashboard]'" in str(raised.value)
    assert not (tmp_path / "site").exists()
    assert main(["dashboard", str(site.grades), "--out", str(tmp_path / "site")]) == 2
    assert "pip install 'gradekit[dashboard]'" in capsys.readouterr().err
    assert not (tmp_path / "site").exists()


def test_a_submission_gone_from_the_cohort_loses_its_page_on_rebuild(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    from grader.dashboard import build_dashboard

    grades, out = tmp_path / "grades", tmp_path / "site"
    shutil.copytree(site.grades, grades)
    shutil.copytree(site.site, out)
    header, rows = gradebook(grades)
    gone = "swallow_miss"
    kept = [row for row in rows if row.submission != gone]
    (grades / "gradebook.csv").write_bytes(gradebook_csv(kept, criterion_ids(header)))
    shutil.rmtree(grades / gone)
    assert (out / "students" / f"{gone}.html").is_file()
    build_dashboard(grades, out)
    assert not (out / "students" / f"{gone}.html").exists()
    index = parse(out / "index.html")
    assert not index.all(data_submission=gone)
    assert gone not in index.text()
    fresh = tmp_path / "fresh"
    build_dashboard(grades, fresh)
    assert files(out) == files(fresh)
    assert len(files(fresh)) == len(files(site.site)) - 1


# -- what could not be read, and what was edited ----------------------------------------------


def test_the_finding_list_holds_the_reports_findings_and_what_the_primary_run_saw(
    site: CohortSite,
) -> None:
    """Per row: the report's findings (the reason when it has no report), then one line per
    case of calls.json that timed out or crashed and one per case with a call no recording
    answered."""
    _, rows = gradebook(site.grades)
    page = parse(site.site / "index.html")
    listed = [
        [td.words() for td in tr.all("td")]
        for tr in page.by_id("finding-list").one("tbody").all("tr")
    ]
    assert [who for _, who, _ in listed] == sorted(
        (who for _, who, _ in listed), key=[r.submission for r in rows].index
    )
    for row in rows:
        shown = [text for _, who, text in listed if who == row.submission]
        found = report(site.grades, row.submission)["findings"] if row.status in REPORTED else []
        stated = found or ([row.reason] if row.reason and row.status not in REPORTED else [])
        assert shown[: len(stated)] == [" ".join(text.split()) for text in stated], row.submission
        observed = shown[len(stated) :]
        document = (
            calls(site.grades, row.submission)
            if (site.grades / row.submission / "calls.json").is_file()
            else {"cases": []}
        )
        expected = []
        for case in document["cases"]:
            if case["status"] in ("timeout", "crashed"):
                expected.append(
                    (case["case"], "timed out" if case["status"] == "timeout" else "crashed")
                )
            missed = [c for c in case["calls"] if not c["served"]]
            if missed:
                expected.append(
                    (
                        case["case"],
                        f"{len(missed)} call(s) of the primary run had "
                        f"no recording (first: {missed[0]['kind']} {missed[0]['key']})",
                    )
                )
        assert len(observed) == len(expected), row.submission
        for text, (case, says) in zip(observed, expected, strict=True):
            assert text.startswith(f"case {case}") and says in text, (row.submission, text)
    assert (UNGRADABLE, "no pyproject.toml") in [(w, t[:17]) for _, w, t in listed]
    counts: dict[str, int] = {}
    for kind, _, _ in listed:
        counts[kind] = counts.get(kind, 0) + 1
    assert {kind: int(n) for kind, n in chart_rows(page, "findings")} == counts
    kinds = {(who, kind) for kind, who, _ in listed}
    assert {
        ("hangs", "timeout or budget"),
        ("connects", "sandbox refusal"),
        ("misses_cassette", "miss"),
        ("misses_cassette", "recording problem"),
        (UNGRADABLE, "other"),
    } <= kinds


def test_an_edited_report_and_a_missing_ledger_are_said_on_the_pages(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    from grader.dashboard import build_dashboard

    grades = tmp_path / "grades"
    shutil.copytree(site.grades, grades)
    (grades / "ledger.jsonl").unlink()
    path = grades / "connects" / "report.json"
    data = path.read_bytes()
    assert data.count(b'"total":"76.50"') == 1
    path.write_bytes(data.replace(b'"total":"76.50"', b'"total":"99.50"'))
    build_dashboard(grades, tmp_path / "site")
    index = parse(tmp_path / "site" / "index.html")
    assert "no ledger.jsonl" in index.one("p", **{"class": "warning"}).text()
    assert index.one("dd", data_stat="changed").text() == "0"
    edited = parse(tmp_path / "site" / "students" / "connects.html")
    warning = edited.by_id("report").one("p", **{"class": "warning"}).words()
    assert warning.startswith("report.json does not verify: digest mismatch")
    assert edited.one("dd", data_stat="total").text() == "76.50 / 100.00"  # the gradebook's
    assert "no grade of connects" in edited.by_id("history").words()


# -- edge cases these tests found broken, fixed since ----------------------------------------


def test_the_summary_and_the_distribution_caption_state_one_median(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    # A reviewed final of 80.25 beside one of 80.00: the median of ten is their mean, 80.125.
    built = _with_gradebook(
        site,
        tmp_path,
        lambda rows: [
            dataclass_replace(row, final="80.25") if row.submission == TOUCHED else row
            for row in rows
        ],
    )
    page = parse(built / "index.html")
    caption = page.one("figure", id="chart-distribution").one("figcaption").text()
    stated = re.search(r"median (\d+\.\d\d)", caption)
    assert stated is not None
    assert page.one("dd", data_stat="median").text() == stated[1]


def test_an_out_that_is_a_file_is_a_usage_error(
    site: CohortSite,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "site.html"
    out.write_text("mine\n", encoding="utf-8")
    assert main(["dashboard", str(site.grades), "--out", str(out)]) == 2
    assert "UsageError: " in capsys.readouterr().err
    assert out.read_text("utf-8") == "mine\n"


def test_a_cohort_with_nothing_graded_still_gets_a_dashboard(
    site: CohortSite,
    tmp_path: Path,
) -> None:
    built = _with_gradebook(
        site, tmp_path, lambda rows: [row for row in rows if row.status not in REPORTED]
    )
    page = parse(built / "index.html")
    assert [
        tr.get("data-submission")
        for tr in page.by_id("submissions").all("tr")
        if tr.get("data-submission")
    ] == [UNGRADABLE]
    assert page.one("dd", data_stat="not-graded").text() == "1"
    assert (built / "students" / f"{UNGRADABLE}.html").is_file()
