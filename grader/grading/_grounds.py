"""What a failure log's claims are checked against, read from the submission's own files
(``grader.scoring._summary.Grounds``): its paths, the keys it recorded, its Makefile's
targets, the exception classes its Python defines, the re-records its DATASET_CHANGES.md
logs and the example entries its README shows.
Files only, never run; bounded, so a huge tree costs what a small one does."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from gradekit import GradekitError
from grader._cache import Derived, content_key
from grader.recordings import CHANGE_LOG, decode_changes
from grader.rubric import Case
from grader.scoring import EXAMPLE_ENTRY, Grounds
from grader.submission import (
    CHANGE_LOG_CAP,
    SOURCE_CAP,
    SubmissionFileError,
    read_submission_file,
    submission_entries,
)

__all__ = ["grounds"]

_MOST_NAMES = 4000  # names listed, over the whole tree
_MOST_SOURCES = 200  # Python files read for their exception classes
_TARGET = re.compile(r"^([A-Za-z][\w.-]*)[ \t]*:(?!=)", re.MULTILINE)
_CLASS = re.compile(r"^[ \t]*class[ \t]+([A-Za-z_]\w*)[ \t]*\(", re.MULTILINE)
_EXAMPLE = re.compile(r"^(```|~~~)[ \t]*(?:markdown|md)[ \t]*\n(.*?)^\1", re.MULTILINE | re.DOTALL)
_SKIPPED = ("__pycache__", "node_modules")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_MOST_TEXT = 4 << 20  # characters of code and recordings a quotation is looked for in


def grounds(
    root: Path,
    cases: Iterable[Case],
    keys: Iterable[str],
    said: Iterable[str] = (),
    derived: Derived | None = None,
) -> Grounds:
    """The ``Grounds`` of the submission at ``root``: ``cases``, the rubric's; ``keys``,
    every key its recordings hold (cassettes, HTTP cassettes, fixtures); ``said``, their
    prompts and answers. ``derived``: where a batch keeps each file's names."""
    files = _tree(root)
    targets = (
        frozenset(_TARGET.findall(_text(root, "Makefile"))) if "Makefile" in files else frozenset()
    )
    sources = [
        _text(root, path)
        for path in [path for path in sorted(files) if path.endswith(".py")][:_MOST_SOURCES]
    ]
    named = [_names(source, derived or Derived()) for source in sources]
    errors = frozenset().union(*(classes for classes, _ in named))
    identifiers = frozenset().union(*(names for _, names in named))
    readme = _text(root, "README.md") if "README.md" in files else ""
    examples = tuple(block for _, block in _EXAMPLE.findall(readme) if "## " in block)
    text = "\n".join([*sources, *said])[:_MOST_TEXT]
    return Grounds(
        cases=frozenset(case.id for case in cases),
        files=frozenset(files),
        keys=frozenset(keys),
        targets=targets,
        errors=errors,
        identifiers=identifiers,
        text=text,
        examples=(EXAMPLE_ENTRY, *examples),
        rerecords=_rerecords(root) if CHANGE_LOG in files else (),
    )


def _names(source: str, derived: Derived) -> tuple[frozenset[str], frozenset[str]]:
    """The classes ``source`` defines and every name it uses. A cohort's files are mostly
    the hand-out's, byte for byte: ``derived`` keeps each distinct one's."""
    key = content_key(_NAMES_VERSION, source.encode("utf-8", "surrogatepass"))
    kept = derived.read("names", key)
    if kept is not None:
        with contextlib.suppress(ValueError):
            classes, names = json.loads(kept)
            return frozenset(classes), frozenset(names)
    classes, names = sorted(set(_CLASS.findall(source))), sorted(set(_IDENTIFIER.findall(source)))
    derived.write("names", key, json.dumps([classes, names]).encode("utf-8", "surrogatepass"))
    return frozenset(classes), frozenset(names)


_NAMES_VERSION = b"gradekit.names/1"  # in each kept reading's key: how it was read


def _rerecords(root: Path) -> tuple[tuple[str, str], ...]:
    """Each re-record the change log holds, as (case, reason); none when it cannot be read
    (the rerecord-review goal says why, where the lab asks for it)."""
    try:
        data = read_submission_file(root, CHANGE_LOG, cap=CHANGE_LOG_CAP)
        return tuple(
            (change.case, change.reason) for change in decode_changes(data, log=Path(CHANGE_LOG))
        )
    except (SubmissionFileError, GradekitError, OSError):
        return ()


def recorded_keys(*recordings: Mapping[str, Iterable[str]]) -> set[str]:
    """Every key of ``recordings`` (case -> its keys)."""
    return {key for recorded in recordings for keys in recorded.values() for key in keys}


def _tree(root: Path) -> set[str]:
    """Every file and folder of the submission, as relative POSIX paths, hidden ones and
    caches left out, at most ``_MOST_NAMES``."""
    found: set[str] = set()
    folders = [""]
    while folders and len(found) < _MOST_NAMES:
        folder = folders.pop(0)
        try:
            entries = submission_entries(root, folder, most=_MOST_NAMES)
        except (GradekitError, OSError):
            continue
        for name, is_folder in entries:
            if name.startswith(".") or name in _SKIPPED:
                continue
            path = f"{folder}/{name}" if folder else name
            found.add(path)
            if is_folder:
                folders.append(path)
    return found


def _text(root: Path, relative: str) -> str:
    try:
        return read_submission_file(root, relative, cap=SOURCE_CAP).decode("utf-8", "replace")
    except (SubmissionFileError, GradekitError, OSError):
        return ""
