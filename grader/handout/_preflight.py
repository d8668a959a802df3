"""Checking a built hand-out before it is handed out.

Two checks, each naming the path it refuses:

- **the removed text**: every file of the hand-out is searched (a notebook cell by cell,
  a binary file as bytes) for the text of each removed solution region: the region as a
  whole, whitespace aside, and each of its distinctive lines (at least ``DISTINCTIVE``
  characters once stripped; not a signature, import or decorator; not a line its file
  keeps outside its regions or a STUB puts in), two of them from one region in one file
  (or its only one). A copy of the solution outside
  its markers, in a note, another file or an example, is found wherever it landed;
- **the grades**: each folder that holds a pyproject.toml, the hand-out itself included,
  is graded by the real grader in its sandbox. The hand-out's own total is the raw
  starter's; a folder that scores more holds more of a solution than the student starts
  with (a worked example, a solved copy), and one the grader cannot grade might.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from grader._errors import HandOutRefused
from grader.batch import grade_batch
from grader.handout._markers import Removed
from grader.handout._notebook import NOTEBOOK, cell_texts
from grader.outputs import REPORTED
from grader.rubric import Rubric
from grader.sandbox import Wall

__all__ = ["DISTINCTIVE", "FolderGrade", "HandoutGrading", "grade_folders", "scan_for_regions"]

DISTINCTIVE = 40  # characters: shorter lines (``return answer``) are everybody's code
_LINES = 2  # distinctive lines of one region in one file: a copy, not a shared idiom
_SHOWN = 60  # characters of a line quoted in a message
# A signature, an import or a decorator names an interface other code shares, not an answer.
_INTERFACE = ("def ", "async def ", "class ", "import ", "from ", "@")


@dataclass(frozen=True, slots=True)
class HandoutGrading:
    """How ``gradekit starter`` grades what it built: the rubric and the sandbox's wall."""

    rubric: Rubric
    wall: Wall


@dataclass(frozen=True, slots=True)
class FolderGrade:
    """One graded folder of the hand-out."""

    folder: str  # relative to the hand-out, "." for the hand-out itself
    total: Decimal


# -- the removed text --------------------------------------------------------------------------


def scan_for_regions(out: Path, removed: Sequence[Removed], stubs: Iterable[str]) -> None:
    """Refuse the hand-out at ``out`` when a file holds a removed region's text."""
    shipped = set(stubs)
    wholes = [(region, _normal(region.lines)) for region in removed]
    wholes = [(region, text) for region, text in wholes if len(text) >= DISTINCTIVE]
    lines: dict[str, list[Removed]] = {}
    for region in removed:
        for text in dict.fromkeys(line.strip() for line in region.lines):
            if len(text) >= DISTINCTIVE and text not in shipped and not text.startswith(_INTERFACE):
                lines.setdefault(text, []).append(region)
    need = {
        region.where: min(_LINES, sum(region in found for found in lines.values()))
        for region in removed
    }
    problems = [
        problem
        for name, where, text in _texts(out)
        for problem in _found(name, where, text, wholes, lines, need)
    ]
    if problems:
        raise HandOutRefused(
            "the hand-out holds the text of a removed solution region, so it would give the "
            "answer away:\n" + "\n".join(f"  {p}" for p in problems) + "\nMark that text as "
            "a region too (or reword it), or leave its file out of [tool.gradekit.starter] "
            "include. Nothing was written."
        )


def _texts(out: Path) -> Iterator[tuple[str, str, str]]:
    """(file, how to name a line of it, text) for every file of the hand-out."""
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = path.relative_to(out).as_posix()
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            yield name, "", data.decode("latin-1")  # a binary file: its bytes, as they are
            continue
        if name.endswith(NOTEBOOK):
            for where, cell in cell_texts(text, name):
                yield name, where, cell
        else:
            yield name, name, text


def _found(
    name: str,
    where: str,
    text: str,
    wholes: Sequence[tuple[Removed, str]],
    lines: Mapping[str, list[Removed]],
    need: Mapping[str, int],
) -> Iterator[str]:
    hits: dict[str, dict[str, int]] = {}  # region -> its distinctive lines here -> line
    for number, line in enumerate(text.splitlines(), 1):
        for region in lines.get(line.strip(), ()):
            hits.setdefault(region.where, {}).setdefault(line.strip(), number)
    reported = set()
    for region_where, found in hits.items():
        if len(found) >= need[region_where]:
            reported.add(region_where)
            first, number = min(found.items(), key=lambda item: item[1])
            yield (
                f"{_at(name, where, number)}: {_quote(first)}"
                + (f" and {len(found) - 1} more line(s)" if len(found) > 1 else "")
                + f" of the region at {region_where}"
            )
    normal = " ".join(text.split())
    for region, whole in wholes:
        if region.where not in reported and whole in normal:
            reported.add(region.where)
            yield f"{where or name}: the whole region at {region.where}"


def _at(name: str, where: str, number: int) -> str:
    if not where:
        return name  # a binary file has no lines to name
    return f"{where}:{number}" if where == name else f"{where}, line {number}"


def _normal(lines: Iterable[str]) -> str:
    return " ".join(" ".join(lines).split())


def _quote(line: str) -> str:
    text = line.strip()
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


# -- the grades ----------------------------------------------------------------------------------


def grade_folders(out: Path, grading: HandoutGrading) -> tuple[FolderGrade, ...]:
    """Grade each folder of the hand-out at ``out`` that holds a pyproject.toml; refuse the
    hand-out when one grades above the hand-out itself, or cannot be graded."""
    folders = _projects(out)
    with tempfile.TemporaryDirectory(prefix="gradekit-starter-") as work:
        subs = Path(work) / "subs"
        copies = []
        for number, folder in enumerate(folders):
            # Each under a name of its own: two folders of one name would be one student.
            copy = subs / f"folder-{number:03d}"
            shutil.copytree(out / folder, copy, symlinks=True)
            copies.append(copy)
        rows = grade_batch(
            copies,
            grading.rubric,
            out=Path(work) / "grades",
            jobs=min(len(copies), os.cpu_count() or 1),
            wall=grading.wall,
        )
    by_name = {row.submission: row for row in rows}
    grades: list[FolderGrade] = []
    problems: list[str] = []
    for folder, copy in zip(folders, copies, strict=True):
        row = by_name[copy.name]
        if row.status not in REPORTED:
            problems.append(
                f"{folder}: could not be graded ({row.reason}), so it may hold a "
                "solution the grader did not see"
            )
            continue
        grades.append(FolderGrade(folder, Decimal(row.total)))
    raw = grades[0].total if grades and grades[0].folder == "." else None
    if raw is not None:
        problems += [
            f"{g.folder}: grades {g.total} > the raw starter's {raw}"
            for g in grades[1:]
            if g.total > raw
        ]
    if problems:
        raise HandOutRefused(
            "the hand-out gives marks away:\n"
            + "\n".join(f"  {p}" for p in problems)
            + "\nLeave those folders out of [tool.gradekit.starter] include, or strip them "
            "with solution regions. Nothing was written."
        )
    return tuple(grades)


def _projects(out: Path) -> list[str]:
    """The folders holding a pyproject.toml, relative: "." first, then in path order."""
    found = sorted(
        path.parent.relative_to(out).as_posix()
        for path in out.rglob("pyproject.toml")
        if path.is_file()
    )
    return sorted(found, key=lambda folder: (folder != ".", folder))
