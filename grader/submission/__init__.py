"""What a student handed in, read from the grader's side: the manifest (``[tool.gradekit]``),
the submission's files (read with caps, never through a link), who the submission is
(the roster: decided by the instructor, never by the submission) and the tamper flags (a
static scan of its Python source for code that reaches for the harness or the process).

May import: base.
"""

from __future__ import annotations

from grader.submission._files import (
    CASSETTE_CAP,
    CHANGE_LOG_CAP,
    FAILURES_CAP,
    FIXTURE_CAP,
    INCIDENT_CAP,
    PYPROJECT_CAP,
    SOURCE_CAP,
    MissingSubmissionFile,
    SubmissionFileError,
    read_submission_file,
    require_submission_folder,
    submission_entries,
    submission_files,
)
from grader.submission._manifest import (
    DEFAULT_REPLAY,
    Manifest,
    ManifestError,
    call_agent,
    load_agent,
    load_manifest,
    load_tools,
    takes_tools,
)
from grader.submission._roster import (
    ROSTER_HEADER,
    Identity,
    Roster,
    identify,
    load_roster,
    parse_roster,
    unclaimed,
)
from grader.submission._tamper import FILE_CAP, tamper_findings

__all__ = [
    "CASSETTE_CAP",
    "CHANGE_LOG_CAP",
    "DEFAULT_REPLAY",
    "FAILURES_CAP",
    "FILE_CAP",
    "FIXTURE_CAP",
    "INCIDENT_CAP",
    "PYPROJECT_CAP",
    "ROSTER_HEADER",
    "SOURCE_CAP",
    "Identity",
    "Manifest",
    "ManifestError",
    "MissingSubmissionFile",
    "Roster",
    "SubmissionFileError",
    "call_agent",
    "identify",
    "load_agent",
    "load_manifest",
    "load_roster",
    "load_tools",
    "parse_roster",
    "read_submission_file",
    "require_submission_folder",
    "submission_entries",
    "submission_files",
    "takes_tools",
    "tamper_findings",
    "unclaimed",
]
