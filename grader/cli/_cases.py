"""``gradekit case ...``, ``investigate``, ``disposition`` and ``approve``: the evaluation
assets and the path from a failure to a regression item, on the command line.

A case is saved from a failing run (``case from-run``), written by hand or drafted by a
model (``case new``), revised (``case revise``: a new version, the old one archived) or
archived (``case archive``); ``case show`` lists them, or one case's versions and steps. A
case reaches a set only through ``investigate``, a ``disposition`` of
``regression_candidate`` (the candidate), ``approve`` and ``regression promote
--candidate``. Every command appends to the asset ledger (``SETS/ledger.jsonl``) and
prints what it appended.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import decode_fixture
from grader._exits import EXIT_FAILED, EXIT_OK
from grader._expect import expectation_document
from grader._model import CheckResult
from grader._text import TEXT_LIMIT, quote
from grader.assets import (
    DISPOSITIONS,
    SOURCES,
    Assets,
    PromotionRequest,
    StoredCase,
    append_case_batch,
    applicable_agent,
    approve,
    archive,
    case_batch,
    case_item,
    dispose,
    from_run,
    investigate,
    new_case,
    read_assets,
    revise,
    save_from_run,
)
from grader.batch import discover
from grader.cli._options import (
    add_expectation_options,
    add_rubric_option,
    add_wall_option,
    told_expectation,
)
from grader.cli._regression import line as _line
from grader.cli._regression import sets_folder as _sets_of
from grader.grading import run_cases
from grader.regression import decode_world, world_json
from grader.rubric import load_rubric
from grader.sandbox import choose_wall

__all__ = ["add_case_commands"]


def add_case_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``case``, ``investigate``, ``disposition`` and ``approve``."""
    case = commands.add_parser(
        "case",
        help="evaluation cases: a fixed input and the truth a run is judged by",
        description="A case fixes an input (a task, the agent asked, the world of tool calls "
        "it starts from) and an expectation (goal, outcome, decision, facts, forbidden "
        "actions); every change is a new event of the asset ledger beside the sets.",
    )
    sub = case.add_subparsers(dest="case_command", required=True, metavar="COMMAND")
    _add_from_run(sub)
    _add_new(sub)
    revised = sub.add_parser("revise", help="a new version of a case; the old one archived")
    revised.add_argument("case", metavar="CASE", help="the case, e.g. case-3")
    revised.add_argument("--task", default="", help="a new task (default: the case's)")
    add_expectation_options(revised, "the case's expectation")
    _add_common(revised, "why it changes")
    revised.set_defaults(handler=_revise)
    archived = sub.add_parser("archive", help="archive a case: kept, never published again")
    archived.add_argument("case", metavar="CASE")
    _add_who(archived, "why it is archived")
    archived.set_defaults(handler=_archive)
    _add_run(sub)
    show = sub.add_parser("show", help="every case, or one case's versions and steps")
    show.add_argument("case", nargs="?", metavar="CASE")
    _add_place(show)
    show.set_defaults(handler=_show)

    opened = commands.add_parser("investigate", help="open an investigation of a case")
    opened.add_argument("case", metavar="CASE")
    _add_who(opened, "what is to be found out")
    opened.set_defaults(handler=_investigate)
    disposed = commands.add_parser(
        "disposition",
        help="a person's review of an investigation, never overwritten",
        description="Review an investigation with its disposition; regression_candidate makes "
        "the case a candidate for a regression set.",
    )
    disposed.add_argument("investigation", metavar="INVESTIGATION", help="e.g. inv-1")
    disposed.add_argument("disposition", choices=DISPOSITIONS)
    _add_who(disposed, "what the investigation found")
    disposed.set_defaults(handler=_dispose)
    approved = commands.add_parser(
        "approve",
        help="a person approves a candidate: only an approved candidate is published into a set",
    )
    approved.add_argument("candidate", metavar="CANDIDATE", help="e.g. cand-1")
    _add_who(approved, "why it belongs in a regression set")
    approved.set_defaults(handler=_approve)


def _add_place(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sets",
        type=Path,
        metavar="DIR",
        help="the folder of sets, whose "
        "ledger.jsonl holds the assets (default: regression/ beside the rubric)",
    )
    add_rubric_option(parser)


def _add_who(parser: argparse.ArgumentParser, reason: str) -> None:
    parser.add_argument(
        "--by",
        required=True,
        metavar="NAME",
        help="who does it (a label, not an authenticated identity)",
    )
    parser.add_argument("--reason", required=True, metavar="TEXT", help=reason)
    _add_place(parser)


def _add_common(parser: argparse.ArgumentParser, reason: str) -> None:
    parser.add_argument(
        "--coverage",
        action="append",
        default=[],
        metavar="LAYER",
        help="a risk layer the case covers (e.g. policy, tool-use, facts)",
    )
    _add_who(parser, reason)


def _add_reference(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="package.module:function",
        help="the agent every "
        "student's run asks, one the reference lab holds (default: each "
        "submission's own)",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the reference lab the hand-out is built from, where --agent's "
        "module must be (default: .)",
    )


def _add_from_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    saved = sub.add_parser(
        "from-run",
        help="save a case from a student's failing run",
        description="Save what a failing run was asked, the world it started from and what "
        "it should have come to, never the student's answers; the same run saved twice gives "
        "the case saved the first time.",
    )
    saved.add_argument("student", metavar="STUDENT", help="the student, as the ledger names them")
    saved.add_argument(
        "--root",
        type=Path,
        required=True,
        metavar="SUBMISSION_DIR",
        help="the submission folder the run graded",
    )
    what = saved.add_mutually_exclusive_group(required=True)
    what.add_argument("--case", metavar="CASE_ID", help="a rubric case the run failed")
    what.add_argument(
        "--incident",
        metavar="PATH",
        help="an incident file of the submission "
        "(relative to --root) in which a forbidden action ran",
    )
    _add_reference(saved)
    saved.add_argument(
        "--out",
        type=Path,
        default=Path("grades"),
        help="the grades folder whose ledger holds the run (default: grades)",
    )
    saved.add_argument(
        "--report",
        metavar="DIGEST",
        help="the run whose report this is (default: the student's latest graded run)",
    )
    add_expectation_options(saved, "the rubric case's [case.expect]")
    _add_common(saved, "why it is worth keeping: the admission reason")
    saved.set_defaults(handler=_from_run)


def _add_new(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    written = sub.add_parser("new", help="a case written by hand, or drafted by a model")
    written.add_argument("--task", required=True, help="what the agent is asked")
    written.add_argument(
        "--name",
        required=True,
        metavar="NAME",
        help="the default id of an item that publishes it, e.g. refund-day-40",
    )
    written.add_argument(
        "--world",
        type=Path,
        metavar="FILE",
        help="the tool calls it starts from: a tool fixture or a gradekit.world/1 file",
    )
    written.add_argument(
        "--source",
        choices=SOURCES[1:],
        default="manual",
        help="manual (default), or ai_draft: a model's draft, which a person "
        "other than its drafter approves before it is published",
    )
    _add_reference(written)
    add_expectation_options(written, "nothing")
    _add_common(written, "why it is worth keeping: the admission reason")
    written.set_defaults(handler=_new)


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ran = sub.add_parser(
        "run",
        help="run saved cases against a submission or a cohort; never a grade",
        description="Run saved cases (any status but archived), before any is promoted, "
        "against one submission's or every submission's own recordings of their tasks, each "
        "judged against its expectation; the batch (its status, operator, time, idempotency "
        "key and every verdict) is appended to the asset ledger, never to the grades.",
    )
    ran.add_argument("cases", nargs="+", metavar="CASE", help="the cases, e.g. case-1 case-3")
    where = ran.add_mutually_exclusive_group(required=True)
    where.add_argument("--root", type=Path, metavar="SUBMISSION_DIR", help="one submission")
    where.add_argument(
        "--submissions",
        type=Path,
        metavar="DIR",
        help="a cohort: every submission in DIR, as grade finds them",
    )
    ran.add_argument(
        "--by",
        required=True,
        metavar="NAME",
        help="who runs the batch (a label, not an authenticated identity)",
    )
    ran.add_argument(
        "--key",
        default="",
        metavar="KEY",
        help="an idempotency key: a batch "
        "recorded under it already is shown again, and nothing runs twice",
    )
    add_wall_option(ran)
    _add_place(ran)
    ran.set_defaults(handler=_run)


# -- commands ----------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    sets = _sets_of(args)
    earlier = case_batch(sets, args.key)
    if earlier is not None:
        print("\n".join(_batch_lines(earlier)))
        print(
            f"already run under key {_line(args.key)} (asset ledger event "
            f"{earlier.get('seq')}): nothing run again, nothing appended"
        )
        return _batch_exit(earlier)
    rubric = load_rubric(args.rubric)
    chosen = [case_item(sets, rubric, case_id) for case_id in dict.fromkeys(args.cases)]
    roots = [args.root] if args.root is not None else discover([args.submissions])
    wall = choose_wall(args.wall, allow_host_root=args.allow_host_root)
    results: list[dict[str, Any]] = []
    for root in roots:
        checks = run_cases(root, [item for item, _ in chosen], rubric, wall=wall)
        for item, case in chosen:
            results.append(_result(root.resolve().name, case, checks[item.id]))
    event, _ = append_case_batch(
        sets,
        cases=[case for _, case in chosen],
        results=results,
        requested=len(roots) * len(chosen),
        by=args.by,
        key=args.key,
    )
    print("\n".join(_batch_lines(event)))
    return _batch_exit(event)


def _result(submission: str, case: StoredCase, check: CheckResult) -> dict[str, Any]:
    """One run of the batch as the ledger keeps it: a run that could not start (no
    manifest, an agent that does not import) is ``not_run``, never a failed case."""
    diverged = check.divergence
    unrun = diverged is not None and diverged.at in ("run", "import")
    return {
        "submission": submission,
        "case": case.id,
        "version": case.version,
        "verdict": "not_run" if unrun else check.verdict,
        "detail": check.detail,
        **(
            {}
            if diverged is None
            else {
                "divergence": diverged.at,
                "expected": diverged.expected,
                "observed": diverged.observed,
            }
        ),
    }


def _batch_lines(event: Mapping[str, Any]) -> list[str]:
    lines = []
    for result in event.get("results", []):
        where = (
            ""
            if "divergence" not in result
            else (
                f": first divergence at {result['divergence']}: expected {result['expected']}; "
                f"observed {result['observed']}"
            )
        )
        if result["verdict"] == "degraded":
            where = f": {result['detail']}"
        lines.append(
            f"{_line(str(result['submission']))}  {result['case']} "
            f"v{result['version']}  {result['verdict']}"
            f"{quote(where, TEXT_LIMIT).replace(chr(10), ' ')}"
        )
    counted = ", ".join(
        f"{event.get(verdict)} {verdict.replace('_', ' ')}"
        for verdict in ("passed", "failed", "degraded", "not_run")
        if event.get(verdict)
    )
    lines.append(
        f"{event.get('batch')} {event.get('status')}: {counted or 'nothing run'} "
        f"({event.get('completed')} of {event.get('requested')} runs), by "
        f"{_line(str(event.get('operator')))} at {event.get('at')}; asset ledger "
        f"event {event.get('seq')}; no grade changed"
    )
    return lines


def _batch_exit(event: Mapping[str, Any]) -> int:
    """0 when every run of the batch passed, else 1: a failed, degraded or unrun case."""
    return EXIT_OK if event.get("passed") == event.get("requested") else EXIT_FAILED


def _from_run(args: argparse.Namespace) -> int:
    saved = from_run(
        PromotionRequest(
            student=args.student,
            root=args.root,
            out=args.out,
            rubric=args.rubric,
            case=args.case,
            incident=args.incident,
            agent=args.agent,
            reference=args.reference,
            told=told_expectation(args),
            report=args.report,
        )
    )
    case, new = save_from_run(
        _sets_of(args),
        saved,
        load_rubric(args.rubric),
        coverage=args.coverage,
        admission=args.reason,
        by=args.by,
    )
    if not new:
        print(
            f"already {case.id} (version {case.version}, {case.status}), saved from the same "
            "run: nothing appended"
        )
        return EXIT_OK
    print(
        f"{case.id}: saved from run {saved.run.get('seq')} of {args.student} "
        f"({saved.path}); investigate it next"
    )
    return EXIT_OK


def _new(args: argparse.Namespace) -> int:
    world = _world(args.world) if args.world is not None else None
    case = new_case(
        _sets_of(args),
        load_rubric(args.rubric),
        task=args.task,
        world=world,
        agent=applicable_agent(args.agent, args.reference),
        told=told_expectation(args),
        source=args.source,
        name=args.name,
        coverage=args.coverage,
        admission=args.reason,
        by=args.by,
    )
    article = "an" if case.source[0] in "aeiou" else "a"
    print(f"{case.id}: {article} {case.source} case; investigate it next")
    return EXIT_OK


def _world(path: Path) -> bytes:
    """``--world``: a world file as it is, or a tool fixture's calls as a world."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--world {path}: cannot be read ({exc.strerror})") from None
    try:
        decode_world(data, str(path))
        return data
    except UsageError:
        pass
    try:
        fixture = decode_fixture(data, source=str(path))
    except Exception as exc:
        raise UsageError(
            f"--world {path} is neither a gradekit.world/1 file nor a tool fixture ({exc})"
        ) from None
    return world_json((call.tool, call.args, call.response) for call in fixture.calls.values())


def _revise(args: argparse.Namespace) -> int:
    case = revise(
        _sets_of(args),
        load_rubric(args.rubric),
        args.case,
        task=args.task,
        told=told_expectation(args),
        coverage=args.coverage,
        by=args.by,
        reason=args.reason,
    )
    print(
        f"{case.id}: version {case.version} of the case, superseding {case.supersedes} "
        "(archived); investigate it to publish it"
    )
    return EXIT_OK


def _archive(args: argparse.Namespace) -> int:
    case = archive(
        _sets_of(args), load_rubric(args.rubric), args.case, by=args.by, reason=args.reason
    )
    print(f"{case.id}: archived")
    return EXIT_OK


def _investigate(args: argparse.Namespace) -> int:
    event = investigate(
        _sets_of(args), load_rubric(args.rubric), args.case, by=args.by, reason=args.reason
    )
    print(
        f"{event['investigation']}: investigating {event['case']}; review it with a "
        f"disposition next ({', '.join(DISPOSITIONS)})"
    )
    return EXIT_OK


def _dispose(args: argparse.Namespace) -> int:
    events = dispose(
        _sets_of(args), args.investigation, args.disposition, by=args.by, reason=args.reason
    )
    made = [e["candidate"] for e in events if e.get("event") == "candidate"]
    print(
        f"{args.investigation}: {args.disposition}"
        + (
            f"; {made[0]} is a candidate for a regression set: a person approves it next"
            if made
            else "; no candidate"
        )
    )
    return EXIT_OK


def _approve(args: argparse.Namespace) -> int:
    event = approve(
        _sets_of(args), load_rubric(args.rubric), args.candidate, by=args.by, reason=args.reason
    )
    print(
        f"{event['candidate']}: approved by {_line(args.by)}; publish it with "
        "regression promote NAME --candidate " + str(event["candidate"])
    )
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    assets = read_assets(_sets_of(args))
    if args.case is None:
        rubric = load_rubric(args.rubric)
        for template in rubric.cases:
            print(f"{template.id:<12} template (rubric {rubric.id} v{rubric.version}), read-only")
        for case in assets.cases.values():
            print(
                f"{case.id:<12} {case.status:<8} v{case.version} {case.source:<8} "
                f"{_line(case.task)}"
            )
        return EXIT_OK
    chosen = assets.cases.get(args.case)
    if chosen is None:
        raise UsageError(f"no case {args.case!r} in the asset ledger")
    print("\n".join(_case_lines(chosen, assets)))
    return EXIT_OK


def _case_lines(case: StoredCase, assets: Assets) -> list[str]:
    run = case.source_run
    came = (
        "-"
        if run is None
        else (
            f"run {run['seq']} of {_line(str(run['student']))}, report "
            f"{str(run['report'])[:12]}, {_line(str(run['path']))}"
        )
    )
    expect = json.dumps(_expect_shown(case), sort_keys=True, ensure_ascii=False)
    lines = [
        f"{case.id}: version {case.version}, {case.status}, {case.source} ({case.kind})",
        f"  supersedes  {case.supersedes or '-'}",
        f"  from run    {came}",
        f"  task        {_line(case.task)}",
        f"  agent       {case.agent or 'each submission own'}",
        f"  world       {case.world[:12] if case.world else '-'}",
        f"  expect      {_line(expect)}",
        f"  written     by {_line(case.by)} at {case.at} against rubric "
        f"{case.configuration['rubric']} v{case.configuration['version']}",
        f"  coverage    {', '.join(case.coverage) or '-'}",
        f"  admission   {_line(case.admission)}",
    ]
    for inv, opened in sorted(assets.investigations.items()):
        if opened.get("case") != case.id:
            continue
        lines.append(f"  {inv}: opened by {_line(str(opened['by']))}")
        done = assets.dispositions.get(inv)
        if done is not None:
            lines.append(f"    disposition {done['disposition']} by {_line(str(done['by']))}")
        for cand, proposed in sorted(assets.candidates.items()):
            if proposed.get("investigation") == inv:
                lines.append(f"    {cand}: {_step(assets, cand)}")
    return lines


def _step(assets: Assets, candidate: str) -> str:
    promoted = assets.promotions.get(candidate)
    if promoted is not None:
        return f"promoted into {promoted['set']}@{promoted['version']} as item {promoted['item']}"
    approval = assets.approvals.get(candidate)
    return "pending approval" if approval is None else f"approved by {approval['by']}"


def _expect_shown(case: StoredCase) -> dict[str, Any]:
    return expectation_document(case.expect)
