"""Looking at recordings on the command line: cassette verify, stale and diff (cassettes and
tool fixtures alike)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gradekit import UsageError
from grader._exits import EXIT_FAILED, EXIT_OK
from grader.recordings import (
    diff_files,
    parse_age,
    recording_files,
    render_diff,
    render_stale,
    stale,
    verify_recording,
)
from grader.submission import load_manifest

__all__ = ["add_cassette_commands"]


def add_cassette_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``cassette`` and its verify, stale and diff."""
    cassette = commands.add_parser("cassette", help="inspect cassette and fixture files")
    group = cassette.add_subparsers(dest="cassette_command", required=True)
    verify = group.add_parser(
        "verify",
        help="check format, keys and secrets of cassettes, fixtures and HTTP cassettes "
        "(*.http.json); exit 1 on a problem",
    )
    verify.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="recording files, or folders: every .json file under them "
        "(cassettes/ holds a set item's recordings too, under regression/)",
    )
    verify.set_defaults(handler=_verify)
    stale_ = group.add_parser(
        "stale", help="list cassettes and fixtures by the age of their oldest recording"
    )
    stale_.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="files or folders (default: ROOT's cassettes and fixtures folders)",
    )
    stale_.add_argument(
        "--older-than",
        type=_age,
        metavar="AGE",
        help="only those whose oldest recording is older than AGE: 12h, 30d, "
        "2w (files of unknown age are always listed)",
    )
    stale_.add_argument(
        "--root", type=Path, default=Path("."), help="the submission folder (default: .)"
    )
    stale_.set_defaults(handler=_stale)
    diff = group.add_parser(
        "diff", help="what changed, per key, between two cassettes or two fixture files"
    )
    diff.add_argument("old", type=Path, metavar="OLD")
    diff.add_argument("new", type=Path, metavar="NEW")
    diff.set_defaults(handler=_diff)


_ONE = {"entries": "entry", "tool calls": "tool call", "interactions": "interaction"}


def _verify(args: argparse.Namespace) -> int:
    failed = 0
    for path in recording_files(args.paths):
        problems, count, noun = verify_recording(path)
        if problems:
            failed += 1
            print(f"FAIL {path}", file=sys.stderr)
            for problem in problems:
                print(f"  - {problem}", file=sys.stderr)
        else:
            print(f"ok   {path} ({count} {noun if count != 1 else _ONE[noun]})")
    return EXIT_FAILED if failed else EXIT_OK


def _age(text: str) -> timedelta:
    try:
        return parse_age(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _stale(args: argparse.Namespace) -> int:
    paths = args.paths or _recording_folders(args.root)
    now = datetime.now(UTC)  # the one clock read: everything below takes it as an argument
    print(render_stale(stale(paths, now=now, older_than=args.older_than), now), end="")
    return EXIT_OK


def _recording_folders(root: Path) -> list[Path]:
    manifest = load_manifest(root)
    folders = [manifest.root / manifest.cassettes, manifest.root / manifest.fixtures]
    return [folder for folder in folders if folder.is_dir()]


def _diff(args: argparse.Namespace) -> int:
    print(render_diff(diff_files(args.old, args.new)), end="")
    return EXIT_OK
