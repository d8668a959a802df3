"""Benchmark gradekit's grader: the sandbox's replay pipe, one grade, the checkpoints, a batch
under both walls, a child's start with and without bubblewrap, a hanging submission, where
one submission's time goes, the copy detector on a cohort, and how each step's cost grows
with the cohort.

    python bench/grader.py            # full run: about fifteen minutes on two cores
    python bench/grader.py --quick    # smoke-sized, about a minute and a half
    python bench/run.py --grader      # the same, through the main bench (make bench ARGS=--grader)
    python bench/grader.py --growth   # only how cost grows: 200, 2 000, 10 000 submissions
    python bench/grader.py --growth --sizes 100,1000  # the same at other cohort sizes
    python bench/grader.py --copies   # only the copy detector: 200 and 10 000 submissions

Prints Markdown tables in the main bench's format; progress goes to stderr.
Everything it grades is generated in a temporary folder and removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if not __package__:
    # Run as a script, sys.path[0] is bench/, where this very file would shadow the `grader`
    # package: import bench, lab and grader from this checkout instead.
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._copies import FULL as COPIES_FULL
from bench._copies import QUICK as COPIES_QUICK
from bench._copies import copies_table
from bench._grader_measure import (
    FULL,
    QUICK,
    GraderPlan,
    batch_table,
    check_table,
    grade_table,
    pipe_table,
    progress,
)
from bench._growth import FULL as GROWTH_FULL
from bench._growth import QUICK as GROWTH_QUICK
from bench._growth import growth_table, render_growth
from bench._isolation_measure import breakdown_table, hang_table, start_table
from bench._table import render
from bench._timing import adopt_orphans

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run every section and print its table; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller sizes")
    parser.add_argument(
        "--growth", action="store_true", help="only the section on how cost grows with the cohort"
    )
    parser.add_argument(
        "--copies",
        action="store_true",
        help="only the copy detector's section (200 and 10 000 submissions; --quick: 50 and 500)",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        metavar="N,N,...",
        help="the growth section's cohort sizes, smallest first (default: "
        "200,2000,10000; --quick: 50,500,2500)",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    growth = GROWTH_QUICK if args.quick else GROWTH_FULL
    if args.sizes is not None:
        growth = growth.sized(args.sizes)
    adopt_orphans()  # CPU rows count bubblewrap's orphaned sandbox processes too
    print(_machine())
    print(_method(plan), flush=True)
    with tempfile.TemporaryDirectory(prefix="gradekit-bench-grader-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o711)  # a root grader's children, uid 65534, pass through it
        sections = (
            ()
            if args.growth or args.copies
            else (
                pipe_table,
                grade_table,
                check_table,
                batch_table,
                start_table,
                hang_table,
                breakdown_table,
            )
        )
        for section in sections:
            table = section(plan, folder)
            print()
            print(render(table), flush=True)
        if not args.growth:
            progress("copy detection: synthetic cohorts, then find_copies in a fresh process")
            sizes = COPIES_QUICK if args.quick else COPIES_FULL
            print()
            print(render(copies_table(sizes, folder)), flush=True)
        if not args.copies:
            print()
            print(render_growth(growth_table(growth, folder, progress)), flush=True)
    return 0


def _sizes(text: str) -> tuple[int, ...]:
    """``--sizes``: cohort sizes, smallest first; argparse's usage error otherwise."""
    parts = text.split(",")
    if not all(part.strip().isdigit() for part in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give whole numbers separated by commas, such as 200,2000,10000"
        )
    sizes = tuple(int(part) for part in parts)
    try:
        GROWTH_FULL.sized(sizes)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return sizes


def _machine() -> str:
    python = f"{platform.python_implementation()} {platform.python_version()}"
    machine = f"Machine: {python}, {platform.platform()}, {os.cpu_count()} CPUs"
    if hasattr(os, "getloadavg"):  # a busy machine explains noisy numbers: say so up front
        machine += f", load average {os.getloadavg()[0]:.2f} at start"
    return machine


def _method(plan: GraderPlan) -> str:
    return (
        f"Run: {plan.name} (grader). Times are wall clock (time.perf_counter_ns); whole "
        "commands are `python -m grader ...` in a fresh process, start-up included. Rows "
        "marked '1 run' were timed once."
    )


if __name__ == "__main__":
    sys.exit(main())
