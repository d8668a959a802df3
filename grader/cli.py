"""The ``gradekit`` command line.

Exit codes: 0 success; 1 a check or verification failed; 2 usage or
configuration error; 3 cassette miss. Only gradekit's own errors are caught
and printed as ``Name: message``; set ``GRADEKIT_DEBUG=1`` to see the traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gradekit import (
    CassetteCollision,
    CassetteCorrupt,
    CassetteLocked,
    CassetteMiss,
    GradekitError,
    MissingFixtureError,
    ProviderConfigError,
    ProviderError,
    Recorder,
    Replay,
    SecretLeak,
    ToolRecorder,
    ToolReplay,
    UsageError,
    prompt_key,
)
from gradekit._recorder import Mode, previous_path
from grader._cli_grade import add_grading_commands
from grader._exits import EXIT_FAILED, EXIT_MISS, EXIT_OK, EXIT_PROVIDER, EXIT_USAGE
from grader._files import SubmissionFileError
from grader._gradebook import GradebookError
from grader._manifest import (
    ManifestError,
    call_agent,
    load_agent,
    load_manifest,
    load_provider,
    load_tools,
)
from grader._review import (
    CHANGE_LOG,
    ReviewError,
    append_change,
    diff_files,
    digest_file,
    parse_age,
    render_diff,
    render_stale,
    require_reason,
    rerecord_summary,
    stale,
)
from grader._rubric import Case, RubricError, load_cases
from grader._verify import verify_cassette

__all__ = ["main"]



def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except GradekitError as exc:
        if os.environ.get("GRADEKIT_DEBUG"):
            raise
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return _exit_code(exc)


def _exit_code(exc: GradekitError) -> int:
    """The one exit-code table (README, docs/formats.md): every documented error has its code."""
    if isinstance(exc, CassetteMiss | MissingFixtureError):
        return EXIT_MISS
    if isinstance(exc, ProviderError) and not isinstance(exc, ProviderConfigError):
        return EXIT_PROVIDER
    if isinstance(exc, ProviderConfigError | UsageError | ManifestError | RubricError
                  | GradebookError | CassetteCorrupt | CassetteCollision | CassetteLocked
                  | SecretLeak | ReviewError | SubmissionFileError):
        return EXIT_USAGE
    return EXIT_FAILED


def _version() -> str:
    """The installed distribution's version; "unknown" when it is not installed."""
    try:
        return importlib.metadata.version("gradekit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradekit",
        description="Pin the contract, not the model: record once, grade offline.",
    )
    parser.add_argument("--version", action="version", version=f"gradekit {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_record(commands)
    _add_run(commands)
    _add_replay(commands)
    key = commands.add_parser("key", help="print the cassette key of a prompt")
    key.add_argument("text", nargs="?", help="the prompt (default: read standard input)")
    key.set_defaults(handler=_key)
    cassette = commands.add_parser("cassette", help="inspect cassette files")
    cassette_commands = cassette.add_subparsers(dest="cassette_command", required=True)
    verify = cassette_commands.add_parser(
        "verify", help="check format, keys and secrets; exit 1 on a problem"
    )
    verify.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    verify.set_defaults(handler=_verify)
    _add_cassette_review(cassette_commands)
    add_grading_commands(commands)
    return parser


def _add_submission_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--case", action="append", dest="cases", metavar="ID",
                        help="only this case (repeatable); default: every case of the rubric")
    parser.add_argument("--root", type=Path, default=Path("."),
                        help="the submission folder (default: .)")
    parser.add_argument("--rubric", type=Path, default=None,
                        help="rubric file (default: ROOT/rubric/bootcamp.toml)")


def _add_record(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    record = commands.add_parser(
        "record",
        help="run the agent live once and record every answer into cassettes",
        description="Run the agent on every case against a live provider; answers already "
        "in a cassette are served from it, so an interrupted run resumes.",
    )
    _add_submission_options(record)
    record.add_argument("--provider", help="openai, anthropic, ollama, llamacpp, "
                        "openai-compatible, or package.module:function returning any "
                        "Provider (default: $GRADEKIT_PROVIDER)")
    record.add_argument("--cassettes", metavar="FOLDER", help="record into this folder "
                        "(default: the manifest's cassettes); e.g. a second provider's set")
    record.add_argument("--model", help="model name (default: $GRADEKIT_MODEL)")
    record.add_argument("--base-url", help="API base URL (default: $GRADEKIT_BASE_URL)")
    record.add_argument("--api-key", help="API key (default: $GRADEKIT_API_KEY or the "
                        "vendor's variable); never written anywhere")
    record.add_argument("--label", help="provider label for people (default: adapter:model)")
    record.add_argument("--max-tokens", type=int, help="cap each answer (default: "
                        "$GRADEKIT_MAX_TOKENS, or 256 for llamacpp)")
    record.add_argument("--mode", choices=["once", "rerecord"], default="once",
                        help="once: record only what is missing (default); rerecord: ask "
                        "again for everything, keep the old cassette as CASE.previous.json")
    record.add_argument("--rerecord", action="store_const", const="rerecord", dest="mode",
                        help="short for --mode rerecord")
    record.add_argument("--reason", help="why the dataset changes (required with --rerecord): "
                        "logged in DATASET_CHANGES.md with the keys that changed")
    record.set_defaults(handler=_record)


def _add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "run", help="run the agent offline on the recorded cases (strict replay)"
    )
    _add_submission_options(run)
    run.set_defaults(handler=_run)


def _add_replay(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = commands.add_parser("replay", help="print the recorded answer to one prompt")
    replay.add_argument("--cassette", type=Path, required=True, metavar="PATH")
    replay.add_argument("--prompt", help="the prompt (default: read standard input)")
    replay.set_defaults(handler=_replay)


def _selected_cases(args: argparse.Namespace) -> list[Case]:
    rubric = args.rubric or args.root / "rubric" / "bootcamp.toml"
    cases = load_cases(rubric)
    if not args.cases:
        return cases
    known = [case.id for case in cases]
    unknown = [case_id for case_id in args.cases if case_id not in known]
    if unknown:
        raise UsageError(f"unknown case {', '.join(unknown)}; the rubric has {', '.join(known)}")
    return [case for case in cases if case.id in args.cases]


def _record(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.root)
    if args.cassettes:
        manifest = replace(manifest, cassettes=args.cassettes)
    cases = _selected_cases(args)
    if args.provider and ":" in args.provider:
        live = load_provider(manifest, args.provider)
    else:
        from gradekit import (
            live_from_env,  # httpx loads only for the command that talks to a network
        )

        live = live_from_env(provider=args.provider, model=args.model, base_url=args.base_url,
                             api_key=args.api_key, label=args.label, max_tokens=args.max_tokens)
    agent, tools = load_agent(manifest), load_tools(manifest)
    mode: Mode = args.mode
    reason = require_reason(args.reason) if mode == "rerecord" else ""
    recorded = served = 0
    for number, case in enumerate(cases, 1):
        path, fixture = manifest.cassette(case.id), manifest.fixture(case.id)
        started = time.monotonic()
        with Recorder(live, path, mode=mode, case=case.id) as recorder:
            if tools is None:
                call_agent(agent, recorder, case.task, None)
            else:
                with ToolRecorder(tools, fixture, case=case.id, mode=mode) as toolbox:
                    call_agent(agent, recorder, case.task, toolbox)
        recorded, served = recorded + recorder.recorded, served + recorder.served
        print(f"[{number}/{len(cases)}] {case.id}: {recorder.recorded} live, "
              f"{recorder.served} from cassette, {time.monotonic() - started:.1f}s -> {path}",
              file=sys.stderr)
        if mode == "rerecord":
            for changed in (path, fixture):
                _review_rerecord(manifest.root, case.id, changed, reason)
    print(f"done: {recorded} answers recorded live from {live.name}, {served} served from "
          f"cassettes. Commit {manifest.root / manifest.cassettes}/.", file=sys.stderr)
    return EXIT_OK


def _review_rerecord(root: Path, case: str, path: Path, reason: str) -> None:
    """Show what a re-recording changed; log a change to the dataset's change log."""
    summary = rerecord_summary(path)
    if summary is None:
        return
    print(render_diff(summary), file=sys.stderr, end="")
    print(f"        previous recording kept in {previous_path(path)}", file=sys.stderr)
    if summary.keys():
        append_change(root / CHANGE_LOG, date=datetime.now(UTC).strftime("%Y-%m-%d"), case=case,
                      kind=summary.kind, changed_keys=summary.keys(), reason=reason,
                      digests={path.relative_to(root).as_posix(): digest_file(path)})


def _run(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.root)
    cases = _selected_cases(args)
    agent, tools = load_agent(manifest), load_tools(manifest)
    for case in cases:
        toolbox = None if tools is None else ToolReplay(manifest.fixture(case.id), tools=tools)
        answer = call_agent(agent, Replay(manifest.cassette(case.id)), case.task, toolbox)
        print(f"## {case.id}\n{answer}\n")
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    sys.stdout.write(Replay(args.cassette).complete(prompt))
    sys.stdout.write("\n")
    return EXIT_OK


def _key(args: argparse.Namespace) -> int:
    print(prompt_key(args.text if args.text is not None else sys.stdin.read()))
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.paths:
        problems, count = verify_cassette(path)
        if problems:
            failed += 1
            print(f"FAIL {path}", file=sys.stderr)
            for problem in problems:
                print(f"  - {problem}", file=sys.stderr)
        else:
            print(f"ok   {path} ({count} entries)")
    return EXIT_FAILED if failed else EXIT_OK


def _add_cassette_review(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stale_ = commands.add_parser(
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
    diff = commands.add_parser(
        "diff", help="what changed, per key, between two cassettes or two fixture files"
    )
    diff.add_argument("old", type=Path, metavar="OLD")
    diff.add_argument("new", type=Path, metavar="NEW")
    diff.set_defaults(handler=_diff)


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
