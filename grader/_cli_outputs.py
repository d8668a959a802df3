"""The grader's outputs on the command line: report verify and gradebook merge."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader._exits import EXIT_FAILED, EXIT_OK
from grader._gradebook import merge_gradebooks
from grader._report import verify_report

__all__ = ["add_output_commands"]


def add_output_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``report verify`` and ``gradebook merge``."""
    report = commands.add_parser("report", help="work with report.json files")
    report_commands = report.add_subparsers(dest="report_command", required=True)
    verify = report_commands.add_parser("verify", help="recompute the digest; exit 1 if edited")
    verify.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    verify.set_defaults(handler=_verify_report)

    gradebook = commands.add_parser("gradebook", help="work with gradebook.csv files")
    gradebook_commands = gradebook.add_subparsers(dest="gradebook_command", required=True)
    merge = gradebook_commands.add_parser("merge", help="merge sharded gradebooks into one")
    merge.add_argument("parts", nargs="+", type=Path, metavar="PART")
    merge.add_argument("--out", type=Path, required=True, help="the merged gradebook.csv")
    merge.set_defaults(handler=_merge)


def _verify_report(args: argparse.Namespace) -> int:
    failed = False
    for path in args.paths:
        ok, message = verify_report(path.read_bytes())
        stream = sys.stdout if ok else sys.stderr
        print(f"{'ok  ' if ok else 'FAIL'} {path}: {message}", file=stream)
        failed = failed or not ok
    return EXIT_FAILED if failed else EXIT_OK


def _merge(args: argparse.Namespace) -> int:
    args.out.write_bytes(merge_gradebooks([part.read_bytes() for part in args.parts]))
    print(f"merged {len(args.parts)} gradebooks into {args.out}")
    return EXIT_OK
