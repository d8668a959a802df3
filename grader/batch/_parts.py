"""What the copy detector reads of a submission: its parts, each a list of files, and
each file's documents (``grader.batch._fingerprints``).

The manifest names the parts: ``code``, the ``.py`` files of the package (or module) its
``agent`` spec names (the kit's own ``gradekit`` and ``grader`` are not the student's);
``failures``, its failure log; ``cassettes``, the ``.json`` files of its cassettes folder.
Every file is read as the grader reads a submission's files (``read_submission_file``:
never through a link, a regular file only) within caps: ``_FILE_CAP`` a file,
``_PART_CAP`` a part, ``_MOST_FILES`` files and ``_MOST_DEPTH`` folders deep. A file
that cannot be read, and a submission without a readable manifest, add nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grader._model import ignored_name
from grader.batch._fingerprints import (
    Document,
    cassette_documents,
    code_documents,
    text_documents,
)
from grader.outputs import PARTS
from grader.submission import (
    CASSETTE_CAP,
    FAILURES_CAP,
    ManifestError,
    SubmissionFileError,
    load_manifest,
    read_submission_file,
    submission_entries,
    submission_files,
)

__all__ = ["Source", "part_documents", "part_sources"]

_FILE_CAP = 1 << 20  # bytes of one file read
_PART_CAP = 8 << 20  # bytes of one part read, all its files together
_MOST_FILES = 300  # files of one part
_MOST_NAMES = 2000  # names looked at in an agent's package
_MOST_DEPTH = 8  # folders inside the package
_KIT = ("gradekit", "grader")  # the kit's own packages: an agent spec there is not the student's
Source = tuple[str, bytes]  # a file's path in the submission, and its bytes


def part_sources(root: Path) -> dict[str, list[Source]]:
    """The files of each part of the submission at ``root``; none without a manifest."""
    try:
        manifest = load_manifest(root)
    except (ManifestError, OSError):
        return {part: [] for part in PARTS}
    cassettes = submission_files(root, manifest.cassettes, suffix=".json", most=_MOST_FILES)
    return {
        "code": _package(root, manifest.agent.partition(":")[0].partition(".")[0]),
        "failures": _read(root, [manifest.failures], FAILURES_CAP),
        "cassettes": _read(
            root, [f"{manifest.cassettes}/{name}" for name in cassettes], CASSETTE_CAP
        ),
    }


def _read(root: Path, paths: Sequence[str], cap: int) -> list[Source]:
    """Each file's bytes, within ``cap`` a file and ``_PART_CAP`` in all; a link, a file
    over a cap or one that is missing is left out."""
    found: list[Source] = []
    left = _PART_CAP
    for path in paths:
        try:
            data = read_submission_file(root, path, cap=min(cap, _FILE_CAP, left))
        except (SubmissionFileError, OSError):
            continue
        found.append((path, data))
        left -= len(data)
    return found


def _package(root: Path, top: str) -> list[Source]:
    """The ``.py`` files of the package (or module) ``top``, as a child would import them."""
    if not top or top in _KIT:
        return []
    try:
        entries = submission_entries(root, top, most=_MOST_NAMES)
    except (SubmissionFileError, OSError):
        return _read(root, [f"{top}.py"], _FILE_CAP)
    paths: list[str] = []
    todo = [(top, entries, 0)]
    while todo and len(paths) < _MOST_FILES:
        folder, names, depth = todo.pop()
        for name, is_folder in names:
            relative = f"{folder}/{name}"
            if ignored_name(name):
                continue
            if is_folder and depth < _MOST_DEPTH:
                try:
                    todo.append(
                        (relative, submission_entries(root, relative, most=_MOST_NAMES), depth + 1)
                    )
                except (SubmissionFileError, OSError):
                    continue
            elif name.endswith(".py"):
                paths.append(relative)
    return _read(root, sorted(paths)[:_MOST_FILES], _FILE_CAP)


def part_documents(part: str, source: Source) -> list[Document]:
    """The documents of one file of ``part``: a module's units, a text, a cassette's
    prompts and answers."""
    path, data = source
    if part == "code":
        return code_documents(path, data)
    if part == "failures":
        return text_documents(path, data.decode("utf-8", "replace"))
    return cassette_documents(path, data)
