"""The cohort dashboard's charts: Vega-Lite specs built with Vega-Altair, drawn as static SVG.

The dashboard is a static site that opens from the file system, so each chart is an SVG
drawn when the site is built and inlined into its page. The cohort-wide charts (a few per
site) go through Vega; a student's timeline, one per page and ten thousand for a large
cohort, is drawn in Python by ``grader.dashboard._svg`` in the same colours and fonts,
without starting an engine each time. Altair writes the spec (data
inline, fixed sizes, the Okabe-Ito colour-blind-safe palette, numbers as text on the marks)
and vl-convert renders it in its embedded Vega engine: no browser, no network (external data
is refused), and the same input gives the same bytes whatever the hash seed, time zone or
locale. Both libraries are the ``gradekit[dashboard]`` extra, imported on first use.

Each ``Figure`` carries its text alternative and the table of the numbers behind it; the SVG
root is ``role="img"``, labelled with the alternative and titled.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from xml.sax.saxutils import escape

from gradekit import UsageError
from grader._errors import DashboardUnavailable
from grader._model import CENT
from grader.dashboard._svg import BLUE, INK, attribute, message_svg, timeline_svg
from grader.outputs import points_text

__all__ = [
    "INSTALL",
    "DashboardUnavailable",
    "Figure",
    "findings_by_kind",
    "grade_timeline",
    "points_lost",
    "score_distribution",
]

INSTALL = "pip install 'gradekit[dashboard]'"
BINS = 10
WIDTH = 480
BAR_STEP = 26
HEIGHT = 200
NO_GRADE = "no grade"
DASH = "\N{EN DASH}"
STATUSES = ["graded", NO_GRADE]
FINAL_POINTS = "final points (after reviews)"  # what the distribution and the timeline plot
TIMELINE = "Grades over time"

# The colours (Okabe & Ito's, in ``_svg``) are the timeline's: one visual language.

CONFIG: dict[str, Any] = {
    "background": "white",
    "font": "sans-serif",
    "aria": False,
    "view": {"stroke": None},
    "axis": {
        "labelColor": INK,
        "titleColor": INK,
        "labelFontSize": 11,
        "titleFontSize": 12,
        "titleFontWeight": "normal",
        "gridColor": "#e5e5e5",
        "domainColor": "#767676",
        "tickColor": "#767676",
    },
    "legend": {"labelColor": INK, "labelFontSize": 11, "symbolStrokeWidth": 2},
    "text": {"color": INK, "fontSize": 11},
}

_ROOT = re.compile(r"<svg\b[^>]*>")
_ROOT_ARIA = re.compile(r'\s(?:role|aria-label|aria-labelledby|aria-describedby)="[^"]*"')
_PERCENT = Decimal("0.1")


@dataclass(frozen=True, slots=True)
class Figure:
    """A rendered chart with its text alternative and the table of its numbers."""

    id: str
    title: str
    svg: str
    alt: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def score_distribution(totals: Sequence[Decimal], maximum: Decimal) -> Figure:
    """A histogram of graded submissions' final grades (``totals``: each the automated
    total with its current reviews, the gradebook's ``final``) over ``0..maximum`` in ten
    equal bins, the last closed."""
    _require_positive(maximum)
    outside = [points_text(total) for total in totals if not 0 <= total <= maximum]
    if outside:
        raise UsageError(f"totals outside 0..{points_text(maximum)}: {', '.join(outside)}")
    edges = [maximum * i / BINS for i in range(BINS + 1)]
    counts = [0] * BINS
    for total in totals:
        counts[min(int(total * BINS // maximum), BINS - 1)] += 1
    labels = [f"{cents(edges[i])}{DASH}{cents(edges[i + 1])}" for i in range(BINS)]
    rows = tuple((label, str(count)) for label, count in zip(labels, counts, strict=True))

    if totals:
        median = cents(statistics.median(totals))
        most = max(counts)
        modal = " and ".join(
            label for label, count in zip(labels, counts, strict=True) if count == most
        )
        each = " each" if modal.count(" and ") else ""
        alt_text = (
            f"Final grades (after reviews) of {_count(len(totals), 'graded submission')}"
            f", out of {points_text(maximum)} points: median {median}; most common "
            f"range {modal} ({_count(most, 'submission')}{each})."
        )
    else:
        alt_text = (
            f"No graded submissions: all ten ranges of 0.00{DASH}{points_text(maximum)} "
            "final points are empty."
        )

    alt = _altair()
    data = alt.Data(
        values=[
            {
                "start": float(edges[i]),
                "end": float(edges[i + 1]),
                "middle": float((edges[i] + edges[i + 1]) / 2),
                "count": counts[i],
                "label": str(counts[i]),
            }
            for i in range(BINS)
        ]
    )
    x = alt.X(
        "start:Q",
        title=FINAL_POINTS,
        scale=alt.Scale(domain=[0, float(maximum)], nice=False, zero=True),
        axis=alt.Axis(
            values=[float(_cent(edge)) for edge in edges],
            format=".2~f",
            labelOverlap=True,
            grid=False,
        ),
    )
    y = alt.Y("count:Q", title="submissions", **_whole_numbers(alt, max(counts), HEIGHT))
    bars = (
        alt.Chart(data)
        .mark_bar(color=BLUE, stroke="white", strokeWidth=1)
        .encode(x=x, x2="end:Q", y=y, y2=alt.datum(0))
    )
    numbers = (
        alt.Chart(data)
        .mark_text(baseline="bottom", dy=-3)
        .encode(
            x=alt.X("middle:Q", scale=alt.Scale(domain=[0, float(maximum)], nice=False)),
            y="count:Q",
            text="label:N",
        )
    )
    chart = alt.layer(bars, numbers).properties(width=WIDTH, height=HEIGHT)
    return _figure(
        "distribution", "Score distribution", chart, alt_text, ("Final points", "Submissions"), rows
    )


def points_lost(criteria: Sequence[tuple[str, str, Decimal, Decimal]]) -> Figure:
    """Points lost per criterion over the cohort, as labelled bars in rubric order.

    Each item is (criterion id, title, points lost, points possible), both summed over the
    cohort.
    """
    _require_unique([criterion for criterion, _, _, _ in criteria], "criterion ids")
    for criterion, _, lost, possible in criteria:
        if not 0 <= lost <= possible:
            raise UsageError(
                f"criterion {criterion!r} lost {lost} of {possible} points: "
                "a loss runs from 0 to the points possible"
            )
    titles = [title for _, title, _, _ in criteria]
    names = [
        title if titles.count(title) == 1 else f"{title} ({criterion})"
        for criterion, title, _, _ in criteria
    ]
    rows = tuple(
        (title, points_text(lost), points_text(possible), _percent(lost, possible))
        for _, title, lost, possible in criteria
    )
    columns = ("Criterion", "Points lost", "Points possible", "Percent lost")
    if not criteria:
        return _figure(
            "points-lost",
            "Points lost by criterion",
            _message("no criteria"),
            "No criteria to show.",
            columns,
            rows,
        )

    total_lost = sum((lost for _, _, lost, _ in criteria), Decimal(0))
    total_possible = sum((possible for _, _, _, possible in criteria), Decimal(0))
    alt_text = (
        f"Over {_count(len(criteria), 'criterion', 'criteria')} the cohort lost "
        f"{points_text(total_lost)} of {points_text(total_possible)} points "
        f"({_percent(total_lost, total_possible)})"
    )
    most = max(lost for _, _, lost, _ in criteria)
    if most:
        worst = "; ".join(
            f"{title}, {points_text(lost)} of {points_text(possible)} ({_percent(lost, possible)})"
            for _, title, lost, possible in criteria
            if lost == most
        )
        alt_text += f". Most lost: {worst}."
    else:
        alt_text += "."

    alt = _altair()
    data = alt.Data(
        values=[
            {
                "name": name,
                "lost": float(lost),
                "label": f"{points_text(lost)} of {points_text(possible)}",
            }
            for name, (_, _, lost, possible) in zip(names, criteria, strict=True)
        ]
    )
    base = alt.Chart(data).encode(
        y=alt.Y("name:N", sort=names, title=None, axis=alt.Axis(labelLimit=220, ticks=False)),
        x=alt.X(
            "lost:Q",
            title="points lost (cohort total)",
            scale=alt.Scale(domainMin=0, domainMax=max(float(most), 1.0)),
        ),
    )
    chart = alt.layer(
        base.mark_bar(color=BLUE),
        base.mark_text(align="left", baseline="middle", dx=4).encode(text="label:N"),
    ).properties(width=WIDTH - 120, height=BAR_STEP * len(criteria))
    return _figure("points-lost", "Points lost by criterion", chart, alt_text, columns, rows)


def findings_by_kind(counts: Sequence[tuple[str, int]]) -> Figure:
    """The cohort's findings per kind, as labelled bars in the given order."""
    _require_unique([kind for kind, _ in counts], "finding kinds")
    negative = [kind for kind, count in counts if count < 0]
    if negative:
        raise UsageError(f"negative finding counts for {', '.join(negative)}")
    rows = tuple((kind, str(count)) for kind, count in counts)
    columns = ("Kind", "Findings")
    total = sum(count for _, count in counts)
    if not total:
        return _figure(
            "findings",
            "Findings by kind",
            _message("no findings"),
            "There were no findings.",
            columns,
            rows,
        )

    most = max(count for _, count in counts)
    common = " and ".join(kind for kind, count in counts if count == most)
    alt_text = (
        f"{_count(total, 'finding')} of {_count(len(counts), 'kind')}; the most "
        f"common: {common} ({most}{' each' if common.count(' and ') else ''})."
    )

    alt = _altair()
    kinds = [kind for kind, _ in counts]
    data = alt.Data(
        values=[{"kind": kind, "count": count, "label": str(count)} for kind, count in counts]
    )
    base = alt.Chart(data).encode(
        y=alt.Y("kind:N", sort=kinds, title=None, axis=alt.Axis(labelLimit=220, ticks=False)),
        x=alt.X("count:Q", title="findings", **_whole_numbers(alt, most, WIDTH - 120)),
    )
    chart = alt.layer(
        base.mark_bar(color=BLUE),
        base.mark_text(align="left", baseline="middle", dx=4).encode(text="label:N"),
    ).properties(width=WIDTH - 120, height=BAR_STEP * len(counts))
    return _figure("findings", "Findings by kind", chart, alt_text, columns, rows)


def grade_timeline(
    points: Sequence[tuple[str, Decimal | None, str]],
    maximum: Decimal,
    reviewed: Sequence[tuple[Decimal | None, str]] = (),
) -> Figure:
    """One student's final grades in ledger order; a grading without a grade is a cross at 0.

    Each item of ``points`` is (label, final grade or None, cause): the final grade is the
    automated total with the current reviews of that grading's report. The line breaks where
    there is no grade. ``reviewed``, one item per point when given, is (automated total,
    its reviews in a few words): where a review changed a grade or confirmed one, the table
    shows the total, the review and the final side by side.
    """
    _require_positive(maximum)
    labels = [label for label, _, _ in points]
    _require_unique(labels, "grading labels")
    if reviewed and len(reviewed) != len(points):
        raise UsageError(
            f"{len(reviewed)} reviewed totals for {len(points)} gradings: give "
            "one (total, reviews) per grading, or none"
        )
    outside = [
        label for label, total, _ in points if total is not None and not 0 <= total <= maximum
    ]
    if outside:
        raise UsageError(f"grades outside 0..{points_text(maximum)} at {', '.join(outside)}")
    shown = [NO_GRADE if total is None else points_text(total) for _, total, _ in points]
    rows: tuple[tuple[str, ...], ...]
    if reviewed and any(
        review or total != final
        for (total, review), (_, final, _) in zip(reviewed, points, strict=True)
    ):
        rows = tuple(
            (label, NO_GRADE if total is None else points_text(total), review or DASH, text, cause)
            for (label, _, cause), (total, review), text in zip(
                points, reviewed, shown, strict=True
            )
        )
        columns: tuple[str, ...] = ("Grading", "Total", "Review", "Final", "Cause")
    else:
        rows = tuple(
            (label, text, cause) for (label, _, cause), text in zip(points, shown, strict=True)
        )
        columns = ("Grading", "Final", "Cause")
    if not points:
        empty = "No gradings recorded."
        return Figure(
            "timeline",
            TIMELINE,
            message_svg("no gradings", title=TIMELINE, alt=empty),
            empty,
            columns,
            rows,
        )

    graded = [(label, total) for label, total, _ in points if total is not None]
    missing = [label for label, total, _ in points if total is None]
    alt_text = (
        f"{_count(len(points), 'grading')}, final grades (after reviews) out of "
        f"{points_text(maximum)} points"
    )
    if graded:
        highest = max(total for _, total in graded)
        alt_text += (
            f": first grade {points_text(graded[0][1])} at {graded[0][0]}, latest "
            f"{points_text(graded[-1][1])} at {graded[-1][0]}, highest "
            f"{points_text(highest)}."
        )
    else:
        alt_text += "; none produced a grade."
    if missing and graded:
        alt_text += f" No grade at {', '.join(missing)}."

    svg = timeline_svg(
        labels,
        [total for _, total, _ in points],
        shown,
        maximum,
        title=TIMELINE,
        alt=alt_text,
        axis_x="grading (ledger order)",
        axis_y=FINAL_POINTS,
        graded=STATUSES[0],
        missing=NO_GRADE,
    )
    return Figure("timeline", TIMELINE, svg, alt_text, columns, rows)


def _figure(
    figure_id: str,
    title: str,
    chart: Any,
    alt_text: str,
    columns: tuple[str, ...],
    rows: tuple[tuple[str, ...], ...],
) -> Figure:
    return Figure(figure_id, title, _render(chart, title, alt_text), alt_text, columns, rows)


def _render(chart: Any, title: str, alt_text: str) -> str:
    """The chart as SVG, with the installed theme replaced by ``CONFIG`` and no network."""
    vl_convert = _vl_convert()
    spec: dict[str, Any] = chart.to_dict()
    spec["config"] = CONFIG
    svg: str = vl_convert.vegalite_to_svg(
        spec, allowed_base_urls=[], format_locale="en-US", time_format_locale="en-US"
    )
    return _accessible(svg, title, alt_text)


def _accessible(svg: str, title: str, alt_text: str) -> str:
    """``svg`` without an XML declaration, its root an image labelled ``alt_text``, titled."""
    svg = svg.strip()
    if svg.startswith("<?xml"):
        svg = svg[svg.index("?>") + 2 :].lstrip()
    root = _ROOT.match(svg)
    if root is None or root.group(0).endswith("/>"):
        raise RuntimeError(f"vl-convert returned no <svg> element: {svg[:80]!r}")
    label = attribute(alt_text)
    tag = _ROOT_ARIA.sub("", root.group(0)[:-1])
    return (
        f'{tag} role="img" aria-label="{label}"><title>{escape(title)}</title>{svg[root.end() :]}'
    )


def _message(text: str) -> Any:
    """A small chart that only says ``text``: the figure of an empty input."""
    alt = _altair()
    return (
        alt.Chart(alt.Data(values=[{"text": text}]))
        .mark_text(fontSize=13, color=INK)
        .encode(text="text:N")
        .properties(width=WIDTH // 2, height=40)
    )


def _whole_numbers(alt: Any, top: int, length: int) -> dict[str, Any]:
    """Scale and axis of a count: ticks on whole numbers only (Vega's would fall on halves)."""
    if top * 40 > length:
        return {"scale": alt.Scale(domainMin=0), "axis": alt.Axis(format="d", tickMinStep=1)}
    return {
        "scale": alt.Scale(domain=[0, max(top, 1)], nice=False),
        "axis": alt.Axis(format="d", values=list(range(max(top, 1) + 1))),
    }


def _altair() -> Any:
    try:
        import altair
    except ImportError as err:
        raise _unavailable("altair") from err
    return altair


def _vl_convert() -> Any:
    try:
        import vl_convert
    except ImportError as err:
        raise _unavailable("vl-convert-python") from err
    return vl_convert


def _unavailable(package: str) -> DashboardUnavailable:
    return DashboardUnavailable(
        f"the dashboard draws its charts with altair and vl-convert, and {package} is not "
        f"installed: run {INSTALL} (make test installs it)"
    )


def _require_positive(maximum: Decimal) -> None:
    if maximum <= 0:
        raise UsageError(f"the maximum must be positive, not {maximum}")


def _require_unique(values: Sequence[str], what: str) -> None:
    repeated = sorted({value for value in values if values.count(value) > 1})
    if repeated:
        raise UsageError(f"repeated {what}: {', '.join(repeated)}")


def _cent(value: Decimal) -> Decimal:
    """A computed value (a bin edge, a median) rounded half up to the cent."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def cents(value: Decimal) -> str:
    exact = _cent(value)
    return f"{abs(exact) if exact == 0 else exact:f}"


def _percent(part: Decimal, whole: Decimal) -> str:
    if not whole:
        return "n/a"
    return f"{(part * 100 / whole).quantize(_PERCENT, rounding=ROUND_HALF_UP)}%"


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
