"""gradekit review: a person's verdict on a criterion of a graded report, appended to the ledger."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader._exits import EXIT_OK
from grader.outputs import KEY_ENV, KEY_FILE_ENV, load_key
from grader.records import ReviewRequest, record_review

__all__ = ["add_review_commands"]


def add_review_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``review``."""
    review = commands.add_parser(
        "review", help="record a person's review of one criterion of a graded report: "
        "override its points or confirm them",
        description="Append one review event to the ledger, tied to the report's digest (the "
        "report itself is never edited), then bring gradebook.csv and the student's "
        "results.json up to date with the final score. A later review of the same report and "
        "criterion supersedes this one; a new grading with another digest needs a new review.")
    review.add_argument("student", metavar="STUDENT", help="the student, as the gradebook "
                        "names them (a roster's student id, else the folder's name)")
    review.add_argument("--criterion", required=True, metavar="ID",
                        help="the criterion's id, as the gradebook's columns name it")
    review.add_argument("--points", default=None, metavar="N",
                        help="the points that stand instead (0 to the criterion's max, at most "
                        "two decimal places); without it, the automated points are confirmed")
    review.add_argument("--by", required=True, metavar="NAME", help="who reviewed it")
    review.add_argument("--reason", required=True, metavar="TEXT",
                        help="why, in one line: the student sees it in results.json")
    review.add_argument("--out", type=Path, default=Path("grades"),
                        help="the grades folder holding ledger.jsonl (default: grades)")
    review.add_argument("--report", default=None, metavar="DIGEST",
                        help="review this report of the student (its digest, or 8 or more of "
                        "its first hex digits; default: their latest graded report)")
    review.add_argument("--key-file", type=Path, default=None, metavar="FILE",
                        help=f"the key to sign results.json again with when it is signed "
                        f"(default: ${KEY_FILE_ENV}, else ${KEY_ENV})")
    review.set_defaults(handler=_review)


def _review(args: argparse.Namespace) -> int:
    key = load_key(args.key_file)  # a bad key is a usage error before anything is appended
    request = ReviewRequest(student=args.student, criterion=args.criterion, points=args.points,
                            by=args.by, reason=args.reason, report=args.report)
    recorded = record_review(args.out, request, key)
    print(recorded.line())
    if not recorded.latest:
        print(f"note: report {str(recorded.event['report'])[:12]} is not {args.student}'s "
              "latest grade, so the gradebook and results.json, which show the latest, keep "
              "their scores", file=sys.stderr)
    return EXIT_OK
