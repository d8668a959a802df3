"""``gradekit incident record`` and ``gradekit incident show``: cut-point replay on the
command line.

``record`` runs an agent once, live, through an ``IncidentRecorder``: every model call,
read-only tool call and action is appended to the incident file as it happens, one line
printed per crossing. ``show`` prints a recorded incident as a timeline. Replaying an
incident is a test's job (``gradekit.replay_incident``): the plan, which boundaries run
through the new code, belongs next to the assertion it serves.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradekit import (
    Envelope,
    GradekitError,
    Incident,
    IncidentRecorder,
    Provider,
    Tools,
    UsageError,
    prompt_key,
    read_incident,
    tool_key,
)
from gradekit.internal import commands
from grader._exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from grader._specs import imports_from, load_spec
from grader.cli._options import add_provider_options, add_rubric_option, live_provider
from grader.rubric import load_cases
from grader.submission import takes_tools

__all__ = ["add_incident_commands", "render_incident"]

_SHORT = 72  # characters of an output or a key shown on a timeline line


def add_incident_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``incident record`` and ``incident show``."""
    incident = commands.add_parser(
        "incident",
        help="record a run's crossings once (an incident), show one",
        description="Cut-point replay: record a run's model calls, tool calls and actions as "
        "an incident; a test replays it with gradekit.replay_incident, serving some "
        "boundaries from the record and running the others through the new code.",
    )
    sub = incident.add_subparsers(dest="incident_command", required=True, metavar="COMMAND")
    _add_record(sub)
    show = sub.add_parser("show", help="print a recorded incident as a timeline")
    show.add_argument("file", type=Path, metavar="FILE", help="the incident (.jsonl)")
    show.set_defaults(handler=_show)


def _add_record(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    record = sub.add_parser(
        "record",
        help="run an agent live once and record every crossing into an incident",
        description="Run the agent once against a live provider and live tools; every "
        "crossing (model call, read-only tool call, action) is appended to --out as it "
        "happens, so a run that dies mid-way keeps what it did.",
    )
    record.add_argument(
        "--agent",
        required=True,
        metavar="package.module:function",
        help="the agent, run(provider, task[, tools])",
    )
    record.add_argument(
        "--tools",
        metavar="package.module:NAME",
        help="its gradekit.Tools registry (read-only tools and write tools, "
        "whose calls are the actions); default: no tools",
    )
    task = record.add_mutually_exclusive_group(required=True)
    task.add_argument("--task", metavar="TEXT", help="the task the agent is given")
    task.add_argument(
        "--case",
        metavar="ID",
        help="take the task (and the case name) from this case of the rubric",
    )
    record.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="the incident to write, e.g. incidents/NAME.jsonl (never overwritten)",
    )
    record.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        help="the folder the agent and tools are imported from (default: .)",
    )
    add_rubric_option(record, lab=lambda args: Path(args.root))
    add_provider_options(record)
    record.add_argument(
        "--quiet", action="store_true", help="no line per crossing, only the summary"
    )
    record.set_defaults(handler=_record)


# -- record ---------------------------------------------------------------------------------


@dataclass
class _Tally:
    """The crossings made so far, told one line each."""

    say: Callable[[str], None]
    count: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    ran: int = 0

    def told(
        self,
        kind: str,
        boundary: str,
        key: str,
        started: float,
        output: Any,
        error: BaseException | None,
    ) -> None:
        index, self.count = self.count, self.count + 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.ran += kind == "action" and error is None
        outcome = (
            f"!! {type(error).__name__}: {error}" if error is not None else f"-> {_short(output)}"
        )
        ran = ("  [ran]" if error is None else "  [did not run]") if kind == "action" else ""
        self.say(
            f"    #{index} {kind} {boundary} {_short_key(boundary, key)} {outcome}{ran} "
            f"({time.monotonic() - started:.1f}s)"
        )


class _ShownProvider:
    """The recorder's provider, one line per call."""

    def __init__(self, recorded: Provider, tally: _Tally) -> None:
        self.name, self._recorded, self._tally = recorded.name, recorded, tally

    def complete(self, prompt: str) -> str:
        """The live answer, recorded and told."""
        started = time.monotonic()
        try:
            answer = self._recorded.complete(prompt)
        except Exception as exc:
            self._tally.told("model", "model", prompt_key(prompt), started, None, exc)
            raise
        self._tally.told("model", "model", prompt_key(prompt), started, answer, None)
        return answer


class _ShownToolbox:
    """The recorder's toolbox, one line per call."""

    def __init__(self, recorded: Any, tools: Tools, tally: _Tally) -> None:
        self._recorded, self._tools, self._tally = recorded, tools, tally

    def call(self, name: str, /, **args: Any) -> Any:
        """The live result, recorded and told."""
        kind = "action" if self._tools.write_tool(name) is not None else "read"
        started = time.monotonic()
        try:
            key = tool_key(name, args)
        except GradekitError:
            key = name
        try:
            result = self._recorded.call(name, **args)
        except Exception as exc:
            self._tally.told(kind, name, key, started, None, exc)
            raise
        self._tally.told(kind, name, key, started, result, None)
        return result


def _record(args: argparse.Namespace) -> int:
    out: Path = args.out
    if out.exists():
        raise UsageError(
            f"{out} already holds an incident; an incident is never rewritten: "
            "record into a new file (--out), or delete it first"
        )
    case, task = _case_and_task(args)
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    root: Path = args.root
    with imports_from(root):
        agent = load_spec(args.agent, folder=root, where="--agent", error=UsageError)
        if not callable(agent):
            raise UsageError(
                f"--agent {args.agent} must name a function run(provider, task[, tools])"
            )
        tools = _load_tools(args.tools, root)
        live = live_provider(args, root, say)
        tally = _Tally(say)
        started = time.monotonic()
        print(f"recording {case} with {live.name} -> {out}", file=sys.stderr)
        with IncidentRecorder(out, case=case, task=task, provider=live.name) as recorder:
            provider = _ShownProvider(recorder.provider(live), tally)
            toolbox = _ShownToolbox(recorder.toolbox(tools), tools, tally)
            try:
                answer = (
                    agent(provider, task, toolbox) if takes_tools(agent) else agent(provider, task)
                )
            except KeyboardInterrupt:
                print(
                    f"interrupted: the {tally.count} crossings made so far are kept in {out}",
                    file=sys.stderr,
                )
                return EXIT_INTERRUPTED
            except GradekitError:
                print(
                    f"the run stopped: the {tally.count} crossings made so far are kept in {out}",
                    file=sys.stderr,
                )
                raise
            except Exception as exc:  # the agent's own failure is part of the incident
                print(
                    f"the agent raised {type(exc).__name__}: {exc}\n"
                    f"done: {_summary(tally)} recorded in {out}; the run failed",
                    file=sys.stderr,
                )
                return EXIT_FAILED
    print(answer)
    show = commands.from_here(commands.INCIDENT_SHOW(path=str(out)))
    print(
        f"done: {_summary(tally)} recorded from {live.name} in "
        f"{time.monotonic() - started:.1f}s -> {out}. Show it with "
        f"`{show}`; replay it in a test with "
        "gradekit.replay_incident and commit it.",
        file=sys.stderr,
    )
    return EXIT_OK


def _case_and_task(args: argparse.Namespace) -> tuple[str, str]:
    """The incident's case and task: a case of the rubric, or the task given (the case then
    named after the file)."""
    if args.task is not None:
        if not args.task.strip():
            raise UsageError("--task is empty: give the task the agent is asked")
        return args.out.stem, str(args.task)
    cases = load_cases(args.rubric)
    for case in cases:
        if case.id == args.case:
            return case.id, case.task
    known = ", ".join(case.id for case in cases)
    raise UsageError(f"unknown case {args.case}; the rubric has {known}")


def _load_tools(spec: str | None, root: Path) -> Tools:
    if spec is None:
        return Tools()
    tools = load_spec(spec, folder=root, where="--tools", error=UsageError)
    if not isinstance(tools, Tools):
        raise UsageError(
            f"--tools {spec} must name a gradekit.Tools registry, not {type(tools).__name__}"
        )
    return tools


def _summary(tally: _Tally) -> str:
    parts = [
        f"{tally.kinds[kind]} {kind}" for kind in ("model", "read", "action") if kind in tally.kinds
    ]
    detail = f" ({', '.join(parts)}; {tally.ran} action(s) ran)" if parts else ""
    return f"{tally.count} crossing(s){detail}"


# -- show -----------------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    sys.stdout.write(render_incident(read_incident(args.file), args.file))
    return EXIT_OK


def render_incident(incident: Incident, path: Path | str) -> str:
    """The incident as ``incident show`` prints it: a header, one line per envelope, and
    the torn last line if there was one. The same file always gives the same text."""
    kinds = {
        kind: sum(e.kind == kind for e in incident.envelopes)
        for kind in ("model", "read", "action")
    }
    ran = sum(bool(e.ran) for e in incident.envelopes if e.kind == "action")
    lines = [
        f"incident  {path}",
        f"case      {incident.case}",
        f"task      {incident.task}",
        f"provider  {incident.provider or '(not recorded)'}",
        f"crossings {len(incident.envelopes)}: {kinds['model']} model, {kinds['read']} read, "
        f"{kinds['action']} action ({ran} ran)",
        "",
    ]
    rows = [_row(envelope) for envelope in incident.envelopes]
    widths = [max((len(row[column]) for row in rows), default=0) for column in range(4)]
    for row in rows:
        head = "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
        lines.append(f"{head}  {row[4]}")
    if not rows:
        lines.append("(no crossing recorded)")
    if incident.torn:
        lines.append(f"torn: {incident.torn}")
    return "\n".join(lines) + "\n"


def _row(envelope: Envelope) -> tuple[str, str, str, str, str]:
    if envelope.error is not None:
        outcome = f"!! {envelope.error}"
    else:
        outcome = f"-> {_short(envelope.output)}"
    if envelope.kind == "action":
        outcome += "  [ran]" if envelope.ran else "  [did not run]"
    return (
        f"#{envelope.index}",
        envelope.kind,
        envelope.boundary,
        _short_key(envelope.boundary, envelope.key),
        outcome,
    )


def _short_key(boundary: str, key: str) -> str:
    """A tool key without its tool's name (the boundary says it), capped."""
    if key.startswith(f"{boundary} "):
        key = key[len(boundary) + 1 :]
    return _cap(key)


def _short(value: Any) -> str:
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return _cap(text)


def _cap(text: str) -> str:
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"
