"""What the parent reads of a submission, each a value or the finding that says why not.

Its manifest (and the rubric it names, when that is not the one it is graded on), its
failure log, and its recordings: the cassettes, the HTTP cassettes and the fixtures of the
rubric's cases, and its recordings of the items of the sets the rubric pins. The parent
reads them with its own codecs and serves them; the child only ever sees answers. A broken
manifest, a missing or undecodable recording or an unreadable FAILURES.md is a finding
that costs what it blocks, never a crash. Every file goes through ``read_submission_file``
(no links, regular files only, size caps), and every piece of submission text in a
finding goes through ``quote``.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from gradekit import CassetteError, Entry, HttpCassette
from gradekit.internal import LAB_HTTP_CASSETTE, commands, decode_cassette, decode_fixture
from grader._text import TEXT_LIMIT, quote
from grader.grading._regression import ItemRecordings
from grader.regression import recording_name
from grader.rubric import Case, Rubric
from grader.submission import (
    CASSETTE_CAP,
    FAILURES_CAP,
    FIXTURE_CAP,
    PYPROJECT_CAP,
    Manifest,
    ManifestError,
    MissingSubmissionFile,
    SubmissionFileError,
    load_manifest,
    read_submission_file,
    require_submission_folder,
)

__all__ = ["item_cases"]


def _manifest(root: Path) -> tuple[Manifest | None, list[str]]:
    """The submission's manifest, or None and the finding that says why not."""
    try:
        return load_manifest(root), []
    except ManifestError as exc:
        return None, [f"manifest: {quote(_relative(str(exc), root), TEXT_LIMIT)}"]


def _other_rubric(root: Path, manifest: Manifest | None, rubric: Rubric) -> list[str]:
    """A finding when the submission's manifest names a rubric that is not, byte for byte,
    the one it is graded on: the grader only ever grades on the instructor's, and never
    reads more of the submission's than its [rubric] table, for the message."""
    if manifest is None or not manifest.rubric:
        return []
    named = quote(manifest.rubric)
    try:
        data = read_submission_file(root, manifest.rubric, cap=PYPROJECT_CAP)
    except SubmissionFileError:
        return [
            f"the manifest names rubric = {named}, which the submission does not hold as "
            f"a file: it was graded on the instructor's rubric {rubric.id} v{rubric.version}"
        ]
    if hashlib.sha256(data).hexdigest() == rubric.sha256:
        return []
    try:
        table = tomllib.loads(data.decode("utf-8")).get("rubric", {})
        shown = f"{quote(str(table.get('id')))} v{quote(str(table.get('version')))}"
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        shown = "not a readable rubric"
    return [
        f"the manifest names rubric = {named} ({shown}), which is not the rubric it was "
        f"graded on: {rubric.id} v{rubric.version}, the instructor's; the grade is that "
        "rubric's"
    ]


def _failures(root: Path, manifest: Manifest | None) -> tuple[str | None, list[str]]:
    """The failure log's text, or None and the finding that says why not."""
    name = manifest.failures if manifest else "FAILURES.md"
    try:
        return read_submission_file(root, name, cap=FAILURES_CAP).decode("utf-8"), []
    except MissingSubmissionFile:
        return None, [f"{name} is missing: write the failure log (its format: docs/formats.md)"]
    except SubmissionFileError as exc:
        return None, [quote(str(exc), TEXT_LIMIT)]
    except UnicodeDecodeError:
        return None, [f"{name} cannot be read (UnicodeDecodeError): save it as UTF-8"]


_Decoded = TypeVar("_Decoded")


@dataclass(frozen=True, slots=True)
class _Read(Generic[_Decoded]):
    """Recordings the parent read, by case, and the finding each case's file gave instead,
    if any (one a case at most, in the cases' order)."""

    by_case: dict[str, _Decoded]
    problems: dict[str, str]

    @property
    def present(self) -> set[str]:
        """The cases whose file is there, usable or not."""
        return {*self.by_case, *self.problems}


def _cassettes(
    root: Path, folder: str, cases: tuple[Case, ...], *, sdk: Collection[str] = ()
) -> _Read[dict[str, Entry]]:
    """case -> key -> recorded entry, read by the parent, and each case's problem (a
    finding). A case in ``sdk`` has an HTTP cassette: its agent may use the SDKs only, so
    no ``<case>.json`` is no finding."""
    recorded: dict[str, dict[str, Entry]] = {}
    problems: dict[str, str] = {}
    for case in cases:
        relative = f"{folder}/{case.id}.json"
        missing = "" if case.id in sdk else _missing_advice(relative, case.id)
        cassette, problem = _recording(
            root, relative, CASSETTE_CAP, decode_cassette, case.id, missing
        )
        if problem:
            problems[case.id] = problem
        if cassette is not None:
            recorded[case.id] = dict(cassette.entries)
    return _Read(recorded, problems)


def _http_cassettes(root: Path, folder: str, cases: tuple[Case, ...]) -> _Read[HttpCassette]:
    """case -> its HTTP cassette (``<case>.http.json``, what an SDK-based agent's requests
    are served from), read by the parent, and each case's problem (a finding). None is
    needed: an agent that only calls ``complete`` has none, and a request of a case without
    one is a miss."""
    recorded: dict[str, HttpCassette] = {}
    problems: dict[str, str] = {}
    for case in cases:
        cassette, problem = _recording(
            root,
            f"{folder}/{case.id}.http.json",
            CASSETTE_CAP,
            LAB_HTTP_CASSETTE.decode,
            case.id,
            "",
        )
        if problem:
            problems[case.id] = problem
        if cassette is not None:
            recorded[case.id] = cassette
    return _Read(recorded, problems)


def _fixtures(
    root: Path, manifest: Manifest, cases: tuple[Case, ...]
) -> tuple[dict[str, dict[str, object]], list[str]]:
    """case -> tool key -> recorded result, from the manifest's fixtures folder, and the
    findings reading it gave.

    A submission whose agent declares tools needs every case's fixture: a missing one is a
    finding with the fix. One without tools may have none (its agent makes no tool call).
    """
    fixtures: dict[str, dict[str, object]] = {}
    folder, needed = manifest.fixtures, bool(manifest.tools) or manifest.fixtures != "fixtures"
    if needed and (problem := _folder_problem(root, folder)):
        return fixtures, [problem]
    findings = []
    for case in cases:
        relative = f"{folder}/{case.id}.json"
        missing = _missing_advice(relative, case.id) if needed else ""
        fixture, problem = _recording(root, relative, FIXTURE_CAP, decode_fixture, case.id, missing)
        findings += [problem] if problem else []
        if fixture is not None:
            fixtures[case.id] = {key: call.response for key, call in fixture.calls.items()}
    return fixtures, findings


def _missing_advice(relative: str, case: str) -> str:
    """What to do about a recording the submission lacks: commit it if it was made, else
    make it."""
    return (
        f"{relative} is missing: if `git status` lists it, commit it (`git add "
        f"{relative}`); otherwise record it with `{commands.RECORD_CASE(case=case)}` and "
        "commit it"
    )


def _folder_problem(root: Path, folder: str) -> str:
    """ "" when a folder the manifest names is there; else the finding, with the fix."""
    try:
        require_submission_folder(root, folder)
    except MissingSubmissionFile:
        return (
            f"the folder {quote(folder)}/ named in [tool.gradekit] does not exist: "
            f"record into it with `{commands.RECORD()}` and commit it, or fix the name"
        )
    except SubmissionFileError as exc:
        return quote(str(exc), TEXT_LIMIT)
    return ""


def _recording(
    root: Path, relative: str, cap: int, decoder: Callable[..., _Decoded], case: str, missing: str
) -> tuple[_Decoded | None, str]:
    """A cassette or fixture decoded by the parent and "", or None and the finding (``missing``
    when the file is absent, which may be "")."""
    try:
        return decoder(
            read_submission_file(root, relative, cap=cap), source=relative, case=case
        ), ""
    except MissingSubmissionFile:
        return None, missing
    except SubmissionFileError as exc:
        return None, quote(str(exc), TEXT_LIMIT)
    except CassetteError as exc:
        return None, f"{relative} cannot be used: {quote(str(exc), TEXT_LIMIT)}"
    except (ValueError, RecursionError) as exc:  # JSON too deep, or a number too long
        return None, _undecodable(relative, exc)


def _undecodable(relative: str, exc: Exception) -> str:
    """The finding for a recording that Python's JSON decoder itself gives up on."""
    return (
        f"{relative} cannot be decoded ({type(exc).__name__}): restore it with "
        f"`git checkout -- {relative}` or record the case again"
    )


def item_cases(rubric: Rubric) -> tuple[Case, ...]:
    """Each item of the sets ``rubric`` pins as the case a submission records it as: its
    recording name and its task (an item two pinned versions share, once)."""
    named = {
        recording_name(pinned.name, item.id): item.task
        for pinned in rubric.sets.values()
        if pinned is not None
        for item in pinned.items
    }
    return tuple(Case(name, task) for name, task in named.items())


def _item_recordings(
    root: Path, manifest: Manifest, items: tuple[Case, ...]
) -> tuple[ItemRecordings, list[str]]:
    """The submission's recordings of the pinned items, and the findings of the files that
    are there but cannot be used. A missing one is no finding: a run of the item that asks
    for it says so, with the fix (an agent may make no call at all)."""
    answers: dict[str, dict[str, Entry]] = {}
    fixtures: dict[str, dict[str, object]] = {}
    http: dict[str, HttpCassette] = {}
    findings: list[str] = []
    for item in items:
        cassette, problem = _recording(
            root, f"{manifest.cassettes}/{item.id}.json", CASSETTE_CAP, decode_cassette, item.id, ""
        )
        sdk, sdk_problem = _recording(
            root,
            f"{manifest.cassettes}/{item.id}.http.json",
            CASSETTE_CAP,
            LAB_HTTP_CASSETTE.decode,
            item.id,
            "",
        )
        fixture, fixture_problem = _recording(
            root, f"{manifest.fixtures}/{item.id}.json", FIXTURE_CAP, decode_fixture, item.id, ""
        )
        findings += [found for found in (problem, sdk_problem, fixture_problem) if found]
        if cassette is not None:
            answers[item.id] = dict(cassette.entries)
        if sdk is not None:
            http[item.id] = sdk
        if fixture is not None:
            fixtures[item.id] = {key: call.response for key, call in fixture.calls.items()}
    return ItemRecordings(
        answers, fixtures, http, cassettes=manifest.cassettes, fixtures_folder=manifest.fixtures
    ), findings


def _relative(message: str, root: Path) -> str:
    """Keep the grading machine's paths out of the report."""
    return message.replace(str(root.resolve()) + "/", "").replace(str(root) + "/", "")
