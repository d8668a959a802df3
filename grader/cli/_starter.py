"""``gradekit starter``: the instructor's hand-out, the reference lab without its solutions;
``gradekit new``: a lab of the instructor's own to start from."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradekit.internal import commands
from grader._exits import EXIT_OK
from grader.cli._options import add_rubric_option, add_wall_option
from grader.handout import build_starter, new_lab
from grader.rubric import load_rubric
from grader.sandbox import choose_wall

__all__ = ["add_starter_commands"]


def add_starter_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Register starter and new."""
    new = commands.add_parser(
        "new",
        help="start a lab of your own in a new folder: manifest, rubric with one case, "
        "a read-only tool and its data, a reference agent, FAILURES.md, the students' README",
    )
    new.add_argument("folder", type=Path, help="the lab's folder (missing or empty)")
    new.add_argument(
        "--package", help="the lab's Python package (default: the folder's name, with - as _)"
    )
    new.add_argument(
        "--title", help="the rubric's and README's title (default: from the folder's name)"
    )
    new.set_defaults(handler=_new)
    starter = commands.add_parser(
        "starter",
        help="write the repository handed to students: what the reference's "
        "[tool.gradekit.starter] lists, solution regions removed, checked before it is written",
    )
    starter.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="where to write it (must not exist, or be empty); nothing is "
        "written there when the hand-out is refused",
    )
    starter.add_argument(
        "--from",
        dest="root",
        type=Path,
        default=Path("."),
        metavar="ROOT",
        help="the reference lab (default: .)",
    )
    starter.add_argument(
        "--own-replay",
        action="store_true",
        help="students write their own Replay: a stub <package>/replay.py, "
        "named by the manifest's replay key, which the grader probes",
    )
    starter.add_argument(
        "--no-grade",
        action="store_true",
        help="skip grading each folder of the hand-out that holds a "
        "pyproject.toml (quicker, for trying the table out; the scan for "
        "removed solution text still runs)",
    )
    add_rubric_option(starter, lab=lambda args: Path(args.root))
    add_wall_option(starter)
    starter.set_defaults(handler=_starter)


def _new(args: argparse.Namespace) -> int:
    made = new_lab(args.folder, package=args.package, title=args.title)
    print(
        f"wrote {len(made.files)} files to {made.root}: the package {made.package}, the "
        f"rubric rubric/lab.toml (case {made.case}), the tool {made.package}/tools.py"
    )
    print(f"next, in {made.root} (docs/own-lab.md walks through each step):")
    for argv, why in (
        (("record",), "once, live, with a provider configured"),
        (("check",), "the three checkpoints, offline"),
        (("grade",), "the reference's grade, offline"),
        (("starter", "--out", f"../{made.root.resolve().name}-handout"), "the students' hand-out"),
    ):
        print(f"  {commands.shown(*argv, form=commands.lab_form(made.root)):<52} {why}")
    return EXIT_OK


def _starter(args: argparse.Namespace) -> int:
    rubric = load_rubric(args.rubric)
    wall = None
    if not args.no_grade:
        wall = choose_wall(args.wall, allow_host_root=args.allow_host_root)
        print(
            f"grading each folder of the hand-out that holds a pyproject.toml; isolation: "
            f"{wall.held()}",
            file=sys.stderr,
        )
    made = build_starter(
        args.root, args.out, own_replay=args.own_replay, rubric=rubric, wall=wall, say=print
    )
    print(
        f"wrote {len(made.files)} files to {made.out}: {made.regions} solution region(s) "
        f"replaced in {', '.join(made.stripped) or 'no file'}"
    )
    if made.readme:
        print(f"README.md: written from {made.readme}, with the rubric's criteria")
    if made.grades:
        raw = made.grades[0]
        others = "".join(f"; {g.folder}: {g.total}" for g in made.grades[1:])
        print(
            f"checked: no removed solution text in any file; the raw starter grades "
            f"{raw.total}{others}"
        )
    else:
        print("checked: no removed solution text in any file; not graded (--no-grade)")
    return EXIT_OK
