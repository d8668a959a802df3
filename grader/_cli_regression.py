"""gradekit regression: promote reviewed failing runs into versioned regression sets; show
and verify them."""

from __future__ import annotations

import argparse

__all__ = ["add_regression_commands"]


def add_regression_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the commands (not yet any)."""
