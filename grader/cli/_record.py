"""The student's loop on the command line: record, run, replay and key.

``record`` and ``run`` import the submission's agent and tools from ``--root`` (``load_spec``):
whatever ``lab`` the environment holds, the one in ROOT runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gradekit import (
    CassetteTransport,
    Mode,
    Provider,
    ProviderConfigError,
    Recorder,
    Replay,
    ToolRecorder,
    ToolReplay,
    UsageError,
    prompt_key,
    request_key,
)
from gradekit.internal import HttpClients, previous_path
from grader._exits import EXIT_INTERRUPTED, EXIT_OK
from grader._specs import imports_from
from grader.cli._options import add_provider_options, add_rubric_option, live_provider
from grader.recordings import (
    CHANGE_LOG,
    append_change,
    digest_file,
    render_diff,
    require_reason,
    rerecord_summary,
)
from grader.rubric import Case, load_cases
from grader.submission import (
    Manifest,
    call_agent,
    load_agent,
    load_manifest,
    load_tools,
)

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
    add_provider_options(record)
    record.add_argument("--cassettes", metavar="FOLDER", help="record into this folder "
                        "(default: the manifest's cassettes); e.g. a second provider's set")
    record.add_argument("--mode", choices=["once", "rerecord"], default="once",
                        help="once: record only what is missing (default); rerecord: ask "
                        "again for everything, keep the old cassette as CASE.previous.json")
    record.add_argument("--rerecord", action="store_const", const="rerecord", dest="mode",
                        help="short for --mode rerecord")
    record.add_argument("--reason", help="why the dataset changes (required with --rerecord): "
                        "logged in DATASET_CHANGES.md with the keys that changed")
    record.add_argument("--quiet", action="store_true",
                        help="no line per call and per retry, only the summary")
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
    counts = _Counts()
    try:
        _record_cases(args, manifest, cases, mode, reason, counts)
    except KeyboardInterrupt:
        print(f"interrupted: the {counts.recorded} answers recorded live so far are kept in "
              f"{manifest.root / manifest.cassettes}/; run the same command again to resume "
              "(what is recorded is served from the cassettes, not asked again)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    sdk = f"; {counts.requests_recorded} SDK requests recorded live, " \
        f"{counts.requests_served} served from cassettes" \
        if counts.requests_recorded or counts.requests_served else ""
    print(f"done: {counts.recorded} answers recorded live from {counts.provider}, "
          f"{counts.served} served from cassettes{sdk}. "
          f"Commit {manifest.root / manifest.cassettes}/.", file=sys.stderr)
    return EXIT_OK


@dataclass
class _Counts:
    recorded: int = 0
    served: int = 0
    provider: str = ""
    requests_recorded: int = 0
    requests_served: int = 0


class _Unconfigured:
    """The live provider when none is configured: an agent on the official SDKs needs
    none (its SDK calls the API itself), and one that calls ``complete`` learns how."""

    name = "unconfigured"

    def __init__(self, error: ProviderConfigError) -> None:
        self._error = error

    def complete(self, prompt: str) -> str:
        raise self._error


def _say(quiet: bool) -> Callable[[str], None]:
    """Where the per-call and per-retry lines go: plain lines on stderr, none when quiet."""
    return (lambda line: None) if quiet else (lambda line: print(line, file=sys.stderr))


def _record_cases(args: argparse.Namespace, manifest: Manifest, cases: list[Case], mode: Mode,
                  reason: str, counts: _Counts) -> None:
    say = _say(args.quiet)
    with imports_from(manifest.root):
        try:
            live: Provider = live_provider(args, manifest.root, say)
        except ProviderConfigError as exc:
            live = _Unconfigured(exc)
        counts.provider = live.name
        agent, tools = load_agent(manifest), load_tools(manifest)
        for number, case in enumerate(cases, 1):
            path, fixture = manifest.cassette(case.id), manifest.fixture(case.id)
            started = time.monotonic()
            say(f"[{number}/{len(cases)}] {case.id}")
            with Recorder(live, path, mode=mode, case=case.id) as recorder:
                shown = _Shown(recorder, say, counts)
                if tools is None:
                    call_agent(agent, shown, case.task, None)
                else:
                    with ToolRecorder(tools, fixture, case=case.id, mode=mode) as toolbox:
                        call_agent(agent, shown, case.task, _ShownTools(toolbox, say))
            sdk = shown.requests
            http = f", SDK requests {sdk.recorded} live, {sdk.served} from cassette" \
                if sdk is not None else ""
            print(f"[{number}/{len(cases)}] {case.id}: {recorder.recorded} live, "
                  f"{recorder.served} from cassette{http}, {time.monotonic() - started:.1f}s "
                  f"-> {path}", file=sys.stderr)
            if sdk is not None:
                counts.requests_recorded += sdk.recorded
                counts.requests_served += sdk.served
            if mode == "rerecord":
                for changed in ((path, fixture) if sdk is None else (path, sdk.path, fixture)):
                    _review_rerecord(manifest.root, case.id, changed, reason)


class _Shown(HttpClients):
    """The provider an agent is given by ``record``: the recorder, and one line per call
    saying whether the answer came live or from the cassette, and how long it took.
    Its HTTP side is the recorder's (``<case>.http.json``), told the same way."""

    def __init__(self, recorder: Recorder, say: Callable[[str], None], counts: _Counts) -> None:
        self.name, self._recorder, self._say, self._counts = recorder.name, recorder, say, counts
        self._calls = 0
        self.requests: CassetteTransport | None = None  # once an SDK client is handed out

    def http_transport(self) -> _ShownRequests:
        """The recorder's transport, each request told."""
        self.requests = self._recorder.http_transport()
        return _ShownRequests(self.requests, self.requests, self._say)

    def async_http_transport(self) -> _ShownRequests:
        """The recorder's async transport, each request told."""
        self.requests = self._recorder.http_transport()
        return _ShownRequests(self._recorder.async_http_transport(), self.requests, self._say)

    def complete(self, prompt: str) -> str:
        """The recorder's answer, told."""
        before, started = self._recorder.recorded, time.monotonic()
        answer = self._recorder.complete(prompt)
        self._calls += 1
        live = self._recorder.recorded > before
        self._counts.recorded += live
        self._counts.served += not live
        how = "live" if live else "from cassette"
        self._say(f"    call {self._calls}: {prompt_key(prompt)} {how}, "
                  f"{time.monotonic() - started:.1f}s")
        return answer


class _ShownRequests:
    """An SDK client's transport under ``record``: the recorder's, and one line per request
    saying whether it went live or came from the cassette."""

    def __init__(self, inner: Any, counted: CassetteTransport,
                 say: Callable[[str], None]) -> None:
        self._inner, self._counted, self._say = inner, counted, say  # counted: inner's recording
        self._requests = 0

    def handle_request(self, request: Any) -> Any:
        before, started = self._counted.served, time.monotonic()
        response = self._inner.handle_request(request)
        self._tell(request, before, started)
        return response

    async def handle_async_request(self, request: Any) -> Any:
        before, started = self._counted.served, time.monotonic()
        response = await self._inner.handle_async_request(request)
        self._tell(request, before, started)
        return response

    def _tell(self, request: Any, before: int, started: float) -> None:
        self._requests += 1
        how = "from cassette" if self._counted.served > before else "live"
        self._say(f"    request {self._requests}: {request.method} {request.url.path} "
                  f"{request_key(request.method, str(request.url), request.read())} {how}, "
                  f"{time.monotonic() - started:.1f}s")

    def close(self) -> None:
        """The recorder closes its transport."""

    async def aclose(self) -> None:
        """The recorder closes its transport."""


class _ShownTools:
    """The toolbox an agent is given by ``record``: one line per tool call."""

    def __init__(self, toolbox: ToolRecorder, say: Callable[[str], None]) -> None:
        self._toolbox, self._say = toolbox, say

    def call(self, name: str, /, **args: Any) -> Any:
        """The recorder's result, told."""
        before = self._toolbox.recorded
        result = self._toolbox.call(name, **args)
        how = "live" if self._toolbox.recorded > before else "from fixture"
        self._say(f"    tool {name}: {how}")
        return result


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
