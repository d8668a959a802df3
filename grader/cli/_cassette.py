"""Looking at recordings on the command line: cassette verify, stale and diff (cassettes and
tool fixtures alike)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gradekit import CassetteError, UsageError
from gradekit.internal import (
    HTTP_CASSETTE,
    KEPT_HEADERS,
    credential_values,
    find_secret,
    journal_path,
)
from grader._exits import EXIT_FAILED, EXIT_OK
from grader.recordings import (
    diff_files,
    is_http_cassette,
    parse_age,
    read_bytes,
    render_diff,
    render_stale,
    stale,
    verify_cassette,
)
from grader.submission import load_manifest

__all__ = ["add_cassette_commands", "verify_http_cassette"]


def add_cassette_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``cassette`` and its verify, stale and diff."""
    cassette = commands.add_parser("cassette", help="inspect cassette and fixture files")
    group = cassette.add_subparsers(dest="cassette_command", required=True)
    verify = group.add_parser(
        "verify", help="check format, keys and secrets of cassettes, fixtures and HTTP cassettes "
        "(*.http.json); exit 1 on a problem")
    verify.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    verify.set_defaults(handler=_verify)
    stale_ = group.add_parser(
        "stale", help="list cassettes and fixtures by the age of their oldest recording"
    )
    stale_.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="files or folders (default: ROOT's cassettes and fixtures folders)")
    stale_.add_argument("--older-than", type=_age, metavar="AGE",
                        help="only those whose oldest recording is older than AGE: 12h, 30d, "
                        "2w (files of unknown age are always listed)")
    stale_.add_argument("--root", type=Path, default=Path("."),
                        help="the submission folder (default: .)")
    stale_.set_defaults(handler=_stale)
    diff = group.add_parser(
        "diff", help="what changed, per key, between two cassettes or two fixture files"
    )
    diff.add_argument("old", type=Path, metavar="OLD")
    diff.add_argument("new", type=Path, metavar="NEW")
    diff.set_defaults(handler=_diff)


def _verify(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.paths:
        http = path.is_file() and is_http_cassette(read_bytes(path), path)
        problems, count = verify_http_cassette(path) if http else verify_cassette(path)
        if problems:
            failed += 1
            print(f"FAIL {path}", file=sys.stderr)
            for problem in problems:
                print(f"  - {problem}", file=sys.stderr)
        else:
            print(f"ok   {path} ({count} {'interactions' if http else 'entries'})")
    return EXIT_FAILED if failed else EXIT_OK


def verify_http_cassette(
    path: Path, env: Mapping[str, str] | None = None
) -> tuple[list[str], int]:
    """The problems of the HTTP cassette at ``path`` (format, keys, credentials, headers,
    an unfolded journal) and its number of interactions."""
    try:
        cassette = HTTP_CASSETTE.decode(path.read_bytes(), source=str(path))
    except CassetteError as exc:
        return [str(exc)], 0
    secrets, problems = credential_values(env), []
    for name, interaction in cassette.slots().items():
        found = find_secret(interaction.texts(), secrets)
        if found is not None:
            problems.append(f"interaction {name} contains the value of {found}: delete it, "
                            "rotate the credential, and record again")
        extra = sorted(set(interaction.response.headers) - KEPT_HEADERS)
        if extra:
            problems.append(f"interaction {name} keeps the headers {', '.join(extra)}, which "
                            f"gradekit never writes (only {', '.join(sorted(KEPT_HEADERS))}): "
                            "delete them")
    if journal_path(path).exists():
        problems.append(f"{journal_path(path)} holds interactions not yet folded in: record "
                        'once more (mode="once") and close the transport, which folds them '
                        "first, then commit the result")
    return problems, len(cassette)


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
