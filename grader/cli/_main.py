"""The ``gradekit`` command line: ``main``, the parser, and each error's exit code.

Each command group lives in its own module: the student's loop (record, run, replay, key)
in ``_cli_record``; looking at recordings (cassette verify, stale, diff) in
``_cli_cassette``; grading (grade, check) in ``_cli_grade``; the grader's outputs (report
verify, gradebook merge, gradescope) in ``_cli_outputs``; the hand-out (starter) in
``_cli_starter``; recorded incidents (incident record, show) in ``_cli_incident``. The
exit codes are one table,
``grader._exits``, printed at the end of ``--help``. Only gradekit's own errors are caught
and printed as ``Name: message``; set ``GRADEKIT_DEBUG=1`` to see the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gradekit import (
    CassetteCollision,
    CassetteCorrupt,
    CassetteLocked,
    CassetteMiss,
    GradekitError,
    IncidentDivergence,
    MissingFixtureError,
    ProviderConfigError,
    ProviderError,
    SecretLeak,
    UsageError,
)
from gradekit._exceptions import in_chain
from grader._exits import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MISS,
    EXIT_PROVIDER,
    EXIT_USAGE,
    exit_help,
)
from grader.cli._cassette import add_cassette_commands
from grader.cli._dashboard import add_dashboard_commands
from grader.cli._grade import add_grading_commands
from grader.cli._incident import add_incident_commands
from grader.cli._outputs import add_output_commands
from grader.cli._record import add_recording_commands
from grader.cli._regression import add_regression_commands
from grader.cli._review import add_review_commands
from grader.cli._starter import add_starter_commands
from grader.outputs import GradebookError
from grader.recordings import ReviewError
from grader.records import LedgerCorrupt, grader_version
from grader.rubric import RubricError
from grader.submission import ManifestError, SubmissionFileError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except GradekitError as exc:
        if os.environ.get("GRADEKIT_DEBUG"):
            raise
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return _exit_code(exc)
    except Exception as exc:
        # An SDK wraps what its transport raised (openai.APIConnectionError from a
        # CassetteMiss): the kit's error in the chain is the one that says what to do.
        cause = in_chain(exc, GradekitError)
        if cause is None or os.environ.get("GRADEKIT_DEBUG"):
            raise
        print(f"{type(cause).__name__} (raised as {type(exc).__module__.partition('.')[0]}."
              f"{type(exc).__name__}): {cause}", file=sys.stderr)
        return _exit_code(cause)
    except KeyboardInterrupt:  # record and grade say more; any other command just stops
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _exit_code(exc: GradekitError) -> int:
    """Every documented error has its code in the one table (``grader._exits``)."""
    if isinstance(exc, CassetteMiss | MissingFixtureError | IncidentDivergence):
        return EXIT_MISS
    if isinstance(exc, ProviderError) and not isinstance(exc, ProviderConfigError):
        return EXIT_PROVIDER
    if isinstance(exc, ProviderConfigError | UsageError | ManifestError | RubricError
                  | GradebookError | CassetteCorrupt | CassetteCollision | CassetteLocked
                  | SecretLeak | ReviewError | SubmissionFileError | LedgerCorrupt):
        return EXIT_USAGE
    return EXIT_FAILED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradekit",
        description="Pin the contract, not the model: record once, grade offline.",
        epilog=exit_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gradekit {grader_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_recording_commands(commands)
    add_cassette_commands(commands)
    add_grading_commands(commands)
    add_output_commands(commands)
    add_starter_commands(commands)
    add_incident_commands(commands)
    add_review_commands(commands)
    add_regression_commands(commands)
    add_dashboard_commands(commands)
    return parser
