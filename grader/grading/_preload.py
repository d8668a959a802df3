"""Which of the rubric's packages a submission's own code imports: its runs' hosts import
those once before they fork (``Sandbox.ahead``), where every run imported them anew (the
openai SDK's import is about 450 ms of CPU, anthropic's 1.3 s, and a grading makes 15 runs).

Only what a run imports first is read: the packages of the manifest's agent, Replay and
tools. The answer moves no grade: a package missed here is imported by the run itself, as
before, and one named here that no run imports costs only its hosts' time."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from gradekit import GradekitError
from grader.submission import (
    SOURCE_CAP,
    Manifest,
    SubmissionFileError,
    load_manifest,
    read_submission_file,
    submission_entries,
)

__all__ = ["cohort_packages", "imported_packages", "shipped_packages"]

_MOST_FILES = 400  # Python files read, over the packages the runs import first
_MOST_DEPTH = 8
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([^#;\n]+))", re.MULTILINE)
_NAME = re.compile(r"^[ \t(]*([A-Za-z_]\w*)")


def imported_packages(
    root: Path, manifest: Manifest, packages: Mapping[str, str]
) -> tuple[str, ...]:
    """The import names of ``packages`` (the rubric's) that the Python of the submission's
    agent, Replay or tools package imports anywhere in it, sorted; never one the submission
    ships itself (``shipped_packages``), which its runs import from its own folder."""
    wanted = set(packages) - shipped_packages(root, packages) if packages else set()
    if not wanted:
        return ()
    tops = sorted(
        {
            spec.partition(":")[0].split(".")[0]
            for spec in (manifest.agent, manifest.replay, manifest.tools)
            if spec
        }
    )
    found: set[str] = set()
    for path in _python_files(root, tops):
        try:
            source = read_submission_file(root, path, cap=SOURCE_CAP).decode("utf-8", "replace")
        except SubmissionFileError:
            continue
        found.update(imported_names(source))
    return tuple(sorted(found & wanted))


def shipped_packages(root: Path, packages: Mapping[str, str]) -> frozenset[str]:
    """The import names of ``packages`` the submission at ``root`` has a folder or module
    of its own by (``openai/``, ``openai.py``): a run finds its own first, so a host that
    imported the installed one would change what the run imports."""
    try:
        beside = {name for name, _ in submission_entries(root, "", most=10_000)}
    except SubmissionFileError:
        return frozenset()
    return frozenset(name for name in packages if name in beside or f"{name}.py" in beside)


def cohort_packages(roots: Iterable[Path], packages: Mapping[str, str]) -> tuple[str, ...]:
    """The import names of ``packages`` that any submission at ``roots`` imports
    (``imported_packages``), sorted: what a batch's shared hosts import before they fork.
    A submission whose manifest cannot be read adds none (its grading says why)."""
    found: set[str] = set()
    for root in roots:
        if not packages or found >= set(packages):
            break
        try:
            found.update(imported_packages(root, load_manifest(root), packages))
        except (GradekitError, OSError):
            continue
    return tuple(sorted(found))


def imported_names(source: str) -> set[str]:
    """The top-level names ``source``'s import statements name (``import a.b, c as d``:
    a and c; ``from e.f import g``: e); relative imports name none."""
    names: set[str] = set()
    for origin, listed in _IMPORT.findall(source):
        if origin:
            names.add(origin)
            continue
        for part in listed.split(","):
            match = _NAME.match(part)
            if match:
                names.add(match.group(1))
    return names


def _python_files(root: Path, tops: Iterable[str]) -> list[str]:
    """The ``.py`` files of each of ``tops`` (a package folder, or a module beside the
    manifest), reached without a link, at most ``_MOST_FILES`` in all."""
    files: list[str] = []
    try:
        beside = dict(submission_entries(root, "", most=10_000))
    except SubmissionFileError:
        return files
    folders = [top for top in tops if beside.get(top)]
    files += [f"{top}.py" for top in tops if beside.get(f"{top}.py") is False]
    for depth in range(_MOST_DEPTH):
        below: list[str] = []
        for folder in folders:
            try:
                entries = submission_entries(root, folder, most=_MOST_FILES)
            except SubmissionFileError:
                continue
            for name, is_folder in entries:
                if is_folder and name != "__pycache__":
                    below.append(f"{folder}/{name}")
                elif name.endswith(".py"):
                    files.append(f"{folder}/{name}")
            if len(files) >= _MOST_FILES:
                return files[:_MOST_FILES]
        folders = below
        if not folders or depth == _MOST_DEPTH - 1:
            break
    return files
