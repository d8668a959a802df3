"""``gradekit starter``: the instructor's hand-out, the reference lab without its solutions."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader._exits import EXIT_OK
from grader.handout import build_starter

__all__ = ["add_starter_commands"]


def add_starter_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Register starter."""
    starter = commands.add_parser(
        "starter", help="write the repository handed to students (solutions and recordings "
        "removed)")
    starter.add_argument("--out", type=Path, required=True, metavar="DIR",
                         help="where to write it (must not exist, or be empty)")
    starter.add_argument("--from", dest="root", type=Path, default=Path("."), metavar="ROOT",
                         help="the reference lab (default: .)")
    starter.add_argument("--own-replay", action="store_true",
                         help="students write their own Replay: a stub lab/replay.py, named by "
                         "the manifest's replay key, which the grader probes")
    starter.set_defaults(handler=_starter)


def _starter(args: argparse.Namespace) -> int:
    made = build_starter(args.root, args.out, own_replay=args.own_replay)
    print(f"wrote {len(made.files)} files to {made.out}: {made.regions} solution region(s) "
          f"replaced in {', '.join(made.stripped) or 'no file'}")
    return EXIT_OK
