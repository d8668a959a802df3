"""The ``gradekit`` command line: ``main`` and the parser.

Each command group lives in its own module of this package:

- ``_record``: the student's loop: record, run, replay, key;
- ``_cassette``: looking at recordings: cassette verify, stale, diff;
- ``_grade``: grading: grade, check;
- ``_outputs``: the grader's outputs: report verify, gradebook merge, history (why a
  student's grade changed), ledger verify, gradescope build and run;
- ``_starter``: the hand-out: starter;
- ``_incident``: recorded incidents: incident record, show;
- ``_review``: a person's verdict on a graded criterion: review (one, or all pending at
  once), reviews export, import (a review sheet a TA fills);
- ``_regression``: regression sets: regression promote, show, verify, public;
- ``_cases``: evaluation cases and the path to a set: case from-run, new, revise,
  archive, show; investigate, disposition, approve;
- ``_dashboard``: the cohort at a glance: dashboard.

Options more than one group shares are ``_options``'. The exit codes are one table,
``grader._exits``, printed at the end of ``--help``. Only gradekit's own errors are caught
and printed as ``Name: message``; set ``GRADEKIT_DEBUG=1`` to see the traceback. Each
carries its exit code (``exit_code``; the trees in ``gradekit._exceptions`` and
``grader._errors`` draw them).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gradekit import GradekitError
from gradekit.internal import commands, in_chain
from grader._exits import EXIT_INTERRUPTED, exit_help
from grader.cli._cases import add_case_commands
from grader.cli._cassette import add_cassette_commands
from grader.cli._dashboard import add_dashboard_commands
from grader.cli._grade import add_grading_commands
from grader.cli._incident import add_incident_commands
from grader.cli._options import resolve_rubric
from grader.cli._outputs import add_output_commands
from grader.cli._record import add_recording_commands
from grader.cli._regression import add_regression_commands
from grader.cli._review import add_review_commands
from grader.cli._starter import add_starter_commands
from grader.ledger import grader_version

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    before = os.environ.get(commands.FORM)
    try:
        commands.use_lab(args.rubric_lab(args) if "rubric_lab" in vars(args) else Path("."))
        resolve_rubric(args)
        code: int = args.handler(args)
        return code
    except GradekitError as exc:
        if os.environ.get("GRADEKIT_DEBUG"):
            raise
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        # An SDK wraps what its transport raised (openai.APIConnectionError from a
        # CassetteMiss): the kit's error in the chain is the one that says what to do.
        cause = in_chain(exc, GradekitError)
        if cause is None or os.environ.get("GRADEKIT_DEBUG"):
            raise
        print(
            f"{type(cause).__name__} (raised as {type(exc).__module__.partition('.')[0]}."
            f"{type(exc).__name__}): {cause}",
            file=sys.stderr,
        )
        return cause.exit_code
    except KeyboardInterrupt:  # record and grade say more; any other command just stops
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:  # a caller that runs main in its own process gets its setting back
        if before is None:
            os.environ.pop(commands.FORM, None)
        else:
            os.environ[commands.FORM] = before


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
    add_case_commands(commands)
    add_dashboard_commands(commands)
    return parser
