"""Recordings as a person reading a re-recording sees them: cassettes and tool fixtures
decoded alike, how stale they are, what a re-recording changed, the dataset's change log,
and ``cassette verify``.

May import: base, submission.
"""

from __future__ import annotations

from grader.recordings._cassette_verify import (
    recording_files,
    verify_cassette,
    verify_fixture,
    verify_http_cassette,
    verify_recording,
)
from grader.recordings._changelog import (
    CHANGE_LOG,
    Change,
    ChangeLogCorrupt,
    append_change,
    change_matches,
    check_change,
    decode_changes,
    digest_file,
    read_changes,
    require_reason,
)
from grader.recordings._diff import diff_files, diff_recordings, render_diff, rerecord_summary
from grader.recordings._recordings import (
    RecordingError,
    decode_recording,
    is_http_cassette,
    read_bytes,
)
from grader.recordings._stale import parse_age, render_stale, stale

__all__ = [
    "CHANGE_LOG",
    "Change",
    "ChangeLogCorrupt",
    "RecordingError",
    "append_change",
    "change_matches",
    "check_change",
    "decode_changes",
    "decode_recording",
    "diff_files",
    "diff_recordings",
    "digest_file",
    "is_http_cassette",
    "parse_age",
    "read_bytes",
    "read_changes",
    "recording_files",
    "render_diff",
    "render_stale",
    "require_reason",
    "rerecord_summary",
    "stale",
    "verify_cassette",
    "verify_fixture",
    "verify_http_cassette",
    "verify_recording",
]
