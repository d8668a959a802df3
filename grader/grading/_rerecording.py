"""The rerecord-review stretch goal's evidence: a change-log entry that names recordings
whose keys really changed, with digests that match the files as they are now.

``_rerecording`` gives why the goal is not met, or the entry and the keys the evidence
rests on. The log's names are read only inside the submission, only as recordings (.json
files directly in a recordings folder), through ``read_submission_file``.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from gradekit import GradekitError
from gradekit.internal import commands
from grader._text import TEXT_LIMIT, quote
from grader.grading._reading import _relative
from grader.recordings import CHANGE_LOG, Change, change_matches, decode_changes, decode_recording
from grader.scoring import shown_keys
from grader.submission import (
    CASSETTE_CAP,
    CHANGE_LOG_CAP,
    Manifest,
    MissingSubmissionFile,
    read_submission_file,
)

__all__: list[str] = []


# The re-recording a change-log advice shows, with a reason for the student to make theirs.
_RERECORD = commands.RERECORD(reason="why the answers changed")


def _rerecording_problem(root: Path, manifest: Manifest) -> str | None:
    """None when a change-log entry names recordings whose keys really changed, and its
    digests match the files as they are now; else why not."""
    return _rerecording(root, manifest)[0]


def _rerecording(root: Path, manifest: Manifest) -> tuple[str | None, str]:
    """``_rerecording_problem``, and when there is none, the entry and keys the evidence
    rests on."""
    try:
        data = read_submission_file(root, CHANGE_LOG, cap=CHANGE_LOG_CAP)
        changes = decode_changes(data, log=Path(CHANGE_LOG))
    except MissingSubmissionFile:
        changes = []
    except GradekitError as exc:
        return f"{CHANGE_LOG} cannot be read: {quote(_relative(str(exc), root), TEXT_LIMIT)}", ""
    if not changes:
        return (f"no entry in {CHANGE_LOG}: re-record with `{_RERECORD}` and commit the log"), ""
    folders = tuple(
        f for f in (manifest.cassettes, manifest.second_cassettes, manifest.fixtures) if f
    )
    recordings = [
        c
        for c in changes
        if c.digests
        and all(_inside(root, name) and _recording_name(name, folders) for name in c.digests)
    ]
    if not recordings:
        return (
            f"no {CHANGE_LOG} entry names only recordings (.json files in "
            f"{', '.join(f'{f}/' for f in folders)}): log the re-recording with "
            f"`{_RERECORD}`"
        ), ""
    seen: dict[PurePosixPath, str | None] = {}  # a log may name one file in many entries
    matching = [c for c in recordings if change_matches(c, root, seen=seen)]
    if not matching:
        return (
            f"no {CHANGE_LOG} entry's digests match the cassettes or fixtures as they are "
            "now: the recordings changed after the last logged re-recording"
        ), ""
    for change in matching:
        held = _keys_held(root, change)
        if held:
            files = ", ".join(sorted(change.digests))
            return None, (
                f"the {CHANGE_LOG} entry of {change.date} for {quote(change.case)}: "
                f"{files} as logged, holding changed keys {shown_keys(held)}"
            )
    return (
        f"no matching {CHANGE_LOG} entry lists a changed key that its recordings hold: "
        f"the keys must come from the re-recording, as `{_RERECORD}` logs them"
    ), ""


def _recording_name(name: str, folders: tuple[str, ...]) -> bool:
    """Whether a logged name is a recording: a .json file directly in a recordings folder."""
    path = PurePosixPath(name)
    return path.suffix == ".json" and str(path.parent) in folders


def _keys_held(root: Path, change: Change) -> list[str]:
    """The keys the entry says changed that the files it names hold now."""
    held: set[str] = set()
    for name in sorted(change.digests):
        try:
            data = read_submission_file(root, name, cap=CASSETTE_CAP)
            recording = decode_recording(data, source=name)
        except GradekitError:
            continue
        held |= set(change.changed_keys) & set(recording.recorded)
    return sorted(held)


def _inside(root: Path, name: str) -> bool:
    """A path the log names must stay inside the submission: the grader reads it."""
    return not name.startswith(("/", "~")) and ".." not in Path(name).parts
