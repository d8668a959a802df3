"""Rows, targets and Markdown rendering: every table has the same six columns."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench._timing import Stats

__all__ = [
    "NO_TARGET",
    "PeerRows",
    "Row",
    "Table",
    "Target",
    "fmt_bytes",
    "fmt_ns",
    "fmt_size",
    "note_row",
    "render",
    "timed",
]

_HEADER = ("operation", "size", "median", "p90", "target", "verdict")
_ALIGN = ("---", "---", "---:", "---:", "---", "---")  # numbers right-aligned


@dataclass(frozen=True, slots=True)
class Target:
    """An upper limit on the median, in nanoseconds; ``None`` when the brief sets none."""

    limit_ns: float | None

    @property
    def label(self) -> str:
        """The limit as people read it."""
        return "—" if self.limit_ns is None else f"< {fmt_ns(self.limit_ns)}"

    def verdict(self, median_ns: float) -> str:
        """``meets`` or ``misses``; ``—`` without a limit."""
        if self.limit_ns is None:
            return "—"
        return "meets" if median_ns < self.limit_ns else "misses"


NO_TARGET = Target(None)


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a table, already formatted."""

    operation: str
    size: str
    median: str
    p90: str
    target: str = "—"
    verdict: str = "—"


@dataclass(frozen=True, slots=True)
class Table:
    """A titled table and the short notes printed under it."""

    title: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PeerRows:
    """What one peer contributes to each section's table."""

    replay: list[Row] = field(default_factory=list)
    record: list[Row] = field(default_factory=list)
    load: list[Row] = field(default_factory=list)
    peers: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def not_installed(cls, peer: str, reason: str) -> PeerRows:
        """One 'not installed' row in every table the peer would have appeared in."""
        row = note_row(f"{peer}: not installed ({reason})")
        return cls(replay=[row], record=[row], load=[row], peers=[row])


def timed(operation: str, size: str, stats: Stats, target: Target = NO_TARGET) -> Row:
    """A row for a per-call or per-load measurement."""
    return Row(
        operation,
        size,
        fmt_ns(stats.median_ns),
        fmt_ns(stats.p90_ns) if stats.samples > 1 else "1 run",
        target.label,
        target.verdict(stats.median_ns),
    )


def note_row(operation: str, size: str = "—", value: str = "not measured") -> Row:
    """A row that reports something other than a time: absent peers, stopped runs."""
    return Row(operation, size, value, "—")


def render(table: Table) -> str:
    """The table as GitHub Markdown, notes as a bullet list under it."""
    rows = table.rows
    lines = [f"## {table.title}", "", _line(_HEADER), _line(_ALIGN)]
    lines += [_line((r.operation, r.size, r.median, r.p90, r.target, r.verdict)) for r in rows]
    if table.notes:
        lines.append("")
        lines += [f"- {note}" for note in table.notes]
    return "\n".join(lines)


def _line(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def fmt_ns(ns: float) -> str:
    """A duration with three significant digits in the unit that suits it; rounded first,
    so 999.6 µs is 1 ms, never "1e+03 µs"."""
    rounded = float(f"{ns:.3g}")
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(rounded) >= scale:
            return f"{rounded / scale:.3g} {unit}"
    return f"{rounded:.3g} ns"


def fmt_size(count: int) -> str:
    """``100000`` as ``100 000``, the way the brief writes sizes."""
    return f"{count:,}".replace(",", " ")


def fmt_bytes(count: float) -> str:
    """A byte count in MiB or KiB."""
    if count >= 1 << 20:
        return f"{count / (1 << 20):.1f} MiB"
    return f"{count / 1024:.0f} KiB"
