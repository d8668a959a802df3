"""gradekit dashboard: the cohort at a glance, a static site built from a grades folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradekit.internal import commands as printed
from grader._exits import EXIT_OK
from grader.ledger._folder import DASHBOARD

__all__ = ["add_dashboard_commands"]


def add_dashboard_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dashboard``."""
    dashboard = commands.add_parser(
        "dashboard",
        help="build a static HTML dashboard of a graded cohort (opens from disk)",
        description="Read GRADES (what `"
        + printed.GRADE_INTO(submissions="SUBMISSIONS", out="GRADES")
        + "` wrote: the gradebook, "
        "the reports, the calls each agent made and the ledger) and write a static site to "
        "SITE: the cohort page index.html, one page per submission, and their assets. It "
        "needs no server and fetches nothing; the same GRADES gives byte-identical files. "
        "Needs the gradekit[dashboard] extra.",
    )
    dashboard.add_argument(
        "grades",
        type=Path,
        metavar="GRADES",
        help="the grades folder (default: grades)",
        nargs="?",
        default=Path("grades"),
    )
    dashboard.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="SITE",
        help="where the site goes (default: GRADES/dashboard)",
    )
    dashboard.set_defaults(handler=_dashboard)


def _dashboard(args: argparse.Namespace) -> int:
    from grader.dashboard import build_dashboard  # the extra loads for this command only

    out: Path = args.out if args.out is not None else args.grades / DASHBOARD
    files = build_dashboard(args.grades, out)
    pages = sum(1 for path in files if path.suffix == ".html")
    print(f"dashboard: {pages} pages in {out}/; open {out / 'index.html'}", file=sys.stderr)
    return EXIT_OK
