"""gradekit dashboard in a real browser: Debian's Chromium, driven by Playwright.

The session's cohort site (``tests.grader.dashboard.test_dashboard.cohort_site``) opened
from the file system: no error, nothing fetched but the site's own files, charts drawn, the
submissions table sorted and filtered by its script, the injected scripts dead, the print
style applied, and full-page screenshots kept for people in
``$GRADEKIT_ARTIFACTS/dashboard`` (default
``build/test-artifacts/dashboard`` in the repository).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pytest

from tests.grader.dashboard.test_dashboard import (
    CHANGED,
    INJECTED,
    UNGRADABLE,
    CohortSite,
    cohort_site,
    gradebook,
)
from tests.grader.dashboard.test_dashboard_scale import SCALE, ScaleSite, scale_site
from tests.submissions import BASELINE, REFERENCE

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Locator, Page

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
NO_CHROMIUM = (
    "install Debian's chromium (apt-get install chromium) to run the dashboard's browser test"
)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium() -> str | None:
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return str(CHROMIUM)
    return shutil.which("chromium")


def artifacts() -> Path:
    """Where the screenshots go: they outlive the test run, for people to look at."""
    folder = Path(os.environ.get("GRADEKIT_ARTIFACTS", "build/test-artifacts"))
    folder = (folder if folder.is_absolute() else REFERENCE / folder) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> CohortSite:
    return cohort_site(tmp_path_factory)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = _chromium()
    if executable is None:
        pytest.skip(NO_CHROMIUM)
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install -e '.[dev]'"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    fresh = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield fresh
    finally:
        fresh.close()


@dataclass
class Opened:
    """A page of the site, with what it logged and asked for since it was opened."""

    page: Page
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_page(context: BrowserContext, path: Path) -> Opened:
    page = context.new_page()
    opened = Opened(page)

    def console(message: Any) -> None:
        if message.type == "error":
            opened.errors.append(f"console: {message.text}")

    page.on("console", console)
    page.on("pageerror", lambda error: opened.errors.append(f"pageerror: {error}"))
    page.on("request", lambda request: opened.requests.append(request.url))
    page.goto(path.as_uri(), wait_until="load")
    return opened


def _inside(url: str, site: Path) -> bool:
    parts = urlsplit(url)
    if parts.scheme != "file":
        return False
    return Path(unquote(parts.path)).resolve().is_relative_to(site.resolve())


def _pages(site: CohortSite) -> list[Path]:
    return [site.site / "index.html", *sorted((site.site / "students").glob("*.html"))]


def test_every_page_loads_without_errors_and_fetches_only_its_own_files(
    site: CohortSite,
    context: BrowserContext,
) -> None:
    pages = _pages(site)
    assert len(pages) == 12
    for path in pages:
        opened = open_page(context, path)
        name = path.relative_to(site.site).as_posix()
        assert opened.errors == [], name
        assert opened.requests, name
        assert [url for url in opened.requests if not _inside(url, site.site)] == [], name
        css = "assets/dashboard.css"
        assert any(url.endswith(css) for url in opened.requests), name
        assert opened.page.evaluate("() => document.styleSheets.length") == 1, name
        # The style sheet applies: the summary is a grid.
        display = opened.page.eval_on_selector("dl#summary", "e => getComputedStyle(e).display")
        assert display == "grid", name
        opened.page.close()


def test_the_charts_are_drawn_and_labelled(site: CohortSite, context: BrowserContext) -> None:
    expected = {
        "index.html": ["chart-distribution", "chart-points-lost", "chart-findings"],
        f"students/{CHANGED}.html": ["chart-timeline"],
    }
    for name, ids in expected.items():
        page = open_page(context, site.site / name).page
        figures = page.locator("figure.chart")
        assert [figures.nth(i).get_attribute("id") for i in range(figures.count())] == ids
        for i in range(figures.count()):
            svg = figures.nth(i).locator("svg").first
            box = svg.bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 30, (name, i)
            assert (svg.get_attribute("role"), bool(svg.get_attribute("aria-label"))) == (
                "img",
                True,
            )
            assert svg.locator("path, rect, line, text").count() > 5, (name, i)
            caption = figures.nth(i).locator("figcaption").inner_text()
            assert caption.strip() == (svg.get_attribute("aria-label") or "").strip()
        page.close()


def _rows(page: Page) -> list[str]:
    rows = page.locator("table#submissions tbody tr[data-submission]")
    return [rows.nth(i).get_attribute("data-submission") or "" for i in range(rows.count())]


def _values(page: Page, column: str) -> list[float]:
    raw: list[str] = page.eval_on_selector_all(
        f'table#submissions tbody tr td[data-column="{column}"]',
        "cells => cells.map(c => c.getAttribute('data-value'))",
    )
    return [float("-inf") if value == "" else float(value) for value in raw]


def test_the_table_sorts_by_a_number_and_by_text(site: CohortSite, context: BrowserContext) -> None:
    page = open_page(context, site.site / "index.html").page
    start = _rows(page)
    assert start == sorted(start)  # the gradebook's order
    header = page.locator("table#submissions th").filter(
        has=page.locator('button[data-sort="total"]')
    )
    assert header.get_attribute("aria-sort") is None
    page.click('th button[data-sort="total"]')
    ascending = _values(page, "total")
    assert ascending == sorted(ascending) and ascending[0] == float("-inf")
    assert len(set(ascending)) > 5
    assert header.get_attribute("aria-sort") == "ascending"
    assert _rows(page)[0] == UNGRADABLE
    page.click('th button[data-sort="total"]')
    descending = _values(page, "total")
    assert descending == sorted(ascending, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"
    # Equal totals are in the order of their names, reversed with the rest.
    order = _rows(page)
    assert order.index("connects") > order.index("hangs")  # both 76.50, descending

    page.click('th button[data-sort="final"]')  # a review moved the baseline's final
    finals = _values(page, "final")
    assert finals == sorted(finals)
    assert header.get_attribute("aria-sort") is None
    assert (
        page.locator('th:has(button[data-sort="final"])').get_attribute("aria-sort") == "ascending"
    )
    assert _rows(page).index(BASELINE) == len(start) - 2  # 97.00: below template_failures

    page.click('th button[data-sort="submission"]')
    assert _rows(page) == sorted(start, key=str.casefold)
    page.click('th button[data-sort="submission"]')
    assert _rows(page) == sorted(start, key=str.casefold, reverse=True)
    assert page.locator("th[aria-sort]").count() == 1
    page.close()


def _visible(page: Page) -> list[str]:
    found: list[str] = page.eval_on_selector_all(
        "table#submissions tbody tr[data-submission]",
        "rows => rows.filter(r => !r.hidden && r.offsetParent !== null)"
        ".map(r => r.getAttribute('data-submission'))",
    )
    return found


def test_the_table_filters_by_words_and_by_status(
    site: CohortSite, context: BrowserContext
) -> None:
    page = open_page(context, site.site / "index.html").page
    every = _rows(page)
    assert page.inner_text("#shown") == str(len(every)) == "11"
    page.fill("#filter", "swallow")
    assert _visible(page) == ["swallow_miss"]
    assert page.inner_text("#shown") == "1"
    page.fill("#filter", "  HTML & MD ")  # case and outer spaces do not matter
    assert _visible(page) == [INJECTED]
    page.fill("#filter", "miss")  # a word anywhere in the name, student or status
    assert _visible(page) == ["misses_cassette", UNGRADABLE, "swallow_miss"]
    assert page.inner_text("#shown") == "3"
    # The rows the filter drops leave the table (they stay in rows.js for the next filter).
    assert page.locator("table#submissions tbody tr").count() == 3
    page.fill("#filter", "")
    assert _visible(page) == every

    options = page.eval_on_selector_all("#status-filter option", "o => o.map(x => x.value)")
    assert options == ["", "graded", "ungradable"]
    page.select_option("#status-filter", "ungradable")
    assert _visible(page) == [UNGRADABLE]
    assert page.inner_text("#shown") == "1"
    page.select_option("#status-filter", "graded")
    assert _visible(page) == [name for name in every if name != UNGRADABLE]
    page.fill("#filter", "not_a")  # both at once: nothing left
    assert _visible(page) == [] and page.inner_text("#shown") == "0"
    page.fill("#filter", "")
    page.select_option("#status-filter", "")
    assert _visible(page) == every
    assert page.inner_text("#shown") == str(len(every))
    page.close()


def test_every_submission_fits_a_1280_pixel_screen(browser: Browser, site: CohortSite) -> None:
    """At 1280x800 the table of every submission needs no sideways scrolling, and each
    reason cell (the last column, the longest texts) is inside the window with its text
    wrapped, not cut off."""
    small = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = open_page(small, site.site / "index.html").page
        measured: dict[str, Any] = page.evaluate("""() => {
          const table = document.getElementById("submissions");
          const box = table.parentElement;
          const cells = [...table.querySelectorAll('th:last-child, td[data-column="reason"]')];
          return {
            window: document.documentElement.clientWidth,
            page: document.documentElement.scrollWidth,
            box: [box.scrollWidth, box.clientWidth],
            table: table.getBoundingClientRect().right,
            cells: cells.map(c => [c.textContent, c.getBoundingClientRect().left,
                                   c.getBoundingClientRect().right, c.scrollWidth,
                                   c.clientWidth]),
          };
        }""")
        assert measured["window"] <= 1280
        assert measured["page"] <= measured["window"]
        scrolled, shown = measured["box"]
        assert scrolled <= shown, f"the table scrolls sideways: {scrolled} px in {shown}"
        assert measured["table"] <= measured["window"]
        cells = measured["cells"]
        assert len(cells) == 1 + 11 and cells[0][0].strip() == "Reason"
        assert any(UNGRADABLE in text or "pyproject.toml" in text for text, *_ in cells)
        for text, left, right, inner, outer in cells:
            assert 0 <= left < right <= measured["window"], (text, left, right)
            assert inner <= outer, f"cut off: {text!r}"
        page.close()
    finally:
        small.close()


def test_the_injected_scripts_never_run(site: CohortSite, context: BrowserContext) -> None:
    index = open_page(context, site.site / "index.html").page
    injected = index.locator(f'table#submissions tr[data-submission="{INJECTED}"] a')
    assert injected.inner_text() == INJECTED
    injected.click()
    index.wait_for_load_state("load")
    assert "/students/html---md-" in index.url
    for page in (index, open_page(context, site.site / "students" / f"{BASELINE}.html").page):
        assert page.evaluate("() => window.__pwned") is None
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.locator("script").count() == 0
        assert page.locator("strong:has-text('bold')").count() == 0
    text = index.inner_text("#report")
    assert "<script>window.__pwned=1</script>" in text and "**bold**" in text
    assert "<script>window.__pwned=3</script>" in index.inner_text("#traces")
    cohort = open_page(context, site.site / "index.html").page
    assert cohort.evaluate("() => window.__pwned") is None
    assert cohort.locator("script").count() == 2  # rows.js and dashboard.js
    cohort.fill("#filter", "html")  # the rows come from rows.js now: still text, not markup
    assert [
        row.get_attribute("data-submission")
        for row in cohort.locator("table#submissions tbody tr").all()
    ] == [INJECTED]
    assert cohort.evaluate("() => window.__pwned") is None
    assert cohort.locator("img, iframe, object, embed").count() == 0


def test_the_print_style_hides_the_controls_and_prints_the_rows_shown(
    site: CohortSite,
    context: BrowserContext,
) -> None:
    """Paper holds the table as the screen shows it (a page of a filter's rows: the whole
    cohort can be ten thousand rows), without the controls that cannot work on paper."""
    page = open_page(context, site.site / "index.html").page
    page.emulate_media(media="print")
    assert page.locator("table#submissions tbody tr:visible").count() == 11
    page.emulate_media(media="screen")
    page.fill("#filter", "swallow")
    assert page.locator("table#submissions tbody tr:visible").count() == 1
    assert page.locator(".controls").first.is_visible()
    page.emulate_media(media="print")
    for hidden in (".controls", "nav.sections", "a.skip", "nav.pager button"):
        assert all(node.is_hidden() for node in page.locator(hidden).all()), hidden
    assert page.locator("table#submissions tbody tr:visible").count() == 1
    assert page.locator("#submissions-section h2").is_visible()
    page.emulate_media(media="screen")
    assert page.locator(".controls").first.is_visible()
    assert page.locator("table#submissions tbody tr:visible").count() == 1
    page.close()


def test_the_numbers_behind_the_charts_print(site: CohortSite, context: BrowserContext) -> None:
    page = open_page(context, site.site / "index.html").page
    page.emulate_media(media="print")
    tables = page.locator("figure.chart table.chart-data")
    assert tables.count() == 3
    for i in range(tables.count()):
        assert tables.nth(i).is_visible(), i
    page.close()


def test_screenshots_of_the_cohort_and_a_changed_student(
    site: CohortSite,
    context: BrowserContext,
) -> None:
    folder = artifacts()
    shots = {
        "cohort.png": site.site / "index.html",
        f"student-{CHANGED}.png": site.site / "students" / f"{CHANGED}.html",
    }
    for name, path in shots.items():
        page = open_page(context, path).page
        target = folder / name
        target.unlink(missing_ok=True)
        page.screenshot(path=str(target), full_page=True)
        assert target.is_file() and target.stat().st_size > 10_000, target
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        page.close()


# -- a large cohort: pages of rows from rows.js ------------------------------------------------


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> ScaleSite:
    return scale_site(tmp_path_factory)


def _pager(page: Page, name: str) -> Locator:
    return page.locator(f'[data-list="{name}"] nav.pager')


def _turn(page: Page, name: str, to: str) -> None:
    _pager(page, name).locator(f'button[data-page="{to}"]').click()


def _status(page: Page, name: str) -> str:
    return " ".join(_pager(page, name).locator("[data-page-status]").inner_text().split())


def test_a_large_cohort_pages_filters_and_sorts_from_the_file_system(
    large: ScaleSite,
    context: BrowserContext,
) -> None:
    _, rows = gradebook(large.grades)
    names = [row.submission for row in rows]
    assert len(names) == SCALE == 250
    opened = open_page(context, large.site / "index.html")
    page = opened.page
    assert opened.errors == []
    assert [url for url in opened.requests if not _inside(url, large.site)] == []
    assert any(url.endswith("assets/rows.js") for url in opened.requests)
    assert _rows(page) == names[:100]
    assert page.inner_text("#shown") == "250"
    assert _status(page, "submissions") == "Rows 1\N{EN DASH}100 of 250 (page 1 of 3)"
    assert page.locator('[data-list="submissions"] .more').is_hidden()

    # A name on the last page is found from the first.
    page.fill("#filter", names[240])
    assert _rows(page) == [names[240]] and page.inner_text("#shown") == "1"
    assert _pager(page, "submissions").is_hidden()  # one page: nothing to turn
    page.fill("#filter", "")
    assert _rows(page) == names[:100]

    _turn(page, "submissions", "last")
    assert _rows(page) == names[200:]
    assert _status(page, "submissions") == "Rows 201\N{EN DASH}250 of 250 (page 3 of 3)"
    assert _pager(page, "submissions").locator('button[data-page="next"]').is_disabled()
    _turn(page, "submissions", "previous")
    assert _rows(page) == names[100:200]
    _turn(page, "submissions", "first")
    assert _rows(page) == names[:100]

    # Sorting orders every row, not only the page's: the highest final is first, the rows
    # without one come last, on the last page.
    page.click('th button[data-sort="final"]')
    page.click('th button[data-sort="final"]')
    finals = sorted((Decimal(row.final) for row in rows if row.final), reverse=True)
    assert _values(page, "final")[:100] == [float(value) for value in finals[:100]]
    _turn(page, "submissions", "last")
    ungraded = [row.submission for row in rows if not row.final]
    assert ungraded and _rows(page)[-len(ungraded) :] == sorted(ungraded, reverse=True)

    page.select_option("#status-filter", "ungradable")
    assert sorted(_rows(page)) == [row.submission for row in rows if row.status == "ungradable"]
    page.close()


def test_the_review_queue_pages_and_filters(large: ScaleSite, context: BrowserContext) -> None:
    _, rows = gradebook(large.grades)
    page = open_page(context, large.site / "index.html").page
    queue = page.locator("ul#review-list > li")
    total = int(page.locator('[data-list="review"]').get_attribute("data-total") or "0")
    assert total > 100 and queue.count() == 100
    _turn(page, "review", "last")
    last = total - 200
    assert queue.count() == last
    assert _status(page, "review") == f"Rows 201\N{EN DASH}{total} of {total} (page 3 of 3)"
    again = [row.submission for row in rows if "NEEDS A NEW REVIEW" in row.review]
    page.locator('[data-list="review"] input[data-filter]').fill("needs a new review")
    shown = [queue.nth(i).get_attribute("data-submission") or "" for i in range(queue.count())]
    assert again and sorted(shown) == sorted(again)
    page.close()


def test_without_a_script_the_first_page_of_each_list_shows(
    browser: Browser,
    large: ScaleSite,
) -> None:
    plain = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    try:
        page = plain.new_page()
        page.goto((large.site / "index.html").as_uri(), wait_until="load")
        assert len(_rows(page)) == 100
        more = page.locator('[data-list="submissions"] .more')
        assert more.is_visible() and "first 100 of 250" in " ".join(more.inner_text().split())
        assert _pager(page, "submissions").is_hidden()
        page.close()
    finally:
        plain.close()
