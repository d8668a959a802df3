"""The student's loop on the command line: record, run, replay and key.

``record`` and ``run`` import the submission's agent and tools from ``--root`` (``load_spec``):
whatever ``lab`` the environment holds, the one in ROOT runs.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gradekit import (
    CassetteTransport,
    GradekitError,
    MissingFixtureError,
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
    tool_key,
)
from gradekit.internal import HttpClients, previous_path, write_atomic
from grader._exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from grader._specs import imports_from, load_spec
from grader.assets import case_item
from grader.cli._options import add_provider_options, add_rubric_option, live_provider
from grader.grading import CASES
from grader.recordings import (
    CHANGE_LOG,
    append_change,
    check_change,
    digest_file,
    render_diff,
    require_reason,
    rerecord_summary,
)
from grader.regression import RegressionSet, recording_name
from grader.rubric import SETS, load_cases, load_rubric
from grader.submission import (
    Manifest,
    ManifestError,
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
    parser.add_argument(
        "--case",
        action="append",
        dest="cases",
        metavar="ID",
        help="only this case (repeatable); default: every case of the rubric",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        help="the submission folder whose agent, tools and cassettes are used (default: .)",
    )
    add_rubric_option(parser, lab=lambda args: Path(args.root))


def _add_record(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    record = commands.add_parser(
        "record",
        help="run the agent live once and record every answer into cassettes",
        description="Run the agent on every case against a live provider; answers already "
        "in a cassette are served from it, so an interrupted run resumes.",
    )
    _add_submission_options(record)
    add_provider_options(record)
    record.add_argument(
        "--cassettes",
        metavar="FOLDER",
        help="record into this folder "
        "(default: the manifest's cassettes); e.g. a second provider's set",
    )
    record.add_argument(
        "--mode",
        choices=["once", "rerecord"],
        default="once",
        help="once: record only what is missing (default); rerecord: ask "
        "again for everything, keep the old cassette as CASE.previous.json",
    )
    record.add_argument(
        "--rerecord",
        action="store_const",
        const="rerecord",
        dest="mode",
        help="short for --mode rerecord",
    )
    record.add_argument(
        "--reason",
        help="why the dataset changes (required with --rerecord): "
        "logged in DATASET_CHANGES.md with the keys that changed",
    )
    record.add_argument(
        "--quiet", action="store_true", help="no line per call and per retry, only the summary"
    )
    record.set_defaults(handler=_record)


@dataclass(frozen=True, slots=True)
class _Task:
    """What ``record`` and ``run`` ask the agent: a rubric case (``world`` None), or an item
    of a regression set the rubric pins, under its recording name (``regression/SET/ITEM``),
    with the agent it asks (None: the manifest's) and the world of tool reads it starts
    from."""

    id: str
    task: str
    agent: str | None = None
    world: Mapping[str, Any] | None = None


def _selected_cases(args: argparse.Namespace) -> list[_Task]:
    tasks = [_Task(case.id, case.task) for case in load_cases(args.rubric)]
    tasks += [
        _Task(recording_name(pinned.name, item.id), item.task, item.agent, item.reads())
        for pinned in _pinned(args.rubric)
        for item in pinned.items
        if not item.missing
    ]
    unique: dict[str, _Task] = {}
    for task in tasks:  # an item two pinned versions share is recorded once
        unique.setdefault(task.id, task)
    tasks = list(unique.values())
    if not args.cases:
        return tasks
    saved = [name.removeprefix(f"{CASES}/") for name in args.cases if name.startswith(f"{CASES}/")]
    tasks += _saved_cases(args.rubric, saved)
    known = [task.id for task in tasks]
    unknown = [case_id for case_id in args.cases if case_id not in known]
    if unknown:
        raise UsageError(
            f"unknown case {', '.join(unknown)}; the rubric has {', '.join(known)}"
            f" (and {CASES}/CASE for a case the asset ledger beside it saved)"
        )
    return [task for task in tasks if task.id in args.cases]


def _saved_cases(rubric: Path, chosen: list[str]) -> list[_Task]:
    """The saved cases ``chosen`` (ids), from the asset ledger beside ``rubric``, recorded
    as ``cases/<id>`` the way ``case run`` serves them; an unknown or archived one is
    refused, naming the ledger's cases."""
    if not chosen:
        return []
    sets, loaded = rubric.parent / SETS, load_rubric(rubric)
    tasks = []
    for case_id in chosen:
        item, _ = case_item(sets, loaded, case_id)
        tasks.append(_Task(f"{CASES}/{item.id}", item.task, item.agent, item.reads()))
    return tasks


def _pinned(rubric: Path) -> list[RegressionSet]:
    """The regression sets ``rubric`` pins that are there (a hand-out holds their public
    views): each item is recorded like a case."""
    return [pinned for pinned in load_rubric(rubric).sets.values() if pinned is not None]


def _record(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.root)
    if args.cassettes:
        manifest = replace(manifest, cassettes=args.cassettes)
    cases = _selected_cases(args)
    mode: Mode = args.mode
    log = _Log(manifest.root / CHANGE_LOG, datetime.now(UTC).strftime("%Y-%m-%d"))
    if mode == "rerecord":
        log.reason = require_reason(args.reason)
        for case in cases:  # a change that could not be logged is refused before it is made
            check_change(date=log.date, case=case.id, kind="cassette", reason=log.reason)
    counts = _Counts()
    try:
        _record_cases(args, manifest, cases, mode, log, counts)
    except KeyboardInterrupt:
        print(
            f"interrupted: the {counts.recorded} answers recorded live so far are kept in "
            f"{manifest.root / manifest.cassettes}/; run the same command again to resume "
            "(what is recorded is served from the cassettes, not asked again)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print(_summary(manifest.root, counts, log), file=sys.stderr)
    if log.failed:
        cases_named = ", ".join(dict.fromkeys(case for case, _ in log.failed))
        print(
            f"{type(log.failed[0][1]).__name__}: could not log the re-recording of "
            f"{cases_named} in {log.path} ({log.failed[0][1]}). Those recordings are back as "
            "they were before this run; fix the change log and run the same command again.",
            file=sys.stderr,
        )
        first = log.failed[0][1]
        return first.exit_code if isinstance(first, GradekitError) else EXIT_USAGE
    return EXIT_OK


@dataclass
class _Counts:
    recorded: int = 0
    served: int = 0
    provider: str = ""
    requests_recorded: int = 0
    requests_served: int = 0
    bases: set[str] = field(default_factory=set)  # where the SDK requests went
    written: list[Path] = field(default_factory=list)  # the recordings, in the order used


@dataclass
class _Log:
    """The change log a ``rerecord`` appends to, and the entries it could not append."""

    path: Path
    date: str
    reason: str = ""
    logged: bool = False
    failed: list[tuple[str, Exception]] = field(default_factory=list)  # (case, why)


def _summary(root: Path, counts: _Counts, log: _Log) -> str:
    """The last line: what was recorded live from where, and the ``git add`` that commits
    every file and folder the run wrote (relative to ``--root``)."""
    said = []
    if counts.recorded or counts.served or not counts.bases:
        source = f" from {counts.provider}" if counts.recorded else ""
        said.append(
            f"{counts.recorded} answers recorded live{source}, "
            f"{counts.served} served from cassettes"
        )
    if counts.bases:
        urls = ", ".join(sorted(counts.bases))
        said.append(
            f"{counts.requests_recorded} SDK requests recorded live, "
            f"{counts.requests_served} served from cassettes "
            f"(base URL{'s' if len(counts.bases) > 1 else ''} {urls})"
        )
    names = list(dict.fromkeys(_folder(root, path) for path in counts.written))
    if log.logged:
        names.append(CHANGE_LOG)
    if not names:
        return f"done: {'; '.join(said)}. Nothing was written."
    git = (
        ["git"]
        + (["-C", str(root)] if root != Path(".") else [])
        + ["add", *(name.rstrip("/") for name in names)]
    )
    shown = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    return f"done: {'; '.join(said)}. Commit {shown}: {shlex.join(git)}"


def _folder(root: Path, path: Path) -> str:
    """The folder of a recording, relative to ``root`` when inside it, with a final slash."""
    try:
        return path.parent.relative_to(root).as_posix() + "/"
    except ValueError:
        return path.parent.as_posix() + "/"


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


def _record_cases(
    args: argparse.Namespace,
    manifest: Manifest,
    cases: list[_Task],
    mode: Mode,
    log: _Log,
    counts: _Counts,
) -> None:
    say = _say(args.quiet)
    with imports_from(manifest.root):
        try:
            live: Provider = live_provider(args, manifest.root, say)
        except ProviderConfigError as exc:
            live = _Unconfigured(exc)
        counts.provider = live.name
        agents, tools = _Agents(manifest), load_tools(manifest)
        for number, case in enumerate(cases, 1):
            path, fixture = manifest.cassette(case.id), manifest.fixture(case.id)
            started = time.monotonic()
            say(f"[{number}/{len(cases)}] {case.id}")
            agent, ended = agents.get(case.agent), ""
            with (
                Recorder(live, path, mode=mode, case=case.id) as recorder,
                contextlib.ExitStack() as stack,
            ):
                shown = _Shown(recorder, say, counts)
                recording = (
                    None
                    if tools is None
                    else stack.enter_context(ToolRecorder(tools, fixture, case=case.id, mode=mode))
                )
                if case.world is not None:
                    ended = _ask_item(
                        agent,
                        shown,
                        case,
                        _WorldTools(case.world, recording, manifest, case.id, say),
                    )
                elif recording is None:
                    call_agent(agent, shown, case.task, None)
                else:
                    call_agent(agent, shown, case.task, _ShownTools(recording, say))
            sdk = shown.requests
            http = (
                f", SDK requests {sdk.recorded} live, {sdk.served} from cassette"
                if sdk is not None
                else ""
            )
            used = [path] if recorder.recorded or recorder.served else []
            used += [sdk.path] if sdk is not None else []
            used += [fixture] if tools is not None else []
            written = [file for file in used if file.exists()]
            counts.written += written
            print(
                f"[{number}/{len(cases)}] {case.id}: {recorder.recorded} live, "
                f"{recorder.served} from cassette{http}, {time.monotonic() - started:.1f}s "
                f"-> {', '.join(map(str, written)) or 'nothing recorded'}{ended}",
                file=sys.stderr,
            )
            if sdk is not None:
                counts.requests_recorded += sdk.recorded
                counts.requests_served += sdk.served
            if mode == "rerecord":
                for changed in (path, fixture) if sdk is None else (path, sdk.path, fixture):
                    _show_rerecording(manifest.root, case.id, changed, log)


class _Agents:
    """The agents ``record`` asks: the manifest's, and each an item names, imported once."""

    def __init__(self, manifest: Manifest) -> None:
        self._manifest = manifest
        self._loaded: dict[str | None, Any] = {None: load_agent(manifest)}

    def get(self, spec: str | None) -> Any:
        if spec is not None and spec not in self._loaded:
            self._loaded[spec] = load_spec(
                spec,
                folder=self._manifest.root,
                where="the agent a regression item asks",
                error=ManifestError,
            )
        return self._loaded[spec]


class _WorldTools:
    """An item's toolbox under ``record``: a call its world holds is answered from the world
    (what every student's run of the item starts from), a read-only tool of the submission's
    own registry is recorded live into its item fixture, and anything else (an action) is a
    miss, as the grader answers it: it is observed, never run."""

    def __init__(
        self,
        world: Mapping[str, Any],
        recording: ToolRecorder | None,
        manifest: Manifest,
        case: str,
        say: Callable[[str], None],
    ) -> None:
        self._world, self._recording, self._say = world, recording, say
        self._fixture, self._case = f"{manifest.fixtures}/{case}.json", case
        self.misses: list[MissingFixtureError] = []

    def call(self, name: str, /, **args: Any) -> Any:
        key = tool_key(name, args)
        if key in self._world:
            self._say(f"    tool {name}: from the item's world")
            return copy.deepcopy(self._world[key])
        recording = self._recording
        if (
            recording is not None
            and name in recording.tools
            and recording.tools.write_tool(name) is None
        ):
            return _ShownTools(recording, self._say).call(name, **args)
        miss = MissingFixtureError(
            f"{name} is neither a read of the item's world nor a read-only tool of yours: "
            "the grader answers it with a miss too (an action is observed, never run)",
            fixture=self._fixture,
            case=self._case,
            tool=name,
            arguments=key.partition(" ")[2],
            key=key,
        )
        self.misses.append(miss)
        self._say(f"    tool {name}: a miss (not in the item's world, no read-only tool)")
        raise miss


def _ask_item(agent: Any, provider: Provider, case: _Task, tools: _WorldTools) -> str:
    """Ask the agent an item's task. A run the world's miss ended (an action the item does
    not answer) is recorded all the same: the grader sees that call too."""
    try:
        call_agent(agent, provider, case.task, tools)
    except Exception as exc:
        chain: list[BaseException] = []
        seen: BaseException | None = exc
        while seen is not None and len(chain) < 32:
            chain.append(seen)
            seen = seen.__cause__ or seen.__context__
        miss = next((m for m in tools.misses if any(m is e for e in chain)), None)
        if miss is None:
            raise
        return (
            f" (run() raised {type(exc).__name__} after calling {miss.tool}, which the "
            "item does not answer)"
        )
    return ""


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
        return _ShownRequests(self.requests, self.requests, self._say, self._counts.bases)

    def async_http_transport(self) -> _ShownRequests:
        """The recorder's async transport, each request told."""
        self.requests = self._recorder.http_transport()
        return _ShownRequests(
            self._recorder.async_http_transport(), self.requests, self._say, self._counts.bases
        )

    def complete(self, prompt: str) -> str:
        """The recorder's answer, told."""
        before, started = self._recorder.recorded, time.monotonic()
        answer = self._recorder.complete(prompt)
        self._calls += 1
        live = self._recorder.recorded > before
        self._counts.recorded += live
        self._counts.served += not live
        how = "live" if live else "from cassette"
        self._say(
            f"    call {self._calls}: {prompt_key(prompt)} {how}, {time.monotonic() - started:.1f}s"
        )
        return answer


class _ShownRequests:
    """An SDK client's transport under ``record``: the recorder's, and one line per request
    saying whether it went live or came from the cassette."""

    def __init__(
        self, inner: Any, counted: CassetteTransport, say: Callable[[str], None], bases: set[str]
    ) -> None:
        self._inner, self._counted, self._say = inner, counted, say  # counted: inner's recording
        self._bases = bases  # each request's base URL is added
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
        self._bases.add(base_url(str(request.url)))
        how = "from cassette" if self._counted.served > before else "live"
        self._say(
            f"    request {self._requests}: {request.method} {request.url.path} "
            f"{request_key(request.method, str(request.url), request.read())} {how}, "
            f"{time.monotonic() - started:.1f}s"
        )

    def close(self) -> None:
        """The recorder closes its transport."""

    async def aclose(self) -> None:
        """The recorder closes its transport."""


# The endpoints an SDK appends to its base URL, longest first: what is left is the base.
_ENDPOINTS = (
    "/chat/completions",
    "/messages/count_tokens",
    "/completions",
    "/messages",
    "/responses",
    "/embeddings",
    "/models",
)


def base_url(url: str) -> str:
    """The base URL an SDK request went to: scheme, host and port (never a user or password),
    and the path less its endpoint (``http://127.0.0.1:8080/v1`` for ``.../v1/chat/completions``;
    an unknown endpoint loses its last segment)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    ending = next((end for end in _ENDPOINTS if path.endswith(end)), None)
    path = path[: -len(ending)] if ending else path.rpartition("/")[0]
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{path}"


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


def _show_rerecording(root: Path, case: str, path: Path, log: _Log) -> None:
    """Show what a re-recording changed; log a change to the dataset's change log.

    A change that cannot be logged is undone: the file gets its previous bytes back and
    the previous copy goes, so no unlogged change is left to commit; ``log.failed`` says
    so, and the remaining cases are still recorded.
    """
    summary = rerecord_summary(path)
    if summary is None:
        return
    print(render_diff(summary), file=sys.stderr, end="")
    previous = previous_path(path)
    if summary.keys():
        try:
            append_change(
                log.path,
                date=log.date,
                case=case,
                kind=summary.kind,
                changed_keys=summary.keys(),
                reason=log.reason,
                digests={_logged_name(root, path): digest_file(path)},
            )
        except (GradekitError, OSError) as exc:
            write_atomic(path, previous.read_bytes())
            previous.unlink()
            log.failed.append((case, exc))
            print(
                f"        not logged ({exc}): {path} is back as it was before this run",
                file=sys.stderr,
            )
            return
        log.logged = True
    print(f"        previous recording kept in {previous}", file=sys.stderr)


def _logged_name(root: Path, path: Path) -> str:
    """A recording's name in the change log: its path relative to the submission."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _run(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.root)
    cases = _selected_cases(args)
    with imports_from(manifest.root):
        agents, tools = _Agents(manifest), load_tools(manifest)
        for case in cases:
            toolbox: Any = (
                None if tools is None else ToolReplay(manifest.fixture(case.id), tools=tools)
            )
            if case.world is not None:
                toolbox = _WorldReplay(case.world, toolbox)
            answer = call_agent(
                agents.get(case.agent), Replay(manifest.cassette(case.id)), case.task, toolbox
            )
            print(f"## {case.id}\n{answer}\n")
    return EXIT_OK


class _WorldReplay:
    """An item's toolbox under ``run``: its world first, then the item's fixture (strict)."""

    def __init__(self, world: Mapping[str, Any], fixture: ToolReplay | None) -> None:
        self._world, self._fixture = world, fixture

    def call(self, name: str, /, **args: Any) -> Any:
        key = tool_key(name, args)
        if key in self._world:
            return copy.deepcopy(self._world[key])
        if self._fixture is None:
            raise MissingFixtureError(
                f"{name} is not a read of the item's world",
                fixture="",
                case="",
                tool=name,
                arguments=key.partition(" ")[2],
                key=key,
            )
        return self._fixture.call(name, **args)


def _replay(args: argparse.Namespace) -> int:
    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    sys.stdout.write(Replay(args.cassette).complete(prompt))
    sys.stdout.write("\n")
    return EXIT_OK


def _key(args: argparse.Namespace) -> int:
    print(prompt_key(args.text if args.text is not None else sys.stdin.read()))
    return EXIT_OK
