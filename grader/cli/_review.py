"""gradekit review: a person's verdict on a criterion of a graded report, appended to the ledger;
``review --pending``: one criterion confirmed on every report waiting for it; gradekit reviews
export / import: a review sheet a TA fills in a spreadsheet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradekit import UsageError
from gradekit.internal import commands, write_atomic
from grader._exits import EXIT_OK
from grader.ledger import (
    LEDGER,
    AppendedReview,
    ReviewRequest,
    append_review,
    append_reviews,
    export_sheet,
    plan_confirmations,
    read_ledger,
    read_sheet,
)
from grader.outputs import KEY_ENV, KEY_FILE_ENV, load_key

__all__ = ["add_review_commands"]


def add_review_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``review`` and ``reviews``."""
    review = commands.add_parser(
        "review",
        help="record a person's review of one criterion of a graded report: "
        "override its points or confirm them; or confirm one criterion on every report "
        "waiting for it (--pending)",
        description="Append one review event to the ledger, tied to the report's digest (the "
        "report itself is never edited), then bring gradebook.csv and the student's "
        "results.json up to date with the final score. A later review of the same report and "
        "criterion supersedes this one; a new grading with another digest needs a new review. "
        "With --pending instead of STUDENT: confirm --criterion on every report of the "
        "gradebook that has it pending (marked for review, never reviewed), each confirmation "
        "its own review event, all appended at once. Bulk review only confirms: an override "
        "is made one report at a time, here or in a review sheet (reviews export).",
    )
    review.add_argument(
        "student",
        metavar="STUDENT",
        nargs="?",
        default=None,
        help="the student, as the gradebook names them (a roster's student id, "
        "else the folder's name); or --pending",
    )
    review.add_argument(
        "--criterion",
        required=True,
        metavar="ID",
        help="the criterion's id, as the gradebook's columns name it",
    )
    review.add_argument(
        "--points",
        default=None,
        metavar="N",
        help="the points that stand instead (0 to the criterion's max, at most "
        "two decimal places); without it, the automated points are confirmed; "
        "never with --pending",
    )
    review.add_argument("--by", required=True, metavar="NAME", help="who reviewed it")
    review.add_argument(
        "--reason",
        required=True,
        metavar="TEXT",
        help="why, in one line: the student sees it in results.json",
    )
    review.add_argument(
        "--out",
        type=Path,
        default=Path("grades"),
        help="the grades folder holding ledger.jsonl (default: grades)",
    )
    review.add_argument(
        "--report",
        default=None,
        metavar="DIGEST",
        help="review this report of the student (its digest, or 8 or more of "
        "its first hex digits; default: their latest graded report)",
    )
    review.add_argument(
        "--pending",
        action="store_true",
        help="instead of STUDENT: confirm the criterion on every report of the "
        "gradebook that has it pending; one that needs a new review (reviewed "
        "on an earlier report) is left for a person",
    )
    review.add_argument(
        "--passed",
        action="store_true",
        help="with --pending: only the reports where every automated check of "
        "the criterion passed (each check's 'passed' in report.json)",
    )
    review.add_argument(
        "--dry-run",
        action="store_true",
        help="with --pending: list what would be confirmed; append nothing",
    )
    _key_file(review)
    review.set_defaults(handler=_review)

    reviews = commands.add_parser(
        "reviews",
        help="a review sheet: export the reports to review as CSV, import the "
        "decisions a TA filled in",
    )
    sheets = reviews.add_subparsers(dest="reviews_command", required=True, metavar="COMMAND")
    export = sheets.add_parser(
        "export",
        help="write a review sheet (CSV) of the gradebook's reports to review",
        description="One row per graded report and criterion: the criteria marked for review or "
        "reviewed before (--criterion: that one on every report), with the report's full "
        "digest, the automated points, where the criterion stands (marked) and the report's "
        "evidence. Fill decision (confirm or override), points (an override's), by and "
        "reason; leave decision empty to skip a row; then import it.",
    )
    export.add_argument(
        "--sheet",
        type=Path,
        required=True,
        metavar="FILE",
        help="the CSV file to write (never over an existing one)",
    )
    export.add_argument(
        "--out",
        type=Path,
        default=Path("grades"),
        help="the grades folder holding gradebook.csv (default: grades)",
    )
    export.add_argument(
        "--criterion",
        default=None,
        metavar="ID",
        help="only this criterion, on every graded report",
    )
    export.add_argument(
        "--pending",
        action="store_true",
        help="only the criteria pending (marked, never reviewed) or needing a new review",
    )
    export.set_defaults(handler=_export)
    load = sheets.add_parser(
        "import",
        help="record the decisions of a filled review sheet as review events",
        description="Check every row (the report is archived, verifies and is the student's; "
        "the criterion is the report's; points as review --points takes them; by and reason "
        "one line each; one decision per report and criterion) before anything is appended, "
        "and list every bad row. A valid sheet's reviews are appended at once, then the "
        "gradebook and each reviewed results.json are written once.",
    )
    load.add_argument("sheet", type=Path, metavar="FILE", help="the filled review sheet (CSV)")
    load.add_argument(
        "--by", default=None, metavar="NAME", help="the reviewer of rows whose by cell is empty"
    )
    load.add_argument(
        "--out",
        type=Path,
        default=Path("grades"),
        help="the grades folder holding ledger.jsonl (default: grades)",
    )
    _key_file(load)
    load.set_defaults(handler=_import)


def _key_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"the key to sign results.json again with when it is signed "
        f"(default: ${KEY_FILE_ENV}, else ${KEY_ENV})",
    )


def _review(args: argparse.Namespace) -> int:
    if args.pending:
        return _bulk(args)
    if args.student is None:
        raise UsageError(
            "name the STUDENT whose report you review, or pass --pending to "
            f"confirm {args.criterion} on every report waiting for it"
        )
    if args.passed or args.dry_run:
        raise UsageError(
            f"{'--passed' if args.passed else '--dry-run'} goes with --pending "
            f"only; drop it to review {args.student}"
        )
    key = load_key(args.key_file)  # a bad key is a usage error before anything is appended
    request = ReviewRequest(
        student=args.student,
        criterion=args.criterion,
        points=args.points,
        by=args.by,
        reason=args.reason,
        report=args.report,
    )
    _print(append_review(args.out, request, key))
    return EXIT_OK


def _bulk(args: argparse.Namespace) -> int:
    if args.student is not None:
        raise UsageError(
            f"give STUDENT ({args.student}) or --pending, not both: one review, "
            "or a confirmation on every report waiting for it"
        )
    if args.points is not None:
        raise UsageError(
            "--pending only confirms the automated points: override one report "
            "at a time (review STUDENT --points N) or in a review sheet "
            "(reviews export)"
        )
    if args.report is not None:
        raise UsageError(
            "--pending confirms each student's report in the gradebook: drop "
            "--report, or name the STUDENT whose earlier report you review"
        )
    key = load_key(args.key_file)
    events = read_ledger(args.out / LEDGER).events
    found = plan_confirmations(
        args.out, events, args.criterion, passed=args.passed, by=args.by, reason=args.reason
    )
    if args.dry_run:
        for line in found.would():
            print(line)
    else:
        for recorded in append_reviews(args.out, events, found.planned, key):
            _print(recorded)
    print(found.summary(done=not args.dry_run))
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    if not args.sheet.parent.is_dir():
        raise UsageError(
            f"{args.sheet.parent} is not a folder: pass --sheet with a file in one that exists"
        )
    if args.sheet.exists():
        raise UsageError(
            f"{args.sheet} exists: pass another --sheet, or move it away first "
            "(a filled sheet is never written over)"
        )
    events = read_ledger(args.out / LEDGER).events
    sheet = export_sheet(args.out, events, args.criterion, args.pending)
    write_atomic(args.sheet, sheet.data)
    then = commands.from_here(
        commands.REVIEWS_IMPORT(sheet=str(args.sheet), by="NAME", out=str(args.out))
    )
    print(
        f"wrote {args.sheet}: {sheet.rows} row{'' if sheet.rows == 1 else 's'} of "
        f"{sheet.reports} report{'' if sheet.reports == 1 else 's'} ({sheet.pending} pending, "
        f"{sheet.stale} needing a new review); fill decision (confirm, or override with "
        f"points), by and reason, then `{then}`"
    )
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    try:
        data = args.sheet.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read the review sheet {args.sheet} ({exc.strerror}): pass the "
            "CSV file the export wrote and the TA filled"
        ) from None
    key = load_key(args.key_file)
    events = read_ledger(args.out / LEDGER).events
    sheet = read_sheet(args.sheet, data, args.out, events, args.by)
    recorded = append_reviews(args.out, events, sheet.planned, key)
    for one in recorded:
        _print(one)
    overrides = sum(one.review.points is not None for one in recorded)
    counts = [
        f"{len(recorded) - overrides} confirmed",
        f"{overrides} overridden",
        f"{sheet.blank} without a decision, skipped",
    ]
    if sheet.already:
        counts.append(f"{sheet.already} recorded already, not again")
    verb = "recorded" if recorded else "nothing to record: no new decision in"
    print(f"{verb} {args.sheet}: {', '.join(counts)}")
    return EXIT_OK


def _print(recorded: AppendedReview) -> None:
    """The review's line; a note when its report is not the student's latest."""
    print(recorded.line())
    if not recorded.latest:
        student = recorded.event["student"]
        print(
            f"note: report {str(recorded.event['report'])[:12]} is not {student}'s "
            "latest grade, so the gradebook and results.json, which show the latest, keep "
            "their scores",
            file=sys.stderr,
        )
