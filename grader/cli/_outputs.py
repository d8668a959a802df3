"""The grader's outputs on the command line: report verify, gradebook merge, history (every
grade of a student and why each differs), ledger verify and merge, and the Gradescope autograder
(``gradescope build`` writes it, ``gradescope run`` is what its ``run_autograder`` calls,
``gradescope walls`` is how its ``setup.sh`` says which wall the grader gets)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import commands as printed
from gradekit.internal import write_atomic
from grader._exits import EXIT_FAILED, EXIT_OK
from grader.cli._options import add_rubric_option, add_wall_option
from grader.handout import ROOT_ENV, build, run, try_autograder, walls_here
from grader.ledger import (
    DRAW_KEY,
    GRADEBOOK,
    LEDGER,
    RESULTS,
    causes,
    first_divergence,
    history_lines,
    merge_folders,
    verify_file,
    verify_ledger,
)
from grader.outputs import (
    EXPORTS,
    KEY_ENV,
    KEY_FILE_ENV,
    REPORTED,
    GradebookError,
    export_gradebook,
    load_key,
    merge_gradebooks,
    read_gradebook,
)

__all__ = ["add_output_commands"]


def _add_history(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = commands.add_parser(
        "history", help="every grade of a student, and why each differs from the one before"
    )
    history.add_argument(
        "student",
        metavar="STUDENT",
        help="the student, as the gradebook "
        "names them (a roster's student id, else the folder's name)",
    )
    history.add_argument(
        "--out",
        type=Path,
        default=Path("grades"),
        help="the grades folder holding ledger.jsonl (default: grades)",
    )
    history.set_defaults(handler=_history)


def _whole(value: object) -> object:
    """A criterion's max as the rubric writes its weight (``"30.00"`` -> 30)."""
    try:
        number = float(str(value))
    except ValueError:
        return value
    return int(number) if number.is_integer() else value


def _history(args: argparse.Namespace) -> int:
    print("\n".join(history_lines(args.out, args.student)))
    return EXIT_OK


def _diff_reports(args: argparse.Namespace) -> int:
    old, new = (_report(path) for path in (args.old, args.new))
    lines = [f"{args.old} -> {args.new}: total {old.get('total')} -> {new.get('total')}"]
    rubric = [
        {
            "rubric": r.get("rubric", {}).get("sha256"),
            "rubric_id": r.get("rubric", {}).get("id"),
            "rubric_version": r.get("rubric", {}).get("version"),
            "sets": r.get("rubric", {}).get("sets"),
            "inputs": r.get("inputs"),
        }
        for r in (old, new)
    ]
    # What a report says of its rubric's weights: each criterion's max (a report does not
    # keep the rubric's reason for a change: the ledger's history shows it).
    weights = {
        str(r.get("rubric", {}).get("sha256")): {
            "changes": None,
            "cases": {},
            "criteria": {
                str(c.get("id")): {"weight": _whole(c.get("max")), "points": {}}
                for c in r.get("criteria", [])
                if isinstance(c, dict)
            },
        }
        for r in (old, new)
    }
    lines += [f"  changed: {cause}" for cause in causes(rubric[0], rubric[1], weights)]
    lines.append("  first divergence: " + (first_divergence(old, new) or "none"))
    print("\n".join(lines))
    return EXIT_OK


def _report(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot read {path} as a report ({exc}): pass two report.json files"
        ) from None
    if not isinstance(document, dict):
        raise UsageError(f"{path} is not a report: pass two report.json files")
    return document


def _add_ledger(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ledger = commands.add_parser("ledger", help="the grading ledger beside the grades")
    group = ledger.add_subparsers(dest="ledger_command", required=True)
    verify = group.add_parser(
        "verify",
        help="check the ledger's hash chain; exit 1 if an event was edited, removed or reordered",
    )
    verify.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=Path("grades"),
        metavar="PATH",
        help="the grades folder or its ledger.jsonl (default: grades)",
    )
    verify.set_defaults(handler=_verify_ledger)
    merge = group.add_parser(
        "merge",
        help="merge the grades folders of a grading's shards into one new grades "
        "folder: one ledger, every report, the archive and the gradebook, as one machine "
        "grading them all writes them",
    )
    merge.add_argument(
        "folders",
        nargs="+",
        type=Path,
        metavar="SHARD",
        help="each shard's grades folder (the --out of its grading), in any order",
    )
    merge.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="the merged grades folder: new, or an empty folder",
    )
    merge.add_argument(
        "--partial",
        action="store_true",
        help="merge even when a shard is missing: the shards given stay apart "
        "in the ledger, each as graded, instead of failing",
    )
    merge.set_defaults(handler=_merge_ledgers)


def _export(args: argparse.Namespace) -> int:
    try:
        data = args.gradebook.read_bytes()
    except OSError as exc:
        grade = printed.GRADE_INTO(submissions="SUBMISSIONS", out="grades")
        raise UsageError(
            f"{args.gradebook}: cannot be read ({exc.strerror or exc}): pass the "
            f"gradebook.csv a grading wrote (`{grade}` writes one)"
        ) from None
    try:
        _, rows = read_gradebook(data)
    except GradebookError as exc:
        raise UsageError(f"{args.gradebook}: {exc}") from None
    out = args.out or args.gradebook.parent / f"{args.to}.csv"
    write_atomic(out, export_gradebook(rows, args.to, args.assignment))
    graded = sum(row.status in REPORTED for row in rows)
    print(
        f"wrote {out}: {graded} grades of {len(rows)} rows for {args.to}'s grade import"
        + (
            f" ({len(rows) - graded} not graded: their grade is empty)"
            if graded < len(rows)
            else ""
        )
    )
    return EXIT_OK


def _merge_ledgers(args: argparse.Namespace) -> int:
    merged = merge_folders(args.folders, args.out, partial=args.partial)
    plan = merged.ledger
    fused = f", {plan.fused} batch event(s) fused from shards" if plan.fused else ""
    book = "no gradebook" if merged.rows is None else f"{GRADEBOOK} with {merged.rows} rows"
    print(
        f"merged {len(args.folders)} grades folders into {args.out}/: {LEDGER} with "
        f"{merged.events} events ({plan.shared} shared by all{fused}), {merged.folders} "
        f"submission folders, {merged.archived} archived reports, {book}"
    )
    print(
        f"ledger head {merged.head} "
        f"(`{printed.LEDGER_VERIFY(grades=str(args.out))}` checks the chain)"
    )
    return EXIT_OK


def _verify_ledger(args: argparse.Namespace) -> int:
    path = args.path / LEDGER if args.path.is_dir() else args.path
    ok, message = verify_ledger(path)
    print(f"{'ok  ' if ok else 'FAIL'} {message}", file=sys.stdout if ok else sys.stderr)
    return EXIT_OK if ok else EXIT_FAILED


def add_output_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``report verify``, ``gradebook merge`` and ``gradescope build|run|walls``."""
    _add_ledger(commands)
    _add_history(commands)
    report = commands.add_parser("report", help="work with report.json and results.json files")
    report_commands = report.add_subparsers(dest="report_command", required=True)
    diff = report_commands.add_parser(
        "diff",
        help="what differs between two report.json files: inputs, rubric, and the "
        "first criterion and sub-check whose result changed",
    )
    diff.add_argument("old", type=Path, metavar="OLD")
    diff.add_argument("new", type=Path, metavar="NEW")
    diff.set_defaults(handler=_diff_reports)
    verify = report_commands.add_parser(
        "verify", help="check digest, sums and (with a key) signature; exit 1 if edited"
    )
    verify.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="report.json or results.json files (told apart by content)",
    )
    verify.add_argument(
        "--key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"the instructor's signing key (default: ${KEY_FILE_ENV}, else "
        f"${KEY_ENV}; without a key the signature is not checked)",
    )
    verify.set_defaults(handler=_verify_report)

    gradebook = commands.add_parser("gradebook", help="work with gradebook.csv files")
    gradebook_commands = gradebook.add_subparsers(dest="gradebook_command", required=True)
    merge = gradebook_commands.add_parser("merge", help="merge sharded gradebooks into one")
    merge.add_argument("parts", nargs="+", type=Path, metavar="PART")
    merge.add_argument("--out", type=Path, required=True, help="the merged gradebook.csv")
    merge.set_defaults(handler=_merge)
    export = gradebook_commands.add_parser(
        "export", help="the gradebook as a learning platform imports it (Canvas, Moodle)"
    )
    export.add_argument(
        "gradebook",
        nargs="?",
        type=Path,
        default=Path("grades") / GRADEBOOK,
        metavar="GRADEBOOK",
        help=f"the gradebook.csv (default: grades/{GRADEBOOK})",
    )
    export.add_argument(
        "--to", choices=EXPORTS, required=True, help="the platform whose grade import reads it"
    )
    export.add_argument(
        "--assignment",
        required=True,
        metavar="TITLE",
        help="the grade column's title, as the platform names the assignment",
    )
    export.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help="where to write it (default: TO.csv beside the gradebook)",
    )
    export.set_defaults(handler=_export)

    gradescope = commands.add_parser("gradescope", help="grade on Gradescope")
    gradescope_commands = gradescope.add_subparsers(dest="gradescope_command", required=True)
    writer = gradescope_commands.add_parser(
        "build", help="write the autograder folder: setup.sh, run_autograder, rubric, kit"
    )
    writer.add_argument("--out", type=Path, required=True, help="a new folder to write it to")
    add_rubric_option(writer)
    writer.set_defaults(handler=_build)
    runner = gradescope_commands.add_parser(
        "run", help="grade ROOT/submission into ROOT/results/results.json (run_autograder)"
    )
    runner.add_argument(
        "--root",
        type=Path,
        default=None,
        help=f"Gradescope's folder (default: ${ROOT_ENV}, else /autograder)",
    )
    add_rubric_option(runner)
    add_wall_option(runner)
    runner.set_defaults(handler=_run)
    trier = gradescope_commands.add_parser(
        "try",
        help="a dry run: lay SUBMISSION out beside a built autograder as Gradescope "
        "does and run its run_autograder (never setup.sh, which installs packages)",
    )
    trier.add_argument(
        "submission",
        type=Path,
        metavar="SUBMISSION",
        help="the student's lab folder, or the zip they upload",
    )
    trier.add_argument(
        "--autograder",
        type=Path,
        default=Path("autograder"),
        metavar="DIR",
        help="the folder `gradescope build --out` wrote (default: autograder)",
    )
    trier.add_argument(
        "--root",
        type=Path,
        default=None,
        metavar="DIR",
        help="Gradescope's folder, kept afterwards: a new or empty folder "
        "(default: a temporary one, removed)",
    )
    trier.add_argument(
        "--metadata",
        type=Path,
        default=None,
        metavar="FILE",
        help="a submission_metadata.json as Gradescope writes it (created_at, "
        "users, their due dates): the submission's time and names, for the "
        "late policy (default: none, so no late penalty)",
    )
    trier.set_defaults(handler=_try)
    prober = gradescope_commands.add_parser(
        "walls",
        aliases=["probe"],
        help="say which wall `--wall auto` takes here, and why each "
        "other wall was passed over (setup.sh writes it to source/isolation.txt; probe: the "
        "command's earlier name)",
    )
    prober.set_defaults(handler=_walls)


def _verify_report(args: argparse.Namespace) -> int:
    key = load_key(args.key_file)  # a bad key is a usage error before any file is read
    failed = False
    for path in args.paths:
        verdict = verify_file(path, key)
        stream = sys.stdout if verdict.ok else sys.stderr
        print(f"{'ok  ' if verdict.ok else 'FAIL'} {path}: {verdict.message}", file=stream)
        failed = failed or not verdict.ok
    return EXIT_FAILED if failed else EXIT_OK


def _merge(args: argparse.Namespace) -> int:
    args.out.write_bytes(merge_gradebooks([part.read_bytes() for part in args.parts]))
    print(f"merged {len(args.parts)} gradebooks into {args.out}")
    return EXIT_OK


def _build(args: argparse.Namespace) -> int:
    build(args.out, args.rubric)
    tried = printed.GRADESCOPE_TRY(submission="LAB", autograder=str(args.out))
    print(
        f"wrote the Gradescope autograder to {args.out}/: try it on a lab with "
        f"`{tried}`, then zip its contents "
        f"(cd {args.out} && zip -r ../autograder.zip .) and upload the zip as the "
        "assignment's autograder"
    )
    print(
        f"{args.out / DRAW_KEY} is a secret (the key its gradings draw provider labels "
        "and hash seeds with): keep the folder and its zip private; git ignores the "
        f"folder ({args.out / '.gitignore'})"
    )
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    root = args.root or Path(os.environ.get(ROOT_ENV) or "/autograder")
    graded = run(root, args.rubric, args.wall, allow_host_root=args.allow_host_root)
    print(f"{'graded' if graded else 'NOT GRADED'}: {root / 'results' / RESULTS}")
    return EXIT_OK if graded else EXIT_FAILED


def _try(args: argparse.Namespace) -> int:
    def laid_out(root: Path, uploaded: str) -> None:
        print(
            f"gradescope try: laid out as Gradescope does in {root}/: source/ is "
            f"{args.autograder}/, submission/ {uploaded} of {args.submission}; setup.sh "
            "not run (it installs packages on the machine)",
            flush=True,
        )

    with try_autograder(
        args.submission, args.autograder, args.root, laid_out, args.metadata
    ) as tried:
        results = tried.results
        listed = results.get("tests")
        tests = (
            [test for test in listed if isinstance(test, dict)] if isinstance(listed, list) else []
        )
        if not tried.graded:
            extra = results.get("extra_data")
            why = extra.get("error") if isinstance(extra, dict) else results.get("output")
            print(f"NOT GRADED: {why}", file=sys.stderr)
        else:
            passed = sum(test.get("status") == "passed" for test in tests)
            pending = list(
                dict.fromkeys(  # by criterion: a test's name is "Title: check"
                    str(test.get("name")).partition(":")[0]
                    for test in tests
                    if "Pending human review" in str(test.get("output"))
                )
            )
            print(
                f"results.json: {float(str(results.get('score'))):.2f} points, "
                f"{len(tests)} tests: {passed} passed, {len(tests) - passed} failed"
                + (f"; pending human review: {', '.join(pending)}" if pending else "")
            )
            for test in tests:
                if test.get("status") != "passed":
                    print(
                        f"  failed: {test.get('name')} ({test.get('score')} / "
                        f"{test.get('max_score')})"
                    )
        print(
            f"Gradescope's folder is kept in {tried.root}/ (results/results.json)"
            if args.root
            else "Gradescope's folder is removed: pass --root DIR to keep it"
        )
        return EXIT_OK if tried.graded else EXIT_FAILED


def _walls(args: argparse.Namespace) -> int:
    print("\n".join(walls_here()))
    return EXIT_OK
