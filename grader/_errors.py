"""The grader's errors, as branches of the kit's tree, each with its exit code.

Each message states the fix. Every error carries the code the command line exits with
(``exit_code``, one of ``grader._exits.EXIT_TABLE``); the kit's own errors and their
codes are drawn in ``gradekit._exceptions``. Codes: 1 failed, 2 usage, 3 miss, 4 provider.

    GradekitError                  1  (the kit's)
    ├── UsageError                 2  (the kit's)
    │   └── DashboardUnavailable   2  `gradekit dashboard` without the gradekit[dashboard] extra
    ├── RubricError                2  a rubric that does not validate
    ├── ManifestError              2  a [tool.gradekit] table that does not validate
    ├── GradebookError             2  a gradebook or roster that cannot be read or merged
    ├── LedgerCorrupt              2  a grading ledger line that is not an event of its chain
    ├── RecordingError             2  a recording file that cannot be read (stale, diff)
    │   └── ChangeLogCorrupt       2  DATASET_CHANGES.md does not parse
    ├── MissingPackage             1  the agent imports a package the grader lacks: not graded
    ├── SubmissionTooLarge         1  its copy would pass disk_mb, submission_entries or _depth
    ├── HandOutRefused             1  a built hand-out holds a solution: nothing is written
    └── SubmissionFileError        2  a submission file the grader will not read (link, size)
        └── MissingSubmissionFile  2  it is not there

Each is defined here but ``MissingPackage``, which builds its own message and lives with
the verdict it carries, in ``grader.grading._packages``, and ``SubmissionTooLarge``, which
lives with the copy it bounds, in ``grader.sandbox._layout``. The packages' surfaces
re-export each where its callers look for it (``grader.rubric.RubricError``).
"""

from __future__ import annotations

from gradekit import GradekitError, UsageError
from grader._exits import EXIT_FAILED, EXIT_USAGE

__all__ = [
    "ChangeLogCorrupt",
    "DashboardUnavailable",
    "GradebookError",
    "HandOutRefused",
    "LedgerCorrupt",
    "ManifestError",
    "MissingSubmissionFile",
    "RecordingError",
    "RubricError",
    "SubmissionFileError",
]


class DashboardUnavailable(UsageError):
    """The chart libraries, the ``gradekit[dashboard]`` extra, are not installed."""

    exit_code = EXIT_USAGE


class RubricError(GradekitError):
    """A rubric file that cannot be used; the message points at the problem."""

    exit_code = EXIT_USAGE


class ManifestError(GradekitError):
    """A missing or broken ``[tool.gradekit]`` table."""

    exit_code = EXIT_USAGE


class GradebookError(GradekitError):
    """A gradebook that cannot be written, read or merged; the message says why."""

    exit_code = EXIT_USAGE


class HandOutRefused(GradekitError):
    """``gradekit starter`` built a hand-out that holds a removed region's text, or a folder
    that grades above the raw starter; the message names the path and the fix."""

    exit_code = EXIT_FAILED


class LedgerCorrupt(GradekitError):
    """A ledger line that is not an event of the chain; the message names the line."""

    exit_code = EXIT_USAGE


class RecordingError(GradekitError):
    """A recording file that cannot be read as one (``cassette stale``, ``cassette diff``,
    ``record --rerecord``); the message names the file and the fix."""

    exit_code = EXIT_USAGE


class ChangeLogCorrupt(RecordingError):
    """``DATASET_CHANGES.md`` does not parse: it was edited by hand."""

    exit_code = EXIT_USAGE


class SubmissionFileError(GradekitError):
    """A submission file the grader will not read; the message says what is wrong and the fix."""

    exit_code = EXIT_USAGE


class MissingSubmissionFile(SubmissionFileError):
    """The file, or a folder on its path, does not exist in the submission."""

    exit_code = EXIT_USAGE
