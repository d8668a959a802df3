"""Jupyter notebooks in the hand-out: solution regions cell by cell, outputs cleared.

A notebook is JSON, so a marker sits inside a string and no line of the file is one. Each
cell's source is read on its own: a code cell with ``#`` markers and Python's stubs (and
compiled, less its ``%`` and ``!`` lines), a Markdown or raw cell with HTML-comment ones.
Every code cell loses its outputs and its execution count, and the notebook its
``metadata.execution`` timings: what ran on the instructor's machine would show the
answers. The result is written with sorted keys and a fixed indent, so the same notebook
gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from gradekit import UsageError
from grader.handout._markers import Removed, Stripped, compiles, strip

__all__ = ["NOTEBOOK", "StrippedNotebook", "cell_texts", "strip_notebook"]

NOTEBOOK = ".ipynb"


@dataclass(frozen=True, slots=True)
class StrippedNotebook:
    """A notebook with its regions replaced and its outputs cleared."""

    data: bytes
    removed: tuple[Removed, ...]
    stubs: tuple[str, ...]


def strip_notebook(text: str, name: str) -> StrippedNotebook:
    """The notebook ``text`` (the file ``name``) as the hand-out ships it. An error names
    the .ipynb file's line, then the cell and the line in it."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{name}:{exc.lineno}: not a notebook, its JSON does not parse "
            f"({exc.msg}): save it from Jupyter again"
        ) from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise UsageError(
            f"{name}:1: not a notebook, it has no list of cells: save it from "
            "Jupyter again (nbformat 4)"
        )
    removed: list[Removed] = []
    stubs: list[str] = []
    finder = _Finder(text)
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise UsageError(
                f"{name}:{finder.line}: cell {number} is not a JSON object: "
                "save the notebook from Jupyter again"
            )
        stripped = _cell(cell, name, number, finder)
        removed += stripped.removed
        stubs += stripped.stubs
    metadata = document.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("execution", None)
    data = json.dumps(document, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    return StrippedNotebook(data.encode("utf-8"), tuple(removed), tuple(stubs))


def cell_texts(text: str, name: str) -> list[tuple[str, str]]:
    """Each cell's source of the notebook ``text``, as ``("NAME: cell N", source)``; the
    whole text as one when it is not a notebook."""
    try:
        cells = json.loads(text).get("cells")
    except (json.JSONDecodeError, AttributeError):
        return [(name, text)]
    if not isinstance(cells, list):
        return [(name, text)]
    found = []
    for number, cell in enumerate(cells, 1):
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        joined = "".join(map(str, source)) if isinstance(source, list) else str(source)
        found.append((f"{name}: cell {number}", joined))
    return found


def _cell(cell: dict[str, object], name: str, number: int, finder: _Finder) -> Stripped:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        joined = "".join(str(part) for part in source)
    elif isinstance(source, str):
        joined = source
    else:
        raise UsageError(
            f"{name}:{finder.line}: cell {number}'s source is neither text nor "
            "a list of lines: save the notebook from Jupyter again"
        )
    lines = joined.splitlines()
    lines_at = finder.cell(lines)

    def at(line: int) -> str:
        return f"{name}:{lines_at(line)}: cell {number}, line {line}"

    code = cell.get("cell_type") == "code"
    stripped = strip(joined, "cell.py" if code else "cell.md", at=at)
    if code:
        # IPython's magics and shell lines are not Python: blank them, keeping the numbers.
        plain = "".join(
            "\n" if line.lstrip().startswith(("%", "!")) else line
            for line in stripped.text.splitlines(keepends=True)
        )
        compiles("cell.py", plain, stripped.origins, at=at)
        cell["outputs"] = []
        cell["execution_count"] = None
    metadata = cell.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("execution", None)
    cell["source"] = (
        stripped.text.splitlines(keepends=True) if isinstance(source, list) else stripped.text
    )
    return stripped


class _Finder:
    """Lines of the .ipynb file: each cell line's, found by its JSON spelling after the
    previous cell's (the first line of the cell when a spelling is not found)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offset = 0

    @property
    def line(self) -> int:
        return self.text.count("\n", 0, self.offset) + 1

    def cell(self, lines: list[str]) -> Callable[[int], int]:
        found: list[int] = []
        for line in lines:
            needle = json.dumps(line, ensure_ascii=False)[1:-1]
            at = self.text.find(needle, self.offset) if needle.strip() else -1
            if at >= 0:
                self.offset = at + len(needle)
            found.append(self.line)
        return lambda number: found[number - 1] if 0 < number <= len(found) else self.line
