"""``gradekit regression promote``, ``show``, ``verify`` and ``public``: versioned
regression sets on the command line.

``promote`` publishes an approved candidate's case (``grader.ledger.candidate_item``) as the
set's next version (``grader.regression._publish.add_item``), recording it in the asset
ledger; ``show`` prints a set's chain of versions and one version's items, each with where
its case came from (a run, a person's hand or a model's draft); ``verify`` checks
every version of every set; ``public`` writes a version's missing public view.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gradekit import UsageError
from gradekit.internal import commands
from grader._exits import EXIT_FAILED, EXIT_OK
from grader._expect import Expectation
from grader._text import quote
from grader.assets import ASSETS, candidate_item
from grader.cli._options import add_rubric_option
from grader.ledger import append_events
from grader.regression import (
    Item,
    RegressionSet,
    add_item,
    load_set,
    parse_ref,
    valid_name,
    verify_sets,
    version_numbers,
    write_public,
)
from grader.rubric import SETS, load_rubric

__all__ = ["add_regression_commands", "line", "render_set", "sets_folder"]

_SHOWN = 120  # characters of a task or reason on a line of `show`
_OWN_AGENT = "each submission's own (its manifest's agent)"


def add_regression_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``regression promote``, ``regression show`` and ``regression verify``."""
    regression = commands.add_parser(
        "regression",
        help="versioned regression sets of reviewed failing runs",
        description="A regression set holds reviewed failures as items (a case with its "
        "recordings, or an incident), each version written once; a rubric pins one version.",
    )
    sub = regression.add_subparsers(dest="regression_command", required=True, metavar="COMMAND")
    _add_promote(sub)
    show = sub.add_parser("show", help="a set's versions and one version's items")
    show.add_argument("ref", metavar="NAME[@VERSION]", help="the set (default: its newest version)")
    _add_place(show)
    show.set_defaults(handler=_show)
    verify = sub.add_parser(
        "verify",
        help="check every version of every set: canonical "
        "bytes, payload digests, the chain of versions",
    )
    verify.add_argument("names", nargs="*", metavar="NAME", help="the sets (default: all)")
    _add_place(verify)
    verify.set_defaults(handler=_verify)
    public = sub.add_parser(
        "public",
        help="write the public view of every version that has "
        "none (v<N>.public.json: what students record the items from)",
    )
    public.add_argument("name", metavar="NAME", help="the set")
    _add_place(public)
    public.set_defaults(handler=_public)


def _add_place(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sets",
        type=Path,
        metavar="DIR",
        help="the folder of sets (default: regression/ beside the rubric)",
    )
    add_rubric_option(parser)


def _add_promote(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    promote = sub.add_parser(
        "promote",
        help="publish an approved candidate into a set, as its next version",
        description="Publish an approved candidate (a case a person investigated, reviewed "
        "as a regression candidate and approved) into set NAME as its next version.",
    )
    promote.add_argument("name", metavar="NAME", help="the set, e.g. refunds")
    promote.add_argument(
        "--candidate",
        required=True,
        metavar="CANDIDATE",
        help="the approved candidate, e.g. cand-1",
    )
    promote.add_argument(
        "--item",
        metavar="ITEM_ID",
        help="the item's id, a check of every "
        "report it grades (default: the case's name, the rubric case's id or "
        "the incident file's stem, numbered -2, -3... when another case holds "
        "it; never the student)",
    )
    promote.add_argument("--by", required=True, metavar="NAME", help="who publishes it")
    _add_place(promote)
    promote.set_defaults(handler=_promote)


def sets_folder(args: argparse.Namespace) -> Path:
    """``--sets``, else ``regression/`` beside ``--rubric``."""
    chosen: Path | None = args.sets
    return chosen if chosen is not None else args.rubric.parent / SETS


# -- promote -----------------------------------------------------------------------------------


def _promote(args: argparse.Namespace) -> int:
    name = valid_name(args.name, "regression set")
    by = _given(args.by, "--by")
    sets, rubric = sets_folder(args), load_rubric(args.rubric)
    item, case = candidate_item(sets, rubric, args.candidate, args.item)
    added = add_item(
        sets,
        name,
        item,
        created_by=by,
        numbered=args.item is None,
        then=lambda published, new: append_events(
            sets / ASSETS,
            [
                {
                    "event": "promote",
                    "candidate": args.candidate,
                    "case": case.id,
                    "set": published.name,
                    "version": published.version,
                    "sha256": published.sha256,
                    "item": new.id,
                    "by": by,
                }
            ],
        ),
    )
    ref = added.set.ref
    if not added.new:
        print(
            f"already in {ref} as item {added.item.id} (case {case.id}, version "
            f"{case.version}): nothing written"
        )
        return EXIT_OK
    count = len(added.set.items)
    print(
        f"{ref}: {_count(count)} ({count - 1} inherited, 1 new: {added.item.id}); pin it in "
        f'a rubric: [criterion.params] set = "{ref}"'
    )
    return EXIT_OK


def _given(text: str, flag: str) -> str:
    if not text.strip():
        raise UsageError(f"{flag} is empty: say who promotes the item and why")
    return text


def _count(number: int) -> str:
    return f"{number} item{'s' * (number != 1)}"


# -- show and verify ---------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    sets = sets_folder(args)
    name, _, version = args.ref.partition("@")
    name = valid_name(name, "regression set")
    numbers = version_numbers(sets, name)
    if not numbers:
        raise UsageError(
            f"no regression set {name} in {sets}: check --sets (default: "
            "regression/ beside the rubric), or promote into it first"
        )
    chosen = parse_ref(args.ref)[1] if version else numbers[-1]
    chain = [_version(sets, name, number) for number in range(1, numbers[-1] + 1)]
    if chosen > len(chain):
        raise UsageError(f"{name} has no version {chosen}; its versions: v1 to v{len(chain)}")
    sys.stdout.write(render_set(chain, chain[chosen - 1]))
    return EXIT_OK


def _version(sets: Path, name: str, number: int) -> RegressionSet:
    loaded = load_set(sets, name, number)
    if loaded is None:
        verify = commands.from_here(commands.REGRESSION_VERIFY(name=name, sets=str(sets)))
        raise UsageError(
            f"{sets / name}/v{number}.json is missing: `{verify}` says what else "
            "is wrong; restore it from git"
        )
    return loaded


def render_set(chain: Sequence[RegressionSet], chosen: RegressionSet) -> str:
    """The versions of a set and ``chosen``'s items, as ``regression show`` prints them: the
    same files always give the same text."""
    lines = [f"{chosen.name}: {len(chain)} version{'s' * (len(chain) != 1)}"]
    for version in chain:
        before = version.supersedes
        link = f"v{before['version']} {str(before['sha256'])[:12]}" if before else "-"
        lines.append(
            f"  v{version.version:<3} sha256 {version.sha256[:12]}  supersedes "
            f"{link:<15}  created by {line(version.created_by)}"
        )
    lines.append(f"{chosen.ref}: {_count(len(chosen.items))}, sha256 {chosen.sha256}")
    for item in chosen.items:
        lines += _item_lines(item)
    return "\n".join(lines) + "\n"


def _item_lines(item: Item) -> list[str]:
    source = item.source
    if "case" in source:
        came = _came(item)  # a run's description holds commas: a semicolon ends it
        comma = ";" if source.get("run") is not None else ","
        shown = [
            f"    source    case {source['case']} version {source['version']}, candidate "
            f"{source['candidate']}; {came}{comma} approved by "
            f"{line(str(source['approved_by']))}",
            f"    reviewed  by {line(item.reviewed_by)}",
            f"    reason    {line(item.reason)}",
        ]
    else:  # a public view: who it came from stays with the set
        shown = [f"    source    {_came(item)}; public view"]
    lines = [
        f"  {item.id} ({item.kind}, added in v{item.added_in})",
        *shown,
        f"    task      {line(item.task)}",
        f"    agent     {item.agent or _OWN_AGENT}",
        f"    expect    {_expected(item.expect)}",
    ]
    world = (
        f"{len(item.reads())} tool call(s) answered, sha256 {item.digests['world'][:12]}"
        if item.world is not None
        else "no tool call answered"
    )
    lines.append(f"    world     {world}")
    if item.missing:
        lines.append(f"    MISSING   {item.missing}")
    return lines


def _came(item: Item) -> str:
    """Where the item's case came from: a run, a person's hand or a model's draft."""
    source, origin = item.source, item.origin
    run = source.get("run")
    if run is not None:
        return (
            f"from a run of {line(str(run['student']))} (submission "
            f"{line(str(run['submission']))}, run {run['seq']}), report "
            f"{str(run['report'])[:12]}, {line(str(run['path']))}"
        )
    if origin == "ai_draft":
        by = source.get("by")
        return "drafted by a model (ai_draft" + (
            f", filed by {line(str(by))})" if by is not None else ")"
        )
    if origin == "manual":
        return "written by hand"
    if origin == "run":
        return "from a run"
    if "case" not in source:
        return "origin not recorded (promoted before items recorded it)"
    return (
        f"written by hand or drafted by a model (not recorded: v{item.added_in} "
        f"predates items that record it; case {source['case']} of the asset ledger says "
        "which)"
    )


def _expected(expect: Expectation) -> str:
    def facts(values: Sequence[str]) -> str:
        return ", ".join(f"'{line(value)}'" for value in values) or "-"

    forbids = ", ".join(expect.forbidden_actions) or "-"
    shown = (
        f"outcome {expect.outcome}; mentions {facts(expect.mentions)}; never mentions "
        f"{facts(expect.never_mentions)}; forbids {forbids}"
    )
    more = [
        ("goal", facts((expect.goal,)) if expect.goal else ""),
        ("decision", facts((expect.decision,)) if expect.decision else ""),
        ("names as missing", facts(expect.missing) if expect.missing else ""),
        ("states a negation", "yes" if expect.negation else ""),
        ("reply template", facts((expect.reply_template,)) if expect.reply_template else ""),
        ("requires", facts(expect.requires) if expect.requires else ""),
        ("cites", facts(expect.cites) if expect.cites else ""),
    ]
    return "; ".join([shown, *(f"{label} {value}" for label, value in more if value)])


def line(text: str) -> str:
    """A student's text on one line of the terminal: nothing hidden, no line breaks."""
    return quote(text, _SHOWN).replace("\n", "\\n").replace("\t", "\\t")


def _verify(args: argparse.Namespace) -> int:
    names = [valid_name(name, "regression set") for name in args.names]
    failed = False
    for verdict in verify_sets(sets_folder(args), names):
        if verdict.ok:
            print(f"ok   {verdict.path}: {verdict.message}")
        else:
            failed = True
            print(f"FAIL {verdict.path}: {verdict.message}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _public(args: argparse.Namespace) -> int:
    sets, name = sets_folder(args), valid_name(args.name, "regression set")
    if not version_numbers(sets, name):
        raise UsageError(
            f"no regression set {name} in {sets}: check --sets (default: "
            "regression/ beside the rubric), or promote into it first"
        )
    written = write_public(sets, name)
    for path in written:
        print(f"wrote {path}")
    if not written:
        print(f"every version of {name} has its public view: nothing written")
    return EXIT_OK
