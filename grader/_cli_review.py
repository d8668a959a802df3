"""gradekit review: a person's verdict on a criterion of a graded report, appended to the ledger."""

from __future__ import annotations

import argparse

__all__ = ["add_review_commands"]


def add_review_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the commands (not yet any)."""
