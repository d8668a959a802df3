"""Solution regions: finding them in one text file and replacing them.

A region is a line holding only the BEGIN marker, the lines it hides, and a line holding
only the END marker; Python and every other text file spell them as ``#`` comments,
Markdown as HTML comments (README, "Handing out the lab"). In Python a region becomes a
``raise NotImplementedError`` with the BEGIN line's hint, at the BEGIN line's indentation
(at module level: nothing), or the lines of its optional STUB block, uncommented.

Anything that looks like a marker but is not one exactly is refused, naming the file and
line: ``#BEGIN SOLUTION``, ``# begin solution``, ``# BEGIN-SOLUTION``, ``-- BEGIN
SOLUTION`` in a file whose comments are not ``#``. A near miss would otherwise pass as a
comment and ship the solution under it.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from gradekit import UsageError

__all__ = ["MARKDOWN", "Removed", "Stripped", "compiles", "strip", "strip_solutions"]

_WORD = "SOLUTION"  # spelled apart so that this file holds no marker line of its own
_BEGIN_PY = re.compile(
    rf"(?P<indent>[ \t]*)# BEGIN {_WORD}(?:[ \t]+hint:[ \t]*(?P<hint>.*?))?[ \t]*"
)
_END_PY = re.compile(rf"[ \t]*# END {_WORD}[ \t]*")
_STUB_PY = re.compile(r"(?P<indent>[ \t]*)# STUB[ \t]*")
_BEGIN_MD = re.compile(
    rf"[ \t]*<!--[ \t]*BEGIN {_WORD}(?:[ \t]+hint:[ \t]*(?P<hint>.*?))?[ \t]*-->[ \t]*"
)
_END_MD = re.compile(rf"[ \t]*<!--[ \t]*END {_WORD}[ \t]*-->[ \t]*")
_STUB_MD = re.compile(r"[ \t]*<!--[ \t]*STUB[ \t]*")
_STUB_MD_CLOSE = re.compile(r"[ \t]*-->[ \t]*")
# What a marker looks like to a reader: a comment opener, then BEGIN or END and SOLUTION in
# any case and with any separator, or STUB. Markdown takes only the HTML comment (a "#"
# there is a heading, or a line of a fenced example).
_NEAR = rf"(?:(?i:begin|end)[ \t_-]*(?i:{_WORD})\b|STUB\b)"
_NEAR_HASH = re.compile(rf"[ \t]*#+[ \t]*{_NEAR}")
_NEAR_MD = re.compile(rf"[ \t]*<!--[ \t]*{_NEAR}")
# Comment openers of other languages: no marker is read there, so a region would ship.
_NEAR_OTHER = re.compile(rf"[ \t]*(?://+|--+|;+|%+|/\*+|\*|<!--)[ \t]*{_NEAR}")

MARKDOWN = (".md", ".markdown")
_DEFAULT_HINT = "write this part"
_LINE = 100  # the kit's ruff line length: a generated stub stays within it


@dataclass(frozen=True, slots=True)
class Removed:
    """One solution region's hidden lines (its STUB, which ships, left out)."""

    where: str  # its BEGIN line: "lab/agent.py:47"
    lines: tuple[str, ...]  # without their line ends


@dataclass(frozen=True, slots=True)
class Stripped:
    """A text file with its solution regions replaced."""

    text: str
    origins: tuple[int, ...]  # each line's number in the source
    removed: tuple[Removed, ...]
    stubs: tuple[str, ...]  # the lines the STUB blocks put in: they ship on purpose


@dataclass(slots=True)
class _Region:
    line: int  # the BEGIN line's number
    indent: str
    hint: str
    body: list[str]
    stub_line: int = 0  # the STUB marker's line, 0 when there is none
    stub_indent: str = ""
    stub: list[tuple[str, int]] | None = None  # (line, its number in the source)
    stub_closed: bool = False  # Markdown: the STUB comment's closing --> was seen


def strip_solutions(text: str, name: str) -> tuple[str, int]:
    """``text`` with its solution regions replaced, and how many there were.

    ``name`` (a relative path) picks the syntax (Markdown for ``.md``, ``#`` comments for
    every other file, stubs that raise for ``.py``) and names the file in errors.
    """
    stripped = strip(text, name)
    return stripped.text, len(stripped.removed)


def strip(text: str, name: str, *, at: Callable[[int], str] | None = None) -> Stripped:
    """``strip_solutions`` with where each line came from and what each region hid.
    ``at(line)`` names a line in errors (default ``name:line``): a notebook's cell line."""
    markdown = name.endswith(MARKDOWN)
    python = name.endswith(".py")
    place = at or (lambda number: f"{name}:{number}")
    out: list[tuple[str, int]] = []
    removed: list[Removed] = []
    stubs: list[str] = []
    region: _Region | None = None
    for number, raw in enumerate(text.splitlines(keepends=True), 1):
        line = raw.rstrip("\r\n")
        where = place(number)
        if (
            region is not None
            and region.stub is not None
            and not region.stub_closed
            and _stub_line(line, number, region, markdown, where)
        ):
            continue
        begin = (_BEGIN_MD if markdown else _BEGIN_PY).fullmatch(line)
        end = (_END_MD if markdown else _END_PY).fullmatch(line)
        stub = (_STUB_MD if markdown else _STUB_PY).fullmatch(line)
        if begin:
            if region is not None:
                raise UsageError(
                    f"{where}: BEGIN {_WORD} inside the region opened at line "
                    f"{region.line}: regions do not nest; close that one first"
                )
            hint = " ".join((begin["hint"] or "").split())
            region = _Region(number, "" if markdown else begin["indent"], hint, [])
        elif end:
            if region is None:
                raise UsageError(f"{where}: END {_WORD} without a BEGIN {_WORD} before it")
            if region.stub is not None and markdown and not region.stub_closed:
                raise UsageError(
                    f"{where}: the STUB comment opened at line "
                    f"{region.stub_line} is not closed: end it with a '-->' line"
                )
            replacement = _replacement(region, python, markdown, newline=_newline(raw))
            out += replacement
            if region.stub is not None:
                stubs += [line.strip() for line, _ in replacement]
            removed.append(Removed(place(region.line), tuple(region.body)))
            region = None
        elif stub:
            if region is None:
                raise UsageError(
                    f"{where}: STUB outside a solution region: put it between "
                    f"BEGIN {_WORD} and END {_WORD}"
                )
            if region.stub is not None:
                raise UsageError(
                    f"{where}: a second STUB in the region opened at line {region.line}"
                )
            region.stub_line, region.stub = number, []
            region.stub_indent = "" if markdown else stub["indent"]
        elif _near_miss(line, markdown):
            raise UsageError(f"{where}: a malformed marker {line.strip()!r}: {_syntax(markdown)}")
        elif region is None:
            out.append((raw, number))
        else:
            region.body.append(line)
    if region is not None:
        raise UsageError(
            f"{place(region.line)}: BEGIN {_WORD} is never closed: add an "
            f"END {_WORD} line after the solution"
        )
    return Stripped(
        "".join(line for line, _ in out), tuple(n for _, n in out), tuple(removed), tuple(stubs)
    )


def _near_miss(line: str, markdown: bool) -> bool:
    if markdown:
        return bool(_NEAR_MD.match(line))
    return bool(_NEAR_HASH.match(line) or _NEAR_OTHER.match(line))


def _stub_line(line: str, number: int, region: _Region, markdown: bool, where: str) -> bool:
    """Take ``line`` into the region's STUB block; False when it is not a stub line."""
    assert region.stub is not None
    if markdown:
        if _STUB_MD_CLOSE.fullmatch(line):
            region.stub_closed = True
        else:
            region.stub.append((line, number))
        return True
    if _END_PY.fullmatch(line):
        return False
    indent = region.stub_indent
    if line == indent + "#" or line.rstrip() == indent + "#":
        region.stub.append(("", number))
        return True
    if not line.startswith(indent + "# "):
        raise UsageError(
            f"{where}: a STUB line must be a comment, '# ' at the STUB "
            f"marker's indentation ({len(indent)} columns) followed by the code "
            f"the student gets; end the block with END {_WORD}"
        )
    region.stub.append((indent + line[len(indent) + 2 :], number))
    return True


def _replacement(
    region: _Region, python: bool, markdown: bool, *, newline: str
) -> list[tuple[str, int]]:
    if region.stub is not None:
        return [(line.rstrip() + newline, number) for line, number in region.stub]
    if markdown:
        lines = [region.hint] if region.hint else []
    elif python and region.indent:
        lines = _raise(region.indent, region.hint or _DEFAULT_HINT)
    else:
        lines = [f"{region.indent}# {region.hint}"] if region.hint else []
    return [(line + newline, region.line) for line in lines]


def _raise(indent: str, hint: str) -> list[str]:
    """``raise NotImplementedError("hint")`` at ``indent``, wrapped to the line length."""
    one = f"{indent}raise NotImplementedError({_literal(hint)})"
    if len(one) <= _LINE:
        return [one]
    width = _LINE - len(indent) - 8
    parts = textwrap.wrap(hint, width=width, break_long_words=False, break_on_hyphens=False)
    body = [
        f"{indent}    {_literal(part + ' ' if n < len(parts) - 1 else part)}"
        for n, part in enumerate(parts)
    ]
    return [f"{indent}raise NotImplementedError(", *body, f"{indent})"]


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _newline(raw: str) -> str:
    return "\r\n" if raw.endswith("\r\n") else "\n"


def _syntax(markdown: bool) -> str:
    if markdown:
        return (
            f"write '<!-- BEGIN {_WORD} -->' (or '<!-- BEGIN {_WORD} hint: TEXT -->'), "
            f"'<!-- STUB' ... '-->' and '<!-- END {_WORD} -->', each on a line of its own"
        )
    return (
        f"write '# BEGIN {_WORD}' (or '# BEGIN {_WORD} hint: TEXT'), '# STUB' and "
        f"'# END {_WORD}', each on a line of its own, in a file whose comments start "
        "with '#' (Python, TOML, shell; a notebook's cells)"
    )


def compiles(
    name: str,
    source: str,
    origins: tuple[int, ...] | None,
    *,
    at: Callable[[int], str] | None = None,
) -> None:
    """Refuse Python ``source`` that does not compile, naming the line it came from."""
    try:
        compile(source, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno or 1
        if origins:
            line = origins[min(max(line, 1), len(origins)) - 1]
        shown = at(line) if at else f"{name}:{line}"
        raise UsageError(
            f"{shown}: the starter's code does not compile once "
            f"the solution regions are replaced ({exc.msg}): check the markers' "
            "indentation and the STUB lines"
        ) from None
