"""What the hand-out holds: the reference's ``[tool.gradekit.starter]`` allow-list.

```toml
[tool.gradekit.starter]
include = ["lab/**", "gradekit/**", "grader/**", "rubric/*.toml", "docs/*.md",
           "Makefile", ".gitignore", "FAILURES.md", "pyproject.toml"]
readme = "handout/README.md"   # written as the hand-out's README.md
ship = []                      # files held back by default that ship all the same
```

A file ships when a pattern of ``include`` matches its path (POSIX, from the reference's
root; ``*`` and ``?`` within one segment, ``**`` any number of segments). Some files are
held back whatever ``include`` says, unless ``ship`` names them (a file, or a folder for
everything under it): the manifest's recordings and incidents folders, ``examples/``,
the change log, the instructor's regression sets, and journals, locks and previous copies.
What is built or cached (``.git``, ``.venv*``, ``__pycache__``, ``*.egg-info``, ...)
never ships.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from gradekit import UsageError
from grader.rubric import SETS

__all__ = [
    "TABLE_EXAMPLE",
    "StarterTable",
    "held_back",
    "is_built",
    "lab_package",
    "matches",
    "shipped_by",
    "starter_table",
]

TABLE_EXAMPLE = """\
[tool.gradekit.starter]
include = ["lab/**", "gradekit/**", "grader/**", "rubric/*.toml", "docs/*.md",
           "Makefile", ".gitignore", "FAILURES.md", "pyproject.toml"]
readme = "handout/README.md"
ship = []"""

_BUILT_DIRS = frozenset(
    {
        ".git",
        "__pycache__",
        "build",
        "dist",
        "grades",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".nox",
    }
)
_BUILT_SUFFIXES = (".pyc", ".pyo")
_HELD_SUFFIXES = {
    ".previous.json": "a previous copy of a re-recorded file",
    ".journal": "a recording journal",
    ".lock": "a lock file",
}


@dataclass(frozen=True, slots=True)
class StarterTable:
    """The reference's ``[tool.gradekit.starter]``."""

    include: tuple[str, ...]
    ship: tuple[str, ...]
    readme: str  # "" when the hand-out has no README of its own


def lab_package(manifest: Mapping[str, object]) -> str:
    """The lab's package: the top package of the manifest's ``agent`` (``lab`` of
    ``lab.agent:run``), which need not be the kit's ``lab``."""
    return str(manifest["agent"]).partition(":")[0].partition(".")[0]


def starter_table(manifest: Mapping[str, object], source: str) -> StarterTable:
    """The validated table of ``manifest`` (``[tool.gradekit]``, read from ``source``); its
    messages' examples name the lab's own package."""
    package = lab_package(manifest)
    example = TABLE_EXAMPLE.replace('"lab/**"', f'"{package}/**"')
    table = manifest.get("starter")
    if table is None:
        raise UsageError(
            f"{source}: no [tool.gradekit.starter] table, so nothing says what "
            f"the students get: add one that lists what ships, e.g.\n{example}"
        )
    if not isinstance(table, dict):
        raise UsageError(
            f"{source}: [tool.gradekit] starter must be a table: write it as "
            f"[tool.gradekit.starter], e.g.\n{example}"
        )
    unknown = sorted(set(table) - {"include", "ship", "readme"})
    if unknown:
        raise UsageError(
            f"{source}: unknown [tool.gradekit.starter] key(s) "
            f"{', '.join(unknown)}: the keys are include, readme and ship"
        )
    include = _paths(table, "include", source, glob=True, package=package)
    if not include:
        raise UsageError(
            f"{source}: [tool.gradekit.starter] include is empty: list what "
            f'the students get, e.g. include = ["{package}/**", "FAILURES.md"]'
        )
    readme = table.get("readme", "")
    if not isinstance(readme, str):
        raise UsageError(
            f"{source}: [tool.gradekit.starter] readme must be a path, e.g. "
            'readme = "handout/README.md"'
        )
    if readme:
        _relative(readme, "readme", source)
    return StarterTable(include, _paths(table, "ship", source, glob=False, package=package), readme)


def _paths(
    table: Mapping[str, object], key: str, source: str, *, glob: bool, package: str
) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(
            f"{source}: [tool.gradekit.starter] {key} must be a list of paths, "
            f'e.g. {key} = ["{package}/**"]'
        )
    for path in value:
        _relative(path, key, source)
        if not glob and re.search(r"[*?\[]", path):
            raise UsageError(
                f"{source}: [tool.gradekit.starter] ship holds {path!r}: ship "
                "takes literal paths, so that each file held back by default is "
                "named; list each file or folder"
            )
    return tuple(path.rstrip("/") for path in value)


def _relative(path: str, key: str, source: str) -> None:
    parts = PurePosixPath(path).parts
    if path.startswith(("/", "~")) or "\\" in path or ".." in parts or not parts:
        raise UsageError(
            f"{source}: [tool.gradekit.starter] {key} holds {path!r}: write a "
            "path inside the reference, relative to its pyproject.toml, with '/'"
        )


def matches(pattern: str, path: str) -> bool:
    """Whether the POSIX ``path`` matches ``pattern``: ``**`` stands for any number of
    segments (none included), ``*``, ``?`` and ``[...]`` for characters of one segment."""
    return _match(tuple(pattern.split("/")), tuple(path.split("/")))


def _match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(rest, parts[skip:]) for skip in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _match(rest, parts[1:])


def is_built(path: str) -> bool:
    """Something built or cached, which never ships: a virtual environment, a cache, ..."""
    parts = path.split("/")
    return (
        any(
            part in _BUILT_DIRS or part.startswith(".venv") or part.endswith(".egg-info")
            for part in parts[:-1]
        )
        or parts[-1].endswith(_BUILT_SUFFIXES)
        or parts[-1] in _BUILT_DIRS
    )


def held_back(path: str, folders: Mapping[str, str]) -> str:
    """Why ``path`` stays home unless ``ship`` names it ("" when it may ship): ``folders``
    maps each of the manifest's recordings and incidents folders to what it holds."""
    for folder, what in sorted(folders.items()):
        if _under(path, folder):
            return what
    if _under(path, "examples"):
        return "an example, a worked solution"
    if path.split("/")[-1] == "DATASET_CHANGES.md":
        return "the change log of the recordings"
    if _under(path, f"rubric/{SETS}"):  # a pinned version's public view ships by itself
        return "an instructor's regression set"
    return next((what for suffix, what in _HELD_SUFFIXES.items() if path.endswith(suffix)), "")


def shipped_by(path: str, ship: Iterable[str]) -> str:
    """The ``ship`` entry that names ``path`` ("" when none does)."""
    return next((entry for entry in ship if _under(path, entry)), "")


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
