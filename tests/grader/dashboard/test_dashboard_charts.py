"""The dashboard's charts: accessible, escaped, offline SVG, the same bytes on every run.

It tests ``grader.dashboard._charts`` on purpose, its private ``_accessible`` among them:
the charts are the module's, behind the room's door."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from gradekit import UsageError
from grader.dashboard._charts import (
    INSTALL,
    DashboardUnavailable,
    Figure,
    _accessible,
    findings_by_kind,
    grade_timeline,
    points_lost,
    score_distribution,
)

REPO = Path(__file__).resolve().parents[3]
SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script> & co"
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"
# Sorted: 0, 5.50, 12, 55, 55, 59.99, 60, 71.25, 72.50, 99.99, 100. An edge opens the next
# bin, except the maximum, which closes the last.
TOTALS = [
    Decimal(text)
    for text in (
        "55.00",
        "0.00",
        "100.00",
        "12.00",
        "59.99",
        "60.00",
        "5.50",
        "71.25",
        "55.00",
        "99.99",
        "72.50",
    )
]
CRITERIA = [
    ("tests", "Tests pass", Decimal("12.00"), Decimal("40.00")),
    ("hostile", HOSTILE, Decimal("3.50"), Decimal("10.00")),
    ("style", "Style", Decimal("0.50"), Decimal("8.00")),
    ("docs", "Docs", Decimal("0.00"), Decimal("5.00")),
]
TIMELINE = [
    ("#1 (event 3)", Decimal("60.00"), "first grading"),
    ("#2 (event 7)", None, "inputs changed: cassettes/x.json"),
    ("#3 (event 9)", Decimal("72.50"), "rubric changed"),
]
# The same gradings after people's reviews: #1's report was reviewed down by 4 points,
# #3's confirmed (its final is its total).
REVIEWED_TIMELINE = [
    ("#1 (event 3)", Decimal("56.00"), "first grading"),
    ("#2 (event 7)", None, "inputs changed: cassettes/x.json"),
    ("#3 (event 9)", Decimal("72.50"), "rubric changed"),
]
REVIEWS = [
    (Decimal("60.00"), "tests 12.00->8.00 by kim"),
    (None, ""),
    (Decimal("72.50"), "docs 5.00 confirmed by kim"),
]


def sample_figures() -> list[Figure]:
    """One figure of each kind, the empty one too: what the determinism test renders."""
    return [
        score_distribution(TOTALS, Decimal("100.00")),
        points_lost(CRITERIA),
        findings_by_kind([("cassette-miss", 7), (HOSTILE, 3), ("stale", 0)]),
        findings_by_kind([]),
        grade_timeline(TIMELINE, Decimal("100.00")),
        grade_timeline(REVIEWED_TIMELINE, Decimal("100.00"), reviewed=REVIEWS),
    ]


def span(low: str, high: str) -> str:
    """A bin's label: its edges joined by an en dash."""
    return f"{low}\N{EN DASH}{high}"


def check_figure(figure: Figure) -> ET.Element:
    """The SVG is a self-contained, labelled image; the table is all text, row by row."""
    assert not figure.svg.startswith("<?xml")
    root = ET.fromstring(figure.svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img"
    assert root.get("aria-label") == figure.alt
    assert root[0].tag == f"{SVG}title" and root[0].text == figure.title
    assert "<script" not in figure.svg.lower()
    assert len(figure.svg) < 100_000
    for element in root.iter():
        assert element.tag.rpartition("}")[2] not in {"script", "foreignObject", "image"}
        assert not element.tag.endswith("}animate")
        for name, value in element.attrib.items():
            assert "href" not in name, (name, value)
            assert "http:" not in value and "https:" not in value, (name, value)
        assert "http:" not in (element.text or "") and "https:" not in (element.text or "")
    backdrop = root.find(f"{SVG}rect")
    assert backdrop is not None and backdrop.get("fill") == "white"
    assert figure.alt.strip() and figure.title.strip()
    for row in figure.rows:
        assert len(row) == len(figure.columns)
        assert all(isinstance(cell, str) for cell in row)
    return root


def texts(root: ET.Element) -> list[str]:
    """What the chart writes, in document order: labels on the marks, axes, legends."""
    return [element.text for element in root.iter(f"{SVG}text") if element.text]


def test_distribution_counts_ten_bins_with_the_last_closed() -> None:
    figure = score_distribution(TOTALS, Decimal("100.00"))
    root = check_figure(figure)

    assert figure.id == "distribution"
    assert figure.columns == ("Final points", "Submissions")
    assert figure.rows == tuple(
        (span(f"{10 * i}.00", f"{10 * i + 10}.00"), count)
        for i, count in enumerate(["2", "1", "0", "0", "0", "3", "1", "2", "0", "2"])
    )
    assert figure.alt == (
        "Final grades (after reviews) of 11 graded submissions, out of "
        "100.00 points: median 59.99; most common range "
        f"{span('50.00', '60.00')} (3 submissions)."
    )
    assert texts(root).count("3") >= 1 and texts(root).count("0") >= 5


def test_the_distribution_and_the_timeline_say_they_plot_final_points() -> None:
    """The cohort page plots each row's final grade (after reviews), so the axis, the text
    alternative and the table say final: a "total points" axis read as the automated total."""
    for figure in (
        score_distribution(TOTALS, Decimal("100.00")),
        grade_timeline(TIMELINE, Decimal("100.00")),
    ):
        shown = texts(check_figure(figure))
        assert "final points (after reviews)" in shown, figure.id
        assert not [text for text in shown if "total" in text.lower()], figure.id
        assert "final grades (after reviews)" in figure.alt.lower(), figure.id
        assert "Final" in " ".join(figure.columns) and "Total" not in figure.columns


def test_distribution_median_of_an_even_count_and_tied_bins() -> None:
    totals = [Decimal("10.00"), Decimal("10.25"), Decimal("95.00"), Decimal("96.00")]
    figure = score_distribution(totals, Decimal("100.00"))
    check_figure(figure)

    assert "median 52.63" in figure.alt
    assert (
        f"most common range {span('10.00', '20.00')} and {span('90.00', '100.00')} "
        "(2 submissions each)"
    ) in figure.alt


def test_distribution_bins_an_uneven_maximum_exactly() -> None:
    # The edges are 3.333 and 6.666, shown to the cent.
    totals = [Decimal(text) for text in ("3.33", "3.34", "6.66", "6.67")]
    figure = score_distribution(totals, Decimal("33.33"))
    check_figure(figure)

    assert figure.rows[:3] == (
        (span("0.00", "3.33"), "1"),
        (span("3.33", "6.67"), "2"),
        (span("6.67", "10.00"), "1"),
    )
    assert "4 graded submissions" in figure.alt and "median 5.00" in figure.alt


def test_distribution_of_nobody_is_empty_not_an_error() -> None:
    figure = score_distribution([], Decimal("50.00"))
    check_figure(figure)

    assert [count for _, count in figure.rows] == ["0"] * 10
    assert figure.rows[-1][0] == span("45.00", "50.00")
    assert figure.alt.startswith("No graded submissions")


@pytest.mark.parametrize(
    ("totals", "maximum", "message"),
    [
        ([Decimal("100.01")], Decimal("100.00"), "outside 0..100.00: 100.01"),
        ([Decimal("-1.00")], Decimal("100.00"), "outside 0..100.00: -1.00"),
        ([], Decimal("0"), "must be positive"),
    ],
)
def test_distribution_refuses_totals_it_cannot_place(
    totals: list[Decimal], maximum: Decimal, message: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        score_distribution(totals, maximum)


def test_points_lost_sums_percentages_and_labels_each_bar() -> None:
    figure = points_lost(CRITERIA)
    root = check_figure(figure)

    assert figure.columns == ("Criterion", "Points lost", "Points possible", "Percent lost")
    assert figure.rows == (
        ("Tests pass", "12.00", "40.00", "30.0%"),
        (HOSTILE, "3.50", "10.00", "35.0%"),
        ("Style", "0.50", "8.00", "6.3%"),
        ("Docs", "0.00", "5.00", "0.0%"),
    )
    assert figure.alt == (
        "Over 4 criteria the cohort lost 16.00 of 63.00 points (25.4%). "
        "Most lost: Tests pass, 12.00 of 40.00 (30.0%)."
    )
    shown = texts(root)
    for label in ("12.00 of 40.00", "3.50 of 10.00", "0.50 of 8.00", "0.00 of 5.00"):
        assert label in shown
    names = [text for text in shown if text in {"Tests pass", HOSTILE, "Style", "Docs"}]
    assert names == ["Tests pass", HOSTILE, "Style", "Docs"]


def test_points_lost_tells_apart_criteria_with_one_title() -> None:
    figure = points_lost(
        [
            ("a", "Style", Decimal("1.00"), Decimal("2.00")),
            ("b", "Style", Decimal("0.00"), Decimal("0.00")),
        ]
    )
    root = check_figure(figure)

    assert {"Style (a)", "Style (b)"} <= set(texts(root))
    assert figure.rows[1] == ("Style", "0.00", "0.00", "n/a")


def test_points_lost_without_a_loss_says_so() -> None:
    figure = points_lost([("docs", "Docs", Decimal("0.00"), Decimal("5.00"))])
    check_figure(figure)

    assert figure.alt == "Over 1 criterion the cohort lost 0.00 of 5.00 points (0.0%)."


@pytest.mark.parametrize(
    ("criteria", "message"),
    [
        ([("a", "A", Decimal("3.00"), Decimal("2.00"))], "lost 3.00 of 2.00"),
        ([("a", "A", Decimal("-1.00"), Decimal("2.00"))], "lost -1.00 of 2.00"),
        (
            [("a", "A", Decimal(0), Decimal(1)), ("a", "B", Decimal(0), Decimal(1))],
            "repeated criterion ids: a",
        ),
    ],
)
def test_points_lost_refuses_impossible_losses(
    criteria: list[tuple[str, str, Decimal, Decimal]], message: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        points_lost(criteria)


def test_findings_by_kind_counts_in_the_given_order() -> None:
    figure = findings_by_kind([("stale", 2), ("cassette-miss", 7), ("secret-leak", 1)])
    root = check_figure(figure)

    assert figure.columns == ("Kind", "Findings")
    assert figure.rows == (("stale", "2"), ("cassette-miss", "7"), ("secret-leak", "1"))
    assert figure.alt == "10 findings of 3 kinds; the most common: cassette-miss (7)."
    shown = texts(root)
    assert [text for text in shown if text.endswith(("stale", "miss", "leak"))] == [
        "stale",
        "cassette-miss",
        "secret-leak",
    ]
    assert {"2", "7", "1"} <= set(shown)


@pytest.mark.parametrize("counts", [[], [("stale", 0)]])
def test_findings_by_kind_without_findings_says_none(counts: list[tuple[str, int]]) -> None:
    figure = findings_by_kind(counts)
    root = check_figure(figure)

    assert texts(root) == ["no findings"]
    assert figure.alt == "There were no findings."
    assert figure.rows == tuple((kind, str(count)) for kind, count in counts)


def test_findings_by_kind_refuses_negative_and_repeated_kinds() -> None:
    with pytest.raises(UsageError, match="negative finding counts for stale"):
        findings_by_kind([("stale", -1)])
    with pytest.raises(UsageError, match="repeated finding kinds: stale"):
        findings_by_kind([("stale", 1), ("stale", 2)])


def test_timeline_shows_a_grading_without_a_grade() -> None:
    figure = grade_timeline(TIMELINE, Decimal("100.00"))
    root = check_figure(figure)

    assert figure.columns == ("Grading", "Final", "Cause")
    assert figure.rows == (
        ("#1 (event 3)", "60.00", "first grading"),
        ("#2 (event 7)", "no grade", "inputs changed: cassettes/x.json"),
        ("#3 (event 9)", "72.50", "rubric changed"),
    )
    assert figure.alt == (
        "3 gradings, final grades (after reviews) out of 100.00 points: "
        "first grade 60.00 at #1 (event 3), latest 72.50 at #3 (event 9), "
        "highest 72.50. No grade at #2 (event 7)."
    )
    shown = texts(root)
    assert shown.count("no grade") == 2  # the point's label and the legend's
    assert {"60.00", "72.50"} <= set(shown)
    axis = [text for text in shown if text.startswith("#")]
    assert axis == ["#1 (event 3)", "#2 (event 7)", "#3 (event 9)"]


def test_a_reviewed_timeline_plots_finals_and_tables_total_review_and_final() -> None:
    figure = grade_timeline(REVIEWED_TIMELINE, Decimal("100.00"), reviewed=REVIEWS)
    shown = texts(check_figure(figure))

    assert figure.columns == ("Grading", "Total", "Review", "Final", "Cause")
    assert figure.rows == (
        ("#1 (event 3)", "60.00", "tests 12.00->8.00 by kim", "56.00", "first grading"),
        ("#2 (event 7)", "no grade", "\N{EN DASH}", "no grade", "inputs changed: cassettes/x.json"),
        ("#3 (event 9)", "72.50", "docs 5.00 confirmed by kim", "72.50", "rubric changed"),
    )
    assert "first grade 56.00 at #1 (event 3)" in figure.alt
    assert {"56.00", "72.50"} <= set(shown) and "60.00" not in shown  # the final is drawn
    # Reviews that change nothing anywhere keep the short table.
    plain = grade_timeline(TIMELINE, Decimal("100.00"), reviewed=[(t, "") for _, t, _ in TIMELINE])
    assert (
        plain.columns == ("Grading", "Final", "Cause")
        and plain.rows == grade_timeline(TIMELINE, Decimal("100.00")).rows
    )
    with pytest.raises(UsageError, match="2 reviewed totals for 3 gradings"):
        grade_timeline(TIMELINE, Decimal("100.00"), reviewed=REVIEWS[:2])


def test_timeline_marks_a_missing_grade_by_shape() -> None:
    root = check_figure(grade_timeline(TIMELINE, Decimal("100.00")))

    points = [
        element
        for element in root.iter(f"{SVG}path")
        if element.get("fill") in {"#0072B2", "#D55E00"}
    ]
    graded = {element.get("d") for element in points if element.get("fill") == "#0072B2"}
    missing = {element.get("d") for element in points if element.get("fill") == "#D55E00"}
    assert graded and missing and not graded & missing


def test_timeline_with_no_grade_at_all() -> None:
    figure = grade_timeline([("#1 (event 1)", None, "build failed")], Decimal("10.00"))
    check_figure(figure)

    assert figure.rows == (("#1 (event 1)", "no grade", "build failed"),)
    assert figure.alt == (
        "1 grading, final grades (after reviews) out of 10.00 points; none produced a grade."
    )


def test_the_timeline_places_each_point_on_its_grade_and_breaks_the_line_at_none() -> None:
    """The Python-drawn timeline puts each point at its final grade on the y axis (the
    plot's top at the maximum, its bottom at 0), labels it with its grade, and draws the
    line through the graded points only: a move between two gradings is a segment."""
    root = check_figure(
        grade_timeline(
            [
                ("#1", Decimal("25.00"), ""),
                ("#2", Decimal("100.00"), ""),
                ("#3", None, ""),
                ("#4", Decimal("50.00"), ""),
                ("#5", Decimal("75.00"), ""),
            ],
            Decimal("100.00"),
        )
    )
    circles = [element for element in root.iter(f"{SVG}path") if element.get("fill") == "#0072B2"][
        :-1
    ]  # the last one is the legend's
    centres = [_centre(element.get("d") or "") for element in circles]
    assert len(centres) == 4
    ys = [y for _, y in centres]
    bottom = ys[0] + (ys[0] - ys[1]) / 3  # 25 is a quarter of the way up
    assert ys[2] == pytest.approx(bottom - (bottom - ys[1]) / 2)  # 50: half way
    assert ys[3] == pytest.approx(bottom - (bottom - ys[1]) * 3 / 4)
    xs = [x for x, _ in centres]
    assert xs == sorted(xs) and len(set(xs)) == 4
    line = next(
        element.get("d") or ""
        for element in root.iter(f"{SVG}path")
        if element.get("stroke") == "#0072B2"
    )
    assert line.count("M") == 2 and line.count("L") == 2  # #1-#2, then #4-#5
    labels = [text for text in texts(root) if text.endswith(".00")]
    assert labels == ["25.00", "100.00", "50.00", "75.00"]
    ticks = [text for text in texts(root) if text.isdigit()]
    assert ticks == [str(10 * i) for i in range(11)]


def _centre(path: str) -> tuple[float, float]:
    """A circle's centre from its path: ``M x-r,y a r,r 0 1,0 2r,0 ...``."""
    x, y = (float(v) for v in path[1 : path.index("a")].split(","))
    radius = float(path[path.index("a") + 1 :].split(",")[0])
    return x + radius, y


def test_timeline_of_nothing_and_of_impossible_points() -> None:
    figure = grade_timeline([], Decimal("10.00"))
    check_figure(figure)
    assert figure.rows == () and figure.alt == "No gradings recorded."

    with pytest.raises(UsageError, match=re.escape("outside 0..10.00 at #1")):
        grade_timeline([("#1", Decimal("10.50"), "")], Decimal("10.00"))
    with pytest.raises(UsageError, match="repeated grading labels: #1"):
        grade_timeline([("#1", None, ""), ("#1", None, "")], Decimal("10.00"))


def test_rubric_and_report_text_is_escaped_in_the_svg_and_raw_in_the_rows() -> None:
    worst = [("hostile", HOSTILE, Decimal("9.00"), Decimal("10.00"))]
    for figure in (points_lost(worst), findings_by_kind([(HOSTILE, 2)])):
        root = check_figure(figure)
        assert HOSTILE not in figure.svg
        assert "<script>" not in figure.svg
        assert HOSTILE_ESCAPED in figure.svg
        assert HOSTILE in texts(root)
        assert HOSTILE in figure.alt and root.get("aria-label") == figure.alt
        assert figure.rows[0][0] == HOSTILE


def test_the_label_and_title_are_escaped_attribute_and_text() -> None:
    alt = 'a "quoted" <b>\nline & more'
    svg = _accessible(
        '<svg xmlns="http://www.w3.org/2000/svg" role="graphics-document" '
        'aria-label="old"><rect/></svg>',
        HOSTILE,
        alt,
    )
    root = ET.fromstring(svg)

    assert root.get("role") == "img" and root.get("aria-label") == alt
    assert root[0].text == HOSTILE and HOSTILE not in svg
    assert svg.count("aria-label") == 1 and svg.count("role=") == 1


@pytest.mark.parametrize("missing", ["altair", "vl_convert"])
def test_without_the_extra_every_chart_names_the_install(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)
    calls: list[Callable[[], Figure]] = [
        lambda: score_distribution(TOTALS, Decimal("100.00")),
        lambda: points_lost(CRITERIA),
        lambda: findings_by_kind([]),
    ]
    for call in calls:
        with pytest.raises(DashboardUnavailable) as caught:
            call()
        assert isinstance(caught.value, UsageError)
        assert INSTALL in str(caught.value) and "make test" in str(caught.value)
    assert INSTALL == "pip install 'gradekit[dashboard]'"
    # A student's timeline is drawn in Python: no chart engine starts for each page.
    assert grade_timeline(TIMELINE, Decimal("100.00")) == grade_timeline(
        TIMELINE, Decimal("100.00")
    )
    check_figure(grade_timeline(TIMELINE, Decimal("100.00")))
    check_figure(grade_timeline([], Decimal("100.00")))


CHILD = """\
import json, sys
import grader.dashboard._charts
lazy = "altair" not in sys.modules and "vl_convert" not in sys.modules
from tests.grader.dashboard.test_dashboard_charts import sample_figures
print(json.dumps({"lazy": lazy, "svgs": [figure.svg for figure in sample_figures()]}))
"""


@pytest.mark.slow
def test_the_same_input_gives_the_same_bytes_in_any_process() -> None:
    settings = [
        {"PYTHONHASHSEED": "0", "TZ": "UTC0", "LC_ALL": "C", "LANG": "C"},
        {"PYTHONHASHSEED": "4242", "TZ": "XYZ-13:45", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
    ]
    outputs = []
    for setting in settings:
        done = subprocess.run(
            [sys.executable, "-c", CHILD],
            cwd=REPO,
            env={**os.environ, **setting},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))

    assert all(output["lazy"] for output in outputs)
    first, second = (output["svgs"] for output in outputs)
    assert len(first) == 6
    assert first == second
    assert first == [figure.svg for figure in sample_figures()]
