"""Grading on the command line: grade (a batch of submissions) and check (the three
one-minute checkpoints)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path

from gradekit import UsageError
from gradekit.internal import commands as printed
from grader._exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from grader._model import CONTRACT
from grader.batch import (
    CohortInterrupted,
    CohortListener,
    Comparison,
    Earlier,
    Shard,
    grade_cohort,
    parse_shard,
    print_heartbeat,
    print_progress,
)
from grader.cli._options import add_rubric_option, add_wall_option
from grader.grading import MissingPackage, predicted, run_checkpoints
from grader.ledger import COPIES, GRADEBOOK, LEDGER, REPORT, ReviewState
from grader.outputs import REPORTED, GradebookRow, points_text, review_verdict
from grader.rubric import Rubric, load_rubric
from grader.sandbox import Wall, choose_wall
from grader.scoring import contract_gaps, shown_keys
from grader.submission import ROSTER_HEADER, Identity, Roster, unclaimed

__all__ = ["add_grading_commands"]


def default_jobs() -> int:
    """The cores this process may run on, plus one: between its runs a grading waits on the
    kernel (a fork, a namespace's teardown), and one worker more keeps every core busy
    (200 submissions on 2 cores behind namespaces: 83 s with 2 workers, 73 s with 3)."""
    return (
        len(os.sched_getaffinity(0)) + 1
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1) + 1
    )


def add_grading_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Register grade and check."""
    grade = commands.add_parser("grade", help="grade submissions offline against a rubric")
    grade.add_argument(
        "paths",
        nargs="*",
        type=Path,
        default=[Path(".")],
        metavar="PATH",
        help="a submission, or a folder of submissions (default: .)",
    )
    add_rubric_option(grade)
    grade.add_argument(
        "--out",
        type=Path,
        default=Path("grades"),
        help="where reports and gradebook.csv go (default: grades/)",
    )
    grade.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(),
        help="submissions graded at once (default: the cores this process may use, plus one)",
    )
    grade.add_argument(
        "--label",
        default=None,
        help="provider label of the primary run (default: drawn afresh for "
        "each submission, as the second label and the hash seeds are; "
        "never changes the grade)",
    )
    merge = printed.GRADEBOOK_MERGE(first="PART1", second="PART2", out="gradebook.csv")
    grade.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="K/N",
        help=f"grade only part K of N (merge the parts with `{merge}`)",
    )
    grade.add_argument(
        "--only",
        action="append",
        default=None,
        metavar="NAME",
        help="grade only the submission folder NAME among those the paths hold "
        "(repeat it for more); every other row of the gradebook stays as it was",
    )
    grade.add_argument(
        "--replace",
        action="store_true",
        help="the gradebook holds only this batch's rows (default: a grades "
        "folder's gradebook is updated: each submission graded replaces its "
        "own row and every other row stays); each row dropped is listed",
    )
    grade.add_argument(
        "--roster",
        type=Path,
        default=None,
        metavar="CSV",
        help=f"who each folder is: a CSV with the header {','.join(ROSTER_HEADER)} "
        "(default: each folder's name is its student)",
    )
    grade.add_argument(
        "--handout",
        type=Path,
        default=None,
        metavar="DIR",
        help="the starter the students were given: what it holds is never "
        "taken for a copy (default: what more than half the cohort, or more "
        "than 20 submissions, hold is common)",
    )
    add_wall_option(grade)
    grade.add_argument(
        "--key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="sign every report.json and results.json with this instructor key "
        "(default: $GRADEKIT_SIGNING_KEY_FILE or $GRADEKIT_SIGNING_KEY; none: "
        "unsigned)",
    )
    grade.add_argument(
        "--quiet",
        action="store_true",
        help="no progress line per submission and no heartbeat, only the rows",
    )
    grade.add_argument(
        "--operator",
        default=None,
        metavar="NAME",
        help="who runs the batch, for the ledger (a label, not an "
        "authenticated identity; default: $GRADEKIT_OPERATOR, else the login "
        "name)",
    )
    grade.add_argument(
        "--idempotency-key",
        default="",
        metavar="KEY",
        help="a name for this batch: asked again with the same key, the batch "
        "the ledger recorded under it is reused and nothing is graded or "
        "appended (e.g. week3-final)",
    )
    grade.set_defaults(handler=_grade)

    check = commands.add_parser("check", help="the three one-minute checkpoints")
    check.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=None,
        metavar="PATH",
        help="the submission folder (default: .); its own agent and lab run",
    )
    check.add_argument(
        "--root", type=Path, default=None, help="the same as PATH, as record and run spell it"
    )
    add_rubric_option(check, lab=lambda args: Path(args.path or args.root or "."), cwd_only=True)
    add_wall_option(check)
    check.set_defaults(handler=_check)


def _grade(args: argparse.Namespace) -> int:
    try:
        graded = grade_cohort(
            args.paths,
            args.rubric,
            out=args.out,
            jobs=args.jobs,
            label=args.label,
            only=args.only or (),
            shard=args.shard,
            replace=args.replace,
            roster=args.roster,
            handout=args.handout,
            wall=args.wall,
            allow_host_root=args.allow_host_root,
            key_file=args.key_file,
            operator=args.operator,
            idempotency_key=args.idempotency_key,
            progress=None if args.quiet else _progress,
            heartbeat=None if args.quiet else print_heartbeat,
            listener=_Printer(args),
        )
    except CohortInterrupted as stopped:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the first Ctrl-C is the one that counts
        rows, not_graded = stopped.rows, stopped.not_graded
        had = {row.submission for row in stopped.earlier.regraded}
        _print_rows(rows)
        for folder in not_graded:
            still = "; its earlier row stays in the gradebook" if folder in had else ""
            print(f"{folder}: NOT GRADED: interrupted by Ctrl-C before it finished{still}")
        earlier = len(stopped.earlier.kept_rows) + len(had & set(not_graded))
        print(
            f"interrupted: {len(not_graded)} submissions not graded; "
            f"{args.out / GRADEBOOK} holds the {len(rows)} that finished"
            + (f" and {_rows(earlier)} of earlier batches" if earlier else "")
            + ". Grade the others again (their folders are listed above).",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print(
            f"interrupted: {args.out / GRADEBOOK} holds every row that finished, if "
            "any; run the same command again to grade them all",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if graded.reused is not None:
        return _reused(graded.reused, args.out)
    if len(graded.rows) == 1 and graded.rows[0].status in REPORTED:
        _print_table(
            args.out / graded.rows[0].submission / REPORT, graded.states[0], graded.reviewed[0]
        )
    _print_rows(graded.reviewed, graded.unchanged)
    for note in graded.notes:
        print(note)
    kept = graded.kept
    print(
        f"reports in {args.out}/, gradebook in {args.out / GRADEBOOK}"
        + (
            f" ({_rows(len(graded.rows))} graded now, {kept} kept from earlier batches)"
            if kept
            else ""
        )
    )
    return EXIT_OK if graded.all_graded else EXIT_FAILED


def _progress(done: int, total: int, row: GradebookRow, elapsed: float) -> None:
    """A progress line for each finished row, when the batch grades more than one: one
    submission's row is the whole output."""
    if total > 1:
        print_progress(done, total, row, elapsed)


class _Printer(CohortListener):
    """What ``grade_cohort`` tells on its way, on stderr: the rubric's gaps, the wall, the
    copies found, roster lines with no folder, and rows of the gradebook dropped or kept
    whose folder is gone."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args

    def loaded(self, rubric: Rubric) -> None:
        _warn_gaps(rubric)

    def walled(self, wall: Wall) -> None:
        print(f"isolation: {wall.held()}", file=sys.stderr)

    def compared(self, comparison: Comparison, compared: int, seconds: float) -> None:
        pairs = comparison.copies.pairs
        if pairs or not self._args.quiet:
            print(
                f"copies: {compared} submissions compared in {seconds:.1f}s: {len(pairs)} "
                f"pair{'' if len(pairs) == 1 else 's'} flagged for review"
                + (f" (in {self._args.out / COPIES} and the gradebook's reason)" if pairs else ""),
                file=sys.stderr,
            )

    def selected(self, identities: Sequence[Identity], roster: Roster | None) -> None:
        if roster is not None:
            _warn_unclaimed(roster, identities)

    def found(self, earlier: Earlier) -> None:
        _say_earlier(earlier, self._args)


def _reused(batch: Mapping[str, object], out: Path) -> int:
    """A batch asked again under its idempotency key: say which, grade nothing."""
    print(
        f"batch {batch.get('idempotency_key')} is ledger event {batch.get('seq')} of "
        f"{out / LEDGER}: {batch.get('status')}, {batch.get('completed')} of "
        f"{batch.get('requested')} graded, by {batch.get('operator')} at {batch.get('at')}; "
        "nothing graded, nothing appended (another key grades again)"
    )
    return EXIT_OK if batch.get("status") == "completed" else EXIT_FAILED


def _say_earlier(earlier: Earlier, args: argparse.Namespace) -> None:
    """Rows that ``--replace`` drops, and kept rows whose folder is gone: never silent."""
    book = args.out / GRADEBOOK
    if earlier.dropped:
        print(
            f"--replace: {_rows(len(earlier.dropped))} of {book} that this batch does not "
            f"grade are dropped: {', '.join(earlier.dropped)} (the ledger's batch event "
            "lists them)",
            file=sys.stderr,
        )
    if earlier.absent:
        again = printed.GRADE_REPLACE(submissions="SUBMISSIONS", out=str(args.out))
        print(
            f"note: {book} keeps {_rows(len(earlier.absent))} for submissions that "
            f"{' '.join(map(str, args.paths))} does not hold: "
            f"{shown_keys(earlier.absent, 5)}. They "
            "stay as they were, and the ledger's batch event lists them as absent; if "
            "they are gone for good, grade the whole cohort with --replace to drop them "
            f"(`{again}`)",
            file=sys.stderr,
        )


def _rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def _warn_gaps(rubric: Rubric) -> None:
    """An incomplete rubric degrades the same checks of every submission: say so first."""
    gaps = contract_gaps(rubric)
    if gaps:
        print(
            f"warning: the rubric's contract is incomplete ({CONTRACT}): these checks "
            f"will be degraded in every report, not graded:",
            file=sys.stderr,
        )
        for gap in gaps:
            print(f"  {gap}", file=sys.stderr)


def _warn_unclaimed(roster: Roster, identities: Sequence[Identity]) -> None:
    """Roster lines without a folder: a student who did not submit, or a misnamed folder."""
    missing = unclaimed(roster, identities)
    if missing:
        listed = ", ".join(
            f"{s.folder} ({' '.join(filter(None, (s.student_id, s.display_name)))})"
            for s in missing
        )
        print(
            f"warning: {len(missing)} roster lines have no submission folder, so nothing "
            f"is graded for them: {listed}. Check the folder names if they did submit.",
            file=sys.stderr,
        )


def _print_rows(rows: Sequence[GradebookRow], unchanged: Mapping[str, str] | None = None) -> None:
    for row in rows:
        shown = (
            f"{row.total} / {row.max}  digest {row.digest}"
            if row.status in REPORTED
            else f"UNGRADABLE: {row.reason}"
            if row.status == "ungradable"
            else f"NOT GRADED: {row.reason}"
        )
        if row.status == "degraded":
            shown += "  DEGRADED"
        if row.penalty:
            shown += f"  late: -{row.penalty}, final {row.final}"
        if row.status in REPORTED and row.reason:  # flagged, or not all evaluated
            shown += f"  ({row.reason})"
        if unchanged and row.submission in unchanged:
            shown += f"  (unchanged: the same inputs as ledger event {unchanged[row.submission]})"
        named = f" ({row.name})" if row.name else ""
        print(f"{row.submission}{named}: {shown}")


def _print_table(report_json: Path, state: ReviewState, row: GradebookRow) -> None:
    """The report's criteria as a table, each marked for human review pending, reviewed or
    to review again (``state``, its reviews), what the late policy made of it, and the
    final total (``row``'s) when a review or a late penalty moved points."""
    import json

    document = json.loads(report_json.read_bytes())
    reviews = {review.criterion: review for review in state.current}
    again = {stale.criterion for stale in state.stale}
    pending: list[tuple[str, Decimal]] = []
    print(f"{'criterion':<24}{'points':>8}{'max':>8}")
    for criterion in document["criteria"]:
        mark = ""
        if criterion["id"] in reviews:
            mark = f"  reviewed: {review_verdict(reviews[criterion['id']])}"
        elif criterion["id"] in again or criterion["id"] in state.pending:
            mark = "  needs a new review" if criterion["id"] in again else "  pending review"
            pending.append((criterion["title"], Decimal(criterion["max"])))
        print(f"{criterion['title']:<24}{criterion['points']:>8}{criterion['max']:>8}{mark}")
    print(f"{'total':<24}{document['total']:>8}{document['max']:>8}")
    if row.late:
        print(f"late: {row.late}")
    if reviews or row.penalty:
        after = " and ".join(
            what
            for what, given in (("human review", reviews), ("the late penalty", row.penalty))
            if given
        )
        print(f"{'final':<24}{row.final:>8}{document['max']:>8}  after {after}")
    if pending:
        print(
            f"pending human review: {points_text(sum((m for _, m in pending), Decimal(0)))} "
            f"of these points ({', '.join(title for title, _ in pending)}): a person "
            "confirms or changes them, and the gradebook's final column follows"
        )
    for finding in document["findings"]:
        print(f"finding: {finding}")


def _check(args: argparse.Namespace) -> int:
    # Never PATH/rubric/: the rubric's custom checks are imported into this very process.
    if args.path is not None and args.root is not None and args.path != args.root:
        raise UsageError(f"check got two folders, {args.path} and --root {args.root}: give one")
    rubric = load_rubric(args.rubric)
    root = args.path or args.root or Path(".")
    started = time.monotonic()
    try:
        run = run_checkpoints(
            root, rubric, wall=choose_wall(args.wall, allow_host_root=args.allow_host_root)
        )
    except MissingPackage as missing:  # no grade to predict: what `gradekit grade` would say
        shown = "UNGRADABLE" if missing.status == "ungradable" else "NOT GRADED"
        print(f"FAIL  {shown}: {missing}")
        print(
            f"FAIL  in {time.monotonic() - started:.1f}s: `{printed.GRADE_LAB()}` would not "
            "grade this submission; fix what is listed above, then run the check again"
        )
        return EXIT_FAILED
    for point in run.checkpoints:
        verdict = "PASS" if point.passed else "FAIL"
        print(f"{verdict}  {point.number}. {point.title:<32} {point.seconds:5.2f}s  {point.reason}")
    passed, lines = predicted(run)
    print("\n".join(lines))
    print(
        f"{'PASS' if passed else 'FAIL'}  in {time.monotonic() - started:.1f}s: "
        + (
            "every checkpoint passed and no point is lost"
            if passed
            else "fix what is listed above, then run the check again"
        )
    )
    return EXIT_OK if passed else EXIT_FAILED


def _shard(text: str) -> Shard:
    """``--shard``'s value; a bad one is argparse's usage error (exit 2), not a traceback."""
    try:
        return parse_shard(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--shard {text!r}: ")) from exc
