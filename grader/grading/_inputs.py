"""The files a grade rests on, by submission-relative path.

The names of every recording the manifest's folders may hold (``_recording_names``: kept
from every run, which the parent serves), and the digests of every file the grade depends
on (``_inputs``: a report's ``inputs``, and what a draw is keyed on).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from grader.recordings import CHANGE_LOG
from grader.rubric import Case
from grader.submission import (
    CASSETTE_CAP,
    CHANGE_LOG_CAP,
    FAILURES_CAP,
    FIXTURE_CAP,
    INCIDENT_CAP,
    PYPROJECT_CAP,
    SOURCE_CAP,
    Manifest,
    SubmissionFileError,
    read_submission_file,
    submission_files,
)

__all__: list[str] = []


def _recording_names(manifest: Manifest | None, cases: tuple[Case, ...]) -> list[str]:
    """The submission-relative paths of every recording of ``cases`` the manifest's folders
    may hold: cassettes, HTTP cassettes, fixtures, and the second set's."""
    folders = [manifest.cassettes if manifest else "cassettes"]
    if manifest and manifest.second_cassettes:
        folders.append(manifest.second_cassettes)
    names = [
        f"{folder}/{case.id}{kind}"
        for folder in folders
        for case in cases
        for kind in (".json", ".http.json")
    ]
    fixtures = manifest.fixtures if manifest else "fixtures"
    return names + [f"{fixtures}/{case.id}.json" for case in cases]


def _inputs(root: Path, manifest: Manifest | None, cases: tuple[Case, ...]) -> dict[str, str]:
    """sha256 of every file the grade depends on, by submission-relative path: the
    recordings, the failure log, the agent's source and manifest, and the recorded
    incidents (the evidence an instructor may promote into a regression set).

    Only files the parent could read safely are listed: a missing file, and one refused
    (a link, not a regular file, over its cap), are left out, since their bytes were
    never part of the grade; a refusal is already a finding of its own.
    """
    folder = manifest.cassettes if manifest else "cassettes"
    names = [
        (f"{folder}/{case.id}{kind}", CASSETTE_CAP)
        for case in cases
        for kind in (".json", ".http.json")
    ]
    fixtures = manifest.fixtures if manifest else "fixtures"
    names += [(f"{fixtures}/{case.id}.json", FIXTURE_CAP) for case in cases]
    names.append((manifest.failures if manifest else "FAILURES.md", FAILURES_CAP))
    if manifest and "rerecord-review" in manifest.stretch:
        names.append((CHANGE_LOG, CHANGE_LOG_CAP))
    if manifest:
        module = manifest.agent.partition(":")[0].replace(".", "/")
        names += [
            (f"{module}.py", SOURCE_CAP),
            (f"{module}/__init__.py", SOURCE_CAP),
            ("pyproject.toml", PYPROJECT_CAP),
        ]
        if manifest.second_cassettes and "two-providers" in manifest.stretch:
            names += [
                (f"{manifest.second_cassettes}/{case.id}{kind}", CASSETTE_CAP)
                for case in cases
                for kind in (".json", ".http.json")
            ]
    if manifest:
        names += [
            (f"{manifest.incidents}/{name}", INCIDENT_CAP)
            for name in _listed(root, manifest.incidents, ".jsonl")
        ]
    inputs = {}
    for name, cap in names:
        try:
            inputs[name] = hashlib.sha256(read_submission_file(root, name, cap=cap)).hexdigest()
        except SubmissionFileError:
            continue
    return inputs


_MOST_INCIDENTS = 64  # incident files hashed into a report's inputs


def _listed(root: Path, folder: str, suffix: str) -> list[str]:
    """The submission's files in ``folder`` ending in ``suffix`` (none when it cannot be
    listed: a refused folder is a finding elsewhere, or nothing the grade uses)."""
    try:
        return submission_files(root, folder, suffix=suffix, most=_MOST_INCIDENTS)
    except SubmissionFileError:
        return []
