"""Options more than one command group shares, each defined once."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader._isolation import REQUESTS
from grader._rubric import KIT_RUBRIC

__all__ = ["add_isolation_option", "add_rubric_option"]


def add_rubric_option(parser: argparse.ArgumentParser) -> None:
    """``--rubric``, resolved the same way by record, run, check and grade: the file given,
    else the kit's rubric. Never one found inside a submission: what a student records
    and runs is what the grader grades, and a rubric's custom checks run in the grader."""
    parser.add_argument("--rubric", type=Path, default=KIT_RUBRIC,
                        help="the rubric (default: the kit's rubric/bootcamp.toml; a rubric "
                        "inside a submission is never read on its own: its custom checks "
                        "would run in this process)")


def add_isolation_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--isolation", choices=REQUESTS, default="auto",
                        help="auto: bubblewrap namespaces when they work here, else the process "
                        "guard (default); namespaces: refuse to grade without them; process: "
                        "the guard only")
