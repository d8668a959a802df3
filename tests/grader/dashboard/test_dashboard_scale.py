"""gradekit dashboard on a large cohort: a page per list on the cohort page, every row in
rows.js, a timeline on every student's page, the review queue's counts.

The cohort is synthetic (``bench._cohort.synthetic_grades``: a real-format grades folder
written by the grader's own writers), ``SCALE`` submissions so that each list has several
pages; the site is built by the real CLI. Numbers are checked against the gradebook and
the ledger, read here independently of ``grader.dashboard``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench._cohort import synthetic_grades
from grader.cli import main
from grader.outputs import GradebookRow
from tests.grader.dashboard.test_dashboard import Node, _Parser, files, gradebook, ledger, parse

pytestmark = pytest.mark.slow

SCALE = 250  # three pages of 100 in the submissions table
SMALL, LARGE = 150, 750  # the cohort page's size must not follow the cohort's
PAGE = 100
PREFIX = "window.GRADEKIT_ROWS = "
LISTS = {
    "submissions": "submissions",
    "grid": "case-grid",
    "findings": "finding-list",
    "review": "review-list",
    "changed": "changed-list",
}


@dataclass(frozen=True, slots=True)
class ScaleSite:
    grades: Path
    site: Path


_BUILT: dict[int, ScaleSite] = {}


def scale_site(tmp_path_factory: pytest.TempPathFactory, n: int = SCALE) -> ScaleSite:
    """A synthetic cohort of ``n`` and its site, built once per session (the browser test
    shares it)."""
    if n not in _BUILT:
        root = tmp_path_factory.mktemp(f"scale-{n}")
        synthetic_grades(root / "grades", n)
        # Its commands as the kit's lab prints them, wherever the first test that asks
        # for the site runs: the subprocesses below are told the same.
        before = os.environ.get("GRADEKIT_COMMANDS")
        os.environ["GRADEKIT_COMMANDS"] = "make"
        try:
            assert main(["dashboard", str(root / "grades"), "--out", str(root / "site")]) == 0
        finally:
            if before is None:
                del os.environ["GRADEKIT_COMMANDS"]
            else:
                os.environ["GRADEKIT_COMMANDS"] = before
        _BUILT[n] = ScaleSite(root / "grades", root / "site")
    return _BUILT[n]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> ScaleSite:
    return scale_site(tmp_path_factory)


def rows_js(site: Path) -> dict[str, list[Node]]:
    """Each list's rows in rows.js, parsed as the pages are, in order."""
    text = (site / "assets" / "rows.js").read_text("utf-8")
    body = text[text.index(PREFIX) + len(PREFIX) :].rstrip().removesuffix(";")
    lists: dict[str, str] = json.loads(body)
    found = {}
    for name, html in lists.items():
        parser = _Parser()
        parser.feed(html)
        parser.close()
        assert parser.open is parser.root, name
        found[name] = [node for node in parser.root.children if isinstance(node, Node)]
        assert {node.tag for node in found[name]} <= {"tr", "li"}, name
    return found


def shown_rows(page: Node, list_id: str) -> list[Node]:
    holder = page.by_id(list_id)
    body = holder.one("tbody") if holder.tag == "table" else holder
    return [node for node in body.children if isinstance(node, Node) and node.tag in {"tr", "li"}]


def pending_in(row: GradebookRow) -> tuple[list[str], list[str]]:
    """A review cell's pending criteria and those that need a new review, read here."""
    pending: list[str] = []
    again: list[str] = []
    for part in row.review.split(";"):
        part = part.strip()
        if part.startswith("pending:"):
            pending += [c.strip() for c in part.removeprefix("pending:").split(",")]
        elif part.startswith("NEEDS A NEW REVIEW:"):
            again.append(part.removeprefix("NEEDS A NEW REVIEW:").split()[0])
    return pending, again


def test_the_cohort_page_holds_the_first_page_of_each_list_and_rows_js_every_row(
    site: ScaleSite,
) -> None:
    _, rows = gradebook(site.grades)
    assert len(rows) == SCALE
    page = parse(site.site / "index.html")
    every = rows_js(site.site)
    assert sorted(every) == sorted(LISTS)
    names = [row.get("data-submission") for row in every["submissions"]]
    assert names == [row.submission for row in rows]  # each row once, in gradebook order
    grid = [row.get("data-submission") for row in every["grid"]]
    assert grid == names
    for name, list_id in LISTS.items():
        held = shown_rows(page, list_id)
        assert len(held) == min(PAGE, len(every[name])), name
        box = page.one("div", data_list=name)
        assert box.get("data-total") == str(len(every[name])), name
        assert box.get("data-page-size") == str(PAGE), name
        assert [node.text() for node in held] == [row.text() for row in every[name][:PAGE]], name
    assert len(every["review"]) > PAGE  # the queue is paged too
    # Without a script the page says where the rest is.
    more = page.one("div", data_list="submissions").one("p", **{"class": "more"})
    assert f"first {PAGE} of {SCALE}" in more.words()


def test_the_cohort_page_does_not_grow_with_the_cohort(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Five times the submissions: rows.js grows with them; the cohort page is its frame
    (summary, charts, queue table: the same size whatever the cohort) and at most one page
    of rows per list, so ten thousand submissions give the page of a few hundred."""
    small, large = (scale_site(tmp_path_factory, n) for n in (SMALL, LARGE))
    data = [(s.site / "assets" / "rows.js").stat().st_size for s in (small, large)]
    assert data[1] > 4 * data[0]
    frames = []
    for built in (small, large):
        html = (built.site / "index.html").read_text("utf-8")
        held = re.findall(r"<(tbody|ul)[^>]*data-rows>(.*?)</\1>", html, flags=re.S)
        assert len(held) == len(LISTS)
        for _, rows in held:
            assert rows.count("<tr") + rows.count("<li") <= PAGE
        frames.append(
            len(re.sub(r"(<(tbody|ul)[^>]*data-rows>)(.*?)(</\2>)", r"\1\4", html, flags=re.S))
        )
    assert abs(frames[1] - frames[0]) < frames[0] // 10, frames
    assert (large.site / "index.html").stat().st_size < 2_000_000


def test_every_student_page_holds_its_timeline(site: ScaleSite) -> None:
    _, rows = gradebook(site.grades)
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in ledger(site.grades):
        if event["event"] == "run":
            runs.setdefault(event["student"], []).append(event)
    pages = sorted((site.site / "students").glob("*.html"))
    assert [p.stem for p in pages] == sorted(row.submission for row in rows)
    twice = 0
    for row in rows:
        page = parse(site.site / "students" / f"{row.submission}.html")
        graded = runs[row.student]
        items = page.by_id("timeline").all("li")
        assert [li.get("data-seq") for li in items] == [str(e["seq"]) for e in graded]
        svg = page.one("figure", id="chart-timeline").one("svg")
        assert svg.get("role") == "img" and svg.get("aria-label")
        drawn = [node.words() for node in svg.all("text")]
        assert [text for text in drawn if text.startswith("#")] == [
            f"#{i} (event {e['seq']})" for i, e in enumerate(graded, 1)
        ]
        twice += len(graded) > 1
    assert twice > 10  # the cohort's second batch: histories of two gradings


def test_the_queue_counts_are_the_gradebooks_pending_cells(site: ScaleSite) -> None:
    header, rows = gradebook(site.grades)
    page = parse(site.site / "index.html")
    pending: dict[str, int] = {}
    again: dict[str, int] = {}
    waiting = []
    for row in rows:
        left, redo = pending_in(row)
        for criterion in left:
            pending[criterion] = pending.get(criterion, 0) + 1
        for criterion in redo:
            again[criterion] = again.get(criterion, 0) + 1
        if left or redo:
            waiting.append(row.submission)
    assert pending and again  # the synthetic cohort has both
    table = {
        tr.get("data-criterion"): (
            tr.one("td", data_count="pending").text(),
            tr.one("td", data_count="again").text(),
        )
        for tr in page.by_id("queue").one("tbody").all("tr")
    }
    assert set(pending) | set(again) <= set(table)
    for criterion, counts in table.items():
        assert counts == (str(pending.get(criterion, 0)), str(again.get(criterion, 0)))
    assert page.one("strong", data_stat="pending-rows").text() == str(len(waiting))
    assert page.one("dd", data_stat="pending").text() == str(len(waiting))
    queued = {row.get("data-submission") for row in rows_js(site.site)["review"]}
    assert set(waiting) <= queued
    assert header  # the gradebook's header names the criteria the table lists
    assert set(table) <= set(header)


def test_the_same_cohort_gives_the_same_bytes_in_any_process(
    site: ScaleSite,
    tmp_path: Path,
) -> None:
    built = files(site.site)
    for number, setting in enumerate(
        (
            {"PYTHONHASHSEED": "1", "TZ": "Asia/Kathmandu", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
            {"PYTHONHASHSEED": "977", "TZ": "America/St_Johns", "LC_ALL": "C", "LANG": "C"},
        )
    ):
        out = tmp_path / f"site-{number}"
        done = subprocess.run(
            [sys.executable, "-m", "grader", "dashboard", str(site.grades), "--out", str(out)],
            env={**os.environ, **setting, "GRADEKIT_COMMANDS": "make"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert files(out) == built, setting
