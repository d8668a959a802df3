"""``gradekit starter``: the instructor's hand-out, the reference lab without its solutions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader._exits import EXIT_OK
from grader.cli._options import add_isolation_option, add_rubric_option
from grader.handout import build_starter
from grader.rubric import load_rubric
from grader.sandbox import choose_isolation

__all__ = ["add_starter_commands"]


def add_starter_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Register starter."""
    starter = commands.add_parser(
        "starter", help="write the repository handed to students: what the reference's "
        "[tool.gradekit.starter] lists, solution regions removed, checked before it is written")
    starter.add_argument("--out", type=Path, required=True, metavar="DIR",
                         help="where to write it (must not exist, or be empty); nothing is "
                         "written there when the hand-out is refused")
    starter.add_argument("--from", dest="root", type=Path, default=Path("."), metavar="ROOT",
                         help="the reference lab (default: .)")
    starter.add_argument("--own-replay", action="store_true",
                         help="students write their own Replay: a stub lab/replay.py, named by "
                         "the manifest's replay key, which the grader probes")
    starter.add_argument("--no-grade", action="store_true",
                         help="skip grading each folder of the hand-out that holds a "
                         "pyproject.toml (quicker, for trying the table out; the scan for "
                         "removed solution text still runs)")
    add_rubric_option(starter, lab=lambda args: Path(args.root))
    add_isolation_option(starter)
    starter.set_defaults(handler=_starter)


def _starter(args: argparse.Namespace) -> int:
    rubric = load_rubric(args.rubric)
    wall = None
    if not args.no_grade:
        wall = choose_isolation(args.isolation, allow_host_root=args.allow_host_root)
        print(f"grading each folder of the hand-out that holds a pyproject.toml; isolation: "
              f"{wall.held()}", file=sys.stderr)
    made = build_starter(args.root, args.out, own_replay=args.own_replay, rubric=rubric,
                         wall=wall, say=print)
    print(f"wrote {len(made.files)} files to {made.out}: {made.regions} solution region(s) "
          f"replaced in {', '.join(made.stripped) or 'no file'}")
    if made.readme:
        print(f"README.md: written from {made.readme}, with the rubric's criteria")
    if made.grades:
        raw = made.grades[0]
        others = "".join(f"; {g.folder}: {g.total}" for g in made.grades[1:])
        print(f"checked: no removed solution text in any file; the raw starter grades "
              f"{raw.total}{others}")
    else:
        print("checked: no removed solution text in any file; not graded (--no-grade)")
    return EXIT_OK
