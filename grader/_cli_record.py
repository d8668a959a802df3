"""The student's loop on the command line: record, run, replay and key.

``record`` and ``run`` import the submission's agent and tools from ``--root`` (``load_spec``):
whatever ``lab`` the environment holds, the one in ROOT runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from gradekit import Recorder, Replay, ToolRecorder, ToolReplay, UsageError, prompt_key
from gradekit._recorder import Mode, previous_path
from grader._changelog import CHANGE_LOG, append_change, digest_file, require_reason
from grader._cli_options import add_rubric_option
from grader._diff import render_diff, rerecord_summary
from grader._exits import EXIT_OK
from grader._manifest import call_agent, load_agent, load_manifest, load_provider, load_tools
from grader._rubric import Case, load_cases
from grader._specs import imports_from

__all__ = ["add_recording_commands"]

def add_recording_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register record, run, replay and key."""
    _add_record(commands)
    run = commands.add_parser(
        "run", help="run the agent offline on the recorded cases (strict replay)"
    )
    _add_submission_options(run)
    run.set_defaults(handler=_run)
    replay = commands.add_parser("replay", help="print the recorded answer to one prompt")
    replay.add_argument("--cassette", type=Path, required=True, metavar="PATH")
    replay.add_argument("--prompt", help="the prompt (default: read standard input)")
    replay.set_defaults(handler=_replay)
    key = commands.add_parser("key", help="print the cassette key of a prompt")
    key.add_argument("text", nargs="?", help="the prompt (default: read standard input)")
    key.set_defaults(handler=_key)


def _add_submission_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--case", action="append", dest="cases", metavar="ID",
                        help="only this case (repeatable); default: every case of the rubric")
    parser.add_argument("--root", type=Path, default=Path("."),
                        help="the submission folder whose agent, tools and cassettes are used "
                        "(default: .)")
    add_rubric_option(parser)


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


def _selected_cases(args: argparse.Namespace) -> list[Case]:
    cases = load_cases(args.rubric)
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
    mode: Mode = args.mode
    reason = require_reason(args.reason) if mode == "rerecord" else ""
    with imports_from(manifest.root):
        if args.provider and ":" in args.provider:
            live = load_provider(manifest, args.provider)
        else:
            from gradekit import live_from_env  # httpx loads only for the command that needs it

            live = live_from_env(provider=args.provider, model=args.model,
                                 base_url=args.base_url, api_key=args.api_key,
                                 label=args.label, max_tokens=args.max_tokens)
        agent, tools = load_agent(manifest), load_tools(manifest)
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
    with imports_from(manifest.root):
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
