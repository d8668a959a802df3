"""A student's timeline drawn as SVG in Python: no chart engine per page.

At ten thousand submissions the dashboard draws ten thousand timelines; starting Vega in
vl-convert for each one took 40-165 ms, most of a build. The timeline is a handful of
points on a fixed frame, so it is written here directly, in the visual language of the
Altair charts (``grader.dashboard._charts``: the Okabe-Ito blue and vermillion, the same
ink, grid and axis colours, sans-serif at the same sizes). Every number is rounded to the
hundredth of a pixel and every text escaped, so the same points give the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from xml.sax.saxutils import escape

__all__ = ["BLUE", "INK", "VERMILLION", "attribute", "message_svg", "timeline_svg"]

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour
# vision deficiency. Every chart of the dashboard draws in these.
BLUE = "#0072B2"
VERMILLION = "#D55E00"
INK = "#222222"
GRID = "#e5e5e5"
DOMAIN = "#767676"

WIDTH = 480  # the plot, as the Altair chart's
HEIGHT = 220
LEFT = 56  # room for the tick labels and the rotated axis title
TOP = 40  # the legend, then room for a point's label above the top line
BOTTOM = 100  # the slanted grading labels and the axis title
RIGHT = 24
RADIUS = 5.05  # a filled circle of area 80, the Altair point's size
LABEL_CHARS = 23  # about the 140 px Altair let a slanted label have at 11 px
ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
_ATTRIBUTE = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}


def timeline_svg(
    labels: Sequence[str],
    values: Sequence[Decimal | None],
    texts: Sequence[str],
    maximum: Decimal,
    *,
    title: str,
    alt: str,
    axis_x: str,
    axis_y: str,
    graded: str,
    missing: str,
) -> str:
    """The timeline: one point per label at its value (a cross at 0 where it is None, in
    vermillion), a line through the values that breaks at a missing one, ``texts`` above
    the points, a legend naming ``graded`` and ``missing``, and the root an image labelled
    ``alt`` and titled ``title``."""
    width, height = LEFT + WIDTH + RIGHT, TOP + HEIGHT + BOTTOM
    step = WIDTH / len(labels) if labels else WIDTH
    xs = [LEFT + step * (i + 0.5) for i in range(len(labels))]

    def y_of(value: Decimal) -> float:
        return TOP + HEIGHT - float(value / maximum) * HEIGHT

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{attribute(alt)}" '
        'font-family="sans-serif">',
        f"<title>{escape(title)}</title><desc>{escape(alt)}</desc>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    # The y axis: grid lines and ticks on round values, the title along it.
    out.append(f'<g fill="{INK}" font-size="11" text-anchor="end">')
    for tick in _ticks(maximum):
        at = _n(y_of(tick))
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + WIDTH}" y1="{at}" y2="{at}" '
            f'stroke="{GRID}"/><line x1="{LEFT - 5}" x2="{LEFT}" y1="{at}" y2="{at}" '
            f'stroke="{DOMAIN}"/><text x="{LEFT - 7}" y="{_n(y_of(tick) + 3.5)}">'
            f"{_plain(tick)}</text>"
        )
    out.append("</g>")
    out.append(
        f'<text transform="translate({LEFT - 38},{_n(TOP + HEIGHT / 2)}) rotate(-90)" '
        f'text-anchor="middle" font-size="12" fill="{INK}">{escape(axis_y)}</text>'
    )
    # The x axis: one slanted label per grading, then the title.
    bottom = TOP + HEIGHT
    out.append(f'<path d="M{LEFT},{TOP}V{bottom}H{LEFT + WIDTH}" fill="none" stroke="{DOMAIN}"/>')
    out.append(f'<g fill="{INK}" font-size="11" text-anchor="end">')
    for x, label in zip(xs, labels, strict=True):
        shown = label if len(label) <= LABEL_CHARS else f"{label[: LABEL_CHARS - 1]}{ELLIPSIS}"
        out.append(
            f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{bottom}" y2="{bottom + 5}" '
            f'stroke="{DOMAIN}"/><text transform="translate({_n(x)},{bottom + 15}) '
            f'rotate(-30)">{escape(shown)}</text>'
        )
    out.append("</g>")
    out.append(
        f'<text x="{_n(LEFT + WIDTH / 2)}" y="{height - 8}" text-anchor="middle" '
        f'font-size="12" fill="{INK}">{escape(axis_x)}</text>'
    )
    # The line, broken where a grading has no grade.
    path, pen = [], "M"
    for x, value in zip(xs, values, strict=True):
        if value is None:
            pen = "M"
            continue
        path.append(f"{pen}{_n(x)},{_n(y_of(value))}")
        pen = "L"
    if path:
        out.append(f'<path d="{"".join(path)}" fill="none" stroke="{BLUE}" stroke-width="2"/>')
    # The points, told apart by shape as well as colour, each with its number above.
    for x, value, text in zip(xs, values, texts, strict=True):
        y = y_of(value if value is not None else Decimal(0))
        shape = _circle(x, y) if value is not None else _cross(x, y)
        colour = BLUE if value is not None else VERMILLION
        out.append(
            f'<path d="{shape}" fill="{colour}"/><text x="{_n(x)}" y="{_n(y - 8)}" '
            f'text-anchor="middle" font-size="11" fill="{INK}">{escape(text)}</text>'
        )
    # The legend, above the plot.
    out.append(
        f'<g font-size="11" fill="{INK}"><path d="{_circle(LEFT + 6, 12)}" '
        f'fill="{BLUE}"/><text x="{LEFT + 16}" y="16">{escape(graded)}</text>'
        f'<path d="{_cross(LEFT + 86, 12)}" fill="{VERMILLION}"/>'
        f'<text x="{LEFT + 96}" y="16">{escape(missing)}</text></g>'
    )
    out.append("</svg>")
    return "".join(out)


def message_svg(text: str, *, title: str, alt: str) -> str:
    """A small image that only says ``text``: the chart of an empty input."""
    width, height = WIDTH // 2, 40
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{attribute(alt)}" '
        f'font-family="sans-serif"><title>{escape(title)}</title><desc>{escape(alt)}</desc>'
        f'<rect width="{width}" height="{height}" fill="white"/><text x="{width // 2}" '
        f'y="{height // 2 + 4}" text-anchor="middle" font-size="13" fill="{INK}">'
        f"{escape(text)}</text></svg>"
    )


def _ticks(maximum: Decimal) -> list[Decimal]:
    """Round values from 0 to ``maximum``: a step of 1, 2 or 5 times a power of ten that
    gives at most ten ticks."""
    power = Decimal(1).scaleb(maximum.adjusted() - 1)
    step = next(power * m for m in (1, 2, 5, 10, 20, 50) if maximum / (power * m) <= 10)
    count = int(maximum // step)
    return [step * i for i in range(count + 1)]


def _plain(value: Decimal) -> str:
    """A tick's value without trailing zeros: ``60``, ``2.5``."""
    return f"{value.normalize():f}"


def _circle(x: float, y: float) -> str:
    r = _n(RADIUS)
    return (
        f"M{_n(x - RADIUS)},{_n(y)}a{r},{r} 0 1,0 {_n(2 * RADIUS)},0"
        f"a{r},{r} 0 1,0 {_n(-2 * RADIUS)},0Z"
    )


def _cross(x: float, y: float) -> str:
    """A plus-shaped cross of the circle's size, its arms a third as wide."""
    a, b = RADIUS * 1.2, RADIUS * 0.4
    corners = [
        (-b, -a),
        (b, -a),
        (b, -b),
        (a, -b),
        (a, b),
        (b, b),
        (b, a),
        (-b, a),
        (-b, b),
        (-a, b),
        (-a, -b),
        (-b, -b),
    ]
    return "M" + "L".join(f"{_n(x + dx)},{_n(y + dy)}" for dx, dy in corners) + "Z"


def _n(value: float) -> str:
    """A coordinate to the hundredth of a pixel, without trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def attribute(text: str) -> str:
    """``text`` escaped for a double-quoted XML attribute, its line breaks and tabs kept."""
    return escape(text, _ATTRIBUTE)
